"""The consistency gate: new project memory is checked against what the project already holds.

For each ungated project-scoped ``candidate`` (new from extraction, written through MCP, demoted by
an update, or left over from a judge outage), the gate finds the closest approved and candidate
learnings of the same project (vector search when the candidate has an embedding, fulltext
otherwise, at most ``MKG_CONSISTENCY_TOPK``) and, when there are any, asks an LLM judge
(:data:`JUDGE_PROMPT`, validated JSON) for one verdict:

- ``consistent``: the candidate becomes ``approved``;
- ``supersedes``: it is newer truth: ``approved``, and the learnings it replaces become
  ``rejected`` tombstones (``superseded_at``, reason, no embedding) with ``(new)-[:SUPERSEDES]->(old)``;
- ``contradicted``: an existing learning is clearly more reliable: the candidate becomes a
  ``rejected`` tombstone with ``[:CONTRADICTED_BY]`` to it;
- ``restatement``: it says what one existing learning says: it becomes a tombstone with
  ``[:ALREADY_LEARNED_FROM]`` to that canonical learning, whose support and confidence absorb it;
- ``ambiguous``: a human must decide: it stays ``candidate`` with ``consistency_status =
  'ambiguous'`` and ``[:CONTRADICTS]`` edges, and appears in the review queue.

A learning a human reviewed is never overturned: if the judge says a candidate supersedes one, the
candidate goes to the human instead. User-scoped candidates are never gated (a human approves
facts about a person). Each decision is one transaction, guarded so that re-running changes
nothing; a judge outage leaves the candidate ungated with ``gate_error`` for the next sweep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .embedding import embed_or_none
from .entities.store import refresh as refresh_entities
from .learnings import APPROVED, CONTRADICTED_BY_OTHERS, RESTATES, SUPERSEDE_OTHERS, TOMBSTONE
from .llm import FENCE_RULE, LLM, LLMError, fence
from .redaction import scrub
from .search import VECTOR_SEARCH_FACTOR, keyword_query, scoped_query

if TYPE_CHECKING:
    import neo4j

    from .contrib import Embedder
    from .graph import Graph
    from .settings import Settings

log = logging.getLogger("mkg.gate")

Verdict = Literal["consistent", "supersedes", "contradicted", "restatement", "ambiguous"]

JUDGE_SYSTEM = (
    "You keep a project's memory consistent. You compare one new statement with existing ones and "
    "answer with one strict JSON object only. " + FENCE_RULE
)

JUDGE_PROMPT = """\
A new candidate statement was learned about this project. Compare it with the existing statements
(each has an id). Decide exactly one verdict:

- "consistent": it adds something new and conflicts with none of them.
- "supersedes": it and some existing statements cannot both be true now, and the candidate is the
  newer or better-supported truth (for example "we moved from X to Y" replaces "we use X"). List
  the replaced ids in "ids".
- "contradicted": it conflicts with an existing statement that is clearly more reliable. Put that
  id in "ids".
- "restatement": it says materially the same as one existing statement. Put that id in
  "canonical_id".
- "ambiguous": there is a real conflict and you cannot tell which is true. List the conflicting
  ids in "ids".

Only a genuine conflict counts: statements about different things, or compatible details, are
consistent.

Answer with exactly this JSON shape:
{"verdict": "consistent|supersedes|contradicted|restatement|ambiguous", "ids": [],
 "canonical_id": null, "reason": "one sentence"}

Candidate:
[[CANDIDATE]]

Existing statements:
[[NEIGHBOURS]]
"""


class Judgement(BaseModel):
    model_config = ConfigDict(extra="ignore")

    verdict: Verdict
    ids: list[str] = Field(default_factory=list)
    canonical_id: str | None = None
    reason: str = ""


# -- queries ---------------------------------------------------------------------------------------

CANDIDATE = """
MATCH (l:Learning {id: $id})
RETURN l.id AS id, l.text AS text, l.status AS status, l.scope AS scope, l.project_id AS project_id,
       l.consistency_status AS consistency, l.reviewed_by AS reviewed_by, l.embedding IS NOT NULL AS embedded
"""

SET_EMBEDDING = "MATCH (l:Learning {id: $id}) SET l.embedding = $vector, l.embedding_updated_at = $now"

_NEIGHBOUR_FILTER = """
WITH node, score WHERE node.id <> $id AND node.status IN ['approved', 'candidate']
  AND node.scope = 'project' AND node.project_id = $project_id
