"""The shared adapter logic on synthetic edge cases: bad input gives a clear PayloadError, never a crash."""

from __future__ import annotations

import json
import os

import pytest

from mkg_core.errors import PayloadError
from mkg_core.events import canonical_event_name, is_error_response, response_text, tool_key
from mkg_core.harness import HarnessAdapter


class Toy(HarnessAdapter):
    name = "toy"


ADAPTER = Toy()
BASE = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/tmp/p", "prompt": "hi"}


def parse(payload: object, event: str | None = None):
    raw = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    return ADAPTER.parse(raw, event)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(b"", "empty payload", id="empty"),
        pytest.param(b"   \n", "empty payload", id="blank"),
        pytest.param(b"{not json", "payload is not valid JSON", id="invalid-json"),
        pytest.param(b"[1, 2]", "payload must be a JSON object, got an array", id="array"),
        pytest.param(b"42", "payload must be a JSON object, got a number", id="number"),
        pytest.param(b"\xff\xfe\x00garbage\x80", "payload is not UTF-8 text", id="binary"),
        pytest.param(
            json.dumps({"hook_event_name": "Stop"}).encode(),
            "the payload has no session_id",
            id="missing-session",
        ),
        pytest.param(json.dumps({"session_id": "s"}).encode(), "no event name", id="missing-event"),
        pytest.param(
            json.dumps({**BASE, "cwd": ["a"]}).encode(),
            "field 'cwd' must be a string, got an array",
            id="wrong-type",
        ),
        pytest.param(
            json.dumps({**BASE, "session_id": {"x": 1}}).encode(),
            "field 'session_id' must be a string",
            id="session-object",
        ),
        pytest.param(
            json.dumps({**BASE, "hook_event_name": "rm -rf /"}).encode(),
            "invalid event name",
            id="bad-event-name",
        ),
    ],
)
def test_malformed_payloads_raise_a_clear_error(raw: bytes, reason: str) -> None:
    with pytest.raises(PayloadError) as info:
        ADAPTER.parse(raw)
    assert reason in info.value.reason
    assert str(info.value).startswith("toy: ")
    assert "\n" not in str(info.value)


def test_random_garbage_never_crashes() -> None:
    rng = __import__("random").Random(7)
    for _ in range(300):
        raw = (
            os.urandom(rng.randint(0, 64))
            if rng.random() < 0.5
            else json.dumps(
                {
                    rng.choice([*BASE, "tool_name", "agent_id", "error"]): rng.choice(
                        [None, 1, [], {}, "x", True]
                    )
                    for _ in range(4)
                }
            ).encode()
        )
        try:
            ADAPTER.parse(raw, "Stop")
        except PayloadError:
            pass


def test_huge_payload_parses() -> None:
    blob = "x" * (50 * 1024 * 1024)
    event = parse({**BASE, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_response": blob})
    assert len(event.tool_response) == len(blob)


def test_event_name_from_argument_when_missing_in_payload() -> None:
    event = parse({"session_id": 7}, "sessionstart")
    assert (event.event, event.session_id) == ("SessionStart", "7")


def test_payload_event_name_wins_over_argument() -> None:
    assert parse(BASE, "Stop").event == "UserPromptSubmit"


def test_unknown_event_names_are_kept() -> None:
    assert parse({**BASE, "hook_event_name": "TaskCompleted"}).event == "TaskCompleted"
    assert canonical_event_name("posttooluse") == "PostToolUse"


def test_fields_and_raw_payload_are_kept() -> None:
    event = parse({**BASE, "extra": {"k": 1}})
    assert (event.prompt, event.cwd, event.harness, event.agent_kind) == ("hi", "/tmp/p", "toy", "main")
    assert event.raw["extra"] == {"k": 1}
    with pytest.raises(TypeError):
        event.raw["extra"] = 2  # type: ignore[index]


def test_failure_normalization() -> None:
    event = parse(
        {
            **BASE,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "mcp__x__neo4j_read_cypher",
            "tool_input": {"query": "MATCH"},
            "error": {"code": "Neo.ClientError"},
            "is_interrupt": True,
        }
    )
    assert (event.event, event.source_event, event.is_error, event.is_interrupt) == (
        "PostToolUse",
        "PostToolUseFailure",
        True,
        True,
    )
    assert event.error == '{"code": "Neo.ClientError"}'
    assert event.tool_response == {"content": [{"type": "text", "text": event.error}], "isError": True}
    assert event.tool_key == "neo4j_read_cypher"


def test_mcp_error_envelope_in_post_tool_use_is_an_error() -> None:
    response = {"content": [{"type": "text", "text": "Invalid input 'MATC'"}], "isError": True}
    event = parse({**BASE, "hook_event_name": "PostToolUse", "tool_name": "x", "tool_response": response})
    assert event.is_error and event.error == "Invalid input 'MATC'"
    assert not parse({**BASE, "hook_event_name": "PostToolUse", "tool_response": {"isError": False}}).is_error


def test_subagent_identity() -> None:
    inner = parse({**BASE, "hook_event_name": "PreToolUse", "agent_id": "agent-9", "agent_type": "Explore"})
    assert (inner.agent_kind, inner.agent_id, inner.parent_session_id, inner.agent_type) == (
        "subagent",
        "agent-9",
        "s-1",
        "Explore",
    )
    start = parse({**BASE, "hook_event_name": "SubagentStart", "agent_id": "agent-9"})
    assert (start.agent_kind, start.agent_id) == ("main", "agent-9")  # recorded on the parent timeline


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("mcp__meta-knowledge-graph__neo4j_read_cypher", "neo4j_read_cypher"),
        ("mcp__plugin_meta-knowledge-graph_meta-knowledge-graph__neo4j_read_cypher", "neo4j_read_cypher"),
        ("mcp__meta_knowledge_graph__neo4j_read_cypher", "neo4j_read_cypher"),
        ("MCP__srv__tool", "tool"),
        ("Bash", "Bash"),
        ("  ", None),
        (None, None),
        ("mcp__solo", "mcp__solo"),
    ],
)
def test_tool_key(name: str | None, key: str | None) -> None:
    assert tool_key(name) == key


def test_response_text_unwraps_harness_shapes() -> None:
    assert response_text('{"result": "ok"}') == "ok"
    assert (
        response_text({"content": [{"type": "text", "text": "a  b"}, {"type": "text", "text": "c"}]})
        == "a b c"
    )
    assert response_text("x" * 50, limit=10) == "xxxxxxx..."
    assert is_error_response('{"isError": true}') and not is_error_response("isError")


def test_render_injection() -> None:
    event = parse(BASE)
    assert json.loads(ADAPTER.render_injection(event, "remember tea")) == {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "remember tea"}
    }
    assert json.loads(ADAPTER.render_injection("PostToolUseFailure", "try MATCH")) == {
        "decision": "block",
        "reason": "try MATCH",
    }
    assert ADAPTER.render_injection("SessionStart", "  ") == ""
