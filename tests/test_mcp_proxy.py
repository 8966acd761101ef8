"""``meta-knowledge-graph`` as a harness starts it: a standard-library proxy to the MCP server that
lives, warm, in the per-user worker. Driven as raw JSON-RPC over stdio (what Claude Code and Codex
send), against the real worker and Neo4j."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mkg_core import envfiles, mcp_answers, mcp_proxy, runtime
from mkg_core.graph import Graph
from mkg_core.lines import LineReader
from mkg_core.testing import BIN_DIR, Neo4jServer

HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
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


class Session:
    """A harness's side of one ``meta-knowledge-graph`` process."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(BIN_DIR / "meta-knowledge-graph")],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.lines = LineReader(self.proc.stdout)
        self.next_id = 0
        self.notes: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return message.get("id")

    def reply(self, mid: Any, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.readline(deadline)
            except EOFError:
                raise AssertionError(f"the proxy exited: {self.stderr()}") from None
            if line is None:
                break
            message = json.loads(line)
            if message.get("id") == mid:
                return message
            self.notes.append(message)
        raise AssertionError(f"no answer to request {mid} in {timeout} s")

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 120) -> dict[str, Any]:
        return self.reply(self.send(method, params), timeout)

    def start(self) -> dict[str, Any]:
        answer = self.call("initialize", HELLO)
        self.send("notifications/initialized", notify=True)
        return answer

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        answer = self.call("tools/call", {"name": name, "arguments": arguments})
        assert "result" in answer, answer
        return answer

    def stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.stderr.read().decode() if self.proc.stderr else ""

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


@pytest.fixture
def env(neo4j_server: Neo4jServer, graph: Graph) -> dict[str, str]:
    return {
        **os.environ,
        **neo4j_server.settings_env(),
        "MKG_PROJECT_ID": "proxy-test",
        "MKG_USER_ID": "ana@example.com",
        "MKG_WORKER_AUTOSTART": "1",
        "EMBEDDING_MODEL": "none",
    }


def _paths(env: dict[str, str]) -> runtime.Paths:
    return runtime.Paths.from_env(env)


def _text(result: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result["result"]["content"])


def test_the_proxy_starts_the_worker_and_calls_tools_there(env: dict[str, str], graph: Graph) -> None:
    session = Session(env)
    try:
        init = session.start()
        assert init["result"]["serverInfo"]["name"] == "meta-knowledge-graph"
        assert init["result"]["protocolVersion"] == "2025-06-18"
        tools = session.call("tools/list")["result"]["tools"]
        assert {t["name"] for t in tools} == CORE_TOOLS
        added = session.tool("project_add_learning", text="The proxy reaches the worker's server.")
        assert added["result"]["isError"] is False
        read = session.tool("neo4j_read_cypher", query="MATCH (l:Learning) RETURN l.text AS text")
        assert "The proxy reaches the worker's server." in _text(read)
        refused = session.tool("neo4j_read_cypher", query="CREATE (:Hacked)")
        assert refused["result"]["isError"] is True and "read-only" in _text(refused)
        assert session.call("ping")["result"] == {}
    finally:
        session.close()
    assert runtime.worker_pid(_paths(env)) is not None  # the server lives on in the worker


def test_a_second_session_is_answered_from_the_kept_answers(env: dict[str, str]) -> None:
    first = Session(env)
    try:
        first.start()
        listed = first.call("tools/list")
        assert "result" in listed, listed
    finally:
        first.close()
    kept = mcp_answers.load_cache(_paths(env), mcp_answers.fingerprint(env, os.getcwd()))
    assert kept is not None and kept["exact"]
    assert "2025-06-18" in kept["tools"], (kept, Path(_paths(env).log).read_text())
    assert {t["name"] for t in kept["tools"]["2025-06-18"]["tools"]} == CORE_TOOLS

    # With the worker stopped, a new session still gets initialize and tools/list at once, and
    # its first tool call waits for the worker that the proxy starts again.
    subprocess.run(
        [str(BIN_DIR / "mkg"), "worker", "stop"], env=env, check=True, capture_output=True, timeout=60
    )
    assert runtime.worker_pid(_paths(env)) is None
    second = Session(env)
    try:
        second.start()
        names = {t["name"] for t in second.call("tools/list", timeout=10)["result"]["tools"]}
        assert names == CORE_TOOLS
        answer = second.tool("neo4j_read_cypher", query="RETURN 1 AS one")
        assert answer["result"]["isError"] is False
        for _ in range(5):
            second.call("tools/list")
        status = runtime.request(_paths(env), {"op": "status"}, 30)
        assert status is not None and status["mcp_sessions"] == 1  # one worker session per client
    finally:
        second.close()
    deadline = time.monotonic() + 60
    while (runtime.request(_paths(env), {"op": "status"}, 30) or {}).get("mcp_sessions") != 0:
        assert time.monotonic() < deadline, "the worker kept the closed session"
        time.sleep(0.1)


