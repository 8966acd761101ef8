"""MKG_LOAD_PLUGINS, MKG_DISABLE_PLUGINS and MKG_TRACE_PLUGINS, with real installed distributions.

Two small distributions (a ``.dist-info`` folder plus a module each) are laid out in a temporary
folder put on ``sys.path``, so ``importlib.metadata`` and pluggy find them exactly as they find a
pip-installed plugin.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from mkg_core.host import PluginHost
from mkg_core.plugins import describe_plugins, make_plugin_manager

PLUGIN_SOURCE = """
from mkg_core import hookimpl
from mkg_core.contrib import QueryTool

@hookimpl
def mkg_register_query_tools():
    return [QueryTool({key!r})]
"""


def _install(site: Path, dist: str, ep_name: str, module: str, key: str) -> None:
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[mkg]\n{ep_name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(PLUGIN_SOURCE.format(key=key)))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _install(tmp_path, "mkg-alpha", "alpha", "mkg_test_alpha", "alpha_query")
    _install(tmp_path, "mkg-beta", "beta", "mkg_test_beta", "beta_query")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for module in ("mkg_test_alpha", "mkg_test_beta"):
        sys.modules.pop(module, None)


def _loaded(environ: dict[str, str]) -> set[str]:
    pm = make_plugin_manager(environ=environ)
    return {
        name for name, plugin in pm.list_name_plugin() if plugin is not None and name in ("alpha", "beta")
    }


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param({}, {"alpha", "beta"}, id="unset-loads-all"),
        pytest.param({"MKG_LOAD_PLUGINS": ""}, set(), id="empty-loads-none"),
        pytest.param({"MKG_LOAD_PLUGINS": "alpha"}, {"alpha"}, id="allow-by-entry-point"),
        pytest.param({"MKG_LOAD_PLUGINS": "mkg-beta"}, {"beta"}, id="allow-by-distribution"),
        pytest.param({"MKG_LOAD_PLUGINS": " alpha , beta "}, {"alpha", "beta"}, id="allow-list-spaces"),
        pytest.param({"MKG_DISABLE_PLUGINS": "alpha"}, {"beta"}, id="block-by-entry-point"),
        pytest.param({"MKG_DISABLE_PLUGINS": "mkg-alpha,mkg-beta"}, set(), id="block-by-distribution"),
        pytest.param(
            {"MKG_LOAD_PLUGINS": "alpha,beta", "MKG_DISABLE_PLUGINS": "beta"},
            {"alpha"},
            id="block-wins-over-allow",
        ),
    ],
)
def test_load_filters(site: Path, environ: dict[str, str], expected: set[str]) -> None:
    assert _loaded(environ) == expected


def test_builtins_load_even_with_no_plugins(site: Path, settings) -> None:
    host = PluginHost(make_plugin_manager(environ={"MKG_LOAD_PLUGINS": ""}))
    assert set(host.query_tools(settings)) == {"neo4j_read_cypher"}


def test_loaded_plugins_contribute(site: Path, settings) -> None:
    host = PluginHost(make_plugin_manager(environ={"MKG_LOAD_PLUGINS": "alpha"}))
    assert set(host.query_tools(settings)) == {"neo4j_read_cypher", "alpha_query"}


def test_unknown_allow_list_name_warns_with_what_is_installed(site: Path) -> None:
    with pytest.warns(RuntimeWarning, match=r"MKG_LOAD_PLUGINS names gamma.*installed: .*alpha"):
        make_plugin_manager(environ={"MKG_LOAD_PLUGINS": "alpha,gamma"})


def test_describe_plugins_reports_distribution_version_and_hooks(site: Path) -> None:
    rows = {
        row["name"]: row
        for row in describe_plugins(make_plugin_manager(environ={"MKG_LOAD_PLUGINS": "alpha"}))
    }
    assert rows["alpha"] == {
        "name": "alpha",
        "hooks": ["mkg_register_query_tools"],
        "distribution": "mkg-alpha",
        "version": "1.2.3",
    }
    assert rows["mkg_core.builtin.core"]["builtin"] is True


def test_trace_prints_each_hook_call(site: Path, settings, capsys: pytest.CaptureFixture[str]) -> None:
    host = PluginHost(make_plugin_manager(environ={"MKG_LOAD_PLUGINS": "alpha", "MKG_TRACE_PLUGINS": "1"}))
    host.query_tools(settings)
    err = capsys.readouterr().err
    assert "[mkg trace] mkg_register_query_tools(config) -> " in err
    assert "alpha" in err
    assert "[mkg trace] mkg_register_query_tools ok" in err
