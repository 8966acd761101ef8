"""The worker: one per user, it moves spooled events into Neo4j and answers waiting hooks.

Started on demand by the hook (detached) or by ``mkg worker`` (in the foreground). It holds the
one-per-user lock, listens on an owner-only unix socket, and drains the spool in order: each run
of events goes into the graph in one transaction, capture handlers run, and only then are the
spool rows marked done. When Neo4j is down the rows stay pending and the worker retries with
backoff; when nothing happens for ``MKG_WORKER_IDLE_SECONDS`` it exits.

This module is a composition root: it builds the plugin manager and wires the worker's parts, each in
its own module: :mod:`~mkg_core.resolution` (a spool row to an event with its project, user and
settings), :mod:`~mkg_core.connections` (drivers, embedders and query tools, shared with the MCP
sessions it serves), :mod:`~mkg_core.job_runner` (background jobs) and :mod:`~mkg_core.worker_socket`.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError

from . import degraded, runtime
from .connections import Connections, connection_key
from .contrib import CaptureContext, CaptureHandler, ContextProvider
from .errors import ConfigError, GraphUnavailable, MkgError, PayloadError
from .events import HookEvent
from .graph import Graph
from .host import PluginHost
from .job_runner import JobRunner
from .plugins import make_plugin_manager
from .resolution import EventResolver, Prepared
from .sessions import record_event
from .settings import Settings, load_settings
from .spool import (
    Spool,
    SpoolError,
    SpoolRow,
    import_overflow,
    is_corruption,
    open_spool,
    quarantine,
    quarantined_spools,
    salvage,
)
from .worker_socket import WorkerSocket

log = logging.getLogger("mkg.worker")

#: Spool rows drained per round.
BATCH_SIZE = 200
#: How often the spool is checked for new rows when nothing wakes the worker, in seconds.
POLL_INTERVAL = 0.05
#: A row the graph keeps refusing (not because it is unreachable) is quarantined after this many
#: attempts; it never holds back the rows behind it.
QUARANTINE_AFTER = 3
#: Backoff while Neo4j is unreachable or the settings are invalid, in seconds.
BACKOFF_START, BACKOFF_MAX = 0.5, 15.0
#: Seconds the sessions of a project whose settings are invalid wait before they are tried again
#: (the other projects' events go on meanwhile).
SETTINGS_RECHECK = 30.0
LOG_MAX_BYTES, LOG_BACKUPS = 5 * 1024 * 1024, 3


class RetryLater(Exception):
    """The row cannot be stored now (graph down, settings invalid); it stays pending."""


class Worker:
    def __init__(self, paths: runtime.Paths, *, environ: dict[str, str] | None = None) -> None:
        self.paths = paths
        self.environ = dict(os.environ if environ is None else environ)
        self.settings = load_settings(environ=self.environ, project_root=paths.root)
        self.host = PluginHost(make_plugin_manager(environ=self.environ))
        self.host.configure(self.settings)
        self.adapters = self.host.harness_adapters()
        self.resolver = EventResolver(
            self.environ,
            root=paths.root,
            adapters=self.adapters,
            harnesses=self.host.harness_list(),
            detect_harness=self.host.detect_harness,
        )
        self.handlers: list[CaptureHandler] = self.host.capture_handlers(self.settings)
        self.providers: list[ContextProvider] = self.host.context_providers(self.settings)
        self.connections = Connections(self.host, providers=self.providers)
        self.stats: dict[str, Any] = {
            "drained": 0,
            "failed": 0,
            "handler_failures": 0,
            "answers": 0,
            "jobs_run": 0,
            "jobs_failed": 0,
        }
        self.jobs = JobRunner(
            {job.name: job for job in self.host.jobs(self.settings)},
            self._resolve,
            self.stats,
            lease_seconds=self.settings.job_lease_seconds,
        )
        self.mcp_sessions = 0
        self._mcp_lock = threading.Lock()
        self.mcp_warm = threading.Event()
        self.idle_seconds = self.settings.worker_idle_seconds
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.started_at = time.time()
        self.last_activity = time.monotonic()
        self.last_error: str | None = None
        self._drained_through = 0
        self._drained = threading.Condition()
        self._retry_at = 0.0
        self._backoff = BACKOFF_START
        #: Sessions whose project's settings are invalid: since when, and why.
        self._waiting: dict[str, tuple[float, str]] = {}
        self.spool = self._open_spool()

    # -- lifecycle ----------------------------------------------------------------------------

    def serve(self) -> str:
        """Drain until stopped or idle; return why it ended. The caller holds the worker lock."""
        server = WorkerSocket(self)
        thread = threading.Thread(target=server.serve_forever, name="mkg-socket", daemon=True)
        thread.start()
        jobs_thread = threading.Thread(
            target=self.jobs.run_forever, args=(self.paths.spool, self.stopping), name="mkg-jobs", daemon=True
        )
        jobs_thread.start()
        self._note({"pid": os.getpid(), "started_at": self.started_at, "stopped_at": None})
        log.info("worker %s started (spool %s, socket %s)", os.getpid(), self.paths.spool, self.paths.socket)
        self.spool.prune()
        self.publish_answering_tools()
        threading.Thread(target=self._warm_mcp, name="mkg-mcp-warm", daemon=True).start()
        self.connections.warm_up_connections()
        try:  # connect and apply the schema now, not while a hook waits for an answer
            self.graph_for(self.settings)
        except GraphUnavailable as exc:
            self._defer(str(exc))
            self._retry_at = 0.0
        except Exception as exc:  # the drain below tries again; a start never hangs on it
            log.exception("connecting at start failed")
            self._defer(f"{type(exc).__name__}: {exc}")
            self._retry_at = 0.0
        reason = "stopped"
        try:
            while not self.stopping.is_set():
                try:
                    if self.drain_once():
                        continue
                except Exception as exc:  # a bug must not take capture down: log, back off, go on
                    if is_corruption(exc) and self._recover_spool():
                        continue
                    log.exception("draining the spool failed")
                    self._defer(f"{type(exc).__name__}: {exc}")
                if self._idle_expired():
                    log.info("idle for %.0f s: exiting", self.idle_seconds)
                    reason = "idle"
                    break
                self.wake.wait(POLL_INTERVAL)
                self.wake.clear()
        finally:
            self.stopping.set()
            self.jobs.wake.set()
            jobs_thread.join(timeout=30)  # a job in an LLM call may take longer: it resumes later
            server.shutdown()
            server.server_close()
            with contextlib.suppress(OSError):
                os.unlink(self.paths.socket)
            self._note({"stopped_at": time.time()})
            self.close()
            log.info("worker %s stopped (%s)", os.getpid(), reason)
        return reason

    def close(self) -> None:
        self.connections.close()
        self.spool.close()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        self.jobs.wake.set()

    def _idle_expired(self) -> bool:
        if self.idle_seconds <= 0:
            return False
        last = max(self.last_activity, self.jobs.last_activity)
        if time.monotonic() - last <= self.idle_seconds or self.jobs.running or self.mcp_sessions:
            return False
        return not self.spool.pending(1) and not self.spool.job_counts()["pending"]

    def _open_spool(self) -> Spool:
        spool, _ = open_spool(self.paths.spool)
        self._carry_over(spool)
        return spool

    def _recover_spool(self) -> bool:
        """The spool turned out damaged while draining (a page the opening checks did not read):
        move it aside, start a new one and carry over what can still be read."""
        aside = quarantine(self.paths.spool)
        if aside is None:
            return False
        with contextlib.suppress(Exception):
            self.spool.close()
        self.spool = self._open_spool()
        return True

    def _carry_over(self, spool: Spool) -> None:
        """Take in the pending events of spools moved aside as corrupt (by this worker or by a
        hook), each file once."""
        for aside in quarantined_spools(self.paths.root):
            copied = salvage(aside, spool)
            if copied is not None:
                log.error(
                    "the spool was corrupt and moved to %s: %d pending event(s) carried over", aside, copied
                )

    def _fresh_spool(self) -> None:
        """Reopen the spool when a hook moved a corrupt one aside, and take in the overflow
        journal (events hooks could not spool in time), oldest first."""
        if self.spool.replaced():
            log.warning("the spool file was replaced (a corrupt one was moved aside): reopening it")
            with contextlib.suppress(Exception):
                self.spool.close()
            self.spool = self._open_spool()
        imported = import_overflow(self.spool, self.paths.root)
        if imported:
            log.info("imported %d event(s) from the overflow journal", imported)

    # -- draining -------------------------------------------------------------------------------

    def drain_once(self) -> bool:
        """Store the next batch of pending rows. Return True when some rows were handled."""
        if time.monotonic() < self._retry_at:
            return False
        self._fresh_spool()
        now = time.monotonic()
        self._waiting = {s: held for s, held in self._waiting.items() if now - held[0] < SETTINGS_RECHECK}
        try:
            rows = self.spool.pending(BATCH_SIZE, skip_sessions=self._waiting)
        except Exception as exc:
            if is_corruption(exc) and self._recover_spool():
                return True
            raise
        if not rows:
            return False
        self.last_activity = time.monotonic()
        batch: list[Prepared] = []
        handled = 0
        try:
            for row in rows:
                if row.session_id in self._waiting:  # keeps its events in order: all of them wait
                    continue
                prepared = self._prepare_or_fail(row)
                if prepared is None:
                    handled += row.session_id not in self._waiting
                    continue
                handled += 1
                if batch and connection_key(batch[0].settings) != connection_key(prepared.settings):
                    self._store(batch)
                    batch = []
                batch.append(prepared)
            if batch:
                self._store(batch)
        except RetryLater as exc:
            self._defer(str(exc))
            return False
        if self._waiting:  # `mkg status` says why some events wait
            reason = next(iter(self._waiting.values()))[1]
            if reason != self.last_error:
                log.warning("the events of %d session(s) wait: %s", len(self._waiting), reason)
                self.last_error = reason
                self._note({"last_error": reason, "last_error_at": time.time()})
            if not handled:
                return False
        self._backoff = BACKOFF_START
        self._retry_at = 0.0
        if self.last_error is not None and not self._waiting:  # recovered: no stale error shown
            log.info("events flow again")
            self.last_error = None
            self._note({"last_error": None, "last_error_at": None, "recovered_at": time.time()})
        return True

    def _prepare_or_fail(self, row: SpoolRow) -> Prepared | None:
        try:
            return self.resolver.prepare(row)
        except PayloadError as exc:
            log.warning("event %s rejected: %s", row.event_id, exc)
            self.spool.mark_failed(row.seq, str(exc))
            self.stats["failed"] += 1
            self._advance(row.seq)
            return None
        except ConfigError as exc:  # the project's settings: its sessions wait, the others go on
            self._waiting[row.session_id] = (time.monotonic(), str(exc))
            return None
        except Exception as exc:  # a row nothing foresaw: tried again, then quarantined, as below
            self._give_up_or_retry(row, exc)
            return None

    def _store(self, batch: list[Prepared]) -> None:
        try:
            graph = self.graph_for(batch[0].settings)
            graph.write_tx(lambda tx: [record_event(tx, item.captured) for item in batch])
        except GraphUnavailable as exc:
            self.connections.neo4j_down(batch[0].settings)
            raise RetryLater(str(exc)) from exc
        except Exception as exc:
            if len(batch) > 1:  # find the row that fails, store the others
                for item in batch:
                    self._store([item])
                return
            self._give_up_or_retry(batch[0].row, exc)
            return
        self.connections.neo4j_up(batch[0].settings)
        self._after_commit(batch, graph)

    def _after_commit(self, batch: list[Prepared], graph: Graph) -> None:
        for item in batch:
            if not self.handlers and not self.jobs.jobs:
                break
            context = self.context_for(item, graph)
            failures = self.host.run_capture_handlers(self.handlers, item.event, context)
            self.stats["handler_failures"] += len(failures)
            self.jobs.record(self.spool, item.event, context, item.settings, item.row.seq)
        self.spool.mark_done(item.row.seq for item in batch)
        self.stats["drained"] += len(batch)
        self._note({"drained_total": self.stats["drained"], "last_drain_at": time.time()})
        self._advance(batch[-1].row.seq)

    def context_for(self, item: Prepared, graph: Graph) -> CaptureContext:
        captured = item.captured
        return CaptureContext(
            graph,
            item.settings,
            captured.project,
            captured.user,
            captured.event_id,
            embedder=self.connections.embedder_for(item.settings),
            query_tools=self.connections.query_tools_for(item.settings),
            adapters=self.adapters,
        )

    def publish_answering_tools(self) -> None:
        """Tell hooks which tool results to wait on: the query tools, for their failure guidance."""
        try:
            keys = (
                list(self.connections.query_tools_for(self.settings))
                if any("PostToolUse" in provider.events for provider in self.providers)
                else []
            )
            runtime.write_answering_tools(self.paths, keys)
        except Exception as exc:
            log.warning("could not publish the answering tools: %s", exc)

    def _resolve(self, row: SpoolRow) -> tuple[HookEvent, CaptureContext]:
        """A spool row's event and capture context (for the jobs it triggered)."""
        prepared = self.resolver.prepare(row)
        return prepared.event, self.context_for(prepared, self.graph_for(prepared.settings))

    def _give_up_or_retry(self, row: SpoolRow, exc: Exception) -> None:
        """One row that could not be prepared or that the graph refused. A transient refusal waits
        (the whole drain backs off); any other is tried again on the next rounds, while the rows
        behind it go on, and after :data:`QUARANTINE_AFTER` attempts the row is quarantined with
        its reason."""
        reason = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (TransientError, ServiceUnavailable, SessionExpired)):
            raise RetryLater(f"storing event {row.event_id} failed ({reason})")
        attempts = row.attempts + 1
        if attempts >= QUARANTINE_AFTER:
            log.error("event %s failed %d times, quarantined: %s", row.event_id, attempts, reason)
            self.spool.mark_failed(row.seq, reason)
            self.stats["failed"] += 1
            self._advance(row.seq)
            return
        self.spool.note_attempt(row.seq, reason)
        log.warning("event %s failed (attempt %d), the events behind it go on: %s", row.event_id,
                    attempts, reason)  # fmt: skip

    def _defer(self, reason: str) -> None:
        if reason != self.last_error:
            log.warning("events wait in the spool: %s", reason)
        self.last_error = reason
        self._note({"last_error": reason, "last_error_at": time.time()})
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)

    def _note(self, values: dict[str, object]) -> None:
        """Record what `mkg status` shows; while another process holds the spool locked this waits
        for the spool's timeout and then gives up (status only: nothing is lost)."""
        try:
            self.spool.set_meta(values)
        except sqlite3.Error as exc:
            log.debug("could not record the worker's status in the spool: %s", exc)

    def _advance(self, seq: int) -> None:
        with self._drained:
            self._drained_through = max(self._drained_through, seq)
            self._drained.notify_all()

    def wait_drained(self, seq: int, timeout: float) -> bool:
        """Wait until the row ``seq`` has been handled (stored or given up), at most ``timeout``."""
        self.wake.set()
        with self._drained:
            return self._drained.wait_for(lambda: self._drained_through >= seq, timeout=max(timeout, 0))

    # -- resolution -----------------------------------------------------------------------------

    def graph_for(self, settings: Settings) -> Graph:
        """The shared driver for these settings (the schema applied on first use)."""
        return self.connections.graph_for(settings)

    # -- answering ------------------------------------------------------------------------------

    def answer(self, seq: int, budget: float) -> str:
        """The stdout for a waiting hook: what the context providers have to inject, rendered."""
        self.last_activity = time.monotonic()
        self.stats["answers"] += 1
        if not self.providers:
            return ""
        deadline = time.monotonic() + max(budget - 0.05, 0)
        with Spool(self.paths.spool) as spool:
            row = spool.get(seq)
        if row is None:
            return ""
        try:
            prepared = self.resolver.prepare(row)
        except (PayloadError, ConfigError) as exc:
            log.warning("cannot answer event %s: %s", row.event_id, exc)
            return ""
        event = prepared.event
        matching = [p for p in self.providers if p.matches(event)]
        if not matching:
            return ""
        if self.connections.known_down(prepared.settings):
            # At once: trying again would outlast the deadline. The drain tries again now instead,
            # so that a database back up is known as soon as the next hook asks.
            self._retry_at = 0.0
            self.wake.set()
            return self._degraded(prepared)
        # Providers link what they inject to the event, so let it reach the graph first (briefly).
        self.wait_drained(seq, min((deadline - time.monotonic()) / 2, 0.5))
        try:
            graph = self.graph_for(prepared.settings)
        except GraphUnavailable as exc:
            log.warning("cannot answer event %s: %s", row.event_id, exc)
            return self._degraded(prepared)
        context = self.context_for(prepared, graph)
        texts: list[str] = []
        for provider in matching:
            if time.monotonic() >= deadline:
                log.warning("answer for %s ran out of time before provider %r", row.event_id, provider.name)
                break
            try:
                text = provider.provide(event, context)
            except GraphUnavailable as exc:
                # The other providers would wait on the same outage, each past the deadline.
                log.warning("context provider %r failed on %s: %s", provider.name, event.event, exc)
                self.connections.neo4j_down(prepared.settings)
                return self._degraded(prepared) if not texts else self._render(prepared, texts)
            except Exception as exc:
                log.warning("context provider %r failed on %s: %s", provider.name, event.event, exc)
                continue
            if text and text.strip():
                texts.append(text.strip())
        return self._render(prepared, texts)

    @staticmethod
    def _render(prepared: Prepared, texts: list[str]) -> str:
        return prepared.adapter.render_injection(prepared.event, "\n\n".join(texts))

    def _degraded(self, prepared: Prepared) -> str:
        """A session starting while its database is down is told so, once (see :mod:`.degraded`)."""
        event = prepared.event
        if event.event != "SessionStart" or not degraded.first_time(self.paths.root, event.session_id):
            return ""
        return prepared.adapter.render_injection(event, degraded.notice(degraded.DATABASE_DOWN))

    def serve_mcp(self, sock: Any, hello: dict[str, Any]) -> None:
        """One MCP session for a ``meta-knowledge-graph`` proxy, until it goes away."""
        # The first session waits for the warm-up: two threads importing the MCP SDK at once can
        # deadlock on Python's import locks.
        with self._mcp_lock:
            self.mcp_sessions += 1
        self.last_activity = time.monotonic()
        try:
            self.mcp_warm.wait(120)
            from .server import serve_session

            serve_session(sock, hello, self.host, self.connections)
        except Exception as exc:
            log.warning("an MCP session ended with an error: %s: %s", type(exc).__name__, exc)
        finally:
            with self._mcp_lock:
                self.mcp_sessions -= 1
            self.last_activity = time.monotonic()

    def _warm_mcp(self) -> None:
        try:
            from .server import warm_up

            warm_up(self.host, self.settings)
        except Exception as exc:
            log.warning("the MCP server could not warm up: %s", exc)
        finally:
            self.mcp_warm.set()

    def status(self) -> dict[str, Any]:
        with Spool(self.paths.spool) as spool:
            counts = spool.counts()
            jobs = spool.job_counts()
        return {
            "jobs_pending": jobs["pending"],
            "job_running": self.jobs.running,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "uptime_seconds": round(time.time() - self.started_at, 1),
            "pending": counts["pending"],
            "last_error": self.last_error,
            "connections": self.connections.uris(),
            "mcp_sessions": self.mcp_sessions,
            **self.stats,
        }


