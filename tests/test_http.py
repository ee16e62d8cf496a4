"""HTTP mode for teams (interpreter/front/httpmode.py): one MCP server per Arcane key, isolated
from every other key; the refusals in front of the pool (Host, Origin, body, key, rate);
the pool's eviction; connection lifetime; MCP logging (per session when stateful); TLS
with a real certificate; SIGTERM drain; two replicas (a confirmation and a task)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import ssl
import subprocess

import anyio
import httpx
import mcp.types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from interpreter.build.access import visibility
from interpreter.call.dispatch import Dispatcher
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from interpreter.front.httpmode import Pool, Refusal, anonymous_allowed, check_posture, key_digest
from interpreter.front.names import EXECUTE_TOOL
from interpreter.front.serve import Runtime
from interpreter.front.surfaces import make_surface
from tests.helpers import free_port, serve_http_in_thread, start_http_server
from tests.test_access import GRANTS, create_key, me_and_keys
from tests.test_e2e import INTERP, text
from tests.test_tasks import EXTENSION, PULL, WAIT, Tasks

# a test may start a server or two, each building the catalog (slow on a loaded machine)
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.timeout(900)]

KEY_A = "arc_tenant_alpha_0123456789abcdef0123"  # personal: the bootstrap user's roles
KEY_B = "arc_tenant_bravo_fedcba9876543210fedc"  # scoped: environments and images, environment 0 only
KEY_C = "arc_tenant_charlie_00aa11bb22cc33dd44ee"  # personal, like A: it may pull, but never A's tasks
SECRET = "a-shared-sealing-secret-of-32-characters-or-more"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def env_for(sim, **extra) -> dict:
    """A team server's environment: the operator's Arcane, no key of its own unless given."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_MCP_AUDIT_LOG": "stderr", **extra}


@contextlib.contextmanager
def http_server(sim, *args: str, bind: str | None = None, tls: ssl.SSLContext | None = None, **env):
    """`interp serve --http` on a free port of 127.0.0.1 (or of `bind`); `tls`: the context
    that trusts its certificate, when args turn TLS on."""
    port = free_port()
    where = ["--port", str(port)] if bind is None else ["--listen", f"{bind}:{port}"]
    scheme = "https" if tls is not None else "http"
    proc = start_http_server([INTERP, "serve", "--http", *where, *args], env_for(sim, **env), port, scheme=scheme, verify=tls or True)
    try:
        yield f"{scheme}://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


@contextlib.contextmanager
def in_process(sim, *, bind: str | None = None, **env):
    """The same server, run by its command's own steps on a thread of this process
    (tests.helpers.serve_http_in_thread): for the tests of what it answers. What only a
    process shows (its log on stderr, SIGTERM's drain, a second replica, TLS, the exit of a
    refused start) is tested on `http_server`'s subprocess."""
    with serve_http_in_thread(env_for(sim, **env), bind or "127.0.0.1") as base:
        yield base, None


def stderr_of(proc) -> str:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)
    return proc.stderr.read().decode(errors="replace")


@contextlib.asynccontextmanager
async def client_for(base: str, key: str | None, era: str = "legacy", *, verify: ssl.SSLContext | bool = True, **kw):
    headers = {"X-Arcane-API-Key": key} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=60, verify=verify) as http, \
            Client(streamable_http_client(base + "/mcp", http_client=http), mode=era, **kw) as client:
        yield client


def post(base: str, body=PING, **headers) -> httpx.Response:
    return httpx.post(base + "/mcp", json=body, headers={**ACCEPT, **headers}, timeout=30)


def runtime_for(catalog, settings: Settings) -> Runtime:
    client = ArcaneClient(settings) if settings.arcane_url else None
    dispatcher = Dispatcher(catalog, settings, client, AuditLog("off"))
    return Runtime(settings, catalog, dispatcher, make_surface(settings.surface, catalog, dispatcher))


def credentialed(sim) -> list:
    """What reached Arcane with a credential (the server's unauthenticated start-up read of
    the OpenAPI document, for the drift check, may land at any moment and carries none)."""
    return [r for r in sim.requests() if r.credential is not None]


def pool_stats(base: str) -> dict:
    return httpx.get(base + "/health").json()["pool"]


def add_keys(sim) -> tuple[str, str]:
    sim.add_api_key(KEY_A, kind="personal")
    sim.add_api_key(KEY_B, ["environments:read", "environments:list", "images:list"], environment="0")
    sim.add_api_key(KEY_C, kind="personal")
    return KEY_A, KEY_B


@pytest.fixture(scope="module")
def keys(sim):
    return add_keys(sim)


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory):
    return tmp_path_factory.mktemp("audit") / "audit.jsonl"


@pytest.fixture(scope="module")
def team(sim, keys, audit_file):
    """The team server: no anonymous use (it has a key of its own, which no client may use);
    its confirmation rounds are sealed with a secret a second replica can share."""
    with in_process(sim, ARCANE_API_KEY=sim.api_key, ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_STATE_SECRET=SECRET,
                    ARCANE_MCP_AUDIT_LOG=str(audit_file)) as (base, _):
        yield base


