"""A tool's answer with the harness's wrapping taken off. Standard library only.

Harnesses hand a tool's result to hooks in their own envelopes: JSON inside strings, MCP content
blocks with ``isError`` and ``structuredContent``, ``{"result": ...}`` wrappers, and, for a large
result, a notice that it was saved to a file. :func:`unwrap` takes all of that apart once, for
every consumer (query-failure capture, enrichment, provider ingestion). :func:`response_text` is
the short readable form (an error message, a summary line) and :func:`is_error_response` the
MCP ``isError`` flag, which adapters read when they normalise an event.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .redaction import scrub_value

__all__ = ["Response", "is_error_response", "response_text", "unwrap"]

#: Longest JSON text kept of one structured value.
EXCERPT_CHARS = 4000
#: Most of a saved result that is read back.
SAVED_FILE_BYTES = 8 * 1024 * 1024

#: A harness notice that a large result was written to a file instead of shown.
_SAVED_TO_FILE = re.compile(
    r"(?:saved|written|persisted|stored)\s+(?:to|at|in)(?:\s+file)?\s*:?\s*[`'\"]?(?P<path>(?:~|/)[^\s`'\"<>]+)",
    re.IGNORECASE,
)


@dataclass
class Response:
    """A tool result with the harness's wrapping taken off."""

    data: Any = None  # the innermost structured value (rows), when there is one
    texts: list[str] = field(default_factory=list)
    is_error: bool = False
    saved_file: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(t for t in self.texts if t)


def unwrap(value: Any, error: str | None = None) -> Response:
    """Take a harness tool response apart: JSON in strings, content blocks, result envelopes."""
    response = Response()
    _walk(value, response, 0)
    if error:
        response.is_error = True
        response.texts.insert(0, error)
    if response.saved_file is not None:
        saved = _read_saved(response.saved_file)
        if saved is not None:
            inner = unwrap(saved)
            response.data = inner.data if inner.data is not None else response.data
            response.texts.extend(inner.texts)
            response.is_error = response.is_error or inner.is_error
    return response


def _walk(value: Any, out: Response, depth: int) -> None:
    if depth > 12 or value is None:
        return
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                _walk(json.loads(stripped), out, depth + 1)
                return
            except ValueError:
                pass
        if stripped:
            out.texts.append(stripped)
            match = _SAVED_TO_FILE.search(stripped)
            if match and out.saved_file is None:
                out.saved_file = match.group("path").rstrip(".,;:)")
        return
    if isinstance(value, list):
        blocks = [b for b in value if isinstance(b, dict) and b.get("type") == "text" and "text" in b]
        if value and len(blocks) == len(value):  # MCP content blocks
            for block in blocks:
                _walk(block["text"], out, depth + 1)
            return
        if out.data is None:
            out.data = value
        out.texts.append(json.dumps(value, default=str)[:EXCERPT_CHARS])
        return
    if isinstance(value, dict):
        if value.get("isError") is True or value.get("is_error") is True:
            out.is_error = True
        if "content" in value and isinstance(value["content"], list):  # an MCP CallToolResult
            structured = value.get("structuredContent") or value.get("structured_content")
            if structured is not None:
                _walk(structured, out, depth + 1)
            _walk(value["content"], out, depth + 1)
            return
        if set(value) <= {"result", "type"} and "result" in value:  # a {"result": ...} envelope
            _walk(value["result"], out, depth + 1)
            return
        for key in ("error", "errors"):
            if value.get(key):
                out.is_error = True
                detail = value[key]
                message = detail.get("message") if isinstance(detail, dict) else detail
                _walk(message if message else json.dumps(detail, default=str), out, depth + 1)
        if out.data is None:
            out.data = value
        out.texts.append(json.dumps(value, default=str)[:EXCERPT_CHARS])
        return
    out.texts.append(json.dumps(value, default=str))


def _read_saved(path: str) -> str | None:
    """The result a harness saved to a file, scrubbed: no hook saw what is on disk."""
    full = os.path.expanduser(path)
    try:
        with open(full, encoding="utf-8", errors="replace") as handle:
            text = handle.read(SAVED_FILE_BYTES)
    except OSError:
        return None
    cleaned = scrub_value(text)
    return cleaned if isinstance(cleaned, str) else text


def is_error_response(value: Any) -> bool:
    """True for an MCP tool result (dict, or JSON text of one) whose ``isError`` is exactly true."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, Mapping) and value.get("isError") is True


def response_text(value: Any, limit: int = 2000) -> str:
    """The human-readable text inside a tool response or error, whitespace collapsed, bounded.

    Accepts strings (JSON text is decoded), MCP content blocks, and nested ``text`` / ``error`` /
    ``message`` / ``content`` / ``result`` shapes.
    """
    parts: list[str] = []
    _collect_text(value, parts, depth=0)
    text = " ".join(" ".join(parts).split())
    if len(text) > limit:
        text = text[: max(limit - 3, 0)] + "..."
    return text


def _collect_text(value: Any, parts: list[str], depth: int) -> None:
    if depth > 8 or value is None:
        return
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                decoded = json.loads(stripped)
            except ValueError:
                decoded = None
            if isinstance(decoded, (dict, list)):
                _collect_text(decoded, parts, depth + 1)
                return
        if stripped:
            parts.append(stripped)
        return
    if isinstance(value, Mapping):
        for key in ("text", "error", "message"):
            item = value.get(key)
            if isinstance(item, str) and item.strip():
                parts.append(item.strip())
                return
        for key in ("content", "result", "structuredContent"):
            if key in value:
                _collect_text(value[key], parts, depth + 1)
                return
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _collect_text(item, parts, depth + 1)
        return
    parts.append(str(value))
