"""Session transcripts: which tools the assistant called, why, and what came back.

Every harness keeps its transcript in a format of its own, so reading one is the harness adapter's
job (:meth:`mkg_core.harness.HarnessAdapter.read_transcript`). This module holds what they share:
the types, :class:`TranscriptBuilder` (the rationale rule), reading JSONL, and the scrubbing that
every transcript gets before anyone sees it (a transcript never passed through the hook).

The rationale of a call is the assistant text said since the last user or tool-result message, up to
the call; calls issued together share it. Unreadable lines are skipped; a missing or unreadable
file reads as no transcript.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .redaction import scrub, scrub_value

if TYPE_CHECKING:
    from .harness import HarnessAdapter

__all__ = ["Transcript", "TranscriptBuilder", "TranscriptCall", "read_jsonl", "read_transcript", "text_of"]

#: Largest transcript read (a longer one is read up to here).
MAX_BYTES = 64 * 1024 * 1024
RATIONALE_CHARS = 1500


@dataclass
class TranscriptCall:
    tool_use_id: str
    name: str
    input: Any = None
    rationale: str | None = None
    result: str | None = None
    is_error: bool | None = None
    at: str | None = None
    order: int = 0


@dataclass
class Transcript:
    path: str
    calls: dict[str, TranscriptCall] = field(default_factory=dict)

    def ordered(self) -> list[TranscriptCall]:
        return sorted(self.calls.values(), key=lambda call: call.order)


def read_transcript(path: str | None, adapter: HarnessAdapter | None) -> Transcript | None:
    """The transcript at ``path`` as ``adapter``'s harness writes it, scrubbed; None when there is
    no path, no adapter, or nothing the adapter can read."""
    if not path or adapter is None:
        return None
    transcript = adapter.read_transcript(path)
    return _scrubbed(transcript) if transcript is not None else None


def read_jsonl(path: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per line; unreadable lines are skipped. Raises
    :class:`OSError` when the file cannot be read."""
    with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as handle:
        text = handle.read(MAX_BYTES)
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


class TranscriptBuilder:
    """Collects calls and results as a harness's reader walks its transcript, and the assistant
    text said before each call (its rationale)."""

    def __init__(self, path: str) -> None:
        self.transcript = Transcript(path)
        self.said: list[str] = []

    def say(self, text: str) -> None:
        """Assistant text, part of the next call's rationale."""
        if text and text.strip():
            self.said.append(text.strip())

    def user_turn(self) -> None:
        """A user message or a tool result: what was said so far belongs to nothing later."""
        self.said = []

    def call(self, call_id: Any, name: Any, arguments: Any, at: Any = None) -> None:
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            return
        if call_id in self.transcript.calls:
            return
        text = "\n".join(self.said).strip()
        self.transcript.calls[call_id] = TranscriptCall(
            call_id,
            name,
            arguments,
            text[:RATIONALE_CHARS] if text else None,
            at=at if isinstance(at, str) else None,
            order=len(self.transcript.calls),
        )

    def result(self, call_id: Any, content: Any, is_error: Any = None) -> None:
        call = self.transcript.calls.get(call_id) if isinstance(call_id, str) else None
        if call is not None:
            call.result = text_of(content)
            call.is_error = bool(is_error) if is_error is not None else call.is_error


def _scrubbed(transcript: Transcript) -> Transcript:
    for call in transcript.calls.values():
        call.input = scrub_value(call.input)
        call.rationale = scrub(call.rationale) if call.rationale else call.rationale
        cleaned = scrub_value(call.result) if call.result else call.result
        call.result = cleaned if isinstance(cleaned, str) or cleaned is None else call.result
    return transcript


def text_of(value: Any) -> str:
    """The text in a message's content: a string, a list of parts, or a ``text`` / ``content`` /
    ``output`` field."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(item) for item in value if item is not None)
    if isinstance(value, dict):
        for key in ("text", "content", "output"):
            if key in value:
                return text_of(value[key])
        return json.dumps(value, default=str)
    return str(value)
