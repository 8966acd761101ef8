"""The durable local spool: every captured event waits here until the graph has it.

Standard library only: the hook appends to it. SQLite in WAL mode, so many hooks append at once
while the worker reads; each append is one committed transaction, so an event is either fully
in the spool or not at all. The worker takes rows in the order the hooks received them and marks a
row ``done`` only after the graph transaction that stored it committed; a row the harness adapter
cannot read, or that the graph refuses again and again, is quarantined (``failed``, with the
reason) and kept for inspection (``mkg worker retry`` queues it again).

Two things keep capture going when the spool itself misbehaves:

- a corrupt spool file is moved aside (``spool.db.corrupt-<time>``, see :func:`quarantine`) by
  whoever finds it, hook or worker, and a new one is started;
- a hook that cannot write the spool within its deadline (another process holds it locked) writes
  the event to the **overflow journal** instead: one file per event in ``overflow/``, written whole
  and then renamed into place. The worker imports them into the spool in the order they were
  received, exactly once (event ids are unique), before it drains.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time

from .runtime import SPOOL_FILE, ensure_private_dir

TYPE_CHECKING = False  # typing itself is too slow to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any

#: Rows the worker has stored are kept this long (for ``mkg status``), then pruned.
DONE_RETENTION_SECONDS = 24 * 3600
#: What names an event in the spool, besides its record (the overflow journal's entries too).
ROW_FIELDS = ("event_id", "client", "event", "session_id", "received_at")

#: Environment variables of the hook's process that decide identity; the worker sees them: MKG's
#: own, and whatever a harness names its project, workspace, plugin and configuration folders.
ENV_HINT_KEYS = (
    "MKG_PROJECT_ID",
    "MKG_PROJECT_NAME",
    "MKG_PROJECT_ROOT",
    "MKG_PROJECT_DIR",
    "MKG_USER_ID",
    "MKG_USER_ID_SOURCE",
    "MKG_CLIENT",
    "MKG_HOOK_ROOT",
    "MKG_PLUGIN_ROOT",
    "HOME",
)
ENV_HINT_SUFFIXES = ("_PROJECT_DIR", "_WORKSPACE_ROOT", "_PLUGIN_ROOT", "_CONFIG_DIR", "_HOME")


def is_env_hint(key: str) -> bool:
    return key in ENV_HINT_KEYS or (key.endswith(ENV_HINT_SUFFIXES) and key.count("_") <= 3)


def env_hints(environ: Mapping[str, str]) -> dict[str, str]:
    """The identity hints in a hook's environment (see :data:`ENV_HINT_KEYS`)."""
    return {key: value for key, value in environ.items() if value and is_env_hint(key)}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    client TEXT NOT NULL,
    event TEXT NOT NULL,
    session_id TEXT NOT NULL,
    received_at TEXT NOT NULL,
    record TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    done_at REAL
);
CREATE INDEX IF NOT EXISTS events_by_state ON events (state, seq);
CREATE INDEX IF NOT EXISTS events_in_received_order ON events (state, received_at, seq);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    summary TEXT,
    created_at REAL NOT NULL,
    not_before REAL NOT NULL DEFAULT 0,
    done_at REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_one_pending ON jobs (name, key) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, not_before, id);
