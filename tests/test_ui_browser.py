"""The memory viewer as a person uses it: Debian's headless Chromium, driven by Playwright, on the
real ``mkg ui`` over a real Neo4j seeded with the RoadFlex demo (``mkg seed sales-agent``) and two
Claude Code sessions replayed through the real hook and worker (so recall really injected memory).

Every page is opened and saved as a screenshot under ``$MKG_TEST_OUTPUT/ui`` (default
``build/test-output/ui``); a review decision, a prompt rollback and a live event are made and seen
as a person would. One browser serves the whole module; each test gets a fresh browser context
(its own cookies) that opens the address ``mkg ui`` printed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ui_seed import HANDLER, HOSTILE, SCRIPT, USER, learn, set_status, start_ui

from mkg_core import runtime, system_prompt
from mkg_core.graph import Graph
from mkg_core.settings import load_settings
from mkg_core.testing import ANSWER_DEADLINES, BIN_DIR, REPO_ROOT, CaptureRig, Neo4jServer, reset_database

sync_api = pytest.importorskip("playwright.sync_api", reason="the dev extra installs playwright")
pytest.importorskip("mkg_sales_agent", reason="the RoadFlex demo package (import/sales_agent)")

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore::ResourceWarning")]

CHROMIUM = os.environ.get("MKG_CHROMIUM", "/usr/bin/chromium")
#: Without the background-networking flags Chromium's own connections are refused on a closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUT = Path(os.environ.get("MKG_TEST_OUTPUT") or REPO_ROOT / "build" / "test-output") / "ui"
PROJECT = "roadflex-sales"
SESSIONS = REPO_ROOT / "harnesses" / "mkg-claude" / "tests" / "session"
DEPLOY_DAY = "The team deploys to production on Fridays after the freeze."
LEAKY = (
    "MKG_",
    "NEO4J_",
    "LLM_",
    "EMBEDDING_",
    "XDG_",
    "CLAUDE",
    "CODEX_",
    "OPENAI_",
    "ANTHROPIC_",
    "GEMINI_",
)


@dataclass
class World:
    graph: Graph
    rig: CaptureRig
    url: str
    base: str
    ids: dict[str, str]
    sessions: list[str]
    proc: subprocess.Popen[str]
    errors: list[str] = field(default_factory=list)


def _mkg(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [str(BIN_DIR / "mkg"), *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def world(neo4j_server: Neo4jServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("ui-home")
    state = Path(tempfile.mkdtemp(prefix="mkg-ui-state-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    env.update(
        {
            "HOME": str(home),
            "MKG_CONFIG_DIR": str(home / ".config" / "meta-knowledge-graph"),
            "MKG_STATE_DIR": str(state),
            "EMBEDDING_MODEL": "none",
            "MKG_WORKER_AUTOSTART": "0",
            "MKG_WORKER_IDLE_SECONDS": "300",
            "MKG_EXTRACTION": "0",
            "MKG_PROJECT_ID": PROJECT,
            "MKG_PROJECT_NAME": "RoadFlex Sales",
            "MKG_USER_ID": USER,
            **ANSWER_DEADLINES,
            **neo4j_server.settings_env(),
        }
    )
    graph = Graph.connect(load_settings(environ=env, project_root=home))
    reset_database(graph)
    rig = CaptureRig(env=env, paths=runtime.Paths(str(state)))
    proc: subprocess.Popen[str] | None = None
    try:
        _mkg(env, "schema", "apply")
        assert "48 accounts" in _mkg(env, "seed", "sales-agent")
        ids = _memory(graph)
        rig.start_worker()
        sessions = rig.replay("claude", SESSIONS, home)
        rig.wait_drained()
        proc, line = start_ui(env, home)
        found = re.search(r"(http://127\.0\.0\.1:\d+)(/\?token=[\w-]+)", line)
        assert found, line + (home / "mkg-ui.stderr").read_text()[-3000:]
        yield World(graph, rig, found.group(1) + found.group(2), found.group(1), ids, sessions, proc)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        rig.close()
        graph.close()


def _memory(graph: Graph) -> dict[str, str]:
    """What the demo does not hold: a conflict to review, a fact about the user, hostile text, an
    episode timeline, a second persona version, and the learning the second session recalls."""
    ids = {
        "deploy": learn(graph, DEPLOY_DAY, project=PROJECT),
        "old": learn(graph, "Renewal reviews happen every Monday with the CSMs", project=PROJECT),
        "new": learn(graph, "Renewal reviews happen every Thursday with the CSMs", project=PROJECT),
        "fact": learn(graph, "Ana prefers renewal figures in euros", project=PROJECT, scope="user"),
        "hostile": learn(graph, HOSTILE, project=PROJECT),
    }
    set_status(graph, ids["deploy"], "approved")
    set_status(graph, ids["old"], "approved")
    graph.write(
        "MATCH (n:Learning {id: $new}), (o:Learning {id: $old}) SET n.consistency_status = 'ambiguous', "
        "n.consistency_reason = 'the review day differs' "
        "MERGE (n)-[:CONTRADICTS {reason: 'the review day differs', created_at: datetime()}]->(o) "
        "WITH n MATCH (p:Project {id: $project}) "
        "UNWIND range(1, 3) AS i "
        "CREATE (o:Observation {id: 'obs-' + i, project_id: $project, type: 'discovery', "
        "  title: ['Found the renewals at risk this quarter', 'Briefed Accenture with usage numbers', "
        "          $hostile][i - 1], "
        "  narrative: 'Asked the graph with read-only Cypher.', "
        "  created_at: datetime() - duration({minutes: 30 - i})}) "
        "MERGE (p)-[:HAS_OBSERVATION]->(o)",
        {"new": ids["new"], "old": ids["old"], "project": PROJECT, "hostile": HOSTILE},
    )
    persona = system_prompt.current(graph, system_prompt.Scope.project(PROJECT))[0] or ""
    system_prompt.seed(
        graph,
        persona + "\n\nAlways quote renewal figures in euros.",
        scope=system_prompt.Scope.project(PROJECT),
        summary="euros",
        source="manual",
    )
    return ids


@pytest.fixture(scope="module")
def browser(world: World) -> Iterator[Any]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: `make browser` installs Debian's Chromium"
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, world: World) -> Iterator[Any]:
    """A fresh browser context that opened the printed address; its console errors (CSP refusals
    among them) and any dialog fail the test."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    tab.on("pageerror", lambda error: problems.append(str(error)))
    tab.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    tab.goto(world.url)
    assert tab.url == world.base + "/"  # the token left the address bar
    yield tab
    context.close()
    assert problems == []


