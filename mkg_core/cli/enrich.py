"""``mkg enrich``: build the turn and tool-call projection of captured sessions (``docs/enrichment.md``)."""

from __future__ import annotations

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..identity import resolve_project
from ..schema import apply_schema
from . import App, connect, fail, guarded, note_unknown_project, pass_app


@click.command("enrich")
@click.option("--session", "session_id", metavar="ID", help="Only this session.")
@click.option(
    "--project", "project_id", metavar="ID", help="The sessions of this project (default: the current one)."
)
@click.option("--all", "everything", is_flag=True, help="Every session in the graph.")
@click.option("--force", is_flag=True, help="Derive sessions again even when nothing new was captured.")
@pass_app
def enrich_command(
    app: App, session_id: str | None, project_id: str | None, everything: bool, force: bool
) -> None:
    """Project captured sessions into turns, tool calls, tools, results, rationales and resources.

    Without an option, the sessions of the current project. Re-running adds only what is new:
    sessions whose events did not change since their last run are skipped (--force derives them
    again; the result is the same).
    """
    if sum(bool(x) for x in (session_id, project_id, everything)) > 1:
        raise click.UsageError("give at most one of --session, --project and --all")

    def run() -> None:
        settings = app.settings()
        scope = project_id
        if not (session_id or everything or project_id):
            scope = resolve_project().id
        languages = {key: tool.language for key, tool in app.host.query_tools(settings).items()}
        with connect(settings) as graph:
            note_unknown_project(graph, project_id)
            apply_schema(graph, app.host.schema_statements(settings), wait_seconds=60)
            from ..enrichment import enrich, sessions_to_enrich

            sessions = sessions_to_enrich(graph, session_id=session_id, project_id=scope, force=force)
            if not sessions:
                where = (
                    f"session {session_id}"
                    if session_id
                    else "the graph"
                    if everything
                    else f"project {scope}"
                )
                click.echo(f"Nothing to enrich in {where}: no session with new events.")
                if session_id and not graph.read(
                    "MATCH (s:Session {session_id: $s}) RETURN s LIMIT 1", {"s": session_id}
                ):
                    fail(f"no session {session_id!r} in the graph")
                return
            columns = (TextColumn("enriching sessions"), BarColumn(), MofNCompleteColumn())
            with Progress(*columns, transient=True) as progress:
                task = progress.add_task("enrich", total=len(sessions))
                counts = enrich(
                    graph,
                    sessions,
                    languages=languages,
                    adapters=app.host.harness_adapters(),
                    progress=lambda _: progress.advance(task),
                )
        click.echo(f"Enriched {counts.line()}.")

    guarded(run)
