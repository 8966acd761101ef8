"""Helpers for tests that run real tools: CPU burners, npm and PyPI tools cached in ``.cache``, MCP
clients, golden payloads, a file served over HTTP on 127.0.0.1."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..harness import HarnessAdapter
from .paths import BIN_DIR, REPO_ROOT


@dataclass
class ServedFile:
    url: str
    #: The paths asked for, in order.
    requests: list[str]


@contextlib.contextmanager
def serve_file(path: Path) -> Iterator[ServedFile]:
    """``path``'s folder over HTTP on 127.0.0.1 (as a package index's file host serves a file)."""
    served = ServedFile("", [])

    class Handler(http.server.SimpleHTTPRequestHandler):
        def send_head(self) -> Any:
            served.requests.append(self.path)
            return super().send_head()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(path.parent))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}/{path.name}"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


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


#: How many times an npm install is tried before the test that needs it fails.
NPM_ATTEMPTS = 3


@dataclass(frozen=True)
class NpmTool:
    """A command from a pinned npm package, installed by :func:`npm_tool` into ``.cache/<folder>``."""

    spec: str
    folder: str
    binary: str
    #: Options for npm (``--ignore-scripts`` skips optional native builds a headless run does not need).
    options: tuple[str, ...] = ()

    def path(self) -> Path:
        """The command, installed first if it is not there yet."""
        return npm_tool(self.spec, self.folder, self.binary, *self.options)


#: The CLIs the tests drive, pinned. ``make prefetch`` installs them (:func:`prefetch_npm_tools`)
#: while the checks run, so no test waits for npm.
NPM_TOOLS = {
    "claude": NpmTool("@anthropic-ai/claude-code@2.1.197", "claude-code-2.1.197", "node_modules/.bin/claude"),
    "codex": NpmTool("@openai/codex@0.171.0", "codex-0.171.0", "node_modules/.bin/codex"),
    "gemini": NpmTool(
        "@google/gemini-cli@0.61.0", "gemini-cli-0.61.0", "node_modules/.bin/gemini", ("--ignore-scripts",)
    ),
    # The newest Inspector that runs on Node 20.
    "inspector": NpmTool(
        "@modelcontextprotocol/inspector@0.15.0", "mcp-inspector", "node_modules/.bin/mcp-inspector"
    ),
}


def prefetch_npm_tools() -> list[Path]:
    """Install every tool of :data:`NPM_TOOLS` that is not cached yet, several at once (npm mostly
    waits on the network); returns their commands."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(NPM_TOOLS)) as pool:
        return list(pool.map(NpmTool.path, NPM_TOOLS.values()))


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
            for attempt in range(1, NPM_ATTEMPTS + 1):  # the registry drops a request now and then
                result = subprocess.run(
                    [*npm, "--prefix", str(root), spec],
                    capture_output=True,
                    text=True,
                    timeout=900,
                    check=False,
                )
                if result.returncode == 0:
                    break
                if attempt == NPM_ATTEMPTS:
                    raise RuntimeError(f"npm install {spec} failed {attempt} times:\n{result.stderr[-3000:]}")
                time.sleep(5 * attempt)
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


def uv(*args: str, env: Mapping[str, str] | None = None, timeout: float = 900) -> str:
    """Run uv (a dev dependency) with its package cache in ``<repo>/.cache/uv``, which outlives the
    throw-away HOME of a test; returns its output, or fails the test with what uv said. Tests that
    install packages into fresh environments use it: it installs what pip would from the same
    metadata, from one cache shared by every test and run."""
    from uv import find_uv_bin

    environ = {**(env if env is not None else os.environ), "UV_CACHE_DIR": str(REPO_ROOT / ".cache" / "uv")}
    result = subprocess.run(
        [find_uv_bin(), *args], env=environ, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"uv {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


def fresh_venv(path: Path, *requirements: str, env: Mapping[str, str] | None = None) -> Path:
    """A new virtual environment at ``path`` (this interpreter's Python, no pip) with
    ``requirements`` installed: install arguments such as a path, ``-e path`` or ``wheel[extra]``.
    Returns its ``bin`` folder."""
    uv("venv", "-q", "--python", sys.executable, str(path), env=env)
    if requirements:
        uv("pip", "install", "-q", "--python", str(path / "bin" / "python"), *requirements, env=env)
    return path / "bin"


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


async def mcp_call(client: Any, name: str, /, **arguments: Any) -> tuple[bool, Any]:
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
