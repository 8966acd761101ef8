"""Load the RoadFlex demo into Neo4j: the account graph, bootstrap learnings and the persona.

Every seeder is idempotent. Nodes are merged on natural keys; the seed-owned ``USES_PRODUCT`` and
``HAS_CONTACT`` relationships are brought in line with the current dataset (stale ones removed,
current ones merged), and nothing records when it ran, so a second run on the same day changes
nothing.

::

    (:CSM {name})-[:OWNS]->(:Account {id})-[:USES_PRODUCT {contracted_seats, mau, ...}]->(:Product {sku})
    (:Account)-[:HAS_CONTACT]->(:Contact {contact_id})
    (:Project)-[:HAS_LEARNING]->(:Learning {status: 'approved', source: 'seed'})
    (:Entity {kind: 'organisation'})-[:REFERS_TO]->(:Account)      the project's entity per account
    (:SystemPrompt {name: 'project:<project id>'})-[:HAS_VERSION]->(:SystemPromptVersion)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

from mkg_core import system_prompt
from mkg_core.contrib import SchemaStatement, SeedContext
from mkg_core.embedding import embed_or_none
from mkg_core.entities import Linked, Mention, ProviderLink, link, link_provider_nodes, link_text
from mkg_core.errors import MkgError
from mkg_core.learnings import learning_id, task_pattern

from .dataset import Dataset, build_dataset

if TYPE_CHECKING:
    from mkg_core.graph import Graph


class SeedError(MkgError):
    """A seeder cannot run as asked (a missing configuration, say); the message says what to fix."""


SCHEMA = (
    SchemaStatement(
        "account_id_unique",
        "CREATE CONSTRAINT account_id_unique IF NOT EXISTS FOR (n:Account) REQUIRE n.id IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "product_sku_unique",
        "CREATE CONSTRAINT product_sku_unique IF NOT EXISTS FOR (n:Product) REQUIRE n.sku IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "contact_id_unique",
        "CREATE CONSTRAINT contact_id_unique IF NOT EXISTS FOR (n:Contact) REQUIRE n.contact_id IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "csm_name_unique",
        "CREATE CONSTRAINT csm_name_unique IF NOT EXISTS FOR (n:CSM) REQUIRE n.name IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "account_fulltext",
        "CREATE FULLTEXT INDEX account_fulltext IF NOT EXISTS "
        "FOR (n:Account) ON EACH [n.name, n.domain, n.industry]",
        kind="fulltext",
    ),
)

# -- the account graph -------------------------------------------------------------------------------

MERGE_PRODUCTS = """
UNWIND $rows AS row
MERGE (p:Product {sku: row.sku})
SET p.name = row.name, p.category = row.category, p.tier = row.tier, p.list_price_usd = row.list_price_usd,
    p.launched_at = row.launched_at, p.source = 'seed'
"""

MERGE_ACCOUNTS = """
UNWIND $rows AS row
MERGE (a:Account {id: row.id})
SET a.name = row.name, a.domain = row.domain, a.industry = row.industry, a.region = row.region,
    a.size_class = row.size_class, a.employee_count_band = row.employee_count_band,
    a.trajectory = row.trajectory, a.seats_total = row.seats_total, a.avg_utilization = row.avg_utilization,
    a.arr_usd = row.arr_usd, a.arr_band_usd = row.arr_band_usd, a.health_score = row.health_score,
    a.signed_at = row.signed_at, a.renewal_date = row.renewal_date, a.owner_csm = row.owner_csm,
    a.source = 'seed'
MERGE (c:CSM {name: row.owner_csm})
MERGE (c)-[:OWNS]->(a)
WITH a, row
// an account changes hands: only the current owner keeps the seed's OWNS edge
MATCH (other:CSM)-[o:OWNS]->(a) WHERE other.name <> row.owner_csm
DELETE o
"""

#: The latest month of each product line; lines the dataset no longer has are removed.
SYNC_USAGE = """
UNWIND $accounts AS account_id
MATCH (a:Account {id: account_id})-[r:USES_PRODUCT {source: 'seed'}]->(p:Product)
WHERE NOT p.sku IN [row IN $rows WHERE row.account_id = account_id | row.sku]
DELETE r
WITH count(*) AS removed
UNWIND $rows AS row
MATCH (a:Account {id: row.account_id}), (p:Product {sku: row.sku})
MERGE (a)-[r:USES_PRODUCT {source: 'seed'}]->(p)
SET r.contracted_seats = row.contracted_seats, r.mau = row.mau, r.utilization = row.utilization,
    r.monthly_revenue_usd = row.monthly_revenue_usd, r.month = row.month,
    r.last_active_at = row.last_active_at
"""

SYNC_CONTACTS = """
UNWIND $accounts AS account_id
MATCH (a:Account {id: account_id})-[r:HAS_CONTACT]->(c:Contact {source: 'seed'})
WHERE NOT c.contact_id IN $ids
DETACH DELETE c
WITH count(*) AS removed
UNWIND $rows AS row
MATCH (a:Account {id: row.account_id})
MERGE (c:Contact {contact_id: row.contact_id})
SET c.first_name = row.first_name, c.last_name = row.last_name, c.email = row.email, c.title = row.title,
    c.role = row.role, c.is_decision_maker = row.is_decision_maker, c.is_champion = row.is_champion,
    c.account_id = row.account_id, c.source = 'seed'
