"""Building the plugin manager: built-ins first, then installed plugins, filtered by the operator.

Nothing happens at import. :func:`make_plugin_manager` is called by the composition roots only
(the ``mkg`` CLI, the MCP server factory and the worker); everything else receives a
:class:`~mkg_core.host.PluginHost`.

Operator controls (environment):

``MKG_LOAD_PLUGINS``
    Unset: load every installed plugin. Empty: load none. ``a,b``: load exactly these, by
    entry-point name (``claude``) or distribution name (``mkg-claude``).
``MKG_DISABLE_PLUGINS``
    Comma-separated entry-point or distribution names never to load.
``MKG_PLUGINS``
    Comma-separated importable module names registered as plugins after the installed ones: a
    local plugin that is not packaged (the module must be on ``sys.path``/``PYTHONPATH``).
``MKG_TRACE_PLUGINS``
    Any non-empty value traces every hook call to stderr.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError

ENTRY_POINT_GROUP = "mkg"

#: The core's own behaviour, registered before any installed plugin (so called last).
DEFAULT_PLUGINS: tuple[str, ...] = ("mkg_core.builtin.core",)


def make_plugin_manager(
    *, load_entrypoints: bool = True, environ: Mapping[str, str] | None = None
) -> pluggy.PluginManager:
    """Return a fresh, checked plugin manager."""
    env = dict(environ) if environ is not None else _process_environ()
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for modname in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(modname), name=modname)
    blocked = _names(env.get("MKG_DISABLE_PLUGINS"))
    if load_entrypoints:
        _load_entrypoints(pm, env.get("MKG_LOAD_PLUGINS"), blocked)
    for modname in _ordered_names(env.get("MKG_PLUGINS")):
        if pm.has_plugin(modname) or modname in blocked:
            continue
        try:
            module = importlib.import_module(modname)
        except ImportError as exc:
            raise PluginError(f"MKG_PLUGINS names {modname!r}, which cannot be imported: {exc}") from exc
        pm.register(module, name=modname)
    if env.get("MKG_TRACE_PLUGINS"):
        pm.add_hookcall_monitoring(_trace_before, _trace_after)
    pm.check_pending()
    return pm


def _process_environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def _ordered_names(value: str | None) -> list[str]:
    return list(dict.fromkeys(part.strip() for part in (value or "").split(",") if part.strip()))


def _names(value: str | None) -> set[str]:
    return {part.strip() for part in (value or "").split(",") if part.strip()}


def _entry_point_names(ep: importlib.metadata.EntryPoint) -> set[str]:
    names = {ep.name}
    dist = getattr(ep, "dist", None)
    if dist is not None and dist.name:
        names.add(dist.name)
        names.add(dist.name.replace("_", "-").lower())
    return names


def _load_entrypoints(pm: pluggy.PluginManager, allow: str | None, blocked: set[str]) -> None:
    wanted = None if allow is None else _names(allow)
    matched: set[str] = set()
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        names = _entry_point_names(ep)
        if wanted is not None:
            hits = names & wanted
            if not hits:
                continue
            matched |= hits
        if names & blocked:
            pm.set_blocked(ep.name)
            continue
        # Through pluggy, so the distribution is recorded for `mkg plugins`.
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=ep.name)
    if wanted:
        missing = sorted(wanted - matched)
        if missing:
            installed = sorted(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
            warnings.warn(
                f"MKG_LOAD_PLUGINS names {', '.join(missing)}, which matched no installed plugin "
                f"(installed: {', '.join(installed) or 'none'})",
                RuntimeWarning,
                stacklevel=3,
            )


def _trace_before(hook_name: str, hook_impls: Any, kwargs: Mapping[str, Any]) -> None:
    plugins = ", ".join(impl.plugin_name for impl in hook_impls)
    print(f"[mkg trace] {hook_name}({', '.join(kwargs)}) -> {plugins}", file=sys.stderr)


def _trace_after(outcome: Any, hook_name: str, hook_impls: Any, kwargs: Mapping[str, Any]) -> None:
    exc = outcome.exception
    status = f"raised {type(exc).__name__}: {exc}" if exc else "ok"
    print(f"[mkg trace] {hook_name} {status}", file=sys.stderr)


def describe_plugins(pm: pluggy.PluginManager) -> list[dict[str, Any]]:
    """What ``mkg plugins`` prints: each loaded plugin, its distribution version and its hooks."""
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    rows = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0]):
        if plugin is None:  # blocked
            continue
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or ())
        dist = dists.get(id(plugin))
        row: dict[str, Any] = {"name": name, "hooks": hooks}
        if dist is not None:
            row["distribution"] = dist.project_name
            row["version"] = dist.version
        else:
            row["distribution"] = "mkg-core"
            row["version"] = _core_version()
            row["builtin"] = True
        rows.append(row)
    return rows


def _core_version() -> str:
    try:
        return importlib.metadata.version("mkg-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
