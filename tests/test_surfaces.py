"""Parity: the three surfaces are projections of one catalog and give the same results."""

from __future__ import annotations

import json
import re

import pytest
from jsonschema import Draft202012Validator

from interpreter.names import EXECUTE_TOOL, FIND_TOOL, tool_name_individual, tool_name_meta
from interpreter.surfaces import make_surface
from tests.helpers import make_dispatcher, ok_json

pytestmark = pytest.mark.anyio


def surfaces(catalog, handler=lambda r: ok_json({"id": "c1", "name": "web"})):
    d, rec = make_dispatcher(catalog, handler)
    return {name: make_surface(name, catalog, d) for name in ("dynamic", "meta", "individual")}, rec


def test_tool_counts_and_valid_schemas(catalog):
    s, _ = surfaces(catalog)
    assert [t.name for t in s["dynamic"].tools()] == [FIND_TOOL, EXECUTE_TOOL]
    assert len(s["meta"].tools()) == len(catalog.domains)
    assert len(s["individual"].tools()) == len(catalog.actions)
    for surf in s.values():
        for t in surf.tools():
            Draft202012Validator.check_schema(t.input_schema)
            assert t.input_schema["type"] == "object"
            assert re.match(r"^[A-Za-z0-9_-]{1,64}$", t.name)
            assert len(t.description) <= 2048


def test_every_action_is_registered_on_every_surface(catalog):
    s, _ = surfaces(catalog)
    meta_actions = {f"{t.name.removeprefix('arcane_')}.{a}" for t in s["meta"].tools() for a in t.input_schema["properties"]["action"]["enum"]}
    assert meta_actions == set(catalog.actions)
    assert {t.name for t in s["individual"].tools()} == {tool_name_individual(a) for a in catalog.actions}


def test_multi_action_tools_advertise_the_most_dangerous_action(catalog):
    s, _ = surfaces(catalog)
    container = s["meta"].tool(tool_name_meta("container"))
    assert container.destructive and not container.read_only
    version = s["meta"].tool(tool_name_meta("version"))
    assert version.read_only and not version.destructive
    execute = s["dynamic"].tool(EXECUTE_TOOL)
    assert execute.destructive and not execute.read_only
    assert s["dynamic"].tool(FIND_TOOL).read_only


def _call_args(surface: str, action_id: str, params: dict, confirm=False):
    domain, name = action_id.split(".", 1)
    if surface == "dynamic":
        return EXECUTE_TOOL, {"action": action_id, "params": params, "confirm": confirm}
    if surface == "meta":
        return tool_name_meta(domain), {"action": name, "params": params, "confirm": confirm}
    return tool_name_individual(action_id), {**params, "confirm": confirm}


def _normalise(text: str) -> str:
    # the only allowed difference: how the server writes action names
    text = re.sub(r"arcane_([a-z0-9_]+?) \(action `([a-z0-9_]+)`\)", r"\1.\2", text)
    for dom in ("container", "image", "volume", "project", "diagnostics"):
        text = re.sub(rf"arcane_{dom}_([a-z0-9_]+)", rf"{dom}.\1", text)
    return text


@pytest.mark.parametrize("action_id,params,confirm", [
    ("container.get", {"containerId": "c1"}, False),
    ("container.list", {"limit": 5}, False),
    ("container.get", {}, False),  # argument error
    ("container.delete", {"containerId": "c1"}, False),  # refused
    ("container.delete", {"containerId": "c1"}, True),
    ("diagnostics.trace", {}, False),  # not served yet
])
async def test_same_call_same_result_on_all_three(catalog, action_id, params, confirm):
    results = {}
    for name in ("dynamic", "meta", "individual"):
        s, rec = surfaces(catalog)
        tool, args = _call_args(name, action_id, params, confirm)
        res = await s[name].call(tool, args)
        results[name] = (res.is_error, res.structured, _normalise(res.text), [(r.method, str(r.url)) for r in rec.requests])
    assert results["dynamic"] == results["meta"] == results["individual"]


async def test_every_action_resolves_through_dynamic_execute(catalog):
    """Every catalog action reaches the dispatcher from execute (bad args on purpose: no request)."""
    s, rec = surfaces(catalog)
    for aid in catalog.actions:
        res = await s["dynamic"].call(EXECUTE_TOOL, {"action": aid, "params": {"__nope": 1}})
        assert res.is_error and "unknown parameter '__nope'" in res.text, (aid, res.text)
    assert rec.requests == []


