"""Learnings: durable facts and decisions, project-scoped or user-scoped, and how they are written.

A learning's id is derived from its namespace and text, so the same fact written twice is one
node: the namespace is the project id for ``scope='project'`` and ``user:<user id>`` for
``scope='user'`` (project-independent, so a fact about the person dedupes across projects).

Automation writes through :func:`write_learnings` only: new learnings are ``candidate``;
an update may touch only memory the project owns or a user fact of the same user; a content
change to an ``approved`` learning demotes it to ``candidate`` and clears its human and gate
provenance, so automation never silently rewrites the trusted tier. Text that reads as an
instruction to the model (:func:`mkg_core.injection.instruction_like`) is written ``held``: it waits
in the review queue and is never recalled until a human approves it.

::

    (:Project)-[:HAS_LEARNING]->(:Learning)-[:FROM_SESSION]->(:Session)
    (:User)-[:HAS_LEARNING]->(:Learning {scope: 'user'})
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from .injection import instruction_like
from .redaction import scrub

__all__ = ["learning_id", "namespace", "restore", "task_pattern"]

if TYPE_CHECKING:
    import neo4j

    from .graph import Graph

#: Longest learning text; longer text is cut with an ellipsis.
TEXT_LIMIT = 500
TASK_PATTERN_WORDS, TASK_PATTERN_CHARS = 6, 60
DEFAULT_CONFIDENCE = 0.6
Scope = Literal["project", "user"]


def collapse(text: str | None, limit: int) -> str | None:
    """Whitespace collapsed, cut at ``limit`` characters with an ellipsis; None when empty."""
    if text is None:
        return None
    flat = " ".join(str(text).split())
    if not flat:
        return None
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def written_text(text: object) -> str:
    """A learning's text as a person or an agent writes it (an MCP write, a review edit): scrubbed,
    whitespace collapsed, at most :data:`TEXT_LIMIT` characters. A :class:`ValueError` says what is
    wrong with it."""
    flat = collapse(scrub(text), 10_000) if isinstance(text, str) else None
    if not flat:
        raise ValueError("text is empty")
    if len(flat) > TEXT_LIMIT:
        raise ValueError(f"text has {len(flat)} characters; the limit is {TEXT_LIMIT}")
    return flat


def namespace(scope: str, project_id: str, user_id: str | None) -> str:
    if scope == "user":
        return f"user:{user_id or 'unknown'}"
    return project_id


def learning_id(ns: str, text: str) -> str:
    digest = hashlib.sha1(f"{ns}\n{text.strip()}".encode(), usedforsecurity=False).hexdigest()[:16]
    return f"learning:{ns}:{digest}"


def task_pattern(value: str | None) -> str | None:
    """A short lowercase grouping label, or None when it is too long to be one."""
    text = collapse(value, 10_000)
    if text is None or len(text) > TASK_PATTERN_CHARS or len(text.split()) > TASK_PATTERN_WORDS:
        return None
    return text.lower()


def clamp_confidence(value: object, default: float = DEFAULT_CONFIDENCE) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
    if number != number:  # NaN
        return default
    return min(max(number, 0.0), 1.0)


@dataclass(frozen=True)
class LearningWrite:
    """One create or update, ready for the graph. ``text`` None on an update keeps the old text."""

    id: str
    action: Literal["create", "update"]
    scope: Scope
    text: str | None
    kind: str | None
    confidence: float
    task_pattern: str | None = None
    tool_key: str | None = None
    error_signature: str | None = None
    resolved: bool | None = None
    reason: str | None = None
    embedding: list[float] | None = None

    def row(self) -> dict[str, Any]:
        return asdict(self)


CREATE_LEARNINGS = """
UNWIND $rows AS row
MERGE (l:Learning {id: row.id})
  ON CREATE SET l.created_at = $now, l.status = 'candidate', l.scope = row.scope, l.source = $source,
                l.created_by_model = $model, l.user_id = $user_id, l.use_count = 0, l.support_count = 0,
                l.project_id = $project_id
