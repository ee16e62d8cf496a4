"""The identity layer (interpreter/call/auth.py) against the simulator over real HTTP: API key
headers by security class, session login/refresh/re-login with rotating refresh tokens,
one shared refresh for concurrent 401s, bounded failure, MFA at startup, the combined
credential, proactive refresh, and no secret in reprs, messages or logs.

One simulator serves the module; an autouse fixture resets it (state, login users,
sessions, faults, records) before each test and fails the test on any invalid answer.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import replace

import httpx
import pytest

from interpreter.build.catalog import _api_key_header
from interpreter.call.auth import ApiKeyCredentials, CombinedCredentials, SessionCredentials, make_credentials, protocol_for, send_with_auth
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.errors import ApiKeyRequired, ArcaneUnreachable, AuthFailed, CallError, ConfigError, SessionRequired

pytestmark = pytest.mark.anyio

USER, PASSWORD = "arcane", "arcane-admin"
MFA_USER, MFA_PASSWORD = "mfa-user", "mfa-user-password"


PROTOCOL = None  # the catalog's session protocol (catalog/conventions.yaml), set once per module
KEY_HEADER = None  # the catalog's API-key header (the document's apiKey scheme), set once per module


@pytest.fixture(scope="module", autouse=True)
def _protocol(catalog):
    global PROTOCOL, KEY_HEADER
    PROTOCOL = protocol_for(catalog)
    KEY_HEADER = catalog.api_key_header


def key(api_key: str) -> ApiKeyCredentials:
    """A key credential sending the catalog's header, as ArcaneClient.use gives it."""
    return ApiKeyCredentials(api_key, header=KEY_HEADER)


def session(*args, **kw) -> SessionCredentials:
    """A session credential speaking the catalog's protocol, as ArcaneClient.use gives it."""
    return SessionCredentials(*args, protocol=PROTOCOL, **kw)


def combined(*args, **kw) -> CombinedCredentials:
    return CombinedCredentials(*args, protocol=PROTOCOL, header=KEY_HEADER, **kw)


@pytest.fixture(scope="module")
def sim(catalog):
    from simulator import start_simulator

    with start_simulator(catalog=catalog) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh(request):
    """Reset the simulator for the tests that use it (the in-memory tests need none)."""
    if "sim" not in request.fixturenames:
        yield
        return
    sim = request.getfixturevalue("sim")
    sim.reset()
    sim.set_faults({})
    sim.clear_requests()
    sim.clear_violations()
    yield
    assert sim.violations == []


@pytest.fixture
async def http(sim):
    async with httpx.AsyncClient(base_url=sim.url + "/api", timeout=5, follow_redirects=False) as c:
        yield c


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


async def call(http, creds, catalog, action_id: str, path: str | None = None, json=None) -> httpx.Response:
    """What the executor does: send_with_auth with a builder, read, close."""
    action = catalog.all_actions[action_id]

    def build(headers: dict) -> httpx.Request:
        return http.build_request(action.method, path or action.path, headers=headers, json=json)

    response = await send_with_auth(http, creds, action.security, build)
    try:
        await response.aread()
    finally:
        await response.aclose()
    return response


def seen(sim) -> list[tuple[str | None, str | None]]:
    """(action, credential) per recorded request, in order."""
    return [(r.action, r.credential) for r in sim.requests()]


def count(sim, action: str) -> int:
    return sum(1 for r in sim.requests() if r.action == action)


CONTAINERS = "/environments/0/containers"


# ---------------------------------------------------------------- API key


