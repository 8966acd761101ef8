"""``meta-knowledge-graph``: the MCP server entry point.

The MCP server is not part of this release yet; the command says so and exits non-zero instead
of pretending to serve.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    sys.stderr.write(
        "meta-knowledge-graph: the MCP server is not available in this release of mkg-core.\n"
        "Hooks, the graph schema and `mkg doctor` work; the server will arrive in a later release.\n"
    )
    sys.exit(2)
