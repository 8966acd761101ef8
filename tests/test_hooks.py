"""Each hook, driven through the host with a small inline plugin on a fresh manager."""

from __future__ import annotations

import json
from collections.abc import Mapping

import click
import pytest
from click.testing import CliRunner

from mkg_core import hookimpl
from mkg_core.cli import MkgGroup, build_cli
from mkg_core.contrib import (
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
    ToolSpec,
)
from mkg_core.embedding import choose_embedder
from mkg_core.errors import PluginError
from mkg_core.events import HookEvent
from mkg_core.harness import HarnessAdapter


def _event(name: str = "PostToolUse") -> HookEvent:
    return HookEvent(harness="test", event=name, session_id="s1", source_event=name)


def test_hook_mkg_configure(pm, host, settings) -> None:
    seen: list[object] = []

    class Early:
        @hookimpl
        def mkg_configure(self, config):
            seen.append(("early", config))

    pm.register(Early(), name="test-early")
    host.configure(settings)
    host.configure(settings)  # once per host

    class Late:
        @hookimpl
        def mkg_configure(self, config):
            seen.append(("late", config))

    pm.register(Late(), name="test-late")  # historic: replayed to late plugins
    assert seen == [("early", settings), ("late", settings)]


def test_hook_mkg_register_harness_adapters(pm, host) -> None:
    class Adapter(HarnessAdapter):
        name = "toy"
        aliases = ("toy-cli",)

    class Plugin:
        @hookimpl
        def mkg_register_harness_adapters(self):
            return [Adapter()]

    pm.register(Plugin(), name="test-adapter")
    adapters = host.harness_adapters()
    assert adapters["toy"] is adapters["toy-cli"]
    assert host.harness_adapter("toy-cli").name == "toy"
    with pytest.raises(PluginError, match="unknown harness 'nope'; known harnesses: toy, toy-cli"):
        host.harness_adapter("nope")

    class Clash(HarnessAdapter):
        name = "toy-cli"

    class Other:
        @hookimpl
        def mkg_register_harness_adapters(self):
            return [Clash()]

    pm.register(Other(), name="test-clash")
    with pytest.raises(PluginError, match="harness adapter 'toy-cli' registered twice"):
        host.harness_adapters()


def test_hook_mkg_detect_harness(pm, host) -> None:
    class Never:
        @hookimpl
        def mkg_detect_harness(self, environ):
            return None

    class Toy:
        @hookimpl
        def mkg_detect_harness(self, environ: Mapping[str, str]):
            return "toy" if environ.get("TOY") else None

    pm.register(Never(), name="test-never")
    pm.register(Toy(), name="test-toy")
    assert host.detect_harness({"TOY": "1"}) == "toy"
    assert host.detect_harness({}) is None


def test_hook_mkg_register_capture_handlers(pm, host, settings) -> None:
    handled: list[str] = []

    class Broken(CaptureHandler):
        name = "broken"

        def handle(self, event, context):
            raise RuntimeError("boom")

    class Recorder(CaptureHandler):
        name = "recorder"
        events = frozenset({"PostToolUse"})

        def handle(self, event, context):
            handled.append(event.event)

    class Plugin:
        @hookimpl
        def mkg_register_capture_handlers(self, config):
            return [Broken(), Recorder()]

    pm.register(Plugin(), name="test-capture")
    handlers = host.capture_handlers(settings)
    # The core's own handlers (query failures, late injection links, MCP learnings' sessions) come first.
    core = ["query-failures", "injection-event-links", "mcp-learning-provenance"]
    assert [h.name for h in handlers] == [*core, "broken", "recorder"]
    handlers = handlers[len(core) :]
    context = CaptureContext(graph=None, settings=settings)  # type: ignore[arg-type]
    failures = host.run_capture_handlers(handlers, _event("PostToolUse"), context)
    # The broken handler is reported by name and the next one still ran.
    assert [(f.handler, str(f.error)) for f in failures] == [("broken", "boom")]
    assert handled == ["PostToolUse"]
    host.run_capture_handlers(handlers, _event("Stop"), context)
    assert handled == ["PostToolUse"]  # the recorder does not match Stop


def test_hook_mkg_register_context_providers(pm, host, settings) -> None:
    class Recap(ContextProvider):
        name = "recap"

        def provide(self, event, context):
            return f"recap for {event.session_id}"

    class StopOnly(ContextProvider):
        name = "stop-only"
        events = frozenset({"Stop"})

    class Plugin:
        @hookimpl
        def mkg_register_context_providers(self, config):
            return [Recap(), StopOnly()]

    pm.register(Plugin(), name="test-context")
    providers = host.context_providers(settings)
    # The core's recall providers come first.
    assert [p.name for p in providers] == [
        "system-prompt",
        "project-context",
        "query-error-patterns",
        "recap",
        "stop-only",
    ]
    providers = providers[3:]
    assert [p.matches(_event("UserPromptSubmit")) for p in providers] == [True, False]
    assert providers[0].provide(_event("SessionStart"), None) == "recap for s1"

    class Again:
        @hookimpl
        def mkg_register_context_providers(self):
            return [Recap()]

    pm.register(Again(), name="test-again")
    with pytest.raises(PluginError, match="context provider 'recap' registered twice"):
        host.context_providers(settings)


