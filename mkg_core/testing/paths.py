"""Where things are: the checkout, this interpreter's console scripts, the dev Neo4j launcher."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Where this interpreter's console scripts (mkg, mkg-hook) are installed.
BIN_DIR = Path(sys.executable).parent
LAUNCHER = REPO_ROOT / "devtools" / "neo4j" / "neo4j-dev"
TEST_PASSWORD = "mkg-test-password"
