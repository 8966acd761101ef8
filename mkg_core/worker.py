"""The worker: one per user, it moves spooled events into Neo4j and answers waiting hooks.

Started on demand by the hook (detached) or by ``mkg worker`` (in the foreground). It holds the
one-per-user lock, listens on an owner-only unix socket, and drains the spool in order: each run
of events goes into the graph in one transaction, capture handlers run, and only then are the
spool rows marked done. When Neo4j is down the rows stay pending and the worker retries with
backoff; when nothing happens for ``MKG_WORKER_IDLE_SECONDS`` it exits.

This module is a composition root: it builds the plugin manager and the graph connections.
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.handlers
import os
import signal
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError

from . import runtime
from .contrib import CaptureContext, CaptureHandler, ContextProvider, Embedder, Job, QueryTool
from .errors import ConfigError, GraphUnavailable, MkgError, PayloadError
from .events import HookEvent
from .graph import Graph
from .harness import HarnessAdapter
from .host import PluginHost
from .identity import (
    PAYLOAD_PROJECT_KEYS,
    ProjectRef,
    UserRef,
    resolve_project,
    resolve_user,
)
from .plugins import make_plugin_manager
from .schema import apply_schema
from .sessions import CapturedEvent, record_event
from .settings import Settings, load_settings, secret
from .spool import JobRow, Spool, SpoolError, SpoolRow, env_hints, import_overflow, is_env_hint, open_spool

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
#: How long cached settings and identities are trusted, in seconds.
CACHE_SECONDS = 30.0
LOG_MAX_BYTES, LOG_BACKUPS = 5 * 1024 * 1024, 3
#: A background job that keeps failing is given up after this many runs.
JOB_MAX_ATTEMPTS = 5
#: Backoff between runs of a failing job, in seconds (doubles per attempt, capped).
JOB_BACKOFF_START, JOB_BACKOFF_MAX = 5.0, 300.0


class GenericAdapter(HarnessAdapter):
    """Parses events of a harness no installed plugin knows, with the shared rules."""

    name = "generic"


@dataclass(frozen=True)
class Prepared:
    """A spool row made ready for the graph."""

    row: SpoolRow
    adapter: HarnessAdapter
    captured: CapturedEvent
    settings: Settings

    @property
    def event(self) -> HookEvent:
        return self.captured.event


class RetryLater(Exception):
    """The row cannot be stored now (graph down, settings invalid); it stays pending."""


class Worker:
    def __init__(self, paths: runtime.Paths, *, environ: dict[str, str] | None = None) -> None:
        self.paths = paths
        self.environ = dict(os.environ if environ is None else environ)
        # Per event, identity comes from the hook that saw it, never from whichever hook started
        # this worker: the inherited identity variables are left out and the event's own added.
        self._event_base_env = {k: v for k, v in self.environ.items() if not is_env_hint(k) or k == "HOME"}
        self.settings = load_settings(environ=self.environ, project_root=paths.root)
        self.host = PluginHost(make_plugin_manager(environ=self.environ))
        self.host.configure(self.settings)
        self.adapters = self.host.harness_adapters()
        self.harnesses = self.host.harness_list()
        self.handlers: list[CaptureHandler] = self.host.capture_handlers(self.settings)
        self.providers: list[ContextProvider] = self.host.context_providers(self.settings)
        self.jobs: dict[str, Job] = {job.name: job for job in self.host.jobs(self.settings)}
        self._query_tools: dict[Any, dict[str, QueryTool]] = {}
        self._embedders: dict[Any, Embedder | None] = {}
        self.job_running: str | None = None
        self.mcp_sessions = 0
        self.mcp_warm = threading.Event()
        self.job_wake = threading.Event()
        self.idle_seconds = self.settings.worker_idle_seconds
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.started_at = time.time()
        self.last_activity = time.monotonic()
        self.stats: dict[str, Any] = {
            "drained": 0,
            "failed": 0,
            "handler_failures": 0,
            "answers": 0,
            "jobs_run": 0,
            "jobs_failed": 0,
        }
        self.last_error: str | None = None
        self._graphs: dict[tuple[str, str, str, str], Graph] = {}
        self._schema_done: set[tuple[str, str, str, str]] = set()
        self._graph_lock = threading.Lock()
        self._settings_cache: dict[Any, tuple[float, Settings]] = {}
        self._identity_cache: dict[Any, tuple[float, ProjectRef, UserRef]] = {}
        self._drained_through = 0
        self._drained = threading.Condition()
        self._retry_at = 0.0
        self._backoff = BACKOFF_START
        self.spool = self._open_spool()

    # -- lifecycle ----------------------------------------------------------------------------

    def serve(self) -> str:
        """Drain until stopped or idle; return why it ended. The caller holds the worker lock."""
        server = _SocketServer(self)
        thread = threading.Thread(target=server.serve_forever, name="mkg-socket", daemon=True)
        thread.start()
        jobs_thread = threading.Thread(target=self._run_jobs_forever, name="mkg-jobs", daemon=True)
        jobs_thread.start()
        self.spool.set_meta({"pid": os.getpid(), "started_at": self.started_at, "stopped_at": None})
        log.info("worker %s started (spool %s, socket %s)", os.getpid(), self.paths.spool, self.paths.socket)
        self.spool.prune()
        self.publish_answering_tools()
        threading.Thread(target=self._warm_mcp, name="mkg-mcp-warm", daemon=True).start()
        try:  # connect and apply the schema now, not while a hook waits for an answer
            self.graph_for(self.settings)
        except GraphUnavailable as exc:
            self._defer(str(exc))
            self._retry_at = 0.0
        reason = "stopped"
        try:
            while not self.stopping.is_set():
                try:
                    if self.drain_once():
                        continue
                except Exception as exc:  # a bug must not take capture down: log, back off, go on
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
            self.job_wake.set()
            jobs_thread.join(timeout=30)  # a job in an LLM call may take longer: it resumes later
            server.shutdown()
            server.server_close()
            with contextlib.suppress(OSError):
                os.unlink(self.paths.socket)
            self.spool.set_meta({"stopped_at": time.time()})
            self.close()
            log.info("worker %s stopped (%s)", os.getpid(), reason)
        return reason

    def close(self) -> None:
        with self._graph_lock:
            for graph in self._graphs.values():
                with contextlib.suppress(Exception):
                    graph.close()
            self._graphs.clear()
        self.spool.close()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        self.job_wake.set()

    def _idle_expired(self) -> bool:
        if self.idle_seconds <= 0:
            return False
        if (
            time.monotonic() - self.last_activity <= self.idle_seconds
            or self.job_running
            or self.mcp_sessions
        ):
            return False
        return not self.spool.pending(1) and not self.spool.job_counts()["pending"]

    def _open_spool(self) -> Spool:
        spool, aside = open_spool(self.paths.spool)
        if aside:
            log.error("the spool was corrupt; moved it to %s and started a new one", aside)
        return spool

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
        rows = self.spool.pending(BATCH_SIZE)
        if not rows:
            return False
        self.last_activity = time.monotonic()
        batch: list[Prepared] = []
        try:
            for row in rows:
                prepared = self._prepare_or_fail(row)
                if prepared is None:
                    continue
                if batch and _connection_key(batch[0].settings) != _connection_key(prepared.settings):
                    self._store(batch)
                    batch = []
                batch.append(prepared)
            if batch:
                self._store(batch)
        except RetryLater as exc:
            self._defer(str(exc))
            return False
        self._backoff = BACKOFF_START
        self._retry_at = 0.0
        if self.last_error is not None:  # recovered: `mkg status` shows no stale error
            log.info("events flow again")
            self.last_error = None
            self.spool.set_meta({"last_error": None, "last_error_at": None, "recovered_at": time.time()})
        return True

    def _prepare_or_fail(self, row: SpoolRow) -> Prepared | None:
        try:
            return self.prepare(row)
        except PayloadError as exc:
            log.warning("event %s rejected: %s", row.event_id, exc)
            self.spool.mark_failed(row.seq, str(exc))
            self.stats["failed"] += 1
            self._advance(row.seq)
            return None
        except ConfigError as exc:
            raise RetryLater(str(exc)) from exc

    def prepare(self, row: SpoolRow) -> Prepared:
        record = row.record
        payload = record.get("payload")
        if not isinstance(payload, dict):
            raise PayloadError("the spooled record has no payload")
        hints = _str_dict(record.get("env"))
        env = {**self._event_base_env, **hints}
        adapter, client = self._adapter_for(row.client, env)
        argv_event = record.get("argv_event")
        event = adapter.parse(payload, argv_event if isinstance(argv_event, str) else row.event)
        if event.harness != client:
            event = replace(event, harness=client)
        cwd = record.get("cwd")
        folder = cwd if isinstance(cwd, str) and cwd else None
        project, user = self._identity(payload, env, folder, client)
        settings = self._settings_for(project.root, hints)
        # MKG_PROJECT_ID / MKG_USER_ID set in a .env file pin identity too.
        pins = {
            name: value
            for name, value in (("MKG_PROJECT_ID", settings.project_id), ("MKG_USER_ID", settings.user_id))
            if value and not env.get(name)
        }
        if pins:
            project, user = self._identity(payload, {**env, **pins}, folder, client)
        truncated = record.get("truncated")
        payload_bytes = record.get("payload_bytes")
        captured = CapturedEvent(
            event=event,
            event_id=row.event_id,
            received_at=datetime.fromisoformat(row.received_at),
            client=client,
            project=project,
            user=user,
            payload_bytes=payload_bytes if isinstance(payload_bytes, int) else 0,
            truncated=tuple(str(item) for item in truncated) if isinstance(truncated, list) else (),
        )
        return Prepared(row, adapter, captured, settings)

    def _store(self, batch: list[Prepared]) -> None:
        try:
            graph = self.graph_for(batch[0].settings)
            graph.write_tx(lambda tx: [record_event(tx, item.captured) for item in batch])
        except GraphUnavailable as exc:
            raise RetryLater(str(exc)) from exc
        except Exception as exc:
            if len(batch) > 1:  # find the row that fails, store the others
                for item in batch:
                    self._store([item])
                return
            self._give_up_or_retry(batch[0], exc)
            return
        self._after_commit(batch, graph)

    def _after_commit(self, batch: list[Prepared], graph: Graph) -> None:
        for item in batch:
            if not self.handlers and not self.jobs:
                break
            context = self.context_for(item, graph)
            failures = self.host.run_capture_handlers(self.handlers, item.event, context)
            self.stats["handler_failures"] += len(failures)
            self._record_jobs(item, context)
        self.spool.mark_done(item.row.seq for item in batch)
        self.stats["drained"] += len(batch)
        self.spool.set_meta({"drained_total": self.stats["drained"], "last_drain_at": time.time()})
        self._advance(batch[-1].row.seq)

    def _record_jobs(self, item: Prepared, context: CaptureContext) -> None:
        recorded = False
        for job in self.jobs.values():
            try:
                if job.matches(item.event) and job.enabled(item.settings):
                    self.spool.add_job(job.name, job.key(item.event, context), item.row.seq)
                    recorded = True
            except Exception as exc:
                log.warning("job %r could not be recorded for %s: %s", job.name, item.row.event_id, exc)
        if recorded:
            self.job_wake.set()

    def context_for(self, item: Prepared, graph: Graph) -> CaptureContext:
        captured = item.captured
        return CaptureContext(
            graph,
            item.settings,
            captured.project,
            captured.user,
            captured.event_id,
            embedder=self.embedder_for(item.settings),
            query_tools=self.query_tools_for(item.settings),
            adapters=self.adapters,
        )

    def query_tools_for(self, settings: Settings) -> dict[str, QueryTool]:
        """The query tools these settings mount (a provider may need its own configuration)."""
        cache_key = tuple(sorted((k, str(v)) for k, v in settings.model_dump().items()))
        if cache_key not in self._query_tools:
            self._query_tools[cache_key] = self.host.query_tools(settings)
        return self._query_tools[cache_key]

    def publish_answering_tools(self) -> None:
        """Tell hooks which tool results to wait on: the query tools, for their failure guidance."""
        try:
            keys = (
                list(self.query_tools_for(self.settings))
                if any("PostToolUse" in provider.events for provider in self.providers)
                else []
            )
            runtime.write_answering_tools(self.paths, keys)
        except Exception as exc:
            log.warning("could not publish the answering tools: %s", exc)

    def embedder_for(self, settings: Settings) -> Embedder | None:
        """The embedder these settings select (cached per embedding configuration)."""
        import hashlib

        keys = "\n".join(secret(value) or "" for value in (settings.openai_api_key, settings.gemini_api_key))
        cache_key = (
            settings.embedding_model,
            settings.embedding_dimensions,
            settings.openai_base_url,
            hashlib.sha256(keys.encode()).hexdigest()[:16],
        )
        if cache_key not in self._embedders:
            self._embedders[cache_key] = self.host.embedder(settings)
        return self._embedders[cache_key]

    # -- background jobs ------------------------------------------------------------------------

    def _run_jobs_forever(self) -> None:
        spool = Spool(self.paths.spool)
        try:
            while not self.stopping.is_set():
                if spool.replaced():  # a corrupt spool was moved aside: follow the new one
                    spool.close()
                    spool = Spool(self.paths.spool)
                try:
                    ran = self.run_next_job(spool)
                except Exception:
                    log.exception("running a background job failed")
                    ran = False
                if not ran:
                    self.job_wake.wait(1.0)
                    self.job_wake.clear()
        finally:
            spool.close()

    def run_next_job(self, spool: Spool) -> bool:
        """Run the oldest job that may run now; return False when there was none."""
        job_row = spool.next_job()
        if job_row is None:
            return False
        job = self.jobs.get(job_row.name)
        if job is None:  # its plugin is gone
            spool.retry_job(job_row.id, f"no job named {job_row.name!r} is installed", 0, give_up_after=1)
            return True
        self.job_running = job_row.name
        self.last_activity = time.monotonic()
        try:
            summary = self._run_job(job, job_row, spool)
        except Exception as exc:
            self._job_failed(job_row, spool, exc)
        else:
            spool.finish_job(job_row.id, summary)
            self.stats["jobs_run"] += 1
            log.info("job %s (%s) done: %s", job.name, job_row.key.replace("\n", " "), summary or "ok")
        finally:
            self.job_running = None
            self.last_activity = time.monotonic()
        return True

    def _run_job(self, job: Job, job_row: JobRow, spool: Spool) -> str | None:
        row = spool.get(job_row.seq)
        if row is None:
            raise PayloadError(f"the event that triggered job {job.name!r} is no longer in the spool")
        prepared = self.prepare(row)
        graph = self.graph_for(prepared.settings)
        return job.run(prepared.event, self.context_for(prepared, graph))

    def _job_failed(self, job_row: JobRow, spool: Spool, exc: Exception) -> None:
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

    def _give_up_or_retry(self, item: Prepared, exc: Exception) -> None:
        """One row the graph refused. A transient refusal waits (the whole drain backs off); any
        other is tried again on the next rounds, while the rows behind it go on, and after
        :data:`QUARANTINE_AFTER` attempts the row is quarantined with its reason."""
        reason = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (TransientError, ServiceUnavailable, SessionExpired)):
            raise RetryLater(f"storing event {item.row.event_id} failed ({reason})")
        attempts = item.row.attempts + 1
        if attempts >= QUARANTINE_AFTER:
            log.error("event %s failed %d times, quarantined: %s", item.row.event_id, attempts, reason)
            self.spool.mark_failed(item.row.seq, reason)
            self.stats["failed"] += 1
            self._advance(item.row.seq)
            return
        self.spool.note_attempt(item.row.seq, reason)
        log.warning("event %s failed (attempt %d), the events behind it go on: %s", item.row.event_id,
                    attempts, reason)  # fmt: skip

    def _defer(self, reason: str) -> None:
        if reason != self.last_error:
            log.warning("events wait in the spool: %s", reason)
        self.last_error = reason
        self.spool.set_meta({"last_error": reason, "last_error_at": time.time()})
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)

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

    def _adapter_for(self, client: str, env: dict[str, str]) -> tuple[HarnessAdapter, str]:
        name = client
        if name in ("", "auto"):
            name = self.host.detect_harness(env) or "auto"
        adapter = self.adapters.get(name)
        if adapter is not None:
            return adapter, adapter.name
        return GenericAdapter(), name

    def _identity(
        self, payload: dict[str, Any], env: dict[str, str], cwd: str | None, client: str
    ) -> tuple[ProjectRef, UserRef]:
        key = (
            tuple(str(payload.get(k)) for k in PAYLOAD_PROJECT_KEYS),
            tuple(sorted(env_hints(env).items())),
            cwd,
            client,
        )
        now = time.monotonic()
        cached = self._identity_cache.get(key)
        if cached and now - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        project = resolve_project(payload, env, fallback=cwd or self.paths.root)
        user = resolve_user(env, project_root=project.root, client=client, adapters=self.harnesses)
        self._identity_cache[key] = (now, project, user)
        return project, user

    def _settings_for(self, project_root: str | None, hints: dict[str, str]) -> Settings:
        key = (project_root, tuple(sorted(hints.items())))
        now = time.monotonic()
        cached = self._settings_cache.get(key)
        if cached and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        env = {**self._event_base_env, **hints}
        settings = load_settings(environ=env, project_root=project_root or self.paths.root)
        self._settings_cache[key] = (now, settings)
        return settings

    def graph_for(self, settings: Settings) -> Graph:
        """One driver per distinct connection; the schema is applied on first use."""
        key = _connection_key(settings)
        with self._graph_lock:
            graph = self._graphs.get(key)
            if graph is None:
                graph = self._graphs[key] = Graph.connect(
                    settings, connection_timeout=3.0, max_retry_time=2.0
                )
            if key not in self._schema_done:
                try:
                    apply_schema(graph, self.host.schema_statements(settings))
                except MkgError as exc:
                    raise GraphUnavailable(f"could not apply the schema ({exc})") from exc
                self._schema_done.add(key)
                for provider in self.providers:
                    try:
                        provider.warm_up(graph)
                    except Exception as exc:
                        log.warning("context provider %r could not warm up: %s", provider.name, exc)
                log.info(
                    "connected to %s (database %s); schema applied",
                    settings.neo4j_uri,
                    settings.neo4j_database,
                )
        return graph

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
            prepared = self.prepare(row)
        except (PayloadError, ConfigError) as exc:
            log.warning("cannot answer event %s: %s", row.event_id, exc)
            return ""
        event = prepared.event
        matching = [p for p in self.providers if p.matches(event)]
        if not matching:
            return ""
        # Providers link what they inject to the event, so let it reach the graph first (briefly).
        self.wait_drained(seq, min((deadline - time.monotonic()) / 2, 0.5))
        try:
            graph = self.graph_for(prepared.settings)
        except GraphUnavailable as exc:
            log.warning("cannot answer event %s: %s", row.event_id, exc)
            return ""
        context = self.context_for(prepared, graph)
        texts = []
        for provider in matching:
            if time.monotonic() >= deadline:
                log.warning("answer for %s ran out of time before provider %r", row.event_id, provider.name)
                break
            try:
                text = provider.provide(event, context)
            except Exception as exc:
                log.warning("context provider %r failed on %s: %s", provider.name, event.event, exc)
                continue
            if text and text.strip():
                texts.append(text.strip())
        return prepared.adapter.render_injection(event, "\n\n".join(texts))

    def serve_mcp(self, sock: Any, hello: dict[str, Any]) -> None:
        """One MCP session for a ``meta-knowledge-graph`` proxy, until it goes away."""
        # The first session waits for the warm-up: two threads importing the MCP SDK at once can
        # deadlock on Python's import locks.
        with self._graph_lock:
            self.mcp_sessions += 1
        self.last_activity = time.monotonic()
        try:
            self.mcp_warm.wait(120)
            from .server import serve_session

            serve_session(sock, hello, self.host, self.graph_for)
        except Exception as exc:
            log.warning("an MCP session ended with an error: %s: %s", type(exc).__name__, exc)
        finally:
            with self._graph_lock:
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
            "job_running": self.job_running,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "uptime_seconds": round(time.time() - self.started_at, 1),
            "pending": counts["pending"],
            "last_error": self.last_error,
            "connections": sorted({key[0] for key in self._graphs}),
            "mcp_sessions": self.mcp_sessions,
            **self.stats,
        }


def _str_dict(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(key): str(item) for key, item in value.items()}


def _connection_key(settings: Settings) -> tuple[str, str, str, str]:
    import hashlib

    password = secret(settings.neo4j_password) or ""
    digest = hashlib.sha256(password.encode()).hexdigest()[:16]
    return (settings.neo4j_uri, settings.neo4j_username, settings.neo4j_database, digest)


# -- the socket -------------------------------------------------------------------------------------


class _Handler(socketserver.StreamRequestHandler):
    server: _SocketServer

    def handle(self) -> None:
        worker = self.server.worker
        uid = runtime.peer_uid(self.connection)
        if uid is not None and uid != os.geteuid():
            log.warning("refused a request from uid %s on the worker's socket", uid)
            return
        try:
            line = self.rfile.readline(1024 * 1024)
            message = json.loads(line or b"{}")
            op = message.get("op") if isinstance(message, dict) else None
            reply: dict[str, Any]
            if op == "mcp":  # a meta-knowledge-graph proxy: this connection becomes its MCP session
                worker.serve_mcp(self.connection, message)
                return
            if op == "answer":
                reply = {"stdout": worker.answer(int(message["seq"]), float(message.get("deadline", 1.0)))}
            elif op == "status":
                reply = worker.status()
            elif op == "stop":
                worker.stop()
                reply = {"ok": True}
            elif op == "ping":
                reply = {"ok": True, "pid": os.getpid()}
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as exc:
            log.warning("socket request failed: %s: %s", type(exc).__name__, exc)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(reply, default=str).encode() + b"\n")


class _SocketServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        path = worker.paths.socket
        runtime.ensure_private_dir(os.path.dirname(path))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # stale: the lock says no other worker is running
        old_umask = os.umask(0o177)
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)


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
                while worker.run_next_job(worker.spool):
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