def test_hook_mkg_register_query_tools(pm, host, settings) -> None:
    assert set(host.query_tools(settings)) == {"neo4j_read_cypher"}  # the core's own

    class Plugin:
        @hookimpl
        def mkg_register_query_tools(self):
            return [QueryTool("warehouse_sql", language="sql")]

    pm.register(Plugin(), name="test-query")
    assert host.query_tools(settings)["warehouse_sql"].language == "sql"

    class Again:
        @hookimpl
        def mkg_register_query_tools(self):
            return [QueryTool("warehouse_sql")]

    pm.register(Again(), name="test-again")
    with pytest.raises(PluginError, match="query tool 'warehouse_sql' registered twice"):
        host.query_tools(settings)


def test_hook_mkg_register_schema_statements(pm, host, settings) -> None:
    core = host.schema_statements(settings)
    assert {"project_learning_fulltext", "project_learning_vector", "session_event_event_id_unique"} <= {
        s.name for s in core
    }

    class Plugin:
        @hookimpl
        def mkg_register_schema_statements(self, config):
            return [
                SchemaStatement(
                    "toy_id",
                    "CREATE CONSTRAINT toy_id IF NOT EXISTS FOR (n:Toy) REQUIRE n.id IS UNIQUE",
                    kind="constraint",
                )
            ]

    pm.register(Plugin(), name="test-schema")
    names = [s.name for s in host.schema_statements(settings)]
    assert "toy_id" in names
    assert len(names) == len(core) + 1
    with pytest.raises(PluginError, match="must be idempotent"):
        SchemaStatement("bad", "CREATE INDEX bad FOR (n:X) ON (n.y)")


def test_hook_mkg_register_embedders(pm, host, settings) -> None:
    assert list(host.embedders(settings)) == ["litellm", "local"]  # the built-in ones

    class Toy(Embedder):
        name = "toy"
        dimensions = 2

        def embed(self, texts):
            return [[float(len(t)), 1.0] for t in texts]

    class Plugin:
        @hookimpl
        def mkg_register_embedders(self, config):
            return [Toy()]

    pm.register(Plugin(), name="test-embed")
    embedders = host.embedders(settings)
    assert embedders["toy"].embed(["abc"]) == [[3.0, 1.0]]
    # An installed embedder comes before the built-in one, so it is the one chosen.
    assert choose_embedder(embedders.values()) is embedders["toy"]


def test_hook_mkg_register_jobs(pm, host, settings) -> None:
    assert [job.name for job in host.jobs(settings)] == [
        "extraction",
        "prompt-consolidation",
        "query-error-consolidation",
        "enrichment",
    ]

    class Tally(Job):
        name = "tally"
        events = frozenset({"SessionEnd"})

        def run(self, event, context):
            return f"counted {event.session_id}"

    class Plugin:
        @hookimpl
        def mkg_register_jobs(self, config):
            return [Tally()]

    pm.register(Plugin(), name="test-jobs")
    jobs = {job.name: job for job in host.jobs(settings)}
    assert set(jobs) == {
        "extraction",
        "prompt-consolidation",
        "query-error-consolidation",
        "enrichment",
        "tally",
    }
    end = _event("SessionEnd")
    assert jobs["tally"].matches(end) and not jobs["extraction"].matches(end)
    assert jobs["tally"].run(end, None) == "counted s1"  # type: ignore[arg-type]

    class Twin(Plugin):
        pass

    pm.register(Twin(), name="test-jobs-twin")
    with pytest.raises(PluginError, match="job 'tally' registered twice"):
        host.jobs(settings)


def test_hook_mkg_register_seeders(pm, host, settings) -> None:
    ran: list[str] = []

    class Plugin:
        @hookimpl
        def mkg_register_seeders(self, config):
            return [Seeder("toy", "a toy dataset", run=lambda ctx: ran.append("toy"))]

    pm.register(Plugin(), name="test-seed")
    seeders = host.seeders(settings)
    seeders["toy"].run(None)  # type: ignore[arg-type]
    assert ran == ["toy"]


