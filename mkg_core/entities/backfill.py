"""Linking memory written before entities existed (or by a path that does not link): the live
learnings and observations of a project (or of every project) that were never linked, read by the
deterministic linker, in batches of one transaction each. Each item is stamped
``entities_linked_at`` so that one naming nothing is not read again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..embedding import embed_or_none
from .linker import link_text
from .store import Linked, LinkReport, link

if TYPE_CHECKING:
    import neo4j

    from ..contrib import Embedder
    from ..graph import Graph

BATCH = 200

UNLINKED = """
CALL () {
  MATCH (x:Learning)
  WHERE x.status IN ['approved', 'candidate'] AND ($project_id IS NULL OR x.project_id = $project_id)
    AND x.entities_linked_at IS NULL AND NOT EXISTS { (x)-[:ABOUT]->(:Entity) }
  RETURN 'Learning' AS label, x.id AS id, x.text AS text, x.scope AS scope, x.project_id AS project_id,
         x.user_id AS user_id
  UNION ALL
  MATCH (x:Observation)
  WHERE ($project_id IS NULL OR x.project_id = $project_id)
    AND x.entities_linked_at IS NULL AND NOT EXISTS { (x)-[:MENTIONS]->(:Entity) }
  RETURN 'Observation' AS label, x.id AS id,
         x.title + '\n' + reduce(text = '', fact IN coalesce(x.facts, []) | text + fact + ' ') + '\n'
           + coalesce(x.narrative, '') AS text,
         'project' AS scope, x.project_id AS project_id, x.user_id AS user_id
}
RETURN label, id, text, scope, project_id, user_id
LIMIT $limit
"""

STAMP = """
UNWIND $items AS item
CALL (item) {
  MATCH (x:Learning {id: item.id}) WHERE item.label = 'Learning'
  RETURN x
  UNION
  MATCH (x:Observation {id: item.id}) WHERE item.label = 'Observation'
  RETURN x
}
SET x.entities_linked_at = $now
"""

COUNT_UNLINKED = """
CALL () {
  MATCH (x:Learning)
  WHERE x.status IN ['approved', 'candidate'] AND ($project_id IS NULL OR x.project_id = $project_id)
    AND x.entities_linked_at IS NULL AND NOT EXISTS { (x)-[:ABOUT]->(:Entity) }
  RETURN count(x) AS n
  UNION ALL
  MATCH (x:Observation)
  WHERE ($project_id IS NULL OR x.project_id = $project_id)
    AND x.entities_linked_at IS NULL AND NOT EXISTS { (x)-[:MENTIONS]->(:Entity) }
  RETURN count(x) AS n
}
RETURN sum(n) AS n
"""


@dataclass
class Backfilled:
    items: int = 0
    links: int = 0
    entities: int = 0
    merges: int = 0

    def line(self) -> str:
        return (
            f"{self.items} memory item(s) read, {self.links} link(s) to {self.entities} new entit"
            f"{'y' if self.entities == 1 else 'ies'}, {self.merges} merge(s)"
        )


def unlinked(graph: Graph, project_id: str | None) -> int:
    """How many live items of the project (or of every project) were never linked."""
    return int(graph.read(COUNT_UNLINKED, {"project_id": project_id})[0]["n"] or 0)


def backfill(
    graph: Graph,
    *,
    project_id: str | None,
    embedder: Embedder | None,
    merge_similarity: float,
    progress: Callable[[int], None] | None = None,
) -> Backfilled:
    """Link every never-linked live item of the project (``None``: of every project)."""
    done = Backfilled()
    while True:
        rows = graph.read(UNLINKED, {"project_id": project_id, "limit": BATCH})
        if not rows:
            return done
        report = _link_batch(graph, rows, embedder, merge_similarity)
        done.items += len(rows)
        done.links += report.links
        done.entities += report.entities
        done.merges += len(report.merges)
        if progress is not None:
            progress(len(rows))


def _link_batch(
    graph: Graph, rows: list[dict[str, Any]], embedder: Embedder | None, merge_similarity: float
) -> LinkReport:
    """One batch in one transaction: its links, and every item stamped."""
    items = [
        Linked(row["id"], row["label"], row["scope"] or "project", row["project_id"], row["user_id"],
               tuple(link_text(row["text"])))
        for row in rows
    ]  # fmt: skip
    names = sorted({m.name for item in items for m in item.mentions})
    vectors = dict(zip(names, embed_or_none(embedder, names), strict=True)) if embedder else {}
    now = datetime.now(UTC)
    stamps = [{"id": row["id"], "label": row["label"]} for row in rows]

    def work(tx: neo4j.ManagedTransaction) -> LinkReport:
        report = link(tx, items, now=now, vectors=vectors, merge_similarity=merge_similarity)
        tx.run(STAMP, items=stamps, now=now).consume()
        return report

    return graph.write_tx(work)
