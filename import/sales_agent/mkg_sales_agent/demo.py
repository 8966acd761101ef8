"""``mkg demo``: the whole memory loop on the RoadFlex demo, in one command.

1. Neo4j: the configured one (``NEO4J_URI``), or MKG's own (``mkg neo4j``), installed and started
   on demand and left running.
2. The schema of MKG and its plugins, then the RoadFlex seeders (accounts, learnings, persona).
3. Two scripted sessions replayed through the real ``mkg-hook`` entry point, with payloads shaped
   like Claude Code's, and a private worker (its own state folder, so a worker you already run is
   left alone). Session 1 asks the example questions; its tool calls run real read-only Cypher
   against the seeded graph. Extraction runs when an LLM is configured; otherwise the demo says why
   it was skipped. Session 2 shows what memory injected at its start and for its first prompt.
4. A summary of what the graph now holds.

The replay waits longer for answers than a live agent would (``MKG_HOOK_DEADLINE_*``), so that a
cold start does not hide the injection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mkg_core import envfiles, runtime
from mkg_core.cli import App, fail, guarded, pass_app
from mkg_core.cli.neo4j import ensure_running
from mkg_core.contrib import SeedContext
from mkg_core.graph import Graph
from mkg_core.harness_install import executable
from mkg_core.injection import FENCE_OPEN
from mkg_core.llm import default_model, readiness
from mkg_core.localdb import Credentials, LocalNeo4j
from mkg_core.localdb.instance import pick_port
from mkg_core.schema import apply_schema
from mkg_core.settings import Settings, load_settings
from mkg_core.spool import Spool

from .dataset import RENEWAL_SOON_DAYS
from .seeders import seed_all

PROJECT_ID = "roadflex-sales"
PROJECT_NAME = "RoadFlex sales (demo)"
DEMO_USER = "csm.demo@roadflex.example"
CLIENT = "claude"
MKG_TOOL = "mcp__plugin_meta-knowledge-graph_mkg__neo4j_read_cypher"
WAIT_SECONDS = 300


@dataclass(frozen=True)
class Step:
    """One scripted prompt: what the user asks, the query the assistant runs, how it answers."""

    prompt: str
    cypher: str
    answer: Callable[[list[dict[str, Any]]], str]


def _money(value: float) -> str:
    return f"${value / 1e6:.1f}M" if value >= 1e6 else f"${value / 1e3:.0f}k"


def _renewals_answer(rows: list[dict[str, Any]]) -> str:
    risky = [r for r in rows if r["at_risk"]]
    lines = [f"{len(rows)} accounts renew within {RENEWAL_SOON_DAYS} days; {len(risky)} of them are at risk:"]
    for r in risky[:6]:
        lines.append(
            f"- {r['name']}: renews {r['renewal_date']} (in {r['days']} days), health {r['health_score']}, "
            f"{_money(r['arr_usd'])} ARR, owner {r['owner_csm']}"
        )
    lines.append("Start with the biggest ARR at stake and call the champion before the economic buyer.")
    return "\n".join(lines)


def _expansion_answer(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} product lines run over their contracted seats. The largest gaps:"]
    for r in rows[:5]:
        lines.append(
            f"- {r['account']} on {r['product']}: {r['mau']} active users on {r['seats']} seats "
            f"({r['utilization']:.0%}), a true-up of {r['over']} seats"
        )
    return "\n".join(lines)


def _brief_answer(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "Accenture is not in the graph."
    a = rows[0]
    contacts = ", ".join(f"{c['name']} ({c['title']})" for c in a["contacts"])
    products = ", ".join(f"{p['product']} {p['utilization']:.0%}" for p in a["products"])
    return (
        f"Accenture: {_money(a['arr_usd'])} ARR, health {a['health_score']}, {a['trajectory']}, renews "
        f"{a['renewal_date']}, owned by {a['owner_csm']}.\nProducts and utilization: {products}.\n"
        f"Contacts: {contacts}.\nNo news tool is installed, so there is no outside signal in this brief."
    )


def _book_answer(rows: list[dict[str, Any]]) -> str:
    lines = ["Book of business by CSM:"]
    for r in rows:
        lines.append(
            f"- {r['csm']}: {r['accounts']} accounts, {_money(r['arr'])} ARR, "
            f"{r['renewing']} renewing within {RENEWAL_SOON_DAYS} days, {r['at_risk']} at risk"
        )
    return "\n".join(lines)


AT_RISK = "(a.trajectory = 'at_risk' OR a.health_score < 50 OR EXISTS { (a)-[:USES_PRODUCT {mau: 0}]->() })"

SESSION_ONE = (
    Step(
        "Which accounts renew in the next 90 days, and which of them are at risk? Keep answers short, "
        "I read them on my phone between customer calls.",
        f"""MATCH (a:Account)
