"""Entities: the things memory is about, and the graph that connects memory through them.

::

    (:Learning)-[:ABOUT]->(:Entity {namespace, key, name, kind, aliases})<-[:MENTIONS]-(:Observation)
    (:Entity)-[:CO_OCCURS {weight}]->(:Entity)
    (:Entity)-[:REFERS_TO]->(a provider's node: an account, a Diffbot organisation, ...)

Memory links to entities of its own namespace: a project's learnings and observations to the
project's entities, a user's facts to that user's entities, so nothing connects one user's memory
to another's. Extraction's answer names the entities of each learning and observation; the
deterministic linker (:mod:`.linker`) finds code artifacts and names in text and tool calls, and
is what links memory when no LLM answers; providers link the nodes they ingest
(:func:`link_provider_nodes`). Resolution (:mod:`.resolution`) keeps one entity per thing and records
the merges it makes by similarity, so they can be undone. Recall follows the graph
(:mod:`.walk`): the entities a prompt names lead to the memory about them.

The package: :mod:`.model` (what an entity is), :mod:`.words` and :mod:`.linker` (finding them),
:mod:`.resolution`, :mod:`.store` (links, counts, co-occurrence), :mod:`.walk` (the recall branch)
and :mod:`.read` (neighbourhoods and what a project centres on).

Plugins may use :class:`Mention`, :class:`ProviderLink` and :func:`link_provider_nodes` to link the
nodes they ingest, :func:`link_text` to find entities in text, and :class:`Linked` with :func:`link`
to link memory they write.
"""

from .linker import link_text
from .model import KINDS, Mention
from .store import Linked, ProviderLink, link, link_provider_nodes

__all__ = ["KINDS", "Linked", "Mention", "ProviderLink", "link", "link_provider_nodes", "link_text"]
