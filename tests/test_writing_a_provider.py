"""docs/writing-a-provider.md stays true: its listings are the example's files, and the example,
built and installed into a fresh virtual environment next to mkg-core, is found, mounted, captures
and applies its schema against the real Neo4j."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mkg_core.graph import Graph
from mkg_core.testing import CaptureRig, Neo4jServer, fresh_venv, mcp_call, mcp_server, mcp_session

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "writing-a-provider.md"
EXAMPLE = ROOT / "docs" / "examples" / "mkg-glossary"
CLAUDE = ROOT / "harnesses" / "mkg-claude" / "tests" / "payloads"
LISTING = re.compile(r"<!-- file: (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)```", re.S)
PROJECT = "glossary-test"


def test_the_listings_are_the_example_files() -> None:
    listings = {m["path"]: m["body"] for m in LISTING.finditer(DOC.read_text())}
    files = {
        str(p.relative_to(ROOT)) for p in EXAMPLE.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }
    assert set(listings) == files
    for path, body in listings.items():
        assert body == (ROOT / path).read_text(), f"{path} differs from its listing in {DOC.name}"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=900, check=False)
    assert result.returncode == 0, f"{' '.join(args)}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.install
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_example_builds_installs_and_works(
    tmp_path: Path, capture: CaptureRig, graph: Graph, neo4j_server: Neo4jServer
) -> None:
    venv = tmp_path / "venv"
    source = tmp_path / "mkg-glossary"  # built from a copy: the build leaves files where it runs
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    fresh_venv(venv, "-e", str(ROOT), str(source))  # the example built into a wheel, as a user would
    env = {**capture.env, "MKG_PROJECT_ID": PROJECT}

    rows = {
        row["name"]: row for row in json.loads(_run(str(venv / "bin" / "mkg"), "plugins", env=env).stdout)
    }
    assert set(rows) == {"glossary", "mkg_core.builtin.core"}
    assert rows["glossary"]["distribution"] == "mkg-glossary"
    assert rows["glossary"]["tool_groups"] == [
        {"name": "glossary", "mounted": True, "tools": ["glossary_define", "glossary_lookup"]}
    ]

    async def work(client: Any) -> tuple[Any, Any, Any, Any]:
        names = {tool.name for tool in (await client.list_tools()).tools}
        defined = await mcp_call(
            client, "glossary_define", term="ARR at risk", definition="Renewal ARR of red accounts"
        )
        found = await mcp_call(client, "glossary_lookup", term="arr  AT risk")
        empty = await mcp_call(client, "glossary_lookup", term=" ")
        return names, defined, found, empty

    names, defined, found, empty = mcp_session(mcp_server(env, bin_dir=venv / "bin"), work)
    assert {"glossary_define", "glossary_lookup", "neo4j_read_cypher"} <= names
    assert defined == (False, {"term": "ARR at risk", "definition": "Renewal ARR of red accounts"})
    assert found == (
        False,
        {"term": "ARR at risk", "found": True, "definition": "Renewal ARR of red accounts"},
    )
    assert empty[0] and "term is empty" in empty[1]
    constraints = graph.read("SHOW CONSTRAINTS YIELD name RETURN collect(name) AS names")[0]["names"]
    assert "glossary_term_key" in constraints

    payload = json.loads((CLAUDE / "PostToolUse.json").read_text())
    payload |= {
        "session_id": "g1",
        "tool_name": "mcp__plugin_meta-knowledge-graph_mkg__glossary_lookup",
        "tool_input": {"term": "ARR at risk"},
        "tool_response": [{"type": "text", "text": json.dumps(found[1])}],
    }
    capture.bin_dir = venv / "bin"
    capture.env["MKG_PROJECT_ID"] = PROJECT
    assert capture.hook("claude", "PostToolUse", payload).returncode == 0
    capture.drain()
    links = graph.read(
        "MATCH (t:GlossaryTerm)-[r:LOOKED_UP_IN]->(s:Session) "
        "RETURN t.key AS key, s.session_id AS session, r.found AS found"
    )
    assert links == [{"key": "arr at risk", "session": "g1", "found": True}]
