"""Soak: many hook invocations while Neo4j and the worker are taken away, then a count of what arrived.

Sessions of both harnesses run their events in order through the real ``mkg-hook`` (several
sessions at once, mixed events and payload sizes, the worker started by the hooks themselves)
while a chaos thread stops and restarts Neo4j and kills the worker. Afterwards every session's
chain in the graph is compared with what was sent. Reported: events lost, duplicated and out of
order, and hooks that ran past their deadline (wall time from exec, over the event's deadline
plus a stated allowance for starting Python); targets 0, 0, 0, 0. Every hook also traces itself
(``MKG_HOOK_TRACE``): for the hooks over their deadline the report says how long they waited for a
CPU, which tells a starved machine from slow work. Also the hook's wall time per payload size, and
on payloads built to be expensive up to the 64 MB limit (``--heavy-runs``).
Starts its own dev Neo4j with a throw-away store.

    .venv/bin/python benchmarks/soak.py --events 10000 --out benchmarks/results/soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from report import machine, save  # noqa: E402

from mkg_core import runtime  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.spool import Spool, overflow_files  # noqa: E402
from mkg_core.testing import BIN_DIR, Neo4jServer, start_dev_neo4j, stop_worker  # noqa: E402

PAYLOADS = {
    "claude": ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads",
    "codex": ROOT / "harnesses" / "mkg-codex" / "tests" / "payloads",
}
#: The event mix of a session after its SessionStart (weights).
MIX = (("PreToolUse", 4), ("PostToolUse", 4), ("UserPromptSubmit", 1), ("Stop", 1))
#: Payload sizes of PostToolUse responses (bytes, weight).
SIZES = ((200, 60), (4_000, 25), (64_000, 10), (1_000_000, 4), (8_000_000, 1))
DEADLINES = {"SessionStart": 2.0, "UserPromptSubmit": 1.5}
CAPTURE_DEADLINE = 1.0
#: Wall time allowed on top of a deadline for starting Python and reading a large payload.
ALLOWANCE = 0.5
#: Each hook is stopped after 120 s: with no hook ending for this long, the driver threads are stuck.
STALL = 600
#: How long the chaos thread may take to finish its act once the hooks are done (a Neo4j restart).
CHAOS_END = 600


@dataclass
class Sent:
    session: str
    harness: str
    marks: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    over_deadline: list[tuple[str, float]] = field(default_factory=list)
    hook_failures: list[str] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=dict)
    chaos: list[str] = field(default_factory=list)


def _payload(harness: str, event: str, session: str, mark: str, size: int, rng: random.Random) -> bytes:
    base = json.loads((PAYLOADS[harness] / f"{event}.json").read_text())
    base["session_id"] = session
    base.pop("transcript_path", None)  # the captured one names another session (Codex: another thread)
    if event in ("PreToolUse", "PostToolUse"):
        base["tool_use_id"] = mark
    if event == "PostToolUse":
        base["tool_response"] = {"stdout": "x" * size, "mark": mark}
    if event == "UserPromptSubmit":
        base["prompt"] = f"{mark}: how do we deploy the staging cluster?"
    if event == "SessionStart":
        base["model"] = mark
    if event == "Stop":
        base["last_assistant_message"] = mark
    return json.dumps(base).encode()


def _size(rng: random.Random, largest: int) -> int:
    sizes = [(s, w) for s, w in SIZES if s <= largest]
    return rng.choices([s for s, _ in sizes], [w for _, w in sizes])[0]


def drive(
    env: dict[str, str],
    *,
    events: int,
    sessions: int,
    parallel: int,
    largest: int,
    seed: int = 7,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Sent], Outcome]:
    """Send ``events`` hook invocations over ``sessions`` sessions, ``parallel`` sessions at once."""
    rng = random.Random(seed)
    plan: list[Sent] = []
    per_session = max(events // sessions, 2)
    for number in range(sessions):
        harness = "claude" if number % 2 == 0 else "codex"
        sent = Sent(f"soak-{number:04d}", harness)
        plan.append(sent)
    outcome = Outcome()
    lock = threading.Lock()
    done = [0]
    queue = list(plan)

    def run_session(sent: Sent, seed: int) -> None:
        local = random.Random(seed)
        rest = local.choices([e for e, _ in MIX], [w for _, w in MIX], k=per_session - 1)
        steps = ["SessionStart", *rest]
        for index, event in enumerate(steps):
            mark = f"{sent.session}-{index:05d}"
            size = _size(local, largest) if event == "PostToolUse" else 0
            data = _payload(sent.harness, event, sent.session, mark, size, local)
            started = time.monotonic()
            result = subprocess.run(
                [str(BIN_DIR / "mkg-hook"), "--client", sent.harness, event],
                input=data, env=env, capture_output=True, timeout=120, check=False,
            )  # fmt: skip
            took = time.monotonic() - started
            deadline = DEADLINES.get(event, CAPTURE_DEADLINE)
            with lock:
                sent.marks.append(mark)
                bucket = f"{event}" if event != "PostToolUse" else f"PostToolUse-{size}B"
                outcome.times.setdefault(bucket, []).append(took)
                if took > deadline + ALLOWANCE:
                    outcome.over_deadline.append((mark, round(took, 3)))
                if result.returncode != 0 or b"not recorded" in result.stderr:
                    outcome.hook_failures.append(f"{mark}: {result.stderr.decode()[:200]}")
                done[0] += 1
                if progress and done[0] % 500 == 0:
                    progress(done[0])

    def worker_loop(seed: int) -> None:
        while True:
            with lock:
                if not queue:
                    return
                sent = queue.pop(0)
            run_session(sent, seed + hash(sent.session) % 1000)

    threads = [
        threading.Thread(target=worker_loop, args=(rng.randrange(10**6),), daemon=True)
        for _ in range(parallel)
    ]
    for thread in threads:
        thread.start()
    # Waited for as long as hooks keep ending, however many there are; stuck threads are daemons,
    # so they do not keep the process alive after the error.
    seen, moved = -1, time.monotonic()
    for thread in threads:
        while thread.is_alive():
            thread.join(1)
            if done[0] != seen:
                seen, moved = done[0], time.monotonic()
            elif time.monotonic() - moved > STALL:
                raise RuntimeError(f"no hook ended in {STALL} s: the soak's driver threads are stuck")
    return plan, outcome


def chaos(
    server: Neo4jServer,
    paths: runtime.Paths,
    stop: threading.Event,
    *,
    restarts: int,
    kills: int,
    every: float,
) -> list[str]:
    """Restart Neo4j ``restarts`` times and kill the worker ``kills`` times, one act per ``every`` s."""
    acts = ["neo4j"] * restarts + ["worker"] * kills
    random.Random(11).shuffle(acts)
    log: list[str] = []
    for act in acts:
        if stop.wait(every):
            break
        if act == "neo4j":
            server.stop()
            log.append(f"{time.strftime('%H:%M:%S')} neo4j stopped")
            stop.wait(every / 2)
            server.start()
            log.append(f"{time.strftime('%H:%M:%S')} neo4j started")
        else:
            pid = runtime.worker_pid(paths)
            if pid and pid > 0:
                os.kill(pid, signal.SIGKILL)
                log.append(f"{time.strftime('%H:%M:%S')} worker {pid} killed")
    return log


#: Where each event carries the mark the driver gave it.
MARK = """
MATCH (:Session {session_id: $sid})-[:HAS_EVENT]->(e:SessionEvent)
WITH e, CASE e.event_name WHEN 'SessionStart' THEN e.model WHEN 'UserPromptSubmit' THEN e.prompt
          WHEN 'Stop' THEN e.last_assistant_message ELSE e.tool_use_id END AS mark
