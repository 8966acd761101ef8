"""Codex support for the Meta Knowledge Graph."""

from .adapter import CodexAdapter

__all__ = ["CodexAdapter"]
