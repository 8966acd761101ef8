"""The jars of the pinned Neo4j: listed with their digests in ``neo4j.lock.json``, downloaded from
Maven Central over HTTPS, checked, and kept in a cache so that a second install needs no network.

The lock file is written by ``devtools/neo4j_lock.py`` from Neo4j's POMs. A download goes to
``<file>.part`` first and continues from where it stopped (an HTTP range request); a file is moved
into place only once its size and SHA-256 match the lock. ``MKG_MAVEN_REPOSITORY`` points at a
mirror (it must serve Maven Central's paths).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import MkgError

#: Where the jars come from unless ``MKG_MAVEN_REPOSITORY`` names a mirror.
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
#: Written next to the jars once every one of them matched the lock.
VERIFIED = ".verified"
CHUNK = 1024 * 1024
ATTEMPTS = 3


class DownloadError(MkgError):
    """A jar could not be had, or did not match the lock; the message names it and says why."""


@dataclass(frozen=True)
class Artifact:
    path: str  # its path in a Maven repository
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Lock:
    """The pinned Neo4j: its version, the class that starts the server, and every jar."""

    neo4j: str
    main_class: str
    artifacts: tuple[Artifact, ...]
    digest: str  # of the lock file itself: a changed lock means the jars must be checked again

    @property
    def size(self) -> int:
        return sum(a.size for a in self.artifacts)


def load_lock(text: str | None = None) -> Lock:
    """The lock shipped with MKG (or the one in ``text``)."""
    if text is None:
        text = resources.files(__package__).joinpath("neo4j.lock.json").read_text(encoding="utf-8")
    data = json.loads(text)
    artifacts = tuple(Artifact(a["path"], int(a["size"]), a["sha256"]) for a in data["artifacts"])
    return Lock(data["neo4j"], data["main_class"], artifacts, hashlib.sha256(text.encode()).hexdigest()[:16])


def repository(environ: Mapping[str, str]) -> str:
    return (environ.get("MKG_MAVEN_REPOSITORY") or MAVEN_CENTRAL).rstrip("/")


def is_complete(lock: Lock, folder: Path) -> bool:
    """Whether ``folder`` holds every jar of ``lock``, checked (without reading them again)."""
    try:
        return (folder / VERIFIED).read_text().strip() == lock.digest
    except OSError:
        return False


def missing(lock: Lock, folder: Path) -> list[Artifact]:
    """The jars ``folder`` lacks (or holds with the wrong size)."""
    found = []
    for artifact in lock.artifacts:
        path = folder / artifact.filename
        if not path.is_file() or path.stat().st_size != artifact.size:
            found.append(artifact)
    return found


def fetch_all(
    lock: Lock,
    folder: Path,
    *,
    environ: Mapping[str, str],
    progress: Callable[[int], None] | None = None,
    workers: int = 4,
) -> int:
    """Make ``folder`` hold every jar of ``lock``, checked; return how many bytes were downloaded.

    Files already there are checked against their SHA-256 (once: a stamp records it), so a second
    install reads no network. ``progress`` gets the number of bytes each step adds.
    """
    if is_complete(lock, folder):
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    (folder / VERIFIED).unlink(missing_ok=True)
    needed = missing(lock, folder)
    present = [a for a in lock.artifacts if a not in needed]
    for artifact in present:  # a file of the right size may still be damaged
        if sha256_of(folder / artifact.filename) != artifact.sha256:
            (folder / artifact.filename).unlink()
            needed.append(artifact)
        elif progress:
            progress(artifact.size)
    base = repository(environ)
    downloaded = [0]
    lock_ = threading.Lock()

    def one(artifact: Artifact) -> None:
        got = fetch(artifact, folder, base, progress)
        with lock_:
            downloaded[0] += got

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in [pool.submit(one, artifact) for artifact in needed]:
            future.result()
    (folder / VERIFIED).write_text(lock.digest + "\n")
    return downloaded[0]


def fetch(artifact: Artifact, folder: Path, base: str, progress: Callable[[int], None] | None = None) -> int:
    """Download one jar into ``folder`` (continuing a partial download), checked; return the bytes read."""
    target = folder / artifact.filename
    part = target.with_name(target.name + ".part")
    url = f"{base}/{artifact.path}"
    read = 0
    if progress and part.exists() and part.stat().st_size <= artifact.size:
        progress(part.stat().st_size)  # what an earlier, interrupted download already brought
    for attempt in range(1, ATTEMPTS + 1):
        have = part.stat().st_size if part.exists() else 0
        if have > artifact.size:
            part.unlink()
            have = 0
        try:
            read += _download(url, part, have, artifact.size, progress)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            if isinstance(exc, urllib.error.HTTPError):
                exc.close()  # it holds the response's connection
            if attempt == ATTEMPTS:
                raise DownloadError(
                    f"could not download {url} ({_reason(exc)}); run the command again to continue "
                    "where it stopped"
                ) from exc
            continue
        if sha256_of(part) == artifact.sha256:
            os.replace(part, target)
            return read
        part.unlink()  # wrong content: never kept, never resumed from
        if attempt == ATTEMPTS:
            raise DownloadError(
                f"{url} does not match the SHA-256 in MKG's lock file; nothing was installed from it"
            )
    raise AssertionError("unreachable")


def _download(url: str, part: Path, have: int, size: int, progress: Callable[[int], None] | None) -> int:
    request = urllib.request.Request(url, headers={"User-Agent": "mkg-neo4j-install"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    read = 0
    with urllib.request.urlopen(request, timeout=60) as response:
        resumed = have and response.status == 206
        if have and not resumed:  # the server sent the whole file: start over
            if progress:
                progress(-have)
            have = 0
        with open(part, "ab" if resumed else "wb") as handle:
            while chunk := response.read(CHUNK):
                handle.write(chunk)
                read += len(chunk)
                if progress:
                    progress(len(chunk))
                if have + read > size:
                    break
    return read


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read a chunk at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
