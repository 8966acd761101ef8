"""Consistency-gate quality: a real judge model's verdicts on the labelled cases of the gate tests.

Each case of ``tests/gate_cases.py`` (contradictions, restatements, unrelated, ambiguous, temporal
updates) is loaded into its own project of a throw-away Neo4j and gated by ``mkg_core.gate.Gate``
with the configured LLM (``LLM_MODEL`` and its key, from the environment or MKG's ``.env``).
Reported: accuracy, per-verdict precision and recall, the confusion matrix, calls and tokens.

    .venv/bin/python benchmarks/gate_quality.py --json benchmarks/results/gate_quality.json
    .venv/bin/python benchmarks/gate_quality.py --fake    # the pipeline with a judge scripted by the labels

Uses ``NEO4J_URI`` when set, else starts its own dev Neo4j. Without a usable LLM it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gate_cases import CASES  # noqa: E402
from report import save  # noqa: E402

from mkg_core.embedding import LiteLLMEmbedder, choose_embedder, embed_or_none  # noqa: E402
from mkg_core.gate import Gate  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.llm import LLM  # noqa: E402
from mkg_core.schema import apply_schema, core_statements  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.testing import reset_database, scratch_neo4j  # noqa: E402
from mkg_core.testing.fakellm import FakeLLM  # noqa: E402

VERDICTS = ("consistent", "supersedes", "contradicted", "restatement", "ambiguous")
LOAD = """
MERGE (p:Project {id: $project})
WITH p
UNWIND $rows AS row
CREATE (p)-[:HAS_LEARNING]->(:Learning {id: row.id, text: row.text, status: row.status, scope: 'project',
                                        project_id: $project, support_count: 1, created_at: datetime(),
                                        embedding: row.embedding})
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="out", type=Path, help="write the results here as JSON")
    parser.add_argument(
        "--fake", action="store_true", help="script the judge with the labels (pipeline check)"
    )
    args = parser.parse_args(argv)
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    environ = dict(os.environ)
    fake = FakeLLM().start() if args.fake else None
    if fake is not None:
        environ.update(fake.env())
        for case in CASES:
            fake.reply(
                {"verdict": case.verdict, "ids": [f"{case.name}:{i}" for i in case.ids],
                 "canonical_id": f"{case.name}:{case.canonical}" if case.canonical else None},
                when=case.candidate,
            )  # fmt: skip
    try:
        with scratch_neo4j(environ) as env:
            settings = load_settings(environ=env, project_root=os.getcwd())
            ready, reason = LLM(settings).readiness()
            if not ready:
                print(f"not run: {reason}", file=sys.stderr)
                return 2
            with Graph.connect(settings) as graph:
                reset_database(graph)
                apply_schema(graph, core_statements(settings.embedding_dimensions))
                results = run(graph, settings)
    finally:
        if fake is not None:
            fake.stop()
    results["model"] = LLM(settings).label if not args.fake else "fake judge scripted with the labels"
    misses = [c["name"] for c in results["cases"] if c["expected"] != c["predicted"]]
    results["misses"] = misses
    print(json.dumps({k: v for k, v in results.items() if k != "cases"}, indent=2))
    save(args.out, results)
    return 0


def run(graph: Graph, settings: Any) -> dict[str, Any]:
    embedder = choose_embedder([LiteLLMEmbedder(settings)])
    confusion: Counter[tuple[str, str]] = Counter()
    cases = []
    calls = tokens = 0
    started = time.perf_counter()
    for case in CASES:
        project = f"gate-{case.name}"
        rows = [
            {"id": f"{case.name}:{nid}", "text": text, "status": status}
            for nid, text, status in case.neighbours
        ]
        rows.append({"id": f"{case.name}:candidate", "text": case.candidate, "status": "candidate"})
        for row, vector in zip(rows, embed_or_none(embedder, [r["text"] for r in rows]), strict=True):
            row["embedding"] = vector
        graph.write(LOAD, {"project": project, "rows": rows})
        report = Gate(graph, settings, project, embedder).run([f"{case.name}:candidate"], sweep=False)
        predicted = report.decided.get(f"{case.name}:candidate", "error")
        calls += report.llm_calls
        tokens += report.tokens
        confusion[(case.verdict, predicted)] += 1
        cases.append({"name": case.name, "expected": case.verdict, "predicted": predicted})
    per_verdict = {}
    for verdict in VERDICTS:
        tp = confusion[(verdict, verdict)]
        predicted = sum(n for (_, p), n in confusion.items() if p == verdict)
        actual = sum(n for (e, _), n in confusion.items() if e == verdict)
        per_verdict[verdict] = {
            "precision": round(tp / predicted, 3) if predicted else None,
            "recall": round(tp / actual, 3) if actual else None,
            "cases": actual,
        }
    correct = sum(n for (e, p), n in confusion.items() if e == p)
    return {
        "cases_total": len(CASES),
        "accuracy": round(correct / len(CASES), 3),
        "per_verdict": per_verdict,
        "confusion": {f"{e} -> {p}": n for (e, p), n in sorted(confusion.items())},
        "llm_calls": calls,
        "tokens": tokens,
        "seconds": round(time.perf_counter() - started, 1),
        "cases": cases,
    }


if __name__ == "__main__":
    raise SystemExit(main())
