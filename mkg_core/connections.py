"""Graph connections, embedders and query tools, one per distinct configuration, made on first use.

Events and MCP sessions may carry different settings (a project's ``.env`` can point at another
Neo4j or another embedding model), so everything here is keyed by the part of the settings it
depends on. The worker holds one :class:`Connections` for the events it stores, the hooks it answers
and the MCP sessions it serves; a standalone ``mkg serve`` holds its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .errors import GraphUnavailable, MkgError
from .graph import Graph
from .schema import apply_schema, vector_dimension_mismatches
from .settings import Settings, secret

if TYPE_CHECKING:
    from .contrib import ContextProvider, Embedder, QueryTool
    from .host import PluginHost

__all__ = ["Connections", "connection_key"]

log = logging.getLogger("mkg.connections")

ConnectionKey = tuple[str, str, str, str]

#: After Neo4j failed to answer, for how long waiting hooks are answered without trying it (a try
#: costs the driver's retries, longer than a hook's deadline). The worker's drain keeps trying, at
#: least this often while events wait, and its first success ends the outage at once.
OUTAGE_RECHECK_SECONDS = 15.0


def connection_key(settings: Settings) -> ConnectionKey:
    """What makes two settings share a driver: URI, user, database and (a digest of) the password."""
    password = secret(settings.neo4j_password) or ""
    digest = hashlib.sha256(password.encode()).hexdigest()[:16]
    return (settings.neo4j_uri, settings.neo4j_username, settings.neo4j_database, digest)


class Connections:
    """One driver per distinct connection (the schema applied on first use, then the context
    providers warmed up on it), and the embedder and query tools each configuration selects."""

    def __init__(
        self,
        host: PluginHost,
        *,
        providers: Iterable[ContextProvider] = (),
        connection_timeout: float = 3.0,
        max_retry_time: float = 2.0,
        schema_wait_seconds: int = 120,
    ) -> None:
        self.host = host
        self.providers = list(providers)
        self.connection_timeout = connection_timeout
        self.max_retry_time = max_retry_time
        self.schema_wait_seconds = schema_wait_seconds
        self._graphs: dict[ConnectionKey, Graph] = {}
        self._schema_done: set[ConnectionKey] = set()
        self._lock = threading.Lock()
        self._embedders: dict[Any, Embedder | None] = {}
        self._query_tools: dict[Any, dict[str, QueryTool]] = {}
        self._local_start_after = 0.0
        self._down_until: dict[ConnectionKey, float] = {}
        self._warming = False
        self._closed = threading.Event()

    def warm_up_connections(self) -> None:
        """For a long-lived process (the worker serving hooks): from now on, each connection made
        is warmed up in the background (see :meth:`_warm_up_connection`). A process that drains
        once and exits does not want it."""
        self._warming = True

    def graph_for(self, settings: Settings) -> Graph:
        """The driver for these settings' connection; raises GraphUnavailable when it cannot be had."""
        try:
            return self._graph_for(settings)
        except GraphUnavailable:
            self.neo4j_down(settings)
            raise

    def neo4j_down(self, settings: Settings) -> None:
        """Neo4j did not answer: remember it for :data:`OUTAGE_RECHECK_SECONDS` (see
        :meth:`known_down`), and when it is the one MKG runs itself (``MKG_LOCAL_NEO4J``), start it
        (in the background; the caller retries as it would anyway). At most once a minute."""
        self._down_until[connection_key(settings)] = time.monotonic() + OUTAGE_RECHECK_SECONDS
        if not settings.local_neo4j or time.monotonic() < self._local_start_after:
            return
        self._local_start_after = time.monotonic() + 60
        from .localdb import LocalNeo4j

        try:
            db = LocalNeo4j.for_user(os.environ)
            if db.pid() is None:
                db.start(wait=False)
                log.info("started the local Neo4j (%s); it answers in a few seconds", db.credentials().uri)
        except MkgError as exc:
            log.warning("the local Neo4j is down and could not be started: %s", exc)

    def neo4j_up(self, settings: Settings) -> None:
        """Neo4j answered: forget an outage."""
        self._down_until.pop(connection_key(settings), None)

    def known_down(self, settings: Settings) -> bool:
        """Whether Neo4j failed to answer for these settings less than
        :data:`OUTAGE_RECHECK_SECONDS` ago (and has not answered since)."""
        until = self._down_until.get(connection_key(settings))
        return until is not None and time.monotonic() < until

    def _graph_for(self, settings: Settings) -> Graph:
        key = connection_key(settings)
        with self._lock:
            graph = self._graphs.get(key)
            if graph is None:
                graph = self._graphs[key] = Graph.connect(
                    settings, connection_timeout=self.connection_timeout, max_retry_time=self.max_retry_time
                )
            if key not in self._schema_done:
                try:
                    apply_schema(
                        graph, self.host.schema_statements(settings), wait_seconds=self.schema_wait_seconds
                    )
                except GraphUnavailable:
                    raise
                except MkgError as exc:
                    raise GraphUnavailable(f"could not apply the schema ({exc})") from exc
                self._schema_done.add(key)
                mismatches = vector_dimension_mismatches(graph, self.host.vector_dimensions(settings))
                if mismatches:
                    log.warning(
                        "%s: vector search is skipped until `mkg backfill-embeddings` rebuilds them",
                        "; ".join(mismatches),
                    )
                if self._warming:
                    threading.Thread(
                        target=self._warm_up_connection,
                        args=(graph, settings),
                        name="mkg-warm-up",
                        daemon=True,
                    ).start()
                log.info(
                    "connected to %s (database %s); schema applied",
                    settings.neo4j_uri,
                    settings.neo4j_database,
                )
        return graph

    def _warm_up_connection(self, graph: Graph, settings: Settings) -> None:
        """In the background, so that the first answers are not the slow ones: load the embedder's
        model, then let the context providers plan their queries. An answer that comes sooner
        does not wait for it; closing the connections ends it quietly."""
        started = time.monotonic()
        try:
            embedder = self.embedder_for(settings)
            if embedder is not None:
                embedder.warm_up()
        except Exception as exc:
            log.warning("the embedder could not warm up: %s", exc)
            embedder = None
        for provider in self.providers:
            if self._closed.is_set():
                return
            try:
                _warm_up_provider(provider, graph, embedder)
            except Exception as exc:
                if not self._closed.is_set():
                    log.warning("context provider %r could not warm up: %s", provider.name, exc)
        log.info("warmed up in %.1f s", time.monotonic() - started)

    def embedder_for(self, settings: Settings) -> Embedder | None:
        """The embedder these settings select (one per embedding configuration)."""
        keys = "\n".join(secret(value) or "" for value in (settings.openai_api_key, settings.gemini_api_key))
        cache_key = (
            settings.embedding_model,
            settings.embedding_dimensions,
            settings.openai_base_url,
            hashlib.sha256(keys.encode()).hexdigest()[:16],
        )
        if cache_key not in self._embedders:  # no lock: making one may import litellm (seconds)
            made = self.host.embedder(settings)
            # Two threads may make one at once; both use the first stored (its model, once loaded).
            return self._embedders.setdefault(cache_key, made)
        return self._embedders[cache_key]

    def query_tools_for(self, settings: Settings) -> dict[str, QueryTool]:
        """The query tools these settings mount (a provider may need its own configuration)."""
        cache_key = tuple(sorted((k, str(v)) for k, v in settings.model_dump().items()))
        if cache_key not in self._query_tools:
            self._query_tools[cache_key] = self.host.query_tools(settings)
        return self._query_tools[cache_key]

    def uris(self) -> list[str]:
        """The Neo4j URIs connected to so far."""
        with self._lock:
            return sorted({key[0] for key in self._graphs})

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            for graph in self._graphs.values():
                with contextlib.suppress(Exception):
                    graph.close()
            self._graphs.clear()
            self._schema_done.clear()


def _warm_up_provider(provider: ContextProvider, graph: Graph, embedder: Embedder | None) -> None:
    """``provider.warm_up(graph, embedder)``, or ``warm_up(graph)`` for a provider written before
    warm-ups were given the embedder."""
    try:
        takes_embedder = "embedder" in inspect.signature(provider.warm_up).parameters
    except (TypeError, ValueError):
        takes_embedder = True
    if takes_embedder:
        provider.warm_up(graph, embedder)
    else:
        provider.warm_up(graph)  # type: ignore[call-arg]
