"""The projection in the graph: writing a session's turns and calls, and what they answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..tool_results import response_text
from ..transcripts import read_transcript
from .derive import derive
from .model import Call, Projection, Turn, key_of, tool_kind, tool_namespace, when
from .resources import INPUT_CHARS, resources

if TYPE_CHECKING:
    from ..graph import Graph
    from ..harness import HarnessAdapter

VERSION = 1
SUMMARY_CHARS = 500

SESSION_EVENTS = """
MATCH (s:Session {session_id: $session_id})-[:HAS_EVENT]->(e:SessionEvent)
RETURN e {.event_id, .event_name, .timestamp, .turn_id, .prompt, .tool_name, .tool_key, .tool_use_id,
          .tool_input, .tool_response, .tool_error, .error, .is_interrupt, .transcript_path, .cwd,
          .agent_id, .project_id, .client} AS e
ORDER BY e.timestamp, e.event_id
"""

SESSIONS = """
MATCH (s:Session)
WHERE ($session_id IS NULL OR s.session_id = $session_id)
  AND ($project_id IS NULL OR EXISTS { (:Project {id: $project_id})-[:HAS_SESSION]->(s) }
       OR EXISTS { (:Project {id: $project_id})-[:HAS_SESSION]->(:Session)-[:HAS_SUBAGENT]->(s) })
WITH s, COUNT { (s)-[:HAS_EVENT]->() } AS events
WHERE events > 0 AND ($force OR s.enriched_events IS NULL OR s.enriched_events <> events
      OR coalesce(s.enrichment_version, 0) <> $version)
RETURN s.session_id AS session_id, events
ORDER BY s.created_at, s.session_id
"""


WRITE_TURNS = """
MATCH (s:Session {session_id: $session_id})
UNWIND $turns AS t
MERGE (turn:Turn {id: t.id})
ON CREATE SET turn.created_at = $now
SET turn += t.props
MERGE (s)-[:HAS_TURN]->(turn)
WITH turn, t WHERE t.prompt_event IS NOT NULL
MATCH (e:SessionEvent {event_id: t.prompt_event})
MERGE (turn)-[:PROMPTED_BY]->(e)
"""

WRITE_CALLS = """
UNWIND $calls AS c
MATCH (turn:Turn {id: c.turn})
MERGE (call:ToolCall {id: c.id})
ON CREATE SET call.created_at = $now
SET call += c.props
MERGE (turn)-[:ISSUED]->(call)
MERGE (tool:Tool {id: c.tool.id})
ON CREATE SET tool.created_at = $now
SET tool.name = c.tool.name, tool.kind = c.tool.kind,
    tool.namespace = coalesce(c.tool.namespace, tool.namespace)
