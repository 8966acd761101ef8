from __future__ import annotations

from collections.abc import Iterator

import pytest
from mkg_diffbot.fake import FakeDiffbot, serve


@pytest.fixture
def diffbot() -> Iterator[FakeDiffbot]:
    with serve() as fake:
        yield fake
