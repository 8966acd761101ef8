"""A small synchronous client for Diffbot's Knowledge Graph API (``/dql`` and ``/enhance``).

Requests are GETs with the token as a query parameter. 429 and 5xx answers are retried with
exponential backoff (``Retry-After`` is honoured, up to a cap); a filter Diffbot cannot parse is
dropped once; every other failure becomes a :class:`DiffbotError` whose message says what to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from mkg_core.errors import MkgError

DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 3
MAX_RETRY_AFTER = 20.0


class DiffbotError(MkgError):
    """Diffbot could not answer; the message says why and what to do."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class DiffbotClient:
    """Calls Diffbot with one token. ``sleep`` is injectable so backoff can be observed."""

    def __init__(
        self,
        token: str,
        base_url: str = "https://kg.diffbot.com/kg/v3",
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not token.strip():
            raise DiffbotError("a Diffbot token is required: set DIFFBOT_TOKEN")
        self.token = token.strip()
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep

    def dql(self, query: str, *, size: int, filter: str | None = None) -> Any:
        params = {"query": query, "size": size, "format": "json", "cluster": "dedupe"}
        return self.get("/dql", params, filter=filter)

    def enhance(self, params: Mapping[str, Any], *, size: int, filter: str | None = None) -> Any:
        return self.get("/enhance", {**params, "size": size}, filter=filter)

    def get(self, path: str, params: Mapping[str, Any], *, filter: str | None = None) -> Any:
        query = dict(params)
        if filter:
            query["filter"] = filter
        response = self._send(path, query)
        if filter and response.status_code == 422 and "parse filter failed" in response.text.lower():
            query.pop("filter")
            response = self._send(path, query)
        if response.status_code >= 400:
            raise _error_for(response)
        try:
            return response.json()
        except ValueError:
            raise DiffbotError(
                f"Diffbot answered with something that is not JSON: {response.text[:200]!r}"
            ) from None

    def _send(self, path: str, params: Mapping[str, Any]) -> httpx.Response:
        url = self.base_url + path
        attempt = 0
        while True:
            try:
                response = httpx.get(
                    url,
                    params={**params, "token": self.token},
                    headers={"Accept": "application/json"},
                    timeout=self.timeout,
                )
            except httpx.TimeoutException:
                if attempt < self.retries:
                    attempt += 1
                    self.sleep(self.backoff * 2 ** (attempt - 1))
                    continue
                raise DiffbotError(
                    f"Diffbot did not answer within {self.timeout:g} s ({attempt + 1} tries)"
                ) from None
            except httpx.HTTPError as exc:
                raise DiffbotError(f"Diffbot request failed: {_redact(str(exc), self.token)}") from None
            retryable = response.status_code == 429 or response.status_code >= 500
            if not retryable or attempt >= self.retries or _quota_exhausted(response):
                return response
            attempt += 1
            self.sleep(_retry_after(response) or self.backoff * 2 ** (attempt - 1))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return None


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("error", "message", "errorMessage"):
            if isinstance(body.get(key), str) and body[key].strip():
                return str(body[key]).strip()
    return response.reason_phrase


def _quota_exhausted(response: httpx.Response) -> bool:
    return response.status_code == 402 or (response.status_code == 429 and "quota" in response.text.lower())


def _error_for(response: httpx.Response) -> DiffbotError:
    code = response.status_code
    detail = _message(response)
    if code in (401, 403):
        text = f"Diffbot refused the token (HTTP {code}: {detail}); check DIFFBOT_TOKEN"
    elif _quota_exhausted(response):
        text = f"Diffbot quota or rate limit reached (HTTP {code}: {detail}); wait or raise the plan's limits"
    elif code == 429:
        text = f"Diffbot kept rate-limiting the request (HTTP 429: {detail}); try again later"
    elif code >= 500:
        text = f"Diffbot is failing (HTTP {code}: {detail}); try again later"
    else:
        text = f"Diffbot rejected the request (HTTP {code}: {detail})"
    return DiffbotError(text, status_code=code)


def _redact(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text
