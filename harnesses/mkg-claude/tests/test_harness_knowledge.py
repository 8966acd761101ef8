"""What only Claude Code's adapter knows: its transcript format, its tools and its account file."""

from __future__ import annotations

import json
from pathlib import Path

from mkg_claude.adapter import ClaudeAdapter

from mkg_core.enrichment import tool_kind
from mkg_core.identity import resolve_user
from mkg_core.transcripts import read_transcript

SESSION = Path(__file__).parent / "session"
ADAPTER = ClaudeAdapter()


def test_the_transcript_gives_calls_rationales_and_results() -> None:
    calls = []
    for path in sorted((SESSION / "transcripts").glob("*.jsonl")):
        transcript = read_transcript(str(path), ADAPTER)
        assert transcript is not None, path
        calls += transcript.ordered()
    by_name = {call.name.rsplit("__", 1)[-1]: call for call in calls}
    assert {"project_add_learning", "Read"} <= set(by_name)
    assert by_name["project_add_learning"].rationale == "I will keep the deploy day in project memory."
    assert "Fridays" in (by_name["Read"].result or "")
    assert ADAPTER.read_transcript("/nonexistent/transcript.jsonl") is None


def test_built_in_tools_have_kinds() -> None:
    assert [tool_kind(name, ADAPTER) for name in ("Bash", "Edit", "Read", "WebFetch", "Task")] == [
        "shell",
        "filesystem_write",
        "filesystem_read",
        "web",
        "tool",
    ]


def test_the_signed_in_account_is_the_user(tmp_path: Path) -> None:
    config = tmp_path / "claude"
    config.mkdir()
    (config / ".claude.json").write_text(json.dumps({"oauthAccount": {"emailAddress": "Ana@Example.com"}}))
    env = {"CLAUDE_CONFIG_DIR": str(config), "HOME": str(tmp_path / "nohome")}
    user = resolve_user(env, adapters=[ADAPTER])
    assert (user.id, user.source) == ("ana@example.com", "claude_code")
    (config / ".claude.json").write_text("{not json")
    assert ADAPTER.account_email(env) is None
