"""The graph schema: the core's constraints and indexes, and applying everyone's idempotently.

Plugins contribute their own statements through ``mkg_register_schema_statements``; the core's
are contributed the same way by the built-in plugin.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from neo4j.exceptions import ClientError, TransientError

from .contrib import SchemaStatement
from .errors import MkgError
from .graph import Graph

#: Labels whose nodes are keyed by one unique property.
UNIQUE_KEYS: tuple[tuple[str, str], ...] = (
    ("Project", "id"),
    ("User", "id"),
    ("Session", "session_id"),
    ("SessionEvent", "event_id"),
    ("Learning", "id"),
    ("Observation", "id"),
    ("ProjectProcessing", "id"),
    ("SystemPrompt", "name"),
    ("SystemPromptVersion", "id"),
    ("SystemPromptInjection", "injection_id"),
    ("QueryExecution", "id"),
    ("QueryIssue", "id"),
    ("ToolErrorProfile", "id"),
    ("QueryErrorPattern", "id"),
    ("Turn", "id"),
    ("ToolCall", "id"),
    ("ToolResult", "id"),
    ("Tool", "id"),
    ("ToolRationale", "id"),
    ("Resource", "id"),
    ("JobLease", "key"),
    ("Entity", "id"),
    ("EntityMerge", "id"),
)

#: Memory text is English prose: stem it ("deployed" finds "deploys"), as the fulltext recall measured
#: on LoCoMo wants (docs/benchmarks.md).
ENGLISH = "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}"
_ANALYZER_RE = re.compile(r"`fulltext\.analyzer`\s*:\s*'([^']+)'")
_PROPERTIES_RE = re.compile(r"ON EACH \[([^\]]*)\]")
_VECTOR_RE = re.compile(
    r"FOR \((?P<var>\w+):(?P<label>\w+)\) ON (?P=var)\.(?P<prop>\w+)\b"
    r".*`vector\.dimensions`\s*:\s*(?P<dims>\d+)",
    re.S | re.I,
)
SHOW_FULLTEXT = """
SHOW FULLTEXT INDEXES YIELD name, properties, options WHERE name = $name
RETURN properties, options.indexConfig['fulltext.analyzer'] AS analyzer
"""

#: The learning fields recall searches for words, and the ones ``project_learning_fulltext`` also
#: holds so that a search can keep to one project's and one user's live learnings inside the index.
LEARNING_TEXT_FIELDS = ("text", "summary", "task_pattern")
LEARNING_SCOPE_FIELDS = ("scope", "project_id", "user_id", "status")

#: Vector indexes and the properties their SEARCH filters may use.
VECTOR_FILTERS = ("project_id", "scope", "status", "user_id")


def _snake(label: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in label).lstrip("_")


def core_statements(embedding_dimensions: int) -> list[SchemaStatement]:
    """The core's schema for the given embedding dimension."""
    statements = [
        SchemaStatement(
            f"{_snake(label)}_{prop}_unique",
            f"CREATE CONSTRAINT {_snake(label)}_{prop}_unique IF NOT EXISTS "
            f"FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE",
            kind="constraint",
        )
        for label, prop in UNIQUE_KEYS
    ]
    statements += [
        SchemaStatement(
            "learning_user_id",
            "CREATE INDEX learning_user_id IF NOT EXISTS FOR (n:Learning) ON (n.user_id)",
        ),
        SchemaStatement(
            "session_user_id",
            "CREATE INDEX session_user_id IF NOT EXISTS FOR (n:Session) ON (n.user_id)",
        ),
        SchemaStatement(
            "learning_created_at",
            "CREATE INDEX learning_created_at IF NOT EXISTS FOR (n:Learning) ON (n.created_at)",
        ),
        SchemaStatement(
            "learning_project_status",
            "CREATE INDEX learning_project_status IF NOT EXISTS FOR (n:Learning) ON (n.project_id, n.status)",
        ),
        # a project's learnings newest first, a page at a time, whatever their number (the viewer)
        SchemaStatement(
            "learning_project_created_at",
            "CREATE INDEX learning_project_created_at IF NOT EXISTS "
            "FOR (n:Learning) ON (n.project_id, n.created_at)",
        ),
        SchemaStatement(
            "entity_namespace_key",
            "CREATE INDEX entity_namespace_key IF NOT EXISTS FOR (n:Entity) ON (n.namespace, n.key)",
        ),
        SchemaStatement(
            "entity_name_fulltext",
            "CREATE FULLTEXT INDEX entity_name_fulltext IF NOT EXISTS "
            "FOR (n:Entity) ON EACH [n.name, n.alias_keys, n.namespace] " + ENGLISH,
            kind="fulltext",
        ),
        SchemaStatement(
            "project_learning_fulltext",
            "CREATE FULLTEXT INDEX project_learning_fulltext IF NOT EXISTS FOR (n:Learning) ON EACH "
            f"[{', '.join(f'n.{field}' for field in LEARNING_TEXT_FIELDS + LEARNING_SCOPE_FIELDS)}] "
            + ENGLISH,
            kind="fulltext",
        ),
        SchemaStatement(
            "project_observation_fulltext",
            "CREATE FULLTEXT INDEX project_observation_fulltext IF NOT EXISTS "
            "FOR (n:Observation) ON EACH [n.title, n.narrative] " + ENGLISH,
            kind="fulltext",
        ),
        SchemaStatement(
            "tool_rationale_fulltext",
            "CREATE FULLTEXT INDEX tool_rationale_fulltext IF NOT EXISTS "
            "FOR (n:ToolRationale) ON EACH [n.text] " + ENGLISH,
            kind="fulltext",
        ),
        SchemaStatement(
            "query_error_pattern_fulltext",
            "CREATE FULLTEXT INDEX query_error_pattern_fulltext IF NOT EXISTS FOR (n:QueryErrorPattern) "
            "ON EACH [n.title, n.error_signature, n.root_cause, n.resolution, n.example_query]",
            kind="fulltext",
        ),
    ]
    statements += [
        vector_index(name, label, embedding_dimensions)
        for name, label in (
            ("project_learning_vector", "Learning"),
            ("project_observation_vector", "Observation"),
        )
    ]
    statements.append(vector_index("entity_vector", "Entity", embedding_dimensions, filters=("namespace",)))
    statements.append(
        vector_index(
            "query_error_pattern_vector",
            "QueryErrorPattern",
            embedding_dimensions,
            filters=("project_id", "tool_key", "status"),
        )
    )
    return statements