WITH a, duration.inDays(date(), a.renewal_date).days AS days
WHERE 0 <= days <= {RENEWAL_SOON_DAYS}
RETURN a.name AS name, toString(a.renewal_date) AS renewal_date, days, a.health_score AS health_score,
       a.arr_usd AS arr_usd, a.owner_csm AS owner_csm, {AT_RISK} AS at_risk
ORDER BY at_risk DESC, a.arr_usd DESC""",
        _renewals_answer,
    ),
    Step(
        "Where do we have expansion room: accounts running over contracted capacity?",
        """MATCH (a:Account)-[u:USES_PRODUCT]->(p:Product)
WHERE u.utilization >= 1.0
RETURN a.name AS account, p.name AS product, u.mau AS mau, u.contracted_seats AS seats,
       u.utilization AS utilization, u.mau - u.contracted_seats AS over
ORDER BY over DESC""",
        _expansion_answer,
    ),
    Step(
        "Build me a brief on Accenture: footprint, contacts, and recent news.",
        """MATCH (a:Account {id: 'accenture'})
RETURN a.name AS name, a.arr_usd AS arr_usd, a.health_score AS health_score, a.trajectory AS trajectory,
       toString(a.renewal_date) AS renewal_date, a.owner_csm AS owner_csm,
       COLLECT { MATCH (a)-[u:USES_PRODUCT]->(p:Product)
                 RETURN {product: p.name, utilization: u.utilization}
                 ORDER BY u.utilization DESC } AS products,
       COLLECT { MATCH (a)-[:HAS_CONTACT]->(c:Contact)
                 RETURN {name: c.first_name + ' ' + c.last_name, title: c.title} } AS contacts""",
        _brief_answer,
    ),
    Step(
        "Roll up the book of business by CSM.",
        f"""MATCH (c:CSM)-[:OWNS]->(a:Account)
WITH c, a, duration.inDays(date(), a.renewal_date).days AS days
RETURN c.name AS csm, count(a) AS accounts, sum(a.arr_usd) AS arr,
       count(CASE WHEN 0 <= days <= {RENEWAL_SOON_DAYS} THEN 1 END) AS renewing,
       count(CASE WHEN {AT_RISK} THEN 1 END) AS at_risk
