"""The lifecycle event names MKG knows. Standard library only, and cheap: the hook imports it."""

from __future__ import annotations

import re

#: Every lifecycle event MKG knows, in the order a session usually sees them.
EVENT_NAMES: tuple[str, ...] = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Stop",
    "SessionEnd",
)

#: Events whose hook must answer the harness (recall injects memory into them).
ANSWERING_EVENTS: frozenset[str] = frozenset({"SessionStart", "UserPromptSubmit"})

_BY_LOWER = {name.lower(): name for name in EVENT_NAMES}
_EVENT_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


def canonical_event_name(name: str) -> str | None:
    """Return the canonical spelling of an event name, or None when it is not a plausible name.

    Known events match case-insensitively (``sessionstart`` -> ``SessionStart``); an unknown but
    well-formed name (a harness may add events) is kept as given.
    """
    name = name.strip()
    if not _EVENT_NAME_RE.match(name):
        return None
    return _BY_LOWER.get(name.lower(), name)