@pytest.fixture(scope="module")
def replica(sim, keys, team):
    """A second replica of the team server: the same Arcane, the same sealing secret."""
    with http_server(sim, ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_STATE_SECRET=SECRET, ARCANE_MCP_AUDIT_LOG="off") as (base, _):
        yield base


@pytest.fixture(scope="module")
def stateful_team(sim, keys):
    """The team server with legacy sessions (ARCANE_MCP_HTTP_STATEFUL)."""
    with in_process(sim, ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_HTTP_STATEFUL="true", ARCANE_MCP_AUDIT_LOG="off") as (base, _):
        yield base


# ------------------------------------------------------------------ refusals in front of the pool


def test_missing_key_is_401_saying_what_to_send(sim, team):
    sim.clear_requests()
    r = post(team)
    assert r.status_code == 401
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32001
    assert body["error"]["data"] == {"header": "X-Arcane-API-Key", "reason": "missing_key"}
    assert credentialed(sim) == []  # the server's own key was not used for the stranger


def test_a_key_arcane_refuses_is_401_and_gets_no_server(sim, team):
    before = pool_stats(team)["created"]
    sim.clear_requests()
    r = post(team, **{"X-Arcane-API-Key": "arc_not_a_key_of_this_arcane"})
    assert r.status_code == 401 and r.json()["error"]["data"]["reason"] == "rejected_key"
    assert pool_stats(team)["created"] == before
    assert [q.path for q in credentialed(sim)] == ["/api/auth/me"]  # checked with Arcane, nothing else sent


@pytest.mark.parametrize("headers,status,reason", [
    ({"Host": "evil.example"}, 421, "host_not_allowed"),
    ({"Host": "evil.example:80"}, 421, "host_not_allowed"),
    ({"Origin": "http://evil.example"}, 403, "origin_not_allowed"),
    ({"Origin": "http://localhost.evil.example"}, 403, "origin_not_allowed"),
])
def test_forged_host_or_origin_is_refused_before_any_key_is_looked_at(sim, team, keys, headers, status, reason):
    sim.clear_requests()
    r = post(team, **{"X-Arcane-API-Key": keys[0], **headers})
    assert r.status_code == status and r.json()["error"]["data"]["reason"] == reason
    assert credentialed(sim) == []


def test_the_own_origin_is_accepted(team, keys):
    port = team.rsplit(":", 1)[1]
    r = post(team, **{"X-Arcane-API-Key": keys[0], "Origin": f"http://localhost:{port}"})
    assert r.status_code == 200


def test_an_oversized_body_is_413(sim, team, keys):
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"pad": "x" * (4 * 1024 * 1024 + 10)}}}
    sim.clear_requests()
    r = post(team, big, **{"X-Arcane-API-Key": keys[0]})
    assert r.status_code == 413 and r.json()["error"]["data"]["reason"] == "body_too_large"
    assert credentialed(sim) == []


def test_only_mcp_is_served(team):
    r = httpx.get(team + "/other")
    assert r.status_code == 404 and r.json()["error"]["data"] == {"reason": "not_found"}
    assert "/mcp" in r.json()["error"]["message"]


def test_every_refusal_text_is_the_rules_with_its_values_filled(catalog):
    """rules/server.yaml http.refusals: each reason's text, its placeholders filled; an
    operator's wording (a rules layer) is what a client reads."""
    from dataclasses import replace

    from interpreter.build.model import Template
    from interpreter.front.httpmode import RATE_LIMITED, Refusals

    http = catalog.server.http
    assert set(http.refusals) >= {"missing_key", "rejected_key", "key_checks_busy", "rate_limited", "arcane_unreachable",
                                  "arcane_failed", "pool_full", "host_not_allowed", "origin_not_allowed", "body_too_large",
                                  "not_found"}
    refusals = Refusals(http)
    missing = refusals.missing_key()
    assert missing.status == 401 and http.key_header in missing.message and "{" not in missing.message
    late = refusals.retry_later(429, RATE_LIMITED, "rate_limited", 2.2)
    assert late.data == {"reason": "rate_limited", "retryAfter": 3} and late.headers == {"Retry-After": "3"}
    assert "3" in late.message and "{" not in late.message
    worded = Refusals(replace(http, refusals={**http.refusals, "rate_limited": Template.of("easy: {seconds}s")}))
    assert worded.retry_later(429, RATE_LIMITED, "rate_limited", 1).message == "easy: 1s"


# ------------------------------------------------------------------ two tenants


async def _tenant_a(base: str, logs: list) -> dict:
    out = {}
    async with client_for(base, KEY_A, logging_callback=lambda p: _keep(logs, p)) as client:
        await client.set_logging_level("warning")
        out["list"] = text(await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {}}))
        out["complete"] = (await client.complete(types.PromptReference(type="ref/prompt", name="diagnose_container"),
                                                 {"name": "containerId", "value": ""})).completion.values
        # environment 1 has its Docker daemon down: Arcane fails, the server warns this client
        out["down"] = text(await client.call_tool(EXECUTE_TOOL, {"action": "container.list",
                                                                  "params": {"environmentId": DOWN_ENV}}))
    return out


