"""Settings: defaults, the .env resolution order, and one precedence order everywhere."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mkg_core import envfiles
from mkg_core.errors import ConfigError
from mkg_core.settings import Settings, env_name, load_settings
from mkg_core.testing import BIN_DIR

#: Every variable the product documents, with its default.
DOCUMENTED_DEFAULTS = {
    "NEO4J_URI": "bolt://localhost:7687",
    "NEO4J_USERNAME": "neo4j",
    "NEO4J_DATABASE": "neo4j",
    "NEO4J_TRANSPORT": "stdio",
    "MKG_LLM_BACKEND": "auto",
    "EMBEDDING_MODEL": "text-embedding-3-small",
    "EMBEDDING_DIMENSIONS": 1536,
    "MKG_CONSISTENCY_GATE": True,
    "MKG_CONSISTENCY_TOPK": 15,
    "MKG_CONSISTENCY_SWEEP_LIMIT": 8,
    "MKG_PROMPT_CONSOLIDATION_THRESHOLD": 5,
    "MKG_PROMPT_CONSOLIDATION_INTERVAL_HOURS": 24.0,
    "MKG_QUERY_ERROR_CONSOLIDATION_THRESHOLD": 1,
    "MKG_QUERY_ERROR_CONSOLIDATION_INTERVAL_HOURS": 6.0,
    "MKG_LLM_NUM_RETRIES": 3,
    "LLM_MODEL": None,
    "MKG_DEFAULT_LLM_MODEL": None,
    "OPENAI_API_KEY": None,
    "ANTHROPIC_API_KEY": None,
    "ANTHROPIC_AUTH_TOKEN": None,
    "ANTHROPIC_BASE_URL": None,
    "CLAUDE_CODE_OAUTH_TOKEN": None,
    "GEMINI_API_KEY": None,
    "OPENROUTER_API_KEY": None,
    "MKG_PROJECT_ID": None,
    "MKG_USER_ID": None,
}


def _by_variable(settings: Settings) -> dict[str, object]:
    values = {}
    for name, info in Settings.model_fields.items():
        value = getattr(settings, name)
        values[env_name(info, name)] = (
            value.get_secret_value() if hasattr(value, "get_secret_value") else value
        )
    return values


def test_documented_variables_and_defaults(tmp_path: Path) -> None:
    values = _by_variable(load_settings(environ={}, project_root=tmp_path))
    for variable, default in DOCUMENTED_DEFAULTS.items():
        assert variable in values, f"{variable} is not a setting"
        assert values[variable] == default, variable
    assert values["NEO4J_PASSWORD"] == "password"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _config(tmp_path: Path) -> dict[str, str]:
    return {"MKG_CONFIG_DIR": str(tmp_path / "config")}


def _trusted(path: Path, text: str, tmp_path: Path) -> Path:
    """A project's .mkg.env the user (whose config folder is :func:`_config`) has trusted."""
    _write(path, text)
    envfiles.trust_env_file(_config(tmp_path), path)
    return path


def test_resolution_order(tmp_path: Path) -> None:
    project = tmp_path / "project"
    config = tmp_path / "config"
    explicit = _write(tmp_path / "explicit.env", "NEO4J_DATABASE=explicit\n")
    _write(project / ".mkg.env", "NEO4J_DATABASE=project\n")
    _write(config / ".env", "NEO4J_DATABASE=user\n")
    env = {"MKG_CONFIG_DIR": str(config)}
    envfiles.trust_env_file(env, project / ".mkg.env")

    assert (
        load_settings(environ={**env, "MKG_ENV_FILE": str(explicit)}, project_root=project).neo4j_database
        == "explicit"
    )
    assert load_settings(environ=env, project_root=project).neo4j_database == "project"
    assert load_settings(environ=env, project_root=tmp_path / "elsewhere").neo4j_database == "user"
    loaded = load_settings(environ=env, project_root=project)
    assert loaded.env_file == project / ".mkg.env"


