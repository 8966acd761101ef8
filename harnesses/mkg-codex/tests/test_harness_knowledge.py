"""What only Codex's adapter knows: its rollout transcripts, its tools and its auth file."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from mkg_codex.adapter import CodexAdapter

from mkg_core.enrichment import tool_kind
from mkg_core.identity import resolve_user
from mkg_core.transcripts import read_transcript

SESSION = Path(__file__).parent / "session"
ADAPTER = CodexAdapter()


def test_the_transcript_gives_calls_rationales_and_results() -> None:
    calls = []
    for path in sorted((SESSION / "transcripts").glob("*.jsonl")):
        transcript = read_transcript(str(path), ADAPTER)
        assert transcript is not None, path
        calls += transcript.ordered()
    by_name = {call.name.rsplit("__", 1)[-1]: call for call in calls}
    assert {"project_add_learning", "exec_command"} <= set(by_name)
    assert by_name["exec_command"].rationale == "Let me check the deploy notes first."
    assert "Fridays" in (by_name["exec_command"].result or "")
    assert by_name["project_add_learning"].input == {
        "text": "The team deploys to production on Fridays.",
        "scope": "project",
    }


def test_built_in_tools_have_kinds() -> None:
    names = ("exec_command", "Bash", "apply_patch", "web_search", "spawn_agent")  # Bash: its hooks' name
    kinds = [tool_kind(name, ADAPTER) for name in names]
    assert kinds == ["shell", "shell", "filesystem_write", "web", "tool"]


def test_the_signed_in_account_is_the_user(tmp_path: Path) -> None:
    body = base64.urlsafe_b64encode(json.dumps({"email": "Codex@Example.com"}).encode()).decode().rstrip("=")
    (tmp_path / "auth.json").write_text(json.dumps({"tokens": {"id_token": f"e30.{body}.sig"}}))
    user = resolve_user(
        {"CODEX_HOME": str(tmp_path), "HOME": "/nonexistent"}, client="codex", adapters=[ADAPTER]
    )
    assert (user.id, user.source) == ("codex@example.com", "codex")
    (tmp_path / "auth.json").write_text('{"tokens": {"id_token": "not-a-jwt"}}')
    assert ADAPTER.account_email({"CODEX_HOME": str(tmp_path)}) is None
