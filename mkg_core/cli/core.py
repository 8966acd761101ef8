"""The core's everyday commands: plugins, config, project, schema, seed."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from .. import envfiles
from ..contrib import SeedContext
from ..identity import resolve_project, resolve_user
from ..plugins import describe_plugins
from ..schema import apply_schema
from . import App, connect, fail, guarded, pass_app, print_json
from .doctor import ignored_env_note, project_env_fix, untrusted_env_note


def register_core_commands(cli: click.Group) -> None:
    from ..server import serve_command

    for command in (
        plugins_command,
        config_command,
        trust_command,
        project_command,
        schema_group,
        seed_command,
        serve_command,
    ):
        cli.add_command(command)


@click.command("plugins")
@pass_app
def plugins_command(app: App) -> None:
    """List loaded plugins, their versions, hooks and MCP tool groups (mounted or not, and why), as JSON."""
    from ..server import plan_groups

    rows = describe_plugins(app.host.pm)

    def attach() -> None:
        mounted, skipped = plan_groups(app.host, app.settings())
        by_plugin: dict[str, list[dict[str, object]]] = {}
        for m in mounted:
            by_plugin.setdefault(m.plugin, []).append(
                {"name": m.group.name, "mounted": True, "tools": [t.name for t in m.group.tools]}
            )
        for s in skipped:
            by_plugin.setdefault(s.plugin, []).append(
                {
                    "name": s.group.name,
                    "mounted": False,
                    "reason": s.reason,
                    "tools": [t.name for t in s.group.tools],
                }
            )
        for row in rows:
            if row["name"] in by_plugin:
                row["tool_groups"] = by_plugin[row["name"]]

    guarded(attach)
    print_json(rows)


@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_app
def config_command(app: App, as_json: bool) -> None:
    """Show every setting (and those installed plugins declare), where its value came from, and
    which settings file was read (and a project .env that was not).

    Secrets are masked.
    """

    def run() -> None:
        settings = app.settings()
        declared = app.host.declared_settings()
        rows = settings.describe(declared)
        ignored = settings.ignored_env_file
        if as_json:
            print_json(
                {
                    "env_file": str(settings.env_file) if settings.env_file else None,
                    "ignored_env_file": str(ignored) if ignored else None,
                    "ignored_variables": settings.ignored_variables(declared),
                    "settings": [{"variable": v, "value": val, "source": s} for v, val, s in rows],
                }
            )
            return
        table = Table("variable", "value", "source")
        for row in rows:
            table.add_row(*row)
        console = Console()
        console.print(table)
        click.echo(f"settings file read: {settings.env_file or 'none'}")  # whole paths, never wrapped
        if ignored is not None:
            note = ignored_env_note(ignored, settings.ignored_variables(declared))
            click.echo(f"{note}; {project_env_fix(ignored)}")
        if settings.untrusted_env_file is not None:
            click.echo(untrusted_env_note(settings.untrusted_env_file))

    guarded(run)


@click.command("trust")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--forget", is_flag=True, help="Stop reading the file.")
def trust_command(path: Path | None, forget: bool) -> None:
    """Read a project's .mkg.env from now on (default: this project's).

    A .mkg.env comes with the repository, from whoever wrote it, and can point MKG (and what it
    captures) at another Neo4j or LLM endpoint: MKG reads it only once you have looked at it and
    trusted it here, and again after each change. The record (the file's SHA-256) is kept in
    MKG's config folder.
    """
    environ = os.environ
    target = path or Path(envfiles.default_project_root(environ, os.getcwd())) / envfiles.PROJECT_ENV_FILE
    if target.name != envfiles.PROJECT_ENV_FILE:
        fail(f"{target} is not a {envfiles.PROJECT_ENV_FILE} file; only a project's settings need trusting")
    if not forget and not target.is_file():
        fail(f"{target} does not exist (a project's settings for MKG go in {envfiles.PROJECT_ENV_FILE})")
    try:
        where = envfiles.trust_env_file(environ, target, trust=not forget)
    except OSError as exc:
        fail(f"cannot record it: {exc}")
        return
    if forget:
        click.echo(f"MKG no longer reads {where}.")
        return
    names = sorted(envfiles.parse_env_file(where))
    sets = f" (it sets {', '.join(names)})" if names else " (it sets nothing)"
    click.echo(f"MKG reads {where}{sets} until it changes.")


@click.command("project")
@click.option(
    "--path",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Resolve for this folder instead of the current one.",
)
@pass_app
def project_command(app: App, path: str | None) -> None:
    """Show which project and user memory is attributed to here, as JSON."""
    project = resolve_project(fallback=path) if path else resolve_project()
    user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
    print_json(
        {
            "project": {
                "id": project.id,
                "name": project.name,
                "root": project.root,
                "remote": project.remote,
                "source": project.source,
            },
            "user": {"id": user.id, "source": user.source},
        }
    )


@click.group("schema")
def schema_group() -> None:
    """Create and inspect the graph schema."""


@schema_group.command("apply")
@click.option("--wait", default=120, show_default=True, help="Seconds to wait for indexes to come online.")
@pass_app
def schema_apply(app: App, wait: int) -> None:
    """Create every constraint and index (core and plugins); safe to re-run."""

    def run() -> None:
        settings = app.settings()
        statements = app.host.schema_statements(settings)
        with connect(settings) as graph, _progress() as progress:
            task = progress.add_task("schema", total=len(statements))

            def advance(statement: object) -> None:
                progress.update(task, advance=1, description=getattr(statement, "name", ""))

            report = apply_schema(graph, statements, wait_seconds=wait, progress=advance)
        state = "online" if report.online else f"not all online after {wait} s"
        click.echo(f"Applied {len(report.applied)} schema statements; indexes {state}.")

    guarded(run)


@schema_group.command("list")
@pass_app
def schema_list(app: App) -> None:
    """List the schema statements MKG and its plugins would apply."""

    def run() -> None:
        for statement in app.host.schema_statements(app.settings()):
            click.echo(f"{statement.name}\t{statement.kind}\t{statement.cypher}")

    guarded(run)


@click.command("seed")
@click.argument("name", required=False)
@pass_app
def seed_command(app: App, name: str | None) -> None:
    """Run the seeder NAME (without NAME: list the installed seeders)."""

    def run() -> None:
        settings = app.settings()
        seeders = app.host.seeders(settings)
        if name is None:
            if not seeders:
                click.echo("No seeders are installed.")
            for seeder in seeders.values():
                click.echo(f"{seeder.name}\t{seeder.description}")
            return
        if name not in seeders:
            known = ", ".join(sorted(seeders)) or "none"
            raise click.UsageError(f"unknown seeder {name!r} (installed: {known})")
        console = Console()
        with connect(settings) as graph, console.status(f"seeding {name}..."):
            # a seeder writes memory, linked to its entities: the indexes that needs come first
            apply_schema(graph, app.host.schema_statements(settings), wait_seconds=60)
            context = SeedContext(
                graph=graph,
                settings=settings,
                progress=lambda message: console.print(message, markup=False, highlight=False),
                embedder=app.host.embedder(settings),
            )
            seeders[name].run(context)
        console.print(f"seeded {name}")

    guarded(run)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description:<32}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        transient=True,
        disable=not os.isatty(2),
        console=Console(stderr=True),
    )
