"""A real Neo4j for tests and benchmarks: the dev launcher on a free port with a throw-away store."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..graph import Graph
from .paths import LAUNCHER, TEST_PASSWORD


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Neo4jServer:
    """A Neo4j for tests: the dev launcher's (restartable) or an external one."""

    uri: str
    username: str = "neo4j"
    password: str = TEST_PASSWORD
    home: Path | None = None
    port: int | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def restartable(self) -> bool:
        return self.home is not None

    def _launcher(self, command: str) -> str:
        if not LAUNCHER.exists():
            raise RuntimeError(f"{LAUNCHER} is missing: run the tests from a checkout, or set NEO4J_URI")
        result = subprocess.run(
            [str(LAUNCHER), command],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"neo4j-dev {command} failed:\n{result.stderr[-4000:]}")
        return result.stdout.strip()

    def start(self) -> None:
        if self.restartable:
            self._launcher("start")

    def stop(self) -> None:
        if self.restartable:
            self._launcher("stop")

    def settings_env(self) -> dict[str, str]:
        return {"NEO4J_URI": self.uri, "NEO4J_USERNAME": self.username, "NEO4J_PASSWORD": self.password}


def start_dev_neo4j(home: Path) -> Neo4jServer:
    port = free_port()
    server = Neo4jServer(
        uri=f"bolt://127.0.0.1:{port}",
        home=home,
        port=port,
        env={
            "NEO4J_DEV_HOME": str(home),
            "NEO4J_DEV_PORT": str(port),
            "NEO4J_DEV_PASSWORD": TEST_PASSWORD,
            "NEO4J_DEV_FRESH": "1",
        },
    )
    server.start()
    server.env.pop("NEO4J_DEV_FRESH")  # a restart keeps the store
    return server


@contextlib.contextmanager
def scratch_neo4j(environ: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """``environ`` pointed at a Neo4j for a benchmark: ``NEO4J_URI`` when it is set, else a dev
    Neo4j with a throw-away store, started now and stopped on exit."""
    env = dict(environ)
    if env.get("NEO4J_URI"):
        yield env
        return
    with tempfile.TemporaryDirectory(prefix="mkg-scratch-") as tmp:
        print("starting a dev Neo4j...", file=sys.stderr)
        server = start_dev_neo4j(Path(tmp) / "neo4j")
        try:
            yield {**env, **server.settings_env()}
        finally:
            server.stop()


def reset_database(graph: Graph) -> None:
    """Delete every node, constraint and (non-lookup) index."""
    graph.run_autocommit("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS")
    drop_schema(graph)


def drop_schema(graph: Graph) -> None:
    """Drop every constraint and (non-lookup) index, keeping the data."""
    for row in graph.run_autocommit("SHOW CONSTRAINTS YIELD name RETURN name"):
        graph.run_autocommit(f"DROP CONSTRAINT {quote_name(row['name'])} IF EXISTS")
    for row in graph.run_autocommit("SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name"):
        graph.run_autocommit(f"DROP INDEX {quote_name(row['name'])} IF EXISTS")


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
