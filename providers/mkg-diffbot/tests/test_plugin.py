"""mkg-diffbot is discovered through its entry point."""

from __future__ import annotations

from mkg_core.host import PluginHost
from mkg_core.plugins import describe_plugins, make_plugin_manager


def test_entry_point_registers() -> None:
    pm = make_plugin_manager(environ={})
    rows = {row["name"]: row for row in describe_plugins(pm)}
    assert rows["diffbot"]["distribution"] == "mkg-diffbot"
    assert rows["diffbot"]["hooks"] == []


def test_contributes_no_tools_yet(settings) -> None:
    pm = make_plugin_manager(environ={"MKG_LOAD_PLUGINS": "diffbot"})
    host = PluginHost(pm)
    assert {group.name for group in host.tool_groups(settings)} == {"memory", "graph"}  # the core's only
    assert pm.get_plugin("diffbot") is not None