MERGE (call)-[:USES_TOOL]->(tool)
WITH call, c
CALL (call, c) {
  WITH call, c WHERE c.result IS NOT NULL
  MERGE (result:ToolResult {id: c.result.id})
  ON CREATE SET result.created_at = $now
  SET result += c.result.props
  MERGE (call)-[:RETURNED]->(result)
}
CALL (call, c) {
  WITH call, c WHERE c.rationale IS NOT NULL
  MERGE (why:ToolRationale {id: c.rationale.id})
  ON CREATE SET why.created_at = $now
  SET why += c.rationale.props
  MERGE (call)-[:HAS_RATIONALE]->(why)
}
CALL (call, c) {
  UNWIND c.resources AS r
  MERGE (resource:Resource {id: r.id})
  ON CREATE SET resource.created_at = $now
  SET resource.type = r.type, resource.value = r.value, resource.text = coalesce(r.text, resource.text)
  MERGE (call)-[t:TARGETS]->(resource)
  SET t.role = r.role
}
CALL (call, c) {
  UNWIND c.events AS event_id
  MATCH (e:SessionEvent {event_id: event_id})
  MERGE (call)-[:LOGGED_BY]->(e)
}
"""

WRITE_ORDER = """
UNWIND $pairs AS pair
MATCH (a:ToolCall {id: pair[0]}), (b:ToolCall {id: pair[1]})
MERGE (a)-[:NEXT_CALL]->(b)
"""

STAMP_SESSION = """
MATCH (s:Session {session_id: $session_id})
SET s.enriched_at = $now, s.enriched_events = $events, s.enrichment_version = $version
"""


def _clip(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _props(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _call_row(
    turn: Turn, order: int, call: Call, languages: Mapping[str, str] | None, adapter: HarnessAdapter | None
) -> dict[str, Any]:
    key = key_of(call.tool_name, adapter)
    suffix = call.id.removeprefix("toolcall:")
    finished = call.post_event is not None or call.response is not None
    answer = call.error or call.response
    result = _props(
        summary=(response_text(answer, SUMMARY_CHARS) or _clip(answer, SUMMARY_CHARS)) if answer else None,
        response_chars=len(_clip(call.response, 10**9) or ""),
        succeeded=not call.failed,
        error=_clip(call.error, SUMMARY_CHARS),
        result_at=call.ended_at,
    )
    return {
        "id": call.id,
        "turn": turn.id,
        "props": _props(
            session_id=call.session_id,
            turn_id=turn.turn_id,
            tool_name=call.tool_name,
            tool_key=key,
            tool_use_id=call.tool_use_id,
            input=_clip(call.input, INPUT_CHARS),
            started_at=call.started_at,
            ended_at=call.ended_at,
            call_order=order,
            agent_id=call.agent_id,
            source=call.source,
        ),
        "tool": {"id": f"tool:{key}", "name": key, "kind": tool_kind(call.tool_name, adapter),
                 "namespace": tool_namespace(call.tool_name, key)},
        "result": {"id": f"toolresult:{suffix}", "props": result} if finished else None,
        "rationale": {"id": f"rationale:{suffix}", "props": {"text": call.rationale, "source": "transcript"}}
        if call.rationale
        else None,
        "resources": [
            {"id": r.id, "type": r.type, "value": r.value, "role": r.role, "text": r.text}
            for r in resources(call, languages, adapter)
        ],
        "events": [e for e in (call.pre_event, call.post_event) if e],
    }  # fmt: skip


@dataclass
class Counts:
    sessions: int = 0
    turns: int = 0
    calls: int = 0
    nodes_created: int = 0
    relationships_created: int = 0

    def add(self, other: Counts) -> None:
        for name in ("sessions", "turns", "calls", "nodes_created", "relationships_created"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def line(self) -> str:
        return (
            f"{self.sessions} session(s): {self.turns} turn(s), {self.calls} tool call(s); "
            f"{self.nodes_created} node(s) and {self.relationships_created} relationship(s) new"
        )


def write(
    graph: Graph,
    projection: Projection,
    languages: Mapping[str, str] | None = None,
    adapter: HarnessAdapter | None = None,
) -> Counts:
    """Store one session's projection in one transaction; returns what was new."""
    now = datetime.now(UTC)
    turns = [
        {
            "id": turn.id,
            "prompt_event": turn.prompt_event,
            "props": _props(
                session_id=turn.session_id,
                turn_id=turn.turn_id,
                index=turn.index,
                prompt=_clip(turn.prompt, INPUT_CHARS),
                started_at=turn.started_at,
                tool_calls=len(turn.calls),
            ),
        }
        for turn in projection.turns
    ]
    calls = [
        _call_row(turn, order, call, languages, adapter)
        for turn in projection.turns
        for order, call in enumerate(turn.calls, start=1)
    ]
    pairs = [
        [a.id, b.id] for turn in projection.turns for a, b in zip(turn.calls, turn.calls[1:], strict=False)
    ]
    counts = Counts(sessions=1, turns=len(turns), calls=len(calls))

    def work(tx: Any) -> None:
        stamp = {"session_id": projection.session_id, "now": now, "events": projection.event_count}
        steps: Iterable[tuple[str, dict[str, Any]]] = (
            (WRITE_TURNS, {"session_id": projection.session_id, "turns": turns, "now": now}),
            (WRITE_CALLS, {"calls": calls, "now": now}),
            (WRITE_ORDER, {"pairs": pairs}),
            (STAMP_SESSION, {**stamp, "version": VERSION}),
        )
        for query, params in steps:
            summary = tx.run(query, params).consume()
            counts.nodes_created += summary.counters.nodes_created
            counts.relationships_created += summary.counters.relationships_created

    graph.write_tx(work)
    return counts


