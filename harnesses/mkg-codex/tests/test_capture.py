"""Codex events through the real hook and worker into Neo4j: spawned agents and rollout subagents."""

from __future__ import annotations

import json
from pathlib import Path

from mkg_core.graph import Graph
from mkg_core.testing import CaptureRig

CODEX = Path(__file__).parent / "payloads"
CHILD = "01a23653-aaaa-7c83-bdc7-808728703699"


def _payload(folder: Path, event: str, **changes: object) -> dict:
    return {**json.loads((folder / f"{event}.json").read_text()), **changes}


def test_codex_spawned_agent_is_triggered_by_the_spawn_result(capture: CaptureRig, graph: Graph) -> None:
    base = _payload(CODEX, "PostToolUse")
    spawn = {**base, "tool_name": "spawn_agent", "tool_response": {"agent_id": CHILD, "nickname": "scout"}}
    capture.hook("codex", "PostToolUse", spawn)
    rollout = f"/home/dev/.codex/sessions/2026/12/02/rollout-2026-12-02T10-40-00-{CHILD}.jsonl"
    capture.hook("codex", "PreToolUse", {**_payload(CODEX, "PreToolUse"), "transcript_path": rollout})
    capture.drain()
    [row] = graph.read(
        "MATCH (p:Session {session_id: $parent})-[:HAS_SUBAGENT]->(c:Session {session_id: $child}) "
        "MATCH (c)-[:TRIGGERED_BY]->(e:SessionEvent)<-[:HAS_EVENT]-(p) "
        "MATCH (c)-[:HAS_EVENT]->(inside:SessionEvent) "
        "RETURN e.tool_key AS tool, e.spawned_agent_id AS spawned, inside.event_name AS inside",
        {"parent": base["session_id"], "child": CHILD},
    )
    assert row == {"tool": "spawn_agent", "spawned": CHILD, "inside": "PreToolUse"}