SET l.text = row.text,
    l.summary = coalesce(row.reason, row.text),
    l.task_pattern = coalesce(row.task_pattern, l.task_pattern),
    l.kind = coalesce(row.kind, l.kind, 'fact'),
    l.tool_key = coalesce(row.tool_key, l.tool_key),
    l.error_signature = coalesce(row.error_signature, l.error_signature),
    l.resolved = coalesce(row.resolved, l.resolved),
    // tombstones (rejected, superseded) never get a vector back: the index holds live memory only
    l.embedding = CASE WHEN l.status IN ['approved', 'candidate']
                       THEN coalesce(row.embedding, l.embedding) END,
    l.embedding_updated_at = CASE WHEN row.embedding IS NULL THEN l.embedding_updated_at ELSE $now END,
    l.confidence = CASE WHEN l.confidence IS NULL OR row.confidence > l.confidence
                        THEN row.confidence ELSE l.confidence END,
    l.support_count = coalesce(l.support_count, 0) + 1,
    l.last_source = $source, l.last_source_session_id = $session_id, l.last_user_id = $user_id,
    l.last_reason = row.reason, l.last_llm_model = $model, l.updated_at = $now
// instruction-like text waits for a human and is not recalled (unless a human already decided)
FOREACH (_ IN CASE WHEN row.held IS NULL OR l.reviewed_by IS NOT NULL THEN [] ELSE [1] END |
  SET l.consistency_status = 'held', l.held_reason = row.held)
WITH l, row
MATCH (p:Project {id: $project_id})
MERGE (p)-[:HAS_LEARNING]->(l)
WITH l, row
OPTIONAL MATCH (s:Session {session_id: $session_id})
FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END |
  MERGE (l)-[f:FROM_SESSION]->(s) ON CREATE SET f.created_at = $now)
WITH l, row
OPTIONAL MATCH (u:User {id: $user_id})
FOREACH (_ IN CASE WHEN u IS NULL OR row.scope <> 'user' THEN [] ELSE [1] END |
  MERGE (u)-[:HAS_LEARNING]->(l))
WITH l, row
OPTIONAL MATCH (pp:ProjectProcessing {id: $processing_id})
FOREACH (_ IN CASE WHEN pp IS NULL THEN [] ELSE [1] END |
  MERGE (pp)-[r:PRODUCED_LEARNING]->(l) ON CREATE SET r.llm_model = $model, r.created_at = $now)
RETURN l.id AS id
"""

#: Ownership guard: a user fact of this user, or a learning this project holds. Anything else
#: (another project's memory, a guessed id) matches nothing and is reported as refused.
UPDATE_LEARNINGS = """
UNWIND $rows AS row
MATCH (l:Learning {id: row.id})
WHERE l.status IN ['approved', 'candidate']
  AND ((l.scope = 'user' AND l.user_id = $user_id)
       OR (l.scope = 'project' AND EXISTS { MATCH (:Project {id: $project_id})-[:HAS_LEARNING]->(l) }))
WITH l, row, row.text IS NOT NULL AND row.text <> l.text AS changed
WITH l, row, changed, changed AND l.status = 'approved' AS demote
SET l.text = coalesce(row.text, l.text),
    l.summary = coalesce(row.reason, row.text, l.summary),
    l.task_pattern = coalesce(row.task_pattern, l.task_pattern),
    l.kind = coalesce(row.kind, l.kind, 'fact'),
    l.tool_key = coalesce(row.tool_key, l.tool_key),
    l.error_signature = coalesce(row.error_signature, l.error_signature),
    l.resolved = coalesce(row.resolved, l.resolved),
    l.embedding = CASE WHEN changed THEN row.embedding ELSE coalesce(l.embedding, row.embedding) END,
    l.embedding_updated_at = CASE WHEN row.embedding IS NULL THEN l.embedding_updated_at ELSE $now END,
    l.confidence = CASE WHEN l.confidence IS NULL OR row.confidence > l.confidence
                        THEN row.confidence ELSE l.confidence END,
    l.support_count = coalesce(l.support_count, 0) + 1,
    l.project_id = coalesce(l.project_id, $project_id),
    l.last_source = $source, l.last_source_session_id = $session_id, l.last_user_id = $user_id,
    l.last_reason = row.reason, l.last_llm_model = $model, l.updated_at = $now
