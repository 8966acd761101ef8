"""The graph tools: the live schema, and read-only Cypher that can read the graph and nothing else.

:func:`read_cypher` lets the database decide what a query does, never the query's text: it first
asks Neo4j to plan the query (``EXPLAIN``, nothing runs) and accepts it only when every operator of
the plan is one a read of this database's graph needs (scans, seeks, expands, filters, joins,
aggregations, the schema listings) and every procedure it calls is on a short allow-list of
introspection and index queries. So ``LOAD CSV`` (files, URLs), administration and ``SHOW``
commands other than indexes and constraints, ``USE`` of another database, ``TERMINATE``,
``CALL dbms.*``, writes and anything the plan does not explain are refused, and the refusal names
the reason. The query then runs in a READ access-mode transaction with a timeout (the database
itself refuses any write), and its result is read as a stream that stops at the row or byte cap
and says why (``truncated_reason``); a failed query is an error, never an empty answer.

The Neo4j MKG starts itself (tests, the demo, the local one) also refuses file URLs for
``LOAD CSV``, confines its import folder and caps each transaction's memory (docs/security.md).

Results are converted to JSON-safe values: nodes, relationships and paths keep their structure;
temporal values become ISO strings; points become coordinates; nothing becomes ``{}``.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import neo4j
from neo4j.exceptions import ClientError, Neo4jError
from neo4j.graph import Node, Path, Relationship
from neo4j.spatial import Point

from .errors import MkgError
from .graph import Graph

MAX_ROWS = 200
MAX_BYTES = 256 * 1024
TIMEOUT_SECONDS = 20.0
#: Records fetched from the server at a time: a capped read stops without pulling the rest.
FETCH_SIZE = 50

#: Plan operators a read of the graph may use (the part of the name before any ``(...)``).
READ_OPERATORS = frozenset(
    [
        "ProduceResults",
        "Projection",
        "Filter",
        "Limit",
        "ExhaustiveLimit",
        "Skip",
        "Sort",
        "PartialSort",
        "Top",
        "PartialTop",
        "Top1WithTies",
        "Distinct",
        "OrderedDistinct",
        "EagerAggregation",
        "OrderedAggregation",
        "Aggregation",
        "Argument",
        "ArgumentTracker",
        "Eager",
        "Optional",
        "Anti",
        "Apply",
        "SemiApply",
        "AntiSemiApply",
        "LetSemiApply",
        "LetAntiSemiApply",
        "SelectOrSemiApply",
        "SelectOrAntiSemiApply",
        "LetSelectOrSemiApply",
        "LetSelectOrAntiSemiApply",
        "ConditionalApply",
        "AntiConditionalApply",
        "RollUpApply",
        "CartesianProduct",
        "Union",
        "OrderedUnion",
        "Unwind",
        "PartitionedUnwind",
        "ValueHashJoin",
        "NodeHashJoin",
        "NodeLeftOuterHashJoin",
        "NodeRightOuterHashJoin",
        "CacheProperties",
        "ProjectEndpoints",
        "NullifyMetadata",
        "EmptyRow",
        "Input",
        "AssertSameNode",
        "AssertSameRelationship",
        "AllNodesScan",
        "NodeByLabelScan",
        "UnionNodeByLabelsScan",
        "IntersectionNodeByLabelsScan",
        "SubtractionNodeByLabelsScan",
        "NodeByIdSeek",
        "NodeByElementIdSeek",
        "NodeIndexSeek",
        "NodeUniqueIndexSeek",
        "NodeIndexSeekByRange",
        "NodeUniqueIndexSeekByRange",
        "NodeIndexScan",
        "NodeIndexContainsScan",
        "NodeIndexEndsWithScan",
        "MultiNodeIndexSeek",
        "NodeCountFromCountStore",
        "RelationshipCountFromCountStore",
        "DirectedRelationshipByIdSeek",
        "UndirectedRelationshipByIdSeek",
        "DirectedRelationshipByElementIdSeek",
        "UndirectedRelationshipByElementIdSeek",
        "DirectedRelationshipIndexSeek",
        "UndirectedRelationshipIndexSeek",
        "DirectedRelationshipIndexSeekByRange",
        "UndirectedRelationshipIndexSeekByRange",
        "DirectedRelationshipIndexScan",
        "UndirectedRelationshipIndexScan",
        "DirectedRelationshipIndexContainsScan",
        "UndirectedRelationshipIndexContainsScan",
        "DirectedRelationshipIndexEndsWithScan",
        "UndirectedRelationshipIndexEndsWithScan",
        "DirectedUniqueRelationshipIndexSeek",
        "UndirectedUniqueRelationshipIndexSeek",
        "DirectedRelationshipTypeScan",
        "UndirectedRelationshipTypeScan",
        "DirectedUnionRelationshipTypesScan",
        "UndirectedUnionRelationshipTypesScan",
        "DirectedAllRelationshipsScan",
        "UndirectedAllRelationshipsScan",
        "Expand",
        "OptionalExpand",
        "VarLengthExpand",
        "PruningVarLengthExpand",
        "BFSPruningVarLengthExpand",
        "ShortestPath",
        "StatefulShortestPath",
        "Trail",
        "Repeat",
        "TriadicSelection",
        "TriadicBuild",
        "TriadicFilter",
        "ProcedureCall",
        "ShowIndexes",
        "ShowConstraints",
    ]
)
#: Procedures a read may call: introspection of the schema and queries of the search indexes.
READ_PROCEDURES = frozenset(
    {
        "db.labels",
        "db.relationshipTypes",
        "db.propertyKeys",
        "db.schema.visualization",
        "db.schema.nodeTypeProperties",
        "db.schema.relTypeProperties",
        "db.index.fulltext.queryNodes",
        "db.index.fulltext.queryRelationships",
        "db.index.vector.queryNodes",
        "db.index.vector.queryRelationships",
        "db.index.fulltext.listAvailableAnalyzers",
    }
)
#: Why an operator is refused, for the ones a prompt-injected agent is likely to try.
_REFUSED = {
    "LoadCSV": "LOAD CSV reads files and URLs on the server",
    "TransactionApply": "CALL { ... } IN TRANSACTIONS runs its own transactions",
    "TransactionForeach": "CALL { ... } IN TRANSACTIONS runs its own transactions",
    "TerminateTransactions": "TERMINATE TRANSACTIONS stops other sessions' work",
    "ShowTransactions": "SHOW TRANSACTIONS shows other sessions' queries and parameters",
    "ShowSettings": "SHOW SETTINGS reads the server's configuration",
    "ShowDatabases": "SHOW DATABASES is administration",
    "ShowProcedures": "only SHOW INDEXES and SHOW CONSTRAINTS are allowed",
    "ShowFunctions": "only SHOW INDEXES and SHOW CONSTRAINTS are allowed",
    "AdministrationCommand": "administration commands are not allowed",
}
#: Function namespaces that read or run outside the graph (plugins such as APOC).
_OUTSIDE_FUNCTIONS = re.compile(
    r"\bapoc\.(?:load|export|import|cypher|periodic|trigger|systemdb|custom|config|log|util\.sleep|"
    r"text\.urlencode|static|spatial\.geocode)\w*",
    re.IGNORECASE,
)
_SIGNATURE = re.compile(r"^\s*([\w.]+)\s*\(")
_PLAN_PREFIX = re.compile(r"^\s*(?:(?:/\*.*?\*/|//[^\n]*(?:\n|$))\s*)*(?:EXPLAIN|PROFILE)\b", re.I | re.S)


class CypherError(MkgError):
    """A read-only query was refused or failed; the message says why."""


def read_cypher(
    graph: Graph,
    query: str,
    params: Mapping[str, Any] | None = None,
    *,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
    timeout: float = TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Run ``query`` read-only; return ``{"columns", "rows", "row_count", "truncated"}`` (and
    ``truncated_reason`` when the answer was cut)."""
    if not isinstance(query, str) or not query.strip():
        raise CypherError("query is empty")
    if params is not None and not isinstance(params, Mapping):
        raise CypherError("params must be a JSON object")
    if _PLAN_PREFIX.match(query):
        raise CypherError("refused: give the query itself, without EXPLAIN or PROFILE (this tool plans it)")
    arguments = dict(params or {})
    try:
        with (
            graph.driver.session(
                database=graph.database, default_access_mode=neo4j.READ_ACCESS, fetch_size=FETCH_SIZE
            ) as session,
            session.begin_transaction(timeout=timeout) as tx,
        ):
            plan = tx.run("EXPLAIN " + query, arguments).consume()
            refusal = plan_refusal(plan.plan, plan.query_type, graph.database)
            if refusal:
                raise CypherError(f"refused: {refusal}; this tool is read-only (the graph and nothing else)")
            result = tx.run(query, arguments)
            columns = list(result.keys())
            rows, reason = _take(result, columns, max_rows, max_bytes)
            tx.rollback()
    except CypherError:
        raise
    except ClientError as exc:
        raise CypherError(_explain(exc, timeout)) from None
    except Neo4jError as exc:
        raise CypherError(f"the query failed: {_clean(exc.message or str(exc))}") from None
    answer: dict[str, Any] = {
        "columns": columns,
        "rows": rows,
        "row_count": len(rows),
        "truncated": reason is not None,
    }
    if reason is not None:
        answer["truncated_reason"] = reason + "; add LIMIT or return fewer properties"
    return answer


