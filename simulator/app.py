"""The simulator's HTTP side: a Starlette app that answers every operation of the OpenAPI
document it serves under /api, like Arcane, plus a control API under /_sim.

One generic pipeline serves every request, in the order of Arcane's own stack:

    record → faults (latency, drop, 5xx) → per-IP rate limits (Echo, login paths) →
    /api/openapi.json → route (the document's operations; Arcane's Echo routes for
    WebSockets and pprof; the JSON 404 catch-all otherwise) → malformed →
    environment proxy for a remote environment (its own auth, unknown / disabled / edge
    refusals, its permission check, an unreachable agent) — or, locally, Huma's security
    middleware and the operation's permission middleware → parameter and body validation
    (Huma's 422) → daemon_down → behaviour (read or change a collection) → the answer by
    response kind (json / empty / ndjson / download / raw / live), every JSON answer
    validated against the document.

Nothing here names a domain: which collection an operation touches, what it sets, what it
answers, which permission it needs and how Arcane's answers read come from the
behaviour data.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import http
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email.utils import formatdate
from fnmatch import fnmatchcase
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .document import Operation, Router, fill_path, split_raw_path
from .extras import claim_at, jwt_signed_with, subject_glob_match
from .extras import route as extra_route
from .faults import Decision, FaultError, Faults
from .knobs import KnobError
from .live import LiveChannel
from .logs import docker_ts, is_tty, item_lines, parse_ts
from .model import ApiKey, Behaviour, OpBehaviour, data_schema, strip_private
from .schemas import DocSchemas, deep_merge
from .sockets import SocketRoutes
from .store import Ambiguous, MfaChallenge, Store
from .template import FILTERS, TemplateError, get_path, matches_where, parse_path, render
from .uploads import OPS as UPLOAD_OPS
from .uploads import UploadRefused

log = logging.getLogger("arcane_mcp.simulator")

API_PREFIX = "/api"
CONTROL_PREFIX = "/_sim"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
REDACTED = "[redacted]"
# a key's stored prefix: "arc_" + 8 characters (backend/internal/apikey/service.go:227
# parseAPIKeyPrefixInternal); Arcane looks a key up by it
KEY_PREFIX_LEN = 12
SECRET_HEADERS = ("x-api-key", "authorization", "cookie")
STREAM_KINDS = ("ndjson", "live")


# ---------------------------------------------------------------- records


async def _as_events(lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The live channel's JSON lines as server-sent events (the `live_framing` knob)."""
    async for line in lines:
        yield b"data: " + line.rstrip(b"\n") + b"\n\n"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the simulator received it (credentials replaced by "[redacted]")."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: bytes
    operation: str | None  # the operationId it routed to, None for the catch-all and Echo routes
    credential: str | None  # api_key | invalid_api_key | bearer | invalid_bearer | None
    action: str | None = None  # the caller's label of the operation (see Simulator labels), else the operationId
    key_digest: str | None = None  # SHA-256 (hex) of the X-API-Key it carried: which key, never the key
    raw_path: str = ""  # the path as sent, still percent-encoded (`path` is decoded once)

    def carried(self, key: str) -> bool:
        """Whether this request carried that X-API-Key."""
        return self.key_digest == hashlib.sha256(key.encode()).hexdigest()

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def as_dict(self) -> dict:
        try:
            body: Any = self.body.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            body, encoding = base64.b64encode(self.body).decode("ascii"), "base64"
        return {
            "method": self.method, "path": self.path, "query": [list(q) for q in self.query],
            "headers": [list(h) for h in self.headers], "body": body, "bodyEncoding": encoding,
            "operation": self.operation, "action": self.action, "credential": self.credential, "keyDigest": self.key_digest,
            "rawPath": self.raw_path,
        }


@dataclass(frozen=True)
class Violation:
    """An answer that does not match the document: always a simulator (data or code) bug."""

    operation: str | None
    method: str
    path: str
    status: int
    problems: tuple[str, ...]

    @property
    def action(self) -> str | None:
        return self.operation

    def as_dict(self) -> dict:
        return {"operation": self.operation, "method": self.method, "path": self.path, "status": self.status, "problems": list(self.problems)}


@dataclass(frozen=True)
class Shown:
    """What an answer's data shows: a stored item, then the behaviour's view and data."""

    item: Any = None
    view: Any = None
    data: Any = None

    @property
    def empty(self) -> bool:
        return self.item is None and self.view is None and self.data is None


class Answer(Exception):
    """Raised inside the pipeline to stop it with a finished response."""

    def __init__(self, response: Response):
        self.response = response


class InStream(Exception):
    """The operation fails inside its NDJSON stream: activity line, then {"error": message}."""

    def __init__(self, message: str):
        self.message = message


TERMINAL = ("success", "failed", "cancelled")  # an activity's final statuses
SYSTEM = "System"  # who background work (a webhook's action) runs as: Arcane's common.SystemUser


# ---------------------------------------------------------------- principals


@dataclass(frozen=True)
class Principal:
    """Who a request acts as, and what it may do (Arcane's PermissionSet)."""

    username: str
    credential: str  # api_key | bearer
    global_perms: frozenset[str]
    env_perms: dict  # environment -> frozenset
    sudo: bool = False

    def allows(self, perm: str, env: str | None, scopes: dict[str, str]) -> bool:
        if self.sudo or perm in self.global_perms:
            return True
        if scopes.get(perm) != "env" or env is None:
            return False
        return perm in self.env_perms.get(env, frozenset())

    def is_admin(self, catalog: dict[str, str]) -> bool:
        return self.sudo or set(catalog) <= self.global_perms

    def by_env(self) -> dict[str, list[str]]:
        """/auth/me's permissionsByEnv: "global" and one entry per environment."""
        out: dict[str, list[str]] = {}
        if self.sudo:
            return {"global": ["*"]}
        if self.global_perms:
            out["global"] = sorted(self.global_perms)
        for env, perms in sorted(self.env_perms.items()):
            out[env] = sorted(perms)
        return out


# ---------------------------------------------------------------- helpers


def content_disposition(filename: str, quoted: bool) -> str:
    """`attachment; filename="…"` (Go's %q) or `attachment; filename=…` (string concatenation)."""
    if not quoted:
        return "attachment; filename=" + filename
    return "attachment; filename=" + json.dumps(filename, ensure_ascii=True)


def pseudo_bytes(seed: str, size: int) -> bytes:
    out = b""
    i = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest()
        i += 1
    return out[:size]


def _text(value: Any) -> str:
    return FILTERS["str"](value, "")


def _any_true(condition: Any, ctx: dict) -> bool:
    """A `when`: a template, or a list of templates of which one must render true."""
    if isinstance(condition, list):
        return any(render(c, ctx) for c in condition)
    return bool(render(condition, ctx))


def _search_hit(value: Any, needle: str) -> bool:
    if isinstance(value, dict):
        return any(_search_hit(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(_search_hit(v, needle) for v in value)
    return value is not None and needle in _text(value).lower()


def _sort_key(value: Any) -> tuple:
    # Go's strings.Compare: byte order, case-sensitive
    if value is None:
        return (2, "")
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, _text(value))


def _drop_none(value: Any) -> Any:
    """Members that rendered to null are left out, as Go's omitempty does."""
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):  # the members of a list's objects too (the elements themselves stay)
        return [_drop_none(v) if isinstance(v, dict) else v for v in value]
    return value


@dataclass
class Exchange:
    """Everything the pipeline knows about one request."""

    request: Request
    op: Operation | None
    params: dict[str, str]
    query: dict[str, str]
    raw_body: bytes
    body: Any = None
    env: str | None = None
    principal: Principal | None = None
    remote: bool = False  # answered by a remote agent through the proxy
    internal: bool = False  # the simulator's own background call (a webhook's action): no record, no auth
    decision: Decision = field(default_factory=Decision)
    data_template: Any = None  # replaces the behaviour's `data` (a login that needs a second factor)


# ---------------------------------------------------------------- the app


