"""Searching learnings: the fulltext, vector and date rankings of one text, fused.

Used by recall (what is injected), the consistency gate (a candidate's neighbours), memory
tools and extraction. Only words of the text reach the fulltext index (:func:`keyword_query`), each
query is scoped to the project's learnings and the user's own (:func:`scoped_query`), and the
rankings are fused by weighted reciprocal rank fusion (:func:`rrf`), then memory made in the same
session as a strong hit is promoted with it (:func:`in_session_context`).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .embedding import embed_or_none
from .entities import walk
from .schema import LEARNING_TEXT_FIELDS
from .timeframes import Window, aware, named_windows

if TYPE_CHECKING:
    from .contrib import Embedder
    from .graph import Graph

log = logging.getLogger("mkg.recall")
T = TypeVar("T")
#: The threads the branches of a search run their queries on (a few searches at once, four queries
#: each); the queries wait on the database, each on a connection of its own from the driver's pool.
_QUERIES = ThreadPoolExecutor(max_workers=8, thread_name_prefix="mkg-recall")


class _InOrder:
    """Runs each query when it is submitted, in the calling thread (``concurrent=False``)."""

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args))
        except Exception as exc:
            done.set_exception(exc)
        return done


STATUSES = ("approved", "candidate")
TOKEN_RE = re.compile(r"[A-Za-z0-9]{3,}")
_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "your",
        "with",
        "this",
        "that",
        "from",
        "have",
        "has",
        "had",
        "was",
        "were",
        "will",
        "would",
        "can",
        "could",
        "should",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "how",
        "all",
        "any",
        "our",
        "out",
        "use",
        "using",
        "into",
        "about",
        "over",
        "then",
        "than",
        "them",
        "they",
        "there",
        "their",
        "its",
        "it's",
        "been",
        "being",
        "also",
        "just",
        "like",
        "more",
        "most",
        "some",
        "such",
        "only",
        "very",
        "does",
        "did",
        "done",
        "please",
        "make",
        "want",
        "need",
        "let",
        "get",
        "got",
        "one",
        "two",
        "may",
        "might",
        "must",
        "shall",
        "each",
        "other",
        "these",
        "those",
        "here",
    ]
)


def keyword_query(text: str, limit: int = 16) -> str | None:
    """A fulltext query from free text: distinct lowercase words of 3+ letters, no stop words.

    Only letters and digits survive, so no Lucene syntax from a prompt can ever reach the index.
    """
    words: list[str] = []
    for match in TOKEN_RE.finditer(text):
        word = match.group(0).lower()
        if word not in _STOPWORDS and word not in words:
            words.append(word)
        if len(words) >= limit:
            break
    return " ".join(words) or None


def scoped_query(
    words: str, *, project_id: str, user_id: str | None, statuses: Sequence[str] = STATUSES
) -> str:
    """A query of ``project_learning_fulltext`` for ``words`` (from :func:`keyword_query`) in the
    text fields of the project's learnings and of the user's facts, with one of ``statuses``.

    The scope is applied inside the index, so other projects' learnings never crowd this one's out
    of the top hits. It has boost 0: scores are those of the words alone. The index tokenizes the
    ids, so a scope clause can admit a near-miss id ("acme" admits "acme-web"); callers check
    ownership exactly afterwards.
    """
    text = " ".join(f"{field}:({words})" for field in LEARNING_TEXT_FIELDS)
    owners = [f"(+scope:project +project_id:{_phrase(project_id)})"]
    if user_id:
        owners.append(f"(+scope:user +user_id:{_phrase(user_id)})")
    status = " ".join(f"status:{_phrase(s)}" for s in statuses)
    return f"+({text}) +(+({' '.join(owners)}) +({status}))^0"


def _phrase(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: Live memory this project and user may see: not held for review, a user's unreviewed facts only
#: in the project they came from, never one already injected into or produced in this session.
VISIBLE = """
WHERE node.status IN $statuses
  AND coalesce(node.consistency_status, '') <> 'held'
  AND ((node.scope = 'project' AND node.project_id = $project_id)
       OR (node.scope = 'user' AND node.user_id = $user_id
           AND (node.status = 'approved' OR node.project_id = $project_id)))
  AND ($session_id IS NULL OR NOT EXISTS {
        MATCH (node)-[:INJECTED_IN|FROM_SESSION]->(:Session {session_id: $session_id}) })
