"""The memory viewer at size: how long its pages take to answer when one project holds 100k learnings.

The learnings are ``benchmarks/scale.py``'s synthetic corpus (the same loader and hashed
embeddings), all in one project, the worst case for the project page: 80% project-scoped, 20% the
owner's facts; 5% of them candidates, 3% tombstones. The project also gets sessions with events,
observations and prompt versions, so every section of the page has something to read. Then the real
viewer (``mkg_core.ui``) is served by uvicorn on 127.0.0.1 and each page is asked for over HTTP,
with the session cookie, as a browser would: a few warm-up requests, then ``--runs`` timed ones.
Reported: p50 and p95 per page, end to end (query, template, HTTP).

    .venv/bin/python benchmarks/ui_scale.py --learnings 100000 --json benchmarks/results/ui_scale.json

Uses ``NEO4J_URI`` when set (the database is emptied), else starts a dev Neo4j with a throw-away
store, with ``NEO4J_DEV_HEAP`` (default here 4g) and ``NEO4J_DEV_PAGECACHE`` (default here 3g).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import uvicorn  # noqa: E402
from report import machine, save  # noqa: E402
from scale import Corpus, load  # noqa: E402

from mkg_core import system_prompt  # noqa: E402
from mkg_core.graph import Graph  # noqa: E402
from mkg_core.localdb import free_port  # noqa: E402
from mkg_core.schema import apply_schema, core_statements  # noqa: E402
from mkg_core.settings import load_settings  # noqa: E402
from mkg_core.testing import reset_database, scratch_neo4j  # noqa: E402
from mkg_core.ui.app import create_app  # noqa: E402
from mkg_core.ui.security import Sessions  # noqa: E402
from mkg_core.ui.viewer import Viewer  # noqa: E402

PROJECT = "scale-project-000"
OWNER = "scale-user-00"

#: Statuses and the Project, HAS_LEARNING and User edges the synthetic loader leaves out.
SHAPE = """
MATCH (l:Learning) WHERE l.project_id = $project
CALL (l) {
  WITH l, toInteger(split(l.id, '-')[1]) AS i
  SET l.status = CASE WHEN i % 100 < 5 THEN 'candidate' WHEN i % 100 < 8 THEN 'rejected'
                      ELSE 'approved' END,
      l.kind = CASE WHEN i % 3 = 0 THEN 'decision' ELSE 'fact' END,
      l.embedding = CASE WHEN i % 100 >= 5 AND i % 100 < 8 THEN null ELSE l.embedding END
  WITH l
  MATCH (p:Project {id: $project})
  MERGE (p)-[:HAS_LEARNING]->(l)
} IN TRANSACTIONS OF 10000 ROWS
"""

SESSIONS = """
MATCH (p:Project {id: $project})
UNWIND range(1, $sessions) AS n
CREATE (s:Session {session_id: 'bench-session-' + n, client: 'claude', agent_kind: 'main',
                   user_id: $owner, created_at: datetime() - duration({hours: n}),
                   last_event_at: datetime() - duration({hours: n})})
MERGE (p)-[:HAS_SESSION]->(s)
WITH s, n
UNWIND range(1, $events) AS k
CREATE (s)-[:HAS_EVENT]->(:SessionEvent {
  event_id: s.session_id + ':' + k, session_id: s.session_id, timeline_session_id: s.session_id,
  project_id: $project, user_id: $owner, client: 'claude',
  event_name: CASE k % 4 WHEN 1 THEN 'UserPromptSubmit' WHEN 2 THEN 'PreToolUse'
                        WHEN 3 THEN 'PostToolUse' ELSE 'Stop' END,
  prompt: CASE k % 4 WHEN 1 THEN 'prompt ' + k ELSE null END, tool_name: 'Bash',
  tool_input: '{"command": "ls"}',
  timestamp: datetime() - duration({hours: n}) + duration({seconds: k})})
"""

OBSERVATIONS = """
MATCH (p:Project {id: $project})
UNWIND range(1, $count) AS n
CREATE (o:Observation {id: 'bench-obs-' + n, project_id: $project, type: 'change',
                       title: 'Observation ' + n, narrative: 'What happened in stretch ' + n,
                       created_at: datetime() - duration({minutes: n})})
