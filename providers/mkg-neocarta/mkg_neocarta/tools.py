"""The ``neocarta_*`` tools: the data catalog neocarta keeps in Neo4j, read through neocarta's own
MCP server.

Two kinds, all read-only:

- ``neocarta_<name>`` for each of neocarta's own tools (:data:`~mkg_neocarta.remote.REMOTE_TOOLS`):
  its arguments and its answer, unchanged, and MKG's own description of it from the table. The
  arguments are checked here first, so a bad one gets a clear message rather than whatever neocarta
  or Neo4j make of it.
- ``neocarta_search_tables``, ``neocarta_search_columns`` and ``neocarta_search_schemas``: stable
  names that call the best search neocarta offers for the catalog at that level and say which one
  (``{"search": ..., "tables": [...]}``). neocarta registers only one search per level, chosen from
  the catalog's indexes, so an agent that does not know the catalog starts there. There is one
  schema search today; ``neocarta_search_schemas`` stays the name to call if a release adds a
  better one.

neocarta's catalog tools own their names (``neocarta_list_schemas``, ``neocarta_list_tables_by_schema``,
``neocarta_get_full_metadata_schema``): a second version of them here could only re-shape
neocarta's answer, which is no reason to show the agent two shapes of one answer.

The forwarding functions are built from the table, one per tool, with the tool's arguments as
their signature: MKG's server turns a signature into the tool's input schema, and the tests check
that this schema is neocarta's own. Why a fixed table: :mod:`mkg_neocarta.remote`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from mkg_core.contrib import ToolContext, ToolGroup, ToolSpec
from mkg_core.errors import MkgError
from mkg_core.settings import Settings

from .bridge import NeocartaBridge, bridge
from .locate import INSTALL_HINT, TESTED_SPEC, child_env, command, embedding_key_missing
from .remote import REMOTE_TOOLS, RemoteTool

PREFIX = "neocarta_"
#: The largest ``max_tables`` and ``search_top_k`` a call may ask for.
MAX_COUNT = 100
#: The stable search of each level.
BEST_SEARCH = {
    "table": "neocarta_search_tables",
    "column": "neocarta_search_columns",
    "schema": "neocarta_search_schemas",
}
#: What to tell the agent when a text argument is empty.
_EMPTY_HINTS = {
    "text_content": "describe the data you are looking for",
    "schema_name": "neocarta_list_schemas lists the schema names",
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
    if value is None or value == "":
        return []
    return value if isinstance(value, list) else [value]


# -- neocarta's own tools ---------------------------------------------------------------------------


def _searches(level: str) -> list[RemoteTool]:
    """neocarta's searches of one level, best first."""
    return [tool for tool in REMOTE_TOOLS if tool.level == level]


def _offered_search(link: NeocartaBridge, level: str) -> RemoteTool | None:
    offered = link.tools()
    return next((tool for tool in _searches(level) if tool.name in offered), None)


def _no_search(level: str) -> MkgError:
    return MkgError(
        f"the catalog offers no {level} search: it has no search index for it yet. Load it with "
        "embeddings (mkg neocarta load); neocarta chooses its searches when its server starts, so "
        "restart the MCP server afterwards"
    )


def _not_offered(remote: RemoteTool, link: NeocartaBridge) -> MkgError:
    if remote.level is None:
        return MkgError(
            f"neocarta's server does not offer {remote.name}: it is not the release MKG was tested "
            f"with ({TESTED_SPEC}); check NEOCARTA_BIN or the neocarta on PATH"
        )
    other = _offered_search(link, remote.level)
    if other is None:
        return _no_search(remote.level)
    return MkgError(
        f"neocarta does not offer {remote.name} for this catalog: it offers one {remote.level} "
        f"search, the best the catalog's indexes allow, here {other.name}. Call {PREFIX}{other.name}, "
        f"or {BEST_SEARCH[remote.level]}, which always uses it"
    )


