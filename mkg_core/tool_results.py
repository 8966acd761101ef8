"""A tool's answer with the harness's wrapping taken off. Standard library only.

Harnesses hand a tool's result to hooks in their own envelopes: JSON inside strings, MCP content
blocks with ``isError`` and ``structuredContent``, ``{"result": ...}`` wrappers, and, for a large
result, a notice that it was saved to a file. :func:`unwrap` takes all of that apart once, for
every consumer (query-failure capture, enrichment, provider ingestion).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from .redaction import scrub_value

__all__ = ["Response", "unwrap"]

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
