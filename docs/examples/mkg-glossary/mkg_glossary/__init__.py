"""mkg-glossary: a project glossary the agent can define and look up, kept in MKG's graph.

It shows the three things most providers contribute:

- a tool group (``glossary_define``, ``glossary_lookup``), mounted by the MCP server;
- a capture handler, which records in the worker every lookup an agent made in a session;
- the schema those two need (a uniqueness constraint), applied with MKG's own.
"""

from __future__ import annotations

from typing import Any

from mkg_core import hookimpl
from mkg_core.contrib import (
    CaptureContext,
    CaptureHandler,
    SchemaStatement,
    ToolContext,
    ToolGroup,
    ToolSpec,
)
from mkg_core.errors import MkgError
from mkg_core.events import HookEvent, tool_result
from mkg_core.settings import Settings

DEFINE = """
MERGE (t:GlossaryTerm {project_id: $project_id, key: $key})
SET t.term = $term, t.definition = $definition, t.updated_at = datetime()
RETURN t.term AS term, t.definition AS definition
"""

LOOKUP = """
MATCH (t:GlossaryTerm {project_id: $project_id, key: $key})
RETURN t.term AS term, t.definition AS definition
"""

RECORD_LOOKUP = """
MERGE (t:GlossaryTerm {project_id: $project_id, key: $key})
ON CREATE SET t.term = $term
MERGE (s:Session {session_id: $session_id})
MERGE (t)-[r:LOOKED_UP_IN]->(s)
SET r.found = $found
"""


def _key(term: str) -> str:
    key = " ".join(term.lower().split())
    if not key:
        raise MkgError("term is empty")  # an MkgError reaches the agent as a clear tool error
    return key


def glossary_define(context: ToolContext, term: str, definition: str) -> dict[str, Any]:
    """Define a term of this project's vocabulary (or replace its definition)."""
    if not definition.strip():
        raise MkgError("definition is empty")
    project = context.project(None)
    rows = context.graph().write(
        DEFINE,
        {"project_id": project.id, "key": _key(term), "term": term.strip(), "definition": definition.strip()},
    )
    return rows[0]


def glossary_lookup(context: ToolContext, term: str) -> dict[str, Any]:
    """Look a term up in this project's glossary."""
    project = context.project(None)
    rows = context.graph().read(LOOKUP, {"project_id": project.id, "key": _key(term)})
    limit = int(
        context.settings.get("GLOSSARY_MAX_DEFINITION_CHARS", "2000") or 2000
    )  # the plugin's own setting
    if not rows:
        return {"term": term, "found": False}
    return {"term": rows[0]["term"], "found": True, "definition": rows[0]["definition"][:limit]}


class LookupCapture(CaptureHandler):
    """Links each looked-up term to the session that asked for it."""

    name = "glossary-lookups"
    events = frozenset({"PostToolUse"})

    def matches(self, event: HookEvent) -> bool:
        # tool_key is the harness-independent tool name:
        # "mcp__meta-knowledge-graph__glossary_lookup" -> "glossary_lookup"
        return event.event == "PostToolUse" and event.tool_key == "glossary_lookup"

    def handle(self, event: HookEvent, context: CaptureContext) -> None:
        term = (event.tool_input or {}).get("term") if isinstance(event.tool_input, dict) else None
        if not isinstance(term, str) or not term.strip() or context.project is None:
            return
        answer = tool_result(event)  # the tool's answer, whatever the harness wrapped it in
        found = isinstance(answer, dict) and answer.get("found") is True
        context.graph.write(  # MERGE only: the worker may hand the same event over twice
            RECORD_LOOKUP,
            {
                "project_id": context.project.id,
                "key": " ".join(term.lower().split()),
                "term": term.strip(),
                "session_id": event.session_id,
                "found": found,
            },
        )


@hookimpl
def mkg_register_tool_groups(config: Settings) -> list[ToolGroup]:
    return [
        ToolGroup(
            "glossary",
            (
                ToolSpec("glossary_define", glossary_define, "Define a project term.", read_only=False),
                ToolSpec("glossary_lookup", glossary_lookup, "Look a project term up."),
            ),
            description="The project's glossary",
        )
    ]


@hookimpl
def mkg_register_capture_handlers(config: Settings) -> list[CaptureHandler]:
    return [LookupCapture()]


@hookimpl
def mkg_register_schema_statements(config: Settings) -> list[SchemaStatement]:
    return [
        SchemaStatement(
            "glossary_term_key",
            "CREATE CONSTRAINT glossary_term_key IF NOT EXISTS "
            "FOR (t:GlossaryTerm) REQUIRE (t.project_id, t.key) IS UNIQUE",
            kind="constraint",
        )
    ]
