"""What the benchmark scripts share: the line that says where and when they ran, and saving their
figures as JSON."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def machine() -> str:
    """This machine and today's date, the start of every benchmark's first line."""
    return (
        f"{platform.node()} ({os.cpu_count()} cpus, Python {platform.python_version()}), "
        f"{time.strftime('%Y-%m-%d')}"
    )


def save(path: Path | None, results: Any) -> None:
    """Write ``results`` to ``path`` as indented JSON (nothing when no path was asked for)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2) + "\n")
