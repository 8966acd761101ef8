"""Load the RoadFlex tables into BigQuery (GCP_PROJECT_ID.BIGQUERY_DATASET_ID), then catalog them.

The same as ``mkg seed sales-agent-bigquery``; idempotent. Neo4j settings come from the environment and .env
files as for every MKG command.
"""

from mkg_core.cli import main

if __name__ == "__main__":
    main(["seed", "sales-agent-bigquery"])
