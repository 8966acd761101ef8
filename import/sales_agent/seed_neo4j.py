"""Seed the RoadFlex accounts, products, contacts, CSMs and usage into Neo4j.

The same as ``mkg seed sales-agent-graph``; idempotent. Neo4j settings come from the environment and .env
files as for every MKG command.
"""

from mkg_core.cli import main

if __name__ == "__main__":
    main(["seed", "sales-agent-graph"])
