"""One long-lived ``neocarta-mcp`` subprocess per configuration, and an MCP session to it.

neocarta's server takes seconds to start (it loads its data libraries and probes the catalog's
indexes), so it is started on the first tool call and kept: a background thread runs an event loop
that holds the stdio session, and tool calls (which the MKG server runs in worker threads) are
handed to that loop. A server that died is started again on the next call. Its stderr goes to
``<state dir>/neocarta-mcp.log``.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import tempfile
import threading
from collections.abc import Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from mkg_core.errors import MkgError
from mkg_core.runtime import ensure_private_dir, state_dir

START_TIMEOUT = 180.0  # uvx may have to fetch neocarta first
CALL_TIMEOUT = 120.0


class NeocartaUnavailable(MkgError):
    """neocarta's MCP server could not be started or stopped answering."""


class NeocartaBridge:
    def __init__(self, argv: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._listing: dict[str, dict[str, Any]] = {}

    # -- life cycle -------------------------------------------------------------------------------

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._client is not None

    def start(self) -> None:
        with self._lock:
            if self._alive():
                return
            ready = threading.Event()
            failure: list[BaseException] = []
            self._client = None
            self._thread = threading.Thread(
                target=lambda: asyncio.run(self._serve(ready, failure)), name="neocarta-mcp", daemon=True
            )
            self._thread.start()
            if not ready.wait(START_TIMEOUT):
                raise NeocartaUnavailable(
                    f"neocarta-mcp did not start within {START_TIMEOUT:g} s ({self._hint()})"
                )
            if failure or self._client is None:
                reason = f"{type(failure[0]).__name__}: {failure[0]}" if failure else "it exited"
                raise NeocartaUnavailable(f"neocarta-mcp could not start: {reason} ({self._hint()})")

    async def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        try:
            with (
                tempfile.TemporaryDirectory(
                    prefix="mkg-neocarta-"
                ) as cwd,  # neocarta reads a .env in its cwd
                self.log_path.open("a", encoding="utf-8") as errlog,
            ):
                params = StdioServerParameters(
                    command=self.argv[0], args=self.argv[1:], env=self.env, cwd=cwd
                )
                async with Client(
                    stdio_client(params, errlog=errlog), read_timeout_seconds=CALL_TIMEOUT
                ) as client:
                    self._listing = {
                        tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for tool in (await client.list_tools()).tools
                    }
                    self._loop = asyncio.get_running_loop()
                    self._stop = asyncio.Event()
                    self._client = client
                    ready.set()
                    await self._stop.wait()
        except BaseException as exc:  # reported to the caller waiting in start()
            failure.append(exc)
        finally:
            self._client = None
            ready.set()

    def close(self) -> None:
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
            thread.join(timeout=10)

    def _hint(self) -> str:
        return f"command: {' '.join(self.argv)}; its log: {self.log_path}"

    # -- calls ------------------------------------------------------------------------------------

    def tools(self) -> frozenset[str]:
        """The names of the tools neocarta's server offers (it chose its searches when it started)."""
        return frozenset(self.listing())

    def listing(self) -> dict[str, dict[str, Any]]:
        """neocarta's tools as its server lists them (name, description, input schema, ...), by name."""
        self.start()
        return dict(self._listing)

    def call(self, name: str, arguments: Mapping[str, Any], timeout: float = CALL_TIMEOUT) -> Any:
        """Call one of neocarta's tools; return its structured answer (or its text)."""
        self.start()
        client, loop = self._client, self._loop
        if client is None or loop is None:
            raise NeocartaUnavailable(f"neocarta-mcp is not running ({self._hint()})")
        future = asyncio.run_coroutine_threadsafe(client.call_tool(name, dict(arguments)), loop)
        try:
            result = future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise NeocartaUnavailable(f"neocarta did not answer {name} within {timeout:g} s") from None
        except Exception as exc:
            raise NeocartaUnavailable(f"neocarta failed on {name}: {type(exc).__name__}: {exc}") from None
        texts = [getattr(block, "text", "") for block in result.content]
        if result.is_error:
            raise MkgError(
                f"neocarta {name}: {' '.join(t for t in texts if t) or 'failed without a message'}"
            )
        structured = result.structured_content
        if structured is not None:
            return structured.get("result", structured) if set(structured) == {"result"} else structured
        joined = "\n".join(t for t in texts if t)
        try:
            return json.loads(joined)
        except ValueError:
            return joined


_bridges: dict[tuple[tuple[str, ...], frozenset[tuple[str, str]]], NeocartaBridge] = {}
_registry_lock = threading.Lock()


def bridge(argv: list[str], env: Mapping[str, str]) -> NeocartaBridge:
    """The shared bridge for this command and environment."""
    key = (tuple(argv), frozenset(env.items()))
    with _registry_lock:
        found = _bridges.get(key)
        if found is None:
            log_dir = Path(ensure_private_dir(state_dir()))
            found = _bridges[key] = NeocartaBridge(argv, env, log_dir / "neocarta-mcp.log")
        return found


@atexit.register
def _close_all() -> None:
    for item in list(_bridges.values()):
        item.close()
