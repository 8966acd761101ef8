"""Entity resolution: the cosine threshold above which two entity names are merged, measured on
labelled pairs.

Resolution first matches a new name to an entity of the same namespace by its normalised key and
its aliases (``mkg_core.entities.model.normalise``); what is left is compared by embedding. Each
pair below is two names that reached that step (their keys differ) and a label: the same thing
(``True``) or two different things (``False``). Many "different" pairs are deliberately close
(sibling services, two people with similar names, staging and production), because those are the
merges that would hurt. The script embeds both names with the chosen embedder and reports, for each
threshold, precision, recall and F1 of "merge when cosine >= threshold", and the threshold chosen:
the lowest one whose precision is at least ``--precision`` (a wrong merge links unrelated memory;
a missed one only leaves two entities, with nothing to undo).

    .venv/bin/python benchmarks/entity_pairs.py --json benchmarks/results/entity_pairs.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from report import machine, save  # noqa: E402

from mkg_core.entities.model import normalise, numbers_agree  # noqa: E402

#: (name, name, same thing?)
PAIRS: tuple[tuple[str, str, bool], ...] = (
    # code: the same thing written differently
    ("Postgres", "PostgreSQL", True),
    ("postgres database", "PostgreSQL database", True),
    ("billing service", "billing-service", True),
    ("payments API", "payment API", True),
    ("deploy script", "deployment script", True),
    ("CI pipeline", "CI/CD pipeline", True),
    ("unit tests", "unit testing", True),
    ("GitHub Actions", "Github actions workflow", True),
    ("the auth module", "authentication module", True),
    ("Redis cache", "redis caching layer", True),
    ("docker compose", "docker-compose", True),
    ("environment variables", "env vars", True),
    ("config file", "configuration file", True),
    ("API gateway", "api-gateway", True),
    ("login page", "sign-in page", True),
    ("node modules", "node_modules folder", True),
    ("JavaScript", "Javascript code", True),
    ("TypeScript types", "TypeScript typings", True),
    ("users table", "user table", True),
    ("Kubernetes cluster", "k8s cluster", True),
    ("rate limiter", "rate limiting", True),
    ("error handling", "error handler", True),
    ("database migration", "DB migrations", True),
    ("release checklist", "release check list", True),
    ("main branch", "master branch", False),
    # code: close but different
    ("billing service", "shipping service", False),
    ("staging database", "production database", False),
    ("dev server", "dev database", False),
    ("pytest", "unittest", False),
    ("Python 3.11", "Python 3.12", False),
    ("login page", "logout page", False),
    ("users table", "orders table", False),
    ("read replica", "write primary", False),
    ("frontend build", "backend build", False),
    ("search index", "search query", False),
    ("vector index", "fulltext index", False),
    ("payment webhook", "payment refund", False),
    ("integration tests", "unit tests", False),
    ("Neo4j driver", "Neo4j browser", False),
    ("npm install", "npm publish", False),
    ("git rebase", "git merge", False),
    ("access token", "refresh token", False),
    ("CPU usage", "memory usage", False),
    ("React component", "Vue component", False),
    ("AWS Lambda", "AWS S3", False),
    ("request timeout", "request retry", False),
    ("feature flag", "feature branch", False),
    ("linting", "formatting", False),
    ("GraphQL schema", "SQL schema", False),
    ("error budget", "error log", False),
    ("cache hit", "cache miss", False),
    ("customer account", "customer contact", False),
    ("renewal date", "renewal risk", False),
    ("health score", "credit score", False),
    ("monthly revenue", "annual revenue", False),
    # the world: the same thing written differently
    ("New York City", "NYC", True),
    ("United States", "USA", True),
    ("LGBTQ community", "LGBTQ+ community", True),
    ("video game", "videogame", True),
    ("video games", "video gaming", True),
    ("Harry Potter books", "Harry Potter series", True),
    ("Lord of the Rings", "The Lord of the Rings movies", True),
    ("support group", "support groups meeting", True),
    ("pottery class", "pottery workshop", True),
    ("dance studio", "dancing studio", True),
    ("art show", "art exhibition", True),
    ("camping trip", "camping", True),
    ("counseling", "counselling", True),
    ("mental health", "mental-health", True),
    ("road trip", "roadtrip", True),
    ("birthday party", "birthday celebration", True),
    ("basketball team", "b-ball team", True),
    ("marathon", "marathon race", True),
    ("photography", "taking photos", True),
    ("charity run", "charity race", True),
    ("Accenture", "Accenture plc", True),
    ("Microsoft", "Microsoft Corporation", True),
    ("Google", "Google LLC", True),
    ("Dr. Smith", "Doctor Smith", True),
    ("children", "kids", True),
    ("puppy", "dog", False),
    ("grandmother", "grandma", True),
    # the world: close but different
    ("John", "Jon", False),
    ("Caroline", "Carolyn", False),
    ("Melanie", "Mel's mother", False),
    ("Caroline", "Caroline's mom", False),
    ("New York", "New Jersey", False),
    ("Paris", "London", False),
    ("Sweden", "Switzerland", False),
    ("painting", "pottery", False),
    ("hiking", "biking", False),
    ("camping", "glamping", False),
    ("guitar", "violin", False),
    ("basketball", "baseball", False),
    ("cat", "dog", False),
    ("turtle", "tortoise", False),
    ("sister", "brother", False),
    ("husband", "wife", False),
    ("wedding", "engagement", False),
    ("concert", "conference", False),
    ("novel", "screenplay", False),
    ("Harry Potter", "Game of Thrones", False),
    ("Counter-Strike", "Street Fighter", False),
    ("adoption agency", "adoption interview", False),
    ("school event", "school play", False),
    ("summer camp", "winter camp", False),
    ("job interview", "job offer", False),
    ("Microsoft", "Apple", False),
    ("Amazon", "Amazon rainforest", False),
    ("Accenture", "Deloitte", False),
    ("Hertz", "Avis", False),
    ("account executive", "account manager", False),
    ("customer success manager", "customer support agent", False),
    ("renewal", "expansion", False),
    ("marathon", "half marathon", False),
    ("morning run", "evening run", False),
    ("first screenplay", "third screenplay", False),
    ("stuffed toy", "stuffed animal", True),
    ("homeless shelter", "animal shelter", False),
    ("blood donation", "food donation", False),
)


def measure(embedder: Any, pairs: tuple[tuple[str, str, bool], ...], min_precision: float) -> dict[str, Any]:
    """Cosine of each pair, the precision/recall/F1 of each threshold, and the threshold chosen."""
    left = embedder.embed([a for a, _, _ in pairs])
    right = embedder.embed([b for _, b, _ in pairs])
    # Names whose numbers differ are never merged (resolution checks this before the cosine).
    scored = [
        (sum(x * y for x, y in zip(u, v, strict=True)) if numbers_agree(a, b) else -1.0, same)
        for u, v, (a, b, same) in zip(left, right, pairs, strict=True)
    ]
    positives = sum(1 for _, same in scored if same)
    table = []
    for step in range(50, 100):
        threshold = step / 100
        merged = [same for cosine, same in scored if cosine >= threshold]
        right_merges = sum(merged)
        precision = right_merges / len(merged) if merged else 1.0
        recall = right_merges / positives if positives else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        table.append(
            {"threshold": threshold, "precision": round(precision, 3), "recall": round(recall, 3),
             "f1": round(f1, 3), "merges": len(merged)}
        )  # fmt: skip
    chosen = next((row for row in table if row["precision"] >= min_precision), table[-1])
    return {
        "pairs": len(pairs),
        "same": positives,
        "different": len(pairs) - positives,
        "min_precision": min_precision,
        "chosen": chosen,
        "table": table,
        "cosines": [
            {"a": a, "b": b, "same": same, "cosine": round(cosine, 3)}
            for (a, b, same), (cosine, _) in zip(pairs, scored, strict=True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="out", type=Path, help="write the results here as JSON")
    parser.add_argument("--precision", type=float, default=0.95, help="the precision a merge must reach")
    args = parser.parse_args(argv)
    from mkg_core.local_embedder import LocalEmbedder, dependencies_missing
    from mkg_core.settings import load_settings

    if dependencies_missing():
        parser.error(f"the local embedder needs {', '.join(dependencies_missing())}: pip install -e .[local]")
    exact = [(a, b) for a, b, _ in PAIRS if normalise(a) == normalise(b)]
    if exact:
        parser.error(f"these pairs already share a key, resolution never compares them: {exact}")
    embedder = LocalEmbedder(load_settings(environ={"EMBEDDING_MODEL": "local"}))
    results = measure(embedder, PAIRS, args.precision)
    print(f"{machine()}, {results['pairs']} pairs ({results['same']} same, {results['different']} different)")
    for row in results["table"]:
        if round(row["threshold"] * 100) % 5 == 0 or row is results["chosen"]:
            mark = "  <- chosen" if row is results["chosen"] else ""
            print(
                f"  cosine >= {row['threshold']:.2f}: precision {row['precision']:.3f}"
                f"  recall {row['recall']:.3f}  F1 {row['f1']:.3f}  ({row['merges']} merges){mark}"
            )
    save(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
