"""HTTP mode's limits (interpreter/front/httpmode.py) with the defaults users get: an ordinary
client is never refused (300 calls one after another, 50 at once), a key's calls to Arcane
are bounded by queueing (`InFlight`) rather than refusing, the rate limit still refuses a
real flood (429 with Retry-After), anonymous clients are told apart by address and session
under one cap for all of them, and a server without a credential of its own answers a
request without a key 401 missing_key."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from interpreter.config import Settings, load_settings
from interpreter.front.httpmode import ANONYMOUS, InFlight, RateLimiter, client_bucket, key_digest
from interpreter.front.names import EXECUTE_TOOL
from simulator.app import SimulatorApp
from tests.test_e2e import text
from tests.test_http import ACCEPT, KEY_A, PING, add_keys, credentialed, in_process

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.timeout(900)]

LIST = {"action": "container.list", "params": {}}
ME = {"action": "auth.me", "params": {}}  # a cheap read: the test is of the limits, not of rendering
DEFAULTS = Settings()


def call(i: int, arguments: dict = LIST) -> dict:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": EXECUTE_TOOL, "arguments": arguments}}


def health(base: str) -> dict:
    return httpx.get(base + "/health", timeout=30).json()


@pytest.fixture(scope="module")
def keys(sim):
    return add_keys(sim)


@pytest.fixture(scope="module")
def local(sim, keys):
    """The server as a user starts it on their machine: its own key, loopback, every limit
    at its default (anonymous use is then on)."""
    with in_process(sim, ARCANE_API_KEY=sim.api_key, ARCANE_MCP_AUDIT_LOG="off") as (base, _):
        yield base


@contextlib.contextmanager
def concurrency_at(sim):
    """The most requests carrying a credential that the simulator served at once."""
    seen = {"now": 0, "most": 0}
    lock = threading.Lock()
    original = SimulatorApp.__call__

    async def counting(self, scope, receive, send):
        counted = scope["type"] == "http" and any(k.lower() == b"x-api-key" for k, _ in scope.get("headers") or ())
        if counted:
            with lock:
                seen["now"] += 1
                seen["most"] = max(seen["most"], seen["now"])
        try:
            await original(self, scope, receive, send)
        finally:
            if counted:
                with lock:
                    seen["now"] -= 1

    SimulatorApp.__call__ = counting
    try:
        yield seen
    finally:
        SimulatorApp.__call__ = original


# ------------------------------------------------------------------ the defaults and why


def test_the_defaults_bound_calls_in_flight_and_keep_the_rate_limit_out_of_an_ordinary_clients_way():
    s = load_settings({})
    assert (s.max_in_flight, s.queue_size, s.queue_wait) == (8, 256, 30.0)
    assert (s.rate_limit, s.rate_burst, s.anonymous_rate_limit, s.anonymous_rate_burst) == (50.0, 500, 100.0, 1000)
    assert s == DEFAULTS
    # the burst holds the busiest start seen (an Inspector session: 319 calls), the queue the 50 at once
    assert s.rate_burst > 319 and s.max_in_flight + s.queue_size > 50
    flags = load_settings({"ARCANE_MCP_MAX_IN_FLIGHT": "2", "ARCANE_MCP_QUEUE_SIZE": "3", "ARCANE_MCP_QUEUE_WAIT": "5s",
                           "ARCANE_MCP_ANONYMOUS_RATE_LIMIT": "0", "ARCANE_MCP_ANONYMOUS_RATE_BURST": "7"})
    assert (flags.max_in_flight, flags.queue_size, flags.queue_wait, flags.anonymous_rate_limit, flags.anonymous_rate_burst) == (2, 3, 5.0, 0.0, 7)
    for var, bad in (("ARCANE_MCP_MAX_IN_FLIGHT", "0"), ("ARCANE_MCP_QUEUE_SIZE", "-1"), ("ARCANE_MCP_QUEUE_WAIT", "soon"),
                     ("ARCANE_MCP_ANONYMOUS_RATE_LIMIT", "nan"), ("ARCANE_MCP_ANONYMOUS_RATE_BURST", "1" * 400 + "x")):
        with pytest.raises(Exception) as ei:
            load_settings({var: bad})
        assert ei.value.setting == var


def test_the_default_rate_refuses_a_flood_and_never_an_interactive_pace():
    now = [0.0]
    limiter = RateLimiter(DEFAULTS.rate_limit, DEFAULTS.rate_burst, lambda: now[0])
    # 300 calls one after another at 1 ms each (far faster than a client through MCP), from
    # a cold start; then an hour at 10 calls a second: never refused
    for _ in range(300):
        assert limiter.take("client") is None
        now[0] += 0.001
    now[0] += 60
    for _ in range(36_000):
        assert limiter.take("client") is None
        now[0] += 0.1
    # a flood: 20,000 requests within one second of a full bucket
    now[0] += 60
    start, waits = now[0], []
    for _ in range(20_000):
        waits.append(limiter.take("flood"))
        now[0] += 1 / 20_000
    passed = sum(w is None for w in waits)
    assert DEFAULTS.rate_burst <= passed <= DEFAULTS.rate_burst + DEFAULTS.rate_limit * (now[0] - start) + 1
    refused = [w for w in waits if w is not None]
    assert len(refused) == 20_000 - passed and all(0 < w <= 1 / DEFAULTS.rate_limit for w in refused)
    assert limiter.take("another client") is None  # the flood spent only its own bucket


def test_the_anonymous_cap_covers_every_anonymous_client_together():
    now = [0.0]
    cap = RateLimiter(DEFAULTS.anonymous_rate_limit, DEFAULTS.anonymous_rate_burst, lambda: now[0])
    per_client = RateLimiter(DEFAULTS.rate_limit, DEFAULTS.rate_burst, lambda: now[0])
    served = 0
    for i in range(5000):  # a new session for every request: each a fresh client bucket
        assert per_client.take(f"anonymous:{i}") is None
        served += cap.take(ANONYMOUS) is None
    assert served == DEFAULTS.anonymous_rate_burst


def test_anonymous_clients_are_told_apart_by_address_and_session():
    def scope(address: str, session: str | None = None) -> dict:
        headers = [(b"mcp-session-id", session.encode())] if session is not None else []
        return {"type": "http", "client": (address, 50000), "headers": headers}

    a1, a2 = client_bucket(scope("127.0.0.1", "s-1"), None), client_bucket(scope("127.0.0.1", "s-2"), None)
    assert a1 != a2 and a1 == client_bucket(scope("127.0.0.1", "s-1"), None)
    assert client_bucket(scope("127.0.0.1"), None) != client_bucket(scope("127.0.0.2"), None)
    assert client_bucket(scope("127.0.0.1", "s-1"), None) != client_bucket(scope("127.0.0.2", "s-1"), None)
    # a key's bucket is its digest, whatever address or session it comes from
    assert client_bucket(scope("127.0.0.1", "s-1"), KEY_A) == client_bucket(scope("10.0.0.9"), KEY_A) == key_digest(KEY_A)
    # a hostile session header: the bucket name stays small and never a key's digest
    for hostile in ("", "..", "\x00\x1b[2J", "x" * 1_000_000, key_digest(KEY_A)):
        name = client_bucket(scope("127.0.0.1", hostile), None)
        assert len(name) == len("anonymous:") + 64 and name != key_digest(KEY_A)
    assert client_bucket({"type": "http", "headers": []}, None).startswith("anonymous:")  # no client address known


# ------------------------------------------------------------------ calls in flight


async def test_in_flight_calls_wait_their_turn_in_order_and_the_queue_is_bounded():
    turns = InFlight(limit=2, queue=3, wait=60)
    assert await turns.enter() is None and await turns.enter() is None
    order: list[int] = []

    async def waiter(i: int) -> None:
        assert await turns.enter() is None
        order.append(i)

    tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
    await asyncio.sleep(0)
    assert (turns.running, len(turns.waiting)) == (2, 3)
    retry = await turns.enter()  # the queue is full: refused at once, with when to retry
    assert retry is not None and retry > 0 and turns.refused == 1
    for _ in range(3):
        turns.leave(0.5)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2] and turns.running == 2 and not turns.waiting  # first come, first served
    turns.leave()
    turns.leave()
    assert turns.running == 0 and turns.most_running == 2 and turns.most_waiting == 3


async def test_a_call_waiting_too_long_or_going_away_gives_up_its_place():
    turns = InFlight(limit=1, queue=5, wait=0.05)
    assert await turns.enter() is None
    assert await turns.enter() is not None  # the wait ran out: refused, and not left in the queue
    assert not turns.waiting and turns.refused == 1
    turns.wait = 60
    gone = asyncio.create_task(turns.enter())
    await asyncio.sleep(0)
    assert len(turns.waiting) == 1
    gone.cancel()  # the client went away while waiting
    with contextlib.suppress(asyncio.CancelledError):
        await gone
    assert not turns.waiting
    turns.leave()
    assert turns.running == 0
    # a turn handed to a waiter that goes away at that moment passes on, never lost
    assert await turns.enter() is None
    late, next_ = asyncio.create_task(turns.enter()), asyncio.create_task(turns.enter())
    await asyncio.sleep(0)
    turns.leave()  # handed to `late`...
    late.cancel()  # ...which is cancelled before it runs
    with contextlib.suppress(asyncio.CancelledError):
        await late
    assert await next_ is None and turns.running == 1
    turns.leave()
    assert turns.running == 0 and not turns.waiting


async def test_a_keys_calls_reaching_arcane_never_exceed_the_bound_and_all_complete(sim, local):
    """50 calls at once with one key, each held 0.5 s by Arcane: at most
    ARCANE_MCP_MAX_IN_FLIGHT (8 by default) reach it at a time, the rest wait their turn,
    and every one is answered with its result."""
    sim.set_faults({"latency": {"seconds": 0.5, "match": "/environments/0/containers"}})
    try:
        with concurrency_at(sim) as seen:
            async with httpx.AsyncClient(timeout=120) as http:
                answers = await asyncio.gather(*[http.post(local + "/mcp", json=call(i), headers={**ACCEPT, "X-Arcane-API-Key": KEY_A})
                                                  for i in range(50)])
    finally:
        sim.set_faults({})
    assert [a.status_code for a in answers] == [200] * 50
    assert all("error" not in _rpc(a) and not _rpc(a)["result"].get("isError") for a in answers)
    assert 1 < seen["most"] <= DEFAULTS.max_in_flight
    calls = health(local)["calls"]
    assert calls["most_running"] <= DEFAULTS.max_in_flight and calls["most_waiting"] >= 1  # they queued
    assert calls["refused"] == 0 and calls["running"] == 0 and calls["waiting"] == 0


def _rpc(response: httpx.Response) -> dict:
    """The JSON-RPC message of a POST's answer (JSON, or one SSE event)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    import json

    messages = []
    for event in response.text.replace("\r\n", "\n").split("\n\n"):  # not splitlines: a JSON string may hold U+2028
        data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
        if data:
            messages.append(json.loads(data))
    return next(m for m in messages if "id" in m)


