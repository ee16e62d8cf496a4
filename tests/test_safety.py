"""Safety and identity through real MCP client sessions: the confirmation matrix, safe
mode, read-only and exclusions, deadlines, session login/refresh, the audit log and
secrets that must never leak."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from contextlib import asynccontextmanager

import mcp.types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from interpreter.build.catalog import BuildOptions, build
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from interpreter.front.names import EXECUTE_TOOL, FIND_TOOL, Namer
from interpreter.front.serve import build_runtime, build_server
from interpreter.text.render import Renderer
from tests.helpers import list_tools_then_drift_read, serve_http_in_thread
from tests.test_e2e import ERAS, INTERP, SURFACES, Caller, text

pytestmark = pytest.mark.anyio


def base_env(sim, **extra) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
            "ARCANE_MCP_AUDIT_LOG": "off", **extra}


@asynccontextmanager
async def serve(env: dict, era: str, **client_kw):
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode=era, **client_kw) as client:
        await list_tools_then_drift_read(client, env["ARCANE_URL"])  # as a client does after initialize; the start's reads are then done
        yield client


@asynccontextmanager
async def serve_in_process(sim, surface: str, era: str, *, settings: dict | None = None, **client_kw):
    """The server `interp serve` builds, in this process (an in-memory transport, no
    subprocess), against `sim` with the given surface (and `settings` over the defaults):
    for the cases where the stdio process itself is not what is tested."""
    settings = Settings(**{"arcane_url": sim.url, "api_key": sim.api_key, "audit_log": "off", "surface": surface, **(settings or {})})
    runtime = build_runtime(settings, audit=AuditLog("off"))
    await runtime.dispatcher.client.start()
    try:
        async with Client(build_server(runtime), mode=era, **client_kw) as client:
            await client.list_tools()
            yield client
    finally:
        await runtime.dispatcher.client.aclose()


def answering(reply: str | None, asked: list):
    """An elicitation callback that keeps every request's params in `asked` and answers
    `reply`: accept (with confirm: true), decline or cancel."""
    async def callback(context, params):
        asked.append(params)
        if reply == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action=reply)

    return callback


def next_steps_of(markdown: str) -> list[str]:
    """The list lines of a result's "Next steps" section (empty when it has none)."""
    lines = markdown.splitlines()
    if "### Next steps" not in lines:
        return []
    section = lines[lines.index("### Next steps") + 1:]
    return [line for line in section[: next((i for i, x in enumerate(section) if not x.startswith("- ")), len(section))]]


def exited_container(sim) -> dict:
    return next(c for c in sim.items("containers") if c["state"] == "exited")


# ------------------------------------------------------------------ confirmation matrix


CLIENT_KINDS = ("accepts", "declines", "no_capability")
# the whole matrix in process; over a real stdio subprocess, each surface in each era once,
# the client kind rotating (so each era meets every kind): the transport and the process's
# own start are tested there, the matrix's logic in both
STDIO_ROWS = [(surface, era, CLIENT_KINDS[i % len(CLIENT_KINDS)])
              for i, (surface, era) in enumerate((s, e) for s in SURFACES for e in ERAS)]
MATRIX = [("stdio", *row) for row in STDIO_ROWS] + [
    ("memory", surface, era, kind) for surface in SURFACES for era in ERAS for kind in CLIENT_KINDS]


def test_the_stdio_rows_cover_every_surface_era_and_client_kind():
    assert {(s, e) for s, e, _ in STDIO_ROWS} == {(s, e) for s in SURFACES for e in ERAS}
    for era in ERAS:
        assert {k for _, e, k in STDIO_ROWS if e == era} == set(CLIENT_KINDS)


