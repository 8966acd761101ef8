"""The human review queue and the decisions a human makes on it.

The queue holds exactly what automation cannot settle: project-scoped candidates the consistency
gate found genuinely ambiguous (``consistency_status = 'ambiguous'``) or that read like an
instruction to the model (``'held'``, never recalled until approved), and user-scoped candidates
(facts about a person are never approved automatically). Oldest first, each with the live
learnings it conflicts with (``[:CONTRADICTS]``), and who wrote each (``written_by``: the user whose
session or tool call made it) and who decided on a conflicting one (``decided_by``).

Decisions stamp ``reviewed_by = 'human'`` so a later gate run never silently overturns them:

- ``approve``: the candidate becomes ``approved``;
- ``reject``: it becomes a ``rejected`` tombstone (text and edges kept, embedding dropped);
- ``edit_approve``: its text is replaced (and re-embedded), then it is approved;
- ``keep_new``: it is approved and the learnings it conflicts with (or the one named by
  ``conflict_id``) are superseded: ``rejected`` tombstones with ``superseded_at`` and
  ``(new)-[:SUPERSEDES]->(old)``;
- ``keep_existing``: it is rejected with ``[:CONTRADICTED_BY]`` to the learning that stays;
- ``keep_both``: it is approved and the conflict is marked resolved.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .embedding import embed_or_none
from .entities.linker import link_text
from .entities.model import Mention
from .entities.resolution import MERGE_SIMILARITY
from .entities.store import Linked, link, refresh_entity
from .entities.store import refresh as refresh_entities
from .errors import MkgError
from .learnings import APPROVED, CONTRADICTED_BY_OTHERS, SUPERSEDE_OTHERS, TOMBSTONE, written_text
from .redaction import scrub

if TYPE_CHECKING:
    import neo4j

    from .contrib import Embedder
    from .graph import Graph

DECISIONS = ("approve", "reject", "edit_approve", "keep_new", "keep_existing", "keep_both")
CONFLICT_DECISIONS = frozenset({"keep_new", "keep_existing"})


class ReviewError(MkgError):
    """A review decision cannot be applied; the message says why."""


QUEUE = """
MATCH (l:Learning {status: 'candidate'})
WHERE (l.scope = 'project' AND l.project_id = $project_id AND l.consistency_status IN ['ambiguous', 'held'])
   OR (l.scope = 'user' AND l.user_id = $user_id)
WITH l ORDER BY coalesce(l.created_at, l.updated_at) ASC, l.id LIMIT $limit
OPTIONAL MATCH (l)-[c:CONTRADICTS]-(other:Learning)
WHERE other.status IN ['approved', 'candidate'] AND c.resolved_at IS NULL
WITH l, collect(CASE WHEN other IS NULL THEN null ELSE
       {id: other.id, text: other.text, status: other.status, reason: c.reason,
        written_by: other.user_id, decided_by: other.reviewed_by_user_id} END) AS conflicts
RETURN l.id AS id, l.text AS text, l.scope AS scope, l.kind AS kind, l.confidence AS confidence,
       l.source AS source, l.consistency_status AS consistency_status,
       l.user_id AS written_by, l.last_user_id AS last_written_by,
       toString(l.created_at) AS created_at,
       CASE WHEN l.consistency_status = 'held' THEN 'reads like an instruction: ' + l.held_reason
            WHEN l.scope = 'user' THEN 'user fact' ELSE 'ambiguous conflict' END AS why,
       [x IN conflicts WHERE x IS NOT NULL] AS conflicts
"""

QUEUE_SIZE = """
MATCH (l:Learning {status: 'candidate'})
WHERE (l.scope = 'project' AND l.project_id = $project_id AND l.consistency_status IN ['ambiguous', 'held'])
   OR (l.scope = 'user' AND l.user_id = $user_id)
RETURN count(l) AS waiting
"""

#: The learning, if the caller may decide on it: this project's, or this user's fact.
FIND = """
MATCH (l:Learning {id: $id})
WHERE (l.scope = 'project' AND l.project_id = $project_id) OR (l.scope = 'user' AND l.user_id = $user_id)
OPTIONAL MATCH (l)-[c:CONTRADICTS]-(other:Learning)
WHERE other.status IN ['approved', 'candidate'] AND c.resolved_at IS NULL
RETURN l.status AS status, l.text AS text, l.scope AS scope, l.project_id AS project_id,
       l.user_id AS user_id, collect(other.id) AS conflicts
"""

_REVIEWED = """
SET c.reviewed_by = 'human', c.reviewed_at = $now, c.reviewed_by_user_id = $user_id,
    c.review_reason = $reason, c.updated_at = $now
"""

_FIND_C = "MATCH (c:Learning {id: $id})\n"

APPROVE = _FIND_C + APPROVED + "SET c.consistency_status = 'human'\n" + _REVIEWED

REJECT = _FIND_C + TOMBSTONE + _REVIEWED

EDIT = """
MATCH (c:Learning {id: $id})
SET c.previous_text = c.text, c.text = $text, c.summary = $text, c.embedding = $embedding,
    c.embedding_updated_at = CASE WHEN $embedding IS NULL THEN null ELSE $now END
