"""Who may talk to MKG over HTTP: a bearer token, Host and Origin checks, loopback by default.

Memory is private to its user, and a port on 127.0.0.1 is reachable by every local user (and by
web pages through DNS rebinding). So every HTTP endpoint MKG serves asks for a bearer token: the
MCP server's lives in ``<config dir>/http-token`` (mode 600, made on first use, or
``MKG_HTTP_TOKEN``), and Host/Origin checks stay on whatever the bind address. Binding anything but
loopback needs an explicit choice (``--allow-remote``) and prints a warning.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any

from . import runtime

TOKEN_FILE = "http-token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_path(config_dir: Path) -> Path:
    return config_dir / TOKEN_FILE


def load_or_create_token(config_dir: Path, environ: MutableMapping[str, str] | None = None) -> str:
    """``MKG_HTTP_TOKEN``, else the stored token, else a new one stored with mode 600."""
    env = os.environ if environ is None else environ
    if env.get("MKG_HTTP_TOKEN"):
        return env["MKG_HTTP_TOKEN"]
    path = token_path(config_dir)
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)
            return token
    except FileNotFoundError:
        pass
    runtime.ensure_private_dir(str(config_dir))
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def allowed_hosts(bind: str, extra: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """The Host and Origin values a server bound to ``bind`` accepts (any port)."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if not is_loopback(bind) and bind not in ("0.0.0.0", "::", ""):
        names.append(f"[{bind}]" if ":" in bind else bind)
    names += [name for name in extra if name]
    hosts = [f"{name}:*" for name in names]
    origins = [f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")]
    return hosts, origins


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str, realm: str = "mkg") -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.realm = realm

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                given = value
                break
        if given and hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {"error": "unauthorized", "detail": "send Authorization: Bearer <token> (see `mkg serve`)"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", f'Bearer realm="{self.realm}"'.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
