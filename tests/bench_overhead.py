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

Each arcane-mcp surface is measured twice: with the same answer at every call (the engine's
per-process memos of escaped cells and valid arguments then always hit) and with a new answer
at every call (new IDs, names and times in each of the 220 lists, more cells than the cell memo
holds), which is what a session listing a changing host sees.

Overhead = median call time minus the baseline's median, in milliseconds. Each call is timed twice:
wall time (perf_counter) and the CPU time of the one thread the client, both servers' tasks and
the in-memory Arcane share (thread_time). On a loaded machine the wall median also counts the
slices other processes took; the CPU median is the work itself, so it is the figure to compare
across runs. Not a test: nothing asserts a time.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import json
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import mcp.types as types
from mcp import Client
from mcp.server import MCPServer
from mcp.server.lowlevel import Server

CALLS = 200
WARMUP = 20
FRESH = ", new data each call"  # the label's suffix of the rows measured with a new answer each call


def _containers(n: int = 50, start: int = 0) -> dict:
    """Arcane's answer to a container list of `n` containers; `start` numbers them (another
    start: other IDs, names, times and statuses)."""
    items = [{"id": f"{i:064x}", "names": [f"/svc-{i}"], "image": "nginx:1.27", "imageId": f"sha256:{i:064x}",
              "command": "nginx -g 'daemon off;'", "created": 1764583200 + i, "state": "running" if i % 3 else "exited",
              "status": f"Up {i % 97} minutes" if start else "Up 3 days", "ports": [],
              "labels": {"com.docker.compose.project": f"p{i % 5}"}, "mounts": [],
              "networkSettings": {"networks": {}}, "hostConfig": {"networkMode": "bridge"}}
             for i in range(start, start + n)]
    return {"success": True, "data": items,
            "pagination": {"totalPages": 1, "totalItems": n, "currentPage": 1, "itemsPerPage": n}}


def _arcane(fresh: bool = False) -> httpx.MockTransport:
    """The in-memory Arcane: the same 50-container answer at every request, or (fresh) a new
    one at each of the first WARMUP + CALLS requests of each timed session and again after
    (the bodies are made before, so making them is not timed)."""
    if not fresh:
        body = json.dumps(_containers()).encode()
        return httpx.MockTransport(lambda request: httpx.Response(200, content=body, headers={"content-type": "application/json"}))
    bodies = [json.dumps(_containers(start=1000 + 50 * k)).encode() for k in range(WARMUP + CALLS)]
    turn = itertools.count()
    return httpx.MockTransport(lambda request: httpx.Response(200, content=bodies[next(turn) % len(bodies)],
                                                              headers={"content-type": "application/json"}))


def _http(fresh: bool = False) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url="http://arcane.test/api", transport=_arcane(fresh), headers={"X-API-Key": "arc_bench"})


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


def arcane_server(surface: str, fresh: bool = False) -> Server:
    from interpreter.call.request import ArcaneClient
    from interpreter.config import Settings
    from interpreter.front.call_records import AuditLog
    from interpreter.front.serve import build_runtime, build_server

    settings = Settings(arcane_url="http://arcane.test", api_key="arc_bench", audit_log="off", surface=surface)
    runtime = build_runtime(settings, audit=AuditLog("off"), client=ArcaneClient(settings, transport=_arcane(fresh)))
    return build_server(runtime)


ROUNDS = 10  # the CALLS of each case are made in this many rounds, every case in each round


async def _interleaved(cases: dict[str, Callable[[], Awaitable[Any]]], calls: int = CALLS) -> dict[str, tuple[float, float]]:
    """(median wall seconds, median CPU seconds) of one call of each case. The cases take
    turns, calls // ROUNDS calls at a time, so a slower spell of a shared machine falls on
    all of them rather than on whichever ran then."""
    for label, call in cases.items():
        for _ in range(WARMUP):
            result = await call()
            if getattr(result, "is_error", False):
                raise RuntimeError(f"{label} answered an error: {result.content[0].text[:200]}")
    samples: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in cases}
    for _ in range(ROUNDS):
        for label, call in cases.items():
            walls, cpus = samples[label]
            for _ in range(max(calls // ROUNDS, 1)):
                t, c = time.perf_counter(), time.thread_time()
                await call()
                cpus.append(time.thread_time() - c)
                walls.append(time.perf_counter() - t)
    return {label: (statistics.median(w), statistics.median(c)) for label, (w, c) in samples.items()}


BASELINE = "baseline (low-level Server, hand-written tool)"
TRIVIAL = "bare SDK server: trivial tool call"
DIRECT, DIRECT_FRESH = "direct httpx: the 50-container list", f"direct httpx: the 50-container list{FRESH}"


async def measure() -> dict:
    """Median per-call times (ms, wall and CPU) of every case, and their overheads against
    the baseline; the TRIVIAL and DIRECT rows are the subtrahends of the engine overhead."""
    from tests import bare_server

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would be measured too
    servers: list[tuple[str, Any, str, dict]] = [
        (BASELINE, baseline_server(), "list_containers", {}),
        ("MCPServer (ex-FastMCP), hand-written tool", mcpserver_server(), "list_containers", {}),
        ("baseline answering the engine's text + structuredContent", await same_answer_server(), "list_containers", {}),
        (TRIVIAL, bare_server.server(), "echo", {"x": "y"})]
    for fresh in (False, True):
        for surface in ("individual", "dynamic", "meta"):
            name, args = CALLS_BY_SURFACE[surface]
            servers.append((f"arcane-mcp {surface}: container.list{FRESH if fresh else ''}", arcane_server(surface, fresh), name, args))
    # what a start made lives as long as the process: `interp serve` moves it out of the
    # collector's sight (cli._start); so does the bench, or each collection would walk the
    # six catalogs and be measured in whichever call it fell
    gc.freeze()
    async with contextlib.AsyncExitStack() as stack:
        cases: dict[str, Callable[[], Awaitable[Any]]] = {}
        for label, server, name, args in servers:
            client = await stack.enter_async_context(Client(server, mode="legacy"))
            cases[label] = functools.partial(client.call_tool, name, args)
        for label, fresh in ((DIRECT, False), (DIRECT_FRESH, True)):
            cases[label] = functools.partial(_http(fresh).get, "/environments/0/containers")
        medians = await _interleaved(cases)
    out = {label: {"median_ms": wall * 1000, "cpu_ms": cpu * 1000} for label, (wall, cpu) in medians.items()}
    base = out[BASELINE]
    for row in out.values():
        row["overhead_ms"] = row["median_ms"] - base["median_ms"]
        row["cpu_overhead_ms"] = row["cpu_ms"] - base["cpu_ms"]
    return out
