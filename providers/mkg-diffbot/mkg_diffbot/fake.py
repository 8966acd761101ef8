"""A local stand-in for Diffbot's Knowledge Graph API, for tests and offline trials.

It answers ``/kg/v3/dql`` and ``/kg/v3/enhance`` with JSON shaped like Diffbot's documented
responses, records every request, and can be scripted to fail (rate limits, outages, quota).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: The one token the fake accepts.
TOKEN = "diffbot-test-token"

ACCENTURE = {
    "id": "EbR0Pj6Wt0H2I2EkGCOsVeQ",
    "diffbotUri": "http://diffbot.com/entity/EbR0Pj6Wt0H2I2EkGCOsVeQ",
    "type": "Organization",
    "types": ["Organization", "Corporation"],
    "name": "Accenture",
    "allNames": ["Accenture plc", "Accenture", "Andersen Consulting"],
    "homepageUri": "www.accenture.com",
    "linkedInUri": "linkedin.com/company/accenture",
    "description": "Accenture is a global professional services company.",
    "summary": "Professional services company",
    "nbEmployees": 774000,
    "revenue": {"currency": "USD", "value": 64896000000},
    "industries": [{"name": "Professional Services"}, {"name": "IT Services"}],
    "categories": [{"name": "Consulting", "diffbotUri": "http://diffbot.com/entity/XcAtAGb"}],
    "ceo": {
        "summary": "CEO at Accenture",
        "name": "Julie Sweet",
        "diffbotUri": "http://diffbot.com/entity/P1qkX9aO3MyuBg1rB9nF3rw",
        "targetDiffbotId": "P1qkX9aO3MyuBg1rB9nF3rw",
        "type": "Person",
    },
    "locations": [
        {"city": {"name": "New York"}, "region": {"name": "New York"}, "country": {"name": "United States"},
         "isPrimary": False, "address": "1345 Avenue of the Americas"},
        {"city": {"name": "Dublin"}, "region": {"name": "Leinster"}, "country": {"name": "Ireland"},
         "isPrimary": True, "address": "1 Grand Canal Square"},
    ],
}  # fmt: skip

JULIE = {
    "id": "P1qkX9aO3MyuBg1rB9nF3rw",
    "diffbotUri": "http://diffbot.com/entity/P1qkX9aO3MyuBg1rB9nF3rw",
    "type": "Person",
    "name": "Julie Sweet",
    "allNames": ["Julie Sweet", "Julie Terese Sweet"],
    "employments": [
        {"employer": {"name": "Accenture", "diffbotUri": "http://diffbot.com/entity/EbR0Pj6Wt0H2I2EkGCOsVeQ",
                      "targetDiffbotId": "EbR0Pj6Wt0H2I2EkGCOsVeQ", "type": "Organization"},
         "title": "Chief Executive Officer", "isCurrent": True},
        {"employer": {"name": "Cravath, Swaine & Moore"}, "title": "Partner", "isCurrent": False},
    ],
    "skills": [{"name": "Leadership"}],
}  # fmt: skip

ARTICLES = [
    {
        "type": "Article",
        "title": "Accenture expands its fleet programme with RoadFlex",
        "pageUrl": "https://news.example/accenture-fleet",
        "siteName": "Example News",
        "date": {"str": "d2026-11-28T09:00", "timestamp": 1795856400000, "precision": 4},
        "author": "A. Writer",
        "sentiment": 0.6,
        "publisherCountry": "United States",
        "summary": "Accenture signed a larger fleet-card contract.",
        "text": "Accenture signed ... " * 400,
        "tags": [
            {
                "label": "Accenture",
                "uri": "http://diffbot.com/entity/EbR0Pj6Wt0H2I2EkGCOsVeQ",
                "score": 0.9,
                "types": ["http://dbpedia.org/ontology/Organisation", "http://dbpedia.org/ontology/Company"],
            },
            {"label": "Fleet management", "score": 0.5, "types": ["http://dbpedia.org/ontology/Concept"]},
            {"label": "Unknown Holdings", "score": 0.4, "types": ["http://dbpedia.org/ontology/Company"]},
        ],
    },
    {
        "type": "Article",
        "title": "Professional services firms cut travel budgets",
        "pageUrl": "https://news.example/travel-budgets",
        "siteName": "Other News",
        "date": {"timestamp": 1795770000000},
        "sentiment": -0.2,
        "summary": "Deloitte and others are trimming travel.",
        "tags": [{"label": "Travel", "types": ["http://dbpedia.org/ontology/Concept"]}],
    },
]


@dataclass
class FakeDiffbot:
    """Records every request; ``script`` queues (status, body, headers) answers per path before the
    normal one."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    script: dict[str, list[tuple[int, Any, dict[str, str]]]] = field(default_factory=dict)

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        queued = self.script.get(path) or []
        if queued:
            return queued.pop(0)
        if params.get("token") != TOKEN:
            return 401, {"errorCode": 401, "error": "Not authorized API token."}, {}
        if path.endswith("/dql"):
            size = int(params.get("size", "10"))
            data = [{"score": 1.0, "entity": a} for a in ARTICLES][:size]
            return 200, {"version": 3, "hits": len(ARTICLES), "results": len(data), "data": data}, {}
        if path.endswith("/enhance"):
            entity = JULIE if params.get("type") == "Person" else ACCENTURE
            return (
                200,
                {"version": 3, "hits": 1, "results": 1, "data": [{"score": 0.98, "entity": entity}]},
                {},
            )
        return 404, {"error": "not found"}, {}


@contextmanager
def serve() -> Iterator[FakeDiffbot]:
    """Run a fake Diffbot on a free port of 127.0.0.1; ``fake.url`` is its API base."""
    fake = FakeDiffbot()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            split = urlsplit(self.path)
            params = {key: values[-1] for key, values in parse_qs(split.query).items()}
            fake.requests.append({"path": split.path, "params": params})
            status, body, headers = fake.answer(split.path, params)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/kg/v3"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
