"""A bare MCP SDK low-level server with one tool: the cold-start baseline of the benchmark.

With a JSON file of tools as its argument (tests/golden/tools_list_individual.json), it
lists those instead, answered as a mapping as arcane-mcp's tools/list is: the baseline of
what the SDK and its client pay to carry that many tools, whoever serves them."""

import json
import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(name="echo", description="Echo", input_schema={"type": "object", "properties": {"x": {"type": "string"}}})
LISTED = None  # the tools of the JSON file named on the command line, in their wire form


async def on_list_tools(ctx, params):
    if LISTED is not None:
        return {"tools": LISTED}
    return types.ListToolsResult(tools=[TOOL])


async def on_call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(params.arguments))])


def server() -> Server:
    return Server("bare", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main():
    server_ = server()
    async with stdio_server() as (r, w):
        await server_.run(r, w, server_.create_initialization_options())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as f:
            LISTED = json.load(f)
    anyio.run(main)
