"""The worker against the real dev Neo4j: the session graph, idempotence, outages, crashes, answers."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from secret_corpus import SECRETS

from mkg_core import degraded, hook, runtime
from mkg_core.graph import Graph
from mkg_core.testing import BIN_DIR, CaptureRig, Neo4jServer

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
CODEX = ROOT / "harnesses" / "mkg-codex" / "tests" / "payloads"
PROBE = {"MKG_PLUGINS": "mkg_capture_probe", "PYTHONPATH": str(ROOT / "tests" / "plugins")}


def _payload(folder: Path, event: str, **changes: object) -> dict:
    return {**json.loads((folder / f"{event}.json").read_text()), **changes}


def _spool_fast(rig: CaptureRig, client: str, event: str, payload: dict) -> None:
    """The real hook code, in-process: for tests that need hundreds of events quickly."""
    err = io.StringIO()
    env = {**rig.env, "MKG_WORKER_AUTOSTART": "0"}
    hook.main(
        ["--client", client, event], stdin=io.BytesIO(json.dumps(payload).encode()), stderr=err, environ=env
    )
    assert err.getvalue() == ""


def _chain(graph: Graph, session_id: str) -> list[str]:
    """The session's events, following FIRST_EVENT and NEXT, as event ids."""
    rows = graph.read(
        "MATCH (:Session {session_id: $sid})-[:FIRST_EVENT]->(first) "
        "MATCH path = (first)-[:NEXT*0..]->(last) WHERE NOT (last)-[:NEXT]->() "
        "RETURN [n IN nodes(path) | n.event_id] AS ids",
        {"sid": session_id},
    )
    assert len(rows) == 1, rows
    return rows[0]["ids"]


def _spool_order(rig: CaptureRig, session_id: str) -> list[str]:
    with rig.spool() as spool:
        rows = spool.db.execute(
            "SELECT event_id FROM events WHERE session_id = ? ORDER BY received_at, seq", (session_id,)
        )
        return [row[0] for row in rows]


def _count(graph: Graph, query: str, **params: object) -> int:
    return int(graph.read(query, params)[0]["n"])


def test_drain_builds_the_session_graph(capture: CaptureRig, graph: Graph) -> None:
    for folder, client in ((CLAUDE, "claude"), (CODEX, "codex")):
        for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"):
            assert capture.hook(client, event, _payload(folder, event, hook_event_name=event)).returncode == 0
    capture.drain()
    assert capture.counts() == {"pending": 0, "done": 12, "failed": 0}

    for folder, client in ((CLAUDE, "claude"), (CODEX, "codex")):
        sid = _payload(folder, "Stop")["session_id"]
        chain = _chain(graph, sid)
        assert chain == _spool_order(capture, sid)  # every event once, in arrival order
        names = graph.read(
            "UNWIND $ids AS id MATCH (e:SessionEvent {event_id: id}) RETURN e.event_name AS name, "
            "e.project_id AS project, e.client AS client, e.payload_bytes AS size",
            {"ids": chain},
        )
        assert [r["name"] for r in names] == [
            "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd",
        ]  # fmt: skip
        assert {r["client"] for r in names} == {client}
        assert all(r["size"] > 0 for r in names)
        # SessionStart and SessionEnd are project-neutral; the rest belong to the project.
        assert [r["project"] is None for r in names] == [True, False, False, False, False, True]
        session = graph.read(
            "MATCH (u:User)-[:HAS_SESSION]->(s:Session {session_id: $sid})<-[:HAS_SESSION]-(p:Project) "
            "MATCH (s)-[:LATEST_EVENT]->(latest) "
            "RETURN s.client AS client, s.agent_kind AS kind, s.user_id AS user, u.id AS owner, "
            "p.id AS project, latest.event_id AS latest",
            {"sid": sid},
        )
        assert len(session) == 1
        assert session[0]["client"] == client and session[0]["kind"] == "main"
        assert session[0]["user"] == session[0]["owner"]
        assert session[0]["latest"] == chain[-1]
        assert session[0]["project"] == names[1]["project"]


