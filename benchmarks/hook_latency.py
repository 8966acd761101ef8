"""Hook latency: the wall time of the whole ``mkg-hook`` process, as a harness runs it.

Side by side in one run, per event type: MKG's hook (with a warm worker), a no-op Python hook
(``python -c`` that reads stdin) and a naive hook that imports the Neo4j driver and writes the
event itself. Also: how fast the worker drains a backlog, how long until a captured event is
in the graph, how long the answering hooks take while Neo4j is down, and the first answers of a
worker started on a Neo4j that has planned nothing yet. Starts its own dev Neo4j
(MKG's launcher) with a throw-away store holding 10k learnings.

    .venv/bin/python benchmarks/hook_latency.py --n 200 --out benchmarks/results/hook_latency.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from report import save  # noqa: E402

from mkg_core import hook, runtime  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.spool import Spool  # noqa: E402
from mkg_core.testing import BIN_DIR, Neo4jServer, start_dev_neo4j  # noqa: E402

PAYLOADS = {
    "claude": ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads",
    "codex": ROOT / "harnesses" / "mkg-codex" / "tests" / "payloads",
}
NOOP = [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"]
NAIVE = [sys.executable, str(Path(__file__).with_name("naive_hook.py"))]


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def timed(argv: list[str], data: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, input=data, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {result.stderr.decode()[-500:]}")
    return elapsed


def cases() -> list[tuple[str, str, str, bytes]]:
    """(label, client, event, payload) for every captured payload and three synthetic sizes."""
    found = []
    for client, folder in PAYLOADS.items():
        for path in sorted(folder.glob("*.json")):
            found.append((f"{client}/{path.stem}", client, path.stem, path.read_bytes()))
    base = json.loads((PAYLOADS["claude"] / "PostToolUse.json").read_text())
    for label, size in (("1KB", 1024), ("64KB", 64 * 1024), ("1MB", 1024 * 1024)):
        payload = {**base, "tool_response": "r" * size}
        found.append(
            (f"synthetic/PostToolUse-{label}", "claude", "PostToolUse", json.dumps(payload).encode())
        )
    return found


def seed_learnings(graph: Graph, count: int) -> None:
    graph.run_autocommit(
        "UNWIND range(1, $count) AS i "
        "CALL (i) { CREATE (:Learning {id: 'bench:' + i, text: 'learning number ' + i, "
        "project_id: 'bench-' + (i % 100), scope: 'project', status: 'approved'}) } "
        "IN TRANSACTIONS OF 5000 ROWS",
        {"count": count},
    )


def wait_drained(paths: runtime.Paths, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with Spool(paths.spool) as spool:
            if spool.counts()["pending"] == 0:
                return
        time.sleep(0.02)
    raise SystemExit("the spool did not drain")


def drain_rate(paths: runtime.Paths, env: dict[str, str], count: int) -> dict[str, float]:
    """Spool ``count`` events with no worker running, then time a fresh worker draining them."""
    subprocess.run([str(BIN_DIR / "mkg"), "worker", "stop"], env=env, capture_output=True, check=True)
    payload = (PAYLOADS["claude"] / "PostToolUse.json").read_bytes()
    quiet = {**env, "MKG_WORKER_AUTOSTART": "0"}
    for index in range(count):
        data = json.loads(payload)
        data["tool_use_id"] = f"drain-{index}"
        hook.main(
            ["--client", "claude", "PostToolUse"], stdin=io.BytesIO(json.dumps(data).encode()), environ=quiet
        )
    subprocess.run([str(BIN_DIR / "mkg"), "worker", "start"], env=env, capture_output=True, check=True)
    with Spool(paths.spool) as spool:
        first_done = None
        started = time.monotonic()
        while True:
            counts = spool.counts()
            if first_done is None and counts["done"] > 0:
                first_done = time.monotonic()
            if counts["pending"] == 0:
                break
            time.sleep(0.01)
    finished = time.monotonic()
    measured_from = first_done or started
    return {
        "events": count,
        "seconds_including_worker_start": round(finished - started, 2),
        "events_per_second": round(count / max(finished - measured_from, 1e-6), 1),
    }


def visibility(paths: runtime.Paths, env: dict[str, str], repeats: int) -> dict[str, float]:
    """From the hook's start until the worker has committed the event to the graph."""
    payload = json.loads((PAYLOADS["claude"] / "PreToolUse.json").read_text())
    samples = []
    for index in range(repeats):
        payload["tool_use_id"] = f"visible-{index}"
        started = time.perf_counter()
        subprocess.run(
            [str(BIN_DIR / "mkg-hook"), "--client", "claude", "PreToolUse"],
            input=json.dumps(payload).encode(),
            env=env,
            check=True,
        )
        with Spool(paths.spool) as spool:
            seq = spool.db.execute("SELECT max(seq) FROM events").fetchone()[0]
            while spool.state_of(seq) != "done":
                time.sleep(0.002)
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def outage(server: Neo4jServer, env: dict[str, str], repeats: int) -> dict[str, dict[str, float]]:
    """The answering hooks while Neo4j is down, with their default deadlines: the first finds the
    outage (and may wait its deadline), the worker answers the others without waiting on it."""
    server.stop()
    try:
        found = {}
        for client, event in (("claude", "UserPromptSubmit"), ("claude", "SessionStart")):
            payload = json.loads((PAYLOADS[client] / f"{event}.json").read_text())
            argv = [str(BIN_DIR / "mkg-hook"), "--client", client, event]
            samples = []
            for index in range(repeats):
                payload["session_id"] = f"outage-{index}"
                samples.append(timed(argv, json.dumps(payload).encode(), env))
            found[f"{client}/{event}"] = percentiles(samples)
    finally:
        server.start()
    return found


