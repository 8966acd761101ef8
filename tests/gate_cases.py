"""Labelled candidate/neighbour cases for the consistency gate.

Each case: a new project-scoped candidate, the existing learnings it is compared with (``id``,
text, status), and the verdict a careful judge should give, with the ids it names. The gate tests
script the fake judge with these verdicts to prove the graph transitions;
``benchmarks/gate_quality.py`` runs the same cases against a real model to measure its precision
and recall.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    candidate: str
    neighbours: tuple[tuple[str, str, str], ...]
    verdict: str
    ids: tuple[str, ...] = ()
    canonical: str | None = None


def _n(*items: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    return tuple((nid, text, "approved") for nid, text in items)


CASES: list[Case] = [
    # -- temporal updates: the candidate is the newer truth ----------------------------------------
    Case(
        "ci-moved",
        "We moved CI from Jenkins to GitHub Actions in March; Jenkins jobs are gone.",
        _n(("a", "CI runs on Jenkins; the jobs live in ci/jenkins."), ("b", "Lint runs before tests.")),
        "supersedes",
        ("a",),
    ),
    Case(
        "db-upgrade",
        "The database was upgraded from Postgres 14 to Postgres 16.",
        _n(("a", "Production runs Postgres 14."), ("b", "Backups run nightly at 02:00.")),
        "supersedes",
        ("a",),
    ),
    Case(
        "node-version",
        "The project now requires Node 22; Node 20 support was dropped.",
        _n(
            ("a", "Builds need Node 20."),
        ),
        "supersedes",
        ("a",),
    ),
    Case(
        "package-manager",
        "We switched from npm to pnpm for the monorepo.",
        _n(("a", "Install dependencies with npm ci."), ("b", "The monorepo has four packages.")),
        "supersedes",
        ("a",),
    ),
    Case(
        "deploy-day",
        "Releases moved from Fridays to Tuesdays to avoid weekend incidents.",
        _n(
            ("a", "Releases go out on Fridays."),
        ),
        "supersedes",
        ("a",),
    ),
    Case(
        "api-version",
        "The public API is v3 now; v2 was retired on 1 June.",
        _n(("a", "Clients call the v2 API."), ("b", "The API is rate limited to 100 requests per second.")),
        "supersedes",
        ("a",),
    ),
    Case(
        "owner-change",
        "Priya took over the billing service from Marcus.",
        _n(
            ("a", "Marcus owns the billing service."),
        ),
        "supersedes",
        ("a",),
    ),
    Case(
        "test-runner",
        "Unit tests run with pytest now; the nose runner was removed.",
        _n(
            ("a", "Run unit tests with nosetests."),
        ),
        "supersedes",
        ("a",),
    ),
    Case(
        "branch-rename",
        "The default branch was renamed from master to main.",
        _n(
            ("a", "Open pull requests against master."),
        ),
        "supersedes",
        ("a",),
    ),
    Case(
        "two-replaced",
        "Logs go to OpenTelemetry; both the ELK stack and the syslog forwarder were removed.",
        _n(("a", "Logs are shipped to ELK."), ("b", "A syslog forwarder runs on every host.")),
        "supersedes",
        ("a", "b"),
    ),
    Case(
        "port-change",
        "The dev server listens on port 5173 since the Vite migration.",
        _n(
            ("a", "The dev server runs on port 3000."),
        ),
        "supersedes",
        ("a",),
    ),
    Case(
        "region-move",
        "The service was moved to the eu-west-1 region.",
        _n(
            ("a", "The service runs in us-east-1."),
        ),
        "supersedes",
        ("a",),
    ),
    # -- contradictions the existing memory wins --------------------------------------------------------
    Case(
        "wrong-port",
        "The API listens on port 8081.",
        _n(
            ("a", "The API listens on port 8080 (set in config/api.yaml, verified in production)."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-owner",
        "Nobody owns the payments service.",
        _n(
            ("a", "The payments service is owned by the platform team (see CODEOWNERS)."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-language",
        "The worker is written in Go.",
        _n(
            ("a", "The worker is written in Python 3.11; see worker/pyproject.toml."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "guess-vs-fact",
        "Maybe the cache TTL is one hour.",
        _n(
            ("a", "The cache TTL is 300 seconds (CACHE_TTL in settings.py)."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-db",
        "The app stores sessions in MongoDB.",
        _n(
            ("a", "Sessions are stored in Redis, keyed by user id."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-license",
        "The project is GPL licensed.",
        _n(
            ("a", "The project is licensed under Apache-2.0 (LICENSE file)."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-timezone",
        "Cron jobs run in local time.",
        _n(
            ("a", "All cron jobs run in UTC; the scheduler ignores TZ."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-command",
        "Run the tests with make check.",
        _n(
            ("a", "Run the tests with make test; there is no check target."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-version-pin",
        "Any litellm version works.",
        _n(
            ("a", "litellm 1.82.7, 1.82.8 and 1.107.x must never be installed: they were compromised."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-path",
        "Migrations live in db/migrate.",
        _n(
            ("a", "Migrations live in migrations/ and run with alembic upgrade head."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-limit",
        "The upload limit is unlimited.",
        _n(
            ("a", "Uploads are capped at 25 MB by the ingress."),
        ),
        "contradicted",
        ("a",),
    ),
    Case(
        "wrong-env",
        "Staging uses the production database.",
        _n(
            ("a", "Staging has its own database, refreshed weekly from anonymized production data."),
        ),
        "contradicted",
        ("a",),
    ),
    # -- restatements collapse onto the canonical item ----------------------------------------------------
    Case(
        "lint-restated",
        "Always run make lint before pushing.",
        _n(
            ("a", "Run make lint before every push; CI rejects unformatted code."), ("b", "Tests use pytest.")
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "tz-restated",
        "Timestamps are stored in UTC.",
        _n(
            ("a", "Store every timestamp in UTC."),
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "owner-restated",
        "The platform team owns payments.",
        _n(
            ("a", "The payments service is owned by the platform team."),
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "port-restated",
        "API port is 8080.",
        _n(("a", "The API listens on port 8080."), ("b", "The admin UI listens on 9090.")),
        "restatement",
        canonical="a",
    ),
    Case(
        "bazel-restated",
        "Build everything with Bazel.",
        _n(
            ("a", "Builds use Bazel; run bazel build //..."),
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "secrets-restated",
        "Never commit .env files.",
        _n(
            ("a", "The .env files are git-ignored and must never be committed."),
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "review-restated",
        "Two approvals are needed to merge.",
        _n(
            ("a", "Merging needs two approving reviews."),
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "flaky-restated",
        "The login test is flaky on CI.",
        _n(
            ("a", "test_login is flaky on CI runners; rerun before investigating."),
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "docker-restated",
        "Local services start with docker compose up.",
        _n(("a", "Start local services with docker compose up -d."), ("b", "Docker images are on GHCR.")),
        "restatement",
        canonical="a",
    ),
    Case(
        "feature-flag-restated",
        "New features ship behind LaunchDarkly flags.",
        _n(
            ("a", "Every new feature is released behind a LaunchDarkly flag."),
        ),
        "restatement",
        canonical="a",
    ),
    Case(
        "candidate-restated",
        "Use ruff for formatting.",
        (("a", "Code is formatted with ruff format.", "candidate"),),
        "restatement",
        canonical="a",
    ),
    Case(
        "decision-restated",
        "We chose Neo4j because the data is a graph.",
        _n(
            ("a", "Neo4j was chosen because memory is naturally a graph."),
        ),
        "restatement",
        canonical="a",
    ),
    # -- unrelated or compatible: consistent ------------------------------------------------------------
    Case(
        "unrelated-1",
        "The docs site is built with mkdocs.",
        _n(("a", "The API listens on port 8080."), ("b", "Tests use pytest.")),
        "consistent",
    ),
    Case(
        "unrelated-2",
        "Error messages must say what to do next.",
        _n(
            ("a", "Releases go out on Tuesdays."),
        ),
        "consistent",
    ),
    Case(
        "compatible-detail",
        "The API's health check is at /healthz.",
        _n(
            ("a", "The API listens on port 8080."),
        ),
        "consistent",
    ),
    Case(
        "compatible-extension",
        "Lint also checks type hints with mypy --strict.",
        _n(
            ("a", "Run make lint before every push."),
        ),
        "consistent",
    ),
    Case(
        "different-service",
        "The search service listens on port 9200.",
        _n(
            ("a", "The API listens on port 8080."),
        ),
        "consistent",
    ),
    Case(
        "different-env",
        "Production uses Postgres 16 with read replicas.",
        _n(
            ("a", "Local development uses SQLite."),
        ),
        "consistent",
    ),
    Case(
        "additional-owner",
        "Ana reviews all database migrations.",
        _n(
            ("a", "The platform team owns the payments service."),
        ),
        "consistent",
    ),
    Case(
        "new-convention",
        "Commit messages use the imperative mood.",
        _n(("a", "Merging needs two approving reviews."), ("b", "The default branch is main.")),
        "consistent",
    ),
    Case(
        "quirk",
        "The Windows build needs long paths enabled in git.",
        _n(
            ("a", "Builds use Bazel."),
        ),
        "consistent",
    ),
    Case(
        "workaround",
        "When pip hangs behind the proxy, set PIP_DEFAULT_TIMEOUT=60.",
        _n(
            ("a", "Install dependencies with pip install -e .[dev]."),
        ),
        "consistent",
    ),
    Case(
        "domain-fact",
        "Enterprise accounts renew annually in January.",
        _n(
            ("a", "The billing service sends invoices monthly."),
        ),
        "consistent",
    ),
    Case(
        "scoped-rule",
        "Only the release bot may push tags.",
        _n(
            ("a", "Releases go out on Tuesdays."),
        ),
        "consistent",
    ),
    Case(
        "same-topic-compatible",
        "Releases are announced in #releases on Slack.",
        _n(
            ("a", "Releases go out on Tuesdays."),
        ),
        "consistent",
    ),
    Case(
        "same-words-different-thing",
        "The word 'job' in the UI means a print job, not a cron job.",
        _n(
            ("a", "All cron jobs run in UTC."),
        ),
        "consistent",
    ),
    # -- genuinely ambiguous: a human decides -------------------------------------------------------------
    Case(
        "two-ports",
        "The API listens on port 9000.",
        _n(
            ("a", "The API listens on port 8080."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "two-owners",
        "The search team owns the indexer.",
        _n(
            ("a", "The data team owns the indexer."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "retention",
        "Logs are kept for 30 days.",
        _n(
            ("a", "Logs are kept for 90 days."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "branch-policy",
        "Force pushes to main are allowed for admins.",
        _n(
            ("a", "Force pushes to main are never allowed."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "timeout",
        "The request timeout is 10 seconds.",
        _n(("a", "The request timeout is 30 seconds."), ("b", "Retries use exponential backoff.")),
        "ambiguous",
        ("a",),
    ),
    Case(
        "deploy-tool",
        "Deploys use Argo CD.",
        _n(
            ("a", "Deploys use Flux."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "python-version",
        "The minimum Python version is 3.12.",
        _n(
            ("a", "The minimum Python version is 3.11."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "two-conflicts",
        "Feature flags are managed in Unleash.",
        _n(("a", "Feature flags are managed in LaunchDarkly."), ("b", "Feature flags are env variables.")),
        "ambiguous",
        ("a", "b"),
    ),
    Case(
        "staging-url",
        "Staging is at staging.example.com.",
        _n(
            ("a", "Staging is at stage.example.com."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "cache-backend",
        "The cache backend is Memcached.",
        _n(
            ("a", "The cache backend is Redis."),
        ),
        "ambiguous",
        ("a",),
    ),
    Case(
        "candidate-vs-candidate",
        "Code review happens in Gerrit.",
        (("a", "Code review happens in GitHub pull requests.", "candidate"),),
        "ambiguous",
        ("a",),
    ),
]

assert len(CASES) >= 60, len(CASES)
assert len({case.name for case in CASES}) == len(CASES)
