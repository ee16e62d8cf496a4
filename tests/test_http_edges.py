"""The HTTP transport's edges (interpreter/front/httpmode.py, "transport edges"): a method
with no meaning is 405, a wrong Content-Type 415, a wrong Accept 406, an unknown
MCP-Protocol-Version -32022, a version header that disagrees with the session's or the
request's own version -32020; every refusal is a JSON-RPC error body echoing the request's
id when it can be read; partial headers, a slow body and an idle connection are closed
within their settings; CORS answers only the origins of ARCANE_MCP_CORS_ORIGINS. Each edge
is shown refused and the ordinary request beside it served."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from tests.test_http import ACCEPT, PING, client_for, in_process

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.timeout(600)]

APP = "http://app.example:3000"  # the browser origin allowed cross-origin
OTHER = "http://elsewhere.example"  # an origin allowed nowhere
KEY = "arc_edges_personal_0123456789abcdef01"
MODERN = "2026-07-28"
LEGACY = "2025-06-18"
BOUND = 1  # seconds: the edge server's header, body and keep-alive bounds
MAX_BODY = 65_536  # the edge server's body cap


@pytest.fixture(scope="module")
def edge(sim):
    """Stateless (the default), anonymous use on loopback, small bounds, one CORS origin."""
    with in_process(sim, ARCANE_API_KEY=sim.api_key, ARCANE_MCP_AUDIT_LOG="off", ARCANE_MCP_HEADER_TIMEOUT=f"{BOUND}s",
                    ARCANE_MCP_BODY_TIMEOUT=f"{BOUND}s", ARCANE_MCP_KEEP_ALIVE=f"{BOUND}s", ARCANE_MCP_CORS_ORIGINS=APP,
                    ARCANE_MCP_ALLOWED_ORIGINS="http://trusted.example", ARCANE_MCP_MAX_BODY_BYTES=str(MAX_BODY)) as (base, _):
        yield base


@pytest.fixture(scope="module")
def stateful(sim):
    """Legacy sessions, every client with its own key (none served without one)."""
    sim.add_api_key(KEY, kind="personal")
    with in_process(sim, ARCANE_MCP_HTTP_STATEFUL="true", ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_AUDIT_LOG="off") as (base, _):
        yield base


def send(base: str, method: str = "POST", body: bytes | dict | None = PING, **headers) -> httpx.Response:
    content = json.dumps(body).encode() if isinstance(body, dict) else body
    return httpx.request(method, base + "/mcp", content=content, headers={**ACCEPT, **headers}, timeout=30)


def rpc(response: httpx.Response) -> dict:
    """The JSON-RPC message of an answer: its JSON body, or the one answer of its SSE events."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return [e for e in events if "method" not in e][0]
    return response.json()


def refused(response: httpx.Response, status: int, code: int, rid, reason: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == rid and body["error"]["code"] == code, body
    assert "\n" not in body["error"]["message"]
    if reason is not None:
        assert body["error"]["data"]["reason"] == reason, body
    return body


def modern(rid, method: str = "tools/list", version: str = MODERN) -> tuple[dict, dict]:
    """A 2026-07-28 request and its headers."""
    meta = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}}
    return ({"jsonrpc": "2.0", "id": rid, "method": method, "params": {"_meta": meta}},
            {"MCP-Protocol-Version": MODERN, "Mcp-Method": method})


# ------------------------------------------------------------------ methods


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
@pytest.mark.parametrize("version", [None, LEGACY, MODERN])
def test_a_method_with_no_meaning_on_a_stateless_server_is_405(edge, method, version):
    headers = {"MCP-Protocol-Version": version} if version else {}
    r = send(edge, method, None, **headers)
    body = refused(r, 405, -32600, None, "method_not_allowed")
    assert r.headers["allow"] == "POST" and body["error"]["data"]["allow"] == ["POST"]
    if version == MODERN:  # the ordinary request of that era is served
        frame, headers = modern(1)
    assert rpc(send(edge, body=frame if version == MODERN else PING, **headers))["id"] == 1


async def test_a_legacy_client_works_against_the_stateless_server_that_refuses_its_get(edge):
    """The SDK's legacy client opens a GET stream after initialize; the 405 it gets is the
    specification's "does not offer an SSE stream" and its calls go on."""
    async with client_for(edge, None) as client:
        tools = await client.list_tools()
        assert tools.tools
        assert (await client.send_ping()) is not None