async def test_api_key_headers_by_security(sim, http, catalog):
    creds = key(sim.api_key)
    await creds.start(http)
    assert sim.requests() == []  # a key needs no startup request
    assert await creds.headers("either") == {"X-API-Key": sim.api_key}
    assert await creds.headers("apikey") == {"X-API-Key": sim.api_key}
    assert await creds.headers("public") == {}
    with pytest.raises(SessionRequired) as err:
        await creds.headers("bearer")
    assert isinstance(err.value, CallError) and err.value.code == "session_required"
    assert "ARCANE_USERNAME/ARCANE_PASSWORD" in err.value.message and "not an API key" in err.value.message
    r = await call(http, creds, catalog, "container.list", CONTAINERS)
    assert r.status_code == 200 and seen(sim) == [("container.list", "api_key")]
    # a Bearer-only action is refused before anything is sent
    sim.clear_requests()
    with pytest.raises(SessionRequired):
        await call(http, creds, catalog, "api_key.create_mine", json={"name": "mine"})
    assert sim.requests() == []


async def test_wrong_api_key_is_not_retried(sim, http, catalog):
    creds = key("arc_wrong_key_0000")
    await creds.start(http)
    r = await call(http, creds, catalog, "container.list", CONTAINERS)
    assert r.status_code == 401 and seen(sim) == [("container.list", "invalid_api_key")]


# ---------------------------------------------------------------- session


async def test_session_login_at_start_and_bearer(sim, http, catalog):
    creds = session(USER, PASSWORD)
    await creds.start(http)
    assert seen(sim) == [("auth.login", None)] and creds.generation == 1
    assert (await creds.headers("either"))["Authorization"].startswith("Bearer ")
    assert await creds.headers("public") == {}
    with pytest.raises(ApiKeyRequired) as err:
        await creds.headers("apikey")
    assert "ARCANE_API_KEY" in err.value.message and err.value.code == "api_key_required"
    me = await call(http, creds, catalog, "auth.me")
    assert me.status_code == 200 and me.json()["data"]["username"] == USER
    bearer_only = await call(http, creds, catalog, "passkey.list")
    assert bearer_only.status_code == 200
    assert seen(sim)[1:] == [("auth.me", "bearer"), ("passkey.list", "bearer")]


async def test_expiry_refreshes_once_and_keeps_the_rotated_token(sim, http, catalog):
    creds = session(USER, PASSWORD)
    await creds.start(http)
    assert (await call(http, creds, catalog, "container.list", CONTAINERS)).status_code == 200

    rounds = []
    for _ in range(3):  # expire three times: each refresh must use the token the last one issued
        sim.expire_sessions()
        sim.clear_requests()
        r = await call(http, creds, catalog, "container.list", CONTAINERS)
        assert r.status_code == 200
        assert seen(sim) == [("container.list", "invalid_bearer"), ("auth.refresh", None), ("container.list", "bearer")]
        rounds.append(sim.requests()[1].json()["refreshToken"])
    assert len(set(rounds)) == 3 and creds.generation == 4
    # Arcane rotates strictly: a refresh token once used is refused
    reused = await http.post("/auth/refresh", json={"refreshToken": rounds[0]})
    assert reused.status_code == 401


async def test_concurrent_401s_share_one_refresh(sim, http, catalog):
    creds = session(USER, PASSWORD)
    await creds.start(http)
    sim.expire_sessions()
    sim.clear_requests()
    # latency before auth: all ten are in flight with the expired token before any 401
    sim.set_faults({"latency": {"seconds": 0.2, "match": "container.list", "count": 10}})
    answers = await asyncio.gather(*(call(http, creds, catalog, "container.list", CONTAINERS) for _ in range(10)))
    assert [a.status_code for a in answers] == [200] * 10
    assert count(sim, "auth.refresh") == 1 and count(sim, "auth.login") == 0
    creds_seen = [c for a, c in seen(sim) if a == "container.list"]
    assert creds_seen.count("invalid_bearer") == 10 and creds_seen.count("bearer") == 10


async def test_refused_refresh_logs_in_again(sim, http, catalog):
    creds = session(USER, PASSWORD)
    await creds.start(http)
    sim.expire_sessions(refresh=True)  # access and refresh tokens revoked
    sim.clear_requests()
    r = await call(http, creds, catalog, "container.list", CONTAINERS)
    assert r.status_code == 200
    assert seen(sim) == [("container.list", "invalid_bearer"), ("auth.refresh", None), ("auth.login", None),
                         ("container.list", "bearer")]


