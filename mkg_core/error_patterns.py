"""Error patterns: recurring query failures folded into reusable fixes, and served when they recur.

**Consolidation** is a worker job on Stop and SessionEnd, once per project at a time. For each
query tool with failures of a consolidatable class not consolidated yet
(:data:`mkg_core.query_failures.CONSOLIDATABLE`) it runs only when more than
``MKG_QUERY_ERROR_CONSOLIDATION_THRESHOLD`` wait and the tool was not consolidated in the last
``MKG_QUERY_ERROR_CONSOLIDATION_INTERVAL_HOURS``. The LLM gets the failures and the tool's known
patterns, fenced as data; it merges failures with one root cause into one pattern, updates a known
pattern rather than duplicating it, and lists transient one-offs to drop. Every failure it was
shown gets ``error_consolidated_at``; patterns are embedded and keep ``[:DERIVED_FROM]`` provenance::

    (:Project)-[:HAS_TOOL_ERROR_PROFILE]->(:ToolErrorProfile {tool_key, last_consolidated_at})
    (:ToolErrorProfile)-[:HAS_ERROR_PATTERN]->(:QueryErrorPattern {error_signature, root_cause,
        resolution, example_query, status})-[:DERIVED_FROM]->(:QueryExecution)

**Recall** answers the hook of a query tool's PostToolUse (and Claude Code's PostToolUseFailure):
on a consolidatable failure it searches that tool's patterns only (fulltext
``query_error_pattern_fulltext`` and vector ``query_error_pattern_vector``, filtered in the index
by project and tool, fused by reciprocal rank) for the error and the query, and returns the best
fixes. Served patterns get ``use_count``, ``last_used_at`` and ``[:INJECTED_IN]`` to the session.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .contrib import WARM_UP_IDS, CaptureContext, ContextProvider, Job, QueryTool, warm_up_vector
from .embedding import embed_or_none
from .injection import FENCE_CLOSE, FENCE_OPEN, instruction_like, neutralise
from .learnings import collapse
from .llm import FENCE_RULE, LLM, LLMError, fence
from .query_failures import CONSOLIDATABLE, inspect
from .redaction import scrub
from .search import keyword_query, rrf
from .timeframes import aware

if TYPE_CHECKING:
    from .contrib import Embedder
    from .events import HookEvent
    from .graph import Graph
    from .settings import Settings

log = logging.getLogger(__name__)

BATCH = 20
KNOWN_PATTERNS = 12
SERVED = 2
SEARCH_TEXT_CHARS = 2000

# -- consolidation -----------------------------------------------------------------------------------

PENDING = """
MATCH (:Project {id: $project_id})-[:HAS_QUERY_EXECUTION]->(q:QueryExecution)
WHERE q.error_consolidated_at IS NULL AND any(t IN q.issue_types WHERE t IN $types)
WITH q ORDER BY q.created_at DESC
WITH q.tool_key AS tool_key, collect(q) AS waiting
OPTIONAL MATCH (:Project {id: $project_id})-[:HAS_TOOL_ERROR_PROFILE]->(t:ToolErrorProfile)
WHERE t.tool_key = tool_key
RETURN tool_key, size(waiting) AS pending, t.last_consolidated_at AS last,
       [q IN waiting[..$batch] | q {.id, .query_text, .response_excerpt, .issue_types}] AS batch
ORDER BY tool_key
"""

KNOWN = """
MATCH (:Project {id: $project_id})-[:HAS_TOOL_ERROR_PROFILE]->(:ToolErrorProfile {tool_key: $tool_key})
      -[:HAS_ERROR_PATTERN]->(p:QueryErrorPattern {status: 'active'})
RETURN p.id AS id, p.title AS title, p.error_signature AS error_signature, p.root_cause AS root_cause,
       p.resolution AS resolution, p.example_query AS example_query
ORDER BY p.last_seen_at DESC
LIMIT $limit
"""

WRITE_PATTERNS = """
MATCH (p:Project {id: $project_id})
MERGE (t:ToolErrorProfile {id: $profile_id})
  ON CREATE SET t.created_at = $now, t.tool_key = $tool_key, t.project_id = $project_id
