"""What every page of the viewer shares: whose memory it shows, the graph, the templates.

Templates escape everything they print (Jinja2 autoescape on every template, and nothing marked
safe that came from memory). Text is never turned into a link: the only ``href`` values are the
viewer's own paths, built by :func:`href`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ..timeframes import aware
from .security import SESSION_KEY, Sessions

if TYPE_CHECKING:
    from ..contrib import Embedder
    from ..graph import Graph
    from ..settings import Settings

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")

#: Characters of a tool input or result shown in a timeline row; of a memory text in a list.
EVENT_TEXT_CHARS, LIST_TEXT_CHARS = 1500, 400


@dataclass
class Viewer:
    """The viewer of one user's memory, for as long as ``mkg ui`` runs."""

    settings: Settings
    graph: Graph
    user_id: str
    sessions: Sessions
    #: The project of the folder ``mkg ui`` started in, when it has one.
    home_project: str | None = None
    #: Made on first use (the keyless local model takes a moment to load).
    make_embedder: Callable[[], Embedder | None] = lambda: None
    page_size: int = 25
    #: How often live streams look for new events, in seconds.
    live_interval: float = 1.0
    max_streams: int = 16
    #: Live streams open now (changed on the event loop only).
    open_streams: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)
    _embedder: list[Embedder | None] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def embedder(self) -> Embedder | None:
        with self._lock:
            if not self._embedder:
                try:
                    self._embedder.append(self.make_embedder())
                except Exception:  # no embedder: search is fulltext only, as recall's fallback
                    self._embedder.append(None)
            return self._embedder[0]


def href(path: str, **params: Any) -> str:
    """One of the viewer's own addresses (``path`` is a constant of the templates), with parameters."""
    if not path.startswith("/") or path.startswith("//"):
        raise ValueError(f"not a viewer path: {path!r}")
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


def cursor(at: Any, key: Any) -> str:
    """A page cursor: the last row's time and id."""
    return f"{at}|{key}"


def parse_cursor(value: str | None) -> tuple[str | None, str | None]:
    """The time and id of a cursor; (None, None) for none or a malformed one."""
    if not value or "|" not in value:
        return None, None
    at, _, key = value.partition("|")
    if not _ISO.fullmatch(at):
        return None, None
    return at, key


def _when(value: Any) -> str:
    moment = aware(value)
    if moment is None:
        return "" if value is None else str(value)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(value: Any) -> str:
    moment = aware(value)
    if moment is None:
        return ""
    seconds = max((datetime.now(UTC) - moment).total_seconds(), 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def _clip(value: Any, limit: int = LIST_TEXT_CHARS) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pretty(value: Any, limit: int = EVENT_TEXT_CHARS) -> str:
    """A tool input or result: indented when it is JSON, clipped."""
    text = "" if value is None else str(value)
    try:
        parsed = json.loads(text)
    except ValueError:
        return _clip(text, limit)
    if isinstance(parsed, dict | list):
        text = json.dumps(parsed, indent=2, ensure_ascii=False)
    return _clip(text, limit)


def _score(value: Any) -> str:
    return f"{float(value):.4f}" if isinstance(value, int | float) else "not recorded"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mkg_core.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=_when, ago=_ago, clip=_clip, pretty=_pretty, score=_score)
    env.globals.update(href=href)
    return env


TEMPLATES = Jinja2Templates(env=environment())


def viewer_of(request: Request) -> Viewer:
    viewer: Viewer = request.app.state.viewer
    return viewer


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """A page (or, for htmx, a fragment) with what every template may use."""
    viewer = viewer_of(request)
    shared = {
        "user_id": viewer.user_id,
        "home_project": viewer.home_project,
        "csrf": viewer.sessions.csrf(request.scope.get(SESSION_KEY)) or "",
        "path": request.url.path,
    }
    return TEMPLATES.TemplateResponse(request, name, {**shared, **context}, status_code=status)
