"""tools/list in pages (interpreter/front/pages.py, ARCANE_MCP_TOOLS_PAGE_BYTES) and the
output schemas a tool lists (interpreter/build/schema.py lean_output).

Every client here follows nextCursor from the first page to the last: the Python SDK's
(in memory, over stdio and over streamable HTTP, in both protocol eras) and the TypeScript
SDK v1's (Node 22 from the npm registry into the same cache as tests/test_conformance.py).
Each sees every tool once, in the order of a second listing; every page is within the
budget; a short list is one page without nextCursor; a cursor the listing did not hand out
is -32602 naming `cursor`."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import asynccontextmanager
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client, MCPError, StdioServerParameters

from interpreter.build.catalog import BuildOptions, build
from interpreter.build.schema import OUTPUT_ID_PREFIX, PATH, fit, lean_output, output_schema
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings, load_settings
from interpreter.errors import ConfigError
from interpreter.front import pages, surfaces
from interpreter.front.call_records import AuditLog
from interpreter.front.serve import Runtime, build_server
from interpreter.front.surfaces import make_surface
from tests import simulator_fixtures
from tests.helpers import make_dispatcher, ok_json
from tests.test_conformance import NODE_MAJOR, cache_dir, npm_install
from tests.test_e2e import ERAS, INTERP
from tests.test_http import client_for, in_process

pytestmark = pytest.mark.anyio
sim, fresh = simulator_fixtures.sim, simulator_fixtures.fresh

DEFAULT_BUDGET = Settings().tools_page_bytes
MIB = 1024 * 1024


def _wire_bytes(tools: list[dict]) -> int:
    """A page's tools as the answer carries them: a compact JSON array, UTF-8."""
    return len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode())


def _dumped(tools) -> list[dict]:
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]


async def list_all(client, limit: int = 1000) -> tuple[list[dict], list[int], list[str]]:
    """Every page from the first: (the tools in order, each page's bytes, the cursors seen)."""
    tools, sizes, cursors, cursor = [], [], [], None
    for _ in range(limit):
        page = await client.list_tools(cursor=cursor)
        dumped = _dumped(page.tools)
        tools += dumped
        sizes.append(_wire_bytes(dumped))
        cursor = page.next_cursor
        if cursor is None:
            return tools, sizes, cursors
        cursors.append(cursor)
    raise AssertionError(f"more than {limit} pages")


def runtime(catalog, surface: str = "individual", **settings) -> Runtime:
    d, _ = make_dispatcher(catalog, lambda r: ok_json({}), surface=surface, **settings)
    return Runtime(d.settings, catalog, d, make_surface(surface, catalog, d))


# ---------------------------------------------------------------- pages.cut


def test_a_cut_keeps_the_order_and_each_page_within_its_budget():
    tools = [{"name": f"t{i}", "description": "é" * (i % 7) + "x" * (50 + i * 13 % 400)} for i in range(300)]
    for budget in (300, 1000, 5000, 40_000):
        cut = pages.cut(tools, budget)
        assert cut.starts[0] == 0 and list(cut.starts) == sorted(set(cut.starts))
        seen = []
        for number in range(len(cut.starts)):
            page, more = cut.page(number)
            assert page and _wire_bytes(page) <= cut.sizes[number]
            assert cut.sizes[number] <= budget or len(page) == 1  # a longer tool is a page of its own
            assert (more is None) == (number == len(cut.starts) - 1)
            seen += page
        assert seen == tools
        assert pages.cut(tools, budget) == cut  # the same places, the same tag, every time
    assert pages.cut(tools, 1000).tag != pages.cut(tools, 1001).tag  # the budget is part of what a cursor names
    assert pages.cut(tools, 1000).tag != pages.cut(tools[:-1], 1000).tag  # and so is every tool


def test_a_tool_longer_than_the_budget_is_a_page_of_its_own():
    tools = [{"name": "a"}, {"name": "b", "description": "x" * 500}, {"name": "c"}]
    cut = pages.cut(tools, 100)
    assert [cut.page(n)[0] for n in range(len(cut.starts))] == [[tools[0]], [tools[1]], [tools[2]]]


def test_a_short_list_is_one_page_without_a_cursor():
    cut = pages.cut([{"name": "a"}], DEFAULT_BUDGET)
    assert cut.page(0) == ([{"name": "a"}], None) and pages.page_number(cut, None) == 0
    assert pages.cut([], DEFAULT_BUDGET).page(0) == ([], None)


# ---------------------------------------------------------------- the setting