def test_only_the_first_file_is_read(tmp_path: Path) -> None:
    project = _write(tmp_path / "p" / ".mkg.env", "NEO4J_DATABASE=project\n")
    _write(tmp_path / "c" / ".env", "NEO4J_USERNAME=from-user-file\n")
    env = {"MKG_CONFIG_DIR": str(tmp_path / "c")}
    envfiles.trust_env_file(env, project)
    settings = load_settings(environ=env, project_root=tmp_path / "p")
    assert settings.neo4j_database == "project"
    assert settings.neo4j_username == "neo4j"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param({"XDG_CONFIG_HOME": "{tmp}/xdg"}, "{tmp}/xdg/meta-knowledge-graph", id="xdg"),
        pytest.param(
            {"MKG_CONFIG_DIR": "{tmp}/mine", "XDG_CONFIG_HOME": "{tmp}/xdg"}, "{tmp}/mine", id="explicit"
        ),
        pytest.param({"HOME": "{tmp}/home"}, "{tmp}/home/.config/meta-knowledge-graph", id="home"),
    ],
)
def test_config_dir(tmp_path: Path, environ: dict[str, str], expected: str) -> None:
    env = {k: v.format(tmp=tmp_path) for k, v in environ.items()}
    assert envfiles.config_dir(env) == Path(expected.format(tmp=tmp_path))
    _write(Path(expected.format(tmp=tmp_path)) / ".env", "NEO4J_DATABASE=found\n")
    assert load_settings(environ=env, project_root=tmp_path / "none").neo4j_database == "found"


def test_precedence_argument_then_environment_then_file_then_default(tmp_path: Path) -> None:
    _trusted(
        tmp_path / ".mkg.env",
        "NEO4J_URI=bolt://file:1\nNEO4J_USERNAME=file-user\nNEO4J_DATABASE=filedb\n",
        tmp_path,
    )
    environ = {"NEO4J_URI": "bolt://env:2", "NEO4J_USERNAME": "env-user", **_config(tmp_path)}
    settings = load_settings(environ=environ, project_root=tmp_path, neo4j_uri="bolt://arg:3")
    assert settings.neo4j_uri == "bolt://arg:3"
    assert settings.neo4j_username == "env-user"
    assert settings.neo4j_database == "filedb"
    assert settings.neo4j_transport == "stdio"
    assert [
        settings.source_of(n) for n in ("neo4j_uri", "neo4j_username", "neo4j_database", "neo4j_transport")
    ] == ["argument", "environment", str(tmp_path / ".mkg.env"), "default"]


def test_a_plugins_own_variables_resolve_like_mkgs(tmp_path: Path) -> None:
    _trusted(tmp_path / ".mkg.env", "ACME_API_KEY=from-file\nACME_REGION=eu\nACME_BLANK=\n", tmp_path)
    settings = load_settings(
        environ={"ACME_API_KEY": "from-env", "acme_mode": "fast", **_config(tmp_path)}, project_root=tmp_path
    )
    assert settings.get("ACME_API_KEY") == "from-env"  # the environment wins over the file
    assert settings.get("ACME_REGION") == "eu"
    assert settings.get("acme_mode") == "fast"
    assert settings.get("ACME_BLANK") is None and settings.get("ACME_BLANK", "x") == "x"
    assert settings.get("ACME_MISSING", "default") == "default"


def test_process_environment_takes_effect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKG_CONSISTENCY_TOPK", "4")
    monkeypatch.setenv("MKG_CONSISTENCY_GATE", "off")
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.consistency_topk == 4
    assert settings.consistency_gate is False
    assert Settings().consistency_topk == 4  # a plain Settings() resolves the same way


def test_blank_values_count_as_unset(tmp_path: Path) -> None:
    _trusted(tmp_path / ".mkg.env", "OPENAI_API_KEY=\nNEO4J_URI=bolt://file:1\n", tmp_path)
    settings = load_settings(environ={"NEO4J_URI": "  ", **_config(tmp_path)}, project_root=tmp_path)
    assert settings.openai_api_key is None
    assert settings.neo4j_uri == "bolt://file:1"


