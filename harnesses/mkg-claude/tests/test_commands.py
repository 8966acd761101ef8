"""The slash commands say what MKG really does: the review decisions and their parameters, and
queries that run."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import mkg_claude
import pytest

from mkg_core.graph import Graph
from mkg_core.graph_tools import read_cypher
from mkg_core.memory_tools import project_resolve_learning
from mkg_core.review import DECISIONS

COMMANDS = Path(mkg_claude.__file__).parent / "payload" / "commands"
QUERIES = [
    pytest.param(path, query, id=f"{path.stem}-{number}")
    for path in sorted(COMMANDS.glob("*.md"))
    for number, query in enumerate(re.findall(r"```cypher\n(.*?)```", path.read_text(), re.S), start=1)
]


def test_the_review_command_names_every_decision_and_parameter() -> None:
    text = (COMMANDS / "mkg-review.md").read_text()
    parameters = set(inspect.signature(project_resolve_learning).parameters) - {"context", "project_id"}
    missing = [name for name in (*DECISIONS, *parameters) if f"`{name}`" not in text]
    assert not missing, missing


def test_no_command_names_the_one_prompt_of_older_versions() -> None:
    for path in COMMANDS.glob("*.md"):
        assert "{name: 'default'}" not in path.read_text(), path.name


@pytest.mark.parametrize(("path", "query"), QUERIES)
def test_a_query_a_command_prescribes_runs_read_only(graph: Graph, path: Path, query: str) -> None:
    answer = read_cypher(graph, query, {"user": "dev@example.com", "project": "demo"})
    assert answer["row_count"] == 1, answer
