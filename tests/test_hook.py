"""The hook process: fast, fail-open, and nothing half-written. Runs the real ``mkg-hook``."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mkg_core import degraded, hook, runtime
from mkg_core.payload import FIELD_LIMIT
from mkg_core.spool import Spool
from mkg_core.testing import BIN_DIR, CaptureRig

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
CODEX = ROOT / "harnesses" / "mkg-codex" / "tests" / "payloads"


def _payload(folder: Path, event: str) -> dict:
    return json.loads((folder / f"{event}.json").read_text())


def _rows(rig: CaptureRig) -> list[dict]:
    if not os.path.exists(rig.paths.spool):
        return []
    with Spool(rig.paths.spool) as spool:
        return [
            {"event_id": r.event_id, "client": r.client, "event": r.event, "record": r.record}
            for r in spool.pending(1000)
        ]


def test_hook_fast_path_imports_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import mkg_core.hook; "
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = {name.split(".")[0] for name in result.stdout.split()}
    stdlib = set(sys.stdlib_module_names) | {"mkg_core"}
    assert loaded <= stdlib, loaded - stdlib
    # nothing heavy even from the standard library
    assert not loaded & {"typing", "dataclasses", "subprocess", "pathlib", "socket", "logging"}


@pytest.mark.parametrize("folder,client", [(CLAUDE, "claude"), (CODEX, "codex")], ids=["claude", "codex"])
def test_every_captured_payload_is_spooled(capture: CaptureRig, folder: Path, client: str) -> None:
    events = sorted(path.stem for path in folder.glob("*.json"))
    for event in events:
        result = capture.hook(client, event, (folder / f"{event}.json").read_bytes())
        assert result.returncode == 0
        assert result.stderr == b"", result.stderr
    rows = _rows(capture)
    assert sorted(row["event"] for row in rows) == events
    for row in rows:
        payload = _payload(folder, row["event"])
        assert row["client"] == client
        assert row["event_id"].startswith(f"{client}:{payload['session_id']}:{row['event']}:")
        assert row["record"]["payload"] == payload
        assert row["record"]["payload_bytes"] == len((folder / f"{row['event']}.json").read_bytes())


def test_cold_start_never_blocks_past_the_deadline(capture: CaptureRig) -> None:
    started = time.monotonic()
    result = capture.hook(
        "claude",
        "UserPromptSubmit",
        _payload(CLAUDE, "UserPromptSubmit"),
        env={"MKG_HOOK_DEADLINE_PROMPT": "0.3", "MKG_WORKER_AUTOSTART": "1"},
    )
    elapsed = time.monotonic() - started
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert elapsed < 3  # the deadline plus process start; the worker was still starting
    assert len(_rows(capture)) == 1
    capture.wait_for(lambda: runtime.worker_pid(capture.paths) is not None, 30, "the worker it started")


def test_a_deadline_counts_from_the_process_start() -> None:
    """Python starting slowly on a busy machine spends the hook's deadline too."""
    code = (
        "import time; time.sleep(0.5); from mkg_core.hook import process_started; "
        "print(time.monotonic() - process_started())"
    )
    waited = float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    )
    assert 0.5 <= waited < 60


def test_a_traced_hook_says_where_its_time_went(capture: CaptureRig, tmp_path: Path) -> None:
    """MKG_HOOK_TRACE: one line per hook, its steps in order from the process start, the CPU time
    and the time it waited for a CPU (what tells a busy machine from slow work)."""
    trace = tmp_path / "trace.jsonl"
    env = {"MKG_HOOK_TRACE": str(trace)}
    capture.hook("claude", "PreToolUse", _payload(CLAUDE, "PreToolUse"), env=env)
    capture.hook("claude", "PreToolUse", b"not json", env=env)
    first, refused = (json.loads(line) for line in trace.read_text().splitlines())
    steps = first["steps"]
    assert list(steps) == ["ready", "read", "decoded", "scrubbed", "spooled", "worker", "done"]
    assert 0 < steps["ready"] <= steps["spooled"] <= steps["done"] < 30
    assert first["argv"][-1] == "PreToolUse" and first["cpu_s"] > 0 and first["cpu_wait_s"] >= 0
    assert list(refused["steps"]) == ["ready", "read", "done"]  # a refused payload stops early
    assert oct(trace.stat().st_mode & 0o777) == "0o600"


def test_without_a_worker_or_autostart_nothing_waits(capture: CaptureRig) -> None:
    started = time.monotonic()
    result = capture.hook(
        "claude",
        "SessionStart",
        _payload(CLAUDE, "SessionStart"),
        env={"MKG_HOOK_DEADLINE_SESSION_START": "20"},
    )
    assert result.returncode == 0
    assert degraded.WORKER_STOPPED in json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert time.monotonic() - started < 10  # did not sit out the 20 s deadline


