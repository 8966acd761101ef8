"""Every hook is documented in its spec and in docs/hooks.md, and has a test of its own."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from mkg_core import hookspecs

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted(
    name for name, fn in vars(hookspecs).items() if name.startswith("mkg_") and inspect.isfunction(fn)
)
TEST_SOURCES = "\n".join(p.read_text() for p in ROOT.glob("tests/test_*.py"))


def test_there_are_hooks() -> None:
    assert len(SPECS) >= 10


@pytest.mark.parametrize("name", SPECS)
def test_spec_has_a_docstring(name: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc.splitlines()) >= 3, f"{name} needs a docstring saying when, params, returns and semantics"
    assert "versionadded" in doc


@pytest.mark.parametrize("name", SPECS)
def test_spec_is_documented(name: str, pm) -> None:
    argnames = getattr(pm.hook, name).spec.argnames
    signature = f"### `{name}({', '.join(argnames)})`"
    assert signature in (ROOT / "docs" / "hooks.md").read_text()


@pytest.mark.parametrize("name", SPECS)
def test_spec_has_a_test(name: str) -> None:
    assert re.search(rf"^def test_hook_{name}\(", TEST_SOURCES, re.M), f"write test_hook_{name}"


@pytest.mark.parametrize("name", SPECS)
def test_spec_body_is_only_a_docstring(name: str) -> None:
    source = inspect.getsource(getattr(hookspecs, name))
    body = source.split('"""')[-1].strip()
    assert body == "", f"{name} must have an empty body"
