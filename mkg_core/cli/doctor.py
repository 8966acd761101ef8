"""``mkg doctor``: check configuration, Neo4j, schema, capture, LLM and embeddings, and say what to fix."""

from __future__ import annotations

import importlib.util
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from .. import runtime
from ..embedding import DISABLED
from ..errors import MkgError
from ..graph import Graph
from ..local_embedder import LOCAL_MODEL, PINNED, model_folder, model_is_fetched
from ..plugins import describe_plugins
from ..schema import vector_dimension_mismatches
from ..settings import Settings

if TYPE_CHECKING:
    from ..contrib import Setting
    from ..host import PluginHost
    from . import App

#: The oldest Neo4j with the SEARCH clause and vector filter properties (Cypher 25).
MIN_NEO4J = (2026, 1)


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def ignored_env_note(path: Path, variables: list[str]) -> str:
    """What ``mkg config`` and ``mkg doctor`` say of a project's own ``.env`` (never read)."""
    sets = f" (it sets {', '.join(variables)})" if variables else ""
    return f"not read: {path}{sets}; a project's own .env belongs to its application"


def untrusted_env_note(path: Path) -> str:
    """What ``mkg config`` and ``mkg doctor`` say of a project's ``.mkg.env`` not trusted as it is."""
    return f"not read: {path} is not trusted (new or changed); look at it, then `mkg trust` it"


def project_env_fix(path: Path) -> str:
    return f"settings meant for MKG in this project go in {path.with_name('.mkg.env')}"


def check_config(settings: Settings, declared: Iterable[Setting] = ()) -> list[Check]:
    checks = _check_env_file(settings)
    ignored = settings.ignored_env_file
    variables = settings.ignored_variables(declared)
    if ignored is not None and variables:  # an .env with nothing MKG reads is no one's concern
        checks.append(Check("config", "warn", ignored_env_note(ignored, variables), project_env_fix(ignored)))
    untrusted = settings.untrusted_env_file
    if untrusted is not None:
        checks.append(Check("config", "warn", untrusted_env_note(untrusted), f"mkg trust {untrusted}"))
    return checks


def _check_env_file(settings: Settings) -> list[Check]:
    env_file = settings.env_file
    if env_file is None:
        return [
            Check(
                "config",
                "warn",
                "no .env file found; using the environment and defaults",
                "run `mkg setup` to write ~/.config/meta-knowledge-graph/.env",
            )
        ]
    mode = stat.S_IMODE(env_file.stat().st_mode)
    if mode & 0o077:
        return [
            Check(
                "config", "warn", f"{env_file} is readable by others (mode {mode:o})", f"chmod 600 {env_file}"
            )
        ]
    return [Check("config", "ok", f"settings from {env_file}")]


def check_plugins(host: PluginHost, settings: Settings) -> list[Check]:
    try:
        rows = describe_plugins(host.pm)
        adapters = sorted({a.name for a in host.harness_adapters().values()})
        host.schema_statements(settings)
        host.tool_groups(settings)
    except MkgError as exc:
        return [Check("plugins", "fail", str(exc), "uninstall or fix the plugin named above")]
    external = [r["name"] for r in rows if not r.get("builtin")]
    checks = [Check("plugins", "ok", f"loaded: {', '.join(external) or 'built-ins only'}")]
    if not adapters:
        checks.append(
            Check(
                "harness",
                "warn",
                "no harness adapter installed",
                "pip install mkg-claude (Claude Code) or mkg-codex (Codex)",
            )
        )
    else:
        checks.append(Check("harness", "ok", f"adapters: {', '.join(adapters)}"))
    return checks


def check_local_neo4j(settings: Settings) -> list[Check]:
    """The Neo4j MKG runs itself, when the settings use it (``MKG_LOCAL_NEO4J``)."""
    if not settings.local_neo4j:
        return []
    import os

    from ..localdb import LocalNeo4j

    report = LocalNeo4j.for_user(os.environ).status()
    where = f"Neo4j {report['version']} in {report['home']}"
    if not report["installed"] or not report["set_up"]:
        return [Check("local neo4j", "fail", f"{where} is not installed", "run `mkg setup --local`")]
    detail = f"{where} at {report['uri']}, {report['java']}"
    if report["running"]:
        return [Check("local neo4j", "ok", f"running (pid {report['pid']}): {detail}")]
    return [
        Check(
            "local neo4j",
            "warn",
            f"not running: {detail}",
            "the worker starts it when needed; `mkg neo4j start` now (`mkg neo4j logs` if it fails)",
        )
    ]


