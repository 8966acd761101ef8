"""Print, as JSON, every tool neocarta's MCP server can offer, as its server lists them.

Run by the Python of neocarta's own environment (``<env>/bin/python neocarta_tools.py``): it
registers every search strategy of neocarta's tool modules on one server, which neocarta itself
never does (it registers the best one per level the catalog's indexes allow), and lists them
through an in-memory client. No database is needed: neocarta uses its driver only when a tool runs.
Also printed: the tool modules that run a query without READ routing (``"not_read_only"``).
"""

import asyncio
import importlib
import inspect
import json
import pkgutil

import neocarta._mcp.tools as tool_modules
from fastmcp import Client, FastMCP


async def main() -> None:
    server = FastMCP("every neocarta tool")
    not_read_only = []
    for info in pkgutil.iter_modules(tool_modules.__path__):
        module = importlib.import_module(f"{tool_modules.__name__}.{info.name}")
        source = inspect.getsource(module)
        if source.count("execute_query(") != source.count("routing_=RoutingControl.READ"):
            not_read_only.append(module.__name__)
        for name, register in inspect.getmembers(module, inspect.isfunction):
            if register.__module__ == module.__name__ and name.startswith("register"):
                # (server, driver, database) for the catalog tools, plus the embedder for searches
                extra = [None] * (len(inspect.signature(register).parameters) - 3)
                register(server, None, "neo4j", *extra)
    async with Client(server) as client:
        tools = [tool.model_dump(mode="json", exclude_none=True) for tool in await client.list_tools()]
    print(json.dumps({"tools": tools, "not_read_only": not_read_only}))


asyncio.run(main())
