"""Issue 10: the MCP resources, end to end through real MCP client sessions against the
simulator (stdio subprocesses of `interp serve` for the full scenario in both protocol
eras; in-memory sessions over the same build_server for the error and mode cases)."""

from __future__ import annotations

import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters

from interpreter.build.load import Loaded, load_sources
from interpreter.build.resource_rules import rule_problems
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from interpreter.front.serve import build_runtime, build_server
from tests.helpers import list_tools_then_drift_read

pytestmark = pytest.mark.anyio
INTERP = str(Path(sys.executable).parent / "interp")
ERAS = ("legacy", "auto")

FIXED = ["arcane://environments", "arcane://version", "arcane://tools"]
GUIDES = ["arcane://guides/back-up-and-restore-a-volume", "arcane://guides/deploy-compose-project",
          "arcane://guides/diagnose-an-unhealthy-container", "arcane://guides/update-images-safely"]
TEMPLATES = ["arcane://environment/{environmentId}", "arcane://environment/{environmentId}/containers",
             "arcane://environment/{environmentId}/container/{containerId}", "arcane://environment/{environmentId}/projects",
             "arcane://environment/{environmentId}/project/{projectId}", "arcane://environment/{environmentId}/images",
             "arcane://tools/{id}"]


@asynccontextmanager
async def stdio_session(sim, era: str, audit: Path, **env_extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": str(audit), **env_extra}
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode=era) as client:
        await list_tools_then_drift_read(client, sim.url)  # as a client does after initialize; the start's reads are then done
        yield client


@asynccontextmanager
async def memory_session(url: str, key: str, era: str = "auto", **settings_kw):
    settings = Settings(arcane_url=url, api_key=key, audit_log="off", **settings_kw)
    audit = AuditLog("off")
    runtime = build_runtime(settings, audit=audit)
    server = build_server(runtime)
    await runtime.dispatcher.client.start()
    try:
        async with Client(server, mode=era) as client:
            client.audit = audit
            yield client
    finally:
        await runtime.dispatcher.client.aclose()


def _json(result) -> dict:
    (content,) = result.contents
    assert content.mime_type == "application/json"
    return json.loads(content.text)


def _container(sim, name: str) -> dict:
    return next(c for c in sim.items("containers") if name in [n.lstrip("/") for n in c.get("names") or [c.get("name", "")]])


@pytest.mark.parametrize("era", ERAS)
async def test_list_templates_and_read_every_resource(sim, era, tmp_path):
    audit = tmp_path / "audit.jsonl"
    async with stdio_session(sim, era, audit) as client:
        assert client.server_capabilities.resources is not None
        listed = await client.list_resources()
        assert [r.uri for r in listed.resources] == FIXED + GUIDES
        assert all(r.mime_type == ("text/markdown" if "/guides/" in r.uri else "application/json") and r.name and r.title
                   for r in listed.resources)
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == TEMPLATES
        if era == "auto":  # 2026-07-28: the cache hints are on every resource result
            assert (listed.ttl_ms, listed.cache_scope) == (0, "private")
            assert (templates.ttl_ms, templates.cache_scope) == (0, "private")

        project = next(p for p in sim.items("projects") if not p.get("isArchived"))
        container = _container(sim, "blog-web-1")
        reads = {
            "arcane://environments": lambda v: {e["id"] for e in v["items"]} == {e["id"] for e in sim.items("environments", None)},
            "arcane://version": lambda v: "currentVersion" in v,
            "arcane://environment/0": lambda v: v["id"] == "0",
            "arcane://environment/0/containers": lambda v: (
                len(v["items"]) == v["counts"]["totalContainers"] == len(sim.items("containers"))
                and v["counts"]["runningContainers"] + v["counts"]["stoppedContainers"] == v["counts"]["totalContainers"]),
            f"arcane://environment/0/container/{container['id']}": lambda v: v["id"] == container["id"],
            "arcane://environment/0/container/blog-web-1": lambda v: v["id"] == container["id"],
            "arcane://environment/0/projects": lambda v: all(not p.get("isArchived") for p in v["items"]) and v["items"],
            f"arcane://environment/0/project/{project['id']}": lambda v: v["id"] == project["id"],
            "arcane://environment/0/images": lambda v: len(v["items"]) == len(sim.items("images")),
        }
        for uri, check in reads.items():
            result = await client.read_resource(uri)
            assert result.contents[0].uri == uri
            assert result.contents[0].text.isascii()  # Arcane's hostile text only as \u escapes
            assert "\n  " in result.contents[0].text  # indented JSON
            value = _json(result)
            assert check(value), uri
            if era == "auto":
                assert (result.ttl_ms, result.cache_scope) == (0, "private")
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    reads_logged = [r for r in records if r.get("message") == "resource read"]
    assert len(reads_logged) == len(reads)
    assert all(r["surface"] == "resource" and r["tool"] == "resources/read" and r["outcome"] == "executed" for r in reads_logged)
    assert {r["action"] for r in reads_logged} == {e["action"] for e in compiled_data()}


