"""Golden tests: real payloads captured from the codex CLI parse into the expected HookEvents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mkg_codex.adapter import CodexAdapter

HERE = Path(__file__).parent
PAYLOADS = sorted((HERE / "payloads").glob("*.json"))
EXPECTED = json.loads((HERE / "expected_events.json").read_text())


def test_every_payload_has_an_expectation() -> None:
    assert sorted(p.stem for p in PAYLOADS) == sorted(EXPECTED)


@pytest.mark.parametrize("path", PAYLOADS, ids=lambda p: p.stem)
def test_golden_payload(path: Path) -> None:
    raw = path.read_bytes()
    event = CodexAdapter().parse(raw, path.stem)
    assert json.loads(json.dumps(event.summary())) == EXPECTED[path.stem]
    assert event.raw == json.loads(raw)
