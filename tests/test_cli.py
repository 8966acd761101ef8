"""The command line, run as a user runs it (console scripts in subprocesses) or through click."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mkg_core import envfiles
from mkg_core.cli import build_cli
from mkg_core.envfiles import parse_env_file
from mkg_core.graph import Graph
from mkg_core.host import PluginHost
from mkg_core.settings import load_settings
from mkg_core.testing import Neo4jServer, drop_schema, free_port

BIN = Path(sys.executable).parent


def run(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        input=stdin,
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        timeout=120,
        check=False,
    )


def test_mkg_plugins_prints_json() -> None:
    result = run(str(BIN / "mkg"), "plugins", env={**os.environ, "MKG_LOAD_PLUGINS": ""})
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["name"] for row in rows] == ["mkg_core.builtin.core"]
    assert rows[0]["hooks"] == [
        "mkg_register_capture_handlers",
        "mkg_register_context_providers",
        "mkg_register_embedders",
        "mkg_register_jobs",
        "mkg_register_query_tools",
        "mkg_register_schema_statements",
        "mkg_register_tool_groups",
    ]
    groups = {group["name"]: group for group in rows[0]["tool_groups"]}
    assert groups["memory"]["mounted"] and "project_get_context" in groups["memory"]["tools"]
    assert groups["graph"]["tools"] == ["neo4j_get_schema", "neo4j_read_cypher"]


def test_mcp_server_help_and_bad_flags() -> None:
    for argv in ([str(BIN / "meta-knowledge-graph"), "--help"], [str(BIN / "mkg"), "serve", "--help"]):
        result = run(*argv)
        assert result.returncode == 0, result.stderr
        for flag in ("--db-url", "--username", "--password", "--database", "--transport", "--host", "--port"):
            assert flag in result.stdout
    bad = run(str(BIN / "meta-knowledge-graph"), "--transport", "carrier-pigeon")
    assert bad.returncode == 2 and "carrier-pigeon" in bad.stderr and bad.stdout == ""


def test_entities_link_refuses_all_with_a_project() -> None:
    result = run(str(BIN / "mkg"), "entities", "link", "--all", "--project", "billing")
    assert result.returncode == 1 and "--all links every project" in result.stderr, result.stderr


def test_setup_non_interactive_writes_a_private_file(isolated_environment: Path, host) -> None:
    cli = build_cli(host)
    result = CliRunner().invoke(
        cli,
        [
            "setup",
            "--non-interactive",
            "--neo4j-uri",
            "bolt://db:7687",
            "--neo4j-password",
            "s3cret pass",
            "--openai-api-key",
            "sk-test",
            "--set",
            "MKG_CONSISTENCY_TOPK=4",
        ],
    )
    assert result.exit_code == 0, result.output
    path = isolated_environment / ".config" / "meta-knowledge-graph" / ".env"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    values = parse_env_file(path)
    assert values["NEO4J_URI"] == "bolt://db:7687"
    assert values["NEO4J_PASSWORD"] == "s3cret pass"
    assert values["MKG_CONSISTENCY_TOPK"] == "4"
    assert values["NEO4J_USERNAME"] == "neo4j"  # defaults filled in
    # A second run keeps what is there and changes only what is given.
    CliRunner().invoke(cli, ["setup", "--non-interactive", "--neo4j-database", "memory"])
    values = parse_env_file(path)
    assert (values["NEO4J_PASSWORD"], values["NEO4J_DATABASE"]) == ("s3cret pass", "memory")
    # and the settings loader reads it back
    config = CliRunner().invoke(cli, ["config", "--json"])
    rows = {row["variable"]: row for row in json.loads(config.output)["settings"]}
    assert rows["NEO4J_DATABASE"]["value"] == "memory"
    assert rows["NEO4J_PASSWORD"]["value"] != "s3cret pass"


def test_setup_prompts_for_secrets_without_echo(isolated_environment: Path) -> None:
    """Interactive run in a real terminal: the password typed is never shown."""
    pid, fd = _setup_in_a_terminal({**os.environ, "TERM": "dumb"})
    answers = {
        b"Neo4j URI": "bolt://h:1",
        b"Neo4j password": "topsecretpw",
        b"Diffbot token": "dbt-0123456789",
    }
    output = b""
    deadline = time.monotonic() + 120
    while True:  # every question ends in ": " (the core's, then the installed plugins')
        assert time.monotonic() < deadline, output  # questions without end
        said = _read_until(fd, (b": ", b"Run `mkg doctor`"))
        output += said
        if b"Run `mkg doctor`" in said:
            break
        question = said.rsplit(b"\n", 1)[-1]
        answer = next((a for q, a in answers.items() if q in question), "")
        os.write(fd, answer.encode() + b"\r")
    _reap(pid)
    assert b"topsecretpw" not in output and b"dbt-0123456789" not in output
    values = parse_env_file(isolated_environment / ".config" / "meta-knowledge-graph" / ".env")
    assert (values["NEO4J_URI"], values["NEO4J_PASSWORD"]) == ("bolt://h:1", "topsecretpw")
    if importlib.util.find_spec("mkg_diffbot"):  # a plugin's question, asked because it is installed
        assert values["DIFFBOT_TOKEN"] == "dbt-0123456789"


def _setup_in_a_terminal(env: dict[str, str]) -> tuple[int, int]:
    """`mkg setup` in a new pseudo-terminal: its pid and the terminal's descriptor."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # child: never back into pytest, even when the exec fails
        try:
            os.execve(str(BIN / "mkg"), [str(BIN / "mkg"), "setup"], env)
        finally:
            os._exit(127)
    return pid, fd


