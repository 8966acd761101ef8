"""The MCP server driven through the SDK's own client (stdio and streamable HTTP), against the real
dev Neo4j; embeddings from the local fake OpenAI-compatible server."""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mkg_core.graph import Graph
from mkg_core.testing import BIN_DIR, NPM_TOOLS, Neo4jServer, free_port, mcp_call, mcp_server, mcp_session
from mkg_core.testing.fakellm import FakeLLM

ROOT = Path(__file__).resolve().parents[1]
PROJECT, USER = "mcp-test", "ana@example.com"
PROBE = {"MKG_PLUGINS": "mkg_tool_probe", "PYTHONPATH": str(ROOT / "tests" / "plugins")}
CORE_TOOLS = {
    "project_get_context",
    "project_add_learning",
    "project_entity",
    "episode_search",
    "episode_fetch",
    "project_review_queue",
    "project_resolve_learning",
    "neo4j_get_schema",
    "neo4j_read_cypher",
}

pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture(autouse=True)
def _collect_client_leftovers() -> Iterator[None]:
    """In-process MCP clients leave sockets and event loops to the garbage collector: collect them
    here, where their warnings are expected, not in whichever test happens to run next."""
    yield
    gc.collect()


@pytest.fixture
def env(neo4j_server: Neo4jServer, graph: Graph, fake_llm: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **neo4j_server.settings_env(),
        **fake_llm.env(),
        "MKG_PROJECT_ID": PROJECT,
        "MKG_USER_ID": USER,
        "MKG_RECALL_MIN_SIMILARITY": "0.1",
        # meta-knowledge-graph is the proxy to the server in the worker, which it starts
        "MKG_WORKER_AUTOSTART": "1",
    }


_server = mcp_server
run = mcp_session
_call = mcp_call


def call(env: dict[str, str], name: str, **arguments: Any) -> Any:
    """One tool call on a fresh stdio server; fails the test on a tool error."""
    error, value = run(_server(env), lambda c: _call(c, name, **arguments))
    assert not error, value
    return value


def call_error(env: dict[str, str], name: str, **arguments: Any) -> str:
    error, value = run(_server(env), lambda c: _call(c, name, **arguments))
    assert error, f"expected a tool error, got {value!r}"
    return str(value)


def test_tools_list_answers_without_neo4j_and_calls_say_it_is_down(tmp_path: Path) -> None:
    down = {
        **os.environ,
        "NEO4J_URI": f"bolt://127.0.0.1:{free_port()}",
        "MKG_PROJECT_ID": PROJECT,
        "MKG_WORKER_AUTOSTART": "1",
    }

    async def work(client: Client) -> tuple[set[str], tuple[bool, Any]]:
        tools = await client.list_tools()
        return {t.name for t in tools.tools}, await _call(client, "project_get_context", query="anything")

    names, (error, message) = run(_server(down), work)
    assert names == CORE_TOOLS
    assert error and "Neo4j is not reachable" in message and "mkg doctor" in message


def test_mkg_s_own_connection_flags_reach_mkg_serve(env: dict[str, str]) -> None:
    from mcp.client.stdio import StdioServerParameters

    elsewhere = f"bolt://127.0.0.1:{free_port()}"  # `env` names the test Neo4j; the flag wins
    server = StdioServerParameters(
        command=str(BIN_DIR / "mkg"), args=["--db-url", elsewhere, "serve"], env=env
    )
    error, message = run(server, lambda c: _call(c, "project_get_context", query="anything"))
    assert error and "Neo4j is not reachable" in message, message


