"""Extraction cost per session window: LLM calls, prompt and completion tokens.

Sessions go through the real ``mkg-hook`` and ``mkg worker`` into a real Neo4j, and the worker's
extraction job calls the local fake OpenAI-compatible server (``mkg_core.testing.fakellm``) through litellm.
The figures are the ones the job records on each window's ``:ProjectProcessing`` node, from
litellm's usage; the fake server counts a token per 4 characters, as MKG's own budget does.

Sessions:

- the captured Claude Code and Codex sessions under ``harnesses/*/tests/session/`` (short, real);
- synthetic Claude Code sessions, each turn a prompt, three tool calls with 4 KB results and an
  answer: 1 and 10 turns with the worker running after every Stop (one window a turn, as in daily
  use), and 10 and 40 turns with the worker down until the end (long windows, which show the
  corpus budget ``MKG_EXTRACTION_CORPUS_TOKENS`` at work).

The consistency gate is off, so only extraction's two calls per window are counted.

    .venv/bin/python benchmarks/extraction_cost.py --json benchmarks/results/extraction_cost.json

Uses ``NEO4J_URI`` when set (the database is emptied), else starts a dev Neo4j with a throw-away store.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from report import machine, save  # noqa: E402

from mkg_core import runtime  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.schema import apply_schema, core_statements  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.testing import CaptureRig, reset_database, scratch_neo4j  # noqa: E402
from mkg_core.testing.fakellm import FakeLLM  # noqa: E402

CAPTURED = {h: ROOT / "harnesses" / f"mkg-{h}" / "tests" / "session" for h in ("claude", "codex")}
PAYLOADS = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
PROJECT = "extraction-cost"

LEARNINGS = {
    "learnings": [
        {
            "action": "create",
            "scope": "project",
            "kind": "fact",
            "text": "Deploys go out on Fridays.",
            "confidence": 0.8,
        }
    ]
}
OBSERVATIONS = {
    "observations": [
        {
            "type": "change",
            "title": "Deploy notes read",
            "facts": ["read the deploy notes"],
            "narrative": "The user asked about deploys. The notes were read. Done.",
        }
    ]
}

WINDOWS = """
MATCH (p:ProjectProcessing {session_id: $session_id})
RETURN p.event_count AS events, p.llm_calls AS calls, p.prompt_tokens AS prompt_tokens,
       p.completion_tokens AS completion_tokens, p.llm_status AS status
"""


def captured(rig: CaptureRig, harness: str, home: Path) -> list[str]:
    """Replay one CLI's captured session; its session ids."""
    folder = CAPTURED[harness]
    sessions: list[str] = []
    for line in (folder / "hooks.jsonl").read_text().splitlines():
        record = json.loads(line)
        payload = record["payload"]
        if payload["session_id"] not in sessions:
            sessions.append(payload["session_id"])
        name = Path(payload["transcript_path"]).name
        (home / name).write_bytes((folder / "transcripts" / name).read_bytes())
        payload["transcript_path"] = str(home / name)
        rig.hook(harness, record["event"], payload)
    return sessions


def synthetic(rig: CaptureRig, session: str, turns: int, *, live: bool) -> list[str]:
    """A Claude Code session of ``turns`` turns, each with three 4 KB tool results. ``live``: the
    worker runs after every Stop (one window a turn), else once at the end (the worker was down)."""

    def send(event: str, **changes: object) -> None:
        payload = {**json.loads((PAYLOADS / f"{event}.json").read_text()), "session_id": session, **changes}
        rig.hook("claude", event, payload)

    send("SessionStart")
    for turn in range(turns):
        send("UserPromptSubmit", prompt=f"Turn {turn}: check the deploy notes and the release checklist")
        for call in range(3):
            use = f"toolu_{session}_{turn}_{call}"
            command = {"command": f"cat docs/deploy-{turn}-{call}.md"}
            send("PreToolUse", tool_name="Bash", tool_input=command, tool_use_id=use)
            output = f"line {call} of the deploy notes for turn {turn}: release steps and checks\n" * 50
            send(
                "PostToolUse",
                tool_name="Bash",
                tool_input=command,
                tool_use_id=use,
                tool_response={"stdout": output[:4096], "stderr": "", "interrupted": False},
            )
        send("Stop", last_assistant_message=f"Turn {turn} done: the deploy notes say Fridays.")
        if live:
            rig.drain()
    return [session]


def measure(rig: CaptureRig, graph: Graph, sessions: list[str]) -> dict[str, Any]:
    rig.drain()
    rows = [row for session in sessions for row in graph.read(WINDOWS, {"session_id": session})]
    if not rows or any(row["status"] != "called" for row in rows):
        raise SystemExit(f"extraction did not run as expected: {rows}")
    return {
        "windows": len(rows),
        "events": sum(row["events"] for row in rows),
        "llm_calls": sum(row["calls"] for row in rows),
        "prompt_tokens": sum(row["prompt_tokens"] for row in rows),
        "completion_tokens": sum(row["completion_tokens"] for row in rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="out", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    budget = load_settings(environ={}, project_root=tempfile.gettempdir()).extraction_corpus_tokens
    print(
        f"{machine()}, corpus budget {budget} tokens",
        file=sys.stderr,
    )
    results: dict[str, Any] = {"corpus_budget_tokens": budget, "sessions": {}}
    with (
        scratch_neo4j(os.environ) as environ,
        FakeLLM().running() as fake,
        tempfile.TemporaryDirectory(prefix="mkg-cost-") as tmp,
    ):
        fake.reply(LEARNINGS, when="long-term memory")
        fake.reply(OBSERVATIONS, when="episodic timeline")
        settings = load_settings(environ=environ, project_root=tmp)
        with Graph.connect(settings) as graph:
            reset_database(graph)
            apply_schema(graph, core_statements(settings.embedding_dimensions))
            env = {
                **environ,
                **fake.env(),
                "HOME": tmp,
                "MKG_STATE_DIR": str(Path(tmp) / "state"),
                "MKG_WORKER_AUTOSTART": "0",
                "MKG_PROJECT_ID": PROJECT,
                "EMBEDDING_MODEL": "none",
                "MKG_CONSISTENCY_GATE": "0",
            }
            rig = CaptureRig(env=env, paths=runtime.Paths(env["MKG_STATE_DIR"]))
            cases: dict[str, Any] = {
                "claude (captured)": lambda: captured(rig, "claude", Path(tmp)),
                "codex (captured)": lambda: captured(rig, "codex", Path(tmp)),
            }
            for turns, live in ((1, True), (10, True), (10, False), (40, False)):
                session = f"cost-{turns}-{'live' if live else 'late'}"
                name = f"{turns} turns, {'worker live' if live else 'worker late'}"
                cases[name] = lambda s=session, n=turns, w=live: synthetic(rig, s, n, live=w)
            try:
                for name, replay in cases.items():
                    row = measure(rig, graph, replay())
                    results["sessions"][name] = row
                    per = row["prompt_tokens"] / row["windows"]
                    print(
                        f"{name:24} {row['windows']} window(s), {row['events']:4} events, "
                        f"{row['llm_calls']} calls, prompt {row['prompt_tokens']:6} tokens "
                        f"({per:,.0f} per window), completion {row['completion_tokens']}"
                    )
            finally:
                rig.close()
    save(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
