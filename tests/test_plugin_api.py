"""Provider and harness packages use only the declared plugin API of mkg_core.

The API is the modules in :data:`PLUGIN_API`, and of each only the names in its ``__all__``. A
package that needs something else asks for it to be added here, on purpose, rather than reaching
into the core's internals (the worker, the spool, recall), which may change without notice.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import mkg_core

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_API = frozenset(
    {
        "mkg_core",
        "mkg_core.cli",
        "mkg_core.contrib",
        "mkg_core.embedding",
        "mkg_core.entities",
        "mkg_core.envfiles",
        "mkg_core.errors",
        "mkg_core.events",
        "mkg_core.graph",
        "mkg_core.harness",
        "mkg_core.harness_install",
        "mkg_core.identity",
        "mkg_core.learnings",
        "mkg_core.lines",
        "mkg_core.runtime",
        "mkg_core.settings",
        "mkg_core.system_prompt",
        "mkg_core.tool_results",
        "mkg_core.transcripts",
    }
)
PACKAGES = sorted(
    folder
    for pattern in ("providers/*/mkg_*", "harnesses/*/mkg_*", "docs/examples/*/mkg_*", "import/*/mkg_*")
    for folder in ROOT.glob(pattern)
    if folder.is_dir()
)


#: Modules that are applications built on MKG rather than plugins: the sales agent's demo drives
#: the whole loop (the schema, the spool, the worker, readiness) the way ``mkg`` itself does.
APPLICATIONS = frozenset({"import/sales_agent/mkg_sales_agent/demo.py"})


def core_imports(source: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) for each import from mkg_core in a file; name None for ``import x``."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("mkg_core")
        ):
            found += [(node.lineno, node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.startswith("mkg_core")]
    return found


def test_every_api_module_declares_its_names() -> None:
    for name in PLUGIN_API:
        exported = getattr(importlib.import_module(name), "__all__", None)
        assert exported, f"{name} has no __all__"
        assert all(hasattr(importlib.import_module(name), n) for n in exported), name


def test_the_check_sees_the_packages_and_their_imports() -> None:
    names = {p.name for p in PACKAGES}
    assert {
        "mkg_claude",
        "mkg_codex",
        "mkg_gemini",
        "mkg_diffbot",
        "mkg_bigquery",
        "mkg_neocarta",
        "mkg_sales_agent",
    } <= names
    assert all((ROOT / path).is_file() for path in APPLICATIONS)
    sample = ROOT / "harnesses" / "mkg-gemini" / "mkg_gemini" / "plugin.py"
    assert ("mkg_core", "hookimpl") in {(module, name) for _, module, name in core_imports(sample)}


def outside_api(source: Path) -> list[str]:
    """The imports of ``source`` that reach past the plugin API."""
    outside = []
    for line, module, name in core_imports(source):
        where = f"{source.name}:{line}"
        submodule = module == "mkg_core" and name not in mkg_core.__all__  # from mkg_core import envfiles
        if name is None or submodule:
            target = module if name is None else f"mkg_core.{name}"
            if target not in PLUGIN_API:
                outside.append(f"{where}: {target}")
        elif module not in PLUGIN_API:
            outside.append(f"{where}: {module} (not a plugin API module)")
        elif name not in importlib.import_module(module).__all__:
            outside.append(f"{where}: {module}.{name} (not in its __all__)")
    return outside


def test_reaching_into_the_core_is_caught(tmp_path: Path) -> None:
    source = tmp_path / "plugin.py"
    source.write_text(
        "from mkg_core import hookimpl, spool\nimport mkg_core.worker\n"
        "from mkg_core.settings import Settings, _resolve_layers\nfrom mkg_core.recall import fuse\n"
    )
    assert outside_api(source) == [
        "plugin.py:1: mkg_core.spool",
        "plugin.py:2: mkg_core.worker",
        "plugin.py:3: mkg_core.settings._resolve_layers (not in its __all__)",
        "plugin.py:4: mkg_core.recall (not a plugin API module)",
    ]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_packages_import_only_the_plugin_api(package: Path) -> None:
    outside = [
        f"{source.parent.name}/{line}"
        for source in sorted(package.rglob("*.py"))
        if source.relative_to(ROOT).as_posix() not in APPLICATIONS
        for line in outside_api(source)
    ]
    assert not outside, "\n".join(outside)
