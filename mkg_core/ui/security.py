"""Who may use the memory viewer: a token per start, then a session cookie; Host, Origin and CSRF
checks; headers that keep every page inert.

The viewer binds 127.0.0.1 only, but any local user, and any web page through DNS rebinding or a
cross-site form, can reach a port there. So:

- ``mkg ui`` makes a random token at each start and prints the address with it. The first request
  carrying it gets a session cookie (``HttpOnly``, ``SameSite=Strict``, named after the port) and
  is redirected to the same address without the token, so the token does not stay in the address
  bar or the history. Every other request needs that cookie; a session ends when the viewer stops.
- A request whose ``Host`` is not ``127.0.0.1:<port>`` or ``localhost:<port>`` is refused (DNS
  rebinding), and so is one whose ``Origin``, when it has one, is not the viewer's own.
- Every POST needs the session's CSRF token (a form field or the ``X-CSRF-Token`` header); a
  cross-site ``Sec-Fetch-Site`` is refused as well.
- Every answer carries a strict Content-Security-Policy (scripts and styles from the viewer's own
  files only: no inline script, no ``eval``, no other origin), ``nosniff``, a ``same-origin``
  referrer policy (the viewer's addresses, the one with the token among them, never go to
  another site) and ``frame-ancestors 'none'``; pages are not cached.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The query parameter that carries the start token, and the form field / header of the CSRF token.
TOKEN_PARAM = "token"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: Where the session id is kept in the ASGI scope for the app.
SESSION_KEY = "mkg_ui_session"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    # No address (the first one carries the token) goes to another site; same-origin form posts keep
    # their real Origin, which "no-referrer" would turn into "null".
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
METHODS = frozenset({"GET", "HEAD", "POST"})


@dataclass
class Sessions:
    """The start token, and the browser sessions it was exchanged for (in memory: a restart ends
    them all)."""

    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    _csrf: dict[str, str] = field(default_factory=dict)

    @property
    def cookie(self) -> str:
        # Browsers send a cookie for 127.0.0.1 to every port of it: the port in the name keeps two
        # viewers (or other local apps) from overwriting each other's session.
        return f"mkg_ui_{self.port}"

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{host}" for host in self.hosts)

    def url(self, path: str = "/") -> str:
        """The address ``mkg ui`` prints: the one that opens a session."""
        return f"http://127.0.0.1:{self.port}{path}?{urlencode({TOKEN_PARAM: self.token})}"

    def token_matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())

    def open(self) -> str:
        """A new browser session; its id goes into the cookie."""
        session = secrets.token_urlsafe(32)
        self._csrf[session] = secrets.token_urlsafe(32)
        return session

    def csrf(self, session: str | None) -> str | None:
        """The CSRF token of a session (None: no such session)."""
        return self._csrf.get(session or "")

    def csrf_matches(self, session: str | None, given: str | None) -> bool:
        expected = self.csrf(session)
        return bool(expected and given and hmac.compare_digest(given.encode(), expected.encode()))


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}


class Guard:
    """ASGI middleware in front of the whole viewer (pages, static files, live streams)."""

    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # the viewer serves no websockets
            return
        headers = _headers(scope)
        method = scope["method"]
        if headers.get("host") not in self.sessions.hosts:
            await _plain(send, 400, "This address is not the viewer's: open the one `mkg ui` printed.")
            return
        origin = headers.get("origin")
        if origin is not None and origin not in self.sessions.origins:
            await _plain(send, 403, "Requests from other sites are refused.")
            return
        if method not in METHODS:
            await _plain(send, 405, "Method not allowed.")
            return
        if method == "POST" and headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            await _plain(send, 403, "Requests from other sites are refused.")
            return
        session = _cookie(headers.get("cookie", ""), self.sessions.cookie)
        if self.sessions.csrf(session) is None:
            session = None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((value for name, value in query if name == TOKEN_PARAM), None)
        if given is not None and method == "GET":
            if not self.sessions.token_matches(given):
                await _plain(
                    send, 401, "This token is not the current one: open the address `mkg ui` printed."
                )
                return
            await self._exchange(scope, send, query, session)
            return
        if session is None:
            await _plain(
                send, 401, "Open the address `mkg ui` printed (it carries a token made for this start)."
            )
            return
        scope[SESSION_KEY] = session
        await self.app(scope, receive, _with_headers(send, static=scope["path"].startswith("/static/")))

    async def _exchange(
        self, scope: Scope, send: Send, query: list[tuple[str, str]], session: str | None
    ) -> None:
        """The token, once: a session cookie, and the same address without the token."""
        session = session or self.sessions.open()
        rest = urlencode([(name, value) for name, value in query if name != TOKEN_PARAM])
        location = scope["path"] + (f"?{rest}" if rest else "")
        cookie = f"{self.sessions.cookie}={session}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode()),
                    (b"cache-control", b"no-store"),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _cookie(header: str, name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed Cookie header is no session
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _with_headers(send: Send, *, static: bool) -> Send:
    cache = b"private, max-age=3600" if static else b"no-store"

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"]
            message["headers"] = [*headers, *SECURITY_HEADERS, (b"cache-control", cache)]
        await send(message)

    return wrapped


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