def test_subagent_events_get_their_own_linked_session(capture: CaptureRig, graph: Graph) -> None:
    base = _payload(CLAUDE, "PreToolUse")
    parent = base["session_id"]
    agent = {"agent_id": "a1b2c3", "agent_type": "Explore"}
    capture.hook("claude", "SubagentStart", {**base, **agent, "hook_event_name": "SubagentStart"})
    capture.hook("claude", "PreToolUse", {**base, **agent})
    capture.hook("claude", "PostToolUse", {**_payload(CLAUDE, "PostToolUse"), **agent})
    capture.hook("claude", "SubagentStop", {**base, **agent, "hook_event_name": "SubagentStop"})
    capture.hook("claude", "Stop", _payload(CLAUDE, "Stop"))
    capture.drain()

    names = lambda sid: [  # noqa: E731
        graph.read("MATCH (e:SessionEvent {event_id: $id}) RETURN e.event_name AS n", {"id": i})[0]["n"]
        for i in _chain(graph, sid)
    ]
    assert names(parent) == ["SubagentStart", "SubagentStop", "Stop"]
    assert names("a1b2c3") == ["PreToolUse", "PostToolUse"]
    [link] = graph.read(
        "MATCH (p:Session {session_id: $parent})-[:HAS_SUBAGENT]->(c:Session {session_id: 'a1b2c3'})"
        "-[:SUBAGENT_OF]->(p) "
        "MATCH (c)-[:STARTED_AT]->(start:SessionEvent), (c)-[:ENDED_AT]->(stop:SessionEvent) "
        "MATCH (project:Project)-[:HAS_SESSION]->(c) "
        "RETURN c.agent_kind AS kind, c.agent_type AS type, c.parent_session_id AS parent_id, "
        "start.event_name AS start, stop.event_name AS stop, p.agent_kind AS parent_kind",
        {"parent": parent},
    )
    assert link == {
        "kind": "subagent",
        "type": "Explore",
        "parent_id": parent,
        "start": "SubagentStart",
        "stop": "SubagentStop",
        "parent_kind": "main",
    }


def test_a_replayed_spool_creates_nothing_new(capture: CaptureRig, graph: Graph) -> None:
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"):
        capture.hook("claude", event, _payload(CLAUDE, event))
    capture.drain()
    before = graph.read("MATCH (n) RETURN count(n) AS nodes")[0]["nodes"]
    rels = graph.read("MATCH ()-[r]->() RETURN count(r) AS n")[0]["n"]
    with capture.spool() as spool:
        spool.db.execute("UPDATE events SET state = 'pending'")  # as if never marked done
    capture.drain()
    assert graph.read("MATCH (n) RETURN count(n) AS nodes")[0]["nodes"] == before
    assert graph.read("MATCH ()-[r]->() RETURN count(r) AS n")[0]["n"] == rels


def test_events_wait_in_the_spool_while_neo4j_is_down(
    capture: CaptureRig, graph: Graph, neo4j_server: Neo4jServer
) -> None:
    sid = "outage-session"
    capture.hook("claude", "SessionStart", _payload(CLAUDE, "SessionStart", session_id=sid))
    capture.start_worker()
    capture.wait_drained()
    neo4j_server.stop()
    try:
        for index in range(8):
            started = time.monotonic()
            payload = _payload(CLAUDE, "PreToolUse", session_id=sid, tool_use_id=f"t{index}")
            result = capture.hook("claude", "PreToolUse", payload)
            assert result.returncode == 0 and result.stderr == b""
            assert time.monotonic() - started < 10
        status: dict = {}

        def reported() -> bool:
            status.update(json.loads(capture.mkg("status", "--json").stdout))
            return "Neo4j is not reachable" in (status["last_error"] or "")

        capture.wait_for(reported, 60, "the worker to report the outage")
        assert status["worker"]["running"] and status["spool"]["pending"] == 8
        assert capture.counts()["pending"] == 8
        # A session starting now is told its memory is unavailable, once, instead of silence: by
        # the worker, within the hook's own deadline (it does not wait on the database again).
        start = _payload(CLAUDE, "SessionStart", session_id="outage-new")
        deadline = {"MKG_HOOK_DEADLINE_SESSION_START": str(hook.ANSWER_DEADLINES["SessionStart"][1])}
        said = json.loads(capture.hook("claude", "SessionStart", start, env=deadline).stdout)
        said = said["hookSpecificOutput"]
        assert said["hookEventName"] == "SessionStart"
        assert said["additionalContext"] == degraded.notice(degraded.DATABASE_DOWN)
        assert capture.hook("claude", "SessionStart", start).stdout == b""
    finally:
        neo4j_server.start()
    capture.wait_drained(timeout=120)
    chain = _chain(graph, sid)
    assert chain == _spool_order(capture, sid)
    assert len(chain) == 9 == len(set(chain))
    assert len(_chain(graph, "outage-new")) == 2
    after = json.loads(capture.mkg("status", "--json").stdout)  # recovered: no stale error
    assert after["last_error"] is None and "Last error" not in capture.mkg("status").stdout