def test_add_learning_then_recall_it(env: dict[str, str], graph: Graph) -> None:
    text = "Deployments go through the helm charts in ops/charts; never kubectl apply by hand."
    added = call(env, "project_add_learning", text=text, confidence=0.9)
    assert added["status"] == "candidate" and added["embedded"] is True and added["already_known"] is False
    again = call(env, "project_add_learning", text=f"  {text}  ")
    assert again["id"] == added["id"] and again["already_known"] is True
    row = graph.read(
        "MATCH (:Project {id: $p})-[:HAS_LEARNING]->(l:Learning {id: $id}) "
        "RETURN l.source AS source, l.support_count AS support, size(l.embedding) AS dims",
        {"p": PROJECT, "id": added["id"]},
    )
    assert row == [{"source": "agent-mcp", "support": 2, "dims": 64}]
    user_fact = call(env, "project_add_learning", text="Ana prefers terse answers.", scope="user")
    assert user_fact["id"].startswith(f"learning:user:{USER}:")

    context = call(env, "project_get_context", query="how do we do deploying with helm charts?")
    found = {item["id"]: item for item in context["learnings"]}
    # the graph branch too: the prompt and the learning both name `helm charts`, so its walk finds
    # the learning, and so does its named ranking (the prompt without the name, near the learning)
    assert added["id"] in found
    assert set(found[added["id"]]["found_by"]) == {"fulltext", "vector", "graph", "named"}
    assert context["project"]["id"] == PROJECT and context["review_queue_waiting"] == 1  # the user fact
    other = call(env, "project_get_context", query="helm charts deployments", project_id="another-project")
    assert added["id"] not in {item["id"] for item in other["learnings"]}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"text": "   "}, "text is empty"),
        ({"text": "x" * 501}, "text has 501 characters; the limit is 500"),
        ({"text": "fine", "scope": "team"}, "scope must be 'project' or 'user'"),
        ({"text": "fine", "confidence": 3}, "confidence must be between 0 and 1"),
    ],
)
def test_add_learning_rejects_bad_input(env: dict[str, str], arguments: dict[str, Any], message: str) -> None:
    assert message in call_error(env, "project_add_learning", **arguments)


def _conflict(graph: Graph) -> None:
    graph.write(
        "MERGE (p:Project {id: $p}) "
        "CREATE (old:Learning {id: 'old', text: 'Releases happen on Fridays', scope: 'project', "
        "  status: 'approved', project_id: $p, created_at: datetime('2026-01-01T00:00:00Z')}) "
        "CREATE (new:Learning {id: 'new', text: 'Releases happen on Tuesdays', scope: 'project', "
        "  status: 'candidate', consistency_status: 'ambiguous', project_id: $p, "
        "  created_at: datetime('2026-02-01T00:00:00Z'), embedding: [0.1, 0.2]}) "
        "CREATE (p)-[:HAS_LEARNING]->(old), (p)-[:HAS_LEARNING]->(new) "
        "CREATE (new)-[:CONTRADICTS {reason: 'different day'}]->(old)",
        {"p": PROJECT},
    )


def test_the_review_queue_and_conflict_decisions(env: dict[str, str], graph: Graph) -> None:
    _conflict(graph)
    fact = call(env, "project_add_learning", text="Ana reviews every release herself.", scope="user")
    queue = call(env, "project_review_queue")
    assert queue["waiting"] == 2
    assert [(i["id"], i["why"]) for i in queue["items"]] == [
        ("new", "ambiguous conflict"),
        (fact["id"], "user fact"),
    ]
    assert queue["items"][0]["conflicts"] == [
        {"id": "old", "text": "Releases happen on Fridays", "status": "approved", "reason": "different day",
         "written_by": None, "decided_by": None}
    ]  # fmt: skip
    assert queue["items"][1]["written_by"] == queue["user_id"]  # who wrote the fact
    assert "needs an open conflict" in call_error(
        env, "project_resolve_learning", id=fact["id"], decision="keep_new"
    )
    assert "decision must be one of" in call_error(
        env, "project_resolve_learning", id="new", decision="maybe"
    )
    assert "no learning 'nope'" in call_error(env, "project_resolve_learning", id="nope", decision="approve")

    result = call(env, "project_resolve_learning", id="new", decision="keep_new", reason="moved in 2026")
    assert result == {"id": "new", "decision": "keep_new", "status": "approved", "reviewed_by": "human",
                      "superseded": ["old"]}  # fmt: skip
    rows = {
        r["id"]: r
        for r in graph.read(
            "MATCH (l:Learning) WHERE l.id IN ['new', 'old'] RETURN l.id AS id, l.status AS status, "
            "l.reviewed_by AS by, l.embedding IS NULL AS no_vector, l.superseded_at IS NOT NULL AS superseded"
        )
    }
    assert rows["new"]["status"] == "approved" and rows["new"]["by"] == "human"
    assert rows["old"]["status"] == "rejected" and rows["old"]["superseded"] and rows["old"]["no_vector"]
    supersedes = "MATCH (:Learning {id: 'new'})-[s:SUPERSEDES {source: 'human'}]->(:Learning {id: 'old'}) "
    assert graph.read(supersedes + "RETURN count(s) AS n")[0]["n"] == 1

    edited = call(
        env,
        "project_resolve_learning",
        id=fact["id"],
        decision="edit_approve",
        text="Ana signs off releases.",
    )
    assert edited["status"] == "approved"
    row = graph.read(
        "MATCH (l:Learning {id: $id}) RETURN l.text AS t, size(l.embedding) AS d", {"id": fact["id"]}
    )
    assert row == [{"t": "Ana signs off releases.", "d": 64}]
    assert call(env, "project_review_queue")["waiting"] == 0
    assert "only live memory" in call_error(env, "project_resolve_learning", id="old", decision="approve")