def test_a_stateful_server_keeps_its_stream_and_its_sessions_end(stateful):
    session, version = initialize(stateful)
    with httpx.stream("GET", stateful + "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": session,
                                                         "MCP-Protocol-Version": version, "X-Arcane-API-Key": KEY}, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    modern_get = send(stateful, "GET", None, **{"MCP-Protocol-Version": MODERN, "X-Arcane-API-Key": KEY})
    assert refused(modern_get, 405, -32600, None, "method_not_allowed")["error"]["data"]["allow"] == ["POST"]
    ended = send(stateful, "DELETE", None, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": version, "X-Arcane-API-Key": KEY})
    assert ended.status_code == 200
    # the SDK's own refusal of the ended session: its JSON-RPC error, with the request's id
    gone = send(stateful, body={**PING, "id": "after-the-end"}, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": version,
                                                                   "X-Arcane-API-Key": KEY})
    assert gone.status_code == 404 and gone.json()["id"] == "after-the-end" and "error" in gone.json()


# ------------------------------------------------------------------ content type and accept


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "", "application/jsonp"])
def test_a_body_that_is_not_declared_json_is_415_with_its_id(edge, ctype):
    refused(send(edge, body={**PING, "id": 41}, **{"Content-Type": ctype}), 415, -32600, 41, "bad_content_type")
    assert send(edge, body={**PING, "id": 41}, **{"Content-Type": "application/json; charset=utf-8"}).status_code == 200


@pytest.mark.parametrize("accept", ["text/html", "application/json", "text/event-stream"])
def test_an_accept_without_both_types_is_406_with_its_id(edge, accept):
    refused(send(edge, body={**PING, "id": "a-6"}, Accept=accept), 406, -32600, "a-6", "not_acceptable")
    assert send(edge, body={**PING, "id": "a-6"}, Accept="*/*").status_code == 200


# ------------------------------------------------------------------ protocol versions


@pytest.mark.parametrize("version", ["1999-01-01", "2026-13-99", "latest", ""])
def test_an_unknown_protocol_version_is_32022_listing_the_supported_ones(edge, version):
    body = refused(send(edge, body={**PING, "id": 22}, **{"MCP-Protocol-Version": version}), 400, -32022, 22, "unsupported_version")
    data = body["error"]["data"]
    assert data["requested"] == version and MODERN in data["supported"] and LEGACY in data["supported"]
    for good in data["supported"]:
        if good != MODERN:
            assert send(edge, body={**PING, "id": 22}, **{"MCP-Protocol-Version": good}).status_code == 200, good
    frame, headers = modern(23)
    assert rpc(send(edge, body=frame, **headers))["result"]["tools"]
    # a 2026-07-28 envelope naming the same unknown version: the SDK's answer, listing that era's versions
    frame, headers = modern(24, version="v999.0.0")
    body = refused(send(edge, body=frame, **{**headers, "MCP-Protocol-Version": "v999.0.0"}), 400, -32022, 24)
    assert body["error"]["data"]["requested"] == "v999.0.0" and body["error"]["data"]["supported"] == [MODERN]


def test_a_version_header_that_disagrees_with_the_requests_own_version_is_32020(edge):
    frame, headers = modern(20, version=LEGACY)  # a 2026-07-28 header, a body saying 2025-06-18 (the SDK's check)
    refused(send(edge, body=frame, **headers), 400, -32020, 20)
    frame, _ = modern(21)  # a 2026-07-28 body under a legacy header
    refused(send(edge, body=frame, **{"MCP-Protocol-Version": LEGACY}), 400, -32020, 21, "version_mismatch")
    refused(send(edge, body=frame), 400, -32020, 21, "version_mismatch")  # no header at all
    frame, headers = modern(22)
    assert rpc(send(edge, body=frame, **headers))["id"] == 22


