"""The Codex skills say what the Claude Code commands of the same name say, in Codex's words."""

from __future__ import annotations

import re
from pathlib import Path

import mkg_codex
import pytest

from mkg_core.testing import REPO_ROOT

SKILLS = Path(mkg_codex.__file__).parent / "payload" / "skills"
COMMANDS = REPO_ROOT / "harnesses" / "mkg-claude" / "mkg_claude" / "payload" / "commands"
SHARED = ["mkg-orchestrate", "mkg-review", "mkg-start", "sales-agent-demo"]


def _split(text: str) -> tuple[dict[str, str], str]:
    _, front, body = text.split("---\n", 2)
    fields = dict(line.split(": ", 1) for line in front.splitlines())
    return fields, body


def _in_codex_words(command: str) -> str:
    """A Claude Code command as a Codex skill says it: skills instead of slash commands and agents,
    and no ``$ARGUMENTS`` (a skill reads the task from the conversation)."""
    text = command.replace(
        "Work on this task as an orchestrator backed by MKG memory: $ARGUMENTS",
        "Work on the task the user gave as an orchestrator backed by MKG memory.",
    )
    text = re.sub(r"`/([a-z-]+)`", r"the `\1` skill", text)
    return text.replace("`mkg-recall` agent", "`mkg-recall` skill")


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", SHARED)
def test_a_skill_says_what_its_command_says(name: str) -> None:
    skill, skill_body = _split((SKILLS / name / "SKILL.md").read_text())
    command, command_body = _split((COMMANDS / f"{name}.md").read_text())
    assert skill["name"] == name
    assert skill["description"] == command["description"]
    assert "$ARGUMENTS" not in skill_body
    assert _words(skill_body) == _words(_in_codex_words(command_body))


def test_every_command_has_a_skill() -> None:
    assert sorted(p.stem for p in COMMANDS.glob("*.md")) == SHARED
    assert set(SHARED) <= {p.name for p in SKILLS.iterdir()}
