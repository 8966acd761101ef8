"""The episode tools over a timeline that extraction wrote: real hooks, worker and Neo4j, the real
litellm client against the local fake model server, and the MCP server through the SDK's client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mkg_core.graph import Graph
from mkg_core.testing import CaptureRig, mcp_call, mcp_server, mcp_session
from mkg_core.testing.fakellm import FakeLLM

pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
PROJECT, USER = "episode-test", "ana@example.com"
IDENTITY = {"MKG_PROJECT_ID": PROJECT, "MKG_USER_ID": USER}
LINT = "Run make lint before pushing; CI rejects unformatted code."


def _hook(rig: CaptureRig, event: str, session: str, **changes: object) -> None:
    payload = {**json.loads((CLAUDE / f"{event}.json").read_text()), "session_id": session, **changes}
    result = rig.hook("claude", event, payload, env=IDENTITY)
    assert result.returncode == 0, result.stderr


def _session(
    rig: CaptureRig, fake: FakeLLM, session: str, prompt: str, learnings: list, episode: dict
) -> None:
    fake.reply({"learnings": learnings}, when="long-term memory", times=1)  # words only these prompts have
    fake.reply({"observations": [episode]}, when="episodic timeline", times=1)
    _hook(rig, "UserPromptSubmit", session, prompt=prompt)
    _hook(rig, "Stop", session, last_assistant_message="Done.")
    rig.drain()


def _call(env: dict[str, str], name: str, **arguments: Any) -> tuple[bool, Any]:
    return mcp_session(mcp_server(env), lambda client: mcp_call(client, name, **arguments))


@pytest.fixture
def timeline(capture: CaptureRig, graph: Graph, fake_llm: FakeLLM) -> dict[str, str]:
    """Two sessions, each leaving one episode; the first also a learning."""
    capture.env.update({**fake_llm.env(), "MKG_CONSISTENCY_GATE": "0"})
    lint = {"action": "create", "scope": "project", "kind": "fact", "text": LINT, "confidence": 0.8}
    _session(capture, fake_llm, "e-1", "Set up linting for the repository", [lint], {
        "type": "change", "title": "Set up linting", "facts": ["added make lint", "CI runs it"],
        "narrative": "The user asked for linting. A make lint target was added and CI now runs it.",
    })  # fmt: skip
    _session(capture, fake_llm, "e-2", "Why does the staging deploy fail?", [], {
        "type": "bugfix", "title": "Fixed the staging deploy",
        "facts": ["the helm chart named a missing secret"],
        "narrative": "Staging deploys failed on a missing secret in the helm chart; the secret was added.",
    })  # fmt: skip
    rows = graph.read(
        "MATCH (:Project {id: $p})-[:HAS_OBSERVATION]->(o:Observation) RETURN o.title AS title, o.id AS id",
        {"p": PROJECT},
    )
    assert len(rows) == 2, rows
    return {"env": json.dumps({**capture.env, **IDENTITY, "MKG_WORKER_AUTOSTART": "1"}),
            **{row["title"]: row["id"] for row in rows}}  # fmt: skip


def test_episode_search_then_fetch_over_one_timeline(timeline: dict[str, str]) -> None:
    """One timeline (two sessions through extraction, the slow part) serves both tools."""
    _search_finds_the_work_asked_about(timeline)
    _fetch_reads_one_whole_and_pages_the_timeline(timeline)


def _search_finds_the_work_asked_about(timeline: dict[str, str]) -> None:
    env = json.loads(timeline["env"])
    error, found = _call(env, "episode_search", query="why did the helm deploy to staging break?")
    assert not error, found
    assert found["project_id"] == PROJECT and found["count"] >= 1
    first = found["episodes"][0]
    assert first["id"] == timeline["Fixed the staging deploy"] and "fulltext" in first["sources"]
    assert first["type"] == "bugfix" and first["snippet"].startswith("Staging deploys failed")
    assert first["session_id"] == "e-2" and first["user_id"] == USER

    error, recent = _call(env, "episode_search")  # no query: the most recent first
    assert not error and [e["title"] for e in recent["episodes"]] == [
        "Fixed the staging deploy",
        "Set up linting",
    ]
    assert all(e["sources"] == ["recent"] for e in recent["episodes"])
    error, elsewhere = _call(env, "episode_search", query="helm staging", project_id="another-project")
    assert not error and elsewhere["count"] == 0


def _fetch_reads_one_whole_and_pages_the_timeline(timeline: dict[str, str]) -> None:
    env = json.loads(timeline["env"])
    lint, deploy = timeline["Set up linting"], timeline["Fixed the staging deploy"]
    error, episode = _call(env, "episode_fetch", episode_id=lint)
    assert not error, episode
    assert episode["facts"] == ["added make lint", "CI runs it"] and episode["narrative"].startswith(
        "The user"
    )
    assert (episode["prev_id"], episode["next_id"]) == (None, deploy)
    assert [(item["text"], item["status"]) for item in episode["produced_learnings"]] == [(LINT, "candidate")]
    error, later = _call(env, "episode_fetch", episode_id=deploy)
    assert not error and (later["prev_id"], later["next_id"], later["produced_learnings"]) == (lint, None, [])

    error, page = _call(env, "episode_fetch", limit=1)
    assert not error and page["mode"] == "latest" and page["total"] == 2
    assert [e["id"] for e in page["episodes"]] == [deploy] and page["next"] == deploy
    error, older = _call(env, "episode_fetch", before=page["next"], limit=1)
    assert not error and older["mode"] == "before" and [e["id"] for e in older["episodes"]] == [lint]
    error, last = _call(env, "episode_fetch", before=lint, limit=1)
    assert not error and last["count"] == 0 and last["next"] is None

    error, message = _call(env, "episode_fetch", episode_id="observation:nope")
    assert error and "no episode 'observation:nope'" in message and "episode_search" in message
    error, message = _call(env, "episode_fetch", episode_id=lint, project_id="another-project")
    assert error and "no episode" in message  # another project's timeline is not this one's