def initialize(base: str, version: str = LEGACY) -> tuple[str, str]:
    """A stateful session opened by hand: its ID and the version it was initialized at."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "edges", "version": "1"}}}
    r = send(base, body=init, **{"X-Arcane-API-Key": KEY})
    assert r.status_code == 200, r.text[:300]
    session, agreed = r.headers["mcp-session-id"], rpc(r)["result"]["protocolVersion"]
    done = send(base, body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                **{"Mcp-Session-Id": session, "MCP-Protocol-Version": agreed, "X-Arcane-API-Key": KEY})
    assert done.status_code == 202
    return session, agreed


def test_a_session_negotiated_at_one_version_refuses_a_header_naming_another(stateful):
    session, agreed = initialize(stateful, LEGACY)
    assert agreed == LEGACY
    headers = {"Mcp-Session-Id": session, "X-Arcane-API-Key": KEY}
    body = refused(send(stateful, body={**PING, "id": 5}, **headers, **{"MCP-Protocol-Version": "2025-11-25"}), 400, -32020, 5,
                   "version_mismatch")
    assert body["error"]["data"]["expected"] == LEGACY and body["error"]["data"]["field"] == "MCP-Protocol-Version"
    assert rpc(send(stateful, body={**PING, "id": 6}, **headers, **{"MCP-Protocol-Version": LEGACY})) == {"jsonrpc": "2.0", "id": 6, "result": {}}
    assert rpc(send(stateful, body={**PING, "id": 7}, **headers))["id"] == 7  # no header: the negotiated version is assumed
    # 2025-03-26, the version assumed without a header (its revision defined none): no more than no header
    assert rpc(send(stateful, body={**PING, "id": 8}, **headers, **{"MCP-Protocol-Version": "2025-03-26"}))["id"] == 8


# ------------------------------------------------------------------ ids in refusals


def test_refusals_echo_the_request_id_and_null_only_when_none_can_be_read(stateful, edge):
    for rid in (9, "nine"):
        refused(send(stateful, body={**PING, "id": rid}), 401, -32001, rid, "missing_key")
    refused(send(stateful, body={"jsonrpc": "2.0", "method": "notifications/initialized"}), 401, -32001, None, "missing_key")
    refused(send(stateful, body=b'{"jsonrpc": "2.0", "id": 3, "method": '), 401, -32001, None, "missing_key")  # unreadable
    refused(send(stateful, body={**PING, "id": True}), 401, -32001, None, "missing_key")  # not an id
    # the malformed frame of a served client: frames.py's error, with its id
    refused(send(edge, body={"jsonrpc": "1.0", "id": 12, "method": "ping"}), 400, -32600, 12)
    assert rpc(send(stateful, body={**PING, "id": 9}, **{"X-Arcane-API-Key": KEY}))["id"] == 9


# ------------------------------------------------------------------ timeouts


def raw_exchange(base: str, data: bytes, wait: float = 15.0) -> tuple[bytes, float]:
    """What the server sends back on a raw connection after `data`, until it closes it (or
    `wait` runs out), and when it closed it."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait) as s:
        began = time.monotonic()
        if data:
            s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except TimeoutError:
            out += b"<still open>"
        return out, time.monotonic() - began


def head(base: str, length: int | None = None, extra: str = "") -> bytes:
    port = base.rsplit(":", 1)[1]
    text = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    if length is not None:
        text += f"Content-Length: {length}\r\n"
    return (text + extra).encode()


def test_partial_headers_and_a_silent_connection_are_closed_within_the_header_timeout(edge):
    for data in (head(edge), b"", b"PO"):
        out, took = raw_exchange(edge, data)
        assert out == b"" and took < BOUND + 3, (data, out, took)


def test_a_slow_body_is_408_and_its_connection_closed(edge):
    body = json.dumps({**PING, "id": 408}).encode()
    out, took = raw_exchange(edge, head(edge, len(body), "\r\n") + body[:10])
    assert out.startswith(b"HTTP/1.1 408") and b"connection: close" in out.lower() and took < BOUND + 3, (out, took)
    answer = json.loads(out.split(b"\r\n\r\n", 1)[1])
    assert answer["error"]["code"] == -32600 and answer["error"]["data"]["reason"] == "body_timeout"
    # the whole body at once: served, and the connection stays for keep-alive
    out, took = raw_exchange(edge, head(edge, len(body), "\r\n") + body)
    assert out.startswith(b"HTTP/1.1 200") and b'"id":408' in out


def test_a_body_above_the_cap_without_a_length_is_413_as_with_one(edge):
    big = json.dumps({**PING, "id": 413, "params": {"pad": "x" * MAX_BODY}}).encode()

    def chunks():
        for i in range(0, len(big), 8192):
            yield big[i:i + 8192]

    r = httpx.post(edge + "/mcp", content=chunks(), headers=ACCEPT, timeout=30)  # chunked: no Content-Length
    assert "content-length" not in r.request.headers
    refused(r, 413, -32013, None, "body_too_large")
    refused(send(edge, body=big), 413, -32013, None, "body_too_large")  # declared: refused before it is read
    small = json.dumps({**PING, "id": 414, "params": {"pad": "x" * 1000}}).encode()
    assert rpc(httpx.post(edge + "/mcp", content=iter([small[:500], small[500:]]), headers=ACCEPT, timeout=30))["id"] == 414


def test_an_idle_connection_is_closed_after_the_keep_alive_and_a_busy_one_is_reused(edge):
    with httpx.Client(timeout=30) as http:
        peers = []
        for pause in (0, BOUND / 4, BOUND / 4):
            time.sleep(pause)
            r = http.post(edge + "/mcp", json=PING, headers=ACCEPT)
            assert r.status_code == 200
            peers.append(r.extensions["network_stream"].get_extra_info("client_addr"))
        assert peers[0] == peers[1] == peers[2]  # pauses within the bound: the same connection
    body = json.dumps(PING).encode()
    out, took = raw_exchange(edge, head(edge, len(body), "\r\n") + body)
    assert out.startswith(b"HTTP/1.1 200") and BOUND - 0.5 < took < BOUND + 3, took  # answered, then closed once idle


