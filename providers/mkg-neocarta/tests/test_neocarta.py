"""mkg-neocarta: when the tools mount, and the tools themselves through the real MKG MCP server,
backed by neocarta's own MCP server (installed from PyPI into its own environment) over a small
catalog loaded with neocarta's CSV loader into the real dev Neo4j, embeddings from the local fake."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mkg_neocarta.catalog import load_csv
from mkg_neocarta.locate import TESTED_FOLDER, TESTED_SPEC, child_env, command

from mkg_core.errors import ConfigError
from mkg_core.graph import Graph
from mkg_core.host import PluginHost
from mkg_core.plugins import make_plugin_manager
from mkg_core.server import plan_groups
from mkg_core.settings import load_settings
from mkg_core.testing import BIN_DIR, Neo4jServer, mcp_call, mcp_server, mcp_session, pip_tool
from mkg_core.testing.fakellm import FakeLLM

CATALOG = Path(__file__).with_name("catalog")
TOOLS = {
    "neocarta_list_schemas",
    "neocarta_list_tables_by_schema",
    "neocarta_get_full_metadata_schema",
    "neocarta_search_tables",
    "neocarta_search_columns",
    "neocarta_search_schemas",
}

pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture(scope="session")
def neocarta_bin() -> Path:
    return pip_tool(TESTED_SPEC, TESTED_FOLDER)


def _fake_bin(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("neocarta", "neocarta-mcp"):
        script = folder / name
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def _skipped(environ: dict[str, str]) -> str | None:
    environ = {"MKG_LOAD_PLUGINS": "neocarta", "PATH": os.environ.get("PATH", ""), **environ}
    settings = load_settings(environ=environ, project_root=os.getcwd())
    mounted, skipped = plan_groups(PluginHost(make_plugin_manager(environ=environ)), settings)
    if any(m.group.name == "neocarta" for m in mounted):
        return None
    return next(s.reason for s in skipped if s.group.name == "neocarta")


def test_mounted_only_with_project_dataset_embedding_key_and_command(tmp_path: Path) -> None:
    ready = {
        "GCP_PROJECT_ID": "roadflex-analytics",
        "BIGQUERY_DATASET_ID": "sales",
        "OPENAI_API_KEY": "sk-test",
        "NEOCARTA_BIN": str(_fake_bin(tmp_path)),
    }
    assert _skipped(ready) is None
    assert _skipped({**ready, "GCP_PROJECT_ID": ""}) == "missing: GCP_PROJECT_ID"
    both = _skipped({k: v for k, v in ready.items() if k not in ("GCP_PROJECT_ID", "BIGQUERY_DATASET_ID")})
    assert both == "missing: GCP_PROJECT_ID; BIGQUERY_DATASET_ID"
    no_key = _skipped({k: v for k, v in ready.items() if k != "OPENAI_API_KEY"})
    assert no_key == (
        "missing: the API key for EMBEDDING_MODEL=text-embedding-3-small (for OpenAI models, OPENAI_API_KEY)"
    )
    gemini = {**ready, "EMBEDDING_MODEL": "gemini/text-embedding-004"}
    assert "EMBEDDING_MODEL=gemini/text-embedding-004" in (_skipped(gemini) or "")
    assert _skipped({**gemini, "GEMINI_API_KEY": "g-key"}) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    no_command = _skipped({**ready, "NEOCARTA_BIN": str(empty)})
    assert no_command is not None and "the neocarta-mcp command: pipx install" in no_command


def test_commands_are_found_in_order_and_the_child_gets_an_allow_listed_environment(tmp_path: Path) -> None:
    folder = _fake_bin(tmp_path)
    settings = load_settings(environ={"NEOCARTA_BIN": str(folder)})
    assert command("neocarta-mcp", settings) == [str(folder / "neocarta-mcp")]
    on_path = load_settings(environ={})
    assert command("neocarta", on_path, {"PATH": str(folder)}) == [str(folder / "neocarta")]
    uv = tmp_path / "uv"
    uv.mkdir()
    (uv / "uvx").write_text("#!/bin/sh\n")
    (uv / "uvx").chmod(0o755)
    assert command("neocarta-mcp", on_path, {"PATH": str(uv)}) == [
        str(uv / "uvx"), "--quiet", "--from", "neocarta[mcp,cli]>=0.8,<0.9", "neocarta-mcp",
    ]  # fmt: skip
    assert command("neocarta-mcp", on_path, {"PATH": str(tmp_path)}) is None

    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/ana",
        "VOYAGE_API_KEY": "v-key",
        "AWS_SECRET_ACCESS_KEY": "do-not-pass",
        "SOME_TOKEN_FILE": "do-not-pass",
        "OPENAI_API_KEY": "sk-env",
        "NEO4J_PASSWORD": "s3cret",
        "GCP_PROJECT_ID": "roadflex-analytics",
    }
    env = child_env(load_settings(environ=environ), environ)
    assert env["NEO4J_PASSWORD"] == "s3cret" and env["GCP_PROJECT_ID"] == "roadflex-analytics"
    assert env["VOYAGE_API_KEY"] == "v-key" and env["OPENAI_API_KEY"] == "sk-env"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and env["HOME"] == "/home/ana"
    assert "AWS_SECRET_ACCESS_KEY" not in env and "SOME_TOKEN_FILE" not in env


def test_loading_refuses_a_folder_that_is_not_a_catalog(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no table_info\.csv"):
        load_csv(load_settings(environ={}), tmp_path)


def test_the_catalog_tools_against_a_loaded_catalog(
    neocarta_bin: Path, neo4j_server: Neo4jServer, graph: Graph, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        **neo4j_server.settings_env(),
        **fake_llm.env(),
        "MKG_STATE_DIR": str(tmp_path / "state"),
        "GCP_PROJECT_ID": "roadflex-analytics",
        "BIGQUERY_DATASET_ID": "sales",
        "NEOCARTA_BIN": str(neocarta_bin),
    }
    lines: list[str] = []
    load_csv(load_settings(environ=env), CATALOG, lines.append)
    assert lines[0].startswith("neocarta: cataloguing the CSV files in")
    tables = graph.read(
        "MATCH (:Schema {name: 'sales'})-[:HAS_TABLE]->(t:Table) RETURN t.name AS name ORDER BY name"
    )
    assert [row["name"] for row in tables] == ["accounts", "renewals", "usage_monthly"]
    again = subprocess.run(  # the same load through the command line: idempotent
        [str(BIN_DIR / "mkg"), "neocarta", "load", "--csv", str(CATALOG)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert "cataloguing the CSV files" in again.stderr and json.loads(again.stdout)
    assert graph.read("MATCH (c:Column) RETURN count(c) AS n") == [{"n": 9}]

    async def work(client: Any) -> dict[str, Any]:
        found: dict[str, Any] = {"names": {t.name for t in (await client.list_tools()).tools}}
        found["schemas"] = await mcp_call(client, "neocarta_list_schemas")
        found["tables"] = await mcp_call(client, "neocarta_list_tables_by_schema", schema_name="sales")
        found["search"] = await mcp_call(
            client, "neocarta_search_tables", query="contract renewal date and amount"
        )
        found["columns"] = await mcp_call(client, "neocarta_search_columns", query="fleet card spend")
        found["full"] = await mcp_call(client, "neocarta_get_full_metadata_schema")
        found["empty"] = await mcp_call(client, "neocarta_search_tables", query="  ")
        found["schema"] = await mcp_call(client, "neocarta_search_schemas", query="customer renewals")
        return found

    found = mcp_session(mcp_server(env), work)
    assert found["names"] >= TOOLS
    assert found["schemas"] == (False, {"schemas": [{"database_name": "roadflex", "schema_name": "sales"}]})
    assert found["tables"] == (
        False,
        {"schema_name": "sales", "tables": ["accounts", "renewals", "usage_monthly"]},
    )
    assert found["full"][0] is False and len(found["full"][1]["tables"]) == 3
    error, search = found["search"]
    assert not error, search
    assert search["search"] == "hybrid"  # the CSV load made both a vector and a fulltext index
    assert search["tables"][0]["table_name"] == "renewals"
    assert {c["column_name"] for c in search["tables"][0]["columns"]} == {
        "account_id",
        "renewal_date",
        "amount",
    }
    error, columns = found["columns"]
    assert not error, columns
    assert columns["tables"][0]["table_name"] == "usage_monthly"
    assert found["empty"][0] and "query is empty" in found["empty"][1]
    error, schema = found["schema"]
    assert (
        not error
        and schema["search"] == "vector"
        and {t["schema_name"] for t in schema["tables"]} == {"sales"}
    )
    log = tmp_path / "state" / "neocarta-mcp.log"
    assert log.exists()  # neocarta's own output is kept out of the MCP stream
    assert (BIN_DIR / "meta-knowledge-graph").exists()
