"""The worker's background jobs: recorded when their event is stored, run one at a time.

Jobs live in the spool's ``jobs`` table (so a job pending when the worker stops runs when it starts
again), coalesced by :meth:`Job.key <mkg_core.contrib.Job.key>`. A failing job is retried with
backoff and given up after :data:`JOB_MAX_ATTEMPTS` runs; one whose event left the spool, or whose
plugin is gone, is given up at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import PayloadError
from .leases import DEFAULT_SECONDS, Lease, LeaseHeld, worker_identity
from .spool import JobRow, Spool

if TYPE_CHECKING:
    from .contrib import CaptureContext, Job
    from .events import HookEvent
    from .settings import Settings
    from .spool import SpoolRow

__all__ = ["JOB_MAX_ATTEMPTS", "JobRunner"]

log = logging.getLogger("mkg.worker")

#: A background job that keeps failing is given up after this many runs.
JOB_MAX_ATTEMPTS = 5
#: Backoff between runs of a failing job, in seconds (doubles per attempt, capped).
JOB_BACKOFF_START, JOB_BACKOFF_MAX = 5.0, 300.0
#: When a job whose lease another worker holds is tried again, in seconds.
LEASE_RECHECK = 5.0

#: What a job runs with: the event of a spool row and its capture context.
Resolve = Callable[["SpoolRow"], tuple["HookEvent", "CaptureContext"]]


class JobRunner:
    """Records jobs for stored events and runs them, in its own thread or one by one (``--once``)."""

    def __init__(
        self,
        jobs: Mapping[str, Job],
        resolve: Resolve,
        stats: dict[str, Any],
        *,
        lease_seconds: float = DEFAULT_SECONDS,
    ) -> None:
        self.jobs = dict(jobs)
        self.resolve = resolve
        self.stats = stats
        #: Who this runner is when it holds a lease in the graph.
        self.owner = worker_identity()
        self.lease_seconds = lease_seconds
        self.wake = threading.Event()
        #: The name of the job running now, if any (the worker does not idle out under it).
        self.running: str | None = None
        self.last_activity = time.monotonic()

    def record(
        self, spool: Spool, event: HookEvent, context: CaptureContext, settings: Settings, seq: int
    ) -> None:
        """Record every job this stored event triggers."""
        recorded = False
        for job in self.jobs.values():
            try:
                if job.matches(event) and job.enabled(settings):
                    spool.add_job(job.name, job.key(event, context), seq)
                    recorded = True
            except Exception as exc:
                log.warning("job %r could not be recorded for %s: %s", job.name, context.event_id, exc)
        if recorded:
            self.wake.set()

    def run_forever(self, spool_path: str, stopping: threading.Event) -> None:
        """Run jobs as they come until ``stopping`` is set (the worker's jobs thread)."""
        spool = Spool(spool_path)
        try:
            while not stopping.is_set():
                if spool.replaced():  # a corrupt spool was moved aside: follow the new one
                    spool.close()
                    spool = Spool(spool_path)
                try:
                    ran = self.run_next(spool)
                except Exception:
                    log.exception("running a background job failed")
                    ran = False
                if not ran:
                    self.wake.wait(1.0)
                    self.wake.clear()
        finally:
            spool.close()

    def run_next(self, spool: Spool) -> bool:
        """Run the oldest job that may run now; return False when there was none."""
        job_row = spool.next_job()
        if job_row is None:
            return False
        job = self.jobs.get(job_row.name)
        if job is None:  # its plugin is gone
            spool.retry_job(job_row.id, f"no job named {job_row.name!r} is installed", 0, give_up_after=1)
            return True
        self.running = job_row.name
        self.last_activity = time.monotonic()
        try:
            summary = self._run(job, job_row, spool)
        except LeaseHeld as held:  # another worker does this work now: come back when it is done
            wait = LEASE_RECHECK
            spool.postpone_job(job_row.id, f"waiting: {held}", wait)
            log.info("job %s (%s) waits: %s", job.name, job_row.key.replace("\n", " "), held)
        except Exception as exc:
            self._failed(job_row, spool, exc)
        else:
            spool.finish_job(job_row.id, summary)
            self.stats["jobs_run"] += 1
            log.info("job %s (%s) done: %s", job.name, job_row.key.replace("\n", " "), summary or "ok")
        finally:
            self.running = None
            self.last_activity = time.monotonic()
        return True

    def _run(self, job: Job, job_row: JobRow, spool: Spool) -> str | None:
        row = spool.get(job_row.seq)
        if row is None:
            raise PayloadError(f"the event that triggered job {job.name!r} is no longer in the spool")
        event, context = self.resolve(row)
        lease = job.lease(event, context)
        if lease is None:
            return job.run(event, context)
        with Lease(context.graph, f"{job.name}:{lease}", self.owner, self.lease_seconds):
            log.info(
                "job %s (%s) started, holding %s:%s",
                job.name,
                job_row.key.replace("\n", " "),
                job.name,
                lease,
            )
            try:
                return job.run(event, context)
            finally:  # logged before the lease is freed, so no other worker's start can precede it
                log.info(
                    "job %s (%s) ends, freeing %s:%s",
                    job.name,
                    job_row.key.replace("\n", " "),
                    job.name,
                    lease,
                )

    def _failed(self, job_row: JobRow, spool: Spool, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        attempts = job_row.attempts + 1
        delay = min(JOB_BACKOFF_START * 2 ** (attempts - 1), JOB_BACKOFF_MAX)
        permanent = isinstance(exc, PayloadError)
        if spool.retry_job(job_row.id, reason, delay, give_up_after=1 if permanent else JOB_MAX_ATTEMPTS):
            self.stats["jobs_failed"] += 1
            log.error("job %s gave up after %d runs: %s", job_row.name, attempts, reason)
        else:
            log.warning(
                "job %s failed (run %d), retrying in %.0f s: %s", job_row.name, attempts, delay, reason
            )
