"""The MKG plugin contract: every hook a plugin may implement.

A complete plugin is a module (or object) with ``@hookimpl`` functions, registered under the
``mkg`` entry-point group::

    # my_plugin.py
    from mkg_core import hookimpl
    from mkg_core.contrib import QueryTool

    @hookimpl
    def mkg_register_query_tools(config):
        return [QueryTool("warehouse_sql", language="sql")]

    # pyproject.toml
    # [project.entry-points.mkg]
    # warehouse = "my_plugin"

Contribution hooks return iterables of frozen objects (see :mod:`mkg_core.contrib`); the host
collects, validates and drives them. Every hook is called with keyword arguments, and an
implementation may accept any subset of a hook's arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from .contrib import (
        CaptureHandler,
        ContextProvider,
        Embedder,
        Job,
        QueryTool,
        SchemaStatement,
        Seeder,
        Setting,
        ToolGroup,
    )
    from .harness import HarnessAdapter
    from .settings import Settings

PROJECT = "mkg"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# -------------------------------------------------------------------------------------------------
# Lifecycle
# -------------------------------------------------------------------------------------------------


@hookspec(historic=True)
def mkg_configure(config: Settings) -> None:
    """Called once after the settings are loaded, before any contribution hook.

    :param config: the resolved :class:`~mkg_core.settings.Settings`.

    Historic: a plugin registered later still receives the call. Return nothing.

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------------------------------
# Discovery: harnesses
# -------------------------------------------------------------------------------------------------


@hookspec
def mkg_register_harness_adapters() -> Iterable[HarnessAdapter] | None:
    """Return one :class:`~mkg_core.harness.HarnessAdapter` per harness this plugin translates.

    An adapter parses its harness's raw hook payloads into the normalized
    :class:`~mkg_core.events.HookEvent` and renders injected context back into the harness's
    stdout JSON.

    All results are collected; adapter names and aliases must be unique across plugins.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def mkg_detect_harness(environ: Mapping[str, str]) -> str | None:
    """Name the harness running this process, judging by its environment, or return None.

    :param environ: the process environment.

    First non-None result wins. Used when ``mkg-hook`` is run without ``--client``.

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------------------------------
# Discovery: capture
# -------------------------------------------------------------------------------------------------


@hookspec
def mkg_register_capture_handlers(config: Settings) -> Iterable[CaptureHandler] | None:
    """Return :class:`~mkg_core.contrib.CaptureHandler` objects that ingest events in the worker.

    :param config: the resolved settings.

    All results are collected; names must be unique. The host calls each matching handler in
    turn and isolates failures: a handler that raises is logged by name and never stops the
    others or the drain.

    .. versionadded:: 0.1
    """


@hookspec
def mkg_register_context_providers(config: Settings) -> Iterable[ContextProvider] | None:
    """Return :class:`~mkg_core.contrib.ContextProvider` objects that answer waiting events.

    :param config: the resolved settings.

    All results are collected; names must be unique. When a SessionStart or UserPromptSubmit
    hook asks the worker what to inject, the worker calls every matching provider within the
    hook's deadline and joins their texts; a provider that raises is logged and skipped.

    .. versionadded:: 0.1
    """


@hookspec
def mkg_register_jobs(config: Settings) -> Iterable[Job] | None:
    """Return :class:`~mkg_core.contrib.Job` objects the worker runs in the background after events.

    :param config: the resolved settings.

    All results are collected; names must be unique. A job is recorded in the spool when a
    matching event is stored, so it survives a worker restart; jobs run one at a time, and a job
    that raises is retried with backoff.

    .. versionadded:: 0.1
    """


@hookspec
def mkg_register_query_tools(config: Settings) -> Iterable[QueryTool] | None:
    """Return the :class:`~mkg_core.contrib.QueryTool` keys whose failures are captured.

    :param config: the resolved settings.

    All results are collected; a tool key may be declared only once.

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------------------------------
# Discovery: graph and memory
# -------------------------------------------------------------------------------------------------


@hookspec
def mkg_register_schema_statements(config: Settings) -> Iterable[SchemaStatement] | None:
    """Return the idempotent :class:`~mkg_core.contrib.SchemaStatement` objects this plugin needs.

    :param config: the resolved settings (vector dimensions come from here).

    All results are collected; statement names must be unique. ``mkg schema apply`` and the
    worker run them all and wait for the indexes to come online.

    .. versionadded:: 0.1
    """


@hookspec
def mkg_register_embedders(config: Settings) -> Iterable[Embedder] | None:
    """Return :class:`~mkg_core.contrib.Embedder` objects that turn texts into vectors.

    :param config: the resolved settings.

    All results are collected; names must be unique. Without an available embedder every
    retrieval path falls back to fulltext.

    .. versionadded:: 0.1
    """


@hookspec
def mkg_register_seeders(config: Settings) -> Iterable[Seeder] | None:
    """Return :class:`~mkg_core.contrib.Seeder` objects that ``mkg seed NAME`` can run.

    :param config: the resolved settings.

    All results are collected; names must be unique.

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------------------------------
# Discovery: agent-facing tools and the command line
# -------------------------------------------------------------------------------------------------


@hookspec
def mkg_register_tool_groups(config: Settings) -> Iterable[ToolGroup] | None:
    """Return the MCP :class:`~mkg_core.contrib.ToolGroup` objects this plugin offers.

    :param config: the resolved settings.

    All results are collected; group names and tool names must be unique across plugins. A
    group whose ``enabled(settings)`` is false is not mounted.

    .. versionadded:: 0.1
    """


@hookspec
def mkg_register_settings() -> Iterable[Setting] | None:
    """Return a :class:`~mkg_core.contrib.Setting` for each variable this plugin reads.

    A plugin reads its variables with ``config.get("NAME")`` (the environment, then the ``.env``
    file, like MKG's own); declaring them makes ``mkg config`` show them, masked when secret, and
    ``mkg setup`` ask for the ones with a ``question``.

    All results are collected; a variable declared by several plugins is shown once.

    .. versionadded:: 0.1
    """


@hookspec
def mkg_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``mkg`` command line.

    :param cli: the root ``click.Group``; call ``cli.add_command(...)``.

    Called for every plugin; return nothing. A command name that is already taken fails at start.

    .. versionadded:: 0.1
    """
