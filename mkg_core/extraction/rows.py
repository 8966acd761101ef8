"""The model's answers as rows to write: learnings with derived ids and bounded values, observations,
and the entities each is about."""

from __future__ import annotations

from typing import Any

from ..entities.linker import link_text
from ..entities.model import Mention, kind_of
from ..events import tool_key as normalize_tool_key
from ..learnings import (
    LearningWrite,
    clamp_confidence,
    collapse,
    learning_id,
    namespace,
    task_pattern,
)
from ..redaction import scrub
from .prompts import EntityItem, ExtractionAnswer, ObservationAnswer

OBSERVATION_TYPES = ("change", "bugfix", "feature", "refactor", "discovery", "decision", "problem")


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    return None


Mentions = dict[str, tuple[Mention, ...]]


def mentions_of(named: list[EntityItem], text: str) -> tuple[Mention, ...]:
    """What an item is about: the entities the model named, then the code artifacts and proper
    names the linker finds in its text; when the model named none, everything the linker finds.
    (Names are scrubbed when they are written, see :func:`mkg_core.entities.store.safe_mention`.)"""
    found = [
        m for m in (Mention.of(item.name, kind_of(item.kind), item.aliases, "llm") for item in named) if m
    ]
    found += link_text(text, concepts=not found)
    return tuple({m.key: m for m in reversed(found)}.values())[::-1]


def learning_writes(
    answer: ExtractionAnswer, *, project_id: str, user_id: str | None, limit: int
) -> tuple[list[LearningWrite], Mentions]:
    """Turn the model's actions into writes (ignore dropped, ids derived, values bounded), and the
    entities each written learning is about, by learning id."""
    writes: list[LearningWrite] = []
    mentions: Mentions = {}
    for action in answer.learnings:
        verb = action.action.strip().lower()
        if verb not in ("create", "update"):
            continue
        text = collapse(_scrubbed(action.text), 500)
        existing = (action.existing_id or "").strip() or None
        if action.scope in ("project", "user"):
            scope = action.scope
        else:
            scope = "user" if existing and existing.startswith("learning:user:") else "project"
        kind = action.kind if action.kind in ("fact", "error") else ("fact" if verb == "create" else None)
        resolved = _as_bool(action.resolved)
        if kind == "error" and resolved is None and verb == "create":
            resolved = False
        common = {
            "scope": scope,
            "text": text,
            "kind": kind,
            "confidence": clamp_confidence(action.confidence),
            "task_pattern": task_pattern(action.task_pattern),
            "tool_key": normalize_tool_key(action.tool_key) if action.tool_key else None,
            "error_signature": collapse(_scrubbed(action.error_signature), 300),
            "resolved": resolved,
            "reason": collapse(_scrubbed(action.reason), 500),
        }
        if verb == "update":
            if not existing:
                continue
            writes.append(LearningWrite(id=existing, action="update", **common))  # type: ignore[arg-type]
        else:
            if not text:
                continue
            lid = learning_id(namespace(scope, project_id, user_id), text)
            writes.append(LearningWrite(id=lid, action="create", **common))  # type: ignore[arg-type]
        mentions[writes[-1].id] = mentions_of(action.entities, text or "")
        if len(writes) >= limit:
            break
    return writes, mentions


def _scrubbed(text: str | None) -> str | None:
    return scrub(text) if text else None


def observation_rows(
    answer: ObservationAnswer, *, ids_prefix: str, started_at: Any, ended_at: Any
) -> tuple[list[dict[str, Any]], Mentions]:
    """The timeline entries to write, and the entities each is about, by observation id."""
    rows: list[dict[str, Any]] = []
    mentions: Mentions = {}
    for item in answer.observations:
        title = collapse(item.title, 200)
        if not title:
            continue
        facts = [f for f in (collapse(str(fact), 300) for fact in item.facts if fact is not None) if f][:6]
        rows.append(
            {
                "id": f"{ids_prefix}:{len(rows)}",
                "type": item.type if item.type in OBSERVATION_TYPES else "change",
                "title": scrub(title),
                "facts": [scrub(f) for f in facts],
                "narrative": scrub(collapse(item.narrative, 1000) or ""),
                "started_at": started_at,
                "ended_at": ended_at,
            }
        )
        mentions[rows[-1]["id"]] = mentions_of(item.entities, observation_text(rows[-1]))
        if len(rows) == 3:
            break
    return rows, mentions


def with_resources(
    rows: list[dict[str, Any]], mentions: Mentions, touched: list[Mention], limit: int = 8
) -> Mentions:
    """The window's tool calls' files, URLs and tables added to its observations: each to the ones
    whose text names it (by its name or an alias), else to the first."""
    if not rows or not touched:
        return mentions
    out = {key: list(value) for key, value in mentions.items()}
    for mention in touched[:limit]:
        names = [mention.name, *mention.aliases]
        named = [row["id"] for row in rows if any(name in observation_text(row) for name in names)]
        for observation_id in named or [rows[0]["id"]]:
            if all(m.key != mention.key for m in out[observation_id]):
                out[observation_id].append(mention)
    return {key: tuple(value) for key, value in out.items()}


def observation_text(row: dict[str, Any]) -> str:
    """What an observation is embedded from: its title, facts and narrative."""
    return "\n".join(part for part in (row["title"], " ".join(row["facts"]), row["narrative"]) if part)
