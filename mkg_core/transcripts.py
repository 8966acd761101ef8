"""Reading harness transcripts: which tools the assistant called, why, and what came back.

Two formats, told apart record by record:

- Claude Code (``~/.claude/projects/<project>/<session>.jsonl``): ``{"type": "user"|"assistant",
  "message": {"role", "content"}}``, where content is text or a list of ``text``, ``tool_use``
  (``id``, ``name``, ``input``) and ``tool_result`` (``tool_use_id``, ``content``, ``is_error``)
  blocks. One assistant reply is often spread over several records.
- Codex (``~/.codex/sessions/.../rollout-*.jsonl``): ``{"type": "response_item", "payload": ...}``
  records whose payload is a ``message`` (role, ``output_text``/``input_text`` parts), a
  ``function_call`` (``name``, optional ``namespace``, ``arguments`` as JSON text, ``call_id``) or
  a ``function_call_output`` (``call_id``, ``output``).

The rationale of a call is the assistant text said since the last user or tool-result message, up to
the call; calls issued together share it. Unreadable lines are skipped; a missing or unreadable
file reads as no transcript. What is read is scrubbed (private spans, credentials) before anyone
sees it: a transcript never passed through the hook.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .redaction import scrub, scrub_value

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


def read_transcript(path: str | None) -> Transcript | None:
    if not path:
        return None
    try:
        with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_BYTES)
    except OSError:
        return None
    reader = _Reader(Transcript(path))
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            reader.feed(record)
    return _scrubbed(reader.transcript)


def _scrubbed(transcript: Transcript) -> Transcript:
    """A transcript is raw harness output that no hook saw: scrub it like a hook's payload."""
    for call in transcript.calls.values():
        call.input = scrub_value(call.input)
        call.rationale = scrub(call.rationale) if call.rationale else call.rationale
        call.result = scrub_value(call.result) if call.result else call.result  # type: ignore[assignment]
    return transcript


class _Reader:
    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.said: list[str] = []

    def _rationale(self) -> str | None:
        text = "\n".join(part for part in self.said if part).strip()
        return text[:RATIONALE_CHARS] if text else None

    def _call(self, call_id: Any, name: Any, arguments: Any, at: Any) -> None:
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            return
        if call_id in self.transcript.calls:
            return
        self.transcript.calls[call_id] = TranscriptCall(
            call_id,
            name,
            arguments,
            self._rationale(),
            at=at if isinstance(at, str) else None,
            order=len(self.transcript.calls),
        )

    def _result(self, call_id: Any, content: Any, is_error: Any) -> None:
        call = self.transcript.calls.get(call_id) if isinstance(call_id, str) else None
        if call is not None:
            call.result = _text(content)
            call.is_error = bool(is_error) if is_error is not None else call.is_error

    def feed(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if isinstance(message, dict) and record.get("type") in ("user", "assistant"):
            self._claude(record, message)
        elif record.get("type") == "response_item" and isinstance(record.get("payload"), dict):
            self._codex(record, record["payload"])

    def _claude(self, record: dict[str, Any], message: dict[str, Any]) -> None:
        role, content = message.get("role"), message.get("content")
        at = record.get("timestamp")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if role == "user":
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self._result(block.get("tool_use_id"), block.get("content"), block.get("is_error"))
            self.said = []
            return
        if role != "assistant":
            return
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                self.said.append(block["text"].strip())
            elif block.get("type") == "tool_use":
                self._call(block.get("id"), block.get("name"), block.get("input"), at)

    def _codex(self, record: dict[str, Any], payload: dict[str, Any]) -> None:
        kind, at = payload.get("type"), record.get("timestamp")
        if kind == "message":
            role = payload.get("role")
            if role == "assistant":
                self.said.append(_text(payload.get("content")).strip())
            elif role == "user":
                self.said = []
        elif kind in ("function_call", "custom_tool_call"):
            name = payload.get("name")
            namespace = payload.get("namespace")
            if isinstance(name, str) and isinstance(namespace, str) and namespace:
                name = f"{namespace}__{name}"
            raw = payload.get("arguments", payload.get("input"))
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                arguments = raw
            self._call(payload.get("call_id"), name, arguments, at)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = payload.get("output")
            self._result(payload.get("call_id"), output, _codex_failed(output))
            self.said = []


def _codex_failed(output: Any) -> bool | None:
    if isinstance(output, dict) and isinstance(output.get("success"), bool):
        return not output["success"]
    text = output if isinstance(output, str) else ""
    for line in text.splitlines()[:6]:
        if line.startswith("Process exited with code "):
            return line.strip() != "Process exited with code 0"
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(item) for item in value if item is not None)
    if isinstance(value, dict):
        for key in ("text", "content", "output"):
            if key in value:
                return _text(value[key])
        return json.dumps(value, default=str)
    return str(value)