RETURN node.id AS id, node.text AS text, node.status AS status, node.reviewed_by AS reviewed_by, score
ORDER BY score DESC
LIMIT $k
"""

VECTOR_NEIGHBOURS = (
    """
MATCH (self:Learning {id: $id})
MATCH (node:Learning)
  SEARCH node IN (VECTOR INDEX project_learning_vector FOR self.embedding
    WHERE node.scope = 'project' AND node.project_id = $project_id
    LIMIT $search_limit) SCORE AS score
"""
    + _NEIGHBOUR_FILTER
)

FULLTEXT_NEIGHBOURS = (
    """
CALL db.index.fulltext.queryNodes('project_learning_fulltext', $query, {limit: $candidates})
YIELD node, score
"""
    + _NEIGHBOUR_FILTER
)

#: Every decision only applies to a candidate still waiting for the gate.
_GUARD = """
MATCH (c:Learning {id: $id})
WHERE c.status = 'candidate' AND c.consistency_status IS NULL AND c.reviewed_by IS NULL
"""

_CHECKED = """
SET c.consistency_status = $verdict, c.consistency_checked_at = $now, c.consistency_model = $model,
    c.consistency_reason = $reason, c.gate_error = null, c.updated_at = $now
"""

APPROVE = _GUARD + _CHECKED + APPROVED + "RETURN c.id AS id"

SUPERSEDE = _GUARD + _CHECKED + APPROVED + SUPERSEDE_OTHERS

CONTRADICTED = _GUARD + _CHECKED + TOMBSTONE + CONTRADICTED_BY_OTHERS

RESTATEMENT = _GUARD + _CHECKED + RESTATES + "RETURN c.id AS id"

AMBIGUOUS = (
    _GUARD
    + _CHECKED
    + """
WITH c
UNWIND $ids AS other_id
MATCH (other:Learning {id: other_id})
MERGE (c)-[r:CONTRADICTS]->(other)
  ON CREATE SET r.created_at = $now, r.reason = $reason, r.source = 'gate'
