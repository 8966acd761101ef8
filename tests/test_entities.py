"""Entities: the deterministic linker, resolution and merges, counts and co-occurrence, the graph
branch of recall and who may reach what through it, against the real dev Neo4j."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from mkg_core.contrib import Embedder
from mkg_core.entities.backfill import backfill
from mkg_core.entities.linker import link_resources, link_text
from mkg_core.entities.model import Mention, kind_of, normalise, numbers_agree, singular
from mkg_core.entities.read import neighbourhood, top_entities
from mkg_core.entities.resolution import merges, unmerge
from mkg_core.entities.store import Linked, link
from mkg_core.entities.walk import probes
from mkg_core.graph import Graph
from mkg_core.schema import apply_schema, core_statements
from mkg_core.search import search_learnings
from mkg_core.testing.fakellm import hashed_vector

PROJECT, ANA, BEN = "entities-test", "ana@example.com", "ben@example.com"
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _found(text: str, **options: Any) -> dict[str, str]:
    return {m.name: m.kind for m in link_text(text, **options)}


# -- the linker ------------------------------------------------------------------------------------


def test_the_linker_finds_code_artifacts_by_their_shape() -> None:
    found = _found(
        "The deploy of billing/deploy.sh failed: STRIPE_API_URL was unset. Run `make deploy` after "
        "pip install stripe==5.1 requests. See https://docs.stripe.com/api/charges, GET /v1/refunds, "
        "mkg_core.search.search_learnings() and the ProjectContextProvider class; pytest -k recall "
        "passes, settings.py is read first, and the usage_monthly table lacks an index."
    )
    assert found["billing/deploy.sh"] == "file"
    assert found["settings.py"] == "file"
    assert found["STRIPE_API_URL"] == "config"
    assert found["make deploy"] == "command"
    assert found["pytest"] == "command"
    assert found["stripe"] == found["requests"] == "dependency"
    assert found["docs.stripe.com/api/charges"] == "service"
    assert found["GET /v1/refunds"] == "service"
    assert found["mkg_core.search.search_learnings"] == "symbol"
    assert found["ProjectContextProvider"] == "symbol"
    assert found["usage_monthly"] == "table"
    assert "5.1" not in found and "the" not in {name.lower() for name in found}


def test_sql_names_its_tables_and_prose_words_are_not_paths() -> None:
    found = _found("SELECT a.name FROM accounts a JOIN usage_monthly u ON u.account_id = a.id")
    assert found["accounts"] == found["usage_monthly"] == "table"
    assert "SELECT" not in found and "JOIN" not in found
    assert not any(kind in ("file", "directory") for kind in _found("Open 24/7, and/or on weekends").values())


def test_the_linker_reads_people_places_and_things_in_prose() -> None:
    found = _found(
        "Caroline: Thanks, Mel! I went to an LGBTQ support group yesterday. Melanie said John's "
        "basketball team from Acme Corp watched The Lord of the Rings in New York."
    )
    assert found["Caroline"] == "person"  # a speaker
    assert {"Mel", "Melanie", "John", "LGBTQ", "New York", "Lord of the Rings"} <= set(found)
    assert found["Acme Corp"] == "organisation"
    assert found["support group"] == found["basketball team"] == "concept"
    assert not {"Thanks", "I", "Yesterday", "yesterday", "went"} & set(found)  # function words and verbs
    precise = _found("Melanie said the basketball team won.", concepts=False)
    assert precise == {"Melanie": "name"}


def test_tool_call_resources_become_files_relative_to_the_project() -> None:
    found = link_resources(
        [("file", "/home/ana/repo/billing/deploy.sh"), ("url", "https://api.example.com/v2/users?x=1"),
         ("table", "analytics.events"), ("query", "MATCH (n) RETURN n")],
        cwd="/home/ana/repo",
    )  # fmt: skip
    assert [(m.name, m.kind, m.aliases) for m in found] == [
        ("billing/deploy.sh", "file", ("deploy.sh",)),
        ("api.example.com/v2/users", "service", ("api.example.com",)),
        ("analytics.events", "table", ()),
    ]


def test_names_are_normalised_to_one_key() -> None:
    assert normalise("The Books") == normalise("book") == "book"
    assert (
        normalise("activities") == "activity"
        and singular("boxes") == "box"
        and singular("status") == "status"
    )
    assert normalise("CSMs", "name") == normalise("CSM", "name") == "csm"
    assert normalise("./Billing/Deploy.sh", "file") == "billing/deploy.sh"
    assert normalise("Settings", "symbol") == "settings"  # code keeps its form
    assert not numbers_agree("Python 3.11", "Python 3.12") and numbers_agree(
        "pottery class", "pottery classes"
    )
    assert [kind_of(k) for k in ("Function", "environment variable", "organization", "files", "?")] == [
        "symbol",
        "config",
        "organisation",
        "file",
        "concept",
    ]


# -- the graph ---------------------------------------------------------------------------------------


@pytest.fixture
def schema(graph: Graph) -> Graph:
    apply_schema(graph, core_statements(64))
    return graph


def _learning(graph: Graph, lid: str, text: str, *, scope: str = "project", user: str = ANA,
              project: str = PROJECT, status: str = "approved") -> None:  # fmt: skip
    graph.write(
        "MERGE (p:Project {id: $project}) "
        "CREATE (p)-[:HAS_LEARNING]->(:Learning {id: $id, text: $text, status: $status, scope: $scope, "
        "  project_id: $project, user_id: $user, confidence: 0.7, created_at: $now, embedding: $vector})",
        {"id": lid, "text": text, "status": status, "scope": scope, "project": project, "user": user,
         "now": NOW, "vector": hashed_vector(text, 64)},
    )  # fmt: skip


def _link(graph: Graph, items: list[Linked], vectors: dict[str, list[float] | None] | None = None,
          similarity: float = 1.01) -> Any:  # fmt: skip
    return graph.write_tx(lambda tx: link(tx, items, now=NOW, vectors=vectors, merge_similarity=similarity))


def _linked(lid: str, text: str, scope: str = "project", user: str = ANA) -> Linked:
    return Linked(lid, "Learning", scope, PROJECT, user, tuple(link_text(text)))


def _entity(graph: Graph, name: str) -> dict[str, Any]:
    rows = graph.read(
        "MATCH (e:Entity) WHERE e.name = $name OR $name IN e.aliases "
        "RETURN e.id AS id, e.kind AS kind, e.mentions AS mentions, e.namespace AS namespace, "
        "e.aliases AS aliases, COUNT { (e)<-[:ABOUT]-() } AS links",
        {"name": name},
    )
    assert len(rows) == 1, rows
    return rows[0]


def test_linking_writes_entities_edges_counts_and_co_occurrence_once(schema: Graph) -> None:
    graph = schema
    texts = {
        "a": "billing/deploy.sh needs STRIPE_API_URL; run make deploy from billing.",
        "b": "STRIPE_API_URL comes from the vault; deploy.sh reads it.",
        "c": "Ana prefers short answers.",
    }
    for lid, text in texts.items():
        _learning(graph, lid, text)
    items = [_linked(lid, text) for lid, text in texts.items()]
    report = _link(graph, items)
    assert report.links > 0 and report.merges == []
    state = "MATCH (e:Entity)-[c:CO_OCCURS]-() RETURN e.id, e.aliases, e.updated_at, c.weight, c.updated_at"
    before = sorted(map(str, graph.read(state)))
    again = graph.write_tx(  # the same links again, later: nothing new, nothing counted twice
        lambda tx: link(tx, items, now=datetime(2026, 12, 2, tzinfo=UTC), merge_similarity=1.01)
    )
    assert again.entities == 0 and sorted(map(str, graph.read(state))) == before
    env = _entity(graph, "STRIPE_API_URL")
    assert env["kind"] == "config" and env["mentions"] == 2 and env["links"] == 2
    assert env["namespace"] == f"project:{PROJECT}"
    # "deploy.sh" in b reached the file of a through its alias (its base name)
    script = _entity(graph, "billing/deploy.sh")
    assert script["kind"] == "file" and script["mentions"] == 2 and "deploy.sh" in script["aliases"]
    weight = graph.read(
        "MATCH (a:Entity)-[c:CO_OCCURS]-(b:Entity) WHERE a.name = 'STRIPE_API_URL' "
        "AND b.name = 'billing/deploy.sh' RETURN c.weight AS w"
    )
    assert weight == [{"w": 2}]
    assert top_entities(graph, PROJECT, ANA, limit=2)[0]["mentions"] == 2


def test_secrets_never_become_entity_names(schema: Graph) -> None:
    _learning(schema, "s", "The key rotated.")
    secret = "AKIAIOSFODNN7EXAMPLE"
    mentions = tuple(
        m for m in (Mention.of(secret, "config", source="llm"), Mention.of("vault", "service", [secret])) if m
    )
    _link(schema, [Linked("s", "Learning", "project", PROJECT, ANA, mentions)])
    names = schema.read("MATCH (e:Entity) RETURN e.name AS name, e.aliases AS aliases")
    assert names == [{"name": "vault", "aliases": []}]


def test_a_merge_by_similarity_is_recorded_and_undone(schema: Graph) -> None:
    graph = schema
    _learning(graph, "kids-1", "Melanie took the children to the museum.")
    _learning(graph, "kids-2", "The kids loved the dinosaurs.")
    near = hashed_vector("children", 64)
    close = [x + (0.02 if i == 0 else 0.0) for i, x in enumerate(near)]  # a cosine of about 0.9998
    first = Linked("kids-1", "Learning", "project", PROJECT, ANA, (Mention("children", "concept"),))
    _link(graph, [first], {"children": near}, similarity=0.9)
    second = Linked("kids-2", "Learning", "project", PROJECT, ANA, (Mention("kids", "concept"),))
    report = _link(graph, [second], {"kids": close}, similarity=0.9)
    assert len(report.merges) == 1
    merged = _entity(graph, "children")
    assert merged["mentions"] == 2 and "kids" in merged["aliases"]
    listed = merges(graph, [f"project:{PROJECT}"])
    assert [(m["alias"], m["into"]) for m in listed] == [("kids", "children")]
    # "Python 3.11" is never "Python 3.12", however close
    _learning(graph, "py", "Python 3.12 is required.")
    version = Linked("py", "Learning", "project", PROJECT, ANA, (Mention("Python 3.12", "dependency"),))
    _link(graph, [version], {"Python 3.12": near}, similarity=0.9)
    assert _entity(graph, "Python 3.12")["links"] == 1

    done = unmerge(graph, listed[0]["id"], [f"project:{PROJECT}"])
    assert done["learnings"] == ["kids-2"]
    assert _entity(graph, "children")["mentions"] == 1 and _entity(graph, "kids")["mentions"] == 1
    assert graph.read("MATCH (:Learning {id: 'kids-2'})-[:ABOUT]->(e) RETURN e.name AS n") == [{"n": "kids"}]
    assert merges(graph, [f"project:{PROJECT}"]) == []
    with pytest.raises(Exception, match="no merge"):
        unmerge(graph, listed[0]["id"], [f"project:{PROJECT}"])


class _Other(Embedder):
    """An embedder with other dimensions than the indexes (as after a change of embedder)."""

    name = "other"
    dimensions = 8

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [hashed_vector(text, self.dimensions) for text in texts]


def test_vectors_of_other_dimensions_neither_fail_linking_nor_the_walk(schema: Graph) -> None:
    """The indexes keep their dimensions until `mkg backfill-embeddings` rebuilds them: meanwhile
    names link by key and alias only (no merge, no embedding stored) and the walk still answers."""
    graph = schema
    _learning(graph, "kids-1", "Melanie took the children to the museum.")
    _learning(graph, "kids-2", "The kids loved the museum.")
    other = _Other()
    for lid, name in (("kids-1", "children"), ("kids-2", "kids")):
        item = Linked(lid, "Learning", "project", PROJECT, ANA, (Mention(name, "concept"),))
        report = _link(graph, [item], {name: hashed_vector("children", 8)}, similarity=0.5)
        assert report.links == 1 and report.merges == []
    stored = graph.read("MATCH (e:Entity) RETURN e.name AS name, e.embedding AS embedding ORDER BY name")
    assert stored == [{"name": "children", "embedding": None}, {"name": "kids", "embedding": None}]
    hits = search_learnings(
        graph, "What did the kids love?", project_id=PROJECT, user_id=ANA, session_id=None, limit=5,
        min_score=0.3, embedder=other, use_fulltext=False, use_vector=False,
    )  # fmt: skip
    assert [(hit.id, hit.sources) for hit in hits] == [("kids-2", ("graph",))]


def _graph_only(graph: Graph, text: str, *, user: str | None = ANA, project: str = PROJECT) -> list[str]:
    hits = search_learnings(
        graph, text, project_id=project, user_id=user, session_id=None, limit=10, min_score=0.3,
        use_fulltext=False, use_vector=False,
    )  # fmt: skip
    assert all(hit.sources == ("graph",) for hit in hits)
    return [hit.id for hit in hits]


def test_the_walk_follows_entities_and_weighs_the_specific_over_the_hub(schema: Graph) -> None:
    graph = schema
    texts = {
        "script": "billing/deploy.sh fails without STRIPE_API_URL.",
        "vault": "STRIPE_API_URL lives in the vault under payments.",
        "hub-1": "Ana reviewed the payments dashboard.",
        "hub-2": "Ana merged the payments cleanup.",
        "hub-3": "Ana wrote the payments runbook.",
        "other": "The docs site builds with mkdocs.",
    }
    for lid, text in texts.items():
        _learning(graph, lid, text)
    _link(graph, [_linked(lid, text) for lid, text in texts.items()])
    assert _graph_only(graph, "why does deploy.sh fail?")[:1] == ["script"]  # by its alias
    found = _graph_only(graph, "where is STRIPE_API_URL set for payments")
    # STRIPE_API_URL names two learnings, payments four: the specific entity ranks its memory first
    assert set(found[:2]) == {"script", "vault"} and "other" not in found
    assert _graph_only(graph, "nothing we know about here at all") == []


class _Words(Embedder):
    """Vectors from word stems, of the same length as the stored ones: shared words, nearby vectors."""

    name = "words"
    dimensions = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [hashed_vector(text, self.dimensions) for text in texts]


def test_the_prompt_without_its_names_is_what_orders_their_memory() -> None:
    found = probes("What does Melanie's brother think of billing/deploy.sh?", project_id=PROJECT, user_id=ANA)
    assert found is not None and found.named_keys == ["billing/deploy.sh", "melanie"]
    assert (
        found.unnamed("What does Melanie's brother think of billing/deploy.sh?")
        == "What does brother think of ?"
    )
    only_names = probes("Melanie and billing/deploy.sh", project_id=PROJECT, user_id=ANA)
    assert only_names is not None and only_names.unnamed("Melanie and billing/deploy.sh") is None
    concepts = probes("what about the pottery class", project_id=PROJECT, user_id=ANA)
    assert (
        concepts is not None
        and concepts.named_keys == []
        and concepts.unnamed("what about the pottery class") is None
    )


def test_the_named_ranking_orders_a_names_memory_by_what_the_prompt_asks(schema: Graph) -> None:
    """The memory about a name every item carries, ordered by the rest of the prompt: the learning
    that answers comes first, not the one that repeats the name; memory not about the name, or
    another user's, never comes through it."""
    graph = schema
    texts = {
        "echo": "Melanie told Melanie's friend that Melanie would call Melanie's mother.",
        "office": "Melanie went to the office on Monday.",
        "answer": "Melanie finds pottery relaxing after work.",
        "not-about": "Caroline finds pottery relaxing after work.",
    }
    for lid, text in texts.items():
        _learning(graph, lid, text, scope="user")
    _learning(graph, "bens", "Melanie finds pottery relaxing after work.", scope="user", user=BEN)
    _link(graph, [_linked(lid, text, "user") for lid, text in texts.items()])
    _link(graph, [_linked("bens", "Melanie finds pottery relaxing after work.", "user", BEN)])
    hits = search_learnings(
        graph, "What does Melanie find relaxing?", project_id=PROJECT, user_id=ANA, session_id=None,
        limit=10, min_score=0.3, embedder=_Words(), use_fulltext=False, use_vector=False,
    )  # fmt: skip
    named = [hit.id for hit in hits if "named" in hit.sources]
    assert named[:1] == ["answer"] and hits[0].id == "answer"
    assert "not-about" not in named and "bens" not in [hit.id for hit in hits]
    without = search_learnings(
        graph, "What does Melanie find relaxing?", project_id=PROJECT, user_id=ANA, session_id=None,
        limit=10, min_score=0.3, embedder=_Words(), use_fulltext=False, use_vector=False, use_named=False,
    )  # fmt: skip
    assert without and all("named" not in hit.sources for hit in without)


