"""Claude Code's hook payloads, translated to and from MKG's HookEvent."""

from __future__ import annotations

from mkg_core.events import EVENT_NAMES
from mkg_core.harness import HarnessAdapter


class ClaudeAdapter(HarnessAdapter):
    """Claude Code: every lifecycle event, including PostToolUseFailure and SessionEnd.

    A subagent's tool events arrive under the parent's ``session_id`` with an ``agent_id``;
    failures arrive as ``PostToolUseFailure`` with an ``error`` (normalized by the base class).
    """

    name = "claude"
    aliases = ("claude_code", "claude-code")
    events = EVENT_NAMES
    plugin_root_env = ("CLAUDE_PLUGIN_ROOT",)
