"""Against the real dev Neo4j: schema, fulltext and filtered vector search, access modes, errors."""

from __future__ import annotations

import neo4j
import pytest
from neo4j.exceptions import ClientError

from mkg_core.errors import GraphUnavailable
from mkg_core.graph import Graph, uri_problem
from mkg_core.schema import apply_schema, core_statements, vector_dimension_mismatches, vector_index
from mkg_core.settings import load_settings
from mkg_core.testing import CORE_SCHEMA

DIMS = 4


def _index_states(graph: Graph) -> dict[str, str]:
    return {
        row["name"]: row["state"] for row in graph.read("SHOW INDEXES YIELD name, state RETURN name, state")
    }


def test_schema_apply_creates_everything_online_and_is_idempotent(graph: Graph) -> None:
    statements = core_statements(DIMS)
    report = apply_schema(graph, statements)
    assert report.online
    assert set(report.applied) == {s.name for s in statements}
    states = _index_states(graph)
    constraints = {row["name"] for row in graph.read("SHOW CONSTRAINTS YIELD name RETURN name")}
    for statement in statements:
        if statement.kind == "constraint":
            assert statement.name in constraints
        else:
            assert states[statement.name] == "ONLINE"
    apply_schema(graph, statements)  # a second run changes nothing
    assert _index_states(graph) == states


def test_a_fulltext_index_built_with_another_analyzer_is_rebuilt(graph: Graph) -> None:
    graph.run_autocommit(  # as an earlier release created it: the default analyzer
        "CREATE FULLTEXT INDEX project_learning_fulltext IF NOT EXISTS "
        "FOR (n:Learning) ON EACH [n.text, n.summary, n.task_pattern]"
    )
    graph.write("CREATE (:Learning {id: 'l1', text: 'The team deployed the billing service on Friday'})")
    apply_schema(graph, core_statements(DIMS))
    analyzers = graph.read(
        "SHOW FULLTEXT INDEXES YIELD name, options "
        "RETURN name, options.indexConfig['fulltext.analyzer'] AS analyzer ORDER BY name"
    )
    assert {row["name"]: row["analyzer"] for row in analyzers}["project_learning_fulltext"] == "english"
    hits = graph.read(  # stemmed: "deploys" finds "deployed"
        "CALL db.index.fulltext.queryNodes('project_learning_fulltext', 'deploys') "
        "YIELD node RETURN node.id AS id"
    )
    assert hits == [{"id": "l1"}]
    before = _index_states(graph)
    apply_schema(graph, core_statements(DIMS))  # now as declared: left alone
    assert _index_states(graph) == before


def test_a_fulltext_index_on_other_properties_is_rebuilt(graph: Graph) -> None:
    graph.run_autocommit(  # as an earlier release created it: the text fields only
        "CREATE FULLTEXT INDEX project_learning_fulltext IF NOT EXISTS "
        "FOR (n:Learning) ON EACH [n.text, n.summary, n.task_pattern] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}"
    )
    graph.write("CREATE (:Learning {id: 'l1', text: 'Deploy with the blue pipeline', project_id: 'acme'})")
    apply_schema(graph, core_statements(DIMS))
    (row,) = graph.read(
        "SHOW FULLTEXT INDEXES YIELD name, properties WHERE name = 'project_learning_fulltext' "
        "RETURN properties"
    )
    texts, owners = ["text", "summary", "task_pattern"], ["scope", "project_id", "user_id", "status"]
    assert row["properties"] == texts + owners
    hits = graph.read(
        "CALL db.index.fulltext.queryNodes('project_learning_fulltext', 'text:deploy AND project_id:acme') "
        "YIELD node RETURN node.id AS id"
    )
    assert hits == [{"id": "l1"}]


def test_unique_constraints_hold(graph: Graph) -> None:
    apply_schema(graph, core_statements(DIMS))
    graph.write("CREATE (:Project {id: 'p'})")
    with pytest.raises(ClientError, match="already exists"):
        graph.write("CREATE (:Project {id: 'p'})")


def test_fulltext_index_ranks_learnings(graph: Graph) -> None:
    apply_schema(graph, core_statements(DIMS))
    graph.write(
        "UNWIND $rows AS row "
        "CREATE (:Learning {id: row.id, text: row.text, project_id: 'p', scope: 'project'})",
        {
            "rows": [
                {"id": "l1", "text": "The billing service retries webhooks three times"},
                {"id": "l2", "text": "Use pnpm, never npm, in this repository"},
            ]
        },
    )
    rows = graph.read(
        "CALL db.index.fulltext.queryNodes('project_learning_fulltext', $q) YIELD node, score "
        "RETURN node.id AS id ORDER BY score DESC",
        {"q": "webhooks retries"},
    )
    assert rows[0]["id"] == "l1"