async def _tenant_b(base: str, logs: list) -> dict:
    out = {}
    async with client_for(base, KEY_B, logging_callback=lambda p: _keep(logs, p)) as client:
        await client.set_logging_level("debug")
        out["images"] = text(await client.call_tool(EXECUTE_TOOL, {"action": "image.list", "params": {}}))
        out["list"] = text(await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {}}))
    return out


async def _keep(logs: list, params) -> None:
    logs.append(params)


async def _accept(context, params):
    return types.ElicitResult(action="accept", content={"confirm": True})


DOWN_ENV = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


async def test_two_tenants_in_parallel_never_cross(sim, team, keys):
    sim.set_faults({"daemon_down": [DOWN_ENV]})
    try:
        sim.clear_requests()
        logs_a, logs_b = [], []
        rounds = await asyncio.gather(*[f(team, logs) for _ in range(3) for f, logs in ((_tenant_a, logs_a), (_tenant_b, logs_b))])
    finally:
        sim.set_faults(None)
    a_runs, b_runs = rounds[0::2], rounds[1::2]
    sent = credentialed(sim)
    # every request to Arcane carried one of the two client keys, never the server's own
    assert sent and all(r.carried(KEY_A) or r.carried(KEY_B) for r in sent)
    # what only A asked for carried A's key; what only B asked for, B's
    assert all(r.carried(KEY_A) for r in sent if f"/environments/{DOWN_ENV}/" in r.path)
    assert all(r.carried(KEY_B) for r in sent if r.path.startswith("/api/environments/0/images"))
    assert any(r.carried(KEY_B) for r in sent if r.path == "/api/environments/0/containers")
    names = {c["names"][0].lstrip("/") for c in sim.items("containers")}
    for run in a_runs:
        assert run["complete"] and set(run["complete"]) <= names  # A may list containers
        assert "List containers" in run["list"] and any(n in run["list"] for n in names)
    for run in b_runs:
        # B may not list containers: its answer is Arcane's refusal, never A's listing
        assert run["list"].startswith("Error") and not any(f"| {n} |" in run["list"] for n in names)
    # the warning about environment 1 went to A (its own call) and never to B
    assert logs_a and all(p.level == "warning" for p in logs_a)
    assert logs_b == []
    for p in logs_a:
        assert KEY_A not in json.dumps(p.data) and KEY_B not in json.dumps(p.data)


async def test_completions_are_cached_per_key(sim, team, keys):
    ref = types.PromptReference(type="ref/prompt", name="diagnose_container")
    async with client_for(team, KEY_A) as a:
        filled = (await a.complete(ref, {"name": "containerId", "value": ""})).completion.values
    sim.clear_requests()
    async with client_for(team, KEY_B) as b:
        seen = (await b.complete(ref, {"name": "containerId", "value": ""})).completion.values
    assert filled and seen == []  # A's cached names are not B's
    assert [r.path for r in sim.requests() if r.carried(KEY_B) and r.path != "/api/auth/me"] == ["/api/environments/0/containers"]


