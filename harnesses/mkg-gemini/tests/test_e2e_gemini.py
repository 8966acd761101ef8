"""The real Gemini CLI (from npm, pinned) with MKG installed by ``mkg gemini install``.

A local fake Gemini API answers the model calls; the graph is the test Neo4j. Nothing on MKG's side
is mocked: the CLI runs the linked extension's hooks (``mkg-hook``) and MCP server
(``meta-knowledge-graph``), and a worker moves the events into the graph.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mkg_core.graph import Graph
from mkg_core.identity import resolve_project
from mkg_core.testing import BIN_DIR, NPM_TOOLS, CaptureRig, first_model_request
from mkg_core.testing.fakemodels import FakeGemini

pytestmark = pytest.mark.e2e

ADD_LEARNING = "mcp_meta-knowledge-graph_project_add_learning"
SEEDED = "The staging cluster is called bluefin-staging."
NEW = "The team deploys to production on Fridays."
SAVE_SAID = "I will keep the deploy day in project memory."
EVENTS = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"}


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return NPM_TOOLS["gemini"].path()


def _env(capture: CaptureRig, fake: FakeGemini, home: Path, gemini: Path) -> dict[str, str]:
    config = home / ".config" / "meta-knowledge-graph"
    config.mkdir(parents=True)
    settings = {key: capture.env[key] for key in ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD")}
    settings.update({"EMBEDDING_MODEL": "none", "MKG_EXTRACTION": "0"})
    (config / ".env").write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return {
        "PATH": f"{BIN_DIR}:/usr/bin:/bin",
        "HOME": str(home),
        "MKG_CONFIG_DIR": str(config),
        "MKG_STATE_DIR": capture.paths.root,
        "MKG_DATA_DIR": str(home / ".local" / "share" / "meta-knowledge-graph"),
        "MKG_WORKER_AUTOSTART": "0",
        "MKG_GEMINI_BIN": str(gemini),
        # pinned into the installed hooks: answers on a busy machine may take a few seconds
        "MKG_HOOK_DEADLINE_SESSION_START": "8",
        "MKG_HOOK_DEADLINE_PROMPT": "8",
        **fake.env(),
    }


def _run(gemini: Path, env: dict[str, str], cwd: Path, prompt: str) -> dict[str, Any]:
    result = subprocess.run(
        [str(gemini), "-m", FakeGemini.model, "-o", "json", "--allowed-tools", ADD_LEARNING, "-p", prompt],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Hook execution error" not in result.stderr, result.stderr[-3000:]  # every hook ran fine
    return json.loads(result.stdout[result.stdout.index("{") :])


def test_gemini_cli_with_mkg_installed_remembers_across_sessions(
    capture: CaptureRig, graph: Graph, gemini_bin: Path, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    project_id = resolve_project({}, {}, fallback=project).id
    graph.write(
        "MERGE (p:Project {id: $p}) MERGE (l:Learning {id: 'learning:e2e:gemini-seeded'}) "
        "SET l.text = $text, l.status = 'approved', l.scope = 'project', l.project_id = $p, l.kind = 'fact', "
        "l.confidence = 0.9 MERGE (p)-[:HAS_LEARNING]->(l)",
        {"p": project_id, "text": SEEDED},
    )
    fake = FakeGemini()
    fake.call_tool("remember", "project_add_learning", say=SAVE_SAID, text=NEW, scope="project")
    with fake.running():
        (home / ".gemini" / "settings.json").write_text(json.dumps(fake.settings()))
        env = _env(capture, fake, home, gemini_bin)
        installed = subprocess.run(
            [str(BIN_DIR / "mkg"), "gemini", "install"], env=env, cwd=project, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stdout + installed.stderr
        listed = subprocess.run(
            [str(gemini_bin), "extensions", "list"],
            env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert "meta-knowledge-graph" in listed.stdout + listed.stderr

        capture.env = env
        capture.start_worker()
        log = Path(capture.paths.log)
        capture.wait_for(
            lambda: log.exists() and "schema applied" in log.read_text(), 120, "the worker to connect"
        )

        answer = _run(
            gemini_bin, env, project, "Which cluster is staging? Please remember that we deploy on Fridays."
        )
        bodies = fake.bodies()
        assert ADD_LEARNING in first_model_request(bodies, '"contents"')  # the MCP tools are offered
        assert any(SEEDED in body for body in bodies)  # recalled memory reached the model
        assert any("functionResponse" in body and NEW in body for body in bodies), (
            answer
        )  # the call went through

        capture.wait_drained()
        sessions = graph.read(
            "MATCH (:Project {id: $p})-[:HAS_SESSION]->(s:Session) "
            "RETURN s.client AS client, [(s)-[:HAS_EVENT]->(e) | e.event_name] AS events, "
            "COUNT { (s)-[:HAS_EVENT]->() } AS n, COUNT { (s)-[:HAS_EVENT]->()-[:NEXT]->() } AS links",
            {"p": project_id},
        )
        assert len(sessions) == 1 and sessions[0]["client"] == "gemini"
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
        _run(gemini_bin, env, project, "When does the team deploy to production?")
        assert any(NEW in body for body in fake.bodies()[seen:])  # the second session sees the first's memory
        capture.wait_drained()

        # The turn and tool-call projection, from the events and Gemini's own transcript.
        enriched = subprocess.run(
            [str(BIN_DIR / "mkg"), "enrich", "--all"], env=env, capture_output=True, text=True, timeout=300
        )
        assert enriched.returncode == 0, enriched.stdout + enriched.stderr
        said = graph.read(
            "MATCH (:Turn)-[:ISSUED]->(c:ToolCall)-[:HAS_RATIONALE]->(r:ToolRationale) "
            "RETURN c.tool_key AS tool, r.text AS said"
        )
        assert {"tool": "project_add_learning", "said": SAVE_SAID} in said

        removed = subprocess.run(
            [str(BIN_DIR / "mkg"), "gemini", "uninstall"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert removed.returncode == 0, removed.stdout + removed.stderr
