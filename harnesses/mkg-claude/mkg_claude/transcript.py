"""Claude Code's session transcript (``~/.claude/projects/<project>/<session>.jsonl``).

Records are ``{"type": "user"|"assistant", "message": {"role", "content"}}``, where content is
text or a list of ``text``, ``tool_use`` (``id``, ``name``, ``input``) and ``tool_result``
(``tool_use_id``, ``content``, ``is_error``) blocks. One assistant reply is often spread over
several records.
"""

from __future__ import annotations

from typing import Any

from mkg_core.transcripts import Transcript, TranscriptBuilder, read_jsonl


def read(path: str) -> Transcript | None:
    builder = TranscriptBuilder(path)
    try:
        for record in read_jsonl(path):
            message = record.get("message")
            if isinstance(message, dict) and record.get("type") in ("user", "assistant"):
                _feed(builder, record, message)
    except OSError:
        return None
    return builder.transcript


def _feed(builder: TranscriptBuilder, record: dict[str, Any], message: dict[str, Any]) -> None:
    role, content = message.get("role"), message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    if role == "user":
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                builder.result(block.get("tool_use_id"), block.get("content"), block.get("is_error"))
        builder.user_turn()
        return
    if role != "assistant":
        return
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            builder.say(block["text"])
        elif block.get("type") == "tool_use":
            builder.call(block.get("id"), block.get("name"), block.get("input"), record.get("timestamp"))
