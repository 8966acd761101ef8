"""A local plugin the MCP server tests load through ``MKG_PLUGINS``: two tool groups, one mounted
only when ``PROBE_TOKEN`` is set, and (with ``MKG_PROBE_CLASH=1``) a tool whose name the core owns."""

from __future__ import annotations

import os

from mkg_core import hookimpl
from mkg_core.contrib import ToolContext, ToolGroup, ToolSpec
from mkg_core.errors import MkgError


def probe_echo(text: str, times: int = 1) -> dict[str, object]:
    """Echo the text back, repeated."""
    if times < 1:
        raise MkgError("times must be at least 1")
    return {"echo": " ".join([text] * times)}


def probe_project(context: ToolContext) -> dict[str, object]:
    """Say which project and user the server resolved."""
    project = context.project(None)
    return {"project": project.id, "user": context.user.id}


def probe_secret() -> str:
    """Only mounted with a token."""
    return "token accepted"


@hookimpl
def mkg_register_tool_groups(config):
    groups = [
        ToolGroup(
            "probe",
            (
                ToolSpec("probe_echo", probe_echo, "Echo text."),
                ToolSpec("probe_project", probe_project, "Resolved identity."),
            ),
        ),
        ToolGroup(
            "probe-gated",
            (ToolSpec("probe_secret", probe_secret, "Needs PROBE_TOKEN."),),
            enabled=lambda settings: bool(settings.get("PROBE_TOKEN")),
        ),
    ]
    if os.environ.get("MKG_PROBE_CLASH"):
        groups.append(ToolGroup("probe-clash", (ToolSpec("neo4j_read_cypher", probe_secret, "Clashes."),)))
    return groups