"""

_ROWS = """
RETURN node.id AS id, node.text AS text, node.status AS status, node.scope AS scope,
       coalesce(node.confidence, 0.0) AS confidence, node.created_at AS created_at, score
ORDER BY score DESC
LIMIT $candidates
"""

_LIVE_AND_UNSEEN = VISIBLE + _ROWS

FULLTEXT_LEARNINGS = (
    """
CALL db.index.fulltext.queryNodes('project_learning_fulltext', $query, {limit: $candidates * 4})
YIELD node, score
"""
    + _LIVE_AND_UNSEEN
)

#: How many neighbours the vector index is asked for, per candidate kept. Filtered approximate
#: search finds more of the true nearest when asked for more, at little cost: at a million learnings
#: over 100 projects, asking for 10 gave a third of the exact top 10 and asking for 300 gave 88%,
#: in about the same time (docs/benchmarks.md, "Scale").
VECTOR_SEARCH_FACTOR = 10

#: Project and user learnings nearest ``$vector``, filtered inside the index (``SEARCH``): ``node``
#: and its ``score``.
_NEAREST = """
CALL () {
  MATCH (node:Learning)
    SEARCH node IN (VECTOR INDEX project_learning_vector FOR $vector
      WHERE node.scope = 'project' AND node.project_id = $project_id
      LIMIT $search_limit) SCORE AS score
  RETURN node, score
  UNION ALL
  MATCH (node:Learning)
    SEARCH node IN (VECTOR INDEX project_learning_vector FOR $vector
      WHERE node.scope = 'user' AND node.user_id = $user_id
      LIMIT $search_limit) SCORE AS score
  RETURN node, score
}
"""

#: Project and user learnings nearest the vector.
VECTOR_LEARNINGS = _NEAREST + "WITH node, score\n" + _LIVE_AND_UNSEEN

#: Learnings made within the time windows the prompt names (see :mod:`mkg_core.timeframes`), most
#: similar to the prompt first. Only live memory has an embedding.
TEMPORAL_LEARNINGS = (
    """
