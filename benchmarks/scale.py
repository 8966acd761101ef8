"""Recall at scale: latency, index build time and whether a learning is still found, as the graph
grows from 1k learnings to 1M spread over 100 projects.

The learnings are synthetic and deterministic (seeded): 8 to 16 words each, drawn from a
Zipf-distributed vocabulary of pseudo-words, so common words are shared by every project as they are
in real memory; every other one ends "with <Name>", one of its project's 4 people (capitalised
pseudo-words, which the linker reads as names). Each project has one owner; 80% of its learnings
are project-scoped, 20% are the owner's user facts. Each of a project's sessions made 20 of its
learnings (``FROM_SESSION``). Embeddings are the feature-hashed word vectors the fake LLM server
serves (``mkg_core.testing.fakellm.hashed_vector``), computed in process, so the figures are the
graph's own cost.

For each size, in one growing database:

1. the new learnings are loaded with no index in place (load rate reported);
2. the schema is dropped and applied again, and the time until every index is online is the index
   build time at that size; then the new learnings are linked to their sessions, and to their
   entities as MKG links memory without an LLM (the deterministic linker and
   ``mkg_core.entities.store.link``; merges by similarity are off, because hashed vectors of
   one-word names collide; link rate reported);
3. ``--queries`` questions are asked through ``mkg_core.search.search_learnings`` (the prompt hook's
   search) in fulltext and hybrid mode, each alone and with the graph branch and the session
   context (``+graph+session``, recall's default), and hybrid with the graph branch alone. A
   question is 4 words of one project-scoped learning plus 2 random vocabulary words, asked in that
   learning's project by its owner. Reported: p50/p95 latency and how often the learning asked
   about is in the top 5 and top 10 (``found@5``, ``found@10``). The default is also asked
   questions that name a person (``hybrid+graph+session, named``: 3 words of a learning that names
   one, a random word and the name), which the graph branch's named ranking answers (the memory
   about that person ordered by the rest of the question), the same questions without that
   ranking (``... without the named ranking``), and with the branches' queries run one after
   another rather than at once (``... one query after another``);
4. for 30 of those questions, how much of the exact 10 nearest learnings of the project (cosine over
   all of them) the filtered vector index returns when asked for 10, and when asked for as many as
   recall asks for (``vector_top10_agreement``).

    .venv/bin/python benchmarks/scale.py --sizes 1000,10000,100000 --json benchmarks/results/scale.json

Uses ``NEO4J_URI`` when set (the database is emptied), else starts a dev Neo4j with a throw-away
store, with ``NEO4J_DEV_HEAP`` (default here 4g) and ``NEO4J_DEV_PAGECACHE`` (default here 3g).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from report import machine, save  # noqa: E402

from mkg_core.contrib import Embedder  # noqa: E402
from mkg_core.entities.linker import link_text  # noqa: E402
from mkg_core.entities.store import Linked, link  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.schema import apply_schema, core_statements, wait_online  # noqa: E402
from mkg_core.search import VECTOR_SEARCH_FACTOR, search_learnings  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.testing import drop_schema, reset_database, scratch_neo4j  # noqa: E402
from mkg_core.testing.fakellm import hashed_vector  # noqa: E402

SEED = 7
VOCABULARY = 6000
USERS = 20
NOW = datetime(2026, 11, 30, tzinfo=UTC)
BATCH = 5000
LINK_BATCH = 1000

LOAD = """
UNWIND $rows AS row
CREATE (l:Learning {id: row.id, text: row.text, scope: row.scope, project_id: row.project_id,
                    user_id: row.user_id, status: 'approved', confidence: 0.8,
                    created_at: row.created_at, embedding: row.embedding, session_key: row.session})
"""

#: Once the schema is in place: each learning ``FROM_SESSION`` its session.
SESSIONS = """
MATCH (l:Learning) WHERE l.session_key IS NOT NULL
CALL (l) {
  MERGE (s:Session {session_id: l.session_key})
  CREATE (l)-[:FROM_SESSION]->(s)
  REMOVE l.session_key
} IN TRANSACTIONS OF 5000 ROWS
"""
#: How many learnings each session made.
SESSION_SIZE = 20
#: The people each project's learnings name.
PEOPLE = 4


class Hashed(Embedder):
    """The fake LLM server's hashed word vectors, computed in process."""

    name = "hashed"

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [hashed_vector(text, self.dimensions) for text in texts]


