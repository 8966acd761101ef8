"""What an entity is: a named thing memory is about, its kind, its normalised key and its id.

An entity belongs to one namespace, the same as the memory that names it: a project's entities
(``project:<project id>``) for project learnings and observations, a user's own
(``user:<user id>``) for that user's facts. Nothing links across namespaces, so a walk from one
user's entities never reaches another user's facts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

#: The kinds of things memory is about. Code artifacts first, then the world's.
KINDS = (
    "file",
    "directory",
    "module",
    "symbol",
    "command",
    "service",
    "dependency",
    "config",
    "table",
    "person",
    "organisation",
    "place",
    "name",  # a proper name whose kind the deterministic linker could not tell
    "concept",
)
#: When two sources disagree on a kind, the more specific one (earlier here) is kept.
KIND_RANK = {kind: rank for rank, kind in enumerate(KINDS)}
#: Kinds whose names are case- and form-sensitive identifiers: no plural folding.
CODE_KINDS = frozenset(KINDS[:9])
#: Entity names longer than this are cut (a name is a label, not a text).
NAME_LIMIT = 120
ALIAS_LIMIT = 12

_ACRONYM_PLURAL = re.compile(r"\b([A-Z]{2,})s\b")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)
_POSSESSIVE = re.compile(r"(?:'s|\u2019s|')$")
_EDGES = " \t\n\r\"'`\u201c\u201d\u2018\u2019()[]{}<>,;:!?*"


def clean_name(name: str) -> str:
    """The name as shown: whitespace collapsed, quotes and trailing punctuation taken off."""
    flat = " ".join(name.split()).strip(_EDGES)
    flat = _POSSESSIVE.sub("", flat).rstrip(".").strip(_EDGES)
    return flat[:NAME_LIMIT]


def singular(word: str) -> str:
    """An English plural folded to its singular, by the regular rules only ("activities" ->
    "activity", "boxes" -> "box", "games" -> "game"); other words unchanged."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes", "zzes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "os", "ys")):
        return word[:-1]
    return word


def normalise(name: str, kind: str = "concept") -> str:
    """The key two mentions of one thing share: lower case, no leading article, the last word of
    a concept in its singular. Code artifacts keep their spelling (lower-cased only)."""
    cleaned = clean_name(name)
    if kind in CODE_KINDS:
        return cleaned.lower().removeprefix("./")
    flat = _ACRONYM_PLURAL.sub(r"\1", cleaned).lower()  # "CSMs" is the plural of "CSM"
    flat = _ARTICLE.sub("", flat)
    words = flat.replace("\u2019", "'").split()
    if not words:
        return ""
    if kind == "concept":
        words[-1] = singular(words[-1])
    return " ".join(words)


def namespace(scope: str, project_id: str | None, user_id: str | None) -> str:
    """The namespace of memory with this scope: its project's, or for a user fact its user's."""
    if scope == "user":
        return f"user:{user_id or 'unknown'}"
    return f"project:{project_id or 'unknown'}"


def entity_id(ns: str, key: str) -> str:
    digest = hashlib.sha1(f"{ns}\n{key}".encode(), usedforsecurity=False).hexdigest()[:16]
    return f"entity:{ns}:{digest}"


def better_kind(current: str | None, new: str | None) -> str:
    """The more specific of two kinds (``concept`` is the least)."""
    kinds = [k for k in (current, new) if k in KIND_RANK]
    return min(kinds, key=KIND_RANK.__getitem__) if kinds else "concept"


#: Where a link comes from: an LLM's answer, the deterministic linker, a provider's ingestion.
SOURCES = ("llm", "linker", "provider")


@dataclass(frozen=True)
class Mention:
    """A thing a text or a tool call names: its name as written, its kind, its key, aliases
    (other spellings of the same thing, such as a file's base name) and where it was found."""

    name: str
    kind: str
    key: str = ""
    aliases: tuple[str, ...] = field(default=())
    source: str = "linker"

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", normalise(self.name, self.kind))

    @classmethod
    def of(
        cls, name: str, kind: str | None, aliases: Iterable[str] = (), source: str = "linker"
    ) -> Mention | None:
        """A mention of ``name``, or None when nothing of it is left to name a thing."""
        kind = kind if kind in KIND_RANK else "concept"
        cleaned = clean_name(name)
        key = normalise(cleaned, kind)
        if len(key) < 2 or not any(ch.isalnum() for ch in key):
            return None
        others = tuple(dict.fromkeys(a for a in (clean_name(str(x)) for x in aliases) if a and a != cleaned))
        return cls(cleaned, kind, key, others[:ALIAS_LIMIT], source if source in SOURCES else "linker")

    def alias_keys(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(k for k in (normalise(a, self.kind) for a in self.aliases) if k != self.key)
        )


_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def numbers_agree(a: str, b: str) -> bool:
    """Whether two names carry the same numbers, if any: "Python 3.11" and "Python 3.12" name two
    versions however close their embeddings are."""
    return _NUMBER.findall(a) == _NUMBER.findall(b)


#: Other words a model or a provider may use for a kind.
_KIND_WORDS = {
    "function": "symbol", "method": "symbol", "class": "symbol", "type": "symbol", "variable": "symbol",
    "package": "dependency", "library": "dependency", "framework": "dependency", "tool": "command",
    "script": "file", "folder": "directory", "path": "file", "api": "service", "endpoint": "service",
    "url": "service", "host": "service", "database": "service", "environment variable": "config",
    "env": "config", "env var": "config", "setting": "config", "configuration": "config", "key": "config",
    "organization": "organisation", "company": "organisation", "org": "organisation", "team": "organisation",
    "location": "place", "city": "place", "country": "place", "user": "person", "people": "person",
    "event": "concept", "thing": "concept", "topic": "concept", "product": "name",
}  # fmt: skip


def kind_of(value: object) -> str:
    """A kind from what a model or a provider calls it ("function" -> "symbol"); ``concept`` when
    it is none of them."""
    word = " ".join(str(value or "").lower().replace("_", " ").split())
    for candidate in (word, word.removesuffix("s")):
        if candidate in KIND_RANK:
            return candidate
    return _KIND_WORDS.get(word, _KIND_WORDS.get(word.rstrip("s"), "concept"))