@pytest.mark.parametrize("change", ["password", "removed"])
async def test_failed_relogin_is_a_clear_bounded_error(sim, http, catalog, change):
    creds = session(USER, PASSWORD)
    await creds.start(http)
    sim.set_users([{"username": USER, "password": "changed-elsewhere"}] if change == "password" else [])
    sim.expire_sessions(refresh=True)
    sim.clear_requests()
    with pytest.raises(AuthFailed) as err:
        await call(http, creds, catalog, "container.list", CONTAINERS)
    msg = err.value.message
    assert "ARCANE_USERNAME 'arcane'" in msg and "ARCANE_PASSWORD" in msg and "Invalid username or password" in msg
    assert err.value.code == "auth_failed" and err.value.sent is False and err.value.status == 401
    assert PASSWORD not in msg + (err.value.next_step or "")
    assert seen(sim) == [("container.list", "invalid_bearer"), ("auth.refresh", None), ("auth.login", None)]
    # the next call tries one login and sends nothing else: no loop, no doomed request
    sim.clear_requests()
    with pytest.raises(AuthFailed):
        await call(http, creds, catalog, "container.list", CONTAINERS)
    assert seen(sim) == [("auth.login", None)]
    # the password is fixed in Arcane: the next call logs in and works
    sim.reset()
    sim.clear_requests()
    assert (await call(http, creds, catalog, "container.list", CONTAINERS)).status_code == 200
    assert seen(sim) == [("auth.login", None), ("container.list", "bearer")]


async def test_proactive_refresh_before_expiry(sim, http, catalog):
    clock = FakeClock()
    creds = session(USER, PASSWORD, clock=clock)
    await creds.start(http)  # expiresAt is 24 h after the simulator's Date
    sim.clear_requests()
    clock.t += 86400 - 120  # two minutes left: no refresh yet
    assert (await call(http, creds, catalog, "auth.me")).status_code == 200
    assert seen(sim) == [("auth.me", "bearer")]
    clock.t += 90  # 30 s left: refresh first, no 401
    sim.clear_requests()
    assert (await call(http, creds, catalog, "auth.me")).status_code == 200
    assert seen(sim) == [("auth.refresh", None), ("auth.me", "bearer")]
    # a failed proactive refresh keeps the (still valid) token and backs off
    clock.t += 86400 - 30
    sim.set_faults({"error_5xx": {"status": 503, "match": "auth.refresh", "count": 1}})
    sim.clear_requests()
    assert (await call(http, creds, catalog, "auth.me")).status_code == 200
    assert seen(sim) == [("auth.refresh", None), ("auth.me", "bearer")]
    sim.clear_requests()
    assert (await call(http, creds, catalog, "auth.me")).status_code == 200
    assert seen(sim) == [("auth.me", "bearer")]  # backing off
    clock.t += 10
    sim.clear_requests()
    assert (await call(http, creds, catalog, "auth.me")).status_code == 200
    assert seen(sim) == [("auth.refresh", None), ("auth.me", "bearer")]


# ---------------------------------------------------------------- startup


async def test_mfa_required_stops_startup(sim, http):
    with pytest.raises(ConfigError) as err:
        await session(MFA_USER, MFA_PASSWORD).start(http)
    msg = str(err.value)
    assert "\n" not in msg
    assert (err.value.code, err.value.setting) == ("login_mfa", "ARCANE_USERNAME")
    assert "'mfa-user'" in msg and "ARCANE_API_KEY" in msg and MFA_PASSWORD not in msg  # who, and the setting to use instead
    with pytest.raises(ConfigError) as err:
        await combined(sim.api_key, MFA_USER, MFA_PASSWORD).start(http)
    assert err.value.code == "login_mfa" and "ARCANE_API_KEY" in str(err.value) and MFA_PASSWORD not in str(err.value)


