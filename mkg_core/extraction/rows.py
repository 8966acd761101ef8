"""The model's answers as rows to write: learnings with derived ids and bounded values, observations."""

from __future__ import annotations

from typing import Any

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
from .prompts import ExtractionAnswer, ObservationAnswer

OBSERVATION_TYPES = ("change", "bugfix", "feature", "refactor", "discovery", "decision", "problem")


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    return None


def learning_writes(
    answer: ExtractionAnswer, *, project_id: str, user_id: str | None, limit: int
) -> list[LearningWrite]:
    """Turn the model's actions into writes: ignore dropped, ids derived, values bounded."""
    writes: list[LearningWrite] = []
    for action in answer.learnings:
        verb = action.action.strip().lower()
        if verb not in ("create", "update"):
            continue
        text = collapse(scrub(action.text) if action.text else None, 500)
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
            "error_signature": collapse(action.error_signature, 300),
            "resolved": resolved,
            "reason": collapse(action.reason, 500),
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
        if len(writes) >= limit:
            break
    return writes


def observation_rows(
    answer: ObservationAnswer, *, ids_prefix: str, started_at: Any, ended_at: Any
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
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
        if len(rows) == 3:
            break
    return rows


def observation_text(row: dict[str, Any]) -> str:
    """What an observation is embedded from: its title, facts and narrative."""
    return "\n".join(part for part in (row["title"], " ".join(row["facts"]), row["narrative"]) if part)
