"""The session graph: captured events threaded per session, subagents, projects and owners.

::

    (:Project)-[:HAS_SESSION]->(:Session)-[:HAS_EVENT]->(:SessionEvent)-[:NEXT]->(:SessionEvent)
    (:Session)-[:FIRST_EVENT|LATEST_EVENT]->(:SessionEvent)
    (:Session)-[:HAS_SUBAGENT]->(:Session {agent_kind: 'subagent'})-[:SUBAGENT_OF]->(:Session)
    (:Session {agent_kind: 'subagent'})-[:STARTED_AT|ENDED_AT|TRIGGERED_BY]->(:SessionEvent)
    (:User)-[:HAS_SESSION]->(:Session)

Events are appended in spool order by the single worker. :func:`record_event` is idempotent: an
event id already in the graph creates nothing. SessionStart and SessionEnd are project-neutral:
they carry no ``project_id`` and do not link the session to a project (a session may move
between folders; its other events say where the work happened).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .payload import truncation_marker

if TYPE_CHECKING:
    import neo4j

    from .events import HookEvent
    from .graph import Graph
    from .identity import ProjectRef, UserRef

#: Longest text property stored on a :SessionEvent; longer text ends with a truncation marker.
EVENT_TEXT_LIMIT = 8000
#: Events that say nothing about which project the work belongs to.
PROJECT_NEUTRAL_EVENTS = frozenset({"SessionStart", "SessionEnd"})
_LIFECYCLE_MARKERS = {"SubagentStart": "STARTED_AT", "SubagentStop": "ENDED_AT"}

APPEND_EVENT = """
MERGE (s:Session {session_id: $session_id})
  ON CREATE SET s.created_at = $event.timestamp
SET s += $session, s.user_id = coalesce(s.user_id, $user_id), s.last_event_at = $event.timestamp
WITH s
OPTIONAL MATCH (known:SessionEvent {event_id: $event.event_id})
WITH s WHERE known IS NULL
OPTIONAL MATCH (s)-[tail:LATEST_EVENT]->(prev:SessionEvent)
CREATE (e:SessionEvent)
SET e = $event
CREATE (s)-[:HAS_EVENT]->(e)
CREATE (s)-[:LATEST_EVENT]->(e)
DELETE tail
FOREACH (_ IN CASE WHEN prev IS NULL THEN [1] ELSE [] END | CREATE (s)-[:FIRST_EVENT]->(e))
FOREACH (p IN CASE WHEN prev IS NULL THEN [] ELSE [prev] END | CREATE (p)-[:NEXT]->(e))
RETURN e.event_id AS created
"""

LINK_SUBAGENT = """
MERGE (parent:Session {session_id: $parent_id})
  ON CREATE SET parent.created_at = $at, parent.client = $client
SET parent.agent_kind = coalesce(parent.agent_kind, 'main')
MERGE (child:Session {session_id: $child_id})
  ON CREATE SET child.created_at = $at, child.client = $client
SET child.agent_kind = 'subagent', child.agent_id = $child_id, child.parent_session_id = $parent_id,
    child.agent_type = coalesce($agent_type, child.agent_type)
MERGE (parent)-[down:HAS_SUBAGENT]->(child)
  ON CREATE SET down.created_at = $at, down.agent_id = $child_id
SET down.updated_at = $at
MERGE (child)-[up:SUBAGENT_OF]->(parent)
  ON CREATE SET up.created_at = $at
SET up.updated_at = $at
WITH child
OPTIONAL MATCH (e:SessionEvent {event_id: $event_id})
FOREACH (_ IN CASE WHEN e IS NOT NULL AND $marker = 'STARTED_AT' THEN [1] ELSE [] END |
  MERGE (child)-[:STARTED_AT]->(e))
FOREACH (_ IN CASE WHEN e IS NOT NULL AND $marker = 'ENDED_AT' THEN [1] ELSE [] END |
  MERGE (child)-[:ENDED_AT]->(e))
FOREACH (_ IN CASE WHEN e IS NOT NULL AND $marker = 'TRIGGERED_BY' THEN [1] ELSE [] END |
  MERGE (child)-[:TRIGGERED_BY]->(e))
"""

LINK_PROJECT = """
MERGE (p:Project {id: $project.id})
  ON CREATE SET p.name = $project.name, p.repo_root = $project.root, p.remote = $project.remote,
                p.source = $project.source, p.status = 'active', p.created_at = $at
SET p.last_activity_at = $at, p.updated_at = $at, p.last_source = $project.source
WITH p
UNWIND $session_ids AS sid
MATCH (s:Session {session_id: sid})
MERGE (p)-[:HAS_SESSION]->(s)
"""

PROJECT_OR_OTHERS = """
OPTIONAL MATCH (named:Project {id: $id})
WITH named
OPTIONAL MATCH (p:Project) WHERE named IS NULL
WITH named, p ORDER BY coalesce(p.last_activity_at, p.created_at) DESC
RETURN named IS NOT NULL AS found, [id IN collect(p.id)[..$limit] WHERE id IS NOT NULL] AS others
"""

LINK_USER = """
MERGE (u:User {id: $user.id})
  ON CREATE SET u.source = $user.source, u.created_at = $at
SET u.last_seen_at = $at, u.last_source = $user.source
WITH u
UNWIND $session_ids AS sid
MATCH (s:Session {session_id: sid})
SET s.user_id = coalesce(s.user_id, u.id)
MERGE (u)-[owns:HAS_SESSION]->(s)
  ON CREATE SET owns.created_at = $at