async def test_wrong_password_stops_startup(sim, http):
    with pytest.raises(ConfigError) as err:
        await session(USER, "not-the-password").start(http)
    msg = str(err.value)
    assert (err.value.code, err.value.setting) == ("login_credentials", "ARCANE_PASSWORD")
    assert "'arcane'" in msg and "401" in msg  # who was refused, and Arcane's status
    assert "not-the-password" not in msg and count(sim, "auth.login") == 1


async def test_unreachable_at_start_logs_in_lazily(sim, http, catalog, caplog):
    for fault in ({"drop": {"match": "auth.login", "count": 1}}, {"error_5xx": {"status": 503, "match": "auth.login", "count": 1}}):
        sim.set_faults(fault)
        sim.clear_requests()
        caplog.clear()
        creds = session(USER, PASSWORD)
        with caplog.at_level(logging.WARNING, logger="arcane_mcp.auth"):
            await creds.start(http)  # does not raise
        assert [(r.name, r.levelno) for r in caplog.records] == [("arcane_mcp.auth", logging.WARNING)]  # one warning, no error
        assert creds.generation == 0
        r = await call(http, creds, catalog, "container.list", CONTAINERS)
        assert r.status_code == 200
        assert seen(sim) == [("auth.login", None), ("auth.login", None), ("container.list", "bearer")]


async def test_nothing_listening_at_start():
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/api", timeout=2) as dead:
        creds = session(USER, PASSWORD)
        await creds.start(dead)  # no exception: lazy
        with pytest.raises(ArcaneUnreachable) as err:  # mapped in transport.py, like any request
            await creds.headers("either")
    assert (err.value.code, err.value.sent) == ("arcane_unreachable", False)


async def test_login_redirect_and_not_found_are_config_errors(sim):
    async with httpx.AsyncClient(base_url=sim.url + "/api/nowhere", timeout=5) as wrong:
        with pytest.raises(ConfigError) as err:
            await session(USER, PASSWORD).start(wrong)
    assert (err.value.code, err.value.setting) == ("login_not_found", "ARCANE_URL") and "404" in str(err.value)

    def redirect(request: httpx.Request) -> httpx.Response:
        return httpx.Response(301, headers={"Location": "https://arcane.example.com/api/auth/login"})

    async with httpx.AsyncClient(base_url="http://arcane.example.com/api", transport=httpx.MockTransport(redirect)) as c:
        with pytest.raises(ConfigError) as err:
            await session(USER, PASSWORD).start(c)
    assert (err.value.code, err.value.setting) == ("login_redirect", "ARCANE_URL")
    assert "301" in str(err.value) and "https://arcane.example.com/api/auth/login" in str(err.value)  # the status, where it points


# ---------------------------------------------------------------- combined


async def test_combined_key_for_normal_session_for_bearer_only(sim, http, catalog):
    creds = combined(sim.api_key, USER, PASSWORD)
    await creds.start(http)
    assert seen(sim) == [("auth.login", None)]
    assert await creds.headers("either") == {"X-API-Key": sim.api_key}
    assert await creds.headers("apikey") == {"X-API-Key": sim.api_key}
    assert await creds.headers("public") == {}
    assert set(await creds.headers("bearer")) == {"Authorization"}
    sim.clear_requests()
    assert (await call(http, creds, catalog, "container.list", CONTAINERS)).status_code == 200
    created = await call(http, creds, catalog, "api_key.create_mine", json={"name": "mcp personal key"})
    assert created.status_code in (200, 201), created.text
    assert seen(sim) == [("container.list", "api_key"), ("api_key.create_mine", "bearer")]
    # the session part refreshes like a session
    sim.expire_sessions()
    sim.clear_requests()
    assert (await call(http, creds, catalog, "passkey.list")).status_code == 200
    assert seen(sim) == [("passkey.list", "invalid_bearer"), ("auth.refresh", None), ("passkey.list", "bearer")]


async def test_combined_refused_key_is_not_retried(sim, http, catalog):
    creds = combined("arc_wrong_key_0000", USER, PASSWORD)
    await creds.start(http)
    sim.clear_requests()
    r = await call(http, creds, catalog, "container.list", CONTAINERS)
    assert r.status_code == 401 and seen(sim) == [("container.list", "invalid_api_key")]


