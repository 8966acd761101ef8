"""Claude Code's hook payloads, translated to and from MKG's HookEvent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mkg_core.events import EVENT_NAMES
from mkg_core.harness import HarnessAdapter, text_field


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

    def refine(self, payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        # Claude Code names the user turn an event belongs to ``prompt_id``; it is MKG's turn id.
        if not fields["turn_id"]:
            fields["turn_id"] = text_field(payload, "prompt_id")
