"""What enrichment derives: turns, their tool calls and the resources a call touched, and what a
tool is (its harness-independent key, kind and MCP server)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..events import tool_key
from ..timeframes import aware

if TYPE_CHECKING:
    from ..harness import HarnessAdapter

EARLIEST = datetime.min.replace(tzinfo=UTC)


@dataclass
class Resource:
    type: str
    value: str
    role: str = "read"
    text: str | None = None

    @property
    def id(self) -> str:
        if self.type == "query":
            return f"resource:query:{digest(self.value)}"
        return f"resource:{self.type}:{self.value}"


@dataclass
class Call:
    id: str
    session_id: str
    tool_name: str
    tool_use_id: str | None = None
    input: Any = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    pre_event: str | None = None
    post_event: str | None = None
    response: Any = None
    error: str | None = None
    failed: bool | None = None
    rationale: str | None = None
    agent_id: str | None = None
    cwd: str | None = None
    source: str = "hooks"


@dataclass
class Turn:
    id: str
    session_id: str
    index: int
    turn_id: str | None = None
    prompt: str | None = None
    started_at: datetime | None = None
    prompt_event: str | None = None
    calls: list[Call] = field(default_factory=list)


@dataclass
class Projection:
    session_id: str
    turns: list[Turn]
    event_count: int
    transcript: str | None = None

    @property
    def calls(self) -> list[Call]:
        return [call for turn in self.turns for call in turn.calls]


def digest(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:16]


def when(value: Any) -> datetime | None:
    """Event timestamps (Neo4j DateTime) and transcript ones (ISO text) as aware datetimes."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return aware(value)


def decode(value: Any) -> Any:
    """A stored JSON object or list back as data; anything else as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def key_of(name: str, adapter: HarnessAdapter | None = None) -> str:
    """The harness-independent tool key (see :meth:`mkg_core.harness.HarnessAdapter.tool_key`)."""
    return (adapter.tool_key(name) if adapter else tool_key(name)) or name


def tool_kind(name: str, adapter: HarnessAdapter | None = None) -> str:
    """What a tool does, as its harness says (``shell``, ``filesystem_read``, ``filesystem_write``,
    ``web``); ``mcp`` for an MCP server's tool, else ``tool``."""
    key = key_of(name, adapter)
    kind = adapter.tool_kind(key) if adapter else None
    if kind:
        return kind
    return "mcp" if tool_namespace(name, key) else "tool"


def tool_namespace(name: str, key: str | None = None) -> str | None:
    """The MCP server a tool belongs to, from the part of its name before its key
    (``mcp__meta-knowledge-graph__x``, ``mcp_meta-knowledge-graph_x`` -> ``meta-knowledge-graph``;
    ``mcp__plugin_<plugin>_mkg__x`` -> ``mkg``); None for built-in tools."""
    key = key or key_of(name)
    prefix = name[: len(name) - len(key)].strip("_") if key and key != name and name.endswith(key) else ""
    if not prefix.lower().startswith("mcp"):
        return None
    middle = prefix[3:].strip("_")
    return (middle.split("_")[-1] if middle.startswith("plugin_") else middle) or None