async def _delete_asked_with_key_a(sim, server):
    """A 2026-07-28 delete of an exited container, started with KEY_A on `server`: it asks
    for confirmation (InputRequiredResult); the requests so far are cleared. Returns the
    target, the call's arguments, that first answer and the accepting input responses."""
    target = next(c for c in sim.items("containers") if c["state"] == "exited")
    args = {"action": "container.delete", "params": {"containerId": target["id"]}}
    async with client_for(server, KEY_A, "auto", elicitation_callback=_accept) as a:
        first = await a.session.call_tool(EXECUTE_TOOL, args, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    sim.clear_requests()
    return target, args, first, {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}


async def test_a_confirmation_started_with_one_key_cannot_be_answered_with_another(sim, team, keys):
    target, args, first, accept = await _delete_asked_with_key_a(sim, team)
    async with client_for(team, KEY_B, "auto", elicitation_callback=_accept) as b:
        with pytest.raises(MCPError) as ei:
            await b.session.call_tool(EXECUTE_TOOL, args, input_responses=accept, request_state=first.request_state,
                                      allow_input_required=True)
    assert ei.value.code == -32602
    assert not any(r.method == "DELETE" for r in sim.requests())


async def test_audit_records_carry_a_fingerprint_never_the_key(sim, team, audit_file):
    async with client_for(team, KEY_A) as a:
        await a.call_tool(EXECUTE_TOOL, {"action": "environment.list", "params": {}})
    async with client_for(team, KEY_B) as b:
        await b.call_tool(EXECUTE_TOOL, {"action": "environment.list", "params": {}})
    lines = audit_file.read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    assert {key_digest(KEY_A)[:12], key_digest(KEY_B)[:12]} <= {r.get("key") for r in records}
    assert all(len(r["key"]) == 12 for r in records)
    assert KEY_A not in audit_file.read_text() and KEY_B not in audit_file.read_text()


# ------------------------------------------------------------------ anonymous use


def test_the_servers_own_key_is_used_on_loopback_by_default(sim):
    with in_process(sim, ARCANE_API_KEY=sim.api_key) as (base, _):
        sim.clear_requests()
        r = post(base, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": EXECUTE_TOOL, "arguments": {"action": "container.list", "params": {}}}})
        assert r.status_code == 200
    assert credentialed(sim) and all(q.carried(sim.api_key) for q in credentialed(sim))


def test_anonymous_use_is_off_on_a_public_bind_unless_allowed(sim):
    with in_process(sim, bind="0.0.0.0", ARCANE_MCP_BEHIND_TLS_PROXY="true", ARCANE_API_KEY=sim.api_key) as (base, _):
        assert post(base).status_code == 401
    own = Settings(api_key="arc_the_servers_own_key")
    assert anonymous_allowed(dataclasses.replace(own, allow_anonymous=True), "0.0.0.0")
    assert not anonymous_allowed(own, "0.0.0.0") and anonymous_allowed(own, "::1")
    # without a credential of its own the server serves nobody without a key, whatever the setting
    assert not anonymous_allowed(Settings(allow_anonymous=True), "127.0.0.1") and not anonymous_allowed(Settings(), "::1")


def test_a_public_bind_needs_tls_or_a_proxy():
    with pytest.raises(Exception) as ei:
        check_posture(Settings(), "0.0.0.0")
    assert ei.value.setting == "ARCANE_MCP_LISTEN" and ei.value.code == "tls_required"
    check_posture(Settings(behind_tls_proxy=True), "0.0.0.0")
    check_posture(Settings(), "127.0.0.1")
    r = subprocess.run([INTERP, "serve", "--http", "--listen", f"0.0.0.0:{free_port()}"], capture_output=True, text=True,
                       env={"PATH": os.environ.get("PATH", ""), "ARCANE_MCP_AUDIT_LOG": "off"}, timeout=60)
    assert r.returncode == 2 and "[tls_required]" in r.stderr and "ARCANE_MCP_TLS_CERT" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr and r.stdout == ""


# ------------------------------------------------------------------ rate limit, pool


def test_the_rate_limit_is_per_key(sim, keys):
    with in_process(sim, ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_RATE_LIMIT="0.001", ARCANE_MCP_RATE_BURST="3") as (base, _):
        answers = [post(base, **{"X-Arcane-API-Key": KEY_A}) for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        refusal = answers[-1]
        assert refusal.json()["error"]["data"]["reason"] == "rate_limited"
        assert int(refusal.headers["retry-after"]) >= 1 and refusal.json()["error"]["data"]["retryAfter"] >= 1
        assert post(base, **{"X-Arcane-API-Key": KEY_B}).status_code == 200  # another key has its own bucket


def test_the_pool_evicts_the_least_recently_used_and_makes_it_again(sim, keys):
    with in_process(sim, ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_POOL_SIZE="1") as (base, _):
        sim.clear_requests()
        for key in (KEY_A, KEY_A, KEY_B, KEY_A):
            assert post(base, **{"X-Arcane-API-Key": key}).status_code == 200
        assert pool_stats(base) == {"servers": 1, "created": 3, "evicted": 2, "max": 1}
        # a server made for a key reads /auth/me once: the key check's answer is what it may do
        checks = [r.carried(KEY_A) for r in sim.requests() if r.path == "/api/auth/me"]
        assert checks == [True, False, True]  # A was checked again when made again, B once


async def test_idle_servers_are_closed_and_revoked_keys_stop(sim, keys, catalog):
    now = [1000.0]
    settings = Settings(arcane_url=sim.url, audit_log="off", pool_idle=60.0, key_revalidate=120.0)
    runtime = runtime_for(catalog, settings)
    pool = Pool(runtime, AuditLog("off"), anonymous=False, clock=lambda: now[0])
    expiring = "arc_tenant_expiring_00112233445566778899"
    sim.add_api_key(expiring, kind="personal", expires_at=int(sim.simulator.store.now()) + 3600)
    async with pool.run():
        first = await pool.acquire(KEY_A)
        assert await pool.acquire(KEY_A) is first and pool.sweep() == 0
        now[0] += 61
        assert pool.sweep() == 1 and pool.tenants == {}
        second = await pool.acquire(KEY_A)
        assert second is not first and pool.created == 2
        await pool.acquire(expiring)
        sim.advance_clock(7200)  # the key expires in Arcane
        now[0] += 121
        with pytest.raises(Refusal) as ei:
            await pool.acquire(expiring)
        assert ei.value.status == 401 and key_digest(expiring) not in pool.tenants
    assert dataclasses.asdict(first.runtime.settings)["api_key"] == KEY_A  # each key's own client, not the operator's


async def test_a_key_in_use_sees_its_new_permissions_at_its_next_check(sim, keys, catalog):
    """The owner widens, then narrows, a key in use (PUT /api-keys/{id}): at the key's next
    check (key_revalidate) its server lists what the key may do now, and its resources and
    prompts serve that catalog too; the check's /auth/me answer is not asked for again."""
    now = [1000.0]
    settings = Settings(arcane_url=sim.url, audit_log="off", pool_idle=3600.0, key_revalidate=120.0)
    pool = Pool(runtime_for(catalog, settings), AuditLog("off"), anonymous=False, clock=lambda: now[0])
    scoped, key_id = create_key(sim, GRANTS)
    wider = [*GRANTS, {"permission": "images:list", "environmentId": "0"}, {"permission": "images:read", "environmentId": "0"}]

    def regrant(grants):
        with httpx.Client(base_url=sim.url + "/api", headers={"X-API-Key": sim.api_key}) as api:
            assert api.put(f"/api-keys/{key_id}", json={"permissions": grants}).status_code == 200

    async with pool.run():
        tenant = await pool.acquire(scoped)
        first = dict(tenant.runtime.access.reasons)
        assert "image.list" in first and "container.list" not in first
        for grants in (wider, GRANTS[:2]):
            regrant(grants)
            assert await pool.acquire(scoped) is tenant and tenant.runtime.access.reasons == first  # not due yet
            now[0] += 121
            sim.clear_requests()
            assert await pool.acquire(scoped) is tenant
            # the check's /auth/me answer is used, not asked again; the key's own grants beside it
            assert sorted(r.path for r in sim.requests()) == ["/api/auth/me", "/api/auth/me/api-keys"]
            me, my_keys = me_and_keys(sim, scoped)
            reasons = tenant.runtime.access.reasons
            assert reasons == visibility(catalog, me, my_keys, scoped) and reasons != first
            assert set(tenant.runtime.catalog.actions) == set(catalog.actions) - set(reasons)
            assert all(part.catalog is tenant.runtime.catalog for part in tenant.runtime.followers) and tenant.runtime.followers
            first = dict(reasons)
        assert "container.start" in first and "image.list" in first  # the last grants: containers list/read only


async def test_a_stateful_session_is_told_when_its_keys_next_check_changes_its_tools(sim, keys):
    """A stateful HTTP session listed its tools; the owner widens the key; at the key's next
    check (ARCANE_MCP_KEY_REVALIDATE) the session's next call gets
    notifications/tools/list_changed, and listing again shows the new tools."""
    scoped, key_id = create_key(sim, GRANTS)
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with in_process(sim, ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_HTTP_STATEFUL="true", ARCANE_MCP_AUDIT_LOG="off",
                    ARCANE_MCP_SURFACE="individual", ARCANE_MCP_KEY_REVALIDATE="1s") as (base, _):
        async with client_for(base, scoped, message_handler=on_message) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            assert "arcane_container_list" in before and "arcane_image_list" not in before
            with httpx.Client(base_url=sim.url + "/api", headers={"X-API-Key": sim.api_key}) as api:
                wider = [*GRANTS, {"permission": "images:list", "environmentId": "0"}]
                assert api.put(f"/api-keys/{key_id}", json={"permissions": wider}).status_code == 200
            await anyio.sleep(1.2)  # the key is due for its next check
            res = await client.call_tool("arcane_container_list", {"environmentId": "0"})
            assert not res.is_error, text(res)
            with anyio.fail_after(10):
                await changed.wait()
            after = {t.name for t in (await client.list_tools()).tools}
            assert before < after and "arcane_image_list" in after


# ------------------------------------------------------------------ a spray of random keys


SPRAY = [f"arc_spray_{i:03d}_{'x' * 24}" for i in range(40)]
CHECK_BURST = 5


async def _post_async(http: httpx.AsyncClient, base: str, key: str) -> httpx.Response:
    return await http.post(base + "/mcp", json=PING, headers={**ACCEPT, "X-Arcane-API-Key": key})


async def test_a_spray_of_random_keys_costs_arcane_a_bounded_number_of_checks(sim, keys):
    """40 distinct bogus keys at once: at most the burst of key checks reach Arcane, the
    rest are 503 with Retry-After; a refused key sent again is refused without asking
    Arcane; a key already in use is served all along; no log line holds a bogus key."""
    env = {"ARCANE_MCP_ALLOW_ANONYMOUS": "false", "ARCANE_MCP_KEY_CHECK_RATE": "0.001",
           "ARCANE_MCP_KEY_CHECK_BURST": str(CHECK_BURST), "ARCANE_MCP_LOG_LEVEL": "info"}
    with http_server(sim, **env) as (base, proc):
        async with httpx.AsyncClient(timeout=60) as http:
            assert (await _post_async(http, base, KEY_A)).status_code == 200  # A's server exists before the spray
            left = CHECK_BURST - 1  # A's check took one of the burst
            sim.clear_requests()
            answers = await asyncio.gather(*[_post_async(http, base, k) for k in SPRAY],
                                           *[_post_async(http, base, KEY_A) for _ in range(10)])
            spray, good = answers[:len(SPRAY)], answers[len(SPRAY):]
            assert [a.status_code for a in good] == [200] * 10  # the key in use gets through during the spray
            by_reason: dict[str, list] = {}
            for a in spray:
                by_reason.setdefault(a.json()["error"]["data"]["reason"], []).append(a)
            assert set(by_reason) == {"rejected_key", "key_checks_busy"}
            assert len(by_reason["rejected_key"]) == left
            assert all(a.status_code == 401 for a in by_reason["rejected_key"])
            for a in by_reason["key_checks_busy"]:
                assert a.status_code == 503 and a.json()["error"]["code"] == -32050
                assert int(a.headers["retry-after"]) >= 1 and a.json()["error"]["data"]["retryAfter"] >= 1
            checks = [r for r in credentialed(sim) if not r.carried(KEY_A)]
            assert len(checks) == left and {r.path for r in checks} == {"/api/auth/me"}
            # a refused key again: refused from the table of digests, Arcane is not asked
            refused = next(k for k in SPRAY if any(r.carried(k) for r in checks))
            sim.clear_requests()
            again = await _post_async(http, base, refused)
            assert again.status_code == 401 and again.json()["error"]["data"]["reason"] == "rejected_key"
            assert credentialed(sim) == []
            stats = (await http.get(base + "/health")).json()["keys"]
        assert stats["checked"] == CHECK_BURST and stats["refused"] == left and stats["refused_again"] == 1
        assert stats["throttled"] == len(SPRAY) - left and stats["rejected_kept"] == left
        logged = stderr_of(proc)
    assert "refused by Arcane" in logged and not any(k in logged for k in SPRAY)


async def test_refused_keys_are_remembered_briefly_and_boundedly(sim, keys, catalog):
    now = [1000.0]
    settings = Settings(arcane_url=sim.url, audit_log="off", rejected_key_ttl=30.0, rejected_key_cache=3,
                        key_check_rate=1.0, key_check_burst=4)
    pool = Pool(runtime_for(catalog, settings), AuditLog("off"), anonymous=False, clock=lambda: now[0])

    async def refusal(key: str) -> str:
        with pytest.raises(Refusal) as ei:
            await pool.acquire(key)
        return ei.value.data["reason"]

    def asked(key: str) -> int:
        return sum(r.carried(key) for r in sim.requests())

    async with pool.run():
        sim.clear_requests()
        assert [await refusal(k) for k in SPRAY[:4]] == ["rejected_key"] * 4
        assert await refusal(SPRAY[4]) == "key_checks_busy"  # the burst is spent
        assert asked(SPRAY[4]) == 0
        # at most rejected_key_cache digests are kept, the oldest forgotten first; never a key
        assert len(pool.checks.rejected) == 3 and key_digest(SPRAY[0]) not in pool.checks.rejected
        assert not any(k in repr(pool.checks.rejected) for k in SPRAY)
        assert await refusal(SPRAY[3]) == "rejected_key" and asked(SPRAY[3]) == 1  # from the table
        now[0] += 1.0  # one check's worth of the rate
        assert await refusal(SPRAY[0]) == "rejected_key" and asked(SPRAY[0]) == 2  # forgotten: asked again
        now[0] += 30.5  # past the TTL: Arcane is asked again
        assert await refusal(SPRAY[3]) == "rejected_key" and asked(SPRAY[3]) == 2
        # a good key is made as usual: the who-am-I answer of its check is what it may do
        scoped, _ = create_key(sim, GRANTS)
        me, my_keys = me_and_keys(sim, scoped)
        sim.clear_requests()
        tenant = await pool.acquire(scoped)
        assert [r.path for r in sim.requests() if r.path == "/api/auth/me"] == ["/api/auth/me"]
        reasons = tenant.runtime.access.reasons
        assert reasons and reasons == visibility(catalog, me, my_keys, scoped)
    assert pool.checks.stats()["throttled"] == 1


async def test_the_key_servers_over_one_catalog_share_its_find_index(sim, keys, catalog):
    """The find index is megabytes: the servers of keys that see the same catalog share it."""
    pool = Pool(runtime_for(catalog, Settings(arcane_url=sim.url, audit_log="off")), AuditLog("off"), anonymous=False)
    async with pool.run():
        a, b = await pool.acquire(KEY_A), await pool.acquire(KEY_B)
        a.runtime.surface.tools()
        b.runtime.surface.tools()
        assert a.runtime.surface is not b.runtime.surface and a.runtime.catalog is b.runtime.catalog
        assert a.runtime.surface.ranker is b.runtime.surface.ranker


def test_the_rate_table_stays_bounded_whatever_the_keys():
    from interpreter.front.httpmode import RateLimiter

    now = [0.0]
    limiter = RateLimiter(0.001, 3, lambda: now[0], table_max=50)
    for i in range(1000):
        assert limiter.take(key_digest(f"arc_random_{i}")) is None
    assert len(limiter) <= 50
    hot = key_digest("arc_hot")
    assert [limiter.take(hot) is None for _ in range(4)] == [True, True, True, False]


# ------------------------------------------------------------------ connection lifetime


def test_a_client_pausing_past_uvicorns_default_keeps_its_connection(team):
    """uvicorn closes an idle connection after 5 s by default; a client that spends longer
    between two requests (compiling a long tools/list) must still be answered on it."""
    import time

    with httpx.Client(limits=httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=120), timeout=30) as http:
        peers = []
        for pause in (0, 6.5):
            time.sleep(pause)
            r = http.post(team + "/mcp", json=PING, headers={**ACCEPT, "X-Arcane-API-Key": KEY_A})
            assert r.status_code == 200
            peers.append(r.extensions["network_stream"].get_extra_info("client_addr"))
        assert peers[0] == peers[1]  # the same connection: the server did not drop it


# ------------------------------------------------------------------ logging


async def test_logging_set_level_filters_the_warnings(sim, team):
    sim.set_faults({"daemon_down": [DOWN_ENV]})
    try:
        got: dict[str, list] = {}
        for level in ("warning", "error"):
            logs: list = []
            async with client_for(team, KEY_A, logging_callback=lambda p, logs=logs: _keep(logs, p)) as client:
                await client.set_logging_level(level)
                await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {"environmentId": DOWN_ENV}})
            got[level] = logs
    finally:
        sim.set_faults(None)
    assert got["warning"] and got["error"] == []
    assert {p.logger for p in got["warning"]} == {"arcane_mcp.dispatch"}


