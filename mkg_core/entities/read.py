"""What the entity graph answers: the entities a project's memory centres on, and one entity's
neighbourhood (the memory about it, the timeline entries that mention it, the entities it
co-occurs with, the files among them, and the provider nodes it is).

Only the namespaces of the project and of the asking user are read, and only memory a recall of
that project and user could see (:data:`mkg_core.search.VISIBLE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..search import STATUSES, VISIBLE
from .model import namespace, normalise

if TYPE_CHECKING:
    from ..graph import Graph

FILE_KINDS = ("file", "directory")

TOP_ENTITIES = """
MATCH (e:Entity)
WHERE e.namespace IN $namespaces AND e.mentions > 0
RETURN e.id AS id, e.name AS name, e.kind AS kind, e.scope AS scope, e.mentions AS mentions
ORDER BY e.mentions DESC, e.name
LIMIT $limit
"""

FIND = """
MATCH (e:Entity)
WHERE e.namespace IN $namespaces
  AND (e.id = $ref OR e.key IN $keys OR any(key IN $keys WHERE key IN e.alias_keys))
RETURN e.id AS id
ORDER BY e.id = $ref DESC, e.key IN $keys DESC, e.mentions DESC
LIMIT 1
"""

SIMILAR_NAMES = """
CALL db.index.fulltext.queryNodes('entity_name_fulltext', $lucene, {limit: 50}) YIELD node, score
WHERE node.namespace IN $namespaces
RETURN node.name AS name, node.kind AS kind, node.mentions AS mentions
ORDER BY score DESC
LIMIT 5
"""

NEIGHBOURHOOD = (
    """
MATCH (e:Entity {id: $id}) WHERE e.namespace IN $namespaces
CALL (e) {
  MATCH (e)<-[:ABOUT]-(node:Learning)"""
    + VISIBLE
    + """
  WITH node ORDER BY coalesce(node.updated_at, node.created_at) DESC LIMIT $limit
  RETURN collect({id: node.id, text: node.text, scope: node.scope, status: node.status,
                  confidence: node.confidence}) AS learnings
}
CALL (e) {
  MATCH (e)<-[:MENTIONS]-(o:Observation {project_id: $project_id})
  WITH o ORDER BY coalesce(o.ended_at, o.created_at) DESC LIMIT $limit
  RETURN collect({id: o.id, type: o.type, title: o.title,
                  at: coalesce(o.ended_at, o.created_at)}) AS observations
}
CALL (e) {
  MATCH (e)-[c:CO_OCCURS]-(f:Entity)
  WHERE f.namespace IN $namespaces AND f.mentions > 0
  WITH f, c ORDER BY c.weight DESC, f.mentions DESC LIMIT $related
  RETURN collect({id: f.id, name: f.name, kind: f.kind, together: c.weight}) AS related
}
CALL (e) {
  OPTIONAL MATCH (e)-[:REFERS_TO]->(n)
  WITH n WHERE n IS NOT NULL
  RETURN collect({labels: labels(n), name: coalesce(n.name, n.value, n.title, n.id)})[..10] AS refers_to
}
RETURN e.id AS id, e.name AS name, e.kind AS kind, e.scope AS scope, e.aliases AS aliases,
       e.mentions AS mentions, learnings, observations, related, refers_to
"""
)


def namespaces_of(project_id: str, user_id: str | None) -> list[str]:
    """The namespaces a project's and a user's memory link to."""
    found = [namespace("project", project_id, None)]
    if user_id:
        found.append(namespace("user", None, user_id))
    return found


def top_entities(
    graph: Graph, project_id: str, user_id: str | None, *, limit: int = 8
) -> list[dict[str, Any]]:
    """The entities the most live memory of the project and the user names."""
    return graph.read(TOP_ENTITIES, {"namespaces": namespaces_of(project_id, user_id), "limit": limit})


def neighbourhood(
    graph: Graph, ref: str, *, project_id: str, user_id: str | None, limit: int = 10
) -> dict[str, Any] | None:
    """One entity (by id, name or alias) and what surrounds it, or None when the project and the
    user have no such entity."""
    spaces = namespaces_of(project_id, user_id)
    keys = sorted({normalise(ref, "concept"), normalise(ref, "name"), normalise(ref, "file")})
    found = graph.read(FIND, {"namespaces": spaces, "ref": ref, "keys": keys})
    if not found:
        return None
    params = {
        "id": found[0]["id"],
        "namespaces": spaces,
        "project_id": project_id,
        "user_id": user_id,
        "session_id": None,
        "statuses": list(STATUSES),
        "limit": limit,
        "related": limit * 2,
    }
    rows = graph.read(NEIGHBOURHOOD, params)
    if not rows:
        return None
    row = rows[0]
    related = list(row["related"])
    row["files"] = [item for item in related if item["kind"] in FILE_KINDS]
    row["related"] = [item for item in related if item["kind"] not in FILE_KINDS][:limit]
    return row


def similar_names(graph: Graph, ref: str, *, project_id: str, user_id: str | None) -> list[dict[str, Any]]:
    """Entities whose names share words with ``ref`` (what to suggest when none has that name)."""
    words = [w.lower() for w in "".join(ch if ch.isalnum() else " " for ch in ref).split() if len(w) > 1][:8]
    if not words:
        return []
    spaces = namespaces_of(project_id, user_id)
    # a word, or the start of one: an identifier such as STRIPE_API_URL is one token in the index
    terms = " ".join(f"{w} {w}*" for w in words)
    lucene = f"name:({terms}) alias_keys:({terms})"
    return graph.read(SIMILAR_NAMES, {"lucene": lucene, "namespaces": spaces})
