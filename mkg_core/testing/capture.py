"""The capture rig: the real ``mkg-hook`` and ``mkg worker`` processes on a private state folder."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import runtime
from ..spool import Spool
from .paths import BIN_DIR

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

    def replay(
        self, client: str, folder: Path, home: Path, *, drop: Collection[int] = (), **env: str
    ) -> list[str]:
        """Send a session captured from a real CLI: ``folder`` holds its ``hooks.jsonl`` (one
        ``{"event", "payload"}`` per line) and ``transcripts/``, copied under ``home`` for the
        payloads to name. Lines numbered in ``drop`` (from 1) are left out; returns the session
        ids in order."""
        sessions: list[str] = []
        for number, line in enumerate((folder / "hooks.jsonl").read_text().splitlines(), start=1):
            record = json.loads(line)
            payload = record["payload"]
            if payload["session_id"] not in sessions:
                sessions.append(payload["session_id"])
            if number in drop:
                continue
            name = Path(payload["transcript_path"]).name
            target = home / name
            if not target.exists():
                shutil.copy(folder / "transcripts" / name, target)
            payload["transcript_path"] = str(target)
            result = self.hook(client, record["event"], payload, env=env)
            assert result.returncode == 0, result.stderr
        return sessions

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
