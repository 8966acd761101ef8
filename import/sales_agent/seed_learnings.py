"""Seed the RoadFlex bootstrap learnings into the current project (MKG_PROJECT_ID pins it).

The same as ``mkg seed sales-agent-learnings``; idempotent. Neo4j settings come from the environment and .env
files as for every MKG command.
"""

from mkg_core.cli import main

if __name__ == "__main__":
    main(["seed", "sales-agent-learnings"])
