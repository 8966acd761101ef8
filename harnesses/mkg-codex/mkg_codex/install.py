"""``mkg codex install`` and ``mkg codex uninstall``: MKG as a Codex plugin, in one step.

Install writes a local marketplace (``<data dir>/codex-marketplace``) holding the plugin: hooks
running the installed ``mkg-hook --client codex EVENT`` by absolute path, ``.mcp.json`` starting
``meta-knowledge-graph`` (Codex offers its tools as the ``mcp__meta_knowledge_graph`` namespace) and
skills matching the Claude Code commands. Then it runs ``codex plugin marketplace add`` and
``codex plugin add``, and records trust for the plugin's hooks the way Codex does
(``[hooks.state]`` entries with the hooks' current hashes in ``config.toml``); Codex skips
untrusted hooks silently.

Codex has no PostToolUseFailure (a failed MCP call is a PostToolUse with ``isError``) and caps a
SessionEnd hook at 3 s; MKG's hook only appends to the local spool there, and the work it starts
(extraction, consolidation) runs in the worker, so neither matters.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from mkg_core import envfiles
from mkg_core.cli import App, guarded, pass_app
from mkg_core.harness_install import (
    DRY_RUN,
    MARKETPLACE_NAME,
    MCP_SERVER_NAME,
    PLUGIN_NAME,
    PLUGIN_REF,
    InstallError,
    executable,
    harness_runner,
    package_files,
    pinned_env,
    plugin_payload,
    remove_folder,
    tools_needing_approval,
    warm_mcp,
    write_or_list,
)
from mkg_core.lines import LineReader

CLIENT = "codex"
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "Stop",
    "SessionEnd",
)
MATCHERS = {"SessionStart": "startup|resume|clear|compact", "PreToolUse": ".*", "PostToolUse": ".*"}
#: Codex gives an MCP server 10 s to start by default; a busy machine can need more.
STARTUP_TIMEOUT = 30


def mcp_extra(approvals: Iterable[str]) -> dict[str, object]:
    """The Codex keys of MKG's MCP server entry: the start-up timeout, and per-tool approval.

    Codex 0.171's ``approval_mode``: ``prompt`` asks before every call (in ``codex exec``, which
    cannot ask, the call fails and the model is told so); ``approve`` never asks. The server's
    default is ``approve``, because Codex's own default asks for every tool not marked read-only;
    the tools that need approval (``ToolSpec.needs_approval``) get ``prompt``. A tool named here
    that the server does not offer (a provider not configured) is ignored by Codex.
    """
    return {
        "startup_timeout_sec": STARTUP_TIMEOUT,
        "default_tools_approval_mode": "approve",
        "tools": {name: {"approval_mode": "prompt"} for name in approvals},
    }


TRUST_BEGIN = "# -- hook trust written by `mkg codex install` (begin) --"
TRUST_END = "# -- hook trust written by `mkg codex install` (end) --"


def marketplace_dir() -> Path:
    return envfiles.data_dir(os.environ) / "codex-marketplace"


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


# -- hook trust ----------------------------------------------------------------------------------------


def _rpc(codex: str, cwd: Path, timeout: float = 60) -> list[dict[str, Any]]:
    """The hooks Codex sees for ``cwd``, from ``codex app-server`` (JSON-RPC over stdio)."""
    proc = subprocess.Popen(
        [codex, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"clientInfo": {"name": "mkg", "title": "MKG", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
        ):  # fmt: skip
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
        deadline = time.monotonic() + timeout
        lines = LineReader(proc.stdout)
        while True:
            try:
                line = lines.readline(deadline)
            except EOFError:
                break
            if line is None:
                break
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if reply.get("id") == 2:
                if "error" in reply:
                    raise InstallError(f"codex app-server refused hooks/list: {reply['error']}")
                return _hook_entries(reply.get("result"))
        raise InstallError("codex app-server did not list the hooks in time")
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def _hook_entries(result: Any) -> list[dict[str, Any]]:
    """Every hook object in a hooks/list result, wherever the protocol nests them."""
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "sourcePath" in value and ("currentHash" in value or "hash" in value):
                found.append(value)
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(result)
    return found


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def trust_block(hooks: list[dict[str, Any]], marketplace: Path) -> str:
    """``[hooks.state."<source>:<event>:<i>:<j>"]`` entries for the MKG plugin's hooks only."""
    lines = [TRUST_BEGIN]
    for hook in hooks:
        source = str(hook.get("sourcePath", ""))
        if PLUGIN_NAME not in source and str(marketplace) not in source:
            continue
        key = hook.get("key")
        if not isinstance(key, str):
            event = _snake(str(hook.get("eventName") or hook.get("event") or ""))
            key = f"{source}:{event}:{hook.get('groupIndex', 0)}:{hook.get('handlerIndex', 0)}"
        # hooks/list reports "<hash of the hook>/<hash of its context>"; trust records the first part
        digest = str(hook.get("currentHash") or hook.get("hash") or "").split("/")[0]
        lines.append(f"[hooks.state.{json.dumps(key)}]")
        lines.append(f"trusted_hash = {json.dumps(digest)}")
    lines.append(TRUST_END)
    return "\n".join(lines) + "\n"


