"""Claude Code's hook payloads, translated to and from MKG's HookEvent."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mkg_core.events import EVENT_NAMES
from mkg_core.harness import HarnessAdapter, home_folder, read_json, text_field
from mkg_core.transcripts import Transcript

from . import transcript

#: What Claude Code's built-in tools do.
TOOL_KINDS = {
    "bash": "shell",
    "edit": "filesystem_write",
    "multiedit": "filesystem_write",
    "write": "filesystem_write",
    "notebookedit": "filesystem_write",
    "read": "filesystem_read",
    "glob": "filesystem_read",
    "grep": "filesystem_read",
    "ls": "filesystem_read",
    "notebookread": "filesystem_read",
    "webfetch": "web",
    "websearch": "web",
}


class ClaudeAdapter(HarnessAdapter):
    """Claude Code: every lifecycle event, including PostToolUseFailure and SessionEnd.

    A subagent's tool events arrive under the parent's ``session_id`` with an ``agent_id``;
    failures arrive as ``PostToolUseFailure`` with an ``error`` (normalized by the base class).
    Events of one user turn share a ``prompt_id``, which becomes the turn id.
    """

    name = "claude"
    aliases = ("claude_code", "claude-code")
    events = EVENT_NAMES
    plugin_root_env = ("CLAUDE_PLUGIN_ROOT",)
    llm_client = "claude"

    def refine(self, payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        # Claude Code names the user turn an event belongs to ``prompt_id``; it is MKG's turn id.
        if not fields["turn_id"]:
            fields["turn_id"] = text_field(payload, "prompt_id")

    def tool_kind(self, tool_name: str) -> str | None:
        return TOOL_KINDS.get(tool_name.lower())

    def read_transcript(self, path: str) -> Transcript | None:
        return transcript.read(path)

    def account_email(self, environ: Mapping[str, str]) -> str | None:
        """The account in ``.claude.json`` (in ``$CLAUDE_CONFIG_DIR``, else the home folder)."""
        base = environ.get("CLAUDE_CONFIG_DIR")
        paths = [Path(base) / ".claude.json"] if base else []
        paths.append(home_folder(environ) / ".claude.json")
        for path in paths:
            data = read_json(path)
            account = data.get("oauthAccount") if isinstance(data, dict) else None
            email = account.get("emailAddress") if isinstance(account, dict) else None
            if isinstance(email, str) and email.strip():
                return email
        return None
