"""A session's events in order, and its transcript, as turns and tool calls."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..tool_results import is_error_response
from ..transcripts import Transcript, TranscriptCall
from .model import EARLIEST, Call, Projection, Turn, decode, when

TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})


def derive(session_id: str, events: list[Mapping[str, Any]], transcript: Transcript | None) -> Projection:
    """Turns and calls of one session, from its events in order and its transcript."""
    builder = _SessionBuilder(session_id)
    for event in events:
        builder.add(event)
    if transcript is not None:
        # A subagent's events may name its parent's transcript: take rationales by call id from it,
        # but never the parent's other calls.
        subagent = any(event.get("agent_id") for event in events)
        builder.merge_transcript(transcript, add_missing=not subagent)
    path = transcript.path if transcript is not None else None
    return Projection(session_id, builder.turns, len(events), path)


class _SessionBuilder:
    """The turns of one session as its events arrive: prompts open turns, a PreToolUse starts a
    call, its PostToolUse (matched by tool-use id, else by tool and input) finishes it."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.turns: list[Turn] = []
        self.by_turn_id: dict[str, Turn] = {}
        self.pending: list[Call] = []  # started, not yet finished
        self.calls_by_use_id: dict[str, Call] = {}

    def new_turn(self, turn_id: str | None, at: datetime | None) -> Turn:
        turn = Turn(
            id=f"turn:{self.session_id}:{turn_id or len(self.turns) + 1}",
            session_id=self.session_id,
            index=len(self.turns) + 1,
            turn_id=turn_id,
            started_at=at,
        )
        self.turns.append(turn)
        if turn_id:
            self.by_turn_id[turn_id] = turn
        return turn

    def current(self, turn_id: str | None, at: datetime | None) -> Turn:
        """The turn an event belongs to: by its turn id, else the latest (a first one if none)."""
        if turn_id:
            return self.by_turn_id.get(turn_id) or self.new_turn(turn_id, at)
        return self.turns[-1] if self.turns else self.new_turn(None, at)

    def add(self, event: Mapping[str, Any]) -> None:
        name = event.get("event_name")
        at = when(event.get("timestamp"))
        if name == "UserPromptSubmit":
            self.prompt(event, at)
        elif name in TOOL_EVENTS and event.get("tool_name"):
            tool_input = decode(event.get("tool_input"))
            if name == "PreToolUse":
                call = self.start(event, at, tool_input)
                call.pre_event = event.get("event_id")
                self.pending.append(call)
            else:
                self.finish(event, at, tool_input)

    def prompt(self, event: Mapping[str, Any], at: datetime | None) -> None:
        turn_id = event.get("turn_id")
        turn = (self.by_turn_id.get(turn_id) if turn_id else None) or self.new_turn(turn_id, at)
        turn.prompt = turn.prompt or event.get("prompt")
        turn.prompt_event = turn.prompt_event or event.get("event_id")

    def start(self, event: Mapping[str, Any], at: datetime | None, tool_input: Any) -> Call:
        """The call an event begins: its PreToolUse, or a finish whose start never arrived."""
        use_id = event.get("tool_use_id")
        call = Call(
            id=f"toolcall:{self.session_id}:{use_id or event.get('event_id')}",
            session_id=self.session_id,
            tool_name=str(event["tool_name"]),
            tool_use_id=use_id,
            input=tool_input,
            started_at=at,
            agent_id=event.get("agent_id"),
            cwd=event.get("cwd"),
        )
        self.current(event.get("turn_id"), at).calls.append(call)
        if use_id:
            self.calls_by_use_id[use_id] = call
        return call

    def finish(self, event: Mapping[str, Any], at: datetime | None, tool_input: Any) -> None:
        use_id = event.get("tool_use_id")
        found = self.calls_by_use_id.get(use_id) if use_id else None
        if found is None or found.post_event is not None:
            found = next(
                (c for c in self.pending if c.tool_name == event["tool_name"] and c.input == tool_input), None
            )
        if found is None:  # a finish whose start was lost
            found = self.start(event, at, tool_input)
        if found in self.pending:
            self.pending.remove(found)
        found.ended_at = at
        found.post_event = event.get("event_id")
        found.response = event.get("tool_response")
        found.error = event.get("error")
        found.failed = (
            bool(event.get("tool_error"))
            or event.get("event_name") == "PostToolUseFailure"
            or is_error_response(found.response)
        )

    def merge_transcript(self, transcript: Transcript, *, add_missing: bool = True) -> None:
        """Rationales and results from the transcript; with ``add_missing``, the calls the hooks
        missed too, in the turn that was under way when they were made."""
        for item in transcript.ordered():
            call = self.calls_by_use_id.get(item.tool_use_id)
            if call is None and not add_missing:
                continue
            if call is None:
                call = _from_transcript(self.session_id, item)
                at = call.started_at
                target = _turn_at(self.turns, at) if self.turns else self.current(None, at)
                target.calls.append(call)
                target.calls.sort(key=lambda c: c.started_at or EARLIEST)
                self.calls_by_use_id[item.tool_use_id] = call
            call.rationale = call.rationale or item.rationale
            if call.response is None and item.result is not None:
                call.response = item.result
            if call.failed is None and item.is_error is not None:
                call.failed = item.is_error


def _from_transcript(session_id: str, item: TranscriptCall) -> Call:
    return Call(
        id=f"toolcall:{session_id}:{item.tool_use_id}",
        session_id=session_id,
        tool_name=item.name,
        tool_use_id=item.tool_use_id,
        input=item.input,
        started_at=when(item.at),
        response=item.result,
        failed=item.is_error,
        source="transcript",
    )


def _turn_at(turns: list[Turn], at: datetime | None) -> Turn:
    """The last turn that started at or before ``at`` (transcript and hook clocks are both UTC)."""
    chosen = turns[0]
    for turn in turns:
        if at is None or turn.started_at is None or turn.started_at <= at:
            chosen = turn
    return chosen