def compiled_data() -> list[dict]:
    from interpreter.build.catalog import build

    return [{"uri": r.uri, "action": r.action} for r in build().resources.data]


async def test_lists_ask_for_every_item_and_version_sends_no_credential(sim):
    sim.clear_requests()
    async with memory_session(sim.url, sim.api_key) as client:
        await client.read_resource("arcane://environment/0/containers")
        await client.read_resource("arcane://version")
    reqs = sim.requests()
    listing = next(r for r in reqs if r.path.endswith("/environments/0/containers"))
    assert ("limit", "-1") in listing.query and listing.credential == "api_key"
    version = next(r for r in reqs if r.path.endswith("/app-version"))
    assert version.credential is None
    assert version.header("x-api-key") is None and version.header("authorization") is None


async def test_a_resource_read_equals_the_tool_call_value_without_secrets(sim):
    """The value is what the tool call returns as structuredContent (the read is redacted,
    the tool call is not): every member the redaction keeps is identical."""
    async with memory_session(sim.url, sim.api_key, surface="dynamic") as client:
        res = await client.call_tool("arcane_execute_action", {"action": "environment.get", "params": {"id": "0"}})
        value = _json(await client.read_resource("arcane://environment/0"))
    hidden = {p.split("/")[1] for p in (value.get("_redacted") or {}).get("paths", [])}
    assert {k: v for k, v in value.items() if k not in hidden and k != "_redacted"} == \
        {k: v for k, v in res.structured_content.items() if k not in hidden}


def _tool_error_text(res) -> str:
    assert res.is_error
    return res.content[0].text.strip()


async def test_errors_are_json_rpc_errors(sim):
    async with memory_session(sim.url, sim.api_key, surface="dynamic") as client:
        # Arcane's 404: resource not found, the tool call's message, uri and status
        with pytest.raises(MCPError) as err:
            await client.read_resource("arcane://environment/0/container/no-such-container")
        tool = await client.call_tool("arcane_execute_action", {"action": "container.get", "params": {"containerId": "no-such-container"}})
        assert err.value.code == -32602
        assert err.value.data == {"uri": "arcane://environment/0/container/no-such-container", "status": 404}
        assert err.value.message == _tool_error_text(tool)
        # no resource has that URI (an unknown scheme path, an empty or slashed variable)
        for uri in ("arcane://nope", "arcane://environment//containers", "arcane://environment/0/container/a/b", "file:///etc/passwd"):
            with pytest.raises(MCPError) as err:
                await client.read_resource(uri)
            assert err.value.code == -32602 and err.value.data == {"uri": uri}, uri
        # another Arcane status: status × -100
        sim.set_faults({"error_5xx": {"status": 500, "match": "/environments/*/images", "count": 1}})
        try:
            with pytest.raises(MCPError) as err:
                await client.read_resource("arcane://environment/0/images")
        finally:
            sim.set_faults({})
        assert err.value.code == -50000 and err.value.data["status"] == 500
        # an unreachable Docker daemon: still not found, and the message is the tool call's
        sim.set_faults({"daemon_down": "0"})
        try:
            with pytest.raises(MCPError) as err:
                await client.read_resource("arcane://environment/0/container/blog-web-1")
            tool = await client.call_tool("arcane_execute_action", {"action": "container.get", "params": {"containerId": "blog-web-1"}})
        finally:
            sim.set_faults({})
        assert err.value.code == -32602
        assert err.value.message == _tool_error_text(tool)
        assert err.value.data["uri"].endswith("blog-web-1")
        # ... and its hint is not the one of an object that does not exist
        with pytest.raises(MCPError) as missing:
            await client.read_resource("arcane://environment/0/container/no-such-container")
        assert missing.value.message.splitlines()[-1] != err.value.message.splitlines()[-1]
    # a key Arcane refuses: 401 × -100
    async with memory_session(sim.url, "arc_" + "0" * 40) as client:
        with pytest.raises(MCPError) as err:
            await client.read_resource("arcane://environments")
        assert err.value.code == -40100 and err.value.data == {"uri": "arcane://environments", "status": 401}


