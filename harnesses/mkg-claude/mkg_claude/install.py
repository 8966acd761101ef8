"""``mkg claude install`` and ``mkg claude uninstall``: MKG as a Claude Code plugin, in one step.

Install writes a local marketplace (``<data dir>/claude-marketplace``) holding the plugin: hooks
for every lifecycle event running the installed ``mkg-hook --client claude EVENT`` by absolute path,
the slash commands and the ``mkg-recall`` agent. Then it runs ``claude plugin marketplace add`` and
``claude plugin install meta-knowledge-graph@mkg``, and registers the MCP server
``meta-knowledge-graph`` with ``claude mcp add-json`` in the same scope (or prints the commands when
the ``claude`` command is not found). Running it again refreshes everything, so it is also how an
upgrade reaches Claude Code.

The server is registered on its own rather than in the plugin's ``.mcp.json`` because Claude Code
names a plugin's tools ``mcp__plugin_<plugin>_<server>__<tool>``: with both names
``meta-knowledge-graph`` that passes the 64 characters a tool name may have. Registered on its own
its tools are ``mcp__meta-knowledge-graph__<tool>``. An older install's server ``mkg`` lived in the
plugin, so refreshing the plugin removes it.
"""

from __future__ import annotations

import json
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
    MCP_SERVER_NAME,
    PLUGIN_REF,
    executable,
    harness_runner,
    mcp_server,
    package_files,
    pinned_env,
    plugin_payload,
    remove_folder,
    warm_mcp,
    write_or_list,
)

CLIENT = "claude"
#: Every event MKG knows that Claude Code fires.
EVENTS = tuple(name for name in EVENT_NAMES if name not in ("PermissionRequest", "PostCompact"))
#: What ``claude mcp remove`` says when there is nothing to remove.
NO_SERVER = ("no mcp server", "not found")
#: SessionStart fires on a new session, a resume, /clear and after compaction: memory is wanted on each.
MATCHERS = {"SessionStart": "startup|resume|clear|compact", "PreToolUse": "*", "PostToolUse": "*",
            "PostToolUseFailure": "*"}  # fmt: skip


def marketplace_dir() -> Path:
    return envfiles.data_dir(os.environ) / "claude-marketplace"


def install(scope: str, dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    root = marketplace_dir()
    payload = plugin_payload(
        client=CLIENT,
        events=EVENTS,
        matchers=MATCHERS,
        extra=package_files("mkg_claude", "payload"),
        with_mcp=False,
    )
    write_or_list(payload, root, dry_run=dry_run, echo=echo)
    run, claude = harness_runner("claude", "MKG_CLAUDE_BIN", dry_run=dry_run, echo=echo)
    # Adding a known marketplace again fails; updating it re-reads the refreshed folder.
    run([claude, "plugin", "marketplace", "add", str(root)], ok_if=("already",))
    run([claude, "plugin", "marketplace", "update", MARKETPLACE_NAME])
    # The harness keeps a copy per version; uninstalling first makes a reinstall copy the new payload.
    run([claude, "plugin", "uninstall", PLUGIN_REF, "--scope", scope], ok_if=("not installed", "not found"))
    run([claude, "plugin", "install", PLUGIN_REF, "--scope", scope])
    server = {"type": "stdio", **mcp_server(executable("meta-knowledge-graph"), CLIENT, pinned_env())}
    run([claude, "mcp", "remove", "--scope", scope, MCP_SERVER_NAME], ok_if=NO_SERVER)
    run([claude, "mcp", "add-json", "--scope", scope, MCP_SERVER_NAME, json.dumps(server)])
    if not run.dry_run:
        warm_mcp(echo)
        echo(
            "MKG is installed in Claude Code: start a new session to use it (`mkg doctor` checks the setup)."
        )


def uninstall(scope: str, dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    run, claude = harness_runner("claude", "MKG_CLAUDE_BIN", dry_run=dry_run, echo=echo)
    run([claude, "plugin", "uninstall", PLUGIN_REF, "--scope", scope], ok_if=("not installed", "not found"))
    run([claude, "mcp", "remove", "--scope", scope, MCP_SERVER_NAME], ok_if=NO_SERVER)
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
    """Install MKG into Claude Code: a plugin (hooks, commands, agent) and the MCP server."""


@claude_group.command("install")
@SCOPE
@DRY_RUN
def install_command(scope: str, dry_run: bool) -> None:
    """Write the MKG plugin to a local marketplace, install it and register its MCP server with the
    claude CLI.

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