"""


@dataclass(frozen=True)
class CapturedEvent:
    """A parsed event with everything the graph needs to place it."""

    event: HookEvent
    event_id: str
    received_at: datetime
    client: str
    project: ProjectRef
    user: UserRef
    payload_bytes: int = 0
    truncated: tuple[str, ...] = field(default_factory=tuple)

    @property
    def timeline_session(self) -> str:
        """The session whose timeline the event joins.

        Subagent start and stop are on the parent's timeline; events from inside a subagent are
        on the subagent's own session, keyed by its agent id.
        """
        event = self.event
        if event.is_subagent and event.agent_id and event.event not in _LIFECYCLE_MARKERS:
            return event.agent_id
        return event.session_id

    @property
    def subagent_link(self) -> tuple[str, str, str | None] | None:
        """(parent session, child session, marker relationship) when the event concerns a subagent."""
        event = self.event
        if event.event in _LIFECYCLE_MARKERS:
            if event.agent_id and event.agent_id != event.session_id:
                return event.session_id, event.agent_id, _LIFECYCLE_MARKERS[event.event]
            return None
        if event.is_subagent and event.agent_id:
            return event.parent_session_id or event.session_id, event.agent_id, None
        if event.spawned_agent_id and event.spawned_agent_id != event.session_id:
            return event.session_id, event.spawned_agent_id, "TRIGGERED_BY"
        return None

    @property
    def project_neutral(self) -> bool:
        return self.event.event in PROJECT_NEUTRAL_EVENTS


def other_projects(graph: Graph, project_id: str, limit: int = 10) -> list[str] | None:
    """None when the graph has a project ``project_id``; else the ids of the projects it has, the
    most recently active first (at most ``limit``)."""
    (row,) = graph.read(PROJECT_OR_OTHERS, {"id": project_id, "limit": limit})
    return None if row["found"] else list(row["others"])


def clip(text: str | None, limit: int = EVENT_TEXT_LIMIT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + truncation_marker(len(text))


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def event_properties(captured: CapturedEvent) -> dict[str, Any]:
    """The :SessionEvent's properties (None values dropped; long text clipped)."""
    event = captured.event
    texts = {
        "prompt": event.prompt,
        "tool_input": _as_text(event.tool_input),
        "tool_response": _as_text(event.tool_response),
        "error": event.error,
        "last_assistant_message": event.last_assistant_message,
    }
    clipped = [name for name, text in texts.items() if text is not None and len(text) > EVENT_TEXT_LIMIT]
    truncated = sorted({*captured.truncated, *clipped})
    props: dict[str, Any] = {
        "event_id": captured.event_id,
        "event_name": event.event,
        "source_event": event.source_event,
        "client": captured.client,
        "timestamp": captured.received_at,
        "session_id": event.session_id,
        "timeline_session_id": captured.timeline_session,
        "project_id": None if captured.project_neutral else captured.project.id,
        "user_id": captured.user.id,
        "cwd": event.cwd,
        "transcript_path": event.transcript_path,
        "source": event.source,
        "model": event.model,
        "turn_id": event.turn_id,
        "prompt": clip(texts["prompt"]),
        "tool_name": event.tool_name,
        "tool_key": event.tool_key,
        "tool_use_id": event.tool_use_id,
        "tool_input": clip(texts["tool_input"]),
        "tool_response": clip(texts["tool_response"]),
        "tool_error": event.is_error or None,
        "error": clip(texts["error"]),
        "is_interrupt": event.is_interrupt or None,
        "last_assistant_message": clip(texts["last_assistant_message"]),
        "stop_hook_active": event.raw.get("stop_hook_active")
        if isinstance(event.raw.get("stop_hook_active"), bool)
        else None,
        "agent_kind": event.agent_kind,
        "agent_id": event.agent_id,
        "agent_type": event.agent_type,
        "parent_session_id": event.parent_session_id,
        "spawned_agent_id": event.spawned_agent_id,
        "payload_bytes": captured.payload_bytes,
        "truncated_fields": truncated or None,
    }
    return {key: value for key, value in props.items() if value is not None}


def session_properties(captured: CapturedEvent) -> dict[str, Any]:
    event = captured.event
    props: dict[str, Any] = {"client": captured.client}
    if event.is_subagent and event.agent_id and event.event not in _LIFECYCLE_MARKERS:
        props.update(
            agent_kind="subagent",
            agent_id=event.agent_id,
            agent_type=event.agent_type,
            parent_session_id=event.parent_session_id or event.session_id,
        )
    else:
        props["agent_kind"] = "main"
        if event.model:
            props["model"] = event.model
    return {key: value for key, value in props.items() if value is not None}


def record_event(tx: neo4j.ManagedTransaction, captured: CapturedEvent) -> bool:
    """Write one event into the session graph; return False when it was already there."""
    timeline = captured.timeline_session
    created = tx.run(
        APPEND_EVENT,
        session_id=timeline,
        session=session_properties(captured),
        user_id=captured.user.id,
        event=event_properties(captured),
    ).single()
    if created is None:
        return False
    at = captured.received_at
    sessions = [timeline]
    link = captured.subagent_link
    if link is not None:
        parent, child, marker = link
        tx.run(
            LINK_SUBAGENT,
            parent_id=parent,
            child_id=child,
            agent_type=captured.event.agent_type,
            client=captured.client,
            marker=marker,
            event_id=captured.event_id,
            at=at,
        ).consume()
        sessions += [parent, child]
    sessions = list(dict.fromkeys(sessions))
    if not captured.project_neutral:
        project = captured.project
        tx.run(
            LINK_PROJECT,
            project={
                "id": project.id,
                "name": project.name,
                "root": project.root,
                "remote": project.remote,
                "source": project.source,
            },
            session_ids=sessions,
            at=at,
        ).consume()
    tx.run(
        LINK_USER,
        user={"id": captured.user.id, "source": captured.user.source},
        session_ids=sessions,
        at=at,
    ).consume()
    return True