async def test_unreachable_and_deadline_are_internal_errors(sim):
    from tests.helpers import free_port

    async with memory_session(f"http://127.0.0.1:{free_port()}", "arc_key") as client:
        with pytest.raises(MCPError) as err:
            await client.read_resource("arcane://environments")
        assert err.value.code == -32603 and err.value.data == {"uri": "arcane://environments"}
    sim.set_faults({"latency": {"seconds": 3, "match": "/environments/0/containers"}})
    try:
        async with memory_session(sim.url, sim.api_key, action_timeout=0.5) as client:
            with pytest.raises(MCPError) as err:
                await client.read_resource("arcane://environment/0/containers")
            assert err.value.code == -32603 and "status" not in err.value.data
            assert client.audit.records[-1]["outcome"] == "failed" and client.audit.records[-1]["message"] == "resource read"
    finally:
        sim.set_faults({})


@pytest.mark.parametrize("mode", [{"read_only": True}, {"safe_mode": True}])
async def test_read_only_and_safe_mode_keep_the_resources(sim, mode):
    async with memory_session(sim.url, sim.api_key, **mode) as client:
        assert [r.uri for r in (await client.list_resources()).resources] == FIXED + GUIDES
        assert [t.uri_template for t in (await client.list_resource_templates()).resource_templates] == TEMPLATES
        assert _json(await client.read_resource("arcane://environment/0/container/blog-web-1"))["name"]


async def test_an_excluded_action_takes_its_resource_with_it(sim):
    async with memory_session(sim.url, sim.api_key, exclude_tools=("container.get", "version")) as client:
        assert [r.uri for r in (await client.list_resources()).resources] == ["arcane://environments", "arcane://tools"] + GUIDES
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert templates == [t for t in TEMPLATES if not t.endswith("{containerId}")]
        with pytest.raises(MCPError) as err:
            await client.read_resource("arcane://environment/0/container/blog-web-1")
        assert err.value.code == -32602
        assert _json(await client.read_resource("arcane://environment/0/containers"))["items"]


# ---------------------------------------------------------------- the rules file




def test_rule_problems_name_each_mistake(catalog):
    data = {"data": [
        {"uri": "arcane://a/{x}", "name": "a", "title": "A", "description": "d", "action": "container.gett",
         "arguments": {"containerId": "{y}"}},
        {"uri": "arcane://a/{x}", "name": "b", "title": "B", "description": "d", "action": "container.get",
         "arguments": {"nope": "{x}", "environmentId": "pre-{x}"}},
        {"uri": "arcane://c", "name": "c", "title": "C", "description": "d", "action": "container.list", "link": True},
    ], "errors": {}}
    codes = sorted(p.code for p in rule_problems(Loaded("rules/resources.yaml", data, data), [], catalog))
    assert codes == ["bad_link", "bad_variable", "duplicate_uri", "unknown_action", "unknown_argument",
                     "unknown_variable", "unused_variable"]