async def test_stateful_sessions_of_one_key_keep_their_own_log_level(sim, stateful_team):
    """Two legacy sessions of one key on a stateful server: each logging/setLevel is that
    session's, and each session gets only its own call's notifications/message."""
    sim.set_faults({"daemon_down": [DOWN_ENV]})
    down = {"action": "container.list", "params": {"environmentId": DOWN_ENV}}
    logs: dict[str, list] = {"a": [], "b": []}
    try:
        async with client_for(stateful_team, KEY_A, logging_callback=lambda p: _keep(logs["a"], p)) as a, \
                client_for(stateful_team, KEY_A, logging_callback=lambda p: _keep(logs["b"], p)) as b:
            await a.set_logging_level("warning")
            await b.set_logging_level("error")  # after A's: per key, it would silence A too
            await a.call_tool(EXECUTE_TOOL, down)
            after_a = len(logs["a"])
            await b.call_tool(EXECUTE_TOOL, down)
            await b.set_logging_level("debug")
            await b.call_tool(EXECUTE_TOOL, down)
    finally:
        sim.set_faults(None)
    assert after_a > 0 and all(p.level == "warning" for p in logs["a"])
    assert len(logs["a"]) == after_a  # B's calls sent A nothing
    assert logs["b"] and {p.logger for p in logs["b"]} == {"arcane_mcp.dispatch"}  # only B's third call, at debug


