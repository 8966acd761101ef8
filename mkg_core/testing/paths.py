"""Where things are: the checkout, this interpreter's console scripts, the Neo4j jars tests use."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Where this interpreter's console scripts (mkg, mkg-hook) are installed.
BIN_DIR = Path(sys.executable).parent
TEST_PASSWORD = "mkg-test-password"


def neo4j_jar_cache() -> Path:
    """The Neo4j jars of test servers: ``MKG_NEO4J_CACHE``, else ``.cache/neo4j-jars`` in a checkout,
    else the user's cache (``mkg neo4j install`` fills the same one)."""
    from ..localdb import jar_cache

    if os.environ.get("MKG_NEO4J_CACHE") or not (REPO_ROOT / "pyproject.toml").exists():
        return jar_cache(os.environ)
    return REPO_ROOT / ".cache" / "neo4j-jars"