def _shot(page: Any, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)


def _no_script_ran(page: Any) -> None:
    assert page.evaluate("() => window.__mkg_pwned === undefined")
    hrefs = page.eval_on_selector_all("a", "links => links.map(a => a.getAttribute('href') || '')")
    assert hrefs and all(href.startswith("/") for href in hrefs)


# -- every page ---------------------------------------------------------------------------------------------


def test_every_page_shows_the_seeded_memory(page: Any, world: World) -> None:
    expect = sync_api.expect
    row = page.locator("tr", has_text=PROJECT)
    expect(row).to_contain_text("the project's own prompt, version 2")
    _shot(page, "projects")

    row.get_by_role("link").first.click()
    expect(page.locator("h1")).to_have_text("RoadFlex Sales")
    expect(page.locator("#learnings")).to_contain_text("Renewal risk means a renewal within 90 days")
    expect(page.locator("aside")).to_contain_text("Found the renewals at risk this quarter")
    expect(page.locator(".sessions li")).to_have_count(2)
    _shot(page, "project")

    # search through htmx, as recall searches: the list changes, the page does not reload
    page.evaluate("() => { window.__same_page = true }")
    page.get_by_label("Search learnings").fill("renewal risk health score")
    expect(page.locator("#learnings td.why").first).to_contain_text("fulltext")
    expect(page.locator("#learnings")).not_to_contain_text(DEPLOY_DAY)
    assert page.evaluate("() => window.__same_page === true")
    assert "q=renewal+risk+health+score" in page.url  # the address follows, for reload and history
    _shot(page, "project-search")

    page.goto(f"{world.base}/session?id={world.sessions[1]}")
    timeline = page.locator("#timeline")
    expect(timeline).to_contain_text("When does the team deploy to production?")
    injected = page.locator("li.ev-userpromptsubmit .injected")
    expect(injected).to_contain_text(DEPLOY_DAY)
    expect(injected).to_contain_text("found by fulltext")
    expect(injected.locator(".why")).to_contain_text(re.compile(r"rank 1 · score 0\.\d{4}"))
    expect(timeline).to_contain_text("DEPLOY.md")
    _shot(page, "session")

    injected.get_by_role("link", name=DEPLOY_DAY).click()
    expect(page.locator("#learning-text")).to_have_text(DEPLOY_DAY)
    expect(page.locator(".injections")).to_contain_text("UserPromptSubmit")
    _shot(page, "learning")

    page.goto(f"{world.base}/prompt?project={PROJECT}")
    expect(page.locator("#scope-project")).to_contain_text("in effect")
    expect(page.locator("#scope-project .versions tbody tr")).to_have_count(2)
    _shot(page, "prompt")

    page.goto(f"{world.base}/graph?kind=session&id={world.sessions[1]}")
    expect(page.locator("#graph")).to_have_attribute("data-drawn", re.compile(r"^([3-9]|\d\d+)$"))
    expect(page.locator(".nodes")).to_contain_text("Project: RoadFlex Sales")
    _shot(page, "graph")

    page.goto(f"{world.base}/live?project={PROJECT}")
    expect(page.locator("[data-live-state]")).to_contain_text("live")
    _shot(page, "live")


