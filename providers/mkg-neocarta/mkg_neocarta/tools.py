"""The ``neocarta_*`` tools: the data catalog neocarta keeps in Neo4j, searched through neocarta's
own MCP server.

Which search neocarta offers depends on the catalog's indexes (business-term hybrid, hybrid,
vector or fulltext); ``neocarta_search_tables`` and ``neocarta_search_columns`` use the best one it
offers and say which.
"""

from __future__ import annotations

from typing import Any

from mkg_core.contrib import ToolContext, ToolGroup, ToolSpec
from mkg_core.errors import MkgError
from mkg_core.settings import Settings

from .bridge import NeocartaBridge, bridge
from .locate import INSTALL_HINT, child_env, command, embedding_key_missing

#: neocarta's search tools, best first, per level.
SEARCHES = {
    "table": (
        ("business_term_hybrid", "get_context_by_table_business_term_hybrid_search"),
        ("hybrid", "get_context_by_table_hybrid_search"),
        ("vector", "get_context_by_table_vector_search"),
        ("fulltext", "get_context_by_table_full_text_search"),
    ),
    "column": (
        ("business_term_hybrid", "get_context_by_column_business_term_hybrid_search"),
        ("hybrid", "get_context_by_column_hybrid_search"),
        ("vector", "get_context_by_column_vector_search"),
        ("fulltext", "get_context_by_column_full_text_search"),
    ),
    "schema": (("vector", "get_context_by_schema_and_table_vector_search"),),
}


def missing(settings: Settings) -> list[str]:
    found = [name for name in ("GCP_PROJECT_ID", "BIGQUERY_DATASET_ID") if not settings.get(name)]
    key = embedding_key_missing(settings)
    if key:
        found.append(key)
    if command("neocarta-mcp", settings) is None:
        found.append(f"the neocarta-mcp command: {INSTALL_HINT}")
    return found


def bridge_for(settings: Settings) -> NeocartaBridge:
    argv = command("neocarta-mcp", settings)
    if argv is None:
        raise MkgError(f"the neocarta-mcp command is not installed: {INSTALL_HINT}")
    return bridge(argv, child_env(settings))


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def neocarta_list_schemas(context: ToolContext) -> dict[str, Any]:
    """List every schema (dataset) in the data catalog with its database. Start here to learn the
    schema names the other catalog tools take."""
    return {"schemas": _listed(bridge_for(context.settings).call("list_schemas", {}))}


def neocarta_list_tables_by_schema(context: ToolContext, schema_name: str) -> dict[str, Any]:
    """List the table names of one schema (schema names: neocarta_list_schemas)."""
    name = schema_name.strip()
    if not name:
        raise MkgError("schema_name is required (see neocarta_list_schemas)")
    rows = _listed(bridge_for(context.settings).call("list_tables_by_schema", {"schema_name": name}))
    tables = sorted(
        {table for row in rows if isinstance(row, dict) for table in row.get("table_names") or []}
    )
    return {"schema_name": name, "tables": tables}


def neocarta_get_full_metadata_schema(context: ToolContext) -> dict[str, Any]:
    """Every table with all its columns, types and descriptions. Large on big catalogs: prefer the
    search tools there."""
    return {"tables": _listed(bridge_for(context.settings).call("get_full_metadata_schema", {}))}


def _search(context: ToolContext, level: str, query: str, max_tables: int) -> dict[str, Any]:
    text = (query or "").strip()
    if not text:
        raise MkgError("query is empty: describe the data you are looking for")
    link = bridge_for(context.settings)
    offered = link.tools()
    for strategy, remote in SEARCHES[level]:
        if remote in offered:
            limit = max(1, min(int(max_tables), 25))
            tables = link.call(remote, {"text_content": text, "max_tables": limit})
            return {"search": strategy, "tables": _listed(tables) if tables else []}
    raise MkgError(
        f"the catalog offers no {level} search: it has no search index for it yet. Load it with "
        "embeddings (mkg seed sales-agent-neocarta, or neocarta ... --embeddings)"
    )


def neocarta_search_tables(context: ToolContext, query: str, max_tables: int = 5) -> dict[str, Any]:
    """Find the tables that hold some data, by meaning and by name (words from the question, e.g.
    "monthly fleet card spend per account"). Returns each table with all its columns, their types,
    example values and foreign keys, and the search neocarta used."""
    return _search(context, "table", query, max_tables)


def neocarta_search_columns(context: ToolContext, query: str, max_tables: int = 5) -> dict[str, Any]:
    """Find the columns that hold a field (e.g. "renewal date", "seats contracted"), grouped by
    table; only the matching columns of each table are returned."""
    return _search(context, "column", query, max_tables)


def neocarta_search_schemas(context: ToolContext, query: str, max_tables: int = 5) -> dict[str, Any]:
    """Broad search across schemas and their tables (e.g. "everything about billing")."""
    return _search(context, "schema", query, max_tables)


TOOLS = (
    neocarta_list_schemas,
    neocarta_list_tables_by_schema,
    neocarta_get_full_metadata_schema,
    neocarta_search_tables,
    neocarta_search_columns,
    neocarta_search_schemas,
)


def tool_group() -> ToolGroup:
    return ToolGroup(
        "neocarta",
        tuple(ToolSpec(fn.__name__, fn, fn.__doc__ or "") for fn in TOOLS),
        description="The neocarta data catalog (tables, columns, schemas) in Neo4j",
        missing=missing,
    )