def test_hook_mkg_register_tool_groups(pm, host, settings) -> None:
    def ping() -> str:
        return "pong"

    class Plugin:
        @hookimpl
        def mkg_register_tool_groups(self, config):
            return [ToolGroup("toy", (ToolSpec("toy_ping", ping, "Answer pong."),), enabled=lambda s: True)]

    pm.register(Plugin(), name="test-tools")
    groups = {group.name: group for group in host.tool_groups(settings)}
    assert set(groups) == {"memory", "graph", "toy"}  # the core's groups come the same way
    group = groups["toy"]
    assert group.is_enabled(settings)
    assert group.tools[0].fn() == "pong"

    class SameTool:
        @hookimpl
        def mkg_register_tool_groups(self, config):
            return [ToolGroup("other", (ToolSpec("toy_ping", ping, "Also pong."),))]

    pm.register(SameTool(), name="test-same-tool")
    with pytest.raises(PluginError, match="tool 'toy_ping' registered twice"):
        host.tool_groups(settings)


def test_hook_mkg_register_settings(host, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mkg config` lists a plugin's variables with their source, masked when secret, defaults
    shown, each once."""

    class Acme:
        @hookimpl
        def mkg_register_settings(self) -> list[Setting]:
            return [
                Setting("ACME_API_KEY", "the Acme key", secret=True),
                Setting("ACME_REGION", "where", default="eu"),
                Setting("NEO4J_URI", "declared again: shown once"),
            ]

    host.pm.register(Acme(), name="acme")
    monkeypatch.setenv("ACME_API_KEY", "acme-0123456789abcdef")
    result = CliRunner().invoke(build_cli(host), ["config", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["settings"]
    by_name = {row["variable"]: row for row in rows}
    assert by_name["ACME_API_KEY"]["source"] == "environment"
    assert "0123456789abcdef" not in by_name["ACME_API_KEY"]["value"]
    assert (by_name["ACME_REGION"]["value"], by_name["ACME_REGION"]["source"]) == ("eu", "default")
    assert [row["variable"] for row in rows].count("NEO4J_URI") == 1
    with pytest.raises(PluginError, match="upper-case"):
        Setting("acme-key")


def test_hook_mkg_register_commands(pm, host) -> None:
    @click.command("hello")
    def hello() -> None:
        click.echo("hello from a plugin")

    class Plugin:
        @hookimpl
        def mkg_register_commands(self, cli):
            cli.add_command(hello)

    pm.register(Plugin(), name="test-cmd")
    root = MkgGroup("mkg")
    host.register_commands(root)
    assert CliRunner().invoke(root, ["hello"]).output == "hello from a plugin\n"

    @click.command("hello")
    def impostor() -> None:
        pass

    class Clash:
        @hookimpl
        def mkg_register_commands(self, cli):
            cli.add_command(impostor)

    pm.register(Clash(), name="test-clash")
    with pytest.raises(PluginError, match="command 'hello' registered twice"):
        host.register_commands(MkgGroup("mkg"))


@pytest.mark.parametrize(
    ("contribution", "message"),
    [
        pytest.param("not a list", "must return an iterable", id="string-instead-of-list"),
        pytest.param([object()], "is not a ToolGroup", id="wrong-type"),
    ],
)
def test_bad_contributions_fail_loudly(pm, host, settings, contribution, message) -> None:
    class Plugin:
        @hookimpl
        def mkg_register_tool_groups(self, config):
            return contribution

    pm.register(Plugin(), name="test-bad")
    with pytest.raises(PluginError, match=message):
        host.tool_groups(settings)


def test_invalid_names_are_refused() -> None:
    with pytest.raises(PluginError, match="tool group name 'Bad Name' is invalid"):
        ToolGroup("Bad Name", ())
    with pytest.raises(PluginError, match="a description is required"):
        ToolSpec("x", lambda: None, " ")


def test_a_mistyped_hookimpl_fails_at_start(pm) -> None:
    class Typo:
        @hookimpl
        def mkg_register_tool_group(self, config):  # missing "s"
            return []

    pm.register(Typo(), name="test-typo")
    from pluggy import PluginValidationError

    with pytest.raises(PluginValidationError, match="mkg_register_tool_group"):
        pm.check_pending()


def test_an_unknown_argument_is_refused(pm) -> None:
    class Extra:
        @hookimpl
        def mkg_register_query_tools(self, config, surprise):
            return []

    from pluggy import PluginValidationError

    with pytest.raises(PluginValidationError, match="surprise"):
        pm.register(Extra(), name="test-extra")


def test_a_failing_startup_hook_names_the_hook(pm, host, settings) -> None:
    class Crash:
        @hookimpl
        def mkg_register_embedders(self, config):
            raise ValueError("no model")

    pm.register(Crash(), name="test-crash")
    with pytest.raises(PluginError, match="hook mkg_register_embedders failed: ValueError: no model"):
        host.embedders(settings)
