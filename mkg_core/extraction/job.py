"""The extraction run over a session's windows (see :mod:`mkg_core.extraction`) and its worker job."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..contrib import CaptureContext, Job
from ..embedding import embed_or_none
from ..enrichment import derive, resources
from ..entities.linker import link_resources
from ..entities.model import Mention
from ..gate import Gate
from ..learnings import LearningWrite
from ..llm import LLM, LLMError, Usage, fence
from ..search import search_learnings
from ..transcripts import Transcript, read_transcript
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
from .rows import Mentions, learning_writes, observation_rows, observation_text, with_resources
from .store import (
    EntityLinks,
    ProcessingRecord,
    Window,
    commit_window,
    fetch_window,
    record_waiting,
    waiting_sessions,
)

if TYPE_CHECKING:
    from ..contrib import Embedder
    from ..events import HookEvent
    from ..graph import Graph
    from ..harness import HarnessAdapter
    from ..identity import ProjectRef, UserRef
    from ..settings import Settings

log = logging.getLogger("mkg.extraction")

#: Windows one job run takes at most (a long backlog continues at the next Stop).
MAX_WINDOWS_PER_RUN = 5
#: Other sessions of the project whose windows wait for an LLM, taken after this one.
BACKLOG_SESSIONS = 3
EXISTING_LIMIT = 12


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


@dataclass(frozen=True)
class _Distilled:
    """What the two calls gave for one window."""

    usage: Usage
    writes: list[LearningWrite]
    observations: list[dict[str, Any]]
    observation_error: str | None
    repaired: bool
    entities: EntityLinks


@dataclass
class Extractor:
    """Processes one project's session windows (see the package docstring)."""

    graph: Graph
    settings: Settings
    project: ProjectRef
    user: UserRef | None
    client: str | None = None
    embedder: Embedder | None = None
    #: Harness adapters by name: they read the session transcripts the events name.
    adapters: Mapping[str, HarnessAdapter] = field(default_factory=dict)
    _transcripts: dict[tuple[str, str | None], Transcript | None] = field(default_factory=dict, repr=False)

    @property
    def user_id(self) -> str | None:
        return self.user.id if self.user else None

    def run(self, session_id: str) -> list[WindowResult]:
        """Process the session's unprocessed windows, then sessions left waiting for an LLM."""
        results = self.process_session(session_id)
        if results and results[-1].status in ("called", "skipped"):
            for waiting in waiting_sessions(self.graph, self.project.id, session_id, BACKLOG_SESSIONS):
                results += self.process_session(waiting)
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
        """Take the session's next window: distil it, or leave it waiting for an LLM."""
        fetched = fetch_window(
            self.graph, self.project.id, session_id, self.settings.extraction_window_events
        )
        if fetched is None:
            return None
        window, events = fetched
        corpus = build_corpus(events, self.settings.extraction_corpus_tokens, self._said(events))
        llm = LLM(self.settings, self.client)
        if not corpus.strip():
            return self._commit(self._record(window, llm, "skipped"), reason="no conversation in this window")
        ready, reason = llm.readiness()
        if not ready:
            if self.settings.extraction_retry_skipped:
                return self._wait(self._record(window, llm, "skipped"), reason)
            return self._commit(self._record(window, llm, "skipped"), reason=reason)
        try:
            distilled = self._distil(window, corpus, llm, self._touched(window.session_id, events))
        except LLMError as exc:
            log.warning("extraction for session %s failed: %s", session_id, exc)
            return self._wait(self._record(window, llm, "error", exc.usage), str(exc))
        return self._commit(self._record(window, llm, "called", distilled.usage), distilled=distilled)

    # -- helpers ------------------------------------------------------------------------------------

    def _said(self, events: list[dict[str, Any]]) -> dict[str, str]:
        """What the assistant said before each of the window's tool calls, by call id, from the
        transcripts its events name (no hook carries the text said between calls)."""
        wanted = {e["tool_use_id"] for e in events if e.get("tool_name") and e.get("tool_use_id")}
        said: dict[str, str] = {}
        if not wanted:
            return said
        for path, client in dict.fromkeys(
            (e["transcript_path"], e.get("client")) for e in events if e.get("transcript_path")
        ):
            if (path, client) not in self._transcripts:  # read once per run: windows share it
                adapter = self.adapters.get(client) if client else None
                self._transcripts[path, client] = read_transcript(path, adapter)
            transcript = self._transcripts[path, client]
            for call in transcript.calls.values() if transcript is not None else ():
                if call.tool_use_id in wanted and call.rationale:
                    said[call.tool_use_id] = call.rationale
        return said

    def _record(self, window: Window, llm: LLM, status: str, usage: Usage | None = None) -> ProcessingRecord:
        return ProcessingRecord(self.project.id, self.user_id, window, llm.label, status, usage or Usage())

    def _touched(self, session_id: str, events: list[dict[str, Any]]) -> list[Mention]:
        """The files, URLs and tables the window's tool calls touched, as enrichment reads them
        (files written first), relative to the project's folder when they are inside it."""
        client = next((e.get("client") for e in events if e.get("client")), None)
        adapter = self.adapters.get(client) if client else None
        window: list[Mapping[str, Any]] = list(events)
        calls = derive(session_id, window, None).calls
        touched = [r for call in calls for r in resources(call, None, adapter)]
        touched.sort(key=lambda r: r.role != "write")
        cwd = next((call.cwd for call in calls if call.cwd), None)
        return link_resources([(r.type, r.value) for r in touched], cwd)

    def _distil(self, window: Window, corpus: str, llm: LLM, touched: list[Mention]) -> _Distilled:
        """The extraction call (an LLMError leaves the window waiting), then the observation call
        (its failure only costs the window its timeline entry), with embeddings for both."""
        values = {"project_name": self.project.name, "project_id": self.project.id}
        session_record = fence("session-record", corpus)
        prompt = render(
            EXTRACTION_PROMPT,
            corpus=session_record,
            existing=fence("existing-memory", self._existing_memory(corpus)),
            **values,
        )
        extracted = llm.complete_json(EXTRACTION_SYSTEM, prompt, ExtractionAnswer)
        usage = extracted.usage
        writes, mentions = learning_writes(
            extracted.value,
            project_id=self.project.id,
            user_id=self.user_id,
            limit=self.settings.extraction_max_learnings,
        )
        observations: list[dict[str, Any]] = []
        observation_error = None
        try:
            prompt = render(OBSERVATION_PROMPT, corpus=session_record, **values)
            observed = llm.complete_json(OBSERVATION_SYSTEM, prompt, ObservationAnswer)
            usage = usage + observed.usage
            observations, observed_mentions = observation_rows(
                observed.value,
                ids_prefix=window.observation_prefix,
                started_at=window.started_at,
                ended_at=window.ended_at,
            )
            mentions.update(with_resources(observations, observed_mentions, touched))
        except LLMError as exc:
            log.warning("observations for session %s failed: %s", window.session_id, exc)
            observation_error = str(exc)
            usage = usage + exc.usage
        writes = self._embed_writes(writes)
        vectors = embed_or_none(self.embedder, [observation_text(row) for row in observations])
        for row, vector in zip(observations, vectors, strict=True):
            row["embedding"] = vector
        entities = self._entity_links(mentions)
        return _Distilled(usage, writes, observations, observation_error, extracted.repaired, entities)

    def _entity_links(self, mentions: Mentions) -> EntityLinks:
        """The window's mentions with embeddings of their names (for resolution and the walk)."""
        names = sorted({m.name for found in mentions.values() for m in found})
        vectors = dict(zip(names, embed_or_none(self.embedder, names), strict=True)) if self.embedder else {}
        return EntityLinks(mentions, vectors, self.settings.entity_merge_similarity)

    def _existing_memory(self, corpus: str) -> str:
        recalled = search_learnings(
            self.graph,
            corpus[-4000:],
            project_id=self.project.id,
            user_id=self.user_id,
            session_id=None,
            limit=EXISTING_LIMIT,
            min_score=0.0,
            embedder=self.embedder,
            use_graph=self.settings.recall_graph,
            use_sessions=self.settings.recall_sessions,
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

    def _wait(self, record: ProcessingRecord, reason: str) -> WindowResult:
        record_waiting(self.graph, record, reason, datetime.now(UTC))
        status = "waiting" if record.llm_status == "skipped" else "error"
        return WindowResult(record.window.waiting_id, status, len(record.window.event_ids), reason=reason)

    def _commit(
        self, record: ProcessingRecord, *, reason: str | None = None, distilled: _Distilled | None = None
    ) -> WindowResult:
        writes = distilled.writes if distilled else []
        observations = distilled.observations if distilled else []
        props = record.done(
            reason=reason,
            learnings=len(writes),
            observations=len(observations),
            observation_error=distilled.observation_error if distilled else None,
            repaired=distilled.repaired if distilled else False,
        )
        now = datetime.now(UTC)
        entities = distilled.entities if distilled else None
        result = self.graph.write_tx(
            lambda tx: commit_window(tx, record, props, writes, observations, now, entities)
        )
        if result.refused:
            log.warning(
                "refused updates to learnings this project does not own: %s", ", ".join(result.refused)
            )
        return WindowResult(
            record.window.processing_id,
            record.llm_status,
            len(record.window.event_ids),
            learnings=len(result.created) + len(result.updated),
            observations=len(observations),
            reason=reason,
            created=result.created + result.updated,
        )


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
            adapters=context.adapters,
        )
        results = extractor.run(event.session_id)
        summary = "; ".join(r.line() for r in results) or "nothing new"
        if context.settings.consistency_gate:
            changed = [lid for r in results for lid in r.created]
            gate = Gate(context.graph, context.settings, context.project.id, context.embedder, llm_client)
            summary += "; " + gate.run(changed).line()
        return summary
