"""The plain-HTTP handler kinds (interpreter/call/transfer.py) and downloads at scale: the
kinds table against compile's, their options checked by schema and compile, what each
sends (no credential for the public ones, the form body of the token exchange), the
global-admin refusal of pprof, secrets kept out of the log, and a 1 GiB body read past
ARCANE_MCP_MAX_DOWNLOAD_BYTES within a memory budget (a size, not a time).

The MCP-session versions of these are in tests/test_e2e_transfer.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import urllib.parse
from pathlib import Path

import httpx
import pytest
from jsonschema import Draft202012Validator

from interpreter import CATALOG_DIR
from interpreter.build.compile import Reader, compile_extra_routes
from interpreter.build.load import load_file
from interpreter.call import kinds
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.handlers import HANDLERS
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from simulator import start_simulator
from tests import big_body
from tests.helpers import make_dispatcher

pytestmark = pytest.mark.anyio
HOOK = "arc_wh_9f3c2a1b7d4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081"  # the demo state's redeploy-blog webhook
READONLY_KEY = "arc_sim_readonly_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"  # not a global admin
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def sim():
    with start_simulator(knobs={"time_scale": 0.01}) as s:
        yield s
        assert s.violations == [], s.violations


def dispatcher(catalog, sim, key=None, **kw) -> Dispatcher:
    settings = Settings(arcane_url=sim.url, api_key=key or sim.api_key, audit_log="off", **kw)
    return Dispatcher(catalog, settings, ArcaneClient(settings), AuditLog("off"))


async def call(d: Dispatcher, action: str, args: dict):
    try:
        return await d.dispatch(Call(action, args))
    finally:
        await d.client.aclose()


# ---------------------------------------------------------------- the tables and their checks


def test_the_served_kinds_are_the_handlers():
    # besides the extra routes' kinds: every OpenAPI operation's, and the one overlays set
    assert {k for k, served in kinds.route_kinds().items() if served} | {"rest", "chunked_upload"} == set(HANDLERS)


def test_no_served_route_is_pending_and_each_kind_serves_a_route(catalog):
    mine = ("binary_download", "text_download", "webhook_trigger", "token_exchange")
    routes = [a for a in catalog.actions.values() if a.handler in mine]
    assert {a.handler for a in routes} == set(mine)
    assert [a.id for a in routes if a.pending] == []
    assert all(a.security == "public" for a in routes if a.handler in kinds.public_kinds())


def _route(**kw) -> dict:
    route = {"id": "x.y", "method": "POST", "path": "/things/{token}", "handler": "webhook_trigger", "title": "T", "description": "D",
             "security": "public", "options": {"accepted_status": 202},
             "params": {"token": {"in": "path", "type": "string", "required": True}}}
    route.update(kw)
    return route


def _schema_errors(route: dict) -> list[str]:
    schema = json.loads((CATALOG_DIR / "schemas" / "extra-routes.schema.json").read_text())
    return [e.json_path for e in Draft202012Validator(schema).iter_errors({"version": 1, "routes": [route]})]


def test_the_schema_checks_each_kinds_options():
    assert _schema_errors(_route()) == []
    assert _schema_errors(_route(options={})) != []  # accepted_status is required
    assert _schema_errors(_route(options={"accepted_status": 202, "colour": 1})) != []
    assert _schema_errors(_route(handler="token_exchange", options={"accepted_status": 202})) != []
    assert _schema_errors(_route(handler="token_exchange", options={"fixed_form": {"grant_type": GRANT}, "secret_members": ["access_token"]})) == []
    assert _schema_errors(_route(handler="binary_download", options={"admin_only": "yes"})) != []


def test_compile_checks_what_the_options_name():
    r = Reader.of({"routes": [_route(security="either"),
                              _route(handler="binary_download", method="GET", options={"wait_argument": "secs"})]})
    compile_extra_routes(r)
    assert sorted((parts, code) for parts, _, code in r.found) == [
        (("routes", 0, "security"), "public_kind"), (("routes", 1, "options", "wait_argument"), "unknown_param")]


def test_the_shipped_extra_routes_pass_their_schema():
    data = load_file(CATALOG_DIR / "extra-routes.yaml")[0].data
    schema = json.loads((CATALOG_DIR / "schemas" / "extra-routes.schema.json").read_text())
    assert list(Draft202012Validator(schema).iter_errors(data)) == []


# ---------------------------------------------------------------- what is sent


async def test_the_webhook_trigger_sends_no_credential_and_says_accepted(catalog, sim):
    sim.clear_requests()
    res = await call(dispatcher(catalog, sim), "webhook.trigger", {"token": HOOK})
    assert not res.is_error, res.text
    assert (res.structured["accepted"], res.structured["httpStatus"], res.structured["status"]) == (True, 202, "accepted")
    [req] = [q for q in sim.requests() if q.path.startswith("/api/webhooks/")]
    assert req.path == f"/api/webhooks/trigger/{HOOK}" and req.credential is None
    assert {k for k, _ in req.headers} & {"x-api-key", "authorization", "cookie"} == set()


async def test_a_public_route_drops_the_cookie_jar(catalog):
    d, rec = make_dispatcher(catalog, lambda r: httpx.Response(202, json={"success": True, "data": {"status": "accepted"}}))
    d.client._client.cookies.set("token", "a-session-cookie")
    try:
        res = await d.dispatch(Call("webhook.trigger", {"token": HOOK}))
    finally:
        await d.client.aclose()
    assert not res.is_error and res.structured["accepted"] is True
    [req] = rec.requests
    assert {"cookie", "x-api-key", "authorization"} & {k.lower() for k in req.headers} == set()


async def test_an_unknown_webhook_is_arcanes_404(catalog, sim):
    res = await call(dispatcher(catalog, sim), "webhook.trigger", {"token": "arc_wh_00000000deadbeef"})
    assert res.is_error and res.error_code == "arcane_http" and "webhook not found" in res.text


async def test_the_token_exchange_posts_a_form_with_the_grant_type(catalog, sim):
    sim.clear_requests()
    subject = sim.federated_token()
    res = await call(dispatcher(catalog, sim), "auth.exchange_token", {"subject_token": subject, "subject_token_type": JWT_TYPE})
    assert not res.is_error, res.text
    token = res.structured["access_token"]
    assert res.structured["token_type"] == "Bearer" and token in res.text  # what the caller asked for
    [req] = [q for q in sim.requests() if q.path == "/api/auth/federated/token"]
    assert req.header("content-type") == "application/x-www-form-urlencoded" and req.credential is None
    form = dict(urllib.parse.parse_qsl(req.body.decode()))
    assert form == {"grant_type": GRANT, "subject_token": subject, "subject_token_type": JWT_TYPE}
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.get(sim.url + "/api/auth/me", headers=bearer).status_code == 200  # a real Arcane session


async def test_the_token_exchange_sends_a_subject_token_type_arcane_takes(catalog, sim):
    """federated/service.go validateTokenExchangeRequestInternal refuses (400 invalid_request) a
    request without subject_token_type or with one besides jwt and id_token: the action
    requires one of those two, so such a call is refused before anything is sent."""
    types = ["urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token"]
    schema = catalog.actions["auth.exchange_token"].input_schema
    assert "subject_token_type" in schema["required"] and schema["properties"]["subject_token_type"]["enum"] == types
    sim.clear_requests()
    subject = sim.federated_token()
    for args in ({}, {"subject_token_type": ""}, {"subject_token_type": "urn:ietf:params:oauth:token-type:saml2"},
                 {"subject_token_type": JWT_TYPE, "requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token"}):
        res = await call(dispatcher(catalog, sim), "auth.exchange_token", {"subject_token": subject, **args})
        assert res.is_error and res.error_code == "invalid_arguments", (args, res.text)
        assert set(res.error_fields) & {"subject_token_type", "requested_token_type"}, res.error_fields
    assert sim.requests() == []
    for kind in types:  # each type Arcane takes is exchanged
        res = await call(dispatcher(catalog, sim), "auth.exchange_token", {"subject_token": sim.federated_token(), "subject_token_type": kind})
        assert not res.is_error and res.structured["token_type"] == "Bearer", res.text
    sent = [dict(urllib.parse.parse_qsl(q.body.decode())) for q in sim.requests() if q.path == "/api/auth/federated/token"]
    assert [f["subject_token_type"] for f in sent] == types


async def test_a_refused_exchange_is_arcanes_400(catalog, sim):
    res = await call(dispatcher(catalog, sim), "auth.exchange_token", {"subject_token": "garbage", "subject_token_type": JWT_TYPE})
    assert res.is_error and res.error_code == "arcane_http" and res.structured is None


async def test_secrets_stay_out_of_the_log(catalog, sim, caplog):
    from interpreter.commands.cli import _logging

    _logging("DEBUG")
    caplog.set_level(logging.DEBUG)
    subject = sim.federated_token()
    await call(dispatcher(catalog, sim), "webhook.trigger", {"token": HOOK})
    res = await call(dispatcher(catalog, sim), "auth.exchange_token", {"subject_token": subject, "subject_token_type": JWT_TYPE})
    assert caplog.records, "nothing was logged at DEBUG"
    for secret in (HOOK, subject, res.structured["access_token"], sim.api_key):
        assert secret not in caplog.text


async def test_safe_mode_previews_mask_the_token(catalog, sim):
    sim.clear_requests()
    res = await call(dispatcher(catalog, sim, safe_mode=True), "webhook.trigger", {"token": HOOK})
    assert not res.is_error and res.structured["preview"] is True
    assert HOOK not in res.text and HOOK not in json.dumps(res.structured) and "/path/token" in res.structured["masked"]
    assert sim.requests() == []


# ---------------------------------------------------------------- pprof


async def test_a_profile_as_a_global_admin_is_a_binary_download(catalog, sim):
    res = await call(dispatcher(catalog, sim), "diagnostics.profile", {"name": "heap"})
    assert not res.is_error, res.text
    [blob] = res.blobs
    assert blob.data[:2] == b"\x1f\x8b" and res.structured["size"] == len(blob.data)  # gzip, as Go's pprof sends
    res = await call(dispatcher(catalog, sim), "diagnostics.profile", {"name": "goroutine", "debug": 1})
    assert not res.is_error and res.blobs == [] and res.structured["text"].startswith("goroutine profile")
    res = await call(dispatcher(catalog, sim), "diagnostics.cpu_profile", {"seconds": 1})
    assert not res.is_error and res.blobs[0].filename == "profile"


@pytest.mark.parametrize("action,args", [("diagnostics.profile", {"name": "heap"}), ("diagnostics.cmdline", {}),
                                         ("diagnostics.symbol", {"body": "0x4011a0"}), ("diagnostics.trace", {"seconds": 1})])
async def test_pprof_as_a_non_admin_names_the_rule(catalog, sim, action, args):
    res = await call(dispatcher(catalog, sim, key=READONLY_KEY), action, args)
    assert res.is_error and res.error_code == "admin_required" and "global admin" in res.text
    assert res.http_status == 403


async def test_pprof_without_a_valid_key_names_the_rule_too(catalog, sim):
    res = await call(dispatcher(catalog, sim, key="arc_not_a_key"), "diagnostics.cmdline", {})
    assert res.is_error and res.error_code == "admin_required" and res.http_status == 401


# ---------------------------------------------------------------- downloads at scale


def test_a_1_gib_body_is_read_only_up_to_the_cap_within_a_memory_budget():
    """tests/big_body.py: the body comes from another process, so the figures are the engine's."""
    cap = 10 * MiB
    text, binary = big_body.run_all(cap)
    assert not text.result.is_error
    s = text.result.structured
    assert (s["truncated"], len(s["text"].encode()), s["bodyBytes"], s["size"]) == (True, cap, big_body.SIZE, big_body.SIZE)
    assert "ARCANE_MCP_MAX_DOWNLOAD_BYTES" in text.result.text and str(big_body.SIZE) in text.result.text
    assert binary.result.is_error and binary.result.error_code == "arcane_protocol" and binary.result.blobs == []
    for m in (text, binary):
        # reading stopped near the cap (socket buffers hold some more), far from the whole GiB
        assert cap <= m.sent < cap + 64 * MiB, m
        assert m.traced_peak < 64 * MiB, m  # a size budget: the cap's few copies, not the body


