"""Codex's hook payloads, translated to and from MKG's HookEvent."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mkg_core.events import EVENT_NAMES
from mkg_core.harness import HarnessAdapter, home_folder, read_json
from mkg_core.transcripts import Transcript

from . import transcript

#: What Codex's built-in tools do.
TOOL_KINDS = {
    "bash": "shell",  # what its hooks call a shell command
    "exec_command": "shell",
    "shell": "shell",
    "local_shell": "shell",
    "container.exec": "shell",
    "apply_patch": "filesystem_write",
    "view_image": "filesystem_read",
    "web_search": "web",
}

#: A Codex rollout transcript ends in the thread's UUID: rollout-<timestamp>-<uuid>.jsonl
ROLLOUT_ID_RE = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", re.I)


def rollout_thread_id(transcript_path: str | None) -> str | None:
    """The thread id at the end of a rollout transcript's file name, lowercased."""
    if not transcript_path:
        return None
    match = ROLLOUT_ID_RE.search(transcript_path)
    return match.group(1).lower() if match else None


def spawned_agent_id(tool_response: Any) -> str | None:
    """The ``agent_id`` a ``spawn_agent`` call returned (a dict, JSON text, or MCP content)."""
    value = tool_response
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, Mapping):
        if isinstance(value.get("structuredContent"), Mapping):
            value = value["structuredContent"]
        elif isinstance(value.get("content"), list):
            for block in value["content"]:
                if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                    found = spawned_agent_id(block["text"])
                    if found:
                        return found
            return None
        agent = value.get("agent_id")
        if isinstance(agent, (str, int)) and str(agent).strip():
            return str(agent).strip()
    return None


class CodexAdapter(HarnessAdapter):
    """Codex: no PostToolUseFailure (failures are MCP error results of PostToolUse).

    A subagent runs under the parent's ``session_id`` but writes its own rollout transcript,
    whose file name carries the subagent's thread id.
    """

    name = "codex"
    #: Every lifecycle event but the two Codex does not have.
    events = tuple(name for name in EVENT_NAMES if name not in ("PostToolUseFailure", "Notification"))
    plugin_root_env = ("CODEX_PLUGIN_ROOT", "CLAUDE_PLUGIN_ROOT")

    def refine(self, payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        thread = rollout_thread_id(fields["transcript_path"])
        if (
            thread
            and thread != fields["session_id"].lower()
            and not fields["agent_id"]
            and fields["event"] not in ("SubagentStart", "SubagentStop")
        ):
            fields["agent_id"] = thread
            fields["agent_kind"] = "subagent"
            fields["parent_session_id"] = fields["parent_session_id"] or fields["session_id"]
        tool = fields["tool_key"] or ""
        if fields["event"] == "PostToolUse" and tool.endswith("spawn_agent") and not fields["is_error"]:
            fields["spawned_agent_id"] = spawned_agent_id(fields["tool_response"])

    def tool_kind(self, tool_name: str) -> str | None:
        return TOOL_KINDS.get(tool_name.lower())

    def read_transcript(self, path: str) -> Transcript | None:
        return transcript.read(path)

    def account_email(self, environ: Mapping[str, str]) -> str | None:
        """The email in the id token of Codex's ``auth.json`` (in ``$CODEX_HOME``, else ``~/.codex``)."""
        codex_home = Path(environ.get("CODEX_HOME") or home_folder(environ) / ".codex")
        data = read_json(codex_home / "auth.json")
        tokens = data.get("tokens") if isinstance(data, dict) else None
        token = tokens.get("id_token") if isinstance(tokens, dict) else None
        if not isinstance(token, str) or token.count(".") < 2:
            return None
        body = token.split(".")[1]
        try:
            claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, TypeError):
            return None
        email = claims.get("email") if isinstance(claims, dict) else None
        return email if isinstance(email, str) else None
