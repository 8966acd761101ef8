"""What the harness installers share: the plugin payload, running the harness CLI, removing the folder.

Both harnesses load the same plugin layout (``.claude-plugin/plugin.json``, ``hooks/hooks.json``,
``.mcp.json``, commands, agents, skills) from a local marketplace folder
(``.claude-plugin/marketplace.json``). The harness copies the plugin into its own cache, so the
payload names the installed ``mkg-hook`` and ``meta-knowledge-graph`` by absolute path, resolved
at install time: nothing depends on PATH or on a tool like ``uv`` when a hook runs.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import runtime
from .errors import MkgError

if TYPE_CHECKING:
    from .host import PluginHost
    from .settings import Settings

__all__ = [
    "DESCRIPTION",
    "DRY_RUN",
    "MARKETPLACE_NAME",
    "MCP_SERVER_NAME",
    "PLUGIN_NAME",
    "PLUGIN_REF",
    "InstallError",
    "Payload",
    "Runner",
    "executable",
    "harness_runner",
    "hook_command",
    "hook_env",
    "hook_timeout",
    "hooks_config",
    "marketplace_manifest",
    "mcp_config",
    "mcp_server",
    "package_files",
    "pinned_env",
    "plugin_manifest",
    "plugin_payload",
    "remove_folder",
    "tools_needing_approval",
    "version",
    "warm_mcp",
    "write_or_list",
]

PLUGIN_NAME = "meta-knowledge-graph"
MARKETPLACE_NAME = "mkg"
#: The MCP server's name in every harness: its tools are ``mcp__meta-knowledge-graph__<tool>``
#: (Claude Code, Codex) or ``mcp_meta-knowledge-graph_<tool>`` (Gemini CLI).
MCP_SERVER_NAME = "meta-knowledge-graph"
PLUGIN_REF = f"{PLUGIN_NAME}@{MARKETPLACE_NAME}"
DESCRIPTION = "Graph memory for coding agents: captures every session, recalls what matters (MKG)"
#: Where MKG finds its settings and state. A harness may start hooks and MCP servers with an
#: environment of its own (Codex passes almost nothing), so values set when installing are written
#: into the plugin; unset ones keep their defaults (which follow the user's home folder).
PINNED = ("MKG_CONFIG_DIR", "MKG_STATE_DIR", "MKG_ENV_FILE", "MKG_DATA_DIR")
#: The hooks' own deadlines, pinned into the hook commands the same way (a slow machine may want
#: longer ones; see `mkg-hook --help`).
HOOK_PINNED = (
    "MKG_HOOK_DEADLINE_SESSION_START",
    "MKG_HOOK_DEADLINE_PROMPT",
    "MKG_HOOK_DEADLINE_TOOL",
    "MKG_HOOK_DEADLINE_CAPTURE",
)
#: Seconds a harness lets one hook run. The hook itself answers within its own, shorter deadlines
#: (MKG_HOOK_DEADLINE_*), so this is only a backstop.
HOOK_TIMEOUT = 10


def version() -> str:
    """The installed mkg-core version (what a plugin manifest says)."""
    from importlib import metadata

    try:
        return metadata.version("mkg-core")
    except metadata.PackageNotFoundError:
        return "0.0.0"


class InstallError(MkgError):
    """The plugin cannot be installed as asked; the message says what to do."""


def executable(name: str) -> str:
    """The absolute path of an installed MKG command: next to this Python first, else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found:
        return str(Path(found).resolve())
    raise InstallError(f"the {name} command is not installed (pip install mkg-core)")


def pinned_env(environ: Mapping[str, str] | None = None, names: Iterable[str] = PINNED) -> dict[str, str]:
    """The :data:`PINNED` variables (or ``names``) set in ``environ`` (default: this process's)."""
    env = os.environ if environ is None else environ
    return {key: env[key] for key in names if env.get(key)}


def hook_timeout(pinned: Mapping[str, str]) -> int:
    """Seconds the harness lets a hook run: :data:`HOOK_TIMEOUT`, or more when a pinned deadline
    is longer (the hook keeps its own deadline; this is only the backstop)."""
    longest = 0.0
    for key in HOOK_PINNED:
        try:
            longest = max(longest, float(pinned.get(key) or 0))
        except ValueError:
            continue
    return max(HOOK_TIMEOUT, int(longest) + 2)