SET t.last_consolidated_at = $now, t.updated_at = $now, t.last_model = $model
MERGE (p)-[:HAS_TOOL_ERROR_PROFILE]->(t)
WITH t
CALL (t) {
  UNWIND $patterns AS row
  MERGE (e:QueryErrorPattern {id: row.id})
    ON CREATE SET e.created_at = $now, e.use_count = 0
  SET e.title = row.title, e.error_signature = row.error_signature, e.root_cause = row.root_cause,
      e.resolution = row.resolution, e.example_query = row.example_query, e.example_fix = row.example_fix,
      e.issue_types = row.issue_types, e.confidence = row.confidence, e.status = 'active',
      e.project_id = $project_id, e.tool_key = $tool_key, e.model = $model, e.updated_at = $now,
      e.last_seen_at = $now, e.embedding = coalesce(row.embedding, e.embedding)
  MERGE (t)-[:HAS_ERROR_PATTERN]->(e)
  WITH e, row
  UNWIND row.sources AS qid
  MATCH (q:QueryExecution {id: qid})
  MERGE (e)-[d:DERIVED_FROM]->(q) ON CREATE SET d.created_at = $now
  SET q.consolidated_into = e.id
  WITH e, count(q) AS linked  // an aggregation: every edge is in before the count below
  SET e.occurrence_count = COUNT { (e)-[:DERIVED_FROM]->() }
}
WITH t
UNWIND $batch AS qid
MATCH (q:QueryExecution {id: qid})
SET q.error_consolidated_at = $now, q.skipped_as_transient = qid IN $skipped
RETURN count(q) AS consumed
"""

SYSTEM = (
    "You maintain a library of known query-failure patterns for one database tool used by a coding "
    "agent, and answer with one strict JSON object only. " + FENCE_RULE
)

PROMPT = """\
Below are recent failed calls of the tool `[[TOOL]]` ([[ENGINE]] queries) and the failure patterns
already known for it. Fold the failures into the library:

- Keep only failures the query text caused: bad syntax, wrong table, column, label or property
  names, functions or procedures that are not installed, values that need an explicit projection
  (temporals rendered as {}). List transient one-offs (timeouts, rate limits, lost connections,
  exhausted resources, missing permissions, cancellations) in "skipped_execution_ids".
- Merge failures with the same root cause into one pattern. When a known pattern covers a failure,
  reuse its id to update it instead of adding a new one.
- The resolution must tell the agent exactly what to do differently; add a corrected query as
  "example_fix" when you can infer one.

Answer with exactly this JSON shape:
{"patterns": [{"id": "a known pattern id, or null for a new one", "title": "...",
  "error_signature": "the stable part of the error message", "root_cause": "...",
  "resolution": "...", "example_query": "a failing query", "example_fix": "corrected query or null",
  "issue_types": ["syntax_error"], "confidence": 0.7, "source_execution_ids": ["..."]}],
 "skipped_execution_ids": []}

Known patterns:
[[KNOWN]]

