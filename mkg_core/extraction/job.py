"""The extraction run over a session's windows (see :mod:`mkg_core.extraction`) and its worker job."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..contrib import CaptureContext, Job
from ..embedding import embed_or_none
from ..gate import Gate
from ..learnings import LearningWrite, write_learnings
from ..llm import LLM, LLMError, Usage, fence
from ..search import search_learnings
from .corpus import build_corpus, clip
from .prompts import (
    EXTRACTION_PROMPT,
    EXTRACTION_SYSTEM,
    OBSERVATION_PROMPT,
    OBSERVATION_SYSTEM,
    ExtractionAnswer,
    ObservationAnswer,
    render,
)
from .rows import learning_writes, observation_rows, observation_text

if TYPE_CHECKING:
    import neo4j

    from ..contrib import Embedder
    from ..events import HookEvent
    from ..graph import Graph
    from ..identity import ProjectRef, UserRef
    from ..settings import Settings

log = logging.getLogger("mkg.extraction")

MODE = "turn"
SOURCE = "hooks-stop"
#: Windows one job run takes at most (a long backlog continues at the next Stop).
MAX_WINDOWS_PER_RUN = 5
#: Other sessions of the project whose windows wait for an LLM, taken after this one.
BACKLOG_SESSIONS = 3
EXISTING_LIMIT = 12

# -- graph -------------------------------------------------------------------------------------------

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


# -- the run -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowResult:
    processing_id: str
    status: str  # called | skipped | waiting | error
    events: int
    learnings: int = 0
    observations: int = 0
    reason: str | None = None
    created: tuple[str, ...] = ()

    def line(self) -> str:
        detail = f": {self.reason}" if self.reason else ""
        return (
            f"{self.events} events -> {self.status}, {self.learnings} learning actions, "
            f"{self.observations} observations{detail}"
        )


@dataclass
class Extractor:
    """Processes one project's session windows (see the module docstring)."""

    graph: Graph
    settings: Settings
    project: ProjectRef
    user: UserRef | None
    client: str | None = None
    embedder: Embedder | None = None

    def run(self, session_id: str) -> list[WindowResult]:
        """Process the session's unprocessed windows, then sessions left waiting for an LLM."""
        results = self.process_session(session_id)
        if results and results[-1].status in ("called", "skipped"):
            for row in self.graph.read(
                WAITING_SESSIONS,
                {
                    "project_id": self.project.id,
                    "mode": MODE,
                    "session_id": session_id,
                    "limit": BACKLOG_SESSIONS,
                },
            ):
                results += self.process_session(row["session_id"])
        return results

    def process_session(self, session_id: str) -> list[WindowResult]:
        results: list[WindowResult] = []
        for _ in range(MAX_WINDOWS_PER_RUN):
            result = self.process_window(session_id)
            if result is None:
                break
            results.append(result)
            if result.status in ("waiting", "error"):
                break
        return results

    def process_window(self, session_id: str) -> WindowResult | None:
        events = [
            row["event"]
            for row in self.graph.read(
                FETCH_WINDOW,
                {
                    "session_id": session_id,
                    "project_id": self.project.id,
                    "mode": MODE,
                    "limit": self.settings.extraction_window_events,
                },
            )
        ]
        if not events:
            return None
        event_ids = [e["event_id"] for e in events]
        digest = hashlib.sha1("\n".join(event_ids).encode(), usedforsecurity=False).hexdigest()[:16]
        base = f"processing:{self.project.id}:{session_id}:{MODE}"
        window = _Window(
            session_id=session_id,
            event_ids=event_ids,
            processing_id=f"{base}:{digest}",
            waiting_id=f"{base}:waiting",
            observation_prefix=f"observation:{self.project.id}:{session_id}:{digest}",
            started_at=min(e["timestamp"] for e in events),
            ended_at=max(e["timestamp"] for e in events),
        )
        corpus = build_corpus(events, self.settings.extraction_corpus_tokens)
        llm = LLM(self.settings, self.client)
        if not corpus.strip():
            return self._commit(window, llm, "skipped", reason="no conversation in this window")
        ready, reason = llm.readiness()
        if not ready:
            if self.settings.extraction_retry_skipped:
                return self._wait(window, llm, "skipped", reason)
            return self._commit(window, llm, "skipped", reason=reason)
        existing = self._existing_memory(corpus)
        values = {"project_name": self.project.name, "project_id": self.project.id}
        prompt = render(
            EXTRACTION_PROMPT,
            corpus=fence("session-record", corpus),
            existing=fence("existing-memory", existing),
            **values,
        )
        try:
            extracted = llm.complete_json(EXTRACTION_SYSTEM, prompt, ExtractionAnswer)
        except LLMError as exc:
            log.warning("extraction for session %s failed: %s", session_id, exc)
            return self._wait(window, llm, "error", str(exc), usage=exc.usage)
        usage = extracted.usage
        writes = learning_writes(
            extracted.value,
            project_id=self.project.id,
            user_id=self.user.id if self.user else None,
            limit=self.settings.extraction_max_learnings,
        )
        observations: list[dict[str, Any]] = []
        observation_error = None
        try:
            observed = llm.complete_json(
                OBSERVATION_SYSTEM,
                render(OBSERVATION_PROMPT, corpus=fence("session-record", corpus), **values),
                ObservationAnswer,
            )
            usage = usage + observed.usage
            observations = observation_rows(
                observed.value,
                ids_prefix=window.observation_prefix,
                started_at=window.started_at,
                ended_at=window.ended_at,
            )
        except LLMError as exc:  # the learnings still count; this window just has no timeline entry
            log.warning("observations for session %s failed: %s", session_id, exc)
            observation_error = str(exc)
            usage = usage + exc.usage
        writes = self._embed_writes(writes)
        for row, vector in zip(
            observations,
            embed_or_none(self.embedder, [observation_text(row) for row in observations]),
            strict=True,
        ):
            row["embedding"] = vector
        return self._commit(
            window,
            llm,
            "called",
            usage=usage,
            writes=writes,
            observations=observations,
            observation_error=observation_error,
            repaired=extracted.repaired,
        )

    # -- helpers ------------------------------------------------------------------------------------

    def _existing_memory(self, corpus: str) -> str:
        recalled = search_learnings(
            self.graph,
            corpus[-4000:],
            project_id=self.project.id,
            user_id=self.user.id if self.user else None,
            session_id=None,
            limit=EXISTING_LIMIT,
            min_score=0.0,
            embedder=self.embedder,
        )
        if not recalled:
            return "- none"
        return "\n".join(
            f"- id={item.id}; scope={item.scope}; status={item.status}; text={clip(item.text, 300)}"
            for item in recalled
        )

    def _embed_writes(self, writes: list[LearningWrite]) -> list[LearningWrite]:
        texts = [w.text for w in writes if w.text]
        vectors = iter(embed_or_none(self.embedder, texts))
        out = []
        for write in writes:
            if write.text:
                write = LearningWrite(**{**write.row(), "embedding": next(vectors)})
            out.append(write)
        return out

    def _wait(
        self, window: _Window, llm: LLM, status: str, reason: str, usage: Usage | None = None
    ) -> WindowResult:
        usage = usage or Usage()
        props = {
            "project_id": self.project.id,
            "session_id": window.session_id,
            "user_id": self.user.id if self.user else None,
            "mode": MODE,
            "type": "waiting",
            "status": "waiting",
            "llm_model": llm.label,
            "llm_status": status,
            "llm_skip_reason": reason[:1000] if status == "skipped" else None,
            "llm_error": reason[:1000] if status == "error" else None,
            "event_count": len(window.event_ids),
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "summary": f"{len(window.event_ids)} events wait for extraction ({status}: {reason[:200]}).",
        }
        self.graph.write(
            WRITE_WAITING,
            {
                "project_id": self.project.id,
                "session_id": window.session_id,
                "id": window.waiting_id,
                "props": props,
                "now": datetime.now(UTC),
            },
        )
        return WindowResult(
            window.waiting_id,
            "waiting" if status == "skipped" else "error",
            len(window.event_ids),
            reason=reason,
        )

    def _commit(
        self,
        window: _Window,
        llm: LLM,
        status: str,
        *,
        reason: str | None = None,
        usage: Usage | None = None,
        writes: list[LearningWrite] | None = None,
        observations: list[dict[str, Any]] | None = None,
        observation_error: str | None = None,
        repaired: bool = False,
    ) -> WindowResult:
        usage = usage or Usage()
        writes = writes or []
        observations = observations or []
        now = datetime.now(UTC)
        user_id = self.user.id if self.user else None

        def work(tx: neo4j.ManagedTransaction) -> Any:
            props = {
                "project_id": self.project.id,
                "session_id": window.session_id,
                "user_id": user_id,
                "mode": MODE,
                "type": "processing",
                "status": "ok",
                "llm_model": llm.label,
                "llm_status": status,
                "llm_skip_reason": reason[:1000] if reason else None,
                "llm_error": None,
                "llm_repaired": repaired,
                "observation_error": observation_error[:1000] if observation_error else None,
                "event_count": len(window.event_ids),
                "learning_count": len(writes),
                "observation_count": len(observations),
                "llm_calls": usage.calls,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
                "started_at": window.started_at,
                "ended_at": window.ended_at,
                "summary": (
                    f"Processed {len(window.event_ids)} {MODE} events: {len(writes)} learning actions "
                    f"and {len(observations)} observations."
                ),
            }
            tx.run(
                WRITE_PROCESSING,
                project_id=self.project.id,
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
                project_id=self.project.id,
                user_id=user_id,
                session_id=window.session_id,
                source=SOURCE,
                model=llm.label,
                now=now,
                processing_id=window.processing_id,
            )
            if observations:
                common = {
                    "project_id": self.project.id,
                    "session_id": window.session_id,
                    "user_id": user_id,
                    "processing_id": window.processing_id,
                    "source": SOURCE,
                    "model": llm.label,
                    "now": now,
                }
                tx.run(WRITE_OBSERVATIONS, {"rows": observations, **common}).consume()
                tx.run(
                    CHAIN_OBSERVATIONS, project_id=self.project.id, ids=[row["id"] for row in observations]
                ).consume()
            if result.refused:
                tx.run(
                    "MATCH (pp:ProjectProcessing {id: $id}) SET pp.refused_updates = $refused",
                    id=window.processing_id,
                    refused=list(result.refused),
                ).consume()
            return result

        result = self.graph.write_tx(work)
        if result.refused:
            log.warning(
                "refused updates to learnings this project does not own: %s", ", ".join(result.refused)
            )
        return WindowResult(
            window.processing_id,
            status,
            len(window.event_ids),
            learnings=len(result.created) + len(result.updated),
            observations=len(observations),
            reason=reason,
            created=result.created + result.updated,
        )


