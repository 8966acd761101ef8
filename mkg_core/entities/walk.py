"""The graph branch of recall: from the entities a prompt names, along the memory that names them.

1. **Seeds.** The deterministic linker reads the prompt (:func:`~.linker.link_text`). Each thing it
   names is looked up among the entities of the project and of the user, by key, by alias, and,
   when there is an embedder, by the embedding of its name (the nearest entities at a cosine of at
   least :data:`SEED_SIMILARITY`, weighted by that cosine; a key or alias match weighs 1).
2. **Spread.** One step of a personalised random walk: each seed spreads its weight evenly over the
   live memory that names it (a learning ``ABOUT`` it), so a specific entity (a file, a person
   named twice) counts for much and a hub (the user's own name) for little. With ``hops=2`` the
   seeds first pass :data:`DECAY` of their weight to the entities that co-occur with them most
   (``CO_OCCURS``, by weight relative to the seed's count), which then spread it the same way.
3. **Bounds.** At most :data:`MAX_PROMPT_MENTIONS` mentions, :data:`MAX_SEEDS` entities and
   :data:`PER_ENTITY` learnings per entity (the latest), whatever the size of the graph; the best
   :data:`POOL` learnings then pass the recall's similarity floor when there is a prompt vector,
   so the branch never brings in memory unrelated to the prompt.

The branch has a second ranking, **named**: the memory about the things the prompt names by key or
alias (a person, a file, a service: every kind but a concept), ordered by its similarity to the
prompt with those names taken out (:meth:`Probes.unnamed`): the nearest learnings to that in the
vector index, kept when they are about one of the names. The names pick the memory; what the
prompt asks about them orders it. A name every item carries (the user's own) leaves the walk's
scores tied, and an embedding of the whole prompt is pulled toward the memory that repeats its
names rather than toward what it asks.

The rankings are fused with the fulltext, vector and date rankings in :func:`mkg_core.search.rrf`;
the query that runs it is composed in :mod:`mkg_core.search`, which owns what a recall may see.
Parameters were chosen on the LoCoMo dev split (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .linker import link_text
from .model import CODE_KINDS, KINDS, Mention, namespace

MAX_PROMPT_MENTIONS = 12
#: Mentions whose names are embedded to find entities by similarity (code artifacts match exactly).
MAX_PROBES = 8
#: Nearest entities taken per probe, and the least cosine between a mention's and an entity's name.
PROBE_NEIGHBOURS = 5
SEED_SIMILARITY = 0.5
MAX_SEEDS = 24
PER_ENTITY = 200
POOL = 60
#: The share of a seed's weight passed to a co-occurring entity on a second hop, and how many.
DECAY = 0.5
EXPANSION = 5
#: Kinds of mention that name one thing; a concept describes, and stays in the unnamed prompt.
NAMING_KINDS = frozenset(KINDS) - {"concept"}

#: Entities with one of ``$keys`` as their key or an alias (fulltext on ``alias_keys``, checked
#: exactly), in ``$namespaces``; each with weight 1.
_BY_KEY_OR_ALIAS = """
  UNWIND $keys AS key
  UNWIND $namespaces AS ns
  MATCH (e:Entity {namespace: ns, key: key})
  RETURN e, 1.0 AS weight
  UNION ALL
  CALL db.index.fulltext.queryNodes('entity_name_fulltext', $alias_query, {limit: 50}) YIELD node AS e
  WHERE e.namespace IN $namespaces AND any(key IN $keys WHERE key IN e.alias_keys)
  RETURN e, 1.0 AS weight
"""

#: Entities the prompt names: by key, by alias, and by the embeddings of their names. Yields ``e``
#: and its ``weight``.
SEEDS = (
    """
CALL () {"""
    + _BY_KEY_OR_ALIAS
    + """  UNION ALL
  UNWIND $probes AS probe
  CALL (probe) {
    MATCH (e:Entity)
      SEARCH e IN (VECTOR INDEX entity_vector FOR probe WHERE e.namespace IN $namespaces
        LIMIT $neighbours) SCORE AS score
    RETURN e, 2 * score - 1 AS cosine
  }
  WITH e, cosine WHERE cosine >= $seed_similarity
  RETURN e, cosine AS weight
}
WITH e, max(weight) AS weight
ORDER BY weight DESC, e.id
LIMIT $max_seeds
"""
)

#: The things the prompt names by key or alias (``Probes.named_keys``), for the named ranking:
#: ``named``, a list of at most ``$max_seeds`` entities; no row when there is none.
NAMED_SEEDS = (
    """
CALL () {"""
    + _BY_KEY_OR_ALIAS
    + """}
