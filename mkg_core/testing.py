"""Shared pytest fixtures: fresh plugin managers, isolated settings and a real Neo4j.

Loaded by the root ``conftest.py``. The Neo4j fixture starts the dev launcher
(``devtools/neo4j/neo4j-dev``) on a free port with a throw-away store, unless ``NEO4J_URI`` is set,
in which case that server is used (with ``NEO4J_USERNAME`` / ``NEO4J_PASSWORD``). Every test that
asks for ``graph`` gets an empty database: no nodes, no constraints, no indexes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy
import pytest

from . import runtime
from .fakellm import FakeLLM
from .graph import Graph
from .harness import HarnessAdapter
from .host import PluginHost
from .plugins import make_plugin_manager
from .settings import Settings, load_settings
from .spool import Spool

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Where this interpreter's console scripts (mkg, mkg-hook) are installed.
BIN_DIR = Path(sys.executable).parent
LAUNCHER = REPO_ROOT / "devtools" / "neo4j" / "neo4j-dev"
TEST_PASSWORD = "mkg-test-password"

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


@contextlib.contextmanager
def cpu_burners(count: int | None = None) -> Iterator[None]:
    """Busy loops on every core (or ``count``), for tests that must hold on a loaded machine."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(count if count is not None else os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def first_model_request(bodies: list[str], marker: str) -> str:
    """The first request body that is a model request (holds ``marker``, such as ``"messages"``)."""
    for body in bodies:
        if marker in body:
            return body
    raise AssertionError(f"no model request among {len(bodies)} bodies")


def npm_tool(spec: str, folder: str, binary: str, *options: str) -> Path:
    """A command from an npm package (``spec`` pins the version), installed once into
    ``<repo>/.cache/<folder>`` (git-ignored) and reused by later runs; ``options`` go to npm
    (``--ignore-scripts`` skips optional native builds a headless run does not need)."""
    root = REPO_ROOT / ".cache" / folder
    path = root / binary
    with _cache_lock(folder):
        if not path.exists():
            root.mkdir(parents=True, exist_ok=True)
            npm = ["npm", "install", "--no-audit", "--no-fund", "--silent", *options]
            subprocess.run(
                [*npm, "--prefix", str(root), spec],
                check=True,
                capture_output=True,
                timeout=900,
            )
    return path


def pip_tool(spec: str, folder: str) -> Path:
    """The ``bin`` folder of a virtual environment holding a PyPI package (``spec`` pins the version),
    created once in ``<repo>/.cache/<folder>`` (git-ignored) and reused by later runs. For tools
    whose dependencies cannot share MKG's environment."""
    root = REPO_ROOT / ".cache" / folder
    done = root / ".installed"
    with _cache_lock(folder):
        if not done.exists() or done.read_text() != spec:
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run(
                [sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=300
            )
            pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            result = subprocess.run([*pip, spec], capture_output=True, text=True, timeout=1200, check=False)
            if result.returncode != 0:
                raise RuntimeError(f"pip install {spec} failed:\n{result.stderr[-3000:]}")
            done.write_text(spec)
    return root / "bin"


@contextlib.contextmanager
def _cache_lock(folder: str) -> Iterator[None]:
    """One installer at a time per ``.cache`` folder, across processes (parallel test workers,
    ``make prefetch`` beside a test run)."""
    import fcntl

    locks = REPO_ROOT / ".cache" / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{folder}.lock", "w") as handle:  # closing it releases the lock
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def mcp_server(env: Mapping[str, str], *args: str, bin_dir: Path = BIN_DIR) -> Any:
    """Stdio parameters that start ``meta-knowledge-graph`` (this checkout's or ``bin_dir``'s) with env."""
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=str(bin_dir / "meta-knowledge-graph"), args=list(args), env=dict(env)
    )


def mcp_session(target: Any, work: Any, *, token: str | None = None) -> Any:
    """Connect the SDK's client to ``target`` (stdio parameters or a URL, with the bearer ``token``
    for HTTP); return ``await work(client)``."""
    import asyncio

    from mcp import Client

    async def main() -> Any:
        if isinstance(target, str) and token is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(target, http_client=http), read_timeout_seconds=120) as client,
            ):
                return await work(client)
        async with Client(target, read_timeout_seconds=120) as client:
            return await work(client)

    return asyncio.run(main())


async def mcp_call(client: Any, name: str, **arguments: Any) -> tuple[bool, Any]:
    """Call a tool; return ``(is_error, value)`` with the value decoded from structured or JSON text."""
    result = await client.call_tool(name, arguments)
    if result.is_error:
        return True, "\n".join(getattr(block, "text", "") for block in result.content)
    if result.structured_content is not None:
        data = result.structured_content
        return False, data.get("result", data) if set(data) == {"result"} else data
    text = result.content[0].text if result.content else "null"
    try:
        return False, json.loads(text)
    except ValueError:
        return False, text


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