def test_worker_killed_mid_drain_loses_and_duplicates_nothing(capture: CaptureRig, graph: Graph) -> None:
    total = 600
    for index in range(total):
        payload = _payload(CLAUDE, "PostToolUse", session_id=f"s{index % 3}", tool_use_id=f"t{index}")
        _spool_fast(capture, "claude", "PostToolUse", payload)
    worker = capture.start_worker()
    capture.wait_for(lambda: capture.counts()["done"] > 0, 60, "the drain to begin")
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    done = capture.counts()["done"]
    assert 0 < done < total, done  # really mid-drain
    capture.start_worker()
    capture.wait_drained(timeout=180)
    assert _count(graph, "MATCH (e:SessionEvent) RETURN count(e) AS n") == total
    for sid in ("s0", "s1", "s2"):
        chain = _chain(graph, sid)
        assert chain == _spool_order(capture, sid)
        assert len(chain) == len(set(chain)) == total // 3


def test_twenty_concurrent_hooks_for_one_session(capture: CaptureRig, graph: Graph) -> None:
    sid = "concurrent-session"
    procs = []
    for index in range(20):
        proc = subprocess.Popen(
            [str(BIN_DIR / "mkg-hook"), "--client", "claude", "PreToolUse"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=capture.env,
        )
        procs.append(
            (proc, json.dumps(_payload(CLAUDE, "PreToolUse", session_id=sid, tool_use_id=f"c{index}")))
        )
    for proc, data in procs:
        out, err = proc.communicate(data.encode(), timeout=120)
        assert (proc.returncode, out, err) == (0, b"", b"")
    capture.drain()
    chain = _chain(graph, sid)
    assert len(chain) == len(set(chain)) == 20
    assert chain == _spool_order(capture, sid)
    assert (
        _count(graph, "MATCH (:Session {session_id: $sid})-[:HAS_EVENT]->(e) RETURN count(e) AS n", sid=sid)
        == 20
    )
    assert (
        _count(
            graph, "MATCH (:Session {session_id: $sid})-[:LATEST_EVENT]->(e) RETURN count(e) AS n", sid=sid
        )
        == 1
    )


def test_a_failing_capture_handler_never_stops_the_others(capture: CaptureRig, graph: Graph) -> None:
    capture.env.update(PROBE)
    for event in ("UserPromptSubmit", "PreToolUse", "Stop"):
        capture.hook("claude", event, _payload(CLAUDE, event, hook_event_name=event))
    capture.drain()
    assert capture.counts() == {"pending": 0, "done": 3, "failed": 0}
    marks = graph.read("MATCH (m:ProbeMark) RETURN m.event AS event ORDER BY event")
    assert [m["event"] for m in marks] == ["PreToolUse", "Stop", "UserPromptSubmit"]
    log = Path(capture.paths.log).read_text()
    assert log.count("capture handler 'exploding' failed") == 3


def test_waiting_hooks_get_the_workers_answer(capture: CaptureRig, graph: Graph) -> None:
    capture.env.update(PROBE)
    capture.start_worker()
    prompt = _payload(CLAUDE, "UserPromptSubmit")
    result = capture.hook("claude", "UserPromptSubmit", prompt)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": f"probe saw UserPromptSubmit: {prompt['prompt']}",
        }
    }
    result = capture.hook("codex", "SessionStart", _payload(CODEX, "SessionStart"))
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.endswith("probe saw SessionStart: startup")  # after the core's system prompt
    # Events that do not wait print nothing.
    assert capture.hook("claude", "PreToolUse", _payload(CLAUDE, "PreToolUse")).stdout == b""


