"""Per-call engine overhead, in process, for `make bench` (issue 12's "engine overhead" target).

Three MCP servers answer the same tool call through a real in-memory MCP client session, each
fetching the same Arcane answer (a 50-container list) from an in-memory Arcane
(httpx.MockTransport), so network and Arcane cost nothing and only the servers differ:

- baseline: the SDK's low-level `Server` with one hand-written tool that sends the request with
  httpx and returns the JSON text (the least a server can do);
- MCPServer: the SDK's high-level server (the former FastMCP) with the same tool as a typed
  Python function, the way a hand-written server would be;
- arcane-mcp: the engine on each surface, answering `container.list` through the dispatcher
  (argument validation, classification, request building, envelope, render, audit off).

Overhead = median call time minus the baseline's median, in milliseconds. Each call is timed twice:
wall time (perf_counter) and the CPU time of the one thread the client, both servers' tasks and
the in-memory Arcane share (thread_time). On a loaded machine the wall median also counts the
slices other processes took; the CPU median is the work itself, so it is the figure to compare
across runs. Not a test: nothing asserts a time.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from typing import Any

import httpx
import mcp.types as types
from mcp import Client
from mcp.server import MCPServer
from mcp.server.lowlevel import Server

CALLS = 200
WARMUP = 20


def _containers(n: int = 50) -> dict:
    items = [{"id": f"{i:064x}", "names": [f"/svc-{i}"], "image": "nginx:1.27", "imageId": f"sha256:{i:064x}",
              "command": "nginx -g 'daemon off;'", "created": 1764583200 + i, "state": "running" if i % 3 else "exited",
              "status": "Up 3 days", "ports": [], "labels": {"com.docker.compose.project": f"p{i % 5}"}, "mounts": [],
              "networkSettings": {"networks": {}}, "hostConfig": {"networkMode": "bridge"}}
             for i in range(n)]
    return {"success": True, "data": items,
            "pagination": {"totalPages": 1, "totalItems": n, "currentPage": 1, "itemsPerPage": n}}


def _arcane() -> httpx.MockTransport:
    body = json.dumps(_containers()).encode()
    return httpx.MockTransport(lambda request: httpx.Response(200, content=body, headers={"content-type": "application/json"}))


def _http() -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url="http://arcane.test/api", transport=_arcane(), headers={"X-API-Key": "arc_bench"})


def _list_containers_server(name: str, answer) -> Server:
    """A low-level server with one hand-written list_containers tool: it gets the list from
    the in-memory Arcane and returns `answer(response)`."""
    http = _http()
    tool = types.Tool(name="list_containers", description="List containers",
                      input_schema={"type": "object", "properties": {"environmentId": {"type": "string"}}})

    async def on_list_tools(ctx, params):
        return types.ListToolsResult(tools=[tool])

    async def on_call_tool(ctx, params):
        env = (params.arguments or {}).get("environmentId", "0")
        return answer(await http.get(f"/environments/{env}/containers"))

    return Server(name, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def baseline_server() -> Server:
    return _list_containers_server(
        "baseline", lambda resp: types.CallToolResult(content=[types.TextContent(type="text", text=resp.text)]))


def mcpserver_server() -> MCPServer:
    http = _http()
    server = MCPServer("mcpserver")

    @server.tool()
    async def list_containers(environmentId: str = "0") -> str:  # noqa: N803 (Arcane's argument name)
        """List containers."""
        resp = await http.get(f"/environments/{environmentId}/containers")
        return json.dumps(resp.json()["data"])

    return server


async def same_answer_server() -> Server:
    """The baseline's tool answering what the engine answers: the same JSON parsed, the same
    text and the list as structuredContent, returned as a mapping (as serve does). What it
    costs over the baseline is the SDK carrying that answer (validating and serialising
    structuredContent on both ends), which no engine avoids; what the engine costs over it
    is its own work (dispatch, validation, render, audit)."""
    runtime_server = arcane_server("dynamic")
    async with Client(runtime_server, mode="legacy") as client:
        name, args = CALLS_BY_SURFACE["dynamic"]
        text = (await client.call_tool(name, args)).content[0].text

    def answer(resp) -> dict:
        body = resp.json()
        return {"content": [{"type": "text", "text": text, "annotations": {"audience": ["assistant"]}}],
                "structuredContent": {"items": body["data"], "pagination": body["pagination"]}, "isError": False,
                "resultType": "complete"}

    return _list_containers_server("same-answer", answer)


# how each surface calls container.list (the names are the golden tools/list's)
CALLS_BY_SURFACE = {
    "individual": ("arcane_container_list", {}),
    "dynamic": ("arcane_execute_action", {"action": "container.list", "params": {}}),
    "meta": ("arcane_container", {"action": "list", "params": {}}),
}


def arcane_server(surface: str) -> Server:
    from interpreter.auditlog import AuditLog
    from interpreter.config import Settings
    from interpreter.request import ArcaneClient
    from interpreter.serve import build_runtime, build_server

    settings = Settings(arcane_url="http://arcane.test", api_key="arc_bench", audit_log="off", surface=surface)
    runtime = build_runtime(settings, audit=AuditLog("off"), client=ArcaneClient(settings, transport=_arcane()))
    return build_server(runtime)


async def _median_call(server: Any, name: str, arguments: dict) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds) of one call."""
    async with Client(server, mode="legacy") as client:
        for _ in range(WARMUP):
            result = await client.call_tool(name, arguments)
            if result.is_error:
                raise RuntimeError(f"{name} answered an error: {result.content[0].text[:200]}")
        walls, cpus = [], []
        for _ in range(CALLS):
            t, c = time.perf_counter(), time.thread_time()
            await client.call_tool(name, arguments)
            cpus.append(time.thread_time() - c)
            walls.append(time.perf_counter() - t)
    return statistics.median(walls), statistics.median(cpus)


async def measure() -> dict:
    """Median per-call times (ms, wall and CPU) and overheads against the baseline."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would be measured too
    out: dict[str, dict] = {}
    cases: list[tuple[str, Any, str, dict]] = [
        ("baseline (low-level Server, hand-written tool)", baseline_server(), "list_containers", {}),
        ("MCPServer (ex-FastMCP), hand-written tool", mcpserver_server(), "list_containers", {}),
        ("baseline answering the engine's text + structuredContent", await same_answer_server(), "list_containers", {})]
    for surface in ("individual", "dynamic", "meta"):
        name, args = CALLS_BY_SURFACE[surface]
        cases.append((f"arcane-mcp {surface}: container.list", arcane_server(surface), name, args))
    for label, server, name, args in cases:
        wall, cpu = await _median_call(server, name, args)
        out[label] = {"median_ms": wall * 1000, "cpu_ms": cpu * 1000}
    base = out[cases[0][0]]
    for row in out.values():
        row["overhead_ms"] = row["median_ms"] - base["median_ms"]
        row["cpu_overhead_ms"] = row["cpu_ms"] - base["cpu_ms"]
    return out
