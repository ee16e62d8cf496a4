"""What a key may do decides what it sees (issue 13): catalog/permissions.yaml maps every
action to the permission Arcane checks, and a server withdraws what its credential cannot
perform, with the reason, re-reading /auth/me after a 403. Against the simulator, whose
keys are created through Arcane's own POST /api-keys with a few grants in one environment.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import INVALID_PARAMS
from ruamel.yaml import YAML

from interpreter.build import access
from interpreter.build.access import Access, grants_of, visibility
from interpreter.build.catalog import withdraw
from interpreter.config import Settings
from interpreter.front.serve import apply_access, build_runtime, refresh_after
from interpreter.front.surfaces import make_surface
from simulator import start_simulator
from tests.helpers import examples

INTERP = str(Path(sys.executable).parent / "interp")
SIM_PERMISSIONS = Path(__file__).parents[1] / "simulator" / "data" / "behaviour" / "permissions.yaml"

# a CI key: a few container permissions in environment 0 only, one global read
GRANTS = [{"permission": "containers:list", "environmentId": "0"}, {"permission": "containers:read", "environmentId": "0"},
          {"permission": "containers:start", "environmentId": "0"}, {"permission": "containers:logs", "environmentId": "0"},
          {"permission": "environments:read", "environmentId": "0"}, {"permission": "events:read"}]


@pytest.fixture(scope="module")
def sim():
    with start_simulator() as s:
        yield s
        assert s.violations == [], s.violations


def admin(sim) -> httpx.Client:
    return httpx.Client(base_url=sim.url + "/api", headers={"X-API-Key": sim.api_key})


def create_key(sim, grants: list[dict]) -> tuple[str, str]:
    """A scoped key made the way Arcane makes one (POST /api-keys): (key, id)."""
    with admin(sim) as api:
        r = api.post("/api-keys", json={"name": "ci-bot", "permissions": grants})
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        return data["key"], data["id"]


def me_and_keys(sim, key: str) -> tuple[dict, dict]:
    with httpx.Client(base_url=sim.url + "/api", headers={"X-API-Key": key}) as api:
        return api.get("/auth/me").json(), api.get("/auth/me/api-keys").json()


def expected_withdrawn(catalog, grants: list[dict]) -> set[str]:
    """Independently of access.py: the actions whose entry needs something the grants lack."""
    perms = catalog.inventory.permissions
    glob = {g["permission"] for g in grants if not g.get("environmentId")}
    per_env = {g["permission"] for g in grants if g.get("environmentId")}
    out = set()
    for aid, a in catalog.actions.items():
        e = perms.operations[a.operation_id] if a.operation_id else perms.routes[a.id]
        if e.check in ("global_admin", "sudo") or e.global_admin:
            out.add(aid)
            continue
        wanted = e.permissions()
        ok = any(p in glob or (p in per_env and perms.scopes[p] == "env" and a.env_scoped) for p in wanted)
        if wanted and not ok:
            out.add(aid)
    return out


# ---------------------------------------------------------------- the map


def test_every_action_has_the_permission_arcane_checks(catalog):
    perms = catalog.inventory.permissions
    for a in catalog.all_actions.values():
        entry = access.entry_for(catalog, a)
        assert entry is not None, a.id
        assert entry.src
        for p in entry.permissions():
            assert perms.scopes[p] in ("env", "global")
    # a few read from Arcane's source by hand
    ops = perms.operations
    assert ops["list-containers"].permission == "containers:list"  # internal/container/handler.go:173
    assert ops["list-s3-destinations"].permission == "s3-destinations:list"  # internal/s3/handler.go:85
    assert ops["update-project-workspace"].permission == "projects:update"  # internal/project/workspace_handler.go:66
    assert ops["list-system-backups"].global_admin and ops["list-system-backups"].permission == "system-backups:read"
    assert ops["login"].check == "public" and ops["get-current-user"].check == "authenticated"
    assert dict(ops["create-upload-session"].by_value) == {"image": "images:upload", "volume-backup": "volumes:upload",
                                                           "build-workspace": "build-workspaces:manage"}
    assert perms.routes["container.exec"].permission == "containers:exec"
    assert perms.scopes["notifications:manage"] == "global" and perms.scopes["containers:start"] == "env"


def test_the_simulator_checks_the_same_permissions(catalog):
    """The simulator's own map (its data, read from Arcane separately) agrees with the catalog's."""
    sim = YAML(typ="safe").load(SIM_PERMISSIONS.read_text(encoding="utf-8"))["permissions"]
    perms = catalog.inventory.permissions
    for oid, entry in perms.operations.items():
        theirs = sim["operations"].get(oid)
        if theirs is None or entry.check == "unknown" or entry.by_param:
            continue
        assert theirs.get("permission") == entry.permission, oid
        assert bool(theirs.get("admin")) == (entry.global_admin or entry.check == "global_admin"), oid
    assert dict(sim["upload_kinds"]) == dict(perms.operations["create-upload-session"].by_value)
    for p, scope in sim["catalog"].items():
        assert perms.scopes[p] == scope, p


# ---------------------------------------------------------------- the view of one key


def test_a_scoped_key_sees_only_what_it_may_do(sim, catalog):
    key, _ = create_key(sim, GRANTS)
    me, keys = me_and_keys(sim, key)
    # /auth/me reports the owner's roles (an admin): the key's own grants come from /auth/me/api-keys
    assert "containers:stop" in me["data"]["permissionsByEnv"]["global"]
    reasons = visibility(catalog, me, keys, key)
    assert set(reasons) == expected_withdrawn(catalog, GRANTS)
    served = set(catalog.actions) - set(reasons)
    assert {"container.list", "container.get", "container.start", "container.logs", "event.list", "auth.me", "auth.login"} <= served
    assert {"container.stop", "container.delete", "image.list", "user.list", "role.list", "system_backup.list"} <= set(reasons)
    assert "containers:stop" in reasons["container.stop"]
    # environments:read is global: a grant in environment 0 does not satisfy it (permission_set.go:20-39)
    assert "environment.get" in reasons
    assert len(served) < len(catalog.actions) // 4


def test_a_personal_key_and_a_sudo_caller(sim, catalog):
    me, keys = me_and_keys(sim, sim.api_key)
    # the bootstrap key is personal and static: the owner's roles (an admin) apply
    grants = grants_of(catalog, me, keys, sim.api_key)
    assert grants.source == access.USER and grants.global_admin
    assert visibility(catalog, {"success": True, "data": {"permissionsByEnv": {"global": ["*"]}}}) == {}
    # the same user without "*" and no permission at all: everything needing one is withdrawn
    assert len(visibility(catalog, {"success": True, "data": {"permissionsByEnv": {}}})) == len(expected_withdrawn(catalog, []))


@pytest.mark.parametrize("me", [None, {}, {"success": True, "data": {"id": "u1", "username": "x"}}, {"success": True, "data": {"permissionsByEnv": "all"}},
                                "not json"])
def test_no_permission_info_withdraws_nothing(catalog, me):
    assert visibility(catalog, me) == {}
    view = Access(catalog, None, None)
    assert view.apply(me) is False and view.catalog is catalog


@functools.cache
def shared_catalog():
    from interpreter.build.catalog import build

    return build()


PROPERTY_PERMISSIONS = ["containers:list", "containers:start", "images:list", "volumes:read", "events:read", "users:list",
                        "environments:list", "networks:create"]


@settings(max_examples=examples(40))
@given(grants=st.lists(st.sampled_from(PROPERTY_PERMISSIONS), unique=True), in_env=st.booleans())
def test_withdrawn_exactly_when_the_grants_lack_the_permission(grants, in_env):
    catalog = shared_catalog()
    rows = [{"permission": p, **({"environmentId": "0"} if in_env else {})} for p in grants]
    key = "arc_prop0000key"
    keys = {"success": True, "data": [{"keyPrefix": key[:12], "kind": "scoped", "permissions": rows}]}
    me = {"success": True, "data": {"permissionsByEnv": {"global": ["*"]}}}  # the owner holds everything; the key only its rows
    assert set(visibility(catalog, me, keys, key)) == expected_withdrawn(catalog, rows)


def test_withdrawn_actions_say_why_everywhere(sim, catalog):
    key, _ = create_key(sim, GRANTS)
    view = Access(catalog, None, key)
    assert view.apply(*me_and_keys(sim, key))
    narrowed = view.catalog
    assert "container.stop" not in narrowed.actions and "container.start" in narrowed.actions
    assert narrowed.withdrawn["container.stop"] == view.reasons["container.stop"]
    # the shared catalog is untouched; every domain left has an action
    assert "container.stop" in catalog.actions
    assert all(d.action_ids for d in narrowed.domains.values())
    assert "image" not in narrowed.domains
    # the meta surface lists only what is left
    rt = build_runtime(Settings(surface="meta"))
    surface = make_surface("meta", narrowed, rt.dispatcher)
    names = {t.name for t in surface.tools()}
    assert "arcane_container" in names and "arcane_image" not in names
    # read-only mode's reason stays its own
    ro = withdraw(catalog, {"container.list": "x"})
    assert ro.withdrawn["container.list"] == "x"


# ---------------------------------------------------------------- startup and 403


@pytest.mark.anyio
async def test_startup_reads_the_credential_and_a_403_refreshes(sim, catalog):
    key, key_id = create_key(sim, GRANTS)
    rt = build_runtime(Settings(arcane_url=sim.url, api_key=key, surface="individual"))
    try:
        await rt.dispatcher.client.start()
        withdrawn = await apply_access(rt)
        assert withdrawn == len(expected_withdrawn(rt.access.shared, GRANTS))
        assert "container.start" in rt.catalog.actions and "container.stop" not in rt.catalog.actions
        tools = {t.name for t in rt.surface.tools()}
        assert "arcane_container_start" in tools and "arcane_container_stop" not in tools
        # the owner narrows the key (PUT /api-keys/{id}): container.start is still listed, Arcane says 403
        with admin(sim) as api:
            r = api.put(f"/api-keys/{key_id}", json={"permissions": [g for g in GRANTS if g["permission"] != "containers:start"]})
            assert r.status_code == 200, r.text
        name = sim.sample_path_params("start-container")["containerId"]
        result = await rt.surface.call("arcane_container_start", {"containerId": name, "environmentId": "0"})
        assert result.is_error and result.http_status == 403
        assert await refresh_after(rt, result) is True
        assert "container.start" not in rt.catalog.actions and "containers:start" in rt.catalog.withdrawn["container.start"]
        assert "arcane_container_start" not in {t.name for t in rt.surface.tools()}
        # another 403 with nothing new: no change
        again = await rt.dispatcher.dispatch(_call("container.list", {"environmentId": "0"}))
        assert not again.is_error
        assert await refresh_after(rt, again) is False
    finally:
        await rt.dispatcher.client.aclose()


def _call(action_id: str, params: dict):
    from interpreter.call.dispatch import Call

    return Call(action_id, params, False, "individual", "test", None)


@pytest.mark.anyio
async def test_an_unreadable_auth_me_withdraws_nothing(catalog):
    """An Arcane that answers /auth/me with an error reports nothing: every action stays."""
    handler = httpx.MockTransport(lambda req: httpx.Response(500, json={"title": "boom", "status": 500, "detail": "boom"}))
    from interpreter.call.request import ArcaneClient

    client = ArcaneClient(Settings(arcane_url="http://arcane.invalid", api_key="arc_x"), transport=handler)
    client.use(catalog)
    view = Access(catalog, client, "arc_x")
    assert await view.refresh() is False and view.catalog is catalog and view.reasons == {}
    await client.aclose()


# ---------------------------------------------------------------- stdio applies it to the configured key


@pytest.mark.anyio
async def test_stdio_serves_the_configured_key_its_view(sim):
    key, _ = create_key(sim, GRANTS)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": key,
           "ARCANE_MCP_SURFACE": "individual", "ARCANE_MCP_AUDIT_LOG": "off"}
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "arcane_container_list" in names and "arcane_container_stop" not in names and "arcane_image_list" not in names
        entry = json.loads((await client.read_resource("arcane://tools/container.stop")).contents[0].text)
        assert "containers:stop" in entry["withdrawn"]
        served = json.loads((await client.read_resource("arcane://tools/container.list")).contents[0].text)
        assert "withdrawn" not in served
        res = await client.call_tool("arcane_container_list", {"environmentId": "0"})
        assert not res.is_error


@pytest.mark.anyio
async def test_the_credential_is_read_while_the_client_initializes(catalog):
    """A start does not wait for Arcane before the MCP handshake: the who-am-I read is in
    flight while the client initializes, and the first tools/list waits for it, so it is
    already the credential's view (serve_stdio's `ready`)."""
    import asyncio

    from interpreter.call.request import ArcaneClient
    from interpreter.front import serve

    released = asyncio.Event()
    me = {"success": True, "data": {"permissionsByEnv": {"global": ["containers:list", "containers:read"]}}}
    asked: list[str] = []

    async def arcane(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path.endswith("/auth/me"):
            await released.wait()
            return httpx.Response(200, json=me)
        return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "no such route"})

    settings = Settings(arcane_url="http://arcane.test", api_key="arc_start_key", surface="individual", audit_log="off")
    rt = build_runtime(settings, client=ArcaneClient(settings, transport=httpx.MockTransport(arcane)))
    ready = asyncio.create_task(serve._read_access(rt))
    try:
        async with Client(serve.build_server(rt, ready=ready), mode="legacy") as client:
            assert "/api/auth/me" in asked and not ready.done()  # initialized while Arcane holds the read
            listing = asyncio.create_task(client.list_tools())
            await asyncio.sleep(0.05)
            assert not listing.done()  # tools/list waits for the credential's view
            released.set()
            names = {t.name for t in (await listing).tools}
            assert "arcane_container_list" in names and "arcane_container_stop" not in names
            with pytest.raises(MCPError) as refused:  # withdrawn: an unknown tool to this server
                await client.call_tool("arcane_container_stop", {"containerId": "c1"})
            assert refused.value.error.code == INVALID_PARAMS
    finally:
        await rt.dispatcher.client.aclose()


@pytest.mark.anyio
async def test_a_session_that_listed_an_older_view_is_told_at_its_next_call(catalog):
    """A stateful HTTP session outlives its key's re-check (httpmode.Pool.acquire applies the
    key's permissions again): the view it listed may be gone. At its next call it gets
    notifications/tools/list_changed, once; listing again settles it."""
    import anyio
    import mcp.types as types

    from interpreter.call.request import ArcaneClient
    from interpreter.front import serve

    grants = {"global": ["containers:list", "containers:read"]}

    def arcane(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/me"):
            return httpx.Response(200, json={"success": True, "data": {"permissionsByEnv": grants}})
        return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "no such route"})

    changed: list[object] = []
    told = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message)
            told.set()

    settings = Settings(arcane_url="http://arcane.test", api_key="arc_view_key", surface="individual", audit_log="off")
    rt = build_runtime(settings, client=ArcaneClient(settings, transport=httpx.MockTransport(arcane)))
    try:
        await apply_access(rt)
        async with Client(serve.build_server(rt), mode="legacy", message_handler=on_message) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            assert "arcane_image_list" not in before
            await client.call_tool("arcane_container_list", {})
            assert changed == []  # nothing changed since it listed
            grants["global"] = [*grants["global"], "images:list"]
            await apply_access(rt)  # what the pool's re-check of the key does
            await client.call_tool("arcane_container_list", {})
            with anyio.fail_after(5):
                await told.wait()
            await client.call_tool("arcane_container_list", {})
            assert len(changed) == 1  # told once
            after = {t.name for t in (await client.list_tools()).tools}
            assert before < after and "arcane_image_list" in after
    finally:
        await rt.dispatcher.client.aclose()


@pytest.mark.anyio
async def test_an_arcane_slow_to_say_what_the_key_may_do_does_not_hold_tools_list(catalog):
    """Past ARCANE_MCP_ACCESS_WAIT the whole catalog is listed; when the who-am-I answer
    arrives the view narrows, and the session is told at its next call."""
    import asyncio

    import anyio
    import mcp.types as types

    from interpreter.call.request import ArcaneClient
    from interpreter.front import serve

    released = asyncio.Event()
    me = {"success": True, "data": {"permissionsByEnv": {"global": ["containers:list", "containers:read"]}}}

    async def arcane(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/auth/me"):
            await released.wait()
            return httpx.Response(200, json=me)
        return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "no such route"})

    told = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    settings = Settings(arcane_url="http://arcane.test", api_key="arc_slow_key", surface="individual", audit_log="off",
                        access_wait=0.2)
    rt = build_runtime(settings, client=ArcaneClient(settings, transport=httpx.MockTransport(arcane)))
    ready = asyncio.create_task(serve._read_access(rt))
    try:
        async with Client(serve.build_server(rt, ready=ready), mode="legacy", message_handler=on_message) as client:
            whole = {t.name for t in (await client.list_tools()).tools}
            assert not ready.done() and "arcane_container_stop" in whole  # not held: the whole catalog
            released.set()
            await ready
            await client.call_tool("arcane_container_list", {})
            with anyio.fail_after(5):
                await told.wait()
            narrowed = {t.name for t in (await client.list_tools()).tools}
            assert "arcane_container_list" in narrowed and "arcane_container_stop" not in narrowed
    finally:
        await rt.dispatcher.client.aclose()


def test_the_demo_keys_are_listed_by_their_own_prefix():
    """Arcane stores a key's first 12 characters ("arc_" + 8, apikey/service.go:227
    parseAPIKeyPrefixInternal): each demo key's record carries its key's, and no two
    records share one, so a scoped demo key is found and judged by its own grants."""
    from simulator import check_data

    _, state = check_data()
    records = {r["name"]: r for r in state.global_items["api_keys"]}
    for key in state.api_keys:
        record = records.get(key.name)
        assert record is not None, key.name
        assert record["keyPrefix"] == key.key[:12], key.name
    prefixes = [r["keyPrefix"] for r in records.values()]
    assert len(prefixes) == len(set(prefixes))
