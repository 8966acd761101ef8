"""The one error hierarchy of MKG. Messages say what to do next."""

from __future__ import annotations

__all__ = ["ConfigError", "GraphUnavailable", "MkgError", "PayloadError", "PluginError"]


class MkgError(Exception):
    """Base class of every error MKG raises on purpose."""


class PluginError(MkgError):
    """A plugin broke the contract: a bad contribution, a duplicate name, a failing startup hook."""


class ConfigError(MkgError):
    """Settings could not be loaded or are invalid."""


class PayloadError(MkgError):
    """A harness payload could not be turned into a HookEvent.

    Carries a one-line ``reason`` meant for a diagnostic on stderr; raising it never means the
    agent should be interrupted.
    """

    def __init__(self, reason: str, *, harness: str | None = None) -> None:
        self.reason = reason
        self.harness = harness
        prefix = f"{harness}: " if harness else ""
        super().__init__(f"{prefix}{reason}")


class GraphUnavailable(MkgError):
    """Neo4j could not be reached, or refused the credentials."""