def write_trust(config: Path, block: str | None) -> None:
    """Replace MKG's trust block in ``config.toml`` (tables go at the end, after top-level keys)."""
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    pattern = re.compile(re.escape(TRUST_BEGIN) + r".*?" + re.escape(TRUST_END) + r"\n?", re.DOTALL)
    text = pattern.sub("", text).rstrip("\n")
    if block:
        text = (text + "\n\n" if text else "") + block
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")


# -- install and uninstall -----------------------------------------------------------------------------


def install(dry_run: bool, approvals: Iterable[str] = (), echo: Callable[[str], None] = click.echo) -> None:
    root = marketplace_dir()
    payload = plugin_payload(
        client=CLIENT,
        events=EVENTS,
        matchers=MATCHERS,
        extra=package_files("mkg_codex", "payload"),
        mcp_extra=mcp_extra(approvals),
    )
    write_or_list(payload, root, dry_run=dry_run, echo=echo)
    run, codex = harness_runner("codex", "MKG_CODEX_BIN", dry_run=dry_run, echo=echo)
    run([codex, "plugin", "remove", PLUGIN_REF], ok_if=("not installed", "not found", "no plugin", "unknown"))
    run([codex, "plugin", "marketplace", "add", str(root)], ok_if=("already",))
    run([codex, "plugin", "add", PLUGIN_REF])
    if run.dry_run:
        echo("then trust the plugin's hooks: Codex asks the first time, or run `mkg codex install` again")
        return
    hooks = _rpc(codex, Path.cwd())
    block = trust_block(hooks, root)
    trusted = block.count("trusted_hash")
    if trusted == 0:
        raise InstallError(
            "Codex listed none of MKG's hooks, so their trust could not be recorded; approve them when "
            "Codex asks, or run `codex exec --dangerously-bypass-hook-trust` once to check they fire"
        )
    write_trust(codex_home() / "config.toml", block)
    echo(f"recorded trust for {trusted} hooks in {codex_home() / 'config.toml'}")
    warm_mcp(echo)
    echo("MKG is installed in Codex: start a new session to use it (`mkg doctor` checks the setup).")


def uninstall(dry_run: bool, echo: Callable[[str], None] = click.echo) -> None:
    run, codex = harness_runner("codex", "MKG_CODEX_BIN", dry_run=dry_run, echo=echo)
    run([codex, "plugin", "remove", PLUGIN_REF], ok_if=("not installed", "not found", "no plugin", "unknown"))
    run(
        [codex, "plugin", "marketplace", "remove", MARKETPLACE_NAME],
        ok_if=("not found", "no marketplace", "unknown"),
    )
    config = codex_home() / "config.toml"
    if not dry_run:
        write_trust(config, None)
    remove_folder(marketplace_dir(), dry_run=dry_run, echo=echo, also=f" and MKG's hook trust from {config}")


@click.group("codex")
def codex_group() -> None:
    """Install MKG into Codex as a plugin (hooks, MCP server, skills)."""


@codex_group.command("install")
@DRY_RUN
@pass_app
def install_command(app: App, dry_run: bool) -> None:
    """Write the MKG plugin to a local marketplace, add it with the codex CLI and trust its hooks.

    Codex asks before each call of the tools that write memory or reach a warehouse
    (project_add_learning, project_resolve_learning, bigquery_execute_query). Safe to run again: it
    refreshes the plugin and its hook trust, e.g. after upgrading MKG or adding a provider.
    """
    guarded(lambda: install(dry_run, tools_needing_approval(app.host, app.settings())))


def mcp_config_toml(approvals: Iterable[str] = ()) -> str:
    """The ``[mcp_servers.meta-knowledge-graph]`` table of ``config.toml`` that starts MKG's MCP server,
    with a ``tools.<tool>`` table for each tool Codex asks about first."""
    env = {**pinned_env(), "MKG_CLIENT": CLIENT}
    pairs = ", ".join(f"{key} = {json.dumps(value)}" for key, value in env.items())
    command = json.dumps(executable("meta-knowledge-graph"))
    extra = mcp_extra(approvals)
    table = (
        f"[mcp_servers.{MCP_SERVER_NAME}]\ncommand = {command}\nargs = []\n"
        f"startup_timeout_sec = {extra['startup_timeout_sec']}\n"
        f'default_tools_approval_mode = "{extra["default_tools_approval_mode"]}"\nenv = {{ {pairs} }}\n'
    )
    for name in approvals:
        table += f'\n[mcp_servers.{MCP_SERVER_NAME}.tools.{name}]\napproval_mode = "prompt"\n'
    return table


@codex_group.command("mcp-config")
@pass_app
def mcp_config_command(app: App) -> None:
    """Print the config.toml table that starts MKG's MCP server (the plugin does this already)."""
    guarded(lambda: click.echo(mcp_config_toml(tools_needing_approval(app.host, app.settings())), nl=False))


@codex_group.command("uninstall")
@DRY_RUN
def uninstall_command(dry_run: bool) -> None:
    """Remove the MKG plugin, its marketplace and its hook trust from Codex."""
    guarded(lambda: uninstall(dry_run))
