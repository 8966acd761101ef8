"""A team on one database: capture throughput and recall latency with 1, 3 and 6 workers.

Each worker is a user of its own (own state folder, own ``mkg worker``), all on one project of one
Neo4j holding ``--learnings`` approved project learnings. Per worker count: every worker's hooks
send ``--events`` events (PreToolUse and PostToolUse of two sessions per worker, driven in
parallel), and the time until the graph holds all of them gives the capture throughput; then each
worker answers ``--prompts`` UserPromptSubmit hooks and the hook's wall time is the recall latency
a user feels (the worker's answer included). No LLM, no embeddings (fulltext recall).

    .venv/bin/python benchmarks/team.py --workers 1,3,6 --out benchmarks/results/team.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from report import machine, save  # noqa: E402

from mkg_core import runtime  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.testing import BIN_DIR, reset_database, scratch_neo4j, stop_worker  # noqa: E402

PROJECT = "team-bench"
WORDS = ["deploy", "billing", "cluster", "staging", "schema", "migration", "cache", "queue", "worker",
         "index", "token", "build", "release"]  # fmt: skip


def _seed(graph: Graph, count: int) -> None:
    graph.write(
        "MERGE (p:Project {id: $p}) WITH p UNWIND range(1, $n) AS i "
        "CREATE (p)-[:HAS_LEARNING]->(:Learning {id: 'team-' + i, scope: 'project', project_id: $p, "
        "status: 'approved', kind: 'fact', confidence: 0.8, created_at: datetime(), "
        "text: 'Note ' + i + ': the ' + $w[i % size($w)] + ' step needs the ' + $w[(i * 7) % size($w)] "
        "+ ' check.'})",
        {"p": PROJECT, "n": count, "w": WORDS},
    )


def _hook(env: dict[str, str], event: str, payload: dict[str, Any]) -> float:
    started = time.monotonic()
    subprocess.run(
        [str(BIN_DIR / "mkg-hook"), "--client", "claude", event],
        input=json.dumps({"hook_event_name": event, **payload}).encode(),
        env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    return time.monotonic() - started


def run(base: dict[str, str], graph: Graph, workers: int, events: int, prompts: int) -> dict[str, Any]:
    folders = [Path(tempfile.mkdtemp(prefix="mkg-team-bench-")) for _ in range(workers)]
    envs = [
        {**base, "MKG_STATE_DIR": str(f), "MKG_USER_ID": f"user{n}@team.example", "MKG_PROJECT_ID": PROJECT,
         "MKG_WORKER_AUTOSTART": "0", "MKG_HOOK_DEADLINE_PROMPT": "10", "EMBEDDING_MODEL": "none",
         "MKG_EXTRACTION": "0"}
        for n, f in enumerate(folders)
    ]  # fmt: skip
    procs = [
        subprocess.Popen([str(BIN_DIR / "mkg"), "worker"], env=env, stderr=subprocess.DEVNULL) for env in envs
    ]
    try:
        time.sleep(3)
        before = graph.read("MATCH (e:SessionEvent) RETURN count(e) AS n")[0]["n"]
        started = time.monotonic()

        def send(n: int, session: int) -> None:
            for i in range(events // 2):
                payload = {
                    "session_id": f"bench-{workers}-{n}-{session}",
                    "tool_name": "Bash",
                    "tool_input": {"command": f"make {i}"},
                    "tool_use_id": f"{n}-{session}-{i}",
                }
                _hook(envs[n], "PreToolUse" if i % 2 else "PostToolUse", payload)

        threads = [threading.Thread(target=send, args=(n, s)) for n in range(workers) for s in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        expected = before + workers * 2 * (events // 2)
        while graph.read("MATCH (e:SessionEvent) RETURN count(e) AS n")[0]["n"] < expected:
            time.sleep(0.2)
        took = time.monotonic() - started
        latencies: list[float] = []
        lock = threading.Lock()

        def ask(n: int) -> None:
            for i in range(prompts):
                payload = {
                    "session_id": f"ask-{workers}-{n}-{i}",
                    "prompt": f"How do the {WORDS[i % 13]} and cache steps work?",
                }
                took_one = _hook(envs[n], "UserPromptSubmit", payload)
                with lock:
                    latencies.append(took_one)

        threads = [threading.Thread(target=ask, args=(n,)) for n in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        latencies.sort()
        return {
            "workers": workers,
            "events": expected - before,
            "capture_seconds": round(took, 2),
            "events_per_second": round((expected - before) / took, 1),
            "prompt_hook_p50_ms": round(statistics.median(latencies) * 1000, 1),
            "prompt_hook_p95_ms": round(latencies[int(len(latencies) * 0.95)] * 1000, 1),
        }
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        for folder in folders:
            stop_worker(runtime.Paths(str(folder)))
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,3,6")
    parser.add_argument("--events", type=int, default=120, help="events per worker")
    parser.add_argument("--prompts", type=int, default=30, help="prompts per worker")
    parser.add_argument("--learnings", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    with scratch_neo4j(os.environ) as env:
        settings = load_settings(environ=env)
        with Graph.connect(settings) as graph:
            reset_database(graph)
            subprocess.run([str(BIN_DIR / "mkg"), "schema", "apply"], env={**env, "EMBEDDING_MODEL": "none"},
                           capture_output=True, check=True)  # fmt: skip
            _seed(graph, args.learnings)
            for count in (int(n) for n in args.workers.split(",")):
                results.append(run(env, graph, count, args.events, args.prompts))
                print(json.dumps(results[-1]), flush=True)
    save(args.out, {"machine": machine(), "learnings": args.learnings, "runs": results})


if __name__ == "__main__":
    main()
