"""A session window as text for the model: turns, the latest whole, older ones condensed, recalled memory
stripped and credentials scrubbed. What the assistant said between tool calls (from the session's
transcript, which no hook carries) goes before the calls it led to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..events import tool_key as normalize_tool_key
from ..injection import strip_recalled
from ..redaction import scrub

TURN_START_EVENTS = frozenset({"UserPromptSubmit"})
SILENT_EVENTS = frozenset(
    {"SessionStart", "SessionEnd", "Notification", "PreCompact", "SubagentStart", "PreToolUse"}
)
BLOCK_TEXT, TOOL_TEXT, SAID_TEXT = 2000, 600, 1000


def clip(text: object, limit: int) -> str:
    flat = strip_recalled(str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def event_blocks(events: list[dict[str, Any]], said: Mapping[str, str] | None = None) -> list[list[str]]:
    """The events as text, grouped into turns (a turn starts at each prompt). ``said`` maps a tool
    call's id to the assistant text that came before it; calls issued together share one text,
    written once."""
    turns: list[list[str]] = [[]]
    last_said = None
    for index, event in enumerate(events):
        name = event.get("event_name", "")
        if name in SILENT_EVENTS:
            continue
        who = "subagent " if event.get("agent_kind") == "subagent" else ""
        block: list[str] = []
        if name in TURN_START_EVENTS:
            if turns[-1]:
                turns.append([])
            if event.get("prompt"):
                block.append(f"user: {clip(event['prompt'], BLOCK_TEXT)}")
        elif name in ("Stop", "SubagentStop"):
            if event.get("last_assistant_message"):
                block.append(f"{who}assistant: {clip(event['last_assistant_message'], BLOCK_TEXT)}")
        elif event.get("tool_name"):
            text = (said or {}).get(event.get("tool_use_id") or "")
            if text and text != last_said:
                block.append(f"{who}assistant: {clip(text, SAID_TEXT)}")
                last_said = text
            block += _tool_lines(event, events[index + 1 :], who)
        elif event.get("prompt"):
            block.append(f"{who}{name}: {clip(event['prompt'], BLOCK_TEXT)}")
        if block:
            turns[-1].append("\n".join(block))
    return [turn for turn in turns if turn]


def _tool_lines(event: dict[str, Any], later: list[dict[str, Any]], who: str) -> list[str]:
    name = event["tool_name"]
    tool_input = clip(event.get("tool_input", ""), TOOL_TEXT)
    failed = (event.get("tool_error") or event.get("event_name") == "PostToolUseFailure") and not event.get(
        "is_interrupt"
    )
    if not failed:  # successful outputs are left out: the input says what was done
        return [f"{who}tool {name}: {tool_input}"]
    key = event.get("tool_key") or normalize_tool_key(name)
    problem = clip(event.get("error") or event.get("tool_response") or "failed", TOOL_TEXT)
    lines = [f"{who}tool {name} FAILED (tool_key {key}): input {tool_input}", f"  error: {problem}"]
    for after in later:
        if (
            after.get("tool_name") == name
            and after.get("event_name") == "PostToolUse"
            and not after.get("tool_error")
        ):
            retry = clip(after.get("tool_input", ""), TOOL_TEXT)
            lines.append(f"  a later call to the same tool succeeded with input: {retry}")
            break
    return lines


def build_corpus(
    events: list[dict[str, Any]], budget_tokens: int, said: Mapping[str, str] | None = None
) -> str:
    """The window as text within ``budget_tokens``: newest turns whole, older ones condensed.
    ``said``: the assistant text before each tool call, by call id (see :func:`event_blocks`)."""
    turns = event_blocks(events, said)
    if not turns:
        return ""
    budget = budget_tokens * 4  # characters, as estimate_tokens counts them
    whole = ["\n".join(turn) for turn in turns]
    # When everything does not fit, whole turns take at most 3/4 so older ones can be condensed.
    fits = sum(len(text) + 2 for text in whole) <= budget
    whole_budget = budget if fits else budget * 3 // 4
    kept: list[str] = []
    used = 0
    index = len(turns) - 1
    while index >= 0 and used + len(whole[index]) + 2 <= whole_budget:
        kept.insert(0, whole[index])
        used += len(whole[index]) + 2
        index -= 1
    if not kept:  # the newest turn alone is too long: keep its end
        marker = "[the start of this turn was cut]\n"
        kept = [marker + whole[-1][-(budget - len(marker)) :]]
        used = budget
        index = len(turns) - 2
    condensed: list[str] = []
    while index >= 0:
        first = turns[index][0].splitlines()[0]
        line = f"- {first[:200]}" + (
            f" (+{len(turns[index]) - 1} more steps)" if len(turns[index]) > 1 else ""
        )
        if used + len(line) + 1 > budget:
            break
        condensed.insert(0, line)
        used += len(line) + 1
        index -= 1
    parts = []
    if index >= 0:
        parts.append(f"[{index + 1} earlier turns left out]")
    if condensed:
        parts.append("Earlier turns, condensed:\n" + "\n".join(condensed))
    parts += kept
    return scrub("\n\n".join(parts))
