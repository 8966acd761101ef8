"""Shared pytest fixtures: fresh plugin managers, isolated settings and a real Neo4j.

Loaded by the root ``conftest.py``. The Neo4j fixture starts a Neo4j the way ``mkg neo4j`` does
(:mod:`mkg_core.localdb`) on a free port with a throw-away store, unless ``NEO4J_URI`` is set,
in which case that server is used (with ``NEO4J_USERNAME`` / ``NEO4J_PASSWORD``). Every test that
asks for ``graph`` gets an empty database: no nodes, and no constraints or indexes but the core's.

The helpers live in submodules (:mod:`.paths`, :mod:`.neo4j`, :mod:`.capture`, :mod:`.tools`, and the
fake model servers :mod:`.fakellm` and :mod:`.fakemodels`); the names tests use are exported here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pluggy
import pytest

from .. import runtime
from ..graph import Graph
from ..host import PluginHost
from ..localdb import free_port
from ..plugins import make_plugin_manager
from ..schema import core_statements
from ..settings import Settings, load_settings
from .capture import ANSWER_DEADLINES, CaptureRig, stop_worker
from .fakellm import FakeLLM
from .neo4j import (
    Neo4jServer,
    drop_schema,
    quote_name,
    reset_database,
    scratch_neo4j,
    start_dev_neo4j,
)
from .paths import (
    BIN_DIR,
    REPO_ROOT,
    TEST_PASSWORD,
    model_cache,
    model_wheel,
    neo4j_jar_cache,
    prefetch_model,
)
from .tools import (
    NPM_TOOLS,
    check_golden_payload,
    cpu_burners,
    first_model_request,
    fresh_venv,
    golden_payloads,
    mcp_call,
    mcp_server,
    mcp_session,
    npm_tool,
    pip_tool,
    prefetch_npm_tools,
    serve_file,
    uv,
)

__all__ = [
    "ANSWER_DEADLINES",
    "BIN_DIR",
    "CORE_SCHEMA",
    "NPM_TOOLS",
    "REPO_ROOT",
    "TEST_PASSWORD",
    "CaptureRig",
    "FakeLLM",
    "Neo4jServer",
    "check_golden_payload",
    "cpu_burners",
    "drop_schema",
    "first_model_request",
    "free_port",
    "fresh_venv",
    "golden_payloads",
    "mcp_call",
    "mcp_server",
    "mcp_session",
    "model_cache",
    "model_wheel",
    "neo4j_jar_cache",
    "npm_tool",
    "pip_tool",
    "prefetch_model",
    "prefetch_npm_tools",
    "quote_name",
    "reset_database",
    "scratch_neo4j",
    "serve_file",
    "start_dev_neo4j",
    "stop_worker",
    "uv",
]

#: Variables a developer's shell may hold that must not leak into a test.
_LEAKY_PREFIXES = (
    "MKG_",
    "NEO4J_",
    "LLM_",
    "EMBEDDING_",
    "XDG_",
    "CLAUDE",
    "CODEX_",
    "DIFFBOT_",
    "BIGQUERY_",
    "GCP_",
    "OPENAI_",
    "ANTHROPIC_",
    "GEMINI_",
    "OPENROUTER_",
)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """No developer settings leak in: a throw-away HOME and config dir, no MKG/NEO4J/... variables."""
    models = model_cache()  # read before MKG_MODEL_CACHE is cleared below
    for key in list(os.environ):
        if key.startswith(_LEAKY_PREFIXES):
            monkeypatch.delenv(key)
    home = tmp_path_factory.mktemp("home")
    state = home / ".local" / "state" / "meta-knowledge-graph"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MKG_CONFIG_DIR", str(home / ".config" / "meta-knowledge-graph"))
    monkeypatch.setenv("MKG_STATE_DIR", str(state))
    # No embedder unless a test chooses one (the keyless local one is the product's default; the
    # tests that are about embeddings set EMBEDDING_MODEL).
    monkeypatch.setenv("EMBEDDING_MODEL", "none")
    # The keyless embedder's model as `make prefetch` left it: a test never downloads it.
    monkeypatch.setenv("MKG_MODEL_CACHE", str(models))
    # A hook run by a test never leaves a background worker behind (the capture rig starts its own);
    # a test that lets one start (an MCP session does) has it stopped here.
    monkeypatch.setenv("MKG_WORKER_AUTOSTART", "0")
    yield home
    stop_worker(runtime.Paths(str(state)))


@pytest.fixture
def pm() -> pluggy.PluginManager:
    """A fresh plugin manager with the built-ins only: no installed plugin leaks in."""
    return make_plugin_manager(load_entrypoints=False, environ={})


@pytest.fixture
def host(pm: pluggy.PluginManager) -> PluginHost:
    return PluginHost(pm)


_EXTERNAL = {key: os.environ.get(key) for key in ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD")}


@pytest.fixture(scope="session")
def neo4j_server() -> Iterator[Neo4jServer]:
    """A running Neo4j for the whole test session."""
    if _EXTERNAL["NEO4J_URI"]:
        yield Neo4jServer(
            uri=_EXTERNAL["NEO4J_URI"],
            username=_EXTERNAL["NEO4J_USERNAME"] or "neo4j",
            password=_EXTERNAL["NEO4J_PASSWORD"] or "password",
        )
        return
    with tempfile.TemporaryDirectory(prefix="mkg-neo4j-") as home:
        server = start_dev_neo4j(Path(home))
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def settings(isolated_environment: Path, request: pytest.FixtureRequest) -> Settings:
    """Settings for a test; pointed at the test Neo4j when the test also uses ``graph``."""
    environ = dict(os.environ)
    if "neo4j_server" in request.fixturenames or "graph" in request.fixturenames:
        server: Neo4jServer = request.getfixturevalue("neo4j_server")
        environ.update(server.settings_env())
    return load_settings(environ=environ, project_root=isolated_environment)


#: The core's constraints and indexes, which a test's empty database keeps (see ``graph``).
CORE_SCHEMA = frozenset(statement.name for statement in core_statements(1))


@pytest.fixture
def graph(neo4j_server: Neo4jServer, settings: Settings) -> Iterator[Graph]:
    """A connection to an empty database: no nodes, and no constraint or index but the core's.

    Those are kept from test to test: creating or dropping any index empties Neo4j's cache of query
    plans, and every test that starts a worker would otherwise apply the schema and plan its
    queries afresh. A vector index of another dimension than a test's embedder makes is built again
    by the schema's own step for indexes that hold no vector (:mod:`mkg_core.schema`).
    """
    with Graph.connect(settings) as g:
        reset_database(g, keep=CORE_SCHEMA)
        yield g


@pytest.fixture
def capture(isolated_environment: Path, request: pytest.FixtureRequest) -> Iterator[CaptureRig]:
    """Real hook and worker processes on a private state folder.

    Pointed at the test Neo4j when the test also uses ``graph`` or ``neo4j_server``; otherwise at a
    port where nothing listens, so events wait in the spool.
    """
    state = Path(tempfile.mkdtemp(prefix="mkg-state-"))
    env = dict(os.environ)
    env.update(
        {
            "MKG_STATE_DIR": str(state),
            "MKG_WORKER_AUTOSTART": "0",
            "MKG_WORKER_IDLE_SECONDS": "60",
            "NEO4J_URI": f"bolt://127.0.0.1:{free_port()}",
            **ANSWER_DEADLINES,
        }
    )
    if "neo4j_server" in request.fixturenames or "graph" in request.fixturenames:
        server: Neo4jServer = request.getfixturevalue("neo4j_server")
        env.update(server.settings_env())
    rig = CaptureRig(env=env, paths=runtime.Paths(str(state)))
    try:
        yield rig
    finally:
        rig.close()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A local OpenAI-compatible server with scripted answers (see :mod:`mkg_core.testing.fakellm`)."""
    with FakeLLM().running() as fake:
        yield fake


#: Markers of the slowest tests (fresh virtual environments, real harness CLIs).
SLOW_MARKERS = ("install", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest tests first (stable otherwise): with parallel workers (``make test`` runs
    ``pytest -n 2``) a long test started last would keep one worker busy while the other waits."""
    items.sort(key=lambda item: not any(item.get_closest_marker(name) for name in SLOW_MARKERS))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Finalize leftover objects now, quietly.

    Clients used in-process by the tests (litellm's asyncio helpers) can leave event-loop sockets to
    the garbage collector; collected after the run, with warnings as errors, they would fail a run
    whose every test passed. Warnings raised inside tests are unaffected.
    """
    import gc
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
