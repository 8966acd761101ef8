"""MCP start-up: how soon a harness's ``meta-knowledge-graph`` answers ``initialize`` and ``tools/list``,
and the memory each session costs.

Side by side in one run: the full server in the session's own process (``MKG_MCP_IN_PROCESS=1``,
what every session paid before) and the standard-library proxy to the server in the worker, cold
(no worker running, answers kept from an earlier session) and warm (the worker running); each idle
and with every core kept busy by CPU burners. Starts its own dev Neo4j with a throw-away store.

    .venv/bin/python benchmarks/mcp_startup.py --n 20 --out benchmarks/results/mcp_startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from report import machine, save  # noqa: E402

from mkg_core import runtime  # noqa: E402
from mkg_core.lines import LineReader  # noqa: E402
from mkg_core.testing import BIN_DIR, scratch_neo4j, stop_worker  # noqa: E402

HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_session(env: dict[str, str]) -> dict[str, float]:
    """Start the command, ask initialize then tools/list; the seconds until each answer, and RSS."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN_DIR / "meta-knowledge-graph")],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    times: dict[str, float] = {}
    lines = LineReader(proc.stdout)
    try:
        for mid, method, params in ((1, "initialize", HELLO), (2, "tools/list", {})):
            proc.stdin.write(
                json.dumps({"jsonrpc": "2.0", "id": mid, "method": method, "params": params}).encode()
            )
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            while True:
                line = lines.readline(time.monotonic() + 120)
                if line is None:
                    raise RuntimeError(f"no answer to {method}")
                reply = json.loads(line)
                if reply.get("id") == mid:
                    break
            times[method] = time.perf_counter() - started
            if mid == 1:
                proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
                proc.stdin.flush()
        times["rss_kb"] = float(rss_kb(proc.pid))
    finally:
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return times


def summary(samples: list[dict[str, float]]) -> dict[str, float]:
    def p(key: str, q: float) -> float:
        ordered = sorted(s[key] for s in samples)
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000, 1)

    return {
        "initialize_p50_ms": p("initialize", 0.5),
        "initialize_p95_ms": p("initialize", 0.95),
        "tools_list_p50_ms": p("tools/list", 0.5),
        "tools_list_p95_ms": p("tools/list", 0.95),
        "rss_per_session_mb": round(statistics.median(s["rss_kb"] for s in samples) / 1024, 1),
    }


def run_case(name: str, env: dict[str, str], n: int, *, warm: bool) -> dict[str, Any]:
    paths = runtime.Paths.from_env(env)
    samples = []
    for _ in range(n):
        if not warm:
            stop_worker(paths)
        samples.append(one_session(env))
    result = {"case": name, **summary(samples)}
    pid = runtime.worker_pid(paths)
    if pid and pid > 0:
        result["worker_rss_mb"] = round(rss_kb(pid) / 1024, 1)
    return result


def burners(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="sessions per case")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    with scratch_neo4j(os.environ) as base, tempfile.TemporaryDirectory(prefix="mkg-bench-mcp-") as tmp:
        env = {**base, "MKG_STATE_DIR": str(Path(tmp) / "state"), "MKG_CONFIG_DIR": str(Path(tmp) / "config"),
               "MKG_PROJECT_ID": "bench-mcp", "MKG_USER_ID": "bench@example.com", "EMBEDDING_MODEL": "none",
               "MKG_WORKER_AUTOSTART": "1"}  # fmt: skip
        one_session(env)  # keeps the answers for the cold cases, and warms the file cache
        results = []
        for load in ("idle", "busy"):
            hogs = burners(os.cpu_count() or 2) if load == "busy" else []
            try:
                cases = (
                    ("full server in the session's process", {**env, "MKG_MCP_IN_PROCESS": "1"}, True),
                    ("proxy, worker not running (cold)", env, False),
                    ("proxy, worker running (warm)", env, True),
                )
                for name, case_env, warm in cases:
                    if warm and "MKG_MCP_IN_PROCESS" not in case_env:
                        one_session(case_env)  # start the worker
                    result = {"load": load, **run_case(name, case_env, args.n, warm=warm)}
                    results.append(result)
                    print(json.dumps(result), flush=True)
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
        stop_worker(runtime.Paths.from_env(env))
    print(f"\nMCP start-up, {machine()}, n={args.n} sessions per case")
    print(f"{'load':5} {'case':40} {'init p50/p95 ms':>17} {'tools p50/p95 ms':>18} {'RSS MB':>7}")
    for r in results:
        print(
            f"{r['load']:5} {r['case']:40} {r['initialize_p50_ms']:>8}/{r['initialize_p95_ms']:<8}"
            f" {r['tools_list_p50_ms']:>8}/{r['tools_list_p95_ms']:<9} {r['rss_per_session_mb']:>7}"
        )
    save(args.out, {"machine": machine(), "n": args.n, "results": results})


if __name__ == "__main__":
    main()
