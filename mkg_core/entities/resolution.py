"""Entity resolution: which entity of a namespace a mention is, and merges that can be undone.

A mention is the entity of its namespace that has its normalised key; else the one that lists the
key among its aliases; else, when both have embeddings and neither is a code artifact (whose
spelling is its identity), the nearest entity whose name is at least ``MKG_ENTITY_MERGE_SIMILARITY``
cosine away and carries the same numbers ("Python 3.11" is never "Python 3.12"). That last step is a
**merge**: the mention's name becomes an alias of the entity, and an ``(:EntityMerge)`` records it
with the name's embedding. :func:`unmerge` undoes one: the name becomes an entity of its own again
and takes back the links that came through it. The threshold was measured on labelled pairs of names
(``benchmarks/entity_pairs.py``, docs/benchmarks.md); anything else becomes a new entity.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import MkgError
from .model import CODE_KINDS, Mention, better_kind, entity_id, numbers_agree

if TYPE_CHECKING:
    import neo4j

    from ..graph import Graph

#: Measured with the keyless local embedder: the lowest cosine at which merges were right at least
#: 95% of the time on the labelled pairs (docs/benchmarks.md, "Entity resolution").
MERGE_SIMILARITY = 0.87
#: Neighbours the vector index is asked for per unresolved name.
VECTOR_CANDIDATES = 3

BY_KEY = """
UNWIND $rows AS row
MATCH (e:Entity {namespace: row.namespace, key: row.key})
RETURN row.namespace AS namespace, row.key AS key, e.id AS id, e.kind AS kind
"""

BY_ALIAS = """
CALL db.index.fulltext.queryNodes('entity_name_fulltext', $lucene, {limit: 200}) YIELD node
WHERE node.namespace = $namespace
RETURN node.id AS id, node.kind AS kind, node.alias_keys AS alias_keys
"""

BY_VECTOR = """
UNWIND $probes AS probe
CALL (probe) {
  MATCH (e:Entity)
    SEARCH e IN (VECTOR INDEX entity_vector FOR probe.vector WHERE e.namespace = probe.namespace
      LIMIT $k) SCORE AS score
  RETURN e, score
}
RETURN probe.key AS key, e.id AS id, e.name AS name, e.kind AS kind, score
ORDER BY key, score DESC
"""

#: The dimensions of the entity vector index (none when it does not exist).
INDEX_DIMENSIONS = """
SHOW VECTOR INDEXES YIELD name, options WHERE name = 'entity_vector'
RETURN options.indexConfig['vector.dimensions'] AS dimensions
"""

WRITE_MERGES = """
UNWIND $merges AS m
MATCH (e:Entity {id: m.into})
MERGE (r:EntityMerge {id: m.id})
  ON CREATE SET r.created_at = $now, r.namespace = m.namespace, r.alias = m.alias,
                r.alias_key = m.alias_key, r.kind = m.kind, r.similarity = m.similarity,
                r.method = 'embedding', r.embedding = m.embedding, r.into = m.into
MERGE (r)-[:INTO]->(e)
"""

MERGES = """
MATCH (m:EntityMerge)-[:INTO]->(e:Entity)
WHERE m.namespace IN $namespaces AND ($include_undone OR m.undone_at IS NULL)
RETURN m.id AS id, m.alias AS alias, e.name AS into, e.id AS entity_id, m.similarity AS similarity,
       m.created_at AS created_at, m.undone_at AS undone_at
ORDER BY m.created_at DESC
LIMIT $limit
"""

#: Undo a merge: the alias becomes its own entity and takes back the links that came through it.
UNMERGE = """
MATCH (m:EntityMerge {id: $id})-[:INTO]->(e:Entity)
WHERE m.undone_at IS NULL AND m.namespace IN $namespaces
MERGE (n:Entity {id: $new_id})
  ON CREATE SET n.created_at = $now, n.namespace = e.namespace, n.scope = e.scope,
                n.project_id = e.project_id, n.user_id = e.user_id, n.key = m.alias_key,
                n.name = m.alias, n.kind = m.kind, n.aliases = [], n.alias_keys = [],
                n.sources = ['unmerged'], n.mentions = 0, n.embedding = m.embedding
