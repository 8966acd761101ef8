"""The neocarta data-catalog provider for the Meta Knowledge Graph."""
