"""Codex's session transcript (``~/.codex/sessions/.../rollout-*.jsonl``).

Records are ``{"type": "response_item", "payload": ...}`` whose payload is a ``message`` (role,
``output_text``/``input_text`` parts), a ``function_call`` (``name``, optional ``namespace``,
``arguments`` as JSON text, ``call_id``) or a ``function_call_output`` (``call_id``, ``output``).
"""

from __future__ import annotations

import json
from typing import Any

from mkg_core.transcripts import Transcript, TranscriptBuilder, read_jsonl, text_of


def read(path: str) -> Transcript | None:
    builder = TranscriptBuilder(path)
    try:
        for record in read_jsonl(path):
            if record.get("type") == "response_item" and isinstance(record.get("payload"), dict):
                _feed(builder, record, record["payload"])
    except OSError:
        return None
    return builder.transcript


def _feed(builder: TranscriptBuilder, record: dict[str, Any], payload: dict[str, Any]) -> None:
    kind, at = payload.get("type"), record.get("timestamp")
    if kind == "message":
        role = payload.get("role")
        if role == "assistant":
            builder.say(text_of(payload.get("content")))
        elif role == "user":
            builder.user_turn()
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
        builder.call(payload.get("call_id"), name, arguments, at)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        builder.result(payload.get("call_id"), output, failed(output))
        builder.user_turn()


def failed(output: Any) -> bool | None:
    """Whether a call's output says it failed (``success: false``, or a non-zero exit code)."""
    if isinstance(output, dict) and isinstance(output.get("success"), bool):
        return not output["success"]
    text = output if isinstance(output, str) else ""
    for line in text.splitlines()[:6]:
        if line.startswith("Process exited with code "):
            return line.strip() != "Process exited with code 0"
    return None
