"""The extraction run's graph side: the window it takes, and the ``:ProjectProcessing`` record,
learnings and observations it writes (waiting for an LLM, or done)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..entities.model import Mention
from ..entities.store import Linked, link
from ..learnings import LearningWrite, WriteResult, write_learnings
from ..llm import Usage

if TYPE_CHECKING:
    import neo4j

    from ..graph import Graph

MODE = "turn"
SOURCE = "hooks-stop"

FETCH_WINDOW = """
MATCH (root:Session {session_id: $session_id})
MATCH (root)-[:HAS_SUBAGENT*0..]->(s:Session)
WITH DISTINCT s
MATCH (s)-[:HAS_EVENT]->(e:SessionEvent)
WHERE (e.project_id IS NULL OR e.project_id = $project_id)
  AND NOT EXISTS { MATCH (:ProjectProcessing {project_id: $project_id, mode: $mode})-[:PROCESSED_EVENT]->(e) }
RETURN properties(e) AS event
ORDER BY e.timestamp, e.event_id
LIMIT $limit
"""

WRITE_PROCESSING = """
MERGE (p:Project {id: $project_id})
  ON CREATE SET p.created_at = $now
SET p.updated_at = $now
MERGE (s:Session {session_id: $session_id})
  ON CREATE SET s.created_at = $now
MERGE (pp:ProjectProcessing {id: $id})
  ON CREATE SET pp.created_at = $now
SET pp += $props, pp.updated_at = $now
MERGE (p)-[:HAS_PROCESSING]->(pp)
MERGE (s)-[:HAS_PROCESSING]->(pp)
WITH pp
OPTIONAL MATCH (waiting:ProjectProcessing {id: $waiting_id, waiting: true})
SET waiting.waiting = false, waiting.resolved_at = $now, waiting.resolved_by = pp.id
WITH DISTINCT pp
UNWIND $event_ids AS event_id
MATCH (e:SessionEvent {event_id: event_id})
MERGE (pp)-[:PROCESSED_EVENT]->(e)
"""

#: One record per session whose windows wait for an LLM; updated on every failed attempt.
WRITE_WAITING = """
MERGE (p:Project {id: $project_id})
  ON CREATE SET p.created_at = $now
MERGE (s:Session {session_id: $session_id})
  ON CREATE SET s.created_at = $now
MERGE (pp:ProjectProcessing {id: $id})
  ON CREATE SET pp.created_at = $now, pp.first_attempt_at = $now, pp.attempt_count = 0
SET pp += $props, pp.waiting = true, pp.last_attempt_at = $now, pp.updated_at = $now,
    pp.attempt_count = pp.attempt_count + 1, pp.resolved_at = null, pp.resolved_by = null
MERGE (p)-[:HAS_PROCESSING]->(pp)
MERGE (s)-[:HAS_PROCESSING]->(pp)
"""

WAITING_SESSIONS = """
MATCH (:Project {id: $project_id})-[:HAS_PROCESSING]->(pp:ProjectProcessing {waiting: true, mode: $mode})
WHERE pp.session_id <> $session_id
RETURN pp.session_id AS session_id
ORDER BY pp.last_attempt_at
LIMIT $limit
"""

WRITE_OBSERVATIONS = """
MATCH (p:Project {id: $project_id})
MATCH (pp:ProjectProcessing {id: $processing_id})
OPTIONAL MATCH (s:Session {session_id: $session_id})
UNWIND $rows AS row
MERGE (o:Observation {id: row.id})
  ON CREATE SET o.created_at = $now
SET o.type = row.type, o.title = row.title, o.facts = row.facts, o.narrative = row.narrative,
    o.embedding = row.embedding, o.project_id = $project_id, o.session_id = $session_id,
    o.user_id = $user_id, o.scope = 'project', o.status = 'recorded', o.source = $source,
    o.created_by_model = $model, o.started_at = row.started_at, o.ended_at = row.ended_at,
    o.updated_at = $now