def hook_command(hook: str, client: str, event: str, pinned: Mapping[str, str] | None = None) -> str:
    """The shell command a harness runs for ``event``: ``mkg-hook --client CLIENT EVENT`` by
    absolute path, through ``/usr/bin/env`` with the pinned variables when there are any."""
    prefix = ""
    if pinned:
        prefix = "/usr/bin/env " + " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(pinned.items())) + " "
    return f"{prefix}{shlex.quote(hook)} --client {client} {event}"


def hook_env() -> dict[str, str]:
    """What the hook commands pin: MKG's folders and the hooks' deadlines, as set now."""
    return {**pinned_env(), **pinned_env(names=HOOK_PINNED)}


def hooks_config(
    hook: str,
    client: str,
    events: Iterable[str],
    matchers: Mapping[str, str],
    pinned: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """``hooks/hooks.json``: every event runs :func:`hook_command`."""
    config: dict[str, list[dict[str, object]]] = {}
    for event in events:
        entry: dict[str, object] = {
            "hooks": [
                {
                    "type": "command",
                    "command": hook_command(hook, client, event, pinned),
                    "timeout": hook_timeout(pinned or {}),
                }
            ]
        }
        if event in matchers:
            entry = {"matcher": matchers[event], **entry}
        config[event] = [entry]
    return {"description": "MKG captures every lifecycle event and injects memory", "hooks": config}


def mcp_config(
    server: str,
    client: str,
    pinned: Mapping[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """``.mcp.json``: the MKG MCP server over stdio (``extra``: harness-specific keys)."""
    return {"mcpServers": {MCP_SERVER_NAME: mcp_server(server, client, pinned, extra)}}


def mcp_server(
    server: str,
    client: str,
    pinned: Mapping[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The MKG MCP server's entry (command, arguments, environment) in a harness's configuration."""
    env = {**(pinned or {}), "MKG_CLIENT": client}
    return {"command": server, "args": [], "env": env, **(extra or {})}


def tools_needing_approval(host: PluginHost, settings: Settings) -> list[str]:
    """The MCP tools whose every call the user approves first, where the harness can ask
    (:attr:`~mkg_core.contrib.ToolSpec.needs_approval`), of every installed plugin, mounted or not."""
    return sorted(
        tool.name for group in host.tool_groups(settings) for tool in group.tools if tool.needs_approval
    )


def plugin_manifest() -> dict[str, object]:
    return {
        "name": PLUGIN_NAME,
        "version": version(),
        "description": DESCRIPTION,
        "author": {"name": "Meta Knowledge Graph"},
        "license": "Apache-2.0",
        "keywords": ["memory", "knowledge-graph", "neo4j", "mcp"],
    }


def marketplace_manifest() -> dict[str, object]:
    return {
        "name": MARKETPLACE_NAME,
        "owner": {"name": "Meta Knowledge Graph"},
        "metadata": {"description": "The local MKG plugin, written by `mkg <harness> install`"},
        "plugins": [
            {
                "name": PLUGIN_NAME,
                "source": f"./{PLUGIN_NAME}",
                "description": DESCRIPTION,
                "version": version(),
            }
        ],
    }


def package_files(package: str, folder: str) -> dict[str, str]:
    """Text files shipped as package data under ``folder``, by path relative to it."""
    root = resources.files(package).joinpath(folder)
    files: dict[str, str] = {}

    def walk(node: resources.abc.Traversable, prefix: str) -> None:
        for child in node.iterdir():
            name = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, name + "/")
            elif child.name.endswith((".md", ".json", ".toml")):
                files[name] = child.read_text(encoding="utf-8")

    walk(root, "")
    return files


@dataclass
class Payload:
    """A marketplace folder: relative path -> text."""

    files: dict[str, str] = field(default_factory=dict)

    def add_json(self, path: str, value: object) -> None:
        self.files[path] = json.dumps(value, indent=2) + "\n"

    def write(self, root: Path) -> None:
        """Replace ``root`` with exactly these files (a stale file of an older version goes)."""
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
        try:
            for relative, text in sorted(self.files.items()):
                target = staging / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            staging.chmod(0o755)
            if root.exists():
                shutil.rmtree(root)
            staging.rename(root)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)


def plugin_payload(
    *,
    client: str,
    events: Iterable[str],
    matchers: Mapping[str, str],
    extra: Mapping[str, str],
    mcp_extra: Mapping[str, object] | None = None,
    hook: str | None = None,
    server: str | None = None,
    with_mcp: bool = True,
) -> Payload:
    """The marketplace with the one MKG plugin in it, for ``client``; ``with_mcp=False`` leaves
    the MCP server out (a harness that registers it on its own)."""
    payload = Payload()
    payload.add_json(".claude-plugin/marketplace.json", marketplace_manifest())
    base = f"{PLUGIN_NAME}/"
    payload.add_json(base + ".claude-plugin/plugin.json", plugin_manifest())
    pinned = pinned_env()
    hook = hook or executable("mkg-hook")
    payload.add_json(base + "hooks/hooks.json", hooks_config(hook, client, events, matchers, hook_env()))
    if with_mcp:
        payload.add_json(
            base + ".mcp.json",
            mcp_config(server or executable("meta-knowledge-graph"), client, pinned, mcp_extra),
        )
    for relative, text in extra.items():
        payload.files[base + relative] = text
    return payload


@dataclass
class Runner:
    """Runs (or, dry, only prints) the harness CLI commands of an install."""

    dry_run: bool = False
    echo: Callable[[str], None] = print
    env: Mapping[str, str] | None = None

    def __call__(
        self, argv: list[str], *, ok_if: tuple[str, ...] = (), cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str] | None:
        self.echo(("$ " if cwd is None else f"$ (cd {shlex.quote(str(cwd))}) ") + shlex.join(argv))
        if self.dry_run:
            return None
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=dict(self.env or os.environ),
            timeout=300,
            check=False,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
        output = (result.stdout + result.stderr).strip()
        if result.returncode != 0 and not any(marker in output.lower() for marker in ok_if):
            raise InstallError(f"`{shlex.join(argv)}` failed ({result.returncode}): {output[-2000:]}")
        return result


def write_or_list(payload: Payload, root: Path, *, dry_run: bool, echo: Callable[[str], None]) -> None:
    """Write the marketplace, or (dry) list what would be written."""
    if dry_run:
        echo(f"would write the plugin to {root}:")
        for relative in sorted(payload.files):
            echo(f"  {relative}")
        return
    payload.write(root)
    echo(f"wrote the plugin to {root}")


def remove_folder(root: Path, *, dry_run: bool, echo: Callable[[str], None], also: str = "") -> None:
    """Remove what install wrote at ``root`` (dry: say so; ``also`` names anything else removed)."""
    if dry_run:
        echo(f"would remove {root}{also}")
    elif root.exists():
        shutil.rmtree(root)
        echo(f"removed {root}")


#: The ``--dry-run`` option of every ``mkg <harness> install`` and ``uninstall``.
DRY_RUN = click.option("--dry-run", is_flag=True, help="Show what would be written and run; change nothing.")


def warm_mcp(echo: Callable[[str], None], timeout: float = 120) -> bool:
    """Start MKG's MCP server once (``initialize`` and ``tools/list``): it starts the worker and keeps
    the answers, so a harness's first session gets the tools at once. Return whether it answered."""
    from . import mcp_proxy

    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "mkg", "version": "1"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    if not mcp_proxy.worker_possible(runtime.Paths.from_env()):
        return False  # MKG_WORKER_AUTOSTART=0 and no worker: nothing would be kept
    try:
        done = subprocess.run(
            [executable("meta-knowledge-graph")],
            input="".join(json.dumps(m) + "\n" for m in messages),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired, InstallError) as exc:
        echo(f"note: MKG's MCP server did not answer in time ({exc}); its first start will be slower")
        return False
    answered = '"id":2' in done.stdout.replace(" ", "") and '"tools"' in done.stdout
    if answered:
        echo("MKG's MCP server answered from the worker (its tools are kept for a quick first start)")
    else:
        echo(f"note: MKG's MCP server did not answer: {done.stderr.strip()[-300:] or 'no reply'}")
    return answered


def harness_runner(
    name: str, variable: str, *, dry_run: bool, echo: Callable[[str], None]
) -> tuple[Runner, str]:
    """A runner for the harness CLI ``name`` (``$variable``, else on PATH) and the command to run.

    Without the CLI the runner only prints, so the user sees exactly what to run.
    """
    command = os.environ.get(variable) or shutil.which(name)
    if command is None:
        echo(f"the {name} command was not found; run these to finish (or set {variable}):")
    return Runner(dry_run=dry_run or command is None, echo=echo), command or name