WITH collect(DISTINCT e)[..$max_seeds] AS named
WHERE size(named) > 0
"""
)

#: The second hop: each seed passes a share of its weight to the entities it co-occurs with most.
EXPAND = """
WITH collect({e: e, weight: weight}) AS seeds
CALL (seeds) {
  UNWIND seeds AS seed
  RETURN seed.e AS e, seed.weight AS weight
  UNION ALL
  UNWIND seeds AS seed
  WITH seed.e AS s, seed.weight AS w
  CALL (s, w) {
    MATCH (s)-[c:CO_OCCURS]-(f:Entity)
    WHERE f.namespace = s.namespace
    WITH f, w * $decay * toFloat(c.weight)
            / toFloat(CASE WHEN s.mentions > 0 THEN s.mentions ELSE 1 END) AS passed
    ORDER BY passed DESC
    LIMIT $expansion
    RETURN f, passed
  }
  RETURN f AS e, passed AS weight
}
WITH e, sum(weight) AS weight
"""

#: Spread (after SEEDS, optionally EXPAND, then the learnings of ``e`` that recall may see).
SPREAD = """
WITH node, sum(weight / toFloat(CASE WHEN e.mentions > 0 THEN e.mentions ELSE 1 END)) AS score
ORDER BY score DESC
LIMIT $pool
WITH node, score,
     CASE WHEN $vector IS NULL THEN NULL
          ELSE vector.similarity.cosine(node.embedding, $vector) END AS similarity
WHERE $vector IS NULL OR similarity >= $floor
"""


@dataclass(frozen=True)
class Probes:
    """What the walk asks of the graph for one prompt."""

    mentions: tuple[Mention, ...]
    namespaces: tuple[str, ...]

    @property
    def keys(self) -> list[str]:
        return [m.key for m in self.mentions]

    @property
    def probe_names(self) -> list[str]:
        """The names whose embeddings find entities by similarity."""
        return [m.name for m in self.mentions if m.kind not in CODE_KINDS][:MAX_PROBES]

    @property
    def named_keys(self) -> list[str]:
        """The keys of the mentions that name one thing (not a concept), for the named ranking."""
        return [m.key for m in self.mentions if m.kind in NAMING_KINDS]

    def unnamed(self, text: str) -> str | None:
        """``text`` without the names of :attr:`named_keys`' mentions (and their possessive
        ``'s``); None when it names nothing, or when no word a search would use is left
        (:func:`mkg_core.search.keyword_query`)."""
        from ..search import keyword_query  # the search module composes the walk's queries

        names = sorted({m.name for m in self.mentions if m.kind in NAMING_KINDS}, key=len, reverse=True)
        if not names:
            return None
        pattern = "|".join(re.escape(name) for name in names)
        left = re.sub(rf"(?<!\w)(?:{pattern})(?:['\u2019]s)?(?!\w)", " ", text, flags=re.IGNORECASE)
        left = " ".join(left.split())
        return left if left != " ".join(text.split()) and keyword_query(left) is not None else None

    def named_parameters(self) -> dict[str, Any]:
        """The parameters of :data:`NAMED_SEEDS`."""
        keys = self.named_keys
        return {
            "keys": keys,
            "namespaces": list(self.namespaces),
            "alias_query": alias_query(keys, self.namespaces),
            "max_seeds": MAX_SEEDS,
        }

    def parameters(self, vectors: dict[str, list[float] | None], hops: int) -> dict[str, Any]:
        keys = self.keys
        probes = [vectors[name] for name in self.probe_names if vectors.get(name) is not None]
        return {
            "keys": keys,
            "namespaces": list(self.namespaces),
            "alias_query": alias_query(keys, self.namespaces),
            "probes": probes,
            "neighbours": PROBE_NEIGHBOURS,
            "seed_similarity": SEED_SIMILARITY,
            "max_seeds": MAX_SEEDS,
            "per_entity": PER_ENTITY,
            "pool": POOL,
            "decay": DECAY if hops > 1 else 0.0,
            "expansion": EXPANSION,
        }


def probes(text: str, *, project_id: str, user_id: str | None) -> Probes | None:
    """The mentions of ``text`` and the namespaces to look for them in (the project's, and the
    user's own when there is a user); None when the text names nothing."""
    mentions = tuple(link_text(text[-4000:])[:MAX_PROMPT_MENTIONS])
    if not mentions:
        return None
    namespaces = [namespace("project", project_id, None)]
    if user_id:
        namespaces.append(namespace("user", None, user_id))
    return Probes(mentions, tuple(namespaces))


def alias_query(keys: list[str], namespaces: tuple[str, ...] | list[str]) -> str:
    """A fulltext query of ``entity_name_fulltext`` for entities with one of ``keys`` as an alias,
    in ``namespaces`` (checked exactly afterwards)."""
    phrases = " ".join(_phrase(key) for key in keys)
    scope = " ".join(_phrase(ns) for ns in namespaces)
    return f"+alias_keys:({phrases}) +namespace:({scope})"


def _phrase(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
