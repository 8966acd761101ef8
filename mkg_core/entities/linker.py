"""The deterministic entity linker: the things a text or a tool call names, without an LLM.

It serves coding-agent memory first. In text it finds code artifacts by their shape: file paths
and file names, directories, dotted modules, functions and classes, environment variables, shell
commands in backticks or of well-known tools, packages being installed, URLs and HTTP endpoints,
SQL tables. In ordinary prose it finds proper names (capitalised words not at a sentence's start,
or at the start when they read as names: people, places, organisations, titles) and short noun
phrases (the last one or two content words of a run that no function word, common verb or
judgement breaks). From the resources of captured tool calls (enrichment's files, URLs, tables)
it makes file, service and table mentions.

Nothing here calls out: it is what links memory when no LLM answers, what the LoCoMo benchmark
links with, and what reads a prompt for the entities it names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlsplit

from .model import Mention
from .words import FUNCTION_WORDS, HONORIFICS, NAME_JOINERS, NOT_NAMES, ORGANISATION_WORDS, SQL_KEYWORDS

#: At most this many mentions of one text (the first found win: code artifacts, then names).
MAX_MENTIONS = 24

_EXTENSIONS = (
    "py|pyi|ipynb|md|rst|txt|json|jsonl|toml|yaml|yml|ini|cfg|conf|env|lock|csv|tsv|sql|cypher|sh|bash|"
    "zsh|ps1|js|jsx|ts|tsx|mjs|cjs|vue|svelte|html|css|scss|rs|go|java|kt|kts|scala|rb|php|c|h|cc|cpp|hpp|"
    "cs|swift|m|mm|r|jl|lua|pl|ex|exs|erl|hs|ml|tf|tfvars|hcl|proto|graphql|gql|xml|gradle|dockerfile|"
    "mk|bzl|nix|zig|dart|log|pem|crt"
)
_TLDS = frozenset(
    ["com", "org", "net", "io", "dev", "ai", "app", "co", "edu", "gov", "uk", "de", "fr", "eu", "us"]
)
#: Tools whose name in prose starts a command ("run pytest -k recall", "git rebase").
_COMMAND_WORDS = frozenset(
    " ".join(
        [
            "git npm npx pnpm yarn pip pip3 pipx uv poetry pytest tox ruff mypy black docker kubectl",
            "helm terraform cargo rustc go gradle mvn brew apt apt-get mkg make just bazel node deno",
            "bun python python3 psql cypher-shell gcloud aws az bq",
        ]
    ).split()
)
#: Tools named in prose that are also English words: a command only in backticks or a shell call.
_PROSE_UNSAFE_COMMANDS = frozenset({"make", "just", "go", "node", "python", "python3"})
_INSTALL = re.compile(
    r"\b(?:pip3?\s+install|uv\s+(?:pip\s+install|add)|poetry\s+add|pipx\s+install|npm\s+(?:install|i|add)|"
    r"yarn\s+add|pnpm\s+(?:add|install)|cargo\s+add|go\s+get|gem\s+install|brew\s+install|"
    r"apt(?:-get)?\s+install)((?:\s+[^\s;&|`]+)+)"
)

_URL = re.compile(r"\bhttps?://[^\s<>()\[\]'\"`]+")
_ENDPOINT = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE)\s+(/[\w/{}:.\-]*)")
_BACKTICK = re.compile(r"`([^`\n]{2,120})`")
_PATH = re.compile(r"(?<![\w/.:@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*")
_FILE = re.compile(rf"(?<![\w/.-])[\w@+-]*[A-Za-z_][\w@+-]*\.(?:{_EXTENSIONS})\b(?![\w/-])", re.I)
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?(?!\w|\.\w)")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\(\)")
_ENV = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![\w-])")
_SNAKE = re.compile(r"(?<![\w.-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w-])")
_CAMEL = re.compile(r"(?<![\w.])(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+){2,}|[a-z]+(?:[A-Z][a-z0-9]+)+)(?![\w.])")
_SQL = re.compile(r"\b(?:SELECT|INSERT|UPDATE|DELETE|CREATE TABLE)\b")
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(`[^`]+`|[A-Za-z_][\w.$]*)")
_NAMED_TABLE = re.compile(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+|`[\w.]+`)\s+tables?\b|\btables?\s+(`[\w.]+`)")

_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['\u2019][A-Za-z]+|[-&][A-Za-z0-9]+)*|&")
_SPEAKER = re.compile(r"^\s*([A-Z][\w'\u2019-]+(?:\s+[A-Z][\w'\u2019-]+)?):\s", re.M)
_QUOTED = re.compile(r"[\"\u201c\u2018'](?P<title>[A-Z0-9][^\"\u201d\u2019'\n]{1,60}?)[\"\u201d\u2019']")
_SENTENCE_END = frozenset('.!?:;\n"\u201c\u201d')


class _Take(Protocol):
    def __call__(self, match: re.Match[str], mention: Mention | None, group: int = 0) -> None: ...


def link_text(text: str | None, *, concepts: bool = True) -> list[Mention]:
    """The entities ``text`` names, code artifacts first, each once. ``concepts=False`` keeps only
    the precise ones (code artifacts and proper names), leaving noun phrases out."""
    if not text:
        return []
    found: list[Mention] = []
    masked = list(text)

    def take(match: re.Match[str], mention: Mention | None, group: int = 0) -> None:
        if mention is not None:
            found.append(mention)
        start, end = match.span(group)
        masked[start:end] = " " * (end - start)

    for match in _URL.finditer(text):
        take(match, _url_mention(match.group(0)))
    for match in _ENDPOINT.finditer(text):
        take(match, Mention.of(f"{match.group(1)} {match.group(2)}", "service"))
    for match in _INSTALL.finditer(text):
        packages, used = _packages(match.group(1))
        found.extend(packages)
        start = match.start()
        masked[start : match.start(1) + used] = " " * (match.start(1) + used - start)
    for match in _BACKTICK.finditer(text):
        take(match, _code_span(match.group(1)))
    _scan_code("".join(masked), found, masked, take)
    _scan_prose("".join(masked), found, concepts)
    return _unique(found)[:MAX_MENTIONS]


def _scan_code(text: str, found: list[Mention], masked: list[str], take: _Take) -> None:
    if _SQL.search(text):
        for match in _SQL_TABLE.finditer(text):
            take(match, Mention.of(match.group(1).strip("`"), "table"), 1)
    for match in _NAMED_TABLE.finditer(text):
        group = 1 if match.group(1) else 2
        take(match, Mention.of(match.group(group).strip("`"), "table"), group)
    for match in _PATH.finditer(text):
        mention = _path_mention(match.group(0))
        if mention is not None:
            take(match, mention)
    text = "".join(masked)
    for match in _FILE.finditer(text):
        take(match, Mention.of(match.group(0), "file"))
    text = "".join(masked)
    for match in _DOTTED.finditer(text):
        take(match, _dotted_mention(match.group(0)))
    text = "".join(masked)
    for pattern, kind in ((_CALL, "symbol"), (_ENV, "config"), (_SNAKE, "symbol"), (_CAMEL, "symbol")):
        for match in pattern.finditer(text):
            name = match.group(1) if pattern is _CALL else match.group(0)
            take(match, Mention.of(name, kind))
        text = "".join(masked)
    for word in _COMMAND_WORDS - _PROSE_UNSAFE_COMMANDS:
        for match in re.finditer(rf"(?<![\w./-]){re.escape(word)}\s+(-{{1,2}}[\w-]+|[a-z][\w:.-]*)", text):
            sub = match.group(1)
            if sub.startswith("-"):  # "pytest -k recall": the tool itself
                take(match, Mention.of(word, "command"))
            elif sub not in NOT_NAMES:
                take(match, Mention.of(f"{word} {sub}", "command"))


def _url_mention(url: str) -> Mention | None:
    parts = urlsplit(url.rstrip(".,;:!?"))
    host = (parts.hostname or "").removeprefix("www.")
    if not host:
        return None
    path = parts.path.rstrip("/")
    return Mention.of(f"{host}{path}", "service", aliases=(host,) if path else ())


def _packages(arguments: str) -> tuple[list[Mention], int]:
    """The packages an install command names (its words up to the first that is not one), and
    how many characters of ``arguments`` they take."""
    found: list[Mention] = []
    used = 0
    for match in re.finditer(r"\S+", arguments):
        raw = match.group(0)
        token = raw.strip("'\"").rstrip(".,;:")
        if token.startswith("-"):
            used = match.end()
            continue
        if (
            token.startswith((".", "/"))
            or "://" in token
            or token[:1].isupper()
            or token.lower() in NOT_NAMES
        ):
            break
        scoped = token.startswith("@")  # an npm scope, "@types/node"
        name = re.split(r"[=<>~!\[]" if scoped else r"[=<>~!\[@]", token, maxsplit=1)[0]
        mention = Mention.of(name, "dependency")
        if mention is not None:
            found.append(mention)
        used = match.end()
        if raw.strip("'\"") != raw.strip("'\"").rstrip(".,;:"):
            break  # the sentence goes on
    return found[:6], used


def _code_span(span: str) -> Mention | None:
    """What a backticked span names: a command, a path, a file, a module or a symbol."""
    words = span.split()
    if not words:
        return None
    head = words[0].lower()
    if head in _COMMAND_WORDS or head.startswith(("./", "bin/")):
        sub = next((w for w in words[1:] if not w.startswith("-")), None)
        return Mention.of(f"{words[0]} {sub}" if sub and "/" not in sub else words[0], "command")
    if len(words) > 1:
        return None
    token = words[0].rstrip("()")
    if "/" in token:
        return _path_mention(token)
    if _FILE.fullmatch(token):
        return Mention.of(token, "file")
    if "." in token and _DOTTED.fullmatch(token):
        return _dotted_mention(token)
    if _ENV.fullmatch(token):
        return Mention.of(token, "config")
    if re.fullmatch(r"[A-Za-z_][\w-]*", token):
        return Mention.of(token, "symbol")
    return None


def _path_mention(path: str) -> Mention | None:
    cleaned = path.rstrip(".,;:")
    segments = [s for s in cleaned.split("/") if s not in ("", ".", "..", "~")]
    if not segments or not any(ch.isalpha() for ch in cleaned):
        return None
    anchored = cleaned.startswith(("/", "./", "../", "~/"))
    last = segments[-1]
    has_extension = bool(re.search(rf"\.(?:{_EXTENSIONS})$", last, re.I))
    code_like = (
        anchored or has_extension or cleaned.endswith("/") or any(("_" in s or "." in s) for s in segments)
    )
    if not code_like or len(cleaned) < 4:
        return None  # "and/or", "24/7", "km/h"
    if has_extension:
        return Mention.of(cleaned, "file", aliases=(last,) if len(segments) > 1 else ())
    return Mention.of(cleaned.rstrip("/"), "directory")


def _dotted_mention(token: str) -> Mention | None:
    called = token.endswith("()")
    name = token.removesuffix("()")
    parts = name.split(".")
    if parts[-1].lower() in _TLDS and not called:
        return Mention.of(name.lower(), "service")
    if re.fullmatch(rf"(?:{_EXTENSIONS})", parts[-1], re.I) and not called:
        return Mention.of(name, "file")
    if len(parts) == 2 and parts[0].lower() in NOT_NAMES:
        return None  # "e.g", a sentence's end without a space
    return Mention.of(name, "symbol" if called or parts[-1][:1].isupper() else "module")


# -- prose ---------------------------------------------------------------------------------------------


def _scan_prose(text: str, found: list[Mention], concepts: bool) -> None:
    speakers = {m.group(1) for m in _SPEAKER.finditer(text)}
    for speaker in speakers:
        mention = Mention.of(speaker, "person")
        if mention is not None:
            found.append(mention)
    for match in _QUOTED.finditer(text):
        title = match.group("title").strip()
        if 1 <= len(title.split()) <= 8 and title.lower() not in NOT_NAMES:
            mention = Mention.of(title, "name")
            if mention is not None:
                found.append(mention)
    tokens = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    confirmed = {
        word for i, (word, start, _) in enumerate(tokens) if _capitalised(word) and not _starts(text, start)
    }
    names, used = _names(text, tokens, confirmed)
    found.extend(names)
    if concepts:
        found.extend(_phrases(text, tokens, used))


def _capitalised(word: str) -> bool:
    lower = word.lower()
    if word.isupper() and lower in SQL_KEYWORDS:
        return False
    return word[:1].isupper() and lower not in NOT_NAMES and not word.isdigit()


def _part_of_name(word: str) -> bool:
    """A capitalised word that may continue a name: any but the function words ("Day" in "Mother's
    Day", "New" in "New York")."""
    return word[:1].isupper() and not word.isdigit() and word.lower() not in FUNCTION_WORDS


def _starts(text: str, start: int) -> bool:
    """Whether the token at ``start`` opens a sentence (or the text)."""
    index = start - 1
    while index >= 0 and text[index] in " \t\"'\u201c\u2018(":
        index -= 1
    return index < 0 or text[index] in _SENTENCE_END


def _reads_as_name(word: str) -> bool:
    """A capitalised word that opens a sentence and is not confirmed elsewhere: a name unless its
    form says verb, adverb or gerund."""
    lower = re.sub(r"['\u2019]s$", "", word.lower())
    if lower in NOT_NAMES or "'" in lower or "\u2019" in lower:
        return False
    return not (len(lower) > 4 and lower.endswith(("ing", "ed", "ly")))


def _names(
    text: str, tokens: list[tuple[str, int, int]], confirmed: set[str]
) -> tuple[list[Mention], set[int]]:
    """Runs of capitalised words (joined by "of", "the", "&", ...) as proper names, and the indexes
    of the tokens they took."""
    found: list[Mention] = []
    used: set[int] = set()
    i = 0
    while i < len(tokens):
        word, start, _ = tokens[i]
        opening = _starts(text, start)
        strong = _capitalised(word) and (not opening or word in confirmed or _reads_as_name(word))
        # "New York", "Great Britain": a capitalised common word inside a sentence, before a name
        leads = not opening and _part_of_name(word) and i + 1 < len(tokens) and _capitalised(tokens[i + 1][0])
        if not (strong or leads):
            i += 1
            continue
        j = i + 1
        while j < len(tokens):
            nxt, nstart, _ = tokens[j]
            gap = text[tokens[j - 1][2] : nstart]
            if gap.strip() not in ("", "&", "-") or _starts(text, nstart):
                break
            if _part_of_name(nxt) or (nxt.isdigit() and len(nxt) <= 4):
                j += 1
            elif nxt.lower() in NAME_JOINERS and _joined(tokens, j):
                j = _joined(tokens, j)
            else:
                break
        words = [t[0] for t in tokens[i:j]]
        used.update(range(i, j))
        previous = tokens[i - 1][0].lower().rstrip(".") if i else ""
        kind = "person" if previous in HONORIFICS else "name"
        if words[-1].lower() in ORGANISATION_WORDS and len(words) > 1:
            kind = "organisation"
        mention = Mention.of(" ".join(words), kind)
        if mention is not None:
            found.append(mention)
        i = j
    return found, used


def _joined(tokens: list[tuple[str, int, int]], j: int) -> int:
    """Past one or two joining words ("of", "of the") when a capitalised word follows, else 0."""
    for skip in (1, 2):
        if j + skip >= len(tokens):
            return 0
        if _capitalised(tokens[j + skip][0]):
            return j + skip + 1
        if tokens[j + skip][0].lower() not in NAME_JOINERS:
            return 0
    return 0


def _phrases(text: str, tokens: list[tuple[str, int, int]], used: set[int]) -> list[Mention]:
    """Short noun phrases: the last word, and the last two, of each run of lowercase content words."""
    found: list[Mention] = []
    run: list[str] = []

    def close() -> None:
        if run:
            head = run[-1]
            for phrase in ([" ".join(run[-2:])] if len(run) > 1 else []) + [head]:
                mention = Mention.of(phrase, "concept")
                if mention is not None:
                    found.append(mention)
        run.clear()

    for index, (word, start, _) in enumerate(tokens):
        gap = text[tokens[index - 1][2] : start] if index else ""
        if index and gap.strip() not in ("", "-"):
            close()
        lower = word.lower()
        if (
            index in used
            or not word.isalpha()
            or len(word) < 3
            or lower in NOT_NAMES
            or (len(lower) > 4 and lower.endswith("ly"))
            or not word.islower()
        ):
            close()
            continue
        run.append(lower)
    close()
    return found


def link_resources(resources: Iterable[tuple[str, str]], cwd: str | None = None) -> list[Mention]:
    """Mentions from what tool calls touched, as enrichment reads them: ``(type, value)`` pairs of
    files, URLs and tables (queries themselves are not things; their tables are)."""
    found: list[Mention] = []
    for kind, value in resources:
        mention: Mention | None = None
        if kind == "file":
            path = _relative(value, cwd)
            base = path.rsplit("/", 1)[-1]
            mention = Mention.of(path, "file", aliases=(base,) if base != path else ())
        elif kind == "url":
            mention = _url_mention(value)
        elif kind == "table":
            mention = Mention.of(value, "table")
        if mention is not None:
            found.append(mention)
    return _unique(found)


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _unique(mentions: Iterable[Mention]) -> list[Mention]:
    kept: dict[str, Mention] = {}
    for mention in mentions:
        kept.setdefault(mention.key, mention)
    return list(kept.values())
