"""What the hook keeps of a payload. Standard library only: this runs in every hook.

Every well-formed JSON event is kept, whatever it holds, and the hook's work is bounded for any
payload up to the hook's size limit:

- every key and string is scrubbed (:mod:`mkg_core.redaction`);
- a string longer than :data:`FIELD_LIMIT` is cut, and once the payload has used its budget
  (:data:`CHAR_BUDGET` characters, :data:`STRING_BUDGET` keys and strings) the rest of each object
  or array is replaced by one marker, before anything more is scrubbed;
- nesting deeper than :data:`MAX_DEPTH` is cut with a marker (also when it is too deep for the
  JSON parser itself: :func:`cut_nesting`);
- lone surrogate escapes (``"\\ud800"``, what JavaScript writes when it cuts a string mid-emoji) become
  U+FFFD;
- identifiers the graph indexes (``session_id``, ``agent_id`` ...) longer than :data:`ID_LIMIT` are
  replaced by a short prefix and a hash, the same for every event that carries them.

Everything cut or repaired is listed in the spooled record, so nothing is dropped silently.
"""

from __future__ import annotations

import hashlib
import re

from .redaction import SECRET_MARK, is_secret_entry, scrub, scrub_value

#: Longest string kept from a payload; longer ones are cut with a marker.
FIELD_LIMIT = 256 * 1024
#: Extra text scrubbed past a cut, so a secret straddling it is still recognised.
SCRUB_MARGIN = 4096
#: Characters of keys and strings kept from one payload; the rest is cut with markers. Scrubbing
#: costs about a microsecond per kilobyte for each credential rule's trigger, so this bounds the
#: hook's time; the graph keeps at most 8,000 characters of a text anyway.
CHAR_BUDGET = 1024 * 1024
#: Keys and strings kept from one payload (each is scrubbed, which is what costs time).
STRING_BUDGET = 20_000
#: Deepest nesting kept; deeper values become a marker.
MAX_DEPTH = 64
#: Longest identifier kept as it is (Neo4j indexes them, and an index key has a size limit).
ID_LIMIT = 256
#: Top-level payload fields that become indexed identifiers in the graph.
ID_FIELDS = ("session_id", "agent_id", "tool_use_id", "turn_id", "prompt_id", "parent_session_id")
#: The key a cut object gets in place of what it lost.
CUT_KEY = "…[cut]"
DEPTH_MARKER = f"…[cut: nested deeper than {MAX_DEPTH} levels]"

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def truncation_marker(total: int) -> str:
    return f"…[truncated: {total} chars]"


class Budget:
    """What one payload may still use, and what was cut or repaired."""

    def __init__(self, *, chars: int = CHAR_BUDGET, strings: int = STRING_BUDGET, surrogates: bool = True):
        self.chars = chars
        self.strings = strings
        #: Whether the payload may hold lone surrogates (checked once, on its raw bytes).
        self.surrogates = surrogates
        self.repaired = False

    @property
    def spent(self) -> bool:
        return self.chars <= 0 or self.strings <= 0

    @classmethod
    def for_raw(cls, data: bytes) -> Budget:
        return cls(surrogates=_SURROGATE_ESCAPE.search(data) is not None)