def _seed_vectors(graph: Graph) -> None:
    graph.write(
        "UNWIND $rows AS row CREATE (:Learning {id: row.id, text: row.id, project_id: row.p, scope: row.s, "
        "status: 'approved', embedding: row.e})",
        {
            "rows": [
                {"id": "a-near", "p": "a", "s": "project", "e": [1.0, 0.0, 0.0, 0.0]},
                {"id": "a-far", "p": "a", "s": "project", "e": [0.0, 1.0, 0.0, 0.0]},
                {"id": "a-user", "p": "a", "s": "user", "e": [1.0, 0.01, 0.0, 0.0]},
                {"id": "b-near", "p": "b", "s": "project", "e": [1.0, 0.0, 0.0, 0.0]},
            ]
        },
    )


SEARCH = (
    "MATCH (n:Learning) SEARCH n IN (VECTOR INDEX project_learning_vector FOR $vector "
    "WHERE n.project_id = $project AND n.scope = $scope LIMIT 10) SCORE AS score "
    "RETURN n.id AS id, score ORDER BY score DESC"
)


def test_vector_search_with_in_index_filters(graph: Graph) -> None:
    apply_schema(graph, core_statements(DIMS))
    _seed_vectors(graph)
    rows = graph.read(SEARCH, {"vector": [0.9, 0.1, 0.0, 0.0], "project": "a", "scope": "project"})
    assert [row["id"] for row in rows] == ["a-near", "a-far"]
    assert rows[0]["score"] > rows[1]["score"]
    other = graph.read(SEARCH, {"vector": [1.0, 0.0, 0.0, 0.0], "project": "b", "scope": "project"})
    assert [row["id"] for row in other] == ["b-near"]


def test_vector_filter_on_an_undeclared_property_is_refused(graph: Graph) -> None:
    apply_schema(graph, [vector_index("narrow_vector", "Learning", DIMS, filters=("project_id",))])
    _seed_vectors(graph)
    with pytest.raises(ClientError):
        graph.read(
            "MATCH (n:Learning) SEARCH n IN "
            "(VECTOR INDEX narrow_vector FOR $v WHERE n.scope = 'user' LIMIT 3) RETURN n.id",
            {"v": [1.0, 0.0, 0.0, 0.0]},
        )


def test_read_transactions_refuse_writes(graph: Graph) -> None:
    with pytest.raises(ClientError, match=r"(?i)write"):
        graph.read("CREATE (:Sneaky {x: 1})")
    assert graph.read("MATCH (n:Sneaky) RETURN count(n) AS n") == [{"n": 0}]


def test_session_requires_an_explicit_access_mode(graph: Graph) -> None:
    with pytest.raises(ValueError, match="access must be"), graph.session("r"):
        pass
    with graph.session(neo4j.READ_ACCESS) as session:
        assert session.run("RETURN 1 AS x").single()["x"] == 1


def test_vector_dimension_change_is_detected(graph: Graph) -> None:
    apply_schema(graph, core_statements(DIMS))
    assert vector_dimension_mismatches(graph, DIMS) == []
    assert sorted(vector_dimension_mismatches(graph, 8)) == [
        "entity_vector has 4 dimensions, memory's vectors have 8",
        "project_learning_vector has 4 dimensions, memory's vectors have 8",
        "project_observation_vector has 4 dimensions, memory's vectors have 8",
        "query_error_pattern_vector has 4 dimensions, memory's vectors have 8",
    ]


def test_an_empty_vector_index_of_another_dimension_is_built_again_and_a_filled_one_kept(
    graph: Graph,
) -> None:
    apply_schema(graph, core_statements(DIMS))
    graph.write("CREATE (:Learning {id: 'l1', embedding: [0.1, 0.2, 0.3, 0.4]})")
    apply_schema(graph, core_statements(8))
    assert sorted(vector_dimension_mismatches(graph, 8)) == [
        "project_learning_vector has 4 dimensions, memory's vectors have 8"  # it holds a vector
    ]
    dims = "SHOW VECTOR INDEXES YIELD name, options RETURN options.indexConfig['vector.dimensions'] AS d"
    assert {row["d"] for row in graph.read(dims)} == {4, 8}


