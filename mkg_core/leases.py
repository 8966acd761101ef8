"""Leases in the graph: background work that several workers could do at once (a team's workers
on one database, or one user's on two machines) is done by one of them at a time.

A lease is a ``(:JobLease {key, owner, expires_at, acquired_at, renewed_at})`` node, unique by
``key``. A worker takes it when it is free, expired or already its own; while the work runs it
renews it every third of its lifetime; it frees it when the work ends. A worker that dies holding a
lease blocks that work for at most the lifetime (``MKG_JOB_LEASE_SECONDS``, default 120 s); on the
machine it died on, the next worker sees that its process is gone and takes the lease at once.

Taking a lease first writes the node, which locks it, and only then reads who holds it, so two
workers asking at the same moment are serialised by the database and exactly one gets it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Lease", "LeaseHeld", "worker_identity"]

log = logging.getLogger("mkg.leases")

DEFAULT_SECONDS = 120.0

#: Lock the lease node (the first SET), then decide from what it holds now.
TAKE = """
MERGE (l:JobLease {key: $key})
  ON CREATE SET l.created_at = $now
SET l.touched_at = $now
WITH l, (l.owner IS NULL OR l.owner = $owner OR l.expires_at < $now) AS free
SET l.acquired_at = CASE WHEN free AND coalesce(l.owner, '') <> $owner THEN $now ELSE l.acquired_at END,
    l.owner = CASE WHEN free THEN $owner ELSE l.owner END,
    l.expires_at = CASE WHEN free THEN $until ELSE l.expires_at END
RETURN free AS taken, l.owner AS owner, l.expires_at AS expires_at
"""

RENEW = """
MATCH (l:JobLease {key: $key, owner: $owner})
SET l.expires_at = $until, l.renewed_at = $now
RETURN count(l) AS renewed
"""

#: Take a lease from a holder known to be dead, unless someone else has taken it meanwhile.
TAKE_OVER = """
MATCH (l:JobLease {key: $key, owner: $dead})
SET l.owner = $owner, l.expires_at = $until, l.acquired_at = $now, l.touched_at = $now,
    l.taken_over_from = $dead
RETURN count(l) AS taken
"""

RELEASE = """
MATCH (l:JobLease {key: $key, owner: $owner})
SET l.owner = null, l.expires_at = null, l.released_at = $now, l.last_owner = $owner,
    l.runs = coalesce(l.runs, 0) + 1
"""


def worker_identity() -> str:
    """Who holds a lease: this machine, process and a random part (a restarted worker is new)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _died_here(owner: str) -> bool:
    """Whether ``owner`` names a process of this machine that no longer runs."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, someone else's
        return False
    return False


class LeaseHeld(Exception):
    """Another worker holds the lease; ``until`` is when it expires unless renewed."""

    def __init__(self, key: str, owner: str, until: datetime | None) -> None:
        super().__init__(f"{key} is held by {owner} until {until.isoformat() if until else 'released'}")
        self.owner = owner
        self.until = until


@dataclass
class Lease:
    """One lease, held with ``with``: taken on entry (or :class:`LeaseHeld`), renewed while the
    block runs, freed on exit."""

    graph: Graph
    key: str
    owner: str
    seconds: float = DEFAULT_SECONDS
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _renewer: threading.Thread | None = field(default=None, repr=False)
    lost: bool = False

    def take(self) -> None:
        now = datetime.now(UTC)
        params = {
            "key": self.key,
            "owner": self.owner,
            "now": now,
            "until": now + timedelta(seconds=self.seconds),
        }
        row = self.graph.write(TAKE, params)[0]
        if (
            not row["taken"]
            and _died_here(str(row["owner"]))
            and self.graph.write(TAKE_OVER, {**params, "dead": row["owner"]})[0]["taken"]
        ):
            log.info("lease %s taken over from %s, whose process is gone", self.key, row["owner"])
            return
        if not row["taken"]:
            until = row["expires_at"]
            raise LeaseHeld(
                self.key, str(row["owner"]), until.to_native() if hasattr(until, "to_native") else until
            )

    def renew(self) -> bool:
        now = datetime.now(UTC)
        params = {
            "key": self.key,
            "owner": self.owner,
            "now": now,
            "until": now + timedelta(seconds=self.seconds),
        }
        return bool(self.graph.write(RENEW, params)[0]["renewed"])

    def release(self) -> None:
        self.graph.write(RELEASE, {"key": self.key, "owner": self.owner, "now": datetime.now(UTC)})

    def _keep(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                if not self.renew():
                    self.lost = True
                    log.warning("lease %s was taken over while its work ran (it had expired)", self.key)
                    return
            except Exception as exc:  # the database is away: the lease may lapse; the work goes on
                log.warning("lease %s could not be renewed: %s", self.key, exc)

    def __enter__(self) -> Lease:
        self.take()
        self._renewer = threading.Thread(target=self._keep, name=f"lease {self.key}", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        try:
            self.release()
        except Exception as error:  # it expires on its own
            log.warning("lease %s could not be freed: %s", self.key, error)
