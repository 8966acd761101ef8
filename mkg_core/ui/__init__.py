"""The memory viewer (``mkg ui``): a local web page to see, search, correct and review memory.

:mod:`.app` holds the pages, :mod:`.actions` the writes (through the same functions as the CLI and
the MCP tools), :mod:`.reads` and :mod:`.queries` what the pages read, :mod:`.live` the server-sent
events, :mod:`.graphview` the graph page's data, :mod:`.security` the token, cookie, CSRF and
Host/Origin checks. ``docs/ui.md`` describes it.
"""