@pytest.mark.parametrize("value", ["..", "0", "-5", "12\x00", "\n", "1" * MIB, "{\"a\": {\"b\": 1}}", "10 parsecs"])
def test_a_bad_page_size_names_the_variable(value):
    with pytest.raises(ConfigError) as ei:
        load_settings({"ARCANE_MCP_TOOLS_PAGE_BYTES": value})
    assert (ei.value.setting, ei.value.code) == ("ARCANE_MCP_TOOLS_PAGE_BYTES", "invalid_setting")
    assert len(ei.value.format()) < 300


def test_the_page_size_takes_units():
    assert load_settings({"ARCANE_MCP_TOOLS_PAGE_BYTES": ""}).tools_page_bytes == DEFAULT_BUDGET  # empty: unset, as every setting
    assert load_settings({"ARCANE_MCP_TOOLS_PAGE_BYTES": "64KiB"}).tools_page_bytes == 64 * 1024
    assert load_settings({}).tools_page_bytes == DEFAULT_BUDGET < MIB // 2


# ---------------------------------------------------------------- the sizes the defaults give


@pytest.mark.parametrize("dialect", ["standard", "portable"])
async def test_default_lists_are_one_page_and_a_long_one_pages_well_under_a_mib(catalog, dialect):
    """dynamic, meta and individual (no output schemas) with the default budget: one page,
    no nextCursor. The individual surface with output schemas: several pages, each within
    the budget, far under the 1 MiB an SSE reader may refuse."""
    for surface, outputs in [("dynamic", False), ("meta", False), ("individual", False), ("individual", True)]:
        rt = runtime(catalog, surface, output_schemas=outputs, schema_dialect=dialect)
        async with Client(build_server(rt)) as client:
            first = await client.list_tools()
            tools, sizes, cursors = await list_all(client)
        if not outputs:
            assert first.next_cursor is None and not cursors and len(tools) == len(rt.surface.tools()), surface
        else:
            assert len(cursors) >= 1 and max(sizes) <= DEFAULT_BUDGET < MIB // 2, sizes
        assert [t["name"] for t in tools] == [t.name for t in rt.surface.tools()]


# ---------------------------------------------------------------- in memory, both eras


@pytest.mark.parametrize("era", ERAS)
async def test_the_cursor_loop_sees_every_tool_once_in_the_same_order(catalog, era):
    rt = runtime(catalog, output_schemas=True, tools_page_bytes=64 * 1024)
    async with Client(build_server(rt), mode=era) as client:
        tools, sizes, cursors = await list_all(client)
        again, _, cursors_again = await list_all(client)
        # a page asked for out of order is the same page
        back = await client.list_tools(cursor=cursors[-1])
        middle = await client.list_tools(cursor=cursors[0])
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names)) == len(catalog.actions)
    assert tools == again and cursors == cursors_again and len(cursors) >= 10
    assert max(sizes) <= 64 * 1024
    assert back.next_cursor is None and _dumped(back.tools) == tools[-len(back.tools):]
    assert middle.next_cursor == cursors[1] and _dumped(middle.tools)[0] == tools[len(_first_page(tools, sizes))]


def _first_page(tools: list[dict], sizes: list[int]) -> list[dict]:
    """The tools of the first page (its bytes are sizes[0])."""
    for n in range(1, len(tools) + 1):
        if _wire_bytes(tools[:n]) == sizes[0]:
            return tools[:n]
    raise AssertionError("no prefix has the first page's size")


async def _refusal(client, cursor: Any) -> dict:
    with pytest.raises(MCPError) as ei:
        await client.list_tools(cursor=cursor)
    error = ei.value.error
    assert error.code == -32602 and "cursor" in error.message, error
    assert isinstance(error.data, dict) and error.data.get("field") == "cursor", error.data
    return error.data


