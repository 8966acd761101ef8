"""The harness adapter base class: raw payload in, :class:`HookEvent` out, injection JSON back.

Standard library only. Harness packages subclass :class:`HarnessAdapter` and override the small
``refine`` step where their harness differs; the shared parsing (decoding, required fields, type
checks, tool keys, failure normalization) lives here so every harness behaves the same on bad input.

Everything else MKG needs to know about a harness is an optional part of the adapter, with a neutral
default, so a new harness is a package of its own and never an edit of the core:

- :attr:`~HarnessAdapter.native_events`: the harness's own names for MKG's events;
- :meth:`~HarnessAdapter.tool_key`: how its MCP tool names spell a tool;
- :meth:`~HarnessAdapter.tool_kind`: what its built-in tools do (shell, file read or write, web);
- :meth:`~HarnessAdapter.read_transcript`: the calls and rationales in its session transcript;
- :meth:`~HarnessAdapter.account_email`: the account its user is signed in with;
- :attr:`~HarnessAdapter.llm_client`: the LLM client its users' subscription serves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import PayloadError
from .eventnames import context_output
from .events import HookEvent, canonical_event_name, tool_key
from .tool_results import is_error_response, response_text

if TYPE_CHECKING:
    from .transcripts import Transcript

__all__ = ["AGENT_ID_KEYS", "HarnessAdapter", "first_text", "home_folder", "read_json", "text_field"]

#: Payload keys that may carry the subagent's id, in order of preference.
AGENT_ID_KEYS = ("agent_id", "subagent_id", "agent_path", "subagent_path")
AGENT_TYPE_KEYS = ("agent_type", "subagent_type")
PARENT_SESSION_KEYS = ("parent_session_id", "main_session_id")


class HarnessAdapter:
    """Translates one harness's hook payloads. Subclass, set the class attributes, refine.

    ``name`` is what ``mkg-hook --client NAME`` selects and what events are attributed to;
    ``aliases`` are other spellings accepted for it; ``events`` are the canonical events its
    plugin wires.
    """

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    events: ClassVar[tuple[str, ...]] = ()
    #: Where the harness keeps installed plugins; candidates inside them are never the project.
    plugin_root_env: ClassVar[tuple[str, ...]] = ()
    #: The harness's own event names that are not MKG's, and the MKG event each one is
    #: (``{"BeforeAgent": "UserPromptSubmit"}``). Its hooks pass MKG's name as ``EVENT``.
    native_events: ClassVar[Mapping[str, str]] = {}
    #: The LLM client whose defaults and subscription its users have (``"claude"`` makes memory
    #: extraction prefer a Claude model and the Claude subscription); None: the general default.
    llm_client: ClassVar[str | None] = None

    # -- what MKG asks of a harness (neutral defaults) -------------------------------------------

    def tool_key(self, tool_name: str | None) -> str | None:
        """The harness-independent key of a tool name (``mcp__meta-knowledge-graph__neo4j_read_cypher``
        -> ``neo4j_read_cypher``); the default knows the ``mcp__<server>__<tool>`` spellings."""
        return tool_key(tool_name)

    def tool_kind(self, tool_name: str) -> str | None:
        """What a built-in tool of this harness does: ``shell``, ``filesystem_read``,
        ``filesystem_write``, ``web``; None when it is not one of its built-in tools."""
        return None

    def read_transcript(self, path: str) -> Transcript | None:
        """The tool calls, their rationales and results in the session transcript at ``path``
        (see :mod:`mkg_core.transcripts`); None when the harness keeps none MKG can read."""
        return None

    def account_email(self, environ: Mapping[str, str]) -> str | None:
        """The email of the account the user is signed in to the harness with, if it says."""
        return None

    # -- parsing ------------------------------------------------------------------------------

    def parse(self, raw: bytes | str | Mapping[str, Any], event: str | None = None) -> HookEvent:
        """Turn a raw payload into a HookEvent, or raise :class:`PayloadError` saying why not.

        ``event`` is the event name the harness invoked the hook for; the payload's own
        ``hook_event_name`` wins when both are present.
        """
        try:
            payload = self._decode(raw)
            fields = self._common_fields(payload, event)
            self.refine(payload, fields)
            return HookEvent(**fields)
        except PayloadError as exc:
            if exc.harness is None:
                raise PayloadError(exc.reason, harness=self.name) from None
            raise
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            # A payload shape nobody foresaw: still a clear error, never a crash.
            raise PayloadError(
                f"unreadable payload ({type(exc).__name__}: {exc})", harness=self.name
            ) from None

    def refine(self, payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        """Adjust the parsed fields for this harness (subagent identity, tool results...)."""

    def _decode(self, raw: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
        if isinstance(raw, Mapping):
            return raw
        if isinstance(raw, (bytes, bytearray)):
            try:
                raw = bytes(raw).decode("utf-8")
            except UnicodeDecodeError:
                raise PayloadError("payload is not UTF-8 text") from None
        if not isinstance(raw, str):
            raise PayloadError(f"payload must be JSON text, got {type(raw).__name__}")
        if not raw.strip():
            raise PayloadError("empty payload")
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise PayloadError(f"payload is not valid JSON ({exc})") from None
        if not isinstance(payload, dict):
            raise PayloadError(f"payload must be a JSON object, got {_json_type(payload)}")
        return payload

    def _common_fields(self, payload: Mapping[str, Any], event: str | None) -> dict[str, Any]:
        name = text_field(payload, "hook_event_name") or (event or "").strip()
        if not name:
            raise PayloadError("no event name: the payload has no hook_event_name and none was given")
        canonical = self.native_events.get(name) or canonical_event_name(name)
        if canonical is None:
            raise PayloadError(f"invalid event name {name[:80]!r}")
        session_id = text_field(payload, "session_id", allow_number=True)
        if not session_id:
            raise PayloadError("the payload has no session_id")
        tool_name = text_field(payload, "tool_name")
        fields: dict[str, Any] = {
            "harness": self.name,
            "event": canonical,
            "source_event": canonical,
            "session_id": session_id,
            "cwd": text_field(payload, "cwd"),
            "transcript_path": text_field(payload, "transcript_path"),
            "source": text_field(payload, "source"),
            "prompt": text_field(payload, "prompt"),
            "turn_id": text_field(payload, "turn_id", allow_number=True),
            "model": text_field(payload, "model"),
            "tool_name": tool_name,
            "tool_key": self.tool_key(tool_name),
            "tool_use_id": text_field(payload, "tool_use_id", allow_number=True),
            "tool_input": payload.get("tool_input"),
            "tool_response": payload.get("tool_response"),
            "is_error": False,
            "error": None,
            "is_interrupt": False,
            "last_assistant_message": text_field(payload, "last_assistant_message"),
            "agent_id": first_text(payload, AGENT_ID_KEYS),
            "agent_type": first_text(payload, AGENT_TYPE_KEYS),
            "parent_session_id": first_text(payload, PARENT_SESSION_KEYS),
            "raw": payload,
        }
        self._agent_identity(fields)
        if canonical == "PostToolUseFailure":
            self._normalize_failure(payload, fields)
        elif canonical == "PostToolUse" and is_error_response(fields["tool_response"]):
            fields["is_error"] = True
            fields["error"] = response_text(fields["tool_response"]) or None
        return fields

    @staticmethod
    def _agent_identity(fields: dict[str, Any]) -> None:
        """Subagent start and stop belong to the parent's timeline; other events that name an
        agent other than the session came from inside that subagent."""
        agent_id = fields["agent_id"]
        if fields["event"] in ("SubagentStart", "SubagentStop"):
            fields["agent_kind"] = "main"
        elif agent_id and agent_id != fields["session_id"]:
            fields["agent_kind"] = "subagent"
            fields["parent_session_id"] = fields["parent_session_id"] or fields["session_id"]
        else:
            fields["agent_kind"] = "main"

    @staticmethod
    def _normalize_failure(payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        """A failed tool call is a PostToolUse with ``is_error`` set, whichever harness sent it."""
        error = payload.get("error")
        if error is None:
            error_text = ""
        elif isinstance(error, str):
            error_text = error
        else:
            error_text = json.dumps(error, sort_keys=True, default=str)
        fields["event"] = "PostToolUse"
        fields["is_error"] = True
        fields["error"] = error_text
        fields["is_interrupt"] = payload.get("is_interrupt") is True
        if fields["tool_response"] is None:
            fields["tool_response"] = {
                "content": [{"type": "text", "text": error_text}],
                "isError": True,
            }

    # -- rendering ----------------------------------------------------------------------------

    def render_injection(self, event: HookEvent | str, text: str) -> str:
        """The stdout that injects ``text`` as context for this event ("" when there is nothing).

        A failed tool call cannot carry additional context, so its guidance is shown through a
        ``decision: block`` reason (the call already failed; nothing is blocked).
        """
        if not text.strip():
            return ""
        if isinstance(event, HookEvent):
            native = event.raw.get("hook_event_name") if isinstance(event.raw, Mapping) else None
            name = native if native in self.native_events else event.source_event
        else:
            name = canonical_event_name(event) or event
        if name == "PostToolUseFailure":
            return json.dumps({"decision": "block", "reason": text}, ensure_ascii=False)
        return context_output(str(name), text)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def text_field(payload: Mapping[str, Any], key: str, *, allow_number: bool = False) -> str | None:
    """A string field of the payload: None when absent or empty, PayloadError when mistyped."""
    value = payload.get(key)
    if value is None:
        return None
    if allow_number and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise PayloadError(f"field {key!r} must be a string, got {_json_type(value)}")
    value = value.strip() if key != "prompt" else value
    return value or None


def first_text(payload: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = text_field(payload, key, allow_number=True)
        if value:
            return value
    return None


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    return type(value).__name__


def home_folder(environ: Mapping[str, str]) -> Path:
    """The user's home as the hook's environment names it (``HOME``), else this process's."""
    home = environ.get("HOME")
    return Path(home) if home else Path.home()


def read_json(path: Path) -> Any:
    """The JSON in a harness's own file (its account, its settings), or None when it is missing or
    unreadable: what a harness keeps is a hint, never a reason to fail."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
