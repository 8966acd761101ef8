"""The real Claude Code CLI (from npm, pinned) with MKG installed by ``mkg claude install``.

A local fake Anthropic API answers the model calls; the graph is the test Neo4j. Nothing is
mocked on MKG's side: the CLI runs the installed plugin's hooks (``mkg-hook``) and MCP server
(``meta-knowledge-graph``), and a worker moves the events into the graph.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mkg_core.graph import Graph
from mkg_core.testing import BIN_DIR, CaptureRig, cpu_burners, first_model_request
from mkg_core.testing.fakemodels import FakeAnthropic

pytestmark = pytest.mark.e2e

PROJECT = "e2e-claude"
ADD_LEARNING = "mcp__meta-knowledge-graph__project_add_learning"
ALLOWED = (ADD_LEARNING, "Read")
SEEDED = "The staging cluster is called bluefin-staging."
NEW = "The team deploys to production on Fridays."
SAVE_SAID = "I will keep the deploy day in project memory."
READ_SAID = "Let me check the deploy notes first."
MODEL_REQUEST = '"messages"'
EVENTS = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"}


def _hook_outcomes(messages: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    return [
        (m.get("hook_event") or m.get("hook_name") or "", m.get("exit_code"), m.get("outcome"))
        for m in messages
        if m.get("type") == "system" and m.get("subtype") == "hook_response"
    ]


def test_claude_code_with_mkg_installed_remembers_across_sessions(
    capture: CaptureRig,
    graph: Graph,
    claude_bin: Path,
    claude_env: Callable[..., dict[str, str]],
    run_claude: Callable[..., list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    graph.write(
        "MERGE (p:Project {id: $p}) MERGE (l:Learning {id: 'learning:e2e:seeded'}) "
        "SET l.text = $text, l.status = 'approved', l.scope = 'project', l.project_id = $p, l.kind = 'fact', "
        "l.confidence = 0.9 MERGE (p)-[:HAS_LEARNING]->(l)",
        {"p": PROJECT, "text": SEEDED},
    )
    fake = FakeAnthropic()
    fake.call_tool("remember", "project_add_learning", say=SAVE_SAID, text=NEW, scope="project")
    (project / "DEPLOY.md").write_text("Deploys happen on Fridays after the freeze.\n")
    fake.call_tool("production", "Read", say=READ_SAID, file_path=str(project / "DEPLOY.md"))
    with fake.running():
        env = claude_env(capture.env, fake, home, claude_bin, project=PROJECT)
        installed = subprocess.run(
            [str(BIN_DIR / "mkg"), "claude", "install"], env=env, capture_output=True, text=True, timeout=300
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
        plugin = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
        assert "meta-knowledge-graph@mkg" in json.dumps(plugin)

        capture.env = env
        capture.start_worker()
        log = Path(capture.paths.log)
        capture.wait_for(
            lambda: log.exists() and "schema applied" in log.read_text(), 120, "the worker to connect"
        )

        # Five sessions while every core is busy: MKG's tools are in the first model request of each
        # (its MCP server answers from the worker within milliseconds, busy machine or not).
        with cpu_burners():
            first = run_claude(
                claude_bin,
                env,
                project,
                "Which cluster is staging? Please remember that we deploy on Fridays.",
                allowed=ALLOWED,
            )
            bodies = fake.bodies()
            assert ADD_LEARNING in first_model_request(bodies, MODEL_REQUEST)  # the MCP tools are offered
            assert any(SEEDED in body for body in bodies)  # recalled memory reached the model
            assert any('"tool_result"' in body for body in bodies)  # and the scripted call went through
            outcomes = _hook_outcomes(first)
            assert outcomes and all(code in (0, None) for _, code, _ in outcomes), outcomes
            assert all(outcome in (None, "success") for _, _, outcome in outcomes), outcomes

            capture.wait_drained()
            sessions = graph.read(
                "MATCH (:Project {id: $p})-[:HAS_SESSION]->(s:Session) "
                "RETURN s.session_id AS id, s.client AS client, "
                "[(s)-[:HAS_EVENT]->(e) | e.event_name] AS events, COUNT { (s)-[:HAS_EVENT]->() } AS n, "
                "COUNT { (s)-[:HAS_EVENT]->()-[:NEXT]->() } AS links",
                {"p": PROJECT},
            )
            assert len(sessions) == 1
            session = sessions[0]
            assert set(session["events"]) >= EVENTS and session["links"] == session["n"] - 1
            learned = graph.read(
                "MATCH (:Project {id: $p})-[:HAS_LEARNING]->(l:Learning {text: $t}) "
                "RETURN l.status AS status, COUNT { (l)-[:FROM_SESSION {via: 'mcp'}]->(:Session)"
                "<-[:HAS_SESSION]-(:Project {id: $p}) } AS sessions",
                {"p": PROJECT, "t": NEW},
            )
            assert learned == [{"status": "candidate", "sessions": 1}]  # from the session that wrote it

            seen = len(fake.bodies())
            run_claude(claude_bin, env, project, "When does the team deploy to production?", allowed=ALLOWED)
            # the second session sees the first's memory
            assert any(NEW in body for body in fake.bodies()[seen:])
            assert ADD_LEARNING in first_model_request(fake.bodies()[seen:], MODEL_REQUEST)
            for number in range(3, 6):
                seen = len(fake.bodies())
                run_claude(
                    claude_bin,
                    env,
                    project,
                    f"Session {number}: what do we know about the staging cluster?",
                    allowed=ALLOWED,
                )
                assert ADD_LEARNING in first_model_request(fake.bodies()[seen:], MODEL_REQUEST), number
        capture.wait_drained()
        assert len(graph.read("MATCH (:Project {id: $p})-[:HAS_SESSION]->(s) RETURN s", {"p": PROJECT})) == 5

        # The turn and tool-call projection of the sessions, from their events and transcripts.
        enriched = subprocess.run(
            [str(BIN_DIR / "mkg"), "enrich", "--all"], env=env, capture_output=True, text=True, timeout=300
        )
        assert enriched.returncode == 0, enriched.stdout + enriched.stderr
        said = graph.read(
            "MATCH (:Turn)-[:ISSUED]->(c:ToolCall)-[:HAS_RATIONALE]->(r:ToolRationale) "
            "RETURN c.tool_key AS tool, r.text AS said ORDER BY tool"
        )
        assert said == [
            {"tool": "Read", "said": READ_SAID},
            {"tool": "project_add_learning", "said": SAVE_SAID},
        ]

        removed = subprocess.run(
            [str(BIN_DIR / "mkg"), "claude", "uninstall"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert removed.returncode == 0, removed.stdout + removed.stderr
        listed = subprocess.run(
            [str(claude_bin), "plugin", "list"],
            env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert "meta-knowledge-graph@mkg" not in listed.stdout