@pytest.mark.parametrize("transport,surface,era,client_kind", MATRIX)
async def test_confirmation_matrix_on_stdio_and_in_process(sim, transport, surface, era, client_kind):
    """stdio: legacy -> elicitation/create, 2026-07-28 -> input-required answered on retry;
    a client without the capability is refused and asked to pass confirm: true."""
    target = exited_container(sim)
    asked: list = []
    kw = {} if client_kind == "no_capability" else {"elicitation_callback": answering("accept" if client_kind == "accepts" else "decline", asked)}
    session = serve(base_env(sim, ARCANE_MCP_SURFACE=surface), era, **kw) if transport == "stdio" \
        else serve_in_process(sim, surface, era, **kw)
    async with session as client:
        sim.clear_requests()
        res = await Caller(client, surface)("container.delete", {"containerId": target["id"]})
    sent = [(r.method, r.path) for r in sim.requests()]
    # the question names the target and the environment: two reads (the domain's get, the
    # environment's) look them up, nothing else is sent before consent
    lookup = {("GET", f"/api/environments/0/containers/{target['id']}"), ("GET", "/api/environments/0")}
    name = target["names"][0].lstrip("/")
    env = next(e for e in sim.items("environments", None) if e["id"] == "0")["name"]
    question = f"Delete container: `{name}` (containerId {target['id'][:12]}…) on environment `{env}` (environmentId 0)?"
    if client_kind == "accepts":
        assert not res.is_error, text(res)
        assert [p.message for p in asked] == [question]
        assert set(sent[:2]) == lookup and sent[2:] == [("DELETE", f"/api/environments/0/containers/{target['id']}")]
        sim.reset()
    elif client_kind == "declines":
        assert res.is_error and text(res).startswith("Error: declined")
        assert len(asked) == 1 and set(sent) == lookup and len(sent) == 2
    else:
        # nobody to ask: the refusal carries the same question; only its reads were sent
        assert res.is_error and "confirm: true" in text(res) and question in text(res)
        assert set(sent) == lookup and len(sent) == 2


@pytest.fixture(scope="module")
def http_servers(sim, tmp_path_factory):
    """Six HTTP servers: stateless (the default) and stateful (ARCANE_MCP_HTTP_STATEFUL), on
    each surface, each with its own audit file: {(mode, surface): (url, audit path)}. Each
    runs in a thread of this process (tests.helpers.serve_http_in_thread): the confirmation
    rounds over HTTP are tested here, the server's process in tests/test_http.py."""
    servers = {}
    audits = tmp_path_factory.mktemp("http-audit")
    with contextlib.ExitStack() as stack:
        for mode, extra in (("stateless", {}), ("stateful", {"ARCANE_MCP_HTTP_STATEFUL": "true"})):
            for surface in SURFACES:
                audit = audits / f"{mode}-{surface}.jsonl"
                base = stack.enter_context(serve_http_in_thread(
                    base_env(sim, ARCANE_MCP_AUDIT_LOG=str(audit), ARCANE_MCP_SURFACE=surface, **extra)))
                servers[(mode, surface)] = (f"{base}/mcp", audit)
        yield servers


def last_record(audit, action: str) -> dict:
    records = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("action") == action][-1]


# The HTTP rows of the safety issue's matrix, every client kind: a stateless legacy request
# has no back-channel (refused, whatever the client could do); a stateful legacy session is
# asked with elicitation/create on its stream; 2026-07-28 gets an input-required result in
# both modes. A client without the capability is refused before anything is sent.
HTTP_MATRIX = [(mode, era, client) for mode in ("stateless", "stateful") for era in ERAS
               for client in ("accepts", "declines", "cancels", "no_capability")]
# the whole matrix on the dynamic surface (the default); the client kinds that reach
# Arcane or are refused before it, on meta and individual too
HTTP_CASES = [(mode, era, client, "dynamic") for mode, era, client in HTTP_MATRIX] + [
    (mode, era, client, surface) for surface in ("meta", "individual") for mode, era, client in HTTP_MATRIX
    if client in ("accepts", "no_capability") or (client == "declines" and era == "auto")]