@pytest.mark.parametrize("opt_in", [None, "warning"])
async def test_the_per_request_log_level_of_2026_07_28(sim, team, opt_in):
    sim.set_faults({"daemon_down": [DOWN_ENV]})
    try:
        logs: list = []
        async with client_for(team, KEY_A, "auto", log_level=opt_in, logging_callback=lambda p: _keep(logs, p)) as client:
            await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {"environmentId": DOWN_ENV}})
    finally:
        sim.set_faults(None)
    assert (logs != []) == (opt_in is not None)


def test_log_messages_are_scrubbed(catalog):
    import logging

    from interpreter.front.serve import log_text

    runtime = runtime_for(catalog, Settings(arcane_url="http://arcane.test", api_key="arc_canary_key_0123456789", audit_log="off"))
    record = logging.LogRecord("arcane_mcp.x", logging.WARNING, __file__, 1, "key %s at %s", ("arc_canary_key_0123456789",
                               "https://bob:hunter2-secret@example.com/x"), None)
    shown = log_text(record, runtime)
    assert "arc_canary_key_0123456789" not in shown and "hunter2-secret" not in shown and "\n" not in shown


# ------------------------------------------------------------------ drain, replicas


async def test_sigterm_drains_health_turns_503_and_the_call_in_flight_finishes(sim, keys):
    with http_server(sim, ARCANE_MCP_ALLOW_ANONYMOUS="false") as (base, proc):
        assert httpx.get(base + "/health").status_code == 200
        async with client_for(base, KEY_A) as client:
            await client.call_tool(EXECUTE_TOOL, {"action": "environment.list", "params": {}})  # the key's server exists
            sim.set_faults({"latency": {"seconds": 6, "match": "/environments/0/containers", "count": 1}})
            sim.clear_requests()
            call = asyncio.create_task(client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {}}))
            while not any(r.path == "/api/environments/0/containers" for r in sim.requests()):
                await asyncio.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            health = None
            while health is None or health.status_code == 200:
                health = await asyncio.to_thread(httpx.get, base + "/health")
            assert health.status_code == 503 and health.json()["status"] == "draining"
            result = await call
        assert not result.is_error and "List containers" in text(result)
        assert await asyncio.to_thread(proc.wait, 30) == 0
    sim.set_faults(None)


