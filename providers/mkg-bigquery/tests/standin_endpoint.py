"""A local stand-in for a remote BigQuery MCP endpoint (streamable HTTP), run as a subprocess.

``python standin_endpoint.py PORT LOG`` serves ``/mcp`` with an ``execute_sql_readonly`` tool over a
tiny in-memory table, ``/token`` as an OAuth token endpoint (for Google credential refreshes), and
appends one JSON line per HTTP request (path and headers) to LOG. A bearer token other than the
ones it issued or ``static-token`` is refused with 401.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request
from starlette.responses import JSONResponse

PORT, LOG = int(sys.argv[1]), sys.argv[2]
ACCEPTED = {"Bearer static-token", "Bearer ya29.refreshed-token"}
ACCOUNTS = [
    {"account_id": "accenture", "name": "Accenture", "arr": 1200000},
    {"account_id": "deloitte", "name": "Deloitte", "arr": 950000},
]

server = MCPServer("bigquery-standin")


@server.tool()
def execute_sql_readonly(projectId: str, query: str) -> str:
    """Run read-only SQL."""
    if not re.match(r"\s*(SELECT|WITH)\b", query, re.I):
        raise ToolError("Only read-only queries (SELECT, WITH) are allowed")
    match = re.search(r"FROM\s+`?([\w.-]+)`?", query, re.I)
    table = match.group(1) if match else ""
    if not table.endswith(".accounts"):
        raise ToolError(f"Not found: Table {table or '?'} was not found in location US")
    limit = re.search(r"LIMIT\s+(\d+)", query, re.I)
    rows = ACCOUNTS[: int(limit.group(1))] if limit else ACCOUNTS
    return json.dumps({"projectId": projectId, "rows": rows, "totalRows": str(len(rows))})


@server.custom_route("/token", methods=["POST"])
async def token(request: Request) -> JSONResponse:
    form = await request.form()
    return JSONResponse(
        {
            "access_token": "ya29.refreshed-token",
            "expires_in": 3600,
            "token_type": "Bearer",
            "grant": form.get("grant_type"),
        }
    )


mcp_app = server.streamable_http_app(host="127.0.0.1")


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"path": scope["path"], "headers": headers}) + "\n")
        if scope["path"].startswith("/mcp") and headers.get("authorization") not in ACCEPTED:
            response = JSONResponse({"error": "invalid credentials"}, status_code=401)
            await response(scope, receive, send)
            return
    await mcp_app(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
