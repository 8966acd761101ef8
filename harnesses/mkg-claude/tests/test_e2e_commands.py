"""MKG's slash commands in the real Claude Code CLI (pinned), installed by ``mkg claude install``.

For each command, ``claude -p "/meta-knowledge-graph:<command>"`` must send the model the command's
whole text (Claude Code found it in the installed plugin and expanded it), and the step the command
starts with, an MKG tool call, must run in MKG's server: its answer reaches the next model request
and its PostToolUse lands in the graph. The fake model takes that step when it reads a sentence of
the command, as a model following the command would. One install serves every command.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mkg_claude
import pytest

from mkg_core import runtime
from mkg_core.graph import Graph
from mkg_core.settings import load_settings
from mkg_core.testing import (
    ANSWER_DEADLINES,
    BIN_DIR,
    CaptureRig,
    Neo4jServer,
    reset_database,
    stop_worker,
)
from mkg_core.testing.fakemodels import FakeAnthropic

pytestmark = pytest.mark.e2e

PROJECT = "e2e-commands"
USER = "dev@example.com"
COMMANDS = Path(mkg_claude.__file__).parent / "payload" / "commands"
SERVER = "mcp__meta-knowledge-graph__"
#: Claude Code names a plugin's commands ``<plugin>:<command>``; ``claude -p`` knows them by that name only.
PLUGIN = "meta-knowledge-graph"
USER_FACT = "The user wants answers as short bullet lists."
PROJECT_FACT = "The staging cluster is called bluefin-staging."


def _command(name: str) -> str:
    """A command's text without its front matter, as Claude Code gives it to the model."""
    return (COMMANDS / f"{name}.md").read_text().split("---\n", 2)[2]


def _first_cypher(name: str) -> str:
    found = re.search(r"```cypher\n(.*?)```", _command(name), re.S)
    assert found, f"{name} has no Cypher query"
    return "\n".join(line.strip() for line in found.group(1).splitlines())


@dataclass(frozen=True)
class Workflow:
    command: str
    #: A sentence of the command: the fake model takes the command's first step when it reads it.
    reads: str
    #: The MKG tool the command starts with, and what the fake model passes it.
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    #: What MKG's answer holds, seen in the model request that follows the call.
    answer: str = ""
    argument: str = ""


WORKFLOWS = [
    Workflow(
        "mkg-start",
        "You are onboarding the user to MKG, the graph memory this session is connected to.",
        "project_get_context",
        answer='"review_queue_waiting":1',
    ),
    Workflow(
        "mkg-review",
        "Help the user decide on the memory that waits for a human.",
        "project_review_queue",
        answer=USER_FACT,
    ),
    Workflow(
        "mkg-orchestrate",
        "Work on this task as an orchestrator backed by MKG memory:",
        "project_get_context",
        {"query": "staging cluster deploy"},
        answer=PROJECT_FACT,
        argument="plan the staging cluster deploy",
    ),
    Workflow(
        "sales-agent-demo",
        "Guide the user through the RoadFlex sales-agent demo of MKG",
        "neo4j_read_cypher",
        {"query": _first_cypher("sales-agent-demo")},
        answer='"accounts":1',
    ),
]


@dataclass
class Installed:
    claude: Path
    env: dict[str, str]
    cwd: Path
    fake: FakeAnthropic
    capture: CaptureRig
    graph: Graph