MERGE (p)-[:HAS_OBSERVATION]->(o)
MERGE (pp)-[:PRODUCED_OBSERVATION]->(o)
FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END | MERGE (o)-[:FROM_SESSION]->(s))
"""

#: Append the window's observations to the project's timeline (append-only, newest at the tail).
CHAIN_OBSERVATIONS = """
MATCH (p:Project {id: $project_id})
CALL (p) {
  UNWIND range(0, size($ids) - 2) AS i
  MATCH (a:Observation {id: $ids[i]}), (b:Observation {id: $ids[i + 1]})
  MERGE (a)-[:NEXT]->(b)
}
OPTIONAL MATCH (p)-[old:LATEST_OBSERVATION]->(prev:Observation)
MATCH (head:Observation {id: $ids[0]}), (tail:Observation {id: $ids[size($ids) - 1]})
FOREACH (_ IN CASE WHEN prev IS NULL OR prev.id IN $ids THEN [] ELSE [1] END | MERGE (prev)-[:NEXT]->(head))
DELETE old
MERGE (p)-[:LATEST_OBSERVATION]->(tail)
"""

RECORD_REFUSED = """
MATCH (pp:ProjectProcessing {id: $id}) SET pp.refused_updates = $refused
"""


@dataclass(frozen=True)
class Window:
    """The events of a session no earlier run has processed, and the ids its records take."""

    session_id: str
    event_ids: list[str]
    processing_id: str
    waiting_id: str
    observation_prefix: str
    started_at: Any
    ended_at: Any


def fetch_window(
    graph: Graph, project_id: str, session_id: str, limit: int
) -> tuple[Window, list[dict[str, Any]]] | None:
    """The session's next window and its events (oldest first), or None when nothing is new."""
    params = {"session_id": session_id, "project_id": project_id, "mode": MODE, "limit": limit}
    events = [row["event"] for row in graph.read(FETCH_WINDOW, params)]
    if not events:
        return None
    event_ids = [e["event_id"] for e in events]
    digest = hashlib.sha1("\n".join(event_ids).encode(), usedforsecurity=False).hexdigest()[:16]
    base = f"processing:{project_id}:{session_id}:{MODE}"
    window = Window(
        session_id=session_id,
        event_ids=event_ids,
        processing_id=f"{base}:{digest}",
        waiting_id=f"{base}:waiting",
        observation_prefix=f"observation:{project_id}:{session_id}:{digest}",
        started_at=min(e["timestamp"] for e in events),
        ended_at=max(e["timestamp"] for e in events),
    )
    return window, events


def waiting_sessions(graph: Graph, project_id: str, but: str, limit: int) -> list[str]:
    """Other sessions of the project whose windows wait for an LLM, longest waiting first."""
    params = {"project_id": project_id, "mode": MODE, "session_id": but, "limit": limit}
    return [row["session_id"] for row in graph.read(WAITING_SESSIONS, params)]


@dataclass
class ProcessingRecord:
    """What a ``:ProjectProcessing`` record says of one window, waiting or done."""

    project_id: str
    user_id: str | None
    window: Window
    model: str
    llm_status: str  # called | skipped | error
    usage: Usage = field(default_factory=Usage)

    def _common(self) -> dict[str, Any]:
        return {
            "project_id": self.project_id,
            "session_id": self.window.session_id,
            "user_id": self.user_id,
            "mode": MODE,
            "llm_model": self.model,
            "llm_status": self.llm_status,
            "event_count": len(self.window.event_ids),
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "total_tokens": self.usage.total_tokens,
        }

    def waiting(self, reason: str) -> dict[str, Any]:
        events = len(self.window.event_ids)
        return {
            **self._common(),
            "type": "waiting",
            "status": "waiting",
            "llm_skip_reason": reason[:1000] if self.llm_status == "skipped" else None,
            "llm_error": reason[:1000] if self.llm_status == "error" else None,
            "summary": f"{events} events wait for extraction ({self.llm_status}: {reason[:200]}).",
        }

    def done(
        self,
        *,
        reason: str | None,
        learnings: int,
        observations: int,
        observation_error: str | None,
        repaired: bool,
    ) -> dict[str, Any]:
        events = len(self.window.event_ids)
        return {
            **self._common(),
            "type": "processing",
            "status": "ok",
            "llm_skip_reason": reason[:1000] if reason else None,
            "llm_error": None,
            "llm_repaired": repaired,
            "observation_error": observation_error[:1000] if observation_error else None,
            "learning_count": learnings,
            "observation_count": observations,
            "llm_calls": self.usage.calls,
            "started_at": self.window.started_at,
            "ended_at": self.window.ended_at,
            "summary": (
                f"Processed {events} {MODE} events: {learnings} learning actions "
                f"and {observations} observations."
            ),
        }