RETURN e.event_id AS id, split(mark, ':')[0] AS mark
"""
CHAIN = """
MATCH (:Session {session_id: $sid})-[:FIRST_EVENT]->(first)
MATCH path = (first)-[:NEXT*0..]->(last) WHERE NOT (last)-[:NEXT]->()
RETURN [n IN nodes(path) | n.event_id] AS ids
"""


def verify(graph: Graph, plan: list[Sent]) -> dict[str, Any]:
    """Lost, duplicated and out-of-order events, comparing each session's chain with what was sent."""
    lost = duplicated = out_of_order = broken = 0
    for sent in plan:
        marks = {row["id"]: row["mark"] for row in graph.read(MARK, {"sid": sent.session})}
        rows = graph.read(CHAIN, {"sid": sent.session})
        chain = [marks.get(i) for i in (rows[0]["ids"] if rows else [])]
        if len(chain) != len(marks):
            broken += 1  # events of the session that the chain does not reach
        stored = list(marks.values())
        duplicated += len(stored) - len(set(stored))
        lost += len(set(sent.marks) - set(stored))
        expected = [m for m in sent.marks if m in set(chain)]
        out_of_order += sum(1 for got, want in zip(chain, expected, strict=False) if got != want)
    return {"lost": lost, "duplicated": duplicated, "out_of_order": out_of_order, "broken_chains": broken}


