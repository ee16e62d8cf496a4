"""Resumable SSE streams in HTTP mode (interpreter/front/events.py), with the defaults users
get in stateful mode: every event of a POST's stream carries an ID and the first a `retry:`
hint; a client whose stream broke mid-call gets what it missed with `Last-Event-ID` (raw
HTTP, and the SDK's own client reconnecting by itself); a hostile, forged or foreign
`Last-Event-ID` replays nothing; the store's bounds (count, bytes, per stream, TTL)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket

import anyio
import httpx
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import JSONRPCNotification, JSONRPCResponse
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from interpreter.config import Settings, load_settings
from interpreter.errors import ConfigError
from interpreter.front.events import EVENT_ID, NAMESPACE, OVERHEAD, STREAM_SHARE, BoundedEventStore, store_for
from interpreter.front.names import EXECUTE_TOOL
from tests.test_e2e import text
from tests.test_http import ACCEPT, KEY_A, KEY_B, add_keys, client_for, in_process

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.timeout(600)]

VERSION = "2025-11-25"
MODERN = MODERN_PROTOCOL_VERSIONS[-1]
DEFAULTS = Settings()
SLOW = {"latency": {"seconds": 2, "match": "/environments/0/containers"}}
LIST = {"action": "container.list", "params": {}}
ME = {"action": "auth.me", "params": {}}


def call(i: int, arguments: dict = ME) -> dict:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": EXECUTE_TOOL, "arguments": arguments}}


def events_of(body: str) -> list[dict]:
    """The SSE events of a body: each a dict of its fields (`data` joined)."""
    out = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields: dict = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = fields[name] + "\n" + value if name == "data" and name in fields else value
        if fields:
            out.append(fields)
    return out


def answer_of(events: list[dict], rid: int) -> dict | None:
    for e in events:
        if e.get("data"):
            message = json.loads(e["data"])
            if message.get("id") == rid and ("result" in message or "error" in message):
                return message
    return None


@pytest.fixture(scope="module")
def keys(sim):
    return add_keys(sim)


@pytest.fixture(scope="module")
def stateful(sim, keys):
    with in_process(sim, ARCANE_MCP_HTTP_STATEFUL="true", ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_AUDIT_LOG="off") as (base, _):
        yield base


async def open_session(http: httpx.AsyncClient, base: str, key: str) -> dict:
    """A session's headers, after initialize and notifications/initialized."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "resume-test", "version": "1"}}}
    r = await http.post(base + "/mcp", json=init, headers={**ACCEPT, "X-Arcane-API-Key": key})
    assert r.status_code == 200, r.text
    headers = {**ACCEPT, "X-Arcane-API-Key": key, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": VERSION}
    done = await http.post(base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert done.status_code == 202
    return headers


async def first_event_then_break(http: httpx.AsyncClient, base: str, headers: dict, body: dict) -> dict:
    """POST `body`, read its stream's first event, and drop the connection (a broken stream)."""
    async with http.stream("POST", base + "/mcp", json=body, headers=headers) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        seen = ""
        async for chunk in r.aiter_text():
            seen += chunk
            if "\n\n" in seen.replace("\r\n", "\n"):
                break
    return events_of(seen)[0]


async def resume(http: httpx.AsyncClient, base: str, headers: dict, last: str, rid: int) -> tuple[httpx.Response, list[dict]]:
    """GET with Last-Event-ID, read until the answer to `rid` (or the stream's end)."""
    get = {k: v for k, v in headers.items() if k != "Content-Type"} | {"Accept": "text/event-stream", "Last-Event-ID": last}
    seen = ""
    async with http.stream("GET", base + "/mcp", headers=get) as r:
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            async for chunk in r.aiter_text():
                seen += chunk
                if answer_of(events_of(seen), rid) is not None:
                    break
        else:
            await r.aread()
    return r, events_of(seen)


# ------------------------------------------------------------------ the wire


async def test_every_event_of_a_post_stream_has_an_id_and_the_first_a_retry_hint(stateful):
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, stateful, KEY_A)
        r = await http.post(stateful + "/mcp", json=call(1), headers=headers)
    events = events_of(r.text)
    assert len(events) >= 2 and all(EVENT_ID.fullmatch(e.get("id", "")) for e in events)
    assert len({e["id"] for e in events}) == len(events)  # each its own
    assert events[0]["retry"] == str(DEFAULTS.sse_retry_ms) and events[0].get("data", "") == ""  # the priming event
    answer = answer_of(events, 1)
    assert answer is not None and "result" in answer and not answer["result"].get("isError")


async def test_a_stream_broken_mid_call_is_resumed_with_last_event_id(sim, stateful):
    """The connection drops after the priming event of a slow call; a GET with its ID gets
    the answer as it comes (the stream goes on), and a second one, once it was stored, gets
    it replayed and the stream ends (the stream is finished)."""
    sim.set_faults(SLOW)
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            headers = await open_session(http, stateful, KEY_A)
            priming = await first_event_then_break(http, stateful, headers, call(7, LIST))
            assert priming.get("data", "") == "" and EVENT_ID.fullmatch(priming["id"])
            live, events = await resume(http, stateful, headers, priming["id"], 7)
            assert live.status_code == 200
            answer = answer_of(events, 7)
            assert answer is not None and not answer["result"].get("isError")
            assert all(EVENT_ID.fullmatch(e["id"]) for e in events if e.get("data"))
            again, replayed = await resume(http, stateful, headers, priming["id"], 7)
            assert again.status_code == 200 and answer_of(replayed, 7) == answer
            # the answer's own ID: nothing follows it, the replay ends at once
            last = next(e["id"] for e in replayed if e.get("data"))
            after, none = await resume(http, stateful, headers, last, 7)
            assert after.status_code == 200 and not [e for e in none if e.get("data")]
    finally:
        sim.set_faults({})


async def test_the_sessions_get_stream_starts_with_the_retry_hint(stateful):
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, stateful, KEY_A)
        get = {k: v for k, v in headers.items() if k != "Content-Type"} | {"Accept": "text/event-stream"}
        async with http.stream("GET", stateful + "/mcp", headers=get) as r:
            assert r.status_code == 200
            seen = ""
            async for chunk in r.aiter_text():
                seen += chunk
                if "\n\n" in seen.replace("\r\n", "\n"):
                    break
    assert events_of(seen)[0] == {"retry": str(DEFAULTS.sse_retry_ms)}


