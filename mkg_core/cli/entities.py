"""``mkg entities``: what memory is about (docs/recall.md, "The graph branch")."""

from __future__ import annotations

from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..identity import ProjectRef, resolve_project, resolve_user
from ..schema import apply_schema
from . import App, connect, fail, guarded, note_unknown_project, pass_app, print_json

_PROJECT = click.option(
    "--project", "project_id", metavar="ID", help="Project id (default: the current one)."
)


def _project(project_id: str | None) -> ProjectRef:
    return resolve_project(environ={"MKG_PROJECT_ID": project_id}) if project_id else resolve_project()


@click.group("entities")
def entities_group() -> None:
    """The entities memory is about (files, commands, services, people, ...), their links and merges."""


@entities_group.command("list")
@_PROJECT
@click.option(
    "--limit", default=20, show_default=True, type=click.IntRange(1, 500), help="How many entities to list."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def list_command(app: App, project_id: str | None, limit: int, as_json: bool) -> None:
    """The entities the project's and your memory name most."""

    def run() -> None:
        from ..entities.read import top_entities

        project = _project(project_id)
        user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
        with connect(app.settings()) as graph:
            note_unknown_project(graph, project.id if project_id else None)
            rows = top_entities(graph, project.id, user.id, limit=limit)
        if as_json:
            print_json(rows)
            return
        if not rows:
            click.echo(f"No entities yet in project {project.id}: `mkg entities link` links existing memory.")
        for row in rows:
            click.echo(f"{row['mentions']:5}  {row['kind']:12}  {row['name']}  ({row['scope']})")

    guarded(run)


@entities_group.command("show")
@click.argument("name")
@_PROJECT
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def show_command(app: App, name: str, project_id: str | None, as_json: bool) -> None:
    """One entity (by name, alias or id) and its neighbourhood."""

    def run() -> None:
        from ..entities.read import neighbourhood

        project = _project(project_id)
        user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
        with connect(app.settings()) as graph:
            note_unknown_project(graph, project.id if project_id else None)
            found = neighbourhood(graph, name, project_id=project.id, user_id=user.id)
        if found is None:
            fail(f"no entity {name!r} in project {project.id} or your own memory")
            return
        if as_json:
            print_json(found)
            return
        click.echo(f"{found['name']} ({found['kind']}, {found['mentions']} live mention(s))")
        if found["aliases"]:
            click.echo("  also: " + ", ".join(found["aliases"]))
        _section("learnings", [f"[{x['status']}] {x['text']}" for x in found["learnings"]])
        _section("timeline", [f"[{x['type']}] {x['title']}" for x in found["observations"]])
        _section("files", [f"{x['name']} (x{x['together']})" for x in found["files"]])
        _section("related", [f"{x['name']} ({x['kind']}, x{x['together']})" for x in found["related"]])
        _section("is", [f"{':'.join(x['labels'])} {x['name']}" for x in found["refers_to"]])

    guarded(run)


def _section(title: str, lines: list[str]) -> None:
    if lines:
        click.echo(f"{title}:")
        for line in lines:
            click.echo(f"  - {line}")


@entities_group.command("link")
@_PROJECT
@click.option("--all", "everything", is_flag=True, help="Every project's memory (not with --project).")
@pass_app
def link_command(app: App, project_id: str | None, everything: bool) -> None:
    """Link memory that was never linked to entities (written before entities existed), with the
    deterministic linker. With an embedder, names are embedded and merged with an entity at
    MKG_ENTITY_MERGE_SIMILARITY. Items already linked are left as they are."""

    def run() -> None:
        if everything and project_id:
            fail("--all links every project: leave out --project, or --all")
            return
        from ..entities.backfill import backfill, unlinked

        settings = app.settings()
        scope = None if everything else _project(project_id).id
        with connect(settings) as graph:
            note_unknown_project(graph, scope if project_id else None)
            apply_schema(graph, app.host.schema_statements(settings), wait_seconds=60)
            total = unlinked(graph, scope)
            columns = (TextColumn("linking memory"), BarColumn(), MofNCompleteColumn())
            with Progress(*columns, transient=True) as progress:
                task = progress.add_task("link", total=total)
                done = backfill(
                    graph,
                    project_id=scope,
                    embedder=app.host.embedder(settings),
                    merge_similarity=settings.entity_merge_similarity,
                    progress=lambda n: progress.advance(task, n),
                )
        click.echo(f"Linked {done.line()}.")

    guarded(run)


@entities_group.command("merges")
@_PROJECT
@click.option("--undone", "include_undone", is_flag=True, help="Undone merges too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def merges_command(app: App, project_id: str | None, include_undone: bool, as_json: bool) -> None:
    """The names resolution merged into an entity by similarity: the latest 50, newest first."""

    def run() -> None:
        from ..entities.read import namespaces_of
        from ..entities.resolution import merges

        project = _project(project_id)
        user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
        with connect(app.settings()) as graph:
            note_unknown_project(graph, project.id if project_id else None)
            rows: list[dict[str, Any]] = merges(
                graph, namespaces_of(project.id, user.id), include_undone=include_undone
            )
        if as_json:
            print_json(rows)
            return
        if not rows:
            click.echo("No merges.")
        for row in rows:
            undone = "  (undone)" if row["undone_at"] else ""
            click.echo(
                f"{row['id']}  {row['alias']!r} -> {row['into']!r}  cosine {row['similarity']}{undone}"
            )

    guarded(run)


@entities_group.command("unmerge")
@click.argument("merge_id")
@_PROJECT
@pass_app
def unmerge_command(app: App, merge_id: str, project_id: str | None) -> None:
    """Undo a merge: the name becomes its own entity again, with the links that came through it."""

    def run() -> None:
        from ..entities.read import namespaces_of
        from ..entities.resolution import unmerge

        project = _project(project_id)
        user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
        with connect(app.settings()) as graph:
            note_unknown_project(graph, project.id if project_id else None)
            done = unmerge(graph, merge_id, namespaces_of(project.id, user.id))
        moved = len(done["learnings"]) + len(done["observations"])
        click.echo(f"Undone: {done['entity']} is its own entity again, with {moved} memory link(s).")

    guarded(run)
