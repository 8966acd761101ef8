"""mkg-neocarta: when the tools mount, and the tools themselves through the real MKG MCP server,
backed by neocarta's own MCP server (installed from PyPI into its own environment) over a small
catalog loaded with neocarta's CSV loader into the real dev Neo4j, embeddings from the local fake.
The table of neocarta's tools (mkg_neocarta/remote.py) is compared with the tested release's."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mkg_neocarta.catalog import load_csv
from mkg_neocarta.locate import TESTED_FOLDER, TESTED_SPEC, child_env, command
from mkg_neocarta.remote import REMOTE_TOOLS, RemoteTool
from mkg_neocarta.tools import bridge_for

from mkg_core.errors import ConfigError
from mkg_core.graph import Graph
from mkg_core.host import PluginHost
from mkg_core.plugins import make_plugin_manager
from mkg_core.server import plan_groups
from mkg_core.settings import load_settings
from mkg_core.testing import BIN_DIR, Neo4jServer, mcp_call, mcp_server, mcp_session, pip_tool
from mkg_core.testing.fakellm import FakeLLM

CATALOG = Path(__file__).with_name("catalog")
SCAN = Path(__file__).with_name("neocarta_tools.py")
STABLE_SEARCHES = {"neocarta_search_tables", "neocarta_search_columns", "neocarta_search_schemas"}

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


def _schema(remote: RemoteTool) -> dict[str, Any]:
    """The input schema neocarta publishes for the table's arguments of ``remote``."""
    types = {str: "string", int: "integer"}
    properties = {
        p.name: {"type": types[p.type], **({} if p.default is None else {"default": p.default})}
        for p in remote.params
    }
    required = [p.name for p in remote.params if p.default is None]
    return {"properties": properties, "type": "object", **({"required": required} if required else {})}


def _as_table_says(remote: RemoteTool) -> dict[str, Any]:
    """What the contract with neocarta holds for ``remote``: its input schema and annotations (the
    description is MKG's own, not compared)."""
    return {"inputSchema": _schema(remote), "annotations": None}


def _as_listed(tool: dict[str, Any]) -> dict[str, Any]:
    return {key: tool.get(key) for key in ("inputSchema", "annotations")}


def _untitled(value: Any) -> Any:
    """A JSON schema without its titles (MKG's framework adds them, neocarta's leaves them out)."""
    if isinstance(value, dict):
        return {key: _untitled(item) for key, item in value.items() if key != "title"}
    return value