def _take(
    result: neo4j.Result, columns: list[str], max_rows: int, max_bytes: int
) -> tuple[list[dict[str, Any]], str | None]:
    """The rows as JSON-safe dicts, up to the row and byte caps; and why it stopped early, if it did."""
    rows: list[dict[str, Any]] = []
    size = 0
    for record in result:
        if len(rows) >= max_rows:
            return rows, f"only the first {max_rows} rows are returned"
        row = {key: to_json_safe(record[key]) for key in columns}
        cost = len(json.dumps(row, default=str))
        if size + cost > max_bytes:
            return rows, (
                f"row {len(rows) + 1} would take the answer past {max_bytes} bytes of JSON "
                f"({cost} bytes in that row)"
            )
        size += cost
        rows.append(row)
    return rows, None


def plan_refusal(plan: Mapping[str, Any] | None, query_type: str | None, database: str) -> str | None:
    """Why a planned query is not a read of ``database``'s graph, or None when it is."""
    if plan is None:
        return "the database gave no plan for it"
    if query_type in ("w", "rw"):
        return "it writes to the graph"
    for operator in _operators(plan):
        kind = str(operator.get("operatorType") or "")
        name, _, where = kind.partition("@")
        base = name.split("(")[0]
        if where and where != database:
            return f"it runs on database {where!r} (USE): only {database!r} may be read"
        if base in _REFUSED:
            return _REFUSED[base]
        if base not in READ_OPERATORS:
            return f"its plan uses the operator {base}, which a read of the graph does not need"
        details = str((operator.get("args") or {}).get("Details") or "")
        if base == "ProcedureCall":
            match = _SIGNATURE.match(details)
            procedure = match.group(1) if match else details[:80]
            if procedure not in READ_PROCEDURES:
                return f"the procedure {procedure} is not one of the allowed read procedures"
        outside = _OUTSIDE_FUNCTIONS.search(details)
        if outside:
            return f"{outside.group(0)} reaches outside the graph"
    if query_type not in ("r", None):
        return "it changes the schema or the server"
    return None


