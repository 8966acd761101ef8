"""A team on one database: three users, each with a worker of their own (own state folder), six
sessions at once on one project. Project memory is shared once, never duplicated; each user's facts
stay theirs; the project's background work runs on one worker at a time."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mkg_core import runtime
from mkg_core.graph import Graph
from mkg_core.testing import ANSWER_DEADLINES, CaptureRig, Neo4jServer, mcp_call, mcp_server, mcp_session
from mkg_core.testing.fakellm import FakeLLM

PROJECT = "shared-app"
SHARED = "The build uses pnpm workspaces: run pnpm -r build at the root."
#: Each user's own fact, and the word of it only their session says.
FACTS = {
    "ana@team.example": ("helix", "Ana edits code in Helix with the default keymap."),
    "bo@team.example": ("emacs", "Bo edits code in Emacs with evil mode."),
    "cy@team.example": ("zed", "Cy edits code in Zed with vim bindings."),
}
EXTRACT, OBSERVE, JUDGE = "long-term memory", "episodic timeline", 'kind="candidate">'
STARTED = re.compile(r"^(\S+ \S+) .*\[(\d+)\] job (\S+) \(.*\) started, holding (\S+)$")
ENDED = re.compile(r"^(\S+ \S+) .*\[(\d+)\] job (\S+) \(.*\) ends, freeing (\S+)$")


def _extraction_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The learnings of one session: the shared project fact, and its user's own fact."""
    text = json.dumps(body)
    learnings = [{"action": "create", "scope": "project", "kind": "fact", "text": SHARED, "confidence": 0.8}]
    for word, fact in FACTS.values():
        if f"editor: {word}" in text:
            learnings.append(
                {"action": "create", "scope": "user", "kind": "preference", "text": fact, "confidence": 0.8}
            )
    return {"learnings": learnings}


@pytest.fixture
def team(
    neo4j_server: Neo4jServer, graph: Graph, fake_llm: FakeLLM, capture: CaptureRig
) -> Iterator[dict[str, CaptureRig]]:
    """A capture rig (own state folder, own worker) per user, all on the test Neo4j."""
    fake_llm.reply(_extraction_answer, when=EXTRACT)
    fake_llm.reply(
        {"observations": [{"type": "change", "title": "Worked on the build", "facts": ["ran the build"],
                           "narrative": "The user worked on the build."}]},
        when=OBSERVE,
    )  # fmt: skip
    fake_llm.reply({"verdict": "consistent", "reason": "compatible"}, when=JUDGE)
    rigs: dict[str, CaptureRig] = {}
    folders = []
    try:
        for user in FACTS:
            state = Path(tempfile.mkdtemp(prefix="mkg-team-"))
            folders.append(state)
            env = {
                **capture.env,
                **fake_llm.env(),
                **ANSWER_DEADLINES,
                "MKG_STATE_DIR": str(state),
                "MKG_PROJECT_ID": PROJECT,
                "MKG_USER_ID": user,
            }
            rigs[user] = CaptureRig(env=env, paths=runtime.Paths(str(state)))
        for rig in rigs.values():
            rig.start_worker()
        yield rigs
    finally:
        for rig in rigs.values():
            rig.close()
        for state in folders:
            shutil.rmtree(state, ignore_errors=True)


def _session(rig: CaptureRig, session: str, word: str) -> list[str]:
    """One session of two turns; the events it sent, in order."""
    sent = []

    def hook(event: str, **payload: object) -> None:
        result = rig.hook("claude", event, {"session_id": session, "hook_event_name": event, **payload})
        assert result.returncode == 0, result.stderr
        sent.append(event)

    hook("SessionStart", source="startup")
    for turn in range(2):
        hook("UserPromptSubmit", prompt=f"Turn {turn}: fix the build. Note my editor: {word}.")
        hook("PostToolUse", tool_name="Bash", tool_input={"command": "pnpm -r build"},
             tool_response={"stdout": "ok"}, tool_use_id=f"{session}-{turn}")  # fmt: skip
        hook("Stop", last_assistant_message=f"Turn {turn}: the build passes.")
    return sent


