"""What plugins contribute: frozen, self-validating objects and small base classes.

Hooks only discover these; the host drives them. They carry no SDK types (the MCP server turns
a :class:`ToolSpec` into an SDK tool in one module), so plugins never depend on the server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import PluginError

if TYPE_CHECKING:
    from .events import HookEvent
    from .graph import Graph
    from .harness import HarnessAdapter
    from .identity import ProjectRef, UserRef
    from .settings import Settings

__all__ = [
    "WARM_UP_IDS",
    "WARM_UP_USERS",
    "CaptureContext",
    "CaptureHandler",
    "ContextProvider",
    "Embedder",
    "Job",
    "QueryTool",
    "SchemaStatement",
    "SeedContext",
    "Seeder",
    "Setting",
    "ToolContext",
    "ToolGroup",
    "ToolSpec",
    "warm_up_vector",
]

_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _check_name(kind: str, name: str, pattern: re.Pattern[str] = _NAME_RE) -> None:
    if not isinstance(name, str) or not pattern.match(name):
        raise PluginError(
            f"{kind} name {name!r} is invalid: use lowercase letters, digits, '_' or '-', "
            "starting with a letter (at most 64 characters)"
        )


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: a plain function plus what the agent is told about it.

    The function's parameters (with type hints) are the tool's input. If its first parameter is
    named ``context``, the server passes a :class:`ToolContext` there and does not show it to the
    agent. Raise :class:`~mkg_core.errors.MkgError` (or a subclass) for a clear tool error.

    ``needs_approval``: a harness that can ask its user before a call (Codex's per-tool approval)
    asks before every call of this tool; set it for tools that write memory for good or reach
    outside MKG (a warehouse query that costs money).
    """

    name: str
    fn: Callable[..., Any]
    description: str
    read_only: bool = True
    needs_approval: bool = False

    def __post_init__(self) -> None:
        _check_name("tool", self.name, _TOOL_NAME_RE)
        if not callable(self.fn):
            raise PluginError(f"tool {self.name!r}: fn must be callable")
        if not self.description.strip():
            raise PluginError(f"tool {self.name!r}: a description is required")


@dataclass(frozen=True)
class ToolGroup:
    """A named set of MCP tools, mounted only when ``enabled(settings)`` is true and ``missing(settings)``
    names nothing.

    ``missing`` says what the settings lack, in words a user can act on (``["DIFFBOT_TOKEN"]``); the
    server and ``mkg plugins`` show it as the reason a group is not mounted. Prefer it to
    ``enabled`` when there is something to tell.
    """

    name: str
    tools: tuple[ToolSpec, ...]
    description: str = ""
    enabled: Callable[[Settings], bool] | None = None
    missing: Callable[[Settings], Sequence[str]] | None = None

    def __post_init__(self) -> None:
        _check_name("tool group", self.name)
        object.__setattr__(self, "tools", tuple(self.tools))
        for tool in self.tools:
            if not isinstance(tool, ToolSpec):
                raise PluginError(f"tool group {self.name!r}: {tool!r} is not a ToolSpec")
        names = [tool.name for tool in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise PluginError(f"tool group {self.name!r} lists tool {duplicates[0]!r} twice")

    def is_enabled(self, settings: Settings) -> bool:
        return True if self.enabled is None else bool(self.enabled(settings))

    def what_is_missing(self, settings: Settings) -> list[str]:
        return [] if self.missing is None else [str(item) for item in self.missing(settings)]


@dataclass(frozen=True)
class ToolContext:
    """What a tool function gets besides its arguments. Nothing here connects until it is used."""

    settings: Settings
    #: The graph connection (connected, schema applied); raises GraphUnavailable when Neo4j is down.
    graph: Callable[[], Graph]
    #: The project a call is about: the explicit id when given, else as the hooks resolve it.
    project: Callable[[str | None], ProjectRef]
    user: UserRef
    embedder: Embedder | None = None


@dataclass(frozen=True)
class QueryTool:
    """A tool whose failed or suspicious results are captured as query failures.

    Matched on the harness-independent ``tool_key`` (see :func:`mkg_core.events.tool_key`).
    """

    tool_key: str
    language: str = "cypher"
    description: str = ""

    def __post_init__(self) -> None:
        _check_name("query tool", self.tool_key, _TOOL_NAME_RE)


_VARIABLE_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,99}$")