RUNNING = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"  # the simulator's blog web-1, running
CONTAINERS = "arcane://environment/0/containers"
UPDATED = "notifications/resources/updated"


async def _until_update(r: httpx.Response, after: str = "") -> dict:
    """Read a GET stream until a resources/updated event (other than `after`'s)."""
    seen = ""
    async for chunk in r.aiter_text():
        seen += chunk
        found = [e for e in events_of(seen) if UPDATED in e.get("data", "") and e.get("id") != after]
        if found:
            return found[0]
    raise AssertionError("the stream ended without an update")


async def test_the_sessions_get_stream_is_resumed_too(sim, stateful):
    """A subscription's updates come on the session's GET stream, which is not a call's: an
    update sent while it was down is replayed from the ID of the last one the client saw."""
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, stateful, KEY_A)
        sub = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": CONTAINERS}}
        assert "result" in answer_of(events_of((await http.post(stateful + "/mcp", json=sub, headers=headers)).text), 1)
        get = {k: v for k, v in headers.items() if k != "Content-Type"} | {"Accept": "text/event-stream"}
        with anyio.fail_after(60):  # a bound on waiting, not an assertion on time
            async with http.stream("GET", stateful + "/mcp", headers=get) as r:
                while not [q for q in sim.requests() if q.path == "/api/stream"]:  # the subscription's upstream is open
                    await asyncio.sleep(0.05)
                stop = await http.post(stateful + "/mcp", json=call(2, {"action": "container.stop", "params": {"containerId": RUNNING}}),
                                       headers=headers)
                assert not answer_of(events_of(stop.text), 2)["result"].get("isError")
                first = await _until_update(r)
            # the stream is down: the next update is kept for it
            start = await http.post(stateful + "/mcp", json=call(3, {"action": "container.start", "params": {"containerId": RUNNING}}),
                                    headers=headers)
            assert not answer_of(events_of(start.text), 3)["result"].get("isError")
            async with http.stream("GET", stateful + "/mcp", headers=get | {"Last-Event-ID": first["id"]}) as r:
                assert r.status_code == 200
                second = await _until_update(r, first["id"])
            async with http.stream("GET", stateful + "/mcp", headers=get | {"Last-Event-ID": first["id"]}) as r:
                assert r.status_code == 200
                again = await _until_update(r, first["id"])  # from the store now, whatever came live before
    assert EVENT_ID.fullmatch(first["id"]) and EVENT_ID.fullmatch(second["id"]) and again == second