def test_a_full_queue_is_429_with_retry_after(sim, keys):
    with in_process(sim, ARCANE_MCP_ALLOW_ANONYMOUS="false", ARCANE_MCP_AUDIT_LOG="off", ARCANE_MCP_MAX_IN_FLIGHT="1",
                    ARCANE_MCP_QUEUE_SIZE="1") as (base, _):
        sim.set_faults({"latency": {"seconds": 3, "match": "/environments/0/containers"}})
        try:
            async def three():
                async with httpx.AsyncClient(timeout=60) as http:
                    return await asyncio.gather(*[http.post(base + "/mcp", json=call(i), headers={**ACCEPT, "X-Arcane-API-Key": KEY_A})
                                                  for i in range(3)])

            answers = asyncio.run(three())
        finally:
            sim.set_faults({})
        assert sorted(a.status_code for a in answers) == [200, 200, 429]
        busy = next(a for a in answers if a.status_code == 429)
        error = busy.json()["error"]
        assert error["code"] == -32029 and error["data"]["reason"] == "key_busy"
        assert int(busy.headers["retry-after"]) == error["data"]["retryAfter"] >= 1
        assert str(error["data"]["retryAfter"]) in error["message"]  # the text says when
        assert health(base)["calls"]["refused"] == 1


# ------------------------------------------------------------------ ordinary clients, defaults


