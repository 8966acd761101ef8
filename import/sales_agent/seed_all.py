"""Check Neo4j, run the minimum seeders, and the BigQuery/neocarta ones when configured.

The same as ``mkg seed sales-agent``; idempotent. Neo4j settings come from the environment and .env
files as for every MKG command.
"""

from mkg_core.cli import main

if __name__ == "__main__":
    main(["seed", "sales-agent"])
