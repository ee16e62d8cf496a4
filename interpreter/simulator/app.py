"""The simulator's HTTP side: a Starlette app that answers every operation of the
embedded OpenAPI document under /api, like Arcane, plus a control API under /_sim.

One generic pipeline serves every operation (order matters and mirrors Arcane's stack):

    record the request → faults (latency, drop, 5xx, malformed) → route (catalog actions;
    Arcane's JSON 404 catch-all otherwise) → auth (Huma's security middleware) →
    environment proxy checks (unknown / disabled environment) → daemon_down →
    parameter and body validation (Huma's 422) → behaviour (behaviour.yaml: read or change
    a collection, or nothing) → answer by response kind (json / empty / ndjson / download
    / live channel), every JSON answer validated against the document.

Nothing here names a domain: which collection an operation touches, what it sets and
what it answers come from the behaviour file.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http
import json
import logging
import urllib.parse
from dataclasses import dataclass, field
from email.utils import formatdate
from fnmatch import fnmatchcase
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .faults import Decision, FaultError, Faults
from .model import Behaviour, OpBehaviour, data_schema, env_param, strip_private
from .schemas import DocSchemas, deep_merge
from .store import MfaChallenge, Store
from .template import FILTERS, TemplateError, get_path, matches_where, parse_path, render

log = logging.getLogger("arcane_mcp.simulator")

API_PREFIX = "/api"
CONTROL_PREFIX = "/_sim"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
REDACTED = "[redacted]"
SECRET_HEADERS = ("x-api-key", "authorization", "cookie")
STREAM_KINDS = ("ndjson", "live_channel")
DOWNLOAD_KINDS = ("text_download", "binary_download", "download")


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the simulator received it (credentials replaced by "[redacted]")."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: bytes
    action: str | None  # the action ID it routed to, None for the catch-all
    credential: str | None  # api_key | invalid_api_key | bearer | invalid_bearer | None

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
            "action": self.action, "credential": self.credential,
        }


@dataclass(frozen=True)
class Violation:
    """An answer that does not match the document: always a simulator (data or code) bug."""

    action: str | None
    method: str
    path: str
    status: int
    problems: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"action": self.action, "method": self.method, "path": self.path, "status": self.status, "problems": list(self.problems)}


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


# ---------------------------------------------------------------- routing


@dataclass(frozen=True)
class CompiledRoute:
    action: Any
    segments: tuple[str | None, ...]  # None = a parameter
    names: tuple[str, ...]  # parameter names, in order
    rank: tuple[int, ...]  # literal segments first: lower sorts first


def compile_route(action) -> CompiledRoute:
    segs: list[str | None] = []
    names: list[str] = []
    for seg in action.path.strip("/").split("/"):
        if seg.startswith("{") and seg.endswith("}"):
            segs.append(None)
            names.append(seg[1:-1])
        else:
            segs.append(seg)
    return CompiledRoute(action, tuple(segs), tuple(names), tuple(1 if s is None else 0 for s in segs))


class Router:
    """Method + path template matching; a literal segment beats a parameter at the same place."""

    def __init__(self, actions):
        self.routes: dict[str, list[CompiledRoute]] = {}
        for a in actions:
            self.routes.setdefault(a.method, []).append(compile_route(a))
        for routes in self.routes.values():
            routes.sort(key=lambda r: r.rank)

    def match(self, method: str, segments: list[str]) -> tuple[Any, dict[str, str]] | None:
        for r in self.routes.get(method, []):
            if len(r.segments) != len(segments):
                continue
            params: dict[str, str] = {}
            it = iter(r.names)
            for want, got in zip(r.segments, segments):
                if want is None:
                    if got == "":
                        break
                    params[next(it)] = got
                elif want != got:
                    break
            else:
                return r.action, params
        return None


def split_raw_path(raw: str) -> list[str]:
    """Split on "/" before percent-decoding, so an encoded "/" stays inside its segment."""
    return [urllib.parse.unquote(s) for s in raw.strip("/").split("/")] if raw.strip("/") else []


# ---------------------------------------------------------------- helpers


def _ascii_filename(name: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in name) or "download"


def content_disposition(filename: str) -> str:
    """attachment; filename="…" (ASCII-safe) plus filename* when the name is not plain ASCII."""
    plain = _ascii_filename(filename)
    out = f'attachment; filename="{plain}"'
    if plain != filename:
        out += "; filename*=UTF-8''" + urllib.parse.quote(filename, safe="")
    return out


def pseudo_bytes(seed: str, size: int) -> bytes:
    out = b""
    i = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest()
        i += 1
    return out[:size]


def _text(value: Any) -> str:
    return FILTERS["str"](value, "")


def _search_hit(value: Any, needle: str) -> bool:
    if isinstance(value, dict):
        return any(_search_hit(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(_search_hit(v, needle) for v in value)
    return value is not None and needle in _text(value).lower()


def _sort_key(value: Any) -> tuple:
    if value is None:
        return (2, "")
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, _text(value).lower())


@dataclass
class Exchange:
    """Everything the pipeline knows about one request."""

    request: Request
    action: Any
    params: dict[str, str]
    query: dict[str, str]
    raw_body: bytes
    body: Any = None
    env: str | None = None
    caller: dict = field(default_factory=dict)
    decision: Decision = field(default_factory=Decision)
    data_template: Any = None  # replaces the behaviour's `data` (a login that needs a second factor)


# ---------------------------------------------------------------- the app


class SimulatorApp:
    """Builds the Starlette app of one simulator; holds nothing that outlives it."""

    def __init__(self, sim):
        self.sim = sim
        self.catalog = sim.catalog
        self.doc: DocSchemas = sim.doc
        self.behaviour: Behaviour = sim.behaviour
        self.store: Store = sim.store
        self.faults: Faults = sim.faults
        served = [a for a in self.catalog.all_actions.values() if a.operation_id]
        self.router = Router(served)
        self.error_pointer = self.doc.component_pointer("ErrorModel")
        self.starlette = Starlette(routes=[
            Route(CONTROL_PREFIX + "/requests", self.control_requests, methods=["GET", "DELETE"]),
            Route(CONTROL_PREFIX + "/faults", self.control_faults, methods=["GET", "PUT"]),
            Route(CONTROL_PREFIX + "/state", self.control_state, methods=["GET"]),
            Route(CONTROL_PREFIX + "/violations", self.control_violations, methods=["GET", "DELETE"]),
            Route(CONTROL_PREFIX + "/reset", self.control_reset, methods=["POST"]),
            Route(CONTROL_PREFIX + "/sessions", self.control_sessions, methods=["DELETE"]),
            Route(CONTROL_PREFIX + "/users", self.control_users, methods=["PUT"]),
            Route(API_PREFIX, self.handle_api, methods=ALL_METHODS),
            Route(API_PREFIX + "/{rest:path}", self.handle_api, methods=ALL_METHODS),
        ])

    async def __call__(self, scope, receive, send):
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
                self.faults.replace_with(json.loads(await request.body() or b"{}"))
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
                raise ValueError("the body is a list of {username, password, mfa?}")
            self.sim.set_users(users)
        except (ValueError, json.JSONDecodeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(status_code=204)

    # ------------------------------------------------------------ answers

    def violation(self, ex: Exchange | None, status: int, problems: list[str], request: Request | None = None) -> None:
        req = ex.request if ex else request
        v = Violation(ex.action.id if ex and ex.action else None, req.method if req else "", req.url.path if req else "", status, tuple(problems))
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
        return Response(json.dumps(body, ensure_ascii=False).encode("utf-8"), status_code=status, media_type=media_type)

    def problem(self, ex: Exchange, status: int, detail: str, errors: list[dict] | None = None) -> Response:
        body: dict[str, Any] = {"title": http.HTTPStatus(status).phrase, "status": status, "detail": detail}
        if errors:
            body["errors"] = errors
        return self.json_answer(ex, status, body, self.error_pointer, media_type="application/problem+json")

    def plain_json(self, status: int, body: Any) -> Response:
        """Arcane's non-Huma JSON answers (catch-all 404, environment proxy): no schema to check."""
        return Response(json.dumps(body, ensure_ascii=False).encode("utf-8"), status_code=status, media_type="application/json")

    # ------------------------------------------------------------ pipeline

    async def handle_api(self, request: Request) -> Response:
        raw_path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1").split("?", 1)[0]
        rel = raw_path[len(API_PREFIX):] or "/"
        raw_body = await request.body()
        segments = split_raw_path(rel)
        match = self.router.match(request.method, segments)
        action, params = match if match else (None, {})
        self.sim.record(request, raw_body, action.id if action else None, self.credential(request))
        self.store.advance()
        ex = Exchange(request, action, params, dict(request.query_params), raw_body)
        streaming = action is not None and action.response_kind in STREAM_KINDS
        ex.decision = self.faults.decide(action.id if action else None, rel, request.url.path, streaming=streaming)
        try:
            if ex.decision.latency:
                await asyncio.sleep(ex.decision.latency)
            if ex.decision.drop:
                return await self.drop(request)
            if ex.decision.error_status:
                return self.problem(ex, ex.decision.error_status, ex.decision.error_detail or "simulated server error (error_5xx fault)")
            if action is None:
                return self.catch_all(request)
            if ex.decision.malformed:
                return Response(b'{"success": true, "data": [{"id": ', status_code=200, media_type="application/json")
            self.authenticate(ex)
            self.check_environment(ex)
            self.check_parameters(ex)
            await self.parse_body(ex)
            return await self.respond(ex)
        except Answer as a:
            return a.response
        except TemplateError as exc:
            # a behaviour-file bug: make it loud, answer like a server bug would
            self.violation(ex, 500, [f"behaviour template error: {exc}"])
            return self.problem(ex, 500, f"simulator behaviour error: {exc}")
        except ConnectionAbortedError:
            raise  # the drop fault's fallback: let the server close the connection
        except Exception as exc:  # a simulator bug: count it so the test that met it fails
            log.exception("simulator error on %s %s", request.method, request.url.path)
            self.violation(ex, 500, [f"simulator error: {type(exc).__name__}: {exc}"])
            return self.problem(ex, 500, f"simulator error: {type(exc).__name__}")

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

    def catch_all(self, request: Request) -> Response:
        spec = self.behaviour.catch_all
        body = render(spec["body"], {"path": request.url.path, "method": request.method})
        return self.plain_json(int(spec.get("status", 404)), body)

    def credential(self, request: Request) -> str | None:
        key = request.headers.get("x-api-key")
        if key:
            return "api_key" if key in self.sim.api_keys else "invalid_api_key"
        token = self.bearer(request)
        if token:
            return "bearer" if self.store.session(token) else "invalid_bearer"
        return None

    @staticmethod
    def bearer(request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and len(auth) > 7:
            return auth[7:]
        return request.cookies.get("token") or request.cookies.get("__Host-token")

    def authenticate(self, ex: Exchange) -> None:
        """Huma's security middleware: key first when the operation accepts one, then the session."""
        msgs = self.behaviour.auth
        security = ex.action.security
        token = self.bearer(ex.request)
        session = self.store.session(token)
        ex.caller = {"username": session.username, "credential": "bearer"} if session else {}
        if security == "public":
            return
        key = ex.request.headers.get("x-api-key")
        if security in ("either", "apikey") and key:
            if key in self.sim.api_keys:
                ex.caller = {"username": self.sim.api_key_user, "credential": "api_key"}
                return
            raise Answer(self.problem(ex, 401, msgs["invalid_api_key"]))
        if security in ("either", "bearer") and token:
            if session:
                return
            raise Answer(self.problem(ex, 401, msgs["invalid_session"]))
        raise Answer(self.problem(ex, 401, msgs["missing"]))

    def fail_prefix(self, ex: Exchange) -> str:
        b = self.behaviour.operations.get(ex.action.id)
        if b and b.get("fail"):
            return b.get("fail")
        op = self.doc.document["paths"][ex.action.path][ex.action.method.lower()]
        summary = (op.get("summary") or ex.action.name.replace("_", " ")).strip()
        return "Failed to " + summary[:1].lower() + summary[1:]

    def check_environment(self, ex: Exchange) -> None:
        """Arcane's environment proxy: unknown or disabled environments; then daemon_down."""
        wire = env_param(ex.action, self.catalog.env_arg)
        if wire is None:
            return
        ex.env = ex.params.get(wire)
        cfg = self.behaviour.environments
        # Arcane handles some per-environment paths itself, without the proxy's checks
        prefix = ex.action.path[: ex.action.path.index("{" + wire + "}")] + "{" + wire + "}"
        suffix = ex.action.path[len(prefix):]
        for name, value in ex.params.items():
            suffix = suffix.replace("{" + name + "}", value)
        managed = any(fnmatchcase(suffix, g) for g in cfg.get("managed_locally") or [])
        if ex.env != str(cfg.get("local", "0")) and not managed:
            env_item = self.store.environment(ex.env)
            if env_item is None:
                u = cfg["unknown"]
                raise Answer(self.plain_json(int(u["status"]), render(u["body"], self.context(ex))))
            for rule in cfg.get("refuse") or []:
                if matches_where(env_item, rule["where"], self.context(ex)):
                    raise Answer(self.plain_json(int(rule["status"]), render(rule["body"], self.context(ex))))
        down = self.behaviour.daemon_down
        if self.faults.is_down(ex.env) and any(fnmatchcase(ex.action.id, g) for g in down["applies_to"]):
            b = self.behaviour.operations.get(ex.action.id)
            statuses = down["status"]
            status = statuses.get(b.kind if b and b.kind else "", statuses["default"])
            ctx = self.context(ex)
            ctx["fail"] = self.fail_prefix(ex)
            raise Answer(self.problem(ex, int(status), _text(render(down["detail"], ctx))))

    def check_parameters(self, ex: Exchange) -> None:
        """Huma's parameter validation: required query/header parameters, integer and boolean syntax."""
        errors = []
        for p in self.doc.parameters(ex.action.path, ex.action.method):
            where, name = p.get("in"), p.get("name")
            if where == "query":
                value = ex.query.get(name)
            elif where == "header":
                value = ex.request.headers.get(name)
            else:
                continue
            if value is None:
                if p.get("required"):
                    errors.append({"location": f"{where}.{name}", "message": f"required {where} parameter is missing"})
                continue
            t = self.doc.deref(p.get("schema") or {}).get("type")
            if t == "integer":
                try:
                    ex.query[name] = str(int(value)) if where == "query" else value
                except ValueError:
                    errors.append({"location": f"{where}.{name}", "message": "invalid integer", "value": value})
            elif t == "boolean" and value.lower() not in ("true", "false", "1", "0", ""):
                errors.append({"location": f"{where}.{name}", "message": "invalid boolean", "value": value})
        if errors:
            raise Answer(self.problem(ex, 422, self.behaviour.validation.get("detail", "validation failed"), errors))

    async def parse_body(self, ex: Exchange) -> None:
        spec = self.doc.request_spec(ex.action.path, ex.action.method)
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
                raise Answer(self.problem(ex, 400, f"unable to parse the request body as JSON: {exc}"))
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

    def context(self, ex: Exchange, **extra) -> dict:
        now = self.store.now()
        ctx = {
            "env": ex.env, "path": ex.params, "query": ex.query, "body": ex.body if ex.body is not None else {},
            "action": {"id": ex.action.id, "name": ex.action.name, "domain": ex.action.domain} if ex.action else {},
            "caller": ex.caller, "now": now, "now_iso": FILTERS["iso"](now, ""), "new": self.store.fresh_ids,
            "key": None, "item": None, "collection": [], "page": [], "session": {},
        }
        ctx.update(extra)
        return ctx

    def collection_items(self, b: OpBehaviour, ex: Exchange) -> list[dict]:
        return self.store.items(self.behaviour.collections[b.collection], ex.env)

    def lookup(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> dict:
        coll = self.behaviour.collections[b.collection]
        key = ex.params.get(b.key, "")
        ctx["key"] = key
        item = self.store.find(coll, ex.env, key)
        if item is None:
            nf = dict(coll.not_found)
            nf.update(b.get("not_found") or {})
            ctx["fail"] = self.fail_prefix(ex)
            raise Answer(self.problem(ex, int(nf["status"]), _text(render(nf["detail"], ctx))))
        return item

    def guard(self, b: OpBehaviour, ex: Exchange, items: list[dict], ctx: dict) -> None:
        """Refuse when one of `items` matches a guard's `where` (and its `unless` is not true).

        For update/delete `items` is the keyed item (a precondition); for create it is every
        existing item of the collection (a uniqueness check, like Docker's name conflict).
        """
        for g in b.get("guards") or []:
            for item in items:
                if matches_where(item, g.get("where"), ctx) and not (g.get("unless") and render(g["unless"], ctx)):
                    ctx["fail"] = self.fail_prefix(ex)
                    raise Answer(self.problem(ex, int(g.get("status", 409)), _text(render(g["detail"], dict(ctx, it=item)))))

    def new_item(self, coll_name: str, template: Any, ctx: dict) -> dict:
        coll = self.behaviour.collections[coll_name]
        rendered = render(template or {}, ctx)
        private = rendered.pop("_sim", None) if isinstance(rendered, dict) else None
        item = self.doc.conform(rendered, {"$ref": "#" + self.doc.component_pointer(coll.schema)})
        if private is not None:
            item["_sim"] = private
        return item

    def apply_effects(self, b: OpBehaviour, ex: Exchange, ctx: dict) -> None:
        for eff in b.get("effects") or []:
            name = next(eff[k] for k in ("create", "update", "delete") if k in eff)
            coll = self.behaviour.collections[name]
            if "create" in eff:
                self.store.insert(coll, ex.env, self.new_item(name, eff.get("item"), ctx), upsert=True)
            elif "update" in eff:
                changes = eff.get("set") or {}

                def change(i: dict, changes=changes) -> None:
                    new = deep_merge(i, render(changes, dict(ctx, it=i)))
                    i.clear()
                    i.update(new)

                self.store.update_where(coll, ex.env, lambda i: matches_where(i, eff.get("where"), dict(ctx, it=i)), change)
            else:
                for victim in [i for i in self.store.items(coll, ex.env) if matches_where(i, eff.get("where"), ctx)]:
                    self.store.remove(coll, ex.env, victim)

    def execute(self, ex: Exchange, mutate: bool) -> tuple[dict, "Shown", Any]:
        """Run the operation's behaviour: (template context, what data shows, envelope template)."""
        b = self.behaviour.operations.get(ex.action.id)
        ctx = self.context(ex)
        if b is None:
            return ctx, Shown(), None
        kind = b.kind
        view = None
        if kind in ("list", "aggregate"):
            ctx["collection"] = [strip_private(i) for i in self.collection_items(b, ex)]
        elif kind in ("get", "update", "delete"):
            item = self.lookup(b, ex, ctx)
            ctx["item"] = item
            self.guard(b, ex, [item], ctx)
            if kind == "update" and mutate:
                # not fitted to the schema on purpose: a `set` that breaks the item shows
                # up as a violation of the next answer that shows it
                with self.store.lock:
                    new = deep_merge(item, render(b.get("set") or {}, ctx))
                    item.clear()
                    item.update(new)
            elif kind == "delete" and mutate:
                self.store.remove(self.behaviour.collections[b.collection], ex.env, item)
            view = item
        elif kind == "create":
            coll = self.behaviour.collections[b.collection]
            self.guard(b, ex, [strip_private(i) for i in self.store.items(coll, ex.env)], ctx)
            item = self.new_item(b.collection, b.get("item"), ctx)
            ctx["item"] = item
            if mutate and not self.store.insert(coll, ex.env, item, upsert=bool(b.get("upsert"))):
                conflict = b.get("conflict") or {"status": 409, "detail": "{item." + coll.key + "} already exists"}
                raise Answer(self.problem(ex, int(conflict.get("status", 409)), _text(render(conflict["detail"], ctx))))
            view = item
        elif kind == "session":
            self.session(b, ex, ctx)
        if mutate:
            self.apply_effects(b, ex, ctx)
        data = ex.data_template if ex.data_template is not None else b.get("data")
        shown = Shown(strip_private(view) if view is not None else None,
                      render(b.get("view"), ctx) if view is not None and b.get("view") else None,
                      render(data, ctx) if data is not None else None)
        return ctx, shown, b.get("envelope")

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
        if isinstance(s, MfaChallenge):
            # the password was right, a second factor is pending: no tokens, the `mfa` answer
            ctx["session"] = {"username": s.username, "mfa": {"method": s.method, "transactionId": s.transaction_id,
                                                              "challenge": s.challenge, "expiresAt": s.expires_at}}
            ex.data_template = spec.get("mfa") or {"success": True, "status": "mfa_required"}
            return
        ctx["session"] = {"username": s.username, "token": s.token, "refreshToken": s.refresh_token, "expiresAt": s.expires_at}

    # ------------------------------------------------------------ answers by kind

    async def respond(self, ex: Exchange) -> Response:
        kind = ex.action.response_kind
        spec = self.doc.response_spec(ex.action.path, ex.action.method)
        if kind in STREAM_KINDS:
            return self.stream_answer(ex, spec.status)
        ctx, data, envelope = self.execute(ex, mutate=True)
        if kind == "json":
            return self.json_kind(ex, spec, ctx, data, envelope)
        if kind in DOWNLOAD_KINDS:
            return self.download_answer(ex, spec.status, ctx)
        return Response(status_code=spec.status)  # "empty" (and HEAD): status only

    def json_kind(self, ex: Exchange, spec, ctx: dict, data: "Shown", envelope: Any) -> Response:
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
                    value = deep_merge(value, overlay) if isinstance(value, dict) else overlay
            if is_envelope:
                body["data"] = value
            else:
                body = value
        if envelope and isinstance(body, dict):
            # a member that renders to null is left out, as Go's omitempty does
            extra = {k: v for k, v in render(envelope, ctx).items() if v is not None}
            body = deep_merge(body, extra)
        return self.json_answer(ex, spec.status, self.doc.fill(body, schema), ptr)

    def page(self, ex: Exchange, ctx: dict) -> dict:
        """Arcane's list semantics: filters, search, sort/order, start/limit (-1 = all)."""
        b = self.behaviour.operations.get(ex.action.id)
        coll = self.behaviour.collections.get(b.collection) if b and b.kind == "list" else None
        items = list(ctx["collection"]) if coll else []
        if b is not None:
            items = [i for i in items if matches_where(i, b.get("where"), ctx)]
            for param, field in (b.get("filters") or {}).items():
                want = ex.query.get(param)
                if want not in (None, ""):
                    items = [i for i in items if matches_where(i, {field: want}, ctx)]
        grand = len(items)
        needle = (ex.query.get("search") or "").strip().lower()
        if needle and coll is not None:
            fields = [parse_path(f) for f in (b.get("search") or coll.search)]
            items = [i for i in items if any(_search_hit(get_path(i, f), needle) for f in fields)]
        sort = ex.query.get("sort")
        if sort and coll is not None:
            path = parse_path(coll.sort.get(sort, sort))
            items.sort(key=lambda i: _sort_key(get_path(i, path)), reverse=(ex.query.get("order", "asc").lower() == "desc"))
        elif (ex.query.get("order") or "").lower() == "desc" and coll is not None:
            items.reverse()
        cfg = self.behaviour.pagination
        default_limit, max_limit = int(cfg.get("default_limit", 20)), int(cfg.get("max_limit", 100))
        start = max(int(ex.query.get("start") or 0), 0)
        limit = int(ex.query.get("limit") or default_limit)
        total = len(items)
        if limit == -1:
            page_items = items[start:] if start else items
            per_page, pages, current = total, 1, 1
        else:
            if limit <= 0:
                limit = default_limit
            limit = min(limit, max_limit)
            page_items = items[start : start + limit]
            per_page, pages, current = limit, max((total + limit - 1) // limit, 1), start // limit + 1
        pagination = {"totalPages": pages, "totalItems": total, "currentPage": current, "itemsPerPage": per_page}
        if grand:
            pagination["grandTotalItems"] = grand
        ctx["page"] = page_items
        ctx["filtered"] = items
        return {"data": page_items, "pagination": pagination}

    def download_answer(self, ex: Exchange, status: int, ctx: dict) -> Response:
        b = self.behaviour.operations.get(ex.action.id)
        spec = dict(self.behaviour.downloads["text" if ex.action.response_kind == "text_download" else "binary"])
        spec.update((b.get("download") if b else None) or {})
        filename = _text(render(spec["filename"], ctx))
        media = spec.get("media_type", "application/octet-stream")
        if "content" in spec:
            payload = _text(render(spec["content"], ctx)).encode("utf-8")
        else:
            payload = pseudo_bytes(f"{ex.action.id}:{filename}", int(spec.get("size", 64)))
        return Response(payload, status_code=status, media_type=media, headers={"Content-Disposition": content_disposition(filename)})

    def stream_answer(self, ex: Exchange, status: int) -> Response:
        if ex.action.response_kind == "live_channel":
            return StreamingResponse(self.live_lines(ex), status_code=status, media_type="application/x-json-stream")
        failing = ex.decision.ndjson_error is not None
        ctx, _, _ = self.execute(ex, mutate=not failing)
        cfg = self.behaviour.streams
        b = self.behaviour.operations.get(ex.action.id)
        lines = [render(cfg["activity"], ctx)]
        progress = render((b.get("stream") or {}).get("progress") if b and b.get("stream") else cfg["progress"], ctx)
        if failing:
            # the operation fails half-way: some progress, then the error line (still HTTP 200)
            lines += progress[: max(1, len(progress) // 2)]
            ctx["message"] = ex.decision.ndjson_error or _text(render(cfg["error_message"], ctx))
            lines.append(render(cfg["error"], ctx))
        else:
            lines += progress
            lines.append(render(cfg["done"], ctx))
        delay = float(cfg.get("delay_seconds", 0))

        async def emit() -> AsyncIterator[bytes]:
            for line in lines:
                yield (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
                if delay:
                    await asyncio.sleep(delay)

        return StreamingResponse(emit(), status_code=status, media_type="application/x-json-stream")

    async def live_lines(self, ex: Exchange) -> AsyncIterator[bytes]:
        """The live channel (/stream): one event per requested channel, heartbeats, then the end.

        Arcane's channel never ends; the simulator's ends after `duration_seconds` so a
        client that forgets its own bound still finishes.
        """
        cfg = self.behaviour.live
        ctx = self.context(ex)
        channels = [c.strip().lower() for c in (ex.query.get("channels") or "").split(",") if c.strip()]
        for channel in channels:
            yield (json.dumps(render(cfg["event"], dict(ctx, channel=channel))) + "\n").encode()
        elapsed, interval, duration = 0.0, float(cfg["interval_seconds"]), float(cfg["duration_seconds"])
        while elapsed < duration:
            ctx["now_iso"] = FILTERS["iso"](self.store.now(), "")
            yield (json.dumps(render(cfg["heartbeat"], ctx)) + "\n").encode()
            await asyncio.sleep(interval)
            elapsed += interval
