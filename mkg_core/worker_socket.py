"""The worker's owner-only unix socket: one JSON request per line, one JSON reply.

Requests: ``answer`` (a waiting hook's stdout for spool row ``seq``, within ``deadline`` seconds),
``status``, ``stop``, ``ping``, and ``mcp`` (a ``meta-knowledge-graph`` proxy: the connection
becomes its MCP session). A peer of another uid is refused; the socket file is mode 600 in a
private folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socketserver
from typing import TYPE_CHECKING, Any

from . import runtime

if TYPE_CHECKING:
    from .worker import Worker

__all__ = ["WorkerSocket"]

log = logging.getLogger("mkg.worker")


class _Handler(socketserver.StreamRequestHandler):
    server: WorkerSocket

    def handle(self) -> None:
        worker = self.server.worker
        uid = runtime.peer_uid(self.connection)
        if uid is not None and uid != os.geteuid():
            log.warning("refused a request from uid %s on the worker's socket", uid)
            return
        try:
            line = self.rfile.readline(1024 * 1024)
            message = json.loads(line or b"{}")
            op = message.get("op") if isinstance(message, dict) else None
            reply: dict[str, Any]
            if op == "mcp":  # a meta-knowledge-graph proxy: this connection becomes its MCP session
                worker.serve_mcp(self.connection, message)
                return
            if op == "answer":
                reply = {"stdout": worker.answer(int(message["seq"]), float(message.get("deadline", 1.0)))}
            elif op == "status":
                reply = worker.status()
            elif op == "stop":
                worker.stop()
                reply = {"ok": True}
            elif op == "ping":
                reply = {"ok": True, "pid": os.getpid()}
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as exc:
            log.warning("socket request failed: %s: %s", type(exc).__name__, exc)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(reply, default=str).encode() + b"\n")


class WorkerSocket(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        path = worker.paths.socket
        runtime.ensure_private_dir(os.path.dirname(path))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # stale: the lock says no other worker is running
        old_umask = os.umask(0o177)
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