class SimulatorApp:
    """Builds the Starlette app of one simulator; holds nothing that outlives it."""

    def __init__(self, sim):
        self.sim = sim
        self.doc: DocSchemas = sim.doc
        self.behaviour: Behaviour = sim.behaviour
        self.store: Store = sim.store
        self.faults: Faults = sim.faults
        self.router = Router(list(sim.operations.values()))
        self.error_pointer = self.doc.component_pointer("ErrorModel")
        self.log = log
        self.sockets = SocketRoutes(self)
        self.sealed: set[str] = set()  # activities whose terminal event was published
        self.cancels: dict[str, asyncio.Event] = {}  # running stream activities that can be cancelled
        self.starlette = Starlette(routes=[
            Route(CONTROL_PREFIX + "/requests", self.control_requests, methods=["GET", "DELETE"]),
            Route(CONTROL_PREFIX + "/faults", self.control_faults, methods=["GET", "PUT"]),
            Route(CONTROL_PREFIX + "/state", self.control_state, methods=["GET"]),
            Route(CONTROL_PREFIX + "/violations", self.control_violations, methods=["GET", "DELETE"]),
            Route(CONTROL_PREFIX + "/reset", self.control_reset, methods=["POST"]),
            Route(CONTROL_PREFIX + "/sessions", self.control_sessions, methods=["DELETE"]),
            Route(CONTROL_PREFIX + "/users", self.control_users, methods=["PUT"]),
            Route(CONTROL_PREFIX + "/api-keys", self.control_api_keys, methods=["GET", "POST"]),
            Route(CONTROL_PREFIX + "/clock", self.control_clock, methods=["GET", "POST"]),
            Route(CONTROL_PREFIX + "/openapi", self.control_openapi, methods=["GET", "PUT", "DELETE"]),
            Route(CONTROL_PREFIX + "/sockets", self.control_sockets, methods=["GET", "DELETE"]),
            Route(CONTROL_PREFIX + "/knobs", self.control_knobs, methods=["GET", "PUT"]),
            Route(CONTROL_PREFIX + "/logs", self.control_logs, methods=["POST"]),
            Route(CONTROL_PREFIX + "/uploads", self.control_uploads, methods=["GET"]),
            Route(API_PREFIX, self.handle_api, methods=ALL_METHODS),
            Route(API_PREFIX + "/{rest:path}", self.handle_api, methods=ALL_METHODS),
        ])

    def reset(self) -> None:
        """Forget what follows the state: the reset state issues the same activity IDs
        again, and a sealed ID would swallow the new activity's first events."""
        self.sealed.clear()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            await self.sockets(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.starlette(scope, receive, send)
            return
        # Kept so a `drop` fault can reach the server's transport and close it unanswered.
        scope["sim.raw_send"] = send

        async def dated_send(message):
            # Every answer carries the simulated clock's Date (uvicorn's own is turned off), so
            # a client can relate expiresAt and other timestamps to the server's "now".
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                if not any(k.lower() == b"date" for k, _ in headers):
                    headers.append((b"date", formatdate(self.store.now(), usegmt=True).encode("ascii")))
                message = dict(message, headers=headers)
            await send(message)

        await self.starlette(scope, receive, dated_send)

    # ------------------------------------------------------------ control API

    async def control_requests(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.sim.clear_requests()
            return Response(status_code=204)
        return JSONResponse([r.as_dict() for r in self.sim.requests()])

    async def control_faults(self, request: Request) -> Response:
        if request.method == "PUT":
            try:
                self.sim.set_faults(json.loads(await request.body() or b"{}"))
            except (FaultError, json.JSONDecodeError) as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(self.faults.as_dict())

    async def control_state(self, request: Request) -> Response:
        return JSONResponse(self.store.snapshot())

    async def control_violations(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.sim.clear_violations()
            return Response(status_code=204)
        return JSONResponse([v.as_dict() for v in self.sim.violations])

    async def control_reset(self, request: Request) -> Response:
        self.sim.reset()
        return Response(status_code=204)

    async def control_sessions(self, request: Request) -> Response:
        refresh = request.query_params.get("refresh", "").lower() in ("1", "true", "yes")
        return JSONResponse({"expired": self.store.expire_sessions(refresh=refresh)})

    async def control_users(self, request: Request) -> Response:
        try:
            users = json.loads(await request.body() or b"[]")
            if not isinstance(users, list):
                raise ValueError("the body is a list of {username, password, mfa?, roles?}")
            self.sim.set_users(users)
        except (ValueError, json.JSONDecodeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(status_code=204)

    async def control_api_keys(self, request: Request) -> Response:
        if request.method == "POST":
            try:
                spec = json.loads(await request.body() or b"{}")
                self.sim.add_api_key(**spec) if isinstance(spec, dict) else None
                if not isinstance(spec, dict):
                    raise ValueError("the body is {key, permissions?, environment?, expires_at?, kind?, owner?}")
            except (ValueError, TypeError, json.JSONDecodeError) as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            return Response(status_code=204)
        with self.store.lock:
            return JSONResponse([k.as_dict() for k in self.store.api_keys.values()])

    async def control_clock(self, request: Request) -> Response:
        if request.method == "POST":
            try:
                seconds = float(json.loads(await request.body() or b"{}").get("advance", 0))
            except (ValueError, AttributeError, json.JSONDecodeError) as exc:
                return JSONResponse({"error": f"the body is {{\"advance\": seconds}}: {exc}"}, status_code=400)
            self.store.advance_clock(seconds)
        return JSONResponse({"now": self.store.now()})

    async def control_sockets(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.sim.clear_sockets()
            return Response(status_code=204)
        return JSONResponse([r.as_dict() for r in self.sim.sockets()])

    async def control_knobs(self, request: Request) -> Response:
        if request.method == "PUT":
            try:
                self.sim.set_knobs(json.loads(await request.body() or b"{}"))
            except (KnobError, json.JSONDecodeError) as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(self.sim.knobs.current.as_dict())

    async def control_logs(self, request: Request) -> Response:
        """Append a line to a container's log: {container, text, stream?, environment?}."""
        try:
            spec = json.loads(await request.body() or b"{}")
            self.sim.append_log(spec["container"], spec["text"], spec.get("stream", "stdout"), spec.get("environment", "0"))
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
            return JSONResponse({"error": f"the body is {{container, text, stream?, environment?}}: {exc}"}, status_code=400)
        return Response(status_code=204)

    async def control_uploads(self, request: Request) -> Response:
        return JSONResponse(self.sim.uploads())

    async def control_openapi(self, request: Request) -> Response:
        if request.method == "PUT":
            try:
                document = json.loads(await request.body())
                if not isinstance(document, dict) or "openapi" not in document:
                    raise ValueError("the body is an OpenAPI document")
            except (ValueError, json.JSONDecodeError) as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            self.sim.serve_document(document)
        elif request.method == "DELETE":
            self.sim.serve_document(None)
        return JSONResponse({"version": (self.sim.served_document.get("info") or {}).get("version")})

    # ------------------------------------------------------------ answers

    def violation(self, ex: Exchange | None, status: int, problems: list[str], request: Request | None = None) -> None:
        req = ex.request if ex else request
        v = Violation(ex.op.operation_id if ex and ex.op else None, req.method if req else "", req.url.path if req else "", status, tuple(problems))
        log.error("simulator answer does not match the document: %s %s -> %s: %s", v.method, v.path, status, "; ".join(problems))
        self.sim.add_violation(v)

    def schema_link(self, request: Request, ptr: str | None) -> str | None:
        """Huma's `$schema` link for a top-level object whose schema declares one."""
        if not self.behaviour.schema_links or ptr is None:
            return None
        raw = self.doc.resolve(ptr)
        name = raw.get("$ref", "").rsplit("/", 1)[-1] if isinstance(raw, dict) and raw.get("$ref") else None
        if ptr.startswith("/components/schemas/"):
            name = ptr.rsplit("/", 1)[-1]
        if not name or "$schema" not in (self.doc.components.get(name, {}).get("properties") or {}):
            return None
        return f"{request.url.scheme}://{request.url.netloc}{API_PREFIX}/schemas/{name}.json"

    def json_answer(self, ex: Exchange, status: int, body: Any, ptr: str | None, media_type: str = "application/json") -> Response:
        link = self.schema_link(ex.request, ptr)
        if link and isinstance(body, dict):
            body = {"$schema": link, **body}
        if ptr is not None:
            problems = self.doc.errors(body, ptr)
            if problems:
                self.violation(ex, status, problems)
        if status < 400 and ex.decision.answer is not None:
            # the `answer` fault: changed after the check, so a contract it breaks on purpose is no violation
            body = ex.decision.change_answer(body, "data")
        return Response(json.dumps(body, ensure_ascii=False).encode("utf-8"), status_code=status, media_type=media_type)

    def problem(self, ex: Exchange, status: int, detail: str, errors: list[dict] | None = None) -> Response:
        body: dict[str, Any] = {"title": http.HTTPStatus(status).phrase, "status": status, "detail": detail}
        if errors:
            body["errors"] = errors
        return self.json_answer(ex, status, body, self.error_pointer, media_type="application/problem+json")

    @staticmethod
    def plain_json(status: int, body: Any, headers: dict | None = None) -> Response:
        """Arcane's non-Huma JSON answers (catch-all, environment proxy, Echo auth, rate
        limiter): there is no schema to check them against."""
        return Response(json.dumps(body, ensure_ascii=False).encode("utf-8"), status_code=status, media_type="application/json", headers=headers)

    def plain_answer(self, spec: dict, ctx: dict, headers: dict | None = None) -> Response:
        return self.plain_json(int(spec["status"]), render(spec["body"], ctx), headers)

    # ------------------------------------------------------------ pipeline

    def names(self, op: Operation | None) -> tuple[str, ...]:
        if op is None:
            return ()
        label = self.sim.labels.get(op.operation_id)
        return (op.operation_id, label) if label else (op.operation_id,)

    async def handle_api(self, request: Request, internal: Principal | None = None) -> Response:
        """One request through Arcane's stack. `internal` is the simulator's own call (a
        webhook's action in the background): not recorded, no faults, no auth, acting as
        that principal."""
        raw_path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1").split("?", 1)[0]
        rel = raw_path[len(API_PREFIX):] or "/"
        raw_body = await request.body()
        match = self.router.match(request.method, split_raw_path(rel))
        op, params = match if match else (None, {})
        names = self.names(op)
        if internal is None:
            self.sim.record(request, raw_body, op.operation_id if op else None, names[-1] if names else None, self.credential(request))
        self.store.advance()
        ex = Exchange(request, op, params, dict(request.query_params), raw_body, principal=internal, internal=internal is not None)
        streaming = op is not None and self.response_kind(op) in STREAM_KINDS
        if internal is None:
            ex.decision = self.faults.decide(names, rel, request.url.path, streaming=streaming)
        try:
            if ex.decision.latency:
                await asyncio.sleep(ex.decision.latency)
            if ex.decision.drop and not (streaming and ex.decision.drop_after):
                return await self.drop(request)  # a stream with `after: N` is cut after its Nth line instead
            if ex.decision.error_status:
                return self.problem(ex, ex.decision.error_status, ex.decision.error_detail or "simulated server error (error_5xx fault)")
            if internal is None:
                self.rate_limit(request)
            if request.method == "GET" and request.url.path == self.behaviour.openapi.get("path"):
                return self.plain_json(200, self.sim.served_document)
            if op is None:
                answer = await extra_route(self, request)
                if answer is not None:
                    return answer
                return self.echo_route(request) or self.catch_all(request)
            if ex.decision.malformed:
                return Response(b'{"success": true, "data": [{"id": ', status_code=200, media_type="application/json")
            self.environment(ex)
            if not ex.remote and not ex.internal:
                self.authenticate(ex)
                self.authorize(ex)
            self.check_parameters(ex)
            await self.parse_body(ex)
            refusal = self.not_simulated(ex)
            if refusal is not None:
                return refusal
            try:
                self.daemon(ex)
            except InStream as failure:
                return self.stream_failure(ex, failure.message)
            return await self.respond(ex)
        except Answer as a:
            return a.response
        except TemplateError as exc:
            # a behaviour-data bug: make it loud, answer like a server bug would
            self.violation(ex, 500, [f"behaviour template error: {exc}"])
            return self.problem(ex, 500, f"simulator behaviour error: {exc}")
        except ConnectionAbortedError:
            raise  # the drop fault's fallback: let the server close the connection
        except Exception as exc:  # a simulator bug: count it so the test that met it fails
            log.exception("simulator error on %s %s", request.method, request.url.path)
            self.violation(ex, 500, [f"simulator error: {type(exc).__name__}: {exc}"])
            return self.problem(ex, 500, f"simulator error: {type(exc).__name__}")

    def not_simulated(self, ex: Exchange) -> Response | None:
        """A write the data does not model answers 501, never a fake success: an operation
        marked `not_simulated` (with its reason), or one with no behaviour entry at all whose
        method changes something. It comes after authentication and permissions (Arcane
        refuses those first) and before the daemon check."""
        b = self.behaviour.operations.get(ex.op.operation_id)
        if b is not None and b.get("not_simulated"):
            reason = f": {b.get('not_simulated')}"
        elif b is None and ex.op.method.upper() not in ("GET", "HEAD"):
            reason = ""
        else:
            return None
        return self.problem(ex, 501, f"{ex.op.operation_id} is not simulated{reason}")

    async def drop(self, request: Request) -> Response:
        """Close the connection without answering (uvicorn's h11 cycle exposes its transport)."""
        raw_send = request.scope.get("sim.raw_send")
        cycle = getattr(raw_send, "__self__", None)
        transport = getattr(cycle, "transport", None)
        if transport is not None:
            transport.abort()
            for _ in range(50):  # let connection_lost run so the server drops our reply
                if getattr(cycle, "disconnected", True):
                    break
                await asyncio.sleep(0)
            return Response(status_code=204)
        raise ConnectionAbortedError("drop fault: the server gives no transport to close")

    def rate_limit(self, request: Request) -> None:
        """Arcane's per-IP token buckets on the login paths (one bucket per path and IP)."""
        if not self.sim.rate_limits_enabled:
            return
        path = request.url.path
        ip = request.client.host if request.client else "unknown"
        for rule in self.behaviour.rate_limits:
            pattern = next((g for g in rule["paths"] if fnmatchcase(path, g)), None)
            if pattern is None:
                continue
            # one bucket per route pattern and client IP (Echo's c.Path()), or per token
            key = path.rsplit("/", 1)[-1] if rule.get("key") == "last_segment" else ip
            if not self.store.take_token(pattern, key, int(rule["per_minute"]), int(rule["burst"])):
                raise Answer(self.plain_json(int(rule["status"]), rule["body"], dict(rule.get("headers") or {})))

    def catch_all(self, request: Request) -> Response:
        spec = self.behaviour.catch_all
        return self.plain_answer(spec, {"path": request.url.path, "method": request.method})

    def echo_principal(self, conn) -> Principal | tuple[int, Any]:
        """Arcane's Echo auth middleware (managerAuth): the X-API-Key when sent (an invalid
        one is refused even with a valid Bearer), else the Bearer token or the cookie.
        The principal, or (status, body) of its {message, code, statusCode} refusal."""
        msgs = self.behaviour.echo["auth"]
        key = conn.headers.get("x-api-key")
        token = self.bearer(conn)
        if key:
            principal = self.key_principal(key)
            spec = None if principal is not None else msgs["invalid_api_key"]
        elif token:
            principal = self.session_principal(token)
            spec = None if principal is not None else msgs["revoked" if self.store.is_revoked(token) else "invalid_token"]
        else:
            principal, spec = None, msgs["missing"]
        if spec is not None:
            return int(spec["status"]), render(spec["body"], {})
        return principal

    def echo_route(self, request: Request) -> Response | None:
        """Arcane's Echo routes outside the document that only authenticate here (a plain
        request to a WebSocket route): Echo's auth, then the route's own answer."""
        path = request.url.path
        for route in self.behaviour.echo.get("routes") or ():
            if not any(fnmatchcase(path, g) for g in route["paths"]):
                continue
            msgs = self.behaviour.echo["auth"]
            principal = self.echo_principal(request)
            if not isinstance(principal, Principal):
                return self.plain_json(*principal)
            if route["admin"] and not principal.is_admin(self.behaviour.permissions.catalog):
                return self.plain_answer(msgs["admin_required"], {})
            then = route["then"]
            return Response(then["text"], status_code=int(then["status"]), media_type=then.get("media_type", "text/plain; charset=utf-8"))
        return None

    # ------------------------------------------------------------ credentials

    def credential(self, request: Request) -> str | None:
        key = request.headers.get("x-api-key")
        if key:
            return "api_key" if self.key_principal(key) else "invalid_api_key"
        token = self.bearer(request)
        if token:
            return "bearer" if self.store.session(token) else "invalid_bearer"
        return None

    @staticmethod
    def bearer(request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and len(auth) > 7:
            return auth[7:]
        # cookie_util.go:41 GetTokenCookie: the secure __Host-token first, then the plain one
        return request.cookies.get("__Host-token") or request.cookies.get("token")

    def user_perms(self, username: str) -> tuple[frozenset[str], dict]:
        """The user's roles as Arcane resolves them: global grants and per-environment ones."""
        perms = self.behaviour.permissions
        user = self.store.user(username) or {}
        roles = user.get("roles")
        if roles is None:
            roles = [{"role": "role_admin"}]  # a login user without roles is the admin
        glob: set[str] = set()
        per_env: dict[str, set[str]] = {}
        for r in roles:
            granted = perms.roles.get(r.get("role")) or self.custom_role(r.get("role"))
            if r.get("environmentId"):
                per_env.setdefault(r["environmentId"], set()).update(granted)
            else:
                glob |= granted
        return frozenset(glob), {e: frozenset(p) for e, p in per_env.items()}

    def custom_role(self, role_id: Any) -> frozenset[str]:
        """A role beyond the built-in ones: the permissions of the custom-roles collection's
        item of that ID (none when the data declares no such collection or the role is gone)."""
        custom = self.behaviour.permissions.custom_roles
        coll = self.behaviour.collections.get(custom.get("collection", ""))
        if coll is None or role_id is None:
            return frozenset()
        item = self.store.find(coll, None, str(role_id))
        granted = get_path(item, parse_path(custom["permissions"])) if item else None
        return frozenset(str(p) for p in granted) if isinstance(granted, list) else frozenset()

    def key_principal(self, key: str) -> Principal | None:
        k = self.store.api_key(key)
        if k is None or (k.expires_at is not None and k.expires_at <= self.store.now()):
            return None  # an expired key is refused like an unknown one (ErrApiKeyExpired)
        if k.kind == "personal":
            glob, per_env = self.user_perms(k.owner)
            return Principal(k.owner, "api_key", glob, per_env)
        glob: set[str] = set()
        per_env: dict[str, set[str]] = {}
        for perm, env in k.permissions:
            env = env or k.environment
            if env:
                per_env.setdefault(env, set()).add(perm)
            else:
                glob.add(perm)
        return Principal(k.owner, "api_key", frozenset(glob), {e: frozenset(p) for e, p in per_env.items()})

    def session_principal(self, token: str) -> Principal | None:
        session = self.store.session(token)
        if session is None:
            return None
        glob, per_env = self.user_perms(session.username)
        return Principal(session.username, "bearer", glob, per_env)

    def authenticate(self, ex: Exchange) -> None:
        """Huma's security middleware: the key when the operation takes one and it is sent,
        else a Bearer session; a public operation still learns who a valid token is."""
        msgs = self.behaviour.auth
        security = ex.op.security
        token = self.bearer(ex.request)
        key = ex.request.headers.get("x-api-key")
        if security == "public":
            ex.principal = self.session_principal(token) if token else None
            return
        if security in ("either", "apikey") and key:
            ex.principal = self.key_principal(key)
            if ex.principal is None:
                raise Answer(self.problem(ex, 401, msgs["invalid_api_key"]))
            return
        if security in ("either", "bearer") and token:
            ex.principal = self.session_principal(token)
            if ex.principal is not None:
                return
            if self.store.is_revoked(token):
                raise Answer(self.problem(ex, 401, msgs["invalid_session"]))
        raise Answer(self.problem(ex, 401, msgs["missing"]))

    def required_permission(self, ex: Exchange) -> tuple[str | None, bool, str | None]:
        """(permission, global admin required, a refusal text for an unknown upload kind)."""
        perms = self.behaviour.permissions
        entry = perms.operations.get(ex.op.operation_id) or {}
        perm = entry.get("permission")
        if entry.get("from_param"):
            kind = ex.params.get(entry["from_param"], "")
            perm = perms.upload_kinds.get(kind)
            if perm is None:
                return None, bool(entry.get("admin")), f"permission denied: unknown upload kind {kind}"
        return perm, bool(entry.get("admin")), None

    def authorize(self, ex: Exchange) -> None:
        """The operation's middlewares: RequireGlobalAdmin, then RequirePermission (403)."""
        if ex.principal is None:
            return  # public
        perms = self.behaviour.permissions
        perm, admin, refusal = self.required_permission(ex)
        ctx = {"permission": perm}
        if admin and not ex.principal.is_admin(perms.catalog):
            raise Answer(self.problem(ex, int(perms.admin_required["status"]), _text(render(perms.admin_required["detail"], ctx))))
        if refusal:
            raise Answer(self.problem(ex, 403, refusal))
        if perm and not ex.principal.allows(perm, ex.env, perms.catalog):
            raise Answer(self.problem(ex, int(perms.denied["status"]), _text(render(perms.denied["detail"], ctx))))

    def fail_prefix(self, ex: Exchange) -> str:
        b = self.behaviour.operations.get(ex.op.operation_id)
        if b and b.get("fail"):
            return b.get("fail")
        summary = ex.op.summary
        return "Failed to " + summary[:1].lower() + summary[1:]

    # ------------------------------------------------------------ environments

    def environment(self, ex: Exchange) -> None:
        """Arcane's environment proxy for /environments/{id}/… of a remote environment."""
        if not ex.op.env_scoped:
            return
        cfg = self.behaviour.environments
        ex.env = ex.params.get(ex.op.env_param)
        if ex.env == str(cfg.get("local", "0")):
            return
        prefix = cfg["path_prefix"].rstrip("/")
        suffix = fill_path(ex.op.path[len(prefix):], ex.params)
        if any(fnmatchcase(suffix, g) for g in cfg.get("managed_locally") or []):
            return  # the manager answers these itself, with its own auth
        ctx = self.context(ex)
        # its own authentication first (any valid key or session), before it resolves the environment
        key = ex.request.headers.get("x-api-key")
        token = self.bearer(ex.request)
        # the simulator's own call holds every permission; any other needs an API key or a session
        principal = ex.principal if ex.internal else (self.key_principal(key) if key else (self.session_principal(token) if token else None))
        if principal is None:
            raise Answer(self.plain_answer(cfg["unauthenticated"], ctx))
        env_item = self.store.environment(ex.env)
        if env_item is None:
            raise Answer(self.plain_answer(cfg["unknown"], ctx))
        for rule in cfg.get("refuse") or []:
            if matches_where(env_item, rule["where"], ctx):
                raise Answer(self.plain_answer(rule, ctx))
        ex.principal = principal
        perm, admin, refusal = self.required_permission(ex)
        perms = self.behaviour.permissions
        if refusal or perm is None or not principal.allows(perm, ex.env, perms.catalog) or (admin and not principal.is_admin(perms.catalog)):
            # no mapping means no access, as the proxy's matcher fails closed
            raise Answer(self.plain_answer(cfg["forbidden"], ctx))
        if self.faults.is_agent_down(ex.env):
            api_url = str(env_item.get("apiUrl") or "")
            host = urllib.parse.urlsplit(api_url).netloc or api_url
            target = api_url.rstrip("/") + "/api/environments/" + str(cfg.get("local", "0")) + suffix
            if ex.request.url.query:
                target += "?" + ex.request.url.query
            raise Answer(self.plain_answer(cfg["unreachable"], dict(ctx, target=target, host=host)))
        ex.remote = True  # the agent answers with a sudo permission set

    def daemon(self, ex: Exchange) -> None:
        """The daemon_down fault: the environment's Docker daemon does not answer."""
        mode = self.faults.down_mode(ex.env)
        down = self.behaviour.daemon_down
        if mode is None or not any(fnmatchcase(ex.op.path, g) for g in down["applies_to"]):
            return
        b = self.behaviour.operations.get(ex.op.operation_id)
        own = (b.get("daemon_down") if b else None) or {}
        ctx = self.context(ex, fail=self.fail_prefix(ex), docker_error=down["docker_error"])
        detail = _text(render(own.get(mode) or down[mode], ctx))
        if own.get("stream") or (self.response_kind(ex.op) == "ndjson" and not own):
            raise InStreamAnswer(detail)
        statuses = down["status"]
        status = own.get("status") or statuses.get(b.kind if b and b.kind else "", statuses["default"])
        raise Answer(self.problem(ex, int(status), detail))

    # ------------------------------------------------------------ validation

    def check_parameters(self, ex: Exchange) -> None:
        """Huma's parameter handling: declared defaults, required parameters, integer and boolean syntax."""
        errors = []
        for p in self.doc.parameters(ex.op.path, ex.op.method):
            where, name = p.get("in"), p.get("name")
            schema = self.doc.deref(p.get("schema") or {})
            if where == "query":
                value = ex.query.get(name)
                if value is None and "default" in schema and not isinstance(schema["default"], (dict, list)):
                    default = schema["default"]
                    ex.query[name] = ("true" if default else "false") if isinstance(default, bool) else str(default)
                    continue
            elif where == "header":
                value = ex.request.headers.get(name)
            else:
                continue
            if value is None:
                if p.get("required"):
                    errors.append({"location": f"{where}.{name}", "message": f"required {where} parameter is missing"})
                continue
            t = schema.get("type")
            if t == "integer":
                try:
                    parsed = int(value)
                    if where == "query":
                        ex.query[name] = str(parsed)
                except ValueError:
                    errors.append({"location": f"{where}.{name}", "message": "invalid integer", "value": value})
            elif t == "boolean" and value.lower() not in ("true", "false", "1", "0", ""):
                errors.append({"location": f"{where}.{name}", "message": "invalid boolean", "value": value})
        if errors:
            raise Answer(self.problem(ex, 422, self.behaviour.validation.get("detail", "validation failed"), errors))

    async def parse_body(self, ex: Exchange) -> None:
        spec = self.doc.request_spec(ex.op.path, ex.op.method)
        detail = self.behaviour.validation.get("detail", "validation failed")
        ctype = ex.request.headers.get("content-type", "").split(";")[0].strip().lower()
        if not ex.raw_body:
            if spec.required:
                raise Answer(self.problem(ex, 422, detail, [{"location": "body", "message": "request body is required"}]))
            ex.body = {}
            return
        if spec.media_type and "json" in spec.media_type or (spec.media_type is None and "json" in ctype):
            try:
                ex.body = json.loads(ex.raw_body)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise Answer(self.problem(ex, 400, f"unable to parse the request body as JSON: {exc}")) from exc
            if spec.schema_pointer:
                errs = []
                for err in self.doc.validator(spec.schema_pointer).iter_errors(ex.body):
                    loc = "body" + "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in err.absolute_path)
                    errs.append({"location": loc, "message": err.message[:300]})
                if errs:
                    raise Answer(self.problem(ex, 422, detail, errs[:20]))
        elif ctype.startswith("multipart/") or ctype == "application/x-www-form-urlencoded":
            ex.body = {}
            form = await ex.request.form()
            for name, value in form.multi_items():
                if hasattr(value, "read"):
                    data = await value.read()
                    ex.body[name] = {"filename": value.filename, "size": len(data), "contentType": value.content_type}
                else:
                    try:
                        parsed = json.loads(value)
                        ex.body[name] = parsed if isinstance(parsed, (dict, list)) else value
                    except (json.JSONDecodeError, TypeError):
                        ex.body[name] = value
        else:
            ex.body = {"size": len(ex.raw_body), "contentType": ctype}

    # ------------------------------------------------------------ behaviour

    def caller(self, ex: Exchange) -> dict:
        """The caller as templates see it: its user (the users collection's item, with
        Arcane's isGlobalAdmin and permissionsByEnv), username and credential."""
        p = ex.principal
        if p is None:
            return {}
        users = self.behaviour.collections.get("users")
        item = None
        if users is not None:
            item = next((u for u in self.store.items(users, None) if u.get("username") == p.username), None)
        glob, per_env = self.user_perms(p.username)
        owner = Principal(p.username, "bearer", glob, per_env)
        user = dict(strip_private(item) if item else {"id": f"user-{p.username}", "username": p.username})
        user["isGlobalAdmin"] = owner.is_admin(self.behaviour.permissions.catalog)
        user["permissionsByEnv"] = owner.by_env()
        return {"username": p.username, "credential": p.credential, "user": user}

    def context(self, ex: Exchange, **extra) -> dict:
        now = self.store.now()

        def state(name: str) -> list:
            coll = self.behaviour.collections.get(name)
            if coll is None:
                raise TemplateError(f"unknown collection {name!r} in a `from:`")
            if coll.scope == "environment" and ex.env is None:
                # a global operation reading a per-environment collection sees every environment's items
                return [i for e in self.store.environment_ids() for i in self.store.items(coll, e)]
            return list(self.store.items(coll, ex.env))

        def find(name: str, key: str) -> dict | None:
            coll = self.behaviour.collections.get(name)
            if coll is None:
                raise TemplateError(f"unknown collection {name!r} in a `$find`")
            try:
                return self.store.find(coll, ex.env, key)
            except Ambiguous:
                return None

        ctx = {
            "upload": {}, "activity": {}, "let": {}, "find": find,
            "env": ex.env, "env_item": self.store.environment(ex.env) if ex.env else None,
            "path": ex.params, "query": ex.query, "body": ex.body if ex.body is not None else {},
            # the request's headers, lower-cased (a pairing key Arcane reads from X-API-Key)
            "headers": {k.lower(): v for k, v in ex.request.headers.items()} if ex.request is not None else {},
            "operation": {"id": ex.op.operation_id, "summary": ex.op.summary} if ex.op else {}, "stamp": self.store.stamp,
            "caller": self.caller(ex), "now": now, "now_iso": FILTERS["iso"](now, ""), "new": self.store.fresh_ids,
            "key": None, "item": None, "was": None, "collection": [], "page": [], "session": {}, "reason": None, "credential": {},
            "data": self.behaviour.data, "state": state,
            # the version the served document declares: what this Arcane says it runs
            "document": {"version": str((self.sim.served_document.get("info") or {}).get("version") or "")},
        }
        ctx.update(extra)
        return ctx

    def lookup(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> dict:
        coll = self.behaviour.collections[b.collection]
        # a path parameter, or a template (the caller's own record: "{caller.user.id}")
        key = _text(render(b.key, ctx)) if b.key and "{" in b.key else ex.params.get(b.key, "")
        ctx["key"] = key
        try:
            item = self.store.find(coll, ex.env, key)
            reason = coll.not_found
        except Ambiguous:
            item, reason = None, coll.ambiguous
        if item is None:
            nf = b.get("not_found") or {}
            ctx["fail"] = self.fail_prefix(ex)
            ctx["reason"] = _text(render(reason, ctx))
            detail = _text(render(nf.get("detail", "{fail}: {reason}"), ctx))
            if nf.get("stream"):
                raise InStream(detail)
            raise Answer(self.problem(ex, int(nf.get("status", 404)), detail))
        return item

    def guard(self, b: OpBehaviour, ex: Exchange, items: list[dict], ctx: dict) -> None:
        """Refuse when one of `items` matches a guard's `where` (and its `unless` is not true).

        For update/delete `items` is the keyed item (a precondition); for create it is every
        existing item of the collection (a uniqueness check, like Docker's name conflict).
        """
        for g in b.get("guards") or []:
            for item in items:
                if (matches_where(item, g.get("where"), dict(ctx, it=item)) and ("when" not in g or _any_true(g["when"], dict(ctx, it=item)))
                        and not (g.get("unless") and render(g["unless"], ctx))):
                    ctx["fail"] = self.fail_prefix(ex)
                    raise Answer(self.problem(ex, int(g.get("status", 409)), _text(render(g["detail"], dict(ctx, it=item)))))

    def require(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> None:
        """`requires`: conditions the operation needs (a registry that has the image)."""
        for r in b.get("requires") or []:
            if not _any_true(r["when"], ctx):
                ctx["fail"] = self.fail_prefix(ex)
                detail = _text(render(r["detail"], ctx))
                if r.get("stream"):
                    raise InStream(detail)
                raise Answer(self.problem(ex, int(r.get("status", 400)), detail))

    def new_item(self, coll_name: str, template: Any, ctx: dict) -> dict:
        coll = self.behaviour.collections[coll_name]
        rendered = render(template or {}, ctx)
        private = rendered.pop("_sim", None) if isinstance(rendered, dict) else None
        item = self.doc.conform(rendered, {"$ref": "#" + self.doc.component_pointer(coll.schema)})
        if private is not None:
            item["_sim"] = _drop_none(private)
        return item

    @staticmethod
    def bind_let(b: OpBehaviour, ctx: dict) -> None:
        """`let`: named values rendered once, in order, before anything changes (a later one
        and every other template read them as `let.<name>`): what a prune is about to
        remove, a token shown once and stored, an item found by a body member."""
        for name, template in (b.get("let") or {}).items():
            ctx["let"][name] = render(template, ctx)

    @staticmethod
    def unset(item: dict, paths: list, ctx: dict) -> None:
        """`unset`: members taken out of an item (a path may name a member by a value)."""
        for raw in paths or []:
            path = parse_path(_text(render(raw, ctx)))
            parent = get_path(item, path[:-1]) if len(path) > 1 else item
            if isinstance(parent, dict):
                parent.pop(path[-1], None)

    def apply_effects(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> None:
        for eff in b.get("effects") or []:
            if "when" in eff and not render(eff["when"], ctx):
                continue
            name = next(eff[k] for k in ("create", "update", "delete") if k in eff)
            coll = self.behaviour.collections[name]
            if "create" in eff:
                # `each`: one item per element of a rendered list (`it`); `unless`: an
                # element (or the one item) is skipped when it renders true
                elements = render(eff["each"], ctx) if "each" in eff else [None]
                for element in elements if isinstance(elements, list) else []:
                    ectx = dict(ctx, it=element) if "each" in eff else ctx
                    if eff.get("unless") is not None and render(eff["unless"], ectx):
                        continue
                    self.store.insert(coll, ex.env, self.new_item(name, eff.get("item"), ectx), upsert=True)
            elif eff.get("unless") is not None and render(eff["unless"], ctx):
                continue
            elif "update" in eff:
                changes = eff.get("set") or {}

                def change(i: dict, changes=changes, eff=eff) -> None:
                    new = deep_merge(i, _drop_none(render(changes, dict(ctx, it=i))))
                    i.clear()
                    i.update(new)
                    self.unset(i, eff.get("unset"), dict(ctx, it=i))

                self.store.update_where(coll, ex.env, lambda i, eff=eff: matches_where(i, eff.get("where"), dict(ctx, it=i)), change)
            else:
                for victim in [i for i in self.store.items(coll, ex.env) if matches_where(i, eff.get("where"), ctx)]:
                    self.store.remove(coll, ex.env, victim)

    def execute(self, ex: Exchange, mutate: bool, activity: dict | None = None) -> tuple[dict, Shown, Any]:
        """Run the operation's behaviour: (template context, what data shows, envelope template)."""
        b = self.behaviour.operations.get(ex.op.operation_id)
        ctx = self.context(ex, activity=strip_private(activity) if activity else {})
        if b is None:
            return ctx, Shown(), None
        kind = b.kind
        view = None
        result = None
        if kind in ("list", "aggregate"):
            ctx["collection"] = [strip_private(i) for i in self.store.items(self.behaviour.collections[b.collection], ex.env)]
            self.bind_let(b, ctx)
            self.require(b, ex, ctx)
        elif kind in ("get", "update", "delete"):
            item = self.lookup(b, ex, ctx)
            ctx["item"] = item
            self.bind_let(b, ctx)
            self.guard(b, ex, [item], ctx)
            self.require(b, ex, ctx)
            ctx["was"] = copy.deepcopy(item)  # the item before the change (an update's old name)
            if kind == "update" and mutate:
                # not fitted to the schema on purpose: a `set` that breaks the item shows
                # up as a violation of the next answer that shows it
                with self.store.lock:
                    new = deep_merge(item, _drop_none(render(b.get("set") or {}, ctx)))
                    item.clear()
                    item.update(new)
                    self.unset(item, b.get("unset"), ctx)
            elif kind == "delete" and mutate:
                self.store.remove(self.behaviour.collections[b.collection], ex.env, item)
            view = item
        elif kind == "create":
            coll = self.behaviour.collections[b.collection]
            self.bind_let(b, ctx)
            self.guard(b, ex, [strip_private(i) for i in self.store.items(coll, ex.env)], ctx)
            self.require(b, ex, ctx)
            item = self.new_item(b.collection, b.get("item"), ctx)
            ctx["item"] = item
            if mutate and not self.store.insert(coll, ex.env, item, upsert=bool(b.get("upsert"))):
                conflict = b.get("conflict") or {"status": 409, "detail": "{item." + coll.key + "} already exists"}
                raise Answer(self.problem(ex, int(conflict.get("status", 409)), _text(render(conflict["detail"], ctx))))
            view = item
        elif kind == "session":
            self.session(b, ex, ctx)
        elif kind == "upload":
            try:
                result = UPLOAD_OPS[b.get("upload")["op"]](self, ex, ctx)
            except UploadRefused as refused:
                raise Answer(self.problem(ex, refused.status, refused.detail)) from None
        else:
            self.bind_let(b, ctx)
            self.require(b, ex, ctx)
        if b.get("cancel_activity") and mutate and ctx.get("item") is not None:
            self.cancel_activity(ex, ctx["item"], ctx)
        if mutate:
            self.apply_effects(b, ex, ctx)
            if b.get("credential"):
                self.credential_effect(b, ex, ctx)
            if b.get("account"):
                self.account_effect(b, ex, ctx)
        data = ex.data_template if ex.data_template is not None else b.get("data")
        rendered = _drop_none(render(data, ctx)) if data is not None else (result if kind == "upload" and b.get("upload")["op"] != "consume" else None)
        shown = Shown(strip_private(view) if view is not None else None,
                      _drop_none(render(b.get("view"), ctx)) if view is not None and b.get("view") else None,
                      rendered)
        return ctx, shown, b.get("envelope")

    def credential_effect(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> None:
        """`credential`: an API key created through the API is accepted from now on (its
        secret in ctx["credential"].key for the answer); a deleted one no longer is."""
        spec = b.get("credential")
        record = _text(render(spec.get("record", "{item.id}"), ctx))
        if spec["op"] == "revoke":
            self.store.revoke_record(record)
            return
        grants = []
        given = render(spec.get("permissions"), ctx) if spec.get("permissions") else None
        for g in given or []:
            if isinstance(g, dict) and g.get("permission"):
                grants.append((str(g["permission"]), g.get("environmentId")))
        if spec["op"] == "regrant":
            if isinstance(given, list):  # omitted: the grants stay as they are
                self.store.regrant_record(record, tuple(grants))
            return
        expires = render(spec.get("expires_at"), ctx) if spec.get("expires_at") else None
        expires_at = None
        if isinstance(expires, str) and expires:
            from datetime import datetime

            expires_at = int(datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp())
        key = "arc_" + self.store.fresh_ids()["hex64"][:40]
        kind = _text(render(spec.get("kind", "scoped"), ctx))
        owner = ex.principal.username if ex.principal else self.sim.api_key_user
        self.store.add_api_key(ApiKey(key, record, owner, kind, tuple(grants), None, expires_at, record))
        ctx["credential"] = {"key": key, "prefix": key[:KEY_PREFIX_LEN]}
        if isinstance(ctx.get("item"), dict):
            ctx["item"]["keyPrefix"] = key[:KEY_PREFIX_LEN]

    def account_effect(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> None:
        """`account`: who may log in changes with Arcane's user records (a user created
        through the API logs in with its password, a role change changes what it may do)."""
        spec = b.get("account")
        op = spec["op"]
        username = _text(render(spec["username"], ctx))
        password = render(spec.get("password"), ctx) if spec.get("password") else None
        if op == "create":
            roles = self.account_roles(spec, ctx) if "roles" in spec else []
            self.store.add_user({"username": username, "password": _text(password), "roles": roles})
        elif op == "update":
            new_name = render(spec.get("new_username"), ctx) if spec.get("new_username") else None
            self.store.change_user(username, new_username=_text(new_name) if new_name else None,
                                   password=_text(password) if password else None)
        elif op == "delete":
            self.store.remove_user(username)
        elif op == "password":
            given = _text(render(spec.get("verify"), ctx)) if spec.get("verify") else None
            user = self.store.user(username)
            if user is not None and given is not None and user.get("password") != given:
                reject = spec.get("reject") or {"status": 401, "detail": "invalid credentials"}
                raise Answer(self.problem(ex, int(reject.get("status", 401)), _text(render(reject["detail"], ctx))))
            self.store.change_user(username, password=_text(password))
            self.store.end_sessions(username, keep=self.bearer(ex.request))
        elif op == "roles":
            self.store.change_user(username, roles=self.account_roles(spec, ctx))
        else:  # logout_others
            self.store.end_sessions(username, keep=self.bearer(ex.request))

    def account_roles(self, spec: dict, ctx: dict) -> list[dict]:
        member = spec.get("role_member", "role")
        given = render(spec.get("roles"), ctx)
        out = []
        for a in given if isinstance(given, list) else []:
            if isinstance(a, dict) and a.get(member):
                r = {"role": str(a[member])}
                if a.get("environmentId"):
                    r["environmentId"] = str(a["environmentId"])
                out.append(r)
        return out

    def session(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> None:
        """Log in, refresh or log out; a new session is put in ctx["session"] for the data template."""
        spec = b.get("session")
        op = spec["op"]
        reject = spec.get("reject") or {"status": 401, "detail": "invalid credentials"}
        if op == "login":
            s = self.store.login(_text(render(spec["username"], ctx)), _text(render(spec["password"], ctx)))
        elif op == "refresh":
            s = self.store.refresh(_text(render(spec["refresh_token"], ctx)))
        else:
            self.store.logout(self.bearer(ex.request))
            return
        if s is None:
            raise Answer(self.problem(ex, int(reject["status"]), _text(render(reject["detail"], ctx))))
        glob, per_env = self.user_perms(s.username)
        ex.principal = Principal(s.username, "bearer", glob, per_env)
        ctx["caller"] = self.caller(ex)
        if isinstance(s, MfaChallenge):
            # the password was right, a second factor is pending: no tokens, the `mfa` answer
            ctx["session"] = {"username": s.username, "mfa": {"method": s.method, "transactionId": s.transaction_id,
                                                              "challenge": s.challenge, "expiresAt": s.expires_at}}
            ex.data_template = spec.get("mfa") or {"success": True, "status": "mfa_required"}
            return
        ctx["session"] = {"username": s.username, "token": s.token, "refreshToken": s.refresh_token, "expiresAt": s.expires_at}

    # ------------------------------------------------------------ answers by kind

    def response_kind(self, op: Operation) -> str:
        b = self.behaviour.operations.get(op.operation_id)
        return ((b.get("response") if b else None) or {}).get("kind") or op.declared_kind

    async def respond(self, ex: Exchange) -> Response:
        kind = self.response_kind(ex.op)
        spec = self.doc.response_spec(ex.op.path, ex.op.method)
        if kind == "live":
            return self.live_answer(ex)
        if kind == "ndjson":
            return self.stream_answer(ex)
        b = self.behaviour.operations.get(ex.op.operation_id)
        record = None
        if b is not None and b.get("activity"):
            # RunHandlerActivity around a quick action: running, then success or failed
            record = self.start_activity(b, ex, self.context(ex), None)
        try:
            ctx, data, envelope = self.execute(ex, mutate=True, activity=record)
        except Answer as refused:
            if record is not None:
                detail = _text(json.loads(refused.response.body or b"{}").get("detail"))
                fail = self.fail_prefix(ex) + ": "
                reason = detail[len(fail):] if detail.startswith(fail) else detail
                self.complete_activity(record, "failed", reason, reason)
            raise
        if record is not None:
            self.complete_activity(record, "success", b.get("activity").get("complete"), None)
        if ex.request is not None and ex.request.method not in ("GET", "HEAD"):
            self.store.notify("state", ex.env)
        if kind == "json":
            return self.json_kind(ex, spec, ctx, data, envelope)
        if kind in ("download", "raw", "binary"):
            return self.download_answer(ex, spec.status, ctx, kind)
        return Response(status_code=spec.status)  # "empty" (and HEAD): status only

    def json_kind(self, ex: Exchange, spec, ctx: dict, data: Shown, envelope: Any) -> Response:
        ptr = spec.schema_pointer
        schema = self.doc.deref(self.doc.resolve(ptr))
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        body = self.doc.synthesize(schema)
        defaults = {k: v for k, v in self.behaviour.envelope.items() if k in props}
        if isinstance(body, dict):
            body = deep_merge(body, defaults)
        is_envelope = "success" in props and "data" in props
        if "pagination" in props and is_envelope:
            body = deep_merge(body, self.page(ex, ctx))
        elif not data.empty:
            # the stored item is fitted into the answer's schema (a summary shown as details
            # drops what does not fit); the behaviour's view and data are laid on unfitted,
            # so a mistake in them is a violation, not silently dropped
            dschema = data_schema(self.doc, ptr)
            value = body.get("data") if is_envelope else body
            if data.item is not None:
                fitted = self.doc.conform(data.item, dschema)
                value = deep_merge(value, fitted) if isinstance(value, dict) and isinstance(fitted, dict) else fitted
            for overlay in (data.view, data.data):
                if overlay is not None:
                    value = deep_merge(value, overlay) if isinstance(value, dict) and isinstance(overlay, dict) else overlay
            if is_envelope:
                body["data"] = value
            else:
                body = value
        if envelope and isinstance(body, dict):
            extra = _drop_none(render(envelope, ctx))
            body = deep_merge(body, extra)
        return self.json_answer(ex, spec.status, self.doc.fill(body, schema), ptr)

    def visible(self, ex: Exchange, b: OpBehaviour, items: list[dict]) -> list[dict]:
        """`visible`: a caller without the named permission sees only the environments it
        holds a permission on (ListEnvironments)."""
        rule = b.get("visible")
        p = ex.principal
        if not rule or p is None or p.sudo or rule["unless_permission"] in p.global_perms:
            return items
        allowed = {e for e, perms in p.env_perms.items() if perms}
        key = self.behaviour.collections[b.collection].key
        return [i for i in items if str(i.get(key)) in allowed]

    def page(self, ex: Exchange, ctx: dict) -> dict:
        """Arcane's list semantics: filters, search, sort/order, then the page cut of the
        collection's paging kind (Docker-backed in memory, or DB-backed)."""
        b = self.behaviour.operations.get(ex.op.operation_id)
        coll = self.behaviour.collections.get(b.collection) if b and b.kind == "list" else None
        items = []
        if b is not None and coll is not None:
            # `where` reads the stored items, `_sim` included (a task's stack, a file's folder)
            items = [strip_private(i) for i in self.store.items(coll, ex.env) if matches_where(i, b.get("where"), ctx)]
            items = self.visible(ex, b, items)
        available = len(items)
        if b is not None:
            for param, spec in (b.get("filters") or {}).items():
                want = ex.query.get(param)
                if isinstance(spec, dict) and "flag" in spec:
                    # a flag filter applies without its parameter too (archived projects are
                    # left out unless asked for)
                    if (want or "") != spec["all"]:
                        only = (want or "") == spec["only"]
                        items = [i for i in items if (get_path(i, parse_path(spec["flag"])) is True) == only]
                    continue
                if want in (None, ""):
                    continue
                if isinstance(spec, dict):
                    path = parse_path(spec["absent"])
                    keep = FILTERS["bool"](want, "")
                    items = [i for i in items if (get_path(i, path) in (None, "")) == keep]
                else:
                    items = [i for i in items if matches_where(i, {spec: want}, ctx)]
        needle = (ex.query.get("search") or "").strip().lower()
        if needle and coll is not None:
            fields = [parse_path(f) for f in (b.get("search") or coll.search)]
            items = [i for i in items if any(_search_hit(get_path(i, f), needle) for f in fields)]
        paging = coll.paging if coll else "db"
        sort = (ex.query.get("sort") or "").strip()
        desc = (ex.query.get("order") or "").strip().lower() == "desc"
        if coll is not None and not sort and coll.default_order == "desc":
            desc = True  # Arcane's own default (e.g. created_at DESC) whatever `order` says
        if coll is not None:
            if paging == "docker":
                # no or an unknown sort: the first binding; a tie falls back to it ascending
                first = next(iter(coll.sort.values()), coll.key)
                path = parse_path(coll.sort.get(sort, first))
                items.sort(key=lambda i: _sort_key(get_path(i, parse_path(first))))
                items.sort(key=lambda i: _sort_key(get_path(i, path)), reverse=desc)
            else:
                # a sortable column, else the primary key (the id tie-break)
                items.sort(key=lambda i: _sort_key(get_path(i, parse_path(coll.key))))
                if sort in coll.sort:
                    items.sort(key=lambda i: _sort_key(get_path(i, parse_path(coll.sort[sort]))), reverse=desc)
                elif desc:
                    items.reverse()
        cfg = self.behaviour.pagination
        start = max(int(ex.query.get("start") or 0), 0)
        limit = int(ex.query.get("limit") or cfg["default_limit"])
        if limit < -1:
            limit = int(cfg["default_limit"])  # handlerutil.PaginationParams
        groups_spec = b.get("group_pages") if b else None
        if groups_spec and (ex.query.get(groups_spec["param"]) or "") == groups_spec["value"]:
            return self.group_page(groups_spec, items, start, limit, available, ctx)
        total = len(items)
        if paging == "docker":
            if limit <= 0:
                page_items, per_page, pages, current = items, total, 1, 1
            else:
                page_items = items[start : start + limit]
                per_page, pages, current = limit, max((total + limit - 1) // limit, 1), start // limit + 1
        else:
            if limit == -1:
                page_items, per_page, pages, current = items, total, 1, 1
            else:
                limit = int(cfg["default_limit"]) if limit <= 0 else min(limit, int(cfg["db"]["max_limit"]))
                page_items = items[start : start + limit]
                per_page, pages, current = limit, max((total + limit - 1) // limit, 1), start // limit + 1
        pagination = {"totalPages": pages, "totalItems": total, "currentPage": current, "itemsPerPage": per_page}
        if paging == "docker" and available:
            pagination["grandTotalItems"] = available  # omitempty: left out when 0
        ctx["page"] = page_items
        ctx["filtered"] = items
        if b is not None and b.get("fit"):
            item_schema = ((self.doc.deref(self.doc.resolve(self.doc.response_spec(ex.op.path, ex.op.method).schema_pointer))
                            .get("properties", {}).get("data") or {}).get("items") or {})
            page_items = [self.doc.conform(i, item_schema) for i in page_items]
        return {"data": page_items, "pagination": pagination}

    def group_page(self, spec: dict, items: list[dict], start: int, limit: int, available: int, ctx: dict) -> dict:
        """groupBy: whole groups per page; the group that reaches the limit closes its page."""
        by = parse_path(spec["by"])
        groups: dict[str, list] = {}
        for i in items:
            value = get_path(i, by)
            groups.setdefault(_text(value) if value not in (None, "") else spec.get("default", ""), []).append(i)
        named = [{"groupName": k, "items": v} for k, v in groups.items()]
        total = len(items)
        if limit <= 0:
            chosen, pages, current, per_page = named, 1, 1, total
        else:
            page_ranges, begin, count = [], 0, 0
            for idx, g in enumerate(named):
                count += len(g["items"])
                if count >= limit:
                    page_ranges.append((begin, idx + 1))
                    begin, count = idx + 1, 0
            if begin < len(named) or not page_ranges:
                page_ranges.append((begin, len(named)))
            requested = max(start // limit + 1, 1)
            current = min(requested, len(page_ranges))
            lo, hi = page_ranges[current - 1]
            chosen, pages, per_page = named[lo:hi], len(page_ranges), limit
        flat = [i for g in chosen for i in g["items"]]
        pagination = {"totalPages": pages, "totalItems": total, "currentPage": current, "itemsPerPage": per_page}
        if available:
            pagination["grandTotalItems"] = available
        ctx["page"] = flat
        return {"data": flat, "groups": chosen, "pagination": pagination}

    def download_answer(self, ex: Exchange, status: int, ctx: dict, kind: str) -> Response:
        b = self.behaviour.operations.get(ex.op.operation_id)
        spec = dict(self.behaviour.downloads["binary"])
        spec.update((b.get("response") if b else None) or {})
        media = spec.get("media_type", "application/octet-stream")
        blob = None
        if spec.get("blob"):
            with self.store.lock:
                blob = self.store.blobs.get((str(ex.env), _text(render(spec["blob"], ctx))))
        if blob is not None:
            payload = blob  # bytes an upload put there, served byte for byte
        elif "content" in spec:
            content = render(spec["content"], ctx)
            payload = ("".join(map(_text, content)) if isinstance(content, list) else _text(content)).encode("utf-8")
        else:
            payload = pseudo_bytes(f"{ex.op.operation_id}:{ex.request.url.path}", int(spec.get("size", 64)))
        headers = {}
        if kind != "raw":
            filename = _text(render(spec.get("filename", "{operation.id}.bin"), ctx))
            headers["Content-Disposition"] = content_disposition(filename, bool(spec.get("quoted", True)))
        return Response(payload, status_code=status, media_type=media, headers=headers)

    # ------------------------------------------------------------ operation streams and activities

    def stream_headers(self) -> dict:
        """httpx.SetJSONStreamHeaders: what every JSON-lines answer carries besides its type."""
        return dict(self.behaviour.live["headers"]["values"])

    def stream_media(self, framing: str) -> str:
        """The Content-Type of a stream in a framing (the `stream_framing`/`live_framing` knobs)."""
        return self.behaviour.streams["sse"]["media_type"] if framing == "sse" else "application/x-json-stream"

    def stream_frame(self, frame: Any, framing: str, kind: str | None = None) -> bytes:
        """One frame as the framing writes it: a JSON line, or one server-sent event (its
        name from the behaviour data's `streams.sse.events` by the frame's kind)."""
        text = json.dumps(frame, ensure_ascii=False, separators=(",", ":") if framing == "sse" else (", ", ": "))
        if framing != "sse":
            return (text + "\n").encode("utf-8")
        name = (self.behaviour.streams["sse"].get("events") or {}).get(kind) if kind else None
        return ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode("utf-8")

    def stream_answer(self, ex: Exchange) -> Response:
        """An operation stream: the activity line, the log frames, then done or error — HTTP
        200 whatever happens, as Arcane writes the status before the work starts.

        The work runs on its own, as Arcane's does on the app's context rather than the
        request's: a client that hangs up does not stop it (every line still becomes an
        activity message, the activity still ends), and cancel-activity does."""
        cfg = self.behaviour.streams
        b = self.behaviour.operations.get(ex.op.operation_id)
        failing = ex.decision.ndjson_error is not None
        base = self.context(ex)
        first = render(cfg["activity"], base)
        record = self.start_activity(b, ex, base, first.get("activityId"))
        frames: list = []
        error: str | None = None
        try:
            ctx, _, _ = self.execute(ex, mutate=not failing)
            lines = render(((b.get("stream") if b else None) or {}).get("lines") or [], ctx)
            frames = [render(cfg["log"], dict(ctx, line=_text(line))) for line in lines]
            if failing:
                frames = frames[: max(1, len(frames) // 2)]
                error = ex.decision.ndjson_error or _text(render(cfg["error_message"], ctx))
        except (InStream, InStreamAnswer) as failure:
            error = failure.message
        knobs = self.sim.knobs.current
        delay = knobs.scaled(knobs.stream_line_seconds) if knobs.stream_line_seconds is not None else float(cfg.get("delay_seconds", 0))
        queue: asyncio.Queue = asyncio.Queue()
        cancel = asyncio.Event()
        if record is not None:
            self.cancels[record["id"]] = cancel
        end = object()
        final = (b.get("activity") or {}).get("complete") if b else None
        cancel_cfg = cfg["cancel"]

        async def work() -> None:
            outcome, status = error, "failed" if error is not None else "success"
            try:
                for frame in frames:
                    if cancel.is_set():
                        break
                    queue.put_nowait(("log", frame))
                    if record is not None:
                        self.activity_message(record, "info", _text(frame.get("log")) if isinstance(frame, dict) else _text(frame))
                    if delay:
                        try:
                            await asyncio.wait_for(cancel.wait(), delay)
                        except TimeoutError:
                            pass
                if cancel.is_set():
                    outcome, status = _text(render(cancel_cfg["error"], base)), "cancelled"
                queue.put_nowait(("error", render(cfg["error"], dict(base, message=outcome))) if outcome is not None
                                 else ("done", render(cfg["done"], base)))
            finally:
                if record is not None:
                    self.cancels.pop(record["id"], None)
                    message = cancel_cfg["message"] if status == "cancelled" else (outcome if status == "failed" else final)
                    self.complete_activity(record, status, message, outcome if status == "failed" else None)
                queue.put_nowait(end)

        worker = asyncio.ensure_future(work())
        stall = ex.decision.stall
        decision = ex.decision
        request = ex.request

        framing = knobs.stream_framing

        async def emit() -> AsyncIterator[bytes]:
            sent = 0
            item: Any = ("activity", first)
            while item is not end:
                if decision.drop and sent >= decision.drop_after:
                    await self.drop(request)  # cut mid-stream: the work goes on without us
                    return
                yield self.stream_frame(item[1], framing, item[0])
                sent += 1
                if stall and sent == stall[1]:
                    await asyncio.sleep(stall[0])  # the stream goes quiet, as a big layer does
                item = await queue.get()

        self._keep(worker)
        return StreamingResponse(emit(), status_code=200, media_type=self.stream_media(framing), headers=self.stream_headers())

    def _keep(self, task: asyncio.Task) -> None:
        """Hold a background task until it ends (the loop keeps only weak references)."""
        pending = self.__dict__.setdefault("_background", set())
        pending.add(task)
        task.add_done_callback(pending.discard)

    def start_activity(self, b: OpBehaviour | None, ex: Exchange, ctx: dict, activity_id: str | None) -> dict | None:
        """The operation's activity, persisted as Arcane's StartHandlerActivity does
        (running until the work ends) and published on the live channel."""
        spec = (b.get("activity") if b else None) or None
        coll = self.behaviour.collections.get("activities")
        if spec is None or coll is None:
            return None
        rendered = render({k: v for k, v in spec.items() if k != "complete"}, dict(ctx, key=ex.params.get(b.key) if b.key else None))
        # a global operation records its activity where its `environmentId` says (Arcane's "0")
        env = ex.env or _text(rendered.get("environmentId") or "")
        if not env:
            return None
        stamp = self.store.stamp()
        item = self.doc.conform({
            "id": activity_id or self.store.fresh_ids()["uuid"], "environmentId": env, "status": "running",
            "createdAt": stamp, "startedAt": stamp,
            "startedBy": {"username": ex.principal.username} if ex.principal else None, **_drop_none(rendered),
        }, {"$ref": "#" + self.doc.component_pointer(coll.schema)})
        item["_sim"] = {"messages": []}
        self.store.insert(coll, env, item, upsert=True)
        self.publish_activity(item)
        return item

    def activity_message(self, record: dict, level: str, text: str) -> dict:
        """One activity message (a stream's line, a final word), persisted and published."""
        with self.store.lock:
            messages = record.setdefault("_sim", {}).setdefault("messages", [])
            msg = {"id": f"{record['id']}-{len(messages) + 1}", "activityId": record["id"], "level": level, "message": text,
                   "createdAt": self.store.stamp()}
            messages.append(msg)
            record["latestMessage"] = text
            record["updatedAt"] = msg["createdAt"]
        self.store.notify("message", str(record.get("environmentId")), message=dict(msg))
        return msg

    def complete_activity(self, record: dict, status: str, final_message: str | None, error: str | None) -> None:
        """CompleteHandlerActivity / CompleteActivity: the terminal status, the final
        message (success, error or warning by status), then the sealed terminal event."""
        stamp = self.store.stamp()
        with self.store.lock:
            record.update({"status": status, "endedAt": stamp, "updatedAt": stamp})
            if error is not None:
                record["error"] = error
        if final_message:
            level = {"failed": "error", "cancelled": "warning"}.get(status, "success")
            self.activity_message(record, level, final_message)
        self.publish_activity(record)

    def publish_activity(self, record: dict) -> None:
        """An `activity` event; a terminal one seals the activity (a later non-terminal
        snapshot of it is dropped, as Arcane's admitActivityPublishInternal does)."""
        if record.get("status") not in TERMINAL and record["id"] in self.sealed:
            return
        if record.get("status") in TERMINAL:
            self.sealed.add(record["id"])
        self.store.notify("activity", str(record.get("environmentId")), activity=copy.deepcopy(strip_private(record)))

    def activity_event(self, kind: str, env: str, payload: dict) -> dict:
        """An activity bus notice as Arcane's activity StreamEvent."""
        if kind == "activity":
            act = payload["activity"]
            return {"type": "activity", "environmentId": env, "activityId": act.get("id"), "activity": act, "timestamp": self.store.stamp()}
        msg = payload["message"]
        return {"type": "message", "environmentId": env, "activityId": msg.get("activityId"), "message": msg, "timestamp": self.store.stamp()}

    def cancel_activity(self, ex: Exchange, item: dict, ctx: dict) -> None:
        """CancelActivity: a running activity gets the request message; its work is told
        to stop (and ends it cancelled itself), or, with no work running, it is ended
        cancelled here."""
        cfg = self.behaviour.streams["cancel"]
        who = ex.principal.username if ex.principal else (ex.query.get("requestedBy") or "a user")
        self.activity_message(item, "warning", _text(render(cfg["requested"], dict(ctx, who=who))))
        event = self.cancels.get(item["id"])
        if event is not None:
            event.set()
        else:
            self.complete_activity(item, "cancelled", cfg["message"], None)

    def stream_failure(self, ex: Exchange, message: str) -> Response:
        """A stream that fails before any work: the activity line, then the error line."""
        cfg = self.behaviour.streams
        ctx = self.context(ex)
        lines = [render(cfg["activity"], ctx), render(cfg["error"], dict(ctx, message=message))]
        record = self.start_activity(self.behaviour.operations.get(ex.op.operation_id), ex, ctx, lines[0].get("activityId"))
        if record is not None:
            self.complete_activity(record, "failed", message, message)
        framing = self.sim.knobs.current.stream_framing
        body = b"".join(self.stream_frame(line, framing, kind) for line, kind in zip(lines, ("activity", "error"), strict=True))
        return Response(body, status_code=200, media_type=self.stream_media(framing), headers=self.stream_headers())

    def live_answer(self, ex: Exchange) -> Response:
        """The live channel (/stream), live.py: it never ends unless a knob bounds it."""
        channel = LiveChannel(self, ex.principal, ex.query, ex.decision)
        request = ex.request

        async def abort() -> None:
            await self.drop(request)  # awaited: the body must not end cleanly before the cut

        framing = self.sim.knobs.current.live_framing
        lines = channel.lines(abort)
        if framing == "sse":
            lines = _as_events(lines)
        return StreamingResponse(lines, status_code=200, media_type=self.stream_media(framing), headers=self.stream_headers())

    # ------------------------------------------------------------ what the live side reads

    def visible_environments(self, principal) -> list[dict]:
        coll = self.behaviour.collections[self.behaviour.environments["collection"]]
        op = self.behaviour.operations.get("listEnvironments")
        with self.store.lock:
            items = [strip_private(copy.deepcopy(i)) for i in self.store.items(coll, None)]
        if op is not None and principal is not None:
            ex = Exchange(None, None, {}, {}, b"", principal=principal)
            items = self.visible(ex, op, items)
        return items

    def dashboard_snapshot(self, env: str, cache: dict, cache_seconds: float) -> tuple[dict | None, str | None]:
        """get-dashboard's snapshot of an environment without its tables (cached, as
        Arcane's DashboardService is), or the error the stream reports."""
        loop = asyncio.get_running_loop()
        if cache.get("at") is not None and loop.time() - cache["at"] < cache_seconds:
            return cache["snapshot"], None
        local = str(self.behaviour.environments.get("local", "0"))
        if env != local:
            env_item = self.store.environment(env) or {}
            cfg = self.behaviour.environments
            for rule in cfg.get("refuse") or []:
                if matches_where(env_item, rule["where"], {}):
                    return None, _text(render(rule["body"], {})["data"]["error"])
            if self.faults.is_agent_down(env):
                api_url = str(env_item.get("apiUrl") or "")
                host = urllib.parse.urlsplit(api_url).netloc or api_url
                target = api_url.rstrip("/") + "/api/environments/" + local + "/dashboard"
                return None, _text(render(cfg["unreachable"]["body"], {"target": target, "host": host})["data"]["error"])
        mode = self.faults.down_mode(env)
        if mode is not None:
            down = self.behaviour.daemon_down
            return None, _text(render(down[mode], {"fail": "failed to get docker snapshot", "docker_error": down["docker_error"]}))
        op = self.sim.operations.get("get-dashboard")
        if op is None:
            return None, "dashboard snapshot not available"
        ex = Exchange(None, op, {op.env_param: env} if op.env_param else {}, {}, b"", env=env)
        _, shown, _ = self.execute(ex, mutate=False)
        spec = self.doc.response_spec(op.path, op.method)
        schema = data_schema(self.doc, spec.schema_pointer)
        snapshot = self.doc.fill(deep_merge(self.doc.synthesize(schema), shown.data or {}), schema)
        for table in ("containers", "images"):
            if isinstance(snapshot.get(table), dict):
                snapshot[table]["data"] = None  # RunLocalStreamProducer: built without tables
        cache.update(at=loop.time(), snapshot=snapshot)
        return snapshot, None

    def activities_snapshot(self, env: str, limit: int) -> list[dict]:
        coll = self.behaviour.collections["activities"]
        with self.store.lock:
            items = [strip_private(copy.deepcopy(i)) for i in self.store.items(coll, env)]
        items.sort(key=lambda i: (str(i.get("createdAt") or ""), str(i.get("id"))), reverse=True)
        return items[:limit]

    def remote_activities(self, env: str, limit: int) -> tuple[list[dict] | None, str | None]:
        if self.faults.is_agent_down(env):
            env_item = self.store.environment(env) or {}
            api_url = str(env_item.get("apiUrl") or "")
            host = urllib.parse.urlsplit(api_url).netloc or api_url
            target = api_url.rstrip("/") + "/api/environments/0/activities"
            return None, _text(render(self.behaviour.environments["unreachable"]["body"], {"target": target, "host": host})["data"]["error"])
        return self.activities_snapshot(env, limit), None

    def append_log(self, item: dict, text: str, stream: str, env: str | None) -> None:
        """A container writes a line (now, on the simulated clock): kept in its state and
        announced to the log hubs that follow it."""
        stamp = parse_ts(self.store.stamp()) or 0
        # a TTY container has one raw stream: what its program writes to stderr lands in it too
        member = "stderr" if stream == "stderr" and not is_tty(item) else "logs"
        with self.store.lock:
            # after every line the container wrote (demo logs may run ahead of the simulated clock)
            stamp = max([stamp] + [line.ns + 1_000_000 for line in item_lines(item)])
            private = item.setdefault("_sim", {})
            private[member] = str(private.get(member) or "") + f"{docker_ts(stamp)} {text}\n"
        self.store.notify("log", env, item=str(item.get("id")))

    def server_log(self, level: str, message: str, attrs: dict | None = None) -> None:
        """Arcane's own slog line: kept in the diagnostics ring (≤ backlog entries) and
        sent to the server-log streams."""
        coll = self.behaviour.collections.get("diagnostics_logs")
        entry = {"time": self.store.stamp(), "level": level, "message": message}
        if attrs:
            entry["attrs"] = dict(attrs)
        if coll is not None:
            with self.store.lock:
                ring = self.store.items(coll, None)
                ring.append(entry)
                del ring[: -int(self.behaviour.diagnostics_stream["backlog"])]
        self.store.notify("server_log", None, entry=dict(entry))

    def server_log_backlog(self) -> list[dict]:
        coll = self.behaviour.collections.get("diagnostics_logs")
        if coll is None:
            return []
        with self.store.lock:
            return [strip_private(copy.deepcopy(e)) for e in self.store.items(coll, None)]

    def check_value(self, value: Any, component: str, what: str) -> None:
        """A frame that has a schema in the document is checked like an answer."""
        if component not in self.doc.components:
            return
        problems = self.doc.errors(value, self.doc.component_pointer(component))
        if problems:
            log.error("simulator %s does not match %s: %s", what, component, "; ".join(problems))
            self.sim.add_violation(Violation(None, "WS", what, 0, tuple(problems)))

    def problem_body(self, status: int, detail: str) -> dict:
        return {"title": http.HTTPStatus(status).phrase, "status": status, "detail": detail}

    # ------------------------------------------------------------ webhooks and token exchange

    def find_webhook(self, token: str) -> tuple[str, dict] | None:
        coll = self.behaviour.collections.get("webhooks")
        if coll is None:
            return None
        with self.store.lock:
            for env in self.store.environment_ids():
                for hook in self.store.items(coll, env):
                    if (hook.get("_sim") or {}).get("token") == token:
                        return env, hook
        return None

    async def internal_call(self, method: str, path: str, principal: Principal) -> tuple[int, bytes]:
        """Run one operation as `principal` in the background (a webhook's action): the
        same pipeline, unrecorded; a stream is read to its end."""
        scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode("latin-1"), "query_string": b"",
                 "headers": [(b"content-type", b"application/json")], "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0),
                 "scheme": "http", "root_path": "", "http_version": "1.1"}
        sent = False

        async def receive():
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"{}", "more_body": False}

        response = await self.handle_api(Request(scope, receive), internal=principal)
        body = b""
        if isinstance(response, StreamingResponse):
            async for chunk in response.body_iterator:
                body += chunk if isinstance(chunk, bytes) else chunk.encode()
        else:
            body = response.body
        return response.status_code, body

    async def run_webhook_action(self, env: str, hook: dict, target_type: str, action: str, method: str, path: str) -> None:
        """TriggerByToken's background action, then its event in the event log."""
        spec = self.behaviour.webhook_trigger
        system = Principal(SYSTEM, "internal", frozenset(), {}, sudo=True)
        status, body = await self.internal_call(method, path, system)
        error = None
        if status >= 300:
            try:
                parsed = json.loads(body)
                error = parsed.get("detail") or (parsed.get("data") or {}).get("error") or parsed.get("error")
            except (ValueError, AttributeError):
                error = body.decode("utf-8", "replace")
        else:
            last = body.decode("utf-8", "replace").strip().splitlines()[-1:] if body else []
            if last and last[0].startswith('{"error"'):
                error = json.loads(last[0])["error"]
        ctx = {"name": hook.get("name"), "target_type": target_type, "action": action, "error": error}
        event = render(spec["event"]["failure" if error else "success"], ctx)
        coll = self.behaviour.collections.get("events")
        if coll is not None:
            stamp = self.store.stamp()
            item = self.doc.conform({"id": "ev_" + self.store.fresh_ids()["hex12"], **event, "resourceType": "webhook", "resourceId": hook.get("id"),
                                     "resourceName": hook.get("name"), "environmentId": hook.get("environmentId") or env, "username": SYSTEM,
                                     "timestamp": stamp, "createdAt": stamp,
                                     "metadata": {"targetType": target_type, "actionType": action, "targetId": hook.get("targetId"),
                                                  "tokenPrefix": hook.get("tokenPrefix")}},
                                    {"$ref": "#" + self.doc.component_pointer(coll.schema)})
            self.store.insert(coll, None, item)
        if error:
            self.server_log("ERROR", "webhook action failed",
                            {"webhookID": hook.get("id"), "webhookName": hook.get("name"), "actionType": action, "error": error})

    def federated_exchange(self, subject: str, claims: dict, issuer: str) -> tuple[str, int] | None:
        """ExchangeToken past the request checks: the issuer's enabled credentials, the
        signature (the simulator's stand-in), expiry, audience and subject, the replay
        guard, the service user; a Bearer session for it and its lifetime, or None."""
        coll = self.behaviour.collections.get("federated_credentials")
        if coll is None:
            return None
        now = self.store.now()
        with self.store.lock:
            creds = [c for c in self.store.items(coll, None) if str(c.get("issuerUrl") or "").rstrip("/") == issuer.rstrip("/")
                     and c.get("enabled") and not (c.get("expiresAt") and (FILTERS["iso"](now, "") > str(c["expiresAt"])))]
        creds.sort(key=lambda c: (str(c.get("createdAt") or ""), str(c.get("id"))))
        if not creds:
            return None
        keys = [str((c.get("_sim") or {}).get("signing_key")) for c in creds if (c.get("_sim") or {}).get("signing_key")]
        if not any(jwt_signed_with(subject, k) for k in keys):
            return None
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or exp <= now:
            return None
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
        chosen = None
        for c in creds:
            if not set(audiences) & {a.strip() for a in c.get("audiences") or [] if a.strip()}:
                continue
            subject_value = claim_at(claims, str(c.get("subjectClaim") or "sub").strip() or "sub")
            if subject_value in (None, ""):
                continue
            subject_value = str(subject_value)
            pattern = str(c.get("subjectMatch") or "")
            if (c.get("matchType") == "glob" and subject_glob_match(pattern, subject_value)) or subject_value == pattern:
                chosen = c
                break
        if chosen is None:
            return None
        replay = hashlib.sha256(f"{issuer}\0{'jti' if claims.get('jti') else 'token'}\0{claims.get('jti') or subject}".encode()).hexdigest()
        with self.store.lock:
            if replay in self.store.replays:
                return None
            self.store.replays.add(replay)
        users = self.behaviour.collections.get("users")
        user = None
        if users is not None:
            with self.store.lock:
                user = next((u for u in self.store.items(users, None) if u.get("id") == chosen.get("identityUserId")), None)
        if user is None:
            return None
        username = str(user.get("username"))
        role = {"role": chosen.get("roleId")}
        if chosen.get("environmentId"):
            role["environmentId"] = chosen["environmentId"]
        with self.store.lock:
            self.store.users = [u for u in self.store.users if u.get("username") != username] + [{"username": username, "password": None, "roles": [role]}]
            chosen["lastUsedAt"] = FILTERS["iso"](now, "")
        ttl = int(chosen.get("tokenTtlSeconds") or 900)
        session = self.store._issue(username)
        return session.token, ttl

class InStreamAnswer(InStream):
    """daemon_down on a streaming operation: the failure arrives inside the stream."""
