"""The mkg-gemini plugin: registers the Gemini CLI adapter and ``mkg gemini``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import click

from mkg_core import hookimpl
from mkg_core.harness import HarnessAdapter

from .adapter import GeminiAdapter


@hookimpl
def mkg_register_harness_adapters() -> Iterable[HarnessAdapter]:
    """The Gemini CLI payload adapter."""
    return [GeminiAdapter()]


@hookimpl
def mkg_detect_harness(environ: Mapping[str, str]) -> str | None:
    """Gemini CLI sets GEMINI_PROJECT_DIR and GEMINI_SESSION_ID for its hooks."""
    if environ.get("GEMINI_PROJECT_DIR") or environ.get("GEMINI_SESSION_ID"):
        return "gemini"
    return None


@hookimpl
def mkg_register_commands(cli: click.Group) -> None:
    """``mkg gemini install`` and ``mkg gemini uninstall``."""
    from .install import gemini_group

    cli.add_command(gemini_group)