class SlowHandshakeWorker:
    """A stand-in for the worker's socket whose MCP server answers the handshake late (as a
    worker does while it warms up on a busy machine), counting the sessions opened to it."""

    def __init__(self, paths: runtime.Paths, delay: float) -> None:
        self.delay = delay
        self.sessions = 0
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(paths.socket)
        self.listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.sessions += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as lines:
            for raw in lines:
                message = json.loads(raw)
                if message.get("op") == "mcp":
                    conn.sendall(b'{"ok": true, "protocol_versions": ["2025-06-18"]}\n')
                    continue
                if message.get("method") == "initialize":
                    time.sleep(self.delay)
                    result: dict[str, Any] = {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "serverInfo": {"name": "slow", "version": "0"}}  # fmt: skip
                elif message.get("method") == "tools/list":
                    result = {"tools": []}
                else:
                    result = {"echo": message.get("method")}
                if "id" in message:
                    conn.sendall(
                        json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n"
                    )

    def close(self) -> None:
        self.listener.close()


def test_one_harness_session_opens_one_worker_session_however_slow_the_handshake(tmp_path: Path) -> None:
    paths = runtime.Paths(str(runtime.ensure_private_dir(str(tmp_path / "state"))))
    worker = SlowHandshakeWorker(paths, delay=2.0)
    client_in, proxy_in = os.pipe()
    proxy_out, client_out = os.pipe()
    proxy = mcp_proxy.Proxy(
        paths,
        {"MKG_WORKER_AUTOSTART": "0"},
        str(tmp_path),
        os.fdopen(client_in, "rb"),
        os.fdopen(client_out, "wb"),
    )
    thread = threading.Thread(target=proxy.run, daemon=True)
    thread.start()
    lines = LineReader(proxy_out)
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x", "arguments": {}}},
        ):  # fmt: skip
            os.write(proxy_in, json.dumps(message).encode() + b"\n")
            time.sleep(0.3)  # each while the handshake is still under way
        answers = {}
        deadline = time.monotonic() + 30
        while len(answers) < 2:
            line = lines.readline(deadline)
            assert line is not None, answers
            answer = json.loads(line)
            answers[answer["id"]] = answer
        assert answers[1]["result"]["serverInfo"]["name"] == "slow"
        assert answers[2]["result"] == {"echo": "tools/call"}
        assert worker.sessions == 1
    finally:
        os.close(proxy_in)
        thread.join(30)
        os.close(proxy_out)
        worker.close()


def test_stale_kept_answers_are_corrected_with_a_list_changed_notice(env: dict[str, str]) -> None:
    paths = _paths(env)
    stale_tools = {"tools": [{"name": "gone_tool", "inputSchema": {"type": "object"}}]}
    stale = {
        "initialize": {"2025-06-18": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "meta-knowledge-graph", "version": "0"}}},
        "tools": {"2025-06-18": stale_tools},
    }  # fmt: skip
    mcp_answers.save_cache(paths, "some-other-settings", stale)
    session = Session(env)
    try:
        session.start()
        assert session.call("tools/list")["result"] == stale_tools  # at once, from the kept answers
        deadline = time.monotonic() + 120
        while not any(n.get("method") == "notifications/tools/list_changed" for n in session.notes):
            assert time.monotonic() < deadline, "no list_changed notice"
            session.call("ping")
            time.sleep(0.2)
        fresh = {t["name"] for t in session.call("tools/list")["result"]["tools"]}
        assert fresh == CORE_TOOLS
    finally:
        session.close()


