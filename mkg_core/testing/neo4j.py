"""A real Neo4j for tests and benchmarks: the one MKG runs itself, on a free port with a throw-away store."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..graph import Graph
from ..localdb import LocalNeo4j, free_port
from .paths import TEST_PASSWORD, neo4j_jar_cache


@dataclass
class Neo4jServer:
    """A Neo4j for tests: one MKG runs (restartable, see :mod:`mkg_core.localdb`) or an external one."""

    uri: str
    username: str = "neo4j"
    password: str = TEST_PASSWORD
    local: LocalNeo4j | None = field(default=None, repr=False)

    @property
    def restartable(self) -> bool:
        return self.local is not None

    @property
    def home(self) -> Path | None:
        return self.local.home if self.local else None

    def start(self) -> None:
        if self.local is not None:
            self.local.start()

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()

    def settings_env(self) -> dict[str, str]:
        return {"NEO4J_URI": self.uri, "NEO4J_USERNAME": self.username, "NEO4J_PASSWORD": self.password}


def start_dev_neo4j(home: Path) -> Neo4jServer:
    """A Neo4j on a free port with a new store in ``home``, started (the jars downloaded once into
    the test jar cache)."""
    local = LocalNeo4j(home, jars=neo4j_jar_cache(), environ=os.environ)
    if not local.installed():
        print(f"downloading Neo4j {local.lock.neo4j} into {local.jars}...", file=sys.stderr)
        local.install()
    credentials = local.create(port=free_port(), password=TEST_PASSWORD)
    local.start()
    return Neo4jServer(credentials.uri, credentials.username, credentials.password, local)


@contextlib.contextmanager
def scratch_neo4j(environ: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """``environ`` pointed at a Neo4j for a benchmark: ``NEO4J_URI`` when it is set, else a local
    Neo4j with a throw-away store, started now and stopped on exit."""
    env = dict(environ)
    if env.get("NEO4J_URI"):
        yield env
        return
    with tempfile.TemporaryDirectory(prefix="mkg-scratch-") as tmp:
        print("starting a Neo4j...", file=sys.stderr)
        server = start_dev_neo4j(Path(tmp) / "neo4j")
        try:
            yield {**env, **server.settings_env()}
        finally:
            server.stop()


def reset_database(graph: Graph, *, keep: Collection[str] = ()) -> None:
    """Delete every node, and every constraint and (non-lookup) index not named in ``keep``."""
    graph.run_autocommit("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS")
    drop_schema(graph, keep=keep)


def drop_schema(graph: Graph, *, keep: Collection[str] = ()) -> None:
    """Drop every constraint and (non-lookup) index not named in ``keep``, keeping the data."""
    for row in graph.run_autocommit("SHOW CONSTRAINTS YIELD name RETURN name"):
        if row["name"] not in keep:
            graph.run_autocommit(f"DROP CONSTRAINT {quote_name(row['name'])} IF EXISTS")
    for row in graph.run_autocommit("SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name"):
        if row["name"] not in keep:
            graph.run_autocommit(f"DROP INDEX {quote_name(row['name'])} IF EXISTS")


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
