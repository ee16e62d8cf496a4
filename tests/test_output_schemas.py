"""Experimental output schemas (ARCANE_MCP_OUTPUT_SCHEMAS) on the individual surface,
checked by the SDK client, which validates structuredContent against outputSchema."""

from __future__ import annotations

import json
import os

import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

from interpreter.build.catalog import build
from interpreter.call.dispatch import Dispatcher
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from interpreter.front.serve import Runtime, build_server
from interpreter.front.surfaces import make_surface
from tests.test_e2e import INTERP

pytestmark = pytest.mark.anyio


def runtime(handler, **kw):
    cat = build()
    s = Settings(arcane_url="http://arcane.test", api_key="k", audit_log="off", surface="individual", output_schemas=True, **kw)
    d = Dispatcher(cat, s, ArcaneClient(s, transport=httpx.MockTransport(handler)), AuditLog("off"))
    return Runtime(s, cat, d, make_surface("individual", cat, d))


def test_which_tools_declare_one():
    rt = runtime(lambda r: httpx.Response(200))
    tools = {t.name: t for t in rt.surface.tools()}
    assert tools["arcane_container_list"].output_schema is not None
    assert tools["arcane_container_get"].output_schema is not None
    assert tools["arcane_container_download_logs"].output_schema is None  # a download
    assert tools["arcane_image_pull"].output_schema is None  # a progress stream
    assert tools["arcane_container_logs"].output_schema is None  # a capture: an extra route has no document schema
    checked: set[str] = set()  # many tools share one schema: each distinct one is checked once (the costly part)
    for t in tools.values():
        if t.output_schema is not None:
            assert t.output_schema["type"] == "object"
            key = json.dumps(t.output_schema, sort_keys=True)
            if key not in checked:
                Draft202012Validator.check_schema(t.output_schema)
                checked.add(key)
    rt_off = Runtime(rt.settings, rt.catalog, rt.dispatcher, make_surface("meta", rt.catalog, rt.dispatcher))
    assert all(t.output_schema is None for t in rt_off.surface.tools())  # multi-action tools declare none
    safe = runtime(lambda r: httpx.Response(200), safe_mode=True)
    stools = {t.name: t for t in safe.surface.tools()}
    assert stools["arcane_container_restart"].output_schema is None  # a preview, in safe mode
    assert stools["arcane_container_list"].output_schema is not None


async def test_a_part_that_does_not_fit_is_sent_as_null_and_listed():
    body = {"success": True, "data": [{"id": "c1", "names": ["/a"], "created": "yesterday", "state": "running"}],
            "pagination": {"totalPages": 1, "totalItems": 1, "currentPage": 1, "itemsPerPage": 20}}
    rt = runtime(lambda r: httpx.Response(200, json=body))
    async with Client(build_server(rt), mode="legacy") as client:  # the SDK client validates structuredContent
        res = await client.call_tool("arcane_container_list", {})
    assert not res.is_error
    assert res.structured_content["items"][0]["created"] is None
    assert res.structured_content["items"][0]["id"] == "c1"
    assert "Parts sent as null" in res.content[0].text and "/items/0/created" in res.content[0].text and '"yesterday"' in res.content[0].text


async def test_real_answers_fit_through_a_stdio_session():
    from simulator import start_simulator

    with start_simulator() as sim:
        env = {"PATH": os.environ.get("PATH", ""), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key, "ARCANE_MCP_AUDIT_LOG": "off",
               "ARCANE_MCP_SURFACE": "individual", "ARCANE_MCP_OUTPUT_SCHEMAS": "true"}
        async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode="auto") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["arcane_container_list"].output_schema
            for name, args in [("arcane_container_list", {"limit": 3}), ("arcane_container_get", {"containerId": sim.items("containers")[0]["id"]}),
                               ("arcane_image_list", {}), ("arcane_environment_list", {}), ("arcane_version_get", {})]:
                res = await client.call_tool(name, args)
                assert not res.is_error, res.content[0].text
                assert "Parts sent as null" not in res.content[0].text
        assert sim.violations == []