def test_hostile_memory_is_shown_as_text_and_runs_nothing(page: Any, world: World) -> None:
    expect = sync_api.expect
    for address in (
        f"/project?id={PROJECT}",
        f"/project?id={PROJECT}&q=deploy+notes",
        f"/learning?id={world.ids['hostile']}",
        f"/graph?kind=learning&id={world.ids['hostile']}",
        "/live",
    ):
        page.goto(world.base + address)
        _no_script_ran(page)
    page.goto(f"{world.base}/learning?id={world.ids['hostile']}")
    expect(page.locator("#learning-text")).to_have_text(HOSTILE)
    page.goto(f"{world.base}/project?id={PROJECT}")
    expect(page.locator("aside").get_by_text(SCRIPT, exact=False)).to_have_count(1)
    expect(page.locator("#learnings").get_by_text(HANDLER, exact=False)).to_have_count(1)
    assert page.locator("img").count() == 0
    _no_script_ran(page)


# -- decisions ---------------------------------------------------------------------------------------------


def test_a_review_decision_changes_the_graph(page: Any, world: World) -> None:
    expect = sync_api.expect
    page.goto(f"{world.base}/review?project={PROJECT}")
    item = page.locator(f"article[data-learning='{world.ids['new']}']")
    expect(item.locator(".pane.new")).to_contain_text("every Thursday")
    expect(item.locator(".pane.old")).to_contain_text("every Monday")  # the conflict, side by side
    expect(page.locator(f"article[data-learning='{world.ids['fact']}']")).to_contain_text("user fact")
    _shot(page, "review")

    item.get_by_role("button", name="Keep new").click()
    decided = page.locator(f"article.decided[data-learning='{world.ids['new']}']")
    expect(decided).to_contain_text("keep new")
    rows = world.graph.read(
        "MATCH (n:Learning {id: $new}), (o:Learning {id: $old}) "
        "RETURN n.status AS new, n.reviewed_by AS by, o.status AS old, "
        "EXISTS { (n)-[:SUPERSEDES]->(o) } AS edge",
        {"new": world.ids["new"], "old": world.ids["old"]},
    )
    assert rows == [{"new": "approved", "by": "human", "old": "rejected", "edge": True}]
    _shot(page, "review-decided")

    page.goto(f"{world.base}/graph?kind=learning&id={world.ids['new']}")
    expect(page.locator("#graph")).to_have_attribute("data-drawn", re.compile(r"\d+"))
    edges = page.evaluate(
        "url => fetch(url).then(r => r.json()).then(d => d.elements.filter(e => e.data.source)"
        ".map(e => e.data.label))",
        f"/graph/data?kind=learning&id={world.ids['new']}",
    )
    assert "SUPERSEDES" in edges and "CONTRADICTS" in edges
    page.goto(f"{world.base}/learning?id={world.ids['old']}")
    expect(page.locator("#learning-status")).to_contain_text("rejected")
    expect(page.get_by_role("button", name="Restore")).to_be_visible()


def test_a_prompt_rolls_back_from_the_page(page: Any, world: World) -> None:
    expect = sync_api.expect
    scope = system_prompt.Scope.project(PROJECT)
    first = system_prompt.version_content(world.graph, scope, 1)
    page.goto(f"{world.base}/prompt?project={PROJECT}")
    section = page.locator("#scope-project")
    section.get_by_role("button", name="Compare A and B").click()
    expect(page.locator("#diff .add").last).to_have_text("+Always quote renewal figures in euros.")
    _shot(page, "prompt-diff")

    page.locator("#scope-project").get_by_role("button", name="Roll back to v1").click()
    expect(page.locator(".notice")).to_contain_text("Rolled back")
    expect(page.locator("#scope-project")).to_contain_text("version 3")
    assert system_prompt.current(world.graph, scope) == (first, 3)
    assert system_prompt.history(world.graph, scope)[-1]["source"] == "rollback"
    _shot(page, "prompt-rolled-back")


# -- live ---------------------------------------------------------------------------------------------------


def test_a_new_event_appears_without_a_reload(page: Any, world: World) -> None:
    expect = sync_api.expect
    session = world.sessions[1]
    page.goto(f"{world.base}/session?id={session}")
    expect(page.locator("[data-live-state]")).to_contain_text("live:")
    before = page.locator("#timeline > li").count()
    page.evaluate("() => { window.__same_page = true }")
    payload = {
        "session_id": session,
        "hook_event_name": "UserPromptSubmit",
        "cwd": "/home/dev/project",
        "prompt": "Which renewals are at risk this quarter, live from the viewer test?",
    }
    result = world.rig.hook("claude", "UserPromptSubmit", payload)
    assert result.returncode == 0, result.stderr
    arrived = page.locator("#timeline > li").last
    expect(arrived).to_contain_text("live from the viewer test", timeout=30_000)
    assert page.locator("#timeline > li").count() == before + 1
    assert page.evaluate("() => window.__same_page === true")  # no reload
    expect(page.locator("[data-live-state]")).to_contain_text("1 new event")
    _shot(page, "session-live")
