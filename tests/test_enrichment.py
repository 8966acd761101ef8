"""Enrichment from real captured sessions of both CLIs (their hook payloads and transcripts, recorded
from the real Claude Code and Codex against the local fake model), replayed through the real hook
and worker into the real dev Neo4j, then projected by ``mkg enrich``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mkg_core.enrichment import Call, derive, resources, tool_kind, tool_namespace
from mkg_core.graph import Graph
from mkg_core.harness import HarnessAdapter
from mkg_core.testing import CaptureRig, mcp_call, mcp_server, mcp_session
from mkg_core.transcripts import read_transcript

# The harness packages read their own transcripts and know their own tools.
ADAPTERS: dict[str, HarnessAdapter] = {
    "claude": pytest.importorskip("mkg_claude.adapter").ClaudeAdapter(),
    "codex": pytest.importorskip("mkg_codex.adapter").CodexAdapter(),
}

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = {h: ROOT / "harnesses" / f"mkg-{h}" / "tests" / "session" for h in ("claude", "codex")}
PROJECT = "enrich-test"
SAVE_SAID = "I will keep the deploy day in project memory."
READ_SAID = "Let me check the deploy notes first."
NEW = "The team deploys to production on Fridays."
SQL = "SELECT * FROM `p.sales.accounts` a JOIN sales.usage u"

SNAPSHOT = """
MATCH (s:Session)-[:HAS_TURN]->(t:Turn)
OPTIONAL MATCH (t)-[:ISSUED]->(c:ToolCall)-[:USES_TOOL]->(tool:Tool)
OPTIONAL MATCH (c)-[:RETURNED]->(r:ToolResult)
OPTIONAL MATCH (c)-[:HAS_RATIONALE]->(why:ToolRationale)
WITH s, t, c, tool, r, why,
     [(c)-[x:TARGETS]->(res:Resource) | [res.type, res.value, x.role]] AS targets,
     COUNT { (c)-[:LOGGED_BY]->(:SessionEvent) } AS logged,
     COUNT { (t)-[:PROMPTED_BY]->(:SessionEvent {event_name: 'UserPromptSubmit'}) } AS prompted
RETURN s.session_id AS session, t.index AS turn, t.prompt AS prompt, prompted, c.tool_key AS key,
       c.source AS source, tool {.id, .kind, .namespace} AS tool, r.succeeded AS succeeded,
       r.summary AS summary, why.text AS rationale, targets, logged
