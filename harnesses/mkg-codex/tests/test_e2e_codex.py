"""The real Codex CLI (from npm, pinned) with MKG installed by ``mkg codex install``.

A local fake Responses API answers the model calls; the graph is the test Neo4j. The hooks run
without ``--dangerously-bypass-hook-trust``: the trust ``mkg codex install`` recorded is what lets
them fire.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mkg_core.graph import Graph
from mkg_core.identity import resolve_project
from mkg_core.testing import BIN_DIR, NPM_TOOLS, CaptureRig, cpu_burners, first_model_request
from mkg_core.testing.fakemodels import FakeResponses

pytestmark = pytest.mark.e2e

SEEDED = "The staging cluster is called bluefin-staging."
NEW = "The team deploys to production on Fridays."
SAVE_SAID = "I will keep the deploy day in project memory."
GATED = "Releases are frozen in December."
APPROVAL = "MCP tool call requires approval"
READ_SAID = "Let me check the deploy notes first."
#: What marks a model request, and MKG's tools in one (Codex offers them as a namespace, the
#: server's name with its hyphens made underscores).
MODEL_REQUEST, TOOLS = '"input"', '"mcp__meta_knowledge_graph"'
EVENTS = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"}


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return NPM_TOOLS["codex"].path()


def _env(capture: CaptureRig, fake: FakeResponses, home: Path, codex: Path) -> dict[str, str]:
    """Codex starts hooks and MCP servers with almost no environment, so MKG's settings go where a
    user's would: the config folder's .env (whose location the installed plugin pins)."""
    config = home / ".config" / "meta-knowledge-graph"
    config.mkdir(parents=True)
    settings = {key: capture.env[key] for key in ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD")}
    settings.update({"EMBEDDING_MODEL": "none", "MKG_EXTRACTION": "0"})
    (config / ".env").write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return {
        "PATH": f"{BIN_DIR}:/usr/bin:/bin",
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "MKG_CONFIG_DIR": str(config),
        "MKG_STATE_DIR": capture.paths.root,
        "MKG_DATA_DIR": str(home / ".local" / "share" / "meta-knowledge-graph"),
        "MKG_WORKER_AUTOSTART": "0",
        "MKG_CODEX_BIN": str(codex),
        # pinned into the installed hooks: answers on a busy machine may take a few seconds
        "MKG_HOOK_DEADLINE_SESSION_START": "8",
        "MKG_HOOK_DEADLINE_PROMPT": "8",
        **fake.env(),
    }


def _run(codex: Path, env: dict[str, str], cwd: Path, prompt: str, *options: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", "--json", *options, prompt],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip().startswith("{")]


def test_codex_with_mkg_installed_remembers_across_sessions(
    capture: CaptureRig, graph: Graph, codex_bin: Path, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    project_id = resolve_project({}, {}, fallback=project).id
    graph.write(
        "MERGE (p:Project {id: $p}) MERGE (l:Learning {id: 'learning:e2e:codex-seeded'}) "
        "SET l.text = $text, l.status = 'approved', l.scope = 'project', l.project_id = $p, l.kind = 'fact', "
        "l.confidence = 0.9 MERGE (p)-[:HAS_LEARNING]->(l)",
        {"p": project_id, "text": SEEDED},
    )
    fake = FakeResponses()
    fake.call_tool("remember", "project_add_learning", say=SAVE_SAID, text=NEW, scope="project")
    (project / "DEPLOY.md").write_text("Deploys happen on Fridays after the freeze.\n")
    fake.call_tool("production", "exec_command", say=READ_SAID, cmd="cat DEPLOY.md")
    fake.call_tool("freeze-note", "project_add_learning", text=GATED, scope="project")
    fake.call_tool("context-check", "project_get_context", query="deploy")
    with fake.running():
        (home / ".codex" / "config.toml").write_text(fake.config_toml())
        env = _env(capture, fake, home, codex_bin)
        # The worker runs before the install, as it does for a user (the install starts it): the
        # install keeps the MCP server's first answers from it.
        capture.env = env
        capture.start_worker()
        log = Path(capture.paths.log)
        capture.wait_for(
            lambda: log.exists() and "schema applied" in log.read_text(), 120, "the worker to connect"
        )
        installed = subprocess.run(
            [str(BIN_DIR / "mkg"), "codex", "install"], env=env, cwd=project, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stdout + installed.stderr
        assert "recorded trust for 9 hooks" in installed.stdout
        assert "answered from the worker" in installed.stdout

        # Five sessions while every core is busy. Codex waits only about a second for an MCP server
        # before its first model request: MKG's tools are in it because its server answers
        # initialize and tools/list from the answers the install kept, without waiting for the worker.
        with cpu_burners():
            items = _run(
                codex_bin,
                env,
                project,
                "Which cluster is staging? Please remember that we deploy on Fridays.",
            )
            bodies = fake.bodies()
            assert any(SEEDED in body for body in bodies)  # recalled memory reached the model
            # the MCP tools are offered (as a namespace) from the first request on
            assert TOOLS in first_model_request(bodies, MODEL_REQUEST), json.dumps(items)[:3000]
            calls = [i["item"] for i in items if i.get("type") == "item.completed"
                     and i.get("item", {}).get("type") == "mcp_tool_call"]  # fmt: skip
            assert calls and calls[0]["tool"] == "project_add_learning", items
            notices = [i["item"]["message"] for i in items if i.get("item", {}).get("type") == "error"]
            expected = ("clamping SessionEnd hook timeout", "Model metadata for `fake-model`")
            assert all(n.startswith(expected) for n in notices), notices  # no hook failed or timed out

            capture.wait_drained()
            sessions = graph.read(
                "MATCH (:Project {id: $p})-[:HAS_SESSION]->(s:Session) "
                "RETURN [(s)-[:HAS_EVENT]->(e) | e.event_name] AS events, "
                "COUNT { (s)-[:HAS_EVENT]->() } AS n, COUNT { (s)-[:HAS_EVENT]->()-[:NEXT]->() } AS links",
                {"p": project_id},
            )
            assert len(sessions) == 1
            assert set(sessions[0]["events"]) >= EVENTS and sessions[0]["links"] == sessions[0]["n"] - 1
            tool_keys = graph.read(
                "MATCH (e:SessionEvent {event_name: 'PostToolUse'}) RETURN collect(e.tool_key) AS keys"
            )[0]["keys"]
            assert "project_add_learning" in tool_keys
            learned = graph.read(
                "MATCH (:Project {id: $p})-[:HAS_LEARNING]->(l:Learning {text: $t}) "
                "RETURN l.status AS status, COUNT { (l)-[:FROM_SESSION {via: 'mcp'}]->(:Session)"
                "<-[:HAS_SESSION]-(:Project {id: $p}) } AS sessions",
                {"p": project_id, "t": NEW},
            )
            assert learned == [{"status": "candidate", "sessions": 1}]  # from the session that wrote it

            seen = len(fake.bodies())
            _run(codex_bin, env, project, "When does the team deploy to production?")
            # the second session sees the first's memory
            assert any(NEW in body for body in fake.bodies()[seen:])
            assert TOOLS in first_model_request(fake.bodies()[seen:], MODEL_REQUEST)
            for number in range(3, 6):
                seen = len(fake.bodies())
                _run(codex_bin, env, project, f"Session {number}: what do we know about the staging cluster?")
                assert TOOLS in first_model_request(fake.bodies()[seen:], MODEL_REQUEST), number
        capture.wait_drained()

        # Approval: with a sandbox that is not full access, Codex applies each tool's approval_mode.
        # `codex exec` cannot ask anyone, so a tool that needs approval is not run (the model is told
        # why); the other MKG tools run without asking.
        def mcp_calls(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [i["item"] for i in items if i.get("type") == "item.completed"
                    and i.get("item", {}).get("type") == "mcp_tool_call"]  # fmt: skip

        seen = len(fake.bodies())
        [gated] = mcp_calls(
            _run(codex_bin, env, project, "freeze-note: keep this for later", "-s", "read-only")
        )
        assert gated["tool"] == "project_add_learning" and gated["status"] == "failed", gated
        assert gated["arguments"]["text"] == GATED
        assert APPROVAL in gated["error"]["message"]
        assert any(APPROVAL in body for body in fake.bodies()[seen:])  # the model was told
        assert graph.read("MATCH (l:Learning {text: $t}) RETURN l", {"t": GATED}) == []
        [free] = mcp_calls(
            _run(codex_bin, env, project, "context-check: what do we know?", "-s", "read-only")
        )
        assert free["tool"] == "project_get_context" and free["status"] == "completed", free
        capture.wait_drained()

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
            {"tool": "Bash", "said": READ_SAID},
            {"tool": "project_add_learning", "said": SAVE_SAID},
        ]
