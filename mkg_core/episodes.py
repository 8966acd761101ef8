"""Episodes: the project's observation timeline, searched and read (the ``episode_*`` MCP tools).

Extraction writes one to three ``:Observation`` records per session window and chains them per
project (``NEXT``, newest at the tail); the run that wrote them also wrote the window's learnings::

    (:Project)-[:HAS_OBSERVATION]->(:Observation)-[:NEXT]->(:Observation)
    (:ProjectProcessing)-[:PRODUCED_OBSERVATION]->(:Observation)
    (:ProjectProcessing)-[:PRODUCED_LEARNING]->(:Learning)

:func:`search_episodes` fuses the fulltext and vector rankings of a text over one project's
episodes (most recent first when there is no text, or nothing matches); :func:`fetch_episode` reads
one with its neighbours and the learnings its run produced; :func:`episode_page` walks the timeline
backwards from a cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .embedding import embed_or_none
from .injection import neutralise
from .learnings import collapse
from .search import VECTOR_SEARCH_FACTOR, keyword_query, rrf

if TYPE_CHECKING:
    from .contrib import Embedder
    from .graph import Graph

#: How much of a narrative a search hit shows; a produced learning's text.
SNIPPET_CHARS, LEARNING_CHARS = 160, 200

_FIELDS = """
RETURN node.id AS id, node.type AS type, node.title AS title, node.narrative AS narrative,
       node.started_at AS started_at, node.ended_at AS ended_at, node.session_id AS session_id,
       node.user_id AS user_id, coalesce(node.ended_at, node.created_at) AS at, score
"""

FULLTEXT_EPISODES = (
    """
CALL db.index.fulltext.queryNodes('project_observation_fulltext', $query, {limit: $candidates * 10})
YIELD node, score
WHERE node.project_id = $project_id
"""
    + _FIELDS
    + "ORDER BY score DESC LIMIT $candidates"
)

VECTOR_EPISODES = (
    """
MATCH (node:Observation)
  SEARCH node IN (VECTOR INDEX project_observation_vector FOR $vector
    WHERE node.project_id = $project_id
    LIMIT $search_limit) SCORE AS score
WITH node, score
"""
    + _FIELDS
    + "ORDER BY score DESC LIMIT $candidates"
)

RECENT_EPISODES = (
    """
MATCH (:Project {id: $project_id})-[:HAS_OBSERVATION]->(node:Observation)
WITH node, coalesce(node.ended_at, node.created_at) AS at
WHERE $before_at IS NULL OR at < $before_at OR (at = $before_at AND node.id < $before_id)
WITH node, 0.0 AS score
"""
    + _FIELDS
    + "ORDER BY at DESC, id DESC LIMIT $limit"
)

COUNT_EPISODES = "MATCH (:Project {id: $project_id})-[:HAS_OBSERVATION]->(o:Observation) RETURN count(o) AS n"

CURSOR = """
MATCH (:Project {id: $project_id})-[:HAS_OBSERVATION]->(o:Observation {id: $id})
RETURN coalesce(o.ended_at, o.created_at) AS at
"""

FETCH_EPISODE = """
MATCH (:Project {id: $project_id})-[:HAS_OBSERVATION]->(o:Observation {id: $id})
OPTIONAL MATCH (previous:Observation)-[:NEXT]->(o)
OPTIONAL MATCH (o)-[:NEXT]->(following:Observation)
OPTIONAL MATCH (run:ProjectProcessing)-[:PRODUCED_OBSERVATION]->(o)
OPTIONAL MATCH (run)-[:PRODUCED_LEARNING]->(l:Learning)
RETURN o {.id, .type, .title, .narrative, .facts, .started_at, .ended_at, .session_id, .user_id} AS episode,
       previous.id AS prev_id, following.id AS next_id,
       [x IN collect(DISTINCT l {.id, .text, .status, .scope}) WHERE x.id IS NOT NULL] AS learnings
