"""The ``enrichment`` worker job: a session's projection after its Stop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contrib import CaptureContext, Job
from .store import enrich, sessions_to_enrich

if TYPE_CHECKING:
    from ..events import HookEvent
    from ..settings import Settings


class EnrichmentJob(Job):
    """Enriches a session after its Stop (and at SessionEnd); off unless ``MKG_ENRICHMENT`` is on."""

    name = "enrichment"
    events = frozenset({"Stop", "SessionEnd", "SubagentStop"})

    def enabled(self, settings: Settings) -> bool:
        return settings.enrichment

    def key(self, event: HookEvent, context: CaptureContext) -> str:
        return event.session_id

    def run(self, event: HookEvent, context: CaptureContext) -> str | None:
        languages = {key: tool.language for key, tool in context.query_tools.items()}
        sessions = sessions_to_enrich(context.graph, session_id=event.session_id)
        if not sessions:
            return "enrichment: nothing new"
        counts = enrich(context.graph, sessions, languages=languages, adapters=context.adapters)
        return "enrichment: " + counts.line()