def _reap(pid: int, limit: float = 120.0, *, interrupt: int | None = None) -> None:
    """Wait for the child to end; past ``limit`` seconds it is killed and the test fails.

    With ``interrupt`` (the terminal), Ctrl-C is typed every second until it ends, as a person
    would: a Ctrl-C typed in the instant between a prompt appearing and Python reading it is lost
    (the interpreter sees the signal before it starts waiting for input, and waits on)."""
    deadline = time.monotonic() + limit
    typed = 0.0
    while time.monotonic() < deadline:
        if interrupt is not None and time.monotonic() - typed >= 1.0:
            os.write(interrupt, b"\x03")
            typed = time.monotonic()
        if os.waitpid(pid, os.WNOHANG)[0]:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"`mkg setup` had not ended after {limit:.0f} s: killed")


def _read_until(fd: int, markers: tuple[bytes, ...], limit: float = 60.0) -> bytes:
    import select

    data = b""
    deadline = time.monotonic() + limit
    while not any(m in data for m in markers) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 1024)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    assert any(m in data for m in markers), data
    return data


def test_invalid_settings_are_reported_by_config(host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "many")
    result = CliRunner().invoke(build_cli(host), ["config"])
    assert result.exit_code == 1
    assert "EMBEDDING_DIMENSIONS (from the environment)" in result.output


def test_project_shows_identity(tmp_path: Path) -> None:
    repo = tmp_path / "service"
    (repo / ".git").mkdir(parents=True)
    result = run(str(BIN / "mkg"), "project", "--path", str(repo))
    data = json.loads(result.stdout)
    assert data["project"]["root"] == str(repo.resolve())
    assert data["project"]["id"].startswith("service-")


def test_doctor_against_real_neo4j(neo4j_server, graph, isolated_environment: Path) -> None:
    env = {**os.environ, **neo4j_server.settings_env(), "MKG_LOAD_PLUGINS": ""}
    drop_schema(graph)  # a store MKG has never set up
    before = run(str(BIN / "mkg"), "doctor", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(before.stdout)}
    assert before.returncode == 1
    assert checks["neo4j"]["status"] == "ok" and "Neo4j/2026." in checks["neo4j"]["detail"]
    assert checks["schema"]["status"] == "fail" and checks["schema"]["fix"] == "run `mkg schema apply`"
    assert checks["harness"]["status"] == "warn"

    applied = run(str(BIN / "mkg"), "schema", "apply", env=env)
    assert applied.returncode == 0, applied.stderr
    assert "indexes online" in applied.stdout

    after = run(str(BIN / "mkg"), "doctor", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(after.stdout)}
    assert checks["schema"]["status"] == "ok"
    assert checks["llm"]["status"] == "warn" and "OPENAI_API_KEY" in checks["llm"]["detail"]
    assert after.returncode == 0, after.stdout

    changed = run(str(BIN / "mkg"), "doctor", "--json", env={**env, "EMBEDDING_DIMENSIONS": "384"})
    checks = {c["name"]: c for c in json.loads(changed.stdout)}
    assert changed.returncode == 1
    assert (
        "project_learning_vector has 1536 dimensions, memory's vectors have 384"
        in checks["vector dimensions"]["detail"]
    )


