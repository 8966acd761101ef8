"""``mkg worker`` and ``mkg status``: run, start, stop and inspect the capture worker."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import click

from .. import runtime
from ..errors import ConfigError
from ..spool import Spool, SpoolError, overflow_files, quarantined_spools, unreadable_overflow
from . import App, fail, guarded, pass_app, print_json

#: CLI connection flags, as the variables the worker reads.
_OVERRIDE_VARIABLES = {
    "neo4j_uri": "NEO4J_URI",
    "neo4j_username": "NEO4J_USERNAME",
    "neo4j_password": "NEO4J_PASSWORD",
    "neo4j_database": "NEO4J_DATABASE",
}


@click.group("worker", invoke_without_command=True)
@click.option(
    "--once", is_flag=True, help="Drain what is pending into Neo4j, then exit (1 if some could not)."
)
@click.pass_context
def worker_group(ctx: click.Context, once: bool) -> None:
    """Run the capture worker in the foreground (Ctrl-C stops it).

    The worker moves events from the local spool into Neo4j and answers hooks that wait for
    memory to inject. Hooks start it on their own in the background, so running it by hand is
    only needed to watch it work. One worker runs per user; its files live in the state folder
    (see `mkg status`).
    """
    if ctx.invoked_subcommand is not None:
        return
    guarded(lambda: _run_foreground(ctx.obj, once))


def _run_foreground(app: App, once: bool) -> None:
    paths = runtime.Paths.from_env()
    try:
        fd = runtime.acquire_worker_lock(paths)
    except OSError as exc:  # a state folder under a file, a link, another user's
        raise ConfigError(
            f"the state folder {paths.root} cannot be used ({exc.strerror or exc}); "
            "point MKG_STATE_DIR at a folder of yours"
        ) from None
    if fd is None:
        fail(f"a worker is already running (pid {runtime.worker_pid(paths)}); `mkg worker stop` stops it")
        return
    from ..worker import run_worker

    environ = dict(os.environ)
    for field, variable in _OVERRIDE_VARIABLES.items():
        if app.overrides.get(field) is not None:
            environ[variable] = str(app.overrides[field])
    sys.exit(run_worker(paths, lock_fd=fd, foreground=True, once=once, environ=environ))


@worker_group.command("start")
@click.option(
    "--wait", "wait_seconds", default=15.0, show_default=True, help="Seconds to wait for it to come up."
)
def start_command(wait_seconds: float) -> None:
    """Start the worker in the background unless it is running."""
    paths = runtime.Paths.from_env()
    pid = runtime.worker_pid(paths)
    if pid is not None:
        click.echo(f"The worker is already running (pid {pid}).")
        return
    runtime.spawn_worker(paths, force=True)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        pid = runtime.worker_pid(paths)
        if pid is not None and runtime.request(paths, {"op": "ping"}, 1.0):
            click.echo(f"The worker is running (pid {pid}); log: {paths.log}")
            return
        time.sleep(0.1)
    fail(f"the worker did not come up within {wait_seconds:g} s; see {paths.log}")


@worker_group.command("stop")
@click.option("--timeout", default=15.0, show_default=True, help="Seconds to wait before sending SIGTERM.")
def stop_command(timeout: float) -> None:
    """Stop the running worker. Pending events stay in the spool for the next one."""
    paths = runtime.Paths.from_env()
    pid = runtime.worker_pid(paths)
    if pid is None:
        click.echo("No worker is running.")
        return
    runtime.request(paths, {"op": "stop"}, 2.0)
    if _wait_gone(paths, timeout):
        click.echo(f"Stopped the worker (pid {pid}).")
        return
    if pid > 0:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if _wait_gone(paths, 5.0):
            click.echo(f"Stopped the worker (pid {pid}) with SIGTERM.")
            return
    fail(f"the worker (pid {pid}) did not stop; see {paths.log}")


@worker_group.command("retry")
def retry_command() -> None:
    """Queue the events the worker gave up on again (see `mkg status` for why they failed)."""
    paths = runtime.Paths.from_env()
    try:
        with Spool(paths.spool) as spool:
            count = spool.requeue()
    except SpoolError as exc:
        fail(str(exc))
    click.echo(f"Queued {count} failed event(s) again.")


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def status_command(app: App, as_json: bool) -> None:
    """Show the worker, the spool depth, background jobs, the oldest pending event and the last error."""
    report = collect_status(runtime.Paths.from_env())
    if as_json:
        print_json(report)
        return
    worker = report["worker"]
    if worker["running"]:
        extra = (
            f", up {_duration(worker.get('uptime_seconds'))}"
            if worker.get("uptime_seconds") is not None
            else ""
        )
        click.echo(f"Worker:   running (pid {worker['pid']}{extra})")
    else:
        click.echo("Worker:   not running (the next hook starts it; or `mkg worker start`)")
    spool = report["spool"]
    if spool.get("error"):
        click.echo(f"Spool:    {spool['path']}: {spool['error']}")
    else:
        click.echo(
            f"Spool:    {spool['pending']} pending, {spool['done']} stored (last 24 h),"
            f" {spool['failed']} quarantined  ({spool['path']})"
        )
        if spool.get("oldest_pending"):
            click.echo(f"Oldest pending event: {spool['oldest_pending']}")
        jobs = spool.get("jobs", {})
        running = f", running: {worker['job_running']}" if worker.get("job_running") else ""
        click.echo(
            f"Jobs:     {jobs.get('pending', 0)} waiting, {jobs.get('done', 0)} done (last 24 h),"
            f" {jobs.get('failed', 0)} given up{running}"
        )
    if spool.get("overflow"):
        click.echo(
            f"Overflow: {spool['overflow']} event(s) in the overflow journal (the worker imports them)"
        )
    for aside in spool.get("quarantined_files") or []:
        click.echo(f"Quarantined spool: {aside} (it was corrupt; a new spool took over)")
    for entry in spool.get("unreadable_journal") or []:
        click.echo(f"Unreadable journal entry: {entry} (its event could not be read back)")
    if report.get("last_error"):
        click.echo(
            f"Last error: {report['last_error']}"
            + (f" (at {report['last_error_at']})" if report.get("last_error_at") else "")
        )
    if spool.get("last_failure"):
        click.echo(f"Last quarantined event: {spool['last_failure']}  (`mkg worker retry` queues them again)")
    click.echo(f"Log:      {report['log']}")


def collect_status(paths: runtime.Paths) -> dict[str, Any]:
    pid = runtime.worker_pid(paths)
    worker: dict[str, Any] = {"running": pid is not None, "pid": pid, "socket": paths.socket}
    live = runtime.request(paths, {"op": "status"}, 2.0) if pid is not None else None
    if live:
        worker.update(
            {
                k: live[k]
                for k in (
                    "uptime_seconds",
                    "drained",
                    "answers",
                    "handler_failures",
                    "connections",
                    "job_running",
                    "jobs_run",
                    "jobs_failed",
                )
                if k in live
            }
        )
    spool: dict[str, Any] = {"path": paths.spool}
    meta: dict[str, Any] = {}
    if os.path.exists(paths.spool):
        try:
            with Spool(paths.spool) as db:
                spool.update(db.counts())
                spool["jobs"] = db.job_counts()
                spool["oldest_pending"] = db.oldest_pending()
                failure = db.last_failure()
                spool["last_failure"] = f"{failure[0]}: {failure[1]}" if failure else None
                meta = db.meta()
        except SpoolError as exc:
            spool["error"] = str(exc)
    else:
        spool.update(
            {
                "pending": 0,
                "done": 0,
                "failed": 0,
                "jobs": {"pending": 0, "done": 0, "failed": 0},
                "oldest_pending": None,
                "last_failure": None,
            }
        )
    spool["overflow"] = len(overflow_files(paths.root))
    spool["quarantined_files"] = quarantined_spools(paths.root)
    spool["unreadable_journal"] = unreadable_overflow(paths.root)
    last_error = (live or {}).get("last_error") if live else meta.get("last_error")
    last_error_at = meta.get("last_error_at")
    return {
        "state_dir": paths.root,
        "worker": worker,
        "spool": spool,
        "last_error": last_error,
        "last_error_at": _iso(last_error_at) if isinstance(last_error_at, (int, float)) else None,
        "log": paths.log,
    }


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def _duration(seconds: Any) -> str:
    seconds = int(seconds or 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"


def _wait_gone(paths: runtime.Paths, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runtime.worker_pid(paths) is None:
            return True
        time.sleep(0.1)
    return runtime.worker_pid(paths) is None