UNWIND $windows AS window
MATCH (node:Learning)
WHERE window.start <= node.created_at < window.end AND node.embedding IS NOT NULL
WITH DISTINCT node
WITH node, vector.similarity.cosine(node.embedding, $vector) AS score
"""
    + _LIVE_AND_UNSEEN
)


#: The latest learnings about each entity ``e`` that this recall may see (``node``).
_ABOUT_EACH = (
    "CALL (e) {\n  MATCH (e)<-[:ABOUT]-(node:Learning)"
    + VISIBLE
    + "  RETURN node ORDER BY node.created_at DESC LIMIT $per_entity\n}\n"
)


def _graph_learnings(hops: int) -> str:
    """The graph branch's query (see :mod:`mkg_core.entities.walk`): seeds, an optional second hop,
    then the learnings of each entity that this recall may see, spread and floored."""
    return walk.SEEDS + (walk.EXPAND if hops > 1 else "") + _ABOUT_EACH + walk.SPREAD + _ROWS


#: The graph branch, one hop (entities to the learnings about them) and two (through co-occurring
#: entities first).
GRAPH_LEARNINGS = {1: _graph_learnings(1), 2: _graph_learnings(2)}

#: The graph branch's named ranking (see :mod:`mkg_core.entities.walk`): the learnings nearest the
#: prompt without its names (``$vector``) that are about one of the things it names, under the floor.
#: The index finds the nearest among all of the project's and the user's memory; the memory of a
#: name every item carries is too much to compare one by one, and what is about a rarer name ranks
#: high in the walk already.
NAMED_LEARNINGS = (
    walk.NAMED_SEEDS
    + _NEAREST
    + "WITH node, score WHERE score >= $floor AND EXISTS { (node)-[:ABOUT]->(e) WHERE e IN named }\n"
    + "WITH node, score\n"
    + _LIVE_AND_UNSEEN
)

#: Reciprocal rank fusion constant. The textbook 60 flattens the head of each ranking; a small
#: constant keeps each branch's first hits on top (measured on LoCoMo, see docs/benchmarks.md).
RRF_K = 3
#: Branch weights in the fusion (1 when not listed). A date the prompt names is a strong hint: on
#: LoCoMo's dated questions the memory of that day is usually what was asked about. The graph
#: branch promotes memory about the entities the prompt names; at weight 1 it cost R@10 and MRR on
#: LoCoMo's dev split, at 0.5 it adds to R@5 and R@10; its named ranking, at 0.5 to 1.5 within a
#: few questions of each other there, is weighted 1 (docs/benchmarks.md, "The named ranking").
RRF_WEIGHTS = {"time": 2.0, "graph": 0.5, "named": 1.0}


#: Memory made in one session is context for each other: each fused candidate passes this share of
#: its score, split evenly over the other learnings of each session it came from, to the candidates
#: among them. A session that made few learnings binds them strongly, a long one that made many
#: passes little to each. Chosen on LoCoMo's dev split (docs/benchmarks.md).
SESSION_SHARE = 1.0

#: The sessions the candidates came from: which of them each made, and how many learnings it made
#: in all (live or not).
CANDIDATE_SESSIONS = """
UNWIND $ids AS id
MATCH (:Learning {id: id})-[:FROM_SESSION]->(s:Session)
WITH s, collect(id) AS ids
WHERE size(ids) > 1
RETURN ids, COUNT { (s)<-[:FROM_SESSION]-(:Learning) } AS made
"""


@dataclass(frozen=True)
class Recalled:
    id: str
    text: str
    status: str
    scope: str
    confidence: float
    score: float
    #: The retrieval branches that found it: ``fulltext``, ``vector``, ``time``, ``graph``,
    #: ``named``; and ``session`` when memory of its session among the candidates promoted it.
    sources: tuple[str, ...] = ("fulltext",)
    created_at: Any = None


def search_learnings(
    graph: Graph,
    text: str,
    *,
    project_id: str,
    user_id: str | None,
    session_id: str | None,
    limit: int,
    min_score: float,
    embedder: Embedder | None = None,
    min_similarity: float = 0.0,
    use_fulltext: bool = True,
    use_vector: bool = True,
    use_graph: bool = True,
    graph_hops: int = 1,
    use_sessions: bool = True,
    use_named: bool = True,
    concurrent: bool = True,
) -> list[Recalled]:
    """The learnings most relevant to ``text``, best first.

    Fulltext always: only words of the text reach the index (see :func:`keyword_query`), and a hit
    scoring under ``min_score`` times the best one is dropped (BM25 scores do not compare across
    queries). With an ``embedder``, also the vector index, keeping hits whose cosine similarity is
    at least ``min_similarity``. When the text names dates (see :mod:`mkg_core.timeframes`), a third
    ranking holds the learnings made in those windows that pass the same floors: the fulltext hits
    made then fused with the ones most similar to the text made then. The graph branch
    (:mod:`mkg_core.entities.walk`) ranks the learnings about the entities the text names, under the
    same similarity floor, and with an embedder also ranks (as ``named``) those about the things it
    names by key or alias by their similarity to the text without those names. The rankings are
    fused by weighted reciprocal rank fusion, and candidates made in the same session as each other
    pass a share of their scores to each other (:func:`in_session_context`). If the vector search
    fails (no index, the embedder is down) the other branches answer. ``use_fulltext``,
    ``use_vector`` and ``use_graph`` leave a branch out, ``use_named=False`` the graph branch's
    named ranking and ``use_sessions=False`` the session context (for comparisons); ``graph_hops=2``
    lets the walk pass through co-occurring entities. The branches' queries run at once, each on a
    connection of its own; ``concurrent=False`` runs them one after another (for comparisons).
    """
    candidates = max(limit * 3, 20)
    params: dict[str, Any] = {
        "candidates": candidates,
        "search_limit": candidates * VECTOR_SEARCH_FACTOR,
        "statuses": list(STATUSES),
        "project_id": project_id,
        "user_id": user_id,
        "session_id": session_id,
    }
    # The fulltext query runs while the text is embedded, the others as soon as the vectors are there.
    queue = _QUERIES if concurrent else _InOrder()
    words = keyword_query(text) if use_fulltext else None
    fulltext = (
        queue.submit(
            graph.read,
            FULLTEXT_LEARNINGS,
            {**params, "query": scoped_query(words, project_id=project_id, user_id=user_id)},
        )
        if words is not None
        else None
    )
    probes = walk.probes(text, project_id=project_id, user_id=user_id) if use_graph else None
    names = probes.probe_names if probes is not None and embedder is not None else []
    naming = probes is not None and embedder is not None and use_named
    unnamed = probes.unnamed(text[-8000:]) if probes is not None and naming else None
    texts = [text[-8000:], *([unnamed] if unnamed else [])]
    vector, *rest = embed_or_none(embedder, texts) if text.strip() else [None]
    unnamed_vector = rest[0] if rest else None
    # The names the walk looks up by similarity, apart: a batch is padded to its longest text.
    named = dict(zip(names, embed_or_none(embedder, names), strict=True)) if vector is not None else {}
    # The index scores (1 + cosine) / 2, and so does vector.similarity.cosine; the floor is a cosine.
    floor = (1 + min_similarity) / 2
    queries: dict[str, Future[list[dict[str, Any]]]] = {}
    if vector is not None and use_vector:
        queries["vector"] = queue.submit(
            _read_or_nothing, graph, VECTOR_LEARNINGS, {**params, "vector": vector}
        )
    if probes is not None:
        walked = {**params, **probes.parameters(named, graph_hops), "vector": vector, "floor": floor}
        queries["graph"] = queue.submit(_walk, graph, GRAPH_LEARNINGS[2 if graph_hops > 1 else 1], walked)
        if unnamed_vector is not None and probes.named_keys:
            named_params = {**params, **probes.named_parameters(), "vector": unnamed_vector, "floor": floor}
            queries["named"] = queue.submit(_read_or_nothing, graph, NAMED_LEARNINGS, named_params)
    windows = named_windows(text) if use_fulltext or use_vector else []
    if windows and vector is not None:
        spans = [{"start": w.start, "end": w.end} for w in windows]
        queries["time"] = queue.submit(
            _read_or_nothing, graph, TEMPORAL_LEARNINGS, {**params, "vector": vector, "windows": spans}
        )
    rankings: dict[str, list[dict[str, Any]]] = {}
    rows = fulltext.result() if fulltext is not None else []
    if rows:
        best = max(float(row["score"]) for row in rows)
        rankings["fulltext"] = [row for row in rows if float(row["score"]) >= min_score * best]
    answered = {branch: query.result() for branch, query in queries.items()}
    if "vector" in answered:
        rankings["vector"] = sorted(
            (row for row in answered["vector"] if float(row["score"]) >= floor),
            key=lambda row: -float(row["score"]),
        )
    for branch in ("graph", "named"):
        if branch in answered:
            rankings[branch] = answered[branch]
    if windows:
        similar = [row for row in answered.get("time", []) if float(row["score"]) >= floor]
        rankings["time"] = _in_windows(windows, rankings.get("fulltext", []), similar)
    fused = rrf({branch: rows for branch, rows in rankings.items() if rows})
    if use_sessions and len(fused) > 1:
        fused = in_session_context(graph, fused)
    return ranked(fused, limit)


def _walk(graph: Graph, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The graph branch. When vectors cannot be compared (the indexes and the stored embeddings
    have other dimensions after a change of embedder), the walk from names and aliases alone,
    without the similarity floor, as without an embedder."""
    try:
        return graph.read(cypher, params)
    except Exception as exc:
        if not params["probes"] and params["vector"] is None:
            log.warning("a recall branch failed, the others answer: %s", exc)
            return []
        log.warning("the graph branch failed with vectors, it walks from names alone: %s", exc)
    return _read_or_nothing(graph, cypher, {**params, "probes": [], "vector": None})


