"""Graph access: one driver factory, and sessions whose access mode is always explicit.

Reads run in read transactions, so the database itself refuses a write that slips into them;
writes run in write transactions with the driver's retries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import neo4j
from neo4j.exceptions import AuthError, ServiceUnavailable, SessionExpired

from .errors import GraphUnavailable
from .settings import secret

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["Graph"]

T = TypeVar("T")

#: How long to wait for a connection before calling Neo4j unavailable.
CONNECTION_TIMEOUT = 5.0


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

    def __init__(self, driver: neo4j.Driver, database: str) -> None:
        self.driver = driver
        self.database = database

    @classmethod
    def connect(cls, settings: Settings, **driver_options: float) -> Graph:
        return cls(make_driver(settings, **driver_options), settings.neo4j_database)

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
            self.driver.session(database=self.database, default_access_mode=access) as s,
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
        with self.session(neo4j.WRITE_ACCESS) as s:
            return s.execute_write(work)

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
