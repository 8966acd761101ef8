"""Codex specifics: rollout subagents, spawn_agent results, MCP error results, detection, registration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mkg_codex.adapter import CodexAdapter, rollout_thread_id, spawned_agent_id

from mkg_core.host import PluginHost
from mkg_core.plugins import describe_plugins, make_plugin_manager

HERE = Path(__file__).parent
BASE = json.loads((HERE / "payloads" / "PostToolUse.json").read_text())
CHILD = "01a23653-aaaa-7c83-bdc7-808728703699"


def test_subagent_from_its_own_rollout_transcript() -> None:
    payload = {
        **BASE,
        "transcript_path": f"/home/dev/.codex/sessions/2026/12/02/rollout-2026-12-02T10-40-00-{CHILD}.jsonl",
    }
    event = CodexAdapter().parse(json.dumps(payload))
    assert (event.agent_kind, event.agent_id, event.parent_session_id) == (
        "subagent",
        CHILD,
        BASE["session_id"],
    )


def test_main_thread_transcript_is_not_a_subagent() -> None:
    event = CodexAdapter().parse(json.dumps(BASE))
    assert (event.agent_kind, event.agent_id) == ("main", None)


@pytest.mark.parametrize(
    "response",
    [
        {"agent_id": CHILD, "nickname": "scout"},
        json.dumps({"agent_id": CHILD}),
        {"content": [{"type": "text", "text": json.dumps({"agent_id": CHILD})}], "isError": False},
        {"content": [], "structuredContent": {"agent_id": CHILD}, "isError": False},
    ],
)
def test_spawn_agent_result_names_the_child(response: object) -> None:
    payload = {**BASE, "tool_name": "multi_agent_v1.spawn_agent", "tool_response": response}
    assert CodexAdapter().parse(json.dumps(payload)).spawned_agent_id == CHILD


def test_spawn_agent_helpers_tolerate_junk() -> None:
    assert spawned_agent_id("not json") is None
    assert spawned_agent_id({"content": [{"text": "[]"}]}) is None
    assert rollout_thread_id("/x/rollout-2026-AB.jsonl") is None


def test_mcp_error_result_is_a_failure() -> None:
    response = {
        "content": [{"type": "text", "text": "Neo.ClientError.Statement.SyntaxError"}],
        "isError": True,
    }
    event = CodexAdapter().parse(
        json.dumps(
            {**BASE, "tool_name": "mcp__meta_knowledge_graph__neo4j_read_cypher", "tool_response": response}
        )
    )
    assert (event.is_error, event.error, event.tool_key) == (
        True,
        "Neo.ClientError.Statement.SyntaxError",
        "neo4j_read_cypher",
    )


def test_prompt_injection_shape() -> None:
    event = CodexAdapter().parse((HERE / "payloads" / "UserPromptSubmit.json").read_bytes())
    assert json.loads(CodexAdapter().render_injection(event, "memory")) == {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "memory"}
    }


def test_entry_point_registers() -> None:
    pm = make_plugin_manager(environ={})
    rows = {row["name"]: row for row in describe_plugins(pm)}
    assert rows["codex"]["distribution"] == "mkg-codex"
    assert isinstance(PluginHost(pm).harness_adapter("codex"), CodexAdapter)


def test_detect() -> None:
    from mkg_codex import plugin

    assert plugin.mkg_detect_harness({"CODEX_HOME": "/c", "CODEX_MANAGED_BY_NPM": "1"}) == "codex"
    assert plugin.mkg_detect_harness({"CLAUDE_PROJECT_DIR": "/p"}) is None
