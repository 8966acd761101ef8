"""The one line a session starts with when its memory cannot be recalled (the worker or Neo4j is
down), instead of silence. Standard library only: the hook imports it.

It is said once per session: a marker file per session under the state folder's ``notices``
folder (markers older than a week are removed as new ones are written).
"""

from __future__ import annotations

import hashlib
import os
import time

NOTICE = (
    "MKG memory is unavailable at the start of this session ({reason}), so nothing was recalled. "
    "Events are still captured and wait in MKG's local spool; `mkg doctor` shows what is wrong."
)
#: Why, in the words of :data:`NOTICE`.
WORKER_STARTING = "its worker was still starting; prompts get memory once it is up"
WORKER_SLOW = "its worker did not answer in time"
WORKER_STOPPED = "its worker is not running; `mkg worker start` starts it"
DATABASE_DOWN = "its Neo4j database cannot be reached"
NOTICES_DIR = "notices"
KEEP_SECONDS = 7 * 24 * 3600


def notice(reason: str) -> str:
    return NOTICE.format(reason=reason)


def first_time(state_dir: str, session_id: str) -> bool:
    """True the first time this is asked for ``session_id``; False after (or when the marker
    cannot be written: better no notice than one on every start)."""
    folder = os.path.join(state_dir, NOTICES_DIR)
    name = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:  # FileExistsError among them: said already
        return False
    os.close(fd)
    _prune(folder)
    return True


def _prune(folder: str) -> None:
    cutoff = time.time() - KEEP_SECONDS
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)
                except OSError:
                    continue
    except OSError:
        pass