def test_the_same_payload_twice_is_two_events(capture: CaptureRig) -> None:
    payload = _payload(CLAUDE, "PreToolUse")
    capture.hook("claude", "PreToolUse", payload)
    capture.hook("claude", "PreToolUse", payload)
    ids = [row["event_id"] for row in _rows(capture)]
    assert len(set(ids)) == 2  # the hook's receive time is part of the id


MALFORMED = [
    pytest.param(b"", "empty payload", id="empty"),
    pytest.param(b"{not json", "not valid JSON", id="invalid-json"),
    pytest.param(b"[1, 2, 3]", "must be a JSON object, got an array", id="json-array"),
    pytest.param(b'{"hook_event_name": "Stop"}', "no session_id", id="missing-session"),
    pytest.param(b'{"session_id": ["x"]}', "no session_id", id="session-not-text"),
    pytest.param(b"\xff\xfe\x00\x81garbage\x80" * 100, "not UTF-8", id="binary-garbage"),
    pytest.param(b'{"session_id": "s"}', "no valid event name", id="no-event-name"),
]


@pytest.mark.parametrize(("data", "reason"), MALFORMED)
def test_malformed_input_exits_zero_with_one_line(capture: CaptureRig, data: bytes, reason: str) -> None:
    capture.hook("claude", "PreToolUse", _payload(CLAUDE, "PreToolUse"))  # a good row first
    result = capture.hook("claude", None, data)
    assert result.returncode == 0
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mkg-hook: ") and reason in lines[0], lines
    rows = _rows(capture)
    assert len(rows) == 1  # nothing half-written, and the spool still reads


@pytest.mark.parametrize("escape", ["\\ud83d", "\\udc00", "\\uDFFF"], ids=["high", "low", "low-upper"])
def test_a_lone_surrogate_of_either_half_is_repaired_and_recorded(capture: CaptureRig, escape: str) -> None:
    head = b'{"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "cut '
    data = head + escape.encode() + b' here"}'
    result = capture.hook("claude", "UserPromptSubmit", data)
    assert result.returncode == 0 and b"not recorded" not in result.stderr, result.stderr
    [row] = _rows(capture)
    assert row["record"]["payload"]["prompt"] == "cut \ufffd here"
    assert row["record"]["repaired"]


def test_closed_standard_streams_still_exit_zero_and_record(capture: CaptureRig) -> None:
    argv = [str(capture.bin_dir / "mkg-hook"), "--client", "claude", "Stop"]
    payload = json.dumps(_payload(CLAUDE, "Stop")).encode()
    quiet = subprocess.run(  # no stdout nor stderr at all: nothing to report to, the event is kept
        ["sh", "-c", '"$@" >&- 2>&-', "sh", *argv], input=payload, env=capture.env, timeout=120, check=False
    )
    assert quiet.returncode == 0
    assert [row["event"] for row in _rows(capture)] == ["Stop"]
    blind = subprocess.run(
        ["sh", "-c", '"$@" <&- 2>&-', "sh", *argv], env=capture.env, timeout=120, check=False
    )
    assert blind.returncode == 0  # no stdin: nothing to record, and still no failure
    assert len(_rows(capture)) == 1


def test_fifty_megabyte_payload_is_recorded_with_truncated_fields(capture: CaptureRig) -> None:
    payload = {**_payload(CLAUDE, "PostToolUse"), "tool_response": "y" * (50 * 1024 * 1024)}
    data = json.dumps(payload).encode()
    result = capture.hook("claude", "PostToolUse", data)
    assert result.returncode == 0
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "truncated (tool_response)" in lines[0]
    [row] = _rows(capture)
    stored = row["record"]["payload"]["tool_response"]
    assert stored.startswith("y" * 1000) and stored.endswith(f"…[truncated: {50 * 1024 * 1024} chars]")
    assert len(stored) < FIELD_LIMIT + 100
    assert row["record"]["truncated"] == ["tool_response"]
    assert row["record"]["payload_bytes"] == len(data)


