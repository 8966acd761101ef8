"""The mkg-codex plugin: registers the Codex adapter."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import click

from mkg_core import hookimpl
from mkg_core.harness import HarnessAdapter

from .adapter import CodexAdapter

_CODEX_MARKERS = ("CODEX_HOME", "CODEX_MANAGED_BY_NPM", "CODEX_PLUGIN_ROOT", "CODEX_WORKSPACE_ROOT")


@hookimpl
def mkg_register_harness_adapters() -> Iterable[HarnessAdapter]:
    """The Codex payload adapter."""
    return [CodexAdapter()]


@hookimpl
def mkg_detect_harness(environ: Mapping[str, str]) -> str | None:
    """Codex exports CODEX_HOME (and CODEX_MANAGED_BY_NPM) to its hooks."""
    return "codex" if any(environ.get(key) for key in _CODEX_MARKERS) else None


@hookimpl
def mkg_register_commands(cli: click.Group) -> None:
    """``mkg codex install`` and ``mkg codex uninstall``."""
    from .install import codex_group

    cli.add_command(codex_group)