async def test_two_replicas_behind_alternating_requests(sim, team, replica):
    """A 2026-07-28 confirmation started on one replica is answered on the other (one
    shared sealing secret); each request goes to the other replica."""
    target, args, first, accept = await _delete_asked_with_key_a(sim, team)
    async with client_for(replica, KEY_A, "auto", elicitation_callback=_accept) as a:
        done = await a.session.call_tool(EXECUTE_TOOL, args, input_responses=accept, request_state=first.request_state,
                                         allow_input_required=True)
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert [r.method for r in sim.requests() if r.path.endswith(target["id"])][-1] == "DELETE"
    assert all(r.carried(KEY_A) for r in credentialed(sim))
    sim.reset()
    add_keys(sim)


class HandOver(Tasks):
    """A tasks client that keeps the handle and polls nothing itself: the test asks the
    other replica for the task."""

    async def resolve(self, handle, ctx) -> types.CallToolResult:
        self.handles.append(handle)
        return types.CallToolResult(content=[types.TextContent(type="text", text="handed over")])


async def test_a_task_started_on_one_replica_is_polled_on_the_other(sim, team, replica, keys):
    """A pull started as a task on one replica; tasks/get alternates between the two
    replicas until it completes, and the other replica's answer is the result. Another
    key's tasks/get of that ID, on either replica, is "not found"."""
    started = HandOver()
    seen: list[tuple[str, str]] = []
    on_a, on_b = Tasks(), Tasks()
    # a slow pull, so that the polls normally see it working on both replicas first (not
    # asserted: that would be a timed assertion)
    sim.set_knobs({"stream_line_seconds": 0.3})
    try:
        async with client_for(team, KEY_A, "auto", extensions=[started]) as a:
            assert EXTENSION in (a.server_capabilities.extensions or {})
            await a.call_tool(EXECUTE_TOOL, PULL)
        [handle] = started.handles
        assert handle.status == "working"
        async with client_for(team, KEY_A, "auto", extensions=[on_a]) as a, \
                client_for(replica, KEY_A, "auto", extensions=[on_b]) as b:
            with anyio.fail_after(WAIT):
                for turn in range(10_000):
                    tasks, client, name = (on_b, b, "replica") if turn % 2 == 0 else (on_a, a, "team")
                    got = await tasks.poll(client.session, handle.task_id)
                    seen.append((name, got.status))
                    if got.status != "working":
                        break
                    await anyio.sleep(0.1)
            last = await on_b.poll(b.session, handle.task_id)  # the replica that did not start it
    finally:
        sim.set_knobs({})
    assert {status for _, status in seen} <= {"working", "completed"} and seen[-1][1] == "completed"
    assert last.status == "completed"
    result = types.CallToolResult.model_validate(last.result)
    assert not result.is_error and result.structured_content["status"] == "done"
    assert result.structured_content["activityId"] in {x["id"] for x in sim.items("activities")}
    for base in (replica, team):
        other = Tasks()
        async with client_for(base, KEY_C, "auto", extensions=[other]) as c:
            with pytest.raises(MCPError) as ei:
                await other.poll(c.session, handle.task_id)
        assert ei.value.code == -32602 and ei.value.data == {"taskId": handle.task_id[:80]}