def vector_index(
    name: str, label: str, dimensions: int, filters: Iterable[str] = VECTOR_FILTERS
) -> SchemaStatement:
    """A cosine vector index on ``embedding`` whose SEARCH filters may use ``filters``."""
    with_list = ", ".join(f"n.{prop}" for prop in filters)
    return SchemaStatement(
        name,
        f"CREATE VECTOR INDEX {name} IF NOT EXISTS FOR (n:{label}) ON n.embedding "
        f"WITH [{with_list}] "
        f"OPTIONS {{indexConfig: {{`vector.dimensions`: {int(dimensions)}, "
        "`vector.similarity_function`: 'cosine'}}",
        kind="vector",
    )


class SchemaError(MkgError):
    """A schema statement failed."""


@dataclass(frozen=True)
class SchemaReport:
    applied: tuple[str, ...]
    online: bool


PENDING_INDEXES = "SHOW INDEXES YIELD name, state WHERE state <> 'ONLINE' RETURN name, state"
SHOW_VECTOR_DIMENSIONS = (
    "SHOW VECTOR INDEXES YIELD name, options "
    "RETURN name, options.indexConfig['vector.dimensions'] AS dimensions"
)


def apply_schema(
    graph: Graph,
    statements: Iterable[SchemaStatement],
    *,
    wait_seconds: int = 120,
    progress: Callable[[SchemaStatement], None] | None = None,
) -> SchemaReport:
    """Run every statement (each is idempotent), then wait for the indexes to come online."""
    applied = []
    for statement in statements:
        if progress is not None:
            progress(statement)
        try:
            _run_schema_statement(graph, statement.cypher)
            if _fulltext_changed(graph, statement):
                # IF NOT EXISTS kept an index built with other properties or another analyzer (an
                # earlier release's): rebuild it as declared.
                graph.run_autocommit(f"DROP INDEX {statement.name} IF EXISTS")
                graph.run_autocommit(statement.cypher)
        except (ClientError, TransientError) as exc:
            raise SchemaError(f"schema statement {statement.name!r} failed: {exc.message}") from exc
        applied.append(statement.name)
    rebuild_empty_vector_indexes(graph, statements)
    return SchemaReport(applied=tuple(applied), online=wait_online(graph, wait_seconds))


