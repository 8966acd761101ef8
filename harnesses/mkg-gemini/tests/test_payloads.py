"""Golden tests: real payloads captured from the gemini CLI parse into the expected HookEvents."""

from __future__ import annotations

from pathlib import Path

import pytest
from mkg_gemini.adapter import GeminiAdapter

from mkg_core.testing import check_golden_payload, golden_payloads

PAYLOADS, EXPECTED = golden_payloads(Path(__file__).parent)


def test_every_payload_has_an_expectation() -> None:
    assert sorted(p.stem for p in PAYLOADS) == sorted(EXPECTED)


@pytest.mark.parametrize("path", PAYLOADS, ids=lambda p: p.stem)
def test_golden_payload(path: Path) -> None:
    check_golden_payload(GeminiAdapter(), path, EXPECTED)