MERGE (p)-[:HAS_OBSERVATION]->(o)
"""


def populate(graph: Graph, corpus: Corpus, learnings: int, dims: int) -> dict[str, Any]:
    graph.write(
        "MERGE (p:Project {id: $id}) SET p.name = 'Scale', p.last_activity_at = datetime()", {"id": PROJECT}
    )
    rate = load(graph, corpus, 0, learnings)
    began = time.perf_counter()
    report = apply_schema(graph, core_statements(dims), wait_seconds=7200)
    if not report.online:
        raise SystemExit("the indexes did not come online")
    build = time.perf_counter() - began
    graph.run_autocommit(SHAPE, {"project": PROJECT})
    graph.write(SESSIONS, {"project": PROJECT, "owner": OWNER, "sessions": 200, "events": 40})
    graph.write(OBSERVATIONS, {"project": PROJECT, "count": 2000})
    for n in range(1, 6):
        system_prompt.seed(
            graph,
            f"Persona version {n}.\nBe exact.",
            scope=system_prompt.Scope.project(PROJECT),
            summary=f"v{n}",
        )
    return {"load_per_s": round(rate), "index_build_s": round(build, 1)}


class Browser:
    """Asks the viewer for pages over HTTP with the session cookie the start token gives."""

    def __init__(self, base: str, sessions: Sessions) -> None:
        self.base = base
        self.cookie = f"{sessions.cookie}={sessions.open()}"

    def get(self, path: str) -> float:
        request = urllib.request.Request(self.base + path, headers={"Cookie": self.cookie})
        began = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as answer:
            answer.read()
            if answer.status != 200:
                raise SystemExit(f"{path}: {answer.status}")
        return time.perf_counter() - began


def timed(browser: Browser, path: str, runs: int) -> dict[str, float]:
    for _ in range(3):
        browser.get(path)
    seconds = sorted(browser.get(path) for _ in range(runs))
    return {
        "p50_ms": round(statistics.median(seconds) * 1000, 1),
        "p95_ms": round(seconds[min(len(seconds) - 1, round(0.95 * (len(seconds) - 1)))] * 1000, 1),
    }


def second_page(graph: Graph) -> str:
    """The project page's second page of learnings (its cursor, as the "older" link carries it)."""
    rows = graph.read(
        "MATCH (l:Learning) WHERE l.project_id = $project AND (l.scope = 'project' OR l.user_id = $owner) "
        "WITH l ORDER BY l.created_at DESC, l.id DESC SKIP 24 LIMIT 1 "
        "RETURN toString(l.created_at) AS at, l.id AS id",
        {"project": PROJECT, "owner": OWNER},
    )
    return f"{rows[0]['at']}|{rows[0]['id']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learnings", type=int, default=100_000, help="learnings in the one project")
    parser.add_argument("--dims", type=int, default=128, help="embedding dimensions")
    parser.add_argument("--runs", type=int, default=30, help="timed requests per page")
    parser.add_argument("--json", dest="out", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    os.environ.setdefault("NEO4J_DEV_HEAP", "4g")
    os.environ.setdefault("NEO4J_DEV_PAGECACHE", "3g")
    corpus = Corpus(1, args.dims)
    print(f"{machine()}, {args.learnings:,} learnings in one project", file=sys.stderr)
    results: dict[str, Any] = {"learnings": args.learnings, "runs": args.runs, "machine": machine()}
    with scratch_neo4j(os.environ) as environ:
        settings = load_settings(
            environ={**environ, "EMBEDDING_MODEL": "none"}, project_root=tempfile.gettempdir()
        )
        with Graph.connect(settings) as graph:
            reset_database(graph)
            results["setup"] = populate(graph, corpus, args.learnings, args.dims)
            port = free_port()
            viewer = Viewer(
                settings=settings, graph=graph, user_id=OWNER, sessions=Sessions(port), home_project=PROJECT
            )
            config = uvicorn.Config(
                create_app(viewer), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
            )
            server = uvicorn.Server(config)
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            while not server.started:
                time.sleep(0.05)
            browser = Browser(f"http://127.0.0.1:{port}", viewer.sessions)
            project = urllib.parse.quote(PROJECT)
            question = urllib.parse.quote_plus(" ".join(corpus.text(10).split()[:4]))
            pages = {
                "projects": "/",
                "project": f"/project?id={project}",
                "project, page 2": f"/project?id={project}&before={urllib.parse.quote(second_page(graph))}",
                "project, candidates only": f"/project?id={project}&status=candidate",
                "project, user facts only": f"/project?id={project}&scope=user",
                "learnings search (htmx)": f"/project/learnings?id={project}&q={question}",
                "session (40 events)": "/session?id=bench-session-1",
                "learning": "/learning?id=scale-10",
                "review queue": f"/review?project={project}",
                "system prompt (5 versions)": f"/prompt?project={project}",
                "graph data (session)": "/graph/data?kind=session&id=bench-session-1",
                "live": f"/live?project={project}",
            }
            results["pages"] = {}
            for name, path in pages.items():
                row = timed(browser, path, args.runs)
                results["pages"][name] = row
                print(f"  {name:28} p50 {row['p50_ms']:7.1f} ms  p95 {row['p95_ms']:7.1f} ms")
            server.should_exit = True
            viewer.stopping.set()
            thread.join(30)
    save(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