def test_the_table_is_the_tested_neocartas_tools(neocarta_bin: Path, tmp_path: Path) -> None:
    """Every tool the tested neocarta can offer, as its server lists them, is in the table with the
    same input schema and annotations, and each runs its queries with READ routing. A release that
    adds, drops or changes a tool fails here: update mkg_neocarta/remote.py with it."""
    scan = subprocess.run(
        [str(neocarta_bin / "python"), str(SCAN)],
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert scan.returncode == 0, scan.stderr[-3000:]
    found = json.loads(scan.stdout.strip().splitlines()[-1])
    assert found["not_read_only"] == []
    assert {tool["name"]: _as_listed(tool) for tool in found["tools"]} == {
        remote.name: _as_table_says(remote) for remote in REMOTE_TOOLS
    }


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
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert "cataloguing the CSV files" in again.stderr and json.loads(again.stdout)
    elsewhere = subprocess.run(  # `mkg`'s own connection flags count (`env` names the test database)
        [str(BIN_DIR / "mkg"), "--database", "nosuchdb", "neocarta", "load", "--csv", str(CATALOG)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert elsewhere.returncode == 1 and "nosuchdb" in elsewhere.stderr, elsewhere.stderr
    assert graph.read("MATCH (c:Column) RETURN count(c) AS n") == [{"n": 9}]

    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "schemas": ("neocarta_list_schemas", {}),
        "tables": ("neocarta_list_tables_by_schema", {"schema_name": " sales "}),
        "no_such_schema": ("neocarta_list_tables_by_schema", {"schema_name": "billing"}),
        "blank_schema": ("neocarta_list_tables_by_schema", {"schema_name": " "}),
        "full": ("neocarta_get_full_metadata_schema", {}),
        "table_search": (
            "neocarta_get_context_by_table_hybrid_search",
            {"text_content": "contract renewal date and amount", "max_tables": 1},
        ),
        "column_search": (
            "neocarta_get_context_by_column_hybrid_search",
            {"text_content": "fleet card spend"},
        ),
        "schema_search": (
            "neocarta_get_context_by_schema_and_table_vector_search",
            {"text_content": "customer renewals", "search_top_k": 1},
        ),
        "not_offered": ("neocarta_get_context_by_table_vector_search", {"text_content": "renewals"}),
        "blank_text": ("neocarta_get_context_by_column_hybrid_search", {"text_content": "  "}),
        "zero_tables": (
            "neocarta_get_context_by_table_hybrid_search",
            {"text_content": "renewals", "max_tables": 0},
        ),
        "search": ("neocarta_search_tables", {"query": "contract renewal date and amount"}),
        "columns": ("neocarta_search_columns", {"query": "fleet card spend"}),
        "schema": ("neocarta_search_schemas", {"query": "customer renewals"}),
        "empty": ("neocarta_search_tables", {"query": "  "}),
    }

    async def work(client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        answers = {key: await mcp_call(client, name, **arguments) for key, (name, arguments) in calls.items()}
        return listed, answers

    listed, found = mcp_session(mcp_server(env), work)

    # every one of neocarta's tools, with neocarta's input schema, and the stable searches
    forwarded = {f"neocarta_{remote.name}": remote for remote in REMOTE_TOOLS}
    bare_name = re.compile(r"\b(?:" + "|".join(remote.name for remote in REMOTE_TOOLS) + r")\b")
    assert {name for name in listed if name.startswith("neocarta_")} == set(forwarded) | STABLE_SEARCHES
    for name, remote in forwarded.items():
        assert _untitled(listed[name].input_schema) == _schema(remote), name
        assert listed[name].annotations.read_only_hint is True, name
        # the table's description, then MKG's note on routing and bounds (searches only)
        assert listed[name].description.split("\n\n")[0] == remote.description, name
        assert bare_name.search(remote.description) is None, name  # tools named as MKG mounts them

    # neocarta's answers, as neocarta gives them
    assert found["schemas"] == (False, [{"database_name": "roadflex", "schema_name": "sales"}])
    error, rows = found["tables"]
    assert not error and [row["schema_name"] for row in rows] == ["sales"]
    assert sorted(rows[0]["table_names"]) == ["accounts", "renewals", "usage_monthly"]
    assert found["no_such_schema"] == (False, [])
    error, full = found["full"]
    assert not error and [t["table_name"] for t in full] == ["accounts", "renewals", "usage_monthly"]
    assert {c["column_name"] for c in full[2]["columns"]} == {"account_id", "month", "card_spend"}
    error, hits = found["table_search"]
    assert not error and [t["table_name"] for t in hits] == ["renewals"], hits
    assert {c["column_name"] for c in hits[0]["columns"]} == {"account_id", "renewal_date", "amount"}
    error, hits = found["column_search"]
    assert not error and hits[0]["table_name"] == "usage_monthly", hits
    assert "card_spend" in {c["column_name"] for c in hits[0]["columns"]}
    error, hits = found["schema_search"]
    assert (
        not error
        and hits
        and {(t["database_name"], t["schema_name"]) for t in hits} == {("roadflex", "sales")}
    )

    # arguments checked, and a search neocarta did not register for this catalog named
    error, message = found["not_offered"]
    assert error and "offers one table search" in message, message
    assert "neocarta_get_context_by_table_hybrid_search" in message and "neocarta_search_tables" in message
    assert found["blank_text"][0] and "text_content is empty" in found["blank_text"][1]
    assert (
        found["zero_tables"][0]
        and "max_tables must be a whole number from 1 to 100, not 0" in (found["zero_tables"][1])
    )
    assert found["blank_schema"][0] and "neocarta_list_schemas lists" in found["blank_schema"][1]

    # the stable searches pick the best search offered
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

    # neocarta's running server lists, for this catalog, a part of the table, as the table says
    link = bridge_for(load_settings(environ=env))
    try:
        live = link.listing()
    finally:
        link.close()
    assert set(live) == {
        "list_schemas",
        "list_tables_by_schema",
        "get_full_metadata_schema",
        "get_context_by_table_hybrid_search",
        "get_context_by_column_hybrid_search",
        "get_context_by_schema_and_table_vector_search",
    }
    table = {remote.name: remote for remote in REMOTE_TOOLS}
    assert {name: _as_listed(tool) for name, tool in live.items()} == {
        name: _as_table_says(table[name]) for name in live
    }