def vocabulary(rng: random.Random) -> list[str]:
    """Distinct pronounceable pseudo-words, most frequent first."""
    onsets = [*"bcdfghjklmnprstvwz", "br", "cr", "dr", "fl", "gr", "pl", "pr", "sk", "st", "tr"]
    vowels = [*"aeiou", "ai", "ea", "io", "ou"]
    codas = ["", "n", "r", "s", "t", "l", "nd", "rt", "x"]
    words: set[str] = set()
    ordered: list[str] = []
    while len(ordered) < VOCABULARY:
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(2, 3)))
        word += rng.choice(codas)
        if word not in words:
            words.add(word)
            ordered.append(word)
    return ordered


class Corpus:
    """Learning ``i`` of the synthetic corpus, the same for every run with the same arguments."""

    def __init__(self, projects: int, dims: int) -> None:
        rng = random.Random(SEED)
        self.words = vocabulary(rng)
        self.cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(self.words))))
        self.projects = projects
        self.embedder = Hashed(dims)
        names = vocabulary(random.Random(f"{SEED}:people"))[: projects * PEOPLE]
        self.people = [name.capitalize() for name in names]

    def project(self, i: int) -> str:
        return f"scale-project-{i % self.projects:03d}"

    def owner(self, i: int) -> str:
        return f"scale-user-{i % self.projects % USERS:02d}"

    def text(self, i: int) -> str:
        rng = random.Random(f"{SEED}:{i}")
        words = rng.choices(self.words, cum_weights=self.cumulative, k=rng.randint(8, 16))
        person = self.person(i)
        return " ".join(words) + (f" with {person}" if person else "")

    def person(self, i: int) -> str | None:
        """Whom learning ``i`` names: every other learning names one of its project's people."""
        if i % 2 == 0:
            return None
        return self.people[(i % self.projects) * PEOPLE + (i // self.projects) % PEOPLE]

    def rows(self, start: int, end: int) -> list[dict[str, Any]]:
        texts = [self.text(i) for i in range(start, end)]
        vectors = self.embedder.embed(texts)
        return [
            {
                "id": f"scale-{i}",
                "text": text,
                "scope": "user" if i % 5 == 4 else "project",
                "project_id": self.project(i),
                "user_id": self.owner(i),
                "created_at": NOW - timedelta(minutes=(i * 7919) % (365 * 24 * 60)),
                "session": f"{self.project(i)}:{i // self.projects // SESSION_SIZE}",
                "embedding": vector,
            }
            for i, text, vector in zip(range(start, end), texts, vectors, strict=True)
        ]

    def question(self, rng: random.Random, size: int, named: bool = False) -> tuple[str, int]:
        """A question about one project-scoped learning among the first ``size``: 4 of its words
        and 2 random ones; when ``named``, about one that names a person: 3 of its words, a random
        one and the name."""
        target = rng.randrange(size)
        while target % 5 == 4 or (named and self.person(target) is None):
            target = rng.randrange(size)
        person = self.person(target)
        own = [word for word in self.text(target).split() if word not in ("with", person)]
        if named and person:
            words = [*rng.sample(own, min(3, len(own))), self.words[rng.randrange(len(self.words))], person]
        else:
            words = rng.sample(own, min(4, len(own))) + [
                self.words[rng.randrange(len(self.words))] for _ in "ab"
            ]
        rng.shuffle(words)
        return " ".join(words), target


def load(graph: Graph, corpus: Corpus, start: int, end: int) -> float:
    """Load learnings ``start..end``; the rate in learnings per second."""
    began = time.perf_counter()
    for first in range(start, end, BATCH):
        graph.write(LOAD, {"rows": corpus.rows(first, min(end, first + BATCH))})
        done = min(end, first + BATCH)
        print(f"\r  loading {done:,}/{end:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return (end - start) / max(time.perf_counter() - began, 1e-9)


def link_entities(graph: Graph, corpus: Corpus, start: int, end: int) -> float:
    """Link learnings ``start..end`` to their entities; the rate in learnings per second."""
    began = time.perf_counter()
    now = datetime.now(UTC)
    for first in range(start, end, LINK_BATCH):
        rows = corpus.rows(first, min(end, first + LINK_BATCH))
        items = [
            Linked(
                row["id"],
                "Learning",
                row["scope"],
                row["project_id"],
                row["user_id"],
                tuple(link_text(row["text"])),
            )
            for row in rows
        ]
        names = sorted({m.name for item in items for m in item.mentions})
        vectors = dict(zip(names, corpus.embedder.embed(names), strict=True))
        graph.write_tx(lambda tx, items=items, vectors=vectors: link(tx, items, now=now, vectors=vectors))
        done = min(end, first + LINK_BATCH)
        print(f"\r  linking {done:,}/{end:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return (end - start) / max(time.perf_counter() - began, 1e-9)


def ask(
    graph: Graph, corpus: Corpus, size: int, queries: int, options: dict[str, Any], named: bool = False
) -> dict[str, Any]:
    rng = random.Random(f"{SEED}:questions:{size}")
    latency: list[float] = []
    found = {5: 0, 10: 0}
    for _ in range(queries):
        text, target = corpus.question(rng, size, named)
        began = time.perf_counter()
        hits = search_learnings(
            graph,
            text,
            project_id=corpus.project(target),
            user_id=corpus.owner(target),
            session_id=None,
            limit=10,
            **options,
        )
        latency.append(time.perf_counter() - began)
        ids = [hit.id for hit in hits]
        for k in found:
            found[k] += f"scale-{target}" in ids[:k]
    ordered = sorted(latency)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000, 1),
        **{f"found@{k}": round(n / queries, 3) for k, n in found.items()},
    }


EXACT_NEAREST = """
MATCH (node:Learning {project_id: $project_id}) WHERE node.scope = 'project'
RETURN node.id AS id ORDER BY vector.similarity.cosine(node.embedding, $vector) DESC LIMIT 10
"""
INDEX_NEAREST = """
MATCH (node:Learning)
  SEARCH node IN (VECTOR INDEX project_learning_vector FOR $vector
    WHERE node.scope = 'project' AND node.project_id = $project_id LIMIT $search_limit) SCORE AS score
RETURN node.id AS id ORDER BY score DESC LIMIT 10
"""


def vector_agreement(graph: Graph, corpus: Corpus, size: int, queries: int) -> dict[str, float]:
    """How much of the exact 10 nearest project learnings the filtered vector index returns, asked
    for 10 and for as many as recall asks for (``VECTOR_SEARCH_FACTOR`` per candidate)."""
    rng = random.Random(f"{SEED}:agreement:{size}")
    depths = {"asked_10": 10, "asked_as_recall": 30 * VECTOR_SEARCH_FACTOR}
    shares: dict[str, list[float]] = {name: [] for name in depths}
    for _ in range(queries):
        text, target = corpus.question(rng, size)
        params = {"vector": corpus.embedder.embed([text])[0], "project_id": corpus.project(target)}
        exact = {row["id"] for row in graph.read(EXACT_NEAREST, params)}
        for name, depth in depths.items():
            found = {row["id"] for row in graph.read(INDEX_NEAREST, {**params, "search_limit": depth})}
            shares[name].append(len(found & exact) / max(len(exact), 1))
    return {name: round(statistics.fmean(values), 3) for name, values in shares.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="comma-separated learning counts (default: %(default)s)"
    )
    parser.add_argument("--projects", type=int, default=100, help="projects to spread them over")
    parser.add_argument("--dims", type=int, default=128, help="embedding dimensions")
    parser.add_argument("--queries", type=int, default=200, help="questions per size and mode")
    parser.add_argument("--json", dest="out", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    try:
        sizes = sorted({int(size.replace("_", "")) for size in args.sizes.split(",") if size.strip()})
    except ValueError:
        parser.error(f"--sizes must be comma-separated whole numbers, not {args.sizes!r}")
    if not sizes or sizes[0] < args.projects:
        parser.error("every size must be at least the number of projects")
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    os.environ.setdefault("NEO4J_DEV_HEAP", "4g")
    os.environ.setdefault("NEO4J_DEV_PAGECACHE", "3g")
    corpus = Corpus(args.projects, args.dims)
    settings = load_settings(environ={}, project_root=tempfile.gettempdir())
    hybrid = {
        "min_score": settings.recall_min_score,
        "embedder": corpus.embedder,
        "min_similarity": settings.recall_min_similarity,
    }
    modes = {
        "fulltext": {"min_score": settings.recall_min_score, "use_graph": False, "use_sessions": False},
        "fulltext+graph+session": {"min_score": settings.recall_min_score},
        "hybrid": {**hybrid, "use_graph": False, "use_sessions": False},
        "hybrid+graph": {**hybrid, "use_sessions": False},
        "hybrid+graph+session": hybrid,
    }
    #: Asked questions that name a person, with the graph branch's named ranking (the default),
    #: without it, and with the branches' queries one after another (as recall ran them before).
    named = {"hybrid+graph+session, named", "... without the named ranking", "... one query after another"}
    modes["hybrid+graph+session, named"] = hybrid
    modes["... without the named ranking"] = {**hybrid, "use_named": False}
    modes["... one query after another"] = {**hybrid, "concurrent": False}
    print(
        f"{machine()}, {args.projects} projects, {args.dims}-dim hashed embeddings",
        file=sys.stderr,
    )
    results: dict[str, Any] = {
        "projects": args.projects,
        "dims": args.dims,
        "queries": args.queries,
        "sizes": {},
    }
    with scratch_neo4j(os.environ) as environ:
        graph_settings = load_settings(environ=environ, project_root=tempfile.gettempdir())
        with Graph.connect(graph_settings) as graph:
            reset_database(graph)
            loaded = linked = 0
            for size in sizes:
                drop_schema(graph)
                rate = load(graph, corpus, loaded, size)
                loaded = size
                began = time.perf_counter()
                report = apply_schema(graph, core_statements(args.dims), wait_seconds=7200)
                build = time.perf_counter() - began
                if not report.online:
                    raise SystemExit(f"the indexes were not online after {build:.0f} s (or one failed)")
                graph.run_autocommit(SESSIONS)
                link_rate = link_entities(graph, corpus, linked, size)
                linked = size
                wait_online(graph, 7200)
                entities = graph.read("MATCH (e:Entity) RETURN count(e) AS n")[0]["n"]
                row: dict[str, Any] = {
                    "load_per_s": round(rate),
                    "index_build_s": round(build, 1),
                    "link_per_s": round(link_rate),
                    "entities": entities,
                }
                for mode, options in modes.items():
                    asks_names = mode in named
                    ask(graph, corpus, size, min(20, args.queries), options, asks_names)  # warm plans, cache
                    row[mode] = ask(graph, corpus, size, args.queries, options, asks_names)
                row["vector_top10_agreement"] = vector_agreement(graph, corpus, size, 30)
                results["sizes"][str(size)] = row
                print(
                    f"{size:>9,} learnings: loaded at {rate:,.0f}/s, indexes built in {build:.1f} s, "
                    f"linked to {entities:,} entities at {link_rate:,.0f}/s"
                )
                for mode in modes:
                    m = row[mode]
                    print(
                        f"  {mode:29} p50 {m['p50_ms']:7.1f} ms  p95 {m['p95_ms']:7.1f} ms  "
                        f"found@5 {m['found@5']:.3f}  found@10 {m['found@10']:.3f}"
                    )
                agreement = row["vector_top10_agreement"]
                print(
                    f"  vector index vs exact top 10: {agreement['asked_10']:.3f} asked for 10, "
                    f"{agreement['asked_as_recall']:.3f} asked for {30 * VECTOR_SEARCH_FACTOR}"
                )
    first = results["sizes"][str(sizes[0])]
    for size in sizes[1:]:  # the growth curve as ratios to the smallest size
        row = results["sizes"][str(size)]
        row["growth"] = {
            f"{mode}_p50": round(row[mode]["p50_ms"] / max(first[mode]["p50_ms"], 0.1), 2) for mode in modes
        }
    save(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