def test_each_test_starts_from_an_empty_database_with_the_core_schema_only(graph: Graph) -> None:
    assert graph.read("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]
    indexes = graph.read("SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name")
    constraints = graph.read("SHOW CONSTRAINTS YIELD name RETURN name")
    assert {row["name"] for row in indexes + constraints} <= CORE_SCHEMA


def test_verify_reports_the_server(graph: Graph) -> None:
    assert graph.verify().startswith("Neo4j/2026.")


def test_unreachable_neo4j_is_a_clear_error(tmp_path) -> None:
    from mkg_core.testing import free_port

    settings = load_settings(environ={"NEO4J_URI": f"bolt://127.0.0.1:{free_port()}"}, project_root=tmp_path)
    with Graph.connect(settings) as graph, pytest.raises(GraphUnavailable, match="not reachable"):
        graph.verify()


def test_wrong_password_is_a_clear_error(neo4j_server, tmp_path) -> None:
    env = {**neo4j_server.settings_env(), "NEO4J_PASSWORD": "wrong-password"}
    settings = load_settings(environ=env, project_root=tmp_path)
    with Graph.connect(settings) as graph, pytest.raises(GraphUnavailable, match="refused the credentials"):
        graph.verify()


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        pytest.param("notauri", "is not a Neo4j URI", id="no-scheme"),
        pytest.param("http://localhost:7474", "is not a Neo4j URI", id="http"),
        pytest.param("bolt:localhost:7687", "is not a Neo4j URI", id="no-slashes"),
        pytest.param("bolt://localhost:notaport", "is not a valid URI", id="port-not-a-number"),
        pytest.param("bolt://localhost:70000", "is not a valid URI", id="port-out-of-range"),
        pytest.param("bolt://[::1:7687", "is not a valid URI", id="unclosed-ipv6"),
        pytest.param("bolt://" + "a" * 70 + ":7687", "host name", id="overlong-host-label"),
        pytest.param("bolt://neo4j:s3cret@localhost:7687", "carries a user name", id="password-in-uri"),
        pytest.param("bolt://localhost:7687?region=eu", "cannot be used", id="routing-context-on-bolt"),
    ],
)
def test_a_malformed_uri_is_a_clear_error_naming_the_setting(uri: str, problem: str, tmp_path) -> None:
    settings = load_settings(environ={"NEO4J_URI": uri}, project_root=tmp_path)
    with pytest.raises(GraphUnavailable) as caught:
        Graph.connect(settings)
    message = str(caught.value)
    assert message.startswith("NEO4J_URI ") and problem in message
    assert "--db-url" in message and "\n" not in message
    assert "s3cret" not in message


@pytest.mark.parametrize(
    "uri",
    [
        "bolt://localhost:7687",
        "BOLT://localhost",
        "bolt+s://db.example.com:7687",
        "bolt+ssc://10.0.0.5",
        "neo4j://localhost:7687",
        "neo4j+s://abcd1234.databases.neo4j.io",
        "neo4j+ssc://[::1]:7687",
    ],
)
def test_the_driver_s_uris_pass(uri: str) -> None:
    assert uri_problem(uri) is None


def test_an_address_the_driver_cannot_look_up_is_a_clear_error() -> None:
    # The driver built directly, without MKG's check of the URI: its own failure to look the
    # address up (a ValueError from the lookup's OSError here) is reported like an outage.
    driver = neo4j.GraphDatabase.driver("bolt://localhost:notaport", connection_timeout=1.0)
    with Graph(driver, "neo4j") as graph, pytest.raises(GraphUnavailable, match="NEO4J_URI"):
        graph.verify()


def test_processes_share_bookmarks_on_a_routing_uri(
    neo4j_server, graph: Graph, tmp_path, monkeypatch
) -> None:
    """On a cluster URI every MKG process of the user reads and writes one bookmark file, so a read
    in one process waits for what another process wrote (causal consistency across processes)."""
    import json
    import stat
    from concurrent.futures import ThreadPoolExecutor

    from mkg_core.graph import SharedBookmarks

    monkeypatch.setenv("MKG_STATE_DIR", str(tmp_path))
    env = {**neo4j_server.settings_env(), "NEO4J_URI": neo4j_server.uri.replace("bolt://", "neo4j://")}
    settings = load_settings(environ=env)
    shared = SharedBookmarks.for_settings(settings)
    with Graph.connect(settings) as worker:
        assert worker.bookmarks is not None
        worker.write("CREATE (:Written {by: 'worker'})")
    after_worker = json.loads(shared.path.read_text())
    assert after_worker and stat.S_IMODE(shared.path.stat().st_mode) == 0o600
    with Graph.connect(settings) as server:  # another process: starts from the worker's bookmarks
        assert server.bookmarks is not None
        assert server.read("MATCH (n:Written) RETURN n.by AS by") == [{"by": "worker"}]
        server.write("CREATE (:Written {by: 'server'})")
    assert json.loads(shared.path.read_text()) != after_worker  # the newer bookmark replaced it
    # a recall's branches read at once, on threads of one process
    with Graph.connect(settings) as recall, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: recall.read("RETURN 1 AS one"), range(300)))
    assert answers == [[{"one": 1}]] * 300
    assert json.loads(shared.path.read_text())
    assert not list(shared.path.parent.glob(f".{shared.path.name}.*"))  # no temporary file left behind
    plain = load_settings(environ=neo4j_server.settings_env())
    with Graph.connect(plain) as single:
        assert single.bookmarks is None  # one server: nothing to share
