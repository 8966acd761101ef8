"""The dev Neo4j launcher: clean shutdown on SIGTERM keeps the store, status tells the truth."""

from __future__ import annotations

import os
import subprocess

import pytest

from mkg_core.errors import GraphUnavailable
from mkg_core.graph import Graph
from mkg_core.testing import LAUNCHER


def _status(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAUNCHER), "status"], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )


def test_stop_and_start_keep_the_data(neo4j_server, graph: Graph) -> None:
    if not neo4j_server.restartable:
        pytest.fail("this test drives the dev launcher; unset NEO4J_URI to run it")
    graph.write("CREATE (:Survivor {name: 'kept'})")
    assert _status(neo4j_server.env).stdout.strip() == neo4j_server.uri

    neo4j_server.stop()
    assert _status(neo4j_server.env).returncode == 3
    assert "NEO4J_DEV_STOPPING" in (neo4j_server.home / "neo4j-dev.log").read_text()  # shut down, not killed
    with pytest.raises(GraphUnavailable):
        graph.verify()

    neo4j_server.start()
    assert graph.read("MATCH (n:Survivor) RETURN n.name AS name") == [{"name": "kept"}]
    assert (neo4j_server.home / "neo4j-dev.log").read_text().count("NEO4J_DEV_READY") == 1