def test_payload_over_the_read_limit_is_refused_with_a_reason(
    capture: CaptureRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process with a small limit: reading 64 MiB through a pipe would only slow the suite.
    monkeypatch.setattr(hook, "MAX_PAYLOAD_BYTES", 1024)
    import io

    err = io.StringIO()
    data = json.dumps({**_payload(CLAUDE, "Stop"), "pad": "z" * 5000}).encode()
    code = hook.main(["--client", "claude", "Stop"], stdin=io.BytesIO(data), stderr=err, environ=capture.env)
    assert code == 0
    assert "payload larger than" in err.getvalue() and _rows(capture) == []


def test_private_spans_and_secrets_never_reach_the_spool(capture: CaptureRig) -> None:
    payload = {
        **_payload(CLAUDE, "UserPromptSubmit"),
        "prompt": "deploy with <private>the vault passphrase is blue-42</private> and key sk-ant-api03-"
        + "Q" * 40,
    }
    capture.hook("claude", "UserPromptSubmit", payload, env={"MKG_HOOK_DEADLINE_PROMPT": "0"})
    raw = Path(capture.paths.spool).read_bytes() + b"".join(
        Path(capture.paths.spool + suffix).read_bytes()
        for suffix in ("-wal",)
        if os.path.exists(capture.paths.spool + suffix)
    )
    assert b"blue-42" not in raw and b"Q" * 40 not in raw
    [row] = _rows(capture)
    assert row["record"]["payload"]["prompt"] == "deploy with [private] and key [REDACTED:anthropic-key]"


@pytest.mark.parametrize(
    "env",
    [{"MKG_DISABLED": "1"}, {"MKG_DISABLED": "true"}, {"MKG_IN_EXTRACTION": "1"}],
    ids=["disabled", "disabled-true", "in-extraction"],
)
def test_switches_make_the_hook_a_no_op(capture: CaptureRig, env: dict[str, str]) -> None:
    result = capture.hook(
        "claude", "SessionStart", _payload(CLAUDE, "SessionStart"), env={**env, "MKG_WORKER_AUTOSTART": "1"}
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert not os.path.exists(capture.paths.spool)
    assert runtime.worker_pid(capture.paths) is None


def test_a_mkg_disable_file_turns_capture_off_below_it(capture: CaptureRig, tmp_path: Path) -> None:
    project = tmp_path / "secret-project"
    (project / "src").mkdir(parents=True)
    (project / ".mkg-disable").touch()
    payload = {**_payload(CLAUDE, "PreToolUse"), "cwd": str(project / "src")}
    result = capture.hook("claude", "PreToolUse", payload)
    assert (result.returncode, result.stderr) == (0, b"")
    assert _rows(capture) == []
    capture.hook("claude", "PreToolUse", {**payload, "cwd": str(tmp_path)})
    assert len(_rows(capture)) == 1


def test_full_disk_exits_zero_and_says_why(capture: CaptureRig) -> None:
    capture.hook("claude", "PreToolUse", _payload(CLAUDE, "PreToolUse"))  # the spool exists
    size = sum(
        os.path.getsize(capture.paths.spool + s)
        for s in ("", "-wal")
        if os.path.exists(capture.paths.spool + s)
    )

    big = {**_payload(CLAUDE, "PostToolUse"), "tool_response": "w" * 200_000}
    proc = subprocess.Popen(
        [str(BIN_DIR / "mkg-hook"), "--client", "claude", "PostToolUse"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=capture.env,
    )
    # The disk is "full" at the current size. Set on the hook before it is sent its payload (it writes
    # nothing before reading it): a preexec_fn may deadlock in a process with threads.
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, size))
    try:
        _, stderr = proc.communicate(json.dumps(big).encode(), timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    [line] = stderr.decode().splitlines()
    assert "not recorded" in line
    assert len(_rows(capture)) == 1  # the earlier event is intact


def test_help_and_unknown_options(capture: CaptureRig) -> None:
    result = subprocess.run(
        [str(BIN_DIR / "mkg-hook"), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0 and "usage: mkg-hook" in result.stdout
    result = capture.hook("claude", "--bogus", _payload(CLAUDE, "Stop"))
    assert result.returncode == 0 and b"unknown option" in result.stderr


def test_spool_files_are_owner_only(capture: CaptureRig) -> None:
    capture.hook("claude", "Stop", _payload(CLAUDE, "Stop"))
    assert os.stat(capture.paths.root).st_mode & 0o777 == 0o700
    assert os.stat(capture.paths.spool).st_mode & 0o777 == 0o600
    with sqlite3.connect(capture.paths.spool) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_hook_starts_the_worker_once_for_a_burst(capture: CaptureRig) -> None:
    env = {"MKG_WORKER_AUTOSTART": "1"}
    procs = [
        subprocess.Popen(
            [str(BIN_DIR / "mkg-hook"), "--client", "claude", "PreToolUse"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**capture.env, **env},
        )
        for _ in range(5)
    ]
    for proc in procs:
        proc.communicate(json.dumps(_payload(CLAUDE, "PreToolUse")).encode(), timeout=60)
        assert proc.returncode == 0
    capture.wait_for(lambda: runtime.worker_pid(capture.paths) is not None, 60, "the worker to start")
    pid = runtime.worker_pid(capture.paths)
    assert pid and pid > 0
    time.sleep(1.0)
    assert runtime.worker_pid(capture.paths) == pid  # still the one worker
