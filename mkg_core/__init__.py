"""Meta Knowledge Graph: a self-learning, graph-structured memory layer for AI coding agents.

Plugins write ``from mkg_core import hookimpl``; see :mod:`mkg_core.hookspecs` for the contract.
The marker is loaded on first use, so the hook fast path (which imports ``mkg_core.hook``)
never pays for the plugin machinery.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .hookspecs import hookimpl

__all__ = ["hookimpl"]


def __getattr__(name: str) -> object:
    if name == "hookimpl":
        from .hookspecs import hookimpl

        return hookimpl
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
