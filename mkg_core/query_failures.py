"""Query failures: what a query tool's result says went wrong, recorded for later consolidation.

A capture handler looks at every PostToolUse (failures included) of a *query tool* (declared
through ``mkg_register_query_tools``; matched on the harness-independent ``tool_key``). It unwraps
the harness's response (JSON inside strings, MCP content blocks and ``isError``, ``{"result": ...}``
envelopes, a large result saved to a file), classifies it with :data:`CLASSES`, and records
anything other than a clean success::

    (:Project)-[:HAS_QUERY_EXECUTION]->(:QueryExecution)<-[:HAS_QUERY_EXECUTION]-(:Session)
    (:QueryExecution)-[:HAS_ISSUE]->(:QueryIssue {type, severity, confidence, message})
    (:QueryExecution)-[:CAPTURED_FROM]->(:SessionEvent)

Errors take the first matching class in table order; a success can still be suspicious (no rows,
or temporal values that came back as ``{}``). Only the *consolidatable* classes are later folded
into error patterns (:mod:`mkg_core.error_patterns`); transient ones (timeouts, limits, missing
permissions) never are.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .contrib import CaptureContext, CaptureHandler, QueryTool
from .redaction import scrub
from .tool_results import Response, unwrap

if TYPE_CHECKING:
    from .events import HookEvent

log = logging.getLogger(__name__)

#: Longest text kept from a response or an error message.
EXCERPT_CHARS = 4000
MESSAGE_CHARS = 1000
#: Words that mark an answer without structured data as a failure.
_ERROR_MARKERS = ("error", "exception", "failed", "failure")


@dataclass(frozen=True)
class IssueClass:
    """One row of the classification table."""

    type: str
    severity: str
    confidence: float
    #: Folded into error patterns when it recurs (the query text caused it).
    consolidatable: bool
    #: Worth optimizing the query (a slow, huge or empty result), not only fixing it.
    needs_optimization: bool
    #: Lower-case phrases any of which marks an error message as this class.
    phrases: tuple[str, ...] = ()
    #: Regular expressions, for messages phrases cannot pin down.
    patterns: tuple[str, ...] = ()
    meaning: str = ""

    def matches(self, text: str) -> bool:
        return any(p in text for p in self.phrases) or any(re.search(p, text) for p in self.patterns)


#: Error classes, in the order they are tried: the first that matches wins. Transient classes
#: come first, so "permission denied on table x" is a permission error, not a schema mismatch.
#: Columns: type, severity, confidence, consolidatable, needs_optimization, phrases, patterns.
# fmt: off
CLASSES: tuple[IssueClass, ...] = (
    IssueClass("permission_error", "high", 0.95, False, False, (
        "permission denied", "access denied", "forbidden", "unauthorized", "unauthenticated",
        "not authorized", "invalid credentials", "credentials", "security.forbidden",
    ), meaning="the caller may not run this; not the query's fault"),
    IssueClass("timeout", "high", 0.92, False, True, (
        "timed out", "timeout", "deadline exceeded", "transaction has been terminated",
        "transactiontimedout", "execution time limit",
    ), meaning="the query ran out of time"),
    IssueClass("result_size_limit", "high", 0.92, False, True, (
        "result set too large", "response too large", "result too large", "too many rows",
        "exceeds maximum allowed tokens", "exceeds the maximum", "maximum response size",
        "allowlargeresults", "output too large",
    ), meaning="the result was too big to return"),
    IssueClass("resource_limit", "high", 0.90, False, True, (
        "resources exceeded", "quota exceeded", "rate limit", "ratelimit", "exceeded memory",
        "memory limit", "out of memory", "memorypooloutofmemoryerror", "too many requests",
    ), meaning="the engine ran out of memory, quota or rate"),
    IssueClass("capability_unavailable", "medium", 0.92, True, False, (
        "procedurenotfound", "there is no procedure", "no procedure with the name", "unknown procedure",
        "not installed", "not registered", "plugin is not available",
    ), (r"unknown function '?`?(apoc|gds)\.",),
        meaning="a procedure, function or plugin the query uses is not installed"),
    IssueClass("schema_mismatch", "high", 0.90, True, False, (
        "unrecognized name", "no such table", "no such column", "unknown column", "unknown field",
        "cannot access field", "not found: table", "not found: dataset", "not found: column",
        "does not exist", "unknown property key", "unknown label", "unknown relationship type",
    ), (r"variable `[^`]+` not defined", r"name \S+ not found inside"),
        meaning="the query names a table, column, label or property that is not there"),
    IssueClass("syntax_error", "high", 0.90, True, False, (
        "syntax error", "syntaxerror", "parse error", "parser exception", "invalid input",
        "unexpected keyword", "unexpected end", "mismatched input", "select list must not be empty",
        "unknown function", "type mismatch", "expected parameter(s)", "parametermissing",
    ), meaning="the query text is not valid for the engine"),
    IssueClass("query_execution_error", "high", 0.75, True, False,
               meaning="any other error the engine reported"),
)
#: Results that did not fail but look wrong, and a result with nothing in it.
EMPTY_RESULT = IssueClass("empty_result", "medium", 0.95, False, True,
                          meaning="the query succeeded but returned no rows")
SERIALIZATION_ISSUE = IssueClass("serialization_issue", "medium", 0.85, True, True, meaning=(
    "values came back as {} (temporal or spatial values need an explicit string projection)"))
MALFORMED_OUTPUT = IssueClass("malformed_output", "high", 0.95, False, False,
                              meaning="the tool returned nothing readable")
# fmt: on
BY_TYPE = {c.type: c for c in (*CLASSES, EMPTY_RESULT, SERIALIZATION_ISSUE, MALFORMED_OUTPUT)}
CONSOLIDATABLE = frozenset(t for t, c in BY_TYPE.items() if c.consolidatable)
#: Issues of results that succeeded.
SUCCESS_TYPES = frozenset({EMPTY_RESULT.type, SERIALIZATION_ISSUE.type})
_FALLBACK = CLASSES[-1]


def row_count(data: Any) -> int | None:
    """How many rows the result holds, when its shape says (a list, ``rows``, ``totalRows``)."""
    if isinstance(data, list):
        return len(data)
    if isinstance(data, dict):
        for key in ("row_count", "rowCount"):
            if isinstance(data.get(key), int) and not isinstance(data.get(key), bool):
                return int(data[key])
        if isinstance(data.get("rows"), list):
            return len(data["rows"])
        total = data.get("totalRows")
        if isinstance(total, (int, str)) and str(total).isdigit():
            return int(total)
        if data.get("jobComplete") is True or "schema" in data:
            return 0
    return None


def has_empty_object(data: Any, depth: int = 0) -> bool:
    """True when a value somewhere in the rows is ``{}`` (how drivers render unmapped temporals)."""
    if depth > 10:
        return False
    if isinstance(data, dict):
        rows = data.get("rows") if isinstance(data.get("rows"), list) else None
        values = rows if rows is not None else list(data.values())
        return any(v == {} or has_empty_object(v, depth + 1) for v in values)
    if isinstance(data, list):
        return any(v == {} or has_empty_object(v, depth + 1) for v in data)
    return False


@dataclass(frozen=True)
class Issue:
    type: str
    severity: str
    confidence: float
    message: str
    consolidatable: bool
    needs_optimization: bool


def classify(response: Response, *, language: str = "cypher") -> list[Issue]:
    """The issues of one result; empty for a clean success."""
    text = response.text
    lowered = text.lower()

    def issue(cls: IssueClass, message: str) -> Issue:
        return Issue(
            cls.type,
            cls.severity,
            cls.confidence,
            message[:MESSAGE_CHARS],
            cls.consolidatable,
            cls.needs_optimization,
        )

    if not text.strip() and response.data is None and not response.is_error:
        return [issue(MALFORMED_OUTPUT, "the tool returned no output")]
    failed = response.is_error or (
        response.data is None and any(marker in lowered for marker in _ERROR_MARKERS)
    )
    if failed:
        cls = next((c for c in CLASSES if c.matches(lowered)), _FALLBACK)
        return [issue(cls, text)]
    if response.data is None and any(c.matches(lowered) for c in CLASSES[:4]):
        # a plain-text notice such as "output too large ... saved to file" with nothing readable
        cls = next(c for c in CLASSES if c.matches(lowered))
        return [issue(cls, text)]
    issues = []
    count = row_count(response.data)
    if count == 0:
        issues.append(issue(EMPTY_RESULT, "the query succeeded but returned zero rows"))
    elif language == "cypher" and has_empty_object(response.data):
        issues.append(
            issue(SERIALIZATION_ISSUE, "some values came back as {}: project temporals with toString()")
        )
    return issues


def query_text(tool_input: Any) -> str | None:
    """The query a tool call ran (``query``, ``sql`` or ``cypher`` of its input)."""
    if isinstance(tool_input, str):
        try:
            tool_input = json.loads(tool_input)
        except ValueError:
            return tool_input.strip() or None
    if isinstance(tool_input, dict):
        for key in ("query", "sql", "cypher", "statement"):
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def execution_id(session_id: str, tool_use_id: str | None, query: str, received: str | None) -> str:
    if tool_use_id:
        return f"query-execution:{session_id}:{tool_use_id}"
    digest = hashlib.sha1(f"{session_id}\n{query}\n{received}".encode(), usedforsecurity=False).hexdigest()
    return f"query-execution:{digest[:20]}"


WRITE_EXECUTION = """
MATCH (p:Project {id: $project_id})
MERGE (q:QueryExecution {id: $id})
  ON CREATE SET q.created_at = $now