def soak(
    *,
    events: int,
    sessions: int,
    parallel: int,
    restarts: int,
    kills: int,
    largest: int,
    environ: dict[str, str] | None = None,
    server: Neo4jServer | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The whole soak; returns its report. Uses ``server`` (restartable) or starts a dev Neo4j."""
    with tempfile.TemporaryDirectory(prefix="mkg-soak-") as tmp:
        own = server is None
        if server is None:
            server = start_dev_neo4j(Path(tmp) / "neo4j")
        env = {
            **(os.environ if environ is None else environ),
            **server.settings_env(),
            "MKG_STATE_DIR": str(Path(tmp) / "state"),
            "MKG_CONFIG_DIR": str(Path(tmp) / "config"),
            "MKG_WORKER_AUTOSTART": "1",
            "MKG_WORKER_IDLE_SECONDS": "600",
            "MKG_EXTRACTION": "0",
            "EMBEDDING_MODEL": "none",
        }
        for key in (
            "MKG_HOOK_DEADLINE_SESSION_START",
            "MKG_HOOK_DEADLINE_PROMPT",
            "MKG_HOOK_DEADLINE_CAPTURE",
        ):
            env.pop(key, None)
        trace = Path(tmp) / "hook-trace.jsonl"
        env["MKG_HOOK_TRACE"] = str(trace)
        paths = runtime.Paths.from_env(env)
        stop = threading.Event()
        acts: list[str] = []
        started = time.monotonic()
        # one act every so often: spread over the time the hooks are expected to take
        every = max(events * 0.06 / max(parallel, 1) / (restarts + kills + 1), 0.5)
        chaos_thread = threading.Thread(
            target=lambda: acts.extend(
                chaos(server, paths, stop, restarts=restarts, kills=kills, every=every)
            ),
            daemon=True,
        )
        chaos_thread.start()
        try:
            plan, outcome = drive(
                env, events=events, sessions=sessions, parallel=parallel, largest=largest, progress=progress
            )
        finally:
            stop.set()
            chaos_thread.join(CHAOS_END)
        if chaos_thread.is_alive():
            raise RuntimeError(f"the chaos thread had not ended {CHAOS_END} s after the hooks")
        took = time.monotonic() - started
        server.start()  # idempotent: make sure it is up
        if runtime.worker_pid(paths) is None:
            runtime.spawn_worker(paths, env, force=True)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            with Spool(paths.spool) as spool:
                pending = spool.counts()["pending"]
            if not pending and not overflow_files(paths.root):
                break
            time.sleep(0.5)
        with Spool(paths.spool) as spool:
            counts = spool.counts()
        settings = load_settings(environ=env, project_root=tmp)
        with Graph.connect(settings) as graph:
            result = verify(graph, plan)
        stop_worker(paths)
        if own:
            server.stop()
        traced = traced_hooks(trace)
    sent = sum(len(s.marks) for s in plan)
    return {
        "events_sent": sent,
        **result,
        "over_deadline": len(outcome.over_deadline),
        "over_deadline_examples": outcome.over_deadline[:5],
        **traced,
        "hooks_not_recording": len(outcome.hook_failures),
        "hook_failure_examples": outcome.hook_failures[:3],
        "spool": counts,
        "chaos": acts,
        "seconds": round(took, 1),
        "hook_seconds": {
            bucket: {
                "n": len(times),
                "p50": round(sorted(times)[len(times) // 2], 3),
                "p99": round(sorted(times)[min(len(times) - 1, int(len(times) * 0.99))], 3),
                "max": round(max(times), 3),
            }
            for bucket, times in sorted(outcome.times.items())
        },
    }


def traced_hooks(path: Path) -> dict[str, Any]:
    """From the hooks' own traces: those over their deadline (measured inside the process, from
    its start), how long they waited for a CPU, and how many stay over once that wait is taken off."""
    over: list[dict[str, Any]] = []
    waits: list[float] = []
    count = 0
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        count += 1
        took = row["steps"].get("done", 0.0)
        wait = row.get("cpu_wait_s") or 0.0
        waits.append(wait)
        event = row["argv"][-1]
        allowed = DEADLINES.get(event, CAPTURE_DEADLINE) + ALLOWANCE
        if took > allowed:
            over.append({"event": event, "s": took, "cpu_wait_s": round(wait, 3), "cpu_s": row["cpu_s"]})
    waits.sort()
    return {
        "traced_hooks": count,
        "traced_over_deadline": len(over),
        "traced_over_deadline_without_cpu_wait": sum(
            1
            for o in over
            if o["s"] - o["cpu_wait_s"] > DEADLINES.get(o["event"], CAPTURE_DEADLINE) + ALLOWANCE
        ),
        "traced_over_deadline_examples": sorted(over, key=lambda o: -o["s"])[:5],
        "cpu_wait_s": {
            "p50": round(waits[len(waits) // 2], 3) if waits else None,
            "p99": round(waits[min(len(waits) - 1, int(len(waits) * 0.99))], 3) if waits else None,
            "max": round(waits[-1], 3) if waits else None,
        },
    }


#: Payloads up to the hook's 64 MiB limit, built to be expensive: (name, builder of the response).
HEAVY = (
    ("4.5 MB of short strings", lambda: [f"line {i}" for i in range(450_000)]),
    ("18 MB of short strings", lambda: [f"line {i}" for i in range(1_800_000)]),
    ("31 MB, 2 million keys", lambda: {f"k{i}": "v" for i in range(2_000_000)}),
    ("60 MB in one string", lambda: "y" * 60_000_000),
    ("60 MB of 4 KB strings", lambda: ["z" * 4096] * 15_000),
)


def heavy_payloads(runs: int, environ: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The hook's wall time on each heavy payload (a state folder of its own, no worker)."""
    results = []
    base = json.loads((PAYLOADS["claude"] / "PostToolUse.json").read_text())
    with tempfile.TemporaryDirectory(prefix="mkg-soak-heavy-") as tmp:
        env = {
            **(os.environ if environ is None else environ),
            "MKG_STATE_DIR": tmp,
            "MKG_WORKER_AUTOSTART": "0",
        }
        for name, build in HEAVY:
            data = json.dumps({**base, "tool_response": build()}).encode()
            times = []
            for _ in range(runs):
                started = time.monotonic()
                subprocess.run(
                    [str(BIN_DIR / "mkg-hook"), "--client", "claude", "PostToolUse"],
                    input=data, env=env, capture_output=True, timeout=300, check=False,
                )  # fmt: skip
                times.append(time.monotonic() - started)
            times.sort()
            results.append({
                "payload": name, "mb": round(len(data) / 1e6, 1), "runs": runs,
                "p50_s": round(times[len(times) // 2], 2),
                "p99_s": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
                "max_s": round(times[-1], 2),
            })  # fmt: skip
            print(json.dumps(results[-1]), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=4, help="sessions driven at once")
    parser.add_argument("--restarts", type=int, default=3, help="Neo4j stops and restarts")
    parser.add_argument("--kills", type=int, default=5, help="worker kills")
    parser.add_argument("--largest", type=int, default=8_000_000, help="largest tool response, bytes")
    parser.add_argument("--heavy-runs", type=int, default=10, help="runs per heavy payload (0: skip)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    heavy = heavy_payloads(args.heavy_runs) if args.heavy_runs else []
    report = soak(
        events=args.events, sessions=args.sessions, parallel=args.parallel, restarts=args.restarts,
        kills=args.kills, largest=args.largest, progress=lambda n: print(f"{n} hooks run", flush=True),
    )  # fmt: skip
    print(f"\nSoak, {machine()}")
    print(json.dumps(report, indent=2))
    save(
        args.out,
        {"machine": machine(), "args": vars(args) | {"out": str(args.out)}, **report, "heavy": heavy},
    )


if __name__ == "__main__":
    main()
