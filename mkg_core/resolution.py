"""From a spool row to an event ready for the graph: its harness, project, user and settings.

A row holds the raw payload a hook saw, the identity hints of the hook's environment and its
folder. :class:`EventResolver` parses the payload with the harness's adapter, resolves the project
and the user from that event's own hints (never from whichever hook started the worker), and loads
the settings of that project (its ``.mkg.env`` may pin identity, or point at another Neo4j).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import PayloadError
from .harness import HarnessAdapter
from .identity import PAYLOAD_PROJECT_KEYS, ProjectRef, UserRef, resolve_project, resolve_user
from .sessions import CapturedEvent
from .settings import Settings, load_settings
from .spool import env_hints, is_env_hint

if TYPE_CHECKING:
    from .events import HookEvent
    from .spool import SpoolRow

__all__ = ["CACHE_SECONDS", "EventResolver", "GenericAdapter", "Prepared"]

#: How long resolved settings and identities are trusted, in seconds.
CACHE_SECONDS = 30.0


class GenericAdapter(HarnessAdapter):
    """Parses events of a harness no installed plugin knows, with the shared rules."""

    name = "generic"


@dataclass(frozen=True)
class Prepared:
    """A spool row made ready for the graph."""

    row: SpoolRow
    adapter: HarnessAdapter
    captured: CapturedEvent
    settings: Settings

    @property
    def event(self) -> HookEvent:
        return self.captured.event


class EventResolver:
    """Prepares spool rows; settings and identities are cached for :data:`CACHE_SECONDS`."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        root: str,
        adapters: Mapping[str, HarnessAdapter],
        harnesses: Sequence[HarnessAdapter],
        detect_harness: Callable[[Mapping[str, str]], str | None],
    ) -> None:
        # Per event, identity comes from the hook that saw it, never from whichever hook started
        # the worker: the inherited identity variables are left out and the event's own added.
        self.base_env = {k: v for k, v in environ.items() if not is_env_hint(k) or k == "HOME"}
        self.root = root
        self.adapters = adapters
        self.harnesses = harnesses
        self.detect_harness = detect_harness
        self._settings_cache: dict[Any, tuple[float, Settings]] = {}
        self._identity_cache: dict[Any, tuple[float, ProjectRef, UserRef]] = {}

    def prepare(self, row: SpoolRow) -> Prepared:
        """Raises PayloadError for a row that can never be stored, ConfigError for invalid settings."""
        record = row.record
        payload = record.get("payload")
        if not isinstance(payload, dict):
            raise PayloadError("the spooled record has no payload")
        hints = _str_dict(record.get("env"))
        env = {**self.base_env, **hints}
        adapter, client = self.adapter_for(row.client, env)
        argv_event = record.get("argv_event")
        event = adapter.parse(payload, argv_event if isinstance(argv_event, str) else row.event)
        if event.harness != client:
            event = replace(event, harness=client)
        cwd = record.get("cwd")
        folder = cwd if isinstance(cwd, str) and cwd else None
        project, user = self._identity(payload, env, folder, client)
        settings = self._settings_for(project.root, hints)
        # MKG_PROJECT_ID / MKG_USER_ID set in a settings file pin identity too.
        pins = {
            name: value
            for name, value in (("MKG_PROJECT_ID", settings.project_id), ("MKG_USER_ID", settings.user_id))
            if value and not env.get(name)
        }
        if pins:
            project, user = self._identity(payload, {**env, **pins}, folder, client)
        truncated = record.get("truncated")
        payload_bytes = record.get("payload_bytes")
        captured = CapturedEvent(
            event=event,
            event_id=row.event_id,
            received_at=datetime.fromisoformat(row.received_at),
            client=client,
            project=project,
            user=user,
            payload_bytes=payload_bytes if isinstance(payload_bytes, int) else 0,
            truncated=tuple(str(item) for item in truncated) if isinstance(truncated, list) else (),
        )
        return Prepared(row, adapter, captured, settings)

    def adapter_for(self, client: str, env: dict[str, str]) -> tuple[HarnessAdapter, str]:
        """The adapter for the hook's ``--client`` (detected from the environment for ``auto``)."""
        name = client
        if name in ("", "auto"):
            name = self.detect_harness(env) or "auto"
        adapter = self.adapters.get(name)
        if adapter is not None:
            return adapter, adapter.name
        return GenericAdapter(), name

    def _identity(
        self, payload: dict[str, Any], env: dict[str, str], cwd: str | None, client: str
    ) -> tuple[ProjectRef, UserRef]:
        key = (
            tuple(str(payload.get(k)) for k in PAYLOAD_PROJECT_KEYS),
            tuple(sorted(env_hints(env).items())),
            cwd,
            client,
        )
        now = time.monotonic()
        cached = self._identity_cache.get(key)
        if cached and now - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        project = resolve_project(payload, env, fallback=cwd or self.root)
        user = resolve_user(env, project_root=project.root, client=client, adapters=self.harnesses)
        self._identity_cache[key] = (now, project, user)
        return project, user

    def _settings_for(self, project_root: str | None, hints: dict[str, str]) -> Settings:
        key = (project_root, tuple(sorted(hints.items())))
        now = time.monotonic()
        cached = self._settings_cache.get(key)
        if cached and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        env = {**self.base_env, **hints}
        settings = load_settings(environ=env, project_root=project_root or self.root)
        self._settings_cache[key] = (now, settings)
        return settings


def _str_dict(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(key): str(item) for key, item in value.items()}