RETURN DISTINCT c.id AS id
"""
)

GATE_ERROR = """
MATCH (c:Learning {id: $id}) WHERE c.status = 'candidate' AND c.consistency_status IS NULL
SET c.gate_error = $error, c.gate_attempted_at = $now
"""

UNGATED = """
MATCH (l:Learning {status: 'candidate', scope: 'project', project_id: $project_id})
WHERE l.consistency_status IS NULL AND l.reviewed_by IS NULL AND NOT l.id IN $exclude
RETURN l.id AS id
ORDER BY coalesce(l.gate_attempted_at, l.created_at), l.created_at, l.id
LIMIT $limit
"""

#: Verdicts that turn a learning into a tombstone (the candidate, or the learnings it replaces).
TOMBSTONING = frozenset({"supersedes", "contradicted", "restatement"})

_STATEMENTS = {
    "consistent": APPROVE,
    "supersedes": SUPERSEDE,
    "contradicted": CONTRADICTED,
    "restatement": RESTATEMENT,
    "ambiguous": AMBIGUOUS,
}


@dataclass
class GateReport:
    decided: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    llm_calls: int = 0
    tokens: int = 0

    def line(self) -> str:
        counts: dict[str, int] = {}
        for verdict in self.decided.values():
            counts[verdict] = counts.get(verdict, 0) + 1
        parts = [f"{n} {verdict}" for verdict, n in sorted(counts.items())]
        if self.errors:
            parts.append(f"{len(self.errors)} left for later ({next(iter(self.errors.values()))[:120]})")
        return "gate: " + (", ".join(parts) or "nothing to check")


@dataclass
class Gate:
    graph: Graph
    settings: Settings
    project_id: str
    embedder: Embedder | None = None
    client: str | None = None

    def run(self, ids: list[str], *, sweep: bool = True) -> GateReport:
        """Gate ``ids`` (project candidates), then sweep other ungated candidates of the project."""
        report = GateReport()
        if not self.settings.consistency_gate:
            return report
        for lid in ids:
            self.check(lid, report)
        if sweep and self.settings.consistency_sweep_limit > 0:
            rows = self.graph.read(
                UNGATED,
                {
                    "project_id": self.project_id,
                    "exclude": ids,
                    "limit": self.settings.consistency_sweep_limit,
                },
            )
            for row in rows:
                self.check(row["id"], report)
        return report

    def check(self, lid: str, report: GateReport) -> None:
        rows = self.graph.read(CANDIDATE, {"id": lid})
        if not rows:
            return
        row = rows[0]
        if (
            row["status"] != "candidate"
            or row["scope"] != "project"
            or row["consistency"] is not None
            or row["reviewed_by"] is not None
        ):
            report.skipped.append(lid)  # a user fact, already gated, or a human's decision
            return
        now = datetime.now(UTC)
        if not row["embedded"] and self.embedder is not None:
            (vector,) = embed_or_none(self.embedder, [row["text"]])
            if vector is not None:
                self.graph.write(SET_EMBEDDING, {"id": lid, "vector": vector, "now": now})
                row["embedded"] = True
        neighbours = self.neighbours(lid, row["text"], embedded=row["embedded"])
        if not neighbours:
            self._apply(lid, "consistent", [], None, "nothing similar in the project", "none", report)
            return
        llm = LLM(self.settings, self.client)
        prompt = JUDGE_PROMPT.replace("[[CANDIDATE]]", fence("candidate", row["text"])).replace(
            "[[NEIGHBOURS]]",
            fence("existing", "\n".join(f"- id={n['id']} ({n['status']}): {n['text']}" for n in neighbours)),
        )
        try:
            answer = llm.complete_json(JUDGE_SYSTEM, prompt, Judgement)
        except LLMError as exc:
            report.errors[lid] = str(exc)
            report.tokens += exc.usage.total_tokens
            self.graph.write(GATE_ERROR, {"id": lid, "error": scrub(str(exc))[:1000], "now": now})
            log.warning("gate left %s for later: %s", lid, exc)
            return
        report.llm_calls += answer.usage.calls
        report.tokens += answer.usage.total_tokens
        judged = answer.value
        known = {n["id"]: n for n in neighbours}
        verdict: str = judged.verdict
        ids = [i for i in dict.fromkeys(judged.ids) if i in known]
        canonical = judged.canonical_id if judged.canonical_id in known else None
        reason = scrub(" ".join(judged.reason.split()))[:500] or verdict
        if verdict in ("supersedes", "contradicted", "ambiguous") and not ids:
            verdict, ids = "ambiguous", list(known)[:3]  # a conflict without a named party goes to a human
        if verdict == "restatement" and canonical is None:
            verdict, ids = "ambiguous", list(known)[:3]
        if verdict == "supersedes" and any(known[i]["reviewed_by"] == "human" for i in ids):
            verdict, reason = "ambiguous", f"would replace a learning a human reviewed: {reason}"
        self._apply(lid, verdict, ids, canonical, reason, answer.model, report)

    def neighbours(self, lid: str, text: str, *, embedded: bool) -> list[dict[str, Any]]:
        """The closest live learnings: by vector first when there is one, then by words (which also
        finds learnings that have no embedding yet), at most ``MKG_CONSISTENCY_TOPK``."""
        k = self.settings.consistency_topk
        candidates = k * 4 + 1
        params: dict[str, Any] = {
            "id": lid,
            "project_id": self.project_id,
            "k": k,
            "candidates": candidates,
            "search_limit": candidates * VECTOR_SEARCH_FACTOR,
        }
        found: dict[str, dict[str, Any]] = {}
        if embedded:
            try:
                found.update((row["id"], row) for row in self.graph.read(VECTOR_NEIGHBOURS, params))
            except Exception as exc:  # no vector index (yet): fulltext still works
                log.warning("vector neighbours failed, using fulltext: %s", exc)
        words = keyword_query(text)
        if words is not None:
            query = scoped_query(words, project_id=self.project_id, user_id=None)
            for row in self.graph.read(FULLTEXT_NEIGHBOURS, {**params, "query": query}):
                found.setdefault(row["id"], row)
        return list(found.values())[:k]

    def _apply(
        self,
        lid: str,
        verdict: str,
        ids: list[str],
        canonical: str | None,
        reason: str,
        model: str,
        report: GateReport,
    ) -> None:
        params = {
            "id": lid,
            "ids": ids,
            "canonical_id": canonical,
            "verdict": verdict,
            "reason": reason,
            "model": model,
            "now": datetime.now(UTC),
            "source": "gate",
            "resolution": verdict,
            "rejected_reason": f"{verdict}: {reason}",
        }

        def work(tx: neo4j.ManagedTransaction) -> bool:
            applied = tx.run(_STATEMENTS[verdict], params).single() is not None
            if applied and verdict in TOMBSTONING:
                # A tombstone keeps its entity links, but no longer counts for its entities.
                refresh_entities(tx, learnings=[lid, *ids], now=params["now"])
            return applied

        if self.graph.write_tx(work):
            report.decided[lid] = verdict
        else:
            report.skipped.append(lid)
