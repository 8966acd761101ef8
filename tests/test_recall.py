"""Recall through real hook runs: the worker answers SessionStart and UserPromptSubmit from Neo4j."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mkg_core.connections import Connections
from mkg_core.contrib import CaptureContext, ContextProvider
from mkg_core.embedding import LiteLLMEmbedder
from mkg_core.error_patterns import QueryErrorRecall
from mkg_core.events import HookEvent
from mkg_core.graph import Graph
from mkg_core.injection import FENCE_CLOSE, FENCE_OPEN, strip_recalled
from mkg_core.recall import InjectionEventLinks, ProjectContextProvider, estimate_tokens, mark_injected
from mkg_core.schema import apply_schema, core_statements
from mkg_core.search import keyword_query, search_learnings
from mkg_core.settings import load_settings
from mkg_core.system_prompt import BOOTSTRAP_PROMPT, SystemPromptProvider
from mkg_core.testing import CaptureRig
from mkg_core.testing.fakellm import FakeLLM, hashed_vector

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
CODEX = ROOT / "harnesses" / "mkg-codex" / "tests" / "payloads"
PROJECT, USER = "recall-test", "ana@example.com"
# The capture rig's deadlines are generous: these tests are about what is injected, not how fast.
IDENTITY = {"MKG_PROJECT_ID": PROJECT, "MKG_USER_ID": USER}


def _payload(folder: Path, event: str, **changes: object) -> dict:
    return {**json.loads((folder / f"{event}.json").read_text()), **changes}


def _learning(
    graph: Graph,
    lid: str,
    text: str,
    *,
    scope: str = "project",
    status: str = "approved",
    project: str = PROJECT,
    user: str = USER,
    confidence: float = 0.9,
) -> None:
    graph.write(
        "CREATE (:Learning {id: $id, text: $text, scope: $scope, status: $status, project_id: $project, "
        "user_id: $user, confidence: $confidence})",
        {"id": lid, "text": text, "scope": scope, "status": status, "project": project, "user": user,
         "confidence": confidence},
    )  # fmt: skip


def _context(result) -> str:
    assert result.returncode == 0, result.stderr
    if not result.stdout:
        return ""
    return json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]


def _prompt(rig: CaptureRig, text: str, session: str = "recall-session", client: str = "claude") -> str:
    folder = CLAUDE if client == "claude" else CODEX
    payload = _payload(folder, "UserPromptSubmit", prompt=text, session_id=session)
    return _context(rig.hook(client, "UserPromptSubmit", payload, env=IDENTITY))


def test_keyword_query_never_passes_lucene_syntax() -> None:
    assert (
        keyword_query('deploy AND (staging OR "k8s") ~ [a TO z] \\ / ^ : * ? -x +y') == "deploy staging k8s"
    )
    assert keyword_query("ok, go") is None


def test_a_prompt_recalls_relevant_memory_once_per_session(capture: CaptureRig, graph: Graph) -> None:
    _learning(graph, "l-deploy", "Deploy staging with the kubernetes helm chart in deploy/staging")
    _learning(graph, "l-cand", "The staging kubernetes cluster needs VPN access", status="candidate")
    _learning(
        graph,
        "l-user",
        "Ana wants every deploy to the staging kubernetes cluster announced in chat",
        scope="user",
        project="x",
    )
    _learning(graph, "l-unrelated", "The logo colour is teal")
    _learning(graph, "l-rejected", "Deploy staging by hand with kubectl apply", status="rejected")
    _learning(graph, "l-other-project", "Deploy staging kubernetes via ArgoCD", project="another-project")
    _learning(
        graph, "l-other-user", "Bo deploys kubernetes staging on Fridays", scope="user", user="bo@example.com"
    )
    capture.start_worker()
    context = _prompt(capture, "How do we deploy the staging kubernetes cluster?")
    assert context.startswith(FENCE_OPEN) and context.endswith(FENCE_CLOSE)
    assert "Deploy staging with the kubernetes helm chart" in context
    assert "[candidate, confidence 0.90] The staging kubernetes cluster needs VPN access" in context
    assert "About the user (ana@example.com):" in context and "Ana wants every deploy" in context
    for absent in ("teal", "by hand", "ArgoCD", "Bo deploys"):
        assert absent not in context
    capture.wait_drained()  # an answer may come before its event is stored; storing it links them
    served = graph.read(
        "MATCH (l:Learning)-[r:INJECTED_IN]->(:Session {session_id: 'recall-session'}) "
        "MATCH (l)-[:INJECTED_AT]->(e:SessionEvent {event_name: 'UserPromptSubmit'}) "
        "RETURN l.id AS id, l.use_count AS uses, r.hook_event AS hook ORDER BY id"
    )
    assert served == [
        {"id": "l-cand", "uses": 1, "hook": "UserPromptSubmit"},
        {"id": "l-deploy", "uses": 1, "hook": "UserPromptSubmit"},
        {"id": "l-user", "uses": 1, "hook": "UserPromptSubmit"},
    ]
    # The same session never gets the same learning twice; another session does.
    assert _prompt(capture, "How do we deploy the staging kubernetes cluster?") == ""
    assert "helm chart" in _prompt(
        capture, "deploy the staging kubernetes cluster", session="other", client="codex"
    )


def test_other_projects_never_crowd_a_projects_memory_out_of_the_fulltext_search(graph: Graph) -> None:
    apply_schema(graph, core_statements(64))
    graph.write(  # many close matches elsewhere, and an id that only looks like this project's
        "UNWIND range(1, 300) AS i CREATE (:Learning {id: 'elsewhere-' + i, scope: 'project', "
        "status: 'approved', project_id: CASE WHEN i = 1 THEN $project + '-web' ELSE 'p' + i END, "
        "user_id: 'u' + i, text: 'Rotate the billing api keys every quarter with the vault cli'})",
        {"project": PROJECT},
    )
    _learning(graph, "l-mine", "Billing keys live in the vault")
    _learning(graph, "l-quoted", 'The "billing" api keys rotate monthly', scope="user", user='ana "q" \\ b')
    asked = "How do we rotate the billing api keys with the vault cli?"
    for user in (USER, 'ana "q" \\ b'):
        found = search_learnings(
            graph, asked, project_id=PROJECT, user_id=user, session_id=None, limit=5, min_score=0.0
        )
        expected = {"l-mine"} if user == USER else {"l-mine", "l-quoted"}
        assert {item.id for item in found} == expected


def test_memory_made_in_the_session_of_a_strong_hit_is_promoted_with_it(graph: Graph) -> None:
    apply_schema(graph, core_statements(64))
    _learning(graph, "l-deploy", "The billing deploy runs the helm chart")
    _learning(graph, "l-tag", "A rollback needs the previous image tag from the registry")
    _learning(graph, "l-manual", "Rollback is manual")
    _learning(graph, "l-lunch", "Lunch is at noon")  # of the same session, but not a candidate
    made = {"s-billing": ["l-deploy", "l-tag", "l-lunch"], "s-other": ["l-manual"]}
    graph.write(
        "UNWIND $made AS m MERGE (s:Session {session_id: m.session}) WITH s, m "
        "UNWIND m.ids AS id MATCH (l:Learning {id: id}) CREATE (l)-[:FROM_SESSION]->(s)",
        {"made": [{"session": k, "ids": v} for k, v in made.items()]},
    )

    def search(**options: bool) -> list:
        return search_learnings(
            graph, "billing deploy rollback", project_id=PROJECT, user_id=USER, session_id=None,
            limit=5, min_score=0.0, **options,
        )  # fmt: skip

    # By words alone the short rollback note outranks the one about image tags.
    assert [r.id for r in search(use_sessions=False)] == ["l-deploy", "l-manual", "l-tag"]
    # The image tag note was made in the session of the best hit, which lifts it.
    found = search()
    assert [r.id for r in found] == ["l-deploy", "l-tag", "l-manual"]
    assert found[1].sources == ("fulltext", "session") and found[2].sources == ("fulltext",)
    # A session that made many learnings passes little to each.
    graph.write(
        "MATCH (s:Session {session_id: 's-billing'}) UNWIND range(1, 20) AS i "
        "CREATE (:Learning {id: 'l-filler-' + i, text: 'Standup notes ' + i, scope: 'project', "
        "status: 'approved', project_id: $project, user_id: $user})-[:FROM_SESSION]->(s)",
        {"project": PROJECT, "user": USER},
    )
    assert [r.id for r in search()] == ["l-deploy", "l-manual", "l-tag"]


def test_an_answer_written_before_its_event_is_linked_when_the_event_arrives(graph: Graph, settings) -> None:
    apply_schema(graph, core_statements(64))
    _learning(graph, "l-early", "Deploy staging with the helm chart")
    recalled = search_learnings(
        graph,
        "deploy staging helm chart",
        project_id=PROJECT,
        user_id=USER,
        session_id=None,
        limit=3,
        min_score=0.3,
    )
    assert [item.id for item in recalled] == ["l-early"]
    # The worker answered before the prompt's event reached the graph: no event to link yet.
    mark_injected(graph, recalled, session_id="early", event_id="ev-1", hook_event="UserPromptSubmit")
    links = (
        "MATCH (:Learning {id: 'l-early'})-[a:INJECTED_AT]->(e) RETURN e.event_id AS e, a.injected_at AS at"
    )
    assert graph.read(links) == []
    graph.write(
        "MATCH (s:Session {session_id: 'early'}) CREATE (s)-[:HAS_EVENT]->(:SessionEvent {event_id: 'ev-1'})"
    )
    prompt = HookEvent(harness="claude", event="UserPromptSubmit", session_id="early", source_event="x")
    handler = InjectionEventLinks()
    for _ in range(2):  # storing the event again (a replayed spool row) adds nothing
        handler.handle(prompt, CaptureContext(graph, settings, event_id="ev-1"))
    [link] = graph.read(links)
    injected_at = graph.read("MATCH ()-[r:INJECTED_IN]->() RETURN r.last_injected_at AS at")[0]["at"]
    assert link == {"e": "ev-1", "at": injected_at}


def test_memory_first_produced_in_the_session_is_not_echoed(capture: CaptureRig, graph: Graph) -> None:
    _learning(graph, "l-fresh", "Release notes are generated from the changelog folder")
    capture.start_worker()
    capture.hook("claude", "Stop", _payload(CLAUDE, "Stop", session_id="fresh"), env=IDENTITY)
    capture.wait_drained()
    graph.write(
        "MATCH (l:Learning {id: 'l-fresh'}), (s:Session {session_id: 'fresh'}) MERGE (l)-[:FROM_SESSION]->(s)"
    )
    assert _prompt(capture, "where are the release notes generated from?", session="fresh") == ""
    assert "changelog folder" in _prompt(
        capture, "where are the release notes generated from?", session="next"
    )


def test_trivial_unrelated_and_odd_prompts(capture: CaptureRig, graph: Graph) -> None:
    _learning(graph, "l-db", "The database migrations live in db/migrate and run with make migrate")
    capture.start_worker()
    assert _prompt(capture, "ok go") == ""  # trivial
    assert _prompt(capture, "What colour should the new button be?") == ""  # below the floor: nothing
    odd = 'migrations AND (db OR "migrate") ~ [a TO z] \\ / ^ : * ? -x +y'
    assert "db/migrate" in _prompt(capture, odd)  # Lucene syntax in a prompt is just text
    assert "failed" not in Path(capture.paths.log).read_text()


def test_the_token_budget_bounds_the_injection(capture: CaptureRig, graph: Graph) -> None:
    for index in range(8):
        _learning(
            graph, f"l-{index}", f"Invoice export step {index}: the invoice exporter writes CSV " + "x" * 200
        )
    capture.start_worker(env={"MKG_RECALL_BUDGET_PROMPT": "200"})
    context = _prompt(capture, "how does the invoice exporter write CSV files?")
    assert 0 < context.count("Invoice export step") < 8
    assert estimate_tokens(context) <= 200
    injected = graph.read("MATCH (l:Learning)-[:INJECTED_IN]->() RETURN count(l) AS n")[0]["n"]
    assert injected == context.count("Invoice export step")  # only what was shown is marked


def test_approved_ranks_above_candidate_at_equal_relevance(capture: CaptureRig, graph: Graph) -> None:
    _learning(graph, "l-a-cand", "Cache invalidation uses the redis pubsub channel", status="candidate")
    _learning(graph, "l-b-appr", "Cache invalidation uses the redis pubsub channel", status="approved")
    capture.start_worker()
    context = _prompt(capture, "how does cache invalidation work with redis?")
    assert context.index("[approved") < context.index("[candidate")


def test_session_start_injects_the_prompt_activity_and_queue(capture: CaptureRig, graph: Graph) -> None:
    _learning(graph, "l-waiting", "Ana builds with Node 20", status="candidate", scope="user")
    _learning(graph, "l-ungated", "Builds need Node 20", status="candidate")  # not for a human yet
    graph.write(
        "MERGE (p:Project {id: $project}) "
        "CREATE (p)-[:HAS_OBSERVATION]->(:Observation {id: 'o1', type: 'bugfix', "
        "title: 'Fixed the flaky login test', created_at: datetime() - duration('PT3H')}) "
        "CREATE (p)-[:HAS_OBSERVATION]->(:Observation {id: 'o2', type: 'feature', title: 'Added CSV export', "
        "created_at: datetime() - duration('PT10M')})",
        {"project": PROJECT},
    )
    capture.start_worker()
    start = _payload(CODEX, "SessionStart", session_id="start-session", source="startup")
    context = _context(capture.hook("codex", "SessionStart", start, env=IDENTITY))
    assert context.startswith(BOOTSTRAP_PROMPT.strip()[:60])
    activity = context[context.index("Recent project activity") :]
    assert activity.index("Added CSV export") < activity.index("Fixed the flaky login test")  # by recency
    assert "[feature, 10m ago]" in activity and "[bugfix, 3h ago]" in activity
    assert "1 learning(s) wait in the review queue" in context
    [log] = graph.read(
        "MATCH (:Session {session_id: 'start-session'})-[:INJECTED]->(i:SystemPromptInjection) "
        "RETURN i.content_sha AS sha, i.summary AS summary, i.source AS source, keys(i) AS keys"
    )
    assert log["source"] == "bootstrap" and "content" not in log["keys"]
    assert BOOTSTRAP_PROMPT[:40] not in json.dumps(log)  # the log never copies the prompt text

    # Resumed: the same prompt is not injected again. Cleared: it is.
    again = _context(capture.hook("codex", "SessionStart", {**start, "source": "resume"}, env=IDENTITY))
    assert BOOTSTRAP_PROMPT.strip()[:60] not in again
    cleared = _context(capture.hook("codex", "SessionStart", {**start, "source": "clear"}, env=IDENTITY))
    assert cleared.startswith(BOOTSTRAP_PROMPT.strip()[:60])


def test_a_stored_system_prompt_wins_and_is_linked(capture: CaptureRig, graph: Graph) -> None:
    graph.write(
        "CREATE (:SystemPrompt {name: 'default', content: 'You are the release captain.', version: 3})"
    )
    capture.start_worker()
    start = _payload(CLAUDE, "SessionStart", session_id="captain")
    context = _context(capture.hook("claude", "SessionStart", start, env=IDENTITY))
    assert context.startswith("You are the release captain.")
    [row] = graph.read(
        "MATCH (:Session {session_id: 'captain'})-[:INJECTED]->(i)-[:OF_PROMPT]->(p:SystemPrompt) "
        "RETURN i.source AS source, p.version AS version"
    )
    assert row == {"source": "graph", "version": 3}


def test_recalled_blocks_can_be_stripped() -> None:
    text = f"before {FENCE_OPEN}\nsecret memory\n{FENCE_CLOSE} after"
    assert strip_recalled(text) == "before  after"


# -- hybrid retrieval ------------------------------------------------------------------------------


def _embedded(graph: Graph, lid: str, text: str, **fields: object) -> None:
    _learning(graph, lid, text, **fields)  # type: ignore[arg-type]
    graph.write(
        "MATCH (l:Learning {id: $id}) SET l.embedding = $vector",
        {"id": lid, "vector": hashed_vector(text, 64)},
    )


def test_hybrid_recall_fuses_vector_and_fulltext_and_filters_in_the_index(
    graph: Graph, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    apply_schema(graph, core_statements(64))
    embedder = LiteLLMEmbedder(load_settings(environ=fake_llm.env(), project_root=tmp_path))
    _embedded(graph, "l-stem", "Deployments go through charts in the ops repository")
    _embedded(graph, "l-word", "Releases are tagged from main by the release bot")
    _embedded(
        graph, "l-other", "Deployments go through charts in the ops repository, elsewhere", project="other"
    )
    _embedded(graph, "l-user", "Ana reviews deployment charts herself", scope="user")
    _embedded(graph, "l-stranger", "Bob deploys charts manually", scope="user", user="bob@example.com")
    _embedded(graph, "l-pasta", "Pasta water needs plenty of salt")
    graph.run_autocommit("CALL db.awaitIndexes(60)")

    def search(text: str, **options: object) -> list:
        return search_learnings(
            graph, text, project_id=PROJECT, user_id=USER, session_id=None, limit=5, min_score=0.3, **options
        )  # type: ignore[arg-type]

    prompt = "deploying charted releases"  # no word in common with l-stem, only word stems
    assert [r.id for r in search(prompt)] == ["l-word"]  # fulltext alone: exact words only
    hybrid = search(prompt, embedder=embedder, min_similarity=0.2)
    by_id = {r.id: r for r in hybrid}
    assert set(by_id) == {"l-stem", "l-word", "l-user"}  # other project, other user, pasta: never
    assert by_id["l-stem"].sources == ("vector",)
    assert set(by_id["l-word"].sources) == {"fulltext", "vector"}
    assert hybrid[0].id == "l-word"  # found by both branches, so fused first
    # A stricter similarity floor keeps the vector branch to close matches only.
    assert "l-user" not in {r.id for r in search(prompt, embedder=embedder, min_similarity=0.6)}


def test_hybrid_recall_falls_back_to_fulltext_when_vectors_fail(graph: Graph, tmp_path: Path) -> None:
    apply_schema(graph, core_statements(64))
    _learning(graph, "l-word", "Releases are tagged from main by the release bot")
    down = LiteLLMEmbedder(
        load_settings(
            environ={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                     "EMBEDDING_DIMENSIONS": "64", "MKG_LLM_TIMEOUT": "5"},
            project_root=tmp_path,
        )
    )  # fmt: skip
    found = search_learnings(
        graph, "tagged releases", project_id=PROJECT, user_id=USER, session_id=None, limit=5, min_score=0.3,
        embedder=down,
    )  # fmt: skip
    assert [(r.id, r.sources) for r in found] == [("l-word", ("fulltext",))]


def test_prompt_recall_uses_vectors_when_an_embedder_is_configured(
    capture: CaptureRig, graph: Graph, fake_llm: FakeLLM
) -> None:
    capture.env.update({**fake_llm.env(), "MKG_RECALL_MIN_SIMILARITY": "0.2"})
    apply_schema(graph, core_statements(64))
    _embedded(graph, "l-stem", "Deployments go through charts in the ops repository")
    graph.run_autocommit("CALL db.awaitIndexes(60)")
    capture.start_worker()
    context = _prompt(capture, "deploying charted releases")
    assert "Deployments go through charts" in context
    prompt, names = fake_llm.embeddings()
    assert prompt.body["input"] == ["deploying charted releases"]
    # the graph branch looks the names the prompt mentions up among entities, by their embeddings
    assert names.body["input"] == ["charted releases", "releases"]


def test_warm_ups_run_every_query_and_write_or_embed_nothing(
    graph: Graph, fake_llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The built-in providers' warm-ups, with an embedder and without: each query runs on the real
    schema (a failing branch would be logged), nothing is written, and no model is called (vectors
    of the embedder's size stand in)."""
    apply_schema(graph, core_statements(64))
    embedder = LiteLLMEmbedder(load_settings(environ=fake_llm.env(), project_root=tmp_path))
    assert embedder.dimensions == 64
    with caplog.at_level(logging.DEBUG, logger="mkg"):
        for provider in (ProjectContextProvider(), SystemPromptProvider(), QueryErrorRecall()):
            for chosen in (None, embedder):
                provider.warm_up(graph, chosen)
    mine = [r for r in caplog.records if r.thread == threading.get_ident()]
    assert [r.getMessage() for r in mine if r.levelno >= logging.WARNING or "skip" in r.getMessage()] == []
    assert graph.read("MATCH (n) RETURN count(n) AS n")[0]["n"] == 0
    assert fake_llm.embeddings() == [] and fake_llm.chats() == []


