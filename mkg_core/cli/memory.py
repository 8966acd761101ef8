"""Memory maintenance commands: ``mkg review`` (the human gate) and ``mkg backfill-embeddings``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from .. import system_prompt
from ..extraction import observation_text
from ..graph import Graph
from ..identity import resolve_project, resolve_user
from ..review import resolve, review_queue
from ..schema import rebuild_vector_indexes
from . import App, connect, fail, guarded, note_unknown_project, pass_app, print_json

KEYS = {
    "a": "approve",
    "r": "reject",
    "e": "edit_approve",
    "n": "keep_new",
    "x": "keep_existing",
    "b": "keep_both",
}


def register_memory_commands(cli: click.Group) -> None:
    cli.add_command(review_command)
    cli.add_command(backfill_command)
    cli.add_command(prompt_group)


@click.command("review")
@click.option("--json", "as_json", is_flag=True, help="Print the queue as JSON and change nothing.")
@click.option("--project", "project_id", help="Project id (default: the project of the current folder).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200), help="Items to show.")
@pass_app
def review_command(app: App, as_json: bool, project_id: str | None, limit: int) -> None:
    """Walk the review queue: decide on ambiguous conflicts and on facts about you.

    For each item: [a]pprove, [r]eject, [e]dit then approve, keep [n]ew (it replaces what it
    conflicts with), keep e[x]isting, keep [b]oth, [s]kip or [q]uit. Decisions are stamped
    reviewed_by=human, so the automatic gate never overturns them.
    """

    def run() -> None:
        settings = app.settings()
        env = {"MKG_PROJECT_ID": project_id} if project_id else None
        project = resolve_project(environ=env) if env else resolve_project()
        user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
        with connect(settings) as graph:
            note_unknown_project(graph, project.id if project_id else None)
            queue = review_queue(graph, project_id=project.id, user_id=user.id, limit=limit)
            if as_json:
                print_json(queue)
                return
            console = Console()
            if not queue["items"]:
                console.print(f"Nothing waits for review in {project.id} (user {user.id}).")
                return
            console.print(f"{queue['waiting']} item(s) wait in {project.id} (user {user.id}).")
            embedder = app.host.embedder(settings)
            decided = 0
            for item in queue["items"]:
                _show(console, item)
                choice = _ask(item)
                if choice == "q":
                    break
                if choice == "s":
                    continue
                decision = KEYS[choice]
                text = click.prompt("New text", default=item["text"]) if decision == "edit_approve" else None
                reason = click.prompt("Reason (optional)", default="", show_default=False) or None
                result = resolve(
                    graph,
                    item["id"],
                    decision,
                    project_id=project.id,
                    user_id=user.id,
                    text=text,
                    reason=reason,
                    embedder=embedder,
                    merge_similarity=settings.entity_merge_similarity,
                )
                decided += 1
                console.print(f"  -> {result['status']}")
            console.print(f"{decided} decision(s) recorded.")

    guarded(run)


def _show(console: Console, item: dict[str, Any]) -> None:
    console.print(
        f"\n[bold]{item['id']}[/bold] ({item['why']}, {item['scope']}, created {item['created_at']})"
    )
    console.print(f"  {item['text']}")
    for conflict in item["conflicts"]:
        console.print(f"  conflicts with {conflict['id']} ({conflict['status']}): {conflict['text']}")


def _ask(item: dict[str, Any]) -> str:
    allowed = ["a", "r", "e"] + (["n", "x", "b"] if item["conflicts"] else []) + ["s", "q"]
    labels = {"a": "approve", "r": "reject", "e": "edit", "n": "keep new", "x": "keep existing",
              "b": "keep both", "s": "skip", "q": "quit"}  # fmt: skip
    prompt = ", ".join(f"[{key}] {labels[key]}" for key in allowed)
    return str(click.prompt(prompt, type=click.Choice(allowed), show_choices=False))


#: Live learnings, observations and entities with no vector, or one of another length than the
#: embedder's.
_TO_EMBED = """
MATCH (n)
WHERE (n:Learning AND n.status IN ['approved', 'candidate'] OR n:Observation OR n:Entity)
  AND (n.embedding IS NULL OR size(n.embedding) <> $dimensions)"""
LIVE_WITHOUT_EMBEDDING = (
    _TO_EMBED
    + """ AND NOT n.id IN $failed
RETURN n.id AS id, n:Observation AS observation, n:Entity AS entity, n.name AS name, n.text AS text,
       coalesce(n.title, '') AS title, coalesce(n.facts, []) AS facts, coalesce(n.narrative, '') AS narrative
LIMIT $batch
"""
)
COUNT_MISSING = _TO_EMBED + "\nRETURN count(n) AS missing"
STORE = """
UNWIND $rows AS row
MATCH (n {id: row.id}) WHERE (n:Learning OR n:Observation OR n:Entity)
  AND (n.embedding IS NULL OR size(n.embedding) <> $dimensions)
