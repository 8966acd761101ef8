"""``meta-knowledge-graph``: the MCP server a harness starts, ready in milliseconds.

Standard library only, like ``mkg-hook``. A full MCP server process costs about a second of CPU to
answer ``initialize`` (the MCP SDK, pydantic and the plugins), and a harness such as Codex waits only
about a second for it before its first model request. So this command is a proxy: the server itself lives,
warm, in the per-user worker, and each harness session talks to it over the worker's private
socket (the same ownership and peer checks as the hook's).

- ``initialize`` and ``tools/list`` are answered at once from the last answers the worker gave for
  the same settings (``mcp-cache/`` in the state folder; ``mkg <harness> install`` fills it). When
  the worker's own answer turns out different, the client gets ``notifications/tools/list_changed``.
- Everything else (tool calls, the newer per-request protocol) goes to the worker, which is
  started when it is not running. A worker that is down or restarting never hangs the harness: the
  request waiting for it gets a clear JSON-RPC error, and the next one works once it is back.
- With any command-line argument (``--transport http``, ``--help``, ...), with
  ``MKG_MCP_IN_PROCESS=1``, or when no worker may be started (``MKG_WORKER_AUTOSTART=0`` and none
  running) it runs the full server in this process instead (``mkg serve``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

from . import runtime
from .mcp_answers import fingerprint, load_cache, save_cache

TYPE_CHECKING = False  # typing itself is too slow to import here
if TYPE_CHECKING:
    from typing import Any, BinaryIO

#: How long a request waits for the worker to come up (a cold start on a busy machine is slow);
#: ``MKG_MCP_WORKER_WAIT`` changes it.
WORKER_WAIT_SECONDS = 60.0
#: JSON-RPC ids the proxy uses for its own requests to the worker.
INIT_ID = "mkg-proxy:initialize"
TOOLS_ID = "mkg-proxy:tools/list"
WORKER_GONE = -32001


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    env = os.environ
    paths = runtime.Paths.from_env(env)
    if (
        args
        or env.get("MKG_MCP_IN_PROCESS", "").strip() in ("1", "true", "yes")
        or not worker_possible(paths)
    ):
        _in_process(args)
        return
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # a worker this proxy started is never left a zombie
    Proxy(paths, dict(env), _cwd(), sys.stdin.buffer, sys.stdout.buffer).run()


def _in_process(args: list[str]) -> None:
    """The full MCP server in this process (``mkg serve``)."""
    os.execv(sys.executable, [sys.executable, "-m", "mkg_core.server", *args])


def worker_possible(paths: runtime.Paths) -> bool:
    autostart = (os.environ.get("MKG_WORKER_AUTOSTART") or "1").strip().lower()
    return autostart not in ("0", "false", "no", "off") or runtime.worker_pid(paths) is not None


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return os.path.expanduser("~")


# -- the proxy ---------------------------------------------------------------------------------------


def announcing_list_changed(result: dict[str, Any]) -> dict[str, Any]:
    """An initialize result that says the proxy may send ``notifications/tools/list_changed``.

    It does, when the tools it answered from its keeping turn out stale, so the client is told to
    listen for it.
    """
    capabilities = dict(result.get("capabilities") or {})
    capabilities["tools"] = {**(capabilities.get("tools") or {}), "listChanged": True}
    return {**result, "capabilities": capabilities}


class Proxy:
    """One harness session: JSON-RPC lines between the harness (stdin/stdout) and the worker."""

    def __init__(
        self, paths: runtime.Paths, environ: dict[str, str], cwd: str, stdin: BinaryIO, stdout: BinaryIO
    ) -> None:
        self.paths = paths
        self.environ = environ
        self.cwd = cwd
        self.stdin = stdin
        self.stdout = stdout
        self.key = fingerprint(environ, cwd)
        try:
            self.wait = float(environ.get("MKG_MCP_WORKER_WAIT") or WORKER_WAIT_SECONDS)
        except ValueError:
            self.wait = WORKER_WAIT_SECONDS
        self.cache = load_cache(paths, self.key)
        self.out_lock = threading.Lock()
        self.saving = threading.Lock()  # held while kept answers are written
        self.state = threading.Condition()
        self.upstream: socket.socket | None = None
        self.ready = False  # the worker's session is initialized
        self.connecting = False
        self.closed = False
        self.init_request: dict[str, Any] | None = None
        self.initialized_note: dict[str, Any] | None = None
        self.handshake = False  # the client began with `initialize` (not the per-request protocol)
        self.served_tools: Any = None  # the tools/list result answered from the cache
        self.pending: dict[Any, str] = {}  # forwarded request ids -> method
        self.init_waiting: Any = None  # the client's initialize, when no kept answer could serve it
        self.versions: list[str] | None = None  # the protocol versions the worker's server speaks
        self.failure: str | None = None  # why the worker refused the session, when it did
        self.init_sent = False  # the handshake went to the current worker connection

    # -- the client side ---------------------------------------------------------------------------

    def run(self) -> None:
        self._connect_soon()  # start (or reach) the worker now, while the harness gets ready
        try:
            for raw in self.stdin:
                line = raw.strip()
                if not line:
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    self._send(
                        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
                    )
                    continue
                self._from_client(message)
        finally:
            self._finish_pending()
            with self.state:
                self.closed = True
                self.state.notify_all()
            self._disconnect()
            with self.saving:  # answers being kept are written whole before the process ends
                pass

    def _finish_pending(self) -> None:
        """The client closed its side: let the requests it already sent be answered first."""
        deadline = time.monotonic() + self.wait
        with self.state:
            while (self.init_waiting is not None or self.pending) and time.monotonic() < deadline:
                self.state.wait(0.2)

    def _from_client(self, message: Any) -> None:
        if not isinstance(message, dict):
            self._forward(message)
            return
        method, mid = message.get("method"), message.get("id")
        if method == "initialize" and mid is not None:
            answer = self._cached_initialize(message)
            with self.state:
                self.init_request = message
                self.handshake = True
                self.ready = False  # until the worker's session has the handshake too
                if answer is None:
                    self.init_waiting = mid  # the worker's own answer goes to the client
            if answer is not None:
                self._send({"jsonrpc": "2.0", "id": mid, "result": answer})
            self._init_upstream()
            self._connect_soon()
            return
        elif method == "notifications/initialized":
            with self.state:
                self.initialized_note = message
                now = self.ready
            if not now:
                self._connect_soon()
                return  # sent after the replayed initialize
        elif method == "tools/list" and mid is not None and self.handshake and self.cache:
            version = (self.init_request or {}).get("params", {}).get("protocolVersion")
            tools = self.cache["tools"].get(version) or next(iter(self.cache["tools"].values()), None)
            if tools is not None and not (message.get("params") or {}).get("cursor"):
                self.served_tools = tools
                self._send({"jsonrpc": "2.0", "id": mid, "result": tools})
                self._connect_soon()
                return
        elif method == "ping" and mid is not None:
            self._send({"jsonrpc": "2.0", "id": mid, "result": {}})
            return
        self._forward(message)

    def _cached_initialize(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if not self.cache:
            return None
        asked = (request.get("params") or {}).get("protocolVersion")
        answers = {k: v for k, v in (self.cache.get("initialize") or {}).items() if isinstance(v, dict)}
        if asked in answers:
            return announcing_list_changed(answers[asked])
        versions = self.cache.get("protocol_versions") or []
        if asked in versions and answers:
            answer = announcing_list_changed(next(iter(answers.values())))
            answer["protocolVersion"] = asked
            return answer
        return None  # a version the kept answers cannot speak for: ask the worker

    def _send(self, message: Any) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self.out_lock:
            try:
                self.stdout.write(data)
                self.stdout.flush()
            except (OSError, ValueError):
                pass

    def _forward(self, message: Any) -> None:
        mid = message.get("id") if isinstance(message, dict) else None
        is_request = isinstance(message, dict) and "method" in message and mid is not None
        for _ in range(2):  # a connection found dead on sending is replaced once
            if not self._wait_ready():
                if is_request:
                    why = (
                        self.failure
                        or "MKG's worker is not running and could not be started; see `mkg status`"
                    )
                    self._send(_error(mid, why))
                return
            if is_request:
                with self.state:
                    self.pending[mid] = str(message.get("method"))
            if self._upstream_send(message):
                return
            if is_request:  # it never reached the worker, so sending it again cannot run it twice
                with self.state:
                    self.pending.pop(mid, None)
        if is_request:
            self._send(_error(mid, "MKG's worker went away (restarting?); call again in a moment"))

    # -- the worker side ---------------------------------------------------------------------------

    def _connect_soon(self) -> None:
        """Open the session to the worker unless one is open (its handshake may still be under
        way) or being opened: one harness session is one worker session."""
        with self.state:
            if not self._may_connect():
                return
            self.connecting = True
        threading.Thread(target=self._connect, name="mkg-mcp-connect", daemon=True).start()

    def _may_connect(self) -> bool:
        return self.upstream is None and not self.connecting and not self.closed and self.failure is None

    def _wait_ready(self) -> bool:
        self._connect_soon()
        deadline = time.monotonic() + self.wait
        with self.state:
            while not self.ready and not self.closed:
                if self.failure is not None:
                    return False
                if self._may_connect():  # the last connection failed or the worker went away
                    self.connecting = True
                    threading.Thread(target=self._connect, name="mkg-mcp-connect", daemon=True).start()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.state.wait(min(remaining, 0.5))
            return self.ready

    def _connect(self) -> None:
        """Reach the worker (starting it when need be), open a session, replay the handshake."""
        try:
            sock = self._open_session()
            if sock is None:
                if self.failure is not None:
                    self._fatal(self.failure)
                with self.state:
                    waiting, self.init_waiting = self.init_waiting, None
                if waiting is not None:
                    self._send(_error(waiting, "MKG's worker did not start in time; see `mkg status`"))
                return
            reader = threading.Thread(
                target=self._read_upstream, args=(sock,), name="mkg-mcp-up", daemon=True
            )
            with self.state:
                if self.upstream is not None or self.closed:  # never two sessions for one client
                    sock.close()
                    return
                self.upstream = sock
                self.ready = self.init_request is None  # else: once the worker has the handshake
                self.state.notify_all()
            reader.start()
            self._init_upstream()
        finally:
            with self.state:
                self.connecting = False
                self.state.notify_all()

    def _init_upstream(self) -> None:
        """Give the worker's session the client's handshake, once per connection."""
        with self.state:
            if self.upstream is None or self.init_request is None or self.init_sent:
                return
            self.init_sent = True
            request = {**self.init_request, "id": INIT_ID}
        self._upstream_send(request)

    def _fatal(self, why: str) -> None:
        """The worker refused these settings or plugins (as a server process would stop at start)."""
        with self.state:
            waiting = self.init_waiting
        if waiting is not None:
            self._send(_error(waiting, why))
        try:
            sys.stderr.write(f"meta-knowledge-graph: {why}\n")
            sys.stderr.flush()
        finally:
            os._exit(1)

    def _open_session(self) -> socket.socket | None:
        deadline = time.monotonic() + self.wait
        spawned = False
        while time.monotonic() < deadline:
            with self.state:
                if self.closed:
                    return None
            sock = _dial(self.paths)
            if sock is not None:
                try:
                    sock.settimeout(self.wait)
                    hello = {"op": "mcp", "env": self.environ, "cwd": self.cwd}
                    sock.sendall(json.dumps(hello).encode() + b"\n")
                    line = _read_line(sock)
                    reply = json.loads(line) if line is not None else {}
                    if reply.get("ok"):
                        sock.settimeout(None)
                        versions = reply.get("protocol_versions")
                        if isinstance(versions, list):
                            self.versions = [str(v) for v in versions]
                        return sock
                    if reply.get("error"):  # the worker cannot serve these settings: say why
                        self.failure = str(reply["error"])
                        sock.close()
                        return None
                except (OSError, ValueError, AttributeError):
                    pass
                sock.close()
            if not spawned and runtime.worker_pid(self.paths) is None:
                try:
                    spawned = runtime.spawn_worker(self.paths, self.environ) or True
                except OSError:
                    return None
            time.sleep(0.05)
        return None

    def _upstream_send(self, message: Any) -> bool:
        with self.state:
            sock = self.upstream
        if sock is None:
            return False
        try:
            sock.sendall(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            return True
        except OSError:  # the worker died, perhaps before its reader saw the end of the connection
            self._worker_gone(sock)
            return False

    def _read_upstream(self, sock: socket.socket) -> None:
        try:
            with sock.makefile("rb") as lines:
                for raw in lines:
                    try:
                        message = json.loads(raw)
                    except ValueError:
                        continue
                    self._from_worker(message)
        except OSError:
            pass
        self._worker_gone(sock)

    def _from_worker(self, message: Any) -> None:
        mid = message.get("id") if isinstance(message, dict) else None
        if mid == INIT_ID:
            self._remember("initialize", message.get("result"))
            with self.state:
                waiting, self.init_waiting = self.init_waiting, None
                note = self.initialized_note
            if waiting is not None:
                result = message.get("result")
                if isinstance(result, dict):
                    message = {**message, "result": announcing_list_changed(result)}
                self._send({**message, "id": waiting})
            if note is not None:
                self._upstream_send(note)
            if self.handshake:
                self._upstream_send({"jsonrpc": "2.0", "id": TOOLS_ID, "method": "tools/list", "params": {}})
            with self.state:
                self.ready = True
                note_now = self.initialized_note if note is None else None
                self.state.notify_all()
            if note_now is not None:  # it came while the handshake was under way
                self._upstream_send(note_now)
            return
        if mid == TOOLS_ID:
            tools = message.get("result")
            self._remember("tools", tools)
            if self.served_tools is not None and tools is not None and tools != self.served_tools:
                self._send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return
        if mid is not None and "method" not in message:
            with self.state:
                method = self.pending.pop(mid, None)
                self.state.notify_all()
            if method == "tools/list" and self.handshake:
                self._remember("tools", message.get("result"))
        self._send(message)

    def _remember(self, kind: str, result: Any) -> None:
        """Keep the worker's answer for the next cold start with these settings."""
        if not isinstance(result, dict) or self.init_request is None:
            return
        version = (self.init_request.get("params") or {}).get("protocolVersion")
        cache = dict(self.cache or {"initialize": {}, "tools": {}})
        cache.pop("exact", None)
        cache[kind] = {**(cache.get(kind) or {}), str(version): result}
        if self.versions:
            cache["protocol_versions"] = self.versions
        with self.saving:  # the client may be answered from self.cache and leave at once
            self.cache = cache
            try:
                save_cache(self.paths, self.key, cache)
            except OSError:
                pass

    def _worker_gone(self, sock: socket.socket) -> None:
        with self.state:
            if self.upstream is not sock:
                return
            self.upstream = None
            self.ready = False
            self.init_sent = False
            waiting = list(self.pending)
            self.pending.clear()
            if self.init_waiting is not None:  # the client's initialize, unanswered
                waiting.append(self.init_waiting)
                self.init_waiting = None
            self.state.notify_all()
        for mid in waiting:
            self._send(
                _error(mid, "MKG's worker stopped while answering (restarting?); call again in a moment")
            )
        try:
            sock.close()
        except OSError:
            pass

    def _disconnect(self) -> None:
        with self.state:
            sock, self.upstream = self.upstream, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


def _dial(paths: runtime.Paths) -> socket.socket | None:
    """A connection to this user's worker, or None (none running, or not this user's)."""
    if not runtime._owned_by_me(paths.socket):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(paths.socket)
        uid = runtime.peer_uid(sock)
        if uid is not None and uid != os.geteuid():
            sock.close()
            return None
        return sock
    except OSError:
        sock.close()
        return None


def _read_line(sock: socket.socket) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(1)
        if not chunk:
            return None
        if chunk == b"\n":
            return b"".join(chunks)
        chunks.append(chunk)


def _error(mid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": WORKER_GONE, "message": text}}


if __name__ == "__main__":
    main()
