"""Where the hook and the worker meet. Standard library only: the hook fast path imports this.

Everything lives in the user's state folder (``$MKG_STATE_DIR``, else
``$XDG_STATE_HOME/meta-knowledge-graph``, else ``~/.local/state/meta-knowledge-graph``), created
owner-only (mode 700):

``spool.db``     the durable event spool (SQLite, WAL)
``worker.lock``  held by the running worker (one per user); it also records the worker's pid
``worker.sock``  the worker's unix socket (mode 600) for events that wait for an answer
``worker.log``   the worker's log, rotated

A socket path longer than the system allows moves to an owner-only folder under the temp dir.
Every folder is checked to be this user's and owner-only before it is used, and a hook asks a
socket only when it and the process behind it (its peer credentials) are this user's.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing itself is too slow to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ensure_private_dir", "state_dir"]

APP_DIR_NAME = "meta-knowledge-graph"
SPOOL_FILE = "spool.db"
LOCK_FILE = "worker.lock"
SOCKET_FILE = "worker.sock"
LOG_FILE = "worker.log"
SPAWN_STAMP = "worker.spawned"
ANSWERING_TOOLS_FILE = "answering-tools.json"

#: Unix socket paths must fit in sockaddr_un (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100
#: A hook that started a worker lets it this long to take its lock before starting another.
SPAWN_GRACE_SECONDS = 10.0


def app_dir(environ: Mapping[str, str], explicit: str, xdg: str, *fallback: str) -> str:
    """``$explicit``, else ``$xdg/meta-knowledge-graph``, else ``~/<fallback...>/meta-knowledge-graph``."""
    if environ.get(explicit):
        return os.path.expanduser(environ[explicit])
    if environ.get(xdg):
        return os.path.join(os.path.expanduser(environ[xdg]), APP_DIR_NAME)
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, *fallback, APP_DIR_NAME)


def state_dir(environ: Mapping[str, str] | None = None) -> str:
    """The user's MKG state folder (spool, worker lock, socket, log)."""
    return app_dir(
        os.environ if environ is None else environ, "MKG_STATE_DIR", "XDG_STATE_HOME", ".local", "state"
    )


class NotPrivate(OSError):
    """A folder MKG keeps private belongs to someone else (or is not a folder)."""


def ensure_private_dir(path: str) -> str:
    """Create ``path`` (and parents) if needed, owner-only (mode 700); an existing one must belong
    to this user (else :class:`NotPrivate`) and loses any group or other permissions."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        pass
    info = os.lstat(path)
    import stat

    if not stat.S_ISDIR(info.st_mode):
        raise NotPrivate(f"{path} is not a folder (a link or a file is never trusted)")
    if info.st_uid != os.geteuid():
        raise NotPrivate(f"{path} belongs to another user (uid {info.st_uid}); MKG will not use it")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


class Paths:
    """The files of one state folder."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.spool = os.path.join(root, SPOOL_FILE)
        self.lock = os.path.join(root, LOCK_FILE)
        self.log = os.path.join(root, LOG_FILE)
        self.spawn_stamp = os.path.join(root, SPAWN_STAMP)
        self.answering_tools = os.path.join(root, ANSWERING_TOOLS_FILE)
        self.socket = socket_path(root)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Paths:
        return cls(state_dir(environ))

    def __repr__(self) -> str:
        return f"Paths({self.root!r})"


def answering_tools(paths: Paths) -> frozenset[str]:
    """The tool keys whose results the worker answers (its query tools); empty when unknown."""
    try:
        with open(paths.answering_tools, encoding="utf-8") as handle:
            keys = json.load(handle).get("tool_keys")
    except (OSError, ValueError, AttributeError):
        return frozenset()
    return frozenset(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else frozenset()


def write_answering_tools(paths: Paths, keys: list[str]) -> None:
    """Publish the tool keys for hooks (written whole, then renamed, so a hook never reads half)."""
    ensure_private_dir(paths.root)
    temporary = f"{paths.answering_tools}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"tool_keys": sorted(set(keys))}, handle)
    os.replace(temporary, paths.answering_tools)


def socket_path(root: str) -> str:
    """The worker's socket: in the state folder, or (when that path is too long for a socket) in
    ``mkg-<uid>`` under the temp folder, which :func:`ensure_private_dir` checks is this user's."""
    path = os.path.join(root, SOCKET_FILE)
    if len(path.encode()) <= _MAX_SOCKET_PATH:
        return path
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.path.abspath(root).encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"mkg-{os.geteuid()}")
    return os.path.join(folder, f"{digest}.sock")