def parse_version(agent: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", agent)
    return tuple(int(part) for part in match.groups() if part is not None) if match else ()


def check_graph(host: PluginHost, settings: Settings) -> list[Check]:
    try:
        graph = Graph.connect(settings)
    except MkgError as exc:  # a URI the driver cannot use
        return [Check("neo4j", "fail", str(exc), "fix NEO4J_URI (or --db-url), or run `mkg setup`")]
    try:
        try:
            agent = graph.verify()
        except MkgError as exc:
            return [
                Check(
                    "neo4j",
                    "fail",
                    str(exc),
                    "start Neo4j (`mkg neo4j start` when MKG runs it) or fix NEO4J_URI / credentials",
                )
            ]
        version = parse_version(agent)
        checks = []
        if version[:2] < MIN_NEO4J:
            checks.append(
                Check(
                    "neo4j",
                    "warn",
                    f"{agent} at {settings.neo4j_uri}: vector search with filters "
                    "needs Neo4j 2026.01 or newer",
                    "upgrade Neo4j",
                )
            )
        else:
            checks.append(
                Check("neo4j", "ok", f"{agent} at {settings.neo4j_uri}, database {settings.neo4j_database}")
            )
        checks += _check_schema(graph, host, settings)
        checks += _check_read_cypher(graph, settings)
        return checks
    finally:
        graph.close()


def _check_read_cypher(graph: Graph, settings: Settings) -> list[Check]:
    from ..sharing import MEMORY_USERS, read_cypher_access

    access = read_cypher_access(graph, settings)
    if access.mode == "on" and settings.read_cypher == "on":
        users = int(graph.read(MEMORY_USERS)[0]["users"])
        if users > 1:
            return [
                Check(
                    "read-only cypher",
                    "warn",
                    f"on (MKG_READ_CYPHER=on) in a database holding {users} users' memory: "
                    "any user's agent can read every user's private facts",
                    "unset MKG_READ_CYPHER, or confine it (MKG_READ_CYPHER_USERNAME, docs/team.md)",
                )
            ]
    return [Check("read-only cypher", "ok", f"{access.mode}: {access.reason}")]


def _check_schema(graph: Graph, host: PluginHost, settings: Settings) -> list[Check]:
    expected = {s.name for s in host.schema_statements(settings)}
    rows = graph.read("SHOW INDEXES YIELD name, state RETURN name, state")
    rows += graph.read("SHOW CONSTRAINTS YIELD name RETURN name, 'ONLINE' AS state")
    present = {row["name"]: row["state"] for row in rows}
    missing = sorted(expected - set(present))
    offline = sorted(name for name in expected & set(present) if present[name] != "ONLINE")
    checks = []
    if missing:
        checks.append(
            Check(
                "schema",
                "fail",
                f"{len(missing)} missing: {', '.join(missing[:6])}" + (" ..." if len(missing) > 6 else ""),
                "run `mkg schema apply`",
            )
        )
    elif offline:
        checks.append(Check("schema", "warn", f"not online yet: {', '.join(offline)}", "wait, then re-run"))
    else:
        checks.append(Check("schema", "ok", f"{len(expected)} constraints and indexes online"))
    mismatches = vector_dimension_mismatches(graph, host.vector_dimensions(settings))
    if mismatches:
        checks.append(
            Check(
                "vector dimensions",
                "fail",
                "; ".join(mismatches) + " (vector search is skipped until they match)",
                "run `mkg backfill-embeddings` (it rebuilds those indexes and embeds memory again), "
                "or go back to the embedder they were built for",
            )
        )
    return checks


def check_llm(host: PluginHost, settings: Settings) -> list[Check]:
    from .. import llm

    checks = []
    model = llm.default_model(settings)
    if settings.llm_backend != "claude_cli" and importlib.util.find_spec("litellm") is None:
        checks.append(
            Check(
                "llm client",
                "fail",
                "litellm is not installed, so no LLM call can be made",
                "pip install 'litellm!=1.82.7,!=1.82.8,!=1.107.*'",
            )
        )
        return checks
    ready, reason = llm.readiness(model, settings)
    if ready:
        checks.append(Check("llm", "ok", f"{llm.LLM(settings).label}: {reason}"))
    else:
        checks.append(
            Check(
                "llm",
                "warn",
                f"no LLM call can be made: {reason}; extraction records the window as skipped",
                "set a key with `mkg setup`, or choose another LLM_MODEL",
            )
        )
    embedder = host.embedder(settings)
    if embedder is not None and embedder.name == LOCAL_MODEL and not model_is_fetched(os.environ):
        checks.append(
            Check(
                "embeddings",
                "warn",
                f"embedder in use: local, but its model is not downloaded yet ({PINNED.size / 1e6:.0f} MB, "
                f"into {model_folder(os.environ)}): the worker downloads it when it starts, and recall "
                "uses fulltext until then",
                "run `mkg setup --local` to download it now (or set MKG_MODEL_URL to a mirror of "
                f"{PINNED.url.rsplit('/', 1)[-1]})",
            )
        )
    elif embedder is not None:
        what = getattr(embedder, "description", "") or settings.embedding_model
        checks.append(
            Check(
                "embeddings",
                "ok",
                f"embedder in use: {embedder.name} ({what}, {embedder.dimensions} dimensions)",
            )
        )
    elif settings.embedding_model.strip().lower() in DISABLED:
        checks.append(
            Check("embeddings", "ok", f"off (EMBEDDING_MODEL={settings.embedding_model}): fulltext recall")
        )
    else:
        checks.append(
            Check(
                "embeddings",
                "warn",
                "no embedder available: recall uses fulltext only",
                f"set the provider key for EMBEDDING_MODEL ({settings.embedding_model}), or "
                "`pip install 'mkg-core[local]'` for the keyless local one",
            )
        )
    return checks


def check_capture() -> list[Check]:
    """The spool and the worker: events waiting, events given up on."""
    from .worker import collect_status

    report = collect_status(runtime.Paths.from_env())
    spool, worker = report["spool"], report["worker"]
    if spool.get("error"):
        return [
            Check(
                "capture", "fail", spool["error"], f"move {spool['path']} aside; the worker starts a new one"
            )
        ]
    checks = []
    running = f"worker running (pid {worker['pid']})" if worker["running"] else "worker not running"
    if spool["pending"] and not worker["running"]:
        checks.append(
            Check(
                "capture",
                "warn",
                f"{spool['pending']} event(s) wait in the spool, {running}",
                "mkg worker start",
            )
        )
    elif spool["pending"] and report.get("last_error"):
        checks.append(
            Check(
                "capture",
                "warn",
                f"{spool['pending']} event(s) wait in the spool: {report['last_error']}",
                "see `mkg status` and the worker log",
            )
        )
    else:
        checks.append(Check("capture", "ok", f"{running}; {spool['pending']} event(s) pending"))
    if spool.get("failed"):
        checks.append(
            Check(
                "capture",
                "warn",
                f"{spool['failed']} event(s) could not be stored (quarantined); "
                f"last: {spool.get('last_failure')}",
                "`mkg worker retry` after fixing the cause",
            )
        )
    if spool.get("overflow"):
        checks.append(
            Check(
                "capture",
                "warn",
                f"{spool['overflow']} event(s) wait in the overflow journal (the spool was busy)",
                "the worker imports them; `mkg worker start` if it is not running",
            )
        )
    for aside in spool.get("quarantined_files") or []:
        checks.append(
            Check(
                "capture",
                "warn",
                f"a corrupt spool was moved aside to {aside} (capture went on with a new one)",
                f"keep it to investigate, or delete it: rm {aside}*",
            )
        )
    unreadable = spool.get("unreadable_journal") or []
    if unreadable:
        checks.append(
            Check(
                "capture",
                "warn",
                f"{len(unreadable)} overflow journal entr{'y' if len(unreadable) == 1 else 'ies'} could not "
                f"be read back (first: {unreadable[0]})",
                "keep them to investigate, or delete them",
            )
        )
    return checks


def run_checks(host: PluginHost, settings: Settings) -> list[Check]:
    try:
        declared = host.declared_settings()
    except Exception:  # a broken plugin: check_plugins says so
        declared = []
    checks = check_config(settings, declared)
    checks += check_plugins(host, settings)
    checks += check_local_neo4j(settings)
    checks += check_graph(host, settings)
    checks += check_capture()
    checks += check_llm(host, settings)
    return checks


STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "red"}


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.pass_obj
def doctor_command(app: App, as_json: bool) -> None:
    """Check settings, Neo4j, schema, capture, LLM and embeddings; exit 1 when something must be fixed."""
    try:
        settings = app.settings()
    except MkgError as exc:
        checks = [Check("config", "fail", str(exc), "fix the variable named above (see `mkg config`)")]
    else:
        checks = run_checks(app.host, settings)
    if as_json:
        import json

        click.echo(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        table = Table("check", "status", "detail", "fix")
        for c in checks:
            table.add_row(c.name, f"[{STATUS_STYLE[c.status]}]{c.status}[/]", c.detail, c.fix)
        Console().print(table)
    if any(c.status == "fail" for c in checks):
        raise SystemExit(1)
