"""Loading a data catalog into Neo4j with neocarta's own loaders, embeddings included.

- :func:`load_bigquery`: the tables and columns of ``GCP_PROJECT_ID.BIGQUERY_DATASET_ID``
  (``neocarta bigquery schema --embeddings``); needs a Google credential.
- :func:`load_csv`: a catalog described in CSV files (``neocarta csv ingest --embeddings``):
  ``database_info.csv``, ``schema_info.csv``, ``table_info.csv``, ``column_info.csv``, ... as
  neocarta documents them.

Both are idempotent (neocarta MERGEs on its ids) and write ``Database``/``Schema``/``Table``/
``Column`` nodes and their indexes, which the ``neocarta_*`` tools then search.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mkg_core.errors import ConfigError, MkgError
from mkg_core.settings import Settings

from .locate import INSTALL_HINT, child_env, command, embedding_key_missing

LOAD_TIMEOUT = 1800.0


class CatalogError(MkgError):
    """neocarta could not load the catalog; the message carries its own words."""


def problems(settings: Settings, *, bigquery: bool) -> list[str]:
    """What stops a load; empty when it can run."""
    found = []
    if bigquery:
        found += [name for name in ("GCP_PROJECT_ID", "BIGQUERY_DATASET_ID") if not settings.get(name)]
    if command("neocarta", settings) is None:
        found.append(f"the neocarta command: {INSTALL_HINT}")
    missing_key = embedding_key_missing(settings)
    if missing_key:
        found.append(missing_key)
    return found


def load_bigquery(settings: Settings, say: Callable[[str], None] = lambda line: None) -> Any:
    """Catalog ``GCP_PROJECT_ID.BIGQUERY_DATASET_ID``; returns neocarta's JSON summary."""
    _check(problems(settings, bigquery=True))
    project, dataset = settings.get("GCP_PROJECT_ID"), settings.get("BIGQUERY_DATASET_ID")
    assert project and dataset
    args = ["bigquery", "schema", "--project-id", project, "--dataset-id", dataset]
    say(f"neocarta: cataloguing {project}.{dataset}")
    with _service_account_file(settings) as key_file:
        return _run(settings, [*args, "--embeddings", "--json"], key_file, say)


def load_csv(
    settings: Settings, directory: str | Path, say: Callable[[str], None] = lambda line: None
) -> Any:
    """Catalog the CSV files in ``directory``; returns neocarta's JSON summary."""
    folder = Path(directory).expanduser().resolve()
    if not (folder / "table_info.csv").is_file():
        raise ConfigError(f"{folder} has no table_info.csv: it is not a neocarta CSV catalog")
    _check(problems(settings, bigquery=False))
    say(f"neocarta: cataloguing the CSV files in {folder}")
    return _run(
        settings, ["csv", "ingest", "--csv-directory", str(folder), "--embeddings", "--json"], None, say
    )


def _check(found: list[str]) -> None:
    if found:
        raise ConfigError("cannot load the catalog, missing: " + "; ".join(found))


def _run(settings: Settings, args: list[str], key_file: str | None, say: Callable[[str], None]) -> Any:
    argv = command("neocarta", settings)
    assert argv is not None
    env = child_env(settings)
    if key_file:
        env["GOOGLE_APPLICATION_CREDENTIALS"] = key_file
    with tempfile.TemporaryDirectory(prefix="mkg-neocarta-") as cwd:  # neocarta reads a .env in its cwd
        result = subprocess.run(
            [*argv, *args],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=LOAD_TIMEOUT,
        )
    if result.returncode != 0:
        detail = (result.stderr.strip() or result.stdout.strip())[-2000:]
        raise CatalogError(f"neocarta {' '.join(args[:2])} failed (exit {result.returncode}): {detail}")
    try:
        summary = json.loads(result.stdout)
    except ValueError:
        summary = result.stdout.strip()[-500:]
    say(f"neocarta: done: {json.dumps(summary)[:300] if not isinstance(summary, str) else summary}")
    return summary


@contextlib.contextmanager
def _service_account_file(settings: Settings) -> Iterator[str | None]:
    """Inline ``GCP_SERVICE_ACCOUNT_JSON`` as a private (mode 600) file for the child, removed after."""
    inline = settings.get("GCP_SERVICE_ACCOUNT_JSON")
    if not inline or not inline.strip():
        yield None
        return
    fd, path = tempfile.mkstemp(prefix="mkg-neocarta-sa-", suffix=".json")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(inline)
        yield path
    finally:
        Path(path).unlink(missing_ok=True)
