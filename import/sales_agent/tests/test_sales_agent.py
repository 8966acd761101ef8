"""The RoadFlex demo: dataset, seeders (idempotent, against the real Neo4j) and ``mkg demo`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from mkg_sales_agent import warehouse
from mkg_sales_agent.dataset import at_risk, build_dataset
from mkg_sales_agent.demo import PROJECT_ID
from mkg_sales_agent.seeders import LEARNINGS

from mkg_core.graph import Graph
from mkg_core.learnings import learning_id
from mkg_core.localdb import LocalNeo4j
from mkg_core.settings import load_settings
from mkg_core.testing import BIN_DIR, CaptureRig, free_port, neo4j_jar_cache
from mkg_core.testing.fakellm import FakeLLM

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]
AS_OF = date(2026, 6, 15)


# -- the dataset -------------------------------------------------------------------------------------


def test_the_dataset_is_the_same_for_the_same_day_and_moves_with_it() -> None:
    first, again = build_dataset(AS_OF), build_dataset(AS_OF)
    assert first == again
    assert (len(first.accounts), len(first.products)) == (48, 21)
    assert len({a["id"] for a in first.accounts}) == 48
    assert {a["owner_csm"] for a in first.accounts} == {
        "Marcus Wei",
        "Priya Shah",
        "Diego Ramirez",
        "Sofia Müller",
        "Hannah Park",
    }
    soon = first.renewing_within(90)
    assert any(at_risk(a) for a in soon) and any(not at_risk(a) for a in soon)
    assert any(r["utilization"] >= 1.0 for r in first.latest_usage())  # expansion room exists
    assert all(r["month"] <= AS_OF for r in first.usage)

    later = build_dataset(AS_OF + timedelta(days=30))
    assert [a["trajectory"] for a in later.accounts] == [a["trajectory"] for a in first.accounts]
    assert later.accounts[0]["renewal_date"] == first.accounts[0]["renewal_date"] + timedelta(days=30)


def test_the_preview_needs_no_database_and_no_mkg() -> None:
    result = subprocess.run(
        [sys.executable, str(HERE / "seed_data.py")], capture_output=True, text=True, check=True, timeout=60
    )
    assert "48 accounts, 21 products" in result.stdout
    assert "renewing within 90 days" in result.stdout
    probe = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import mkg_sales_agent.dataset; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mkg_core', 'neo4j', 'rich')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_warehouse_rows_follow_the_declared_columns() -> None:
    data = build_dataset(AS_OF)
    for table, (_, _, columns) in warehouse.TABLES.items():
        rows = warehouse.rows_for(data, table)
        assert rows and all(list(row) == list(columns) for row in rows)
        json.dumps(rows)  # newline-delimited JSON: dates are ISO strings
    assert len(warehouse.rows_for(data, "account_product_usage")) == len(data.usage)


# -- the seeders -------------------------------------------------------------------------------------


def _mkg(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN_DIR / "mkg"), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _snapshot(graph: Graph) -> tuple[list[Any], list[Any]]:
    """Every node and relationship with its properties, in a stable order (embeddings left out)."""
    nodes = graph.read(
        "MATCH (n) RETURN labels(n) AS labels, "
        "[k IN keys(n) WHERE k <> 'embedding' | [k, toString(n[k])]] AS props"
    )
    rels = graph.read(
        "MATCH (a)-[r]->(b) RETURN type(r) AS type, elementId(a) AS a, elementId(b) AS b, "
        "[k IN keys(r) | [k, toString(r[k])]] AS props"
    )

    def key(row: dict[str, Any]) -> str:
        return json.dumps({**row, "props": sorted(row["props"])})

    return sorted(key(n) for n in nodes), sorted(key(r) for r in rels)


@pytest.fixture
def seed_env(capture: CaptureRig, graph: Graph) -> dict[str, str]:
    return {**capture.env, "MKG_PROJECT_ID": "roadflex-test", "EMBEDDING_MODEL": "none"}


def test_seeding_twice_changes_nothing(seed_env: dict[str, str], graph: Graph) -> None:
    first = _mkg(seed_env, "seed", "sales-agent")
    assert first.returncode == 0, first.stderr
    assert "48 accounts, 21 products" in first.stdout
    assert "BigQuery copy skipped: GCP_PROJECT_ID is not set" in first.stdout
    before = _snapshot(graph)

    again = _mkg(seed_env, "seed", "sales-agent")
    assert again.returncode == 0, again.stderr
    assert "unchanged, version 1" in again.stdout
    assert _snapshot(graph) == before

    counts = graph.read(
        "MATCH (a:Account) WITH count(a) AS accounts "
        "MATCH (:CSM)-[o:OWNS]->(:Account) WITH accounts, count(o) AS owned "
        "MATCH (:Project {id: 'roadflex-test'})-[:HAS_LEARNING]->"
        "(l:Learning {status: 'approved', source: 'seed'}) "
        "WITH accounts, owned, count(l) AS learnings "
        "MATCH (p:SystemPrompt {name: 'project:roadflex-test'}) "
        "RETURN accounts, owned, learnings, p.version AS version"
    )
    assert counts == [{"accounts": 48, "owned": 48, "learnings": len(LEARNINGS), "version": 1}]
    prompts = graph.read("MATCH (p:SystemPrompt) RETURN p.name AS name")
    assert prompts == [{"name": "project:roadflex-test"}]  # the persona changes nobody's default
    data = build_dataset()
    expected_lines = len(data.latest_usage())
    assert graph.read("MATCH ()-[r:USES_PRODUCT]->() RETURN count(r) AS n")[0]["n"] == expected_lines


def test_diffbot_results_enrich_the_seeded_demo_accounts(
    seed_env: dict[str, str], capture: CaptureRig, graph: Graph
) -> None:
    """mkg-diffbot's capture against the demo's own accounts: an enhance answer for Accenture and a
    news search mentioning Deloitte reach the seeded :Account nodes."""
    from mkg_diffbot.fake import ACCENTURE, ARTICLES
    from mkg_diffbot.tools import compact

    seeded = _mkg(seed_env, "seed", "sales-agent-graph")
    assert seeded.returncode == 0, seeded.stderr
    capture.env.update({"MKG_PROJECT_ID": "roadflex-test"})
    payload = json.loads(
        (ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads" / "PostToolUse.json").read_text()
    )
    calls = [
        (
            "enhance_entity",
            {"entity_type": "Organization", "name": "Accenture"},
            {"data": [{"entity": ACCENTURE}]},
        ),
        ("search_news", {"dql": 'type:Article text:"Deloitte"'}, {"data": [{"entity": a} for a in ARTICLES]}),
    ]
    for n, (tool, tool_input, answer) in enumerate(calls):
        event = {**payload, "session_id": "demo-diffbot", "tool_use_id": f"toolu_d{n}",
                 "tool_name": f"mcp__plugin_meta-knowledge-graph_mkg__{tool}", "tool_input": tool_input,
                 "tool_response": [{"type": "text", "text": json.dumps(compact(answer))}]}  # fmt: skip
        assert capture.hook("claude", "PostToolUse", event).returncode == 0
    capture.drain()
    rows = graph.read(
        "MATCH (a:Account)<-[:MENTIONS]-(:NewsArticle) RETURN 'news' AS how, a.id AS account "
        "UNION MATCH (a:Account)-[:HAS_ENRICHMENT]->(:DiffbotOrganization) "
        "RETURN 'enriched' AS how, a.id AS account"
    )
    assert sorted((r["how"], r["account"]) for r in rows) == [
        ("enriched", "accenture"), ("news", "accenture"), ("news", "deloitte"),
    ]  # fmt: skip


def test_a_reseed_brings_the_graph_back_to_the_dataset_and_keeps_human_decisions(
    seed_env: dict[str, str], graph: Graph
) -> None:
    assert _mkg(seed_env, "seed", "sales-agent").returncode == 0
    rejected = learning_id("roadflex-test", LEARNINGS[0].text)
    graph.write(
        "MATCH (a:Account {id: 'accenture'}) "
        "MERGE (p:Product {sku: 'old-sku'}) MERGE (a)-[:USES_PRODUCT {source: 'seed', mau: 1}]->(p) "
        "MERGE (a)-[:HAS_CONTACT]->(:Contact {contact_id: 'accenture-c99', source: 'seed'}) "
        "MERGE (c:CSM {name: 'Someone Else'}) MERGE (c)-[:OWNS]->(a) "
        "WITH a MATCH (a)-[u:USES_PRODUCT]->(:Product {sku: 'roadflex-global'}) SET u.mau = 0 "
        "WITH a MATCH (l:Learning {id: $id}) SET l.status = 'rejected', l.embedding = null",
        {"id": rejected},
    )
    assert _mkg(seed_env, "seed", "sales-agent-graph").returncode == 0
    assert _mkg(seed_env, "seed", "sales-agent-learnings").returncode == 0

    rows = graph.read(
        "MATCH (a:Account {id: 'accenture'}) RETURN "
        "COLLECT { MATCH (a)-[:USES_PRODUCT]->(p) RETURN p.sku } AS skus, "
        "COLLECT { MATCH (a)-[:HAS_CONTACT]->(c) RETURN c.contact_id } AS contacts, "
        "COLLECT { MATCH (c)-[:OWNS]->(a) RETURN c.name } AS owners, "
        "COLLECT { MATCH (a)-[u:USES_PRODUCT]->(:Product {sku: 'roadflex-global'}) "
        "RETURN u.mau } AS global_mau"
    )[0]
    accenture = next(a for a in build_dataset().accounts if a["id"] == "accenture")
    assert sorted(rows["skus"]) == sorted(accenture["products"])
    assert "accenture-c99" not in rows["contacts"]
    assert rows["owners"] == [accenture["owner_csm"]]
    (latest,) = [
        r
        for r in build_dataset().latest_usage()
        if r["account_id"] == "accenture" and r["sku"] == "roadflex-global"
    ]
    assert rows["global_mau"] == [latest["mau"]] and latest["mau"] > 0
    status = graph.read(
        "MATCH (l:Learning {id: $id}) RETURN l.status AS s, l.embedding AS e", {"id": rejected}
    )
    assert status == [{"s": "rejected", "e": None}]  # a human's rejection outlives a reseed


def test_optional_seeders_say_what_is_missing(seed_env: dict[str, str], graph: Graph) -> None:
    result = _mkg({**seed_env, "BIGQUERY_DATASET_ID": "acme_corp"}, "seed", "sales-agent-bigquery")
    assert result.returncode == 1
    assert "GCP_PROJECT_ID is not set" in result.stderr
    assert "BIGQUERY_DATASET_ID" not in result.stderr
    settings = load_settings(
        environ={
            "GCP_PROJECT_ID": "p",
            "BIGQUERY_DATASET_ID": "d",
            "GOOGLE_APPLICATION_CREDENTIALS": "/nope.json",
        }
    )
    problems = warehouse.bigquery_problems(settings)
    assert any("missing file: /nope.json" in p for p in problems)
    catalog = warehouse.neocarta_problems(load_settings(environ={"EMBEDDING_MODEL": "none"}))
    assert any("GCP_PROJECT_ID" in p for p in catalog) and any("embedding model" in p for p in catalog)


# -- mkg demo ----------------------------------------------------------------------------------------

EXTRACT, OBSERVE, JUDGE = "long-term memory", "episodic timeline", 'kind="candidate">'
CALL_ORDER = "Call at-risk renewals in order of the ARR at stake, champion first."
PHONE = "Reads answers on a phone between customer calls; keep them short."


def _demo_env(capture: CaptureRig, **extra: str) -> dict[str, str]:
    return {**capture.env, "MKG_STATE_DIR": capture.paths.root, "COLUMNS": "400", **extra}


def test_the_demo_runs_the_whole_loop_with_an_llm(
    capture: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    fake_llm.reply({"verdict": "consistent", "reason": "new and compatible"}, when=JUDGE)
    fake_llm.reply(
        {
            "learnings": [
                {
                    "action": "create",
                    "scope": "project",
                    "kind": "decision",
                    "text": CALL_ORDER,
                    "confidence": 0.8,
                },
                {"action": "create", "scope": "user", "kind": "preference", "text": PHONE, "confidence": 0.8},
            ]
        },
        when=EXTRACT,
    )
    fake_llm.reply(
        {
            "observations": [
                {
                    "type": "discovery",
                    "title": "Reviewed renewals at risk and expansion room",
                    "facts": ["11 at-risk renewals within 90 days"],
                    "narrative": "The user reviewed renewals, expansion, Accenture and the CSM book.",
                }
            ]
        },
        when=OBSERVE,
    )
    result = _mkg(_demo_env(capture, **fake_llm.env()), "demo", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "Extraction will run with openai/mkg-fake-model" in out
    assert "RoadFlex account intelligence assistant" in out  # the persona, injected at session start
    assert "Renewal risk means a renewal within 90 days" in out  # a seeded learning, recalled
    assert CALL_ORDER in out  # learned in session 1, recalled in session 2
    assert "Reviewed renewals at risk and expansion room" in out  # the recap of recent activity
    assert "mkg-hook" not in result.stderr

    sessions = graph.read(
        "MATCH (:Project {id: $p})-[:HAS_SESSION]->(s:Session) "
        "RETURN s.session_id AS id, COUNT { (s)-[:HAS_EVENT]->() } AS events ORDER BY s.created_at",
        {"p": PROJECT_ID},
    )
    assert [s["events"] for s in sessions] == [18, 4]  # start, 4 x (prompt, pre, post, stop), end; then 4
    learned = graph.read(
        "MATCH (l:Learning)-[:FROM_SESSION]->(:Session {session_id: $s}) "
        "RETURN l.text AS text, l.scope AS scope",
        {"s": sessions[0]["id"]},
    )
    assert sorted((r["scope"], r["text"]) for r in learned) == [("project", CALL_ORDER), ("user", PHONE)]
    injected = graph.read(
        "MATCH (l:Learning {text: $t})-[:INJECTED_IN]->(:Session {session_id: $s}) RETURN count(*) AS n",
        {"t": CALL_ORDER, "s": sessions[1]["id"]},
    )
    assert injected == [{"n": 1}]
    assert graph.read("MATCH (a:Account) RETURN count(a) AS n") == [{"n": 48}]
    tool_events = graph.read(
        "MATCH (e:SessionEvent {event_name: 'PostToolUse'}) RETURN e.tool_key AS key, count(*) AS n"
    )
    assert tool_events == [{"key": "neo4j_read_cypher", "n": 4}]


def test_the_demo_runs_mkgs_own_neo4j_and_says_why_extraction_was_skipped(
    capture: CaptureRig, tmp_path: Path
) -> None:
    """Without NEO4J_URI the demo sets up MKG's own Neo4j (as `mkg neo4j` does), in the user's data
    folder, and leaves it running; a second run uses the same one."""
    env = _demo_env(capture, MKG_DATA_DIR=str(tmp_path / "data"), MKG_NEO4J_CACHE=str(neo4j_jar_cache()))
    for key in ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD"):
        env.pop(key, None)
    port = free_port()
    local = LocalNeo4j(tmp_path / "data" / "neo4j", jars=neo4j_jar_cache(), environ=env)
    try:
        result = _mkg(env, "demo", "--port", str(port), timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        out = result.stdout
        assert f"MKG's own Neo4j at bolt://127.0.0.1:{port}" in out
        assert "Extraction will be skipped: anthropic/claude-haiku-4-5 needs ANTHROPIC_API_KEY" in out
        assert "RoadFlex account intelligence assistant" in out
        assert "mkg setup --local" in out  # how to keep it
        credentials = local.credentials()
        assert credentials.uri == f"bolt://127.0.0.1:{port}" and len(credentials.password) >= 24
        settings = load_settings(environ=credentials.settings_env())
        with Graph.connect(settings) as graph:
            waiting = graph.read(
                "MATCH (:Project {id: $p})-[:HAS_PROCESSING]->(r:ProjectProcessing {waiting: true}) "
                "RETURN r.llm_skip_reason AS reason",
                {"p": PROJECT_ID},
            )
            assert len(waiting) == 2 and "ANTHROPIC_API_KEY" in waiting[0]["reason"]
            assert graph.read("MATCH (l:Learning) RETURN count(l) AS n") == [{"n": len(LEARNINGS)}]
    finally:
        local.stop()