async def test_envelope_errors_of_multi_action_tools(catalog):
    s, _ = surfaces(catalog)
    res = await s["meta"].call("arcane_container", {"action": "explode"})
    assert res.is_error and (res.error_code, res.error_fields) == ("invalid_arguments", ["action"])
    res = await s["dynamic"].call(EXECUTE_TOOL, {"params": {}})
    assert res.is_error and (res.error_code, res.error_fields) == ("invalid_arguments", ["action"])
    res = await s["dynamic"].call(EXECUTE_TOOL, {"action": "container.list", "parms": {}})
    assert res.is_error and (res.error_code, res.error_fields) == ("invalid_arguments", ["parms"])
    res = await s["individual"].call("arcane_container_get", {"containerId": "c1", "confirm": "yes"})
    assert res.is_error and (res.error_code, res.error_fields) == ("invalid_arguments", ["confirm"])


async def test_find_returns_what_execute_needs(catalog):
    s, _ = surfaces(catalog)
    res = await s["dynamic"].call(FIND_TOOL, {"query": "restart a container", "limit": 3})
    top = res.structured["actions"][0]
    assert top["id"] == "container.restart"
    assert top["required"] == ["containerId"] and top["inputSchema"]["properties"]["containerId"]
    assert top["readOnly"] is False and top["destructive"] is False


def test_tools_list_sizes_are_within_budget(catalog):
    """Deterministic sizes: a budget, so a change that bloats tools/list shows up."""
    s, _ = surfaces(catalog)
    size = {n: len(json.dumps([t.as_wire() for t in surf.tools()], separators=(",", ":"))) for n, surf in s.items()}
    assert size["dynamic"] < 4_000
    assert size["meta"] < 80_000
    assert size["individual"] < 450_000


@pytest.mark.parametrize("surface", ["dynamic", "meta", "individual"])
async def test_tools_list_matches_its_golden_file(catalog, golden, surface):
    """The whole tools/list answer each surface sends, through the MCP server in memory
    (tests/golden/tools_list_<surface>.json; pytest --update-goldens rewrites them)."""
    from mcp import Client

    from interpreter.auditlog import AuditLog
    from interpreter.config import Settings
    from interpreter.dispatch import Dispatcher
    from interpreter.serve import Runtime, build_server

    settings = Settings(surface=surface, audit_log="off")
    dispatcher = Dispatcher(catalog, settings, None, AuditLog("off"))
    server = build_server(Runtime(settings, catalog, dispatcher, make_surface(surface, catalog, dispatcher)))
    async with Client(server) as client:
        listed = await client.list_tools()
    wire = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
    assert len(wire) == {"dynamic": 2, "meta": len(catalog.domains), "individual": len(catalog.actions)}[surface]
    golden(f"tools_list_{surface}", json.dumps(wire, indent=2, ensure_ascii=False) + "\n", ext="json")


@pytest.mark.parametrize("case", ["list", "error", "attachments", "no_structured"])
def test_call_result_is_the_models_wire_form(case):
    """serve hands the SDK wire.call_result (a mapping, one serialising pass fewer): the same
    members and values as the model's dump, for every kind of content."""
    from interpreter.render import ToolResult, render_error
    from interpreter.resource_rules import Link
    from interpreter.response import Blob
    from interpreter.wire import call_result, result_wire

    results = {
        "list": ToolResult("## List\n\n| id |\n|---|\n| a |\n", {"items": [{"id": "a", "n": None, "x": [1, {"y": "z"}]}]}, http_status=200),
        "error": render_error("bad thing", "Fix it.", code="invalid_arguments", fields=["x"]),
        "attachments": ToolResult("## File\n", {"filename": "f.bin"}, blobs=[Blob("f.bin", "application/octet-stream", b"\x00\x01")],
                                  links=[Link("arcane://environments/0/containers/a", "a", "Container a")]),
        "no_structured": ToolResult("plain\n"),
    }
    result = results[case]
    assert json.loads(json.dumps(call_result(result))) == result_wire(result)
