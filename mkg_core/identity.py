"""Who and where: the project a hook event belongs to, and the user. Standard library only.

A project is a repository, not a folder name: its id comes from the normalized remote URL when
the repository has one (so every clone of it shares memory), else from the canonical path of its
root (so two unrelated folders that happen to share a name never do). ``MKG_PROJECT_ID`` pins it.
"""

from __future__ import annotations

import configparser
import getpass
import hashlib
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .envfiles import git_root

if TYPE_CHECKING:
    from .harness import HarnessAdapter

__all__ = ["ProjectRef", "UserRef", "resolve_project", "resolve_user"]

#: Payload keys that may name the project folder, most specific first.
PAYLOAD_PROJECT_KEYS = ("project_root", "project_dir", "workspace_root", "workspace_dir", "repo_root", "cwd")
#: Environment variables that may name it, after the payload: MKG's own, then any harness's
#: ``*_PROJECT_DIR`` or ``*_WORKSPACE_ROOT`` (``CLAUDE_PROJECT_DIR``, ``GEMINI_PROJECT_DIR`` ...).
ENV_PROJECT_KEYS = ("MKG_PROJECT_ROOT", "MKG_PROJECT_DIR")
ENV_PROJECT_SUFFIXES = ("_PROJECT_DIR", "_WORKSPACE_ROOT")
#: Where harnesses put installed plugins (``*_PLUGIN_ROOT``, and their plugin caches): never a project.
PLUGIN_ROOT_KEYS = ("MKG_HOOK_ROOT", "MKG_PLUGIN_ROOT")
_PLUGIN_CACHE_PARTS = ("/plugins/cache/", "/plugins/marketplaces/")


@dataclass(frozen=True)
class ProjectRef:
    """A resolved project: a stable ``id``, a readable ``name`` and where it was found."""

    id: str
    name: str
    root: str | None
    source: str
    remote: str | None = None


@dataclass(frozen=True)
class UserRef:
    id: str
    source: str


def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "default"


def readable_name(folder: str) -> str:
    words = re.sub(r"[-_]+", " ", folder).split()
    return " ".join(word[:1].upper() + word[1:] for word in words) or "Default"


# -- project -----------------------------------------------------------------------------------


def resolve_project(
    payload: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    fallback: str | os.PathLike[str] | None = None,
) -> ProjectRef:
    """Resolve the project for a hook payload (or for the process when there is none).

    Candidates, first usable wins: the payload's folder keys, then ``MKG_PROJECT_ROOT``,
    ``MKG_PROJECT_DIR``, ``CLAUDE_PROJECT_DIR``, ``CODEX_WORKSPACE_ROOT``, then ``fallback``
    (default: the current directory). A candidate inside a harness plugin folder is skipped.
    The winner is walked up to its git root. ``MKG_PROJECT_ID`` (and ``MKG_PROJECT_NAME``) pin
    the result.
    """
    env = os.environ if environ is None else environ
    root, source = _project_folder(payload or {}, env, fallback)
    remote = git_remote_url(root) if root else None
    pinned = (env.get("MKG_PROJECT_ID") or "").strip()
    folder = Path(root).name if root else "default"
    name = (env.get("MKG_PROJECT_NAME") or "").strip() or readable_name(folder)
    if pinned:
        return ProjectRef(
            id=slugify(pinned), name=name, root=root, source="env.MKG_PROJECT_ID", remote=remote
        )
    return ProjectRef(id=project_id_for(root, remote), name=name, root=root, source=source, remote=remote)


def project_id_for(root: str | None, remote: str | None) -> str:
    """``<folder slug>-<10 hex digits>`` of the normalized remote, else of the canonical root."""
    folder = Path(root).name if root else "default"
    basis = f"remote:{normalize_remote_url(remote)}" if remote else f"path:{root or ''}"
    digest = hashlib.sha256(basis.encode("utf-8")).hexdigest()[:10]
    return f"{slugify(folder)}-{digest}"


def _project_folder(
    payload: Mapping[str, Any], env: Mapping[str, str], fallback: str | os.PathLike[str] | None
) -> tuple[str | None, str]:
    roots = [*PLUGIN_ROOT_KEYS, *sorted(k for k in env if k.endswith("_PLUGIN_ROOT"))]
    plugin_roots = [_canonical(env[key]) for key in roots if env.get(key)]
    candidates: list[tuple[str, Any]] = [(f"payload.{key}", payload.get(key)) for key in PAYLOAD_PROJECT_KEYS]
    named = [
        *ENV_PROJECT_KEYS,
        *sorted(k for k in env if k.endswith(ENV_PROJECT_SUFFIXES) and k not in ENV_PROJECT_KEYS),
    ]
    candidates += [(f"env.{key}", env.get(key)) for key in named]
    candidates.append(("cwd", os.fspath(fallback) if fallback is not None else os.getcwd()))
    for label, value in candidates:
        if not isinstance(value, str) or not value.strip() or "\0" in value:  # no folder has a NUL
            continue
        path = _canonical(os.path.expandvars(value.strip()))
        if _is_plugin_folder(path, plugin_roots):
            continue
        return git_root(path) or path, label
    return None, "none"