def first_answers(env: dict[str, str], settle: float) -> dict[str, float]:
    """The first SessionStart and the first prompt a worker answers, in ms, when it started on a
    Neo4j that has planned nothing yet (just restarted) and had ``settle`` seconds first, as a
    session has between its start and its first prompt."""
    mkg = str(BIN_DIR / "mkg")
    subprocess.run([mkg, "worker", "stop"], env=env, capture_output=True, check=False)
    subprocess.run([mkg, "worker", "start"], env=env, capture_output=True, check=True)
    time.sleep(settle)
    found = {}
    for event in ("SessionStart", "UserPromptSubmit"):
        payload = json.loads((PAYLOADS["claude"] / f"{event}.json").read_text())
        payload["session_id"] = "first-answers"
        argv = [str(BIN_DIR / "mkg-hook"), "--client", "claude", event]
        found[f"claude/{event}_ms"] = round(timed(argv, json.dumps(payload).encode(), env) * 1000, 1)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200, help="runs per event type and variant (default 200)")
    parser.add_argument("--learnings", type=int, default=10_000, help="learnings in the graph (default 10k)")
    parser.add_argument(
        "--drain-events", type=int, default=2000, help="backlog for the drain rate (default 2000)"
    )
    parser.add_argument(
        "--outage-runs", type=int, default=30, help="runs per answering hook with Neo4j down (default 30)"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=20.0,
        help="seconds a worker started on a restarted Neo4j gets before its first answers (default 20)",
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mkg-bench-") as tmp:
        print("starting a dev Neo4j...", file=sys.stderr)
        server = start_dev_neo4j(Path(tmp) / "neo4j")
        try:
            env = {
                **os.environ,
                **server.settings_env(),
                "MKG_STATE_DIR": str(Path(tmp) / "state"),
                "MKG_WORKER_IDLE_SECONDS": "3600",
                "HOME": str(Path(tmp) / "home"),
            }
            os.makedirs(env["HOME"], exist_ok=True)
            paths = runtime.Paths(env["MKG_STATE_DIR"])
            with Graph.connect(load_settings(environ=env)) as graph:
                seed_learnings(graph, args.learnings)
            subprocess.run(
                [str(BIN_DIR / "mkg"), "worker", "start"], env=env, check=True, capture_output=True
            )
            results: dict[str, Any] = {"latency": {}}
            for label, client, event, data in cases():
                samples: dict[str, list[float]] = {"mkg": [], "noop": [], "naive": []}
                mkg = [str(BIN_DIR / "mkg-hook"), "--client", client, event]
                for index in range(args.n):
                    # rotate the order so that machine noise falls on all three alike
                    order = [("mkg", mkg), ("noop", NOOP), ("naive", NAIVE)]
                    for name, argv in order[index % 3 :] + order[: index % 3]:
                        samples[name].append(timed(argv, data, env))
                row = {name: percentiles(values) for name, values in samples.items()}
                row["mkg_over_noop_p50"] = round(row["mkg"]["p50_ms"] / row["noop"]["p50_ms"], 2)
                row["naive_over_mkg_p50"] = round(row["naive"]["p50_ms"] / row["mkg"]["p50_ms"], 2)
                results["latency"][label] = row
                print(
                    f"{label:32} mkg {row['mkg']}  noop {row['noop']}  naive {row['naive']}", file=sys.stderr
                )
                wait_drained(paths)
            results["visibility"] = visibility(paths, env, min(args.n, 50))
            results["drain"] = drain_rate(paths, env, args.drain_events)
            if args.outage_runs:
                results["outage"] = outage(server, env, args.outage_runs)
                results["first_answers"] = first_answers(env, args.settle)
            subprocess.run(
                [str(BIN_DIR / "mkg"), "worker", "stop"], env=env, capture_output=True, check=False
            )
        finally:
            server.stop()
    results["machine"] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "n": args.n,
        "learnings": args.learnings,
    }
    print(render(results))
    save(args.out, results)


def render(results: dict[str, Any]) -> str:
    lines = [
        "| event | mkg p50 / p95 / max (ms) | no-op python p50 / p95 | naive driver p50 / p95 "
        "| mkg ÷ no-op | naive ÷ mkg |",
        "|---|---|---|---|---|---|",
    ]
    for label, row in results["latency"].items():
        m, o, n = row["mkg"], row["noop"], row["naive"]
        lines.append(
            f"| {label} | {m['p50_ms']} / {m['p95_ms']} / {m['max_ms']} | {o['p50_ms']} / {o['p95_ms']} "
            f"| {n['p50_ms']} / {n['p95_ms']} | {row['mkg_over_noop_p50']} | {row['naive_over_mkg_p50']} |"
        )
    v, d = results["visibility"], results["drain"]
    lines.append("")
    lines.append(
        f"Time to visibility in the graph (hook start to committed): p50 {v['p50_ms']} ms,"
        f" p95 {v['p95_ms']} ms"
    )
    lines.append(f"Drain rate: {d['events_per_second']} events/s ({d['events']} events)")
    for label, value in results.get("first_answers", {}).items():
        event = label.removesuffix("_ms")
        lines.append(f"{event}, the first after a worker start on a restarted Neo4j: {value} ms")
    for label, row in results.get("outage", {}).items():
        lines.append(
            f"{label} with Neo4j down: p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, max {row['max_ms']} ms"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
