"""``mkg setup``: write the user-global ``.env`` (mode 600), interactively or from flags."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from .. import envfiles, runtime
from . import App, download_bar, pass_app


@dataclass(frozen=True)
class Question:
    variable: str
    prompt: str
    secret: bool = False
    default: str | None = None
    optional: bool = False


QUESTIONS: tuple[Question, ...] = (
    Question("NEO4J_URI", "Neo4j URI", default="bolt://localhost:7687"),
    Question("NEO4J_USERNAME", "Neo4j user", default="neo4j"),
    Question("NEO4J_PASSWORD", "Neo4j password", secret=True),
    Question("NEO4J_DATABASE", "Neo4j database", default="neo4j"),
    Question("LLM_MODEL", "LLM model for memory extraction (blank: harness default)", optional=True),
    Question("OPENAI_API_KEY", "OpenAI API key (blank: none)", secret=True, optional=True),
    Question("ANTHROPIC_API_KEY", "Anthropic API key (blank: none)", secret=True, optional=True),
    Question(
        "CLAUDE_CODE_OAUTH_TOKEN",
        "Claude subscription token from `claude setup-token`",
        secret=True,
        optional=True,
    ),
)
FLAG_VARIABLES = {q.variable.lower().replace("_", "-"): q.variable for q in QUESTIONS}


def write_env_file(path: Path, values: dict[str, str], *, private_folder: bool = True) -> None:
    """Write ``values`` to ``path`` atomically, readable by the owner only (mode 600); with
    ``private_folder``, its folder is MKG's own and made owner-only too (mode 700)."""
    if private_folder:
        runtime.ensure_private_dir(str(path.parent))
    lines = ["# Meta Knowledge Graph settings, written by `mkg setup`.", ""]
    lines += [envfiles.format_env_line(key, value) for key, value in values.items()]
    fd, tmp = tempfile.mkstemp(prefix=".env.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)


def _local_neo4j(app: App) -> dict[str, str]:
    """Install and start MKG's own Neo4j and apply the schema to it; the settings that use it."""
    from ..errors import MkgError
    from ..graph import Graph
    from ..localdb import LocalNeo4j
    from ..schema import apply_schema
    from ..settings import load_settings
    from .neo4j import ensure_running

    try:
        credentials = ensure_running(LocalNeo4j.for_user(os.environ))
        settings = load_settings(
            neo4j_uri=credentials.uri,
            neo4j_username=credentials.username,
            neo4j_password=credentials.password,
            neo4j_database="neo4j",
        )
        with Graph.connect(settings) as graph:
            apply_schema(graph, app.host.schema_statements(settings))
    except MkgError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"MKG's Neo4j runs at {credentials.uri}, schema applied (`mkg neo4j status`).")
    return {**credentials.settings_env(), "NEO4J_DATABASE": "neo4j", "MKG_LOCAL_NEO4J": "1"}


def _local_model(written: dict[str, str]) -> None:
    """Download the keyless embedder's model now, with a progress bar, when it is the embedder these
    settings choose (else the worker's first use would)."""
    from ..errors import MkgError
    from ..local_embedder import PINNED, LocalEmbedder, fetch_model, model_folder, model_is_fetched
    from ..settings import load_settings

    try:
        settings = load_settings(environ={**written, **os.environ})  # as the worker will read them
    except MkgError:
        return  # the settings are reported when they are written and used
    if not LocalEmbedder(settings).is_available() or model_is_fetched(os.environ):
        return
    try:
        with download_bar("all-MiniLM-L6-v2", PINNED.size) as advance:
            fetch_model(os.environ, progress=advance)
    except MkgError as exc:  # the rest is set up: the worker tries again when it starts
        click.echo(
            f"Warning: {exc}. The worker downloads it when it starts (recall uses fulltext until then); "
            "`mkg doctor` says when it is there.",
            err=True,
        )
        return
    click.echo(f"The keyless embedder's model is in {model_folder(os.environ)} (checked).")


def _check_value(variable: str, value: str) -> str:
    if "\n" in value or "\r" in value:
        raise click.BadParameter(f"{variable} must be one line")
    if "'" in value and '"' in value:
        raise click.BadParameter(f"{variable} cannot contain both ' and \" characters")
    if variable == "NEO4J_URI" and value:
        from ..graph import uri_problem

        problem = uri_problem(value)
        if problem is not None:
            raise click.BadParameter(problem)
    return value


