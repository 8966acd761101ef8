"""The Gemini CLI extension `mkg gemini install` writes (the real CLI is driven in test_e2e_gemini)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from mkg_core.testing import BIN_DIR


def _mkg(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "mkg"), *args], env=env, capture_output=True, text=True, timeout=120)


def test_install_writes_the_extension_and_says_what_to_run_without_the_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {
        **os.environ,
        "MKG_DATA_DIR": str(data),
        "PATH": "/usr/bin:/bin",
        "MKG_STATE_DIR": str(tmp_path / "s"),
    }
    env.pop("MKG_GEMINI_BIN", None)
    result = _mkg(env, "gemini", "install")
    assert result.returncode == 0, result.stderr
    assert "the gemini command was not found" in result.stdout
    root = data / "gemini-extension" / "meta-knowledge-graph"
    assert f"gemini extensions link {root} --consent" in result.stdout

    manifest = json.loads((root / "gemini-extension.json").read_text())
    assert manifest["name"] == "meta-knowledge-graph"
    server = manifest["mcpServers"]["meta-knowledge-graph"]
    assert server["command"] == str(BIN_DIR / "meta-knowledge-graph")
    assert "trust" not in server  # an extension cannot trust itself
    assert server["env"]["MKG_CLIENT"] == "gemini" and server["env"]["MKG_STATE_DIR"] == str(tmp_path / "s")
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())["hooks"]
    native = {"SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "PreCompress"}
    assert set(hooks) == native | {"Notification", "SessionEnd"}
    command = hooks["BeforeAgent"][0]["hooks"][0]["command"]
    assert command.endswith(f"{BIN_DIR / 'mkg-hook'} --client gemini UserPromptSubmit")
    assert hooks["AfterAgent"][0]["hooks"][0]["command"].endswith("--client gemini Stop")
    assert hooks["SessionStart"][0]["hooks"][0]["timeout"] >= 10_000  # milliseconds

    assert _mkg(env, "gemini", "install", "--dry-run").returncode == 0
    removed = _mkg(env, "gemini", "uninstall")
    assert removed.returncode == 0 and not root.exists()
