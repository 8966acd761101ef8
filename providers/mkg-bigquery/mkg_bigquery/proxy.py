"""``bigquery_execute_query``: read-only SQL through a remote BigQuery MCP endpoint.

The tool is a thin proxy. Each call opens the endpoint named by ``BIGQUERY_MCP_URL`` with the MCP
client over streamable HTTP, calls its read-only tool (``execute_sql_readonly``, as Google's
managed BigQuery MCP server names it) with ``GCP_PROJECT_ID`` and the query, and returns the
answer. Read-only-ness is the remote tool's: this side never offers a writing one.

Authentication, first match wins:

1. ``BIGQUERY_MCP_AUTH``: sent as ``Authorization`` (a bare token becomes ``Bearer <token>``).
2. For ``*.googleapis.com`` endpoints, a Google credential with the BigQuery scope:
   ``GCP_SERVICE_ACCOUNT_JSON`` (inline), else Application Default Credentials
   (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth application-default login``, or the
   metadata server), refreshed when it expires.
3. Nothing.

``BIGQUERY_MCP_HEADERS`` (a JSON object) adds headers to every request.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from mkg_core.contrib import ToolContext, ToolGroup, ToolSpec
from mkg_core.errors import ConfigError, MkgError
from mkg_core.settings import Settings

REMOTE_TOOL = "execute_sql_readonly"
BIGQUERY_SCOPES = ("https://www.googleapis.com/auth/bigquery",)
CALL_TIMEOUT = 120.0


class BigQueryError(MkgError):
    """The endpoint refused or failed the query; the message is its answer."""


def extra_headers(settings: Settings) -> dict[str, str]:
    """``BIGQUERY_MCP_HEADERS`` as a dict; a clear ConfigError when it is not a JSON object of strings."""
    raw = settings.get("BIGQUERY_MCP_HEADERS")
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(
            f'BIGQUERY_MCP_HEADERS is not valid JSON ({exc}): use {{"Name": "value"}}'
        ) from None
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float) for v in value.values()):
        raise ConfigError(
            'BIGQUERY_MCP_HEADERS must be a JSON object of header names to values: {"Name": "value"}'
        )
    return {str(k): str(v) for k, v in value.items()}


def is_google_endpoint(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == "googleapis.com" or host.endswith(".googleapis.com")


class GoogleAuth(httpx2.Auth):
    """Sets ``Authorization: Bearer <token>`` from a Google credential, refreshing it when needed."""

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> GoogleAuth:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        inline = settings.get("GCP_SERVICE_ACCOUNT_JSON")
        if inline and inline.strip():
            return cls(
                _credentials_from_info(
                    _json_object(inline, "GCP_SERVICE_ACCOUNT_JSON"), "GCP_SERVICE_ACCOUNT_JSON"
                )
            )
        path = (
            settings.get("GOOGLE_APPLICATION_CREDENTIALS") or ""
        ).strip()  # the environment or the .env file
        if path and os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") != path:
            try:
                text = Path(path).expanduser().read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"GOOGLE_APPLICATION_CREDENTIALS names a file that cannot be read: {exc}"
                ) from None
            return cls(_credentials_from_info(_json_object(text, path), path))
        try:
            credentials, _ = google.auth.default(scopes=BIGQUERY_SCOPES)
        except DefaultCredentialsError as exc:
            raise ConfigError(
                "no Google credential for the BigQuery MCP endpoint: run `gcloud auth application-default "
                f"login`, set GOOGLE_APPLICATION_CREDENTIALS, or set BIGQUERY_MCP_AUTH ({exc})"
            ) from None
        return cls(credentials)

    def token(self) -> str:
        from google.auth.exceptions import RefreshError
        from google.auth.transport.requests import Request

        with self._lock:
            if not self.credentials.valid:
                try:
                    self.credentials.refresh(Request())
                except RefreshError as exc:
                    raise ConfigError(f"the Google credential could not be refreshed: {exc}") from None
            return str(self.credentials.token)

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request


def _json_object(text: str, source: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise ConfigError(f"{source} is not a JSON credential") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{source} is not a JSON credential object")
    return value


def _credentials_from_info(info: dict[str, Any], source: str) -> Any:
    """A service-account key or an authorized-user (gcloud) credential, scoped to BigQuery."""
    from google.oauth2 import credentials, service_account

    kind = info.get("type")
    try:
        if kind == "service_account":
            return service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
                info, scopes=BIGQUERY_SCOPES
            )
        if kind == "authorized_user":
            return credentials.Credentials.from_authorized_user_info(  # type: ignore[no-untyped-call]
                info, scopes=BIGQUERY_SCOPES
            )
    except ValueError as exc:
        raise ConfigError(f"{source} is not a usable Google credential: {exc}") from None
    raise ConfigError(
        f"{source}: credential type {kind!r} is not supported here; use a service-account key or "
        "`gcloud auth application-default login` (or export GOOGLE_APPLICATION_CREDENTIALS)"
    )


def connection(settings: Settings) -> tuple[str, dict[str, str], httpx2.Auth | None]:
    """The endpoint URL, its headers and its auth, as the settings name them."""
    url = (settings.get("BIGQUERY_MCP_URL") or "").strip()
    if not url:
        raise ConfigError("BIGQUERY_MCP_URL is not set")
    headers = extra_headers(settings)
    explicit = settings.get("BIGQUERY_MCP_AUTH")
    if explicit and explicit.strip():
        value = explicit.strip()
        headers["Authorization"] = value if " " in value else f"Bearer {value}"
        return url, headers, None
    if is_google_endpoint(url):
        return url, headers, GoogleAuth.from_settings(settings)
    return url, headers, None


async def call_remote(settings: Settings, query: str) -> Any:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp_types import TextContent

    url, headers, auth = connection(settings)
    arguments = {"projectId": settings.get("GCP_PROJECT_ID") or "", "query": query}
    refused: list[int] = []

    async def note_status(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refused.append(response.status_code)

    try:
        async with create_mcp_http_client(headers=headers, auth=auth) as http:
            http.event_hooks["response"].append(note_status)
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, read_timeout_seconds=CALL_TIMEOUT) as client:
                result = await client.call_tool(REMOTE_TOOL, arguments)
    except Exception as exc:
        if refused and refused[0] in (401, 403):
            raise BigQueryError(
                f"the BigQuery MCP endpoint {url} refused the credential (HTTP {refused[0]}): "
                "check BIGQUERY_MCP_AUTH, or the Google credential and its BigQuery access"
            ) from None
        status = f" (HTTP {refused[0]})" if refused else ""
        raise BigQueryError(f"the BigQuery MCP endpoint {url} failed{status}: {_describe(exc)}") from None
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.is_error:
        raise BigQueryError("\n".join(texts) or "the BigQuery endpoint reported an error without a message")
    if texts:
        return "\n".join(texts)
    return json.dumps(result.structured_content or {})


def bigquery_execute_query(context: ToolContext, query: str) -> str:
    """Run one read-only BigQuery SQL query (SELECT or WITH) and return its rows.

    The GCP project is configured on the server side. Use fully qualified table names
    (`project.dataset.table`), put LIMIT on exploratory queries, and look tables and columns up
    in the catalog first when unsure of their names.
    """
    import anyio

    text = (query or "").strip()
    if not text:
        raise MkgError("query is empty")
    return str(anyio.run(call_remote, context.settings, text))


def _describe(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)  # an exception group from the transport's task group
    if inner:
        return "; ".join(_describe(e) for e in inner)
    return f"{type(exc).__name__}: {exc}"


def missing(settings: Settings) -> list[str]:
    if not (settings.get("BIGQUERY_MCP_URL") or "").strip():
        return ["BIGQUERY_MCP_URL (the remote BigQuery MCP endpoint)"]
    try:
        extra_headers(settings)
    except ConfigError as exc:
        return [f"a valid BIGQUERY_MCP_HEADERS ({exc})"]
    return []


def tool_group() -> ToolGroup:
    return ToolGroup(
        "bigquery",
        (
            ToolSpec(
                "bigquery_execute_query",
                bigquery_execute_query,
                bigquery_execute_query.__doc__ or "",
                needs_approval=True,
            ),
        ),
        description="Read-only BigQuery SQL through a remote BigQuery MCP endpoint",
        missing=missing,
    )