def _canonical(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _is_plugin_folder(path: str, plugin_roots: list[str]) -> bool:
    for root in plugin_roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return True
    probe = path.replace(os.sep, "/") + "/"
    return any(part in probe for part in _PLUGIN_CACHE_PARTS)


def _git_dir(root: str) -> Path | None:
    dotgit = Path(root) / ".git"
    if dotgit.is_dir():
        return dotgit
    try:
        text = dotgit.read_text(encoding="utf-8")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:") :].strip())
    if not gitdir.is_absolute():
        gitdir = Path(root) / gitdir
    # A worktree's gitdir points into the main repository's .git/worktrees/<name>.
    commondir = gitdir / "commondir"
    if commondir.is_file():
        try:
            gitdir = (gitdir / commondir.read_text(encoding="utf-8").strip()).resolve()
        except OSError:
            pass
    return gitdir


def git_remote_url(root: str) -> str | None:
    """The repository's ``origin`` URL (else its first remote's), read from its git config."""
    gitdir = _git_dir(root)
    if gitdir is None:
        return None
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(gitdir / "config", encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    remotes: dict[str, str] = {}
    for section in parser.sections():
        match = re.fullmatch(r'remote\s+"(.+)"', section.strip())
        if match and parser.has_option(section, "url"):
            remotes[match.group(1)] = parser.get(section, "url").strip()
    return remotes.get("origin") or next(iter(remotes.values()), None)


def normalize_remote_url(url: str) -> str:
    """One spelling for every way of writing a repository's address.

    ``git@github.com:Org/Repo.git``, ``ssh://git@github.com/Org/Repo``, and
    ``https://user:token@GitHub.com/Org/Repo.git/`` all become ``github.com/org/repo``.
    """
    text = url.strip()
    scp = re.fullmatch(r"(?:[^@/]+@)?([^:/]+):(?!//)(.+)", text)
    if scp and "://" not in text:
        host, path = scp.group(1), scp.group(2)
    else:
        without_scheme = re.sub(r"^[a-z][a-z0-9+.-]*://", "", text, flags=re.I)
        authority, _, path = without_scheme.partition("/")
        host = authority.rsplit("@", 1)[-1].split(":", 1)[0]
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host.lower()}/{path.lower()}".rstrip("/")


# -- user --------------------------------------------------------------------------------------


def normalize_user_id(value: str | None) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if not text or any(ch.isspace() for ch in text):
        return None
    return text[:254]


def resolve_user(
    environ: Mapping[str, str] | None = None,
    *,
    project_root: str | None = None,
    client: str | None = None,
    adapters: Iterable[HarnessAdapter] = (),
) -> UserRef:
    """Who is working: ``MKG_USER_ID``, the account the user is signed in to a harness with (the
    event's own harness first, asked through its adapter), git's email, the OS login."""
    env = os.environ if environ is None else environ
    pinned = normalize_user_id(env.get("MKG_USER_ID"))
    if pinned:
        return UserRef(pinned, (env.get("MKG_USER_ID_SOURCE") or "env").strip().lower() or "env")
    hint = (client or env.get("MKG_CLIENT") or "").strip().lower()
    ordered = sorted(adapters, key=lambda a: hint not in (a.name, *a.aliases))
    for adapter in ordered:
        try:
            email = normalize_user_id(adapter.account_email(env))
        except Exception:  # a harness's account file we cannot read says nothing
            email = None
        if email:
            return UserRef(email, SOURCE_NAMES.get(adapter.name, adapter.name))
    email = _git_email(project_root)
    if email:
        return UserRef(email, "git")
    try:
        login = normalize_user_id(getpass.getuser())
    except (OSError, KeyError):
        login = None
    return UserRef(login, "os") if login else UserRef("unknown", "unknown")


#: How a user id's source is recorded, by harness (the names earlier versions wrote).
SOURCE_NAMES = {"claude": "claude_code"}


def _git_email(project_root: str | None) -> str | None:
    try:
        result = subprocess.run(
            ["git", "config", "--get", "user.email"],
            cwd=project_root or None,
            capture_output=True,
            text=True,
            timeout=3,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return normalize_user_id(result.stdout) if result.returncode == 0 else None