def test_invalid_value_names_the_variable_and_where_it_came_from(tmp_path: Path) -> None:
    _trusted(tmp_path / ".mkg.env", "EMBEDDING_DIMENSIONS=lots\n", tmp_path)
    with pytest.raises(ConfigError, match=rf"EMBEDDING_DIMENSIONS \(from {tmp_path / '.mkg.env'}\)"):
        load_settings(environ=_config(tmp_path), project_root=tmp_path)
    with pytest.raises(ConfigError, match=r"MKG_LLM_BACKEND \(from the environment\)"):
        load_settings(environ={"MKG_LLM_BACKEND": "magic"}, project_root=tmp_path)


def test_secrets_are_masked_in_descriptions(tmp_path: Path) -> None:
    settings = load_settings(environ={"OPENAI_API_KEY": "sk-abcdefghijklmnop"}, project_root=tmp_path)
    rows = {variable: value for variable, value, _ in settings.describe()}
    assert "abcdefghijklmnop" not in rows["OPENAI_API_KEY"]
    assert rows["OPENAI_API_KEY"].startswith("sk-a")
    assert "sk-abcdefghijklmnop" not in repr(settings)


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("KEY=plain", "plain"),
        ("export KEY=exported", "exported"),
        ("KEY='quoted # not a comment'", "quoted # not a comment"),
        ('KEY="double"', "double"),
        ("KEY=sk-ant-oat01-xyz   # preferred", "sk-ant-oat01-xyz"),
        ("KEY = spaced ", "spaced"),
        ("KEY=a=b", "a=b"),
    ],
)
def test_env_file_syntax(line: str, value: str) -> None:
    assert envfiles.parse_env_text(f"# comment\n\n{line}\nnot a line\n") == {"KEY": value}


@pytest.mark.parametrize("value", ["plain", "with space", "hash # inside", "it's", 'say "hi"', ""])
def test_env_lines_round_trip(value: str) -> None:
    assert envfiles.parse_env_text(envfiles.format_env_line("KEY", value)) == {"KEY": value}


@pytest.mark.parametrize(
    ("environ", "client", "expected"),
    [
        ({}, None, "gpt-5.4-mini"),
        ({}, "claude", "anthropic/claude-haiku-4-5"),
        ({"MKG_DEFAULT_LLM_MODEL": "gemini/gemini-2.5-flash"}, "claude", "gemini/gemini-2.5-flash"),
        ({"LLM_MODEL": "x/y", "MKG_DEFAULT_LLM_MODEL": "a/b"}, "claude", "x/y"),
    ],
)
def test_llm_model_resolution(
    tmp_path: Path, environ: dict[str, str], client: str | None, expected: str
) -> None:
    assert load_settings(environ=environ, project_root=tmp_path).resolved_llm_model(client) == expected


def test_cwd_project_env_file_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    _trusted(repo / ".mkg.env", "NEO4J_DATABASE=repo\n", tmp_path)
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    assert load_settings(environ={**os.environ, **_config(tmp_path)}).neo4j_database == "repo"


def test_every_setting_is_documented() -> None:
    root = Path(__file__).resolve().parents[1]
    docs = (root / "docs" / "configuration.md").read_text()
    for name, info in Settings.model_fields.items():
        variable = env_name(info, name)
        assert f"| `{variable}` |" in docs, f"document {variable} in docs/configuration.md"


