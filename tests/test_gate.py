"""The consistency gate against the real dev Neo4j, through the real litellm client and a local fake
judge scripted with the labelled verdicts of ``gate_cases``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from gate_cases import CASES, Case

from mkg_core.cli import build_cli
from mkg_core.embedding import LiteLLMEmbedder
from mkg_core.gate import Gate
from mkg_core.graph import Graph
from mkg_core.host import PluginHost
from mkg_core.review import review_queue
from mkg_core.schema import apply_schema, core_statements
from mkg_core.search import search_learnings
from mkg_core.settings import Settings, load_settings
from mkg_core.testing import Neo4jServer
from mkg_core.testing.fakellm import FakeLLM, hashed_vector

pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
USER = "ana@example.com"


@pytest.fixture
def gate_settings(neo4j_server: Neo4jServer, graph: Graph, fake_llm: FakeLLM, tmp_path: Path) -> Settings:
    apply_schema(graph, core_statements(64))
    environ = {**neo4j_server.settings_env(), **fake_llm.env(), "HOME": str(tmp_path)}
    return load_settings(environ=environ, project_root=tmp_path)


def _learning(
    graph: Graph, lid: str, text: str, project: str, *, status: str = "approved", **extra: Any
) -> None:
    graph.write(
        "MERGE (p:Project {id: $project}) "
        "CREATE (p)-[:HAS_LEARNING]->(l:Learning {id: $id, text: $text, status: $status, scope: 'project', "
        "  project_id: $project, user_id: $user, support_count: 1, confidence: 0.6, created_at: datetime()}) "
        "SET l += $extra, l.embedding = $vector",
        {"id": lid, "text": text, "status": status, "project": project, "user": USER, "extra": extra,
         "vector": hashed_vector(text, 64)},
    )  # fmt: skip


def _state(graph: Graph, lid: str) -> dict[str, Any]:
    rows = graph.read(
        "MATCH (l:Learning {id: $id}) RETURN l.status AS status, l.consistency_status AS consistency, "
        "l.embedding IS NULL AS no_vector, l.superseded_at IS NOT NULL AS superseded, "
        "l.already_learned_from AS canonical, l.support_count AS support",
        {"id": lid},
    )
    return rows[0]


def _edges(graph: Graph, lid: str, rel: str) -> list[str]:
    rows = graph.read(
        f"MATCH (:Learning {{id: $id}})-[:{rel}]->(o:Learning) RETURN o.id AS id ORDER BY id", {"id": lid}
    )
    return [row["id"] for row in rows]


def _setup(graph: Graph, case: Case) -> tuple[str, str]:
    project = f"gate-{case.name}"
    for nid, text, status in case.neighbours:
        _learning(graph, f"{case.name}:{nid}", text, project, status=status)
    candidate = f"{case.name}:candidate"
    _learning(graph, candidate, case.candidate, project, status="candidate")
    return project, candidate


def test_every_labelled_case_makes_its_transition(
    graph: Graph, gate_settings: Settings, fake_llm: FakeLLM
) -> None:
    for case in CASES:
        fake_llm.reply(
            {
                "verdict": case.verdict,
                "ids": [f"{case.name}:{i}" for i in case.ids],
                "canonical_id": f"{case.name}:{case.canonical}" if case.canonical else None,
                "reason": f"labelled case {case.name}",
            },
            when=case.candidate,
        )
    embedder = LiteLLMEmbedder(gate_settings)
    problems = []
    for case in CASES:
        project, candidate = _setup(graph, case)
        report = Gate(graph, gate_settings, project, embedder).run([candidate], sweep=False)
        if report.decided.get(candidate) != case.verdict:
            problems.append(f"{case.name}: {report}")
            continue
        problems += [f"{case.name}: {p}" for p in _check(graph, case, candidate, project)]
    assert not problems, "\n".join(problems)
    assert len(fake_llm.chats()) == len(CASES)  # one judge call per candidate, no repairs


def _check(graph: Graph, case: Case, candidate: str, project: str) -> list[str]:
    state = _state(graph, candidate)
    named = [f"{case.name}:{i}" for i in case.ids]
    problems = []

    def expect(condition: bool, what: str) -> None:
        if not condition:
            problems.append(what)

    expect(state["consistency"] == case.verdict, f"consistency_status {state['consistency']}")
    if case.verdict in ("consistent", "supersedes"):
        expect(state["status"] == "approved", f"candidate {state['status']}")
    if case.verdict == "supersedes":
        expect(_edges(graph, candidate, "SUPERSEDES") == sorted(named), "SUPERSEDES edges")
        for lid in named:
            old = _state(graph, lid)
            expect(
                old["status"] == "rejected" and old["superseded"] and old["no_vector"],
                f"{lid} not a tombstone",
            )
    if case.verdict in ("contradicted", "restatement"):
        expect(state["status"] == "rejected" and state["no_vector"], "candidate not a tombstone")
    if case.verdict == "contradicted":
        expect(_edges(graph, candidate, "CONTRADICTED_BY") == named, "CONTRADICTED_BY edge")
        expect(all(_state(graph, lid)["status"] == "approved" for lid in named), "the winner changed")
    if case.verdict == "restatement":
        canonical = f"{case.name}:{case.canonical}"
        expect(_edges(graph, candidate, "ALREADY_LEARNED_FROM") == [canonical], "ALREADY_LEARNED_FROM edge")
        expect(
            state["canonical"] == canonical and _state(graph, canonical)["support"] == 2, "support not merged"
        )
    if case.verdict == "ambiguous":
        expect(state["status"] == "candidate", f"candidate {state['status']}")
        expect(_edges(graph, candidate, "CONTRADICTS") == sorted(named), "CONTRADICTS edges")
        queue = review_queue(graph, project_id=project, user_id=USER)
        expect([item["id"] for item in queue["items"]] == [candidate], "not in the review queue")
    untouched = [f"{case.name}:{nid}" for nid, _, _ in case.neighbours if nid not in case.ids]
    expect(
        all(_state(graph, lid)["status"] in ("approved", "candidate") for lid in untouched), "bystander hit"
    )
    # Recall never returns a tombstone.
    recalled = search_learnings(
        graph, case.candidate, project_id=project, user_id=USER, session_id=None, limit=10, min_score=0.0
    )
    expect(
        all(_state(graph, item.id)["status"] != "rejected" for item in recalled),
        "recall returned a tombstone",
    )
    return problems


def test_no_neighbours_means_approved_without_a_call(
    graph: Graph, gate_settings: Settings, fake_llm: FakeLLM
) -> None:
    _learning(graph, "alone", "The only fact in this project.", "p-alone", status="candidate")
    report = Gate(graph, gate_settings, "p-alone").run(["alone"])
    assert report.decided == {"alone": "consistent"} and fake_llm.chats() == []
    assert _state(graph, "alone")["status"] == "approved"


def test_user_facts_and_human_decisions_are_left_alone(
    graph: Graph, gate_settings: Settings, fake_llm: FakeLLM
) -> None:
    graph.write(
        "CREATE (:Learning {id: 'user-fact', text: 'Ana likes tea', status: 'candidate', scope: 'user', "
        "user_id: $u, project_id: 'p'})",
        {"u": USER},
    )
    _learning(graph, "reviewed", "Releases go out on Fridays.", "p", reviewed_by="human")
    _learning(graph, "new", "Releases go out on Mondays now.", "p", status="candidate")
    fake_llm.reply({"verdict": "supersedes", "ids": ["reviewed"], "reason": "newer"})
    report = Gate(graph, gate_settings, "p").run(["user-fact", "new"])
    assert "user-fact" in report.skipped and _state(graph, "user-fact")["consistency"] is None
    # Superseding a learning a human reviewed goes to the human instead.
    assert report.decided == {"new": "ambiguous"}
    assert _state(graph, "reviewed")["status"] == "approved"
    assert _edges(graph, "new", "CONTRADICTS") == ["reviewed"]


def test_a_judge_outage_leaves_candidates_for_the_next_sweep(
    graph: Graph, gate_settings: Settings, fake_llm: FakeLLM
) -> None:
    _learning(graph, "old", "Deploys use Flux.", "p")
    _learning(graph, "cand", "Deploys use Flux and Kustomize overlays.", "p", status="candidate")
    fake_llm.reply("down", status=503, times=1)
    report = Gate(graph, gate_settings, "p").run(["cand"])
    assert "cand" in report.errors and _state(graph, "cand")["status"] == "candidate"
    assert graph.read("MATCH (l:Learning {id: 'cand'}) RETURN l.gate_error AS e")[0]["e"]
    fake_llm.reply({"verdict": "consistent", "reason": "compatible"})
    swept = Gate(graph, gate_settings, "p").run([])  # nothing new: the sweep takes it
    assert swept.decided == {"cand": "consistent"}
    again = Gate(graph, gate_settings, "p").run(["cand"])  # idempotent: nothing to do, no call
    assert again.decided == {} and "cand" in again.skipped
    assert len(fake_llm.chats()) == 2


def test_the_gate_can_be_turned_off(
    graph: Graph, neo4j_server: Neo4jServer, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    settings = load_settings(
        environ={**neo4j_server.settings_env(), **fake_llm.env(), "MKG_CONSISTENCY_GATE": "0"},
        project_root=tmp_path,
    )
    _learning(graph, "cand", "Anything at all.", "p", status="candidate")
    assert Gate(graph, settings, "p").run(["cand"]).decided == {}
    assert _state(graph, "cand")["consistency"] is None


def test_without_an_embedder_neighbours_come_from_fulltext(
    graph: Graph, gate_settings: Settings, fake_llm: FakeLLM
) -> None:
    graph.write("MATCH (l:Learning) SET l.embedding = null")
    graph.write(  # other projects' close matches never crowd this project's out
        "UNWIND range(1, 100) AS i CREATE (:Learning {id: 'other-' + i, scope: 'project', "
        "status: 'approved', project_id: 'p' + i, text: 'The cache backend is Redis, not Memcached.'})"
    )
    _learning(graph, "old", "The cache backend is Redis.", "p")
    _learning(graph, "cand", "The cache backend is Memcached.", "p", status="candidate")
    graph.write("MATCH (l:Learning) REMOVE l.embedding")
    fake_llm.reply({"verdict": "ambiguous", "ids": ["old"], "reason": "two backends"})
    report = Gate(graph, gate_settings, "p", embedder=None).run(["cand"])
    assert report.decided == {"cand": "ambiguous"}
    assert "The cache backend is Redis." in fake_llm.chats()[0].text
    assert "not Memcached" not in fake_llm.chats()[0].text


def test_the_judges_reason_is_scrubbed_before_it_is_stored(
    graph: Graph, gate_settings: Settings, fake_llm: FakeLLM
) -> None:
    _learning(graph, "old", "The cache backend is Redis.", "p")
    _learning(graph, "cand", "The cache backend is Memcached.", "p", status="candidate")
    secret = "Hunter2-Hunter2-99"
    fake_llm.reply({"verdict": "ambiguous", "ids": ["old"], "reason": f"two backends; DB_PASSWORD={secret}"})
    assert Gate(graph, gate_settings, "p").run(["cand"]).decided == {"cand": "ambiguous"}
    stored = graph.read(
        "MATCH (l:Learning {id: 'cand'}) OPTIONAL MATCH (l)-[c:CONTRADICTS]-() "
        "RETURN l.consistency_reason AS reason, collect(c.reason) AS edges"
    )[0]
    assert "two backends" in stored["reason"] and secret not in json.dumps(stored)
    assert "[REDACTED:" in stored["reason"]


# -- the review CLI and the backfill --------------------------------------------------------------


def test_mkg_review_walks_the_queue(
    graph: Graph, neo4j_server: Neo4jServer, tmp_path: Path, monkeypatch
) -> None:
    for key, value in {**neo4j_server.settings_env(), "MKG_PROJECT_ID": "p", "MKG_USER_ID": USER}.items():
        monkeypatch.setenv(key, value)
    _learning(graph, "old", "The API listens on port 8080.", "p")
    _learning(
        graph, "new", "The API listens on port 9000.", "p", status="candidate", consistency_status="ambiguous"
    )
    graph.write("MATCH (n:Learning {id: 'new'}), (o:Learning {id: 'old'}) CREATE (n)-[:CONTRADICTS]->(o)")
    graph.write(
        "CREATE (:Learning {id: 'fact', text: 'Ana likes tea', status: 'candidate', scope: 'user', "
        "user_id: $u, created_at: datetime()})",
        {"u": USER},
    )
    from mkg_core.plugins import make_plugin_manager

    cli = build_cli(PluginHost(make_plugin_manager(load_entrypoints=False, environ={})))
    listed = CliRunner().invoke(cli, ["review", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [item["id"] for item in json.loads(listed.output)["items"]] == ["new", "fact"]
    walked = CliRunner().invoke(cli, ["review"], input="n\nmoved to 9000\na\n\n")
    assert walked.exit_code == 0, walked.output
    assert "2 decision(s) recorded" in walked.output
    assert _state(graph, "new")["status"] == "approved" and _state(graph, "old")["status"] == "rejected"
    assert _state(graph, "fact")["status"] == "approved"
    assert graph.read("MATCH (l:Learning {id: 'fact'}) RETURN l.reviewed_by AS by")[0]["by"] == "human"


def test_backfill_embeds_live_memory_only(
    graph: Graph, neo4j_server: Neo4jServer, fake_llm: FakeLLM, tmp_path: Path, monkeypatch
) -> None:
    for key, value in {**neo4j_server.settings_env(), **fake_llm.env()}.items():
        monkeypatch.setenv(key, value)
    graph.write(
        "UNWIND range(1, 150) AS i CREATE (:Learning {id: 'l' + i, text: 'fact ' + i, status: 'approved'})"
    )
    graph.write(
        "CREATE (:Learning {id: 'dead', text: 'a tombstone', status: 'rejected'}) "
        "CREATE (:Observation {id: 'o1', title: 'Fixed login', facts: ['a', 'b'], narrative: 'It works.'})"
    )
    from mkg_core.plugins import make_plugin_manager

    cli = build_cli(PluginHost(make_plugin_manager(load_entrypoints=False, environ={})))
    result = CliRunner().invoke(cli, ["backfill-embeddings", "--batch", "64"])
    assert result.exit_code == 0, result.output
    assert "Embedded 151 of 151 item(s) with litellm; 0 failed." in result.output
    counts = graph.read(
        "MATCH (n) RETURN coalesce(n.status, 'observation') AS kind, count(n.embedding) AS embedded"
    )
    assert {(r["kind"], r["embedded"]) for r in counts} == {
        ("approved", 150),
        ("observation", 1),
        ("rejected", 0),
    }
    assert len(fake_llm.embeddings()) == 3
    again = CliRunner().invoke(cli, ["backfill-embeddings"])
    assert "already has an embedding" in again.output


def test_a_superseded_learning_leaves_the_graph_walk_and_its_entities_counts(
    graph: Graph, gate_settings: Settings, fake_llm: FakeLLM
) -> None:
    from datetime import UTC, datetime

    from mkg_core.entities.linker import link_text
    from mkg_core.entities.store import Linked, link

    project = "gate-entities"
    old_text = "The session cache runs on Redis at cache.internal."
    new_text = "The session cache moved from Redis to Valkey at cache.internal."
    _learning(graph, "cache:old", old_text, project)
    _learning(graph, "cache:new", new_text, project, status="candidate")
    items = [
        Linked(lid, "Learning", "project", project, USER, tuple(link_text(text)))
        for lid, text in (("cache:old", old_text), ("cache:new", new_text))
    ]
    graph.write_tx(lambda tx: link(tx, items, now=datetime.now(UTC)))
    fake_llm.reply(
        {"verdict": "supersedes", "ids": ["cache:old"], "reason": "the cache moved"}, when=new_text
    )

    def walk() -> list[str]:
        hits = search_learnings(
            graph, "what runs the Redis session cache", project_id=project, user_id=USER, session_id=None,
            limit=5, min_score=0.3, use_fulltext=False, use_vector=False,
        )  # fmt: skip
        return sorted(hit.id for hit in hits)

    def redis() -> dict[str, Any]:
        return graph.read(
            "MATCH (e:Entity {key: 'redis'}) "
            "RETURN e.mentions AS mentions, COUNT { (e)<-[:ABOUT]-() } AS links"
        )[0]

    assert walk() == ["cache:new", "cache:old"] and redis() == {"mentions": 2, "links": 2}
    report = Gate(graph, gate_settings, project, LiteLLMEmbedder(gate_settings)).run(
        ["cache:new"], sweep=False
    )
    assert report.decided == {"cache:new": "supersedes"}
    assert walk() == ["cache:new"]
    assert redis() == {"mentions": 1, "links": 2}  # the tombstone keeps its link, uncounted
