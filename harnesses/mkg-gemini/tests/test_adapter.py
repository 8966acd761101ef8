"""Gemini CLI's adapter: its event names, tool names, injections, transcript, tools and account."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mkg_gemini.adapter import GeminiAdapter
from mkg_gemini.plugin import mkg_detect_harness

from mkg_core.enrichment import tool_kind, tool_namespace
from mkg_core.errors import PayloadError
from mkg_core.identity import resolve_user
from mkg_core.transcripts import read_transcript

HERE = Path(__file__).parent
ADAPTER = GeminiAdapter()


def _payload(event: str, **changes: object) -> dict[str, object]:
    return {**json.loads((HERE / "payloads" / f"{event}.json").read_text()), **changes}


@pytest.mark.parametrize(
    ("native", "event"),
    [("BeforeAgent", "UserPromptSubmit"), ("AfterTool", "PostToolUse"), ("AfterAgent", "Stop"),
     ("BeforeTool", "PreToolUse"), ("PreCompress", "PreCompact"), ("SessionStart", "SessionStart")],
)  # fmt: skip
def test_gemini_events_are_mkg_events(native: str, event: str) -> None:
    parsed = ADAPTER.parse(_payload(native), event)
    assert parsed.event == event and parsed.harness == "gemini"


def test_injections_answer_under_geminis_own_event_name() -> None:
    prompt = ADAPTER.parse(_payload("BeforeAgent"), "UserPromptSubmit")
    answer = json.loads(ADAPTER.render_injection(prompt, "remembered"))
    assert answer == {
        "hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "remembered"}
    }
    start = ADAPTER.parse(_payload("SessionStart"), "SessionStart")
    assert (
        json.loads(ADAPTER.render_injection(start, "x"))["hookSpecificOutput"]["hookEventName"]
        == "SessionStart"
    )
    assert ADAPTER.render_injection(prompt, "  ") == ""


def test_mcp_tool_names_reduce_to_their_keys() -> None:
    assert ADAPTER.tool_key("mcp_mkg_neo4j_read_cypher") == "neo4j_read_cypher"
    assert ADAPTER.tool_key("run_shell_command") == "run_shell_command"
    assert ADAPTER.tool_key("mcp__mkg__x") == "x" and ADAPTER.tool_key("  ") is None
    assert tool_namespace("mcp_mkg_project_add_learning", "project_add_learning") == "mkg"
    assert [tool_kind(n, ADAPTER) for n in ("run_shell_command", "write_file", "read_file", "web_fetch")] == [
        "shell", "filesystem_write", "filesystem_read", "web",
    ]  # fmt: skip


def test_the_turns_answer_becomes_the_last_assistant_message() -> None:
    stop = ADAPTER.parse(_payload("AfterAgent"), "Stop")
    assert stop.last_assistant_message == "Done: the tool said echo."


def test_the_prompt_is_the_users_words_without_the_session_start_context() -> None:
    """A headless Gemini CLI puts what SessionStart hooks said before the first prompt."""
    said = "<hook_context>You work with a persistent memory.</hook_context>\n\nWhich cluster is staging?"
    assert ADAPTER.parse(_payload("BeforeAgent", prompt=said), "UserPromptSubmit").prompt == (
        "Which cluster is staging?"
    )
    own = "Why does <hook_context> appear in my logs?"
    assert ADAPTER.parse(_payload("BeforeAgent", prompt=own), "UserPromptSubmit").prompt == own


def test_a_malformed_payload_is_a_clear_error() -> None:
    with pytest.raises(PayloadError, match="session_id"):
        ADAPTER.parse({"hook_event_name": "BeforeAgent"}, "UserPromptSubmit")


def test_the_transcript_gives_the_call_its_rationale_and_result() -> None:
    path = next((HERE / "session").glob("*.jsonl"))
    transcript = read_transcript(str(path), ADAPTER)
    assert transcript is not None
    [call] = transcript.ordered()
    assert (call.name, call.input) == ("mcp_echo_echo", {"text": "hi from model"})
    assert "echo: hi from model" in (call.result or "") and call.is_error is False


def test_the_harness_is_detected_and_its_account_is_the_user(tmp_path: Path) -> None:
    assert mkg_detect_harness({"GEMINI_PROJECT_DIR": "/x"}) == "gemini"
    assert mkg_detect_harness({"CLAUDE_PROJECT_DIR": "/x"}) is None
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "google_accounts.json").write_text(
        json.dumps({"active": "Gem@Example.com", "old": []})
    )
    user = resolve_user({"HOME": str(tmp_path)}, client="gemini", adapters=[ADAPTER])
    assert (user.id, user.source) == ("gem@example.com", "gemini")
