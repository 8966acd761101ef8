"""The one place that calls hooks: typed methods over the plugin manager.

Each method flattens the 1:N results, checks what came back and fails loudly (naming the
offender) on a bad or duplicate contribution. Capture runs handler by handler so a broken
plugin never breaks the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pluggy

from .contrib import (
    CaptureContext,
    CaptureHandler,
    ContextProvider,
    Embedder,
    Job,
    QueryTool,
    SchemaStatement,
    Seeder,
    Setting,
    ToolGroup,
    check_named,
)
from .errors import PluginError
from .harness import HarnessAdapter

if TYPE_CHECKING:
    import click

    from .events import HookEvent
    from .settings import Settings

log = logging.getLogger("mkg.host")

T = TypeVar("T")


@dataclass(frozen=True)
class HandlerFailure:
    """A capture handler that raised, and what it raised."""

    handler: str
    error: BaseException


class PluginHost:
    """Typed access to every hook. Build one per composition root."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self._configured = False

    # -- lifecycle ----------------------------------------------------------------------------

    def configure(self, config: Settings) -> None:
        """Tell every plugin (and any registered later) the settings. Once per host."""
        if self._configured:
            return
        self._configured = True
        self.pm.hook.mkg_configure.call_historic(kwargs={"config": config})

    # -- contributions ------------------------------------------------------------------------

    def harness_adapters(self) -> dict[str, HarnessAdapter]:
        """Adapters by name; aliases map to the same object."""
        results = self._collect("mkg_register_harness_adapters", {})
        adapters: dict[str, HarnessAdapter] = {}
        for adapter in results:
            check_named("harness adapter", adapter, HarnessAdapter)
            for key in (adapter.name, *adapter.aliases):
                if key in adapters:
                    raise PluginError(
                        f"harness adapter {key!r} registered twice ({adapters[key]!r} and {adapter!r})"
                    )
                adapters[key] = adapter
        return adapters

    def harness_list(self) -> list[HarnessAdapter]:
        """Each adapter once, in registration order."""
        return list({id(a): a for a in self.harness_adapters().values()}.values())

    def harness_adapter(self, name: str) -> HarnessAdapter:
        adapters = self.harness_adapters()
        try:
            return adapters[name]
        except KeyError:
            known = ", ".join(sorted(adapters)) or "none installed (pip install mkg-claude or mkg-codex)"
            raise PluginError(f"unknown harness {name!r}; known harnesses: {known}") from None

    def detect_harness(self, environ: Mapping[str, str]) -> str | None:
        result: str | None = self.pm.hook.mkg_detect_harness(environ=environ)
        return result

    def capture_handlers(self, config: Settings) -> list[CaptureHandler]:
        handlers = self._collect("mkg_register_capture_handlers", {"config": config})
        for handler in handlers:
            check_named("capture handler", handler, CaptureHandler)
        _unique("capture handler", (h.name for h in handlers))
        return handlers

    def context_providers(self, config: Settings) -> list[ContextProvider]:
        providers = self._collect("mkg_register_context_providers", {"config": config})
        for provider in providers:
            check_named("context provider", provider, ContextProvider)
        _unique("context provider", (p.name for p in providers))
        return providers

    def jobs(self, config: Settings) -> list[Job]:
        jobs = self._collect("mkg_register_jobs", {"config": config})
        for job in jobs:
            check_named("job", job, Job)
        _unique("job", (j.name for j in jobs))
        return jobs

    def query_tools(self, config: Settings) -> dict[str, QueryTool]:
        tools = self._typed("mkg_register_query_tools", {"config": config}, QueryTool, "query tool")
        _unique("query tool", (t.tool_key for t in tools))
        return {tool.tool_key: tool for tool in tools}

    def schema_statements(self, config: Settings) -> list[SchemaStatement]:
        """Every plugin's statements; vector indexes get the dimensions of the embedder in use."""
        dimensions = self.vector_dimensions(config)
        if dimensions != config.embedding_dimensions:
            config = config.model_copy(update={"embedding_dimensions": dimensions})
        statements = self._typed(
            "mkg_register_schema_statements", {"config": config}, SchemaStatement, "schema statement"
        )
        _unique("schema statement", (s.name for s in statements))
        return statements

    def embedders(self, config: Settings) -> dict[str, Embedder]:
        embedders = self._collect("mkg_register_embedders", {"config": config})
        for embedder in embedders:
            check_named("embedder", embedder, Embedder)
        _unique("embedder", (e.name for e in embedders))
        return {e.name: e for e in embedders}

    def embedder(self, config: Settings) -> Embedder | None:
        """The embedder in use: the first available one (an installed plugin's before the built-in)."""
        from .embedding import choose_embedder

        return choose_embedder(self.embedders(config).values())

    def vector_dimensions(self, config: Settings) -> int:
        """The length of the vectors the embedder in use makes (``EMBEDDING_DIMENSIONS`` without one)."""
        embedder = self.embedder(config)
        return (
            embedder.dimensions
            if embedder is not None and embedder.dimensions > 0
            else config.embedding_dimensions
        )

    def seeders(self, config: Settings) -> dict[str, Seeder]:
        seeders = self._typed("mkg_register_seeders", {"config": config}, Seeder, "seeder")
        _unique("seeder", (s.name for s in seeders))
        return {s.name: s for s in seeders}

    def tool_groups(self, config: Settings) -> list[ToolGroup]:
        groups = self._typed("mkg_register_tool_groups", {"config": config}, ToolGroup, "tool group")
        _unique("tool group", (g.name for g in groups))
        _unique("tool", (tool.name for g in groups for tool in g.tools))
        return groups

    def tool_groups_by_plugin(self, config: Settings) -> list[tuple[str, list[ToolGroup]]]:
        """Each plugin's tool groups, named by the plugin, in registration order (the server
        mounts them and says which plugin a group or a clashing tool came from)."""
        hook = self.pm.hook.mkg_register_tool_groups
        found = []
        for impl in reversed(hook.get_hookimpls()):  # registration order
            name = self.pm.get_name(impl.plugin) or repr(impl.plugin)
            try:
                result = impl.function(**{arg: config for arg in impl.argnames if arg == "config"})
            except Exception as exc:
                raise PluginError(
                    f"plugin {name}: mkg_register_tool_groups failed: {type(exc).__name__}: {exc}"
                ) from exc
            groups: list[Any] = list(cast("Iterable[Any]", result or []))
            for group in groups:
                if not isinstance(group, ToolGroup):
                    raise PluginError(f"plugin {name}: tool group contribution {group!r} is not a ToolGroup")
            found.append((name, groups))
        names = [g.name for _, groups in found for g in groups]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise PluginError(f"tool group {duplicates[0]!r} registered twice")
        return found

    def declared_settings(self) -> list[Setting]:
        """The variables plugins read, each once (the first declaration of a variable wins)."""
        declared: dict[str, Setting] = {}
        for setting in self._typed("mkg_register_settings", {}, Setting, "setting"):
            declared.setdefault(setting.variable, setting)
        return list(declared.values())

    def register_commands(self, cli: click.Group) -> None:
        """Let plugins add subcommands; the root group refuses a name that is already taken."""
        try:
            self.pm.hook.mkg_register_commands(cli=cli)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"hook mkg_register_commands failed: {type(exc).__name__}: {exc}") from exc

    # -- capture ------------------------------------------------------------------------------

    def run_capture_handlers(
        self, handlers: Iterable[CaptureHandler], event: HookEvent, context: CaptureContext
    ) -> list[HandlerFailure]:
        """Run every matching handler; return (and log) the ones that failed."""
        failures = []
        for handler in handlers:
            try:
                if handler.matches(event):
                    handler.handle(event, context)
            except Exception as exc:
                log.warning("capture handler %r failed on %s: %s", handler.name, event.event, exc)
                failures.append(HandlerFailure(handler.name, exc))
        return failures

    # -- helpers ------------------------------------------------------------------------------

    def _collect(self, hook_name: str, kwargs: dict[str, Any]) -> list[Any]:
        hook = getattr(self.pm.hook, hook_name)
        try:
            results = hook(**kwargs)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"hook {hook_name} failed: {type(exc).__name__}: {exc}") from exc
        flat: list[Any] = []
        for result in results:
            if result is None:
                continue
            if isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
                raise PluginError(f"hook {hook_name} must return an iterable, got {result!r}")
            flat.extend(result)
        return flat

    def _typed(self, hook_name: str, kwargs: dict[str, Any], kind: type[T], label: str) -> list[T]:
        items = self._collect(hook_name, kwargs)
        for item in items:
            if not isinstance(item, kind):
                raise PluginError(f"{label} contribution {item!r} is not a {kind.__name__}")
        return items


def _unique(kind: str, names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise PluginError(f"{kind} {name!r} registered twice")
        seen.add(name)