def test_a_serving_worker_warms_each_connection_in_the_background(graph: Graph, settings, host) -> None:
    """Providers are warmed up once a connection is made, with the embedder when they take it and
    with the graph alone when they were written for ``warm_up(graph)``; a drain-once process
    (no ``warm_up_connections``) warms nothing."""
    calls: list[tuple[str, object]] = []
    release, done = threading.Event(), threading.Event()

    class Current(ContextProvider):
        name = "current"

        def warm_up(self, graph: Graph, embedder: object) -> None:
            calls.append(("current", embedder))

    class Older(ContextProvider):
        name = "older"

        def warm_up(self, graph: Graph) -> None:  # type: ignore[override]
            release.wait(60)  # a warm-up started keeps its thread alive until the test lets it go
            calls.append(("older", graph.read("RETURN 1 AS one")[0]["one"]))
            done.set()

    def warming() -> bool:
        return any(thread.name == "mkg-warm-up" for thread in threading.enumerate())

    once = Connections(host, providers=[Current(), Older()])
    try:
        once.graph_for(settings)
        assert not warming() and calls == []
    finally:
        once.close()
    serving = Connections(host, providers=[Current(), Older()])
    serving.warm_up_connections()
    try:
        serving.graph_for(settings)
        assert warming()
        release.set()
        assert done.wait(60)
    finally:
        release.set()
        serving.close()
    assert calls == [("current", None), ("older", 1)]  # the tests' settings have no embedder