def _error(r: httpx.Response) -> dict:
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    return body["error"]


async def test_a_hostile_or_unknown_last_event_id_is_refused_and_replays_nothing(stateful):
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, stateful, KEY_A)
        own = await http.post(stateful + "/mcp", json=call(3), headers=headers)
        assert own.status_code == 200
        for bad in ("..", "../../etc/passwd", "a" * 65, "x" * 10_000, "ab\tcd", '{"deep":' * 50):
            r, events = await resume(http, stateful, headers, bad, 3)
            assert r.status_code == 400 and not events, bad[:20]
            error = _error(r)
            assert error["code"] == -32600 and error["data"] == {"reason": "bad_event_id", "field": "Last-Event-ID"}
        for unknown in (secrets.token_urlsafe(16), "A" * 22, "0"):
            r, events = await resume(http, stateful, headers, unknown, 3)
            assert r.status_code == 404 and not events
            error = _error(r)
            assert error["code"] == -32600 and error["data"] == {"reason": "unknown_event_id", "field": "Last-Event-ID"}


async def test_an_empty_last_event_id_opens_the_get_stream(stateful):
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, stateful, KEY_A)
        get = {k: v for k, v in headers.items() if k != "Content-Type"} | {"Accept": "text/event-stream", "Last-Event-ID": ""}
        async with http.stream("GET", stateful + "/mcp", headers=get) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")


def _raw_get(base: str, headers: dict, extra: bytes) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    lines = [b"GET /mcp HTTP/1.1", f"Host: {host}:{port}".encode(), b"Accept: text/event-stream"]
    lines += [f"{k}: {v}".encode() for k, v in headers.items() if k.lower() not in ("accept", "content-type")]
    data = b"\r\n".join([*lines, extra, b"", b""])
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(data)
        out = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := s.recv(65536):
                out += chunk
                head, sep, body = out.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")),
                              None)
                if sep and (b"event-stream" in head or (length is not None and len(body) >= length)):
                    break
    return out


async def test_a_control_character_or_a_1mb_last_event_id_never_reaches_a_replay(stateful):
    """What HTTP itself refuses (a control character, a head of 1 MB) is refused before the
    server's app (uvicorn's 400); a tab, which HTTP allows, is refused by the event check."""
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, stateful, KEY_A)
        assert (await http.post(stateful + "/mcp", json=call(4), headers=headers)).status_code == 200
    for hostile in (b"Last-Event-ID: \x1b[2J", b"Last-Event-ID: a\x00b", b"Last-Event-ID: " + b"x" * 1_000_000):
        out = await asyncio.to_thread(_raw_get, stateful, headers, hostile)
        assert out.startswith(b"HTTP/1.1 400"), out[:80]
        assert b"event-stream" not in out.split(b"\r\n\r\n")[0]
    out = await asyncio.to_thread(_raw_get, stateful, headers, b"Last-Event-ID: ab\tcd")
    status, _, rest = out.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 400") and b'"bad_event_id"' in rest
    assert httpx.get(stateful + "/health").status_code == 200


async def test_another_sessions_or_another_keys_event_id_replays_nothing(stateful):
    """Two sessions of one key use the same request ids (the transport's stream names), and
    a second key has its own store: an ID of one is unknown to every other."""
    async with httpx.AsyncClient(timeout=60) as http:
        a1, a2 = await open_session(http, stateful, KEY_A), await open_session(http, stateful, KEY_A)
        b = await open_session(http, stateful, KEY_B)
        ids = {}
        for name, headers in (("a1", a1), ("a2", a2), ("b", b)):
            r = await http.post(stateful + "/mcp", json=call(1, {"action": "environment.list", "params": {}}), headers=headers)
            ids[name] = events_of(r.text)[0]["id"]
        for mine, theirs in (("a1", "a2"), ("a2", "a1"), ("b", "a1"), ("a1", "b")):
            headers = {"a1": a1, "a2": a2, "b": b}[mine]
            r, events = await resume(http, stateful, headers, ids[theirs], 1)
            assert r.status_code == 404 and not events, (mine, theirs)
            assert _error(r)["data"]["reason"] == "unknown_event_id"
        r, events = await resume(http, stateful, a1, ids["a1"], 1)  # its own: the answer
        assert r.status_code == 200 and answer_of(events, 1) is not None