def record_waiting(graph: Graph, record: ProcessingRecord, reason: str, now: datetime) -> None:
    """Record (or update) the session's one waiting record: its windows wait for an LLM."""
    graph.write(
        WRITE_WAITING,
        {
            "project_id": record.project_id,
            "session_id": record.window.session_id,
            "id": record.window.waiting_id,
            "props": record.waiting(reason),
            "now": now,
        },
    )


@dataclass(frozen=True)
class EntityLinks:
    """What a window's memory is about: mentions by learning or observation id, the embeddings of
    their names (empty without an embedder) and the cosine at which resolution merges names."""

    mentions: dict[str, tuple[Mention, ...]] = field(default_factory=dict)
    vectors: dict[str, list[float] | None] = field(default_factory=dict)
    merge_similarity: float = 1.01


def commit_window(
    tx: neo4j.ManagedTransaction,
    record: ProcessingRecord,
    props: dict[str, Any],
    writes: list[LearningWrite],
    observations: list[dict[str, Any]],
    now: datetime,
    entities: EntityLinks | None = None,
) -> WriteResult:
    """In one transaction: the processing record (resolving the waiting one), its events marked
    processed, the learnings, the observations appended to the project's timeline, and the
    entities both are about."""
    window = record.window
    tx.run(
        WRITE_PROCESSING,
        project_id=record.project_id,
        session_id=window.session_id,
        id=window.processing_id,
        waiting_id=window.waiting_id,
        props=props,
        event_ids=window.event_ids,
        now=now,
    ).consume()
    result = write_learnings(
        tx,
        writes,
        project_id=record.project_id,
        user_id=record.user_id,
        session_id=window.session_id,
        source=SOURCE,
        model=record.model,
        now=now,
        processing_id=window.processing_id,
    )
    if observations:
        common = {
            "project_id": record.project_id,
            "session_id": window.session_id,
            "user_id": record.user_id,
            "processing_id": window.processing_id,
            "source": SOURCE,
            "model": record.model,
            "now": now,
        }
        tx.run(WRITE_OBSERVATIONS, {"rows": observations, **common}).consume()
        ids = [row["id"] for row in observations]
        tx.run(CHAIN_OBSERVATIONS, project_id=record.project_id, ids=ids).consume()
    if result.refused:
        tx.run(RECORD_REFUSED, id=window.processing_id, refused=list(result.refused)).consume()
    if entities is not None and entities.mentions:
        written = set(result.created) | set(result.updated)
        scope = {write.id: write.scope for write in writes}
        items = [
            Linked(
                lid, "Learning", scope[lid], record.project_id, record.user_id, entities.mentions.get(lid, ())
            )
            for lid in scope
            if lid in written
        ]
        items += [
            Linked(row["id"], "Observation", "project", record.project_id, record.user_id,
                   entities.mentions.get(row["id"], ()))
            for row in observations
        ]  # fmt: skip
        link(tx, items, now=now, vectors=entities.vectors, merge_similarity=entities.merge_similarity)
    return result
