"""Recalled memory as data: the fence around injected memory, and what keeps text inside it.

Everything MKG injects into an agent's context (recalled learnings, recent activity, known fixes
for a failing query) sits between :data:`FENCE_OPEN` and :data:`FENCE_CLOSE`, so the extractor can
strip it and never learn memory from itself, and the model reads it as background.

Memory holds text that came from tool outputs, web pages and other agents, any of which may be
hostile. Two defences keep such text from acting as instructions:

- :func:`neutralise`, applied to every piece of memory text rendered inside a fence: fence markers,
  harness control tags (``<system-reminder>``, ``</system>``, ``<|im_start|>`` ...) and role
  prefixes (``SYSTEM:``) lose the characters that make them markup, so a learning can neither close
  the fence nor speak as the system;
- :func:`instruction_like`, the screen applied when memory is written: a learning that reads as an
  instruction to the model rather than a fact is held for a human (it waits in the review queue
  and is not recalled until someone approves it).
"""

from __future__ import annotations

import re

#: Opening and closing lines of every injected memory block.
FENCE_OPEN = '<mkg-memory kind="recalled">'
FENCE_CLOSE = "</mkg-memory>"
FENCE_RE = re.compile(re.escape(FENCE_OPEN) + r".*?" + re.escape(FENCE_CLOSE), re.DOTALL)

#: Tags a harness or a model treats as structure: MKG's fence, system and role markers, and the
#: blocks Claude Code, Codex and Gemini CLI wrap hook output and tool results in.
_CONTROL_TAG = re.compile(
    r"<\s*/?\s*(?:mkg[\w-]*|system[\w-]*|instructions?|important[\w-]*|assistant|user|human|developer"
    r"|tool[\w-]*|function[\w-]*|hook[\w-]*|command[\w-]*|local-command[\w-]*|antml:[\w-]*"
    r"|untrusted[\w-]*|context[\w-]*|thinking|policy|rules?|prompt[\w-]*|memory[\w-]*)\b[^<>]{0,300}>?",
    re.IGNORECASE,
)
#: Chat-template tokens and role markers of model formats.
_ROLE_TOKEN = re.compile(r"<\|[^|<>]{1,40}\|>|\[/?(?:INST|SYS)\]|<<\s*/?\s*SYS\s*>>", re.IGNORECASE)
#: A line, or a sentence, that claims a role: ``SYSTEM: ...``, ``Assistant: ...``.
_ROLE_PREFIX = re.compile(
    r"(?:(?<=^)|(?<=[\n.!?>\]]\s)|(?<=[\n>\]]))\s*(system|assistant|developer|human)\s*:",
    re.IGNORECASE | re.MULTILINE,
)


#: What markup characters become: look-alikes that no parser takes for markup.
_DEFANGED = str.maketrans({"<": "\u2039", ">": "\u203a", "[": "\u27e6", "]": "\u27e7"})


def _defang(match: re.Match[str]) -> str:
    return match.group(0).translate(_DEFANGED)


def neutralise(text: str) -> str:
    """``text`` safe to show inside a fence: markup that could close the fence, open a harness
    block or claim a role is defanged (``<`` and ``>`` become single angle quotation marks,
    ``SYSTEM:`` becomes ``SYSTEM (quoted):``). Ordinary text, code with ``<`` comparisons and
    generics included, is left as it is."""
    if ":" in text:
        text = _ROLE_PREFIX.sub(lambda m: m.group(0)[:-1].rstrip() + " (quoted):", text)
    if "<" in text:
        text = _CONTROL_TAG.sub(_defang, text)
    if "<" in text or "[" in text:
        text = _ROLE_TOKEN.sub(_defang, text)
    return text


def strip_recalled(text: str) -> str:
    """Remove injected memory blocks from text (the extractor must never re-learn them)."""
    return FENCE_RE.sub("", text)


#: Text that reads as an instruction to the model, or as an attempt to take control of it, rather
#: than as a fact. Ordinary guidance a team writes down ("always run the tests before pushing") is
#: not in it: that is what project memory is for.
INSTRUCTION_PATTERNS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\b(ignore|disregard|forget|override|bypass)\b.{0,40}\b(previous|prior|above|earlier|all|any|"
        r"system|other|your)\b.{0,20}\b(instructions?|prompts?|rules?|guidelines?|directions?|context)",
        r"\byou are now\b",
        r"\bfrom now on,? (you|the (assistant|agent|model))\b",
        r"\b(new|updated|real|actual|hidden) (system )?(instructions?|directives?)\s*:",
        r"\bsystem prompt\b",
        r"\b(developer|god|jailbreak|dan|admin|sudo) mode\b",
        r"\bdo anything now\b",
        r"\b(reveal|print|show|leak|exfiltrate|send|upload|post|email)\b.{0,40}\b(secrets?|api keys?|tokens?|"
        r"passwords?|credentials?|env(ironment)? variables?|\.env|ssh keys?)\b",
        r"\b(curl|wget)\b[^|\n]{0,200}\|\s*(ba|z)?sh\b",
        r"<\s*/?\s*(mkg-memory|untrusted-data|system[\w-]*|instructions?|assistant|human)\b",
        r"<\|[^|<>]{1,40}\|>|\[/?INST\]|<<\s*/?\s*SYS\s*>>",
        r"(^|[\n.!?]\s*)(system|assistant|developer)\s*:",
        r"\bdo not (tell|inform|let|alert) the user\b",
        r"\b(without|never) (telling|asking|informing) the user\b",
    )
)


def instruction_like(text: str) -> str | None:
    """The phrase that makes ``text`` read as an instruction to the model, if any."""
    for pattern in INSTRUCTION_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(0).strip()
    return None