SET q += $props, q.updated_at = $now, q.last_seen_at = $now
MERGE (p)-[:HAS_QUERY_EXECUTION]->(q)
WITH q
OPTIONAL MATCH (s:Session {session_id: $session_id})
FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END | MERGE (s)-[:HAS_QUERY_EXECUTION]->(q))
WITH q
OPTIONAL MATCH (e:SessionEvent {event_id: $event_id})
FOREACH (_ IN CASE WHEN e IS NULL THEN [] ELSE [1] END | MERGE (q)-[:CAPTURED_FROM]->(e))
WITH q
UNWIND $issues AS row
MERGE (i:QueryIssue {id: row.id})
  ON CREATE SET i.created_at = $now
SET i += row
MERGE (q)-[:HAS_ISSUE]->(i)
RETURN count(i) AS issues
"""


def inspect(event: HookEvent, tool: QueryTool) -> tuple[str | None, Response, list[Issue]]:
    """The query, the unwrapped response and its issues for one tool event."""
    response = unwrap(event.tool_response, event.error if event.is_error else None)
    if event.is_error:
        response.is_error = True
    return query_text(event.tool_input), response, classify(response, language=tool.language)


class QueryFailureCapture(CaptureHandler):
    """Records failed or suspicious results of query tools (see the module docstring)."""

    name = "query-failures"
    events = frozenset({"PostToolUse"})

    def matches(self, event: HookEvent) -> bool:
        return event.event == "PostToolUse" and bool(event.tool_key) and not event.is_interrupt

    def handle(self, event: HookEvent, context: CaptureContext) -> None:
        tool = context.query_tools.get(event.tool_key or "")
        if tool is None or context.project is None:
            return
        query, response, issues = inspect(event, tool)
        if query is None or not issues:
            return  # a clean success, or nothing to learn from
        query = scrub(query)  # a result saved to a file was read from disk: scrub what is kept
        exec_id = execution_id(event.session_id, event.tool_use_id, query, context.event_id)
        props = {
            "engine": tool.language,
            "tool_key": tool.tool_key,
            "tool_name": event.tool_name,
            "tool_use_id": event.tool_use_id,
            "query_text": query[:EXCERPT_CHARS],
            "query_hash": hashlib.sha1(query.encode(), usedforsecurity=False).hexdigest(),
            "status": "suspicious" if all(i.type in SUCCESS_TYPES for i in issues) else "error",
            "row_count": row_count(response.data),
            "response_excerpt": scrub(response.text[:EXCERPT_CHARS]),
            "saved_file": response.saved_file,
            "issue_types": sorted(i.type for i in issues),
            "issue_count": len(issues),
            "consolidatable": any(i.consolidatable for i in issues),
            "needs_optimization": any(i.needs_optimization for i in issues),
            "project_id": context.project.id,
            "session_id": event.session_id,
            "client": event.harness,
        }
        rows = [
            {
                "id": f"{exec_id}:{i.type}",
                "type": i.type,
                "severity": i.severity,
                "confidence": i.confidence,
                "message": scrub(i.message),
                "consolidatable": i.consolidatable,
                "needs_optimization": i.needs_optimization,
            }
            for i in issues
        ]
        context.graph.write(
            WRITE_EXECUTION,
            {
                "project_id": context.project.id,
                "id": exec_id,
                "props": props,
                "session_id": event.session_id,
                "event_id": context.event_id,
                "issues": rows,
                "now": datetime.now(UTC),
            },
        )
        log.info("query failure on %s: %s", tool.tool_key, ", ".join(i.type for i in issues))
