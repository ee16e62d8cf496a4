"""MCP Apps views, the engine side (front/apps.py, front/viewmodel.py, build/view_rules.py):
the assembled documents, the view model, the view rules' checks, and real SDK client
sessions against `interp serve` and the simulator (stdio and HTTP, both eras, the three
surfaces) with and without the `io.modelcontextprotocol/ui` extension declared."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import mcp.types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from interpreter.build.catalog import build
from interpreter.build.view_rules import compile_view, view_for
from interpreter.errors import AssetError
from interpreter.front import apps
from interpreter.front.names import EXECUTE_TOOL, tool_name_individual, tool_name_meta
from interpreter.front.viewmodel import MAX_ROWS, MAX_TEXT, Builder
from interpreter.text.render import ToolResult
from simulator import start_simulator

from .helpers import dispatch_to, serve_http_in_thread

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.timeout(600)]

INTERP = str(Path(sys.executable).parent / "interp")
ROOT = Path(__file__).resolve().parents[1]
SURFACES = ("dynamic", "meta", "individual")
ERAS = ("legacy", "auto")
VIEW = apps.VIEW_META
DECLARE = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]
HOSTILE_NAME = "/</script><img src=x onerror=alert(1)>\u2028\u2029\u202egnp.exe&amp;\"'`${x}"
BIG = 1_000_000
BIG_STATE = 200_000  # a state file holds at most 256 KiB: the 1 MB value is tested in process
SECRETS = ("Sup3rS3cretDbPass", "mail-relay-pass-4417", "grafana-admin-pass")
HIDDEN_ROW = "$row"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def catalog():
    return build()


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """The demo state with a hostile container name and a 200 KB one."""
    state = tmp_path_factory.mktemp("state")
    for f in (ROOT / "simulator" / "data" / "state").iterdir():
        shutil.copy(f, state / f.name)
    docker = state / "docker.yaml"
    text = docker.read_text(encoding="utf-8")
    assert "names: [/adminer]" in text and "names: [/jellyfin]" in text
    text = text.replace("names: [/adminer]", f"names: [{json.dumps(HOSTILE_NAME)}]")
    text = text.replace("names: [/jellyfin]", f"names: [{json.dumps('/' + 'j' * BIG_STATE)}]")
    docker.write_text(text, encoding="utf-8")
    with start_simulator(state) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh(sim):
    sim.reset()
    sim.set_faults({})
    sim.clear_requests()


def env_for(sim, surface: str = "dynamic", **extra) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
            "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_SURFACE": surface, **extra}


@contextlib.asynccontextmanager
async def stdio(sim, surface: str, era: str, declared: bool, **kw):
    env = env_for(sim, surface, **kw.pop("env", {}))
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode=era,
                      extensions=DECLARE if declared else [], **kw) as client:
        yield client


def call_of(surface: str, action_id: str, params: dict) -> tuple[str, dict]:
    """A tool call of an action on a surface (as the view model's CALLs name them)."""
    if surface == "individual":
        return tool_name_individual(action_id), params
    domain, name = action_id.split(".", 1)
    if surface == "meta":
        return tool_name_meta(domain), {"action": name, "params": params}
    return EXECUTE_TOOL, {"action": action_id, "params": params}


def fill(call: dict, row: dict) -> tuple[str, dict]:
    """A CALL with its {"$row": key} placeholders replaced by the row's values (as a view does)."""
    def walk(v):
        if isinstance(v, dict):
            if set(v) == {HIDDEN_ROW}:
                return row[v[HIDDEN_ROW]]
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return call["name"], walk(call["arguments"])


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def demo_containers(sim) -> list[dict]:
    return httpx.get(f"{sim.url}/api/environments/0/containers", params={"limit": -1},
                     headers={"X-API-Key": sim.api_key}, timeout=30).json()["data"]


# ---------------------------------------------------------------- the documents


def _blocks(doc: str, tag: str) -> list[tuple[str, str]]:
    return re.findall(rf"<{tag}([^>]*)>(.*?)</{tag}>", doc, flags=re.S | re.I)


def _sha(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


@pytest.mark.parametrize("name", ["containers", "container-logs", "container-stats", "project", "project-logs", "images", "default", None])
def test_each_document_allows_exactly_its_own_script_and_style(name):
    doc = apps.document(name)
    scripts, styles = _blocks(doc, "script"), _blocks(doc, "style")
    code = [body for attrs, body in scripts if "application/json" not in attrs]
    configs = [body for attrs, body in scripts if 'id="arcane-config"' in attrs]
    assert len(code) == 1 and len(configs) == 1 and len(scripts) == 2 and len(styles) == 1
    assert json.loads(configs[0]) == {"version": 1, "view": name}
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', doc).group(1)
    assert f"script-src 'sha256-{_sha(code[0])}'" in csp and f"style-src 'sha256-{_sha(styles[0][1])}'" in csp
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp and "frame-ancestors" not in csp
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", doc, flags=re.I)
    assert not any(m in doc for m in apps.MARKERS)
    assert len(doc.encode()) < 40_000


def test_the_config_is_json_that_cannot_close_its_element():
    hostile = "</script><!--\u2028\u2029&<>"
    text = apps.config_json(hostile)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"version": 1, "view": hostile}


@pytest.mark.parametrize("case", ["closing tag", "marker twice", "marker missing", "missing asset"])
def test_assets_that_cannot_make_a_safe_document_are_refused(tmp_path, case):
    for f in apps.ASSETS.iterdir():
        shutil.copy(f, tmp_path / f.name)
    shell = (tmp_path / "shell.html").read_text(encoding="utf-8")
    first_js = next(n for n in (tmp_path / "order.txt").read_text().split() if n.endswith(".js"))
    if case == "closing tag":
        (tmp_path / first_js).write_text("var s = '</SCRIPT >';", encoding="utf-8")
    elif case == "marker twice":
        (tmp_path / "shell.html").write_text(shell + "%%SCRIPT%%", encoding="utf-8")
    elif case == "marker missing":
        (tmp_path / "shell.html").write_text(shell.replace("%%CSP%%", ""), encoding="utf-8")
    else:
        (tmp_path / first_js).unlink()
    with pytest.raises(AssetError):
        apps.document("containers", str(tmp_path))


# ---------------------------------------------------------------- the view model, in process


def _result(action: str, structured, args=None, is_error=False, text="## done\n") -> ToolResult:
    return ToolResult(text, structured, is_error=is_error, action=action, arguments=args or {})


def test_the_view_model_is_bounded_and_json_safe(catalog):
    items = [{"id": f"c{i}", "names": [f"/n{i}"], "image": "x", "state": "running", "status": "Up"} for i in range(MAX_ROWS + 100)]
    items[0].update(names=["/" + "a" * BIG], status=float("nan"), image={"deep": [[[[{"x": 1}]]]]}, state=True)
    model = Builder(catalog, "dynamic", "0").build(view_for(catalog.views, "container.list"),
                                                   _result("container.list", {"items": items, "pagination": {"totalItems": 600}}))
    assert len(model["rows"]) == model["shown"] == MAX_ROWS and model["total"] == 600
    first = model["rows"][0]
    assert len(first["name"]) == MAX_TEXT + 1 and first["name"].endswith("…")
    assert first["status"] is None and first["state"] == "true" and json.loads(first["image"]) == {"deep": [[[[{"x": 1}]]]]}
    values = [v for row in model["rows"] for v in row.values()]
    assert all(v is None or isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values)
    json.dumps(model, allow_nan=False)


def test_an_error_result_carries_its_first_line_and_no_rows(catalog):
    model = Builder(catalog, "meta", "0").build(view_for(catalog.views, "container.list"),
                                                _result("container.list", None, is_error=True, text="Error: <b>refused</b>\nNext step: x"))
    assert model["isError"] is True and model["message"] == "Error: <b>refused</b>" and model["rows"] == []


def test_actions_the_server_does_not_serve_are_left_out(catalog):
    ro = build(__import__("interpreter.build.catalog", fromlist=["BuildOptions"]).BuildOptions(read_only=True))
    model = Builder(ro, "individual", "0").build(view_for(ro.views, "container.list"), _result("container.list", {"items": []}))
    assert [a["id"] for a in model["rowActions"]] == ["logs", "stats"]
    full = Builder(catalog, "individual", "0").build(view_for(catalog.views, "container.list"), _result("container.list", {"items": []}))
    assert {a["id"]: a["destructive"] for a in full["rowActions"]} == {
        "start": False, "stop": False, "restart": False, "logs": False, "stats": False, "delete": True}


async def test_no_secret_of_the_demo_data_reaches_a_view_model(sim, catalog):
    """The model is built from the structuredContent redacted as a resource is: a rule that
    projects the environment, the labels and the Compose file shows their masked values."""
    spy = compile_view({"name": "spy", "widget": "detail", "title": "Spy", "serves": ["container.get", "project.get"],
                        "detail": {"scalars": True, "fields": [{"label": "env", "expr": "config.env"}, {"label": "compose", "expr": "composeContent"},
                                                                {"label": "all", "expr": "@"}]}})
    containers = {c["names"][0]: c["id"] for c in demo_containers(sim)}
    projects = httpx.get(f"{sim.url}/api/environments/0/projects", headers={"X-API-Key": sim.api_key}, timeout=30).json()["data"]
    calls = [("container.get", {"containerId": containers["/blog-db-1"]})] + [("project.get", {"projectId": p["id"]}) for p in projects]
    seen = []
    for action, args in calls:
        result, _ = await dispatch_to(sim, action, args)
        assert not result.is_error, result.text
        seen.append(json.dumps(result.structured))
        result.action, result.arguments = action, args
        model = json.dumps(Builder(catalog, "dynamic", "0").build(spy, result))
        assert not [s for s in SECRETS if s in model], action
    assert [s for s in SECRETS if any(s in t for t in seen)], "the demo data holds none of the secrets this test looks for"


# ---------------------------------------------------------------- the rules' checks


BAD_RULES = {
    "unknown-action.yaml": ("name: unknown-action\nwidget: table\ntitle: T\nserves: [container.lisst]\n"
                            "table: {rows: items, columns: [{key: a, label: A, expr: a}]}\n"),
    "unknown-widget.yaml": "name: unknown-widget\nwidget: pie\ntitle: T\n",
    "bad-jmespath.yaml": "name: bad-jmespath\nwidget: table\ntitle: T\ntable: {rows: 'items[?', columns: [{key: a, label: A, expr: 'a.['}]}\n",
    "row-key.yaml": ("name: row-key\nwidget: table\ntitle: T\ntable:\n  rows: items\n  columns: [{key: a, label: A, expr: a}]\n  filters: [state]\n"
                     "  row_actions: [{id: s, action: container.start, label: S, args: {containerId: {row: id}, nope: 1}}]\n"),
    "misnamed.yaml": "name: other-name\nwidget: detail\ntitle: T\ndefault: true\n",
    "bad-regex.yaml": "name: bad-regex\nwidget: logs\ntitle: T\nlogs: {lines: lines, time: '(['}\n",
}


def test_adversarial_view_rules_are_refused_by_validate(tmp_path):
    (tmp_path / "views").mkdir()
    for name, text in BAD_RULES.items():
        (tmp_path / "views" / name).write_text(text, encoding="utf-8")
    run = subprocess.run([INTERP, "validate", str(tmp_path), "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    found = {(Path(p["file"]).name, p["code"]) for p in json.loads(run.stdout)["problems"]}
    assert {("unknown-action.yaml", "unknown_action"), ("bad-jmespath.yaml", "bad_jmespath"), ("row-key.yaml", "unknown_row_key"),
            ("row-key.yaml", "unknown_param"), ("misnamed.yaml", "view_file_name"), ("misnamed.yaml", "duplicate_default_view"),
            ("bad-regex.yaml", "bad_regex")} <= found
    assert any(f == "unknown-widget.yaml" for f, _ in found)
    assert "Traceback" not in run.stderr


def test_explain_names_the_view_of_an_action_with_its_file_and_line():
    run = subprocess.run([INTERP, "explain", "container.list"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    line = next(ln for ln in run.stdout.splitlines() if "ui://arcane-mcp/view/containers.html" in ln)
    assert re.search(r"rules/views/containers\.yaml:\d+:\d+", line)
    assert "left out" not in run.stdout


def test_explain_says_which_buttons_read_only_mode_leaves_out_and_why():
    run = subprocess.run([INTERP, "explain", "container.list", "--read-only"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    left = sorted(re.findall(r"button (\w+) left out: (\S+)", run.stdout))
    assert left == [("delete", "container.delete"), ("restart", "container.restart"), ("start", "container.start"), ("stop", "container.stop")]
    assert all("ARCANE_MCP_READ_ONLY" in ln for ln in run.stdout.splitlines() if "left out" in ln)


# ---------------------------------------------------------------- real sessions: stdio


def _expected_tool_uri(surface: str, name: str, catalog) -> str | None:
    if surface == "individual":
        aid = next((a for a in catalog.actions if tool_name_individual(a) == name), None)
        view = view_for(catalog.views, aid) if aid else None
        return view.uri if view is not None and not view.default else None
    return None if name.endswith("find_action") else "ui://arcane-mcp/view/router.html"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("surface", SURFACES)
async def test_a_client_without_the_extension_sees_what_it_saw_before(sim, catalog, surface, era):
    from interpreter.config import load_settings
    from interpreter.front import resources as served_resources
    from interpreter.front.serve import build_runtime

    runtime = build_runtime(load_settings(env_for(sim, surface)))
    before = [t.as_wire() for t in runtime.surface.tools()]
    handlers = served_resources.mcp_handlers(served_resources.for_runtime(runtime.catalog, runtime.dispatcher))
    before_resources = (await handlers["on_list_resources"](None, None)).model_dump(by_alias=True, exclude_none=True, mode="json")["resources"]
    async with stdio(sim, surface, era, declared=False) as client:
        listed = await client.list_tools()
        wire = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
        resources = await client.list_resources()
        result = await client.call_tool(*call_of(surface, "container.list", {"limit": 3}))
        with pytest.raises(MCPError):
            await client.read_resource("ui://arcane-mcp/view/containers.html")
    assert json.dumps(wire, sort_keys=True) == json.dumps(before, sort_keys=True)
    assert not [r for r in resources.resources if r.uri.startswith("ui://")]
    listed_resources = [r.model_dump(by_alias=True, exclude_none=True, mode="json") for r in resources.resources]
    assert json.dumps(listed_resources, sort_keys=True) == json.dumps(before_resources, sort_keys=True)
    assert VIEW not in (result.meta or {}) and not result.is_error


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("surface", SURFACES)
async def test_a_declaring_client_gets_the_views(sim, catalog, surface, era):
    async with stdio(sim, surface, era, declared=True) as client:
        listed = await client.list_tools()
        resources = await client.list_resources()
        read = await client.read_resource("ui://arcane-mcp/view/router.html")
        result = await client.call_tool(*call_of(surface, "container.list", {"limit": -1}))
    for t in listed.tools:
        assert ((t.meta or {}).get("ui") or {}).get("resourceUri") == _expected_tool_uri(surface, t.name, catalog), t.name
    uris = {r.uri: r for r in resources.resources}
    assert {v.uri for v in catalog.views} | {"ui://arcane-mcp/view/router.html"} <= set(uris)
    assert all(uris[u].mime_type == APP_MIME_TYPE and uris[u].meta["ui"]["prefersBorder"] is True for u in uris if u.startswith("ui://"))
    (content,) = read.contents
    assert content.mime_type == APP_MIME_TYPE and content.text == apps.document(None)
    model = result.meta[VIEW]
    assert model["view"] == "containers" and model["widget"] == "table" and model["action"] == "container.list"
    assert len(model["rows"]) == len(demo_containers(sim)) == model["shown"]
    assert {c["key"] for c in model["columns"]} <= set(model["rows"][0])
    names = {r["name"] for r in model["rows"]}
    assert HOSTILE_NAME in names  # a plain string, as Arcane sent it
    assert max(len(n) for n in names) == MAX_TEXT + 1
    expected_tool = call_of(surface, "container.list", {})[0]
    assert model["refresh"]["name"] == expected_tool
    assert {a["call"]["name"] for a in model["rowActions"]} == {call_of(surface, f"container.{x}", {})[0]
                                                                for x in ("start", "stop", "restart", "logs", "stats", "delete")}
    assert len(json.dumps(result.meta[VIEW])) > 0


@pytest.mark.parametrize("era", ERAS)
async def test_logs_stats_project_and_images_views(sim, catalog, era):
    surface = "individual"
    containers = {c["names"][0]: c["id"] for c in demo_containers(sim)}
    projects = httpx.get(f"{sim.url}/api/environments/0/projects", headers={"X-API-Key": sim.api_key}, timeout=30).json()["data"]
    blog = next(p for p in projects if p["name"] == "blog")
    web = containers["/blog-web-1"]
    async with stdio(sim, surface, era, declared=True) as client:
        logs = (await client.call_tool(*call_of(surface, "container.logs", {"containerId": web, "tail": 50, "timestamps": True}))).meta[VIEW]
        stats = (await client.call_tool(*call_of(surface, "container.stats", {"containerId": web, "samples": 3}))).meta[VIEW]
        project = (await client.call_tool(*call_of(surface, "project.get", {"projectId": blog["id"]}))).meta[VIEW]
        plogs = (await client.call_tool(*call_of(surface, "project.logs", {"projectId": blog["id"], "tail": 50}))).meta[VIEW]
        images = await client.call_tool(*call_of(surface, "image.list", {"limit": -1}))
        other = await client.call_tool(*call_of(surface, "version.app", {}))
    assert logs["widget"] == "logs" and logs["lines"] and {ln["stream"] for ln in logs["lines"]} == {"stdout", "stderr"}
    assert all(ln["time"] for ln in logs["lines"]) and not any(ln["text"].startswith("[STDERR]") for ln in logs["lines"])
    assert logs["follow"]["arguments"]["since"] == logs["lines"][-1]["time"]
    assert [c["title"] for c in stats["charts"]] == ["CPU", "Memory", "Network"]
    assert len(stats["charts"][1]["series"][0]["points"]) == 3 and len(stats["charts"][2]["series"][0]["points"]) == 2
    assert project["widget"] == "detail" and len(project["sections"][0]["rows"]) == blog["serviceCount"]
    assert {a["id"]: a["destructive"] for a in project["actions"]} == {"up": False, "down": True, "redeploy": False}
    assert project["actions"][0]["call"]["arguments"]["projectId"] == blog["id"]
    assert plogs["widget"] == "logs" and any(ln["stream"] == "stderr" for ln in plogs["lines"])
    assert len(images.meta[VIEW]["rows"]) == len(images.structured_content["items"])
    assert {"critical", "high", "vulnerabilities", "scan"} <= {c["key"] for c in images.meta[VIEW]["columns"]}
    assert other.meta[VIEW]["view"] == "default" and other.meta[VIEW]["fields"]


# ---------------------------------------------------------------- a view's calls go through the one dispatcher


def _declined(asked: list):
    async def callback(context, params):
        asked.append(params)
        return types.ElicitResult(action="decline")
    return callback


async def _delete_call(client, surface: str, sim) -> tuple[str, dict, str]:
    model = (await client.call_tool(*call_of(surface, "container.list", {"limit": -1}))).meta[VIEW]
    row = next(r for r in model["rows"] if r["state"] == "exited")
    delete = next(a for a in model["rowActions"] if a["id"] == "delete")
    assert delete["destructive"] is True
    name, args = fill(delete["call"], row)
    return name, args, row["id"]


async def test_a_destructive_row_action_asks_and_a_decline_refuses_it_legacy(sim):
    asked: list = []
    async with stdio(sim, "meta", "legacy", declared=True, elicitation_callback=_declined(asked)) as client:
        name, args, _ = await _delete_call(client, "meta", sim)
        sim.clear_requests()
        result = await client.call_tool(name, args)
    assert asked and result.is_error
    assert not [r for r in sim.requests() if r.method == "DELETE"]


async def test_a_destructive_row_action_asks_and_a_decline_refuses_it_2026(sim):
    async with stdio(sim, "dynamic", "auto", declared=True, elicitation_callback=_declined([])) as client:
        assert client.protocol_version == "2026-07-28"
        name, args, _ = await _delete_call(client, "dynamic", sim)
        sim.clear_requests()
        first = await client.session.call_tool(name, args, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        (key,) = first.input_requests
        done = await client.session.call_tool(name, args, input_responses={key: types.ElicitResult(action="decline")},
                                              request_state=first.request_state, allow_input_required=True)
    assert isinstance(done, types.CallToolResult) and done.is_error
    assert not [r for r in sim.requests() if r.method == "DELETE"]


async def test_read_only_mode_refuses_a_write_from_a_view_and_audit_records_the_views_calls(sim, tmp_path):
    audit = tmp_path / "audit.jsonl"
    async with stdio(sim, "individual", "auto", declared=True, env={"ARCANE_MCP_READ_ONLY": "true", "ARCANE_MCP_AUDIT_LOG": str(audit)}) as client:
        model = (await client.call_tool(*call_of("individual", "container.list", {"limit": -1}))).meta[VIEW]
        assert [a["id"] for a in model["rowActions"]] == ["logs", "stats"]
        logs = next(a for a in model["rowActions"] if a["id"] == "logs")
        shown = await client.call_tool(*fill(logs["call"], model["rows"][0]))
        assert shown.meta[VIEW]["view"] == "container-logs"
        with pytest.raises(MCPError):
            await client.call_tool(tool_name_individual("container.restart"), {"containerId": model["rows"][0]["id"]})
    records = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert [r["action"] for r in records if r.get("action") in ("container.list", "container.logs")] == ["container.list", "container.logs"]
    assert not [r for r in sim.requests() if r.method == "POST" and r.path.endswith("/restart")]


async def test_a_restart_from_a_row_reaches_the_simulator(sim):
    async with stdio(sim, "individual", "auto", declared=True) as client:
        model = (await client.call_tool(*call_of("individual", "container.list", {"limit": -1}))).meta[VIEW]
        row = next(r for r in model["rows"] if r["name"] == "/blog-web-1")
        restart = next(a for a in model["rowActions"] if a["id"] == "restart")
        sim.clear_requests()
        done = await client.call_tool(*fill(restart["call"], row))
    assert not done.is_error, text_of(done)
    assert [r.path for r in sim.requests() if r.method == "POST"] == [f"/api/environments/0/containers/{row['id']}/restart"]


# ---------------------------------------------------------------- real sessions: HTTP


@pytest.mark.parametrize("era", ERAS)
async def test_http_lists_are_keyed_by_whether_the_client_declared(sim, era):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_SURFACE": "individual"}
    if era == "legacy":  # a legacy client's capabilities live in its session: stateless HTTP has none to read
        env["ARCANE_MCP_HTTP_STATEFUL"] = "true"
    with serve_http_in_thread(env) as base:
        got = {}
        for declared in (True, False, True):
            async with httpx.AsyncClient(headers={"X-Arcane-API-Key": sim.api_key}, timeout=60) as http, \
                    Client(streamable_http_client(base + "/mcp", http_client=http), mode=era, extensions=DECLARE if declared else []) as client:
                tools = (await client.list_tools()).tools
                listed = (await client.list_resources()).resources
                result = await client.call_tool("arcane_container_list", {"limit": 2})
                got.setdefault(declared, []).append(({t.name: (t.meta or {}).get("ui") for t in tools}, [r.uri for r in listed], result.meta or {}))
    (on, _), off = got[True], got[False][0]
    assert got[True][0][:2] == got[True][1][:2]
    assert on[0]["arcane_container_list"] == {"resourceUri": "ui://arcane-mcp/view/containers.html"}
    assert not any(off[0].values()) and not [u for u in off[1] if u.startswith("ui://")] and VIEW not in off[2]
    assert on[2][VIEW]["shown"] == 2 and {u for u in on[1] if u.startswith("ui://")} >= {"ui://arcane-mcp/view/router.html"}
    assert set(on[1]) - set(off[1]) == {u for u in on[1] if u.startswith("ui://")}


def test_the_extension_adds_only_meta_ui_and_leaves_a_non_declaring_listing_untouched(sim):
    """apps.tool_meta returns a non-declaring client's listing as it is (the very list) and
    adds only `_meta.ui` for a declaring one (cached per listing)."""
    from interpreter.config import load_settings
    from interpreter.front.serve import build_runtime

    runtime = build_runtime(load_settings(env_for(sim, "individual")))
    tools = [t.as_wire() for t in runtime.surface.tools()]
    ext = apps.Apps(runtime)
    assert ext.tool_meta(tools, False) is tools
    on = ext.tool_meta(tools, True)
    assert ext.tool_meta(tools, True) is on
    assert [{k: v for k, v in t.items() if k != "_meta"} for t in on] == tools
    assert sum(1 for t in on if "_meta" in t) == sum(1 for v in runtime.catalog.views if not v.default for _ in v.serves)


# ---------------------------------------------------------------- adversarial inputs of the extension


@pytest.mark.parametrize("uri", ["ui://arcane-mcp/view/../containers.html", "ui://arcane-mcp/view/.html", "ui://arcane-mcp/view/",
                                 "ui://arcane-mcp/view/containers.html\x00", "ui://arcane-mcp/view/contain\u202eers.html",
                                 "ui://arcane-mcp/view/" + "a" * BIG + ".html", "ui://arcane-mcp/view/containers.htm", ""])
def test_a_uri_that_names_no_view_is_no_document(catalog, uri):
    from types import SimpleNamespace

    ext = apps.Apps(SimpleNamespace(catalog=catalog, settings=SimpleNamespace(surface="dynamic")))
    assert ext.read(uri) is None
    assert ext.read("ui://arcane-mcp/view/containers.html").contents[0].text == apps.document("containers")


@pytest.mark.parametrize("settings, expected", [
    ({"mimeTypes": [APP_MIME_TYPE]}, True), ({"mimeTypes": ["text/html"]}, False), ({}, False), ({"mimeTypes": APP_MIME_TYPE}, False),
    ({"mimeTypes": {"a": {"b": [APP_MIME_TYPE]}}}, False), ({"mimeTypes": ["x" * BIG, APP_MIME_TYPE + "\x00"]}, False), (None, False)])
def test_only_a_client_that_declares_the_app_mime_type_is_declared(settings, expected):
    from types import SimpleNamespace

    caps = types.ClientCapabilities(extensions={EXTENSION_ID: settings} if settings is not None else None)
    assert apps.declared(SimpleNamespace(session=SimpleNamespace(client_capabilities=caps))) is expected
    assert apps.declared(SimpleNamespace(session=None)) is False


@pytest.mark.parametrize("era", ERAS)
async def test_a_declaring_clients_pages_carry_every_tools_view(sim, catalog, era):
    """The individual surface with output schemas is listed in pages; a declaring client's
    pages are cut from its own listing (with `_meta.ui`): every tool once, each with its view."""
    async with stdio(sim, "individual", era, declared=True, env={"ARCANE_MCP_OUTPUT_SCHEMAS": "true"}) as client:
        seen, cursor, pages = [], None, 0
        while True:
            page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            seen += page.tools
            pages += 1
            cursor = page.next_cursor
            if not cursor or pages > 20:
                break
        again = await client.list_tools()
    assert pages > 1 and cursor is None
    names = [t.name for t in seen]
    assert len(names) == len(set(names)) == len(catalog.actions)
    assert [t.name for t in again.tools] == names[:len(again.tools)]
    for t in seen:
        assert ((t.meta or {}).get("ui") or {}).get("resourceUri") == _expected_tool_uri("individual", t.name, catalog), t.name
