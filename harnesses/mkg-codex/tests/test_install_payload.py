"""The Codex plugin payload and hook-trust bookkeeping of `mkg codex install` (the real CLI is
driven in test_e2e_codex)."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

from mkg_codex.install import TRUST_BEGIN, trust_block, write_trust

from mkg_core.testing import BIN_DIR


def test_install_without_the_cli_writes_the_plugin_and_prints_the_commands(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {
        **os.environ,
        "MKG_DATA_DIR": str(data),
        "PATH": "/usr/bin:/bin",
        "MKG_STATE_DIR": str(tmp_path / "s"),
    }
    env.pop("MKG_CODEX_BIN", None)
    result = subprocess.run(
        [str(BIN_DIR / "mkg"), "codex", "install"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "$ codex plugin add meta-knowledge-graph@mkg" in result.stdout
    plugin = data / "codex-marketplace" / "meta-knowledge-graph"
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert "PostToolUseFailure" not in hooks and "SessionStart" in hooks and "SessionEnd" in hooks
    assert hooks["Stop"][0]["hooks"][0]["command"].endswith("--client codex Stop")
    skills = sorted(p.name for p in (plugin / "skills").iterdir())
    assert skills == ["mkg-orchestrate", "mkg-recall", "mkg-review", "mkg-start", "sales-agent-demo"]
    assert (plugin / "skills" / "mkg-start" / "SKILL.md").read_text().startswith("---\nname: mkg-start\n")
    gated = {"project_add_learning", "project_resolve_learning", "bigquery_execute_query"}
    entry = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]["meta-knowledge-graph"]
    assert entry["default_tools_approval_mode"] == "approve"  # Codex would ask for every writing tool
    assert entry["tools"] == {name: {"approval_mode": "prompt"} for name in gated}

    toml = subprocess.run(
        [str(BIN_DIR / "mkg"), "codex", "mcp-config"], env=env, capture_output=True, text=True, timeout=120
    )
    server = tomllib.loads(toml.stdout)["mcp_servers"]["meta-knowledge-graph"]
    assert (
        server["command"] == str(BIN_DIR / "meta-knowledge-graph") and server["env"]["MKG_CLIENT"] == "codex"
    )
    assert server["default_tools_approval_mode"] == "approve"
    assert {name: tool["approval_mode"] for name, tool in server["tools"].items()} == dict.fromkeys(
        gated, "prompt"
    )


def test_trust_entries_are_ours_only_and_replaced_not_duplicated(tmp_path: Path) -> None:
    ours = {
        "key": "meta-knowledge-graph@mkg:hooks/hooks.json:stop:0:0",
        "sourcePath": "/c/meta-knowledge-graph/h.json",
        "currentHash": "sha256:aaa/sha256:ctx",
    }
    theirs = {
        "key": "other@x:hooks/hooks.json:stop:0:0",
        "sourcePath": "/c/other/h.json",
        "currentHash": "sha256:b",
    }
    listed = [ours, theirs]
    block = trust_block(listed, tmp_path / "market")
    assert '[hooks.state."meta-knowledge-graph@mkg:hooks/hooks.json:stop:0:0"]' in block
    assert 'trusted_hash = "sha256:aaa"' in block and "other@x" not in block
    config = tmp_path / "config.toml"
    config.write_text('model = "m"\n\n[plugins."x@y"]\nenabled = true\n')
    write_trust(config, block)
    write_trust(config, block)
    text = config.read_text()
    assert text.count(TRUST_BEGIN) == 1 and text.startswith('model = "m"')
    write_trust(config, None)
    assert TRUST_BEGIN not in config.read_text() and '[plugins."x@y"]' in config.read_text()
