"""mkg-bigquery: the proxy tool through the real MCP server, against a local MCP endpoint standing in
for the remote BigQuery one; its failures captured through the real hook and worker."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mkg_bigquery.proxy import GoogleAuth, connection

from mkg_core.errors import ConfigError
from mkg_core.graph import Graph
from mkg_core.host import PluginHost
from mkg_core.plugins import make_plugin_manager
from mkg_core.server import plan_groups
from mkg_core.settings import load_settings
from mkg_core.testing import CaptureRig, free_port, mcp_call, mcp_server, mcp_session

ROOT = Path(__file__).resolve().parents[3]
CODEX = ROOT / "harnesses" / "mkg-codex" / "tests" / "payloads"
PROJECT = "bigquery-test"

pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)


@dataclass
class Endpoint:
    url: str
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Endpoint]:
    port, log = free_port(), tmp_path / "requests.jsonl"
    script = Path(__file__).with_name("standin_endpoint.py")
    proc = subprocess.Popen([sys.executable, str(script), str(port), str(log)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
            assert time.monotonic() < deadline, "the stand-in endpoint did not start"
            time.sleep(0.1)
    try:
        yield Endpoint(f"http://127.0.0.1:{port}", log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stderr:
            proc.stderr.close()


def _mounted(environ: dict[str, str]) -> tuple[set[str], dict[str, str]]:
    environ = {"MKG_LOAD_PLUGINS": "bigquery", **environ}
    settings = load_settings(environ=environ, project_root=os.getcwd())
    mounted, skipped = plan_groups(PluginHost(make_plugin_manager(environ=environ)), settings)
    return {t.name for m in mounted for t in m.group.tools}, {s.group.name: s.reason for s in skipped}


def test_mounted_only_with_an_endpoint_and_declared_a_sql_query_tool() -> None:
    names, skipped = _mounted({})
    assert "bigquery_execute_query" not in names and skipped["bigquery"].startswith(
        "missing: BIGQUERY_MCP_URL"
    )
    names, _ = _mounted({"BIGQUERY_MCP_URL": "https://bigquery.googleapis.com/mcp"})
    assert "bigquery_execute_query" in names
    names, skipped = _mounted({"BIGQUERY_MCP_URL": "http://127.0.0.1:9/mcp", "BIGQUERY_MCP_HEADERS": "{oops"})
    assert (
        "bigquery_execute_query" not in names
        and "BIGQUERY_MCP_HEADERS is not valid JSON" in skipped["bigquery"]
    )

    environ = {"MKG_LOAD_PLUGINS": "bigquery"}
    tools = PluginHost(make_plugin_manager(environ=environ)).query_tools(load_settings(environ=environ))
    assert tools["bigquery_execute_query"].language == "sql"


def test_queries_go_through_the_endpoint_with_auth_and_headers(endpoint: Endpoint) -> None:
    env = {
        **os.environ,
        "MKG_PROJECT_ID": PROJECT,
        "BIGQUERY_MCP_URL": f"{endpoint.url}/mcp",
        "BIGQUERY_MCP_AUTH": "static-token",
        "BIGQUERY_MCP_HEADERS": '{"X-Goog-User-Project": "billing-1"}',
        "GCP_PROJECT_ID": "roadflex-analytics",
    }

    async def work(client: Any) -> tuple[Any, Any, Any]:
        ok = await mcp_call(
            client, "bigquery_execute_query", query="SELECT * FROM `p.sales.accounts` LIMIT 1"
        )
        missing = await mcp_call(client, "bigquery_execute_query", query="SELECT * FROM sales.acounts")
        empty = await mcp_call(client, "bigquery_execute_query", query="  ")
        return ok, missing, empty

    ok, missing, empty = mcp_session(mcp_server(env), work)
    assert ok[0] is False
    answer = json.loads(ok[1]) if isinstance(ok[1], str) else ok[1]
    assert answer == {
        "projectId": "roadflex-analytics",
        "rows": [{"account_id": "accenture", "name": "Accenture", "arr": 1200000}],
        "totalRows": "1",
    }
    assert missing[0] and "Not found: Table sales.acounts" in missing[1]
    assert empty[0] and "query is empty" in empty[1]
    posted = [r["headers"] for r in endpoint.requests() if r["path"] == "/mcp"]
    assert posted and all(h["authorization"] == "Bearer static-token" for h in posted)
    assert all(h["x-goog-user-project"] == "billing-1" for h in posted)


def test_a_refused_credential_is_a_clear_tool_error(endpoint: Endpoint) -> None:
    env = {**os.environ, "BIGQUERY_MCP_URL": f"{endpoint.url}/mcp", "BIGQUERY_MCP_AUTH": "Bearer wrong"}
    error, message = mcp_session(
        mcp_server(env), lambda c: mcp_call(c, "bigquery_execute_query", query="SELECT 1")
    )
    assert (
        error and f"the BigQuery MCP endpoint {endpoint.url}/mcp refused the credential (HTTP 401)" in message
    )
    assert "wrong" not in message


def test_google_endpoints_use_a_refreshed_google_credential(endpoint: Endpoint, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    key = tmp_path / "service-account.json"
    key.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "roadflex-analytics",
                "private_key_id": "key-1",
                "private_key": pem,
                "client_email": "mkg@roadflex-analytics.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": f"{endpoint.url}/token",
            }
        )
    )
    environ = {
        "BIGQUERY_MCP_URL": "https://bigquery.googleapis.com/mcp",
        "GOOGLE_APPLICATION_CREDENTIALS": str(key),
    }
    url, headers, auth = connection(load_settings(environ=environ))
    assert url == "https://bigquery.googleapis.com/mcp" and isinstance(auth, GoogleAuth) and headers == {}

    # The same credential, used against the stand-in: the token endpoint is asked once (a signed
    # JWT grant), and the endpoint accepts the bearer token it issued.
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with httpx2.Client(auth=auth, headers={"Accept": "application/json, text/event-stream"}) as http:
        first = http.post(f"{endpoint.url}/mcp", json=body)
        second = http.post(f"{endpoint.url}/mcp", json=body)
    assert first.status_code != 401 and second.status_code != 401
    paths = [r["path"] for r in endpoint.requests()]
    assert paths.count("/token") == 1
    assert [r["headers"]["authorization"] for r in endpoint.requests() if r["path"] == "/mcp"] == [
        "Bearer ya29.refreshed-token"
    ] * 2

    explicit = connection(load_settings(environ={**environ, "BIGQUERY_MCP_AUTH": "static-token"}))
    assert explicit[1] == {"Authorization": "Bearer static-token"} and explicit[2] is None
    with pytest.raises(ConfigError, match="cannot be read"):
        connection(
            load_settings(environ={**environ, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json")})
        )


def test_its_failures_are_captured_as_sql_query_failures(capture: CaptureRig, graph: Graph) -> None:
    capture.env.update({"MKG_PROJECT_ID": PROJECT, "MKG_LOAD_PLUGINS": "bigquery"})
    payload = json.loads((CODEX / "PostToolUse.json").read_text())
    text = "Not found: Table roadflex.sales.acounts was not found in location US"
    payload |= {
        "session_id": "bq1",
        "tool_name": "mcp__mkg__bigquery_execute_query",
        "tool_input": {"query": "SELECT * FROM roadflex.sales.acounts"},
        "tool_response": {"content": [{"type": "text", "text": text}], "isError": True},
        "tool_use_id": "call_bq1",
    }
    result = capture.hook("codex", "PostToolUse", payload)
    assert result.returncode == 0, result.stderr
    capture.drain()
    rows = graph.read(
        "MATCH (q:QueryExecution)-[:HAS_ISSUE]->(i:QueryIssue) "
        "RETURN q.engine AS engine, q.tool_key AS tool, i.type AS type"
    )
    assert rows == [{"engine": "sql", "tool": "bigquery_execute_query", "type": "schema_mismatch"}]