FOREACH (_ IN CASE WHEN demote THEN [1] ELSE [] END |
  SET l.status = 'candidate', l.demoted_at = $now,
      l.reviewed_by = null, l.reviewed_at = null, l.reviewed_by_user_id = null,
      l.consistency_status = null, l.consistency_checked_at = null)
FOREACH (_ IN CASE WHEN changed AND row.held IS NOT NULL THEN [1] ELSE [] END |
  SET l.status = 'candidate', l.consistency_status = 'held', l.held_reason = row.held,
      l.reviewed_by = null, l.reviewed_at = null, l.reviewed_by_user_id = null)
WITH l, row, demote
OPTIONAL MATCH (s:Session {session_id: $session_id})
FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END |
  MERGE (l)-[f:FROM_SESSION]->(s) ON CREATE SET f.created_at = $now)
WITH l, row, demote
OPTIONAL MATCH (pp:ProjectProcessing {id: $processing_id})
FOREACH (_ IN CASE WHEN pp IS NULL THEN [] ELSE [1] END |
  MERGE (pp)-[r:UPDATED_LEARNING]->(l)
  SET r.llm_model = $model, r.updated_at = $now, r.demoted_from_approved = demote)
RETURN l.id AS id, demote
"""


# -- transitions shared by the gate and the human review ---------------------------------------------
# Every change of a learning's ``status`` is written here: created a candidate and demoted or held on
# update (above), approved, rejected, superseded or restated by the gate and the human review, which
# compose these fragments with their own guards. Fragments follow a clause binding ``c``, the
# learning decided on. Parameters: $ids (the other learnings), $now, $reason, $source ('gate' or
# 'human'), $resolution (recorded on a resolved [:CONTRADICTS]), $rejected_reason, $canonical_id
# (a restatement's original).

#: ``c`` becomes live memory.
APPROVED = """
SET c.status = 'approved', c.approved_at = $now
"""

#: ``c`` says again what $canonical_id already holds: ``c`` becomes a tombstone pointing at it, and the
#: canonical learning is reinforced (support, the higher confidence, when).
RESTATES = """
MATCH (canonical:Learning {id: $canonical_id}) WHERE canonical.status IN ['approved', 'candidate']
SET c.status = 'rejected', c.rejected_at = $now, c.rejected_reason = 'restatement of ' + canonical.id,
    c.already_learned_from = canonical.id, c.already_learned_at = $now, c.embedding = null,
    canonical.support_count = coalesce(canonical.support_count, 0) + coalesce(c.support_count, 1),
    canonical.confidence = CASE WHEN coalesce(c.confidence, 0) > coalesce(canonical.confidence, 0)
                                THEN c.confidence ELSE canonical.confidence END,
    canonical.last_reinforced_at = $now
MERGE (c)-[s:ALREADY_LEARNED_FROM]->(canonical)
  ON CREATE SET s.created_at = $now
"""

#: ``c`` becomes a tombstone: text and edges stay, the embedding goes (the vector index holds live
#: memory only).
TOMBSTONE = """
SET c.status = 'rejected', c.rejected_at = $now, c.rejected_reason = $rejected_reason, c.embedding = null,
    c.updated_at = $now
"""

#: ``c`` replaces the learnings in $ids: they become tombstones with ``superseded_at``.
SUPERSEDE_OTHERS = """
WITH c
UNWIND $ids AS old_id
MATCH (old:Learning {id: old_id}) WHERE old.status IN ['approved', 'candidate']
SET old.status = 'rejected', old.superseded_at = $now, old.rejected_at = $now, old.superseded_by = c.id,
    old.rejected_reason = 'superseded by ' + c.id + ': ' + $reason, old.embedding = null,
    old.updated_at = $now
MERGE (c)-[s:SUPERSEDES]->(old)
  ON CREATE SET s.created_at = $now, s.source = $source, s.reason = $reason
WITH c, old
OPTIONAL MATCH (c)-[x:CONTRADICTS]-(old)
SET x.resolved_at = $now, x.resolution = $resolution
RETURN DISTINCT c.id AS id
"""

#: ``c`` lost to the learnings in $ids.
CONTRADICTED_BY_OTHERS = """
WITH c
UNWIND $ids AS kept_id
MATCH (kept:Learning {id: kept_id})
MERGE (c)-[s:CONTRADICTED_BY]->(kept)
  ON CREATE SET s.created_at = $now, s.source = $source, s.reason = $reason
