"""neocarta's own MCP tools, as the tested release (:data:`~mkg_neocarta.locate.TESTED_SPEC`)
defines them: each tool's name and arguments (type, default) as neocarta declares them, and a short
description written for MKG: what the tool answers, when to use it, what its arguments mean. The
descriptions name the other tools as MKG mounts them (``neocarta_list_schemas``, ...).

MKG mounts one ``neocarta_<name>`` tool per entry (see :mod:`mkg_neocarta.tools`). The list is a
fixed table rather than read from neocarta's server at run time, for two reasons:

- MKG's server lists its tools when it starts. Reading neocarta's list would mean starting
  neocarta's server (seconds: it loads its data libraries, connects to Neo4j and probes the
  catalog's indexes) on every MKG start, even in sessions that never touch the catalog; the bridge
  starts it on the first catalog call instead.
- neocarta's server lists only the searches the catalog's indexes allow when it starts (one per
  level: business-term hybrid, else hybrid, else vector, else full-text), so its live list depends
  on the catalog. The table holds every tool it can offer; a call to a search it did not register
  is refused with the name of the one it did.

``tests/test_neocarta.py`` compares the table with the tested release: every tool its code can
register and every tool its running server lists for the test catalog, by name, input schema
(argument names, types, defaults, required) and annotations, and checks that each runs its queries
with READ routing. The descriptions are MKG's own and are not compared. A version bump that adds,
removes or changes a tool fails there; update this table (and a description whose tool now behaves
differently), then ``TESTED_SPEC``.

All of them are read-only: neocarta 0.8 runs every query of its MCP server with READ routing, and
none writes (``MATCH``, index searches, ``SHOW INDEXES``). It has no writing tool to leave out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REMOTE_TOOLS", "Param", "RemoteTool"]


@dataclass(frozen=True)
class Param:
    """One argument of a neocarta tool: ``str`` or ``int``, required when ``default`` is None."""

    name: str
    type: type[str] | type[int]
    default: str | int | None = None


@dataclass(frozen=True)
class RemoteTool:
    """One of neocarta's tools, with MKG's description of it.

    ``level`` and ``strategy`` are set on the searches, which neocarta registers only when the
    catalog's indexes make them the best one of their level (``table``, ``column``, ``schema``).
    """

    name: str
    description: str
    params: tuple[Param, ...] = ()
    level: str | None = None
    strategy: str | None = None


def _search(*, max_tables: int, search_top_k: int) -> tuple[Param, ...]:
    return (
        Param("text_content", str),
        Param("max_tables", int, max_tables),
        Param("search_top_k", int, search_top_k),
    )


#: What the table searches answer: whole tables.
_WHOLE_TABLES = (
    "Answers each table found with all its columns (type, description, example values, key, "
    "references), its schema and database, and its score, best first."
)
#: What the column searches answer: tables with their matching columns only.
_MATCHED_COLUMNS = (
    "Answers the tables that hold matching columns, each with those columns only (type, "
    "description, example values, key, references) and its schema and database, ranked by the "
    "average score of their matching columns."
)


def _arguments(top_k: str) -> str:
    return (
        "text_content is a plain-language description of the data sought, max_tables the most "
        f"tables returned, search_top_k {top_k}."
    )


#: Catalog tools first (always offered), then the searches of each level, best first.
REMOTE_TOOLS: tuple[RemoteTool, ...] = (
    RemoteTool(
        "list_schemas",
        description=(
            "Lists every schema of the catalog with the database it belongs to "
            "(database_name, schema_name). Start here on a catalog you do not know yet, or to get "
            "a schema name for neocarta_list_tables_by_schema."
        ),
    ),
    RemoteTool(
        "list_tables_by_schema",
        params=(Param("schema_name", str),),
        description=(
            "Lists the names of the tables in one schema; an unknown schema gives an empty list. "
            "schema_name is the exact name as neocarta_list_schemas gives it."
        ),
    ),
    RemoteTool(
        "get_full_metadata_schema",
        description=(
            "Dumps the whole catalog: every table, by name, with all its columns (type, "
            "description, example values, key, references), its schema and database. Nothing is "
            "filtered, so the answer grows with the catalog: use it on small catalogs only, and "
            "neocarta_search_tables or neocarta_search_columns to look something up."
        ),
    ),
    RemoteTool(
        "get_context_by_table_business_term_hybrid_search",
        params=_search(max_tables=5, search_top_k=10),
        level="table",
        strategy="business_term_hybrid",
        description=(
            "Finds tables with a business-glossary-term hybrid search: the query's embedding "
            "against table descriptions, plus its words against table names and descriptions, "
            "counted only for tables tagged with a glossary term the words also match. Suited to "
            "business vocabulary (metrics, KPIs) carried by glossary tags rather than table names. "
            + _WHOLE_TABLES
            + " "
            + _arguments(
                "how many hits each index lookup (table vectors, table words, glossary terms) "
                "contributes before the results are merged"
            )
        ),
    ),
    RemoteTool(
        "get_context_by_table_hybrid_search",
        params=_search(max_tables=5, search_top_k=10),
        level="table",
        strategy="hybrid",
        description=(
            "Finds tables with a hybrid vector + full-text search: the query's embedding against "
            "table descriptions and its words against table names and descriptions, each table "
            "keeping the better of its two scores. Suited to queries that mix a concept with "
            "words likely to appear in the catalog. "
            + _WHOLE_TABLES
            + " "
            + _arguments("how many hits each of the two index lookups contributes before merging")
        ),
    ),
    RemoteTool(
        "get_context_by_table_vector_search",
        params=_search(max_tables=10, search_top_k=10),
        level="table",
        strategy="vector",
        description=(
            "Finds tables by meaning only, with a vector search of the query's embedding against "
            "table descriptions (weak matches are dropped). Suited to a concept or entity rather "
            'than a name, e.g. "customer renewals". '
            + _WHOLE_TABLES
            + " "
            + _arguments("how many hits the vector index returns before ranking")
        ),
    ),
    RemoteTool(
        "get_context_by_table_full_text_search",
        params=_search(max_tables=10, search_top_k=10),
        level="table",
        strategy="fulltext",
        description=(
            "Finds tables by their words only, with a full-text search over table names and "
            "descriptions; no embedding is made. Suited to names or keywords expected as they "
            'stand, e.g. "renewals" (query operators and punctuation such as quotes, dashes or '
            "wildcards are turned into spaces). "
            + _WHOLE_TABLES
            + " "
            + _arguments("how many hits the full-text index returns before ranking")
        ),
    ),
    RemoteTool(
        "get_context_by_column_business_term_hybrid_search",
        params=_search(max_tables=5, search_top_k=10),
        level="column",
        strategy="business_term_hybrid",
        description=(
            "Finds columns with a business-glossary-term hybrid search: the query's embedding "
            "against column descriptions, plus its words against column names and descriptions, "
            "counted only for columns tagged with a glossary term the words also match. Suited to "
            "business vocabulary tagged onto fields, e.g. a metric name on a cost column. "
            + _MATCHED_COLUMNS
            + " "
            + _arguments(
                "how many column hits each index lookup (column vectors, column words, glossary "
                "terms) contributes before they are grouped by table"
            )
        ),
    ),
    RemoteTool(
        "get_context_by_column_hybrid_search",
        params=_search(max_tables=5, search_top_k=10),
        level="column",
        strategy="hybrid",
        description=(
            "Finds columns with a hybrid vector + full-text search: the query's embedding against "
            "column descriptions and its words against column names and descriptions, each column "
            "keeping the better of its two scores. Suited to a field described in words mixed with "
            "likely column names. "
            + _MATCHED_COLUMNS
            + " "
            + _arguments(
                "how many column hits each of the two index lookups contributes before they are "
                "grouped by table"
            )
        ),
    ),
    RemoteTool(
        "get_context_by_column_vector_search",
        params=_search(max_tables=5, search_top_k=10),
        level="column",
        strategy="vector",
        description=(
            "Finds columns by meaning only, with a vector search of the query's embedding against "
            "column descriptions (weak matches are dropped). Suited to a field described in words, "
            'e.g. "contract renewal date". '
            + _MATCHED_COLUMNS
            + " "
            + _arguments("how many column hits the vector index returns before they are grouped by table")
        ),
    ),
    RemoteTool(
        "get_context_by_column_full_text_search",
        params=_search(max_tables=5, search_top_k=10),
        level="column",
        strategy="fulltext",
        description=(
            "Finds columns by their words only, with a full-text search over column names and "
            "descriptions; no embedding is made. Suited to column names or keywords expected as "
            'they stand, e.g. "account_id" (query operators and punctuation are turned into '
            "spaces). "
            + _MATCHED_COLUMNS
            + " "
            + _arguments("how many column hits the full-text index returns before they are grouped by table")
        ),
    ),
    RemoteTool(
        "get_context_by_schema_and_table_vector_search",
        params=_search(max_tables=5, search_top_k=5),
        level="schema",
        strategy="vector",
        description=(
            "Finds tables across schemas by meaning only, with a vector search: the query's "
            "embedding first picks the closest schemas, then within each the tables nearly as "
            "close as their schema. Suited to broad questions that may span schemas, e.g. "
            '"everything about billing"; answers whole tables, ranked by schema then table '
            "score. " + _arguments("how many schemas the schema index returns before their tables are scored")
        ),
    ),
)