"""

SCHEMA_VERSION = 3
#: The overflow journal's folder (in the state folder) and the name a quarantined spool gets.
OVERFLOW_DIR = "overflow"
CORRUPT_SUFFIX = ".corrupt-"
#: Beside a spool moved aside once its pending events were carried over (:func:`salvage`).
CARRIED_SUFFIX = ".carried"
#: Given to an overflow journal entry that cannot be read back.
UNREADABLE = ".unreadable"
PENDING, DONE, FAILED = "pending", "done", "failed"
_COLUMNS = "seq, event_id, client, event, session_id, received_at, record, attempts"


class SpoolError(Exception):
    """The spool cannot be opened or written (corrupt file, full disk, locked, permissions)."""

    @property
    def corrupt(self) -> bool:
        return "the file is corrupt" in str(self)

    @property
    def locked(self) -> bool:
        return "locked" in str(self) or "busy" in str(self)


# -- building a record (in the hook) ---------------------------------------------------------------


def utc_timestamp(ns: int) -> str:
    """ISO-8601 UTC with microseconds, from nanoseconds since the epoch."""
    seconds, rest = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1000:06d}Z"


def event_id(client: str, session_id: str, event: str, received_at: str, digest: str) -> str:
    """Fixed when the hook spools the event, so a replayed row or a retried drain creates nothing new."""
    basis = f"{received_at}\n{digest}".encode()
    return f"{client}:{session_id}:{event}:{hashlib.sha256(basis).hexdigest()[:16]}"


# -- the spool file ---------------------------------------------------------------------------------


class Spool:
    """One connection to the spool file. Not shared between threads."""

    def __init__(self, path: str, *, timeout: float = 10.0) -> None:
        self.path = path
        folder = os.path.dirname(path)
        try:
            if folder:
                ensure_private_dir(folder)
            if not os.path.exists(path):
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            self.inode = os.stat(path).st_ino
            self.db = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA synchronous=FULL")
            if self.db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                self.db.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
                self.db.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
        except (sqlite3.Error, OSError) as exc:
            raise SpoolError(f"spool {path} is unusable ({_describe(exc)})") from exc

    def close(self) -> None:
        self.db.close()

    def replaced(self) -> bool:
        """Whether the file at this spool's path is no longer the one this connection opened (a
        hook quarantined it as corrupt)."""
        try:
            return os.stat(self.path).st_ino != self.inode
        except OSError:
            return True

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------------

    def append(
        self,
        *,
        event_id: str,
        client: str,
        event: str,
        session_id: str,
        received_at: str,
        record: dict[str, object],
    ) -> tuple[int, bool]:
        """Add an event; return its sequence number and whether it was new (a replay is not)."""
        try:
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO events (event_id, client, event, session_id, received_at, record)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (event_id, client, event, session_id, received_at, json.dumps(record, ensure_ascii=False)),
            )
            if cursor.rowcount == 1:
                return int(cursor.lastrowid or 0), True
            row = self.db.execute("SELECT seq FROM events WHERE event_id = ?", (event_id,)).fetchone()
            return int(row[0]), False
        except sqlite3.Error as exc:
            raise SpoolError(f"could not write to the spool {self.path} ({_describe(exc)})") from exc

    def mark_done(self, seqs: Iterable[int]) -> None:
        now = time.time()
        with self._transaction():
            self.db.executemany(
                "UPDATE events SET state = 'done', done_at = ?, error = NULL WHERE seq = ?",
                [(now, seq) for seq in seqs],
            )

    def mark_failed(self, seq: int, reason: str) -> None:
        with self._transaction():
            self.db.execute(
                "UPDATE events SET state = 'failed', error = ?, attempts = attempts + 1, done_at = ?"
                " WHERE seq = ?",
                (reason[:2000], time.time(), seq),
            )

    def note_attempt(self, seq: int, error: str) -> int:
        """Record a failed attempt at a row that stays pending; return the attempt count."""
        with self._transaction():
            self.db.execute(
                "UPDATE events SET attempts = attempts + 1, error = ? WHERE seq = ?", (error[:2000], seq)
            )
            row = self.db.execute("SELECT attempts FROM events WHERE seq = ?", (seq,)).fetchone()
        return int(row[0]) if row else 0

    def requeue(self, state: str = FAILED) -> int:
        """Put every row in ``state`` back to pending (``mkg worker retry``); return how many."""
        with self._transaction():
            cursor = self.db.execute(
                "UPDATE events SET state = 'pending', attempts = 0, error = NULL, done_at = NULL"
                " WHERE state = ?",
                (state,),
            )
        return cursor.rowcount

    def prune(self, older_than: float = DONE_RETENTION_SECONDS) -> int:
        cutoff = time.time() - older_than
        with self._transaction():
            cursor = self.db.execute(
                "DELETE FROM events WHERE state = 'done' AND done_at < ?"
                " AND seq NOT IN (SELECT seq FROM jobs WHERE state = 'pending')",
                (cutoff,),
            )
            self.db.execute("DELETE FROM jobs WHERE state <> 'pending' AND done_at < ?", (cutoff,))
        return cursor.rowcount

    # -- jobs -----------------------------------------------------------------------------------

    def add_job(self, name: str, key: str, seq: int) -> None:
        """Record a job for the event ``seq``; a pending job with the same name and key takes the
        newer event instead (they coalesce)."""
        with self._transaction():
            self.db.execute(
                "INSERT INTO jobs (name, key, seq, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name, key) WHERE state = 'pending'"
                " DO UPDATE SET seq = max(seq, excluded.seq)",
                (name, key, seq, time.time()),
            )

    def next_job(self, now: float | None = None) -> JobRow | None:
        """The oldest pending job that may run now."""
        row = self.db.execute(
            "SELECT id, name, key, seq, attempts FROM jobs WHERE state = 'pending' AND not_before <= ?"
            " ORDER BY id LIMIT 1",
            (time.time() if now is None else now,),
        ).fetchone()
        return JobRow(*row) if row else None

    def finish_job(self, job_id: int, summary: str | None) -> None:
        with self._transaction():
            self.db.execute(
                "UPDATE jobs SET state = 'done', summary = ?, error = NULL, done_at = ? WHERE id = ?",
                (summary, time.time(), job_id),
            )

    def retry_job(self, job_id: int, error: str, delay: float, *, give_up_after: int) -> bool:
        """Note a failed run; the job runs again after ``delay`` unless it has failed too often.
        Return True when it was given up."""
        with self._transaction():
            self.db.execute(
                "UPDATE jobs SET attempts = attempts + 1, error = ?, not_before = ? WHERE id = ?",
                (error, time.time() + delay, job_id),
            )
            (attempts,) = self.db.execute("SELECT attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if attempts < give_up_after:
                return False
            # A newer trigger may already wait under the same key; keep that one.
            self.db.execute(
                "UPDATE jobs SET state = 'failed', done_at = ? WHERE id = ?", (time.time(), job_id)
            )
        return True

    def postpone_job(self, job_id: int, reason: str, delay: float) -> None:
        """Run a job later without counting a failed run (another worker holds its lease)."""
        with self._transaction():
            self.db.execute(
                "UPDATE jobs SET error = ?, not_before = ? WHERE id = ?",
                (reason, time.time() + delay, job_id),
            )

    def job_counts(self) -> dict[str, int]:
        counts = {PENDING: 0, DONE: 0, FAILED: 0}
        for state, count in self.db.execute("SELECT state, count(*) FROM jobs GROUP BY state"):
            counts[str(state)] = int(count)
        return counts

    def set_meta(self, values: dict[str, object]) -> None:
        with self._transaction():
            self.db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(key, json.dumps(value)) for key, value in values.items()],
            )

    # -- reading --------------------------------------------------------------------------------

    def pending(self, limit: int = 100, *, skip_sessions: Iterable[str] = ()) -> list[SpoolRow]:
        """The next pending rows, in the order the hooks received them (those of ``skip_sessions``
        left out)."""
        skip = sorted(skip_sessions)
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM events WHERE state = 'pending'"
            f" AND session_id NOT IN ({', '.join('?' * len(skip))})"
            " ORDER BY received_at, seq LIMIT ?",
            (*skip, limit),
        ).fetchall()
        return [SpoolRow(*row) for row in rows]

    def get(self, seq: int) -> SpoolRow | None:
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM events WHERE seq = ?",
            (seq,),
        ).fetchone()
        return SpoolRow(*row) if row else None

    def state_of(self, seq: int) -> str | None:
        row = self.db.execute("SELECT state FROM events WHERE seq = ?", (seq,)).fetchone()
        return str(row[0]) if row else None

    def counts(self) -> dict[str, int]:
        counts = {PENDING: 0, DONE: 0, FAILED: 0}
        for state, count in self.db.execute("SELECT state, count(*) FROM events GROUP BY state"):
            counts[str(state)] = int(count)
        return counts

    def oldest_pending(self) -> str | None:
        row = self.db.execute("SELECT min(received_at) FROM events WHERE state = 'pending'").fetchone()
        return str(row[0]) if row and row[0] else None

    def last_failure(self) -> tuple[str, str] | None:
        row = self.db.execute(
            "SELECT event_id, error FROM events WHERE state = 'failed' ORDER BY done_at DESC LIMIT 1"
        ).fetchone()
        return (str(row[0]), str(row[1] or "")) if row else None

    def meta(self) -> dict[str, object]:
        return {str(key): json.loads(value) for key, value in self.db.execute("SELECT key, value FROM meta")}

    def _transaction(self) -> _Transaction:
        return _Transaction(self.db)


class SpoolRow:
    """One spooled event as the worker reads it."""

    __slots__ = ("attempts", "client", "event", "event_id", "received_at", "record", "seq", "session_id")

    def __init__(
        self,
        seq: int,
        event_id: str,
        client: str,
        event: str,
        session_id: str,
        received_at: str,
        record: str,
        attempts: int,
    ) -> None:
        self.seq = seq
        self.event_id = event_id
        self.client = client
        self.event = event
        self.session_id = session_id
        self.received_at = received_at
        self.record: dict[str, object] = json.loads(record)
        self.attempts = attempts

    def __repr__(self) -> str:
        return f"<SpoolRow {self.seq} {self.event_id}>"


class JobRow:
    """One pending background job as the worker reads it."""

    __slots__ = ("attempts", "id", "key", "name", "seq")

    def __init__(self, id: int, name: str, key: str, seq: int, attempts: int) -> None:
        self.id = id
        self.name = name
        self.key = key
        self.seq = seq
        self.attempts = attempts

    def __repr__(self) -> str:
        return f"<JobRow {self.id} {self.name} seq={self.seq}>"


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


# -- the overflow journal ------------------------------------------------------------------------------


def overflow_dir(root: str) -> str:
    return os.path.join(root, OVERFLOW_DIR)


def write_overflow(root: str, received_ns: int, entry: dict[str, object]) -> str:
    """Journal one event that could not reach the spool in time; return the file written.

    The file is written under a temporary name and renamed, so the worker never reads half of one;
    its name sorts in the order the hooks received the events."""
    folder = ensure_private_dir(overflow_dir(root))
    name = (
        f"{received_ns:020d}-{os.getpid()}-{hashlib.sha256(str(entry['event_id']).encode()).hexdigest()[:12]}"
    )
    temporary = os.path.join(folder, f".{name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(entry, handle, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())  # on disk before its name says it is whole, as the spool's rows are
    final = os.path.join(folder, name + ".json")
    os.replace(temporary, final)
    return final


def overflow_files(root: str, ending: str = ".json") -> list[str]:
    """The journal's complete entries (or those whose names end with ``ending``), oldest first."""
    try:
        names = sorted(n for n in os.listdir(overflow_dir(root)) if n.endswith(ending))
    except OSError:
        return []
    return [os.path.join(overflow_dir(root), n) for n in names]