def test_a_date_in_the_prompt_favours_memory_made_then(
    graph: Graph, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    apply_schema(graph, core_statements(64))
    embedder = LiteLLMEmbedder(load_settings(environ=fake_llm.env(), project_root=tmp_path))
    made = {
        "l-sep": (
            "The staging deploy checklist now has a rollback step",
            datetime(2025, 9, 2, tzinfo=UTC),
            {},
        ),
        "l-oct": (
            "A smoke test step joined the deploy checklist",
            datetime(2025, 10, 13, 18, tzinfo=UTC),
            {},
        ),
        "l-pasta": ("Pasta water needs plenty of salt", datetime(2025, 10, 13, 9, tzinfo=UTC), {}),
        "l-elsewhere": (
            "A smoke test step joined the deploy checklist",
            datetime(2025, 10, 13, tzinfo=UTC),
            {"project": "other"},
        ),
    }
    for lid, (text, at, fields) in made.items():
        _embedded(graph, lid, text, **fields)
        graph.write("MATCH (l:Learning {id: $id}) SET l.created_at = $at", {"id": lid, "at": at})
    graph.run_autocommit("CALL db.awaitIndexes(60)")

    def search(text: str, **options: object) -> list:
        return search_learnings(
            graph, text, project_id=PROJECT, user_id=USER, session_id=None, limit=5, min_score=0.3, **options
        )  # type: ignore[arg-type]

    undated = "what changed in the staging deploy checklist?"
    dated = "what changed in the staging deploy checklist on 13 October 2025?"
    for options in ({}, {"embedder": embedder, "min_similarity": 0.2}):
        assert [r.id for r in search(undated, **options)] == ["l-sep", "l-oct"]  # more words in common
        found = search(dated, **options)
        # Made that day, so first; the pasta of that day and the other project's memory never come.
        assert [r.id for r in found] == ["l-oct", "l-sep"]
        assert "time" in found[0].sources and "time" not in found[1].sources
    # the branches' queries run at once; one after another they rank the same
    hybrid = {"embedder": embedder, "min_similarity": 0.2}
    at_once = [(r.id, r.sources, r.score) for r in search(dated, **hybrid)]
    assert [(r.id, r.sources, r.score) for r in search(dated, **hybrid, concurrent=False)] == at_once


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_a_learning_written_through_mcp_stays_out_of_the_session_that_wrote_it(
    capture: CaptureRig, graph: Graph, client: str
) -> None:
    # The MCP server cannot know the session; the harness's PostToolUse of the call names it.
    lid = "learning:recall-test:mcp-written"
    _learning(graph, lid, "Release notes are generated from the changelog folder", status="candidate")
    capture.start_worker()
    folder = CLAUDE if client == "claude" else CODEX
    answer = {"id": lid, "scope": "project", "status": "candidate", "already_known": False}
    response: object = (
        answer if client == "claude" else {"content": [{"type": "text", "text": json.dumps(answer)}]}
    )
    tool = "mcp__meta-knowledge-graph__project_add_learning"
    if client == "codex":
        tool = "mcp__meta_knowledge_graph__project_add_learning"
    call = _payload(folder, "PostToolUse", session_id="writer", tool_name=tool, tool_response=response,
                    tool_input={"text": "Release notes are generated from the changelog folder"})  # fmt: skip
    assert capture.hook(client, "PostToolUse", call, env=IDENTITY).returncode == 0
    capture.wait_drained()
    linked = graph.read(
        "MATCH (:Learning {id: $id})-[f:FROM_SESSION]->(s:Session) RETURN s.session_id AS s, f.via AS via",
        {"id": lid},
    )
    assert linked == [{"s": "writer", "via": "mcp"}]
    question = "where are the release notes generated from?"
    assert _prompt(capture, question, session="writer", client=client) == ""
    assert "changelog folder" in _prompt(capture, question, session="reader", client=client)