# -- running ----------------------------------------------------------------------------------------


def setup_logging(paths: runtime.Paths, *, foreground: bool) -> None:
    runtime.ensure_private_dir(paths.root)
    root = logging.getLogger("mkg")
    root.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s")
    handler = logging.handlers.RotatingFileHandler(paths.log, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS)
    handler.setFormatter(fmt)
    root.addHandler(handler)
    with contextlib.suppress(OSError):
        os.chmod(paths.log, 0o600)
    if foreground:
        console = logging.StreamHandler()
        console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root.addHandler(console)


@contextlib.contextmanager
def _signals(worker: Worker) -> Iterator[None]:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, lambda *_: worker.stop())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_worker(
    paths: runtime.Paths,
    *,
    lock_fd: int,
    foreground: bool,
    once: bool = False,
    environ: dict[str, str] | None = None,
) -> int:
    """Run the worker with the lock already held; release it on the way out. Return an exit code."""
    os.umask(0o077)
    setup_logging(paths, foreground=foreground)
    reason = "failed"
    try:
        try:
            worker = Worker(paths, environ=environ)
        except (MkgError, SpoolError) as exc:
            log.error("the worker cannot start: %s", exc)
            return 1
        if once:
            worker.idle_seconds = 0
            try:
                while worker.drain_once():
                    pass
                if worker.last_error:
                    return 1
                while worker.jobs.run_next(worker.spool):
                    pass
                return 0
            finally:
                worker.close()
        with _signals(worker):
            reason = worker.serve()
        return 0
    finally:
        os.close(lock_fd)
        if reason == "idle":
            _respawn_if_needed(paths)


def _respawn_if_needed(paths: runtime.Paths) -> None:
    """A hook may have spooled an event while this worker was exiting and seen it still alive."""
    try:
        with Spool(paths.spool) as spool:
            pending = spool.counts()["pending"]
    except SpoolError:
        return
    if pending and runtime.worker_pid(paths) is None:
        runtime.spawn_worker(paths)
