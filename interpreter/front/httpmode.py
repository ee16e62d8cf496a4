"""HTTP mode for teams (docs/http.md): streamable HTTP on /mcp with one MCP server per distinct
Arcane key, all sharing the one built catalog.

A request to /mcp passes, in this order:

    Host, Origin       allow-lists (DNS rebinding): a forged Host is 421, a foreign Origin 403
    body size          a declared Content-Length above ARCANE_MCP_MAX_BODY_BYTES is 413
    CORS preflight     answered for ARCANE_MCP_CORS_ORIGINS only (`Front._preflight`)
    body               a POST's, read whole within ARCANE_MCP_BODY_TIMEOUT (else 408), so
                       every refusal after this echoes the request's id (`Reply`)
    transport edges    the method (405), Content-Type (415), Accept (406), the version
                       header: unknown (-32022) or disagreeing (-32020) ("transport edges")
    key                the header rules/server.yaml `http.key_header` names (X-Arcane-API-Key);
                       without it the server's own credential, only when the server has one
                       and anonymous use is allowed (default: on a loopback bind only), else 401
    rate               a token bucket per client: its key's digest, or without a key its
                       address and MCP session, those under one more bucket for all of them
                       together: 429 with Retry-After (set far above any interactive client)
    pool               the key's server, made after Arcane accepted the key (the session's
                       `whoami` action, whose answer access.py reads for the key's
                       permissions); a key Arcane refuses is 401 and gets no server
    turn               at most ARCANE_MCP_MAX_IN_FLIGHT calls (POSTs) of one key are served at
                       once, the others wait their turn in arrival order (`InFlight`), at most
                       ARCANE_MCP_QUEUE_SIZE of them for ARCANE_MCP_QUEUE_WAIT: what bounds a
                       key's load on Arcane, by queueing rather than refusing

A key the pool does not hold costs a request to Arcane, so those checks are bounded for a
client spraying random keys (`KeyChecks`): a key Arcane refused is refused again from a
bounded table of digests for ARCANE_MCP_REJECTED_KEY_TTL without asking Arcane, and the
checks of new keys, all clients together, pass a token bucket (ARCANE_MCP_KEY_CHECK_RATE,
ARCANE_MCP_KEY_CHECK_BURST): beyond it a new key is 503 with Retry-After, while the keys
already in the pool are served as before.

Every refusal is an HTTP status with a JSON-RPC error body saying what to send or do, with
the request's id when it can be read (the SDK transport's own refusals too: `Reply`). A
request head not all in within ARCANE_MCP_HEADER_TIMEOUT closes its connection
(`_bounded_h11`). The
pool is keyed by the SHA-256 of the key, bounded (least recently used goes first) and
closes servers idle for ARCANE_MCP_POOL_IDLE; the key itself is only in that key's
ArcaneClient, never in a log line or an audit record (those carry `fingerprint`). The
Arcane URL is always the operator's; no client header changes the surface, read-only or
safe mode. After SIGTERM the health endpoint answers 503 and the calls in flight finish
before the process stops (`DrainingServer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import ipaddress
import json
import logging
import math
import signal
import socket
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import field
from typing import Any

import anyio
import uvicorn
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import DEFAULT_NEGOTIATED_VERSION, HEADER_MISMATCH, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from .. import __version__
from ..build.access import Access
from ..build.lazy_dataclass import dataclass
from ..build.model import HttpText
from ..call import reader
from ..call.dispatch import Dispatcher
from ..call.request import ArcaneClient
from ..config import Settings
from ..errors import ArcaneProtocolError, ConfigError, Refusal, UpstreamError
from . import events
from .call_records import AuditLog
from .frames import FrameCheck, Problem, check
from .listen import address_text
from .serve import Runtime, apply_access, build_server, start_client
from .surfaces import make_surface

log = logging.getLogger("arcane_mcp.http")

MCP_PATH = "/mcp"
ANONYMOUS = "operator"  # the fingerprint of the server's own credential in audit records
FINGERPRINT_CHARS = 12
RATE_TABLE_MAX = 10_000  # buckets kept: full ones are forgotten first, then the least recently used
CHECKS = "key-checks"  # the one bucket of KeyChecks (a digest is 64 hex digits: no clash)


def key_digest(key: str) -> str:
    """The pool's name for a key: its SHA-256, hex. The key itself is never a dict key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(digest: str) -> str:
    """What logs and audit records show of a key: a short prefix of its digest."""
    return digest[:FINGERPRINT_CHARS]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def has_own_credential(settings: Settings) -> bool:
    """Whether the server has an Arcane credential of its own (a key or a login)."""
    return bool(settings.api_key) or bool(settings.username)


def anonymous_allowed(settings: Settings, host: str) -> bool:
    """Whether a request without a key is served with the server's own credential: never
    when it has none (such a request is 401 missing_key, never sent on without one), else
    ARCANE_MCP_ALLOW_ANONYMOUS, or by default only when nothing but this machine can connect."""
    if not has_own_credential(settings):
        return False
    return settings.allow_anonymous if settings.allow_anonymous is not None else is_loopback(host)


def check_posture(settings: Settings, host: str) -> None:
    """A bind other than loopback needs TLS (cert and key) or the operator's word that a
    reverse proxy terminates it; raises ConfigError naming the settings."""
    if is_loopback(host) or settings.tls_cert is not None or settings.behind_tls_proxy:
        return
    raise ConfigError(f"listening on {host} (not loopback) needs TLS: set ARCANE_MCP_TLS_CERT and ARCANE_MCP_TLS_KEY, "
                      "or ARCANE_MCP_BEHIND_TLS_PROXY=true when a reverse proxy terminates TLS",
                      setting="ARCANE_MCP_LISTEN", code="tls_required")


# ---------------------------------------------------------------- refusals


# JSON-RPC error codes of the refusals (the -32000..-32099 range is the server's own)
UNAUTHORIZED, FORBIDDEN, TOO_LARGE, RATE_LIMITED, UNAVAILABLE = -32001, -32003, -32013, -32029, -32050