def test_keep_existing_and_reject(env: dict[str, str], graph: Graph) -> None:
    _conflict(graph)
    result = call(env, "project_resolve_learning", id="new", decision="keep_existing")
    assert result["status"] == "rejected" and result["kept"] == ["old"]
    row = graph.read(
        "MATCH (n:Learning {id: 'new'})-[:CONTRADICTED_BY]->(o:Learning {id: 'old'}) "
        "RETURN n.status AS n, o.status AS o, n.embedding IS NULL AS gone"
    )
    assert row == [{"n": "rejected", "o": "approved", "gone": True}]
    fact = call(env, "project_add_learning", text="Ana dislikes emoji.", scope="user")
    assert call(env, "project_resolve_learning", id=fact["id"], decision="reject")["status"] == "rejected"


def test_schema_tool_describes_the_live_graph(env: dict[str, str], graph: Graph) -> None:
    call(env, "project_add_learning", text="Schema test fact about the graph.")
    schema = call(env, "neo4j_get_schema")
    assert any("STRING" in kind.upper() for kind in schema["nodes"]["Learning"]["text"])
    assert "(:Project)-[:HAS_LEARNING]->(:Learning)" in schema["patterns"]
    assert any(i["name"] == "project_learning_fulltext" for i in schema["indexes"])
    assert any(c["name"] == "learning_id_unique" for c in schema["constraints"])


def test_read_cypher_returns_json_safe_values(env: dict[str, str], graph: Graph) -> None:
    graph.write(
        "CREATE (a:Thing {name: 'a', born: date('2020-01-02'), at: datetime('2026-12-02T10:00:00Z'), "
        "  where: point({x: 1.5, y: 2.5}), took: duration('PT90M')})-[:LINKS {w: 2}]->(:Thing {name: 'b'})"
    )
    result = call(
        env,
        "neo4j_read_cypher",
        query="MATCH p = (a:Thing {name: $name})-[r:LINKS]->(b) RETURN a, r, p, a.born AS born, a.at AS at, "
        "a.where AS where, a.took AS took, localtime('12:30:00') AS lt",
        params={"name": "a"},
    )
    (row,) = result["rows"]
    assert row["a"]["_labels"] == ["Thing"] and row["a"]["name"] == "a"
    assert row["born"] == "2020-01-02" and row["at"].startswith("2026-12-02T10:00:00")
    assert row["where"] == {"srid": 7203, "x": 1.5, "y": 2.5}
    assert row["took"] == "PT1H30M" and row["lt"].startswith("12:30:00")
    assert row["r"]["_type"] == "LINKS" and row["r"]["w"] == 2
    assert [n["name"] for n in row["p"]["nodes"]] == ["a", "b"]
    assert "{}" not in json.dumps(row)
    capped = call(env, "neo4j_read_cypher", query="UNWIND range(1, 500) AS i RETURN i")
    assert capped["row_count"] == 200 and capped["truncated"] is True