def test_the_walk_never_reaches_another_users_facts_or_another_project(schema: Graph) -> None:
    graph = schema
    _learning(graph, "ana-fact", "Ana's sister Caroline lives in Sweden.", scope="user", user=ANA)
    _learning(graph, "ben-fact", "Ben's sister Caroline lives in Sweden.", scope="user", user=BEN)
    _learning(graph, "elsewhere", "Caroline owns the Sweden office.", project="other-project")
    _link(graph, [_linked("ana-fact", "Ana's sister Caroline lives in Sweden.", "user", ANA)])
    _link(graph, [_linked("ben-fact", "Ben's sister Caroline lives in Sweden.", "user", BEN)])
    _link(graph, [Linked("elsewhere", "Learning", "project", "other-project", ANA,
                         tuple(link_text("Caroline owns the Sweden office.")))])  # fmt: skip
    namespaces = {
        row["ns"] for row in graph.read("MATCH (e:Entity {key: 'caroline'}) RETURN e.namespace AS ns")
    }
    assert namespaces == {f"user:{ANA}", f"user:{BEN}", "project:other-project"}
    assert _graph_only(graph, "Where does Caroline live, in Sweden?", user=ANA) == ["ana-fact"]
    assert _graph_only(graph, "Where does Caroline live, in Sweden?", user=BEN) == ["ben-fact"]
    assert _graph_only(graph, "Where does Caroline live, in Sweden?", user=None) == []
    found = neighbourhood(graph, "Caroline", project_id=PROJECT, user_id=ANA)
    assert found is not None and [x["id"] for x in found["learnings"]] == ["ana-fact"]