def _pending(rig: CaptureRig) -> int:
    with rig.spool() as spool:
        return spool.counts()["pending"] + spool.job_counts()["pending"]


def _jobs(rig: CaptureRig) -> str:
    with rig.spool() as spool:
        rows = spool.db.execute("SELECT name, key, state, attempts, error FROM jobs").fetchall()
    return "\n".join(str(row) for row in rows) + "\n"


def _runs(log: Path) -> list[tuple[str, str, datetime, datetime]]:
    """(worker pid, lease, started, ended) of every job run the worker log shows."""
    found, open_runs = [], {}
    for line in log.read_text().splitlines():
        if m := STARTED.match(line):
            open_runs[(m[2], m[3])] = (m[4], datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f"))
        elif (m := ENDED.match(line)) and (m[2], m[3]) in open_runs:
            lease, started = open_runs.pop((m[2], m[3]))
            found.append((m[2], lease, started, datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f")))
    return found


def test_three_workers_six_sessions_one_project(team: dict[str, CaptureRig], graph: Graph) -> None:
    sessions: dict[str, tuple[CaptureRig, list[str]]] = {}
    lock = threading.Lock()

    def drive(user: str, number: int) -> None:
        session = f"{user.split('@')[0]}-{number}"
        events = _session(team[user], session, FACTS[user][0])
        with lock:
            sessions[session] = (team[user], events)

    threads = [threading.Thread(target=drive, args=(user, n), daemon=True) for user in FACTS for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=900)  # 7 hooks of at most 120 s each
        assert not thread.is_alive(), f"{thread.name} still running its session after 900 s"
    assert len(sessions) == 6

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with_pending = [r for r in team.values() if _pending(r)]
        if not with_pending:
            break
        time.sleep(1)
    assert not with_pending, "events or jobs still pending after 300 s:\n" + "\n".join(
        _jobs(r) + Path(r.paths.log).read_text()[-3000:] for r in with_pending
    )

    # Every event once, every session's chain whole.
    for session, (_, events) in sessions.items():
        [row] = graph.read(
            "MATCH (s:Session {session_id: $s}) "
            "OPTIONAL MATCH p = (s)-[:FIRST_EVENT]->()-[:NEXT*0..]->(last) WHERE NOT (last)-[:NEXT]->() "
            "RETURN COUNT { (s)-[:HAS_EVENT]->() } AS stored, [n IN nodes(p)[1..] | n.event_name] AS chain",
            {"s": session},
        )
        assert row["stored"] == len(events) and row["chain"] == events, session

    # Project memory once; each user's fact once, theirs.
    shared = graph.read(
        "MATCH (l:Learning {scope: 'project', project_id: $p}) RETURN l.text AS text, count(*) AS n",
        {"p": PROJECT},
    )
    assert shared == [{"text": SHARED, "n": 1}]
    facts = graph.read(
        "MATCH (l:Learning {scope: 'user'}) RETURN l.user_id AS user, l.text AS text ORDER BY user"
    )
    assert facts == [{"user": user, "text": fact} for user, (_, fact) in FACTS.items()]
    duplicates = graph.read(
        "MATCH (n) WHERE n:Learning OR n:Observation OR n:SystemPromptVersion OR n:QueryErrorPattern "
        "WITH labels(n)[0] AS label, coalesce(n.id, elementId(n)) AS id, count(*) AS n WHERE n > 1 "
        "RETURN label, id"
    )
    assert duplicates == []
    windows = graph.read(
        "MATCH (o:Observation) WITH o.session_id AS s, o.started_at AS at, count(*) AS n "
        "WHERE n > 1 RETURN s, at"
    )
    assert windows == []  # no window distilled twice

    # The project's background work: never two workers on one lease at once.
    runs = [run for rig in team.values() for run in _runs(Path(rig.paths.log))]
    extraction = [r for r in runs if r[1] == f"extraction:project:{PROJECT}"]
    assert len({pid for pid, *_ in extraction}) >= 2, runs  # several workers took part
    for lease in {r[1] for r in runs}:
        spans = sorted((start, end, pid) for pid, name, start, end in runs if name == lease)
        for (_, end, pid), (start, _, other) in itertools.pairwise(spans):
            assert start >= end, f"{lease}: worker {other} started before worker {pid} had finished"

    # Nobody's private fact reaches anyone else, in injected context or a tool's answer.
    for user, rig in team.items():

        def injected(session: str, prompt: str) -> str:
            payload = {"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
            answer = rig.hook("claude", "UserPromptSubmit", payload)  # noqa: B023
            return str(json.loads(answer.stdout)["hookSpecificOutput"]["additionalContext"])

        assert SHARED in injected(f"build-{user}", "How does the pnpm build run at the root?")
        editors = injected(f"editor-{user}", "Which editor does everyone use: helix, emacs or zed?")
        assert FACTS[user][1] in editors
        assert not [fact for other, (_, fact) in FACTS.items() if other != user and fact in editors]

        async def tools(client: object) -> tuple[Any, Any, Any]:
            return (
                await mcp_call(client, "project_get_context", query="editor helix emacs zed"),
                await mcp_call(client, "neo4j_read_cypher", query="MATCH (l:Learning) RETURN l.text AS text"),
                await mcp_call(client, "project_review_queue"),
            )

        (failed, context), (refused, message), (_, queue) = mcp_session(mcp_server(rig.env), tools)
        assert [(i["text"], i["written_by"]) for i in queue["items"]] == [(FACTS[user][1], user)]
        shown = json.dumps(context)
        assert not failed and FACTS[user][1] in shown
        assert not [fact for other, (_, fact) in FACTS.items() if other != user and fact in shown]
        assert refused and "neo4j_read_cypher is off: the database holds the memory of 3 users" in message


def test_read_cypher_is_off_in_a_shared_database_unless_confined_or_forced(
    graph: Graph, neo4j_server: Neo4jServer
) -> None:
    from mkg_core.settings import load_settings
    from mkg_core.sharing import ReadCypherOff, read_cypher_access, read_cypher_graph

    def settings(**env: str) -> Any:
        return load_settings(environ={**neo4j_server.settings_env(), **env})

    graph.write("CREATE (:User {id: 'ana'})-[:HAS_SESSION]->(:Session {session_id: 's1'})")
    assert read_cypher_access(graph, settings()).mode == "on"  # one user's memory
    graph.write("CREATE (:User {id: 'bo'})-[:HAS_SESSION]->(:Session {session_id: 's2'})")
    assert read_cypher_access(graph, settings()).mode == "off"
    with pytest.raises(ReadCypherOff, match="memory of 2 users"):
        read_cypher_graph(graph, settings())
    assert read_cypher_access(graph, settings(MKG_READ_CYPHER="on")).mode == "on"
    assert read_cypher_access(graph, settings(MKG_READ_CYPHER="off")).mode == "off"

    # Confined: the tool connects as a Neo4j user of its own (whose role an administrator limits).
    Graph(graph.driver, "system").run_autocommit(  # the test's own connection, to the system database
        "CREATE OR REPLACE USER reader SET PASSWORD 'reader-password' CHANGE NOT REQUIRED"
    )
    confined = settings(MKG_READ_CYPHER_USERNAME="reader", MKG_READ_CYPHER_PASSWORD="reader-password")
    assert read_cypher_access(graph, confined).mode == "confined"
    reader = read_cypher_graph(graph, confined)
    assert reader is not graph
    assert reader.read("SHOW CURRENT USER YIELD user RETURN user") == [{"user": "reader"}]
