"""The mkg-diffbot plugin.

It installs and registers under the ``mkg`` entry-point group, but contributes nothing yet:
its MCP tools, capture handlers and schema arrive in a later release, and until then it offers
none rather than pretending to.
"""
