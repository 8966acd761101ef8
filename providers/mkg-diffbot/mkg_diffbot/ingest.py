"""Diffbot results the agent saw become graph knowledge (a capture handler on PostToolUse).

- ``enhance_entity`` answers: ``(:DiffbotOrganization|:DiffbotPerson {id})`` with compact
  firmographics, ``HAS_CEO`` and ``EMPLOYED_BY`` to referenced entities, and
  ``(:Account)-[:HAS_ENRICHMENT]->(entity)`` for accounts matched on domain, name, any of the
  entity's names, or the employer the agent asked about.
- ``search_news`` answers: ``(:NewsArticle {url})`` with ``TAGGED`` tags, ``MENTIONS`` to tagged
  organizations that have a Diffbot id, and ``MENTIONS`` to accounts named by a tag or by a quoted
  term of the DQL query that the article itself contains (and to those accounts' Diffbot
  organizations).
- Everything captured links ``[:CAPTURED_IN]->(:Session)``.
- Organisations and people become entities of the session's project (``(:Entity {kind:
  'organisation'|'person'})-[:REFERS_TO]->(entity)``, with their other names and domain as
  aliases), so memory that names them reaches what Diffbot knows.

Only entities with a real Diffbot id are stored: a reference without one is dropped, never given
an invented id. The harness's wrapping (JSON in strings, MCP content blocks, ``{"result": ...}``
envelopes, an oversized result saved to a file) is taken off first; failed calls are skipped.
Writes are MERGEs, so seeing an event twice changes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from mkg_core.contrib import CaptureContext, CaptureHandler, SchemaStatement
from mkg_core.entities import Mention, ProviderLink, link_provider_nodes
from mkg_core.events import HookEvent
from mkg_core.tool_results import unwrap

log = logging.getLogger("mkg.diffbot")

TOOLS = frozenset({"search_news", "enhance_entity"})
_ENTITY_URI = re.compile(r"^https?://(?:www\.)?diffbot\.com/entity/([A-Za-z0-9_-]+)/?$")
_QUOTED_TERM = re.compile(r'\b(?:tags\.label|text|title|name)\s*:\s*"([^"]+)"', re.I)

SCHEMA = (
    SchemaStatement(
        "diffbot_organization_id_unique",
        "CREATE CONSTRAINT diffbot_organization_id_unique IF NOT EXISTS "
        "FOR (n:DiffbotOrganization) REQUIRE n.id IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "diffbot_person_id_unique",
        "CREATE CONSTRAINT diffbot_person_id_unique IF NOT EXISTS "
        "FOR (n:DiffbotPerson) REQUIRE n.id IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "news_article_url_unique",
        "CREATE CONSTRAINT news_article_url_unique IF NOT EXISTS FOR (n:NewsArticle) REQUIRE n.url IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "news_tag_label_unique",
        "CREATE CONSTRAINT news_tag_label_unique IF NOT EXISTS FOR (n:NewsTag) REQUIRE n.label IS UNIQUE",
        kind="constraint",
    ),
    SchemaStatement(
        "diffbot_organization_domain",
        "CREATE INDEX diffbot_organization_domain IF NOT EXISTS FOR (n:DiffbotOrganization) ON (n.domain)",
    ),
)

# An entity of either kind; the label is chosen by the caller (two statements, no dynamic labels).
_WRITE_ENTITIES = """
UNWIND $rows AS row
MERGE (e:{label} {{id: row.id}})
ON CREATE SET e.first_seen_at = $now
SET e += row.props, e.source = 'diffbot', e.last_enriched_at = $now
WITH e, row
CALL (e, row) {{
  WITH e, row WHERE row.ceo IS NOT NULL
  MERGE (ceo:DiffbotPerson {{id: row.ceo.id}})
  ON CREATE SET ceo.first_seen_at = $now, ceo.source = 'diffbot'
  SET ceo.name = coalesce(ceo.name, row.ceo.name), ceo.diffbot_uri = row.ceo.uri
  MERGE (e)-[:HAS_CEO]->(ceo)
}}
CALL (e, row) {{
  UNWIND row.employers AS ref
  MERGE (org:DiffbotOrganization {{id: ref.id}})
  ON CREATE SET org.first_seen_at = $now, org.source = 'diffbot'
  SET org.name = coalesce(org.name, ref.name), org.diffbot_uri = ref.uri
  MERGE (e)-[:EMPLOYED_BY]->(org)
}}
CALL (e) {{
  OPTIONAL MATCH (s:Session {{session_id: $session_id}})
  FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END | MERGE (e)-[:CAPTURED_IN]->(s))
}}
CALL (e, row) {{
  MATCH (a:Account)
  WHERE (row.domain IS NOT NULL AND a.domain = row.domain) OR toLower(a.name) IN row.name_keys
  MERGE (a)-[r:HAS_ENRICHMENT]->(e)
  SET r.updated_at = $now
  RETURN count(a) AS linked
}}
RETURN count(e) AS stored, sum(linked) AS linked
"""

_WRITE_ARTICLES = """
UNWIND $rows AS row
MERGE (n:NewsArticle {url: row.url})
ON CREATE SET n.first_seen_at = $now
SET n += row.props, n.source = 'diffbot', n.last_seen_at = $now
WITH n, row
CALL (n, row) {
  UNWIND row.tags AS label
  MERGE (t:NewsTag {label: label})
  MERGE (n)-[:TAGGED]->(t)
}
CALL (n, row) {
  UNWIND row.organizations AS ref
  MERGE (org:DiffbotOrganization {id: ref.id})
  ON CREATE SET org.first_seen_at = $now, org.source = 'diffbot', org.name = ref.name
  SET org.diffbot_uri = ref.uri
  MERGE (n)-[:MENTIONS]->(org)
}
CALL (n) {
  OPTIONAL MATCH (s:Session {session_id: $session_id})
  FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END | MERGE (n)-[:CAPTURED_IN]->(s))
}
CALL (n, row) {
  MATCH (a:Account)
  WHERE toLower(a.name) IN row.terms OR a.domain IN row.terms
  MERGE (n)-[:MENTIONS]->(a)
  WITH n, a
  CALL (n, a) {
    MATCH (org:DiffbotOrganization)
    WHERE org.domain = a.domain OR toLower(org.name) = toLower(a.name)
    MERGE (n)-[:MENTIONS]->(org)
  }
  RETURN count(a) AS linked
}
RETURN count(n) AS stored, sum(linked) AS linked
"""


# -- reading Diffbot's JSON ---------------------------------------------------------------------------


def canonical_id(value: Any) -> str | None:
    """The entity's Diffbot id: ``id``, else the id inside ``diffbotUri``/``uri``; None without one."""
    if not isinstance(value, dict):
        return None
    own = value.get("id")
    if isinstance(own, str) and own.strip():
        return own.strip()
    for key in ("diffbotUri", "uri", "targetDiffbotUri"):
        match = _ENTITY_URI.match(str(value.get(key) or "").strip())
        if match:
            return match.group(1)
    target = value.get("targetDiffbotId")
    return target.strip() if isinstance(target, str) and target.strip() else None