async def test_a_deleted_session_takes_its_events_with_it(stateful):
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, stateful, KEY_A)
        r = await http.post(stateful + "/mcp", json=call(2), headers=headers)
        first = events_of(r.text)[0]["id"]
        assert (await http.delete(stateful + "/mcp", headers=headers)).status_code == 200
        again, events = await resume(http, stateful, headers, first, 2)
        assert again.status_code == 404 and not events


async def test_a_2026_07_28_client_is_served_as_before_on_a_stateful_server(stateful):
    """That era's transport has no resumption: the store stays out of its way."""
    async with client_for(stateful, KEY_A, "auto") as client:  # auto: 2026-07-28 with this SDK's server
        result = await client.call_tool(EXECUTE_TOOL, ME)
        assert client.protocol_version == MODERN
    assert not result.is_error and text(result)


# ------------------------------------------------------------------ the SDK's own client


class BreakingTransport(httpx.AsyncBaseTransport):
    """A network that drops a tools/call's stream after its first event, once: what a
    client on a flaky link sees (the server sees the client go away)."""

    def __init__(self, forge: bool = False):
        self.inner = httpx.AsyncHTTPTransport()
        self.broken = 0
        self.resumed: list[str] = []
        self.statuses: list[int] = []
        self.forge = forge  # the reconnect names an ID the server never issued

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resuming = request.method == "GET" and bool(request.headers.get("last-event-id"))
        if resuming and self.forge:
            request.headers["last-event-id"] = secrets.token_urlsafe(16)
        response = await self.inner.handle_async_request(request)
        if resuming:
            self.resumed.append(request.headers["last-event-id"])
            self.statuses.append(response.status_code)
        if request.method != "POST" or b'"tools/call"' not in request.content or self.broken:
            return response
        self.broken += 1
        return httpx.Response(response.status_code, headers=response.headers, stream=_FirstEvent(response),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _FirstEvent(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response):
        self.response = response

    async def __aiter__(self):
        seen = b""
        async for chunk in self.response.stream:
            seen += chunk
            if b"\n\n" in seen.replace(b"\r\n", b"\n"):
                yield seen
                break
        await self.response.aclose()

    async def aclose(self) -> None:
        await self.response.aclose()


async def test_the_sdk_client_resumes_a_broken_stream_by_itself(sim, stateful):
    sim.set_faults(SLOW)
    network = BreakingTransport()
    try:
        async with httpx.AsyncClient(transport=network, headers={"X-Arcane-API-Key": KEY_A}, timeout=60) as http, \
                Client(streamable_http_client(stateful + "/mcp", http_client=http), mode="legacy") as client:
            result = await client.call_tool(EXECUTE_TOOL, LIST)
    finally:
        sim.set_faults({})
    assert network.broken == 1 and len(network.resumed) >= 1 and EVENT_ID.fullmatch(network.resumed[0])
    assert network.statuses[0] == 200 and not result.is_error and text(result)


async def test_the_sdk_client_fails_the_call_when_its_reconnect_finds_nothing(sim, stateful):
    """A reconnect the server cannot serve (its events gone, or another replica): 404, and
    the client gives up after its retries with an error, instead of reconnecting forever."""
    sim.set_faults(SLOW)
    network = BreakingTransport(forge=True)
    try:
        async with httpx.AsyncClient(transport=network, headers={"X-Arcane-API-Key": KEY_A}, timeout=60) as http, \
                Client(streamable_http_client(stateful + "/mcp", http_client=http), mode="legacy") as client:
            with pytest.raises(MCPError):
                await client.call_tool(EXECUTE_TOOL, LIST)
    finally:
        sim.set_faults({})
    assert network.broken == 1 and len(network.statuses) >= 2 and set(network.statuses) == {404}


# ------------------------------------------------------------------ the store's bounds


def _note(i: int, size: int = 0) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"i": i, "pad": "x" * size})


