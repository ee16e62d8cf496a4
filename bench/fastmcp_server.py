"""FastMCP's `from_openapi` over arcane-mcp's embedded OpenAPI document: the comparison of
`make bench` (tests/bench_fastmcp.py drives it). Runs only in the separate venv `make bench`
makes (bench/fastmcp-requirements.txt pins FastMCP): FastMCP is never a dependency of
arcane-mcp or of its tests.

    python bench/fastmcp_server.py serve ARCANE_URL API_KEY   an MCP server on stdio
    python bench/fastmcp_server.py calls BODY_FILE             per-call medians (JSON on stdout)

`calls` times, in one process and through the same in-memory MCP client: FastMCP's
`list_containers` tool answering a 50-container list (BODY_FILE) from an in-memory Arcane; a
bare low-level SDK server's trivial tool call; and the direct httpx call for the same data.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
from fastmcp import FastMCP
from mcp import Client
from mcp.server.lowlevel import Server

DOCUMENT = Path(__file__).resolve().parent.parent / "catalog" / "arcane.openapi.json"
CALLS, WARMUP = 200, 20
TOOL, ARGUMENTS = "list_containers", {"id": "0"}  # FastMCP names the tool after the operationId


def server(client: httpx2.AsyncClient) -> FastMCP:
    """FastMCP's server for the whole document, with its defaults (output schemas included)."""
    return FastMCP.from_openapi(json.loads(DOCUMENT.read_text(encoding="utf-8")), client=client, name="fastmcp-openapi")


def serve(url: str, api_key: str) -> None:
    client = httpx2.AsyncClient(base_url=url.rstrip("/") + "/api", headers={"X-API-Key": api_key}, timeout=30)
    server(client).run(transport="stdio", show_banner=False)


def bare() -> Server:
    tool = types.Tool(name="echo", description="Echo", input_schema={"type": "object", "properties": {"x": {"type": "string"}}})

    async def on_list_tools(ctx, params):
        return types.ListToolsResult(tools=[tool])

    async def on_call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(params.arguments))])

    return Server("bare", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def _median(fn) -> float:
    for _ in range(WARMUP):
        await fn()
    times = []
    for _ in range(CALLS):
        t = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


async def _median_call(srv, name: str, arguments: dict) -> float:
    async with Client(srv, mode="legacy") as c:
        first = await c.call_tool(name, arguments)
        if first.is_error:
            raise RuntimeError(f"{name} answered an error: {first.content[0].text[:200]}")
        return await _median(lambda: c.call_tool(name, arguments))


async def calls(body_file: str) -> dict:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    body = Path(body_file).read_bytes()
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, content=body, headers={"content-type": "application/json"}))
    http = httpx2.AsyncClient(base_url="http://arcane.test/api", transport=transport, headers={"X-API-Key": "arc_bench"})
    direct = await _median(lambda: http.get("/environments/0/containers"))
    trivial = await _median_call(bare(), "echo", {"x": "y"})
    fast = await _median_call(server(http)._mcp_server, TOOL, ARGUMENTS)
    return {"fastmcp_call_ms": fast, "bare_trivial_call_ms": trivial, "direct_httpx_ms": direct,
            "overhead_ms": fast - trivial - direct}


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"] and len(argv) == 3:
        serve(argv[1], argv[2])
    elif argv[:1] == ["calls"] and len(argv) == 2:
        print(json.dumps(anyio.run(calls, argv[1])))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