# ---------------------------------------------------------------- the key's header


def _with_schemes(document: dict, schemes) -> dict:
    doc = dict(document)  # the catalog's is a read-only Mapping (artefact.LazyMapping)
    doc["components"] = {**document["components"], "securitySchemes": schemes}
    return doc


def test_the_key_header_is_the_documents_api_key_scheme(catalog):
    schemes = catalog.document["components"]["securitySchemes"]
    declared = [s["name"] for s in schemes.values() if s.get("type") == "apiKey" and s.get("in") == "header"]
    assert declared == [catalog.api_key_header] == ["X-API-Key"]  # what Arcane reads, as before


@pytest.mark.parametrize("schemes, header, codes", [
    ({"K": {"type": "apiKey", "in": "header", "name": "X-Other-Key"}}, "X-Other-Key", []),
    ({"B": {"type": "http", "scheme": "bearer"}}, "", []),  # no key scheme: no header, no problem
    ({}, "", []),
    ([], "", []),  # not an object: nothing declared
    ({"K": {"type": "apiKey", "in": "query", "name": "key"}}, "", ["security_scheme_unsupported"]),
    ({"K": {"type": "apiKey", "in": "cookie", "name": "key"}}, "", ["security_scheme_unsupported"]),
    ({"K": {"type": "apiKey", "in": "header", "name": ""}}, "", ["security_scheme_unsupported"]),
    ({"K": {"type": "apiKey", "in": "header", "name": "X-Key\r\nHost: evil"}}, "", ["security_scheme_unsupported"]),
    ({"K": {"type": "apiKey", "in": "header", "name": "X" * 1_000_000 + " "}}, "", ["security_scheme_unsupported"]),
    ({"K": {"type": "apiKey", "in": "header", "name": ["X-Key"]}}, "", ["security_scheme_unsupported"]),
    ({"K": {"type": "apiKey", "in": "header", "name": "X-A"}, "L": {"type": "apiKey", "in": "header", "name": "x-a"}}, "X-A", []),
    ({"K": {"type": "apiKey", "in": "header", "name": "X-A"}, "L": {"type": "apiKey", "in": "header", "name": "X-B"}}, "",
     ["security_scheme_unsupported"]),
])
def test_the_key_header_from_other_documents(catalog, schemes, header, codes):
    got, problems = _api_key_header(_with_schemes(catalog.document, schemes), "doc.json")
    assert got == header
    assert [p.code for p in problems] == codes
    assert all(p.file == "doc.json" and p.pointer.startswith("/components/securitySchemes") for p in problems)


async def test_a_key_goes_in_the_header_it_is_given(catalog):
    creds = ApiKeyCredentials("arc_k", header="X-Other-Key")
    assert await creds.headers("either") == await creds.headers("apikey") == {"X-Other-Key": "arc_k"}
    both = CombinedCredentials("arc_k", USER, PASSWORD, protocol=PROTOCOL, header="X-Other-Key")
    assert await both.headers("either") == {"X-Other-Key": "arc_k"}
    # a 401 to a request that carried the key (in any case) is the key's: no session retry
    assert await both.refresh_after_401({"x-other-key": "arc_k"}) is False


def test_the_client_gives_the_credential_the_catalogs_header(catalog):
    other = replace(catalog, api_key_header="X-Other-Key")
    for settings in (Settings(arcane_url="http://arcane.test", api_key="arc_k"),
                     Settings(arcane_url="http://arcane.test", api_key="arc_k", username=USER, password=PASSWORD)):
        client = ArcaneClient(settings)
        client.use(other)
        assert client.credentials.key_header == "X-Other-Key"
        # a document that declares no key scheme cannot carry a key: said at start, naming the setting
        with pytest.raises(ConfigError) as err:
            ArcaneClient(settings).use(replace(catalog, api_key_header=""))
        assert (err.value.code, err.value.setting) == ("no_key_scheme", "ARCANE_API_KEY")
    session_only = ArcaneClient(Settings(arcane_url="http://arcane.test", username=USER, password=PASSWORD))
    session_only.use(replace(catalog, api_key_header=""))  # no key: nothing to send it in


