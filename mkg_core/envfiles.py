"""Where MKG's files live, and which ``.env`` file is read. Standard library only.

One resolution for the hook, the worker, the MCP server and the CLI. The first existing file
wins, and only that one is read:

1. ``$MKG_ENV_FILE``
2. ``<project root>/.mkg.env``: a project opts in to settings of its own with this file, read
   once the user trusts it (``mkg trust``, which records the file's SHA-256)
3. ``<config dir>/.env``, where the config dir is ``$MKG_CONFIG_DIR``, else
   ``$XDG_CONFIG_HOME/meta-knowledge-graph``, else ``~/.config/meta-knowledge-graph``.

A project's own ``.env`` is never read: it belongs to the project's application, and its
``NEO4J_URI`` or ``OPENAI_API_KEY`` would quietly send MKG's memory and LLM spend there. A
``.mkg.env`` comes with the repository too, from whoever wrote it: until the user has read it and
trusted it (and again whenever it changes), it is not read either, or any cloned repository could
point MKG, and everything it captures, at another database or an endpoint that collects the user's
keys.

Precedence of values: explicit arguments (CLI flags) > the process environment > that file >
built-in defaults.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from . import runtime

__all__ = [
    "config_dir",
    "data_dir",
    "default_project_root",
    "env_file_candidates",
    "format_env_line",
    "git_root",
    "ignored_project_env",
    "is_trusted",
    "parse_env_file",
    "parse_env_text",
    "resolve_env_file",
    "state_dir",
    "trust_env_file",
    "untrusted_project_env",
    "user_env_file",
]

APP_DIR_NAME = runtime.APP_DIR_NAME
#: The file in a project's root that holds MKG's settings for that project.
PROJECT_ENV_FILE = ".mkg.env"
#: In the config folder: the project settings files the user trusts, each with its SHA-256.
TRUSTED_FILE = "trusted-env-files.json"


def config_dir(environ: Mapping[str, str]) -> Path:
    """The user's MKG config folder (it holds the user-global ``.env``)."""
    return Path(runtime.app_dir(environ, "MKG_CONFIG_DIR", "XDG_CONFIG_HOME", ".config"))


def state_dir(environ: Mapping[str, str]) -> Path:
    """The user's MKG state folder (spool, worker lock, socket, log)."""
    return Path(runtime.state_dir(environ))


def data_dir(environ: Mapping[str, str]) -> Path:
    """The user's MKG data folder (the harness plugin payloads ``mkg <harness> install`` writes)."""
    return Path(runtime.app_dir(environ, "MKG_DATA_DIR", "XDG_DATA_HOME", ".local", "share"))


def user_env_file(environ: Mapping[str, str]) -> Path:
    """The user-global ``.env`` that ``mkg setup`` writes."""
    return config_dir(environ) / ".env"


def git_root(path: str) -> str | None:
    """The nearest folder at or above ``path`` that holds ``.git`` (a folder or a file)."""
    current = Path(path)
    if current.is_file():
        current = current.parent
    for folder in (current, *current.parents):
        if (folder / ".git").exists():
            return str(folder)
    return None


def default_project_root(environ: Mapping[str, str], cwd: str) -> str:
    """The folder whose ``.mkg.env`` is read when no project root is given: ``MKG_PROJECT_ROOT``,
    else the git root of ``cwd``, else ``cwd``."""
    return environ.get("MKG_PROJECT_ROOT") or git_root(cwd) or cwd


def env_file_candidates(
    environ: Mapping[str, str], project_root: str | os.PathLike[str] | None
) -> list[tuple[str, Path]]:
    """The ``.env`` files in the order they are tried, each with a label."""
    candidates: list[tuple[str, Path]] = []
    explicit = environ.get("MKG_ENV_FILE")
    if explicit:
        candidates.append(("MKG_ENV_FILE", Path(explicit).expanduser()))
    if project_root:
        candidates.append(("project", Path(project_root) / PROJECT_ENV_FILE))
    candidates.append(("user", user_env_file(environ)))
    return candidates


def resolve_env_file(environ: Mapping[str, str], project_root: str | os.PathLike[str] | None) -> Path | None:
    """The first candidate that exists (a project's ``.mkg.env`` only when trusted), or None."""
    for label, path in env_file_candidates(environ, project_root):
        if path.is_file() and (label != "project" or is_trusted(environ, path)):
            return path
    return None


def untrusted_project_env(
    environ: Mapping[str, str], project_root: str | os.PathLike[str] | None
) -> Path | None:
    """The project's ``.mkg.env`` when there is one that is not read because it is not trusted."""
    if environ.get("MKG_ENV_FILE") or not project_root:
        return None
    path = Path(project_root) / PROJECT_ENV_FILE
    return path if path.is_file() and not is_trusted(environ, path) else None


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _trusted(environ: Mapping[str, str]) -> dict[str, str]:
    try:
        data = json.loads((config_dir(environ) / TRUSTED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(key): str(value) for key, value in data.items()}


def is_trusted(environ: Mapping[str, str], path: str | os.PathLike[str]) -> bool:
    """Whether the user trusts this settings file as it is now (its SHA-256 is the one recorded)."""
    where = Path(path).resolve()
    recorded = _trusted(environ).get(str(where))
    return recorded is not None and recorded == _digest(where)


def trust_env_file(environ: Mapping[str, str], path: str | os.PathLike[str], *, trust: bool = True) -> Path:
    """Record (or with ``trust=False`` forget) the file as it is now; return its resolved path.
    The record is in the user's config folder, mode 600."""
    where = Path(path).resolve()
    digest = _digest(where)
    if trust and digest is None:
        raise FileNotFoundError(f"{where} cannot be read")
    records = _trusted(environ)
    if trust:
        records[str(where)] = digest or ""
    else:
        records.pop(str(where), None)
    folder = Path(runtime.ensure_private_dir(str(config_dir(environ))))
    temporary = folder / f".{TRUSTED_FILE}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(records, handle, indent=1, sort_keys=True)
    os.replace(temporary, folder / TRUSTED_FILE)
    return where


def ignored_project_env(project_root: str | os.PathLike[str] | None) -> Path | None:
    """The project's own ``.env`` when there is one: MKG does not read it (see the module)."""
    path = Path(project_root) / ".env" if project_root else None
    return path if path is not None and path.is_file() else None


def parse_env_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read ``KEY=value`` lines.

    Blank lines and ``#`` comments are skipped, a leading ``export`` is allowed, values may be
    quoted with ``'`` or ``"``, and an unquoted value ends at `` #`` (an inline comment).
    An unreadable file reads as empty.
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return parse_env_text(text)


def parse_env_text(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, _, value = line.partition("=")
        key = key.strip()
        if not key or not key.replace("_", "").isalnum():
            continue
        values[key] = _unquote(value.strip())
    return values


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if value and value[0] in "'\"":
        closing = value.find(value[0], 1)
        if closing > 0:
            return value[1:closing]
    comment = value.find(" #")
    if comment >= 0:
        value = value[:comment]
    return value.strip()


def format_env_line(key: str, value: str) -> str:
    """One ``KEY=value`` line that :func:`parse_env_text` reads back unchanged."""
    if value == "" or any(ch in value for ch in " #'\"\t") or value != value.strip():
        if "'" not in value:
            return f"{key}='{value}'"
        return f'{key}="{value}"'
    return f"{key}={value}"
