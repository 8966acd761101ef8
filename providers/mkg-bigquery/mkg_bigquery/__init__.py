"""The BigQuery warehouse query provider for the Meta Knowledge Graph."""
