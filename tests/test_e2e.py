"""End-to-end: a real MCP client session over stdio (a subprocess of `interp serve`)
against the Arcane simulator on loopback, in both protocol eras, once per surface.
The same client scenarios against a real Arcane are in real_arcane_e2e.py (make e2e).
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

from interpreter.front.names import EXECUTE_TOOL, Namer, tool_name_individual, tool_name_meta
from tests.helpers import free_port, list_tools_then_drift_read, start_http_server

pytestmark = pytest.mark.anyio
INTERP = str(Path(sys.executable).parent / "interp")
SURFACES = ("dynamic", "meta", "individual")
ERAS = ("legacy", "auto")  # auto negotiates protocol 2026-07-28 with a 2.3 server


@asynccontextmanager
async def session(url: str, key: str, surface: str, era: str, **env_extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": url, "ARCANE_API_KEY": key,
           "ARCANE_MCP_SURFACE": surface, "ARCANE_MCP_AUDIT_LOG": "off", **env_extra}
    params = StdioServerParameters(command=INTERP, args=["serve"], env=env)
    async with Client(params, mode=era) as client:
        await list_tools_then_drift_read(client, url)  # as a client does after initialize; the start's reads are then done
        yield client


class Caller:
    """Calls an action the way the given surface takes it."""

    def __init__(self, client, surface: str):
        self.client, self.surface = client, surface

    def name(self, action_id: str) -> str:
        return Namer(self.surface)(action_id)

    async def __call__(self, action_id: str, params: dict | None = None, confirm: bool = False):
        params = params or {}
        domain, name = action_id.split(".", 1)
        if self.surface == "dynamic":
            tool, args = EXECUTE_TOOL, {"action": action_id, "params": params, "confirm": confirm}
        elif self.surface == "meta":
            tool, args = tool_name_meta(domain), {"action": name, "params": params, "confirm": confirm}
        else:
            tool, args = tool_name_individual(action_id), {**params, "confirm": confirm}
        return await self.client.call_tool(tool, args)


def text(res) -> str:
    return res.content[0].text


def next_step(res) -> str:
    """An error's next step (the text after `Next step:`; empty when there is none)."""
    return text(res).partition("Next step:")[2]


def _container_name(item: dict) -> str:
    names = item.get("names") or [item.get("name", "")]
    return str(names[0]).lstrip("/")


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("surface", SURFACES)
async def test_scenarios(sim, surface, era):
    async with session(sim.url, sim.api_key, surface, era) as client:
        assert client.protocol_version == ("2025-11-25" if era == "legacy" else "2026-07-28")
        call = Caller(client, surface)
        tools = (await client.list_tools()).tools
        expected = {"dynamic": 2, "meta": 49, "individual": 425}[surface]
        assert len(tools) == expected
        for tool in tools:
            Draft202012Validator.check_schema(tool.input_schema)

        # list containers
        res = await call("container.list", {"limit": 10})
        assert not res.is_error, text(res)
        items = res.structured_content["items"]
        assert len(items) == 10 and res.structured_content["pagination"]["totalItems"] > 50
        assert "10 item(s) —" in text(res)

        # get one by name
        running = next(c for c in sim.items("containers") if c.get("state") == "running")
        name = _container_name(running)
        res = await call("container.get", {"containerId": name})
        assert not res.is_error, text(res)
        assert res.structured_content["id"] == running["id"]

        # restart one (with confirm: harmless on a non-destructive action)
        sim.clear_requests()
        res = await call("container.restart", {"containerId": running["id"]}, confirm=True)
        assert not res.is_error, text(res)
        assert [(r.method, r.path) for r in sim.requests()] == [("POST", f"/api/environments/0/containers/{running['id']}/restart")]

        # stop -> the simulator's state changed
        res = await call("container.stop", {"containerId": running["id"]})
        assert not res.is_error, text(res)
        state = next(c for c in sim.items("containers") if c["id"] == running["id"])["state"]
        assert state == "exited"
        await call("container.start", {"containerId": running["id"]})

        # an NDJSON pull that succeeds, and one that ends in an error line
        res = await call("image.pull", {"imageName": "nginx", "tag": "1.27"})
        assert not res.is_error, text(res)
        assert res.structured_content["status"] == "done" and res.structured_content["activityId"]
        sim.set_faults({"ndjson_error": "manifest for nginx:nope not found"})
        try:
            res = await call("image.pull", {"imageName": "nginx", "tag": "nope"})
        finally:
            sim.set_faults({})
        assert res.is_error and "manifest for nginx:nope not found" in text(res)
        assert res.structured_content is None

        # a text download
        res = await call("container.download_logs", {"containerId": running["id"]})
        assert not res.is_error, text(res)
        assert res.structured_content["text"] and "```" in text(res)

        # a bad argument -> isError naming the field
        res = await call("container.list", {"limit": "many"})
        assert res.is_error and "'limit'" in text(res).splitlines()[0]

        # an unknown container -> isError with the next step, in this surface's names
        res = await call("container.get", {"containerId": "no-such-container"})
        assert res.is_error and call.name("container.list") in next_step(res), text(res)

        # a destructive call without confirm -> refused with the question; only its reads were sent
        sim.clear_requests()
        res = await call("container.delete", {"containerId": running["id"]})
        assert res.is_error and "confirm: true" in text(res)
        assert sim.requests() and all(r.method == "GET" for r in sim.requests())
        assert any(c["id"] == running["id"] for c in sim.items("containers"))

        # Arcane unreachable (connection dropped) -> isError; the server keeps serving
        sim.set_faults({"drop": True})
        try:
            res = await call("container.list")
        finally:
            sim.set_faults({})
        assert res.is_error and "ARCANE_URL" in next_step(res), text(res)
        res = await call("container.list", {"limit": 1})
        assert not res.is_error, text(res)


