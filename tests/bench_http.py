"""`make bench`, HTTP mode for teams: 50 concurrent clients over 10 keys make 2,000 tool
calls against the simulator through `interp serve --http`; errors, p50/p99 latency, and the
server's resident memory per additional key server. Not a test: nothing asserts a time.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CLIENTS = int(os.environ.get("BENCH_HTTP_CLIENTS", "50"))
KEYS = int(os.environ.get("BENCH_HTTP_KEYS", "10"))
CALLS = int(os.environ.get("BENCH_HTTP_CALLS", "2000"))
CALL = {"action": "container.list", "params": {"limit": 5}}
WARM_SESSIONS = 5


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _error_kind(res) -> str:
    """An error result's kind: its structured code, else its first line (cut), so a run
    reports what failed, not only how often."""
    if isinstance(res.structured_content, dict) and res.structured_content.get("code"):
        return str(res.structured_content["code"])
    first = next((c.text for c in res.content if getattr(c, "text", None)), "?")
    return first.splitlines()[0][:120] if first else "?"


async def _client(url: str, key: str, calls: int, latencies: list[float], errors: list[str]) -> None:
    async with httpx.AsyncClient(headers={"X-Arcane-API-Key": key}, timeout=120) as http, \
            Client(streamable_http_client(url, http_client=http), mode="auto") as client:
        for _ in range(calls):
            t = time.perf_counter()
            try:
                res = await client.call_tool("arcane_execute_action", CALL)
                if res.is_error:
                    errors.append("tool error: " + _error_kind(res))
            except Exception as exc:  # counted, the run goes on
                errors.append(type(exc).__name__)
            latencies.append(time.perf_counter() - t)


async def measure() -> dict:
    from simulator import start_simulator
    from tests.helpers import free_port, start_http_server

    keys = [f"arc_bench_key_{i:02d}_0123456789abcdef" for i in range(KEYS)]
    with start_simulator() as sim:
        for k in keys:
            sim.add_api_key(k, kind="personal")
        port = free_port()
        env = {"PATH": os.environ.get("PATH", ""), "ARCANE_URL": sim.url, "ARCANE_MCP_AUDIT_LOG": "off",
               "ARCANE_MCP_ALLOW_ANONYMOUS": "false"}
        interp = str(Path(sys.executable).parent / "interp")
        proc = start_http_server([interp, "serve", "--http", "--port", str(port)], env, port)
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            base_rss = rss_kib(proc.pid)
            # the first key's server, then a few more sessions of it: what any first calls
            # allocate once (lazy imports, caches, the allocator's high-water mark) is not
            # counted as the price of the next keys
            for _ in range(WARM_SESSIONS):
                await _client(url, keys[0], 2, [], [])
            one_rss = rss_kib(proc.pid)
            for k in keys[1:]:
                await _client(url, k, 1, [], [])
            all_rss = rss_kib(proc.pid)
            latencies: list[float] = []
            errors: list[str] = []
            per = CALLS // CLIENTS
            t = time.perf_counter()
            await asyncio.gather(*[_client(url, keys[i % KEYS], per, latencies, errors) for i in range(CLIENTS)])
            wall = time.perf_counter() - t
            pool = httpx.get(f"http://127.0.0.1:{port}/health").json()["pool"]
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    lat = sorted(latencies)
    kinds: dict[str, int] = {}
    for e in errors:
        kinds[e] = kinds.get(e, 0) + 1
    return {"clients": CLIENTS, "keys": KEYS, "calls": len(lat), "errors": len(errors), "error_kinds": kinds, "wall_s": wall,
            "calls_per_s": len(lat) / wall, "p50_ms": statistics.median(lat) * 1000,
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
            "rss_start_mib": base_rss / 1024, "rss_first_key_mib": one_rss / 1024,
            "rss_per_extra_key_mib": (all_rss - one_rss) / 1024 / max(1, KEYS - 1), "pool": pool}


if __name__ == "__main__":
    print(asyncio.run(measure()))