def enrich_session(
    graph: Graph,
    session_id: str,
    languages: Mapping[str, str] | None = None,
    adapters: Mapping[str, HarnessAdapter] | None = None,
) -> Counts:
    """Derive and store one session's projection (whatever its state). ``adapters`` (by harness
    name) read the session's transcript and say what its tools do."""
    events = [row["e"] for row in graph.read(SESSION_EVENTS, {"session_id": session_id})]
    client = next((e.get("client") for e in events if e.get("client")), None)
    adapter = (adapters or {}).get(client) if client else None
    path = next((e.get("transcript_path") for e in reversed(events) if e.get("transcript_path")), None)
    projection = derive(session_id, events, read_transcript(path, adapter))
    return write(graph, projection, languages, adapter)


def sessions_to_enrich(
    graph: Graph, *, session_id: str | None = None, project_id: str | None = None, force: bool = False
) -> list[str]:
    rows = graph.read(
        SESSIONS, {"session_id": session_id, "project_id": project_id, "force": force, "version": VERSION}
    )
    return [row["session_id"] for row in rows]


def enrich(
    graph: Graph,
    sessions: list[str],
    *,
    languages: Mapping[str, str] | None = None,
    adapters: Mapping[str, HarnessAdapter] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Counts:
    """Enrich the given sessions one transaction each; ``progress`` is told after each."""
    total = Counts()
    for session_id in sessions:
        total.add(enrich_session(graph, session_id, languages, adapters))
        if progress is not None:
            progress(session_id)
    return total


# -- what the projection answers -----------------------------------------------------------------

MOST_TOUCHED_FILES = """
MATCH (:Project {id: $project_id})-[:HAS_SESSION]->(:Session)-[:HAS_TURN]->(:Turn)-[:ISSUED]->(c:ToolCall)
      -[t:TARGETS]->(r:Resource {type: 'file'})
WHERE c.started_at >= $since
RETURN r.value AS path, count(c) AS calls, sum(CASE t.role WHEN 'write' THEN 1 ELSE 0 END) AS writes,
       max(c.started_at) AS last_at
ORDER BY calls DESC, last_at DESC LIMIT $limit
"""

MOST_USED_TOOLS = """
MATCH (:Project {id: $project_id})-[:HAS_SESSION]->(:Session)-[:HAS_TURN]->(:Turn)-[:ISSUED]->(c:ToolCall)
      -[:USES_TOOL]->(tool:Tool)
WHERE c.started_at >= $since
OPTIONAL MATCH (c)-[:RETURNED]->(r:ToolResult)
RETURN tool.name AS tool, count(c) AS calls, sum(CASE r.succeeded WHEN false THEN 1 ELSE 0 END) AS failed,
       max(c.started_at) AS last_at
ORDER BY calls DESC, last_at DESC LIMIT $limit
"""


def most_touched(graph: Graph, project_id: str, *, days: float = 14, limit: int = 5) -> dict[str, Any]:
    """The project's most touched files and most used tools over the last ``days`` (empty lists when
    its sessions were never enriched)."""
    since = datetime.now(UTC) - timedelta(days=days)
    params = {"project_id": project_id, "since": since, "limit": limit}

    def rows(query: str) -> list[dict[str, Any]]:
        found = graph.read(query, params)
        for row in found:
            last = when(row.get("last_at"))
            row["last_at"] = last.isoformat() if last else None
        return found

    return {"days": days, "files": rows(MOST_TOUCHED_FILES), "tools": rows(MOST_USED_TOOLS)}
