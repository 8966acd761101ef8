"""The agent-facing Diffbot tools: ``search_news`` (DQL over articles) and ``enhance_entity``.

Answers are compacted before they reach the agent (primary locations first, names instead of
nested references, long article texts clipped) and kept within a size budget, dropping the
heaviest fields first and saying so.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from mkg_core.contrib import Setting, ToolContext, ToolGroup, ToolSpec
from mkg_core.errors import MkgError
from mkg_core.settings import Settings

if TYPE_CHECKING:
    from .client import DiffbotClient


NEWS_FILTER = (
    "title pageUrl siteName date author sentiment tags.label tags.uri tags.types publisherCountry "
    "summary text"
)
ORGANIZATION_FILTER = (
    "id name allNames diffbotUri homepageUri linkedInUri twitterUri description summary industries "
    "categories nbEmployees revenue locations ceo"
)
PERSON_FILTER = (
    "id name allNames diffbotUri linkedInUri twitterUri description summary location locations "
    "employments skills"
)
IDENTIFIERS = ("id", "name", "url", "email", "phone", "location", "employer", "title")
PERSON_ONLY = ("email", "employer", "title")
TEXT_CLIP = 5000
BUDGET_CHARS = 70_000
HEAVY_FIELDS = ("locations", "categories", "allNames", "description", "summary")
MAX_NEWS = 10
MAX_ENHANCE = 5
DEFAULT_API_URL = "https://kg.diffbot.com/kg/v3"
#: The variables this package reads.
SETTINGS = (
    Setting("DIFFBOT_TOKEN", "mounts the Diffbot tools", secret=True, question="Diffbot token (blank: none)"),
    Setting("DIFFBOT_API_URL", "the Diffbot Knowledge Graph API base", default=DEFAULT_API_URL),
)


def token(settings: Settings) -> str | None:
    return settings.get("DIFFBOT_TOKEN")


def client_for(settings: Settings) -> DiffbotClient:
    from .client import DiffbotClient

    value = token(settings)
    if value is None:
        raise MkgError("a Diffbot token is required: set DIFFBOT_TOKEN")
    return DiffbotClient(value, settings.get("DIFFBOT_API_URL", DEFAULT_API_URL) or DEFAULT_API_URL)


def search_news(context: ToolContext, dql: str, max_results: int = 10) -> dict[str, Any]:
    """Search recent news articles with a Diffbot Query Language (DQL) query.

    The query must be about articles: start it with ``type:Article``. Match a company with
    ``tags.label:"Acme Corp"`` first and fall back to ``text:"Acme Corp"``; narrow with
    ``date<30d``, ``language:"en"`` and ``sortBy:date``. Returns at most 10 articles with
    title, URL, site, date, sentiment, tags and a summary.
    """
    query = (dql or "").strip()
    if not query:
        raise MkgError('dql is required, for example: type:Article tags.label:"Acme" date<30d sortBy:date')
    if "type:article" not in query.lower().replace(" ", ""):
        raise MkgError("search_news needs a type:Article DQL query (start it with type:Article)")
    size = _clamp(max_results, 1, MAX_NEWS)
    payload = client_for(context.settings).dql(query, size=size, filter=NEWS_FILTER)
    return bounded(compact(_as_object(payload)))


def enhance_entity(
    context: ToolContext,
    entity_type: Literal["Organization", "Person"],
    name: str | None = None,
    url: str | None = None,
    id: str | None = None,
    location: str | None = None,
    phone: str | None = None,
    email: str | None = None,
    employer: str | None = None,
    title: str | None = None,
    max_results: int = 1,
) -> dict[str, Any]:
    """Look up an organization or a person in Diffbot's Knowledge Graph (firmographics).

    Give at least one identifier: a name, a website URL or domain, a Diffbot id, a location or a
    phone; for a person also an email, employer or job title. Returns the best matches with
    their Diffbot id, names, homepage, industries, employee count, revenue, CEO and locations
    (organizations) or employments and skills (people).
    """
    params = enhance_params(
        entity_type,
        name=name,
        url=url,
        id=id,
        location=location,
        phone=phone,
        email=email,
        employer=employer,
        title=title,
    )
    chosen = ORGANIZATION_FILTER if params["type"] == "Organization" else PERSON_FILTER
    payload = client_for(context.settings).enhance(
        params, size=_clamp(max_results, 1, MAX_ENHANCE), filter=chosen
    )
    return bounded(compact(_as_object(payload)))


def enhance_params(entity_type: str, **values: str | None) -> dict[str, str]:
    """Check an enhance request and return its query parameters (raises MkgError with advice)."""
    if entity_type not in ("Organization", "Person"):
        raise MkgError(f"entity_type must be Organization or Person, not {entity_type!r}")
    given = {key: value.strip() for key, value in values.items() if isinstance(value, str) and value.strip()}
    if not any(key in given for key in IDENTIFIERS):
        raise MkgError(f"at least one identifier is required: {', '.join(IDENTIFIERS)}")
    misplaced = [key for key in PERSON_ONLY if key in given and entity_type != "Person"]
    if misplaced:
        raise MkgError(f"{', '.join(misplaced)} are only valid for Person enhance requests")
    return {"type": entity_type, **given}


def _clamp(value: int, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise MkgError(f"expected a whole number, got {value!r}") from None
    return max(low, min(high, number))


def _as_object(payload: Any) -> dict[str, Any]:
    return payload if isinstance(payload, dict) else {"data": payload}


# -- compaction --------------------------------------------------------------------------------------


def compact(value: Any) -> Any:
    """Shrink a Diffbot answer to what an agent reads; keeps every id and URI."""
    if isinstance(value, list):
        return [compact(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "locations" and isinstance(item, list):
            out[key] = _locations(item)
        elif key == "location" and isinstance(item, dict):
            out[key] = _locations([item])[0]
        elif key == "categories" and isinstance(item, list):
            out[key] = [c.get("name") if isinstance(c, dict) else c for c in item][:6]
        elif key == "allNames" and isinstance(item, list):
            out[key] = item[:6]
        elif key == "text" and isinstance(item, str) and len(item) > TEXT_CLIP:
            out[key] = item[:TEXT_CLIP] + "…[clipped]"
        elif key in ("city", "region", "country") and isinstance(item, dict):
            out[key] = item.get("name")
        elif key in ("ceo", "employer", "parentCompany") and isinstance(item, dict):
            out[key] = _reference(item)
        else:
            out[key] = compact(item)
    return out


def _locations(items: list[Any]) -> list[dict[str, Any]]:
    ordered = sorted(
        (i for i in items if isinstance(i, dict)), key=lambda loc: not loc.get("isPrimary", False)
    )
    return [
        {
            "address": loc.get("address"),
            "city": _name(loc.get("city")),
            "region": _name(loc.get("region")),
            "country": _name(loc.get("country")),
            "isPrimary": bool(loc.get("isPrimary", False)),
        }
        for loc in ordered[:3]
    ]


def _name(value: Any) -> Any:
    return value.get("name") if isinstance(value, dict) else value


def _reference(item: dict[str, Any]) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": item.get("name")}
    uri = item.get("diffbotUri") or item.get("targetDiffbotUri")
    if uri:
        ref["diffbotUri"] = uri
    elif item.get("targetDiffbotId"):
        ref["targetDiffbotId"] = item["targetDiffbotId"]
    return ref


def bounded(payload: dict[str, Any], budget: int = BUDGET_CHARS) -> dict[str, Any]:
    """Fit the answer in ``budget`` characters of JSON: drop heavy fields, then extra matches."""
    if _size(payload) <= budget or not isinstance(payload.get("data"), list):
        return payload
    trimmed = dict(payload)
    items = [dict(i) if isinstance(i, dict) else i for i in payload["data"]]
    trimmed["data"] = items
    dropped: list[str] = []
    for field in HEAVY_FIELDS:
        for item in items:
            entity = item.get("entity") if isinstance(item, dict) else None
            if isinstance(entity, dict) and field in entity:
                item["entity"] = {k: v for k, v in entity.items() if k != field}
                if field not in dropped:
                    dropped.append(field)
        trimmed["truncated"] = f"dropped {', '.join(dropped)} to fit the response budget"
        if _size(trimmed) <= budget:
            return trimmed
    trimmed["data"] = items[:1]
    trimmed["truncated"] = "kept only the first match to fit the response budget"
    return trimmed


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def tool_group() -> ToolGroup:
    return ToolGroup(
        "diffbot",
        (
            ToolSpec("search_news", search_news, search_news.__doc__ or ""),
            ToolSpec("enhance_entity", enhance_entity, enhance_entity.__doc__ or ""),
        ),
        description="Diffbot news search and firmographics",
        missing=lambda settings: [] if token(settings) else ["DIFFBOT_TOKEN"],
    )