def sanitize(
    value: object, truncated: list[str], path: str = "", *, budget: Budget | None = None, depth: int = 0
) -> object:
    """Scrub private spans and secrets from every key and string (JSON held in a string as the
    structure it is), within the payload's budget; ``truncated`` collects the paths of what was cut."""
    budget = Budget() if budget is None else budget
    if isinstance(value, str):
        return _string(value, truncated, path, budget)
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            truncated.append(path or "$")
            return DEPTH_MARKER
        out: dict[str, object] = {}
        items = value.items() if depth else _scalars_first(value)
        for index, (key, item) in enumerate(items):
            if budget.spent and (depth or isinstance(item, (dict, list))):
                out[CUT_KEY] = f"{len(value) - index} more keys not recorded (over the payload budget)"
                truncated.append(f"{path}.*" if path else "*")
                break
            budget.strings -= 1
            budget.chars -= len(key)
            clean_key = scrub(_repair(key, budget)) if len(key) <= FIELD_LIMIT else _cut(key, budget)
            child = f"{path}.{key[:80]}" if path else key[:80]
            if is_secret_entry(key, item):  # {"password": "..."}: the key says what it is
                out[clean_key] = SECRET_MARK
                continue
            out[clean_key] = sanitize(item, truncated, child, budget=budget, depth=depth + 1)
        if not depth:  # back in the payload's own order
            order = {key: index for index, key in enumerate(value)}
            out = dict(sorted(out.items(), key=lambda pair: order.get(pair[0], len(order))))
        return out
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            truncated.append(path or "$")
            return DEPTH_MARKER
        kept: list[object] = []
        for index, item in enumerate(value):
            if budget.spent:
                kept.append(f"…[cut: {len(value) - index} more items not recorded (over the payload budget)]")
                truncated.append(f"{path}[{index}:]")
                break
            kept.append(sanitize(item, truncated, f"{path}[{index}]", budget=budget, depth=depth + 1))
        return kept
    return value


def _scalars_first(payload: dict[str, object]) -> list[tuple[str, object]]:
    """The top level's plain fields (ids, names, the event) before its big ones, so that a huge
    tool input or response never costs the event its identity."""
    items = list(payload.items())
    return [p for p in items if not isinstance(p[1], (dict, list))] + [
        p for p in items if isinstance(p[1], (dict, list))
    ]


def _string(value: str, truncated: list[str], path: str, budget: Budget) -> str:
    budget.strings -= 1
    limit = min(FIELD_LIMIT, max(budget.chars, 0))
    if len(value) <= limit:
        budget.chars -= len(value)
        cleaned = scrub_value(_repair(value, budget))
        return cleaned if isinstance(cleaned, str) else value
    truncated.append(path or "$")
    return _cut(value, budget, limit)


def _cut(value: str, budget: Budget, limit: int | None = None) -> str:
    keep = min(FIELD_LIMIT, max(budget.chars, 0)) if limit is None else limit
    budget.chars -= keep
    kept = scrub(_repair(value[: keep + SCRUB_MARGIN], budget))[:keep]
    return kept + truncation_marker(len(value))


def _repair(text: str, budget: Budget) -> str:
    if budget.surrogates and _SURROGATE.search(text):
        budget.repaired = True
        return _SURROGATE.sub("\ufffd", text)
    return text


def clip_identifiers(payload: dict[str, object]) -> dict[str, int]:
    """Replace over-long identifiers in place by a prefix and a hash; return their original lengths."""
    clipped: dict[str, int] = {}
    for field in ID_FIELDS:
        value = payload.get(field)
        if isinstance(value, str) and len(value) > ID_LIMIT:
            payload[field] = clip_identifier(value)
            clipped[field] = len(value)
    return clipped


def clip_identifier(value: str) -> str:
    """A long identifier as ``<first 64 characters>…sha256:<32 hex>``: short, stable, distinct."""
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{value[:64]}…sha256:{digest}"


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def cut_nesting(text: str, limit: int = MAX_DEPTH) -> str:
    """JSON text with every value nested deeper than ``limit`` replaced by a marker string, for
    payloads too deep for the JSON parser. Strings are skipped as wholes, so brackets in them do
    not count."""
    parts: list[str] = []
    depth = 0
    start = 0  # where the text still to copy begins
    cut_from = -1  # where the value being cut began
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token[0] == '"':
            continue
        if token in "[{":
            depth += 1
            if depth == limit + 1 and cut_from < 0:
                cut_from = match.start()
        else:
            if depth == limit + 1 and cut_from >= 0:
                parts.append(text[start:cut_from])
                parts.append('"' + DEPTH_MARKER + '"')
                start = match.end()
                cut_from = -1
            depth -= 1
    parts.append(text[start:])
    return "".join(parts)


# -- payloads too dense to parse in time ----------------------------------------------------------