def test_tombstones_keep_their_links_but_leave_the_walk_and_the_counts(schema: Graph) -> None:
    from mkg_core.entities.store import refresh

    graph = schema
    _learning(graph, "old", "The cache lives in Redis on port 6380.")
    _learning(graph, "new", "The cache moved from Redis to Valkey.")
    _link(graph, [_linked("old", "The cache lives in Redis on port 6380."),
                  _linked("new", "The cache moved from Redis to Valkey.")])  # fmt: skip
    assert _entity(graph, "Redis")["mentions"] == 2
    graph.write(
        "MATCH (l:Learning {id: 'old'}) "
        "SET l.status = 'rejected', l.superseded_at = $now, l.embedding = null",
        {"now": NOW},
    )
    graph.write_tx(lambda tx: refresh(tx, learnings=["old"], now=NOW))
    redis = _entity(graph, "Redis")
    assert redis["links"] == 2 and redis["mentions"] == 1  # the tombstone's link stays, uncounted
    assert _graph_only(graph, "where does the Redis cache live") == ["new"]


def test_backfill_links_memory_written_before_entities(schema: Graph) -> None:
    graph = schema
    _learning(graph, "early", "The nightly job writes to the events_daily table.")
    _learning(graph, "plain", "ok")  # names nothing: read once, then stamped
    done = backfill(graph, project_id=PROJECT, embedder=None, merge_similarity=1.01)
    assert done.items == 2 and _entity(graph, "events_daily")["links"] == 1
    assert backfill(graph, project_id=PROJECT, embedder=None, merge_similarity=1.01).items == 0


