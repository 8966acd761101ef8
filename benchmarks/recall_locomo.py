"""Recall quality on LoCoMo: evidence recall@k of MKG's own recall function, with no LLM.

Each LoCoMo conversation becomes one project. Two unit types, run separately:

- ``obs``: every fact of ``session_N_observation`` becomes an approved, user-scoped ``:Learning``
  (what the extractor would have distilled), carrying the dialog ids it was drawn from;
- ``turn``: every dialog turn (``speaker: text``) becomes an approved, project-scoped ``:Learning``.

Each LoCoMo session is one MKG session: its units come ``FROM_SESSION`` it, as learnings distilled
from an agent's session do.

Units are linked to entities as MKG links memory when no LLM answers: the deterministic linker
(``mkg_core.entities.linker``) over each unit's text, resolved and written by the product's own
``mkg_core.entities.store.link`` (names embedded, merges at the configured similarity). An LLM's
entities would be at least as good, so the graph figures are a floor.

Every question of category 1-4 with evidence is asked through ``mkg_core.search.search_learnings``
(the function the prompt hook uses) against a real Neo4j, in each mode: fulltext only, vector only,
the graph branch only, hybrid (fulltext, vector and dates fused, as before the graph branch),
hybrid with the session context (``hybrid+session``), hybrid with the graph branch
(``hybrid+graph``; ``--hops 2`` adds the two-hop walk as a further mode) and the default, all of
them (``hybrid+graph+session``); all with the prompt hook's floors. Reported per mode and per
LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop): evidence recall@5 and @10
(gold dialog ids covered by the top k units, averaged over questions), MRR of the first unit
covering a gold id, tokens of the top 5 units, and p50/p95 latency of one recall call (question
embedding included).

Embeddings come from MKG's keyless embedder by default (``--embedder local``: all-MiniLM-L6-v2 at
full precision, ``mkg-core[local]``; its model is downloaded on first use), or none.

    .venv-bench/bin/python benchmarks/recall_locomo.py --data ../shared/bench/locomo/dev \\
        --json benchmarks/results/recall_locomo.json

Uses ``NEO4J_URI`` (and ``NEO4J_USERNAME`` / ``NEO4J_PASSWORD``) when set, else starts its own dev
Neo4j with a throw-away store.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from report import machine, save  # noqa: E402

from mkg_core.contrib import Embedder  # noqa: E402
from mkg_core.embedding import embed_or_none  # noqa: E402
from mkg_core.entities.linker import link_text  # noqa: E402
from mkg_core.entities.store import Linked, link  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.recall import estimate_tokens  # noqa: E402
from mkg_core.schema import apply_schema, core_statements, wait_online  # noqa: E402
from mkg_core.search import search_learnings  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.testing import reset_database, scratch_neo4j  # noqa: E402

KS = (5, 10)
CATEGORIES = frozenset({1, 2, 3, 4})
_DIA = re.compile(r"D\d+:\d+")


@dataclass(frozen=True)
class Unit:
    id: str
    text: str
    dia_ids: tuple[str, ...]
    created_at: datetime | None
    #: The conversation's session it was made in (its number).
    session: str = ""


@dataclass(frozen=True)
class Question:
    text: str
    gold: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    obs: list[Unit]
    turn: list[Unit]
    questions: list[Question]


def session_time(text: object) -> datetime | None:
    """LoCoMo's session time ("1:56 pm on 8 May, 2023") as a UTC datetime: units are stored with
    ``created_at`` a DateTime, as MKG stores memory."""
    try:
        return datetime.strptime(str(text), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def load(path: Path) -> Conversation:
    data = json.loads(path.read_text())
    name = path.stem
    obs: list[Unit] = []
    turns: list[Unit] = []
    for key in sorted(k for k in data if re.fullmatch(r"session_\d+", k)):
        number = key.split("_")[1]
        when = session_time(data.get(f"{key}_date_time"))
        for turn in data[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            turns.append(Unit(f"{name}:turn:{turn['dia_id']}", text, (turn["dia_id"],), when, number))
        for speaker_facts in (data.get(f"{key}_observation") or {}).values():
            for index, item in enumerate(speaker_facts):
                fact, evidence = item[0], item[1]
                ids = tuple(_DIA.findall(str(evidence)))
                obs.append(Unit(f"{name}:obs:{number}:{len(obs)}:{index}", str(fact), ids, when, number))
    questions = [
        Question(
            str(q["question"]), frozenset(_DIA.findall(" ".join(map(str, q["evidence"])))), int(q["category"])
        )
        for q in data["qa"]
        if int(q.get("category", 0)) in CATEGORIES and q.get("evidence")
    ]
    return Conversation(name, obs, turns, [q for q in questions if q.gold])


LOAD_UNITS = """
UNWIND $rows AS row
CREATE (l:Learning {id: row.id, text: row.text, dia_ids: row.dia_ids, created_at: row.created_at,
                    status: 'approved', scope: $scope, project_id: $project, user_id: $user,
                    confidence: 0.8, embedding: row.embedding})