async def answer(refusal: Refusal, send) -> None:
    """A refusal as its HTTP status and JSON-RPC error body; the id is the request's when
    `send` is a `Reply` that could read one (else null: JSON-RPC's id of a request whose
    id cannot be read), and a `Reply` adds its CORS headers."""
    rid = getattr(send, "rid", None)
    error = {"code": refusal.code, "message": refusal.message, "data": refusal.data}
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in refusal.headers.items()]
    write = getattr(send, "raw", send)
    await write({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await write({"type": "http.response.body", "body": body})


class Refusals:
    """The refusals in front of the MCP server, their texts from rules/server.yaml
    `http.refusals` by reason (the reason is also data.reason)."""

    def __init__(self, http: HttpText, counted: Callable[[str], None] | None = None):
        self.texts, self.header = http.refusals, http.key_header
        self.counted = counted  # the refusals metric (observe.py), by reason

    def make(self, status: int, code: int, reason: str, data: dict | None = None, headers: dict | None = None, **values) -> Refusal:
        if self.counted is not None:
            self.counted(reason)
        return Refusal(status, code, self.texts[reason].format(**values), {"reason": reason, **(data or {})}, headers or {})

    def missing_key(self) -> Refusal:
        return self.make(401, UNAUTHORIZED, "missing_key", {"header": self.header}, header=self.header)

    def rejected_key(self) -> Refusal:
        return self.make(401, UNAUTHORIZED, "rejected_key", {"header": self.header}, header=self.header)

    def retry_later(self, status: int, code: int, reason: str, wait: float, **values) -> Refusal:
        """A refusal that says when to come back: `{seconds}` in its text, data.retryAfter, Retry-After."""
        seconds = max(1, math.ceil(wait))
        return self.make(status, code, reason, {"retryAfter": seconds}, {"Retry-After": str(seconds)}, seconds=seconds, **values)


# ---------------------------------------------------------------- allow-lists


def _matches(value: str, allowed: list[str]) -> bool:
    """Exact, or `base:*` for any port of base."""
    return any(value == a or (a.endswith(":*") and value.startswith(a[:-1])) for a in allowed)


def allow_lists(settings: Settings, host: str, port: int) -> tuple[list[str], list[str]]:
    """The Host and Origin values accepted: this machine's names at the bound port, the
    bound address, and the operator's extras."""
    here = address_text(host, port)
    names = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", here]
    schemes = ("https", "http") if settings.tls_cert is not None or settings.behind_tls_proxy else ("http",)
    origins = [f"{scheme}://{n}" for scheme in schemes for n in names]
    return names + list(settings.allowed_hosts), origins + list(settings.allowed_origins)


# ---------------------------------------------------------------- rate limit


class RateLimiter:
    """A token bucket per key digest: `rate` requests a second, bursts of `burst`. At most
    `table_max` buckets are kept, so distinct digests cannot grow it without bound."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic, table_max: int = RATE_TABLE_MAX):
        self.rate, self.burst, self.clock, self.table_max = rate, burst, clock, table_max
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, digest: str) -> float | None:
        """None when the request may go on, else the seconds until it could."""
        if self.rate <= 0:
            return None
        now = self.clock()
        tokens, last = self._buckets.get(digest, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if digest in self._buckets:
            self._buckets.move_to_end(digest)  # the least recently used are forgotten first
        if tokens < 1:
            self._buckets[digest] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[digest] = (tokens - 1, now)
        if len(self._buckets) > self.table_max:
            self._forget(now)
        return None

    def _forget(self, now: float) -> None:
        """The full buckets first (forgetting them changes nothing), then the least
        recently used (a forgotten one starts full again: lenient, but bounded)."""
        for d, (tokens, last) in list(self._buckets.items()):
            if tokens + (now - last) * self.rate >= self.burst:
                del self._buckets[d]
        while len(self._buckets) > self.table_max:
            self._buckets.popitem(last=False)


class KeyChecks:
    """What a key new to the pool may cost Arcane. `rejected`: the digests (never the keys)
    of keys Arcane refused, each refused again from here for `ttl` seconds, at most `size`
    of them (the oldest forgotten first); `admit`: one token bucket for the checks of new
    keys, all clients together. A client spraying random keys makes at most `burst` checks
    at once and `rate` a second after that, and its keys hold at most `size` digests."""

    def __init__(self, settings: Settings, clock: Callable[[], float]):
        self.ttl, self.size, self.clock = settings.rejected_key_ttl, settings.rejected_key_cache, clock
        self.bucket = RateLimiter(settings.key_check_rate, settings.key_check_burst, clock)
        self.rejected: OrderedDict[str, float] = OrderedDict()  # digest -> when Arcane refused it
        self.checked = self.refused = self.remembered = self.throttled = 0

    def stats(self) -> dict:
        return {"checked": self.checked, "refused": self.refused, "refused_again": self.remembered,
                "throttled": self.throttled, "rejected_kept": len(self.rejected), "rejected_max": self.size}

    def was_refused(self, digest: str) -> bool:
        """Whether Arcane refused this key less than `ttl` seconds ago."""
        at = self.rejected.get(digest)
        if at is None:
            return False
        if self.clock() - at > self.ttl:
            del self.rejected[digest]
            return False
        self.remembered += 1
        return True

    def admit(self) -> float | None:
        """None when a new key may be checked now, else the seconds until one could."""
        wait = self.bucket.take(CHECKS)
        if wait is None:
            self.checked += 1
        else:
            self.throttled += 1
        return wait

    def refuse(self, digest: str) -> None:
        self.refused += 1
        self.rejected[digest] = self.clock()
        self.rejected.move_to_end(digest)
        while len(self.rejected) > self.size:
            self.rejected.popitem(last=False)


# ---------------------------------------------------------------- calls in flight


class InFlight:
    """One key's calls in flight: at most `limit` at once; the others wait their turn in
    arrival order, at most `queue` of them, each for at most `wait` seconds. `enter` is
    None once the call has its turn (it then calls `leave` exactly once), else the seconds
    after which a retry may find one (the queue is full, or the wait ran out). A call that
    leaves hands its turn straight to the first waiter, so a late arrival cannot overtake."""

    def __init__(self, limit: int, queue: int, wait: float):
        self.limit, self.queue, self.wait = limit, queue, wait
        self.running = 0
        self.waiting: deque[asyncio.Future] = deque()
        self.took = 1.0  # seconds a call holds its turn, a moving average (the retry estimate)
        self.most_running = self.most_waiting = self.refused = 0

    def stats(self) -> dict:
        return {"running": self.running, "waiting": len(self.waiting), "most_running": self.most_running,
                "most_waiting": self.most_waiting, "refused": self.refused}

    def retry_in(self) -> float:
        """About when the calls ahead will have had their turns, from how long a turn takes."""
        return min(60.0, self.took * (len(self.waiting) + 1) / self.limit)

    async def enter(self) -> float | None:
        if self.running < self.limit and not self.waiting:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            return None
        if len(self.waiting) >= self.queue:
            self.refused += 1
            return self.retry_in()
        turn = asyncio.get_running_loop().create_future()
        self.waiting.append(turn)
        self.most_waiting = max(self.most_waiting, len(self.waiting))
        try:
            async with asyncio.timeout(self.wait):
                await turn
        except TimeoutError:
            if turn.done() and not turn.cancelled():
                return None  # handed over just as the wait ran out: the call has it
            self._drop(turn)
            self.refused += 1
            return self.retry_in()
        except BaseException:  # the client went away while waiting
            if turn.done() and not turn.cancelled():
                self.leave()  # a turn handed over meanwhile passes on
            else:
                self._drop(turn)
            raise
        return None

    def leave(self, took: float | None = None) -> None:
        if took is not None:
            self.took = 0.8 * self.took + 0.2 * took
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # the turn passes on: `running` stays as it is
                return
        self.running -= 1

    def _drop(self, turn: asyncio.Future) -> None:
        with contextlib.suppress(ValueError):
            self.waiting.remove(turn)


# ---------------------------------------------------------------- the pool


@dataclass(eq=False)
class Tenant:
    """One key's MCP server: its own ArcaneClient, dispatcher (caches), surface and server."""

    digest: str
    fingerprint: str
    runtime: Runtime
    app: Any
    server: Any
    last_used: float
    validated_at: float
    turns: InFlight
    active: int = 0
    stop: anyio.Event = field(default_factory=anyio.Event)


class Pool:
    """The per-key servers. `run()` must be entered (in the lifespan) before `acquire`."""

    def __init__(self, base: Runtime, audit: AuditLog, *, anonymous: bool, clock: Callable[[], float] = time.monotonic,
                 transport=None):
        self.base = base
        self.settings = base.settings
        self.audit = audit
        self.clock = clock
        self.transport = transport  # tests: an httpx transport for every key's client
        self.key_header = base.catalog.server.http.key_header
        self.observer = audit.observer
        self.refusals = Refusals(base.catalog.server.http, self.observer.refused if self.observer.metrics is not None else None)
        self.checks = KeyChecks(self.settings, clock)
        self.tenants: OrderedDict[str, Tenant] = OrderedDict()
        self.anonymous: Tenant | None = None
        self._allow_anonymous = anonymous
        self._making: dict[str, asyncio.Future] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.created = 0
        self.evicted = 0

    def stats(self) -> dict:
        return {"servers": len(self.tenants), "created": self.created, "evicted": self.evicted, "max": self.settings.pool_size}

    def calls(self) -> dict:
        """The calls of every key together: served now, waiting their turn, and refused
        for want of one (the queue full or the wait run out)."""
        turns = [t.turns for t in [*self.tenants.values(), *([self.anonymous] if self.anonymous else [])]]
        return {"running": sum(t.running for t in turns), "waiting": sum(len(t.waiting) for t in turns),
                "refused": sum(t.refused for t in turns), "max_in_flight": self.settings.max_in_flight,
                "most_running": max((t.most_running for t in turns), default=0),
                "most_waiting": max((t.most_waiting for t in turns), default=0)}

    @contextlib.asynccontextmanager
    async def run(self):
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self._allow_anonymous:
                self.anonymous = await self._start(ANONYMOUS, ANONYMOUS, self.base)
            sweeping = anyio.CancelScope()
            tg.start_soon(self._sweeper, sweeping)
            try:
                yield self
            finally:
                sweeping.cancel()
                for t in [*self.tenants.values(), *([self.anonymous] if self.anonymous else [])]:
                    t.stop.set()
                self.tenants.clear()

    async def acquire(self, key: str | None) -> Tenant:
        """The server for this key (None: the server's own credential, when allowed);
        raises Refusal for a missing or refused key, or a full pool."""
        if key is None:
            if self.anonymous is None:
                raise self.refusals.missing_key()
            return self.anonymous
        digest = key_digest(key)
        now = self.clock()
        tenant = self.tenants.get(digest)
        if tenant is not None and now - tenant.validated_at > self.settings.key_revalidate:
            # a key in use is checked again whatever the spray: its checks are bounded by the pool
            checked_at, tenant.validated_at = tenant.validated_at, now  # one check for the requests arriving meanwhile
            try:
                known = await self._check(tenant.runtime.dispatcher.client)
            except BaseException:
                tenant.validated_at = checked_at
                raise
            if known is None:
                self._evict(tenant)
                self.checks.refuse(digest)
                raise self.refusals.rejected_key()
            # what the key may do now (granted or taken away since): the check's answer, not asked again
            before = len(tenant.runtime.access.reasons) if tenant.runtime.access is not None else 0
            try:
                withdrawn = await apply_access(tenant.runtime, known)
            except Exception as exc:  # the key is good: its view stays as it was until the next check
                log.warning("key %s: its permissions could not be read again (%s); its tools stay as they were",
                            tenant.fingerprint, exc.__class__.__name__)
            else:
                if withdrawn != before:
                    log.info("key %s: %d action(s) withdrawn by its permissions now (%d before)", tenant.fingerprint, withdrawn, before)
        if tenant is None:
            if self.checks.was_refused(digest):
                raise self.refusals.rejected_key()
            pending = self._making.get(digest)
            if pending is None:
                wait = self.checks.admit()
                if wait is not None:
                    raise self.refusals.retry_later(503, UNAVAILABLE, "key_checks_busy", wait)
                pending = self._making[digest] = asyncio.get_running_loop().create_future()
                try:
                    tenant = await self._make(digest, key)
                    pending.set_result(tenant)
                except BaseException as exc:
                    pending.set_exception(exc)
                    pending.exception()  # retrieved: nobody else may be waiting
                    raise
                finally:
                    del self._making[digest]
            else:
                tenant = await asyncio.shield(pending)
        self.tenants.move_to_end(digest)
        tenant.last_used = self.clock()
        return tenant

    async def _make(self, digest: str, key: str) -> Tenant:
        settings = dataclasses.replace(self.settings, api_key=key, username=None, password=None)
        client = ArcaneClient(settings, transport=self.transport, observer=self.observer)
        client.use(self.base.catalog)  # the key's header (the document's apiKey scheme) before the check sends it
        fp = fingerprint(digest)
        try:
            # the key first: a refused key costs one client, never a dispatcher or a surface
            known = await self._check(client)
            if known is None:
                self.checks.refuse(digest)
                log.info("key %s refused by Arcane", fp)
                raise self.refusals.rejected_key()
            dispatcher = Dispatcher(self.base.catalog, settings, client, self.audit.for_key(fp))
            # what the key may do decides what it sees (interpreter/build/access.py), refreshed after a 403
            runtime = Runtime(settings, self.base.catalog, dispatcher, make_surface(settings.surface, self.base.catalog, dispatcher),
                              access=Access(self.base.catalog, client, key))
            withdrawn = await apply_access(runtime, known)  # the check's answer is not asked for again
            log.info("key %s: %d action(s) withdrawn by its permissions", fp, withdrawn)
            self._make_room()
            tenant = await self._start(digest, fp, runtime)
        except BaseException:
            await client.aclose()
            raise
        self.tenants[digest] = tenant
        self.created += 1
        log.info("server made for key %s (%d in the pool)", fp, len(self.tenants))
        return tenant

    async def _check(self, client: ArcaneClient) -> dict[str, Any] | None:
        """Whether Arcane accepts the client's key, by its answer to the session's `whoami`
        action: None when refused (401; a 403 is a key without that permission, still a
        key), else that answer by action ID, for access.read not to ask again (empty when
        it could not be read: access then reads for itself)."""
        catalog = self.base.catalog
        aid = catalog.conventions.session.whoami
        try:
            answer = await reader.read(client, catalog.all_actions[aid], {}, catalog.conventions, statuses=reader.ANY)
        except ArcaneProtocolError:
            return {}  # an answer too large to read: accepted, and access reads for itself
        except UpstreamError as exc:
            raise self.refusals.make(502, UNAVAILABLE, "arcane_unreachable", error=type(exc).__name__) from None
        if answer.status == 401:
            return None
        if answer.status >= 500:
            raise self.refusals.make(502, UNAVAILABLE, "arcane_failed", {"status": answer.status}, status=answer.status)
        if answer.status >= 300 or answer.structured is None:
            return {}  # a 403, or an answer that is not JSON: accepted, and access reads for itself
        return {aid: answer.structured}

    def _make_room(self) -> None:
        while len(self.tenants) >= self.settings.pool_size:
            idle = next((t for t in self.tenants.values() if t.active == 0), None)
            if idle is None:
                raise self.refusals.make(503, UNAVAILABLE, "pool_full", headers={"Retry-After": "5"})
            self._evict(idle)

    def _evict(self, tenant: Tenant) -> None:
        if self.tenants.get(tenant.digest) is tenant:
            del self.tenants[tenant.digest]
            self.evicted += 1
            log.info("server of key %s closed", tenant.fingerprint)
        tenant.stop.set()

    def sweep(self) -> int:
        """Close the servers idle longer than ARCANE_MCP_POOL_IDLE; how many were closed."""
        now = self.clock()
        stale = [t for t in self.tenants.values() if t.active == 0 and now - t.last_used > self.settings.pool_idle]
        for t in stale:
            self._evict(t)
        return len(stale)

    async def _sweeper(self, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                await anyio.sleep(min(self.settings.pool_idle / 4, 60.0))
                self.sweep()

    async def _start(self, digest: str, fp: str, runtime: Runtime) -> Tenant:
        server = build_server(runtime, principal=None if digest == ANONYMOUS else digest)
        store = events.store_for(self.settings)  # stateful only: each key's own, so no replay crosses keys
        app = server.streamable_http_app(
            streamable_http_path=MCP_PATH, stateless_http=not self.settings.http_stateful, json_response=False,
            max_request_body_size=self.settings.max_body_bytes, event_store=store,
            retry_interval=self.settings.sse_retry_ms if store is not None else None,
            # Host and Origin were checked in front of the pool, before any key was looked at
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        if store is not None:  # each session's events apart, Last-Event-ID checked, the GET stream's retry hint
            app = events.Resumable(app, store, self.settings.sse_retry_ms, self._refuse_event_id)
        # a malformed JSON-RPC body is answered 400 with its error before the SDK reads it (frames.py)
        # and only a request waits for one of the key's turns (a client's answer to a question does not)
        s = self.settings
        turns = InFlight(s.max_in_flight, s.queue_size, s.queue_wait)
        app = FrameCheck(app, self.settings.max_body_bytes, gate=lambda run, send: self._in_turn(turns, run, send))
        now = self.clock()
        tenant = Tenant(digest, fp, runtime, app, server, now, now, turns)
        await self._tg.start(self._serve, tenant)
        return tenant

    async def _refuse_event_id(self, send, status: int, reason: str) -> None:
        """A Last-Event-ID the session's store cannot serve (events.Resumable): -32600 naming the header."""
        await answer(self.refusals.make(status, INVALID_REQUEST, reason, {"field": "Last-Event-ID"}), send)

    async def _in_turn(self, turns: InFlight, run, send) -> None:
        """A request once the key's turns allow it (InFlight); 429 with Retry-After when the
        queue is full or the wait ran out."""
        wait = await turns.enter()
        if wait is not None:
            await answer(self.refusals.retry_later(429, RATE_LIMITED, "key_busy", wait, limit=turns.limit), send)
            return
        started = time.monotonic()
        try:
            await run()
        finally:
            turns.leave(time.monotonic() - started)

    @staticmethod
    async def _serve(tenant: Tenant, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        # the server's own client is opened and closed by the lifespan, a key's client here
        client = tenant.runtime.dispatcher.client if tenant.digest != ANONYMOUS else None
        try:
            async with tenant.server.session_manager.run():
                task_status.started()
                await tenant.stop.wait()
        finally:
            if client is not None:
                with anyio.CancelScope(shield=True):
                    await client.aclose()


# ---------------------------------------------------------------- transport edges
#
# What the streamable HTTP transport pages of the specification say a server answers, each
# checked here in front of the SDK's transport so every refusal is a JSON-RPC error body:
#
# 2025-11-25 "Listening for Messages from the Server": "The server MUST either return
#   Content-Type: text/event-stream in response to this HTTP GET, or else return HTTP 405
#   Method Not Allowed, indicating that the server does not offer an SSE stream at this
#   endpoint." A stateless server has no stream to offer: a GET is 405.
# 2025-11-25 "Session Management": to a DELETE "The server MAY respond to this request with
#   HTTP 405 Method Not Allowed": a stateless server has no session to end.
# 2026-07-28 "Backward Compatibility": "HTTP GET or DELETE to the MCP endpoint: respond with
#   405 Method Not Allowed."
# 2025-11-25 "Protocol Version Header": "If the server receives a request with an invalid or
#   unsupported MCP-Protocol-Version, it MUST respond with 400 Bad Request"; 2026-07-28
#   "Protocol Version Header": "it MUST respond with 400 Bad Request and an
#   UnsupportedProtocolVersionError listing its supported versions" (-32022), and "The
#   header value MUST match the io.modelcontextprotocol/protocolVersion field carried in the
#   request body's _meta. If the values do not match, the server MUST reject the request
#   with 400 Bad Request and a HeaderMismatch JSON-RPC error" (-32020). 2025-11-25: "The
#   protocol version sent by the client SHOULD be the one negotiated during
#   initialization": a stateful session's header that names another version is the same
#   HeaderMismatch (the session was negotiated at one version; its requests are read as it).
# 2026-07-28 "Sending Messages": "The client MUST include an Accept header listing both
#   application/json and text/event-stream"; the body is "a single JSON-RPC request or
#   notification" (JSON: Content-Type application/json, else 415 as the SDK's own table has it).

HANDSHAKE_VERSIONS, MODERN_VERSIONS = tuple(HANDSHAKE_PROTOCOL_VERSIONS), tuple(MODERN_PROTOCOL_VERSIONS)
# 2025-11-25 "Protocol Version Header": without the header the server "SHOULD assume protocol
# version 2025-03-26", a revision that defined no header: a header naming it states no more
# than its absence does, so it is not held against a session's version (the official
# conformance suite's concurrent-streams scenario sends it on a session of another version)
UNSTATED = DEFAULT_NEGOTIATED_VERSION
SESSIONS_KEPT = 10_000  # negotiated versions remembered, by session ID (the oldest forgotten first)
ERROR_BODY_MAX = 65_536  # an error the SDK answers is read up to this to echo the request's id
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CORS_ALLOW_HEADERS = ("Content-Type", "Accept", "Authorization", "MCP-Protocol-Version", "Mcp-Session-Id", "Last-Event-ID",
                      "Mcp-Method", "Mcp-Name")
CORS_EXPOSE_HEADERS = "Mcp-Session-Id, MCP-Protocol-Version, Retry-After, WWW-Authenticate"
CORS_MAX_AGE = "600"
_PHRASES = {400: "bad request", 404: "not found", 405: "method not allowed", 406: "not acceptable", 409: "conflict",
            413: "body too large", 415: "unsupported media type"}


def request_id(frame: Any) -> Any:
    """The id of a checked frame (frames.check's answer) when it can be read, else None."""
    if isinstance(frame, Problem):
        return frame.id
    rid = frame.get("id") if isinstance(frame, dict) else None
    return rid if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)) else None


class Reply:
    """The `send` of one request to /mcp. It knows the request's body (a POST's), so a
    refusal echoes the request's id (`rid`, read only when a refusal needs it), and it
    adds the CORS headers of an allowed origin to every answer (`raw`). An error status the
    app behind answers (the SDK's transport) is held until its body is in: a JSON-RPC error
    with a null id gets the request's id, anything else (plain text, nothing) becomes the
    JSON-RPC error -32600 saying it, so every refusal has a JSON-RPC body."""

    def __init__(self, send, cors: list[tuple[bytes, bytes]]):
        self.send, self.cors = send, cors
        self.body: bytes | None = None
        self._frame: Any = None
        self._held: tuple[dict, list[bytes]] | None = None
        self.watch: Callable[[dict], None] | None = None  # sees the app's messages (a negotiated version)

    def frame(self) -> Any:
        """The POST body checked (frames.check): a message, a Problem, or None without a body."""
        if self._frame is None and self.body is not None:
            self._frame = check(self.body)
        return self._frame

    @property
    def rid(self) -> Any:
        return request_id(self.frame())

    async def raw(self, message: dict) -> None:
        if message["type"] == "http.response.start" and self.cors:
            message = {**message, "headers": [*message.get("headers", ()), *self.cors]}
        await self.send(message)

    async def __call__(self, message: dict) -> None:
        if self.watch is not None:
            self.watch(message)
        if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
            self._held = (message, [])
            return
        if self._held is not None and message["type"] == "http.response.body":
            start, chunks = self._held
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
            if more and sum(map(len, chunks)) <= ERROR_BODY_MAX:
                return
            self._held = None
            if more:  # not an error body: as it came
                await self.raw(start)
                await self.raw({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
                return
            await self._error(start, b"".join(chunks))
            return
        await self.raw(message)

    async def _error(self, start: dict, body: bytes) -> None:
        status = start["status"]
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            if parsed.get("id") is None and self.rid is not None:
                parsed["id"] = self.rid
            parsed.setdefault("jsonrpc", "2.0")
            parsed.setdefault("id", None)
        else:
            said = " ".join(body.decode("utf-8", "replace").split())[:160] if body else _PHRASES.get(status, f"HTTP {status}")
            parsed = {"jsonrpc": "2.0", "id": self.rid, "error": {"code": INVALID_REQUEST, "message": said, "data": {"status": status}}}
        out = json.dumps(parsed, separators=(",", ":")).encode()
        headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() not in (b"content-type", b"content-length")]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
        await self.raw({**start, "headers": headers})
        await self.raw({"type": "http.response.body", "body": out})


class Negotiated:
    """The protocol version each stateful session was initialized at, by session ID: read
    from the answer to its `initialize` (the SDK's, JSON or one SSE event), at most `size`
    sessions (the oldest forgotten first: a forgotten session is served unchecked)."""

    def __init__(self, size: int = SESSIONS_KEPT):
        self.size = size
        self.versions: OrderedDict[str, str] = OrderedDict()

    def get(self, session: str | None) -> str | None:
        return self.versions.get(session) if session else None

    def forget(self, session: str | None) -> None:
        self.versions.pop(session or "", None)

    def recorder(self) -> Callable[[dict], None]:
        """A `Reply.watch` for an initialize: the session ID of its answer's start, the
        version of its body (read up to ERROR_BODY_MAX)."""
        seen: dict[str, Any] = {"session": None, "text": b""}

        def watch(message: dict) -> None:
            if message["type"] == "http.response.start":
                seen["session"] = next((v.decode("latin-1") for k, v in message.get("headers", ()) if k.lower() == b"mcp-session-id"), None)
                return
            if message["type"] != "http.response.body" or seen["session"] is None or len(seen["text"]) > ERROR_BODY_MAX:
                return
            seen["text"] += message.get("body", b"")
            version = _result_version(seen["text"])
            if version is not None:
                self.versions[seen["session"]] = version
                self.versions.move_to_end(seen["session"])
                while len(self.versions) > self.size:
                    self.versions.popitem(last=False)
                seen["session"] = None
        return watch


def _result_version(text: bytes) -> str | None:
    """result.protocolVersion of an answer to initialize: its JSON body, or an SSE event's data."""
    candidates = [text] + [line[5:] for line in text.splitlines() if line.startswith(b"data:")]
    for candidate in candidates:
        try:
            parsed = json.loads(candidate)
        except ValueError:
            continue
        result = parsed.get("result") if isinstance(parsed, dict) else None
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if isinstance(version, str):
            return version
    return None


def _media(value: str | None) -> str:
    return (value or "").split(";")[0].strip().lower()


# ---------------------------------------------------------------- the front


@dataclass
class Drain:
    """Whether SIGTERM came, and how many MCP requests are in flight."""

    draining: bool = False
    inflight: int = 0
    idle: asyncio.Event | None = None

    def enter(self) -> None:
        self.inflight += 1
        if self.idle is not None:
            self.idle.clear()

    def leave(self) -> None:
        self.inflight -= 1
        if self.inflight == 0 and self.idle is not None:
            self.idle.set()


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers") or ():
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def client_bucket(scope, key: str | None) -> str:
    """The rate bucket of a request: its key's digest; without a key, the client's address
    and its MCP session where it has one (a digest of both: a header of any size or content
    makes a bucket name of fixed size, and never one of a key's)."""
    if key:
        return key_digest(key)
    address = str((scope.get("client") or ("",))[0])
    session = _header(scope, b"mcp-session-id") or ""
    return "anonymous:" + key_digest(f"{address}\n{session}")


class Front:
    """The ASGI app in front of the pool (see the module's docstring for the order)."""

    def __init__(self, pool: Pool, settings: Settings, host: str, port: int, drain: Drain):
        self.pool, self.settings, self.drain = pool, settings, drain
        self.key_header = pool.key_header.lower().encode()
        self.refusals = pool.refusals
        self.hosts, self.origins = allow_lists(settings, host, port)
        self.cors = frozenset(settings.cors_origins)
        self.origins = [*self.origins, *settings.cors_origins]  # an origin allowed cross-origin is allowed
        self.limiter = RateLimiter(settings.rate_limit, settings.rate_burst, pool.clock)
        self.anonymous_limiter = RateLimiter(settings.anonymous_rate_limit, settings.anonymous_rate_burst, pool.clock)
        self.negotiated = Negotiated()
        self.supported = ", ".join((*HANDSHAKE_VERSIONS, *MODERN_VERSIONS))

    def _check(self, scope) -> None:
        """Host and Origin: raises Refusal before anything else is looked at (no body is
        read: the specification's 403 "MAY comprise a JSON-RPC error response that has no id")."""
        host = _header(scope, b"host")
        if not host or not _matches(host, self.hosts):
            raise self.refusals.make(421, FORBIDDEN, "host_not_allowed")
        origin = _header(scope, b"origin")
        if origin and not _matches(origin, self.origins):
            raise self.refusals.make(403, FORBIDDEN, "origin_not_allowed")
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.settings.max_body_bytes:
            raise self._too_large()

    def _too_large(self) -> Refusal:
        limit = self.settings.max_body_bytes
        return self.refusals.make(413, TOO_LARGE, "body_too_large", {"limit": limit}, {"Connection": "close"}, limit=limit)

    def _cors_headers(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        """What an answer to an allowed cross-origin client carries (none for any other: a
        browser then keeps the answer from the page). The origin is echoed, never `*`, and no
        credentials are allowed (the key is a header the page sends, not a cookie)."""
        if not self.cors:
            return []
        if origin is None or origin not in self.cors:
            return [(b"vary", b"Origin")]
        return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin"),
                (b"access-control-expose-headers", CORS_EXPOSE_HEADERS.encode())]

    def _methods(self, version: str | None) -> tuple[str, ...]:
        """The HTTP methods with a meaning here: a GET (the session's stream) and a DELETE (its
        end) only on a stateful server, to a client of the handshake era."""
        return ("GET", "POST", "DELETE") if self.settings.http_stateful and version not in MODERN_VERSIONS else ("POST",)

    async def _preflight(self, scope, reply: Reply) -> None:
        """A CORS preflight (OPTIONS): answered 204 for an origin of ARCANE_MCP_CORS_ORIGINS
        only, naming the methods and the MCP headers a page may send; 403 otherwise."""
        origin = _header(scope, b"origin")
        if origin is None or origin not in self.cors:
            raise self.refusals.make(403, FORBIDDEN, "cors_not_allowed")
        asked = _header(scope, b"access-control-request-headers") or ""
        params = [h.strip() for h in asked.split(",") if h.strip().lower().startswith("mcp-param-")][:64]
        allow = ", ".join((*CORS_ALLOW_HEADERS, self.pool.key_header, *params))
        methods = ", ".join((*self._methods(_header(scope, b"mcp-protocol-version")), "OPTIONS"))
        headers = [(b"access-control-allow-methods", methods.encode()), (b"access-control-allow-headers", allow.encode("latin-1")),
                   (b"access-control-max-age", CORS_MAX_AGE.encode()), (b"content-length", b"0")]
        await reply.raw({"type": "http.response.start", "status": 204, "headers": headers})
        await reply.raw({"type": "http.response.body", "body": b""})

    async def _read_body(self, receive, reply: Reply) -> list[dict] | None:
        """A POST's body, read whole within ARCANE_MCP_BODY_TIMEOUT (the messages, to be
        replayed); None when the client went away. Raises Refusal: 408 when it is slower,
        413 when it is larger than ARCANE_MCP_MAX_BODY_BYTES (either closes the connection)."""
        messages, size, more = [], 0, True
        with anyio.move_on_after(self.settings.body_timeout) as timer:
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                body = message.get("body", b"")
                size += len(body)
                if size > self.settings.max_body_bytes:
                    raise self._too_large()
                messages.append({"type": "http.request", "body": body, "more_body": False})
                more = message.get("more_body", False)
        if timer.cancelled_caught:
            seconds = max(1, math.ceil(self.settings.body_timeout))
            raise self.refusals.make(408, INVALID_REQUEST, "body_timeout", {"timeout": seconds}, {"Connection": "close"},
                                     seconds=seconds)
        reply.body = b"".join(m["body"] for m in messages)
        return [{"type": "http.request", "body": reply.body, "more_body": False}]

    def _edges(self, scope, reply: Reply) -> None:
        """The transport's own rules (see "transport edges" above): raises Refusal."""
        version = _header(scope, b"mcp-protocol-version")
        modern_body = VERSION_META.encode() in (reply.body or b"")  # a 2026-07-28 envelope: its SDK path checks it
        if version is not None and version not in HANDSHAKE_VERSIONS and version not in MODERN_VERSIONS and not modern_body:
            raise self.refusals.make(400, UNSUPPORTED_PROTOCOL_VERSION, "unsupported_version",
                                     {"supported": [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS], "requested": version,
                                      "field": "MCP-Protocol-Version"},
                                     requested=version[:40], supported=self.supported)
        allowed = self._methods(version)
        method = scope["method"]
        if method not in allowed:
            raise self.refusals.make(405, INVALID_REQUEST, "method_not_allowed", {"method": method[:20], "allow": list(allowed)},
                                     {"Allow": ", ".join(allowed)}, method=method[:20], allow=", ".join(allowed))
        session = _header(scope, b"mcp-session-id")
        agreed = self.negotiated.get(session)
        if version not in (None, agreed, UNSTATED) and agreed is not None:
            raise self._mismatch(version, agreed, "the version this session was initialized at")
        if method != "POST":
            return
        if _media(_header(scope, b"content-type")) != "application/json":
            raise self.refusals.make(415, INVALID_REQUEST, "bad_content_type", {"field": "Content-Type"})
        has_json, has_sse = check_accept_headers(Request(scope))
        if not (has_json and has_sse):
            raise self.refusals.make(406, INVALID_REQUEST, "not_acceptable", {"field": "Accept"})
        if version in MODERN_VERSIONS or not modern_body:
            return  # a 2026-07-28 request's headers are its transport's to check (HeaderMismatch)
        frame = reply.frame()
        params = frame.get("params") if isinstance(frame, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        carried = meta.get(VERSION_META) if isinstance(meta, dict) else None
        if isinstance(carried, str) and carried != version:
            raise self._mismatch(version or "(none)", carried, "the version in the request's _meta")

    def _mismatch(self, sent: str, agreed: str, where: str) -> Refusal:
        return self.refusals.make(400, HEADER_MISMATCH, "version_mismatch",
                                  {"field": "MCP-Protocol-Version", "sent": sent[:40], "expected": agreed}, sent=sent[:40],
                                  agreed=agreed, where=where)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        reply = Reply(send, self._cors_headers(_header(scope, b"origin")))
        if scope["path"].rstrip("/") != MCP_PATH:
            await answer(self.refusals.make(404, -32601, "not_found", path=MCP_PATH), reply)
            return
        try:
            self._check(scope)
            if scope["method"] == "OPTIONS" and self.cors and _header(scope, b"access-control-request-method"):
                await self._preflight(scope, reply)
                return
            if scope["method"] == "POST":
                replay = await self._read_body(receive, reply)
                if replay is None:
                    return  # the client went away
                receive = _replaying(replay, receive)
            self._edges(scope, reply)
            key = (_header(scope, self.key_header) or "").strip() or None
            self._take(scope, key)
            tenant = await self.pool.acquire(key)
        except Refusal as refusal:
            await answer(refusal, reply)
            return
        method = scope["method"]
        if self.settings.http_stateful and method == "POST" and b'"initialize"' in (reply.body or b"") \
                and isinstance(reply.frame(), dict) and reply.frame().get("method") == "initialize":
            reply.watch = self.negotiated.recorder()
        elif method == "DELETE":
            self.negotiated.forget(_header(scope, b"mcp-session-id"))
        counted = method != "GET"  # a GET is a standing notification stream, not a call in flight
        tenant.active += 1
        if counted:
            self.drain.enter()
        try:
            await tenant.app(scope, receive, reply)  # a POST request is served in its turn (Pool._in_turn)
        finally:
            tenant.active -= 1
            tenant.last_used = self.pool.clock()
            if counted:
                self.drain.leave()

    def _take(self, scope, key: str | None) -> None:
        """The rate limits: the client's bucket, and without a key the bucket of all
        anonymous use too; raises Refusal (429 with Retry-After). A request without a key
        where none is served is refused as such first (401), costing no bucket."""
        if key is None and self.pool.anonymous is None:
            raise self.refusals.missing_key()
        wait = self.limiter.take(client_bucket(scope, key))
        if wait is not None:
            raise self.refusals.retry_later(429, RATE_LIMITED, "rate_limited", wait)
        if key is None and (wait := self.anonymous_limiter.take(ANONYMOUS)) is not None:
            raise self.refusals.retry_later(429, RATE_LIMITED, "anonymous_rate_limited", wait, header=self.refusals.header)


def _replaying(messages: list[dict], receive):
    """A `receive` that hands out the body already read, then the client's next messages."""
    pending = list(messages)

    async def replay() -> dict:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


def http_app(runtime: Runtime, host: str, port: int, on_ready: Callable[[], None] | None = None, *,
             drain: Drain | None = None, transport=None):
    """The Starlette app of HTTP mode: /health (unauthenticated) and the Front on /mcp."""
    settings = runtime.settings
    drain = drain or Drain()
    pool = Pool(runtime, runtime.dispatcher.audit, anonymous=anonymous_allowed(settings, host), transport=transport)
    front = Front(pool, settings, host, port, drain)

    async def health(request):
        body = {"status": "draining" if drain.draining else "ok", "version": __version__, "surface": settings.surface,
                "actions": len(runtime.catalog.actions), "stateful": settings.http_stateful, "pool": pool.stats(), "keys": pool.checks.stats(),
                "calls": pool.calls()}
        return JSONResponse(body, status_code=503 if drain.draining else 200)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        drain.idle = asyncio.Event()
        drain.idle.set()
        if runtime.dispatcher.client is not None:
            try:
                await start_client(runtime)  # the login, and the background drift check of main's serve.py
                await apply_access(runtime)  # the server's own credential sees only what it may do too
            except Exception as exc:  # a refused login: one line, then stop
                print(f"interp: {exc.format() if isinstance(exc, ConfigError) else exc}", file=sys.stderr, flush=True)
                raise SystemExit(2) from None
        try:
            async with pool.run():
                if on_ready is not None:
                    on_ready()  # only now: the socket is bound and the login (if any) went through
                yield
        finally:
            if runtime.dispatcher.client is not None:
                await runtime.dispatcher.client.aclose()
            pool.observer.shutdown()  # the spans still batched go out

    routes = [Route("/health", health), *_metrics_routes(runtime, pool, front), Mount("/", app=front)]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.pool, app.state.drain = pool, drain
    return app


def _metrics_routes(runtime: Runtime, pool: Pool, front: Front) -> list[Route]:
    """/metrics when ARCANE_MCP_METRICS is on (observe.py), else no route (404, like any other path)."""
    metrics = pool.observer.metrics
    if metrics is None:
        return []
    every = lambda: [*pool.tenants.values(), *([pool.anonymous] if pool.anonymous else [])]
    metrics.watch(lambda: len(pool.tenants), lambda: sum(t.turns.running for t in every()),
                  lambda: sum(len(t.turns.waiting) for t in every()))
    from .observe import metrics_endpoint

    return [Route("/metrics", metrics_endpoint(metrics, runtime.settings.metrics_token, lambda host: _matches(host, front.hosts)))]


def _uvicorn_server():
    class DrainingServer(uvicorn.Server):
        """uvicorn, but the first SIGTERM drains: /health turns 503 at once, the calls in
        flight finish (at most ARCANE_MCP_DRAIN_TIMEOUT), then the server stops as usual
        and the process exits 0. A second signal, or SIGINT, is uvicorn's own."""

        def __init__(self, config, drain: Drain, timeout: float):
            super().__init__(config)
            self.drain, self.timeout = drain, timeout
            self.loop: asyncio.AbstractEventLoop | None = None

        async def serve(self, sockets=None):
            self.loop = asyncio.get_running_loop()
            await super().serve(sockets)

        def handle_exit(self, sig, frame):
            if sig != signal.SIGTERM or self.drain.draining or self.loop is None:
                return super().handle_exit(sig, frame)
            self.drain.draining = True
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._finish()))

        async def _finish(self) -> None:
            if self.drain.idle is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.drain.idle.wait(), self.timeout)
            self.should_exit = True

    return DrainingServer


def _bounded_h11(header_timeout: float):
    """uvicorn's h11 protocol, with a deadline on a request's headers: a connection that has
    not sent a whole request head within `header_timeout` (from its first byte, or from
    the connection when nothing comes) is closed, so partial headers cannot hold a
    connection (uvicorn bounds only the idle time between requests, ARCANE_MCP_KEEP_ALIVE)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11(H11Protocol):
        head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                if self.head_timer is None:  # the first bytes of a request head
                    self._arm()
            else:
                self._disarm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self.head_timer = self.loop.call_later(header_timeout, self._expired)

        def _disarm(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

        def _expired(self) -> None:
            self.head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return BoundedH11


def serve_http(runtime: Runtime, sock: socket.socket, on_ready: Callable[[], None] | None = None) -> None:
    """Serve HTTP mode on an already bound socket (listen.bind), so a busy port fails
    before anything is announced; `on_ready` runs once the server is up."""
    settings = runtime.settings
    host, port = sock.getsockname()[:2]
    if settings.behind_tls_proxy and not is_loopback(host) and settings.tls_cert is None:
        log.warning("serving plain HTTP on %s: ARCANE_MCP_BEHIND_TLS_PROXY says a reverse proxy terminates TLS", host)
    drain = Drain()
    app = http_app(runtime, host, port, on_ready, drain=drain)
    tls = {"ssl_certfile": str(settings.tls_cert), "ssl_keyfile": str(settings.tls_key)} if settings.tls_cert else {}
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=math.ceil(settings.keep_alive),
                            http=_bounded_h11(settings.header_timeout),
                            timeout_graceful_shutdown=math.ceil(settings.drain_timeout), **tls)
    try:
        _uvicorn_server()(config, drain, settings.drain_timeout).run(sockets=[sock])
    finally:
        sock.close()