@pytest.fixture(scope="module")
def installed(
    neo4j_server: Neo4jServer,
    claude_bin: Path,
    claude_env: Callable[..., dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Installed]:
    """Claude Code with MKG installed once, a worker, and a graph holding one item per command."""
    root = tmp_path_factory.mktemp("commands")
    home, cwd, state = root / "home", root / "project", root / "state"
    for folder in (home, cwd, state):
        folder.mkdir()
    base = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "LANG", "LC_")) or k == "TMPDIR"}
    base.update(
        {
            **neo4j_server.settings_env(),
            **ANSWER_DEADLINES,
            "MKG_CONFIG_DIR": str(home / ".config" / "meta-knowledge-graph"),
            "MKG_STATE_DIR": str(state),
            "MKG_WORKER_AUTOSTART": "0",
            "MKG_WORKER_IDLE_SECONDS": "60",
        }
    )
    fake = FakeAnthropic()
    for workflow in WORKFLOWS:
        fake.call_tool(workflow.reads, workflow.tool, **workflow.arguments)
    with (
        Graph.connect(load_settings(environ=base, project_root=cwd)) as graph,
        fake.running(),
    ):
        reset_database(graph)
        _seed(graph)
        env = claude_env(base, fake, home, claude_bin, project=PROJECT, user=USER)
        done = subprocess.run(
            [str(BIN_DIR / "mkg"), "claude", "install"], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        capture = CaptureRig(env=env, paths=runtime.Paths(str(state)))
        try:
            capture.start_worker()
            log = Path(capture.paths.log)
            capture.wait_for(
                lambda: log.exists() and "schema applied" in log.read_text(), 120, "the worker to connect"
            )
            yield Installed(claude_bin, env, cwd, fake, capture, graph)
        finally:
            capture.close()
            stop_worker(capture.paths)


def _seed(graph: Graph) -> None:
    """A user fact waiting for review, an approved project learning and one demo account."""
    graph.write(
        "MERGE (p:Project {id: $p}) "
        "MERGE (u:Learning {id: 'learning:e2e:user-fact'}) "
        "SET u.text = $user_fact, u.status = 'candidate', u.scope = 'user', u.user_id = $user, "
        "u.project_id = $p, u.kind = 'fact', u.confidence = 0.8, u.created_at = datetime() "
        "MERGE (l:Learning {id: 'learning:e2e:staging'}) "
        "SET l.text = $project_fact, l.status = 'approved', l.scope = 'project', l.project_id = $p, "
        "l.kind = 'fact', l.confidence = 0.9 "
        "MERGE (p)-[:HAS_LEARNING]->(u) MERGE (p)-[:HAS_LEARNING]->(l) "
        "MERGE (:Account {id: 'acct-accenture', name: 'Accenture'})",
        {"p": PROJECT, "user": USER, "user_fact": USER_FACT, "project_fact": PROJECT_FACT},
    )


def _user_text(request: dict[str, Any]) -> str:
    """Everything the user side said in a model request: prompts, expanded commands, hook context."""
    texts: list[str] = []
    for message in request.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts += [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(texts)


def _tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results the newest user message of a model request carries."""
    messages = [m for m in request.get("messages", []) if m.get("role") == "user"]
    content = messages[-1].get("content") if messages else None
    return [b for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_result"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w.command)
def test_a_command_reaches_the_model_and_its_first_mkg_call_runs(
    installed: Installed, workflow: Workflow, run_claude: Callable[..., list[dict[str, Any]]]
) -> None:
    fake = installed.fake
    seen = len(fake.requests)
    prompt = f"/{PLUGIN}:{workflow.command} {workflow.argument}".strip()
    allowed = sorted({SERVER + w.tool for w in WORKFLOWS})
    messages = run_claude(installed.claude, installed.env, installed.cwd, prompt, allowed=allowed)
    requests = [r for r in fake.requests[seen:] if "messages" in r]

    # Claude Code expanded the command: its every line is in what the model was sent.
    expanded = next((_user_text(r) for r in requests if workflow.reads in _user_text(r)), None)
    assert expanded is not None, f"/{workflow.command} was not expanded into a model request"
    text = _command(workflow.command).replace("$ARGUMENTS", workflow.argument)
    missing = [line for line in text.splitlines() if line.strip() and line.strip() not in expanded]
    assert not missing, missing

    # The command's first step ran in MKG's server, and its answer went back to the model.
    results = [b for r in requests for b in _tool_results(r)]
    assert len(results) == 1, results
    assert not results[0].get("is_error"), results[0]
    assert workflow.answer in _text(results[0].get("content")), results[0]
    calls = [
        b["name"]
        for m in messages
        if m.get("type") == "assistant"
        for b in m["message"].get("content", [])
        if b.get("type") == "tool_use"
    ]
    assert calls == [SERVER + workflow.tool]

    session = next(m["session_id"] for m in messages if m.get("type") == "system" and m.get("session_id"))
    installed.capture.wait_drained()
    events = installed.graph.read(
        "MATCH (:Project {id: $p})-[:HAS_SESSION]->(:Session {session_id: $s})-[:HAS_EVENT]->"
        "(e:SessionEvent {event_name: 'PostToolUse'}) "
        "RETURN e.tool_key AS tool, e.tool_error AS error",
        {"p": PROJECT, "s": session},
    )
    assert events == [{"tool": workflow.tool, "error": None}]
