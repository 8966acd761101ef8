"""The answers the MCP proxy keeps for a cold start: ``initialize`` and ``tools/list``, per settings.

Standard library only, like the proxy. Kept in ``mcp-cache/`` in the state folder (mode 600
files in a private folder), one file per fingerprint of the settings and ``latest.json`` for the
last answers of any settings (which may be stale: the proxy then corrects the client).
"""

from __future__ import annotations

import hashlib
import json
import os

from . import envfiles, runtime

TYPE_CHECKING = False  # typing itself is too slow to import here
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CACHE_DIR = "mcp-cache"
LATEST = "latest.json"
#: Environment variables that differ between shells without changing any setting.
_VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "TERM_SESSION_ID", "WINDOWID", "SSH_TTY", "TMUX_PANE"})


def fingerprint(environ: Mapping[str, str], cwd: str) -> str:
    """What decides which tools mount: the environment (a plugin may read any variable), and the
    .env files that may be read (path, size and time of each), found as the server finds them, and
    the record of trusted project files."""
    parts = [f"{k}={v}" for k, v in sorted(environ.items()) if k not in _VOLATILE]
    parts.append(f"cwd={cwd}")
    files = envfiles.env_file_candidates(environ, envfiles.default_project_root(environ, cwd))
    for _, path in [*files, ("trust", envfiles.config_dir(environ) / envfiles.TRUSTED_FILE)]:
        try:
            info = os.stat(path)
            parts.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
        except OSError:
            continue
    return hashlib.sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:24]


def cache_dir(paths: runtime.Paths) -> str:
    return os.path.join(paths.root, CACHE_DIR)


def load_cache(paths: runtime.Paths, key: str) -> dict[str, Any] | None:
    """The kept answers for these settings, else the latest kept for any (may be stale)."""
    for name in (f"{key}.json", LATEST):
        try:
            with open(os.path.join(cache_dir(paths), name), encoding="utf-8") as handle:
                cached = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(cached, dict) and isinstance(cached.get("tools"), dict):
            cached["exact"] = name != LATEST
            return cached
    return None


def save_cache(paths: runtime.Paths, key: str, answers: dict[str, Any]) -> None:
    folder = runtime.ensure_private_dir(cache_dir(paths))
    text = json.dumps(answers)
    for name in (f"{key}.json", LATEST):
        temporary = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, os.path.join(folder, name))