def test_a_slow_answer_is_abandoned_at_the_deadline(capture: CaptureRig, graph: Graph) -> None:
    capture.env.update({**PROBE, "MKG_PROBE_MODE": "slow", "MKG_PROBE_SLEEP": "4"})
    capture.start_worker()
    started = time.monotonic()
    result = capture.hook(
        "claude",
        "UserPromptSubmit",
        _payload(CLAUDE, "UserPromptSubmit"),
        env={"MKG_HOOK_DEADLINE_PROMPT": "0.6"},
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert time.monotonic() - started < 3.5
    capture.wait_drained()  # the event itself is still captured


def test_a_failing_provider_yields_an_empty_answer(capture: CaptureRig, graph: Graph) -> None:
    capture.env.update({**PROBE, "MKG_PROBE_MODE": "fail"})
    capture.start_worker()
    result = capture.hook("claude", "UserPromptSubmit", _payload(CLAUDE, "UserPromptSubmit"))
    assert (result.returncode, result.stdout) == (0, b"")
    capture.wait_for(
        lambda: "context provider 'probe' failed" in Path(capture.paths.log).read_text(), 120, "log"
    )


def test_no_secret_reaches_the_graph(capture: CaptureRig, graph: Graph) -> None:
    base = _payload(CLAUDE, "PostToolUse")
    for name, text, _ in SECRETS:
        capture.hook(
            "claude",
            "PostToolUse",
            {**base, "tool_use_id": name, "tool_input": {"command": text}, "tool_response": f"echo {text}"},
        )
        capture.hook("claude", "UserPromptSubmit", {**_payload(CLAUDE, "UserPromptSubmit"), "prompt": text})
    capture.drain()
    assert capture.counts()["done"] == 2 * len(SECRETS)
    stored = json.dumps(graph.read("MATCH (n) RETURN properties(n) AS p"), default=str)
    stored += json.dumps(graph.read("MATCH ()-[r]->() RETURN properties(r) AS p"), default=str)
    leaked = [name for name, _, secret in SECRETS if secret in stored]
    assert leaked == []
    assert stored.count("[REDACTED:") >= 2 * len(SECRETS)


def test_an_unreadable_payload_is_failed_with_its_reason(capture: CaptureRig, graph: Graph) -> None:
    capture.hook("claude", "PreToolUse", _payload(CLAUDE, "PreToolUse", tool_name=42))
    capture.hook("claude", "Stop", _payload(CLAUDE, "Stop"))
    capture.drain()
    assert capture.counts() == {"pending": 0, "done": 1, "failed": 1}
    status = capture.mkg("status")
    assert "1 quarantined" in status.stdout and "field 'tool_name' must be a string" in status.stdout
    assert "Queued 1 failed event(s) again." in capture.mkg("worker", "retry").stdout
    assert capture.counts()["pending"] == 1


def test_worker_lifecycle_commands(capture: CaptureRig, graph: Graph) -> None:
    assert "not running" in capture.mkg("status").stdout
    assert capture.mkg("worker", "stop").stdout.strip() == "No worker is running."
    started = capture.mkg("worker", "start")
    assert started.returncode == 0 and "The worker is running" in started.stdout, started.stderr
    pid = runtime.worker_pid(capture.paths)
    assert pid and pid > 0
    assert os.stat(capture.paths.socket).st_mode & 0o777 == 0o600
    again = capture.mkg("worker")  # a second worker refuses to run
    assert again.returncode == 1 and f"already running (pid {pid})" in again.stderr
    status = json.loads(capture.mkg("status", "--json").stdout)
    assert status["worker"]["running"] and status["worker"]["pid"] == pid
    stopped = capture.mkg("worker", "stop")
    assert stopped.returncode == 0 and f"Stopped the worker (pid {pid})" in stopped.stdout
    assert runtime.worker_pid(capture.paths) is None and not os.path.exists(capture.paths.socket)


def test_an_idle_worker_exits(capture: CaptureRig, graph: Graph) -> None:
    proc = capture.start_worker(env={"MKG_WORKER_IDLE_SECONDS": "1"})
    capture.hook("claude", "Stop", _payload(CLAUDE, "Stop"))
    assert proc.wait(30) == 0
    assert capture.counts()["done"] == 1
    assert "idle for 1 s: exiting" in Path(capture.paths.log).read_text()


def test_identity_comes_from_each_events_own_hook(capture: CaptureRig, graph: Graph, tmp_path: Path) -> None:
    # The worker inherits the environment of whoever started it; that must not pin later events.
    capture.start_worker(env={"MKG_PROJECT_ID": "whoever-started-it", "MKG_USER_ID": "first@example.com"})
    folder = tmp_path / "shop-frontend"
    folder.mkdir()
    capture.hook("claude", "PreToolUse", _payload(CLAUDE, "PreToolUse", session_id="plain", cwd=str(folder)))
    pinned = _payload(CLAUDE, "PreToolUse", session_id="pinned", cwd=str(folder))
    capture.hook(
        "claude", "PreToolUse", pinned, env={"MKG_PROJECT_ID": "Pinned Project", "MKG_USER_ID": "Ana@X.io"}
    )
    capture.wait_drained()
    rows = graph.read(
        "MATCH (e:SessionEvent) RETURN e.session_id AS s, e.project_id AS p, e.user_id AS u ORDER BY s"
    )
    assert rows[0]["s"] == "pinned" and (rows[0]["p"], rows[0]["u"]) == ("pinned-project", "ana@x.io")
    assert rows[1]["s"] == "plain" and rows[1]["p"].startswith("shop-frontend-")
    assert rows[1]["u"] != "first@example.com"


def test_doctor_reports_waiting_and_failed_events(capture: CaptureRig) -> None:
    capture.hook("claude", "Stop", _payload(CLAUDE, "Stop"))
    checks = [c for c in json.loads(capture.mkg("doctor", "--json").stdout) if c["name"] == "capture"]
    assert checks == [
        {
            "name": "capture",
            "status": "warn",
            "detail": "1 event(s) wait in the spool, worker not running",
            "fix": "mkg worker start",
        }
    ]
    with capture.spool() as spool:
        spool.mark_failed(1, "PayloadError: broken")
    checks = [c for c in json.loads(capture.mkg("doctor", "--json").stdout) if c["name"] == "capture"]
    assert [c["status"] for c in checks] == ["ok", "warn"]
    assert "1 event(s) could not be stored" in checks[1]["detail"] and "broken" in checks[1]["detail"]


def test_a_session_starting_without_a_worker_is_told_its_memory_is_unavailable(capture: CaptureRig) -> None:
    # No worker runs and hooks do not start one (the rig's MKG_WORKER_AUTOSTART=0).
    first, other = (_payload(CLAUDE, "SessionStart", session_id=sid) for sid in ("alone-1", "alone-2"))
    result = capture.hook("claude", "SessionStart", first)
    assert result.returncode == 0 and result.stderr == b""
    said = json.loads(result.stdout)["hookSpecificOutput"]
    assert said == {
        "hookEventName": "SessionStart",
        "additionalContext": degraded.notice(degraded.WORKER_STOPPED),
    }
    assert "`mkg worker start`" in said["additionalContext"]
    assert capture.hook("claude", "SessionStart", first).stdout == b""  # once per session
    prompt = _payload(CLAUDE, "UserPromptSubmit", session_id="alone-1")
    assert capture.hook("claude", "UserPromptSubmit", prompt).stdout == b""  # said at the start only
    assert json.loads(capture.hook("claude", "SessionStart", other).stdout)["hookSpecificOutput"] == said
    assert capture.counts()["pending"] == 4  # every event was still captured