def golden_payloads(folder: Path) -> tuple[list[Path], dict[str, Any]]:
    """The payload files under ``folder/payloads`` and the events expected of them."""
    expected = json.loads((folder / "expected_events.json").read_text())
    return sorted((folder / "payloads").glob("*.json")), expected


def check_golden_payload(adapter: HarnessAdapter, path: Path, expected: dict[str, Any]) -> None:
    """Parse a captured payload (event name from its file name) and compare with its snapshot."""
    raw = path.read_bytes()
    event = adapter.parse(raw, path.stem)
    assert json.loads(json.dumps(event.summary())) == expected[path.stem]
    assert event.raw == json.loads(raw)


#: Hook deadlines for tests that check what the worker answers, not how fast: long enough for a
#: machine whose cores are all busy (``make test-under-load``). A test about a deadline sets its own.
ANSWER_DEADLINES = {
    "MKG_HOOK_DEADLINE_SESSION_START": "30",
    "MKG_HOOK_DEADLINE_PROMPT": "30",
    "MKG_HOOK_DEADLINE_TOOL": "30",
    "MKG_HOOK_DEADLINE_CAPTURE": "30",
}


@dataclass
class CaptureRig:
    """Drives the real ``mkg-hook`` and ``mkg worker`` processes on a private state folder.

    Hooks do not start the worker on their own here (``MKG_WORKER_AUTOSTART=0``) unless a test
    asks them to, and they wait for answers as long as :data:`ANSWER_DEADLINES` says; :meth:`drain`
    runs ``mkg worker --once`` and :meth:`start_worker` a foreground worker. Every worker is stopped
    at teardown.
    """

    env: dict[str, str]
    paths: runtime.Paths
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: Where ``mkg-hook`` and ``mkg`` come from (another virtual environment's, say).
    bin_dir: Path = BIN_DIR

    def hook(
        self,
        client: str | None,
        event: str | None,
        payload: bytes | str | Mapping[str, Any],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[bytes]:
        if isinstance(payload, Mapping):
            payload = json.dumps(payload)
        data = payload.encode() if isinstance(payload, str) else payload
        argv = [str(self.bin_dir / "mkg-hook")]
        if client:
            argv += ["--client", client]
        if event:
            argv.append(event)
        return subprocess.run(
            argv,
            input=data,
            capture_output=True,
            env={**self.env, **(env or {})},
            timeout=timeout,
            check=False,
        )

    def mkg(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin_dir / "mkg"), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )

    def drain(self, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run ``mkg worker --once``: everything pending goes into the graph, then it exits."""
        result = self.mkg("worker", "--once", timeout=timeout)
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    def start_worker(self, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """A foreground ``mkg worker``; returns once it answers on its socket."""
        log = open(Path(self.paths.root) / f"foreground-{len(self.workers)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [str(self.bin_dir / "mkg"), "worker"], env={**self.env, **(env or {})}, stdout=log, stderr=log
        )
        log.close()
        self.workers.append(proc)
        self.wait_for(
            lambda: runtime.request(self.paths, {"op": "ping"}, 1.0) is not None, 60, "worker start"
        )
        return proc

    def spool(self) -> Spool:
        return Spool(self.paths.spool)

    def counts(self) -> dict[str, int]:
        with self.spool() as spool:
            return spool.counts()

    def wait_drained(self, timeout: float = 120) -> None:
        self.wait_for(lambda: self.counts()["pending"] == 0, timeout, "the spool to drain")

    @staticmethod
    def wait_for(check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def close(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        pid = runtime.worker_pid(self.paths)
        if pid and pid > 0:  # a worker a hook started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """No developer settings leak in: a throw-away HOME and config dir, no MKG/NEO4J/... variables."""
    for key in list(os.environ):
        if key.startswith(_LEAKY_PREFIXES):
            monkeypatch.delenv(key)
    home = tmp_path_factory.mktemp("home")
    state = home / ".local" / "state" / "meta-knowledge-graph"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MKG_CONFIG_DIR", str(home / ".config" / "meta-knowledge-graph"))
    monkeypatch.setenv("MKG_STATE_DIR", str(state))
    # A hook run by a test never leaves a background worker behind (the capture rig starts its own);
    # a test that lets one start (an MCP session does) has it stopped here.
    monkeypatch.setenv("MKG_WORKER_AUTOSTART", "0")
    yield home
    stop_worker(runtime.Paths(str(state)))


def stop_worker(paths: runtime.Paths, timeout: float = 20) -> None:
    """Stop the worker of ``paths`` if one runs (SIGTERM, then SIGKILL)."""
    pid = runtime.worker_pid(paths)
    if not pid or pid < 0:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while runtime.worker_pid(paths) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        if runtime.worker_pid(paths) is not None:
            os.kill(pid, signal.SIGKILL)


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


@pytest.fixture
def graph(neo4j_server: Neo4jServer, settings: Settings) -> Iterator[Graph]:
    """A connection to an empty database."""
    with Graph.connect(settings) as g:
        reset_database(g)
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
    """A local OpenAI-compatible server with scripted answers (see :mod:`mkg_core.fakellm`)."""
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