async def test_300_calls_one_after_another_from_one_client_are_all_answered(sim, local):
    """One anonymous MCP session (the case that failed: loopback clients without a key) makes
    300 tool calls in a row with every limit at its default: no 429, every call its result."""
    async with httpx.AsyncClient(timeout=60) as http, \
            Client(streamable_http_client(local + "/mcp", http_client=http), mode="legacy") as client:
        for i in range(300):
            res = await client.call_tool(EXECUTE_TOOL, ME)
            assert not res.is_error, (i, text(res))
    assert health(local)["calls"]["refused"] == 0


async def test_50_calls_sent_at_once_are_all_answered(sim, local):
    """50 at once without a key, then 50 at once with one, at the defaults: all answered."""
    async with httpx.AsyncClient(timeout=120) as http:
        for headers in ({}, {"X-Arcane-API-Key": KEY_A}):
            answers = await asyncio.gather(*[http.post(local + "/mcp", json=call(i, ME), headers={**ACCEPT, **headers})
                                              for i in range(50)])
            assert [a.status_code for a in answers] == [200] * 50
            assert all(not _rpc(a)["result"].get("isError") for a in answers)


# ------------------------------------------------------------------ the rate limit on the wire


def test_two_anonymous_sessions_do_not_share_a_bucket_and_all_of_them_share_a_cap(sim):
    """Stateful, so clients have sessions: one session spending its bucket leaves another's
    untouched; all anonymous requests together stop at the overall cap. Each refusal is
    429 with Retry-After and says when to retry."""
    env = {"ARCANE_API_KEY": sim.api_key, "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_HTTP_STATEFUL": "true",
           "ARCANE_MCP_RATE_LIMIT": "0.001", "ARCANE_MCP_RATE_BURST": "4",
           "ARCANE_MCP_ANONYMOUS_RATE_LIMIT": "0.001", "ARCANE_MCP_ANONYMOUS_RATE_BURST": "12"}
    with in_process(sim, **env) as (base, _), httpx.Client(timeout=30) as http:
        def send(body, session: str | None = None) -> httpx.Response:
            headers = {**ACCEPT, **({"Mcp-Session-Id": session} if session else {})}
            return http.post(base + "/mcp", json=body, headers=headers)

        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        sessions = []
        for _ in range(2):  # two initializes from this address, no session yet: 2 of that bucket
            r = send(init)
            assert r.status_code == 200
            sessions.append(r.headers["mcp-session-id"])
        a, b = sessions
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert send(ready, a).status_code == 202 and send(ready, b).status_code == 202
        assert [send(PING, a).status_code for _ in range(3)] == [200, 200, 200]  # a's bucket: 4 spent
        spent = send(PING, a)
        assert spent.status_code == 429
        assert spent.json()["error"]["data"]["reason"] == "rate_limited"
        assert int(spent.headers["retry-after"]) == spent.json()["error"]["data"]["retryAfter"] >= 1
        assert send(PING, b).status_code == 200  # b has its own bucket
        # 2 + 2 + 3 + 1 = 8 anonymous requests served so far (a refused one costs the cap nothing)
        assert [send(PING, b).status_code for _ in range(3)] == [200, 200, 429]  # b's bucket spent at 4
        assert send(PING, "a-third-session").status_code == 404  # a fresh bucket: the 11th and 12th served
        assert send(PING, "a-fourth-session").status_code == 404
        capped = send(PING, "a-fifth-session")
        assert capped.status_code == 429
        error = capped.json()["error"]
        assert error["code"] == -32029 and error["data"]["reason"] == "anonymous_rate_limited"
        assert int(capped.headers["retry-after"]) == error["data"]["retryAfter"] >= 1
        assert str(error["data"]["retryAfter"]) in error["message"] and "X-Arcane-API-Key" in error["message"]
        # a client with its own key is not under the anonymous cap
        assert http.post(base + "/mcp", json=init, headers={**ACCEPT, "X-Arcane-API-Key": KEY_A}).status_code == 200


