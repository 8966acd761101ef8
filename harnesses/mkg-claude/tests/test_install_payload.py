"""The Claude Code plugin payload `mkg claude install` writes (the real CLI is driven in test_e2e_claude)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from mkg_core.testing import BIN_DIR


def _mkg(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "mkg"), *args], env=env, capture_output=True, text=True, timeout=120)


def test_install_writes_a_complete_plugin_and_says_what_to_run_without_the_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {
        **os.environ,
        "MKG_DATA_DIR": str(data),
        "PATH": "/usr/bin:/bin",
        "MKG_STATE_DIR": str(tmp_path / "s"),
    }
    env.pop("MKG_CLAUDE_BIN", None)
    result = _mkg(env, "claude", "install")
    assert result.returncode == 0, result.stderr
    assert "the claude command was not found" in result.stdout
    assert "$ claude plugin install meta-knowledge-graph@mkg --scope user" in result.stdout

    root = data / "claude-marketplace"
    market = json.loads((root / ".claude-plugin" / "marketplace.json").read_text())
    assert market["name"] == "mkg" and market["plugins"][0]["source"] == "./meta-knowledge-graph"
    plugin = root / "meta-knowledge-graph"
    assert (
        json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())["name"] == "meta-knowledge-graph"
    )
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert {"SessionStart", "UserPromptSubmit", "PostToolUseFailure", "SessionEnd"} <= set(hooks)
    command = hooks["Stop"][0]["hooks"][0]["command"]
    hook = str(BIN_DIR / "mkg-hook")
    assert command.endswith(f"{hook} --client claude Stop") and "MKG_STATE_DIR=" in command  # pinned
    assert hooks["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    # The MCP server is registered on its own (a plugin's server would get tool names past 64
    # characters), in the plugin's scope; an older install's server inside the plugin is gone.
    assert not (plugin / ".mcp.json").exists()
    (added,) = [line for line in result.stdout.splitlines() if line.startswith("$ claude mcp add-json")]
    argv = shlex.split(added[2:])
    assert argv[:5] == ["claude", "mcp", "add-json", "--scope", "user"] and argv[5] == "meta-knowledge-graph"
    server = json.loads(argv[6])
    assert server["type"] == "stdio" and server["command"] == str(BIN_DIR / "meta-knowledge-graph")
    assert server["env"]["MKG_CLIENT"] == "claude" and "MKG_STATE_DIR" in server["env"]
    assert "$ claude mcp remove --scope user meta-knowledge-graph" in result.stdout  # replaced, not doubled
    commands = sorted(p.name for p in (plugin / "commands").iterdir())
    assert commands == ["mkg-orchestrate.md", "mkg-review.md", "mkg-start.md", "sales-agent-demo.md"]
    agent = (plugin / "agents" / "mkg-recall.md").read_text()
    assert "project_add_learning" not in agent.split("---")[1]  # the recall agent cannot write memory

    (plugin / "stale.txt").write_text("from an older version")
    again = _mkg(env, "claude", "install", "--dry-run")
    assert again.returncode == 0 and (plugin / "stale.txt").exists()  # a dry run changes nothing
    assert _mkg(env, "claude", "install").returncode == 0
    assert not (plugin / "stale.txt").exists()  # a re-install replaces the payload whole

    removed = _mkg(env, "claude", "uninstall")
    assert removed.returncode == 0 and not root.exists()
