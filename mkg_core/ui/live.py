"""Live pages: new session events pushed to the browser as server-sent events.

A stream polls the graph (every :attr:`Viewer.live_interval` seconds) for events after its cursor
(the time and id of the last event the page shows), renders each as the same row the page renders
(escaped by the templates), and sends it with the cursor as the event id, so a reconnecting browser
(``Last-Event-ID``) misses nothing and gets nothing twice. A stream ends when the browser goes away
(the response is cancelled) or when the viewer stops (:attr:`Viewer.stopping`, set before the
server closes its connections); at most :attr:`Viewer.max_streams` run at once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from . import queries as q
from .reads import event_cursor
from .viewer import TEMPLATES, Viewer, cursor, parse_cursor, viewer_of

#: Events sent per poll at most (the rest come with the next one), and a comment line's interval
#: that keeps idle connections open through proxies and shows the browser the stream is alive.
BATCH, KEEPALIVE_SECONDS = 50, 15.0


def now_cursor(viewer: Viewer) -> str:
    """A cursor at the database's current time: only events after now."""
    return cursor(viewer.graph.read(q.NOW)[0]["now"], "")


def latest(viewer: Viewer, project_id: str | None, limit: int = 30) -> dict[str, Any]:
    """The newest events (of one project, or of every one) for the live page, oldest first."""
    rows = viewer.graph.read(
        q.LATEST_EVENTS, {"project_id": project_id, "user_id": viewer.user_id, "limit": limit}
    )
    return {"rows": rows, "last": event_cursor(rows[-1]) if rows else now_cursor(viewer)}


def new_events(
    viewer: Viewer, after: str, session_id: str | None, project_id: str | None
) -> list[dict[str, Any]]:
    after_at, after_id = parse_cursor(after)
    params = {"user_id": viewer.user_id, "after_at": after_at, "after_id": after_id or "", "limit": BATCH}
    if session_id:
        return viewer.graph.read(q.EVENTS, {**params, "session_id": session_id})
    return viewer.graph.read(q.RECENT_EVENTS, {**params, "project_id": project_id})


def render_rows(rows: list[dict[str, Any]], *, with_session: bool) -> str:
    template = TEMPLATES.env.get_template("_events.html")
    return template.render(rows=rows, with_session=with_session)


def sse(data: str, *, event: str, event_id: str) -> str:
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    return f"event: {event}\nid: {event_id}\n{lines}\n"


async def stream(request: Request) -> Response:
    viewer = viewer_of(request)
    session_id = request.query_params.get("session") or None
    project_id = request.query_params.get("project") or None
    after = request.headers.get("last-event-id") or request.query_params.get("after") or ""
    if parse_cursor(after) == (None, None):
        after = await anyio.to_thread.run_sync(now_cursor, viewer)
    if viewer.open_streams >= viewer.max_streams:
        return PlainTextResponse("Too many live pages are open; close one.", status_code=503)

    async def events() -> AsyncIterator[str]:
        nonlocal after
        viewer.open_streams += 1
        try:
            yield "retry: 2000\n\n"
            quiet_since = time.monotonic()
            while not viewer.stopping.is_set():
                rows = await anyio.to_thread.run_sync(new_events, viewer, after, session_id, project_id)
                for row in rows:
                    after = event_cursor(row)
                    html = render_rows([row], with_session=session_id is None)
                    yield sse(html, event="row", event_id=after)
                if rows:
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                    quiet_since = time.monotonic()
                    yield ": still here\n\n"
                await _pause(viewer)
        finally:
            viewer.open_streams -= 1

    return StreamingResponse(events(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})


async def _pause(viewer: Viewer) -> None:
    """Wait for the next poll, waking early when the viewer stops."""
    deadline = time.monotonic() + viewer.live_interval
    while not viewer.stopping.is_set() and time.monotonic() < deadline:
        await anyio.sleep(min(0.1, viewer.live_interval))