def _target(target: str | None) -> Path:
    """The file to write: the user's own (its folder made when missing), or ``--path`` in a folder
    that exists."""
    if not target:
        return envfiles.user_env_file(os.environ)
    path = Path(target).expanduser()
    if path.parent.is_dir():
        return path
    if path.parent.exists():
        raise click.ClickException(f"cannot write {path}: {path.parent} is not a folder")
    raise click.ClickException(
        f"cannot write {path}: the folder {path.parent} does not exist (create it first, "
        "or choose another --path)"
    )


@click.command("setup")
@click.option(
    "--path",
    "target",
    type=click.Path(dir_okay=False),
    default=None,
    help="File to write, in a folder that exists (default: ~/.config/meta-knowledge-graph/.env, "
    "or under MKG_CONFIG_DIR, its folder made when missing).",
)
@click.option(
    "--non-interactive", is_flag=True, help="Never prompt; use flags and the file's current values."
)
@click.option(
    "--local",
    is_flag=True,
    help="Install and start MKG's own Neo4j on this machine (`mkg neo4j`) and use it: no Neo4j to run.",
)
@click.option("--neo4j-uri", help="NEO4J_URI")
@click.option("--neo4j-username", help="NEO4J_USERNAME")
@click.option("--neo4j-password", help="NEO4J_PASSWORD")
@click.option("--neo4j-database", help="NEO4J_DATABASE")
@click.option("--llm-model", help="LLM_MODEL")
@click.option("--openai-api-key", help="OPENAI_API_KEY")
@click.option("--anthropic-api-key", help="ANTHROPIC_API_KEY")
@click.option("--claude-code-oauth-token", help="CLAUDE_CODE_OAUTH_TOKEN")
@click.option(
    "--set",
    "extra",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any other variable, a plugin's too; repeatable.",
)
@pass_app
def setup_command(
    app: App,
    /,
    target: str | None,
    non_interactive: bool,
    local: bool,
    extra: tuple[str, ...],
    **flags: str | None,
) -> None:
    """Write the credentials file read by the hooks, the worker and the MCP server.

    Prompts for what is missing (secrets without echo), then for what installed plugins ask
    (a Diffbot token with mkg-diffbot, ...), and keeps what the file already holds.
    With --non-interactive, or when standard input is not a terminal, only flags are used.
    With --local, MKG installs and starts its own Neo4j (a download the first time) and writes
    its address and random password; it also downloads the keyless embedder's model when no
    embedding provider is set. The file is written with mode 600.
    """
    questions = QUESTIONS + tuple(
        Question(s.variable, s.question, secret=s.secret, default=s.default, optional=True)
        for s in app.host.declared_settings()
        if s.question and s.variable not in FLAG_VARIABLES.values()
    )
    path = _target(target)
    values = envfiles.parse_env_file(path) if path.is_file() else {}
    given = {
        FLAG_VARIABLES[name.replace("_", "-")]: value for name, value in flags.items() if value is not None
    }
    if local:
        given.update(_local_neo4j(app))
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().replace("_", "").isalnum():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--set")
        given[key.strip()] = value
    interactive = not non_interactive and sys.stdin.isatty()
    for question in questions:
        if question.variable in given or not interactive:
            continue
        current = values.get(question.variable)
        if question.secret:
            hint = " (Enter keeps the current value)" if current else ""
            answer = click.prompt(f"{question.prompt}{hint}", default="", hide_input=True, show_default=False)
            if answer:
                given[question.variable] = answer
        else:
            answer = click.prompt(
                question.prompt,
                default=current or question.default or "",
                show_default=True,
                value_proc=functools.partial(_check_value, question.variable),
            )
            if answer or current:
                given[question.variable] = answer
    for key, value in given.items():
        values[key] = _check_value(key, value)
    for question in questions:
        if question.default and not values.get(question.variable):
            values[question.variable] = question.default
    values = {key: value for key, value in values.items() if value != ""}
    try:
        # A --path folder is the user's (a project's root, say): left as it is, only the file is private.
        write_env_file(path, values, private_folder=not target)
        if path.name == envfiles.PROJECT_ENV_FILE:  # written here, so read from now on
            envfiles.trust_env_file(os.environ, path)
    except OSError as exc:  # a linked or foreign config folder, a folder that cannot be made
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None
    click.echo(f"Wrote {path} (mode 600, {len(values)} settings). Run `mkg doctor` to check them.")
    here = envfiles.resolve_env_file(os.environ, envfiles.default_project_root(os.environ, os.getcwd()))
    if here is not None and here.resolve() != path.resolve():  # only one settings file is read
        click.echo(f"Note: here MKG reads {here} instead, so these settings do not apply in this folder.")
    if local:
        _local_model(values)
