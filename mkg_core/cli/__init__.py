"""The ``mkg`` command line. :func:`main` is a composition root: it builds the plugin manager."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from ..errors import ConfigError, MkgError, PluginError
from ..host import PluginHost
from ..plugins import make_plugin_manager
from ..settings import Settings, load_settings

if TYPE_CHECKING:
    from rich.console import Console

    from ..graph import Graph

__all__ = ["App", "download_bar", "fail", "guarded", "note_unknown_project", "pass_app", "print_json"]


class MkgGroup(click.Group):
    """The root group: a plugin may add commands but never silently replace one."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        if name is not None and name in self.commands and self.commands[name] is not cmd:
            raise PluginError(f"command {name!r} registered twice")
        super().add_command(cmd, name)


@dataclass
class App:
    """What every command gets: the plugin host and lazily loaded settings."""

    host: PluginHost
    overrides: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(**self.overrides)
            self.host.configure(self._settings)
        return self._settings


pass_app = click.make_pass_decorator(App)


def build_cli(host: PluginHost) -> click.Group:
    @click.group(cls=MkgGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(package_name="mkg-core", prog_name="mkg")
    @click.option("--db-url", envvar=None, help="Neo4j URI (overrides NEO4J_URI).")
    @click.option("--username", help="Neo4j user (overrides NEO4J_USERNAME).")
    @click.option("--password", help="Neo4j password (overrides NEO4J_PASSWORD).")
    @click.option("--database", help="Neo4j database (overrides NEO4J_DATABASE).")
    @click.pass_context
    def cli(
        ctx: click.Context,
        db_url: str | None,
        username: str | None,
        password: str | None,
        database: str | None,
    ) -> None:
        """Meta Knowledge Graph: graph memory for AI coding agents, backed by Neo4j.

        Settings come from CLI flags, then the environment, then the first settings file found
        (MKG_ENV_FILE, the project's .mkg.env once trusted with `mkg trust`,
        ~/.config/meta-knowledge-graph/.env); a project's own .env is never read.
        """
        ctx.obj = App(
            host,
            overrides={
                "neo4j_uri": db_url,
                "neo4j_username": username,
                "neo4j_password": password,
                "neo4j_database": database,
            },
        )

    from . import doctor, enrich, entities, neo4j, setup, ui, worker
    from .core import register_core_commands
    from .memory import register_memory_commands

    register_core_commands(cli)
    register_memory_commands(cli)
    cli.add_command(setup.setup_command)
    cli.add_command(doctor.doctor_command)
    cli.add_command(worker.worker_group)
    cli.add_command(worker.status_command)
    cli.add_command(enrich.enrich_command)
    cli.add_command(entities.entities_group)
    cli.add_command(neo4j.neo4j_group)
    cli.add_command(ui.ui_command)
    host.register_commands(cli)
    return cli


def fail(message: str) -> None:
    """Print an error the way every command does and exit 1."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(1)


def guarded(fn: Callable[[], None]) -> None:
    """Run ``fn``, turning MKG errors into a one-line message and exit code 1."""
    try:
        fn()
    except MkgError as exc:
        fail(str(exc))


def connect(settings: Settings) -> Graph:
    """The graph for a command, connected and authenticated first: a Neo4j that is down is then one
    line at once, rather than after the driver's retries of each query (about 15 s each)."""
    from ..graph import Graph

    graph = Graph.connect(settings)
    try:
        graph.verify()
    except BaseException:
        graph.close()
        raise
    return graph


def main(argv: list[str] | None = None) -> None:
    try:
        pm = make_plugin_manager()
        host = PluginHost(pm)
        cli = build_cli(host)
    except (PluginError, ConfigError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    cli.main(args=argv, prog_name="mkg")


@contextlib.contextmanager
def download_bar(label: str, total: int, console: Console | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar for a download of ``total`` bytes on stderr (left on screen only in a terminal);
    yields what to call with the bytes each step adds."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    console = console or Console(stderr=True)
    with Progress(
        TextColumn(label),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console,
        transient=not console.is_terminal,
    ) as progress:
        task = progress.add_task("download", total=total)
        yield lambda n: progress.advance(task, n)


def note_unknown_project(graph: Graph, project_id: str | None) -> None:
    """When ``--project`` names a project the graph does not have, say so on stderr, with the ones it
    has (a typo would otherwise read as an empty answer)."""
    from ..sessions import other_projects

    if not project_id:
        return
    others = other_projects(graph, project_id)
    if others is None:
        return
    known = f"projects it has: {', '.join(others)}" if others else "it has no project yet"
    click.echo(f"Note: the graph has no project {project_id!r} ({known}).", err=True)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
