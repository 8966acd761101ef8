"""Entities in the graph: memory linked to them in the caller's transaction, their counts and
co-occurrence kept true, and what they answer (a neighbourhood, what a project centres on).

::

    (:Learning)-[:ABOUT {source, via}]->(:Entity {id, namespace, key, name, kind, aliases})
    (:Observation)-[:MENTIONS {source, via}]->(:Entity)
    (:Entity)-[:CO_OCCURS {weight}]->(:Entity)           live memory naming both (lower id first)
    (:Entity)-[:REFERS_TO]->(:Account|:DiffbotOrganization|...)   a provider's node for it
    (:EntityMerge {alias, alias_key, similarity})-[:INTO]->(:Entity)   undoable (resolution.py)

``via`` on a link is the key the memory used when it reached the entity through an alias or a
merge, so that undoing the merge knows which links to move back.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..redaction import scrub
from .model import Mention, entity_id, namespace
from .resolution import Resolver

if TYPE_CHECKING:
    import neo4j

#: At most this many entities per memory item (the first mentions win), so one long text never
#: turns into a clique of hundreds of co-occurrence edges.
MAX_PER_ITEM = 16
LABELS = {"Learning": "ABOUT", "Observation": "MENTIONS"}

#: What counts as live memory for an entity: recallable learnings (not tombstones, not held for
#: review) and every timeline entry. Tombstones keep their links, but no count or walk sees them.
LIVE_ITEM = """
((x:Learning AND x.status IN ['approved', 'candidate'] AND coalesce(x.consistency_status, '') <> 'held')
 OR x:Observation)
"""

MERGE_ENTITIES = """
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
  ON CREATE SET e.created_at = $now, e.namespace = row.namespace, e.scope = row.scope,
                e.project_id = row.project_id, e.user_id = row.user_id, e.key = row.key,
                e.name = row.name, e.aliases = [], e.alias_keys = [], e.sources = [], e.mentions = 0
WITH e, row,
     e.aliases + [a IN row.aliases WHERE NOT a IN e.aliases] AS aliases,
     e.alias_keys + [k IN row.alias_keys WHERE NOT k IN e.alias_keys] AS alias_keys,
     e.sources + [s IN row.sources WHERE NOT s IN e.sources] AS sources
// linking the same memory again changes nothing, not even the time of the last change
WITH e, row, aliases, alias_keys, sources,
     coalesce(e.kind, '') <> row.kind OR aliases <> e.aliases OR alias_keys <> e.alias_keys
       OR sources <> e.sources OR (e.embedding IS NULL AND row.embedding IS NOT NULL) AS changed
SET e.kind = row.kind, e.aliases = aliases, e.alias_keys = alias_keys, e.sources = sources,
    e.embedding = coalesce(e.embedding, row.embedding),
    e.updated_at = CASE WHEN changed THEN $now ELSE e.updated_at END
"""

LINK_LEARNINGS = """
UNWIND $links AS link
MATCH (x:Learning {id: link.item})
MATCH (e:Entity {id: link.entity})
MERGE (x)-[r:ABOUT]->(e)
  ON CREATE SET r.created_at = $now, r.source = link.source, r.via = link.via
"""

LINK_OBSERVATIONS = """
UNWIND $links AS link
MATCH (x:Observation {id: link.item})
MATCH (e:Entity {id: link.entity})
MERGE (x)-[r:MENTIONS]->(e)
  ON CREATE SET r.created_at = $now, r.source = link.source, r.via = link.via
"""

#: The entities of the given items, and every pair of them sharing one: their live counts and
#: co-occurrence weights computed again (a pair no live memory names any more loses its edge).
REFRESH = (
    """
