"""Settings: every variable MKG reads, with its default, resolved one way everywhere.

Precedence, highest first: explicit arguments (CLI flags) > the process environment > the one
``.env`` file :mod:`mkg_core.envfiles` resolves > defaults. A blank value counts as unset.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from . import envfiles
from .errors import ConfigError

if TYPE_CHECKING:
    from .contrib import Setting


__all__ = ["Settings", "load_settings", "mask", "secret"]


class Settings(BaseSettings):
    """MKG's configuration. Field docs are the configuration table in ``docs/configuration.md``."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    # Neo4j
    neo4j_uri: str = Field("bolt://localhost:7687", validation_alias="NEO4J_URI")
    neo4j_username: str = Field("neo4j", validation_alias="NEO4J_USERNAME")
    neo4j_password: SecretStr = Field(SecretStr("password"), validation_alias="NEO4J_PASSWORD")
    neo4j_database: str = Field("neo4j", validation_alias="NEO4J_DATABASE")
    #: The Neo4j is the one MKG runs itself (``mkg setup --local``): started when it is down.
    local_neo4j: bool = Field(False, validation_alias="MKG_LOCAL_NEO4J")
    #: Share bookmarks between MKG's processes on any URI (a routing URI always does).
    shared_bookmarks: bool = Field(False, validation_alias="MKG_SHARED_BOOKMARKS")
    #: neo4j_read_cypher: auto (on when the database holds one user's memory), on, off.
    read_cypher: Literal["auto", "on", "off"] = Field("auto", validation_alias="MKG_READ_CYPHER")
    #: A Neo4j user for neo4j_read_cypher alone (an admin confines its role to what may be read).
    read_cypher_username: str | None = Field(None, validation_alias="MKG_READ_CYPHER_USERNAME")
    read_cypher_password: SecretStr | None = Field(None, validation_alias="MKG_READ_CYPHER_PASSWORD")
    neo4j_transport: Literal["stdio", "http", "streamable-http", "sse"] = Field(
        "stdio", validation_alias="NEO4J_TRANSPORT"
    )

    # LLM
    llm_model: str | None = Field(None, validation_alias="LLM_MODEL")
    default_llm_model: str | None = Field(None, validation_alias="MKG_DEFAULT_LLM_MODEL")
    llm_backend: Literal["auto", "litellm", "claude_cli"] = Field("auto", validation_alias="MKG_LLM_BACKEND")
    claude_cli_model: str | None = Field(None, validation_alias="MKG_CLAUDE_CLI_MODEL")
    claude_cli_timeout: float = Field(300.0, gt=0, validation_alias="MKG_CLAUDE_CLI_TIMEOUT")
    llm_num_retries: int = Field(3, ge=0, validation_alias="MKG_LLM_NUM_RETRIES")
    llm_timeout: float = Field(120.0, gt=0, validation_alias="MKG_LLM_TIMEOUT")
    openai_api_key: SecretStr | None = Field(None, validation_alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(
        None, validation_alias=AliasChoices("OPENAI_BASE_URL", "OPENAI_API_BASE")
    )
    anthropic_api_key: SecretStr | None = Field(None, validation_alias="ANTHROPIC_API_KEY")
    anthropic_auth_token: SecretStr | None = Field(None, validation_alias="ANTHROPIC_AUTH_TOKEN")
    anthropic_base_url: str | None = Field(None, validation_alias="ANTHROPIC_BASE_URL")
    gemini_api_key: SecretStr | None = Field(None, validation_alias="GEMINI_API_KEY")
    openrouter_api_key: SecretStr | None = Field(None, validation_alias="OPENROUTER_API_KEY")
    claude_code_oauth_token: SecretStr | None = Field(None, validation_alias="CLAUDE_CODE_OAUTH_TOKEN")

    # Embeddings
    embedding_model: str = Field("text-embedding-3-small", validation_alias="EMBEDDING_MODEL")
    embedding_dimensions: int = Field(1536, ge=1, le=4096, validation_alias="EMBEDDING_DIMENSIONS")

    # Extraction at Stop
    extraction: bool = Field(True, validation_alias="MKG_EXTRACTION")
    extraction_retry_skipped: bool = Field(True, validation_alias="MKG_EXTRACTION_RETRY_SKIPPED")
    extraction_window_events: int = Field(200, ge=1, validation_alias="MKG_EXTRACTION_WINDOW_EVENTS")
    extraction_corpus_tokens: int = Field(3000, ge=200, validation_alias="MKG_EXTRACTION_CORPUS_TOKENS")
    extraction_max_learnings: int = Field(3, ge=0, validation_alias="MKG_EXTRACTION_MAX_LEARNINGS")

    # Enrichment (the turn and tool-call projection of sessions)
    enrichment: bool = Field(False, validation_alias="MKG_ENRICHMENT")

    # Memory quality
    consistency_gate: bool = Field(True, validation_alias="MKG_CONSISTENCY_GATE")
    consistency_topk: int = Field(15, ge=1, validation_alias="MKG_CONSISTENCY_TOPK")
    consistency_sweep_limit: int = Field(8, ge=0, validation_alias="MKG_CONSISTENCY_SWEEP_LIMIT")
    prompt_consolidation_threshold: int = Field(
        5, ge=0, validation_alias="MKG_PROMPT_CONSOLIDATION_THRESHOLD"
    )
    prompt_consolidation_interval_hours: float = Field(
        24.0, ge=0, validation_alias="MKG_PROMPT_CONSOLIDATION_INTERVAL_HOURS"
    )
    query_error_consolidation_threshold: int = Field(
        1, ge=0, validation_alias="MKG_QUERY_ERROR_CONSOLIDATION_THRESHOLD"
    )
    query_error_consolidation_interval_hours: float = Field(
        6.0, ge=0, validation_alias="MKG_QUERY_ERROR_CONSOLIDATION_INTERVAL_HOURS"
    )

    # Capture (the hook reads MKG_DISABLED and its deadlines from its own environment only)
    disabled: bool = Field(False, validation_alias="MKG_DISABLED")
    hook_deadline_session_start: float = Field(2.0, ge=0, validation_alias="MKG_HOOK_DEADLINE_SESSION_START")
    hook_deadline_prompt: float = Field(1.5, ge=0, validation_alias="MKG_HOOK_DEADLINE_PROMPT")
    worker_autostart: bool = Field(True, validation_alias="MKG_WORKER_AUTOSTART")
    worker_idle_seconds: float = Field(600.0, ge=0, validation_alias="MKG_WORKER_IDLE_SECONDS")
    #: How long a background job's lease in the graph lasts unless renewed (see mkg_core/leases.py).
    job_lease_seconds: float = Field(120.0, ge=3, validation_alias="MKG_JOB_LEASE_SECONDS")

    # Recall
    recall_budget_prompt: int = Field(1500, ge=0, validation_alias="MKG_RECALL_BUDGET_PROMPT")
    recall_budget_session_start: int = Field(2000, ge=0, validation_alias="MKG_RECALL_BUDGET_SESSION_START")
    recall_limit: int = Field(8, ge=1, validation_alias="MKG_RECALL_LIMIT")
    recall_min_words: int = Field(3, ge=0, validation_alias="MKG_RECALL_MIN_WORDS")
    recall_min_score: float = Field(0.3, ge=0, le=1, validation_alias="MKG_RECALL_MIN_SCORE")
    recall_min_similarity: float = Field(0.35, ge=-1, le=1, validation_alias="MKG_RECALL_MIN_SIMILARITY")
    #: The graph branch of recall: memory about the entities a prompt names (docs/recall.md).
    recall_graph: bool = Field(True, validation_alias="MKG_RECALL_GRAPH")
    #: Memory made in the session of a strong hit is promoted with it (docs/recall.md).
    recall_sessions: bool = Field(True, validation_alias="MKG_RECALL_SESSIONS")
    #: The cosine above which entity resolution merges two names (measured: docs/benchmarks.md).
    entity_merge_similarity: float = Field(
        0.87, ge=0, le=1.01, validation_alias="MKG_ENTITY_MERGE_SIMILARITY"
    )

    # Identity
    project_id: str | None = Field(None, validation_alias="MKG_PROJECT_ID")
    project_root: str | None = Field(None, validation_alias="MKG_PROJECT_ROOT")
    user_id: str | None = Field(None, validation_alias="MKG_USER_ID")
    client: str | None = Field(None, validation_alias="MKG_CLIENT")

    _env_file: Path | None = PrivateAttr(default=None)
    _ignored_env_file: Path | None = PrivateAttr(default=None)
    _untrusted_env_file: Path | None = PrivateAttr(default=None)
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _variables: dict[str, str] = PrivateAttr(default_factory=dict)
    _variable_sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        layers = _LAYERS.get() or _Layers.for_process()
        return (
            init_settings,
            _MappingSource(settings_cls, layers.environ),
            _MappingSource(settings_cls, layers.file_values),
        )

    # -- what was loaded, and from where --------------------------------------------------------

    @property
    def env_file(self) -> Path | None:
        """The ``.env`` file that was read, if any."""
        return self._env_file

    @property
    def ignored_env_file(self) -> Path | None:
        """The project's own ``.env``, when there is one: never read (it is the application's; a
        project's settings for MKG go in ``.mkg.env``)."""
        return self._ignored_env_file

    @property
    def untrusted_env_file(self) -> Path | None:
        """The project's ``.mkg.env``, when there is one the user has not trusted as it is now
        (``mkg trust``): not read."""
        return self._untrusted_env_file

    def ignored_variables(self, declared: Iterable[Setting] = ()) -> list[str]:
        """The variables MKG knows (its own, and ``declared`` by plugins) that the ignored project
        ``.env`` sets: what it would have changed had it been read."""
        if self._ignored_env_file is None:
            return []
        known = {env_name(info, name) for name, info in type(self).model_fields.items()}
        known.update(setting.variable.upper() for setting in declared)
        values = envfiles.parse_env_file(self._ignored_env_file)
        return sorted(key for key, value in values.items() if key.upper() in known and value.strip())

    def source_of(self, name: str) -> str:
        """Where a field's value came from: ``argument``, ``environment``, the file path, or ``default``."""
        return self._sources.get(name, "default")

    def get(self, variable: str, default: str | None = None) -> str | None:
        """A variable MKG itself does not define (a plugin's own setting, e.g. ``ACME_API_KEY``),
        resolved like every other: the environment, then the ``.env`` file. Blank counts as unset."""
        value = self._variables.get(variable.upper())
        return value.strip() if value is not None and value.strip() else default

    def source_of_variable(self, variable: str) -> str:
        """Where a variable read with :meth:`get` came from: ``environment``, the file, or
        ``default``."""
        value = self._variables.get(variable.upper())
        if value is None or not value.strip():
            return "default"
        return self._variable_sources.get(variable.upper(), "default")

    def resolved_llm_model(self, client: str | None = None) -> str:
        """``LLM_MODEL`` > ``MKG_DEFAULT_LLM_MODEL`` > the client-aware default."""
        from .llm import default_model

        return default_model(self, client)

    def describe(self, declared: Iterable[Setting] = ()) -> list[tuple[str, str, str]]:
        """(variable, value with secrets masked, source) for every setting, for ``mkg config``;
        then the variables plugins declared (see :class:`~mkg_core.contrib.Setting`)."""
        rows = []
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                shown = mask(value.get_secret_value())
            elif value is None:
                shown = ""
            else:
                shown = str(value)
            rows.append((env_name(info, name), shown, self.source_of(name)))
        own = {row[0] for row in rows}
        for setting in declared:
            if setting.variable in own:
                continue
            value = self.get(setting.variable, setting.default) or ""
            shown = mask(value) if setting.secret else value
            rows.append((setting.variable, shown, self.source_of_variable(setting.variable)))
        return rows


def env_name(info: FieldInfo, name: str) -> str:
    alias = info.validation_alias
    if isinstance(alias, str):
        return alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return name.upper()


def mask(secret: str) -> str:
    if not secret:
        return ""
    if len(secret) <= 8:
        return "****"
    return f"{secret[:4]}…{secret[-2:]} ({len(secret)} chars)"


def secret(value: SecretStr | None) -> str | None:
    """A secret's text, or None when unset or blank."""
    if value is None:
        return None
    text = value.get_secret_value()
    return text or None


# -- loading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layers:
    environ: Mapping[str, str]
    file_values: Mapping[str, str] = field(default_factory=dict)
    env_file: Path | None = None
    ignored_env_file: Path | None = None
    untrusted_env_file: Path | None = None

    @classmethod
    def for_process(cls) -> _Layers:
        return _resolve_layers(os.environ, None)


_LAYERS: ContextVar[_Layers | None] = ContextVar("mkg_settings_layers", default=None)


class _MappingSource(PydanticBaseSettingsSource):
    """Values from a plain mapping of variable names (the environment, or a parsed ``.env``)."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self._data = {key.upper(): value for key, value in data.items()}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        alias = field.validation_alias
        names = alias.choices if isinstance(alias, AliasChoices) else [alias or field_name]
        for candidate in names:
            value = self._data.get(str(candidate).upper())
            if value is not None and value.strip() != "":
                return value.strip(), field_name, False
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, info in self.settings_cls.model_fields.items():
            value, _, _ = self.get_field_value(info, name)
            if value is not None:
                values[name] = value
        return values


def _resolve_layers(environ: Mapping[str, str], project_root: str | os.PathLike[str] | None) -> _Layers:
    if project_root is None:
        project_root = envfiles.default_project_root(environ, os.getcwd())
    env_file = envfiles.resolve_env_file(environ, project_root)
    file_values = envfiles.parse_env_file(env_file) if env_file else {}
    return _Layers(
        environ=dict(environ),
        file_values=file_values,
        env_file=env_file,
        ignored_env_file=envfiles.ignored_project_env(project_root),
        untrusted_env_file=envfiles.untrusted_project_env(environ, project_root),
    )


@contextmanager
def _layers(layers: _Layers) -> Iterator[None]:
    token = _LAYERS.set(layers)
    try:
        yield
    finally:
        _LAYERS.reset(token)


def load_settings(
    *,
    environ: Mapping[str, str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Settings:
    """Load settings the one way hooks, worker, MCP server and CLI all use.

    ``overrides`` are explicit values by field name (CLI flags); None values are ignored.
    Raises :class:`ConfigError` naming the variable when a value is invalid.
    """
    layers = _resolve_layers(os.environ if environ is None else environ, project_root)
    explicit = {key: value for key, value in overrides.items() if value is not None}
    try:
        with _layers(layers):
            settings = Settings(**explicit)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, layers)) from None
    settings._env_file = layers.env_file
    settings._ignored_env_file = layers.ignored_env_file
    settings._untrusted_env_file = layers.untrusted_env_file
    settings._sources = _sources(explicit, layers)
    settings._variables = {key.upper(): value for key, value in layers.file_values.items()}
    settings._variables.update({key.upper(): value for key, value in layers.environ.items()})
    settings._variable_sources = {key.upper(): str(layers.env_file) for key in layers.file_values}
    settings._variable_sources.update(
        {key.upper(): "environment" for key, value in layers.environ.items() if value.strip()}
    )
    return settings


def _sources(explicit: Mapping[str, Any], layers: _Layers) -> dict[str, str]:
    env_source = _MappingSource(Settings, layers.environ)()
    file_source = _MappingSource(Settings, layers.file_values)()
    sources: dict[str, str] = {}
    for name in Settings.model_fields:
        if name in explicit:
            sources[name] = "argument"
        elif name in env_source:
            sources[name] = "environment"
        elif name in file_source:
            sources[name] = str(layers.env_file)
    return sources


def _explain(exc: ValidationError, layers: _Layers) -> str:
    problems = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "?"
        info = Settings.model_fields.get(name)
        variable = env_name(info, name) if info else name
        where = "the environment" if variable in layers.environ else (str(layers.env_file) or "arguments")
        problems.append(f"{variable} (from {where}): {error['msg']}")
    return "invalid settings: " + "; ".join(problems)
