"""What the viewer's pages show, read from the graph: plain dicts for the templates.

Searching learnings is recall's own search (:func:`mkg_core.search.search_learnings`), with the
same floors, so a search here finds what a prompt with the same words would recall, with the
rankings that found each learning and its fused score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import system_prompt
from ..search import keyword_query, scoped_query, search_learnings
from . import queries as q
from .viewer import Viewer, cursor, parse_cursor

STATUSES = ("approved", "candidate", "held", "rejected")
SCOPES = ("project", "user")
#: The most a search shows (it is ranked, not paged).
SEARCH_LIMIT = 50


@dataclass(frozen=True)
class Filters:
    """The learnings list's search and filters, as the page's query string gives them."""

    q: str = ""
    status: str | None = None
    scope: str | None = None
    kind: str | None = None
    entity: str | None = None
    before: str | None = None

    @classmethod
    def of(cls, params: Any) -> Filters:
        def pick(name: str, allowed: tuple[str, ...] | None = None) -> str | None:
            value = str(params.get(name) or "").strip()[:200]
            if not value or (allowed is not None and value not in allowed):
                return None
            return value

        return cls(
            q=str(params.get("q") or "").strip()[:500],
            status=pick("status", STATUSES),
            scope=pick("scope", SCOPES),
            kind=pick("kind"),
            entity=pick("entity"),
            before=pick("before"),
        )

    def query(self) -> dict[str, str | None]:
        return {
            "q": self.q,
            "status": self.status,
            "scope": self.scope,
            "kind": self.kind,
            "entity": self.entity,
        }


def persona(viewer: Viewer, project_id: str) -> dict[str, Any]:
    """The system prompt sessions of this project get (the project's own, the user's default, or the
    built-in bootstrap), as ``mkg prompt show`` finds it."""
    scope, content, version = system_prompt.effective(viewer.graph, project_id, viewer.user_id)
    first = next((line.strip("# ").strip() for line in content.splitlines() if line.strip()), "")
    if scope is None:
        whose = "the built-in bootstrap prompt"
    elif scope.kind == "project":
        whose = f"the project's own prompt, version {version}"
    else:
        whose = f"your default prompt, version {version}"
    return {"whose": whose, "first_line": first, "scope": scope.kind if scope else None, "version": version}


def projects(viewer: Viewer, page: int) -> dict[str, Any]:
    size = viewer.page_size
    rows = viewer.graph.read(q.PROJECTS, {"skip": page * size, "limit": size, "user_id": viewer.user_id})
    for row in rows:
        row["persona"] = persona(viewer, row["id"])
    total = int(viewer.graph.read(q.PROJECT_COUNT)[0]["n"])
    facts = int(viewer.graph.read(q.MY_WAITING_FACTS, {"user_id": viewer.user_id})[0]["n"])
    return {
        "projects": rows,
        "page": page,
        "more": (page + 1) * size < total,
        "total": total,
        "my_waiting_facts": facts,
    }


def project(viewer: Viewer, project_id: str) -> dict[str, Any] | None:
    rows = viewer.graph.read(q.PROJECT, {"project_id": project_id, "user_id": viewer.user_id})
    if not rows:
        return None
    row = rows[0]
    row["persona"] = persona(viewer, project_id)
    row["my_waiting_facts"] = int(viewer.graph.read(q.MY_WAITING_FACTS, {"user_id": viewer.user_id})[0]["n"])
    return row


def learnings(viewer: Viewer, project_id: str, filters: Filters) -> dict[str, Any]:
    """A page of the project's learnings, newest first; or, with words to search, the best matches
    (recall's search for live memory; the same index for tombstones and held candidates)."""
    base = {
        "project_id": project_id,
        "user_id": viewer.user_id,
        "kind": filters.kind,
        "entity": filters.entity,
    }
    if filters.q:
        return _search(viewer, filters, base)
    before_at, before_id = parse_cursor(filters.before)
    rows = viewer.graph.read(
        q.LEARNINGS,
        {
            **base,
            "status": filters.status,
            "scope": filters.scope,
            "before_at": before_at,
            "before_id": before_id,
            "limit": viewer.page_size + 1,
        },
    )
    more = len(rows) > viewer.page_size
    rows = rows[: viewer.page_size]
    return {
        "mode": "list",
        "rows": rows,
        "next": cursor(rows[-1]["cursor_at"], rows[-1]["id"]) if more else None,
    }


def _search(viewer: Viewer, filters: Filters, base: dict[str, Any]) -> dict[str, Any]:
    graph, settings = viewer.graph, viewer.settings
    found: dict[str, dict[str, Any]] = {}
    note = None
    if filters.status in ("rejected", "held"):
        note = "Recall never returns these; they are matched by their words only."
        words = keyword_query(filters.q)
        statuses = ("rejected",) if filters.status == "rejected" else ("candidate",)
        if words:
            query = scoped_query(
                words, project_id=base["project_id"], user_id=viewer.user_id, statuses=statuses
            )
            for hit in graph.read(
                q.UNRECALLED_SEARCH, {**base, "query": query, "status": filters.status, "limit": SEARCH_LIMIT}
            ):
                found[hit["id"]] = {"score": float(hit["score"]), "sources": ["fulltext"]}
    else:
        hits = search_learnings(
            graph,
            filters.q,
            project_id=base["project_id"],
            user_id=viewer.user_id,
            session_id=None,
            limit=SEARCH_LIMIT,
            min_score=settings.recall_min_score,
            embedder=viewer.embedder(),
            min_similarity=settings.recall_min_similarity,
            use_graph=settings.recall_graph,
            use_sessions=settings.recall_sessions,
        )
        found = {hit.id: {"score": hit.score, "sources": list(hit.sources)} for hit in hits}
    details = {row["id"]: row for row in graph.read(q.LEARNINGS_BY_ID, {**base, "ids": list(found)})}
    rows = []
    for lid, why in found.items():
        row = details.get(lid)
        if row is None or (filters.scope and row["scope"] != filters.scope):
            continue
        if filters.status in ("approved", "candidate") and row["status"] != filters.status:
            continue
        rows.append({**row, **why})
    return {"mode": "search", "rows": rows, "next": None, "note": note}


def observations(viewer: Viewer, project_id: str, before: str | None, limit: int = 10) -> dict[str, Any]:
    before_at, before_id = parse_cursor(before)
    rows = viewer.graph.read(
        q.OBSERVATIONS,
        {"project_id": project_id, "before_at": before_at, "before_id": before_id, "limit": limit + 1},
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return {"rows": rows, "next": cursor(rows[-1]["cursor_at"], rows[-1]["id"]) if more else None}


def sessions(viewer: Viewer, project_id: str, before: str | None, limit: int = 10) -> dict[str, Any]:
    before_at, before_id = parse_cursor(before)
    rows = viewer.graph.read(
        q.SESSIONS,
        {"project_id": project_id, "before_at": before_at, "before_id": before_id, "limit": limit + 1},
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return {"rows": rows, "next": cursor(rows[-1]["cursor_at"], rows[-1]["id"]) if more else None}


def error_patterns(viewer: Viewer, project_id: str) -> list[dict[str, Any]]:
    return viewer.graph.read(q.ERROR_PATTERNS, {"project_id": project_id, "limit": 20})


def entities(viewer: Viewer, project_id: str) -> list[dict[str, Any]]:
    return viewer.graph.read(q.ENTITIES, {"project_id": project_id, "user_id": viewer.user_id, "limit": 24})


# -- a session -----------------------------------------------------------------------------------------

#: Events of a session per page (its live stream adds the ones after).
EVENTS_PER_PAGE = 200


def session(viewer: Viewer, session_id: str) -> dict[str, Any] | None:
    rows = viewer.graph.read(q.SESSION, {"session_id": session_id, "user_id": viewer.user_id})
    return rows[0] if rows else None


def events(
    viewer: Viewer, session_id: str, after: str | None, limit: int = EVENTS_PER_PAGE
) -> dict[str, Any]:
    after_at, after_id = parse_cursor(after)
    rows = viewer.graph.read(
        q.EVENTS,
        {
            "session_id": session_id,
            "user_id": viewer.user_id,
            "after_at": after_at,
            "after_id": after_id,
            "limit": limit + 1,
        },
    )
    more = len(rows) > limit
    rows = rows[:limit]
    last = cursor(rows[-1]["cursor_at"], rows[-1]["event"]["event_id"]) if rows else after
    return {"rows": rows, "more": more, "last": last}


def event_cursor(row: dict[str, Any]) -> str:
    return cursor(row["cursor_at"], row["event"]["event_id"])


# -- a learning ---------------------------------------------------------------------------------------


def learning(viewer: Viewer, learning_id: str) -> dict[str, Any] | None:
    params = {"id": learning_id, "user_id": viewer.user_id}
    rows = viewer.graph.read(q.LEARNING, params)
    if not rows:
        return None
    row = rows[0]
    relations = viewer.graph.read(q.LEARNING_RELATIONS, params)[0]
    injections = viewer.graph.read(q.LEARNING_INJECTIONS, {**params, "limit": 50})
    return {**row, **relations, "injections": injections}