Failed calls:
[[FAILURES]]
"""


class PatternAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    title: str = ""
    error_signature: str = ""
    root_cause: str = ""
    resolution: str = ""
    example_query: str | None = None
    example_fix: str | None = None
    issue_types: list[str] = Field(default_factory=list)
    confidence: float = 0.7
    source_execution_ids: list[str] = Field(default_factory=list)


class ConsolidationAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    patterns: list[PatternAnswer] = Field(default_factory=list)
    skipped_execution_ids: list[str] = Field(default_factory=list)


def pattern_id(project_id: str, tool_key: str, signature: str) -> str:
    normal = " ".join(signature.lower().split())
    digest = hashlib.sha1(f"{project_id}\n{tool_key}\n{normal}".encode(), usedforsecurity=False).hexdigest()
    return f"query-error-pattern:{project_id}:{tool_key}:{digest[:16]}"


def pattern_text(row: dict[str, Any]) -> str:
    """What a pattern is embedded and searched by."""
    parts = (row.get("title"), row.get("error_signature"), row.get("resolution"), row.get("example_query"))
    return "\n".join(p for p in parts if p)


def _rows_for(
    answer: ConsolidationAnswer, *, project_id: str, tool_key: str, known: set[str], batch: set[str]
) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for item in answer.patterns:
        title = collapse(scrub(item.title), 200)
        signature = collapse(scrub(item.error_signature), 500)
        resolution = collapse(scrub(item.resolution), 1500)
        sources = [i for i in dict.fromkeys(item.source_execution_ids) if i in batch]
        if not (title and signature and resolution and sources):
            continue  # a pattern needs a name, a signature, a fix and at least one failure behind it
        words = "\n".join(t for t in (title, resolution, item.root_cause, item.example_fix) if t)
        steering = instruction_like(words)
        if steering:  # failures' output is the agent's to write: a "fix" must not steer the model
            log.warning("an error pattern that reads like an instruction (%r) was not kept", steering)
            continue
        pid = item.id if item.id in known else pattern_id(project_id, tool_key, signature)
        row = rows.setdefault(pid, {"id": pid, "sources": []})
        row.update(
            title=title,
            error_signature=signature,
            root_cause=collapse(scrub(item.root_cause or ""), 1000) or "",
            resolution=resolution,
            example_query=scrub(item.example_query or "").strip()[:2000] or None,
            example_fix=scrub(item.example_fix or "").strip()[:2000] or None,
            issue_types=sorted({t for t in item.issue_types if t in CONSOLIDATABLE}),
            confidence=min(max(float(item.confidence), 0.0), 1.0),
        )
        row["sources"] = list(dict.fromkeys([*row["sources"], *sources]))
    return list(rows.values())


def consolidate_tool(
    graph: Graph,
    settings: Settings,
    *,
    project_id: str,
    tool: QueryTool,
    waiting: dict[str, Any],
    embedder: Embedder | None,
    client: str | None,
    now: datetime,
) -> str:
    """One tool's turn: the gates, the LLM, the write. Returns a one-line outcome."""
    tool_key, pending = tool.tool_key, int(waiting["pending"])
    threshold = settings.query_error_consolidation_threshold
    if pending <= threshold:
        return f"{tool_key}: {pending} failure(s) wait; more than {threshold} are needed"
    last_at = aware(waiting["last"])
    if last_at is not None:
        interval = timedelta(hours=settings.query_error_consolidation_interval_hours)
        if now - last_at < interval:
            return f"{tool_key}: consolidated at {last_at.isoformat()}; the interval is {interval}"
    batch = waiting["batch"]
    known = graph.read(KNOWN, {"project_id": project_id, "tool_key": tool_key, "limit": KNOWN_PATTERNS})
    prompt = _prompt(tool, known, batch)
    llm = LLM(settings, client)
    try:
        answer = llm.complete_json(SYSTEM, prompt, ConsolidationAnswer)
    except LLMError as exc:
        return f"{tool_key}: not consolidated ({exc}); the failures wait for the next run"
    batch_ids = {q["id"] for q in batch}
    rows = _rows_for(
        answer.value,
        project_id=project_id,
        tool_key=tool_key,
        known={p["id"] for p in known},
        batch=batch_ids,
    )
    vectors = embed_or_none(embedder, [pattern_text(r) for r in rows])
    for row, vector in zip(rows, vectors, strict=True):
        row["embedding"] = vector
    skipped = [i for i in answer.value.skipped_execution_ids if i in batch_ids]
    graph.write(
        WRITE_PATTERNS,
        {
            "project_id": project_id,
            "profile_id": f"tool-error-profile:{project_id}:{tool_key}",
            "tool_key": tool_key,
            "patterns": rows,
            "batch": sorted(batch_ids),
            "skipped": skipped,
            "model": answer.model,
            "now": now,
        },
    )
    return f"{tool_key}: {len(rows)} pattern(s) from {len(batch_ids)} failure(s), {len(skipped)} transient"