@pytest.mark.parametrize("era", ERAS)
async def test_a_cursor_not_handed_out_is_refused_naming_cursor(catalog, era):
    rt = runtime(catalog, output_schemas=True)
    other = runtime(catalog, output_schemas=True, schema_dialect="portable")
    async with Client(build_server(other), mode=era) as client:
        foreign = (await client.list_tools()).next_cursor
    async with Client(build_server(rt), mode=era) as client:
        mine = (await client.list_tools()).next_cursor
        assert foreign is not None and mine is not None and foreign != mine
        tag, number = mine.split(".")
        reasons = {
            "another view's (portable dialect)": (foreign, "other_list"),
            "empty": ("", "not_a_cursor"),
            "1 MB": ("a" * MIB, "not_a_cursor"),
            "1 MB of a valid one": (mine + "0" * MIB, "not_a_cursor"),
            "a control character": (mine + "\x00", "not_a_cursor"),
            "a newline": (mine + "\n", "not_a_cursor"),
            "a path": ("..", "not_a_cursor"),
            "page 0": (f"{tag}.0", "not_a_cursor"),
            "a page past the last": (f"{tag}.99", "no_such_page"),
            "a forged tag": (("0" if tag[0] != "0" else "1") + tag[1:] + "." + number, "other_list"),
            "upper case": (mine.upper(), "not_a_cursor" if mine.upper() != mine else "other_list"),
            "a unicode digit": (f"{tag}.\u0661", "not_a_cursor"),
            "deep nesting as text": ("[" * 10_000, "not_a_cursor"),
        }
        for why, (cursor, reason) in reasons.items():
            assert (await _refusal(client, cursor))["reason"] == reason, why
        assert (await client.list_tools(cursor=mine)).tools  # the session goes on


async def test_a_cursor_of_the_view_before_a_change_is_refused(catalog):
    """The credential's view changed (Runtime.narrow: a 403 re-read what it may do): a
    cursor cut from the wider list is refused, and the narrower list is listed whole."""
    rt = runtime(catalog, output_schemas=True, tools_page_bytes=64 * 1024)
    narrower = build(BuildOptions(read_only=True))
    async with Client(build_server(rt)) as client:
        before = (await client.list_tools()).next_cursor
        rt.catalog = narrower
        rt.view += 1
        rt.surface = make_surface("individual", narrower, rt.dispatcher)
        assert (await _refusal(client, before))["reason"] == "other_list"
        tools, _, _ = await list_all(client)
    assert [t["name"] for t in tools] == [t.name for t in rt.surface.tools()] and len(tools) < len(catalog.actions)


@pytest.mark.parametrize("dialect", ["standard", "portable"])
async def test_a_tools_meta_is_on_its_page_as_it_was(catalog, dialect, monkeypatch):
    """Whatever `_meta` a tool has (tasks, views' `_meta.ui`) survives the pages and the dialect."""
    wire = surfaces.ToolSpec.as_wire

    def with_meta(self):
        out = wire(self)
        if len(self.name) % 3 == 0:
            out["_meta"] = {"ui": {"resourceUri": f"ui://arcane/{self.name}", "visibility": ["model", "app"]},
                            "io.arcane-mcp/note": {"nested": [1, {"deep": None}]}}
        return out

    monkeypatch.setattr(surfaces.ToolSpec, "as_wire", with_meta)
    rt = runtime(catalog, output_schemas=True, schema_dialect=dialect, tools_page_bytes=48 * 1024)
    async with Client(build_server(rt)) as client:
        tools, _, cursors = await list_all(client)
    assert cursors
    expected = {t.name: with_meta(t)["_meta"] for t in rt.surface.tools() if len(t.name) % 3 == 0}
    got = {t["name"]: t["_meta"] for t in tools if "_meta" in t}
    assert got == expected and len(got) > 50


# ---------------------------------------------------------------- stdio and HTTP


@asynccontextmanager
async def stdio_client(sim, era: str, **env):
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
            "ARCANE_MCP_AUDIT_LOG": "off", **env}
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=full), mode=era) as client:
        yield client


@pytest.mark.parametrize("era", ERAS)
async def test_stdio_pages(sim, catalog, era):
    async with stdio_client(sim, era, ARCANE_MCP_SURFACE="individual", ARCANE_MCP_OUTPUT_SCHEMAS="true") as client:
        tools, sizes, cursors = await list_all(client)
        again, _, _ = await list_all(client)
        assert (await _refusal(client, "x" * MIB))["reason"] == "not_a_cursor"
        res = await client.call_tool("arcane_volume_list", {})  # a tool of a later page: the SDK validates its structuredContent
        assert not res.is_error and "Parts sent as null" not in res.content[0].text
    assert tools == again and cursors and max(sizes) <= DEFAULT_BUDGET
    assert len({t["name"] for t in tools}) == len(tools) == len(catalog.actions)