def entity_uri(entity_id: str) -> str:
    return f"http://diffbot.com/entity/{entity_id}"


def kind_of(entity: dict[str, Any]) -> str | None:
    """``organization`` or ``person`` judging by the entity's type fields."""
    values: list[str] = []
    for key in ("type", "entityType", "types", "entityTypes"):
        item = entity.get(key)
        values.extend(str(v) for v in (item if isinstance(item, list) else [item]) if v)
    text = " ".join(values).lower()
    if "person" in text:
        return "person"
    if any(word in text for word in ("organization", "organisation", "company", "corporation")):
        return "organization"
    return None


def domain_of(url: Any) -> str | None:
    if not isinstance(url, str) or not url.strip():
        return None
    text = url.strip()
    host = urlsplit(text if "://" in text else f"https://{text}").hostname or ""
    host = host.lower().removeprefix("www.")
    return host or None


def diffbot_date(value: Any) -> str | None:
    """Diffbot dates (``{"timestamp": ms}`` or ``{"str": "d2026-11-30T..."}``) as ISO text."""
    if isinstance(value, dict):
        if isinstance(value.get("timestamp"), int | float):
            return datetime.fromtimestamp(value["timestamp"] / 1000, tz=UTC).isoformat()
        text = value.get("str")
        if isinstance(text, str):
            return text.removeprefix("d")
        return None
    return str(value) if value else None


def _items(payload: Any) -> list[dict[str, Any]]:
    data = payload.get("data") if isinstance(payload, dict) else payload
    if isinstance(payload, dict) and data is None and ("pageUrl" in payload or "diffbotUri" in payload):
        data = [payload]
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict):
            entity = item.get("entity")
            out.append(entity if isinstance(entity, dict) else item)
    return out


