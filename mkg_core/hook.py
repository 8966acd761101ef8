"""``mkg-hook --client NAME EVENT``: the one command a harness runs for every lifecycle event.

Standard library only, and it always exits 0: a hook must never break or slow the agent.
Capture into the local spool and the worker are not part of this release yet, so for now the
hook reads the payload, says on stderr that the event was not recorded, and exits.
"""

from __future__ import annotations

import sys

#: The most a hook reads from stdin, so a runaway payload cannot hold the agent.
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    try:
        sys.stdin.buffer.read(MAX_PAYLOAD_BYTES)
    except (OSError, ValueError, AttributeError):
        pass
    try:
        sys.stderr.write(
            "mkg-hook: event capture is not available in this release; the event was not recorded\n"
        )
    except (OSError, ValueError):
        pass
    return 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
