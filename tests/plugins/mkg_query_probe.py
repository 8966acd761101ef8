"""A local plugin that declares a second query tool, ``warehouse_sql``, for the query-failure tests
(loaded into real worker processes through ``MKG_PLUGINS``)."""

from __future__ import annotations

from mkg_core import hookimpl
from mkg_core.contrib import QueryTool


@hookimpl
def mkg_register_query_tools():
    return [QueryTool("warehouse_sql", language="sql", description="a SQL warehouse, for tests")]