def test_make_credentials():
    assert make_credentials(Settings()) is None
    assert isinstance(make_credentials(Settings(api_key="arc_x")), ApiKeyCredentials)
    assert isinstance(make_credentials(Settings(username="u", password="p")), SessionCredentials)
    both = make_credentials(Settings(api_key="arc_x", username="u", password="p"))
    assert isinstance(both, CombinedCredentials)
    with pytest.raises(ConfigError) as err:
        make_credentials(Settings(username="u"))
    assert (err.value.code, err.value.setting) == ("incomplete_credentials", "ARCANE_PASSWORD")
    with pytest.raises(ConfigError) as err:
        make_credentials(Settings(password="p"))
    assert (err.value.code, err.value.setting) == ("incomplete_credentials", "ARCANE_USERNAME")
    with pytest.raises(ConfigError) as err:
        ApiKeyCredentials("")
    assert (err.value.code, err.value.setting) == ("empty_setting", "ARCANE_API_KEY")


async def test_aclose_logs_out(sim, http, catalog):
    creds = session(USER, PASSWORD)
    await creds.start(http)
    assert sim.state["sessions"] == 1
    await creds.aclose()
    assert sim.state["sessions"] == 0 and seen(sim)[-1] == ("auth.logout", "bearer")


# ---------------------------------------------------------------- secrets