WITH c, kept
OPTIONAL MATCH (c)-[x:CONTRADICTS]-(kept)
SET x.resolved_at = $now, x.resolution = $resolution
RETURN DISTINCT c.id AS id
"""


#: A human brings a tombstone back: ``c`` is approved again and stamped as their decision. Its
#: edges (``SUPERSEDES``, ``CONTRADICTED_BY``, ``ALREADY_LEARNED_FROM``) stay as history; the reason it
#: was a tombstone moves to ``restored_from``. Guarded like a review decision: this project's memory,
#: or this user's fact.
RESTORE = """
MATCH (c:Learning {id: $id})
WHERE c.status = 'rejected'
  AND ((c.scope = 'project' AND c.project_id = $project_id) OR (c.scope = 'user' AND c.user_id = $user_id))
SET c.status = 'approved', c.approved_at = $now, c.restored_at = $now,
    c.restored_from = coalesce(c.rejected_reason, 'rejected'),
    c.rejected_at = null, c.rejected_reason = null, c.superseded_at = null, c.superseded_by = null,
    c.embedding = $embedding,
    c.embedding_updated_at = CASE WHEN $embedding IS NULL THEN null ELSE $now END,
    c.consistency_status = 'human', c.reviewed_by = 'human', c.reviewed_at = $now,
    c.reviewed_by_user_id = $user_id, c.review_reason = $reason, c.updated_at = $now
RETURN c.id AS id
"""


def restore(
    graph: Graph,
    learning_id: str,
    *,
    project_id: str,
    user_id: str | None,
    embedding: list[float] | None = None,
    reason: str | None = None,
    now: Any = None,
) -> bool:
    """Make a tombstone (a rejected or superseded learning) approved memory again, as a human's
    decision; ``embedding`` is its text's vector, so vector recall finds it again. False when it is
    not a tombstone of this project or of this user."""
    params = {
        "id": learning_id,
        "project_id": project_id,
        "user_id": user_id,
        "embedding": embedding,
        "reason": scrub(reason) if isinstance(reason, str) and reason.strip() else "restored by a human",
        "now": now or datetime.now(UTC),
    }
    return bool(graph.write(RESTORE, params))


@dataclass(frozen=True)
class WriteResult:
    created: tuple[str, ...]
    updated: tuple[str, ...]
    demoted: tuple[str, ...]
    refused: tuple[str, ...]
    #: Written, but held for a human: the text reads as an instruction (never recalled until approved).
    held: tuple[str, ...] = ()


def write_learnings(
    tx: neo4j.ManagedTransaction,
    writes: list[LearningWrite],
    *,
    project_id: str,
    user_id: str | None,
    session_id: str | None,
    source: str,
    model: str | None,
    now: Any,
    processing_id: str | None = None,
) -> WriteResult:
    """Apply creates and ownership-guarded updates in the caller's transaction."""
    params = {
        "project_id": project_id,
        "user_id": user_id,
        "session_id": session_id,
        "source": source,
        "model": model,
        "now": now,
        "processing_id": processing_id,
    }
    creates = [_row(w) for w in writes if w.action == "create"]
    updates = [_row(w) for w in writes if w.action == "update"]
    created = [r["id"] for r in tx.run(CREATE_LEARNINGS, rows=creates, **params)] if creates else []
    updated: list[str] = []
    demoted: list[str] = []
    if updates:
        for record in tx.run(UPDATE_LEARNINGS, rows=updates, **params):
            updated.append(record["id"])
            if record["demote"]:
                demoted.append(record["id"])
    refused = [row["id"] for row in updates if row["id"] not in updated]
    held = [row["id"] for row in creates + updates if row["held"] and row["id"] not in refused]
    return WriteResult(tuple(created), tuple(updated), tuple(demoted), tuple(refused), tuple(held))


def _row(write: LearningWrite) -> dict[str, Any]:
    """The write as query parameters, with the screen's verdict: text that reads as an
    instruction to the model is held for a human (``consistency_status = 'held'``)."""
    return {**write.row(), "held": instruction_like(write.text) if write.text else None}
