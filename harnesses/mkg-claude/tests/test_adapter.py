"""Claude Code specifics: failures, subagents, detection, rendering and registration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mkg_claude.adapter import ClaudeAdapter

from mkg_core.errors import PayloadError
from mkg_core.host import PluginHost
from mkg_core.plugins import describe_plugins, make_plugin_manager

BASE = json.loads((Path(__file__).parent / "payloads" / "PreToolUse.json").read_text())


def test_post_tool_use_failure_converges_on_post_tool_use() -> None:
    payload = {
        **BASE,
        "hook_event_name": "PostToolUseFailure",
        "error": "Tool failed: connection refused",
        "is_interrupt": False,
    }
    event = ClaudeAdapter().parse(json.dumps(payload))
    assert (event.event, event.source_event, event.is_error, event.error) == (
        "PostToolUse",
        "PostToolUseFailure",
        True,
        "Tool failed: connection refused",
    )
    assert event.tool_key == "recall"
    assert json.loads(ClaudeAdapter().render_injection(event, "fix")) == {
        "decision": "block",
        "reason": "fix",
    }


def test_subagent_tool_events_carry_the_agent() -> None:
    payload = {**BASE, "agent_id": "a1b2", "agent_type": "general-purpose"}
    event = ClaudeAdapter().parse(json.dumps(payload))
    assert (event.agent_kind, event.agent_id, event.parent_session_id) == (
        "subagent",
        "a1b2",
        BASE["session_id"],
    )


def test_wired_events_are_every_lifecycle_event() -> None:
    assert {"SessionStart", "UserPromptSubmit", "PostToolUseFailure", "SessionEnd", "SubagentStart"} <= set(
        ClaudeAdapter.events
    )


def test_session_start_injection_shape() -> None:
    event = ClaudeAdapter().parse((Path(__file__).parent / "payloads" / "SessionStart.json").read_bytes())
    assert json.loads(ClaudeAdapter().render_injection(event, "persona")) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "persona"}
    }


def test_truncated_payload_is_a_clear_error() -> None:
    raw = (Path(__file__).parent / "payloads" / "Stop.json").read_bytes()[:-20]
    with pytest.raises(PayloadError, match="claude: payload is not valid JSON"):
        ClaudeAdapter().parse(raw)


def test_entry_point_registers(settings) -> None:
    pm = make_plugin_manager(environ={})
    rows = {row["name"]: row for row in describe_plugins(pm)}
    assert rows["claude"]["distribution"] == "mkg-claude"
    assert rows["claude"]["hooks"] == [
        "mkg_detect_harness",
        "mkg_register_commands",
        "mkg_register_harness_adapters",
    ]
    host = PluginHost(pm)
    assert isinstance(host.harness_adapter("claude_code"), ClaudeAdapter)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": "/p"}, "claude"),
        ({"CLAUDE_PROJECT_DIR": "/p"}, "claude"),
        ({"CLAUDE_PLUGIN_ROOT": "/x", "CODEX_HOME": "/c"}, None),  # a Claude-format plugin inside Codex
        ({}, None),
    ],
)
def test_detect(environ: dict[str, str], expected: str | None) -> None:
    from mkg_claude import plugin

    assert plugin.mkg_detect_harness(environ) == expected
