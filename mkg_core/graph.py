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
from urllib.parse import urlsplit

import neo4j
from neo4j.exceptions import (
    AuthError,
    ConfigurationError,
    ConstraintError,
    ServiceUnavailable,
    SessionExpired,
)

from .errors import GraphUnavailable
from .settings import secret

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["Graph", "uri_problem"]

T = TypeVar("T")

#: How long to wait for a connection before calling Neo4j unavailable.
CONNECTION_TIMEOUT = 5.0
#: URI schemes of a routing driver (a cluster, Aura), where bookmarks are shared between processes.
ROUTING_SCHEMES = ("neo4j://", "neo4j+s://", "neo4j+ssc://")
#: The URI schemes of the Bolt driver (the driver's HTTP ones are a preview MKG does not use).
URI_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
#: A write transaction refused by a unique constraint is run again this many times.
CONSTRAINT_RETRIES = 3


def routing(uri: str) -> bool:
    return uri.lower().startswith(ROUTING_SCHEMES)


def uri_problem(uri: str) -> str | None:
    """Why the driver cannot use ``uri`` as NEO4J_URI, as a sentence naming the setting; None when
    it can try it."""
    scheme, sep, rest = uri.partition("://")
    netloc = rest.partition("/")[0]
    if "@" in netloc:  # a password in a message would end up in logs
        shown = f"{scheme}{sep}***@{netloc.rpartition('@')[2]}{rest[len(netloc) :]}"
        return f"NEO4J_URI {shown!r} carries a user name: put it in NEO4J_USERNAME and NEO4J_PASSWORD"
    if not sep or scheme.lower() not in URI_SCHEMES:
        schemes = ", ".join(f"{name}://" for name in URI_SCHEMES)
        return f"NEO4J_URI {uri!r} is not a Neo4j URI: those start with {schemes} (bolt://localhost:7687)"
    try:
        parts = urlsplit(uri)
        host, _ = parts.hostname or "", parts.port  # reading the port checks it is a number
    except ValueError as exc:  # a port that is not a number from 0 to 65535, an unclosed [IPv6]
        return f"NEO4J_URI {uri!r} is not a valid URI ({exc})"
    try:
        host.encode("idna")
    except UnicodeError:
        return f"NEO4J_URI {uri!r} has a host name with an empty or overlong part between its dots"
    return None


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
    uri = settings.neo4j_uri
    problem = uri_problem(uri)
    if problem is not None:
        raise GraphUnavailable(f"{problem}; fix NEO4J_URI (or --db-url), or run `mkg setup`")
    password = secret(settings.neo4j_password)
    auth = (settings.neo4j_username, password) if password is not None else None
    try:
        return neo4j.GraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=connection_timeout,
            connection_acquisition_timeout=connection_timeout * 2,
            max_transaction_retry_time=max_retry_time,
            user_agent="mkg",
            # MKG's queries name properties and relationships a young graph does not have yet; the
            # server's notices about that are noise in every log.
            notifications_min_severity="OFF",
        )
    except ConfigurationError as exc:  # what else the driver refuses in a URI (a query on bolt://)
        raise GraphUnavailable(
            f"NEO4J_URI {uri!r} cannot be used: {exc}; fix NEO4J_URI (or --db-url), or run `mkg setup`"
        ) from None


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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


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
            f"Neo4j is not reachable ({_one_line(exc)}); is it running? Check NEO4J_URI or run `mkg doctor`"
        ) from exc
    except ValueError as exc:
        # The driver reports some failures to look its address up as a ValueError caused by the
        # OSError of the lookup; any other ValueError is not about reaching Neo4j.
        if not isinstance(exc.__cause__, OSError):
            raise
        raise GraphUnavailable(
            f"Neo4j's address cannot be looked up ({_one_line(exc)}); check NEO4J_URI (or --db-url)"
        ) from exc
