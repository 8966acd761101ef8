"""Reading a child process's output line by line, with a deadline.

``select`` on a pipe and then ``readline`` on its buffered file loses lines: one ``readline`` may
pull several lines into the file's buffer, and ``select`` then waits on a pipe that has nothing
left. This reads the pipe's descriptor itself and keeps the rest for the next line.
Standard library only.
"""

from __future__ import annotations

import os
import select
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO


__all__ = ["LineReader"]


class LineReader:
    """Lines from a pipe (a child's stdout), each waited for until a deadline."""

    def __init__(self, stream: IO[bytes] | IO[str] | int) -> None:
        self.fd = stream if isinstance(stream, int) else stream.fileno()
        self.rest = b""
        self.ended = False

    def readline(self, deadline: float) -> bytes | None:
        """The next line (without its newline); ``None`` when the deadline (``time.monotonic``)
        passed first. Raises ``EOFError`` when the pipe closed with no whole line left."""
        while b"\n" not in self.rest:
            if self.ended:
                raise EOFError("the pipe closed")
            ready, _, _ = select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.ended = True
                if self.rest:
                    line, self.rest = self.rest, b""
                    return line
                continue
            self.rest += chunk
        line, _, self.rest = self.rest.partition(b"\n")
        return line