CALL () {
  UNWIND $learnings AS item_id
  MATCH (x:Learning {id: item_id})
  RETURN x
  UNION
  UNWIND $observations AS item_id
  MATCH (x:Observation {id: item_id})
  RETURN x
}
MATCH (x)-[:ABOUT|MENTIONS]->(e:Entity)
WITH x, e ORDER BY e.id
WITH x, collect(DISTINCT e)[..$cap] AS entities
CALL (entities) {
  UNWIND entities AS e
  WITH DISTINCT e
  SET e.mentions = COUNT { (e)<-[:ABOUT|MENTIONS]-(x) WHERE """
    + LIVE_ITEM
    + """ }
}
UNWIND range(0, size(entities) - 2) AS i
UNWIND range(i + 1, size(entities) - 1) AS j
WITH DISTINCT entities[i] AS a, entities[j] AS b
CALL (a, b) {
  WITH a, b, COUNT { (a)<-[:ABOUT|MENTIONS]-(x)-[:ABOUT|MENTIONS]->(b) WHERE """
    + LIVE_ITEM
    + """ } AS weight
  OPTIONAL MATCH (a)-[old:CO_OCCURS]->(b)
  FOREACH (_ IN CASE WHEN weight = 0 AND old IS NOT NULL THEN [1] ELSE [] END | DELETE old)
  FOREACH (_ IN CASE WHEN weight > 0 THEN [1] ELSE [] END |
    MERGE (a)-[c:CO_OCCURS]->(b)
      ON CREATE SET c.weight = weight, c.updated_at = $now
      ON MATCH SET c.updated_at = CASE WHEN c.weight = weight THEN c.updated_at ELSE $now END,
                   c.weight = weight)
}
RETURN count(*) AS pairs
"""
)

#: One entity's live count and every co-occurrence edge it has, counted again (after links moved
#: away from it).
REFRESH_ENTITY = (
    """
MATCH (e:Entity {id: $id})
SET e.mentions = COUNT { (e)<-[:ABOUT|MENTIONS]-(x) WHERE """
    + LIVE_ITEM
    + """ }
WITH e
MATCH (e)-[c:CO_OCCURS]-(other:Entity)
WITH e, c, other, COUNT { (e)<-[:ABOUT|MENTIONS]-(x)-[:ABOUT|MENTIONS]->(other) WHERE """
    + LIVE_ITEM
    + """ } AS weight
FOREACH (_ IN CASE WHEN weight = 0 THEN [1] ELSE [] END | DELETE c)
FOREACH (_ IN CASE WHEN weight > 0 AND weight <> c.weight THEN [1] ELSE [] END |
  SET c.weight = weight, c.updated_at = $now)
"""
)

#: A provider's nodes linked to entities: ``label`` and ``property`` name a node the provider
#: owns (an account by its id, a Diffbot organisation by its id).
REFERS_TO = """
UNWIND $links AS link
MATCH (n:$(link.label)) WHERE n[link.property] = link.value
MATCH (e:Entity {id: link.entity})
MERGE (e)-[r:REFERS_TO]->(n)
  ON CREATE SET r.created_at = $now, r.source = link.source
