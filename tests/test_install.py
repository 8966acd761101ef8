"""Install for real: a fresh virtual environment, mkg-core plus one harness, then uninstall it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mkg_core.testing import fresh_venv, uv

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.install


def sh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=900, check=False)
    assert result.returncode == 0, (
        f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result


def plugin_names(venv: Path, **extra: str) -> list[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MKG_")}
    env.update(extra)
    rows = json.loads(sh(str(venv / "bin" / "mkg"), "plugins", env=env).stdout)
    return [row["name"] for row in rows]


def test_install_list_filter_and_uninstall_a_harness(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    fresh_venv(venv, "-e", str(ROOT), "-e", str(ROOT / "harnesses" / "mkg-claude"))

    assert plugin_names(venv) == ["claude", "mkg_core.builtin.core"]
    assert plugin_names(venv, MKG_DISABLE_PLUGINS="claude") == ["mkg_core.builtin.core"]
    assert plugin_names(venv, MKG_LOAD_PLUGINS="") == ["mkg_core.builtin.core"]
    assert plugin_names(venv, MKG_LOAD_PLUGINS="mkg-claude") == ["claude", "mkg_core.builtin.core"]

    uv("pip", "uninstall", "-q", "--python", str(venv / "bin" / "python"), "mkg-claude")
    assert plugin_names(venv) == ["mkg_core.builtin.core"]