@dataclass(frozen=True)
class _Window:
    session_id: str
    event_ids: list[str]
    processing_id: str
    waiting_id: str
    observation_prefix: str
    started_at: Any
    ended_at: Any


class ExtractionJob(Job):
    """Extraction as a worker job: triggered by Stop, one per project and session."""

    name = "extraction"
    events = frozenset({"Stop"})

    def enabled(self, settings: Settings) -> bool:
        return settings.extraction

    def key(self, event: HookEvent, context: CaptureContext) -> str:
        project = context.project.id if context.project else ""
        return f"{project}\n{event.session_id}"

    def run(self, event: HookEvent, context: CaptureContext) -> str | None:
        if context.project is None:
            return "no project: nothing to extract"
        llm_client = context.llm_client(event.harness)  # e.g. Claude Code's users: their subscription
        extractor = Extractor(
            context.graph,
            context.settings,
            context.project,
            context.user,
            client=llm_client,
            embedder=context.embedder,
        )
        results = extractor.run(event.session_id)
        summary = "; ".join(r.line() for r in results) or "nothing new"
        if context.settings.consistency_gate:
            changed = [lid for r in results for lid in r.created]
            gate = Gate(context.graph, context.settings, context.project.id, context.embedder, llm_client)
            summary += "; " + gate.run(changed).line()
        return summary