SET e.aliases = [a IN e.aliases WHERE a <> m.alias],
    e.alias_keys = [k IN e.alias_keys WHERE k <> m.alias_key],
    m.undone_at = $now, m.split_into = n.id, n.updated_at = $now, e.updated_at = $now
WITH m, e, n
CALL (m, e, n) {
  MATCH (x:Learning)-[r:ABOUT {via: m.alias_key}]->(e)
  MERGE (x)-[s:ABOUT]->(n) ON CREATE SET s.created_at = r.created_at, s.source = r.source
  DELETE r
  RETURN collect(DISTINCT x.id) AS learnings
}
CALL (m, e, n) {
  MATCH (x:Observation)-[r:MENTIONS {via: m.alias_key}]->(e)
  MERGE (x)-[s:MENTIONS]->(n) ON CREATE SET s.created_at = r.created_at, s.source = r.source
  DELETE r
  RETURN collect(DISTINCT x.id) AS observations
}
RETURN n.id AS id, learnings, observations
"""


class ResolutionError(MkgError):
    """A merge cannot be undone as asked."""


@dataclass(frozen=True)
class Target:
    entity_id: str
    #: The key the mention used when it reached the entity by an alias or a merge.
    via: str | None = None


@dataclass
class _Wanted:
    namespace: str
    scope: str
    project_id: str | None
    user_id: str | None
    mention: Mention
    kind: str
    aliases: dict[str, str] = field(default_factory=dict)  # key -> name
    sources: set[str] = field(default_factory=set)


@dataclass
class _Row:
    """What is written to one entity: created or changed."""

    id: str
    wanted: _Wanted
    kind: str
    new: bool
    aliases: dict[str, str] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)


class Resolved:
    """The outcome of :meth:`Resolver.resolve`: a target per mention, rows to write, merges."""

    def __init__(self, targets: dict[tuple[str, str], Target], rows: dict[str, _Row],
                 merges: list[dict[str, Any]], vectors: Mapping[str, list[float] | None],
                 now: Any) -> None:  # fmt: skip
        self.targets, self.rows, self.merges, self.vectors, self.now = targets, rows, merges, vectors, now

    @property
    def created(self) -> int:
        return sum(1 for row in self.rows.values() if row.new)

    def target(self, ns: str, key: str) -> Target:
        return self.targets[ns, key]

    def entity_rows(self) -> list[dict[str, Any]]:
        out = []
        for row in self.rows.values():
            wanted = row.wanted
            out.append(
                {
                    "id": row.id,
                    "namespace": wanted.namespace,
                    "scope": wanted.scope,
                    "project_id": wanted.project_id if wanted.scope != "user" else None,
                    "user_id": wanted.user_id if wanted.scope == "user" else None,
                    "key": wanted.mention.key,
                    "name": wanted.mention.name,
                    "kind": row.kind,
                    "aliases": sorted(set(row.aliases.values()))[:24],
                    "alias_keys": sorted(row.aliases)[:24],
                    "sources": sorted(row.sources),
                    "embedding": self.vectors.get(wanted.mention.name) if row.new else None,
                }
            )
        return out

    def write_merges(self, tx: neo4j.ManagedTransaction) -> None:
        if self.merges:
            tx.run(WRITE_MERGES, merges=self.merges, now=self.now).consume()

    def merge_ids(self) -> list[str]:
        return [m["id"] for m in self.merges]


class Resolver:
    """Collects mentions (:meth:`add`), then finds or makes their entities (:meth:`resolve`)."""

    def __init__(
        self,
        tx: neo4j.ManagedTransaction,
        vectors: Mapping[str, list[float] | None],
        threshold: float,
        now: Any,
    ) -> None:
        self.tx, self.vectors, self.threshold, self.now = tx, vectors, threshold, now
        self.wanted: dict[tuple[str, str], _Wanted] = {}

    def add(self, ns: str, scope: str, project_id: str | None, user_id: str | None, mention: Mention) -> None:
        key = (ns, mention.key)
        wanted = self.wanted.get(key)
        if wanted is None:
            wanted = self.wanted[key] = _Wanted(ns, scope, project_id, user_id, mention, mention.kind)
        wanted.kind = better_kind(wanted.kind, mention.kind)
        wanted.sources.add(mention.source)
        for name, alias_key in zip(mention.aliases, mention.alias_keys(), strict=False):
            wanted.aliases.setdefault(alias_key, name)

    def resolve(self) -> Resolved:
        found: dict[tuple[str, str], tuple[str, str, str | None]] = {}  # -> (id, kind, via)
        if not self._vectors_fit():
            self.vectors = {}  # no merge by similarity, no embedding stored, until the index matches
        rows = [{"namespace": ns, "key": key} for ns, key in self.wanted]
        for record in self.tx.run(BY_KEY, rows=rows):
            found[record["namespace"], record["key"]] = (record["id"], record["kind"], None)
        self._by_alias(found)
        merges = self._by_vector(found)
        # A name that another mention of this batch lists as an alias ("deploy.sh" of a file found
        # in a tool call) is that mention's entity; those are resolved last.
        owners: dict[tuple[str, str], tuple[str, str]] = {}
        for key, wanted in self.wanted.items():
            for alias_key in wanted.aliases:
                owners.setdefault((key[0], alias_key), key)
        aliased = {key for key in self.wanted if key not in found and owners.get(key, key) != key}
        targets: dict[tuple[str, str], Target] = {}
        out: dict[str, _Row] = {}
        for key, wanted in sorted(self.wanted.items(), key=lambda item: item[0] in aliased):
            hit = found.get(key)
            owner = targets.get(owners[key]) if key in aliased else None
            if owner is not None:
                eid, kind, via, new = owner.entity_id, wanted.kind, key[1], False
            elif hit is None:
                eid, kind, via, new = entity_id(*key), wanted.kind, None, True
            else:
                eid, kind, via, new = hit[0], better_kind(hit[1], wanted.kind), hit[2], False
            targets[key] = Target(eid, via)
            row = out.get(eid)
            if row is None:
                row = out[eid] = _Row(eid, wanted, kind, new)
            row.kind = better_kind(row.kind, wanted.kind)
            row.sources |= wanted.sources
            row.aliases.update(wanted.aliases)
            if via is not None:
                row.aliases[wanted.mention.key] = wanted.mention.name
        for row in out.values():
            if row.new:
                row.aliases.pop(row.wanted.mention.key, None)  # an entity's own key is not its alias
        return Resolved(targets, out, merges, self.vectors, self.now)

    def _by_alias(self, found: dict[tuple[str, str], tuple[str, str, str | None]]) -> None:
        by_namespace: dict[str, list[str]] = {}
        for ns, key in self.wanted:
            if (ns, key) not in found:
                by_namespace.setdefault(ns, []).append(key)
        for ns, keys in by_namespace.items():
            for start in range(0, len(keys), 64):
                chunk = keys[start : start + 64]
                query = f"+namespace:{_phrase(ns)} +alias_keys:({' '.join(_phrase(k) for k in chunk)})"
                for record in self.tx.run(BY_ALIAS, lucene=query, namespace=ns):
                    for key in chunk:
                        if key in (record["alias_keys"] or []) and (ns, key) not in found:
                            found[ns, key] = (record["id"], record["kind"], key)

    def _vectors_fit(self) -> bool:
        """Whether the names' embeddings have the entity vector index's dimensions. After a change
        of embedder the index keeps the old ones until `mkg backfill-embeddings` rebuilds it, and a
        search with vectors of another size would fail the whole transaction."""
        sizes = {len(v) for v in self.vectors.values() if v}
        if not sizes:
            return False
        record = self.tx.run(INDEX_DIMENSIONS).single()
        dimensions = record["dimensions"] if record is not None else None
        return dimensions is not None and sizes == {int(dimensions)}

    def _by_vector(self, found: dict[tuple[str, str], tuple[str, str, str | None]]) -> list[dict[str, Any]]:
        """Merges by embedding: each unresolved name (not a code artifact) to the nearest entity
        of its namespace, existing or new in this batch, at the threshold."""
        if self.threshold > 1:
            return []
        open_ = [
            (key, wanted) for key, wanted in self.wanted.items()
            if key not in found and wanted.kind not in CODE_KINDS and self.vectors.get(wanted.mention.name)
        ]  # fmt: skip
        if not open_:
            return []
        probes = [
            {"namespace": ns, "key": key, "vector": self.vectors[wanted.mention.name]}
            for (ns, key), wanted in open_
        ]
        candidates: dict[str, list[dict[str, Any]]] = {}
        for record in self.tx.run(BY_VECTOR, probes=probes, k=VECTOR_CANDIDATES):
            candidates.setdefault(record["key"], []).append(dict(record))
        merges = []
        batch: list[tuple[tuple[str, str], _Wanted]] = []
        for (ns, key), wanted in open_:
            best = self._best(wanted, candidates.get(key, []), batch)
            if best is None:
                batch.append(((ns, key), wanted))
                continue
            into, kind, similarity = best
            found[ns, key] = (into, kind, key)
            merges.append(
                {
                    "id": "entitymerge:" + _digest(ns, key, into),
                    "namespace": ns,
                    "alias": wanted.mention.name,
                    "alias_key": key,
                    "kind": wanted.kind,
                    "into": into,
                    "similarity": round(similarity, 4),
                    "embedding": self.vectors[wanted.mention.name],
                }
            )
        return merges

    def _best(
        self, wanted: _Wanted, candidates: list[dict[str, Any]], batch: list[tuple[tuple[str, str], _Wanted]]
    ) -> tuple[str, str, float] | None:
        name = wanted.mention.name
        for candidate in candidates:
            cosine = 2 * float(candidate["score"]) - 1  # the index scores (1 + cosine) / 2
            if cosine < self.threshold:
                break
            if candidate["kind"] not in CODE_KINDS and numbers_agree(name, str(candidate["name"])):
                return str(candidate["id"]), str(candidate["kind"]), cosine
        vector = self.vectors[name] or []
        for (ns, _), other in batch:
            if ns != wanted.namespace or not numbers_agree(name, other.mention.name):
                continue
            cosine = _cosine(vector, self.vectors.get(other.mention.name) or [])
            if cosine >= self.threshold:
                return entity_id(ns, other.mention.key), other.kind, cosine
        return None


def _cosine(a: list[float], b: list[float]) -> float:
    if not a or not b or len(a) != len(b):
        return -1.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else -1.0


def _phrase(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _digest(*parts: str) -> str:
    return hashlib.sha1("\n".join(parts).encode(), usedforsecurity=False).hexdigest()[:16]


# -- merges a person can list and undo -------------------------------------------------------------


def merges(
    graph: Graph, namespaces: list[str], *, limit: int = 50, include_undone: bool = False
) -> list[dict[str, Any]]:
    """The merges resolution made in these namespaces, newest first."""
    return graph.read(MERGES, {"namespaces": namespaces, "limit": limit, "include_undone": include_undone})


def unmerge(graph: Graph, merge_id: str, namespaces: list[str]) -> dict[str, Any]:
    """Undo one merge: its name becomes an entity again with the links that came through it; the
    counts and co-occurrence of both entities are refreshed in the same transaction."""
    from .store import refresh, refresh_entity

    now = datetime.now(UTC)

    def work(tx: neo4j.ManagedTransaction) -> dict[str, Any] | None:
        rows = tx.run(MERGES_ONE, id=merge_id, namespaces=namespaces).data()
        if not rows:
            return None
        new_id = entity_id(rows[0]["namespace"], rows[0]["alias_key"])
        record = tx.run(UNMERGE, id=merge_id, namespaces=namespaces, new_id=new_id, now=now).single()
        if record is None:
            return None
        learnings, observations = list(record["learnings"]), list(record["observations"])
        refresh(tx, learnings=learnings, observations=observations, now=now)
        refresh_entity(tx, rows[0]["into"], now=now)
        return {
            "merge": merge_id,
            "entity": record["id"],
            "learnings": learnings,
            "observations": observations,
        }

    done = graph.write_tx(work)
    if done is None:
        raise ResolutionError(f"no merge {merge_id!r} to undo here (already undone, or of another namespace)")
    return done


MERGES_ONE = """
MATCH (m:EntityMerge {id: $id}) WHERE m.undone_at IS NULL AND m.namespace IN $namespaces
RETURN m.namespace AS namespace, m.alias_key AS alias_key, m.into AS into
"""
