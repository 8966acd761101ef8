"""What a shared database shares: the one MKG tool that could read another user's private memory.

Project memory (learnings, observations, error patterns) is shared by everyone working on the
project; user-scoped memory belongs to its user, and every recall path and memory tool filters on
it. ``neo4j_read_cypher`` runs whatever read query the agent writes, so in a database that holds
the memory of several users it could read their user-scoped facts. It is therefore:

- ``on`` where the database holds one user's memory (``MKG_READ_CYPHER=auto``, the default);
- ``off`` where it holds several users' memory, unless ``MKG_READ_CYPHER=on`` says otherwise;
- ``confined`` when ``MKG_READ_CYPHER_USERNAME`` names a Neo4j user for it alone: an administrator
  gives that user a role that reads only what may be read (an edition with roles: Enterprise, Aura),
  and the tool connects as that user.

``mkg doctor`` says which applies, and why.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import MkgError
from .graph import Graph

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["MEMORY_USERS", "CypherAccess", "read_cypher_access", "read_cypher_graph"]

#: The users whose memory the database holds.
MEMORY_USERS = """
MATCH (u:User)
WHERE EXISTS { (u)-[:HAS_SESSION]->() } OR EXISTS { MATCH (:Learning {user_id: u.id}) }
RETURN count(u) AS users
"""


class ReadCypherOff(MkgError):
    """neo4j_read_cypher is off in this database; the message says why and what would allow it."""


@dataclass(frozen=True)
class CypherAccess:
    mode: str  # on | off | confined
    reason: str


def read_cypher_access(graph: Graph, settings: Settings) -> CypherAccess:
    """Whether ``neo4j_read_cypher`` may run against this database, and why."""
    if settings.read_cypher_username:
        user = settings.read_cypher_username
        return CypherAccess("confined", f"runs as Neo4j user {user!r} (MKG_READ_CYPHER_USERNAME)")
    if settings.read_cypher == "on":
        return CypherAccess("on", "MKG_READ_CYPHER=on")
    if settings.read_cypher == "off":
        return CypherAccess("off", "MKG_READ_CYPHER=off")
    users = int(graph.read(MEMORY_USERS)[0]["users"])
    if users <= 1:
        return CypherAccess("on", "the database holds one user's memory")
    return CypherAccess(
        "off",
        f"the database holds the memory of {users} users, and a free query could read their private "
        "facts; an administrator can give MKG a Neo4j user whose role reads only what may be read "
        "(MKG_READ_CYPHER_USERNAME and MKG_READ_CYPHER_PASSWORD), or MKG_READ_CYPHER=on allows it",
    )


_confined: dict[tuple[str, str, str], Graph] = {}
_lock = threading.Lock()


def read_cypher_graph(graph: Graph, settings: Settings) -> Graph:
    """The connection ``neo4j_read_cypher`` runs on: its own user's when confined, else ``graph``;
    :class:`ReadCypherOff` when it is off."""
    access = read_cypher_access(graph, settings)
    if access.mode == "off":
        raise ReadCypherOff(f"neo4j_read_cypher is off: {access.reason}")
    if access.mode != "confined":
        return graph
    assert settings.read_cypher_username is not None
    key = (settings.neo4j_uri, settings.read_cypher_username, settings.neo4j_database)
    with _lock:
        confined = _confined.get(key)
        if confined is None:
            confined = _confined[key] = Graph.connect(
                settings.model_copy(
                    update={
                        "neo4j_username": settings.read_cypher_username,
                        "neo4j_password": settings.read_cypher_password,
                    }
                )
            )
    return confined
