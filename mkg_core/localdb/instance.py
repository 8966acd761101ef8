"""One Neo4j server that MKG runs itself, from the pinned jars, for one user (or one test).

Its folder (mode 700) holds everything that is not a jar::

    <home>/instance.json         port, user name, password (mode 600)
    <home>/conf/neo4j.conf       written anew at every start
    <home>/data, logs, run, import, plugins
    <home>/neo4j.pid
    <home>/logs/console.log      what the server printed

The server listens on 127.0.0.1 only (Bolt; no HTTP), with the hardening every Neo4j of MKG has
(``docs/security.md``): no file URLs or remote URLs for ``LOAD CSV``, an empty import folder, no
extension procedures, a memory cap per transaction, no usage reports. The jars live outside the
folder (a cache per Neo4j version), so upgrading MKG to a newer pinned Neo4j keeps the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import MkgError
from ..runtime import ensure_private_dir
from . import artifacts
from .artifacts import Lock, load_lock
from .java import Java, find_java

DEFAULT_PORT = 7687
USERNAME = "neo4j"
#: What Neo4j prints once every database is available.
READY = "Started."
#: The line MKG writes into the console log before each start.
STARTED_MARK = "-- started by MKG"
#: Java options Neo4j's own launcher passes (reflection into java.nio for the page cache, native
#: access for netty), and a heap that the variables below may change.
JVM_OPTIONS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
    "--sun-misc-unsafe-memory-access=allow",
    "-XX:+ExitOnOutOfMemoryError",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlog4j2.disable.jmx=true",
    "-Dfile.encoding=UTF-8",
)
#: Settings of every Neo4j MKG runs, besides its folders and port.
HARDENED = {
    "server.bolt.enabled": "true",
    "server.http.enabled": "false",
    "server.https.enabled": "false",
    "server.default_listen_address": "127.0.0.1",
    "dbms.security.auth_enabled": "true",
    "db.query.default_language": "CYPHER_25",
    "db.tx_log.preallocate": "false",
    "db.tx_log.rotation.retention_policy": "1 files",
    "db.transaction.timeout": "120s",
    # LOAD CSV reads no file outside the (empty) import folder and fetches no URL; no extension
    # procedure loads; one transaction cannot take the server's memory; nothing phones home.
    "dbms.security.allow_csv_import_from_file_urls": "false",
    "internal.dbms.cypher_ip_blocklist": "0.0.0.0/0,::/0",
    "dbms.security.procedures.allowlist": "",
    "db.memory.transaction.max": "256m",
    "db.memory.transaction.total.max": "512m",
    "dbms.memory.transaction.total.max": "512m",
    "dbms.usage_report.enabled": "false",
    "server.fleet_discovery.enabled": "false",
    "dbms.fleet_manager.enabled": "false",
    # stop in about a second instead of waiting for open Bolt connections
    "internal.server.bolt.connection_shutdown_wait_time": "0s",
    "internal.server.bolt.thread_pool_shutdown_wait_time": "0s",
}


#: Servers this process started, by pid: kept so that stopping one reaps it (and no process object
#: is dropped while its server runs).
_started: dict[int, subprocess.Popen[bytes]] = {}


class LocalNeo4jError(MkgError):
    """The local Neo4j cannot be installed, started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class Credentials:
    uri: str
    username: str
    password: str

    def settings_env(self) -> dict[str, str]:
        return {"NEO4J_URI": self.uri, "NEO4J_USERNAME": self.username, "NEO4J_PASSWORD": self.password}