WRITE_ATTEMPTS = [
    "CREATE (:Hacked)",
    "MERGE (:Hacked {v: 1})",
    "MATCH (n:Learning) SET n.status = 'approved'",
    "MATCH (n) DETACH DELETE n",
    "MATCH (n:Learning) REMOVE n.text",
    "LOAD CSV FROM 'file:///etc/passwd' AS line CREATE (:Hacked {line: line})",
    "load   csv from 'file:///etc/passwd' as l return l",
    "CREATE INDEX hacked IF NOT EXISTS FOR (n:Hacked) ON (n.v)",
    "DROP INDEX project_learning_fulltext",
    "CREATE CONSTRAINT hacked FOR (n:Hacked) REQUIRE n.v IS UNIQUE",
    "CALL { CREATE (:Hacked) } IN TRANSACTIONS",
    "UNWIND [1] AS x CALL (x) { CREATE (:Hacked) } IN TRANSACTIONS OF 1 ROW RETURN x",
    "CALL db.createLabel('Hacked')",
    "CALL db.createProperty('hacked')",
    "CREATE DATABASE hacked",
    "CREATE USER hacker SET PASSWORD 'secret-password-1'",
    "STOP DATABASE neo4j",
    "MATCH (n) RETURN n; CREATE (:Hacked)",
    "MATCH (n) RETURN count(n) AS c UNION CREATE (h:Hacked) RETURN 1 AS c",
    "/* read */ CREATE (:Hacked) // only a comment",
    "MATCH (n) WITH n LIMIT 1 CALL (n) { SET n.hacked = true } RETURN 1",
    "FOREACH (i IN [1] | CREATE (:Hacked))",
    "\uff23REATE (:Hacked)",  # fullwidth C
    "CREATE\u00a0(:Hacked)",  # non-breaking space
    "EXPLAIN CREATE (:Hacked)",
    "",
]


def test_no_write_gets_through_read_cypher(env: dict[str, str], graph: Graph) -> None:
    _conflict(graph)
    before = graph.read("MATCH (n) RETURN count(n) AS n, collect(n.status) AS statuses")

    async def work(client: Client) -> list[tuple[str, bool, Any]]:
        return [(q, *(await _call(client, "neo4j_read_cypher", query=q))) for q in WRITE_ATTEMPTS]

    outcomes = run(_server(env), work)
    for query, error, value in outcomes:
        if query.startswith("EXPLAIN"):
            assert not error or "refused" in value  # a plan is not a write: allowed, or refused; never run
            continue
        assert error, f"{query!r} was accepted: {value!r}"
        assert value.strip() and "neo4j_read_cypher" in value
    refused = [v for q, e, v in outcomes if q.startswith(("CREATE (:", "MERGE", "MATCH (n:Learning) SET"))]
    assert all("read-only" in v for v in refused), refused
    assert graph.read("MATCH (n) RETURN count(n) AS n, collect(n.status) AS statuses") == before
    assert graph.read("MATCH (n:Hacked) RETURN count(n) AS n")[0]["n"] == 0
    names = {r["name"] for r in graph.read("SHOW INDEXES YIELD name RETURN name")}
    assert "hacked" not in names and "project_learning_fulltext" in names


