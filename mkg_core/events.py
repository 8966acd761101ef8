"""The normalized hook event every harness adapter produces.

Standard library only: the hook fast path imports this module.

Harnesses differ in how they name events, spell MCP tool names and report failures. Adapters
(contributed by harness packages) translate a raw payload into one :class:`HookEvent`, so the
worker, the capture handlers and recall never look at harness-specific shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .eventnames import ANSWERING_EVENTS, EVENT_NAMES, canonical_event_name, tool_key
from .tool_results import is_error_response, response_text, unwrap

__all__ = [
    "ANSWERING_EVENTS",
    "EVENT_NAMES",
    "HookEvent",
    "canonical_event_name",
    "is_error_response",
    "response_text",
    "tool_key",
    "tool_result",
]


def tool_result(event: HookEvent) -> Any:
    """A tool event's answer with the harness's wrapping taken off (JSON in strings, MCP content
    blocks, ``{"result": ...}`` envelopes, an oversized answer saved to a file): the innermost
    structured value, else the text. None for a failed call."""
    response = unwrap(event.tool_response)
    if event.is_error or response.is_error:
        return None
    return response.data if response.data is not None else (response.text or None)


@dataclass(frozen=True)
class HookEvent:
    """One lifecycle event, the same shape whichever harness sent it.

    ``event`` is canonical: a Claude Code ``PostToolUseFailure`` becomes ``PostToolUse`` with
    ``source_event='PostToolUseFailure'`` and ``is_error=True``, so both harnesses converge.
    ``agent_kind`` is ``'subagent'`` when the event came from inside a subagent; then
    ``agent_id`` names it and ``session_id`` is the parent session the harness reported.
    """

    harness: str
    event: str
    session_id: str
    source_event: str
    cwd: str | None = None
    transcript_path: str | None = None
    source: str | None = None
    prompt: str | None = None
    turn_id: str | None = None
    model: str | None = None
    tool_name: str | None = None
    tool_key: str | None = None
    tool_use_id: str | None = None
    tool_input: Any = None
    tool_response: Any = None
    is_error: bool = False
    error: str | None = None
    is_interrupt: bool = False
    agent_kind: str = "main"
    agent_id: str | None = None
    agent_type: str | None = None
    parent_session_id: str | None = None
    spawned_agent_id: str | None = None
    last_assistant_message: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw", MappingProxyType(dict(self.raw)))

    @property
    def is_subagent(self) -> bool:
        return self.agent_kind == "subagent"

    def summary(self) -> dict[str, Any]:
        """The event's fields without the raw payload, for logs and tests."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "raw"}