"""


@dataclass(frozen=True)
class Linked:
    """One memory item and the things it names, in the namespace of its scope."""

    item_id: str
    label: str  # Learning | Observation
    scope: str
    project_id: str | None
    user_id: str | None
    mentions: tuple[Mention, ...]

    @property
    def namespace(self) -> str:
        return namespace(self.scope, self.project_id, self.user_id)


@dataclass(frozen=True)
class ProviderLink:
    """A provider's node (``label`` with ``property`` = ``value``) and the entity it is, in the
    namespace of a project (or of a user with ``scope='user'``)."""

    label: str
    property: str
    value: Any
    mention: Mention
    project_id: str | None
    user_id: str | None = None
    scope: str = "project"


@dataclass
class LinkReport:
    entities: int = 0
    links: int = 0
    merges: list[str] = field(default_factory=list)


_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def safe_mention(mention: Mention) -> Mention | None:
    """The mention with its name and aliases scrubbed (an LLM or a tool call may carry a secret in
    a name); None when nothing nameable is left."""
    name = scrub(mention.name)
    if "[REDACTED" in name or "[private]" in name:
        return None
    aliases = [
        a
        for a in (scrub(alias) for alias in mention.aliases)
        if "[REDACTED" not in a and "[private]" not in a
    ]
    return Mention.of(name, mention.kind, aliases, mention.source)


def link(
    tx: neo4j.ManagedTransaction,
    items: Sequence[Linked],
    *,
    now: Any,
    vectors: Mapping[str, list[float] | None] | None = None,
    merge_similarity: float = 1.01,
) -> LinkReport:
    """Link ``items`` to their entities in the caller's transaction: resolve each mention in its
    namespace (key, alias, then embedding at ``merge_similarity`` cosine, recorded as a merge),
    write the entities and links, and refresh the counts and co-occurrence they touch.
    ``vectors`` holds an embedding per mention name, when there is an embedder."""
    report = LinkReport()
    cleaned: list[Linked] = []
    for item in items:
        mentions = [m for m in (safe_mention(x) for x in item.mentions) if m is not None]
        unique = list({m.key: m for m in reversed(mentions)}.values())[::-1][:MAX_PER_ITEM]
        if unique:
            cleaned.append(
                Linked(item.item_id, item.label, item.scope, item.project_id, item.user_id, tuple(unique))
            )
    if not cleaned:
        return report
    resolver = Resolver(tx, vectors or {}, merge_similarity, now)
    for item in cleaned:
        for mention in item.mentions:
            resolver.add(item.namespace, item.scope, item.project_id, item.user_id, mention)
    resolved = resolver.resolve()
    tx.run(MERGE_ENTITIES, rows=resolved.entity_rows(), now=now).consume()
    links: dict[str, list[dict[str, Any]]] = {label: [] for label in LABELS}
    for item in cleaned:
        for mention in item.mentions:
            target = resolved.target(item.namespace, mention.key)
            links[item.label].append(
                {
                    "item": item.item_id,
                    "entity": target.entity_id,
                    "source": mention.source,
                    "via": target.via,
                }
            )
    if links["Learning"]:
        tx.run(LINK_LEARNINGS, links=links["Learning"], now=now).consume()
    if links["Observation"]:
        tx.run(LINK_OBSERVATIONS, links=links["Observation"], now=now).consume()
    resolved.write_merges(tx)
    refresh(
        tx,
        learnings=[i.item_id for i in cleaned if i.label == "Learning"],
        observations=[i.item_id for i in cleaned if i.label == "Observation"],
        now=now,
    )
    report.entities = resolved.created
    report.links = sum(len(rows) for rows in links.values())
    report.merges = resolved.merge_ids()
    return report


def refresh(
    tx: neo4j.ManagedTransaction, *, learnings: Iterable[str] = (), observations: Iterable[str] = (), now: Any
) -> None:
    """Count again the live memory of the entities these items name, and their co-occurrence
    (after a write, or after a learning became a tombstone)."""
    learning_ids, observation_ids = list(learnings), list(observations)
    if learning_ids or observation_ids:
        tx.run(
            REFRESH, learnings=learning_ids, observations=observation_ids, cap=MAX_PER_ITEM, now=now
        ).consume()


def refresh_entity(tx: neo4j.ManagedTransaction, entity: str, *, now: Any) -> None:
    """Count one entity's live memory and co-occurrence again."""
    tx.run(REFRESH_ENTITY, id=entity, now=now).consume()


def link_provider_nodes(tx: neo4j.ManagedTransaction, links: Sequence[ProviderLink], *, now: Any) -> int:
    """Link a provider's nodes to their entities (created or resolved by key and alias in the
    given namespace); returns how many links there are."""
    rows = []
    resolver = Resolver(tx, {}, 1.01, now)
    kept = []
    for item in links:
        if not _LABEL.match(item.label) or not _LABEL.match(item.property):
            raise ValueError(f"not a label or property name: {item.label!r}.{item.property!r}")
        mention = safe_mention(item.mention)
        if mention is None:
            continue
        ns = namespace(item.scope, item.project_id, item.user_id)
        resolver.add(
            ns,
            item.scope,
            item.project_id,
            item.user_id,
            Mention.of(mention.name, mention.kind, mention.aliases, "provider") or mention,
        )
        kept.append((item, ns, mention))
    if not kept:
        return 0
    resolved = resolver.resolve()
    tx.run(MERGE_ENTITIES, rows=resolved.entity_rows(), now=now).consume()
    for item, ns, mention in kept:
        rows.append(
            {"label": item.label, "property": item.property, "value": item.value,
             "entity": resolved.target(ns, mention.key).entity_id, "source": "provider"}
        )  # fmt: skip
    tx.run(REFERS_TO, links=rows, now=now).consume()
    return len(rows)


def digest(*parts: str) -> str:
    return hashlib.sha1("\n".join(parts).encode(), usedforsecurity=False).hexdigest()[:16]


__all__ = ["LinkReport", "Linked", "ProviderLink", "entity_id", "link", "link_provider_nodes", "refresh"]