def test_plugin_tool_groups_mount_when_enabled(env: dict[str, str]) -> None:
    plugin_env = {**env, **PROBE}

    async def work(client: Client) -> tuple[set[str], Any, Any, Any]:
        names = {t.name for t in (await client.list_tools()).tools}
        return (
            names,
            await _call(client, "probe_echo", text="hi", times=2),
            await _call(client, "probe_echo", text="hi", times=0),
            await _call(client, "probe_project"),
        )

    names, echo, bad, project = run(_server(plugin_env), work)
    assert names == CORE_TOOLS | {"probe_echo", "probe_project"}
    assert echo == (False, {"echo": "hi hi"})
    assert bad[0] and "times must be at least 1" in bad[1]
    assert project == (False, {"project": PROJECT, "user": USER})
    gated = run(_server({**plugin_env, "PROBE_TOKEN": "t"}), lambda c: _call(c, "probe_secret"))
    assert gated == (False, "token accepted")

    listed = subprocess.run(
        [str(BIN_DIR / "mkg"), "plugins"],
        env=plugin_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    groups = {g["name"]: g for row in json.loads(listed.stdout) for g in row.get("tool_groups", [])}
    assert groups["probe"]["mounted"] and groups["memory"]["mounted"] and groups["graph"]["mounted"]
    assert groups["probe-gated"] == {
        "name": "probe-gated", "mounted": False, "reason": "not enabled by the current settings",
        "tools": ["probe_secret"],
    }  # fmt: skip


def test_a_tool_name_clash_stops_the_server_naming_both_plugins(env: dict[str, str]) -> None:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    result = subprocess.run(
        [str(BIN_DIR / "meta-knowledge-graph")],
        input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n",
        env={**env, **PROBE, "MKG_PROBE_CLASH": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert (
        "tool 'neo4j_read_cypher' is offered by both mkg_core.builtin.core and mkg_tool_probe"
        in result.stderr
    )


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the HTTP server did not start")


def test_streamable_http_transport(env: dict[str, str]) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN_DIR / "meta-knowledge-graph"), "--transport", "http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_port(port, proc)

        async def work(client: Client) -> tuple[set[str], Any]:
            names = {t.name for t in (await client.list_tools()).tools}
            return names, await _call(client, "neo4j_read_cypher", query="RETURN 1 AS one")

        token_file = Path(env["MKG_CONFIG_DIR"]) / "http-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        names, (error, value) = run(f"http://127.0.0.1:{port}/mcp", work, token=token)
        assert names == CORE_TOOLS
        assert not error and value["rows"] == [{"one": 1}]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    log = err.decode()
    assert "mounted memory (mkg_core.builtin.core)" in log and f"127.0.0.1:{port}/mcp" in log
    assert f"Authorization: Bearer {token}" in log  # the token is shown to the user who started it


def test_the_mcp_inspector_cli_as_an_outside_client(env: dict[str, str], graph: Graph) -> None:
    inspector = NPM_TOOLS["inspector"].path()
    server = str(BIN_DIR / "meta-knowledge-graph")

    def inspect(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [str(inspector), "--cli", server, *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    listed = inspect("--method", "tools/list")
    assert {tool["name"] for tool in listed["tools"]} == CORE_TOOLS
    added = inspect(
        "--method", "tools/call", "--tool-name", "project_add_learning",
        "--tool-arg", "text=The inspector can add memory.",
    )  # fmt: skip
    assert added["isError"] is False
    read = inspect(
        "--method", "tools/call", "--tool-name", "neo4j_read_cypher",
        "--tool-arg", "query=MATCH (l:Learning) RETURN l.text AS text",
    )  # fmt: skip
    assert read["isError"] is False and "The inspector can add memory." in json.dumps(read["content"])
    refused = inspect(
        "--method", "tools/call", "--tool-name", "neo4j_read_cypher", "--tool-arg", "query=CREATE (:Hacked)"
    )
    assert refused["isError"] is True and "read-only" in json.dumps(refused["content"])


def _entity(env: dict[str, str], **arguments: Any) -> tuple[bool, Any]:
    return run(_server(env), lambda c: _call(c, "project_entity", **arguments))


def test_entities_of_the_memory_and_one_entitys_neighbourhood(env: dict[str, str], graph: Graph) -> None:
    first = call(env, "project_add_learning", text="ops/deploy.sh reads STRIPE_API_URL from the vault.")
    second = call(env, "project_add_learning", text="Rotate STRIPE_API_URL with `make rotate` every quarter.")
    call(env, "project_add_learning", text="Ana reviews every change to ops/deploy.sh.", scope="user")
    context = call(env, "project_get_context", query="how do we deploy?")
    top = {item["name"]: item for item in context["entities"]}
    assert top["STRIPE_API_URL"] == {
        "name": "STRIPE_API_URL",
        "kind": "config",
        "scope": "project",
        "mentions": 2,
    }

    error, entity = _entity(env, name="stripe_api_url")
    assert not error and entity["entity"]["name"] == "STRIPE_API_URL"
    assert {item["id"] for item in entity["learnings"]} == {first["id"], second["id"]}
    assert [item["name"] for item in entity["files"]] == ["ops/deploy.sh"]
    assert {item["name"] for item in entity["related"]} >= {"make rotate", "vault"}
    error, by_alias = _entity(env, name="deploy.sh")  # the file's base name
    assert not error and by_alias["entity"]["name"] == "ops/deploy.sh"
    assert by_alias["entity"]["aliases"] == ["deploy.sh"]
    error, message = _entity(env, name="STRIPE key")
    assert error and "no entity 'STRIPE key'" in str(message) and "'STRIPE_API_URL'" in str(message)
    error, elsewhere = _entity(env, name="vault", project_id="another-project")
    assert error and "no entity 'vault'" in str(elsewhere)