def test_a_projects_own_env_never_redirects_memory(tmp_path: Path) -> None:
    # The application's .env in the working repository names its own database and keys.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    _write(repo / ".env", "NEO4J_URI=bolt://127.0.0.1:1\nOPENAI_API_KEY=sk-app-owned-key\nAPP_PORT=8080\n")
    config = _write(tmp_path / "config" / ".env", "NEO4J_URI=bolt://127.0.0.1:9\n")
    config.chmod(0o600)
    env = {**os.environ, "MKG_CONFIG_DIR": str(config.parent)}
    for key in ("NEO4J_URI", "OPENAI_API_KEY", "MKG_ENV_FILE"):
        env.pop(key, None)
    settings = load_settings(environ=env, project_root=repo)
    assert settings.neo4j_uri == "bolt://127.0.0.1:9" and settings.openai_api_key is None
    assert settings.source_of("neo4j_uri") == str(config)
    assert settings.ignored_env_file == repo / ".env"
    assert settings.ignored_variables() == ["NEO4J_URI", "OPENAI_API_KEY"]  # not the app's own APP_PORT

    def mkg(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN_DIR / "mkg"), *args], env=env, cwd=repo, capture_output=True, text=True, timeout=120
        )

    shown = json.loads(mkg("config", "--json").stdout)
    assert shown["env_file"] == str(config) and shown["ignored_env_file"] == str(repo / ".env")
    assert shown["ignored_variables"] == ["NEO4J_URI", "OPENAI_API_KEY"]
    uri = next(row for row in shown["settings"] if row["variable"] == "NEO4J_URI")
    assert uri == {"variable": "NEO4J_URI", "value": "bolt://127.0.0.1:9", "source": str(config)}
    text = mkg("config").stdout
    assert f"not read: {repo / '.env'} (it sets NEO4J_URI, OPENAI_API_KEY)" in text
    doctor = mkg("doctor", "--json")
    checks = json.loads(doctor.stdout)
    (warning,) = [c for c in checks if c["name"] == "config" and c["status"] == "warn"]
    assert "it sets NEO4J_URI, OPENAI_API_KEY" in warning["detail"]
    assert str(repo / ".mkg.env") in warning["fix"]

    # The project opts in with a .mkg.env of its own, which the user trusts.
    _write(repo / ".mkg.env", "NEO4J_DATABASE=repo\n")
    assert "mkg trust" in mkg("config").stdout
    assert "MKG reads" in mkg("trust").stdout
    assert load_settings(environ=env, project_root=repo).neo4j_database == "repo"


def test_a_projects_mkg_env_is_read_only_once_trusted_as_it_is(tmp_path: Path) -> None:
    # A cloned repository's .mkg.env, written by someone else, points MKG at their database and endpoint.
    repo = tmp_path / "cloned"
    (repo / ".git").mkdir(parents=True)
    planted = "NEO4J_URI=bolt://127.0.0.1:2\nOPENAI_BASE_URL=http://127.0.0.1:3/v1\n"
    mkg_env = _write(repo / ".mkg.env", planted)
    config = _write(tmp_path / "config" / ".env", "NEO4J_URI=bolt://127.0.0.1:9\n")
    env = {**os.environ, "MKG_CONFIG_DIR": str(config.parent), "OPENAI_API_KEY": "sk-the-users-own-key"}
    for key in ("NEO4J_URI", "OPENAI_BASE_URL", "MKG_ENV_FILE"):
        env.pop(key, None)

    def mkg(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN_DIR / "mkg"), *args], env=env, cwd=repo, capture_output=True, text=True, timeout=120
        )

    settings = load_settings(environ=env, project_root=repo)
    assert settings.neo4j_uri == "bolt://127.0.0.1:9" and settings.env_file == config
    assert settings.untrusted_env_file == mkg_env
    assert f"not read: {mkg_env} is not trusted" in mkg("config").stdout
    checks = json.loads(mkg("doctor", "--json").stdout)
    assert any(c["status"] == "warn" and c["fix"] == f"mkg trust {mkg_env}" for c in checks)

    trusted = mkg("trust")
    assert trusted.returncode == 0 and "it sets NEO4J_URI, OPENAI_BASE_URL" in trusted.stdout
    record = config.parent / envfiles.TRUSTED_FILE
    assert record.stat().st_mode & 0o777 == 0o600
    settings = load_settings(environ=env, project_root=repo)
    assert settings.neo4j_uri == "bolt://127.0.0.1:2" and settings.untrusted_env_file is None

    mkg_env.write_text(planted + "NEO4J_PASSWORD=changed\n")  # changed since: not read until trusted again
    assert load_settings(environ=env, project_root=repo).neo4j_uri == "bolt://127.0.0.1:9"
    mkg("trust")
    assert load_settings(environ=env, project_root=repo).neo4j_uri == "bolt://127.0.0.1:2"
    assert mkg("trust", "--forget").returncode == 0
    assert load_settings(environ=env, project_root=repo).neo4j_uri == "bolt://127.0.0.1:9"
    refused = mkg("trust", str(config))
    assert refused.returncode == 1 and "is not a .mkg.env file" in refused.stderr