def unreadable_overflow(root: str) -> list[str]:
    """Journal entries the worker could not read back and set aside, oldest first."""
    return overflow_files(root, ".json" + UNREADABLE)


def import_overflow(spool: Spool, root: str) -> int:
    """Move the journal's entries into the spool, oldest first; return how many were new.

    An entry is deleted only after the row holding it committed; one imported twice (a crash
    between the two) is ignored the second time, so every event arrives exactly once."""
    imported = 0
    for path in overflow_files(root):
        try:
            with open(path, encoding="utf-8") as handle:
                entry = json.load(handle)
            fields = {key: entry[key] for key in ROW_FIELDS}
            record = entry["record"]
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                os.replace(path, path + UNREADABLE)
            continue
        _, new = spool.append(record=record, **{k: str(v) for k, v in fields.items()})
        imported += int(new)
        with contextlib.suppress(OSError):
            os.unlink(path)
    return imported


# -- a corrupt spool ------------------------------------------------------------------------------------


def quarantined_spools(root: str) -> list[str]:
    """Spool files moved aside as corrupt, oldest first."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    marker = SPOOL_FILE + CORRUPT_SUFFIX
    return sorted(
        os.path.join(root, n)
        for n in names
        if n.startswith(marker) and not n.endswith(("-wal", "-shm", CARRIED_SUFFIX))
    )


def quarantine(path: str, *, timeout: float = 2.0) -> str | None:
    """Move a corrupt spool (and its WAL files) aside as ``<path>.corrupt-<time>``; return the new
    name, or None when it turned out healthy (another process already replaced it).

    One process at a time decides, under a lock, after checking again that the file is corrupt."""
    import fcntl

    folder = os.path.dirname(path) or "."
    fd = os.open(os.path.join(folder, ".spool-recovery.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.01)
        if not _corrupt(path):
            return None
        aside = f"{path}{CORRUPT_SUFFIX}{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(path + suffix, aside + suffix)
        return aside
    finally:
        os.close(fd)


def _corrupt(path: str) -> bool:
    try:
        db = sqlite3.connect(path, timeout=0.5)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            (verdict,) = db.execute("PRAGMA quick_check(1)").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        return "locked" not in str(exc) and "busy" not in str(exc)
    return str(verdict) != "ok"  # a damaged page the first queries did not touch


def is_corruption(exc: BaseException) -> bool:
    """Whether an error reading or writing the spool says its file is damaged."""
    if isinstance(exc, SpoolError):
        return exc.corrupt
    text = str(exc)
    return isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text)


def salvage(aside: str, spool: Spool) -> int | None:
    """Copy the pending events still readable in a spool moved aside as corrupt into ``spool``,
    each under its own event id, once (a ``.carried`` file beside it says it was done); return
    how many, or None when it was done before. A damaged page loses only the rows on it; those,
    and the events that had failed, stay in the file moved aside."""
    if os.path.exists(aside + CARRIED_SUFFIX):
        return None
    try:
        db = sqlite3.connect(aside, timeout=1.0)
    except sqlite3.Error:
        return 0
    copied = 0
    try:
        for row in _readable_rows(db):
            try:
                record = json.loads(row[5]) if row[6] == PENDING else None
            except (TypeError, ValueError):
                continue
            if not isinstance(record, dict):
                continue
            _, new = spool.append(record=record, **dict(zip(ROW_FIELDS, row[:5], strict=True)))
            copied += new
    finally:
        db.close()
    os.close(os.open(aside + CARRIED_SUFFIX, os.O_WRONLY | os.O_CREAT, 0o600))
    return copied


#: How many sequence numbers in a row :func:`_readable_rows` steps over while every read fails
#: (a damaged page holds a few dozen events; a damaged branch page, some thousands).
DAMAGED_SPAN = 100_000


def _readable_rows(db: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    """The rows of a damaged spool's events table that can still be read, in order. Each step
    seeks the next row past the last one read; a seek that lands on a damaged page is tried again
    one number further on, so the walk never trusts a count read from a damaged page."""
    seq, failed = 0, 0
    while failed < DAMAGED_SPAN:
        try:
            row = db.execute(
                f"SELECT {', '.join(ROW_FIELDS)}, record, state, seq FROM events"
                " WHERE seq > ? ORDER BY seq LIMIT 1",
                (seq,),
            ).fetchone()
        except sqlite3.Error:
            seq, failed = seq + 1, failed + 1
            continue
        if row is None:
            return
        if not isinstance(row[7], int) or row[7] <= seq:  # a damaged page out of order
            seq, failed = seq + 1, failed + 1
            continue
        seq, failed = row[7], 0
        yield row


def open_spool(path: str, *, timeout: float = 10.0) -> tuple[Spool, str | None]:
    """The spool, after moving a corrupt one aside if need be; also the quarantined file's name
    (its pending events are not carried over here: see :func:`salvage`)."""
    try:
        return Spool(path, timeout=timeout), None
    except SpoolError as exc:
        if not exc.corrupt:
            raise
    aside = quarantine(path)
    return Spool(path, timeout=timeout), aside


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if "not a database" in text or "malformed" in text:
        return f"{text}: the file is corrupt; move it aside and the next event starts a new spool"
    if "disk is full" in text or "No space" in text or "too large" in text:
        return f"{text}: free some disk space"
    return text
