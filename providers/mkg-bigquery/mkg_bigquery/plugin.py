"""The mkg-bigquery plugin: ``bigquery_execute_query``, a read-only proxy to a remote BigQuery MCP
endpoint, mounted when ``BIGQUERY_MCP_URL`` is set.

It declares the tool a SQL query tool, so its failures are captured and folded into reusable
error patterns like those of ``neo4j_read_cypher``.
"""

from __future__ import annotations

from mkg_core import hookimpl
from mkg_core.contrib import QueryTool, Setting, ToolGroup
from mkg_core.settings import Settings


@hookimpl
def mkg_register_settings() -> list[Setting]:
    return [
        Setting("BIGQUERY_MCP_URL", "the remote BigQuery MCP endpoint; mounts bigquery_execute_query"),
        Setting("BIGQUERY_MCP_AUTH", "a bearer token for that endpoint", secret=True),
        Setting("BIGQUERY_MCP_HEADERS", "a JSON object of extra headers for it", secret=True),
        Setting("GCP_PROJECT_ID", "the Google Cloud project of the BigQuery dataset"),
        Setting("GCP_SERVICE_ACCOUNT_JSON", "an inline service-account key (JSON)", secret=True),
        Setting(
            "GOOGLE_APPLICATION_CREDENTIALS",
            "a service-account key file (else default credentials)",
        ),
    ]


@hookimpl
def mkg_register_tool_groups(config: Settings) -> list[ToolGroup]:
    from .proxy import tool_group

    return [tool_group()]


@hookimpl
def mkg_register_query_tools(config: Settings) -> list[QueryTool]:
    return [QueryTool("bigquery_execute_query", language="sql", description="BigQuery SQL (read-only)")]
