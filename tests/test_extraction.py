"""Memory extraction at Stop: real hooks and worker, real Neo4j, the real litellm client and a
local fake OpenAI-compatible server with scripted answers."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from mkg_core.extraction import build_corpus, event_blocks
from mkg_core.extraction.prompts import ExtractionAnswer
from mkg_core.extraction.rows import learning_writes
from mkg_core.graph import Graph
from mkg_core.injection import FENCE_CLOSE, FENCE_OPEN
from mkg_core.learnings import learning_id
from mkg_core.testing import CaptureRig
from mkg_core.testing.fakellm import FakeLLM, hashed_vector

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
PROJECT, USER = "extract-test", "ana@example.com"
IDENTITY = {"MKG_PROJECT_ID": PROJECT, "MKG_USER_ID": USER}
#: Words that only the scripted prompts contain, to route answers.
EXTRACT, OBSERVE = "long-term memory", "episodic timeline"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def _payload(event: str, session: str, **changes: object) -> dict[str, Any]:
    data = json.loads((CLAUDE / f"{event}.json").read_text())
    return {**data, "session_id": session, **changes}


def _turn(rig: CaptureRig, session: str, prompt: str, answer: str, env: dict[str, str] | None = None) -> None:
    env = {**IDENTITY, **(env or {})}
    for event, changes in (
        ("UserPromptSubmit", {"prompt": prompt}),
        (
            "PostToolUse",
            {
                "tool_name": "Bash",
                "tool_input": {"command": "make lint"},
                "tool_response": "ok",
                "tool_use_id": "t1",
            },
        ),
        ("Stop", {"last_assistant_message": answer}),
    ):
        result = rig.hook("claude", event, _payload(event, session, **changes), env=env)
        assert result.returncode == 0, result.stderr


def _learning_action(text: str, scope: str = "project", **extra: object) -> dict[str, object]:
    return {"action": "create", "scope": scope, "kind": "fact", "text": text, "confidence": 0.8, **extra}


def _script(
    fake: FakeLLM, learnings: list[dict[str, object]], observations: list[dict[str, object]] | None = None
):
    fake.reply({"learnings": learnings}, when=EXTRACT)
    default = {
        "type": "change",
        "title": "Set up linting",
        "facts": ["ran make lint"],
        "narrative": "The user asked for linting. It was set up. Done.",
    }
    fake.reply({"observations": observations or [default]}, when=OBSERVE)


@pytest.fixture
def rig(capture: CaptureRig, graph: Graph, fake_llm: FakeLLM) -> CaptureRig:
    capture.env.update(fake_llm.env())
    capture.env["MKG_CONSISTENCY_GATE"] = "0"  # these tests look at extraction alone; see the gate test below
    return capture


def _drain_with(rig: CaptureRig, **env: str) -> None:
    """Drain with worker settings changed (as a project's .env would change them)."""
    saved = dict(rig.env)
    rig.env.update(env)
    try:
        rig.drain()
    finally:
        rig.env.clear()
        rig.env.update(saved)


def _one(graph: Graph, query: str, **params: object) -> Any:
    rows = graph.read(query, params)
    assert len(rows) == 1, rows
    return rows[0]


def test_a_stop_distils_learnings_and_a_timeline_entry(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    _script(
        fake_llm,
        [
            _learning_action("Run make lint before pushing; CI rejects unformatted code."),
            _learning_action("Ana prefers short answers with code first.", scope="user"),
            {"action": "ignore", "text": "ran a command"},
        ],
    )
    recalled = f"{FENCE_OPEN}\nRecalled: the deploy password is hunter2-recalled\n{FENCE_CLOSE}"
    rig.hook("claude", "SessionStart", _payload("SessionStart", "s-1"), env=IDENTITY)
    _turn(
        rig,
        "s-1",
        f"Set up linting please. {recalled} My key is {AWS_KEY} <private>my diary</private>",
        "Linting is set up; run make lint before pushing.",
    )
    rig.drain()

    (extract_call,) = [c for c in fake_llm.chats() if EXTRACT in c.text]
    sent = "\n".join(c.text for c in fake_llm.log)
    assert "Set up linting please." in extract_call.text
    assert '<untrusted-data kind="session-record">' in extract_call.text
    assert "hunter2-recalled" not in sent  # recalled memory is never re-learned
    assert AWS_KEY not in sent and "my diary" not in sent  # secrets never reach the LLM

    rows = graph.read(
        "MATCH (:Project {id: $p})-[:HAS_LEARNING]->(l:Learning)-[:FROM_SESSION]->(:Session {session_id: "
        "'s-1'}) "
        "MATCH (pp:ProjectProcessing)-[:PRODUCED_LEARNING]->(l) "
        "RETURN l.id AS id, l.scope AS scope, l.status AS status, l.source AS source, size(l.embedding) AS "
        "dims, "
        "l.user_id AS user ORDER BY l.scope",
        {"p": PROJECT},
    )  # fmt: skip
    assert [(r["scope"], r["status"], r["source"], r["dims"]) for r in rows] == [
        ("project", "candidate", "hooks-stop", 64),
        ("user", "candidate", "hooks-stop", 64),
    ]
    assert rows[1]["id"] == learning_id(f"user:{USER}", "Ana prefers short answers with code first.")
    assert _one(graph, "MATCH (:User {id: $u})-[:HAS_LEARNING]->(l) RETURN count(l) AS n", u=USER)["n"] == 1

    run = _one(
        graph,
        "MATCH (pp:ProjectProcessing {type: 'processing'}) "
        "RETURN pp.llm_status AS status, pp.llm_model AS model, pp.total_tokens AS tokens, pp.llm_calls AS "
        "calls, "
        "pp.event_count AS events, COUNT { (pp)-[:PROCESSED_EVENT]->() } AS processed",
    )  # fmt: skip
    assert run["status"] == "called" and run["model"] == "openai/mkg-fake-model"
    assert run["calls"] == 2 and run["tokens"] > 0
    assert run["events"] == run["processed"] == 4  # SessionStart, prompt, tool, Stop
    observation = _one(
        graph,
        "MATCH (:Project {id: $p})-[:LATEST_OBSERVATION]->(o:Observation)-[:FROM_SESSION]->(:Session "
        "{session_id: 's-1'}) "
        "RETURN o.type AS type, o.title AS title, size(o.embedding) AS dims, o.started_at <= o.ended_at AS "
        "ordered",
        p=PROJECT,
    )  # fmt: skip
    assert observation == {"type": "change", "title": "Set up linting", "dims": 64, "ordered": True}

    calls = len(fake_llm.chats())
    rig.drain()  # nothing new: the window is never processed twice
    assert len(fake_llm.chats()) == calls
    status = json.loads(rig.mkg("status", "--json").stdout)
    assert status["spool"]["jobs"] == {
        "pending": 0,
        "done": 3,
        "failed": 0,
    }  # extraction, prompt consolidation, query-error consolidation


def test_updates_are_ownership_scoped_and_demote_approved_memory(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    graph.write(
        "MERGE (p:Project {id: $p}) MERGE (o:Project {id: 'other-project'}) "
        "CREATE (p)-[:HAS_LEARNING]->(:Learning {id: 'own', text: 'Old text', scope: 'project', status: "
        "'approved', "
        "  project_id: $p, reviewed_by: 'human', consistency_status: 'consistent', confidence: 0.9}) "
        "CREATE (p)-[:HAS_LEARNING]->(:Learning {id: 'own-same', text: 'Same text', scope: 'project', "
        "status: 'approved', "
        "  project_id: $p, reviewed_by: 'human', confidence: 0.5}) "
        "CREATE (o)-[:HAS_LEARNING]->(:Learning {id: 'foreign', text: 'Theirs', scope: 'project', status: "
        "'approved', "
        "  project_id: 'other-project'})",
        {"p": PROJECT},
    )  # fmt: skip
    _script(
        fake_llm,
        [
            {"action": "update", "existing_id": "own", "text": "New text", "confidence": 0.95},
            {"action": "update", "existing_id": "own-same", "confidence": 0.7},
            {"action": "update", "existing_id": "foreign", "text": "Hijacked"},
        ],
    )
    _turn(rig, "s-upd", "Please refine what we know", "Refined.")
    rig.drain()
    rows = {
        r["id"]: r
        for r in graph.read(
            "MATCH (l:Learning) RETURN l.id AS id, l.text AS text, l.status AS status, l.reviewed_by AS "
            "reviewed, "
            "l.consistency_status AS consistency, l.confidence AS confidence"
        )
    }  # fmt: skip
    assert rows["own"] == {
        "id": "own", "text": "New text", "status": "candidate", "reviewed": None, "consistency": None,
        "confidence": 0.95,
    }  # fmt: skip
    assert rows["own-same"]["status"] == "approved" and rows["own-same"]["reviewed"] == "human"
    assert rows["own-same"]["confidence"] == 0.7
    assert rows["foreign"]["text"] == "Theirs" and rows["foreign"]["status"] == "approved"
    edge = _one(
        graph,
        "MATCH (:ProjectProcessing)-[r:UPDATED_LEARNING]->(:Learning {id: 'own'}) RETURN "
        "r.demoted_from_approved AS d",
    )
    assert edge["d"] is True
    refused = _one(graph, "MATCH (pp:ProjectProcessing {type: 'processing'}) RETURN pp.refused_updates AS r")
    assert refused["r"] == ["foreign"]


def test_a_user_fact_is_one_node_across_projects(rig: CaptureRig, graph: Graph, fake_llm: FakeLLM) -> None:
    fact = "Ana writes Python with type hints everywhere."
    _script(fake_llm, [_learning_action(fact, scope="user")])
    _turn(rig, "s-a", "I always use type hints", "Noted.", env={"MKG_PROJECT_ID": "project-a"})
    _turn(rig, "s-b", "As I said, type hints always", "Noted.", env={"MKG_PROJECT_ID": "project-b"})
    rig.drain()
    row = _one(
        graph,
        "MATCH (l:Learning {scope: 'user'}) "
        "RETURN l.id AS id, l.support_count AS support, l.user_id AS user, "
        "[(p:Project)-[:HAS_LEARNING]->(l) | p.id] AS projects, COUNT { (l)-[:FROM_SESSION]->() } AS "
        "sessions",
    )
    assert row["id"] == learning_id(f"user:{USER}", fact)
    assert row["support"] == 2 and row["user"] == USER and row["sessions"] == 2
    assert sorted(row["projects"]) == ["project-a", "project-b"]


def test_observations_chain_per_project(rig: CaptureRig, graph: Graph, fake_llm: FakeLLM) -> None:
    two = [
        {"type": "feature", "title": "Added export", "facts": ["a", "b"], "narrative": "n"},
        {"type": "nonsense", "title": "Fixed import", "facts": [1, "", "c"], "narrative": "n"},
    ]
    _script(fake_llm, [], observations=two)
    _turn(rig, "s-chain", "Add export and fix import", "Both done.")
    rig.drain()
    fake_llm.reset()
    _script(
        fake_llm,
        [],
        observations=[{"type": "bugfix", "title": "Fixed the flaky test", "facts": [], "narrative": ""}],
    )
    _turn(rig, "s-chain", "Now the flaky test", "Fixed.")
    rig.drain()
    chain = graph.read(
        "MATCH (:Project {id: $p})-[:LATEST_OBSERVATION]->(last:Observation) "
        "MATCH path = (first:Observation)-[:NEXT*0..]->(last) WHERE NOT EXISTS { ()-[:NEXT]->(first) } "
        "RETURN [o IN nodes(path) | [o.type, o.title, o.facts]] AS chain",
        {"p": PROJECT},
    )
    assert chain[0]["chain"] == [
        ["feature", "Added export", ["a", "b"]],
        ["change", "Fixed import", ["1", "c"]],
        ["bugfix", "Fixed the flaky test", []],
    ]


def test_without_an_llm_the_window_waits_and_is_taken_later(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    _turn(rig, "s-wait", "Remember that builds use Bazel", "OK.")
    _drain_with(rig, OPENAI_API_KEY="")
    waiting = _one(
        graph,
        "MATCH (pp:ProjectProcessing {waiting: true}) "
        "RETURN pp.llm_status AS status, pp.llm_skip_reason AS reason, pp.attempt_count AS attempts",
    )
    assert waiting["status"] == "skipped" and "OPENAI_API_KEY" in waiting["reason"]
    assert _one(graph, "MATCH ()-[r:PROCESSED_EVENT]->() RETURN count(r) AS n")["n"] == 0
    assert fake_llm.chats() == []

    # The LLM is back: the next Stop takes every waiting event at once.
    _script(fake_llm, [_learning_action("Builds use Bazel.")])
    _turn(rig, "s-wait", "And tests run with bazel test", "OK.")
    rig.drain()
    run = _one(
        graph,
        "MATCH (pp:ProjectProcessing {type: 'processing'}) "
        "RETURN pp.event_count AS events, COUNT { (pp)-[:PROCESSED_EVENT]->() } AS processed",
    )
    assert run == {"events": 6, "processed": 6}
    resolved = _one(graph, "MATCH (pp:ProjectProcessing {type: 'waiting'}) RETURN pp.waiting AS waiting")
    assert resolved["waiting"] is False
    extract_call = next(c for c in fake_llm.chats() if EXTRACT in c.text)
    assert "Bazel" in extract_call.text and "bazel test" in extract_call.text


def test_a_waiting_session_is_taken_when_another_session_succeeds(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    _turn(
        rig,
        "s-old",
        "Old session work on the parser",
        "Done.",
    )
    _drain_with(rig, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    error = _one(
        graph, "MATCH (pp:ProjectProcessing {waiting: true}) RETURN pp.llm_status AS s, pp.llm_error AS e"
    )
    assert error["s"] == "error" and "Connection" in error["e"]
    _script(fake_llm, [])
    _turn(rig, "s-new", "New session work on the lexer", "Done.")
    rig.drain()
    sessions = graph.read(
        "MATCH (pp:ProjectProcessing {type: 'processing'}) RETURN pp.session_id AS s ORDER BY s"
    )
    assert [r["s"] for r in sessions] == ["s-new", "s-old"]


def test_skipped_windows_can_be_marked_processed_instead(rig: CaptureRig, graph: Graph) -> None:
    _turn(
        rig,
        "s-skip",
        "Something worth nothing",
        "OK.",
    )
    _drain_with(rig, OPENAI_API_KEY="", MKG_EXTRACTION_RETRY_SKIPPED="0")
    run = _one(
        graph,
        "MATCH (pp:ProjectProcessing {type: 'processing'}) "
        "RETURN pp.llm_status AS status, COUNT { (pp)-[:PROCESSED_EVENT]->() } AS processed",
    )
    assert run == {"status": "skipped", "processed": 3}


def test_invalid_json_is_repaired_once_then_recorded_as_an_error(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    fake_llm.reply("I found nothing interesting, sorry!", when=EXTRACT, times=1)
    _script(fake_llm, [_learning_action("Repaired answers still count.")])
    _turn(rig, "s-repair", "Tell me about repairs", "Done.")
    rig.drain()
    row = _one(
        graph,
        "MATCH (pp:ProjectProcessing {type: 'processing'}) RETURN pp.llm_repaired AS r, pp.llm_calls AS c",
    )
    assert row == {"r": True, "c": 3}
    assert _one(graph, "MATCH (l:Learning) RETURN l.text AS t")["t"] == "Repaired answers still count."

    fake_llm.reset()
    fake_llm.reply({"learnings": "none at all"}, when=EXTRACT)
    _turn(rig, "s-broken", "Another session", "Done.")
    rig.drain()
    error = _one(
        graph,
        "MATCH (pp:ProjectProcessing {session_id: 's-broken'}) "
        "RETURN pp.llm_status AS s, pp.llm_error AS e, pp.waiting AS w, pp.total_tokens AS t",
    )
    assert (
        error["s"] == "error" and "after one repair" in error["e"] and error["w"] is True and error["t"] > 0
    )
    assert len([c for c in fake_llm.chats() if EXTRACT in c.text]) == 2  # the call and one repair


def test_a_worker_killed_mid_run_leaves_the_window_for_the_next_run(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    fake_llm.reply({"learnings": [_learning_action("Killing the worker loses nothing.")]}, when=EXTRACT)
    fake_llm.reply({"observations": []}, when=OBSERVE, delay=60)  # hangs until the worker is killed
    worker = rig.start_worker()
    _turn(rig, "s-kill", "Kill test", "Done.")
    rig.wait_for(lambda: any(OBSERVE in c.text for c in fake_llm.chats()), 120, "the observation call")
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert (
        _one(
            graph, "MATCH (n) WHERE n:Learning OR n:ProjectProcessing OR n:Observation RETURN count(n) AS n"
        )["n"]
        == 0
    )
    assert _one(graph, "MATCH ()-[r:PROCESSED_EVENT]->() RETURN count(r) AS n")["n"] == 0

    fake_llm.reset()
    _script(fake_llm, [_learning_action("Killing the worker loses nothing.")])
    rig.drain()  # the job was recorded in the spool, so a new worker runs it
    assert _one(graph, "MATCH (l:Learning) RETURN l.support_count AS s")["s"] == 1
    run = _one(graph, "MATCH (pp:ProjectProcessing) RETURN COUNT { (pp)-[:PROCESSED_EVENT]->() } AS n")
    assert run["n"] == 3


def test_session_end_never_extracts(rig: CaptureRig, graph: Graph, fake_llm: FakeLLM) -> None:
    for event in ("UserPromptSubmit", "SessionEnd"):
        rig.hook("claude", event, _payload(event, "s-end", prompt="hello there friend"), env=IDENTITY)
    rig.drain()
    assert fake_llm.chats() == []
    assert _one(graph, "MATCH (pp:ProjectProcessing) RETURN count(pp) AS n")["n"] == 0


def test_extraction_can_be_turned_off(rig: CaptureRig, graph: Graph, fake_llm: FakeLLM) -> None:
    _turn(rig, "s-off", "Nothing to see", "OK.")
    _drain_with(rig, MKG_EXTRACTION="0")
    assert fake_llm.chats() == []
    with rig.spool() as spool:
        assert spool.db.execute("SELECT count(*) FROM jobs WHERE name = 'extraction'").fetchone()[0] == 0


# -- the corpus ----------------------------------------------------------------------------------------


def _event(name: str, n: int, **fields: object) -> dict[str, object]:
    return {"event_name": name, "event_id": f"e{n}", "timestamp": n, **fields}


def test_the_corpus_keeps_the_newest_turns_whole_and_condenses_the_oldest() -> None:
    events = []
    for turn in range(30):
        events += [
            _event("UserPromptSubmit", turn * 3, prompt=f"request number {turn} " + "detail " * 40),
            _event("PostToolUse", turn * 3 + 1, tool_name="Edit", tool_input=f'{{"file": "f{turn}.py"}}'),
            _event("Stop", turn * 3 + 2, last_assistant_message=f"finished request {turn}"),
        ]
    corpus = build_corpus(events, budget_tokens=600)
    assert len(corpus) <= 600 * 4
    assert corpus.rstrip().endswith("assistant: finished request 29")
    assert 'tool Edit: {"file": "f29.py"}' in corpus
    assert "Earlier turns, condensed:" in corpus and "(+2 more steps)" in corpus
    assert "earlier turns left out]" in corpus.splitlines()[0]


def test_a_single_huge_turn_keeps_its_end() -> None:
    events = [
        _event("UserPromptSubmit", 0, prompt="x" * 100),
        _event("Stop", 1, last_assistant_message="y" * 1900 + "THE END"),
    ]
    corpus = build_corpus(events, budget_tokens=200)
    assert len(corpus) <= 800 and corpus.endswith("THE END") and "[the start of this turn was cut]" in corpus


def test_failed_tool_calls_show_the_error_and_the_fix() -> None:
    tool = "mcp__mkg__neo4j_read_cypher"
    bad, good = '{"query": "MATCH (n) RETURN n LIMT 1"}', '{"query": "MATCH (n) RETURN n LIMIT 1"}'
    events = [
        _event("PostToolUseFailure", 1, tool_name=tool, tool_key="neo4j_read_cypher", tool_input=bad,
               error="Invalid input 'LIMT'", tool_error=True),
        _event("PostToolUse", 2, tool_name=tool, tool_input=good),
        _event("PostToolUse", 3, tool_name="Bash", tool_input="{}", tool_error=True, is_interrupt=True),
        _event("SessionStart", 0),
    ]  # fmt: skip
    (turn,) = event_blocks(events)
    text = "\n".join(turn)
    assert "FAILED (tool_key neo4j_read_cypher)" in text and "error: Invalid input 'LIMT'" in text
    assert 'succeeded with input: {"query": "MATCH (n) RETURN n LIMIT 1"}' in text
    assert "tool Bash: {}" in text  # an interrupt is not a failure
    assert "SessionStart" not in text


def test_the_fake_embedder_is_deterministic() -> None:
    assert hashed_vector("Deploying services", 16) == hashed_vector("deployment service", 16)


def test_the_gate_runs_after_extraction_in_the_same_job(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    graph.write(
        "MERGE (p:Project {id: $p}) CREATE (p)-[:HAS_LEARNING]->(:Learning {id: 'make', status: 'approved', "
        "scope: 'project', project_id: $p, text: 'Builds use make; run make all.'})",
        {"p": PROJECT},
    )
    graph.write(  # written through MCP earlier, never gated: the sweep takes it
        "MERGE (p:Project {id: $p}) CREATE (p)-[:HAS_LEARNING]->(:Learning {id: 'mcp', status: 'candidate', "
        "scope: 'project', project_id: $p, text: 'Docs are published from the docs folder.', "
        "created_at: datetime()})",
        {"p": PROJECT},
    )
    _script(fake_llm, [_learning_action("Builds moved from make to Bazel; run bazel build //...")])
    judge = 'kind="candidate">\n'
    fake_llm.reply({"verdict": "supersedes", "ids": ["make"], "reason": "moved"}, when=judge + "Builds moved")
    fake_llm.reply({"verdict": "consistent", "reason": "unrelated"}, when=judge + "Docs are")
    _turn(rig, "s-gate", "We switched the build to Bazel today", "Done, builds use Bazel now.")
    _drain_with(rig, MKG_CONSISTENCY_GATE="1")
    rows = {
        r["text"]: r["status"]
        for r in graph.read("MATCH (l:Learning) RETURN l.text AS text, l.status AS status")
    }
    assert rows == {
        "Builds use make; run make all.": "rejected",
        "Builds moved from make to Bazel; run bazel build //...": "approved",
        "Docs are published from the docs folder.": "approved",  # the sweep took it
    }
    with rig.spool() as spool:
        summary = spool.db.execute("SELECT summary FROM jobs WHERE name = 'extraction'").fetchone()[0]
    assert "gate: 1 consistent, 1 supersedes" in summary


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_what_the_assistant_said_between_tool_calls_is_read(
    rig: CaptureRig, fake_llm: FakeLLM, harness: str, tmp_path: Path
) -> None:
    # Sessions captured from the real CLI; its transcripts hold what was said before each call.
    folder = ROOT / "harnesses" / f"mkg-{harness}" / "tests" / "session"
    said = "Let me check the deploy notes first."
    for path in (folder / "transcripts").glob("*.jsonl"):
        text = path.read_text()
        assert text.count(said) >= 1 or "I will keep the deploy day" in text
        (tmp_path / path.name).write_text(text.replace(said, f"{said} The key is {AWS_KEY}."))
    _script(fake_llm, [])
    rig.replay(harness, folder, tmp_path, **IDENTITY)
    rig.drain()

    extract_calls = [c.text for c in fake_llm.chats() if EXTRACT in c.text]
    sent = "\n".join(extract_calls)
    assert f"assistant: {said}" in sent  # from the transcript: no hook carries it
    assert "assistant: I will keep the deploy day in project memory." in sent
    first = next(text for text in extract_calls if said in text)
    assert first.index(said) < first.index("DEPLOY.md")  # before the call it led to
    assert AWS_KEY not in sent  # scrubbed like the rest


def test_the_commit_links_learnings_and_observations_to_their_entities(
    rig: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    """The answers name entities; the linker adds the code artifacts of the texts and the files the
    window's tool calls touched; all is written in the window's one transaction, names scrubbed."""
    learning = _learning_action(
        "billing/deploy.sh needs STRIPE_API_URL before `make deploy`.",
        entities=[
            {"name": "billing/deploy.sh", "kind": "file"},
            {"name": "payments service", "kind": "service"},
            {"name": AWS_KEY, "kind": "config"},  # a secret the model should not have named
            {"kind": "file"},  # unusable: dropped, the answer still counts
        ],
    )
    observation = {
        "type": "bugfix",
        "title": "Fixed the billing deploy",
        "facts": ["STRIPE_API_URL was unset"],
        "narrative": "The deploy failed until the variable was set. Done.",
        "entities": [{"name": "Stripe", "kind": "organization"}],
    }
    _script(fake_llm, [learning], [observation])
    env = IDENTITY
    session = "s-ent"
    steps: list[tuple[str, dict[str, object]]] = [
        ("UserPromptSubmit", {"prompt": "Fix the billing deploy please"}),
        (
            "PostToolUse",
            {
                "tool_name": "Edit",
                "tool_input": {"file_path": "/home/dev/demo-project/billing/deploy.sh", "old_string": "a",
                               "new_string": "b"},
                "tool_response": "ok",
                "tool_use_id": "t-edit",
                "cwd": "/home/dev/demo-project",
            },
        ),
        ("Stop", {"last_assistant_message": "Fixed: STRIPE_API_URL is set in billing/deploy.sh."}),
    ]  # fmt: skip
    for event, changes in steps:
        result = rig.hook("claude", event, _payload(event, session, **changes), env=env)
        assert result.returncode == 0, result.stderr
    rig.drain()

    about = graph.read(
        "MATCH (l:Learning)-[r:ABOUT]->(e:Entity) "
        "RETURN e.name AS name, e.kind AS kind, r.source AS source, e.namespace AS ns ORDER BY name"
    )
    assert {(r["name"], r["kind"], r["source"]) for r in about} == {
        ("STRIPE_API_URL", "config", "linker"),
        ("billing/deploy.sh", "file", "llm"),
        ("make deploy", "command", "linker"),
        ("payments service", "service", "llm"),
    }
    assert {r["ns"] for r in about} == {f"project:{PROJECT}"}
    mentioned = graph.read(
        "MATCH (o:Observation)-[r:MENTIONS]->(e:Entity) RETURN e.name AS name, e.kind AS kind ORDER BY name"
    )
    # the edited file reached the observation from the tool call, as the same entity the learning is about
    assert [(r["name"], r["kind"]) for r in mentioned] == [
        ("STRIPE_API_URL", "config"),
        ("Stripe", "organisation"),
        ("billing/deploy.sh", "file"),
    ]
    names = graph.read("MATCH (e:Entity) RETURN e.name AS name, e.aliases AS aliases")
    assert AWS_KEY not in json.dumps(names)
    pair = graph.read(
        "MATCH (a:Entity {name: 'STRIPE_API_URL'})-[c:CO_OCCURS]-(b:Entity {name: 'billing/deploy.sh'}) "
        "RETURN c.weight AS w"
    )
    assert pair == [{"w": 2}]  # the learning and the observation


def test_every_text_the_model_answers_is_scrubbed_before_it_becomes_a_write() -> None:
    secret = "Sk-Live-Pa55word-77"
    answer = ExtractionAnswer.model_validate(
        {
            "learnings": [
                {
                    "action": "create",
                    "text": f"Deploys read DB_PASSWORD={secret} from the vault.",
                    "kind": "error",
                    "error_signature": f"auth failed: password={secret}",
                    "reason": f"the run printed --password {secret}",
                }
            ]
        }
    )
    writes, _ = learning_writes(answer, project_id="p", user_id="u", limit=5)
    [write] = writes
    stored = json.dumps([write.text, write.error_signature, write.reason])
    assert secret not in stored and stored.count("[REDACTED:") == 3
