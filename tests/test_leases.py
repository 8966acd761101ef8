"""Leases in the graph: one worker at a time does a piece of background work, whoever asks."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from mkg_core.contrib import CaptureContext, Job
from mkg_core.events import HookEvent
from mkg_core.graph import Graph
from mkg_core.identity import ProjectRef
from mkg_core.job_runner import JobRunner
from mkg_core.leases import Lease, LeaseHeld
from mkg_core.settings import Settings
from mkg_core.spool import Spool


def test_one_holder_at_a_time_and_free_again_after_release(graph: Graph) -> None:
    first = Lease(graph, "extraction:project:p", "worker-a")
    second = Lease(graph, "extraction:project:p", "worker-b")
    with first:
        with pytest.raises(LeaseHeld, match="held by worker-a"):
            second.take()
        first.take()  # its own lease: taken again (renewed)
    with second:
        pass
    row = graph.read(
        "MATCH (l:JobLease {key: 'extraction:project:p'}) RETURN l.owner AS owner, l.runs AS runs"
    )
    assert row == [{"owner": None, "runs": 2}]


def test_an_expired_lease_is_taken_over(graph: Graph) -> None:
    Lease(graph, "k", "crashed-worker", seconds=3).take()  # taken, never freed: its worker died
    with pytest.raises(LeaseHeld):
        Lease(graph, "k", "worker-b", seconds=3).take()
    time.sleep(3.5)
    Lease(graph, "k", "worker-b", seconds=3).take()
    assert graph.read("MATCH (l:JobLease {key: 'k'}) RETURN l.owner AS o") == [{"o": "worker-b"}]


def test_a_lease_whose_process_died_on_this_machine_is_taken_at_once(graph: Graph) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        here = socket.gethostname()
        Lease(graph, "dead", f"{here}:{gone.pid}:abc", seconds=60).take()
        Lease(graph, "dead", "worker-b").take()  # its process is gone: no need to wait the minute
        assert graph.read("MATCH (l:JobLease {key: 'dead'}) RETURN l.owner AS o, l.taken_over_from AS f") == [
            {"o": "worker-b", "f": f"{here}:{gone.pid}:abc"}
        ]
        Lease(graph, "alive", f"{here}:{alive.pid}:abc", seconds=60).take()
        with pytest.raises(LeaseHeld):
            Lease(graph, "alive", "worker-b").take()
        Lease(graph, "elsewhere", f"another-host:{gone.pid}:abc", seconds=60).take()
        with pytest.raises(LeaseHeld):  # a process of another machine cannot be seen from here
            Lease(graph, "elsewhere", "worker-b").take()
    finally:
        alive.kill()
        alive.wait()


def test_a_running_holder_renews_its_lease(graph: Graph) -> None:
    with Lease(graph, "long", "worker-a", seconds=3):
        time.sleep(4.5)  # longer than the lifetime: renewed on the way
        with pytest.raises(LeaseHeld):
            Lease(graph, "long", "worker-b", seconds=3).take()


def test_workers_asking_at_the_same_moment_get_it_once(graph: Graph) -> None:
    graph.write("CREATE CONSTRAINT job_lease_key IF NOT EXISTS FOR (l:JobLease) REQUIRE l.key IS UNIQUE")
    winners: list[str] = []
    start = threading.Barrier(8, timeout=60)

    def ask(owner: str) -> None:
        start.wait()
        try:
            Lease(graph, "race", owner).take()
        except LeaseHeld:
            return
        winners.append(owner)

    threads = [threading.Thread(target=ask, args=(f"worker-{n}",), daemon=True) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), f"{thread.name} still asking after 120 s"
    assert len(winners) == 1
    assert graph.read("MATCH (l:JobLease {key: 'race'}) RETURN l.owner AS o") == [{"o": winners[0]}]


class _Counting(Job):
    name: ClassVar[str] = "counting"
    events: ClassVar[frozenset[str]] = frozenset({"Stop"})
    ran: ClassVar[list[str]] = []

    def run(self, event: HookEvent, context: CaptureContext) -> str | None:
        self.ran.append(event.session_id)
        return "counted"


def test_a_job_whose_lease_another_worker_holds_waits_without_failing(
    graph: Graph, settings: Settings, tmp_path: Path
) -> None:
    event = HookEvent(harness="claude", event="Stop", session_id="s1", source_event="Stop")
    context = CaptureContext(graph=graph, settings=settings, project=ProjectRef("p", "p", None, "env"))
    runner = JobRunner(
        {"counting": _Counting()}, lambda row: (event, context), {"jobs_run": 0, "jobs_failed": 0}
    )
    with Spool(str(tmp_path / "spool.db")) as spool:
        seq, _ = spool.append(
            event_id="e1", client="claude", event="Stop", session_id="s1", received_at="t", record={}
        )
        spool.add_job("counting", "p", seq)
        other = Lease(graph, "counting:project:p", "another-machine")
        other.take()
        assert runner.run_next(spool) is True
        assert _Counting.ran == [] and spool.job_counts()["pending"] == 1  # waiting, not failed
        assert "waiting: counting:project:p is held by another-machine" in str(
            spool.db.execute("SELECT error FROM jobs").fetchone()[0]
        )
        other.release()
        spool.db.execute("UPDATE jobs SET not_before = 0")
        assert runner.run_next(spool) is True
        assert _Counting.ran == ["s1"] and spool.job_counts()["done"] == 1
