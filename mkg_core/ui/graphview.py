"""The graph page's data: a learning's, a session's or an entity's neighbourhood, as cytoscape
elements (drawn by ``static/ui.js`` with the cytoscape shipped under ``static/vendor``).

Captions are drawn on a canvas, so no memory text is ever parsed as markup there; each node's
``href`` is one of the viewer's own pages (or none).
"""

from __future__ import annotations

from typing import Any

from . import queries as q
from .viewer import Viewer, href

CENTRES = {"learning": q.CENTRE_LEARNING, "session": q.CENTRE_SESSION, "entity": q.CENTRE_ENTITY}
#: Neighbours per relationship type, and the longest caption drawn.
PER_TYPE, CAPTION_CHARS = 12, 48


def node_href(labels: list[str], key: Any) -> str | None:
    """The viewer's page of a node, for the labels it has one for."""
    if not isinstance(key, str) or not key:
        return None
    if "Learning" in labels:
        return href("/learning", id=key)
    if "Session" in labels:
        return href("/session", id=key)
    if "Project" in labels:
        return href("/project", id=key)
    if "Entity" in labels:
        return href("/graph", kind="entity", id=key)
    return None


def _caption(value: Any) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= CAPTION_CHARS else text[: CAPTION_CHARS - 1] + "…"


def _node(
    element_id: str, labels: list[str], key: Any, caption: Any, status: Any, centre: bool
) -> dict[str, Any]:
    label = labels[0] if labels else "Node"
    return {
        "data": {
            "id": element_id,
            "label": label,
            "caption": f"{label}: {_caption(caption)}",
            "key": key if isinstance(key, str) else None,
            "status": status if isinstance(status, str) else None,
            "href": node_href(labels, key),
            "centre": centre,
        }
    }


def neighbourhood(viewer: Viewer, kind: str, key: str) -> dict[str, Any] | None:
    """The node and its neighbours (at most :data:`PER_TYPE` per relationship type), or None when
    there is no such node the user may see."""
    centre = CENTRES.get(kind)
    if centre is None:
        return None
    rows = viewer.graph.read(
        centre + q.NEIGHBOURHOOD, {"id": key, "user_id": viewer.user_id, "per_type": PER_TYPE}
    )
    if not rows:
        return None
    row = rows[0]
    nodes = {
        row["centre"]: _node(row["centre"], row["labels"], row["key"], row["caption"], row["status"], True)
    }
    edges: dict[str, dict[str, Any]] = {}
    for item in row["around"]:
        if item["node"] not in nodes:
            nodes[item["node"]] = _node(
                item["node"], item["labels"], item["key"], item["caption"], item["status"], False
            )
        edges[item["rel"]] = {
            "data": {
                "id": item["rel"],
                "source": item["source"],
                "target": item["target"],
                "label": item["type"],
            }
        }
    return {"elements": [*nodes.values(), *edges.values()], "centre": row["centre"]}
