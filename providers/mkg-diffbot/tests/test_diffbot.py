"""mkg-diffbot: the tools against a local fake Diffbot, and the ingestion of their results through
the real hook and worker into the real dev Neo4j."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mkg_diffbot.client import DiffbotClient, DiffbotError
from mkg_diffbot.fake import ACCENTURE, ARTICLES, JULIE, TOKEN, FakeDiffbot
from mkg_diffbot.tools import bounded, compact, enhance_params

from mkg_core.errors import MkgError
from mkg_core.graph import Graph
from mkg_core.host import PluginHost
from mkg_core.plugins import describe_plugins, make_plugin_manager
from mkg_core.server import plan_groups
from mkg_core.settings import load_settings
from mkg_core.testing import CaptureRig, Neo4jServer, mcp_call, mcp_server, mcp_session

ROOT = Path(__file__).resolve().parents[3]
CLAUDE = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
CODEX = ROOT / "harnesses" / "mkg-codex" / "tests" / "payloads"
PROJECT = "diffbot-test"

pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)


def test_registers_through_its_entry_point() -> None:
    rows = {row["name"]: row for row in describe_plugins(make_plugin_manager(environ={}))}
    assert rows["diffbot"]["distribution"] == "mkg-diffbot"
    assert {"mkg_register_tool_groups", "mkg_register_capture_handlers"} <= set(rows["diffbot"]["hooks"])


@pytest.mark.parametrize(("token", "mounted"), [(None, False), ("  ", False), (TOKEN, True)])
def test_the_tools_mount_only_with_a_token(token: str | None, mounted: bool) -> None:
    environ = {"MKG_LOAD_PLUGINS": "diffbot"} | ({"DIFFBOT_TOKEN": token} if token is not None else {})
    settings = load_settings(environ=environ, project_root=os.getcwd())
    host = PluginHost(make_plugin_manager(environ=environ))
    mounted_groups, skipped = plan_groups(host, settings)
    names = {tool.name for entry in mounted_groups for tool in entry.group.tools}
    assert ({"search_news", "enhance_entity"} <= names) is mounted
    assert [s.reason for s in skipped if s.group.name == "diffbot"] == (
        [] if mounted else ["missing: DIFFBOT_TOKEN"]
    )


def _client(diffbot: FakeDiffbot, token: str = TOKEN, **options: Any) -> tuple[DiffbotClient, list[float]]:
    slept: list[float] = []
    return DiffbotClient(token, diffbot.url, sleep=slept.append, **options), slept


def test_rate_limits_and_server_errors_are_retried_with_backoff(diffbot: FakeDiffbot) -> None:
    diffbot.script["/kg/v3/enhance"] = [
        (429, {"error": "Too many requests"}, {"Retry-After": "2"}),
        (503, "upstream unavailable", {}),
    ]
    client, slept = _client(diffbot)
    answer = client.enhance({"type": "Organization", "name": "Accenture"}, size=1)
    assert answer["data"][0]["entity"]["name"] == "Accenture"
    assert slept == [2.0, 2.0]  # Retry-After first, then the exponential backoff's second step
    assert len(diffbot.requests) == 3

    diffbot.script["/kg/v3/dql"] = [(500, {"error": "boom"}, {})] * 4
    with pytest.raises(DiffbotError, match=r"Diffbot is failing \(HTTP 500: boom\)"):
        client.dql("type:Article", size=1)


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (401, {"errorCode": 401, "error": "Not authorized API token."}, "refused the token.*DIFFBOT_TOKEN"),
        (402, {"error": "Your plan has reached its monthly quota"}, "quota or rate limit reached"),
        (429, {"error": "Daily quota exceeded"}, "quota or rate limit reached"),
        (400, {"error": "Invalid query"}, r"rejected the request \(HTTP 400: Invalid query\)"),
    ],
)
def test_errors_say_what_went_wrong(diffbot: FakeDiffbot, status: int, body: Any, message: str) -> None:
    diffbot.script["/kg/v3/dql"] = [(status, body, {})]
    client, slept = _client(diffbot)
    with pytest.raises(DiffbotError, match=message):
        client.dql("type:Article", size=1)
    assert slept == [] and len(diffbot.requests) == 1  # a quota or a bad token is not retried


def test_a_bad_token_never_appears_in_an_error(diffbot: FakeDiffbot) -> None:
    client, _ = _client(diffbot, token="wrong-token")
    with pytest.raises(DiffbotError) as raised:
        client.dql("type:Article", size=1)
    assert "wrong-token" not in str(raised.value)
    unreachable = DiffbotClient("secret-token-value", "http://127.0.0.1:9/kg/v3", retries=0)
    with pytest.raises(DiffbotError, match="Diffbot request failed") as raised:
        unreachable.dql("type:Article", size=1)
    assert "secret-token-value" not in str(raised.value)


def test_a_filter_diffbot_cannot_parse_is_dropped_once(diffbot: FakeDiffbot) -> None:
    diffbot.script["/kg/v3/enhance"] = [(422, {"error": "Parse filter failed: unknown field"}, {})]
    client, _ = _client(diffbot)
    client.enhance({"type": "Organization", "name": "Accenture"}, size=1, filter="name nope")
    assert diffbot.requests[0]["params"]["filter"] == "name nope"
    assert "filter" not in diffbot.requests[1]["params"]


@pytest.mark.parametrize(
    ("entity_type", "values", "message"),
    [
        ("Place", {"name": "x"}, "Organization or Person"),
        ("Organization", {"name": "  "}, "at least one identifier"),
        ("Organization", {"name": "Acme", "employer": "Acme"}, "only valid for Person"),
    ],
)
def test_enhance_requests_are_checked(entity_type: str, values: dict[str, str], message: str) -> None:
    with pytest.raises(MkgError, match=message):
        enhance_params(entity_type, **values)
    assert enhance_params("Person", name=" Julie Sweet ", employer="Accenture", url=None) == {
        "type": "Person", "name": "Julie Sweet", "employer": "Accenture",
    }  # fmt: skip


def test_answers_are_compacted_and_kept_within_budget() -> None:
    small = compact({"data": [{"entity": ACCENTURE}, {"entity": ARTICLES[0]}]})
    org, article = small["data"][0]["entity"], small["data"][1]["entity"]
    assert org["locations"][0] == {
        "address": "1 Grand Canal Square", "city": "Dublin", "region": "Leinster", "country": "Ireland",
        "isPrimary": True,
    }  # fmt: skip
    assert org["ceo"] == {
        "name": "Julie Sweet",
        "diffbotUri": "http://diffbot.com/entity/P1qkX9aO3MyuBg1rB9nF3rw",
    }
    assert org["categories"] == ["Consulting"]
    assert article["text"].endswith("…[clipped]") and len(article["text"]) == 5000 + len("…[clipped]")

    many = {"data": [{"entity": {**ACCENTURE, "description": "x" * 5000}} for _ in range(20)]}
    fitted = bounded(compact(many), budget=20_000)
    assert len(json.dumps(fitted)) <= 20_000 and len(fitted["data"]) == 20
    assert fitted["truncated"].startswith("dropped locations, categories, allNames, description")
    tiny = bounded(compact(many), budget=1_000)
    assert (
        len(tiny["data"]) == 1 and tiny["truncated"] == "kept only the first match to fit the response budget"
    )


def test_the_tools_through_the_mcp_server(diffbot: FakeDiffbot, tmp_path: Path) -> None:
    env = {**os.environ, "DIFFBOT_TOKEN": TOKEN, "DIFFBOT_API_URL": diffbot.url, "MKG_PROJECT_ID": PROJECT}

    async def work(client: Any) -> tuple[set[str], Any, Any, Any]:
        names = {tool.name for tool in (await client.list_tools()).tools}
        news = await mcp_call(
            client, "search_news", dql='type:Article tags.label:"Accenture"', max_results=50
        )
        org = await mcp_call(client, "enhance_entity", entity_type="Organization", url="accenture.com")
        bad = await mcp_call(client, "search_news", dql='type:Organization name:"Accenture"')
        return names, news, org, bad

    names, news, org, bad = mcp_session(mcp_server(env), work)
    assert {"search_news", "enhance_entity"} <= names
    assert not news[0] and [item["entity"]["pageUrl"] for item in news[1]["data"]] == [
        a["pageUrl"] for a in ARTICLES
    ]
    assert not org[0] and org[1]["data"][0]["entity"]["id"] == ACCENTURE["id"]
    assert bad[0] and "type:Article" in bad[1]
    dql, enhance = diffbot.requests
    assert dql["params"]["size"] == "10" and dql["params"]["token"] == TOKEN  # clamped to Diffbot's cap
    assert "tags.label" in dql["params"]["filter"] and dql["params"]["format"] == "json"
    assert enhance["params"]["type"] == "Organization" and enhance["params"]["url"] == "accenture.com"


# -- ingestion ----------------------------------------------------------------------------------------

DEMO_ACCOUNTS = [  # as the sales-agent demo seeds them (mkg-sales-agent is not a dependency of this package)
    {"id": "accenture", "name": "Accenture", "domain": "accenture.com"},
    {"id": "deloitte", "name": "Deloitte", "domain": "deloitte.com"},
    {"id": "salesforce", "name": "Salesforce", "domain": "salesforce.com"},
]


@pytest.fixture
def rig(capture: CaptureRig, graph: Graph, neo4j_server: Neo4jServer) -> CaptureRig:
    graph.write("UNWIND $rows AS row MERGE (a:Account {id: row.id}) SET a += row", {"rows": DEMO_ACCOUNTS})
    capture.env.update({"MKG_PROJECT_ID": PROJECT, "MKG_LOAD_PLUGINS": "diffbot"})
    return capture


def _payload(
    folder: Path, session: str, tool: str, tool_input: dict[str, Any], response: Any
) -> dict[str, Any]:
    data = json.loads((folder / "PostToolUse.json").read_text())
    return {
        **data,
        "session_id": session,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_response": response,
    }


def _send(rig: CaptureRig, client: str, payload: dict[str, Any]) -> None:
    result = rig.hook(client, "PostToolUse", payload)
    assert result.returncode == 0 and result.stderr == b"", result.stderr


def _blocks(value: Any) -> list[dict[str, str]]:
    return [{"type": "text", "text": json.dumps(value)}]


def test_results_become_graph_knowledge_from_both_harnesses(
    rig: CaptureRig, graph: Graph, tmp_path: Path
) -> None:
    org = compact({"data": [{"entity": ACCENTURE}]})
    person = compact({"data": [{"entity": JULIE}]})
    news = compact({"data": [{"entity": a} for a in ARTICLES]})
    saved = tmp_path / "tool-result.txt"
    saved.write_text(json.dumps(news))
    claude_enhance = "mcp__plugin_meta-knowledge-graph_mkg__enhance_entity"
    _send(
        rig,
        "claude",
        _payload(
            CLAUDE,
            "c1",
            claude_enhance,
            {"entity_type": "Organization", "url": "accenture.com"},
            _blocks(org),
        ),
    )
    _send(rig, "codex", _payload(
        CODEX, "x1", "mcp__mkg__enhance_entity", {"entity_type": "Person", "name": "Julie Sweet"},
        {"content": _blocks(person), "isError": False},
    ))  # fmt: skip
    notice = f"Output too large (80.1KB). Full output saved to {saved}"
    dql = 'type:Article tags.label:"Accenture" OR text:"Deloitte" sortBy:date'
    _send(
        rig,
        "claude",
        _payload(
            CLAUDE,
            "c1",
            "mcp__plugin_meta-knowledge-graph_mkg__search_news",
            {"dql": dql},
            [{"type": "text", "text": notice}],
        ),
    )
    _send(rig, "codex", _payload(
        CODEX, "x1", "mcp__mkg__search_news", {"dql": "type:Article"},
        {"content": [{"type": "text", "text": "Diffbot quota or rate limit reached"}], "isError": True},
    ))  # fmt: skip
    rig.drain()

    def snapshot() -> list[dict[str, Any]]:
        return graph.read(
            "MATCH (n) WHERE n:DiffbotOrganization OR n:DiffbotPerson OR n:NewsArticle OR n:NewsTag "
            "OPTIONAL MATCH (n)-[r]->(m) WHERE NOT m:SessionEvent "
            "WITH n, r, m ORDER BY type(r), coalesce(m.id, m.url, m.label, m.session_id) "
            "RETURN labels(n)[0] AS label, coalesce(n.id, n.url, n.label) AS key, "
            "collect([type(r), coalesce(m.id, m.url, m.label, m.session_id)]) AS out ORDER BY label, key"
        )

    before = snapshot()
    rows = {row["key"]: row for row in before}
    accenture, julie = ACCENTURE["id"], "P1qkX9aO3MyuBg1rB9nF3rw"
    assert sorted(rows[accenture]["out"]) == [["CAPTURED_IN", "c1"], ["HAS_CEO", julie]]
    assert sorted(rows[julie]["out"]) == [["CAPTURED_IN", "x1"], ["EMPLOYED_BY", accenture]]  # Cravath: no id
    props = graph.read("MATCH (o:DiffbotOrganization {id: $id}) RETURN o AS o", {"id": accenture})[0]["o"]
    assert (props["domain"], props["nb_employees"], props["location"], props["ceo"]) == (
        "accenture.com", 774000, "Dublin, Leinster, Ireland", "Julie Sweet",
    )  # fmt: skip
    enriched = graph.read(
        "MATCH (a:Account)-[:HAS_ENRICHMENT]->(e) RETURN a.id AS account, e.id AS entity ORDER BY entity"
    )
    assert enriched == [
        {"account": "accenture", "entity": accenture},
        {"account": "accenture", "entity": julie},  # matched on the employer's name
    ]
    first = rows["https://news.example/accenture-fleet"]
    assert sorted(first["out"]) == [
        ["CAPTURED_IN", "c1"], ["MENTIONS", accenture], ["MENTIONS", "accenture"], ["TAGGED", "Accenture"],
        ["TAGGED", "Fleet management"], ["TAGGED", "Unknown Holdings"],
    ]  # fmt: skip
    second = rows["https://news.example/travel-budgets"]
    assert sorted(second["out"]) == [["CAPTURED_IN", "c1"], ["MENTIONS", "deloitte"], ["TAGGED", "Travel"]]
    article = graph.read("MATCH (n:NewsArticle {url: $u}) RETURN n AS n", {"u": first["key"]})[0]["n"]
    assert article["date"] == "2026-11-28T09:00:00+00:00" and article["text_chars"] == 5000 + len(
        "…[clipped]"
    )
    assert graph.read("MATCH (o:DiffbotOrganization) RETURN count(o) AS n") == [{"n": 1}]  # no invented ids

    rig.drain()
    assert snapshot() == before  # seeing the same events again changes nothing