def test_the_packaged_resources_are_valid(catalog):
    src, _ = load_sources()
    assert rule_problems(src.resources, src.guides, catalog) == []
    rules = catalog.resources
    assert {r.uri for r in rules.data} | {rules.tools.uri, rules.tool.uri} == set(FIXED + TEMPLATES)
    r = next(r for r in rules.data if r.uri.endswith("{containerId}"))
    assert r.match("arcane://environment/0/container/web%201") == {"environmentId": "0", "containerId": "web 1"}
    assert r.uri_for({"environmentId": "0", "containerId": "a/b"}) == "arcane://environment/0/container/a%2Fb"
    assert r.uri_for({"environmentId": "0"}) is None


async def test_a_container_with_secrets_shows_none_of_them(sim):
    """Done when: reading arcane://environment/0/container/<name> for a container with
    secrets in env, cmd, labels and healthcheck shows none of them and lists each pointer
    (the tool call, which redacts nothing, shows them all)."""
    async with memory_session(sim.url, sim.api_key, surface="dynamic") as client:
        tool = await client.call_tool("arcane_execute_action", {"action": "container.get", "params": {"containerId": "blog-web-1"}})
        result = await client.read_resource("arcane://environment/0/container/blog-web-1")
    full, text = tool.structured_content, result.contents[0].text
    value = json.loads(text)
    secrets = [e.split("=", 1)[1] for e in full["config"]["env"] if len(e.split("=", 1)[-1]) >= 6]
    secrets += [c for c in full["config"]["cmd"] + full["config"]["healthcheck"]["test"] if len(c) >= 6]
    secrets += [v for k, v in full["labels"].items() if not k.startswith("com.docker.compose.") and len(v) >= 6]
    assert any(s.startswith("ghp_") for s in secrets) and any("$apr1$" in s for s in secrets)
    leaves = list(_strings(value))  # values, not keys: a label's value may repeat in another label's name
    for secret in secrets:
        assert not any(secret in leaf for leaf in leaves), secret
    assert value["labels"]["com.docker.compose.project"] == full["labels"]["com.docker.compose.project"]
    assert {"/config/cmd", "/config/env/*", "/config/healthcheck/test", "/labels/*"} <= set(value["_redacted"]["paths"])
    assert value["_redacted"]["fullValue"] == "container.get"
    assert value["id"] == full["id"] and value["name"] == full["name"] and value["image"] == full["image"]


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize("surface", ["dynamic", "meta", "individual"])
async def test_results_of_get_actions_end_with_a_resource_link(sim, surface):
    from tests.test_e2e import Caller

    project = next(p for p in sim.items("projects") if not p.get("isArchived"))
    container = _container(sim, "blog-web-1")
    async with memory_session(sim.url, sim.api_key, surface=surface) as client:
        call = Caller(client, surface)
        cases = [("environment.get", {"id": "0"}, "arcane://environment/0", "environment"),
                 # environmentId omitted: the default environment fills the link
                 ("container.get", {"containerId": container["id"]}, f"arcane://environment/0/container/{container['id']}", "container"),
                 ("project.get", {"environmentId": "0", "projectId": project["id"]}, f"arcane://environment/0/project/{project['id']}", "project")]
        for action, params, uri, name in cases:
            res = await call(action, params)
            assert not res.is_error
            *rest, link = res.content
            assert link.type == "resource_link" and link.uri == uri and link.name == name
            assert link.title and link.mime_type == "application/json"
            assert [c.type for c in rest][0] == "text" and all(c.type != "resource_link" for c in rest)
            assert "resource_link" not in json.dumps(res.structured_content)
            # the link reads the object the call returned
            assert _json(await client.read_resource(link.uri))["id"] == res.structured_content["id"]
        # a list action, and a failed call, end with no link
        listed = await call("container.list", {"limit": 1})
        assert all(c.type != "resource_link" for c in listed.content)
        failed = await call("container.get", {"containerId": "no-such-container"})
        assert failed.is_error and all(c.type != "resource_link" for c in failed.content)


