"""The Diffbot news and firmographics provider for the Meta Knowledge Graph."""
