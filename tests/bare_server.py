"""A bare MCP SDK low-level server with one tool: the cold-start baseline of the benchmark."""

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(name="echo", description="Echo", input_schema={"type": "object", "properties": {"x": {"type": "string"}}})


async def on_list_tools(ctx, params):
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
    anyio.run(main)
