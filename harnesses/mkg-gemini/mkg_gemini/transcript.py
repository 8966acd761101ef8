"""Gemini CLI's session transcript (``~/.gemini/tmp/<project>/chats/session-*.jsonl``).

A header line (``sessionId``, ``projectHash``, ``kind``), then message records ``{"id",
"timestamp", "type": "user"|"gemini", "content", ...}`` and ``{"$set": ...}`` patches. A message is
written again as it grows (a reply, then the same reply with its ``toolCalls``), so the last record
of each id counts, in the order the ids first appeared. A ``toolCalls`` entry holds the call
(``id``, ``name``, ``args``), its ``status`` and its ``result`` (``functionResponse`` parts).
"""

from __future__ import annotations

from typing import Any

from mkg_core.transcripts import Transcript, TranscriptBuilder, read_jsonl, text_of


def read(path: str) -> Transcript | None:
    messages: dict[str, dict[str, Any]] = {}
    try:
        for record in read_jsonl(path):
            if isinstance(record.get("id"), str) and record.get("type") in ("user", "gemini"):
                messages[record["id"]] = record  # a later version of a message replaces it in place
    except OSError:
        return None
    builder = TranscriptBuilder(path)
    for message in messages.values():
        if message["type"] == "user":
            for part in _parts(message.get("content")):
                response = part.get("functionResponse")
                if isinstance(response, dict):
                    builder.result(response.get("id"), _output(response))
            builder.user_turn()
            continue
        builder.say(text_of(message.get("content")))
        for call in message.get("toolCalls") or []:
            if not isinstance(call, dict):
                continue
            builder.call(call.get("id"), call.get("name"), call.get("args"), message.get("timestamp"))
            for part in _parts(call.get("result")):
                response = part.get("functionResponse")
                if isinstance(response, dict):
                    builder.result(
                        call.get("id"), _output(response), call.get("status") not in (None, "success")
                    )
    return builder.transcript


def _parts(value: Any) -> list[dict[str, Any]]:
    return [part for part in value if isinstance(part, dict)] if isinstance(value, list) else []


def _output(response: dict[str, Any]) -> Any:
    body = response.get("response")
    if isinstance(body, dict):
        return body.get("output", body.get("error", body))
    return body
