"""Graph access: one driver factory, and sessions whose access mode is always explicit.

Reads run in read transactions, so the database itself refuses a write that slips into them (and a
cluster routes them to its readers); writes run in write transactions with the driver's retries
(transient errors, a leader that moved), and once more when a concurrent writer created the node a
``MERGE`` meant to create (a unique constraint refusing the second).

On a cluster or Aura (a routing URI, ``neo4j://`` or ``neo4j+s://``), MKG's processes share their
bookmarks through a file in the user's state folder: a learning one worker wrote is seen by the
next read of another process of the same user, whichever server answers it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import neo4j
from neo4j.exceptions import AuthError, ConstraintError, ServiceUnavailable, SessionExpired

from .errors import GraphUnavailable
from .settings import secret

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["Graph"]

T = TypeVar("T")

#: How long to wait for a connection before calling Neo4j unavailable.
CONNECTION_TIMEOUT = 5.0
#: URI schemes of a routing driver (a cluster, Aura), where bookmarks are shared between processes.
ROUTING_SCHEMES = ("neo4j://", "neo4j+s://", "neo4j+ssc://")
#: A write transaction refused by a unique constraint is run again this many times.
CONSTRAINT_RETRIES = 3


def routing(uri: str) -> bool:
    return uri.lower().startswith(ROUTING_SCHEMES)


class SharedBookmarks:
    """Bookmarks kept in a file that every MKG process of the user reads before a transaction and
    writes after one (mode 600, in the private state folder)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[str]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        return [str(b) for b in data] if isinstance(data, list) else []

    def write(self, bookmarks: neo4j.Bookmarks) -> None:
        values = sorted(bookmarks.raw_values)
        if not values:
            return
        from .runtime import ensure_private_dir

        ensure_private_dir(str(self.path.parent))
        # one temporary file per thread: the driver reports new bookmarks outside its lock
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(values, handle)
        os.replace(temporary, self.path)

    def manager(self) -> neo4j.BookmarkManager:
        return neo4j.GraphDatabase.bookmark_manager(
            initial_bookmarks=neo4j.Bookmarks.from_raw_values(self.read()),
            bookmarks_supplier=lambda: neo4j.Bookmarks.from_raw_values(self.read()),
            bookmarks_consumer=self.write,
        )

    @classmethod
    def for_settings(cls, settings: Settings) -> SharedBookmarks:
        from .runtime import state_dir

        key = hashlib.sha256(f"{settings.neo4j_uri}\n{settings.neo4j_database}".encode()).hexdigest()[:16]
        return cls(Path(state_dir(os.environ)) / "bookmarks" / f"{key}.json")


def make_driver(
    settings: Settings, *, connection_timeout: float = CONNECTION_TIMEOUT, max_retry_time: float = 15.0
) -> neo4j.Driver:
    """A driver for the configured Neo4j. Creating it does not connect.

    ``max_retry_time`` bounds how long a managed transaction is retried on transient errors;
    the worker keeps it short because it retries whole batches itself, with backoff.
    """
    password = secret(settings.neo4j_password)
    auth = (settings.neo4j_username, password) if password is not None else None
    return neo4j.GraphDatabase.driver(
        settings.neo4j_uri,
        auth=auth,
        connection_timeout=connection_timeout,
        connection_acquisition_timeout=connection_timeout * 2,
        max_transaction_retry_time=max_retry_time,
        user_agent="mkg",
        # MKG's queries name properties and relationships a young graph does not have yet; the
        # server's notices about that are noise in every log.
        notifications_min_severity="OFF",
    )


class Graph:
    """A driver bound to one database. Close it when done (or use it as a context manager)."""

    def __init__(
        self, driver: neo4j.Driver, database: str, bookmarks: neo4j.BookmarkManager | None = None
    ) -> None:
        self.driver = driver
        self.database = database
        self.bookmarks = bookmarks

    @classmethod
    def connect(cls, settings: Settings, **driver_options: float) -> Graph:
        """A graph for these settings; on a routing URI its bookmarks are shared (see the module)."""
        shared = routing(settings.neo4j_uri) or settings.shared_bookmarks
        bookmarks = SharedBookmarks.for_settings(settings).manager() if shared else None
        return cls(make_driver(settings, **driver_options), settings.neo4j_database, bookmarks)

    def close(self) -> None:
        self.driver.close()

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verify(self) -> str:
        """Connect and authenticate; return the server's agent string (``Neo4j/2026.09.0``)."""
        with _translate_errors(self):
            self.driver.verify_connectivity()
            info = self.driver.get_server_info()
            return str(info.agent)

    @contextmanager
    def session(self, access: str) -> Iterator[neo4j.Session]:
        """A session in ``neo4j.READ_ACCESS`` or ``neo4j.WRITE_ACCESS`` mode (no default)."""
        if access not in (neo4j.READ_ACCESS, neo4j.WRITE_ACCESS):
            raise ValueError(f"access must be READ_ACCESS or WRITE_ACCESS, not {access!r}")
        with (
            _translate_errors(self),
            self.driver.session(
                database=self.database, default_access_mode=access, bookmark_manager=self.bookmarks
            ) as s,
        ):
            yield s

    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run ``query`` in a read transaction; return the records as dicts."""
        return self.read_tx(lambda tx: [r.data() for r in tx.run(query, dict(params or {}))])

    def write(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run ``query`` in a write transaction (retried on transient errors); return the records."""
        return self.write_tx(lambda tx: [r.data() for r in tx.run(query, dict(params or {}))])

    def read_tx(self, work: Callable[[neo4j.ManagedTransaction], T]) -> T:
        with self.session(neo4j.READ_ACCESS) as s:
            return s.execute_read(work)

    def write_tx(self, work: Callable[[neo4j.ManagedTransaction], T]) -> T:
        for attempt in range(1, CONSTRAINT_RETRIES + 1):
            try:
                with self.session(neo4j.WRITE_ACCESS) as s:
                    return s.execute_write(work)
            except ConstraintError:
                # Another writer created, at the same moment, the node this MERGE would have: run
                # again, and the MERGE finds it.
                if attempt == CONSTRAINT_RETRIES:
                    raise
        raise AssertionError("unreachable")

    def run_autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a statement outside an explicit transaction (schema, ``CALL ... IN TRANSACTIONS``)."""
        with self.session(neo4j.WRITE_ACCESS) as s:
            return [r.data() for r in s.run(query, dict(params or {}))]


@contextmanager
def _translate_errors(graph: Graph) -> Iterator[None]:
    try:
        yield
    except AuthError as exc:
        raise GraphUnavailable(
            f"Neo4j refused the credentials ({exc.message}); check NEO4J_USERNAME and NEO4J_PASSWORD "
            "or run `mkg setup`"
        ) from exc
    except (ServiceUnavailable, SessionExpired, OSError) as exc:
        raise GraphUnavailable(
            f"Neo4j is not reachable ({exc}); is it running? Check NEO4J_URI or run `mkg doctor`"
        ) from exc
