"""The real Claude Code CLI for the end-to-end tests: the pinned command, and how a test runs it.

A run is offline: its only network peer is a local fake Anthropic API
(:class:`mkg_core.testing.fakemodels.FakeAnthropic`), and it has a private ``HOME``. The
helpers are factory fixtures, since test modules cannot import this file.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from mkg_core.testing import BIN_DIR, NPM_TOOLS
from mkg_core.testing.fakemodels import FakeAnthropic


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return NPM_TOOLS["claude"].path()


def _claude_env(
    base: Mapping[str, str],
    fake: FakeAnthropic,
    home: Path,
    claude: Path,
    *,
    project: str,
    user: str = "dev@example.com",
) -> dict[str, str]:
    env = {
        key: value
        for key, value in base.items()
        if key.startswith(("MKG_", "NEO4J_", "PYTHON", "LANG", "LC_")) or key in ("TMPDIR",)
    }
    env.update(
        {
            "PATH": f"{BIN_DIR}:/usr/bin:/bin",
            "HOME": str(home),
            "MKG_PROJECT_ID": project,
            "MKG_USER_ID": user,
            "EMBEDDING_MODEL": "none",
            "MKG_EXTRACTION": "0",
            "MKG_CLAUDE_BIN": str(claude),
            **fake.env(),
        }
    )
    return env


def _run_claude(
    claude: Path, env: Mapping[str, str], cwd: Path, prompt: str, *, allowed: Iterable[str]
) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(claude), "-p", prompt, "--output-format", "stream-json", "--verbose",
         "--allowedTools", ",".join(allowed)],
        env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip().startswith("{")]


@pytest.fixture(scope="session")
def claude_env() -> Callable[..., dict[str, str]]:
    """``claude_env(base, fake, home, claude, project=..., user=...)``: the environment of a run.

    MKG's settings from ``base`` (``MKG_*``, ``NEO4J_*``), the fake's API address, a private
    ``HOME``, the project and user pinned, no embeddings and no extraction (nothing but the fake
    may be called).
    """
    return _claude_env


@pytest.fixture(scope="session")
def run_claude() -> Callable[..., list[dict[str, Any]]]:
    """``run_claude(claude, env, cwd, prompt, allowed=[...])``: one ``claude -p`` run that must
    succeed, allowing the ``allowed`` tools; returns its stream-json messages."""
    return _run_claude
