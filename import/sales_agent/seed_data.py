"""Preview the RoadFlex dataset without a database: counts, distributions, renewals due, a sample."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mkg_sales_agent.dataset import build_dataset, preview

if __name__ == "__main__":
    print(preview(build_dataset()))