def http_expectation(mode: str, era: str, client: str) -> str:
    if client == "no_capability" or (mode == "stateless" and era == "legacy"):
        return "refused"
    return "executed" if client == "accepts" else "declined"


@pytest.mark.parametrize("mode,era,client_kind,surface", HTTP_CASES)
async def test_confirmation_matrix_on_http(sim, http_servers, mode, era, client_kind, surface):
    target = exited_container(sim)
    url, audit = http_servers[(mode, surface)]
    reply = {"accepts": "accept", "declines": "decline", "cancels": "cancel"}.get(client_kind)
    asked: list[types.ElicitRequestParams] = []
    kw = {"elicitation_callback": answering(reply, asked)} if reply else {}
    async with Client(url, mode=era, **kw) as client:
        assert (client.protocol_version == "2026-07-28") == (era == "auto")
        sim.clear_requests()
        res = await Caller(client, surface)("container.delete", {"containerId": target["id"]})
    record = last_record(audit, "container.delete")
    expect = http_expectation(mode, era, client_kind)
    delete = ("DELETE", f"/api/environments/0/containers/{target['id']}")
    sent = [(r.method, r.path) for r in sim.requests()]
    # the reads that name the target and its environment (the environment's name is kept a while)
    reads = [x for x in sent if x[0] == "GET"]
    assert ("GET", f"/api/environments/0/containers/{target['id']}") in reads
    assert set(reads) <= {("GET", f"/api/environments/0/containers/{target['id']}"), ("GET", "/api/environments/0")}
    assert record["outcome"] == expect and record["surface"] == surface
    if expect == "refused":
        assert res.is_error and "confirm: true" in text(res) and target["names"][0].lstrip("/") in text(res)
        assert record["error_class"] == "ConfirmationRequired" and "confirmation" not in record
        assert asked == [] and sent == reads
        return
    # asked once (elicitation/create on a stateful stream, or the input-required round), with
    # a form whose one required field is the boolean confirm, naming the target
    [question] = asked
    assert question.requested_schema["required"] == ["confirm"]
    assert question.requested_schema["properties"]["confirm"]["type"] == "boolean"
    assert target["id"][:12] in question.message and target["names"][0].lstrip("/") in question.message
    assert record["confirmation"] == "elicitation"
    if expect == "executed":
        assert not res.is_error, text(res)
        assert sent == [*reads, delete] and "error_class" not in record
        sim.reset()
    else:
        assert res.is_error and text(res).startswith("Error: declined") and f"({reply})" in text(res)
        assert sent == reads and record["error_class"] == "ConfirmationRequired"