def _answer(i: int) -> JSONRPCResponse:
    return JSONRPCResponse(jsonrpc="2.0", id=i, result={})


async def _replay(store: BoundedEventStore, namespace: str, last: str) -> tuple[str | None, list]:
    got = []

    async def collect(event) -> None:
        got.append(event)

    token = NAMESPACE.set(namespace)
    try:
        stream = await store.replay_events_after(last, collect)
    finally:
        NAMESPACE.reset(token)
    return stream, got


def test_the_defaults_and_the_settings():
    assert (DEFAULTS.sse_retry_ms, DEFAULTS.event_store_events, DEFAULTS.event_store_bytes, DEFAULTS.event_store_ttl) == \
        (2000, 10_000, 16 * 1024 * 1024, 300.0)
    assert store_for(DEFAULTS) is None  # stateless: no session, no stream to resume
    store = store_for(load_settings({"ARCANE_MCP_HTTP_STATEFUL": "true", "ARCANE_MCP_EVENT_STORE_EVENTS": "40",
                                     "ARCANE_MCP_EVENT_STORE_BYTES": "64KiB", "ARCANE_MCP_EVENT_STORE_TTL": "30s"}))
    assert (store.max_events, store.max_bytes, store.ttl) == (40, 65536, 30.0)
    assert (store.stream_events, store.stream_bytes) == (40 // STREAM_SHARE, 65536 // STREAM_SHARE)
    assert load_settings({"ARCANE_MCP_SSE_RETRY_MS": "500"}).sse_retry_ms == 500  # bad values: tests/test_config.py


@pytest.mark.parametrize("var,value", [
    ("ARCANE_MCP_SSE_RETRY_MS", "0"), ("ARCANE_MCP_SSE_RETRY_MS", "2s"), ("ARCANE_MCP_SSE_RETRY_MS", ".."),
    ("ARCANE_MCP_SSE_RETRY_MS", "600001"), ("ARCANE_MCP_SSE_RETRY_MS", "9" * 1_000_000), ("ARCANE_MCP_SSE_RETRY_MS", "-1"),
    ("ARCANE_MCP_SSE_RETRY_MS", "\x00"), ("ARCANE_MCP_EVENT_STORE_EVENTS", "0"), ("ARCANE_MCP_EVENT_STORE_EVENTS", "many"),
    ("ARCANE_MCP_EVENT_STORE_EVENTS", "\x1b[2J"), ("ARCANE_MCP_EVENT_STORE_BYTES", "0"), ("ARCANE_MCP_EVENT_STORE_BYTES", ".."),
    ("ARCANE_MCP_EVENT_STORE_BYTES", "1" * 1_000_000 + "x"), ("ARCANE_MCP_EVENT_STORE_TTL", "0s"),
    ("ARCANE_MCP_EVENT_STORE_TTL", "forever"), ("ARCANE_MCP_EVENT_STORE_TTL", "9" * 400 + "h"),
])
def test_bad_values_of_the_settings_name_the_variable(var, value):
    with pytest.raises(ConfigError) as ei:
        load_settings({var: value})
    assert (ei.value.setting, ei.value.code) == (var, "invalid_setting")
    assert "\n" not in ei.value.format() and len(ei.value.format()) < 300


async def test_the_store_keeps_at_most_its_count_the_oldest_going_first():
    store = BoundedEventStore(max_events=8, max_bytes=10**6, ttl=60)
    first = [store.put(f"s{i}", "1", _note(i)) for i in range(8)]
    assert len(store.events) == 8
    later = [store.put(f"t{i}", "1", _note(i)) for i in range(3)]
    assert len(store.events) == 8 and store.evicted == 3
    assert not any(store.knows(f"s{i}", first[i]) for i in range(3)) and all(store.knows(f"s{i}", first[i]) for i in range(3, 8))
    assert all(store.knows(f"t{i}", later[i]) for i in range(3))


async def test_the_store_keeps_at_most_its_bytes():
    store = BoundedEventStore(max_events=10**6, max_bytes=40_000, ttl=60)
    for i in range(40):
        store.put(f"s{i}", "1", _note(i, 1000))
    assert store.size <= 40_000 and 0 < len(store.events) < 40
    assert store.size == sum(e.size for e in store.events.values())
    stats = store.stats()
    assert (stats["events"], stats["bytes"], stats["stored"]) == (len(store.events), store.size, 40)
    assert stats["evicted"] == 40 - len(store.events) and stats["max_bytes"] == 40_000


async def test_one_long_stream_evicts_only_its_own_events():
    store = BoundedEventStore(max_events=100, max_bytes=10**6, ttl=60)
    others = [store.put(f"other{i}", "1", _note(i)) for i in range(10)]
    long = [store.put("chatty", "_GET_stream", _note(i)) for i in range(500)]
    assert len(store.streams[("chatty", "_GET_stream")].ids) == 100 // STREAM_SHARE
    assert all(store.knows(f"other{i}", others[i]) for i in range(10))  # nobody else lost a thing
    assert store.knows("chatty", long[-1]) and not store.knows("chatty", long[0])
    # by bytes too: a stream holds at most a quarter of them
    store = BoundedEventStore(max_events=10**6, max_bytes=100_000, ttl=60)
    others = [store.put(f"other{i}", "1", _note(i, 1000)) for i in range(10)]
    for i in range(200):
        store.put("chatty", "_GET_stream", _note(i, 1000))
    assert store.streams[("chatty", "_GET_stream")].size <= 100_000 // STREAM_SHARE
    assert all(store.knows(f"other{i}", others[i]) for i in range(10))


async def test_a_replay_sends_only_what_follows_in_its_own_stream_and_ends_a_finished_one():
    store = BoundedEventStore(max_events=100, max_bytes=10**6, ttl=60)
    priming = store.put("n1", "5", None)
    store.put("n2", "5", _note(99))  # another session, the same request id
    note = store.put("n1", "5", _note(1))
    stream, got = await _replay(store, "n1", priming)
    assert stream == "5" and [e.event_id for e in got] == [note]  # not finished: the SDK goes on with it
    answer = store.put("n1", "5", _answer(5))
    stream, got = await _replay(store, "n1", priming)
    assert stream is None and [e.event_id for e in got] == [note, answer]  # finished: the replay ends
    assert isinstance(got[1].message, JSONRPCResponse) and got[1].message.id == 5
    assert await _replay(store, "n2", priming) == (None, [])  # another session's ID
    assert await _replay(store, "n1", "no-such-event") == (None, [])
    assert store.replayed == 3


async def test_events_older_than_the_ttl_are_dropped():
    now = [1000.0]
    store = BoundedEventStore(max_events=100, max_bytes=10**6, ttl=30, clock=lambda: now[0])
    old = store.put("n", "1", _note(1))
    now[0] += 20
    young = store.put("n", "2", _note(2))
    now[0] += 15
    assert not store.knows("n", old) and store.knows("n", young)
    assert store.expired == 1 and len(store.events) == 1
    now[0] += 31
    assert not store.knows("n", young) and not store.events and store.size == 0 and not store.streams


async def test_an_event_too_large_for_its_stream_breaks_the_replay_from_before_it_never_silently():
    store = BoundedEventStore(max_events=100, max_bytes=40_000, ttl=60)
    before = store.put("n", "1", None)
    huge = store.put("n", "1", _note(1, 20_000))  # above a quarter of the bytes
    after = store.put("n", "1", _note(2))
    assert EVENT_ID.fullmatch(huge) and store.dropped == 1
    assert not store.knows("n", before) and not store.knows("n", huge)  # a replay from there would miss it: 404
    assert store.knows("n", after)
    assert store.size == OVERHEAD + len(_note(2).model_dump_json(by_alias=True, exclude_unset=True))


async def test_a_deleted_or_forgotten_session_drops_its_events():
    store = BoundedEventStore(max_events=100, max_bytes=10**6, ttl=60)
    store.bind("session-1", "n1")
    kept = store.put("n1", "1", _note(1))
    assert store.namespace("session-1") == "n1" and store.knows("n1", kept)
    store.forget("session-1")
    assert store.namespace("session-1") is None and not store.knows("n1", kept) and store.size == 0
    store.forget(None)
    store.forget("..")  # unknown: nothing happens
