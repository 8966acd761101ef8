"""Meta Knowledge Graph: a self-learning, graph-structured memory layer for AI coding agents.

Plugins write ``from mkg_core import hookimpl``; see :mod:`mkg_core.hookspecs` for the contract.
"""

from .hookspecs import hookimpl

__all__ = ["hookimpl"]
