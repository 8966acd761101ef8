"""Claude Code support for the Meta Knowledge Graph."""

from .adapter import ClaudeAdapter

__all__ = ["ClaudeAdapter"]