"""

SUPERSEDE = _FIND_C + SUPERSEDE_OTHERS

CONTRADICTED_BY = _FIND_C + CONTRADICTED_BY_OTHERS

KEEP_BOTH = """
MATCH (:Learning {id: $id})-[x:CONTRADICTS]-(other:Learning)
WHERE other.id IN $ids
SET x.resolved_at = $now, x.resolution = 'keep_both'
"""


def review_queue(graph: Graph, *, project_id: str, user_id: str | None, limit: int = 20) -> dict[str, Any]:
    if limit < 1:
        raise ReviewError("limit must be at least 1")
    params = {"project_id": project_id, "user_id": user_id, "limit": min(limit, 200)}
    items = graph.read(QUEUE, params)
    waiting = int(graph.read(QUEUE_SIZE, params)[0]["waiting"])
    return {"project_id": project_id, "user_id": user_id, "waiting": waiting, "items": items}


def resolve(
    graph: Graph,
    learning_id: str,
    decision: str,
    *,
    project_id: str,
    user_id: str | None,
    text: str | None = None,
    reason: str | None = None,
    conflict_id: str | None = None,
    embedder: Embedder | None = None,
    merge_similarity: float = MERGE_SIMILARITY,
) -> dict[str, Any]:
    """Apply a human decision in one transaction; return what changed. An edit relinks the
    learning to the entities its new text names, merging names at ``merge_similarity``
    (``MKG_ENTITY_MERGE_SIMILARITY``)."""
    if decision not in DECISIONS:
        raise ReviewError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    found = _live_learning(graph, learning_id, project_id=project_id, user_id=user_id)
    edit: dict[str, Any] = {}
    if decision == "edit_approve":
        try:
            new_text = written_text(text)
        except ValueError as exc:
            raise ReviewError(f"edit_approve needs the new text: the {exc}") from None
        edit = {"text": new_text, "embedding": embed_or_none(embedder, [new_text])[0]}
        mentions = tuple(link_text(new_text))
        names = [m.name for m in mentions]
        vectors = dict(zip(names, embed_or_none(embedder, names), strict=True)) if embedder else {}
        edit["entities"] = (found, mentions, vectors, merge_similarity)
    others = _conflicts_decided(found["conflicts"], learning_id, decision, conflict_id)
    reason = scrub(reason) if isinstance(reason, str) else None
    params = {
        "id": learning_id,
        "now": datetime.now(UTC),
        "user_id": user_id,
        "reason": reason,
        "ids": others,
        "source": "human",
        "resolution": decision,
        "rejected_reason": reason or "rejected by a human",
    }
    graph.write_tx(lambda tx: _apply(tx, decision, params, edit))
    rejected = decision in ("reject", "keep_existing")
    result: dict[str, Any] = {
        "id": learning_id,
        "decision": decision,
        "status": "rejected" if rejected else "approved",
        "reviewed_by": "human",
    }
    if decision == "keep_new":
        result["superseded"] = others
    if decision == "keep_existing":
        result["kept"] = others
    return result


def _live_learning(graph: Graph, learning_id: str, *, project_id: str, user_id: str | None) -> dict[str, Any]:
    """The learning the caller may decide on, if it is live memory; ReviewError otherwise."""
    rows = graph.read(FIND, {"id": learning_id, "project_id": project_id, "user_id": user_id})
    if not rows or rows[0]["status"] is None:
        raise ReviewError(f"no learning {learning_id!r} in project {project_id} or among {user_id}'s facts")
    if rows[0]["status"] not in ("candidate", "approved"):
        raise ReviewError(
            f"learning {learning_id!r} is {rows[0]['status']}: only live memory can be reviewed"
        )
    return rows[0]


def _conflicts_decided(
    open_conflicts: list[str], learning_id: str, decision: str, conflict_id: str | None
) -> list[str]:
    """The conflicting learnings a decision applies to: all open ones, or the one named."""
    others = list(open_conflicts)
    if conflict_id is not None:
        if conflict_id not in others:
            raise ReviewError(f"{learning_id!r} has no open conflict with {conflict_id!r}")
        others = [conflict_id]
    if decision in CONFLICT_DECISIONS and not others:
        raise ReviewError(f"{decision} needs an open conflict, and {learning_id!r} has none")
    return others


def _apply(tx: neo4j.ManagedTransaction, decision: str, params: dict[str, Any], edit: dict[str, Any]) -> None:
    entities = edit.pop("entities", None)
    if edit:
        tx.run(EDIT, {**params, **edit}).consume()
    if entities is not None:
        _relink(tx, params, *entities)
    if decision == "reject" or decision == "keep_existing":
        tx.run(REJECT, params).consume()
    else:
        tx.run(APPROVE, params).consume()
    decided = {**params, "reason": params["reason"] or "decided by a human"}
    if decision == "keep_new":
        tx.run(SUPERSEDE, decided).consume()
    elif decision == "keep_existing":
        tx.run(CONTRADICTED_BY, decided).consume()
    elif decision == "keep_both" and params["ids"]:
        tx.run(KEEP_BOTH, params).consume()
    # What the decision made live or a tombstone counts (or stops counting) for its entities.
    refresh_entities(tx, learnings=[params["id"], *params["ids"]], now=params["now"])


#: A human's edit replaces what the learning is about: its old links go (their entities counted
#: again), and the linker reads the new text.
UNLINK = """
MATCH (l:Learning {id: $id})-[r:ABOUT]->(e:Entity)
DELETE r
RETURN collect(e.id) AS entities
"""


def _relink(
    tx: neo4j.ManagedTransaction,
    params: dict[str, Any],
    found: dict[str, Any],
    mentions: tuple[Mention, ...],
    vectors: dict[str, list[float] | None],
    merge_similarity: float,
) -> None:
    record = tx.run(UNLINK, id=params["id"]).single()
    for entity in record["entities"] if record else []:
        refresh_entity(tx, entity, now=params["now"])
    item = Linked(params["id"], "Learning", found["scope"], found["project_id"], found["user_id"], mentions)
    link(tx, [item], now=params["now"], vectors=vectors, merge_similarity=merge_similarity)