def _owned_by_me(path: str) -> bool:
    """Whether ``path`` and its folder belong to this user (a socket another user placed is never
    asked anything)."""
    try:
        return os.stat(path).st_uid == os.stat(os.path.dirname(path) or ".").st_uid == os.geteuid()
    except OSError:
        return False


def peer_uid(sock: object) -> int | None:
    """The uid of the process at the other end of a unix socket (Linux), or None when unknown."""
    import socket
    import struct

    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))  # type: ignore[attr-defined]
    except OSError:
        return None
    return int(struct.unpack("3i", raw)[1])


# -- the worker's liveness -----------------------------------------------------------------------


def worker_pid(paths: Paths) -> int | None:
    """The pid of the running worker, or None when no worker holds the lock."""
    import fcntl

    try:
        fd = os.open(paths.lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            # Held: a worker is running. Its pid is the lock file's content.
            try:
                return int(os.read(fd, 32).decode().strip() or 0) or -1
            except (OSError, ValueError):
                return -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def acquire_worker_lock(paths: Paths) -> int | None:
    """Take the one-per-user worker lock; return its fd (keep it open), or None if it is taken."""
    import fcntl

    ensure_private_dir(paths.root)
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    # A hook probing liveness holds a shared lock for microseconds: retry briefly.
    for attempt in range(20):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if attempt == 19:
                os.close(fd)
                return None
            time.sleep(0.01)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    try:
        os.unlink(paths.spawn_stamp)
    except OSError:
        pass
    return fd


def spawn_worker(
    paths: Paths, environ: dict[str, str] | os._Environ[str] | None = None, *, force: bool = False
) -> bool:
    """Start a detached worker unless one was started moments ago. Return True if one was started.

    The stamp file keeps a burst of concurrent hooks from starting a worker each while the
    first one is still importing; the worker's lock settles any race that remains.
    """
    try:
        stamp = os.stat(paths.spawn_stamp).st_mtime
        if not force and time.time() - stamp < SPAWN_GRACE_SECONDS:
            return False
    except OSError:
        pass
    ensure_private_dir(paths.root)
    fd = os.open(paths.spawn_stamp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    env = dict(os.environ if environ is None else environ)
    env["MKG_STATE_DIR"] = paths.root
    devnull = os.devnull
    os.posix_spawn(
        sys.executable,
        [sys.executable, "-c", "from mkg_core.runtime import worker_entry; worker_entry()"],
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0),
        ],
        setsid=True,
    )
    return True


def worker_entry() -> None:
    """The detached worker process: take the lock before any heavy import, then run."""
    paths = Paths.from_env()
    fd = acquire_worker_lock(paths)
    if fd is None:
        return  # another worker is running
    try:
        os.chdir(paths.root)
    except OSError:
        pass
    from .worker import run_worker

    run_worker(paths, lock_fd=fd, foreground=False)


# -- asking the worker ----------------------------------------------------------------------------


def request(paths: Paths, message: dict[str, object], timeout: float) -> dict[str, object] | None:
    """Send one request to the worker and wait at most ``timeout`` seconds for its answer.

    Returns None when there is no worker, it does not answer in time, the answer is garbled, or
    the socket or the process behind it is not this user's.
    """
    import socket

    deadline = time.monotonic() + timeout
    if not _owned_by_me(paths.socket):
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(max(timeout, 0.001))
            sock.connect(paths.socket)
            uid = peer_uid(sock)
            if uid is not None and uid != os.geteuid():
                return None  # not this user's worker: its answer is not trusted
            sock.sendall(json.dumps(message).encode() + b"\n")
            chunks = []
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                sock.settimeout(remaining)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
    except OSError:
        return None
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