@pytest.mark.parametrize("surface", ["dynamic", "meta", "individual"])
async def test_the_action_catalog_resources(sim, catalog, surface):
    async with memory_session(sim.url, sim.api_key, surface=surface, read_only=True, exclude_tools=("container.get",)) as client:
        listing = _json(await client.read_resource("arcane://tools"))
        one = _json(await client.read_resource("arcane://tools/container.list"))
        excluded = _json(await client.read_resource("arcane://tools/container.get"))
        mutating = _json(await client.read_resource("arcane://tools/container.restart"))
        with pytest.raises(MCPError) as err:
            await client.read_resource("arcane://tools/container.gett")
    assert err.value.code == -32602 and err.value.data == {"uri": "arcane://tools/container.gett"}
    assert listing["surface"] == surface
    entries = {e["id"]: e for e in listing["actions"]}
    assert set(entries) == set(catalog.all_actions)
    # the surface's tool and call shape
    tool = {"dynamic": "arcane_execute_action", "meta": "arcane_container", "individual": "arcane_container_list"}[surface]
    assert entries["container.list"]["tool"] == tool == one["tool"]
    shape = entries["container.list"]["arguments"]
    assert shape == {"dynamic": {"action": "container.list", "params": "<parameters>"},
                     "meta": {"action": "list", "params": "<parameters>"}, "individual": "<parameters>"}[surface]
    # withdrawn actions say why (read-only mode, the exclusion); served ones do not
    assert "withdrawn" not in one and "withdrawn" in excluded and "withdrawn" in mutating
    assert "ARCANE_MCP_EXCLUDE_TOOLS" in excluded["withdrawn"] and "ARCANE_MCP_READ_ONLY" in mutating["withdrawn"]
    assert {a for a, e in entries.items() if "withdrawn" in e} == set(catalog.all_actions) - {
        a for a, x in catalog.all_actions.items() if x.read_only and a != "container.get"}
    # one action: description, route, required parameters, the full input schema
    action = catalog.all_actions["container.list"]
    assert one["route"] == f"{action.method} {action.path}" and one["inputSchema"] == action.input_schema
    assert one["required"] == list(action.required) and one["description"]


@pytest.mark.parametrize("era", ERAS)
async def test_resources_prompts_and_completions_over_streamable_http(sim, era):
    import mcp.types as types

    from tests.helpers import serve_http_in_thread

    # the server's process is not under test here (tests/test_http.py starts real ones)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off"}
    with serve_http_in_thread(env) as base:
        async with Client(f"{base}/mcp", mode=era) as client:
            assert [t.uri_template for t in (await client.list_resource_templates()).resource_templates] == TEMPLATES
            value = _json(await client.read_resource("arcane://environment/0/container/blog-web-1"))
            assert "/config/env/*" in value["_redacted"]["paths"]
            with pytest.raises(MCPError) as err:
                await client.read_resource("arcane://environment/0/container/no-such-container")
            assert err.value.code == -32602 and err.value.data["status"] == 404
            assert [p.name for p in (await client.list_prompts()).prompts]
            got = await client.complete(types.ResourceTemplateReference(type="ref/resource", uri=TEMPLATES[2]),
                                        {"name": "containerId", "value": "blog-w"})
            assert got.completion.values == ["blog-web-1"]


def test_the_simulator_leaves_archived_projects_out_unless_asked(sim):
    """Arcane 2.12's ListProjects `archived` query (catalog/arcane.openapi.json): default
    excludes archived, 'true' only archived, 'all' both."""
    import httpx

    every = sim.items("projects")
    archived = {p["name"] for p in every if p.get("isArchived")}
    assert archived and archived != {p["name"] for p in every}

    def names(**query) -> set[str]:
        r = httpx.get(f"{sim.url}/api/environments/0/projects", params={"limit": -1, **query}, headers={"X-API-Key": sim.api_key})
        assert r.status_code == 200
        return {p["name"] for p in r.json()["data"]}

    assert names() == {p["name"] for p in every} - archived
    assert names(archived="true") == archived
    assert names(archived="all") == {p["name"] for p in every}