MERGE (a)-[:HAS_CONTACT]->(c)
"""

COUNTS = """
CALL () { MATCH (a:Account {source: 'seed'}) RETURN count(a) AS accounts }
CALL () { MATCH (p:Product {source: 'seed'}) RETURN count(p) AS products }
CALL () { MATCH (c:Contact {source: 'seed'}) RETURN count(c) AS contacts }
CALL () { MATCH (c:CSM) RETURN count(c) AS csms }
CALL () { MATCH (:Account)-[r:USES_PRODUCT {source: 'seed'}]->() RETURN count(r) AS product_lines }
RETURN accounts, products, contacts, csms, product_lines
"""


def apply_demo_schema(graph: Graph) -> None:
    for statement in SCHEMA:
        graph.run_autocommit(statement.cypher)


def seed_graph(graph: Graph, data: Dataset) -> dict[str, int]:
    """Accounts, products, CSMs, contacts and the latest month of usage. Returns node counts."""
    apply_demo_schema(graph)
    accounts = [{k: v for k, v in a.items() if k not in ("products", "churned_sku")} for a in data.accounts]
    account_ids = [a["id"] for a in data.accounts]

    def work(tx: Any) -> None:
        tx.run(MERGE_PRODUCTS, rows=data.products).consume()
        tx.run(MERGE_ACCOUNTS, rows=accounts).consume()
        tx.run(SYNC_USAGE, accounts=account_ids, rows=data.latest_usage()).consume()
        tx.run(
            SYNC_CONTACTS,
            accounts=account_ids,
            ids=[c["contact_id"] for c in data.contacts],
            rows=data.contacts,
        ).consume()

    graph.write_tx(work)
    return dict(graph.read(COUNTS)[0])


# -- bootstrap learnings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedLearning:
    text: str
    kind: str  # fact | decision
    confidence: float
    task: str


LEARNINGS = (
    SeedLearning(
        "The people using this project are RoadFlex customer-success managers and account executives "
        "working the enterprise rental book: account health, renewals, expansion, stakeholders and news.",
        "fact",
        0.9,
        "session bootstrap",
    ),
    SeedLearning(
        "Account data lives in the Neo4j graph: (:CSM)-[:OWNS]->(:Account)-[:USES_PRODUCT "
        "{contracted_seats, mau, utilization, monthly_revenue_usd}]->(:Product) and "
        "(:Account)-[:HAS_CONTACT]->(:Contact); accounts carry health_score, trajectory, arr_usd, "
        "avg_utilization, renewal_date and owner_csm.",
        "fact",
        0.9,
        "account data lookup",
    ),
    SeedLearning(
        "Renewal risk means a renewal within 90 days together with an at_risk trajectory, a health_score "
        "under 50, or a product line whose mau dropped to zero.",
        "decision",
        0.85,
        "renewal risk review",
    ),
    SeedLearning(
        "Expansion room: a USES_PRODUCT line at utilization 1.0 or more runs over its contracted seats and "
        "needs a true-up; a strategic account on RoadFlex Business or Premium is a program upgrade.",
        "decision",
        0.85,
        "expansion analysis",
    ),
    SeedLearning(
        "neo4j_read_cypher returns dates as ISO strings; count days until a renewal in the query with "
        "duration.inDays(date(), a.renewal_date).days rather than by hand.",
        "fact",
        0.8,
        "cypher date handling",
    ),
    SeedLearning(
        "Route questions by engine: the warehouse (when installed) for usage history and aggregates, "
        "the graph for relationships between accounts, products, contacts and CSMs, news tools for "
        "outside signal.",
        "decision",
        0.8,
        "choosing query engine",
    ),
    SeedLearning(
        "An account brief goes internal state first (products, utilization, health, renewal, "
        "contacts), then outside signal from the last month, then one next step with a dollar figure "
        "and a named contact.",
        "decision",
        0.8,
        "account brief",
    ),
)

MERGE_LEARNINGS = """
MERGE (p:Project {id: $project_id})
  ON CREATE SET p.name = $project_name, p.created_at = $now, p.source = 'seed'
WITH p
UNWIND $rows AS row
MERGE (l:Learning {id: row.id})
  ON CREATE SET l.created_at = $now, l.status = 'approved', l.approved_at = $now, l.source = 'seed',
                l.scope = 'project', l.project_id = $project_id, l.use_count = 0, l.inject_count = 0,
                l.retrieval_count = 0, l.support_count = 1, l.consolidated = false
SET l.text = row.text, l.summary = row.text, l.kind = row.kind, l.task_pattern = row.task_pattern,
    l.confidence = CASE WHEN l.confidence IS NULL OR row.confidence > l.confidence
                        THEN row.confidence ELSE l.confidence END,
    // a tombstone stays out of retrieval; live memory gets a vector once
    l.embedding = CASE WHEN l.status IN ['approved', 'candidate']
                       THEN coalesce(l.embedding, row.embedding) END