def _checked(remote: RemoteTool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments to send, or an MkgError naming the bad one."""
    checked: dict[str, Any] = {}
    for param in remote.params:
        value = arguments.get(param.name, param.default)
        if param.type is str:
            if not isinstance(value, str) or not value.strip():
                hint = _EMPTY_HINTS.get(param.name, "it is required")
                raise MkgError(f"{param.name} is empty: {hint}")
            value = value.strip()
        elif isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
            raise MkgError(f"{param.name} must be a whole number from 1 to {MAX_COUNT}, not {value!r}")
        checked[param.name] = value
    return checked


def _description(remote: RemoteTool) -> str:
    """The table's description of the tool, then how MKG routes and bounds its calls."""
    text = remote.description
    if remote.level in ("table", "column"):
        text += (
            f"\n\nneocarta offers one {remote.level} search per catalog, the best its indexes allow "
            "(business-term hybrid, hybrid, vector, then full-text); a call to another one says "
            f"which it offers, and {BEST_SEARCH[remote.level]} always uses that one."
        )
    elif remote.level == "schema":
        text += (
            "\n\nneocarta offers it when the catalog has schema embeddings; "
            f"{BEST_SEARCH['schema']} calls it too."
        )
    if any(param.type is int for param in remote.params):
        text += f" max_tables and search_top_k: 1 to {MAX_COUNT}."
    return text


def forwarder(remote: RemoteTool) -> Callable[..., list[Any]]:
    """The MKG tool function for one of neocarta's tools: checks the arguments, calls the tool
    through the shared bridge, returns its answer."""

    def forward(context: ToolContext, **arguments: Any) -> list[Any]:
        checked = _checked(remote, arguments)
        link = bridge_for(context.settings)
        if remote.name not in link.tools():
            raise _not_offered(remote, link)
        return _listed(link.call(remote.name, checked))

    empty = inspect.Parameter.empty
    parameters = [
        inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ToolContext)
    ]
    parameters += [
        inspect.Parameter(
            param.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=param.type,
            default=empty if param.default is None else param.default,
        )
        for param in remote.params
    ]
    answer = list[dict[str, Any]]
    forward.__signature__ = inspect.Signature(parameters, return_annotation=answer)  # type: ignore[attr-defined]
    forward.__annotations__ = {param.name: param.annotation for param in parameters} | {"return": answer}
    forward.__name__ = forward.__qualname__ = PREFIX + remote.name
    forward.__doc__ = _description(remote)
    return forward


# -- the stable searches ----------------------------------------------------------------------------


def _search(context: ToolContext, level: str, query: str, max_tables: int) -> dict[str, Any]:
    text = (query or "").strip()
    if not text:
        raise MkgError("query is empty: describe the data you are looking for")
    link = bridge_for(context.settings)
    remote = _offered_search(link, level)
    if remote is None:
        raise _no_search(level)
    limit = max(1, min(int(max_tables), 25))
    tables = link.call(remote.name, {"text_content": text, "max_tables": limit})
    return {"search": remote.strategy, "tables": _listed(tables)}


def neocarta_search_tables(context: ToolContext, query: str, max_tables: int = 5) -> dict[str, Any]:
    """Find the tables that hold some data, by meaning and by name (words from the question, e.g.
    "monthly fleet card spend per account"), with the best table search neocarta offers for this
    catalog. Returns each table with all its columns, their types, example values and foreign keys,
    and the search used."""
    return _search(context, "table", query, max_tables)


def neocarta_search_columns(context: ToolContext, query: str, max_tables: int = 5) -> dict[str, Any]:
    """Find the columns that hold a field (e.g. "renewal date", "seats contracted"), grouped by
    table, with the best column search neocarta offers; only the matching columns of each table are
    returned."""
    return _search(context, "column", query, max_tables)


def neocarta_search_schemas(context: ToolContext, query: str, max_tables: int = 5) -> dict[str, Any]:
    """Broad search across schemas and their tables (e.g. "everything about billing")."""
    return _search(context, "schema", query, max_tables)


STABLE_SEARCHES = (neocarta_search_tables, neocarta_search_columns, neocarta_search_schemas)


def tool_specs() -> tuple[ToolSpec, ...]:
    """neocarta's catalog tools, the stable searches, then neocarta's own searches."""
    catalog: list[Callable[..., Any]] = [forwarder(t) for t in REMOTE_TOOLS if t.level is None]
    searches: list[Callable[..., Any]] = [forwarder(t) for t in REMOTE_TOOLS if t.level is not None]
    return tuple(
        ToolSpec(fn.__name__, fn, fn.__doc__ or "") for fn in (*catalog, *STABLE_SEARCHES, *searches)
    )


def tool_group() -> ToolGroup:
    return ToolGroup(
        "neocarta",
        tool_specs(),
        description="The neocarta data catalog (tables, columns, schemas) in Neo4j",
        missing=missing,
    )