@pytest.mark.parametrize("era", ERAS)
async def test_unreachable_arcane_server_keeps_serving(era):
    async with session("http://127.0.0.1:9", "arc_x", "dynamic", era) as client:
        for _ in range(2):
            res = await client.call_tool(EXECUTE_TOOL, {"action": "container.list"})
            assert res.is_error and "ARCANE_URL" in next_step(res), text(res)
        assert len((await client.list_tools()).tools) == 2


@pytest.mark.parametrize("era", ERAS)
async def test_unknown_tool_is_a_protocol_error(sim, era):
    from mcp import MCPError

    async with session(sim.url, sim.api_key, "individual", era) as client:
        with pytest.raises(MCPError) as ei:
            await client.call_tool("arcane_no_such_tool", {})
        assert ei.value.code == -32602


@pytest.fixture(scope="module")
def http_server(sim):
    """`interp serve --http`: plain streamable HTTP on 127.0.0.1 (the team mode comes later)."""
    port = free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off"}
    proc = start_http_server([INTERP, "serve", "--http", "--port", str(port)], env, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("era", ERAS)
async def test_streamable_http(http_server, era):
    import httpx

    health = httpx.get(http_server + "/health").json()
    assert health["status"] == "ok" and health["surface"] == "dynamic"
    async with Client(http_server + "/mcp", mode=era) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["arcane_find_action", EXECUTE_TOOL]
        res = await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {"limit": 3}})
        assert not res.is_error and len(res.structured_content["items"]) == 3
    # DNS-rebinding protection: a foreign Host header is refused
    bad = httpx.post(http_server + "/mcp", headers={"Host": "evil.example", "Content-Type": "application/json"}, content=b"{}")
    assert bad.status_code == 421


@pytest.mark.parametrize("era", ERAS)
async def test_progress_notifications_from_log_frames(sim, catalog, era):
    """A pull's {"log":…} frames reach a real MCP client as progress notifications with
    increasing values and messages written from the log text."""
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async with session(sim.url, sim.api_key, "dynamic", era) as client:
        res = await client.call_tool(EXECUTE_TOOL, {"action": "image.pull", "params": {"imageName": "alpine", "tag": "3.20"}},
                                     progress_callback=on_progress)
    assert not res.is_error, text(res)
    assert res.structured_content["lastLines"] and res.structured_content["activityId"]
    assert seen and [p for p, _ in seen] == sorted({p for p, _ in seen})

    last = catalog.conventions.streams.message(res.structured_content["lastLines"][-1])
    assert seen[-1][1] == last  # the last line always goes out
    assert all(m and "{" not in m for _, m in seen)  # text, not frames