def _run_schema_statement(graph: Graph, cypher: str, attempts: int = 5) -> None:
    """Run one schema statement. Several workers starting on one database (a team's) apply the same
    statements at once: a statement that lost a deadlock runs again, and one that another worker
    has just carried out (``IF NOT EXISTS`` does not see a rule still being created) is done."""
    for attempt in range(1, attempts + 1):
        try:
            graph.run_autocommit(cypher)
            return
        except ClientError as exc:
            if "AlreadyExists" in (exc.code or ""):
                return
            raise
        except TransientError:
            if attempt == attempts:
                raise
            time.sleep(0.1 * attempt + random.random() * 0.2)


def wait_online(graph: Graph, seconds: float) -> bool:
    """Wait up to ``seconds`` for every index to be online; False when one failed or time ran out.

    It polls instead of calling ``db.awaitIndexes``, so a server's transaction timeout never cuts
    a long build short (a million learnings take minutes).
    """
    deadline = time.monotonic() + seconds
    while True:
        pending = graph.run_autocommit(PENDING_INDEXES)
        if not pending:
            return True
        if any(row["state"] == "FAILED" for row in pending) or time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _fulltext_changed(graph: Graph, statement: SchemaStatement) -> bool:
    """A fulltext index exists under this name on other properties or with another analyzer than
    the statement declares."""
    if statement.kind != "fulltext":
        return False
    rows = graph.read(SHOW_FULLTEXT, {"name": statement.name})
    if not rows:
        return False
    declared = _ANALYZER_RE.search(statement.cypher)
    wanted = declared.group(1) if declared else "standard-no-stop-words"
    if rows[0]["analyzer"] is not None and rows[0]["analyzer"] != wanted:
        return True
    on_each = _PROPERTIES_RE.search(statement.cypher)
    if on_each is None:
        return False
    properties = [part.strip().split(".", 1)[-1] for part in on_each.group(1).split(",")]
    return list(rows[0]["properties"] or []) != properties


def rebuild_vector_indexes(graph: Graph, statements: Iterable[SchemaStatement], dimensions: int) -> list[str]:
    """Drop and create again, as declared, the vector indexes built for another dimension than
    ``dimensions``; return their names. Vectors of the old length stay on their nodes (out of the
    new index) until they are embedded again (``mkg backfill-embeddings``)."""
    found = {row["name"]: row["dimensions"] for row in graph.read(SHOW_VECTOR_DIMENSIONS)}
    rebuilt = []
    for statement in statements:
        current = found.get(statement.name)
        if statement.kind != "vector" or current is None or int(current) == dimensions:
            continue
        graph.run_autocommit(f"DROP INDEX {statement.name} IF EXISTS")
        graph.run_autocommit(statement.cypher)
        rebuilt.append(statement.name)
    if rebuilt:
        wait_online(graph, 300)
    return rebuilt


def rebuild_empty_vector_indexes(graph: Graph, statements: Iterable[SchemaStatement]) -> list[str]:
    """Build again, as declared, the vector indexes made for another dimension that hold no vector
    yet (no node of their label has the property), and return their names: a store that has
    embedded nothing takes the embedder in use as it is, with no ``mkg backfill-embeddings``."""
    found = {row["name"]: row["dimensions"] for row in graph.read(SHOW_VECTOR_DIMENSIONS)}
    rebuilt = []
    for statement in statements:
        declared = _VECTOR_RE.search(statement.cypher) if statement.kind == "vector" else None
        current = found.get(statement.name)
        if declared is None or current is None or int(current) == int(declared["dims"]):
            continue
        label, prop = declared["label"], declared["prop"]
        if graph.read(f"MATCH (n:{label}) WHERE n.{prop} IS NOT NULL RETURN 1 AS found LIMIT 1"):
            continue
        graph.run_autocommit(f"DROP INDEX {statement.name} IF EXISTS")
        graph.run_autocommit(statement.cypher)
        rebuilt.append(statement.name)
    return rebuilt


def vector_dimension_mismatches(graph: Graph, expected: int) -> list[str]:
    """Vector indexes whose dimension differs from the vectors the embedder in use makes, as
    readable lines."""
    rows: list[dict[str, Any]] = graph.read(SHOW_VECTOR_DIMENSIONS)
    return [
        f"{row['name']} has {row['dimensions']} dimensions, memory's vectors have {expected}"
        for row in rows
        if row["dimensions"] is not None and int(row["dimensions"]) != expected
    ]