ORDER BY session, turn
"""


@pytest.fixture
def rig(capture: CaptureRig, graph: Graph) -> CaptureRig:
    capture.env.update({"MKG_PROJECT_ID": PROJECT, "EMBEDDING_MODEL": "none", "MKG_EXTRACTION": "0"})
    return capture


def _enrich(rig: CaptureRig, *args: str) -> str:
    result = rig.mkg("enrich", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_captured_sessions_become_turns_calls_results_rationales_and_resources(
    rig: CaptureRig, graph: Graph, harness: str, tmp_path: Path
) -> None:
    first, second = rig.replay(harness, SESSIONS[harness], tmp_path)
    rig.drain()
    assert graph.read("MATCH (t:Turn) RETURN count(t) AS n") == [{"n": 0}]  # the job is off by default

    assert "Enriched 2 session(s): 2 turn(s), 2 tool call(s)" in _enrich(rig, "--project", PROJECT)
    rows = {row["session"]: row for row in graph.read(SNAPSHOT)}
    saved, read = rows[first], rows[second]
    assert saved["prompt"].startswith("Which cluster is staging?") and saved["prompted"] == 1
    assert saved["key"] == "project_add_learning" and saved["source"] == "hooks"
    assert saved["tool"] == {"id": "tool:project_add_learning", "kind": "mcp", "namespace": "mkg"}
    assert saved["succeeded"] is True and "learning:" in saved["summary"]
    assert saved["rationale"] == SAVE_SAID  # the assistant's words before the call, from the transcript
    assert saved["logged"] == 2  # its PreToolUse and PostToolUse events
    assert saved["targets"] == []

    assert read["prompt"] == "When does the team deploy to production?"
    assert read["rationale"] == READ_SAID and read["succeeded"] is True
    assert read["targets"] == [["file", "/home/dev/project/DEPLOY.md", "read"]]
    assert read["tool"]["kind"] == ("filesystem_read" if harness == "claude" else "shell")
    assert "Fridays" in read["summary"]

    before = graph.read(SNAPSHOT)
    assert "Nothing to enrich" in _enrich(rig, "--project", PROJECT)  # nothing new: skipped
    assert "0 node(s) and 0 relationship(s) new" in _enrich(rig, "--project", PROJECT, "--force")
    assert graph.read(SNAPSHOT) == before


def test_only_new_sessions_are_enriched_and_the_transcript_fills_in_missed_calls(
    rig: CaptureRig, graph: Graph, tmp_path: Path
) -> None:
    lines = (SESSIONS["claude"] / "hooks.jsonl").read_text().splitlines()
    first_session = {n for n, line in enumerate(lines, 1) if n <= 6}
    # Only the first session, then enrich it.
    rig.replay("claude", SESSIONS["claude"], tmp_path, drop=set(range(7, len(lines) + 1)))
    rig.drain()
    assert "Enriched 1 session(s)" in _enrich(rig, "--project", PROJECT)
    # The second session arrives, its tool hooks lost (PreToolUse and PostToolUse of the Read).
    rig.replay("claude", SESSIONS["claude"], tmp_path, drop=first_session | {9, 10})
    rig.drain()
    assert "Enriched 1 session(s): 1 turn(s), 1 tool call(s)" in _enrich(rig, "--project", PROJECT)
    rows = graph.read(SNAPSHOT)
    read = rows[-1] if rows[-1]["key"] == "Read" else rows[0]
    assert read["key"] == "Read" and read["source"] == "transcript" and read["logged"] == 0
    assert read["rationale"] == READ_SAID and read["succeeded"] is True and "Fridays" in read["summary"]
    assert read["targets"] == [["file", "/home/dev/project/DEPLOY.md", "read"]]


def test_without_a_transcript_the_hooks_still_give_calls(
    rig: CaptureRig, graph: Graph, tmp_path: Path
) -> None:
    folder = SESSIONS["codex"]
    for line in (folder / "hooks.jsonl").read_text().splitlines():
        record = json.loads(line)
        record["payload"]["transcript_path"] = str(tmp_path / "gone.jsonl")
        assert rig.hook("codex", record["event"], record["payload"]).returncode == 0
    rig.drain()
    _enrich(rig, "--all")
    rows = graph.read(SNAPSHOT)
    assert sorted(r["key"] for r in rows) == ["Bash", "project_add_learning"]
    assert all(r["rationale"] is None and r["succeeded"] is True for r in rows)


def test_the_worker_job_enriches_after_stop_when_switched_on(
    rig: CaptureRig, graph: Graph, tmp_path: Path
) -> None:
    rig.env["MKG_ENRICHMENT"] = "1"
    rig.replay("codex", SESSIONS["codex"], tmp_path)
    rig.drain()
    assert graph.read("MATCH (c:ToolCall)-[:HAS_RATIONALE]->(r) RETURN count(r) AS n") == [{"n": 2}]
    assert graph.read("MATCH (s:Session) WHERE s.enriched_events IS NOT NULL RETURN count(s) AS n") == [
        {"n": 2}
    ]


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_project_context_names_the_files_and_tools_most_touched(
    rig: CaptureRig, graph: Graph, tmp_path: Path
) -> None:
    rig.replay("claude", SESSIONS["claude"], tmp_path)
    rig.drain()
    before = mcp_session(mcp_server(rig.env), lambda c: mcp_call(c, "project_get_context"))
    assert not before[0] and "most_touched" not in before[1]  # nothing enriched yet
    _enrich(rig)  # the current project (MKG_PROJECT_ID)
    error, context = mcp_session(mcp_server(rig.env), lambda c: mcp_call(c, "project_get_context"))
    assert not error
    touched = context["most_touched"]
    assert [(f["path"], f["calls"], f["writes"]) for f in touched["files"]] == [
        ("/home/dev/project/DEPLOY.md", 1, 0)
    ]
    assert sorted((t["tool"], t["calls"], t["failed"]) for t in touched["tools"]) == [
        ("Read", 1, 0), ("project_add_learning", 1, 0),
    ]  # fmt: skip


def test_bad_options_and_unknown_sessions_are_reported(rig: CaptureRig) -> None:
    both = rig.mkg("enrich", "--session", "a", "--all")
    assert both.returncode == 2 and "at most one of --session, --project and --all" in both.stderr
    unknown = rig.mkg("enrich", "--session", "no-such-session")
    assert unknown.returncode == 1 and "no session 'no-such-session'" in unknown.stderr


# -- the pieces -------------------------------------------------------------------------------------


def test_both_transcript_formats_give_calls_rationales_and_results() -> None:
    for harness, tool in (("claude", "Read"), ("codex", "exec_command")):
        paths = sorted((SESSIONS[harness] / "transcripts").glob("*.jsonl"))
        adapter = ADAPTERS[harness]
        calls = [
            c
            for path in paths
            for c in (read_transcript(str(path), adapter) or pytest.fail(str(path))).ordered()
        ]
        by_name = {c.name.rsplit("__", 1)[-1]: c for c in calls}
        assert set(by_name) == {"project_add_learning", tool}, harness
        assert by_name["project_add_learning"].rationale == SAVE_SAID
        assert by_name[tool].rationale == READ_SAID and "Fridays" in (by_name[tool].result or "")
        assert by_name["project_add_learning"].input == {"text": NEW, "scope": "project"}
    assert read_transcript("/nonexistent/transcript.jsonl", ADAPTERS["claude"]) is None
    assert read_transcript(str(paths[0]), None) is None  # no adapter, no transcript


@pytest.mark.parametrize(
    ("harness", "name", "tool_input", "expected"),
    [
        ("claude", "Edit", {"file_path": "src/app.py"}, [("file", "/repo/src/app.py", "write")]),
        ("claude", "Bash", {"command": "pytest -q tests/test_x.py --maxfail 1"},
         [("file", "/repo/tests/test_x.py", "read")]),
        ("claude", "Bash", {"command": ["bash", "-lc", "cat README.md"]},
         [("file", "/repo/README.md", "read")]),
        ("codex", "apply_patch",
         {"input": "*** Begin Patch\n*** Update File: a/b.py\n@@\n*** Add File: c.md\n"},
         [("file", "/repo/a/b.py", "write"), ("file", "/repo/c.md", "write")]),
        ("claude", "WebFetch", {"url": "https://example.com/docs"},
         [("url", "https://example.com/docs", "read")]),
        ("codex", "mcp__mkg__bigquery_execute_query", {"query": SQL},
         [("query", SQL, "read"),
          ("table", "p.sales.accounts", "read"), ("table", "sales.usage", "read")]),
        ("claude", "mcp__mkg__neo4j_read_cypher", {"query": "MATCH (n) RETURN n"},
         [("query", "MATCH (n) RETURN n", "read")]),
        ("claude", "mcp__mkg__project_get_context", {"query": "deploys"}, []),
    ],
)  # fmt: skip
def test_resources_a_call_touched(
    harness: str, name: str, tool_input: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    call = Call(id="toolcall:s:1", session_id="s", tool_name=name, input=tool_input, cwd="/repo")
    assert [(r.type, r.value, r.role) for r in resources(call, None, ADAPTERS[harness])] == expected


def test_tool_kinds_and_namespaces() -> None:
    claude, codex = ADAPTERS["claude"], ADAPTERS["codex"]
    assert tool_kind("Bash", claude) == "shell" and tool_kind("exec_command", codex) == "shell"
    assert tool_kind("Write", claude) == "filesystem_write" and tool_kind("Read", claude) == "filesystem_read"
    assert tool_kind("Bash") == "tool"  # without its harness, a built-in tool is just a tool
    assert tool_kind("mcp__plugin_meta-knowledge-graph_mkg__neo4j_read_cypher") == "mcp"
    assert tool_namespace("mcp__plugin_meta-knowledge-graph_mkg__neo4j_read_cypher") == "mkg"
    assert tool_namespace("mcp__mkg__project_add_learning") == "mkg" and tool_namespace("Read") is None


def test_a_subagent_takes_rationales_from_its_parents_transcript_but_not_its_calls() -> None:
    path = next((SESSIONS["claude"] / "transcripts").glob("fa57d88c-*.jsonl"))
    transcript = read_transcript(str(path), ADAPTERS["claude"])
    events = [
        {"event_id": "e1", "event_name": "PreToolUse", "tool_name": "Grep", "tool_use_id": "toolu_sub",
         "tool_input": '{"pattern": "deploy"}', "agent_id": "agent-1", "timestamp": "2026-12-02T19:38:23Z"},
        {"event_id": "e2", "event_name": "PostToolUse", "tool_name": "Grep", "tool_use_id": "toolu_sub",
         "tool_response": "DEPLOY.md", "agent_id": "agent-1", "timestamp": "2026-12-02T19:38:24Z"},
    ]  # fmt: skip
    sub = derive("sub-session", events, transcript)
    assert [(c.tool_name, c.source, c.failed) for c in sub.calls] == [("Grep", "hooks", False)]
    main = derive("main-session", [{**e, "agent_id": None} for e in events], transcript)
    assert sorted((c.tool_name, c.source) for c in main.calls) == [("Grep", "hooks"), ("Read", "transcript")]
