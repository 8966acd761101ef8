"""Where neocarta runs, and with what environment.

neocarta's MCP server pins an older MCP framework than MKG, so the two never share an environment:
neocarta is installed on its own (``pipx install 'neocarta[mcp,cli]'``, or ``uvx`` fetches it on
demand) and run as a subprocess. Its commands are found, in order:

1. in ``NEOCARTA_BIN`` (a folder holding ``neocarta`` and ``neocarta-mcp``);
2. on ``PATH``;
3. through ``uvx --from 'neocarta[mcp,cli]>=0.8,<0.9'`` when ``uvx`` is on ``PATH``.

The child gets an allow-listed environment built from MKG's settings (Neo4j, GCP, embedding model
and provider keys), never the whole environment of the MKG process.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from mkg_core.embedding import LiteLLMEmbedder
from mkg_core.settings import Settings, secret

PACKAGE_SPEC = "neocarta[mcp,cli]>=0.8,<0.9"
#: The release the tests run against, and the folder of ``.cache/`` it is installed in
#: (``make prefetch`` installs it before the tests start).
TESTED_SPEC, TESTED_FOLDER = "neocarta[mcp,cli]==0.8.0", "neocarta-0.8.0"
INSTALL_HINT = "pipx install 'neocarta[mcp,cli]>=0.8,<0.9' (or set NEOCARTA_BIN, or install uv for uvx)"

#: Settings passed on to neocarta as the variables it reads.
_SECRET_SETTINGS = {
    "OPENAI_API_KEY": "openai_api_key",
    "GEMINI_API_KEY": "gemini_api_key",
    "OPENROUTER_API_KEY": "openrouter_api_key",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
}
_PASSED_THROUGH = (
    "HOME",
    "PATH",
    "LANG",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_QUOTA_PROJECT",
    "CLOUDSDK_CONFIG",
    "UV_CACHE_DIR",
    "UV_INDEX_URL",
    "PIP_INDEX_URL",
)


def command(name: str, settings: Settings, environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The argv prefix that runs neocarta's ``name`` command (``neocarta`` or ``neocarta-mcp``), or None."""
    environ = os.environ if environ is None else environ
    folder = (settings.get("NEOCARTA_BIN") or "").strip()
    if folder:
        candidate = Path(folder).expanduser() / name
        return [str(candidate)] if os.access(candidate, os.X_OK) else None
    found = shutil.which(name, path=environ.get("PATH"))
    if found:
        return [found]
    uvx = shutil.which("uvx", path=environ.get("PATH"))
    if uvx:
        return [uvx, "--quiet", "--from", PACKAGE_SPEC, name]
    return None


def embedding_key_missing(settings: Settings) -> str | None:
    """What the embedding model needs and lacks (neocarta embeds queries with the same model)."""
    model = settings.embedding_model
    if LiteLLMEmbedder(settings).is_available():
        return None
    if model.strip().lower() in ("none", "off", ""):
        return "an embedding model (EMBEDDING_MODEL is off; the catalog search embeds queries)"
    return f"the API key for EMBEDDING_MODEL={model} (for OpenAI models, OPENAI_API_KEY)"


def child_env(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment neocarta runs with: what it needs from the settings, nothing else."""
    environ = os.environ if environ is None else environ
    env = {key: environ[key] for key in _PASSED_THROUGH if environ.get(key)}
    env.update(
        {
            "NEO4J_URI": settings.neo4j_uri,
            "NEO4J_USERNAME": settings.neo4j_username,
            "NEO4J_PASSWORD": settings.neo4j_password.get_secret_value(),
            "NEO4J_DATABASE": settings.neo4j_database,
            "EMBEDDING_MODEL": settings.embedding_model,
            "EMBEDDING_DIMENSIONS": str(settings.embedding_dimensions),
            "BIGQUERY_REGION": settings.get("BIGQUERY_REGION") or "US",
            # neocarta uses litellm too: never let it fetch the model price map from the internet.
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    for key, value in environ.items():
        if key.endswith(("_API_KEY", "_AUTH_TOKEN")) and value:
            env[key] = value
    for variable, field in _SECRET_SETTINGS.items():
        key_value = secret(getattr(settings, field))
        if key_value:
            env[variable] = key_value
    optional: dict[str, str | None] = {
        "GCP_PROJECT_ID": settings.get("GCP_PROJECT_ID"),
        "BIGQUERY_DATASET_ID": settings.get("BIGQUERY_DATASET_ID"),
        "GCP_BILLING_PROJECT_ID": settings.get("GCP_BILLING_PROJECT_ID"),
        "GOOGLE_APPLICATION_CREDENTIALS": settings.get("GOOGLE_APPLICATION_CREDENTIALS"),
        "OPENAI_BASE_URL": settings.openai_base_url,
        "OPENAI_API_BASE": settings.openai_base_url,
    }
    env.update({key: value for key, value in optional.items() if value is not None and value})
    return env
