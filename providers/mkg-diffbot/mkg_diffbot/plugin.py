"""The mkg-diffbot plugin: news and firmographics tools, and their results captured into the graph.

The ``diffbot`` tool group mounts when ``DIFFBOT_TOKEN`` is set; the capture handler and the
schema are always registered, so results seen in any session are kept even when this process
has no token.
"""

from __future__ import annotations

from mkg_core import hookimpl
from mkg_core.settings import Settings

from .ingest import SCHEMA, DiffbotIngestion
from .tools import SETTINGS, tool_group


@hookimpl
def mkg_register_settings() -> tuple[object, ...]:
    return SETTINGS


@hookimpl
def mkg_register_tool_groups(config: Settings) -> list[object]:
    return [tool_group()]


@hookimpl
def mkg_register_capture_handlers(config: Settings) -> list[object]:
    return [DiffbotIngestion()]


@hookimpl
def mkg_register_schema_statements(config: Settings) -> tuple[object, ...]:
    return SCHEMA