def _read_or_nothing(graph: Graph, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        return graph.read(cypher, params)
    except Exception as exc:  # no vector index yet, a dimension mismatch: the other branches answer
        log.warning("a recall branch failed, the others answer: %s", exc)
        return []


def _in_windows(
    windows: list[Window], fulltext: list[dict[str, Any]], similar: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The learnings made within ``windows``: the fulltext hits made then fused with the ones most
    similar to the text made then (``similar``, from :data:`TEMPORAL_LEARNINGS`)."""
    rankings = {"fulltext": [row for row in fulltext if _made_within(row.get("created_at"), windows)]}
    if similar:
        rankings["vector"] = similar
    return sorted(rrf(rankings), key=lambda row: -row["score"])


def _made_within(created_at: Any, windows: list[Window]) -> bool:
    moment = aware(created_at)
    return moment is not None and any(moment in window for window in windows)


def rrf(rankings: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Reciprocal rank fusion of rows keyed by ``id``: each row once, with its fused ``score`` and
    the branches (``sources``) that found it, in no particular order."""
    fused: dict[str, dict[str, Any]] = {}
    for branch, rows in rankings.items():
        for rank, row in enumerate(rows, start=1):
            entry = fused.setdefault(row["id"], {**row, "score": 0.0, "sources": []})
            entry["score"] += RRF_WEIGHTS.get(branch, 1.0) / (RRF_K + rank)
            entry["sources"].append(branch)
    return list(fused.values())


def in_session_context(graph: Graph, fused: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fused candidates (from :func:`rrf`), each promoted by the others made in a session it
    came from: a candidate passes :data:`SESSION_SHARE` of its fused score, split evenly over the
    other learnings that session made, to those among the candidates. Memory not among the
    candidates is never brought in. When the sessions cannot be read, the candidates as they are."""
    scores = {row["id"]: float(row["score"]) for row in fused}
    passed: dict[str, float] = defaultdict(float)
    for session in sessions_of(graph, list(scores)):
        ids, made = session["ids"], int(session["made"])
        for giver in ids:
            share = SESSION_SHARE * scores[giver] / max(made - 1, 1)
            for taker in ids:
                if taker != giver:
                    passed[taker] += share
    return [
        {**row, "score": row["score"] + passed[row["id"]], "sources": [*row["sources"], "session"]}
        if passed.get(row["id"])
        else row
        for row in fused
    ]


def sessions_of(graph: Graph, ids: list[str]) -> list[dict[str, Any]]:
    """The sessions that made more than one of the learnings ``ids``: a row each with those
    (``ids``) and how many learnings the session made in all (``made``); none when the graph
    cannot answer."""
    return _read_or_nothing(graph, CANDIDATE_SESSIONS, {"ids": ids})


def ranked(fused: list[dict[str, Any]], limit: int) -> list[Recalled]:
    """The ``limit`` best of fused rows; at equal relevance approved before candidate, then
    confidence."""
    ordered = sorted(
        fused, key=lambda r: (-round(r["score"], 9), r["status"] != "approved", -float(r["confidence"]))
    )
    return [Recalled(**{**row, "sources": tuple(row["sources"])}) for row in ordered[:limit]]