class _Close(Embedder):
    """Names embedded close to "children" where the test says so, the rest hashed."""

    name = "close"
    dimensions = 64

    def __init__(self, close: set[str]) -> None:
        self.close = close

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        near = hashed_vector("children", 64)
        return [
            [x + (0.02 if i == 0 else 0.0) for i, x in enumerate(near)]
            if text in self.close
            else hashed_vector(text, 64)
            for text in texts
        ]


def test_a_reviewed_edit_relinks_at_the_configured_merge_similarity(schema: Graph) -> None:
    from mkg_core.review import resolve

    graph = schema
    _learning(graph, "kids-1", "Melanie took the children to the museum.")
    _link(graph, [_linked("kids-1", "Melanie took the children to the museum.")],
          {"children": hashed_vector("children", 64)})  # fmt: skip
    embedder = _Close({"kids", "youngsters"})
    for lid, text, similarity in (
        ("c1", "The kids loved it.", 1.01),
        ("c2", "The youngsters loved it.", 0.9),
    ):
        _learning(graph, lid, "draft", status="candidate")
        resolve(graph, lid, "edit_approve", project_id=PROJECT, user_id=ANA, text=text,
                embedder=embedder, merge_similarity=similarity)  # fmt: skip
    assert "kids" not in (_entity(graph, "children")["aliases"] or [])  # merging off: its own entity
    merged = merges(graph, [f"project:{PROJECT}"])
    assert [m["alias"] for m in merged] == ["youngsters"]  # merging at 0.9: into a close name
    assert _entity(graph, "youngsters")["links"] == 2
