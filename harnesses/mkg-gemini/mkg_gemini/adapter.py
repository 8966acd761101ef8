"""Gemini CLI's hook payloads, translated to and from MKG's HookEvent.

Gemini CLI names its events its own way: ``BeforeAgent`` is the prompt (UserPromptSubmit),
``AfterAgent`` the end of the turn (Stop), ``BeforeTool``/``AfterTool`` the tool events. Its MCP
tools are spelt ``mcp_<server>_<tool>``. Injected context goes back in
``hookSpecificOutput.additionalContext`` under Gemini's own event name, which the base class does
for every name in :attr:`GeminiAdapter.native_events`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mkg_core.harness import HarnessAdapter, home_folder, read_json, text_field
from mkg_core.transcripts import Transcript

from . import transcript

#: Gemini CLI's hook events and the MKG event each one is.
NATIVE_EVENTS = {
    "SessionStart": "SessionStart",
    "BeforeAgent": "UserPromptSubmit",
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "AfterAgent": "Stop",
    "PreCompress": "PreCompact",
    "Notification": "Notification",
    "SessionEnd": "SessionEnd",
}
HOOK_CONTEXT_OPEN, HOOK_CONTEXT_CLOSE = "<hook_context>", "</hook_context>"
#: How Gemini CLI wraps an MCP tool's text for its model.
UNTRUSTED_OPEN, UNTRUSTED_CLOSE = "<untrusted_context>", "</untrusted_context>"
#: What Gemini CLI's built-in tools do.
TOOL_KINDS = {
    "run_shell_command": "shell",
    "write_file": "filesystem_write",
    "replace": "filesystem_write",
    "read_file": "filesystem_read",
    "read_many_files": "filesystem_read",
    "glob": "filesystem_read",
    "search_file_content": "filesystem_read",
    "list_directory": "filesystem_read",
    "web_fetch": "web",
    "google_web_search": "web",
}


class GeminiAdapter(HarnessAdapter):
    """Gemini CLI: its own event names, ``mcp_<server>_<tool>`` tool names, ``prompt_response`` as
    the assistant's last message."""

    name = "gemini"
    aliases = ("gemini-cli", "gemini_cli")
    events = tuple(dict.fromkeys(NATIVE_EVENTS.values()))
    native_events = {name: mkg for name, mkg in NATIVE_EVENTS.items() if name != mkg}

    def refine(self, payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        if not fields["last_assistant_message"]:
            fields["last_assistant_message"] = text_field(payload, "prompt_response")
        if isinstance(fields.get("prompt"), str):
            fields["prompt"] = without_hook_context(fields["prompt"])
        response = fields.get("tool_response")
        if isinstance(response, Mapping) and "llmContent" in response:
            fields["tool_response"] = as_tool_result(response)
            if fields["tool_response"].get("isError") and not fields["is_error"]:
                fields["is_error"] = True
                fields["error"] = str(response.get("error") or "the tool failed")[:1000]

    def tool_key(self, tool_name: str | None) -> str | None:
        """``mcp_<server>_<tool>`` -> ``<tool>`` (server names hold no underscore); built-in tools
        keep their name."""
        if tool_name is None or not tool_name.strip():
            return None
        name = tool_name.strip()
        if name.startswith("mcp_") and not name.startswith("mcp__") and name.count("_") >= 2:
            return name[4:].split("_", 1)[1] or None
        return super().tool_key(name)

    def tool_kind(self, tool_name: str) -> str | None:
        return TOOL_KINDS.get(tool_name.lower())

    def read_transcript(self, path: str) -> Transcript | None:
        return transcript.read(path)

    def account_email(self, environ: Mapping[str, str]) -> str | None:
        """The active account in ``~/.gemini/google_accounts.json``."""
        data = read_json(home_folder(environ) / ".gemini" / "google_accounts.json")
        active = data.get("active") if isinstance(data, dict) else None
        return active if isinstance(active, str) else None


def as_tool_result(response: Mapping[str, Any]) -> dict[str, Any]:
    """An ``AfterTool`` response as an MCP tool result: Gemini CLI gives the model's view of it in
    ``llmContent`` (parts, an MCP tool's text inside ``<untrusted_context>``), which is what
    MKG reads (a learning's id, a query's rows); ``returnDisplay`` is only the user's view."""
    parts = response.get("llmContent")
    parts = parts if isinstance(parts, list) else [parts]
    blocks = []
    for part in parts:
        text = part.get("text") if isinstance(part, Mapping) else part
        if isinstance(text, str):
            blocks.append({"type": "text", "text": _untrusted_inner(text)})
    return {"content": blocks, "isError": bool(response.get("error"))}


def _untrusted_inner(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith(UNTRUSTED_OPEN) and stripped.endswith(UNTRUSTED_CLOSE):
        return stripped[len(UNTRUSTED_OPEN) : -len(UNTRUSTED_CLOSE)].strip()
    return text


def without_hook_context(prompt: str) -> str:
    """The user's own words: a headless Gemini CLI prepends the context SessionStart hooks gave
    (MKG's own injection) to the first prompt, in ``<hook_context>`` blocks."""
    rest = prompt.lstrip()
    while rest.startswith(HOOK_CONTEXT_OPEN) and HOOK_CONTEXT_CLOSE in rest:
        rest = rest.split(HOOK_CONTEXT_CLOSE, 1)[1].lstrip()
    return rest if rest != prompt.lstrip() else prompt