async def test_no_secret_in_reprs_messages_or_logs(sim, http, catalog, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    secrets = {sim.api_key, PASSWORD, MFA_PASSWORD, "changed-elsewhere"}
    texts: list[str] = []
    creds = combined(sim.api_key, USER, PASSWORD)

    def collect():
        secrets.update(creds.secrets())
        texts.append(repr(creds))
        texts.append(str(creds))

    await creds.start(http)
    collect()
    await call(http, creds, catalog, "passkey.list")
    sim.expire_sessions()
    await call(http, creds, catalog, "passkey.list")  # refresh
    collect()
    sim.expire_sessions(refresh=True)
    await call(http, creds, catalog, "passkey.list")  # re-login
    collect()
    sim.set_users([{"username": USER, "password": "changed-elsewhere"}])
    sim.expire_sessions(refresh=True)
    for _ in range(2):
        with pytest.raises(AuthFailed) as err:
            await call(http, creds, catalog, "passkey.list")
        texts += [str(err.value), err.value.message, err.value.next_step or "", repr(err.value)]
        collect()
    sim.advance_clock(60)  # Arcane allows 5 logins a minute per IP (router_bootstrap.go:223): these two start a new minute
    for bad in (session(USER, "changed-elsewhere-not"), session(MFA_USER, MFA_PASSWORD)):
        secrets.add(bad._password.value)
        with pytest.raises(ConfigError) as cerr:
            await bad.start(http)
        texts += [str(cerr.value), repr(bad)]
    texts += [repr(ApiKeyCredentials(sim.api_key)), repr(make_credentials(Settings(api_key=sim.api_key, username=USER, password=PASSWORD)))]

    tokens = {s for s in secrets if s.startswith(("arc_sim_at_", "arc_sim_rt_"))}
    assert len(tokens) >= 6  # three logins/refreshes, each an access and a refresh token
    events = caplog.text
    assert "logged in to Arcane as 'arcane'" in events and "session refreshed" in events and "logging in again" in events
    for secret in secrets:
        assert secret not in events, "a secret reached the logs"
        for t in texts:
            assert secret not in t, f"a secret in {t!r}"
    assert "[hidden]" in repr(creds) and USER in repr(creds)


# ---------------------------------------------------------------- rate limiting (in memory)
# Arcane limits login and refresh to 5 per minute per path, then answers 429
# {"error":"rate limit exceeded"} with Retry-After: 60 (router_bootstrap.go:223-247,
# rate_limit_middleware.go:112-131).


class RateLimitedArcane:
    """An in-memory Arcane whose login/refresh answers 429 while `limited` is set."""

    def __init__(self, retry_after: str | None = "60"):
        self.limited = True
        self.retry_after = retry_after
        self.posts: list[str] = []
        self.refreshes = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path in ("/api/auth/login", "/api/auth/refresh"):
            self.posts.append(path)
            if self.limited:
                headers = {"Retry-After": self.retry_after} if self.retry_after else {}
                return httpx.Response(429, json={"error": "rate limit exceeded"}, headers=headers)
            self.refreshes += path.endswith("refresh")
            return httpx.Response(200, json={"success": True, "data": {
                "status": "authenticated", "token": f"tok-{len(self.posts)}", "refreshToken": f"ref-{len(self.posts)}",
                "expiresAt": "2099-01-01T00:00:00Z"}})
        if request.headers.get("authorization", "").startswith("Bearer tok-"):
            return httpx.Response(200, json={"success": True, "data": []})
        return httpx.Response(401, json={"title": "Unauthorized", "status": 401, "detail": "Unauthorized: valid authentication required"})


def _session(arcane, clock):
    http = httpx.AsyncClient(base_url="http://arcane.test/api", transport=httpx.MockTransport(arcane))
    return http, session(USER, PASSWORD, clock=clock, wall=lambda: 1_700_000_000.0)


@pytest.mark.parametrize("retry_after,wait", [("60", 60.0), (None, 60.0), ("7", 7.0)])
async def test_a_rate_limited_login_is_not_retried_before_retry_after(catalog, caplog, retry_after, wait):
    arcane, clock = RateLimitedArcane(retry_after), FakeClock()
    http, creds = _session(arcane, clock)
    async with http:
        with caplog.at_level(logging.WARNING, logger="arcane_mcp.auth"):
            await creds.start(http)  # 429 at startup: serve anyway, log in later
        assert arcane.posts == ["/api/auth/login"] and "429" in caplog.text
        for _ in range(10):  # a busy model: ten calls inside the window send no login at all
            with pytest.raises(AuthFailed) as ei:
                await call(http, creds, catalog, "container.list", "/environments/0/containers")
            assert ei.value.status == 429 and f"{wait:.0f} s" in ei.value.next_step and "UTC" in ei.value.next_step
        assert arcane.posts == ["/api/auth/login"]
        clock.t += wait - 1
        with pytest.raises(AuthFailed):
            await call(http, creds, catalog, "container.list", "/environments/0/containers")
        assert len(arcane.posts) == 1
        clock.t += 1.5
        arcane.limited = False  # the window passed: one login, then the call goes through
        res = await call(http, creds, catalog, "container.list", "/environments/0/containers")
        assert res.status_code == 200 and arcane.posts == ["/api/auth/login"] * 2


async def test_a_rate_limited_refresh_keeps_its_refresh_token(catalog):
    arcane, clock = RateLimitedArcane("60"), FakeClock()
    arcane.limited = False
    http, creds = _session(arcane, clock)
    async with http:
        await creds.start(http)
        creds._token = creds._token.__class__("expired")  # Arcane stops accepting the token
        arcane.limited = True
        with pytest.raises(AuthFailed) as ei:
            await call(http, creds, catalog, "container.list", "/environments/0/containers")
        assert ei.value.status == 429 and arcane.posts == ["/api/auth/login", "/api/auth/refresh"]
        with pytest.raises(AuthFailed):  # within the window: nothing is sent
            await call(http, creds, catalog, "container.list", "/environments/0/containers")
        assert len(arcane.posts) == 2
        clock.t += 61
        arcane.limited = False
        res = await call(http, creds, catalog, "container.list", "/environments/0/containers")
        # the refresh token survived the 429: a refresh, not a second login
        assert res.status_code == 200 and arcane.posts[-1] == "/api/auth/refresh" and arcane.refreshes == 1