@pytest.mark.parametrize("era", ERAS)
async def test_http_pages_per_key(sim, catalog, era):
    """Over streamable HTTP each key lists its own view in pages: a scoped key's cursor is
    refused on the admin's listing and the other way round; each listing is whole."""
    from tests.test_access import GRANTS, create_key

    scoped, _ = create_key(sim, GRANTS)
    with in_process(sim, ARCANE_MCP_SURFACE="individual", ARCANE_MCP_TOOLS_PAGE_BYTES="16KiB") as (base, _):
        async with client_for(base, sim.api_key, era) as admin, client_for(base, scoped, era) as narrow:
            wide_tools, wide_sizes, wide_cursors = await list_all(admin)
            narrow_tools, narrow_sizes, narrow_cursors = await list_all(narrow)
            assert (await _refusal(narrow, wide_cursors[0]))["reason"] == "other_list"
            if narrow_cursors:
                assert (await _refusal(admin, narrow_cursors[0]))["reason"] == "other_list"
            assert await list_all(admin) == (wide_tools, wide_sizes, wide_cursors)  # the cache answers each page the same
    assert len(wide_tools) == len({t["name"] for t in wide_tools}) == len(catalog.actions)
    assert 0 < len(narrow_tools) < len(wide_tools) and len({t["name"] for t in narrow_tools}) == len(narrow_tools)
    assert max(wide_sizes + narrow_sizes) <= 16 * 1024 and len(wide_cursors) >= 10


@pytest.mark.parametrize("cursor", [{"a": {"b": {"c": "d"}}}, ["x"], 7, None])
def test_http_refuses_a_cursor_that_is_not_a_string(sim, cursor):
    """A cursor that is not a string (an object, nested; a list; a number) is refused by the
    request's own check, naming cursor; a null cursor is no cursor: the first page."""
    from tests.test_http_edges import modern, rpc, send

    with in_process(sim, ARCANE_API_KEY=sim.api_key, ARCANE_MCP_SURFACE="individual", ARCANE_MCP_OUTPUT_SCHEMAS="true") as (base, _):
        frame, headers = modern(5)
        frame["params"]["cursor"] = cursor
        answer = rpc(send(base, body=frame, **headers))
    if cursor is None:
        assert answer["result"]["tools"] and answer["result"]["nextCursor"]
    else:
        assert answer["error"]["code"] == -32602 and "cursor" in answer["error"]["message"], answer


# ---------------------------------------------------------------- the TypeScript SDK v1


@pytest.fixture(scope="module")
def ts_client() -> tuple[str, str]:
    """(node, the SDK's package directory): Node 22 and @modelcontextprotocol/sdk@1 from the npm registry."""
    node_dir, sdk_dir = cache_dir() / f"node{NODE_MAJOR}", cache_dir() / "ts-sdk1"
    npm_install(node_dir, f"node@{NODE_MAJOR}", "node", lambda v: v.split(".")[0] == NODE_MAJOR)
    npm_install(sdk_dir, "@modelcontextprotocol/sdk@1", "@modelcontextprotocol/sdk", lambda v: v.split(".")[0] == "1")
    return str(node_dir / "node_modules" / ".bin" / "node"), str(sdk_dir / "node_modules" / "@modelcontextprotocol" / "sdk")


SCRIPT = os.path.join(os.path.dirname(__file__), "fixtures", "ts_list_tools.mjs")
TS_CALLS = ("arcane_container_list", "arcane_image_list", "arcane_network_list", "arcane_volume_list", "arcane_project_list",
            "arcane_environment_list", "arcane_version_get", "arcane_system_docker_info", "arcane_dashboard_get")


