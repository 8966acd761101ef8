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
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .contrib import CaptureContext, Job
from .events import tool_key
from .timeframes import aware
from .tool_results import is_error_response, response_text
from .transcripts import Transcript, TranscriptCall, read_transcript

if TYPE_CHECKING:
    from .events import HookEvent
    from .graph import Graph
    from .harness import HarnessAdapter
    from .settings import Settings

log = logging.getLogger("mkg.enrichment")

VERSION = 1
INPUT_CHARS = 2000
SUMMARY_CHARS = 500
MAX_RESOURCES = 8
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
_FILE_KEYS = ("file_path", "path", "notebook_path", "filePath", "filename")
_FILE_LIKE = re.compile(
    r"^[\w./~-]+\.(py|md|json|toml|ya?ml|txt|csv|tsv|ts|tsx|js|jsx|sql|cypher|sh|cfg|ini|lock|html|css|rs|go|java)$"
)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(`[^`]+`|[A-Za-z_][\w.$-]*)", re.I)

# -- reading ---------------------------------------------------------------------------------------

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


@dataclass
class Resource:
    type: str
    value: str
    role: str = "read"
    text: str | None = None

    @property
    def id(self) -> str:
        if self.type == "query":
            return f"resource:query:{_digest(self.value)}"
        return f"resource:{self.type}:{self.value}"


@dataclass
class Call:
    id: str
    session_id: str
    tool_name: str
    tool_use_id: str | None = None
    input: Any = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    pre_event: str | None = None
    post_event: str | None = None
    response: Any = None
    error: str | None = None
    failed: bool | None = None
    rationale: str | None = None
    agent_id: str | None = None
    cwd: str | None = None
    source: str = "hooks"


@dataclass
class Turn:
    id: str
    session_id: str
    index: int
    turn_id: str | None = None
    prompt: str | None = None
    started_at: datetime | None = None
    prompt_event: str | None = None
    calls: list[Call] = field(default_factory=list)


@dataclass
class Projection:
    session_id: str
    turns: list[Turn]
    event_count: int
    transcript: str | None = None

    @property
    def calls(self) -> list[Call]:
        return [call for turn in self.turns for call in turn.calls]


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:16]


def _when(value: Any) -> datetime | None:
    """Event timestamps (Neo4j DateTime) and transcript ones (ISO text) as aware datetimes."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return aware(value)


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _key(name: str, adapter: HarnessAdapter | None = None) -> str:
    """The harness-independent tool key (see :meth:`mkg_core.harness.HarnessAdapter.tool_key`)."""
    return (adapter.tool_key(name) if adapter else tool_key(name)) or name


def tool_kind(name: str, adapter: HarnessAdapter | None = None) -> str:
    """What a tool does, as its harness says (``shell``, ``filesystem_read``, ``filesystem_write``,
    ``web``); ``mcp`` for an MCP server's tool, else ``tool``."""
    key = _key(name, adapter)
    kind = adapter.tool_kind(key) if adapter else None
    if kind:
        return kind
    return "mcp" if tool_namespace(name, key) else "tool"


def tool_namespace(name: str, key: str | None = None) -> str | None:
    """The MCP server a tool belongs to, from the part of its name before its key
    (``mcp__mkg__x``, ``mcp__plugin_<plugin>_mkg__x``, ``mcp_mkg_x`` -> ``mkg``); None for built-in
    tools."""
    key = key or _key(name)
    prefix = name[: len(name) - len(key)].strip("_") if key and key != name and name.endswith(key) else ""
    if not prefix.lower().startswith("mcp"):
        return None
    middle = prefix[3:].strip("_")
    return (middle.split("_")[-1] if middle.startswith("plugin_") else middle) or None


# -- derivation ------------------------------------------------------------------------------------


def derive(session_id: str, events: list[Mapping[str, Any]], transcript: Transcript | None) -> Projection:
    """Turns and calls of one session, from its events in order and its transcript."""
    turns: list[Turn] = []
    by_turn_id: dict[str, Turn] = {}
    pending: list[Call] = []  # started, not yet finished
    calls_by_use_id: dict[str, Call] = {}

    def new_turn(turn_id: str | None, at: datetime | None) -> Turn:
        turn = Turn(
            id=f"turn:{session_id}:{turn_id or len(turns) + 1}",
            session_id=session_id,
            index=len(turns) + 1,
            turn_id=turn_id,
            started_at=at,
        )
        turns.append(turn)
        if turn_id:
            by_turn_id[turn_id] = turn
        return turn

    def current(turn_id: str | None, at: datetime | None) -> Turn:
        """The turn an event belongs to: by its turn id, else the latest (a first one if none)."""
        if turn_id:
            return by_turn_id.get(turn_id) or new_turn(turn_id, at)
        return turns[-1] if turns else new_turn(None, at)

    def start(event: Mapping[str, Any], at: datetime | None, tool_input: Any) -> Call:
        """The call an event begins: its PreToolUse, or a finish whose start never arrived."""
        use_id = event.get("tool_use_id")
        call = Call(
            id=f"toolcall:{session_id}:{use_id or event.get('event_id')}",
            session_id=session_id,
            tool_name=str(event["tool_name"]),
            tool_use_id=use_id,
            input=tool_input,
            started_at=at,
            agent_id=event.get("agent_id"),
            cwd=event.get("cwd"),
        )
        current(event.get("turn_id"), at).calls.append(call)
        if use_id:
            calls_by_use_id[use_id] = call
        return call

    for event in events:
        name = event.get("event_name")
        at = _when(event.get("timestamp"))
        turn_id = event.get("turn_id")
        if name == "UserPromptSubmit":
            turn = by_turn_id.get(turn_id) if turn_id else None
            turn = turn or new_turn(turn_id, at)
            turn.prompt = turn.prompt or event.get("prompt")
            turn.prompt_event = turn.prompt_event or event.get("event_id")
            continue
        if name not in TOOL_EVENTS or not event.get("tool_name"):
            continue
        tool_input = _decode(event.get("tool_input"))
        use_id = event.get("tool_use_id")

        if name == "PreToolUse":
            call = start(event, at, tool_input)
            call.pre_event = event.get("event_id")
            pending.append(call)
            continue
        found = calls_by_use_id.get(use_id) if use_id else None
        if found is None or found.post_event is not None:
            found = next(
                (c for c in pending if c.tool_name == event["tool_name"] and c.input == tool_input), None
            )
        if found is None:  # a finish whose start was lost
            found = start(event, at, tool_input)
        if found in pending:
            pending.remove(found)
        found.ended_at = at
        found.post_event = event.get("event_id")
        found.response = event.get("tool_response")
        found.error = event.get("error")
        found.failed = (
            bool(event.get("tool_error")) or name == "PostToolUseFailure" or is_error_response(found.response)
        )

    if transcript is not None:
        # A subagent's events may name its parent's transcript: take rationales by call id from it,
        # but never the parent's other calls.
        subagent = any(event.get("agent_id") for event in events)
        _merge_transcript(session_id, turns, calls_by_use_id, transcript, current, add_missing=not subagent)
    path = transcript.path if transcript is not None else None
    return Projection(session_id, turns, len(events), path)


def _merge_transcript(
    session_id: str,
    turns: list[Turn],
    known: dict[str, Call],
    transcript: Transcript,
    current: Callable[[str | None, datetime | None], Turn],
    *,
    add_missing: bool = True,
) -> None:
    for item in transcript.ordered():
        call = known.get(item.tool_use_id)
        if call is None and not add_missing:
            continue
        if call is None:
            call = _from_transcript(session_id, item)
            target = _turn_at(turns, call.started_at) if turns else current(None, call.started_at)
            target.calls.append(call)
            target.calls.sort(key=lambda c: c.started_at or _EARLIEST)
            known[item.tool_use_id] = call
        call.rationale = call.rationale or item.rationale
        if call.response is None and item.result is not None:
            call.response = item.result
        if call.failed is None and item.is_error is not None:
            call.failed = item.is_error


def _from_transcript(session_id: str, item: TranscriptCall) -> Call:
    return Call(
        id=f"toolcall:{session_id}:{item.tool_use_id}",
        session_id=session_id,
        tool_name=item.name,
        tool_use_id=item.tool_use_id,
        input=item.input,
        started_at=_when(item.at),
        response=item.result,
        failed=item.is_error,
        source="transcript",
    )


def _turn_at(turns: list[Turn], at: datetime | None) -> Turn:
    """The last turn that started at or before ``at`` (transcript and hook clocks are both UTC)."""
    chosen = turns[0]
    for turn in turns:
        if at is None or turn.started_at is None or turn.started_at <= at:
            chosen = turn
    return chosen


# -- resources -------------------------------------------------------------------------------------


def resources(
    call: Call, query_languages: Mapping[str, str] | None = None, adapter: HarnessAdapter | None = None
) -> list[Resource]:
    """What a call touched, from its input: files, URLs, queries and the tables they name."""
    found: list[Resource] = []
    data = call.input if isinstance(call.input, dict) else {}
    key = _key(call.tool_name, adapter)
    kind = tool_kind(call.tool_name, adapter)
    role = "write" if kind == "filesystem_write" else "read"
    for name in _FILE_KEYS:
        if isinstance(data.get(name), str) and data[name].strip():
            found.append(Resource("file", _absolute(data[name].strip(), call.cwd), role))
    if kind == "filesystem_write" and isinstance(data.get("input") or data.get("patch"), str):
        for path in _PATCH_FILE.findall(data.get("input") or data.get("patch") or ""):
            found.append(Resource("file", _absolute(path.strip(), call.cwd), "write"))
    if kind == "shell":
        command = data.get("command", data.get("cmd"))
        for token in _command_tokens(command)[1:]:
            if not token.startswith("-") and ("/" in token or _FILE_LIKE.match(token)) and "://" not in token:
                found.append(Resource("file", _absolute(token, call.cwd), "read"))
    for name in ("url", "uri"):
        if isinstance(data.get(name), str) and "://" in data[name]:
            found.append(Resource("url", data[name].strip()))
    language = (query_languages or {}).get(key) or _language_of(key)
    query = data.get("query")
    if language and isinstance(query, str) and query.strip():
        found.append(Resource("query", query.strip(), text=query.strip()[:INPUT_CHARS]))
        if language == "sql":
            for table in _SQL_TABLE.findall(query):
                found.append(Resource("table", table.strip("`")))
    unique: dict[str, Resource] = {}
    for resource in found:
        unique.setdefault(resource.id, resource)
    return list(unique.values())[:MAX_RESOURCES]


def _language_of(key: str) -> str | None:
    lowered = key.lower()
    if "cypher" in lowered:
        return "cypher"
    if "sql" in lowered or "bigquery" in lowered:
        return "sql"
    return None


def _command_tokens(command: Any) -> list[str]:
    if isinstance(command, list):
        tokens = [str(t) for t in command]
        if len(tokens) >= 3 and tokens[1] in ("-c", "-lc"):  # ["bash", "-lc", "cat x"]
            return _command_tokens(tokens[2])
        return tokens
    if not isinstance(command, str):
        return []
    try:
        return shlex.split(command)[:64]
    except ValueError:
        return command.split()[:64]


def _absolute(path: str, cwd: str | None) -> str:
    if path.startswith(("/", "~")) or not cwd:
        return path
    return f"{cwd.rstrip('/')}/{path.removeprefix('./')}"


# -- writing ---------------------------------------------------------------------------------------

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
    key = _key(call.tool_name, adapter)
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
            last = _when(row.get("last_at"))
            row["last_at"] = last.isoformat() if last else None
        return found

    return {"days": days, "files": rows(MOST_TOUCHED_FILES), "tools": rows(MOST_USED_TOOLS)}


# -- the worker job --------------------------------------------------------------------------------


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