#: Strings (keys and values) above which a payload is reduced before it is parsed: parsing costs
#: about a microsecond per string, and the budget keeps :data:`STRING_BUDGET` of them anyway.
DENSE_STRINGS = 100_000
#: Tokens (strings and brackets) kept from the start of a dense payload, and read from its end.
HEAD_TOKENS = 3 * STRING_BUDGET
TAIL_TOKENS = STRING_BUDGET
#: How far from its end a dense payload is searched for top-level fields.
TAIL_WINDOW = 8 * 1024 * 1024
REDUCED_NOTE = "more not recorded (a dense payload, reduced before parsing)"

#: A JSON string read backwards: a quote is inside it when an odd run of backslashes follows it
#: (it was escaped), and it ends at a quote with none.
_REVERSED_TOKEN = re.compile(r'"(?:[^"]+|"(?=\\(?:\\\\)*(?!\\)))*"|[\[\]{}]')


def is_dense(text: str) -> bool:
    return text.count('"') > 2 * DENSE_STRINGS


def reduce_dense(text: str, *, tail: bool = True) -> str:
    """JSON text holding the start of a dense payload (its first :data:`HEAD_TOKENS` strings and
    brackets, each container left open there closed with a marker) and the top-level fields that
    end it (those within its last :data:`TAIL_TOKENS`), for the parser to read in bounded time: a
    harness puts the identifiers of a tool call both before and after the big values. With
    ``tail=False`` the fields after the cut are left out too."""
    head, stack = _head(text)
    if not stack:
        return text
    tail_start = _tail_start(text, len(head)) if tail and stack[0] == "{" else None
    parts = [head, _marker(stack[-1], after_entry=not head.endswith(("{", "[")))]
    for opener in reversed(stack[1:]):
        parts.append("}" if opener == "{" else "]")
    if len(stack) > 1:  # the top level says so too: the values between head and tail are gone
        parts.append(_marker(stack[0], after_entry=True))
    if tail_start is not None:
        parts.append(", " + text[tail_start:].rstrip())
    else:
        parts.append("}" if stack[0] == "{" else "]")
    return "".join(parts)


def _head(text: str) -> tuple[str, list[str]]:
    """The text before the first entry past the head's tokens, and the containers open there."""
    stack: list[str] = []
    for count, match in enumerate(_TOKEN.finditer(text)):
        token = match.group(0)
        if count >= HEAD_TOKENS and stack and token not in "]}" and _starts_entry(text, match.start()):
            return text[: match.start()].rstrip().rstrip(","), stack
        if token in ("{", "["):
            stack.append(token)
        elif token in ("}", "]") and stack:
            stack.pop()
    return text, stack  # not dense after all: nothing to cut


def _starts_entry(text: str, index: int) -> bool:
    """Whether the token at ``index`` begins an object entry or an array element."""
    index -= 1
    while index >= 0 and text[index] in " \t\r\n":
        index -= 1
    return index >= 0 and text[index] in "{[,"


def _marker(opener: str, *, after_entry: bool) -> str:
    """The entry that says a container was cut, for an object or an array."""
    comma = ", " if after_entry else ""
    if opener == "{":
        return f'{comma}"{CUT_KEY}": "{REDUCED_NOTE}"'
    return f'{comma}"…[cut: {REDUCED_NOTE}]"'


def _tail_start(text: str, head_end: int) -> int | None:
    """Where the last top-level fields begin (a key's opening quote), or None when the end of the
    payload is one big value; never inside the head."""
    base = max(len(text) - TAIL_WINDOW, head_end)
    window = text[base:][::-1]
    depth = 0
    start: int | None = None
    for count, match in enumerate(_REVERSED_TOKEN.finditer(window)):
        if count >= TAIL_TOKENS:
            break
        token = match.group(0)
        if token in ("}", "]"):
            depth += 1
        elif token in ("{", "["):
            depth -= 1
            if depth <= 0:  # back at the payload's opening brace
                break
        elif depth == 1:
            opening = base + len(window) - match.end()  # the key's opening quote, read forwards
            if _starts_entry(text, opening):
                start = opening
    return start