# ------------------------------------------------------------------ CORS


def test_a_preflight_from_an_allowed_origin_names_the_methods_and_mcp_headers(edge):
    r = httpx.options(edge + "/mcp", headers={"Origin": APP, "Access-Control-Request-Method": "POST",
                                                "Access-Control-Request-Headers": "content-type, mcp-protocol-version, mcp-param-region"})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == APP and "access-control-allow-credentials" not in r.headers
    allowed = {h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")}
    assert {"mcp-session-id", "mcp-protocol-version", "last-event-id", "content-type", "x-arcane-api-key", "mcp-param-region"} <= allowed
    assert "POST" in r.headers["access-control-allow-methods"]
    # the request that follows: served, its answer readable by the page
    answer = send(edge, Origin=APP)
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == APP
    exposed = {h.strip().lower() for h in answer.headers["access-control-expose-headers"].split(",")}
    assert {"mcp-session-id", "mcp-protocol-version"} <= exposed
    # a refusal to that page is readable too (its id echoed)
    refused(send(edge, body={**PING, "id": 77}, Origin=APP, **{"Content-Type": "text/plain"}), 415, -32600, 77)


@pytest.mark.parametrize("origin,reason", [(OTHER, "origin_not_allowed"), ("http://trusted.example", "cors_not_allowed")])
def test_a_preflight_from_any_other_origin_gets_no_cors_headers(edge, origin, reason):
    r = httpx.options(edge + "/mcp", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
    refused(r, 403, -32003, None, reason)
    assert not any(h.startswith("access-control-") for h in r.headers)
    answer = send(edge, Origin=origin)
    assert answer.status_code == (403 if origin == OTHER else 200)  # the Origin allow-list (DNS rebinding) as before
    assert not any(h.startswith("access-control-") for h in answer.headers)


def test_without_cors_origins_no_answer_carries_cors_headers(stateful):
    r = httpx.options(stateful + "/mcp", headers={"Origin": APP, "Access-Control-Request-Method": "POST"})
    refused(r, 403, -32003, None, "origin_not_allowed")
    port = stateful.rsplit(":", 1)[1]
    own = httpx.options(stateful + "/mcp", headers={"Origin": f"http://127.0.0.1:{port}", "Access-Control-Request-Method": "POST"})
    assert own.status_code == 405 and not any(h.startswith("access-control-") for h in own.headers)


# ------------------------------------------------------------------ the layer over the SDK's refusals


async def _through_reply(status: int, ctype: bytes, body: bytes, request: bytes | None) -> tuple[dict, bytes]:
    from interpreter.front.httpmode import Reply

    sent: list[dict] = []

    async def collect(message: dict) -> None:
        sent.append(message)

    reply = Reply(collect, [(b"access-control-allow-origin", APP.encode())])
    reply.body = request
    await reply({"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype), (b"x-kept", b"1")]})
    await reply({"type": "http.response.body", "body": body[:3], "more_body": True})
    await reply({"type": "http.response.body", "body": body[3:]})
    start = sent[0]
    headers = dict(start["headers"])
    out = b"".join(m.get("body", b"") for m in sent[1:])
    assert headers[b"x-kept"] == b"1" and headers[b"access-control-allow-origin"] == APP.encode()
    assert int(headers.get(b"content-length", len(out))) == len(out)
    return {"status": start["status"], "content-type": headers[b"content-type"]}, out


async def test_an_sdk_refusal_in_plain_text_or_with_a_null_id_becomes_a_jsonrpc_error_with_the_id():
    request = json.dumps({**PING, "id": "r-1"}).encode()
    head_, out = await _through_reply(400, b"text/plain", b"Invalid Content-Type header", request)
    answer = json.loads(out)
    assert head_["status"] == 400 and head_["content-type"] == b"application/json"
    assert answer["id"] == "r-1" and answer["error"]["code"] == -32600 and answer["error"]["data"]["status"] == 400
    _, out = await _through_reply(406, b"application/json", b"", request)  # an empty body
    assert json.loads(out)["id"] == "r-1" and json.loads(out)["error"]["code"] == -32600
    null_id = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}).encode()
    _, out = await _through_reply(404, b"application/json", null_id, request)
    assert json.loads(out) == {"jsonrpc": "2.0", "id": "r-1", "error": {"code": -32600, "message": "Session not found"}}
    _, out = await _through_reply(404, b"application/json", null_id, None)  # no body: the id stays null
    assert json.loads(out)["id"] is None
    ok = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": {}}).encode()
    head_, out = await _through_reply(200, b"application/json", ok, request)  # an answer passes untouched
    assert head_["status"] == 200 and out == ok
