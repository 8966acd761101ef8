"""Gemini CLI support for MKG: the hook payload adapter and ``mkg gemini install``."""

__version__ = "0.1.0"