"""


@dataclass(frozen=True)
class Episode:
    id: str
    type: str | None
    title: str | None
    snippet: str
    started_at: Any
    ended_at: Any
    session_id: str | None
    user_id: str | None
    score: float
    #: The rankings that found it: ``fulltext``, ``vector``, or ``recent`` (no match, or no text).
    sources: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "title": self.title,
            "snippet": self.snippet,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "session_id": self.session_id,
            "user_id": self.user_id,
            "score": round(self.score, 4),
            "sources": list(self.sources),
        }


def search_episodes(
    graph: Graph, text: str | None, *, project_id: str, limit: int, embedder: Embedder | None = None
) -> list[Episode]:
    """The project's episodes most relevant to ``text``, best first (fulltext and vector rankings
    fused); the most recent ones when there is no text or nothing matches."""
    candidates = max(limit * 3, 20)
    params: dict[str, Any] = {
        "project_id": project_id,
        "candidates": candidates,
        "search_limit": candidates * VECTOR_SEARCH_FACTOR,
    }
    rankings: dict[str, list[dict[str, Any]]] = {}
    words = keyword_query(text) if text and text.strip() else None
    if words is not None:
        rows = graph.read(FULLTEXT_EPISODES, {**params, "query": words})
        if rows:
            rankings["fulltext"] = rows
    (vector,) = embed_or_none(embedder, [text[-8000:]]) if text and text.strip() else [None]
    if vector is not None:
        try:
            rankings["vector"] = graph.read(VECTOR_EPISODES, {**params, "vector": vector})
        except Exception:  # no vector index yet, another dimension: fulltext still answers
            pass
    rankings = {branch: rows for branch, rows in rankings.items() if rows}
    if not rankings:
        rows = graph.read(RECENT_EPISODES, {**params, "limit": limit, "before_at": None, "before_id": None})
        return [_episode(row, ("recent",)) for row in rows]
    fused = sorted(rrf(rankings), key=lambda row: (-row["score"], str(row["id"])))
    return [_episode(row, tuple(row["sources"])) for row in fused[:limit]]


def episode_page(graph: Graph, *, project_id: str, limit: int, before: str | None = None) -> dict[str, Any]:
    """The most recent episodes, or those older than the episode ``before`` (a cursor: the last id
    of the previous page), newest first, with the cursor of the next page."""
    before_at = None
    if before is not None:
        cursor = graph.read(CURSOR, {"project_id": project_id, "id": before})
        if not cursor:
            raise LookupError(f"no episode {before!r} in project {project_id!r}")
        before_at = cursor[0]["at"]
    rows = graph.read(
        RECENT_EPISODES,
        {"project_id": project_id, "limit": limit, "before_at": before_at, "before_id": before},
    )
    total = int(graph.read(COUNT_EPISODES, {"project_id": project_id})[0]["n"])
    episodes = [_episode(row, ("recent",)).as_dict() for row in rows]
    for item in episodes:
        item.pop("score")
        item.pop("sources")
    return {
        "mode": "before" if before else "latest",
        "count": len(episodes),
        "total": total,
        "episodes": episodes,
        "next": episodes[-1]["id"] if len(episodes) == limit else None,
    }


def fetch_episode(graph: Graph, *, project_id: str, episode_id: str) -> dict[str, Any] | None:
    """One episode whole: its facts and narrative, the episodes before and after it on the
    timeline, and the learnings the same extraction run produced. None when the project has no
    such episode."""
    rows = graph.read(FETCH_EPISODE, {"project_id": project_id, "id": episode_id})
    if not rows:
        return None
    row = rows[0]
    episode = dict(row["episode"])
    for key in ("title", "narrative"):
        episode[key] = neutralise(episode[key]) if isinstance(episode.get(key), str) else episode.get(key)
    facts = episode.get("facts")
    episode["facts"] = [neutralise(str(fact)) for fact in facts] if isinstance(facts, list) else []
    for key in ("started_at", "ended_at"):
        episode[key] = _iso(episode.get(key))
    learnings = sorted(row["learnings"], key=lambda item: str(item["id"]))
    return {
        **episode,
        "prev_id": row["prev_id"],
        "next_id": row["next_id"],
        "produced_learnings": [
            {**item, "text": neutralise(_clip(str(item.get("text") or ""), LEARNING_CHARS))}
            for item in learnings
        ],
    }


def _episode(row: dict[str, Any], sources: tuple[str, ...]) -> Episode:
    narrative = row["narrative"] if isinstance(row.get("narrative"), str) else ""
    title = row.get("title")
    return Episode(
        id=str(row["id"]),
        type=row.get("type"),
        title=neutralise(title) if isinstance(title, str) else None,
        snippet=neutralise(_clip(narrative, SNIPPET_CHARS)),
        started_at=row.get("started_at"),
        ended_at=row.get("ended_at"),
        session_id=row.get("session_id"),
        user_id=row.get("user_id"),
        score=float(row.get("score") or 0.0),
        sources=sources,
    )


def _clip(text: str, limit: int) -> str:
    return collapse(text, limit) or ""


def _iso(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
