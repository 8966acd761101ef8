"""``mkg claude install`` and ``mkg claude uninstall``: MKG as a Claude Code plugin, in one step.

Install writes a local marketplace (``<data dir>/claude-marketplace``) holding the plugin: hooks
for every lifecycle event running the installed ``mkg-hook --client claude EVENT`` by absolute path,
``.mcp.json`` starting ``meta-knowledge-graph``, the slash commands and the ``mkg-recall`` agent.
Then it runs ``claude plugin marketplace add`` and ``claude plugin install meta-knowledge-graph@mkg``
(or prints them when the ``claude`` command is not found). Running it again refreshes everything,
so it is also how an upgrade reaches Claude Code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from mkg_core import envfiles
from mkg_core.cli import guarded
from mkg_core.events import EVENT_NAMES
from mkg_core.harness_install import (
    DRY_RUN,
    MARKETPLACE_NAME,
    PLUGIN_REF,
    harness_runner,
    package_files,
    plugin_payload,
    remove_folder,
    warm_mcp,
    write_or_list,
)

CLIENT = "claude"
#: Every event MKG knows that Claude Code fires.
EVENTS = tuple(name for name in EVENT_NAMES if name not in ("PermissionRequest", "PostCompact"))
#: SessionStart fires on a new session, a resume, /clear and after compaction: memory is wanted on each.
MATCHERS = {"SessionStart": "startup|resume|clear|compact", "PreToolUse": "*", "PostToolUse": "*",
            "PostToolUseFailure": "*"}  # fmt: skip


def marketplace_dir() -> Path:
    return envfiles.data_dir(os.environ) / "claude-marketplace"


def install(scope: str, dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    root = marketplace_dir()
    payload = plugin_payload(
        client=CLIENT, events=EVENTS, matchers=MATCHERS, extra=package_files("mkg_claude", "payload")
    )
    write_or_list(payload, root, dry_run=dry_run, echo=echo)
    run, claude = harness_runner("claude", "MKG_CLAUDE_BIN", dry_run=dry_run, echo=echo)
    # Adding a known marketplace again fails; updating it re-reads the refreshed folder.
    run([claude, "plugin", "marketplace", "add", str(root)], ok_if=("already",))
    run([claude, "plugin", "marketplace", "update", MARKETPLACE_NAME])
    # The harness keeps a copy per version; uninstalling first makes a reinstall copy the new payload.
    run([claude, "plugin", "uninstall", PLUGIN_REF, "--scope", scope], ok_if=("not installed", "not found"))
    run([claude, "plugin", "install", PLUGIN_REF, "--scope", scope])
    if not run.dry_run:
        warm_mcp(echo)
        echo(
            "MKG is installed in Claude Code: start a new session to use it (`mkg doctor` checks the setup)."
        )


def uninstall(scope: str, dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    run, claude = harness_runner("claude", "MKG_CLAUDE_BIN", dry_run=dry_run, echo=echo)
    run([claude, "plugin", "uninstall", PLUGIN_REF, "--scope", scope], ok_if=("not installed", "not found"))
    run([claude, "plugin", "marketplace", "remove", MARKETPLACE_NAME], ok_if=("not found", "no marketplace"))
    remove_folder(marketplace_dir(), dry_run=dry_run, echo=echo)


SCOPE = click.option(
    "--scope",
    type=click.Choice(["user", "project", "local"]),
    default="user",
    show_default=True,
    help="user: every project; project: this project's .claude/settings.json (shared); local: you, here.",
)


@click.group("claude")
def claude_group() -> None:
    """Install MKG into Claude Code as a plugin (hooks, MCP server, commands)."""


@claude_group.command("install")
@SCOPE
@DRY_RUN
def install_command(scope: str, dry_run: bool) -> None:
    """Write the MKG plugin to a local marketplace and install it with the claude CLI.

    Safe to run again: it refreshes the plugin, e.g. after upgrading MKG.
    """
    guarded(lambda: install(scope, dry_run))


@claude_group.command("uninstall")
@SCOPE
@DRY_RUN
def uninstall_command(scope: str, dry_run: bool) -> None:
    """Uninstall the MKG plugin from Claude Code and remove its local marketplace."""
    guarded(lambda: uninstall(scope, dry_run))


__all__ = ["claude_group", "install", "uninstall"]