def _prompt(tool: QueryTool, known: list[dict[str, Any]], batch: list[dict[str, Any]]) -> str:
    """The consolidation prompt: the tool's known patterns and the failures waiting, fenced."""
    failures = "\n\n".join(
        f"id={q['id']} issue_types={','.join(q['issue_types'] or [])}\nquery:\n{q['query_text']}\n"
        f"response:\n{(q['response_excerpt'] or '')[:1500]}"
        for q in batch
    )
    known_text = "\n\n".join(
        f"id={p['id']}\ntitle: {p['title']}\nerror_signature: {p['error_signature']}\n"
        f"root_cause: {p['root_cause']}\nresolution: {p['resolution']}"
        for p in known
    )
    return (
        PROMPT.replace("[[TOOL]]", tool.tool_key)
        .replace("[[ENGINE]]", tool.language)
        .replace("[[KNOWN]]", fence("known-patterns", known_text or "(none yet)"))
        .replace("[[FAILURES]]", fence("query-failures", failures))
    )


def consolidate(
    context: CaptureContext, *, client: str | None = None, now: datetime | None = None
) -> list[str]:
    """Run the service once for the context's project, tool by tool."""
    if context.project is None:
        return []
    now = now or datetime.now(UTC)
    waiting = context.graph.read(
        PENDING, {"project_id": context.project.id, "types": sorted(CONSOLIDATABLE), "batch": BATCH}
    )
    outcomes = []
    for row in waiting:
        tool = context.query_tools.get(row["tool_key"]) or QueryTool(row["tool_key"])
        outcomes.append(
            consolidate_tool(
                context.graph,
                context.settings,
                project_id=context.project.id,
                tool=tool,
                waiting=row,
                embedder=context.embedder,
                client=client,
                now=now,
            )
        )
    return outcomes


class QueryErrorConsolidationJob(Job):
    """The consolidation service as a worker job, on Stop and SessionEnd, once per project."""

    name = "query-error-consolidation"
    events = frozenset({"Stop", "SessionEnd"})

    def key(self, event: HookEvent, context: CaptureContext) -> str:
        return context.project.id if context.project else ""

    def run(self, event: HookEvent, context: CaptureContext) -> str | None:
        outcomes = consolidate(context, client=context.llm_client(event.harness))
        return "; ".join(outcomes) or "no query failures wait"


# -- recall ------------------------------------------------------------------------------------------

_MATCHING = """
WHERE node.status = 'active' AND node.project_id = $project_id AND node.tool_key = $tool_key
RETURN node.id AS id, node.title AS title, node.error_signature AS error_signature,
       node.root_cause AS root_cause, node.resolution AS resolution, node.example_query AS example_query,
       node.example_fix AS example_fix, coalesce(node.occurrence_count, 0) AS occurrences, score
ORDER BY score DESC
LIMIT $candidates
"""

FULLTEXT_PATTERNS = (
    """
CALL db.index.fulltext.queryNodes('query_error_pattern_fulltext', $query, {limit: $candidates * 4})
YIELD node, score
"""
    + _MATCHING
)

#: Filtered inside the index: another project's or another tool's patterns are never candidates.
VECTOR_PATTERNS = (
    """
MATCH (node:QueryErrorPattern)
  SEARCH node IN (VECTOR INDEX query_error_pattern_vector FOR $vector
    WHERE node.project_id = $project_id AND node.tool_key = $tool_key AND node.status = 'active'
    LIMIT $candidates) SCORE AS score
WITH node, score
"""
    + _MATCHING
)

#: The session may not have reached the graph yet (its event waits in the spool): it is created here.
MARK_SERVED = """
MERGE (s:Session {session_id: $session_id})
  ON CREATE SET s.created_at = $now
WITH s
UNWIND $ids AS id
MATCH (e:QueryErrorPattern {id: id})
MERGE (e)-[r:INJECTED_IN]->(s)
  ON CREATE SET r.first_injected_at = $now, r.inject_count = 0
SET r.last_injected_at = $now, r.inject_count = r.inject_count + 1,
    e.use_count = coalesce(e.use_count, 0) + 1, e.last_used_at = $now
"""


