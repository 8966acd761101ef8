"""Catalog the seeded BigQuery dataset into Neo4j with neocarta.

The same as ``mkg seed sales-agent-neocarta``; idempotent. Neo4j settings come from the environment and .env
files as for every MKG command.
"""

from mkg_core.cli import main

if __name__ == "__main__":
    main(["seed", "sales-agent-neocarta"])
