"""The graph tools: the live schema, and read-only Cypher whose read-only-ness the database enforces.

:func:`read_cypher` runs the query in a READ access-mode transaction: Neo4j itself refuses every
write (``CREATE``, ``MERGE``, ``SET``, ``DELETE``, schema and admin commands, write procedures), so
no spelling, comment or unicode trick can get one through. A short lexical check in front only
turns the obvious cases (and ``LOAD CSV``, which could read server files) into clearer errors
before the database sees them. Results are capped in rows and size and converted to JSON-safe
values: nodes, relationships and paths keep their structure; temporal values become ISO strings;
points become coordinates; nothing becomes ``{}``.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
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

#: Refused before the database sees them, with a clearer message than the database would give.
_LEXICAL = (
    (re.compile(r"\bLOAD\s+CSV\b", re.I), "LOAD CSV is not allowed (it reads files on the server)"),
    (re.compile(r"\bIN\s+TRANSACTIONS\b", re.I), "CALL { ... } IN TRANSACTIONS writes in batches"),
)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


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
    """Run ``query`` read-only; return ``{"rows", "row_count", "truncated", "columns"}``."""
    if not isinstance(query, str) or not query.strip():
        raise CypherError("query is empty")
    if params is not None and not isinstance(params, Mapping):
        raise CypherError("params must be a JSON object")
    bare = _COMMENTS.sub(" ", query)
    for pattern, reason in _LEXICAL:
        if pattern.search(bare):
            raise CypherError(f"refused: {reason}; this tool is read-only")

    rows: list[dict[str, Any]] = []
    truncated = False
    try:
        # A READ access-mode transaction, tried once: a refused write is not retried as if transient.
        with graph.session(neo4j.READ_ACCESS) as session, session.begin_transaction(timeout=timeout) as tx:
            result = tx.run(query, dict(params or {}))
            for record in result:
                if len(rows) >= max_rows:
                    truncated = True
                    break
                rows.append({key: to_json_safe(record[key]) for key in record.keys()})  # noqa: SIM118
            columns = list(result.keys())
            tx.rollback()
    except ClientError as exc:
        raise CypherError(_explain(exc)) from None
    except Neo4jError as exc:
        raise CypherError(f"the query failed: {exc.message or exc}") from None
    size = 0
    kept: list[dict[str, Any]] = []
    for row in rows:
        size += len(json.dumps(row, default=str))
        if size > max_bytes:
            truncated = True
            break
        kept.append(row)
    return {"columns": columns, "rows": kept, "row_count": len(kept), "truncated": truncated}


def _explain(exc: ClientError) -> str:
    code = exc.code or ""
    message = (exc.message or str(exc)).strip()
    if "AccessMode" in code or "read access mode" in message.lower() or "not allowed" in message.lower():
        return f"refused: this tool is read-only and the database rejected a write ({message})"
    if "Syntax" in code:
        return f"Cypher syntax error: {message}"
    if "TransactionTimedOut" in code or "timed out" in message.lower():
        return f"the query ran longer than {TIMEOUT_SECONDS:.0f} s and was stopped"
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
