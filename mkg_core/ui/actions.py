"""The viewer's writes: each one through the function the CLI and the MCP tools use.

- a learning: approve, reject or tombstone, edit (then approve) through
  :func:`mkg_core.review.resolve` (so an edit is scrubbed, collapsed and limited as
  ``project_add_learning`` and ``edit_approve`` are), restore through :func:`mkg_core.learnings.restore`;
- the review queue: every decision ``mkg review`` offers, through :func:`mkg_core.review.resolve`;
- the system prompt: rollback and reset through :mod:`mkg_core.system_prompt`, as ``mkg prompt`` does.

Every one needs the session's CSRF token; after it, the browser is sent back to the page it came
from (or, for htmx, gets the changed fragment).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .. import system_prompt
from ..embedding import embed_or_none
from ..learnings import restore
from ..review import DECISIONS, ReviewError, resolve, review_queue
from . import reads
from .security import CSRF_FIELD, CSRF_HEADER, SESSION_KEY
from .viewer import Viewer, href, render, viewer_of

LEARNING_ACTIONS = {
    "approve": "approve",
    "reject": "reject",
    "tombstone": "reject",
    "edit": "edit_approve",
    "restore": "restore",
}


async def checked_form(request: Request) -> FormData:
    """The POSTed form, if it carries this session's CSRF token; 403 otherwise."""
    form = await request.form()
    given = form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
    viewer = viewer_of(request)
    if not viewer.sessions.csrf_matches(
        request.scope.get(SESSION_KEY), given if isinstance(given, str) else None
    ):
        raise HTTPException(403, "The form's CSRF token is missing or stale: reload the page and try again.")
    return form


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) and value.strip() else None


async def learning_action(request: Request) -> Response:
    form = await checked_form(request)
    viewer = viewer_of(request)
    learning_id, action = _text(form, "id"), _text(form, "action")
    if learning_id is None or action not in LEARNING_ACTIONS:
        raise HTTPException(400, "A learning id and one of the actions are needed.")
    found = await anyio.to_thread.run_sync(reads.learning, viewer, learning_id)
    if found is None:
        raise HTTPException(404, "No such learning in your memory.")
    try:
        await anyio.to_thread.run_sync(_apply_to_learning, viewer, found, action, form)
    except ReviewError as exc:
        return render(request, "learning.html", {**found, "error": str(exc), "done": None}, status=400)
    return RedirectResponse(href("/learning", id=learning_id, done=action), status_code=303)


def _apply_to_learning(viewer: Viewer, found: dict[str, Any], action: str, form: FormData) -> None:
    learning = found["learning"]
    project_id = str(learning.get("project_id") or "")
    reason = _text(form, "reason")
    if action == "restore":
        (vector,) = embed_or_none(viewer.embedder(), [str(learning["text"])])
        if not restore(
            viewer.graph,
            learning["id"],
            project_id=project_id,
            user_id=viewer.user_id,
            embedding=vector,
            reason=reason,
        ):
            raise ReviewError(f"learning {learning['id']!r} is not a tombstone you may restore")
        return
    resolve(
        viewer.graph,
        learning["id"],
        LEARNING_ACTIONS[action],
        project_id=project_id,
        user_id=viewer.user_id,
        text=form.get("text") if action == "edit" else None,  # type: ignore[arg-type]
        reason=reason,
        embedder=viewer.embedder(),
        merge_similarity=viewer.settings.entity_merge_similarity,
    )


async def review_decide(request: Request) -> Response:
    form = await checked_form(request)
    viewer = viewer_of(request)
    project_id, learning_id, decision = _text(form, "project"), _text(form, "id"), _text(form, "decision")
    if project_id is None or learning_id is None or decision not in DECISIONS:
        raise HTTPException(400, "A project, a learning id and one of the review decisions are needed.")
    htmx = request.headers.get("hx-request") == "true"

    def decide() -> dict[str, Any]:
        return resolve(
            viewer.graph,
            learning_id,
            decision,
            project_id=project_id,
            user_id=viewer.user_id,
            text=form.get("text") if decision == "edit_approve" else None,  # type: ignore[arg-type]
            reason=_text(form, "reason"),
            conflict_id=_text(form, "conflict_id"),
            embedder=viewer.embedder(),
            merge_similarity=viewer.settings.entity_merge_similarity,
        )

    try:
        result = await anyio.to_thread.run_sync(decide)
    except ReviewError as exc:
        if htmx:
            queue = await anyio.to_thread.run_sync(_queue, viewer, project_id)
            item = next((i for i in queue["items"] if i["id"] == learning_id), None)
            if item is not None:
                context = {"item": item, "project_id": project_id, "error": str(exc)}
                return render(request, "_review_item.html", context)
        raise HTTPException(400, str(exc)) from None
    if htmx:
        return render(request, "_review_decided.html", {"result": result, "project_id": project_id})
    return RedirectResponse(href("/review", project=project_id, done=decision), status_code=303)


def _queue(viewer: Viewer, project_id: str) -> dict[str, Any]:
    return review_queue(viewer.graph, project_id=project_id, user_id=viewer.user_id, limit=100)


def prompt_scope(viewer: Viewer, kind: str | None, project_id: str) -> system_prompt.Scope:
    if kind == "user":
        system_prompt.adopt_legacy(viewer.graph, viewer.user_id)
        return system_prompt.Scope.user(viewer.user_id)
    if kind == "project":
        return system_prompt.Scope.project(project_id)
    raise HTTPException(400, "A prompt scope is 'user' or 'project'.")


async def prompt_change(request: Request) -> Response:
    """Roll a prompt back to a version, or reset it (``mkg prompt rollback`` / ``reset``)."""
    form = await checked_form(request)
    viewer = viewer_of(request)
    project_id, kind, action = _text(form, "project"), _text(form, "scope"), _text(form, "action")
    if project_id is None or action not in ("rollback", "reset"):
        raise HTTPException(400, "A project and an action (rollback or reset) are needed.")
    version_text = _text(form, "version") or ""
    if action == "rollback" and not version_text.isdigit():
        raise HTTPException(400, "A rollback needs the version to go back to.")

    def change() -> int | None:
        scope = prompt_scope(viewer, kind, project_id)
        if action == "rollback":
            return system_prompt.rollback(viewer.graph, scope, int(version_text))
        return system_prompt.reset(viewer.graph, scope)

    try:
        version = await anyio.to_thread.run_sync(change)
    except system_prompt.PromptError as exc:
        raise HTTPException(400, str(exc)) from None
    return RedirectResponse(
        href("/prompt", project=project_id, done=action, scope=kind, version=version), status_code=303
    )