def test_doctor_when_neo4j_is_down(isolated_environment: Path) -> None:
    from mkg_core.testing import free_port

    result = run(str(BIN / "mkg"), "--db-url", f"bolt://127.0.0.1:{free_port()}", "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert result.returncode == 1
    assert checks["neo4j"]["status"] == "fail"
    assert "not reachable" in checks["neo4j"]["detail"]


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        pytest.param("notauri", "is not a Neo4j URI", id="no-scheme"),
        pytest.param("bolt://localhost:notaport", "is not a valid URI", id="port-not-a-number"),
    ],
)
def test_a_malformed_neo4j_uri_is_one_line_in_every_command(uri: str, problem: str) -> None:
    doctor = run(str(BIN / "mkg"), "--db-url", uri, "doctor", "--json")
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr, doctor.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["neo4j"]["status"] == "fail"
    assert problem in checks["neo4j"]["detail"] and "NEO4J_URI" in checks["neo4j"]["fix"]
    for command in (["schema", "apply"], ["entities", "list"]):
        result = run(str(BIN / "mkg"), "--db-url", uri, *command)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("Error: NEO4J_URI ") and problem in result.stderr
        assert "--db-url" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_a_neo4j_that_is_down_is_one_line_at_once(isolated_environment: Path) -> None:
    env = {**os.environ, "NEO4J_URI": f"bolt://127.0.0.1:{free_port()}"}
    for command in (["review"], ["prompt", "history"], ["entities", "list"]):
        result = subprocess.run(
            [str(BIN / "mkg"), *command], env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 1, (command, result.stderr)
        # Before, each query's retries were waited out and logged first (16-35 s in all).
        assert "will be retried" not in result.stderr, (command, result.stderr)
        assert result.stderr.startswith("Error: Neo4j is not reachable") and result.stderr.count("\n") == 1
    off = subprocess.run(
        [str(BIN / "mkg"), "backfill-embeddings"], env=env, capture_output=True, text=True, timeout=120
    )
    assert off.returncode == 1 and off.stderr == (  # EMBEDDING_MODEL=none here: it says so
        "Error: embeddings are off (EMBEDDING_MODEL=none): set EMBEDDING_MODEL to a model, or to `local`\n"
    )


def test_a_project_the_graph_does_not_have_is_named_with_the_ones_it_has(
    graph: Graph, neo4j_server: Neo4jServer, monkeypatch: pytest.MonkeyPatch, host: PluginHost
) -> None:
    """A mistyped `--project` read as an empty answer ("nothing waits"); now the command says the
    graph has no such project and which it has, on stderr, so `--json` stays JSON."""
    for key, value in {**neo4j_server.settings_env(), "MKG_USER_ID": "ana@example.com"}.items():
        monkeypatch.setenv(key, value)
    graph.write("UNWIND ['billing', 'web'] AS id CREATE (:Project {id: id, created_at: datetime()})")
    cli = build_cli(host)
    for command in (["review", "--json"], ["prompt", "show"], ["entities", "list", "--json"]):
        typo = CliRunner().invoke(cli, [*command, "--project", "biling"])
        assert typo.exit_code == 0, typo.output
        assert "Note: the graph has no project 'biling' (projects it has: " in typo.stderr, command
        assert "billing" in typo.stderr and "web" in typo.stderr
        known = CliRunner().invoke(cli, [*command, "--project", "billing"])
        assert known.exit_code == 0 and known.stderr == "", (command, known.stderr)
    listed = CliRunner().invoke(cli, ["review", "--json", "--project", "biling"])
    assert json.loads(listed.stdout)["items"] == []
    here = CliRunner().invoke(cli, ["review", "--json"])  # the current folder's project: no note
    assert here.exit_code == 0 and here.stderr == "", here.stderr


@pytest.mark.parametrize("uri", ["notauri", "http://localhost:7474", "bolt://localhost:notaport"])
def test_setup_refuses_a_uri_the_driver_cannot_use(isolated_environment: Path, host, uri: str) -> None:
    result = CliRunner().invoke(build_cli(host), ["setup", "--non-interactive", "--neo4j-uri", uri])
    assert result.exit_code == 2, result.output
    assert f"NEO4J_URI {uri!r}" in result.output
    assert not (isolated_environment / ".config" / "meta-knowledge-graph" / ".env").exists()


def test_setup_asks_again_for_a_uri_the_driver_cannot_use(isolated_environment: Path) -> None:
    pid, fd = _setup_in_a_terminal({**os.environ, "TERM": "dumb", "MKG_LOAD_PLUGINS": ""})
    output = _read_until(fd, (b"Neo4j URI",))
    os.write(fd, b"localhost:7687\r")
    output += _read_until(fd, (b"is not a Neo4j URI",))
    os.write(fd, b"bolt://localhost:7687\r")
    output += _read_until(fd, (b"Neo4j user",))
    assert output.count(b"Neo4j URI [bolt://localhost:7687]") == 2, output  # asked again
    _reap(pid, interrupt=fd)  # Ctrl-C: nothing is written
    assert not (isolated_environment / ".config" / "meta-knowledge-graph" / ".env").exists()


def _setup(host, *args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(build_cli(host), ["setup", "--non-interactive", *args])
    return result.exit_code, result.output, result.exception


def test_setup_that_cannot_write_its_file_says_why_in_one_line(
    isolated_environment: Path, host, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = isolated_environment / "real-config"
    real.mkdir()
    linked = isolated_environment / "linked-config"
    linked.symlink_to(real)
    monkeypatch.setenv("MKG_CONFIG_DIR", str(linked))
    code, output, exception = _setup(host)
    assert (code, type(exception)) == (1, SystemExit), output
    assert output.startswith(f"Error: cannot write {linked / '.env'}: {linked} is not a folder (a link")
    assert output.count("\n") == 1

    afile = isolated_environment / "afile"
    afile.write_text("")
    monkeypatch.setenv("MKG_CONFIG_DIR", str(afile / "config"))
    code, output, exception = _setup(host)
    assert (code, type(exception)) == (1, SystemExit), output
    assert output.startswith(f"Error: cannot write {afile / 'config' / '.env'}: ") and output.count("\n") == 1

    code, output, exception = _setup(host, "--path", str(afile / "mkg.env"))
    assert (code, type(exception)) == (1, SystemExit), output
    assert output == f"Error: cannot write {afile / 'mkg.env'}: {afile} is not a folder\n"


def test_setup_path_in_a_missing_folder_is_refused_and_the_folder_not_made(
    isolated_environment: Path, host
) -> None:
    missing = isolated_environment / "projects" / "billing"
    code, output, exception = _setup(host, "--path", str(missing / ".mkg.env"))
    assert (code, type(exception)) == (1, SystemExit), output
    assert f"the folder {missing} does not exist" in output and output.count("\n") == 1
    assert not (isolated_environment / "projects").exists()
    # the user's own config folder is still made when missing
    code, output, _ = _setup(host)
    assert code == 0, output
    assert (isolated_environment / ".config" / "meta-knowledge-graph" / ".env").is_file()


def test_setup_path_writes_a_projects_file_and_leaves_its_folder_alone(
    isolated_environment: Path, host, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = isolated_environment / "repo"
    repo.mkdir(mode=0o755)
    repo.chmod(0o755)
    code, output, _ = _setup(host, "--path", str(repo / ".mkg.env"), "--neo4j-database", "billing")
    assert code == 0, output
    assert stat.S_IMODE((repo / ".mkg.env").stat().st_mode) == 0o600
    assert stat.S_IMODE(repo.stat().st_mode) == 0o755  # the project's folder is the user's, not MKG's
    assert envfiles.is_trusted(os.environ, repo / ".mkg.env")  # written by `mkg setup`: read from now on
    assert load_settings(project_root=repo).neo4j_database == "billing"
    # From inside that project, the user's own file is not the one read: setup says so.
    monkeypatch.chdir(repo)
    (repo / ".git").mkdir()
    code, output, _ = _setup(host, "--neo4j-database", "memory")
    assert code == 0 and f"Note: here MKG reads {repo / '.mkg.env'} instead" in output, output


def test_ui_with_an_invalid_setting_is_one_line(host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKG_RECALL_LIMIT", "abc")
    result = CliRunner().invoke(build_cli(host), ["ui", "--no-browser"])
    assert (result.exit_code, type(result.exception)) == (1, SystemExit), result.output
    assert result.output.startswith("Error: invalid settings: MKG_RECALL_LIMIT (from the environment)")
    assert result.output.count("\n") == 1


def test_worker_with_an_unusable_state_folder_is_one_line(
    isolated_environment: Path, host, monkeypatch: pytest.MonkeyPatch
) -> None:
    afile = isolated_environment / "afile"
    afile.write_text("")
    monkeypatch.setenv("MKG_STATE_DIR", str(afile / "state"))
    result = CliRunner().invoke(build_cli(host), ["worker", "--once"])
    assert (result.exit_code, type(result.exception)) == (1, SystemExit), result.output
    assert result.output == (
        f"Error: the state folder {afile / 'state'} cannot be used (Not a directory); "
        "point MKG_STATE_DIR at a folder of yours\n"
    )


@pytest.mark.skipif(importlib.util.find_spec("mkg_sales_agent") is None, reason="needs mkg-sales-agent")
@pytest.mark.parametrize("port", ["0", "65536"])
def test_demo_refuses_a_port_out_of_range(port: str) -> None:
    # a Neo4j of the user's own that answers nowhere: were the port let through, the demo would
    # stop at it instead of setting up a Neo4j
    env = {**os.environ, "NEO4J_URI": "bolt://127.0.0.1:1"}
    result = run(str(BIN / "mkg"), "demo", "--port", port, env=env)
    assert result.returncode == 2 and "1<=x<=65535" in result.stderr, result.stderr