def search_patterns(
    graph: Graph,
    text: str,
    *,
    project_id: str,
    tool_key: str,
    embedder: Embedder | None,
    min_similarity: float,
    limit: int = SERVED,
) -> list[dict[str, Any]]:
    """The patterns of this project's tool that best match an error and its query."""
    params: dict[str, Any] = {"project_id": project_id, "tool_key": tool_key, "candidates": 8}
    rankings: dict[str, list[dict[str, Any]]] = {}
    query = keyword_query(text, limit=32)
    if query is not None:
        rankings["fulltext"] = graph.read(FULLTEXT_PATTERNS, {**params, "query": query})
    if embedder is not None:
        (vector,) = embed_or_none(embedder, [text])
        if vector is not None:
            try:
                rows = graph.read(VECTOR_PATTERNS, {**params, "vector": vector})
            except Exception as exc:  # no index yet, or a dimension change: fulltext still answers
                log.warning("vector search of error patterns failed: %s", exc)
                rows = []
            floor = (1 + min_similarity) / 2  # the index scores (1 + cosine) / 2
            rankings["vector"] = [r for r in rows if float(r["score"]) >= floor]
    fused = sorted(rrf(rankings), key=lambda r: (-round(r["score"], 9), -int(r["occurrences"])))
    return fused[:limit]


def render(tool_key: str, patterns: list[dict[str, Any]]) -> str:
    """The fenced block of known fixes; every text in it is neutralised (it came from an LLM that
    read tool output)."""

    def clip(value: object, limit: int) -> str:
        return neutralise(str(value or "")[:limit])

    lines = [
        FENCE_OPEN,
        f"Known `{clip(tool_key, 120)}` failure patterns from earlier sessions match this error:",
    ]
    for number, p in enumerate(patterns, start=1):
        lines.append(f"{number}. {clip(p['title'], 300)}")
        lines.append(f"   Error: {clip(p['error_signature'], 300)}")
        if p["root_cause"]:
            lines.append(f"   Root cause: {clip(p['root_cause'], 400)}")
        lines.append(f"   Fix: {clip(p['resolution'], 700)}")
        if p["example_query"]:
            lines.append(f"   Example failing query: {clip(p['example_query'], 400)}")
        if p["example_fix"]:
            lines.append(f"   Corrected query: {clip(p['example_fix'], 400)}")
    lines.append("Apply the fix instead of retrying variations of the same query.")
    lines.append(FENCE_CLOSE)
    return "\n".join(lines)


class QueryErrorRecall(ContextProvider):
    """The known fixes for a query tool's consolidatable failure (see the module docstring)."""

    name = "query-error-patterns"
    events = frozenset({"PostToolUse"})

    def matches(self, event: HookEvent) -> bool:
        return event.event == "PostToolUse" and bool(event.tool_key) and not event.is_interrupt

    def provide(self, event: HookEvent, context: CaptureContext) -> str | None:
        tool = context.query_tools.get(event.tool_key or "")
        if tool is None or context.project is None:
            return None
        query, _, issues = inspect(event, tool)
        failures = [i for i in issues if i.consolidatable]
        if not failures:
            return None  # a success, or a transient failure: nothing to teach
        text = f"{failures[0].message}\n{query or ''}"[:SEARCH_TEXT_CHARS]
        patterns = search_patterns(
            context.graph,
            text,
            project_id=context.project.id,
            tool_key=tool.tool_key,
            embedder=context.embedder,
            min_similarity=context.settings.recall_min_similarity,
        )
        if not patterns:
            return None
        context.graph.write(
            MARK_SERVED,
            {"session_id": event.session_id, "ids": [p["id"] for p in patterns], "now": datetime.now(UTC)},
        )
        return render(tool.tool_key, patterns)

    def warm_up(self, graph: Graph, embedder: Embedder | None) -> None:
        params = {"project_id": WARM_UP_IDS["project_id"], "tool_key": "neo4j.read_cypher", "candidates": 8}
        try:
            graph.read(FULLTEXT_PATTERNS, {**params, "query": "warm up"})
            if embedder is not None and embedder.dimensions:
                graph.read(VECTOR_PATTERNS, {**params, "vector": warm_up_vector(embedder.dimensions)})
        except Exception as exc:  # the index may not exist yet on an old schema
            log.debug("error-pattern warm-up skipped: %s", exc)