async def test_a_forged_or_altered_request_state_is_refused(sim):
    target = exited_container(sim)
    async with serve(base_env(sim), "auto", elicitation_callback=answering("accept", [])) as client:
        args = {"action": "container.delete", "params": {"containerId": target["id"]}}
        first = await client.session.call_tool(EXECUTE_TOOL, args, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        accept = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
        sim.clear_requests()
        for state, arguments in [("forged-state", args), (first.request_state[:-4] + "AAAA", args),
                                 (first.request_state, {**args, "params": {"containerId": "another-one"}})]:
            with pytest.raises(MCPError) as ei:
                await client.session.call_tool(EXECUTE_TOOL, arguments, input_responses=accept, request_state=state,
                                               allow_input_required=True)
            assert ei.value.code == -32602
        assert sim.requests() == []


# ------------------------------------------------------------------ safe mode


@pytest.mark.parametrize("surface", SURFACES)
async def test_safe_mode_previews_and_sends_nothing(sim, surface, golden):
    target = exited_container(sim)
    # a real stdio process on the dynamic surface (the golden files'), in process on the others
    kw = {"elicitation_callback": answering("accept", [])}
    session = serve(base_env(sim, ARCANE_MCP_SURFACE=surface, ARCANE_MCP_SAFE_MODE="true"), "auto", **kw) if surface == "dynamic" \
        else serve_in_process(sim, surface, "auto", settings={"safe_mode": True}, **kw)
    async with session as client:
        call = Caller(client, surface)
        sim.clear_requests()
        res = await call("container.restart", {"containerId": target["id"]})
        assert not res.is_error and res.structured_content["preview"] is True
        assert res.structured_content["method"] == "POST" and res.structured_content["path"].endswith(f"/{target['id']}/restart")
        # destructive without confirm: refused in safe mode (never asked); with confirm: previewed
        res = await call("container.delete", {"containerId": target["id"]})
        assert res.is_error and "Safe mode is on" in text(res)
        res = await call("container.delete", {"containerId": target["id"]}, confirm=True)
        assert not res.is_error and "Preview (safe mode)" in text(res)
        # secrets in the body are masked; credentials never shown
        res = await call("git_repository.create", {"name": "infra", "url": "https://git.example/infra.git", "authType": "http",
                                                   "username": "bob", "token": "s3cret-token-value", "sshKey": "-----BEGIN KEY-----"})
        assert not res.is_error, text(res)
        if surface == "dynamic":
            golden("safe_mode_preview_git_repository_create", text(res))
        assert "BEGIN KEY" not in text(res)
        assert "s3cret-token-value" not in json.dumps(res.structured_content) and "s3cret-token-value" not in text(res)
        assert res.structured_content["body"]["token"] == "[secret]" and res.structured_content["body"]["username"] == "bob"
        assert sim.api_key not in text(res)
        # no change reached Arcane: only the reads that name the deleted container and its environment
        assert {(r.method, r.path) for r in sim.requests()} == {("GET", f"/api/environments/0/containers/{target['id']}"),
                                                                 ("GET", "/api/environments/0")}
        sim.clear_requests()
        # reads run normally; next steps mark state-changing actions
        res = await call("container.get", {"containerId": target["id"]})
        assert not res.is_error and len(sim.requests()) == 1
        assert "(safe mode: preview only)" in text(res)
        if surface == "dynamic":
            golden("safe_mode_next_steps", text(res)[text(res).index("### Next steps"):])


# ------------------------------------------------------------------ read-only and exclusions


@pytest.mark.parametrize("surface", SURFACES)
async def test_read_only_and_exclusions_remove_actions_everywhere(sim, surface):
    env = base_env(sim, ARCANE_MCP_SURFACE=surface, ARCANE_MCP_READ_ONLY="true", ARCANE_MCP_EXCLUDE_TOOLS="image,container.get_edit_config,swarm*")
    # the environment variables through a real stdio process on the dynamic surface; the
    # same settings in process on the others
    session = serve(env, "auto") if surface == "dynamic" else serve_in_process(
        sim, surface, "auto", settings={"read_only": True, "exclude_tools": ("image", "container.get_edit_config", "swarm*")})
    async with session as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        call = Caller(client, surface)
        if surface == "individual":
            assert "arcane_container_list" in tools and "arcane_container_restart" not in tools
            assert "arcane_image_list" not in tools and "arcane_image_update_summary" in tools  # the domain image only
            assert not any(n.startswith("arcane_swarm") for n in tools)
            assert all(t.annotations.read_only_hint for t in tools.values())
        elif surface == "meta":
            assert "arcane_image" not in tools and not any(n.startswith("arcane_swarm") for n in tools)
            enum = tools["arcane_container"].input_schema["properties"]["action"]["enum"]
            assert "restart" not in enum and "get_edit_config" not in enum and "list" in enum
            assert tools["arcane_container"].annotations.read_only_hint and not tools["arcane_container"].annotations.destructive_hint
        else:
            found = await client.call_tool(FIND_TOOL, {"query": "restart a container", "limit": 20})
            ids = [a["id"] for a in found.structured_content["actions"]]
            assert "container.restart" not in ids and all(not a["destructive"] for a in found.structured_content["actions"])
            assert tools[EXECUTE_TOOL].annotations.read_only_hint
        # the overlays relate these reads to actions that change state (container.restart,
        # environment.test): next steps offer only what this read-only server serves
        full = build().actions
        served_catalog = build(BuildOptions(read_only=True, exclude=("image", "container.get_edit_config", "swarm*")))
        served = served_catalog.actions
        by_name = {Namer(surface)(aid): aid for aid in full}
        for action_id, params in (("container.get", {"containerId": exited_container(sim)["id"]}), ("environment.get", {"id": "0"})):
            res = await call(action_id, params)
            assert not res.is_error
            states = full[action_id].states
            linked = full[action_id].follow_ups + full[action_id].related + (tuple(states.gated) if states else ())
            mutating = {a for a in linked if not full[a].read_only}
            assert mutating  # else this test would prove nothing
            offered = [by_name[line[2:].split(" — ", 1)[0]] for line in next_steps_of(text(res))]
            assert all(served[aid].read_only for aid in offered) and not mutating & set(offered)
            state = states.state_of(res.structured_content) if states else None
            assert offered == Renderer(served_catalog).step_ids(served[action_id], state)
        if surface == "dynamic":
            res = await call("container.restart", {"containerId": "x"})
            assert res.is_error and "read-only mode" in text(res)


# ------------------------------------------------------------------ deadlines


async def test_deadlines_with_a_slow_arcane(sim):
    env = base_env(sim, ARCANE_MCP_REQUEST_TIMEOUT="1s", ARCANE_MCP_ACTION_TIMEOUT="2s")
    async with serve(env, "auto") as client:
        call = Caller(client, "dynamic")
        sim.set_faults({"latency": {"seconds": 1.5, "match": "list-containers"}})  # the simulator matches operationIds
        try:
            res = await call("container.list")  # the request deadline
        finally:
            sim.set_faults({})
        assert res.is_error and "did not answer within 1s" in text(res) and "Narrow the request" in text(res)
        sim.set_faults({"latency": {"seconds": 1.5, "match": "restart-container"}})
        try:
            res = await call("container.restart", {"containerId": exited_container(sim)["id"]})
        finally:
            sim.set_faults({})
        assert res.is_error and "the change may have happened" in text(res) and "container.get" in text(res)
    env = base_env(sim, ARCANE_MCP_REQUEST_TIMEOUT="5s", ARCANE_MCP_ACTION_TIMEOUT="1s")
    async with serve(env, "legacy") as client:
        sim.set_faults({"latency": {"seconds": 2.0, "match": "list-containers"}})
        try:
            res = await Caller(client, "dynamic")("container.list")  # the action deadline
        finally:
            sim.set_faults({})
        assert res.is_error and "ARCANE_MCP_ACTION_TIMEOUT (1s)" in text(res)


# ------------------------------------------------------------------ identity


@pytest.mark.parametrize("surface", SURFACES)
async def test_session_expiry_mid_session_refreshes_once(sim, surface):
    env = base_env(sim, ARCANE_MCP_SURFACE=surface)
    env.pop("ARCANE_API_KEY")
    env.update(ARCANE_USERNAME="arcane", ARCANE_PASSWORD="arcane-admin")
    # a real stdio process on the dynamic surface, in process on the others
    session = serve(env, "auto") if surface == "dynamic" else \
        serve_in_process(sim, surface, "auto", settings={"api_key": None, "username": "arcane", "password": "arcane-admin"})
    async with session as client:
        call = Caller(client, surface)
        assert not (await call("container.list", {"limit": 1})).is_error
        sim.expire_sessions()
        sim.clear_requests()
        res = await call("container.list", {"limit": 1})
        assert not res.is_error, text(res)
        assert [(r.method, r.path) for r in sim.requests()] == [
            ("GET", "/api/environments/0/containers"), ("POST", "/api/auth/refresh"), ("GET", "/api/environments/0/containers")]
        # a refresh that fails and a login that fails: a clear error, no loop
        sim.expire_sessions(refresh=True)
        sim.set_users([])
        sim.clear_requests()
        try:
            res = await call("container.list", {"limit": 1})
        finally:
            sim.reset()
        assert res.is_error and "ARCANE_USERNAME" in text(res)
        assert len(sim.requests()) <= 3


async def test_mfa_login_is_a_clear_startup_error(sim):
    env = base_env(sim, ARCANE_USERNAME="mfa-user", ARCANE_PASSWORD="mfa-user-password")
    env.pop("ARCANE_API_KEY")
    proc = subprocess.run([INTERP, "serve"], env=env, capture_output=True, text=True, timeout=60, input="")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "ARCANE_API_KEY" in line and "mfa-user-password" not in proc.stderr


async def test_bearer_only_action_with_only_a_key(sim):
    async with serve(base_env(sim), "auto") as client:
        res = await Caller(client, "dynamic")("api_key.create_mine", {"name": "mine"})
    assert res.is_error and "ARCANE_USERNAME" in text(res) and "ARCANE_PASSWORD" in text(res)


# ------------------------------------------------------------------ audit log and secrets


async def test_audit_log_and_no_secret_leaks(sim, tmp_path):
    audit = tmp_path / "audit.jsonl"
    planted_arg = "planted-password-0xC0FFEE"
    planted_answer = "planted-answer-secret-0xBEEF"  # stored in Arcane, then part of its answers
    env = base_env(sim, ARCANE_MCP_AUDIT_LOG=str(audit), ARCANE_MCP_LOG_LEVEL="debug")
    errlog = tmp_path / "stderr.txt"
    target = exited_container(sim)
    # the server's own stderr (logs at debug level) goes to a file we read afterwards
    params = StdioServerParameters(command="/bin/sh", args=["-c", f'exec "{INTERP}" serve 2>>"{errlog}"'], env=env)
    async with Client(params, mode="legacy", elicitation_callback=answering("decline", [])) as client:
        call = Caller(client, "dynamic")
        await call("container.list", {"limit": 2})  # executed
        await call("git_repository.create", {"name": "n", "url": "https://g.example/r.git", "authType": "http", "token": planted_arg})  # executed
        await call("volume.create", {"name": "leak-test", "labels": {"token": planted_answer}})
        res = await call("volume.get", {"volumeName": "leak-test"})  # Arcane's answer carries the secret
        assert planted_answer in json.dumps(res.structured_content)  # the model may see it; logs may not
        await call("container.delete", {"containerId": target["id"]})  # declined
        await call("container.get", {"containerId": "no-such-container"})  # failed
    env_safe = {**env, "ARCANE_MCP_SAFE_MODE": "true"}
    params = StdioServerParameters(command="/bin/sh", args=["-c", f'exec "{INTERP}" serve 2>>"{errlog}"'], env=env_safe)
    async with Client(params, mode="legacy") as client:
        call = Caller(client, "dynamic")
        await call("git_repository.create", {"name": "n", "url": "https://g.example/r.git", "authType": "http", "token": planted_arg})  # previewed
        await call("container.kill", {"containerId": target["id"]})  # refused (safe mode)
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    outcomes = {r["outcome"] for r in records}
    assert outcomes >= {"executed", "previewed", "refused", "declined", "failed"}
    for r in records:
        assert set(r) >= {"time", "surface", "tool", "action", "outcome", "arguments", "duration_ms"}
        assert all(isinstance(a, str) for a in r["arguments"])
    declined = next(r for r in records if r["outcome"] == "declined")
    assert declined["confirmation"] == "elicitation" and declined["environment"] == "0"
    everything = audit.read_text() + errlog.read_text()
    for secret in (planted_arg, planted_answer, sim.api_key):
        assert secret not in everything
    assert "DEBUG arcane_mcp.dispatch: dispatch volume.get" in errlog.read_text()  # the server's own log ran at debug level
    (tmp_path / "examples.json").write_text(json.dumps({o: next(r for r in records if r["outcome"] == o) for o in sorted(outcomes)}, indent=1))