@pytest.mark.parametrize("outputs", ["true", "false"])
async def test_the_typescript_sdk_follows_the_cursor(sim, catalog, ts_client, outputs):
    node, sdk = ts_client
    env = {"ARCANE_API_KEY": sim.api_key, "ARCANE_MCP_SURFACE": "individual", "ARCANE_MCP_OUTPUT_SCHEMAS": outputs}
    with in_process(sim, **env) as (base, _):
        r = subprocess.run([node, SCRIPT, sdk, base + "/mcp", "2", ",".join(TS_CALLS)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        async with client_for(base, None) as client:
            python_tools, _, _ = await list_all(client)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    first, second = (sum(round_["pages"], []) for round_ in out["rounds"])
    assert first == second == [t["name"] for t in python_tools]
    assert len(set(first)) == len(first) == len(catalog.actions)
    assert (len(out["rounds"][0]["pages"]) > 1) == (outputs == "true")
    assert out["refused"]["code"] == -32602
    # tools of every page, their structuredContent checked by the SDK (Ajv, formats asserted) against what it listed
    assert out["calls"] == {name: {"isError": False, "structured": True} for name in TS_CALLS}, out["calls"]


# ---------------------------------------------------------------- output schemas


def test_listed_output_schemas_accept_what_the_derived_ones_accept(catalog):
    """lean_output: the same values on sample documents (each member null, or of its
    type), a stable $id of its own content, nothing but type "object" at the top."""
    d, _ = make_dispatcher(catalog, lambda r: ok_json({}), output_schemas=True)
    surf = make_surface("individual", catalog, d)
    ids: dict[str, str] = {}
    for t in surf.tools():
        if t.output_schema is None:
            continue
        a = catalog.actions[surf._action_of[t.name]]
        derived = output_schema(catalog.document, catalog.document["paths"][a.path][a.method.lower()], catalog.conventions)
        assert lean_output(derived) == t.output_schema and t.output_schema["type"] == "object"
        assert t.output_schema["$id"].startswith(OUTPUT_ID_PREFIX)
        body = json.dumps({k: v for k, v in t.output_schema.items() if k != "$id"}, sort_keys=True)
        assert ids.setdefault(t.output_schema["$id"], body) == body  # one $id, one schema
        old, new = Draft202012Validator(derived), Draft202012Validator(t.output_schema)
        for sample in _samples(derived):
            assert old.is_valid(sample) == new.is_valid(sample), (t.name, sample)
    assert len(ids) > 100


def _samples(schema: dict) -> list[dict]:
    """Values for a schema's top-level members: each null, a string, a number, a list and
    an object (most fail, some fit: both validators must say the same)."""
    members = list(schema.get("properties") or {})[:6]
    out = [{}]
    for value in (None, "x", 1, 1.5, [], [None], [{}], {}, {"a": None}, True):
        out.append(dict.fromkeys(members, value))
    return out


async def test_every_individual_tool_answer_on_demo_data_fits_its_listed_schema(sim, catalog):
    """Every read-only tool with an output schema whose path names an item the demo data
    has, called on the simulator: Arcane's answer fits the listed schema exactly when it
    fits the derived one, and what the tool returns (parts that do not fit sent as null)
    validates against the listed schema."""
    settings = Settings(arcane_url=sim.url, api_key=sim.api_key, audit_log="off", surface="individual", output_schemas=True)
    client = ArcaneClient(settings)
    d = Dispatcher(catalog, settings, client, AuditLog("off"))
    surf = make_surface("individual", catalog, d)
    checked = 0
    try:
        for t in surf.tools():
            a = catalog.actions[surf._action_of[t.name]]
            args = _demo_arguments(sim, catalog, a) if t.output_schema is not None and a.read_only else None
            if args is None:
                continue
            raw = await d.dispatch(Call(a.id, dict(args), False, "individual", t.name))
            if raw.is_error or raw.structured is None:
                continue
            op = catalog.document["paths"][a.path][a.method.lower()]
            derived = Draft202012Validator(output_schema(catalog.document, op, catalog.conventions))
            listed = Draft202012Validator(t.output_schema)
            assert derived.is_valid(raw.structured) == listed.is_valid(raw.structured), t.name
            served = await surf.call(t.name, dict(args))
            assert not served.is_error and listed.is_valid(served.structured), (t.name, served.text[-500:])
            assert listed.is_valid(fit(raw.structured, listed)[0])
            checked += 1
    finally:
        await client.aclose()
    assert checked >= 60, checked


def _demo_arguments(sim, catalog, action) -> dict | None:
    """The action's required arguments from the demo data (its path parameters, each the
    first item of its collection); None when one is not a path parameter."""
    path = {b.arg: b.wire for b in action.bindings if b.location == PATH}
    required = [r for r in action.required if r != catalog.env_arg]
    if any(r not in path for r in required):
        return None
    sample = sim.sample_path_params(action.operation_id) if path else {}
    return {arg: sample[wire] for arg, wire in path.items() if arg in required and wire in sample}


@pytest.mark.parametrize("era", ERAS)
async def test_output_schemas_and_calls_over_http_in_pages(sim, era):
    """With the defaults and output schemas on, the Python SDK's client over HTTP lists every
    page (one answer was past its 1 MiB SSE event limit) and validates structuredContent
    against the schema it listed: tools of every page, called after a paged listing."""
    env = {"ARCANE_API_KEY": sim.api_key, "ARCANE_MCP_SURFACE": "individual", "ARCANE_MCP_OUTPUT_SCHEMAS": "true"}
    with in_process(sim, **env) as (base, _):
        async with client_for(base, None, era) as client:
            tools, sizes, cursors = await list_all(client)
            names = [t["name"] for t in tools]
            assert cursors
            for name in ("arcane_container_list", "arcane_network_list", "arcane_volume_list", "arcane_version_get"):
                res = await client.call_tool(name, {})
                assert not res.is_error and res.structured_content is not None, name
    assert {"arcane_container_list", "arcane_volume_list"} <= set(names)