def test_a_worker_that_dies_gives_a_clear_error_and_the_next_call_works(env: dict[str, str]) -> None:
    session = Session(env)
    try:
        session.start()
        assert session.tool("neo4j_read_cypher", query="RETURN 1 AS one")["result"]["isError"] is False
        pid = runtime.worker_pid(_paths(env))
        assert pid and pid > 0
        mid = session.send(
            "tools/call", {"name": "neo4j_read_cypher", "arguments": {"query": "RETURN 2 AS two"}}
        )
        os.kill(pid, signal.SIGKILL)
        answer = session.reply(mid)  # answered (or failed clearly), never left hanging
        if "error" in answer:
            assert "worker" in answer["error"]["message"]
        deadline = time.monotonic() + 30
        while runtime.worker_pid(_paths(env)) == pid and time.monotonic() < deadline:
            time.sleep(0.05)  # the worker is gone for good before the next call
        again = session.tool("neo4j_read_cypher", query="RETURN 3 AS three")
        assert again["result"]["isError"] is False and "3" in _text(again)
    finally:
        session.close()


def test_without_a_worker_the_proxy_says_so(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _paths(env)
    fd = runtime.acquire_worker_lock(paths)  # "a worker is running" that never answers
    assert fd is not None
    try:
        session = Session({**env, "MKG_MCP_WORKER_WAIT": "3"})
        try:
            answer = session.call("initialize", HELLO, timeout=60)
            assert "error" in answer and "worker" in answer["error"]["message"]
        finally:
            session.close()
    finally:
        os.close(fd)


def test_refused_settings_stop_the_proxy_with_the_reason(env: dict[str, str]) -> None:
    probe = {"MKG_PLUGINS": "mkg_tool_probe", "PYTHONPATH": str(Path(__file__).parent / "plugins")}
    result = subprocess.run(
        [str(BIN_DIR / "meta-knowledge-graph")],
        input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode()
        + b"\n",
        env={**env, **probe, "MKG_PROBE_CLASH": "1"},
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert result.returncode != 0
    assert b"tool 'neo4j_read_cypher' is offered by both" in result.stderr


def test_the_proxy_imports_only_the_standard_library() -> None:
    code = (
        "import sys; import mkg_core.mcp_proxy; "
        "print([m for m in ('mcp', 'pydantic', 'neo4j', 'click', 'anyio') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.strip() == "[]"


def test_kept_answers_follow_the_project_settings_the_server_reads(tmp_path: Path) -> None:
    """A session started in a subfolder of a repository: the server reads the root's ``.mkg.env``,
    so a change to that file (not to one in the subfolder) makes other answers to keep."""
    root = tmp_path / "repo"
    sub = root / "src" / "pkg"
    sub.mkdir(parents=True)
    (root / ".git").mkdir()
    environ = {"HOME": str(tmp_path), "PATH": "/usr/bin"}
    assert envfiles.default_project_root(environ, str(sub)) == str(root)
    before = mcp_answers.fingerprint(environ, str(sub))
    (root / ".mkg.env").write_text("MKG_PROJECT_ID=billing\n")
    untrusted = mcp_answers.fingerprint(environ, str(sub))
    assert untrusted != before
    envfiles.trust_env_file(environ, root / ".mkg.env")  # `mkg trust`: now the server reads it
    written = mcp_answers.fingerprint(environ, str(sub))
    assert written != untrusted
    (sub / ".mkg.env").write_text("MKG_PROJECT_ID=ignored\n")  # not read by the server
    assert mcp_answers.fingerprint(environ, str(sub)) == written
    elsewhere = {**environ, "MKG_PROJECT_ROOT": str(sub)}  # an explicit root wins
    assert envfiles.default_project_root(elsewhere, str(sub)) == str(sub)
    assert mcp_answers.fingerprint(elsewhere, str(sub)) != written
    outside = tmp_path / "loose"  # no repository: the folder itself
    outside.mkdir()
    assert envfiles.default_project_root(environ, str(outside)) == str(outside)