# ------------------------------------------------------------------ no credential at all


@pytest.mark.parametrize("allow", [None, "true"])
def test_no_credential_at_all_is_401_missing_key(sim, keys, allow):
    """No server key and no client header: 401 missing_key, nothing sent to Arcane, even
    where anonymous use is allowed (there is nothing to use); a client's key still works."""
    env = {"ARCANE_MCP_AUDIT_LOG": "off", **({"ARCANE_MCP_ALLOW_ANONYMOUS": allow} if allow else {})}
    with in_process(sim, **env) as (base, _):
        sim.clear_requests()
        for body in (PING, call(1)):
            r = httpx.post(base + "/mcp", json=body, headers=ACCEPT, timeout=30)
            assert r.status_code == 401
            error = r.json()["error"]
            assert error["code"] == -32001 and error["data"] == {"reason": "missing_key", "header": "X-Arcane-API-Key"}
        assert credentialed(sim) == [] and not [q for q in sim.requests() if q.path.startswith("/api/environments")]
        assert httpx.post(base + "/mcp", json=PING, headers={**ACCEPT, "X-Arcane-API-Key": KEY_A}, timeout=30).status_code == 200


async def test_only_requests_wait_for_a_turn_a_clients_answers_and_notifications_do_not():
    """A client's response (its answer to a confirmation question) must reach the call that
    waits for it even when every turn is held by such waiting calls: it is never gated."""
    from interpreter.front.frames import FrameCheck

    gated, served = [], []

    async def app(scope, receive, send):
        served.append((await receive())["body"])

    async def gate(run, send):
        gated.append(True)
        await run()

    check = FrameCheck(app, 1 << 20, gate=gate)

    async def post(body: bytes) -> None:
        sent = [{"type": "http.request", "body": body, "more_body": False}]
        await check({"type": "http", "method": "POST"}, lambda: asyncio.sleep(0, sent.pop()), lambda m: asyncio.sleep(0))

    await post(b'{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}')
    await post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert gated == [] and len(served) == 2
    await post(b'{"jsonrpc":"2.0","id":8,"method":"tools/list"}')
    assert gated == [True] and len(served) == 3
