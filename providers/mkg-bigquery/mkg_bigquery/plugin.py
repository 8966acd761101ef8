"""The mkg-bigquery plugin: ``bigquery_execute_query``, a read-only proxy to a remote BigQuery MCP
endpoint, mounted when ``BIGQUERY_MCP_URL`` is set.

It declares the tool a SQL query tool, so its failures are captured and folded into reusable
error patterns like those of ``neo4j_read_cypher``.
"""

from __future__ import annotations

from mkg_core import hookimpl
from mkg_core.contrib import QueryTool, ToolGroup
from mkg_core.settings import Settings


@hookimpl
def mkg_register_tool_groups(config: Settings) -> list[ToolGroup]:
    from .proxy import tool_group

    return [tool_group()]


@hookimpl
def mkg_register_query_tools(config: Settings) -> list[QueryTool]:
    return [QueryTool("bigquery_execute_query", language="sql", description="BigQuery SQL (read-only)")]
