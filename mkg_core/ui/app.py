"""The memory viewer's web app (Starlette): its pages, and the guard in front of them.

Pages (all GET; every write is a POST in :mod:`mkg_core.ui.actions`):

- ``/``: the projects, with their counts, last activity and the persona their sessions get;
- ``/project?id=``: its learnings (recall's search, filters, pages), observation timeline,
  sessions, error patterns and, when the graph has them, its entities;
- ``/session?id=``: the events by turn, and what memory each prompt was given and why;
- ``/learning?id=``: one learning, its history and injections, and what can be done to it;
- ``/review?project=``: the review queue, with every decision ``mkg review`` offers;
- ``/prompt?project=``: the project's and the user's system prompts, versions, diffs, rollback;
- ``/graph?kind=&id=``: a node's neighbourhood, drawn;
- ``/live``: events as they arrive (server-sent events, :mod:`mkg_core.ui.live`).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import system_prompt
from ..errors import GraphUnavailable
from ..review import review_queue
from . import actions, graphview, live, reads
from .security import Guard
from .viewer import Viewer, href, render, viewer_of

STATIC = Path(__file__).parent / "static"
DONE = {  # what a finished action says (never the request's own text)
    "approve": "Approved.",
    "reject": "Rejected: it is a tombstone now.",
    "tombstone": "Tombstoned: it keeps its text and edges, and recall no longer returns it.",
    "edit": "Edited and approved.",
    "restore": "Restored: it is approved memory again.",
    "rollback": "Rolled back: the older text is current again, as a new version.",
    "reset": "Reset: this prompt no longer applies.",
    **{
        decision: f"Decided: {decision.replace('_', ' ')}."
        for decision in ("keep_new", "keep_existing", "keep_both")
    },
    "edit_approve": "Edited and approved.",
}


def _param(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    return value.strip() if value and value.strip() else None


def _project_id(request: Request, name: str = "id") -> str:
    project_id = _param(request, name) or viewer_of(request).home_project
    if not project_id:
        raise HTTPException(400, "Which project? Open one from the projects page.")
    return project_id


def _page_number(request: Request) -> int:
    value = _param(request, "page") or "0"
    return int(value) if value.isdigit() and int(value) < 10_000 else 0


def home(request: Request) -> Response:
    data = reads.projects(viewer_of(request), _page_number(request))
    return render(request, "projects.html", data)


def project(request: Request) -> Response:
    viewer = viewer_of(request)
    project_id = _project_id(request)
    summary = reads.project(viewer, project_id)
    if summary is None:
        raise HTTPException(404, "No such project in this graph.")
    filters = reads.Filters.of(request.query_params)
    context = {
        "project": summary,
        "filters": filters,
        "learnings": reads.learnings(viewer, project_id, filters),
        "observations": reads.observations(viewer, project_id, _param(request, "obs_before")),
        "sessions": reads.sessions(viewer, project_id, _param(request, "sessions_before")),
        "error_patterns": reads.error_patterns(viewer, project_id),
        "entities": reads.entities(viewer, project_id),
    }
    return render(request, "project.html", context)


def project_learnings(request: Request) -> Response:
    """The learnings list alone, for htmx: the search and filters without reloading the page."""
    viewer = viewer_of(request)
    project_id = _project_id(request)
    filters = reads.Filters.of(request.query_params)
    context = {
        "project": {"id": project_id},
        "filters": filters,
        "learnings": reads.learnings(viewer, project_id, filters),
    }
    response = render(request, "_learnings.html", context)
    response.headers["HX-Push-Url"] = href(
        "/project", id=project_id, **filters.query(), before=filters.before
    )
    return response


def session(request: Request) -> Response:
    viewer = viewer_of(request)
    session_id = _param(request, "id")
    found = reads.session(viewer, session_id) if session_id else None
    if found is None:
        raise HTTPException(404, "No such session in this graph.")
    events = reads.events(viewer, found["id"], _param(request, "after"))
    stream = None if events["more"] else href("/live/stream", session=found["id"], after=events["last"])
    return render(request, "session.html", {"session": found, "events": events, "stream": stream})


def learning(request: Request) -> Response:
    viewer = viewer_of(request)
    learning_id = _param(request, "id")
    found = reads.learning(viewer, learning_id) if learning_id else None
    if found is None:
        raise HTTPException(404, "No such learning in your memory.")
    return render(
        request, "learning.html", {**found, "error": None, "done": DONE.get(_param(request, "done") or "")}
    )


def review(request: Request) -> Response:
    viewer = viewer_of(request)
    project_id = _project_id(request, "project")
    queue = review_queue(viewer.graph, project_id=project_id, user_id=viewer.user_id, limit=100)
    context = {"queue": queue, "project_id": project_id, "done": DONE.get(_param(request, "done") or "")}
    return render(request, "review.html", context)


def prompt(request: Request) -> Response:
    viewer = viewer_of(request)
    project_id = _project_id(request, "project")
    graph = viewer.graph
    system_prompt.adopt_legacy(graph, viewer.user_id)
    in_effect, _, effective_version = system_prompt.effective(graph, project_id, viewer.user_id)
    scopes = []
    for scope in (system_prompt.Scope.project(project_id), system_prompt.Scope.user(viewer.user_id)):
        content, version = system_prompt.current(graph, scope)
        scopes.append(
            {
                "kind": scope.kind,
                "title": "This project's own prompt" if scope.kind == "project" else "Your default prompt",
                "content": content,
                "version": version,
                "history": system_prompt.history(graph, scope),
                "in_effect": in_effect is not None and in_effect.name == scope.name,
            }
        )
    context: dict[str, Any] = {
        "project_id": project_id,
        "scopes": scopes,
        "bootstrap": in_effect is None,
        "effective_version": effective_version,
        "diff": _diff(request, viewer, project_id),
        "done": DONE.get(_param(request, "done") or ""),
    }
    return render(request, "prompt.html", context)


def _diff(request: Request, viewer: Viewer, project_id: str) -> dict[str, Any] | None:
    kind, a, b = _param(request, "scope"), _param(request, "a"), _param(request, "b")
    if kind not in ("user", "project") or not (a and b and a.isdigit() and b.isdigit()):
        return None
    scope = actions.prompt_scope(viewer, kind, project_id)
    try:
        old = system_prompt.version_content(viewer.graph, scope, int(a)) or ""
        new = system_prompt.version_content(viewer.graph, scope, int(b)) or ""
    except system_prompt.PromptError as exc:
        raise HTTPException(404, str(exc)) from None
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"v{a}", f"v{b}", lineterm=""))
    kinds = [_line_kind(line) for line in lines]
    return {"scope": kind, "a": a, "b": b, "lines": list(zip(kinds, lines, strict=True))}


def _line_kind(line: str) -> str:
    if line.startswith(("+++", "---", "@@")):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "same")


def graph_page(request: Request) -> Response:
    kind, key = _param(request, "kind"), _param(request, "id")
    if kind not in graphview.CENTRES or not key:
        raise HTTPException(400, "A graph needs a kind (learning, session or entity) and an id.")
    found = graphview.neighbourhood(viewer_of(request), kind, key)
    if found is None:
        raise HTTPException(404, f"No such {kind} in your memory.")
    nodes = [e["data"] for e in found["elements"] if "source" not in e["data"]]
    data = href("/graph/data", kind=kind, id=key)
    return render(request, "graph.html", {"kind": kind, "key": key, "nodes": nodes, "data_url": data})


def graph_data(request: Request) -> Response:
    kind, key = _param(request, "kind") or "", _param(request, "id") or ""
    found = graphview.neighbourhood(viewer_of(request), kind, key)
    if found is None:
        raise HTTPException(404, "No such node in your memory.")
    return JSONResponse(found)


def live_page(request: Request) -> Response:
    viewer = viewer_of(request)
    project_id = _param(request, "project")
    latest = live.latest(viewer, project_id)
    stream = href("/live/stream", project=project_id, after=latest["last"])
    return render(request, "live.html", {"project_id": project_id, "events": latest, "stream": stream})


async def http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "Something went wrong."
    return render(request, "error.html", {"status": status, "detail": detail}, status=status)


async def graph_down(request: Request, exc: Exception) -> Response:
    return render(request, "error.html", {"status": 503, "detail": str(exc)}, status=503)


ROUTES = [
    Route("/", home),
    Route("/project", project),
    Route("/project/learnings", project_learnings),
    Route("/session", session),
    Route("/learning", learning),
    Route("/review", review),
    Route("/prompt", prompt),
    Route("/graph", graph_page),
    Route("/graph/data", graph_data),
    Route("/live", live_page),
    Route("/live/stream", live.stream),
    Route("/learning/action", actions.learning_action, methods=["POST"]),
    Route("/review/decide", actions.review_decide, methods=["POST"]),
    Route("/prompt/change", actions.prompt_change, methods=["POST"]),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]


def create_app(viewer: Viewer) -> Guard:
    """The viewer's ASGI app: the routes behind :class:`~mkg_core.ui.security.Guard`."""
    app = Starlette(
        routes=ROUTES,
        exception_handlers={HTTPException: http_error, GraphUnavailable: graph_down},
    )
    app.state.viewer = viewer
    return Guard(app, viewer.sessions)