@dataclass(frozen=True)
class Setting:
    """A variable a plugin reads with :meth:`Settings.get <mkg_core.settings.Settings.get>`.

    Declared so that ``mkg config`` shows it (masked when ``secret``) with where its value came
    from, and, with a ``question``, so that ``mkg setup`` asks for it. Several plugins may declare
    the same variable (``GCP_PROJECT_ID``); it is shown and asked once.
    """

    variable: str
    help: str = ""
    secret: bool = False
    default: str | None = None
    question: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.variable, str) or not _VARIABLE_RE.match(self.variable):
            raise PluginError(
                f"setting {self.variable!r} is invalid: use an upper-case environment variable name"
            )


@dataclass(frozen=True)
class SchemaStatement:
    """One idempotent schema statement (``... IF NOT EXISTS``), applied by ``mkg schema apply``."""

    name: str
    cypher: str
    kind: str = "index"

    KINDS: ClassVar[frozenset[str]] = frozenset({"constraint", "index", "fulltext", "vector"})

    def __post_init__(self) -> None:
        _check_name("schema statement", self.name)
        if self.kind not in self.KINDS:
            raise PluginError(f"schema statement {self.name!r}: kind must be one of {sorted(self.KINDS)}")
        if "IF NOT EXISTS" not in self.cypher.upper():
            raise PluginError(f"schema statement {self.name!r} must be idempotent (use IF NOT EXISTS)")


@dataclass(frozen=True)
class SeedContext:
    """What a seeder gets: the graph, the settings, a progress callback and the embedder in use
    (None when embeddings are off or unavailable; seeders then write text only)."""

    graph: Graph
    settings: Settings
    progress: Callable[[str], None] = field(default=lambda message: None)
    embedder: Embedder | None = None


@dataclass(frozen=True)
class Seeder:
    """A named, idempotent data loader run by ``mkg seed NAME``."""

    name: str
    description: str
    run: Callable[[SeedContext], object]
    requires: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_name("seeder", self.name)
        if not callable(self.run):
            raise PluginError(f"seeder {self.name!r}: run must be callable")
        object.__setattr__(self, "requires", tuple(self.requires))


@dataclass(frozen=True)
class CaptureContext:
    """What a capture handler or context provider gets besides the event.

    ``settings`` are those of the event's project (its ``.mkg.env`` may differ from the worker's);
    ``graph`` is the connection they name.
    """

    graph: Graph
    settings: Settings
    project: ProjectRef | None = None
    user: UserRef | None = None
    #: The captured event's id (``:SessionEvent.event_id``), when there is one.
    event_id: str | None = None
    #: The embedder in use for these settings, or None (then every path falls back to fulltext).
    embedder: Embedder | None = None
    #: The query tools these settings mount, by tool key (see ``mkg_register_query_tools``).
    query_tools: Mapping[str, QueryTool] = field(default_factory=dict)
    #: The installed harness adapters, by name (a job that reads transcripts asks them).
    adapters: Mapping[str, HarnessAdapter] = field(default_factory=dict)

    def llm_client(self, harness: str | None) -> str | None:
        """The LLM client a harness's users have (its adapter's ``llm_client``), for LLM calls made
        on an event of that harness."""
        adapter = self.adapters.get(harness) if harness else None
        return adapter.llm_client if adapter is not None else None


class CaptureHandler:
    """Ingests events into the graph. Subclass it, set ``name``, override ``matches`` and ``handle``.

    The worker calls each matching handler in turn, after the event is in the graph; an exception
    in one is logged with its name and never stops the others. A handler may see an event again
    (the worker restarted before the spool row was marked done), so it must be idempotent.
    """

    name: ClassVar[str] = ""
    #: Canonical event names this handler wants; empty means every event.
    events: ClassVar[frozenset[str]] = frozenset()

    def matches(self, event: HookEvent) -> bool:
        return not self.events or event.event in self.events

    def handle(self, event: HookEvent, context: CaptureContext) -> None:
        raise NotImplementedError


