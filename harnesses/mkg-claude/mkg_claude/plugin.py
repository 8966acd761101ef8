"""The mkg-claude plugin: registers the Claude Code adapter."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import click

from mkg_core import hookimpl
from mkg_core.harness import HarnessAdapter

from .adapter import ClaudeAdapter


@hookimpl
def mkg_register_harness_adapters() -> Iterable[HarnessAdapter]:
    """The Claude Code payload adapter."""
    return [ClaudeAdapter()]


@hookimpl
def mkg_detect_harness(environ: Mapping[str, str]) -> str | None:
    """Claude Code sets CLAUDECODE and CLAUDE_PROJECT_DIR for its hooks (Codex sets CODEX_*)."""
    if any(key.startswith("CODEX_") for key in environ):
        return None
    if environ.get("CLAUDECODE") or environ.get("CLAUDE_PROJECT_DIR"):
        return "claude"
    return None


@hookimpl
def mkg_register_commands(cli: click.Group) -> None:
    """``mkg claude install`` and ``mkg claude uninstall``."""
    from .install import claude_group

    cli.add_command(claude_group)
