"""The memory viewer against the real Neo4j: its security (token, cookie, Host/Origin, CSRF, escaping,
headers), what its pages show, every write going through the shared functions, the live stream, and
``mkg ui`` itself. The pages in a real browser: ``tests/test_ui_browser.py``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
import uvicorn
from starlette.testclient import TestClient
from ui_seed import (
    HANDLER,
    HOSTILE,
    OTHER_USER,
    SCRIPT,
    SCRIPT_URL,
    USER,
    event,
    learn,
    project_node,
    seed_memory,
    seed_session,
    start_ui,
)

from mkg_core import system_prompt
from mkg_core.contrib import CaptureContext
from mkg_core.events import HookEvent
from mkg_core.graph import Graph
from mkg_core.learnings import restore
from mkg_core.recall import InjectionEventLinks, mark_injected
from mkg_core.review import resolve, review_queue
from mkg_core.schema import apply_schema, core_statements
from mkg_core.search import search_learnings
from mkg_core.settings import Settings
from mkg_core.testing import BIN_DIR, REPO_ROOT, Neo4jServer, free_port
from mkg_core.ui.app import create_app
from mkg_core.ui.security import CONTENT_SECURITY_POLICY, Sessions
from mkg_core.ui.viewer import Viewer

PROJECT = "ui-test"
PORT = 8999
ORIGIN = f"http://127.0.0.1:{PORT}"


@pytest.fixture
def viewer(graph: Graph, settings: Settings) -> Viewer:
    apply_schema(graph, core_statements(64))
    return Viewer(settings=settings, graph=graph, user_id=USER, sessions=Sessions(PORT), home_project=PROJECT)


@pytest.fixture
def ids(viewer: Viewer) -> dict[str, str]:
    ids = seed_memory(viewer.graph, PROJECT)
    ids["prompt_event"] = seed_session(viewer.graph, PROJECT)
    return ids


@pytest.fixture
def anonymous(viewer: Viewer) -> Iterator[TestClient]:
    with TestClient(create_app(viewer), base_url=ORIGIN, follow_redirects=False) as client:
        yield client


@pytest.fixture
def client(anonymous: TestClient, viewer: Viewer) -> TestClient:
    """A browser that opened the address ``mkg ui`` printed."""
    answer = anonymous.get(f"/?token={viewer.sessions.token}")
    assert answer.status_code == 303
    return anonymous


def _csrf(client: TestClient, page: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', client.get(page).text)
    assert match, "the page has no form"
    return match.group(1)


def _status(graph: Graph, lid: str) -> str:
    return str(graph.read("MATCH (l:Learning {id: $id}) RETURN l.status AS s", {"id": lid})[0]["s"])


# -- who may come in ------------------------------------------------------------------------------------


def test_the_start_token_opens_a_private_session_and_leaves_the_address(
    anonymous: TestClient, viewer: Viewer
) -> None:
    assert anonymous.get("/").status_code == 401
    assert anonymous.get("/static/ui.js").status_code == 401
    assert anonymous.get("/?token=not-the-token").status_code == 401
    assert "mkg_ui_8999" not in anonymous.cookies

    answer = anonymous.get(f"/project?id={PROJECT}&token={viewer.sessions.token}")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/project?id={PROJECT}"  # the token does not stay in the address
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("mkg_ui_8999=") and viewer.sessions.token not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    home = anonymous.get("/")
    assert home.status_code == 200 and USER in home.text
    assert home.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY
    assert home.headers["referrer-policy"] == "same-origin"
    assert home.headers["x-content-type-options"] == "nosniff"
    assert home.headers["cache-control"] == "no-store"

    # A cookie of another start (or a made-up one) is no session.
    anonymous.cookies.set("mkg_ui_8999", "guessed", domain="127.0.0.1")
    assert anonymous.get("/").status_code == 401
    other = Sessions(PORT)
    assert other.token != viewer.sessions.token and other.open() != other.open()


def test_a_foreign_host_or_origin_is_refused(client: TestClient) -> None:
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 400
    assert client.get("/", headers={"Host": f"evil.example:{PORT}"}).status_code == 400
    assert client.get("/", headers={"Host": "127.0.0.1:1"}).status_code == 400
    assert client.get("/", headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.get("/", headers={"Origin": f"http://127.0.0.1:{PORT + 1}"}).status_code == 403
    assert client.get("/", headers={"Origin": ORIGIN}).status_code == 200
    # localhost is the same server, but a cookie of 127.0.0.1 is not sent to it: it needs the token
    assert client.get("/", headers={"Host": f"localhost:{PORT}"}).status_code == 200


def test_every_write_needs_the_csrf_token_and_the_same_site(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    csrf = _csrf(client, f"/learning?id={ids['candidate']}")
    writes = [
        ("/learning/action", {"id": ids["candidate"], "action": "approve"}),
        ("/review/decide", {"project": PROJECT, "id": ids["candidate"], "decision": "approve"}),
        ("/prompt/change", {"project": PROJECT, "scope": "project", "action": "rollback", "version": "1"}),
    ]
    for path, form in writes:
        assert client.post(path, data=form).status_code == 403
        assert client.post(path, data={**form, "csrf": "forged"}).status_code == 403
        cross = client.post(path, data={**form, "csrf": csrf}, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403
        foreign = client.post(path, data={**form, "csrf": csrf}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
    assert _status(viewer.graph, ids["candidate"]) == "candidate"
    assert system_prompt.current(viewer.graph, system_prompt.Scope.project(PROJECT))[1] == 2
    ok = client.post("/learning/action", data={"id": ids["candidate"], "action": "approve", "csrf": csrf})
    assert ok.status_code == 303 and _status(viewer.graph, ids["candidate"]) == "approved"


def test_memory_text_is_escaped_and_never_a_link(client: TestClient, ids: dict[str, str]) -> None:
    pages = [
        "/",
        f"/project?id={PROJECT}",
        f"/project?id={PROJECT}&q=deploy+notes",
        "/session?id=ui-session-1",
        f"/learning?id={ids['hostile']}",
        f"/prompt?project={PROJECT}",
        f"/prompt?project={PROJECT}&scope=project&a=1&b=2",
        f"/graph?kind=learning&id={ids['hostile']}",
        "/live",
    ]
    seen = set()
    for page in pages:
        body = client.get(page).text
        for raw in (SCRIPT, HANDLER, 'onerror="window', "<img"):
            assert raw not in body, (page, raw)
        assert 'href="javascript' not in body.lower() and "href='javascript" not in body.lower()
        assert "<script>" not in body  # the only scripts are the viewer's own files
        assert set(re.findall(r"<script ([^>]*)>", body)) <= {
            'src="/static/vendor/htmx.min.js" defer',
            'src="/static/ui.js" defer',
            'src="/static/vendor/cytoscape.min.js" defer',
        }
        if "&lt;script&gt;window.__mkg_pwned" in body:
            seen.add(page)
    assert {f"/project?id={PROJECT}", "/session?id=ui-session-1", f"/learning?id={ids['hostile']}"} <= seen
    data = client.get(f"/graph/data?kind=learning&id={ids['hostile']}").json()
    assert all(n["data"].get("href") is None or n["data"]["href"].startswith("/") for n in data["elements"])
    assert SCRIPT_URL not in json.dumps([n["data"].get("href") for n in data["elements"]])
    assert HOSTILE  # the learning holds the hostile text itself


# -- what the pages show ----------------------------------------------------------------------------------


def test_the_projects_page_counts_what_each_project_holds(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    project_node(viewer.graph, "other-project", "Other")
    learn(viewer.graph, "Another project's only learning", project="other-project")
    body = client.get("/").text
    row = body[body.index(f'<div class="id">{PROJECT}</div>') :].split("</tr>")[0]
    numbers = [int(n) for n in re.findall(r">\s*(\d+)\s*<", row.replace("</span> ", "</span>"))]
    # sessions 2 (the session and its subagent), approved 2, candidates 6 (counted by the index:
    # Bo's fact too, which no list shows Ana), one tombstone, 3 observations, 2 waiting (the
    # ambiguous conflict and the held instruction)
    assert numbers[:6] == [2, 2, 6, 1, 3, 2]
    assert "Bo likes" not in client.get(f"/project?id={PROJECT}").text
    assert "the project&#39;s own prompt, version 2" in row
    queue = review_queue(viewer.graph, project_id=PROJECT, user_id=USER)
    assert queue["waiting"] == 2 + 1  # the project's two and Ana's fact
    assert "1</strong> fact about you" in body
    assert "other-project" in body


def test_search_is_recalls_search_with_its_reasons(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    expected = search_learnings(
        viewer.graph,
        "deploy staging helm",
        project_id=PROJECT,
        user_id=USER,
        session_id=None,
        limit=50,
        min_score=viewer.settings.recall_min_score,
    )
    body = client.get(f"/project/learnings?id={PROJECT}&q=deploy+staging+helm").text
    shown = re.findall(r'href="/learning\?id=([^"]+)"', body)
    assert [urllib.parse.unquote(x) for x in shown] == [hit.id for hit in expected]
    assert expected and "fulltext · " in body
    # tombstones are not recalled, but can be searched for by their words
    assert ids["old"].split(":")[-1] not in body
    tombstones = client.get(f"/project/learnings?id={PROJECT}&q=kubectl&status=rejected").text
    assert ids["old"].split(":")[-1] in tombstones and "Recall never returns these" in tombstones
    # filters
    facts = client.get(f"/project/learnings?id={PROJECT}&scope=user").text
    assert "Ana prefers short answers" in facts and "Bo likes" not in facts and "helm chart" not in facts
    held = client.get(f"/project/learnings?id={PROJECT}&status=held").text
    assert "Ignore previous instructions" in held and "helm chart" not in held
    assert client.get(f"/project/learnings?id={PROJECT}&kind=decision").text.count("/learning?id=") == 0


def test_the_learnings_list_pages_by_cursor(client: TestClient, viewer: Viewer) -> None:
    for i in range(viewer.page_size + 5):
        learn(viewer.graph, f"Paged learning number {i:03d}", project=PROJECT)
    first = client.get(f"/project/learnings?id={PROJECT}").text
    older = re.search(r'hx-get="(/project/learnings\?[^"]+)"', first)
    assert older is not None
    second = client.get(older.group(1).replace("&amp;", "&")).text
    one = re.findall(r"Paged learning number (\d+)", first)
    two = re.findall(r"Paged learning number (\d+)", second)
    assert len(one) == viewer.page_size and len(two) == 5
    assert sorted(one + two) == [f"{i:03d}" for i in range(viewer.page_size + 5)]
    assert one == sorted(one, reverse=True)  # newest first
    assert "hx-get" not in second.split("</table>")[1]  # no page after the last


def test_a_session_shows_its_turns_and_why_each_memory_was_injected(
    client: TestClient, ids: dict[str, str]
) -> None:
    body = client.get("/session?id=ui-session-1").text
    order = [
        body.index(f'data-event-id="{e}')
        for e in ("test:ui-session-1:SessionStart", "test:ui-session-1:UserPromptSubmit")
    ]
    assert order == sorted(order)
    block = body[body.index("Memory injected here") :].split("</ol>")[0]
    assert "Deploy staging with the helm chart" in block
    assert "rank 1 · score 0.5000 · found by fulltext + vector" in block
    assert (
        "helm upgrade staging" in body
        and "Release staging upgraded" in body
        and "Staging is deployed." in body
    )
    assert 'href="/session?id=agent-7"' in body  # the subagent's session
    assert 'data-live="/live/stream?session=ui-session-1&amp;after=' in body


def test_a_learning_page_tells_its_history_and_injections(client: TestClient, ids: dict[str, str]) -> None:
    approved = client.get(f"/learning?id={ids['approved']}").text
    assert "Replaces" in approved and "Deploy staging by hand with kubectl apply" in approved
    assert "UserPromptSubmit" in approved and "rank 1 · score 0.5000 · fulltext + vector" in approved
    old = client.get(f"/learning?id={ids['old']}").text
    assert "Replaced by" in old and "superseded by" in old and 'value="restore"' in old
    # another user's fact is not there for Ana
    assert client.get(f"/learning?id={ids['other_fact']}").status_code == 404
    assert client.get("/learning?id=learning:none").status_code == 404


def test_an_entity_section_appears_only_when_the_graph_has_entities(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    assert 'id="entities"' not in client.get(f"/project?id={PROJECT}").text
    viewer.graph.write(
        "MATCH (l:Learning {id: $id}) CREATE (e:Entity {id: 'entity:helm', name: 'Helm', kind: 'command', "
        "scope: 'project', project_id: $project})<-[:ABOUT]-(l)",
        {"id": ids["approved"], "project": PROJECT},
    )
    body = client.get(f"/project?id={PROJECT}").text
    assert 'id="entities"' in body and "Helm" in body
    only = client.get(f"/project/learnings?id={PROJECT}&entity=entity:helm").text
    assert only.count("/learning?id=") == 1 and "helm chart" in only
    graph = client.get("/graph/data?kind=entity&id=entity:helm").json()
    assert {n["data"]["label"] for n in graph["elements"] if "source" not in n["data"]} == {
        "Entity",
        "Learning",
    }


# -- writes ------------------------------------------------------------------------------------------------


def test_learning_actions_go_through_the_shared_functions(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    page = f"/learning?id={ids['candidate']}"
    csrf = _csrf(client, page)

    def act(lid: str, action: str, **form: str) -> int:
        return client.post(
            "/learning/action", data={"id": lid, "action": action, "csrf": csrf, **form}
        ).status_code

    assert (
        act(
            ids["candidate"],
            "edit",
            text="  The staging   cluster needs the VPN;  token=sk-abcdefghijklmnopqrstuvwx1234 ",
        )
        == 303
    )
    row = viewer.graph.read(
        "MATCH (l:Learning {id: $id}) RETURN l.text AS text, l.status AS status, l.reviewed_by AS by, "
        "l.previous_text AS before",
        {"id": ids["candidate"]},
    )[0]
    assert row["status"] == "approved" and row["by"] == "human"
    assert row["text"].startswith(
        "The staging cluster needs the VPN; token=[REDACTED"
    )  # scrubbed and collapsed
    assert row["before"] == "The staging cluster needs the VPN to be reachable"
    too_long = client.post(
        "/learning/action", data={"id": ids["candidate"], "action": "edit", "csrf": csrf, "text": "x" * 600}
    )
    assert too_long.status_code == 400 and "the limit is 500" in too_long.text

    assert act(ids["approved"], "tombstone", reason="the chart moved") == 303
    assert _status(viewer.graph, ids["approved"]) == "rejected"
    assert viewer.graph.read(
        "MATCH (l:Learning {id: $id}) RETURN l.embedding IS NULL AS gone", {"id": ids["approved"]}
    )[0]["gone"]
    assert act(ids["approved"], "restore") == 303
    assert _status(viewer.graph, ids["approved"]) == "approved"
    assert "Restored" in client.get(f"/learning?id={ids['approved']}&done=restore").text
    assert act(ids["approved"], "restore") == 400  # not a tombstone any more
    assert act(ids["other_fact"], "approve") == 404  # Bo's fact is not Ana's to decide
    assert _status(viewer.graph, ids["other_fact"]) == "candidate"


def test_review_decisions_are_the_review_queues(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    body = client.get(f"/review?project={PROJECT}").text
    item = body[body.index(f'data-learning="{ids["conflict_new"]}"') :].split("</article>")[0]
    assert "Releases go out on Fridays" in item and "Releases go out on Tuesdays" in item  # side by side
    for decision in ("approve", "reject", "keep_new", "keep_existing", "keep_both", "edit_approve"):
        assert f'data-decision="{decision}"' in item
    csrf = _csrf(client, f"/review?project={PROJECT}")
    answer = client.post(
        "/review/decide",
        data={"project": PROJECT, "id": ids["conflict_new"], "decision": "keep_new", "csrf": csrf},
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 200 and "keep new" in answer.text and "approved" in answer.text
    assert _status(viewer.graph, ids["conflict_new"]) == "approved"
    assert _status(viewer.graph, ids["conflict_old"]) == "rejected"
    assert viewer.graph.read(
        "MATCH (:Learning {id: $new})-[s:SUPERSEDES]->(:Learning {id: $old}) RETURN count(s) AS n",
        {"new": ids["conflict_new"], "old": ids["conflict_old"]},
    ) == [{"n": 1}]
    # without htmx: back to the queue; a decision that does not apply says why
    plain = client.post(
        "/review/decide", data={"project": PROJECT, "id": ids["fact"], "decision": "keep_new", "csrf": csrf}
    )
    assert plain.status_code == 400 and "needs an open conflict" in plain.text
    ok = client.post(
        "/review/decide", data={"project": PROJECT, "id": ids["fact"], "decision": "approve", "csrf": csrf}
    )
    assert ok.status_code == 303 and ok.headers["location"] == f"/review?project={PROJECT}&done=approve"


def test_prompts_roll_back_reset_and_diff_as_mkg_prompt_does(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    scope = system_prompt.Scope.project(PROJECT)
    diff = client.get(f"/prompt?project={PROJECT}&scope=project&a=1&b=2").text
    assert (
        '<span class="del">-Be brief.</span>' in diff
        and '<span class="add">+Be brief and exact.</span>' in diff
    )
    page = client.get(f"/prompt?project={PROJECT}").text
    assert "This project&#39;s own prompt" in page and "Your default prompt" in page
    assert page.index("in effect") < page.index("Your default prompt")  # the project's own applies
    csrf = _csrf(client, f"/prompt?project={PROJECT}")
    back = client.post(
        "/prompt/change",
        data={"project": PROJECT, "scope": "project", "action": "rollback", "version": "1", "csrf": csrf},
    )
    assert back.status_code == 303
    assert system_prompt.current(viewer.graph, scope) == ("You are the staging helper.\nBe brief.", 3)
    assert system_prompt.history(viewer.graph, scope)[-1]["source"] == "rollback"
    reset = client.post(
        "/prompt/change", data={"project": PROJECT, "scope": "project", "action": "reset", "csrf": csrf}
    )
    assert reset.status_code == 303
    assert system_prompt.effective(viewer.graph, PROJECT, USER)[1] == "Ana's default persona."
    missing = client.post(
        "/prompt/change",
        data={"project": PROJECT, "scope": "user", "action": "rollback", "version": "9", "csrf": csrf},
    )
    assert missing.status_code == 400 and "has no version 9" in missing.text


# -- the functions the viewer added to the core -------------------------------------------------------------


def test_restore_brings_a_tombstone_back_as_approved_memory(graph: Graph, settings: Settings) -> None:
    apply_schema(graph, core_statements(64))
    lid = learn(graph, "Cache the helm charts in the artifact store", project=PROJECT)
    fact = learn(graph, "Bo reviews every chart change", project=PROJECT, scope="user", user=OTHER_USER)
    resolve(graph, lid, "reject", project_id=PROJECT, user_id=USER, reason="wrong")
    resolve(graph, fact, "reject", project_id=PROJECT, user_id=OTHER_USER)
    assert not search_learnings(
        graph, "cache helm charts", project_id=PROJECT, user_id=USER, session_id=None, limit=5, min_score=0.0
    )

    assert not restore(graph, lid, project_id="another-project", user_id=USER)  # not this project's
    assert not restore(graph, fact, project_id=PROJECT, user_id=USER)  # not this user's fact
    assert restore(graph, lid, project_id=PROJECT, user_id=USER, embedding=[0.1] * 64, reason="it was right")
    row = graph.read(
        "MATCH (l:Learning {id: $id}) RETURN l.status AS status, l.reviewed_by AS by, "
        "l.restored_from AS was, l.rejected_at AS rejected, size(l.embedding) AS dims, "
        "l.review_reason AS why, l.restored_at IS NOT NULL AS restored",
        {"id": lid},
    )[0]
    assert row == {
        "status": "approved",
        "by": "human",
        "was": "wrong",
        "rejected": None,
        "dims": 64,
        "why": "it was right",
        "restored": True,
    }
    assert not restore(graph, lid, project_id=PROJECT, user_id=USER)  # live memory is not restored
    hits = search_learnings(
        graph, "cache helm charts", project_id=PROJECT, user_id=USER, session_id=None, limit=5, min_score=0.0
    )
    assert [hit.id for hit in hits] == [lid]


def test_an_injection_records_its_rank_sources_and_score(graph: Graph, settings: Settings) -> None:
    apply_schema(graph, core_statements(64))
    first = learn(graph, "Deploy staging with the helm chart", project=PROJECT)
    second = learn(graph, "Staging deploys need the helm chart repository", project=PROJECT)
    recalled = search_learnings(
        graph,
        "deploy staging helm chart",
        project_id=PROJECT,
        user_id=USER,
        session_id=None,
        limit=5,
        min_score=0.0,
    )
    assert {hit.id for hit in recalled} == {first, second}
    prompt = event(
        graph, "UserPromptSubmit", "inject-now", project=PROJECT, prompt="deploy staging helm chart"
    )
    mark_injected(graph, recalled, session_id="inject-now", event_id=prompt, hook_event="UserPromptSubmit")
    # an answer written before its event: the event's arrival links it with the same reasons
    mark_injected(
        graph, recalled[:1], session_id="inject-late", event_id="late-event", hook_event="UserPromptSubmit"
    )
    late = event(
        graph, "UserPromptSubmit", "inject-late", project=PROJECT, prompt="deploy staging helm chart"
    )
    graph.write("MATCH (e:SessionEvent {event_id: $id}) SET e.event_id = 'late-event'", {"id": late})
    hook = HookEvent(
        harness="claude", event="UserPromptSubmit", session_id="inject-late", source_event="UserPromptSubmit"
    )
    InjectionEventLinks().handle(hook, CaptureContext(graph, settings, event_id="late-event"))
    rows = graph.read(
        "MATCH (l:Learning)-[a:INJECTED_AT]->(e:SessionEvent) RETURN l.id AS id, e.session_id AS session, "
        "a.rank AS rank, a.sources AS sources, a.score AS score ORDER BY session, rank"
    )
    assert rows == [
        {
            "id": recalled[0].id,
            "session": "inject-late",
            "rank": 1,
            "sources": ["fulltext"],
            "score": recalled[0].score,
        },
        {
            "id": recalled[0].id,
            "session": "inject-now",
            "rank": 1,
            "sources": ["fulltext"],
            "score": recalled[0].score,
        },
        {
            "id": recalled[1].id,
            "session": "inject-now",
            "rank": 2,
            "sources": ["fulltext"],
            "score": recalled[1].score,
        },
    ]


# -- live -----------------------------------------------------------------------------------------------


def test_the_live_stream_sends_new_events_and_ends_when_the_viewer_stops(
    client: TestClient, viewer: Viewer, ids: dict[str, str]
) -> None:
    viewer.live_interval = 0.2
    page = client.get("/session?id=ui-session-1").text
    stream = re.search(r'data-live="([^"]+)"', page).group(1).replace("&amp;", "&")  # type: ignore[union-attr]

    def later() -> None:
        try:
            time.sleep(0.8)
            prompt = "Arrived while watching"
            event(viewer.graph, "UserPromptSubmit", "ui-session-1", project=PROJECT, prompt=prompt)
            time.sleep(1.0)
        finally:  # the stream ends even when the event could not be written
            viewer.stopping.set()

    threading.Thread(target=later, daemon=True).start()
    received: list[str] = []
    began = time.monotonic()
    with client.stream("GET", stream) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        received = list(answer.iter_lines())
    assert time.monotonic() - began < 10  # the stream ended when the viewer stopped
    text = "\n".join(received)
    assert text.count("event: row") == 1  # the events the page already showed are not sent again
    assert "Arrived while watching" in text and 'data: <li class="event ev-userpromptsubmit"' in text
    assert re.search(r"^id: \S+\|test:ui-session-1:UserPromptSubmit:\d+$", text, re.MULTILINE)
    assert viewer.open_streams == 0


def test_a_stream_ends_when_its_browser_goes_away(viewer: Viewer, ids: dict[str, str]) -> None:
    """On a real server: closing the connection cancels the stream."""
    port = free_port()
    viewer.sessions = Sessions(port)
    viewer.live_interval = 0.2
    server = uvicorn.Server(
        uvicorn.Config(create_app(viewer), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        session = viewer.sessions.open()
        request = (
            f"GET /live/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Cookie: {viewer.sessions.cookie}={session}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request)
            assert b"200 OK" in sock.recv(4096)
            deadline = time.monotonic() + 10
            while viewer.open_streams != 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert viewer.open_streams == 1
        deadline = time.monotonic() + 10
        while viewer.open_streams and time.monotonic() < deadline:
            time.sleep(0.05)
        assert viewer.open_streams == 0
    finally:
        server.should_exit = True
        thread.join(20)


# -- the command --------------------------------------------------------------------------------------


def test_mkg_ui_prints_a_tokened_address_and_stops_cleanly_with_a_stream_open(
    neo4j_server: Neo4jServer, graph: Graph, tmp_path: Path
) -> None:
    seed_memory(graph, PROJECT)
    env = {**os.environ, **neo4j_server.settings_env(), "MKG_USER_ID": USER, "MKG_PROJECT_ID": PROJECT}
    proc, line = start_ui(env, tmp_path)
    try:
        match = re.search(r"(http://127\.0\.0\.1:(\d+)/\?token=[\w-]+)", line)
        assert match, line + ((tmp_path / "mkg-ui.stderr").read_text() if proc.poll() is not None else "")
        url, port = match.group(1), int(match.group(2))
        assert f"for {USER}" in line

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: object, **kwargs: object) -> None:
                return None

        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as raised:
            opener.open(url, timeout=30)
        assert raised.value.code == 303
        cookie = raised.value.headers["set-cookie"].split(";")[0]
        raised.value.close()
        page = urllib.request.Request(
            f"http://127.0.0.1:{port}/project?id={PROJECT}", headers={"Cookie": cookie}
        )
        with urllib.request.urlopen(page, timeout=30) as answer:
            assert "Viewer Test" in answer.read().decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30)
        assert refused.value.code == 401
        refused.value.close()
        live = urllib.request.Request(f"http://127.0.0.1:{port}/live/stream", headers={"Cookie": cookie})
        stream = urllib.request.urlopen(live, timeout=30)
        assert stream.readline().startswith(b"retry:")
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - began < 10
        stream.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_mkg_ui_says_so_when_the_port_is_taken(neo4j_server: Neo4jServer, graph: Graph) -> None:
    env = {**os.environ, **neo4j_server.settings_env(), "MKG_USER_ID": USER}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(BIN_DIR / "mkg"), "ui", "--no-browser", "--port", str(port)],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert result.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in result.stderr


# -- what ships --------------------------------------------------------------------------------------------


def test_the_shipped_javascript_is_the_pinned_and_checked_one() -> None:
    vendor = resources.files("mkg_core.ui") / "static" / "vendor"
    manifest = json.loads((vendor / "assets.json").read_text())
    assert set(manifest["packages"]) == {"htmx.org", "cytoscape"}
    for entry in manifest["packages"].values():
        assert entry["license"] in {"MIT", "0BSD"} and entry["integrity"].startswith("sha512-")
        for name, digest in entry["files"].items():
            assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest
    assert "Permission" in (vendor / "cytoscape.LICENSE.txt").read_text()
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert '"mkg_core.ui"' in pyproject and "static/vendor/*" in pyproject
    for template in (resources.files("mkg_core.ui") / "templates").iterdir():
        assert "|safe" not in template.read_text().replace(" ", ""), template.name  # nothing unescaped