def _name(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("name")
    return value.strip() if isinstance(value, str) and value.strip() else None


def _reference(value: Any) -> dict[str, Any] | None:
    """A reference (CEO, employer, tag) with a real Diffbot id, or None."""
    ref_id = canonical_id(value)
    if ref_id is None:
        return None
    return {"id": ref_id, "name": _name(value), "uri": entity_uri(ref_id)}


def entity_rows(payload: Any, tool_input: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Rows for ``_WRITE_ENTITIES``, by label, from an ``enhance_entity`` answer."""
    by_label: dict[str, list[dict[str, Any]]] = {"DiffbotOrganization": [], "DiffbotPerson": []}
    hint_names = [tool_input.get(key) for key in ("name", "employer")]
    for entity in _items(payload):
        entity_id = canonical_id(entity)
        kind = kind_of(entity) or kind_of({"type": tool_input.get("entity_type")})
        if entity_id is None or kind is None:
            continue
        employers = [
            ref
            for job in entity.get("employments") or []
            if isinstance(job, dict)
            for ref in [_reference(job.get("employer") or job.get("organization"))]
            if ref is not None
        ]
        ceo = _reference(entity.get("ceo"))
        location = _first_location(entity)
        revenue: dict[str, Any] = entity["revenue"] if isinstance(entity.get("revenue"), dict) else {}
        domain = domain_of(entity.get("homepageUri")) or (
            domain_of(tool_input.get("url")) if kind == "organization" else None
        )
        props = {
            "name": _name(entity.get("name")),
            "domain": domain,
            "description": entity.get("description"),
            "summary": entity.get("summary"),
            "homepage_uri": entity.get("homepageUri"),
            "linkedin_uri": entity.get("linkedInUri"),
            "twitter_uri": entity.get("twitterUri"),
            "diffbot_uri": entity_uri(entity_id),
            "title": _current_title(entity),
            "email": tool_input.get("email") if kind == "person" else None,
            "employers": sorted({ref["name"] for ref in employers if ref["name"]}) or None,
            "nb_employees": entity.get("nbEmployees"),
            "revenue_value": revenue.get("value"),
            "revenue_currency": revenue.get("currency"),
            "ceo": ceo["name"] if ceo else None,
            "industries": _names(entity.get("industries")),
            "categories": _names(entity.get("categories")),
            "location": location,
        }
        names = [entity.get("name"), *(entity.get("allNames") or []), *hint_names]
        names += [ref["name"] for ref in employers]
        label = "DiffbotOrganization" if kind == "organization" else "DiffbotPerson"
        by_label[label].append(
            {
                "id": entity_id,
                "props": {k: v for k, v in props.items() if v not in (None, "", [])},
                "domain": domain if kind == "organization" else None,
                "name_keys": sorted({n.strip().lower() for n in names if isinstance(n, str) and n.strip()}),
                "ceo": ceo if kind == "organization" else None,
                "employers": employers,
            }
        )
    return by_label


def _names(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    names = [n for n in (_name(item) for item in value) if n]
    return names[:12] or None


def _first_location(entity: dict[str, Any]) -> str | None:
    locations = entity.get("locations")
    if not isinstance(locations, list) or not locations:
        locations = [entity.get("location")] if isinstance(entity.get("location"), dict) else []
    ordered = sorted((x for x in locations if isinstance(x, dict)), key=lambda x: not x.get("isPrimary"))
    if not ordered:
        return None
    parts = [_name(ordered[0].get(key)) for key in ("city", "region", "country")]
    return ", ".join(p for p in parts if p) or None


def _current_title(entity: dict[str, Any]) -> str | None:
    for job in entity.get("employments") or []:
        if isinstance(job, dict) and job.get("isCurrent") and _name(job.get("title")):
            return _name(job.get("title"))
    return None


def article_rows(payload: Any, dql: str | None) -> list[dict[str, Any]]:
    """Rows for ``_WRITE_ARTICLES`` from a ``search_news`` answer."""
    quoted = [term.strip().lower() for term in _QUOTED_TERM.findall(dql or "")]
    rows = []
    for article in _items(payload):
        url = article.get("pageUrl")
        if not isinstance(url, str) or not url.strip():
            continue
        tags = [tag for tag in article.get("tags") or [] if isinstance(tag, dict) and _name(tag.get("label"))]
        labels = sorted({str(tag["label"]).strip() for tag in tags})
        organizations = []
        for tag in tags:
            ref_id = canonical_id({"uri": tag.get("uri")}) if tag.get("uri") else None
            if ref_id and kind_of(tag) == "organization":
                organizations.append(
                    {"id": ref_id, "name": str(tag["label"]).strip(), "uri": entity_uri(ref_id)}
                )
        text = article.get("text") if isinstance(article.get("text"), str) else None
        haystack = (
            " ".join(str(article.get(key) or "") for key in ("title", "summary", "text")).lower()
            + " "
            + " ".join(labels).lower()
        )
        named = {term for term in quoted if term in haystack}  # a query term this article is about
        props = {
            "title": article.get("title"),
            "summary": article.get("summary"),
            "site_name": article.get("siteName"),
            "author": article.get("author"),
            "date": diffbot_date(article.get("date")),
            "sentiment": article.get("sentiment"),
            "publisher_country": article.get("publisherCountry"),
            "text": text,
            "text_chars": len(text) if text else None,
            "text_sha256": hashlib.sha256(text.encode()).hexdigest() if text else None,
        }
        rows.append(
            {
                "url": url.strip(),
                "props": {k: v for k, v in props.items() if v not in (None, "")},
                "tags": labels,
                "organizations": organizations,
                "terms": sorted({label.lower() for label in labels} | named),
            }
        )
    return rows


# -- the handler -------------------------------------------------------------------------------------


class DiffbotIngestion(CaptureHandler):
    """Stores what ``search_news`` and ``enhance_entity`` returned (see the module docstring)."""

    name = "diffbot-ingestion"
    events = frozenset({"PostToolUse"})

    def matches(self, event: HookEvent) -> bool:
        return event.event == "PostToolUse" and event.tool_key in TOOLS and not event.is_error

    def handle(self, event: HookEvent, context: CaptureContext) -> None:
        response = unwrap(event.tool_response)
        payload = response.data
        if response.is_error or not isinstance(payload, dict | list):
            return
        if isinstance(payload, dict) and payload.get("status") == "error":
            return
        tool_input = event.tool_input if isinstance(event.tool_input, dict) else {}
        params = {"now": datetime.now(UTC), "session_id": event.session_id}
        stored = linked = 0
        links: list[ProviderLink] = []
        project = context.project.id if context.project else None
        if event.tool_key == "enhance_entity":
            for label, rows in entity_rows(payload, tool_input).items():
                if rows:
                    result = context.graph.write(
                        _WRITE_ENTITIES.format(label=label), {**params, "rows": rows}
                    )
                    stored, linked = _add(result, stored, linked)
                    links += entity_links(label, rows, project)
            what = "entities"
        else:
            rows = article_rows(payload, tool_input.get("dql"))
            if rows:
                result = context.graph.write(_WRITE_ARTICLES, {**params, "rows": rows})
                stored, linked = _add(result, stored, linked)
                organizations = [
                    ref | {"props": {"name": ref["name"]}} for row in rows for ref in row["organizations"]
                ]
                links += entity_links("DiffbotOrganization", organizations, project)
            what = "articles"
        if links:
            context.graph.write_tx(lambda tx: link_provider_nodes(tx, links, now=params["now"]))
        log.info("diffbot: stored %d %s, %d account link(s), %d entities", stored, what, linked, len(links))


def entity_links(label: str, rows: list[dict[str, Any]], project_id: str | None) -> list[ProviderLink]:
    """The project's entities for Diffbot nodes: an organisation by name, with its other names (the
    one the agent asked about among them) and its domain as aliases; a person by name."""
    if project_id is None:
        return []
    kind = "person" if label == "DiffbotPerson" else "organisation"
    links = []
    for row in rows:
        props = row.get("props") or {}
        aliases: list[str] = []
        if kind == "organisation":
            aliases = [
                key for key in row.get("name_keys") or [] if key != str(props.get("name") or "").lower()
            ]
            aliases += [row["domain"]] if row.get("domain") else []
        mention = Mention.of(str(props.get("name") or ""), kind, aliases, "provider")
        if mention is not None:
            links.append(ProviderLink(label, "id", row["id"], mention, project_id))
    return links


def _add(result: Iterable[dict[str, Any]], stored: int, linked: int) -> tuple[int, int]:
    for row in result:
        stored += int(row.get("stored") or 0)
        linked += int(row.get("linked") or 0)
    return stored, linked