MERGE (s:Session {session_id: $project + ':' + row.session})
CREATE (l)-[:FROM_SESSION]->(s)
"""


def user_of(conversation: Conversation) -> str:
    """Each conversation has its own user, so user-scoped units never cross conversations."""
    return f"{conversation.name}-user"


def store(
    graph: Graph, conversation: Conversation, unit: str, embedder: Embedder | None, merge_similarity: float
) -> None:
    units = getattr(conversation, unit)
    scope = "user" if unit == "obs" else "project"
    vectors: list[list[float] | None] = (
        list(embedder.embed([u.text for u in units])) if embedder else [None] * len(units)
    )
    rows = [
        {
            "id": u.id,
            "text": u.text,
            "dia_ids": list(u.dia_ids),
            "created_at": u.created_at,
            "session": u.session,
            "embedding": v,
        }
        for u, v in zip(units, vectors, strict=True)
    ]
    for start in range(0, len(rows), 500):
        graph.write(
            LOAD_UNITS,
            {
                "rows": rows[start : start + 500],
                "scope": scope,
                "project": conversation.name,
                "user": user_of(conversation),
            },
        )
    link_units(graph, conversation, units, scope, embedder, merge_similarity)


def link_units(
    graph: Graph,
    conversation: Conversation,
    units: list[Unit],
    scope: str,
    embedder: Embedder | None,
    merge_similarity: float,
) -> None:
    """The units' entities, as MKG links memory without an LLM: the linker, then the product's
    resolution and writes, in batches (one transaction each)."""
    now = datetime.now(UTC)
    for start in range(0, len(units), 100):
        batch = [
            Linked(
                u.id, "Learning", scope, conversation.name, user_of(conversation), tuple(link_text(u.text))
            )
            for u in units[start : start + 100]
        ]
        names = sorted({m.name for item in batch for m in item.mentions})
        vectors = dict(zip(names, embed_or_none(embedder, names), strict=True)) if embedder else {}
        graph.write_tx(
            lambda tx, batch=batch, vectors=vectors: link(
                tx, batch, now=now, vectors=vectors, merge_similarity=merge_similarity
            )
        )


DEFAULT_MODE = "hybrid+graph+session"


def modes(
    embedder: Embedder | None, min_similarity: float, min_score: float, hops: int = 1
) -> dict[str, dict[str, Any]]:
    """Every retrieval mode the recall code offers; ``hybrid+graph+session`` is the prompt hook's
    configuration (``fulltext+graph+session`` without an embedder)."""
    floors = {"min_similarity": min_similarity, "min_score": min_score}
    alone = {"use_graph": False, "use_sessions": False}
    found: dict[str, dict[str, Any]] = {
        "fulltext": {"embedder": None, "min_score": min_score, **alone},
    }
    if embedder is None:
        found["graph"] = {
            "embedder": None,
            "min_score": min_score,
            "use_fulltext": False,
            "use_sessions": False,
        }
        found["fulltext+graph"] = {"embedder": None, "min_score": min_score, "use_sessions": False}
        found["fulltext+graph+session"] = {"embedder": None, "min_score": min_score}
        return found
    found["vector"] = {"embedder": embedder, "use_fulltext": False, **alone, **floors}
    found["graph"] = {
        "embedder": embedder,
        "use_fulltext": False,
        "use_vector": False,
        "use_sessions": False,
        **floors,
    }
    found["hybrid"] = {"embedder": embedder, **alone, **floors}
    found["hybrid+session"] = {"embedder": embedder, "use_graph": False, **floors}
    found["hybrid+graph"] = {"embedder": embedder, "use_sessions": False, **floors}
    if hops > 1:
        found["hybrid+graph2"] = {"embedder": embedder, "graph_hops": 2, "use_sessions": False, **floors}
    found[DEFAULT_MODE] = {"embedder": embedder, **floors}
    return found


def evaluate(
    graph: Graph, conversations: list[Conversation], unit: str, options: dict[str, Any]
) -> dict[str, Any]:
    recall: dict[int, list[float]] = {k: [] for k in KS}
    by_category: dict[tuple[int, int], list[float]] = {}
    reciprocal: list[float] = []
    tokens: list[int] = []
    latency: list[float] = []
    dia_of = {u.id: set(u.dia_ids) for c in conversations for u in getattr(c, unit)}
    for conversation in conversations:
        for question in conversation.questions:
            started = time.perf_counter()
            hits = search_learnings(
                graph,
                question.text,
                project_id=conversation.name,
                user_id=user_of(conversation),
                session_id=None,
                limit=max(KS),
                **options,
            )
            latency.append(time.perf_counter() - started)
            for k in KS:
                covered = set().union(*(dia_of[h.id] for h in hits[:k])) if hits else set()
                share = len(question.gold & covered) / len(question.gold)
                recall[k].append(share)
                by_category.setdefault((question.category, k), []).append(share)
            first = next((rank for rank, h in enumerate(hits, 1) if dia_of[h.id] & question.gold), None)
            reciprocal.append(1 / first if first else 0.0)
            tokens.append(estimate_tokens("\n".join(h.text for h in hits[:5])) if hits else 0)
    ordered = sorted(latency)
    return {
        **{f"recall@{k}": round(statistics.fmean(values), 3) for k, values in recall.items()},
        "mrr": round(statistics.fmean(reciprocal), 3),
        "tokens_top5": round(statistics.fmean(tokens), 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000, 1),
        "questions": len(reciprocal),
        "by_category": {
            str(category): {f"recall@{k}": round(statistics.fmean(by_category[category, k]), 3) for k in KS}
            | {"questions": len(by_category[category, KS[0]])}
            for category in sorted({c for c, _ in by_category})
        },
        "options": {k: v for k, v in options.items() if k != "embedder"},
    }


@contextmanager
def neo4j_graph(dimensions: int) -> Iterator[Graph]:
    with scratch_neo4j(os.environ) as environ:
        settings = load_settings(environ=environ, project_root=tempfile.gettempdir())
        with Graph.connect(settings) as graph:
            reset_database(graph)
            apply_schema(graph, core_statements(dimensions))
            yield graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_data = ROOT.parent / "shared" / "bench" / "locomo" / "dev"
    parser.add_argument("--data", type=Path, default=default_data, help="folder of LoCoMo conv-*.json files")
    parser.add_argument("--json", dest="out", type=Path, help="write the results here as JSON")
    parser.add_argument("--units", choices=("obs", "turn", "both"), default="both")
    parser.add_argument(
        "--embedder",
        choices=("local", "none"),
        default="local",
        help="local: MKG's keyless embedder (mkg-core[local]); none: fulltext only",
    )
    parser.add_argument("--no-vectors", action="store_true", help="the same as --embedder none")
    parser.add_argument("--hops", type=int, choices=(1, 2), default=1, help="2: also the two-hop walk")
    args = parser.parse_args(argv)
    logging.getLogger("neo4j").setLevel(logging.ERROR)  # "property does not exist yet" notices
    files = sorted(args.data.glob("conv-*.json")) if args.data.is_dir() else []
    if not files:
        parser.error(f"no conv-*.json files in {args.data}: pass --data DIR")
    conversations = [load(path) for path in files]
    embedder: Embedder | None = None
    choice = "none" if args.no_vectors else args.embedder
    if choice == "local":
        from mkg_core.local_embedder import LocalEmbedder, dependencies_missing

        if dependencies_missing():
            parser.error(
                f"MKG's local embedder needs {', '.join(dependencies_missing())}: pip install -e .[local]"
            )
        embedder = LocalEmbedder(load_settings(environ={"EMBEDDING_MODEL": "local"}))
    settings = load_settings(environ={}, project_root=tempfile.gettempdir())
    units = ("obs", "turn") if args.units == "both" else (args.units,)
    # The shape other tools read: {"<units>": {"<mode>": {...}}, "default_mode": "<mode>"}.
    results: dict[str, Any] = {"default_mode": DEFAULT_MODE if embedder else "fulltext+graph+session"}
    print(
        f"{machine()}, {len(conversations)} conversations, embedder: {choice}",
        file=sys.stderr,
    )
    with neo4j_graph(embedder.dimensions if embedder else 384) as graph:
        for unit in units:
            reset_database(graph)
            apply_schema(graph, core_statements(embedder.dimensions if embedder else 384))
            started = time.perf_counter()
            for conversation in conversations:
                store(graph, conversation, unit, embedder, settings.entity_merge_similarity)
            wait_online(graph, 300)
            load_seconds = round(time.perf_counter() - started, 1)
            count = sum(len(getattr(c, unit)) for c in conversations)
            print(f"{unit}: {count} units loaded in {load_seconds} s", file=sys.stderr)
            table = {}
            for mode, options in modes(
                embedder, settings.recall_min_similarity, settings.recall_min_score, args.hops
            ).items():
                evaluate(graph, conversations[:1], unit, options)  # warm the query plans
                table[mode] = evaluate(graph, conversations, unit, options)
                row = table[mode]
                categories = "  ".join(
                    f"c{c} {v['recall@5']:.3f}/{v['recall@10']:.3f}" for c, v in row["by_category"].items()
                )
                print(
                    f"  {mode:20} R@5 {row['recall@5']:.3f}  R@10 {row['recall@10']:.3f}  "
                    f"MRR {row['mrr']:.3f}  tokens {row['tokens_top5']:6.1f}  "
                    f"p50 {row['p50_ms']:6.1f} ms  p95 {row['p95_ms']:6.1f} ms  |  {categories}"
                )
            results[unit] = table
    save(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