# ------------------------------------------------------------------ TLS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and localhost, made now with the openssl CLI."""
    openssl = shutil.which("openssl")
    assert openssl, "the TLS tests need the openssl command (the openssl package)"
    where = tmp_path_factory.mktemp("tls")
    cert, key = str(where / "cert.pem"), str(where / "key.pem")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=arcane-mcp test",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True, timeout=60)
    return cert, key


async def test_tls_with_a_real_certificate(sim, keys, certificate):
    """A public bind with --tls-cert/--tls-key serves HTTPS: an SDK client trusting the
    certificate initializes and lists tools; plain HTTP, or HTTPS without trusting it, fails."""
    cert, key = certificate
    trust = ssl.create_default_context(cafile=cert)
    with http_server(sim, "--tls-cert", cert, "--tls-key", key, bind="0.0.0.0", tls=trust, ARCANE_MCP_AUDIT_LOG="off") as (base, _):
        assert base.startswith("https://")
        async with client_for(base, KEY_A, verify=trust) as client:
            assert client.server_info.name == "arcane-mcp"
            tools = (await client.list_tools()).tools
        assert EXECUTE_TOOL in {t.name for t in tools}
        health = await asyncio.to_thread(httpx.get, base + "/health", verify=trust)
        assert health.status_code == 200
        plain = "http://" + base.removeprefix("https://")
        with pytest.raises(httpx.TransportError):
            await asyncio.to_thread(post, plain, PING, **{"X-Arcane-API-Key": KEY_A})
        with pytest.raises(httpx.ConnectError) as untrusted:
            await asyncio.to_thread(httpx.get, base + "/health")
        assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value)