SET n.embedding = row.vector, n.embedding_updated_at = $now
"""


@click.command("backfill-embeddings")
@click.option(
    "--batch", default=64, show_default=True, type=click.IntRange(1, 2048), help="Texts per request."
)
@pass_app
def backfill_command(app: App, batch: int) -> None:
    """Embed live learnings, observations and entities (their names) that have no embedding yet, or
    one made by another embedder (a vector of another length); tombstones are skipped.

    When the embedder in use makes vectors of another length than the vector indexes hold (after a
    switch between a provider's model and the local one), the indexes are rebuilt first. Safe to
    stop and run again: each batch is stored as it completes and only what still needs a vector is
    taken.
    """

    def run() -> None:
        settings = app.settings()
        embedder = app.host.embedder(settings)
        if embedder is None and settings.embedding_model.strip().lower() == "none":
            fail("embeddings are off (EMBEDDING_MODEL=none): set EMBEDDING_MODEL to a model, or to `local`")
            return
        if embedder is None:
            fail(
                "no embedder is available: set the provider key for EMBEDDING_MODEL "
                f"({settings.embedding_model}), or install mkg-core[local] for the keyless local one"
            )
            return
        dimensions = app.host.vector_dimensions(settings)
        with connect(settings) as graph:
            rebuilt = rebuild_vector_indexes(graph, app.host.schema_statements(settings), dimensions)
            if rebuilt:
                click.echo(
                    f"Rebuilt for {dimensions}-dimensional vectors ({embedder.name}): {', '.join(rebuilt)}"
                )
            total = int(graph.read(COUNT_MISSING, {"dimensions": dimensions})[0]["missing"])
            if not total:
                click.echo("Every live learning, observation and entity already has an embedding.")
                return
            done = 0
            failed: list[str] = []
            columns = (TextColumn("embedding"), BarColumn(), MofNCompleteColumn())
            with Progress(*columns, transient=True) as progress:
                task = progress.add_task("embed", total=total)
                while True:
                    params = {"batch": batch, "failed": failed, "dimensions": dimensions}
                    rows = graph.read(LIVE_WITHOUT_EMBEDDING, params)
                    if not rows:
                        break
                    try:
                        vectors = embedder.embed([_text_of(row) for row in rows])
                    except Exception as exc:
                        failed += [row["id"] for row in rows]
                        click.echo(f"a batch of {len(rows)} failed: {exc}", err=True)
                        progress.advance(task, len(rows))
                        continue
                    graph.write(
                        STORE,
                        {
                            "rows": [
                                {"id": r["id"], "vector": v} for r, v in zip(rows, vectors, strict=True)
                            ],
                            "now": datetime.now(UTC),
                            "dimensions": dimensions,
                        },
                    )
                    done += len(rows)
                    progress.advance(task, len(rows))
            click.echo(f"Embedded {done} of {total} item(s) with {embedder.name}; {len(failed)} failed.")
            if failed:
                raise SystemExit(1)

    guarded(run)


SCOPE_OPTION = click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default=None,
    help="Your default prompt, or the project's own (default: the one in effect in this project).",
)
PROJECT_OPTION = click.option(
    "--project", "project_id", help="Project id (default: the project of the current folder)."
)


@click.group("prompt")
def prompt_group() -> None:
    """See, set, compare, roll back and reset the system prompt injected when a session starts.

    Each user has a default prompt (consolidation folds approved facts about you into it) and a
    project may have its own, which then applies instead. Without either, sessions get MKG's
    built-in bootstrap prompt.
    """


def _prompt_scope(
    app: App, graph: Graph, kind: str | None, project_id: str | None
) -> tuple[system_prompt.Scope | None, str, str]:
    """The scope a command acts on (None: nothing is in effect), and the project and user ids."""
    env = {"MKG_PROJECT_ID": project_id} if project_id else None
    project = resolve_project(environ=env) if env else resolve_project()
    user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
    note_unknown_project(graph, project.id if project_id else None)
    system_prompt.adopt_legacy(graph, user.id)
    if kind == "user":
        return system_prompt.Scope.user(user.id), project.id, user.id
    if kind == "project":
        return system_prompt.Scope.project(project.id), project.id, user.id
    scope, _, _ = system_prompt.effective(graph, project.id, user.id)
    return scope, project.id, user.id


def _nothing_in_effect(project_id: str, user_id: str) -> str:
    return (
        f"No system prompt is stored for project {project_id} or user {user_id}: sessions get the "
        "built-in bootstrap prompt (`mkg prompt set` stores one)."
    )


@prompt_group.command("show")
@SCOPE_OPTION
@PROJECT_OPTION
@pass_app
def prompt_show(app: App, scope: str | None, project_id: str | None) -> None:
    """Print a prompt and its version (default: the one sessions here get)."""

    def run() -> None:
        with connect(app.settings()) as graph:
            chosen, project, user = _prompt_scope(app, graph, scope, project_id)
            if chosen is None:
                click.echo(_nothing_in_effect(project, user))
                return
            content, version = system_prompt.current(graph, chosen)
        if content is None:
            click.echo(f"{chosen.describe().capitalize()} is not set (version {version}).")
            return
        click.echo(f"# {chosen.describe()}, version {version}\n")
        click.echo(content)

    guarded(run)


@prompt_group.command("set")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@SCOPE_OPTION
@PROJECT_OPTION
@pass_app
def prompt_set(app: App, file: Any, scope: str | None, project_id: str | None) -> None:
    """Store FILE's text (`-` reads stdin) as a new version of a prompt (default: the one in
    effect here, else your default)."""

    def run() -> None:
        text = file.read()
        with connect(app.settings()) as graph:
            chosen, _, user = _prompt_scope(app, graph, scope, project_id)
            chosen = chosen or system_prompt.Scope.user(user)
            written, version = system_prompt.seed(
                graph, text, scope=chosen, summary=f"set from {file.name}", source="manual"
            )
        if written:
            click.echo(f"{chosen.describe().capitalize()} is now version {version}.")
        else:
            click.echo(f"{chosen.describe().capitalize()} already has this text (version {version}).")

    guarded(run)


@prompt_group.command("history")
@SCOPE_OPTION
@PROJECT_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def prompt_history(app: App, scope: str | None, project_id: str | None, as_json: bool) -> None:
    """List every version: when, from what (seed, consolidation, set, rollback, reset), what was
    folded."""

    def run() -> None:
        with connect(app.settings()) as graph:
            chosen, project, user = _prompt_scope(app, graph, scope, project_id)
            rows = system_prompt.history(graph, chosen) if chosen else []
        if as_json:
            print_json(rows)
            return
        if chosen is None:
            click.echo(_nothing_in_effect(project, user))
            return
        if not rows:
            click.echo(f"{chosen.describe().capitalize()} has no versions yet.")
            return
        click.echo(f"# {chosen.describe()}")
        for row in rows:
            mark = "*" if row["current"] else " "
            folded = f", folded {row['folded']} fact(s)" if row["folded"] else ""
            click.echo(
                f"{mark} v{row['version']}  {row['created_at']}  {row['source']}{folded}  "
                f"{row['chars']} chars  {row['summary'] or ''}".rstrip()
            )

    guarded(run)


@prompt_group.command("diff")
@click.argument("v1", type=int)
@click.argument("v2", type=int)
@SCOPE_OPTION
@PROJECT_OPTION
@pass_app
def prompt_diff(app: App, v1: int, v2: int, scope: str | None, project_id: str | None) -> None:
    """Show what changed between two versions, as a unified diff."""
    import difflib

    def run() -> None:
        with connect(app.settings()) as graph:
            chosen, project, user = _prompt_scope(app, graph, scope, project_id)
            if chosen is None:
                raise system_prompt.PromptError(_nothing_in_effect(project, user))
            old = system_prompt.version_content(graph, chosen, v1) or ""
            new = system_prompt.version_content(graph, chosen, v2) or ""
        lines = difflib.unified_diff(
            old.splitlines(), new.splitlines(), fromfile=f"v{v1}", tofile=f"v{v2}", lineterm=""
        )
        click.echo("\n".join(lines) or f"v{v1} and v{v2} are the same.")

    guarded(run)


@prompt_group.command("rollback")
@click.argument("version", type=int)
@SCOPE_OPTION
@PROJECT_OPTION
@pass_app
def prompt_rollback(app: App, version: int, scope: str | None, project_id: str | None) -> None:
    """Make VERSION's text current again (recorded as a new version, so it can be undone too)."""

    def run() -> None:
        with connect(app.settings()) as graph:
            chosen, project, user = _prompt_scope(app, graph, scope, project_id)
            if chosen is None:
                raise system_prompt.PromptError(_nothing_in_effect(project, user))
            new = system_prompt.rollback(graph, chosen, version)
        click.echo(
            f"{chosen.describe().capitalize()} is now version {new}, with the text of version {version}."
        )

    guarded(run)


@prompt_group.command("reset")
@SCOPE_OPTION
@PROJECT_OPTION
@pass_app
def prompt_reset(app: App, scope: str | None, project_id: str | None) -> None:
    """Stop using a prompt (default: the one in effect here): a project then gets your default, you
    get the built-in bootstrap. Recorded as a new version; `mkg prompt rollback` undoes it."""

    def run() -> None:
        with connect(app.settings()) as graph:
            chosen, project, user = _prompt_scope(app, graph, scope, project_id)
            if chosen is None:
                click.echo(_nothing_in_effect(project, user))
                return
            version = system_prompt.reset(graph, chosen)
            after, _, _ = system_prompt.effective(graph, project, user)
        if version is None:
            click.echo(f"{chosen.describe().capitalize()} is not set; nothing to reset.")
            return
        now = after.describe() if after else "the built-in bootstrap prompt"
        click.echo(f"Reset {chosen.describe()} (version {version}); sessions in {project} now get {now}.")

    guarded(run)


def _text_of(row: dict[str, Any]) -> str:
    """The text a learning, an observation or an entity is embedded from (as extraction and entity
    linking embed them)."""
    if row["entity"]:
        return row["name"] or " "
    text = observation_text(row) if row["observation"] else row["text"]
    return text or " "
