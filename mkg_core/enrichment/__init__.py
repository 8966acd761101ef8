"""Event enrichment: a typed projection of each session's turns and tool calls.

::

    (:Session)-[:HAS_TURN]->(:Turn)-[:ISSUED]->(:ToolCall)-[:USES_TOOL]->(:Tool)
    (:ToolCall)-[:RETURNED]->(:ToolResult)
    (:ToolCall)-[:HAS_RATIONALE]->(:ToolRationale)      the assistant text that preceded the call
    (:ToolCall)-[:TARGETS {role}]->(:Resource)           files, URLs, tables, queries it touched
    (:Turn)-[:PROMPTED_BY]->(:SessionEvent)              the UserPromptSubmit event
    (:ToolCall)-[:LOGGED_BY]->(:SessionEvent)            its PreToolUse / PostToolUse events
    (:ToolCall)-[:NEXT_CALL]->(:ToolCall)                in issue order within a turn

Derived from the session's ``:SessionEvent`` chain and, when it can be read, the transcript the
harness names in ``transcript_path``: hook events give calls, inputs, results and turns; the
transcript adds the rationale, and calls the hooks missed. Every node has a deterministic id and
is MERGEd, so a run is idempotent; a session whose event count has not changed since its last
run is skipped, so re-running only adds what is new. ``mkg enrich`` runs it on demand, and the
``enrichment`` job after each Stop when ``MKG_ENRICHMENT`` is on.

The package: :mod:`.model` (turns, calls, resources and what a tool is), :mod:`.derive` (events
and a transcript to a projection), :mod:`.resources` (what a call touched), :mod:`.store` (the
Cypher that writes and reads the projection) and :mod:`.job` (the worker job).
"""

from .derive import derive
from .job import EnrichmentJob
from .model import Call, Projection, Resource, Turn, tool_kind, tool_namespace
from .resources import resources
from .store import Counts, enrich, enrich_session, most_touched, sessions_to_enrich, write

__all__ = [
    "Call",
    "Counts",
    "EnrichmentJob",
    "Projection",
    "Resource",
    "Turn",
    "derive",
    "enrich",
    "enrich_session",
    "most_touched",
    "resources",
    "sessions_to_enrich",
    "tool_kind",
    "tool_namespace",
    "write",
]