MERGE (p)-[:HAS_LEARNING]->(l)
RETURN l.id AS id, l.status AS status
"""


def seed_learnings(
    graph: Graph, context: SeedContext, project_id: str, project_name: str
) -> list[dict[str, Any]]:
    """The bootstrap learnings, approved, in the project. A human's later decision is kept."""
    vectors = embed_or_none(context.embedder, [item.text for item in LEARNINGS])
    rows = [
        {
            "id": learning_id(project_id, item.text),
            "text": item.text,
            "kind": item.kind,
            "confidence": item.confidence,
            "task_pattern": task_pattern(item.task),
            "embedding": vector,
        }
        for item, vector in zip(LEARNINGS, vectors, strict=True)
    ]
    now = datetime.now(UTC)
    items = [
        Linked(
            learning_id(project_id, item.text),
            "Learning",
            "project",
            project_id,
            None,
            tuple(link_text(item.text)),
        )
        for item in LEARNINGS
    ]

    def work(tx: Any) -> list[dict[str, Any]]:
        params = {"rows": rows, "project_id": project_id, "project_name": project_name, "now": now}
        written: list[dict[str, Any]] = tx.run(MERGE_LEARNINGS, params).data()
        link(tx, items, now=now)  # what each learning is about, as the linker reads it
        return written

    return list(graph.write_tx(work))


def seed_account_entities(graph: Graph, data: Dataset, project_id: str) -> int:
    """Each account as an organisation entity of the project (its domain an alias), linked to the
    account, so that memory naming an account leads to it. Returns the number of accounts linked."""
    links = [
        ProviderLink("Account", "id", account["id"], mention, project_id)
        for account in data.accounts
        for mention in [Mention.of(account["name"], "organisation", [account["domain"]], "provider")]
        if mention is not None
    ]
    now = datetime.now(UTC)
    return int(graph.write_tx(lambda tx: link_provider_nodes(tx, links, now=now)))


# -- the persona -------------------------------------------------------------------------------------


def persona() -> str:
    return resources.files(__package__).joinpath("system_prompt.md").read_text(encoding="utf-8")


def seed_system_prompt(graph: Graph, project_id: str) -> tuple[bool, int, int]:
    """Persist the RoadFlex persona as the project's own system prompt (never anyone's default):
    (written, version, characters)."""
    text = persona()
    written, version = system_prompt.seed(
        graph,
        text,
        scope=system_prompt.Scope.project(project_id),
        summary="RoadFlex sales persona (system_prompt.md)",
    )
    return written, version, len(text.strip())


# -- all of it ---------------------------------------------------------------------------------------


def seed_minimum(
    context: SeedContext, project_id: str, project_name: str, data: Dataset | None = None
) -> None:
    """What the demo needs: the account graph, the learnings and the persona."""
    graph, say = context.graph, context.progress
    data = data or build_dataset()
    counts = seed_graph(graph, data)
    say(
        f"accounts graph: {counts['accounts']} accounts, {counts['products']} products, "
        f"{counts['contacts']} contacts, {counts['csms']} CSMs, {counts['product_lines']} product lines "
        f"(as of {data.as_of.isoformat()})"
    )
    rows = seed_learnings(graph, context, project_id, project_name)
    entities = seed_account_entities(graph, data, project_id)
    say(f"entities: {entities} accounts as organisations of project {project_id!r}")
    approved = sum(1 for row in rows if row["status"] == "approved")
    vectors = "with embeddings" if context.embedder is not None else "text only (no embedder available)"
    count = len(rows)
    say(f"learnings: {count} bootstrap learnings in project {project_id!r}, {approved} approved, {vectors}")
    written, version, chars = seed_system_prompt(graph, project_id)
    action = "written" if written else "unchanged"
    say(f"system prompt of project {project_id!r}: {action}, version {version}, {chars} characters")


def seed_warehouse(context: SeedContext, data: Dataset | None = None, *, required: bool = False) -> bool:
    """The optional BigQuery copy, then its neocarta catalog, each when configured.

    Returns whether both ran. With ``required`` a missing configuration is an error instead of a
    note.
    """
    from . import warehouse

    say = context.progress
    problems = warehouse.bigquery_problems(context.settings)
    if problems:
        message = "BigQuery copy skipped: " + "; ".join(problems)
        if required:
            raise SeedError(message)
        say(message)
        return False
    warehouse.seed_bigquery(context.settings, data or build_dataset(), say)
    return seed_catalog(context, required=required)


def seed_catalog(context: SeedContext, *, required: bool = False) -> bool:
    from . import warehouse

    problems = warehouse.neocarta_problems(context.settings)
    if problems:
        message = "neocarta catalog skipped: " + "; ".join(problems)
        if required:
            raise SeedError(message)
        context.progress(message)
        return False
    warehouse.run_neocarta(context.settings, context.progress)
    return True


def seed_all(context: SeedContext, project_id: str, project_name: str) -> None:
    """The minimum seeders, then the warehouse ones when they are configured."""
    data = build_dataset()
    seed_minimum(context, project_id, project_name, data)
    seed_warehouse(context, data)
