"""The core's own contributions, registered as a default plugin before any installed one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..contrib import CaptureHandler, ContextProvider, Embedder, Job, QueryTool, SchemaStatement, ToolGroup
from ..embedding import LiteLLMEmbedder
from ..enrichment import EnrichmentJob
from ..error_patterns import QueryErrorConsolidationJob, QueryErrorRecall
from ..extraction import ExtractionJob
from ..hookspecs import hookimpl
from ..local_embedder import LocalEmbedder
from ..memory_tools import LearningProvenance, core_tool_groups
from ..query_failures import QueryFailureCapture
from ..recall import InjectionEventLinks, ProjectContextProvider
from ..schema import core_statements
from ..system_prompt import PromptConsolidationJob, SystemPromptProvider

if TYPE_CHECKING:
    from ..settings import Settings


@hookimpl(trylast=True)
def mkg_register_schema_statements(config: Settings) -> Iterable[SchemaStatement]:
    """The core constraints, fulltext and vector indexes."""
    return core_statements(config.embedding_dimensions)  # the embedder's, see PluginHost.schema_statements


@hookimpl(trylast=True)
def mkg_register_query_tools() -> Iterable[QueryTool]:
    """The core's read-only Cypher tool is a query tool."""
    return [
        QueryTool("neo4j_read_cypher", language="cypher", description="read-only Cypher on the MKG graph")
    ]


@hookimpl(tryfirst=True)
def mkg_register_context_providers() -> Iterable[ContextProvider]:
    """Recall: the system prompt at session start, the relevant project memory, and known fixes
    when a query tool fails."""
    return [SystemPromptProvider(), ProjectContextProvider(), QueryErrorRecall()]


@hookimpl(tryfirst=True)
def mkg_register_capture_handlers() -> Iterable[CaptureHandler]:
    """Failed and suspicious results of query tools, for error-pattern consolidation; and the
    links from recalled learnings to the event they were injected at."""
    return [QueryFailureCapture(), InjectionEventLinks(), LearningProvenance()]


@hookimpl(trylast=True)
def mkg_register_embedders(config: Settings) -> Iterable[Embedder]:
    """``EMBEDDING_MODEL`` through litellm when its key is set, else the keyless local model (with
    ``mkg-core[local]``); an installed embedder plugin comes before both."""
    return [LiteLLMEmbedder(config), LocalEmbedder(config)]


@hookimpl(tryfirst=True)
def mkg_register_jobs() -> Iterable[Job]:
    """Memory extraction (and the gate) after each Stop; then system-prompt and error-pattern
    consolidation; then, when MKG_ENRICHMENT is on, the session's turn and tool-call projection."""
    return [ExtractionJob(), PromptConsolidationJob(), QueryErrorConsolidationJob(), EnrichmentJob()]


@hookimpl(tryfirst=True)
def mkg_register_tool_groups() -> Iterable[ToolGroup]:
    """The MCP server's core tools: project memory, the review queue, the graph."""
    return core_tool_groups()
