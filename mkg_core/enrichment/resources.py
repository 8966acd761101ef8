"""What a tool call touched, from its input: files, URLs, queries and the tables they name."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .model import Call, Resource, key_of, tool_kind

if TYPE_CHECKING:
    from ..harness import HarnessAdapter

INPUT_CHARS = 2000
MAX_RESOURCES = 8
_FILE_KEYS = ("file_path", "path", "notebook_path", "filePath", "filename")
_FILE_LIKE = re.compile(
    r"^[\w./~-]+\.(py|md|json|toml|ya?ml|txt|csv|tsv|ts|tsx|js|jsx|sql|cypher|sh|cfg|ini|lock|html|css|rs|go|java)$"
)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(`[^`]+`|[A-Za-z_][\w.$-]*)", re.I)


def resources(
    call: Call, query_languages: Mapping[str, str] | None = None, adapter: HarnessAdapter | None = None
) -> list[Resource]:
    """What a call touched, from its input: files, URLs, queries and the tables they name."""
    found: list[Resource] = []
    data = call.input if isinstance(call.input, dict) else {}
    key = key_of(call.tool_name, adapter)
    kind = tool_kind(call.tool_name, adapter)
    role = "write" if kind == "filesystem_write" else "read"
    for name in _FILE_KEYS:
        if isinstance(data.get(name), str) and data[name].strip():
            found.append(Resource("file", _absolute(data[name].strip(), call.cwd), role))
    if kind == "filesystem_write" and isinstance(data.get("input") or data.get("patch"), str):
        for path in _PATCH_FILE.findall(data.get("input") or data.get("patch") or ""):
            found.append(Resource("file", _absolute(path.strip(), call.cwd), "write"))
    if kind == "shell":
        command = data.get("command", data.get("cmd"))
        for token in _command_tokens(command)[1:]:
            if not token.startswith("-") and ("/" in token or _FILE_LIKE.match(token)) and "://" not in token:
                found.append(Resource("file", _absolute(token, call.cwd), "read"))
    for name in ("url", "uri"):
        if isinstance(data.get(name), str) and "://" in data[name]:
            found.append(Resource("url", data[name].strip()))
    language = (query_languages or {}).get(key) or _language_of(key)
    query = data.get("query")
    if language and isinstance(query, str) and query.strip():
        found.append(Resource("query", query.strip(), text=query.strip()[:INPUT_CHARS]))
        if language == "sql":
            for table in _SQL_TABLE.findall(query):
                found.append(Resource("table", table.strip("`")))
    unique: dict[str, Resource] = {}
    for resource in found:
        unique.setdefault(resource.id, resource)
    return list(unique.values())[:MAX_RESOURCES]


def _language_of(key: str) -> str | None:
    lowered = key.lower()
    if "cypher" in lowered:
        return "cypher"
    if "sql" in lowered or "bigquery" in lowered:
        return "sql"
    return None


def _command_tokens(command: Any) -> list[str]:
    if isinstance(command, list):
        tokens = [str(t) for t in command]
        if len(tokens) >= 3 and tokens[1] in ("-c", "-lc"):  # ["bash", "-lc", "cat x"]
            return _command_tokens(tokens[2])
        return tokens
    if not isinstance(command, str):
        return []
    try:
        return shlex.split(command)[:64]
    except ValueError:
        return command.split()[:64]


def _absolute(path: str, cwd: str | None) -> str:
    if path.startswith(("/", "~")) or not cwd:
        return path
    return f"{cwd.rstrip('/')}/{path.removeprefix('./')}"