def jar_cache(environ: Mapping[str, str]) -> Path:
    """Where the jars of each pinned Neo4j are kept (``MKG_NEO4J_CACHE``, else the data folder)."""
    from ..envfiles import data_dir

    configured = environ.get("MKG_NEO4J_CACHE")
    return Path(configured).expanduser() if configured else data_dir(environ) / "neo4j-jars"


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` (connections just closed do not count, as for Neo4j)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pick_port(wanted: int = DEFAULT_PORT) -> int:
    """``wanted`` when a server could listen on it, else a free port."""
    return wanted if port_is_free(wanted) else free_port()


class LocalNeo4j:
    """The Neo4j in ``home`` run from the jars of ``lock`` (kept under ``jars``)."""

    def __init__(
        self, home: Path, *, jars: Path, environ: Mapping[str, str], lock: Lock | None = None
    ) -> None:
        self.home = home
        self.lock = lock or load_lock()
        self.jars = jars / self.lock.neo4j
        self.environ = environ

    @classmethod
    def for_user(cls, environ: Mapping[str, str]) -> LocalNeo4j:
        """The user's own local Neo4j, in ``<data folder>/neo4j``."""
        from ..envfiles import data_dir

        return cls(data_dir(environ) / "neo4j", jars=jar_cache(environ), environ=environ)

    # -- files ---------------------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.home / "instance.json"

    @property
    def pid_file(self) -> Path:
        return self.home / "neo4j.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "console.log"

    def installed(self) -> bool:
        return artifacts.is_complete(self.lock, self.jars)

    def exists(self) -> bool:
        return self.state_file.exists()

    def _state(self) -> dict[str, object]:
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError) as exc:
            raise LocalNeo4jError(
                f"the local Neo4j in {self.home} is not set up ({exc}): run `mkg neo4j install`"
            ) from None
        return data if isinstance(data, dict) else {}

    def _write_state(self, state: dict[str, object]) -> None:
        ensure_private_dir(str(self.home))
        temporary = self.state_file.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1)
        os.replace(temporary, self.state_file)

    @property
    def port(self) -> int:
        return int(str(self._state()["port"]))

    def credentials(self) -> Credentials:
        state = self._state()
        return Credentials(
            f"bolt://127.0.0.1:{state['port']}", str(state["username"]), str(state["password"])
        )

    # -- install -------------------------------------------------------------------------------------

    def install(self, progress: Callable[[int], None] | None = None) -> int:
        """Download and check the jars (nothing when the cache has them); return the bytes downloaded."""
        return artifacts.fetch_all(self.lock, self.jars, environ=self.environ, progress=progress)

    def create(self, *, port: int | None = None, password: str | None = None) -> Credentials:
        """Set the instance up (once): its port (7687, else a free one), and a random password that
        the new store is created with. An instance set up already keeps its store and password; a
        ``port`` given moves it."""
        ensure_private_dir(str(self.home))
        if self.exists():
            state = self._state()
            if port is not None and port != state.get("port"):
                state["port"] = port
                self._write_state(state)
            return self.credentials()
        if port is None:
            port = pick_port()
        password = password or secrets.token_urlsafe(24)
        if len(password) < 8:
            raise LocalNeo4jError("Neo4j passwords have at least 8 characters")
        self._write_auth(password)
        self._write_state(
            {
                "port": port,
                "username": USERNAME,
                "password": password,
                "created_with": self.lock.neo4j,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
        return self.credentials()

    def _write_auth(self, password: str) -> None:
        """The password of user neo4j, as ``neo4j-admin dbms set-initial-password`` writes it: read
        by the server when it creates the system database."""
        salt = secrets.token_bytes(32)
        digest = hashlib.sha256(salt + password.encode()).digest()
        for _ in range(1023):
            digest = hashlib.sha256(digest).digest()
        folder = ensure_private_dir(str(self.home / "data" / "dbms"))
        path = os.path.join(folder, "auth.ini")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"{USERNAME}:SHA-256,{digest.hex()},{salt.hex()},1024:\n")

    def _write_config(self, port: int) -> Path:
        conf = Path(ensure_private_dir(str(self.home / "conf")))
        values = {
            **{
                f"server.directories.{name}": str(self.home / name)
                for name in ("data", "logs", "run", "import", "plugins")
            },
            "server.bolt.listen_address": f"127.0.0.1:{port}",
            "server.bolt.advertised_address": f"127.0.0.1:{port}",
            "server.memory.pagecache.size": self.environ.get("MKG_NEO4J_PAGECACHE") or "256m",
            **HARDENED,
        }
        for name in ("data", "logs", "run", "import", "plugins"):
            ensure_private_dir(str(self.home / name))
        (conf / "neo4j.conf").write_text("".join(f"{key}={value}\n" for key, value in values.items()))
        return conf

    # -- run -----------------------------------------------------------------------------------------

    def pid(self) -> int | None:
        """The server's process id while it runs."""
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return pid  # no /proc: trust the pid file
        return (
            pid if self.lock.main_class.encode() in command and str(self.home).encode() in command else None
        )

    def java(self) -> Java:
        return find_java(self.environ)

    def command(self, java: Java, conf: Path) -> list[str]:
        heap = self.environ.get("MKG_NEO4J_HEAP") or "1g"
        return [
            str(java.executable),
            "-Xms256m",
            f"-Xmx{heap}",
            *JVM_OPTIONS,
            "-cp",
            f"{self.jars}/*",
            self.lock.main_class,
            f"--home-dir={self.home}",
            f"--config-dir={conf}",
            "--console-mode",
        ]

    def start(self, *, wait: bool = True, timeout: float | None = None) -> Credentials:
        """Start the server unless it runs (and, with ``wait``, until it answers); its credentials.

        Several processes may ask at once (the worker, the MCP server, a command): one starts it."""
        credentials = self.credentials()
        with self._start_lock():
            process = self._spawn() if self.pid() is None else None
        if wait:
            self._wait_ready(timeout, process)
        return credentials

    @contextlib.contextmanager
    def _start_lock(self) -> Iterator[None]:
        import fcntl

        fd = os.open(self.home / ".start.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _spawn(self) -> subprocess.Popen[bytes]:
        if not self.installed():
            raise LocalNeo4jError(f"Neo4j {self.lock.neo4j} is not installed: run `mkg neo4j install`")
        port = self.port
        if not port_is_free(port):
            raise LocalNeo4jError(
                f"port {port} on 127.0.0.1 is in use by another program: stop it, or move MKG's Neo4j "
                "with `mkg neo4j start --port N` (`mkg setup --local` then writes the new address)"
            )
        java = self.java()
        conf = self._write_config(port)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            log.write(f"\n{STARTED_MARK} at {datetime.now(UTC).isoformat(timespec='seconds')}\n".encode())
            log.flush()
            process = subprocess.Popen(
                self.command(java, conf),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the command that started it, ignores its terminal
                env={**self.environ, "NEO4J_HOME": str(self.home)},
                cwd=str(self.home),
            )
        self.pid_file.write_text(f"{process.pid}\n")
        _started[process.pid] = process
        return process

    def _wait_ready(self, timeout: float | None, process: subprocess.Popen[bytes] | None = None) -> None:
        limit = timeout if timeout is not None else float(self.environ.get("MKG_NEO4J_START_TIMEOUT") or 180)
        deadline = time.monotonic() + limit
        while True:
            if self.ready():
                return
            alive = process.poll() is None if process is not None else self.pid() is not None
            if not alive:
                raise LocalNeo4jError(
                    f"Neo4j stopped before it was ready; the end of {self.log_file}:\n{self.log_tail(30)}"
                )
            if time.monotonic() >= deadline:
                self.stop()
                raise LocalNeo4jError(
                    f"Neo4j was not ready within {limit:.0f} s (MKG_NEO4J_START_TIMEOUT); the end of "
                    f"{self.log_file}:\n{self.log_tail(30)}"
                )
            time.sleep(0.25)

    def ready(self) -> bool:
        """Whether the server MKG started last has said it is ready, and Bolt accepts connections."""
        try:
            with open(self.log_file, "rb") as log:
                log.seek(max(log.seek(0, os.SEEK_END) - 1024 * 1024, 0))
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return False
        started = text.rfind(STARTED_MARK)
        return READY in text[max(started, 0) :] and self._answers()

    def _answers(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
            return True
        return False

    def stop(self, timeout: float = 60) -> bool:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` s); False when it was not running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self._alive(pid):
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)
        deadline = time.monotonic() + 30  # a process stuck in the kernel may take a moment to go
        while self._alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return True

    @staticmethod
    def _alive(pid: int) -> bool:
        process = _started.get(pid)
        if process is not None:  # started by this process: reap it
            if process.poll() is None:
                return True
            del _started[pid]
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        try:  # a zombie of another parent counts as stopped
            return b"\nState:\tZ" not in Path(f"/proc/{pid}/status").read_bytes()
        except OSError:
            return True

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log yet)"
        return "\n".join(text.splitlines()[-lines:])

    def status(self) -> dict[str, object]:
        """What ``mkg neo4j status`` and ``mkg doctor`` show."""
        report: dict[str, object] = {
            "version": self.lock.neo4j,
            "home": str(self.home),
            "installed": self.installed(),
            "set_up": self.exists(),
            "running": False,
        }
        if self.exists():
            report["uri"] = self.credentials().uri
        pid = self.pid()
        if pid is not None:
            report.update(running=True, pid=pid)
        try:
            report["java"] = self.java().describe()
        except MkgError as exc:
            report["java"] = str(exc)
        return report

    def uninstall(self, *, data: bool) -> None:
        """Stop the server and remove its jars; with ``data`` its store too."""
        self.stop()
        artifacts.remove(self.jars)
        if data:
            import shutil

            shutil.rmtree(self.home, ignore_errors=True)