def _operators(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield plan
    for child in plan.get("children") or ():
        yield from _operators(child)


def _clean(message: str) -> str:
    """A server message about ``EXPLAIN <query>`` as it reads for the query itself."""
    message = message.replace('"EXPLAIN ', '"')

    def shift(match: re.Match[str]) -> str:
        column, offset = int(match.group(1)) - 8, int(match.group(2)) - 8
        return f"(line 1, column {max(column, 1)} (offset: {max(offset, 0)}))"

    message = re.sub(r"\(line 1, column (\d+) \(offset: (\d+)\)\)", shift, message)
    return re.sub(r"\n\s*\^", "", message).strip()


def _explain(exc: ClientError, timeout: float) -> str:
    code = exc.code or ""
    message = _clean((exc.message or str(exc)).strip())
    lowered = message.lower()
    if "AccessMode" in code or "read access mode" in lowered or "not allowed" in lowered:
        return f"refused: this tool is read-only and the database rejected a write ({message})"
    if "Syntax" in code:
        return f"Cypher syntax error: {message}"
    if "TransactionTimedOut" in code or "timed out" in lowered:
        return f"the query ran longer than {timeout:.0f} s and was stopped; narrow it or add LIMIT"
    if "MemoryPoolOutOfMemory" in code or ("memory" in lowered and "limit" in lowered):
        return f"the query needed more memory than a read is allowed; return less ({message})"
    return f"the query was refused: {message}"


def to_json_safe(value: Any) -> Any:
    """A value as JSON can carry it, keeping graph structure and temporal/spatial meaning."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Node):
        return {"_id": value.element_id, "_labels": sorted(value.labels), **_props(value)}
    if isinstance(value, Relationship):
        return {
            "_id": value.element_id,
            "_type": value.type,
            "_start": value.start_node.element_id if value.start_node else None,
            "_end": value.end_node.element_id if value.end_node else None,
            **_props(value),
        }
    if isinstance(value, Path):
        return {
            "nodes": [to_json_safe(node) for node in value.nodes],
            "relationships": [to_json_safe(rel) for rel in value.relationships],
        }
    if isinstance(value, Point):
        names = ("x", "y", "z") if value.srid not in (4326, 4979) else ("longitude", "latitude", "height")
        return {"srid": value.srid, **dict(zip(names, (float(c) for c in value), strict=False))}
    if isinstance(value, (bytes, bytearray)):
        return {"_bytes_base64": base64.b64encode(bytes(value)).decode()}
    iso = getattr(value, "iso_format", None)  # neo4j.time Date, Time, DateTime, Duration (a tuple)
    if callable(iso):
        return str(iso())
    if isinstance(value, Mapping):
        return {str(k): to_json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_safe(item) for item in value]
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return str(isoformat())
    return str(value)


def _props(entity: Node | Relationship) -> dict[str, Any]:
    props = {}
    for key, val in entity.items():
        if key == "embedding" and isinstance(val, list):
            props[key] = f"<{len(val)} floats>"  # vectors are noise in a model's context
        else:
            props[key] = to_json_safe(val)
    return props


# -- schema ---------------------------------------------------------------------------------------

NODE_PROPERTIES = "CALL db.schema.nodeTypeProperties() YIELD nodeLabels, propertyName, propertyTypes"
REL_PROPERTIES = "CALL db.schema.relTypeProperties() YIELD relType, propertyName, propertyTypes"
PATTERNS = """
MATCH (a)-[r]->(b)
WITH labels(a) AS from, type(r) AS type, labels(b) AS to
RETURN DISTINCT from, type, to
LIMIT 500
"""
INDEXES = (
    "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, state WHERE type <> 'LOOKUP' "
    "RETURN name, type, labelsOrTypes, properties, state ORDER BY name"
)
CONSTRAINTS = "SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties RETURN * ORDER BY name"


def schema_summary(graph: Graph) -> dict[str, Any]:
    """Labels and relationship types with their properties' types, patterns, indexes, constraints."""
    nodes: dict[str, dict[str, list[str]]] = {}
    for row in graph.read(NODE_PROPERTIES + " RETURN nodeLabels, propertyName, propertyTypes"):
        label = ":".join(row["nodeLabels"] or []) or "(no label)"
        if row["propertyName"]:
            nodes.setdefault(label, {})[row["propertyName"]] = row["propertyTypes"] or []
        else:
            nodes.setdefault(label, {})
    relationships: dict[str, dict[str, list[str]]] = {}
    for row in graph.read(REL_PROPERTIES + " RETURN relType, propertyName, propertyTypes"):
        rel = str(row["relType"]).lstrip(":").strip("`")
        if row["propertyName"]:
            relationships.setdefault(rel, {})[row["propertyName"]] = row["propertyTypes"] or []
        else:
            relationships.setdefault(rel, {})
    patterns = sorted(
        {
            f"(:{':'.join(r['from']) or '?'})-[:{r['type']}]->(:{':'.join(r['to']) or '?'})"
            for r in graph.read(PATTERNS)
        }
    )
    return {
        "nodes": nodes,
        "relationships": relationships,
        "patterns": patterns,
        "indexes": graph.read(INDEXES),
        "constraints": graph.read(CONSTRAINTS),
    }
