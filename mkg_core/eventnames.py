"""The lifecycle event names MKG knows, and the hook output that adds context to one. Standard
library only, and cheap: the hook imports it."""

from __future__ import annotations

import json
import re

#: Every lifecycle event MKG knows, in the order a session usually sees them.
EVENT_NAMES: tuple[str, ...] = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Stop",
    "SessionEnd",
)

#: Events whose hook must answer the harness (recall injects memory into them).
ANSWERING_EVENTS: frozenset[str] = frozenset({"SessionStart", "UserPromptSubmit"})
#: Events that wait for an answer only for the tools the worker lists (query tools: a failed query
#: gets the known fix for its error).
TOOL_ANSWERING_EVENTS: frozenset[str] = frozenset({"PostToolUse", "PostToolUseFailure"})

_BY_LOWER = {name.lower(): name for name in EVENT_NAMES}
_EVENT_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


def canonical_event_name(name: str) -> str | None:
    """Return the canonical spelling of an event name, or None when it is not a plausible name.

    Known events match case-insensitively (``sessionstart`` -> ``SessionStart``); an unknown but
    well-formed name (a harness may add events) is kept as given.
    """
    name = name.strip()
    if not _EVENT_NAME_RE.match(name):
        return None
    return _BY_LOWER.get(name.lower(), name)


def context_output(event_name: str, text: str) -> str:
    """The hook's stdout that adds ``text`` as context to the event named ``event_name`` (as the
    harness names it): the ``hookSpecificOutput`` that Claude Code, Codex and Gemini CLI read."""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}, ensure_ascii=False
    )


def tool_key(tool_name: str | None) -> str | None:
    """Reduce a harness tool name to the harness-independent tool key.

    MCP tools are spelt differently by every harness and install mode
    (``mcp__meta-knowledge-graph__neo4j_read_cypher``,
    ``mcp__plugin_meta-knowledge-graph_meta-knowledge-graph__neo4j_read_cypher``,
    ``mcp__meta_knowledge_graph__neo4j_read_cypher``); all map to the part after the last ``__``.
    Built-in tools (``Bash``, ``Edit``) keep their name.
    """
    if tool_name is None:
        return None
    name = tool_name.strip()
    if not name:
        return None
    if name[:5].lower() == "mcp__":
        rest = name[5:]
        if "__" in rest:
            return rest.rsplit("__", 1)[1] or None
    return name
