"""``mkg gemini install`` and ``mkg gemini uninstall``: MKG as a Gemini CLI extension, in one step.

Install writes an extension folder (``<data dir>/gemini-extension/meta-knowledge-graph``):
``gemini-extension.json`` starting ``meta-knowledge-graph`` as the MCP server of that name (the
model sees its tools as ``mcp_meta-knowledge-graph_<tool>``), and ``hooks/hooks.json`` running the installed
``mkg-hook --client gemini EVENT`` by absolute path for each Gemini event, with MKG's name for it
as ``EVENT``. Then it runs
``gemini extensions link <folder> --consent`` from that folder (``--consent`` also trusts the
folder it runs in, so never the user's). An extension is one unit for the user to list, disable or
uninstall, and it never rewrites their ``settings.json``.

Gemini CLI lets no extension allow its own tools: interactive sessions ask before each MKG tool call
(until the user picks "always allow"), and headless runs (``gemini -p``) offer them only when the
user allows them, with ``--allowed-tools mcp_meta-knowledge-graph_<tool>`` or a rule in
``~/.gemini/policies/``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from mkg_core import envfiles
from mkg_core.cli import guarded
from mkg_core.harness_install import (
    DESCRIPTION,
    DRY_RUN,
    MCP_SERVER_NAME,
    PLUGIN_NAME,
    Payload,
    executable,
    harness_runner,
    hook_command,
    hook_env,
    hook_timeout,
    pinned_env,
    remove_folder,
    version,
    warm_mcp,
    write_or_list,
)

from .adapter import NATIVE_EVENTS

CLIENT = "gemini"
#: Gemini CLI gives an MCP server this long (ms) to start and to answer each call.
MCP_TIMEOUT_MS = 60_000


def extension_dir() -> Path:
    return envfiles.data_dir(os.environ) / "gemini-extension" / PLUGIN_NAME


def extension_payload(hook: str | None = None, server: str | None = None) -> Payload:
    """The extension folder: its manifest with the MCP server, and the hooks."""
    hook = hook or executable("mkg-hook")
    pinned = hook_env()
    timeout_ms = hook_timeout(pinned) * 1000
    hooks = {
        native: [
            {
                "hooks": [
                    {
                        "name": f"mkg-{native}",
                        "type": "command",
                        "command": hook_command(hook, CLIENT, event, pinned),
                        "timeout": timeout_ms,
                    }
                ]
            }
        ]
        for native, event in NATIVE_EVENTS.items()
    }
    payload = Payload()
    payload.add_json(
        "gemini-extension.json",
        {
            "name": PLUGIN_NAME,
            "version": version(),
            "description": DESCRIPTION,
            "mcpServers": {
                MCP_SERVER_NAME: {
                    "command": server or executable("meta-knowledge-graph"),
                    "args": [],
                    "env": {**pinned_env(), "MKG_CLIENT": CLIENT},
                    "timeout": MCP_TIMEOUT_MS,
                }
            },
        },
    )
    payload.add_json("hooks/hooks.json", {"hooks": hooks})
    return payload


def install(dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    root = extension_dir()
    write_or_list(extension_payload(), root, dry_run=dry_run, echo=echo)
    run, gemini = harness_runner("gemini", "MKG_GEMINI_BIN", dry_run=dry_run, echo=echo)
    run(
        [gemini, "extensions", "uninstall", PLUGIN_NAME], ok_if=("not found", "not installed", "no extension")
    )
    run([gemini, "extensions", "link", str(root), "--consent"], cwd=root if root.exists() else None)
    if not run.dry_run:
        warm_mcp(echo)
        echo("MKG is installed in Gemini CLI: start a new session to use it (`mkg doctor` checks the setup).")


def uninstall(dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    run, gemini = harness_runner("gemini", "MKG_GEMINI_BIN", dry_run=dry_run, echo=echo)
    run(
        [gemini, "extensions", "uninstall", PLUGIN_NAME], ok_if=("not found", "not installed", "no extension")
    )
    remove_folder(extension_dir(), dry_run=dry_run, echo=echo)


@click.group("gemini")
def gemini_group() -> None:
    """Install MKG into Gemini CLI as an extension (hooks and the MCP server)."""


@gemini_group.command("install")
@DRY_RUN
def install_command(dry_run: bool) -> None:
    """Write the MKG extension and link it with the gemini CLI.

    Safe to run again: it refreshes the extension, e.g. after upgrading MKG.
    """
    guarded(lambda: install(dry_run))


@gemini_group.command("uninstall")
@DRY_RUN
def uninstall_command(dry_run: bool) -> None:
    """Uninstall the MKG extension from Gemini CLI and remove its folder."""
    guarded(lambda: uninstall(dry_run))


__all__ = ["extension_payload", "gemini_group", "install", "uninstall"]