ORDER BY arr DESC""",
        _book_answer,
    ),
)

SESSION_TWO_PROMPT = "Which of my at-risk renewals should I call first this week?"


# -- the pieces --------------------------------------------------------------------------------------


def local_neo4j(port: int, console: Console) -> Credentials:
    """MKG's own Neo4j (``mkg neo4j``), installed, set up (on ``port`` the first time, else on a
    free one when another program has it) and started as far as needed; its credentials."""
    db = LocalNeo4j.for_user(os.environ)
    if db.exists():
        return ensure_running(db, console=console)
    chosen = pick_port(port)
    if chosen != port:
        console.print(f"Port {port} on 127.0.0.1 is taken; MKG's Neo4j will listen on port {chosen}.")
    return ensure_running(db, port=chosen, console=console)


class Replay:
    """A private worker and the hook calls of scripted sessions."""

    def __init__(self, settings: Settings, state: Path, console: Console) -> None:
        self.console = console
        self.paths = runtime.Paths(str(state))
        self.cwd = state / "roadflex-workspace"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.hook = executable("mkg-hook")
        self.env = {
            **os.environ,
            "MKG_STATE_DIR": str(state),
            "MKG_WORKER_AUTOSTART": "0",
            "MKG_PROJECT_ID": PROJECT_ID,
            "MKG_PROJECT_NAME": PROJECT_NAME,
            "MKG_USER_ID": DEMO_USER,
            "MKG_HOOK_DEADLINE_SESSION_START": "15",
            "MKG_HOOK_DEADLINE_PROMPT": "15",
            "NEO4J_URI": settings.neo4j_uri,
            "NEO4J_USERNAME": settings.neo4j_username,
            "NEO4J_PASSWORD": settings.neo4j_password.get_secret_value(),
            "NEO4J_DATABASE": settings.neo4j_database,
        }
        self.env.pop("MKG_DISABLED", None)
        self.worker: subprocess.Popen[bytes] | None = None

    @contextmanager
    def running_worker(self) -> Iterator[None]:
        log = open(Path(self.paths.root) / "demo-worker.log", "ab")  # noqa: SIM115
        self.worker = subprocess.Popen(
            [sys.executable, "-c", "from mkg_core.cli import main; main()", "worker"],
            env=self.env,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        try:
            deadline = time.monotonic() + 60
            while runtime.request(self.paths, {"op": "ping"}, 1.0) is None:
                if self.worker.poll() is not None or time.monotonic() > deadline:
                    fail(f"the demo worker did not start (log: {self.paths.root}/demo-worker.log)")
                time.sleep(0.1)
            yield
        finally:
            self.worker.terminate()
            try:
                self.worker.wait(30)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait()

    def call(self, event: str, session_id: str, **fields: Any) -> str | None:
        """Run ``mkg-hook --client claude EVENT`` with a Claude Code shaped payload; return injected text."""
        payload = {
            "session_id": session_id,
            "transcript_path": str(Path(self.paths.root) / "transcripts" / f"{session_id}.jsonl"),
            "cwd": str(self.cwd),
            "hook_event_name": event,
            **fields,
        }
        result = subprocess.run(
            [self.hook, "--client", CLIENT, event],
            input=json.dumps(payload).encode(),
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0 or result.stderr.strip():
            self.console.print(
                f"[yellow]mkg-hook {event}: exit {result.returncode} {result.stderr.decode()[-500:]}"
            )
        if not result.stdout.strip():
            return None
        try:
            answer = json.loads(result.stdout)
        except ValueError:
            return result.stdout.decode()
        context = (answer.get("hookSpecificOutput") or {}).get("additionalContext")
        return str(context) if context else None

    def wait_idle(self, what: str) -> bool:
        """Until every event is in the graph and every job (extraction, ...) has run."""
        deadline = time.monotonic() + WAIT_SECONDS
        with self.console.status(f"The worker is {what}..."):
            while time.monotonic() < deadline:
                with Spool(self.paths.spool) as spool:
                    if spool.counts()["pending"] == 0 and spool.job_counts()["pending"] == 0:
                        return True
                time.sleep(0.2)
        self.console.print(
            f"[yellow]The worker is still busy after {WAIT_SECONDS} s; it continues in the background."
        )
        return False


def tool_call(replay: Replay, graph: Graph, session_id: str, step: Step) -> str:
    """Pre/PostToolUse of a real read-only query, and the assistant's answer from its rows."""
    tool_use_id = f"toolu_{uuid.uuid4().hex[:20]}"
    tool_input = {"query": step.cypher}
    replay.call("PreToolUse", session_id, tool_name=MKG_TOOL, tool_input=tool_input, tool_use_id=tool_use_id)
    started = time.monotonic()
    rows = graph.read(step.cypher)
    response = [{"type": "text", "text": json.dumps(rows, default=str)}]
    replay.call(
        "PostToolUse",
        session_id,
        tool_name=MKG_TOOL,
        tool_input=tool_input,
        tool_response=response,
        tool_use_id=tool_use_id,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    return step.answer(rows)


# -- the walkthrough ---------------------------------------------------------------------------------

SUMMARY = """
CALL () { MATCH (a:Account) RETURN count(a) AS accounts }
CALL () { MATCH (p:Product) RETURN count(p) AS products }
CALL () { MATCH (c:Contact) RETURN count(c) AS contacts }
CALL () { MATCH (c:CSM) RETURN count(c) AS csms }
CALL () { MATCH (:Project {id: $project})-[:HAS_SESSION]->(s:Session) RETURN count(s) AS sessions }
CALL () { MATCH (:Project {id: $project})-[:HAS_SESSION]->(:Session)-[:HAS_EVENT]->(e:SessionEvent)
          RETURN count(e) AS events }
CALL () { MATCH (:Project {id: $project})-[:HAS_LEARNING]->(l:Learning) WHERE l.source = 'seed'
          RETURN count(l) AS seeded_learnings }
CALL () { MATCH (l:Learning) WHERE l.source <> 'seed'
            AND (l.project_id = $project OR (l.scope = 'user' AND l.user_id = $user))
          RETURN count(l) AS learned }
CALL () { MATCH (o:Observation {project_id: $project}) RETURN count(o) AS observations }
CALL () { OPTIONAL MATCH (p:SystemPrompt {name: 'project:' + $project})
          RETURN coalesce(p.version, 0) AS prompt_version }
RETURN accounts, products, contacts, csms, sessions, events, seeded_learnings, learned, observations,
       prompt_version
"""

LEARNED = """
MATCH (l:Learning)
WHERE l.source <> 'seed' AND (l.project_id = $project OR (l.scope = 'user' AND l.user_id = $user))
RETURN l.scope AS scope, l.status AS status, l.text AS text ORDER BY l.created_at DESC LIMIT 5
"""

OBSERVATIONS = """
MATCH (o:Observation {project_id: $project}) RETURN o.title AS title, o.narrative AS text
ORDER BY o.created_at DESC LIMIT 3
"""

WAITING = """
MATCH (:Project {id: $project})-[:HAS_PROCESSING]->(r:ProjectProcessing {waiting: true})
RETURN r.summary AS summary ORDER BY r.updated_at DESC LIMIT 1
"""


def show_injection(console: Console, title: str, text: str | None, persona_lines: int = 8) -> None:
    """What the agent was given: the persona abridged, the recalled memory whole, as plain text."""
    if not text:
        console.print(Panel("(nothing was injected)", title=title, border_style="red"))
        return
    persona, fence, memory = text.partition(FENCE_OPEN)
    lines = persona.strip().splitlines()
    shown = "\n".join(lines[:persona_lines])
    if len(lines) > persona_lines:
        shown += (
            f"\n[... {len(lines) - persona_lines} more lines of the persona; `mkg prompt show` prints it all]"
        )
    if fence:
        shown = (shown + "\n\n" if shown else "") + fence + memory
    console.print(Panel(Text(shown), title=title, border_style="green"))


def run_demo(app: App, port: int, console: Console) -> None:
    settings = app.settings()
    own = settings.source_of("neo4j_uri") == "default"
    if own or settings.local_neo4j:
        credentials = local_neo4j(port, console)
        if own:
            overrides = {
                "neo4j_uri": credentials.uri,
                "neo4j_username": credentials.username,
                "neo4j_password": credentials.password,
            }
            settings = load_settings(**{**app.overrides, **overrides})
            app.host.configure(settings)
        console.print(f"[bold]Neo4j[/]: MKG's own Neo4j at {credentials.uri} (`mkg neo4j stop` stops it)")
    else:
        console.print(f"[bold]Neo4j[/]: {settings.neo4j_uri} (from {settings.source_of('neo4j_uri')})")

    model = default_model(settings, CLIENT)
    llm_ready, llm_reason = readiness(model, settings)
    with Graph.connect(settings) as graph:
        with console.status("Applying the schema..."):
            report = apply_schema(graph, app.host.schema_statements(settings))
        console.print(f"[bold]Schema[/]: {len(report.applied)} statements applied")
        context = SeedContext(
            graph=graph,
            settings=settings,
            progress=lambda message: console.print(message, markup=False, highlight=False),
            embedder=app.host.embedder(settings),
        )
        console.rule("Seeding the RoadFlex demo")
        seed_all(context, PROJECT_ID, PROJECT_NAME)

        console.rule("Session 1: the example questions")
        if llm_ready:
            console.print(f"Extraction will run with {model} ({llm_reason}).")
        else:
            console.print(
                f"[yellow]Extraction will be skipped: {llm_reason}.[/] Capture and recall still work."
            )
        state = envfiles.state_dir(os.environ) / "demo"
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        replay = Replay(settings, state, console)
        with replay.running_worker():
            first = str(uuid.uuid4())
            show_injection(
                console, "Injected at session start", replay.call("SessionStart", first, source="startup")
            )
            for step in SESSION_ONE:
                console.print(Panel(step.prompt, title="User", border_style="cyan"))
                prompt_id = str(uuid.uuid4())
                replay.call("UserPromptSubmit", first, prompt=step.prompt, prompt_id=prompt_id)
                answer = tool_call(replay, graph, first, step)
                console.print(Panel(answer, title="Assistant (from a read-only query)", border_style="blue"))
                replay.call(
                    "Stop", first, prompt_id=prompt_id, stop_hook_active=False, last_assistant_message=answer
                )
            replay.call("SessionEnd", first, reason="other")
            replay.wait_idle("capturing session 1" + (" and extracting memory from it" if llm_ready else ""))

            console.rule("Session 2: what memory brings back")
            second = str(uuid.uuid4())
            show_injection(
                console, "Injected at session start", replay.call("SessionStart", second, source="startup")
            )
            console.print(Panel(SESSION_TWO_PROMPT, title="User", border_style="cyan"))
            prompt_id = str(uuid.uuid4())
            injected = replay.call("UserPromptSubmit", second, prompt=SESSION_TWO_PROMPT, prompt_id=prompt_id)
            show_injection(console, "Injected with the prompt", injected)
            replay.call(
                "Stop", second, prompt_id=prompt_id, stop_hook_active=False, last_assistant_message="(demo)"
            )
            replay.call("SessionEnd", second, reason="other")
            replay.wait_idle("capturing session 2")

        console.rule("What the graph holds now")
        params = {"project": PROJECT_ID, "user": DEMO_USER}
        counts = graph.read(SUMMARY, params)[0]
        table = Table(show_header=False)
        for key, value in counts.items():
            table.add_row(key.replace("_", " "), str(value))
        console.print(table)
        learned = graph.read(LEARNED, params)
        if learned:
            console.print("[bold]Learned from session 1[/]:")
            for row in learned:
                console.print(f"  [{row['status']}, {row['scope']}] {row['text']}")
        for row in graph.read(OBSERVATIONS, params):
            console.print(f"  [observation] {row['title']}: {row['text']}")
        if not llm_ready:
            console.print(
                f"[yellow]Extraction was skipped ({llm_reason}).[/] The session waits in the graph and is "
                "extracted by the next Stop once an LLM is configured (see docs/configuration.md)."
            )
        else:
            for row in graph.read(WAITING, params):
                console.print(f"[yellow]Extraction is waiting: {row['summary']}")
    console.rule("Next")
    setup = "  mkg setup --local                          keep this Neo4j as your memory\n" if own else ""
    console.print(
        f"Everything above is in {settings.neo4j_uri} under project {PROJECT_ID!r}. Try:\n{setup}"
        f"  mkg review --project {PROJECT_ID}        the human review queue\n"
        f"  mkg prompt show --project {PROJECT_ID}   the demo's persona (your projects keep yours)\n"
        "  mkg claude install                         MKG in Claude Code\n"
        f"The demo's own worker state is in {state}."
    )


@click.command("demo")
@click.option(
    "--port",
    default=7687,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Bolt port of MKG's own Neo4j when the demo sets it up (a free one when this one is taken).",
)
@pass_app
def demo_command(app: App, port: int) -> None:
    """Run the RoadFlex sales-agent demo end to end: Neo4j, schema, seed, two sessions, a summary.

    Uses NEO4J_URI when it is set; otherwise MKG's own Neo4j (`mkg neo4j`: installed and started
    when needed, a download the first time) and leaves it running. Extraction runs when an LLM is
    configured and is skipped (with the reason) otherwise.
    """
    console = Console()
    guarded(lambda: run_demo(app, port, console))