def test_a_body_without_content_length_says_its_size_is_unknown():
    with big_body.BigBodyServer(chunked=True) as server:
        m = asyncio.run(big_body.measure(server.url, "container.download_logs", {"containerId": "b" * 64}, MiB))
        sent = server.sent()
    s = m.result.structured
    assert (s["truncated"], s["bodyBytes"], len(s["text"].encode())) == (True, None, MiB)
    assert "no Content-Length" in m.result.text and sent < 64 * MiB


# ---------------------------------------------------------------- chunked uploads


def payload(size: int) -> bytes:
    return b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(size // 32 + 1))[:size]


def uploader(catalog, sim, tmp_path, transport="stdio", dirs=None) -> Dispatcher:
    return dispatcher(catalog, sim, transport=transport, upload_dirs=(tmp_path,) if dirs is None else dirs)


def test_the_overlaid_actions_take_content_or_a_local_file(catalog):
    for aid in ("image.upload", "volume_backup.upload", "build.upload_file"):
        a = catalog.actions[aid]
        assert a.handler == "chunked_upload" and {"content", "localFile", "uploadId"} <= set(a.input_schema["properties"])
        assert "uploadId" not in a.required
        Draft202012Validator.check_schema(a.input_schema)


async def test_a_build_workspace_upload_reads_back_byte_for_byte(catalog, sim, tmp_path):
    data = payload(1_300_000) + b"\x00\xff tail"
    res = await call(uploader(catalog, sim, tmp_path), "build.upload_file",
                     {"path": "/ctx", "content": {"base64": base64.b64encode(data).decode(), "filename": "vendor.bin"}})
    assert not res.is_error, res.text
    back = httpx.get(sim.url + "/api/environments/0/builds/browse/download", params={"path": "/ctx/vendor.bin"},
                     headers={"X-API-Key": sim.api_key}).content
    assert hashlib.sha256(back).hexdigest() == hashlib.sha256(data).hexdigest() == res.structured["upload"]["sha256"]


async def test_a_session_made_by_hand_is_passed_through(catalog, sim, tmp_path):
    h = {"X-API-Key": sim.api_key}
    base = sim.url + "/api/environments/0/uploads/image"
    s = httpx.post(base, json={"filename": "a.tar", "size": 10}, headers=h).json()["data"]
    httpx.put(f"{base}/{s['id']}/chunks/0", content=b"0123456789", headers={**h, "Content-Type": "application/octet-stream"})
    sim.clear_requests()
    res = await call(uploader(catalog, sim, tmp_path), "image.upload", {"uploadId": s["id"]})
    assert not res.is_error and "upload" not in res.structured
    assert [(r.method, r.path) for r in sim.requests()] == [("POST", "/api/environments/0/images/upload")]


@pytest.mark.parametrize("params,field", [({}, None), ({"uploadId": "0123456789abcdef", "content": {"text": "x"}}, "uploadId")])
async def test_exactly_one_source_is_given(catalog, sim, tmp_path, params, field):
    sim.clear_requests()
    res = await call(uploader(catalog, sim, tmp_path), "image.upload", params)
    assert res.is_error and res.error_code == "invalid_arguments" and sim.requests() == []
    assert field is None or field in res.error_fields


async def test_a_failed_chunk_aborts_the_session(catalog, sim, tmp_path):
    sim.set_faults({"error_5xx": {"status": 502, "match": "upload-chunk", "count": 1}})
    sim.clear_requests()
    try:
        res = await call(uploader(catalog, sim, tmp_path), "image.upload", {"content": {"base64": base64.b64encode(payload(10)).decode(),
                                                                                       "filename": "a.tar"}})
    finally:
        sim.set_faults({})
    assert res.is_error and res.http_status == 502
    assert [r.method for r in sim.requests()] == ["POST", "PUT", "DELETE"] and sim.uploads() == []


@pytest.mark.parametrize("why,transport,dirs,path", [
    ("over HTTP", "http", None, "{tmp}/a.tar"),
    ("no directory allowed", "stdio", (), "{tmp}/a.tar"),
    ("outside the directory", "stdio", None, "/etc/hostname"),
    ("a relative path", "stdio", None, "a.tar"),
    ("a symlink out of it", "stdio", None, "{tmp}/link"),
    ("dot-dot out of it", "stdio", None, "{tmp}/../outside.tar"),
])
async def test_local_files_are_read_only_over_stdio_under_an_allowed_directory(catalog, sim, tmp_path, why, transport, dirs, path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "a.tar").write_bytes(payload(100))
    (tmp_path / "outside.tar").write_bytes(payload(100))
    (allowed / "link").symlink_to(tmp_path / "outside.tar")
    sim.clear_requests()
    d = dispatcher(catalog, sim, transport=transport, upload_dirs=(allowed,) if dirs is None else dirs)
    res = await call(d, "image.upload", {"localFile": path.format(tmp=allowed)})
    assert res.is_error and res.error_fields == ["localFile"] and sim.requests() == [], why


async def test_a_local_file_under_the_directory_is_sent_byte_for_byte(catalog, sim, tmp_path):
    data = payload(2_200_000)
    (tmp_path / "app.tar.gz").write_bytes(data)
    sim.clear_requests()
    seen = []

    async def progress(value, total, message):
        seen.append((value, total))

    d = uploader(catalog, sim, tmp_path)
    try:
        res = await d.dispatch(Call("image.upload", {"localFile": str(tmp_path / "app.tar.gz")}, progress=progress))
    finally:
        await d.client.aclose()
    assert not res.is_error, res.text
    assert seen == [(1, 3), (2, 3), (3, 3)]
    [up] = sim.uploads()
    assert (up["sha256"], up["filename"], up["totalChunks"]) == (hashlib.sha256(data).hexdigest(), "app.tar.gz", 3)


def test_the_upload_directories_setting(tmp_path):
    from interpreter.config import load_settings
    from interpreter.errors import ConfigError

    assert load_settings({}).upload_dirs == ()
    assert load_settings({"ARCANE_MCP_UPLOAD_DIRS": f"{tmp_path}, /srv/images"}).upload_dirs == (tmp_path, Path("/srv/images"))
    with pytest.raises(ConfigError) as err:
        load_settings({"ARCANE_MCP_UPLOAD_DIRS": "relative/dir"})
    assert err.value.setting == "ARCANE_MCP_UPLOAD_DIRS"