#: Identifiers shaped like real ones, for warm-ups (see :meth:`ContextProvider.warm_up`). Neo4j
#: keeps a plan per query, parameter types and parameter sizes (strings of up to 10 characters, up
#: to 100, more; lists of one item, up to 10, up to 100, more), so the users are a short login, a
#: longer one (``user:warmup`` is over 10) and an e-mail address.
WARM_UP_IDS = {
    "project_id": "warm-up-0123456789",
    "session_id": "00000000-0000-4000-8000-000000000000",
}
WARM_UP_USERS = ("wu", "warmup", "warm-up@example.invalid")


def warm_up_vector(dimensions: int) -> list[float]:
    """A unit vector of ``dimensions`` floats: what a warm-up passes where a query takes an
    embedding, without calling the embedder."""
    return [1.0] + [0.0] * (dimensions - 1)


class ContextProvider:
    """Supplies text to inject when the harness waits for an answer (SessionStart, UserPromptSubmit).

    Subclass it, set ``name``, override ``provide``. The worker calls every matching provider
    within the hook's deadline, joins their non-empty texts with blank lines, and the harness
    adapter renders the result. An exception in one is logged and never stops the others.
    """

    name: ClassVar[str] = ""
    #: Canonical event names this provider answers.
    events: ClassVar[frozenset[str]] = frozenset({"SessionStart", "UserPromptSubmit"})

    def matches(self, event: HookEvent) -> bool:
        return event.event in self.events

    def provide(self, event: HookEvent, context: CaptureContext) -> str | None:
        raise NotImplementedError

    def warm_up(self, graph: Graph, embedder: Embedder | None) -> None:
        """Called when the worker connects to a database, so the first answer is not the slow one
        (for instance: run the provider's queries once so Neo4j plans them). ``embedder`` is the
        one answers will use (None when there is none); do not call it, it may be a paid service.
        Optional.

        Neo4j plans a query again for parameters of another type or size, so a warm-up passes
        values shaped like real ones: :data:`WARM_UP_IDS`, each of :data:`WARM_UP_USERS`, vectors
        of ``embedder.dimensions`` floats; never empty strings or lists where real ones are not."""


class Job:
    """Background work an event triggers (extraction at Stop, consolidation services).

    Subclass it, set ``name`` and ``events``, override ``run``. The worker records a job when a
    matching event has been stored, and runs jobs one at a time, in the background, after the
    spool is drained; a job still pending when the worker stops runs when it starts again. Pending
    jobs with the same :meth:`key` coalesce into one run (with the latest event), so a job must
    handle everything that is new since its last run, and be idempotent.
    """

    name: ClassVar[str] = ""
    #: Canonical event names that trigger this job.
    events: ClassVar[frozenset[str]] = frozenset()

    def matches(self, event: HookEvent) -> bool:
        return event.event in self.events

    def key(self, event: HookEvent, context: CaptureContext) -> str:
        """Jobs with equal keys coalesce; by default one per project and session."""
        project = context.project.id if context.project else ""
        return f"{project}\n{event.session_id}"

    def lease(self, event: HookEvent, context: CaptureContext) -> str | None:
        """What a run holds in the graph so that no other worker (a teammate's, another machine's)
        does the same work at once; by default the project (``project:<id>``). None: no lease.

        .. versionadded:: 0.2"""
        return f"project:{context.project.id}" if context.project else None

    def enabled(self, settings: Settings) -> bool:
        """Whether the job runs under these settings (checked when it is recorded)."""
        return True

    def run(self, event: HookEvent, context: CaptureContext) -> str | None:
        """Do the work; return a one-line summary for the log. Raise to be retried later."""
        raise NotImplementedError


class Embedder:
    """Turns texts into vectors. Subclass it, set ``name``, implement ``embed``."""

    name: ClassVar[str] = ""
    dimensions: int = 0

    def is_available(self) -> bool:
        """True when the embedder can run now (model configured, key present)."""
        return True

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError

    def warm_up(self) -> None:
        """Called in the background when the worker starts, so that the first prompt does not
        wait for a model to load. It must not call a paid service. Optional."""


def check_named(kind: str, obj: object, expected: type) -> None:
    """Fail loudly when a contribution is not of the expected type or has no valid name."""
    if not isinstance(obj, expected):
        raise PluginError(f"{kind} contribution {obj!r} is not a {expected.__name__}")
    name = getattr(obj, "name", "")
    if not name:
        raise PluginError(f"{kind} {type(obj).__name__} has no name")
    _check_name(kind, name)
