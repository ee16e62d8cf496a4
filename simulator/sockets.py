"""Arcane's WebSocket routes (behaviour data `websockets:`, live.yaml): the front door
every upgrade goes through, the connection wrapper that records frames and applies
faults, and one small function per route kind (logs, container_stats, terminal,
system_stats, diagnostics, server_logs), registered in KINDS under the word the data uses.

The front door, in Arcane's order: record → faults (latency, 5xx, drop, ws_refuse) →
for a remote environment the environment proxy (its own auth, unknown / disabled / edge,
the route's permission for that environment; an unreachable agent: upgrade, then close
1014) — else Echo's auth middleware ({message, code, statusCode}) and
RequireEchoPermission → the Origin check → the kind's own pre-upgrade check (system
stats: 5 per client IP) → upgrade. Everything after the upgrade is frames: an unknown
container or a down daemon is an error frame, never an HTTP status.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from starlette.websockets import WebSocket

from .faults import Decision

# named imports, not `from . import logs`: that form imports the package itself, a cycle
from .logs import arrival_order, channel_line, compose_name, cut, is_tty, item_lines, merge, normalize_container_line, normalize_project_line, parse_since
from .logs import message as log_message
from .shell import Flavour, Identity, Machine, Shell
from .stats import ZERO_TIME, container_base, container_frame, history_sample, system_frame
from .store import Ambiguous
from .template import matches_where, render

API_PREFIX = "/api"


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class RecordedSocket:
    """One WebSocket connection as the simulator saw it (credentials redacted)."""

    route: str | None  # the route's name (ws-container-logs, …), None for no route
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    credential: str | None  # api_key | invalid_api_key | bearer | invalid_bearer | None
    action: str | None  # the caller's label of the route, else its name
    environment: str | None
    status: int  # 101 once upgraded, else the HTTP status it was refused with (0: dropped)
    received: tuple[tuple[str, Any], ...]  # ("text", str) / ("binary", bytes) frames from the client
    sent: int  # frames the server sent
    closed_by: str | None  # "server" | "client" | "abrupt" (no close frame) | None while open
    close_code: int | None
    close_reason: str

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def as_dict(self) -> dict:
        return {"route": self.route, "path": self.path, "query": [list(q) for q in self.query], "headers": [list(h) for h in self.headers],
                "credential": self.credential, "action": self.action, "environment": self.environment, "status": self.status,
                "received": [[k, v if isinstance(v, str) else v.hex()] for k, v in self.received], "sent": self.sent,
                "closedBy": self.closed_by, "closeCode": self.close_code, "closeReason": self.close_reason}


@dataclass
class SocketRecord:
    route: str | None
    path: str
    query: tuple
    headers: tuple
    credential: str | None
    action: str | None
    environment: str | None = None
    status: int = 0
    received: list = field(default_factory=list)
    sent: int = 0
    closed_by: str | None = None
    close_code: int | None = None
    close_reason: str = ""

    def frozen(self) -> RecordedSocket:
        return RecordedSocket(self.route, self.path, self.query, self.headers, self.credential, self.action, self.environment,
                              self.status, tuple(self.received), self.sent, self.closed_by, self.close_code, self.close_reason)


class Gone(Exception):
    """The client left, or the connection was cut: stop producing for it."""


# ---------------------------------------------------------------- one connection


class Conn:
    """An accepted WebSocket: sends count frames (and apply drop/stall faults), a single
    reader records the client's frames and notices when it leaves."""

    def __init__(self, ws: WebSocket, raw_send, record: SocketRecord, decision: Decision, lock):
        self.ws = ws
        self._raw_send = raw_send
        self.record = record
        self.decision = decision
        self._lock = lock  # the simulator's records lock
        self.gone = asyncio.Event()
        self._on_frame: Callable[[bytes], Awaitable[None]] | None = None
        self._early: list[bytes] = []  # frames that came before anyone listened (a terminal's typed-ahead input)
        self._reader: asyncio.Task | None = None
        self._flowing = asyncio.Event()  # cleared while a stall fault holds every frame back
        self._flowing.set()
        self.finished = False

    async def accept(self) -> None:
        await self.ws.accept()
        with self._lock:
            self.record.status = 101
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            while True:
                msg = await self.ws.receive()
                if msg["type"] == "websocket.disconnect":
                    with self._lock:
                        if self.record.closed_by is None:
                            self.record.closed_by, self.record.close_code = "client", msg.get("code")
                            self.record.close_reason = msg.get("reason") or ""
                    return
                data = msg.get("bytes")
                kind = "binary"
                if data is None:
                    data, kind = msg.get("text") or "", "text"
                with self._lock:
                    self.record.received.append((kind, data))
                payload = data.encode("utf-8") if isinstance(data, str) else data
                if self._on_frame is not None:
                    await self._on_frame(payload)
                else:
                    self._early.append(payload)
        except Exception:  # the transport went away under us
            return
        finally:
            self.gone.set()

    async def listen(self, on_frame: Callable[[bytes], Awaitable[None]]) -> None:
        """Deliver the client's frames (those that came already first) to `on_frame`."""
        early, self._early = self._early, []
        for payload in early:
            await on_frame(payload)
        self._on_frame = on_frame

    async def send(self, data: str | bytes) -> None:
        await self._flowing.wait()  # a stall silences the whole socket (a terminal's echo too)
        if self.gone.is_set() or self.finished:
            raise Gone()
        d = self.decision
        if d.drop and self.record.sent >= d.drop_after:
            self.abort()
            raise Gone()
        try:
            if isinstance(data, bytes):
                await self.ws.send_bytes(data)
            else:
                await self.ws.send_text(data)
        except Exception as exc:  # the client left between our check and the write
            self.gone.set()
            raise Gone() from exc
        with self._lock:
            self.record.sent += 1
        if d.stall and self.record.sent == d.stall[1]:
            self._flowing.clear()
            try:
                await asyncio.sleep(d.stall[0])  # silence, as a stalled Docker stream gives
            finally:
                self._flowing.set()

    async def send_json(self, value: Any) -> None:
        await self.send(json.dumps(value, ensure_ascii=False, separators=(",", ":")))

    async def close(self, code: int, reason: str) -> None:
        if self.finished or self.gone.is_set():
            return
        self.finished = True
        with self._lock:
            self.record.closed_by, self.record.close_code, self.record.close_reason = "server", code, reason
        try:
            await self.ws.close(code, reason)
        except Exception:
            pass

    def abort(self) -> None:
        """End the connection without a close frame (Arcane's CloseNow): the client sees 1006."""
        if self.finished:
            return
        self.finished = True
        with self._lock:
            if self.record.closed_by is None:
                self.record.closed_by, self.record.close_code = "abrupt", None
        protocol = getattr(self._raw_send, "__self__", None)
        transport = getattr(protocol, "transport", None)
        if transport is not None:
            transport.abort()
        self.gone.set()

    async def wait_gone(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self.gone.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def end(self) -> None:
        """The handler returns without a close frame (uvicorn closes the TCP connection)."""
        if not self.finished and not self.gone.is_set():
            with self._lock:
                if self.record.closed_by is None:
                    self.record.closed_by = "abrupt"
        self.finished = True
        if self._reader is not None:
            self._reader.cancel()


@dataclass
class Call:
    """What a kind function gets: the route, its parameters and query, where it runs and as whom."""

    app: Any  # SimulatorApp
    conn: Conn
    route: dict
    params: dict[str, str]
    query: dict[str, str]
    env: str | None
    principal: Any
    remote: bool  # answered by a remote agent through the proxy
    client_ip: str
    user_agent: str

    @property
    def knobs(self):
        return self.app.sim.knobs.current

    def scaled(self, seconds: float) -> float:
        return self.knobs.scaled(seconds)


# ---------------------------------------------------------------- hubs


class Hub:
    """Frames shared by every client of one key (a log stream, a container's stats)."""

    def __init__(self, key: tuple, registry: dict):
        self.key = key
        self.registry = registry
        self.queues: set[asyncio.Queue] = set()
        self.started = asyncio.Event()
        self.done = False
        self.seq = 0
        self.task: asyncio.Task | None = None
        self.first_frame = True
        self.idle: asyncio.TimerHandle | None = None

    def publish(self, frame: Any) -> None:
        for q in list(self.queues):
            q.put_nowait(frame)

    def join(self) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue()
        self.queues.add(q)
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None
        self.started.set()
        return q

    def leave(self, q: asyncio.Queue) -> bool:
        """True when this was the last client."""
        self.queues.discard(q)
        return not self.queues

    def stop(self) -> None:
        if self.registry.get(self.key) is self:
            del self.registry[self.key]
        if self.task is not None:
            self.task.cancel()


CUT = object()  # a hub's frame: cut every client's connection (no close frame)


async def pump(call: Call, hub: Hub, q: asyncio.Queue) -> None:
    """Send a hub's frames to one client until it leaves (or the hub cuts it)."""
    conn = call.conn
    while True:
        getter = asyncio.ensure_future(q.get())
        gone = asyncio.ensure_future(conn.gone.wait())
        done, _ = await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            gone.cancel()
            return
        gone.cancel()
        frame = getter.result()
        if frame is CUT:
            conn.abort()
            return
        await conn.send(frame)


# ---------------------------------------------------------------- the front door


class SocketRoutes:
    """The ASGI side for `websocket` scopes."""

    def __init__(self, app):
        self.app = app
        self.sim = app.sim
        self.spec = app.behaviour.websockets
        self.routes = []
        for route in self.spec["routes"]:
            segs = route["path"].strip("/").split("/")
            self.routes.append((route, segs))
        self.log_hubs: dict[tuple, Hub] = {}
        self.stats_hubs: dict[tuple, Hub] = {}
        self.stats_history: dict[tuple, list] = {}
        self.system_clients: dict[str, int] = {}
        self.samplers: dict[str, dict] = {}
        self.connections: dict[str, dict] = {}  # metrics: id -> connection info (diagnostics)
        self._ids = 0

    def names(self, route: dict | None) -> tuple[str, ...]:
        if route is None:
            return ()
        label = self.sim.labels.get(route["name"])
        return (route["name"], label) if label else (route["name"],)

    def match(self, rel: str) -> tuple[dict, dict] | None:
        segments = [urllib.parse.unquote(s) for s in rel.strip("/").split("/")]
        for route, segs in self.routes:
            if len(segs) != len(segments):
                continue
            params = {}
            for want, got in zip(segs, segments, strict=True):
                if want.startswith("{") and want.endswith("}"):
                    if got == "":
                        break
                    params[want[1:-1]] = got
                elif want != got:
                    break
            else:
                return route, params
        return None

    async def deny(self, ws: WebSocket, record: SocketRecord, status: int, body: Any, media_type: str = "application/json",
                   headers: dict | None = None) -> None:
        payload = body if isinstance(body, (bytes, str)) else json.dumps(body, ensure_ascii=False)
        payload = payload.encode("utf-8") if isinstance(payload, str) else payload
        hdrs = [(b"content-type", media_type.encode()), (b"content-length", str(len(payload)).encode())]
        hdrs += [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
        with self.sim.records_lock:
            record.status = status
        await ws.send({"type": "websocket.http.response.start", "status": status, "headers": hdrs})
        await ws.send({"type": "websocket.http.response.body", "body": payload, "more_body": False})

    async def __call__(self, scope, receive, send) -> None:
        app = self.app
        ws = WebSocket(scope, receive, send)
        raw_path = scope.get("raw_path", scope["path"].encode()).decode("latin-1").split("?", 1)[0]
        rel = raw_path[len(API_PREFIX):] if raw_path.startswith(API_PREFIX + "/") else None
        found = self.match(rel) if rel is not None else None
        route, params = found if found else (None, {})
        names = self.names(route)
        credential = app.credential(ws)
        record = self.sim.record_socket(ws, route["name"] if route else None, names[-1] if names else None, credential)
        app.store.advance()
        decision = app.faults.decide(names, rel or raw_path, scope["path"], streaming=True, websocket=True)
        conn: Conn | None = None
        try:
            if decision.latency:
                await asyncio.sleep(decision.latency)
            if decision.drop and decision.drop_after == 0:
                Conn(ws, send, record, decision, self.sim.records_lock).abort()
                return
            if decision.error_status:
                await self.deny(ws, record, decision.error_status, app.problem_body(decision.error_status, decision.error_detail
                                or "simulated server error (error_5xx fault)"), "application/problem+json")
                return
            if route is None:
                await self.deny(ws, record, 404, render(app.behaviour.catch_all["body"], {"path": scope["path"]}))
                return
            env = params.get(app.behaviour.environments["param"]) if route["path"].startswith(app.behaviour.environments["path_prefix"]) else None
            with self.sim.records_lock:
                record.environment = env
            if decision.ws_refuse:
                status, body = self.refusal(decision.ws_refuse, route)
                await self.deny(ws, record, status, body)
                return
            local = str(app.behaviour.environments.get("local", "0"))
            remote = env is not None and env != local
            if remote:
                outcome = self.proxy(ws, route, env)
                if isinstance(outcome, tuple):
                    await self.deny(ws, record, *outcome)
                    return
                principal = outcome
            else:
                principal = app.echo_principal(ws)
                if not hasattr(principal, "allows"):
                    await self.deny(ws, record, *principal)
                    return
                perm = route["permission"]
                if not principal.allows(perm, env, app.behaviour.permissions.catalog):
                    await self.deny(ws, record, int(self.spec["permission_denied"]["status"]),
                                    render(self.spec["permission_denied"]["body"], {"permission": perm}))
                    return
            if not self.origin_ok(ws):
                o = self.spec["origin"]
                await self.deny(ws, record, int(o["status"]), o["text"], "text/plain; charset=utf-8")
                return
            client_ip = ws.client.host if ws.client else "unknown"
            pre = PRECHECKS.get(route["kind"])
            if pre is not None and not remote:
                refused = pre(self, client_ip)
                if refused is not None:
                    await self.deny(ws, record, *refused)
                    return
            conn = Conn(ws, send, record, decision, self.sim.records_lock)
            await conn.accept()
            if remote and app.faults.is_agent_down(env):
                bad = self.spec["agent_unreachable"]
                await conn.close(int(bad["code"]), bad["reason"])
                return
            call = Call(app, conn, route, params, dict(ws.query_params), env, principal, remote, client_ip, ws.headers.get("user-agent", ""))
            metric = route.get("metric") if not remote else None
            conn_id = self.register(call, metric) if metric else None
            try:
                await KINDS[route["kind"]](call)
            finally:
                if conn_id:
                    self.connections.pop(conn_id, None)
                if route["kind"] == "system_stats" and not remote:
                    self.system_clients[client_ip] = max(self.system_clients.get(client_ip, 1) - 1, 0)
        except Gone:
            pass
        except Exception:
            app.log.exception("simulator error on WebSocket %s", scope["path"])
            app.violation(None, 500, [f"simulator error on WebSocket {scope['path']}"])
            if conn is not None:
                conn.abort()
        finally:
            if conn is not None:
                conn.end()

    # ------------------------------------------------------------ before the upgrade

    def refusal(self, status: int, route: dict) -> tuple[int, Any]:
        msgs = self.app.behaviour.echo["auth"]
        if status == 401:
            return int(msgs["missing"]["status"]), msgs["missing"]["body"]
        if status == 403:
            d = self.spec["permission_denied"]
            return int(d["status"]), render(d["body"], {"permission": route["permission"]})
        t = self.app.behaviour.system_stats["too_many"]
        return int(t["status"]), t["body"]

    def proxy(self, ws: WebSocket, route: dict, env: str):
        """The environment proxy in front of a remote agent: (status, body) when it
        refuses, else the principal (the agent then acts with a sudo permission set)."""
        app = self.app
        cfg = app.behaviour.environments
        ctx = {"env": env}
        key = ws.headers.get("x-api-key")
        token = app.bearer(ws)
        principal = app.key_principal(key) if key else (app.session_principal(token) if token else None)
        if principal is None:
            return int(cfg["unauthenticated"]["status"]), render(cfg["unauthenticated"]["body"], ctx)
        env_item = app.store.environment(env)
        if env_item is None:
            return int(cfg["unknown"]["status"]), render(cfg["unknown"]["body"], ctx)
        for rule in cfg.get("refuse") or []:
            if matches_where(env_item, rule["where"], ctx):
                return int(rule["status"]), render(rule["body"], ctx)
        if not principal.allows(route["permission"], env, app.behaviour.permissions.catalog):
            return int(cfg["forbidden"]["status"]), render(cfg["forbidden"]["body"], ctx)
        return principal

    def origin_ok(self, ws: WebSocket) -> bool:
        origin = ws.headers.get("origin")
        if not origin:
            return True
        try:
            o_host = urllib.parse.urlsplit(origin).netloc
        except ValueError:
            return False
        host = ws.headers.get("host", "")
        app_host = urllib.parse.urlsplit(self.sim.app_url or "").netloc

        def loopback(h: str) -> bool:
            bare = h.rsplit(":", 1)[0] if h.count(":") == 1 or h.startswith("[") else h
            return bare in ("localhost", "127.0.0.1", "::1", "[::1]") or bare.startswith("127.")
        return o_host == host or (app_host and o_host == app_host) or (loopback(o_host) and loopback(host))

    def register(self, call: Call, metric: str) -> str:
        self._ids += 1
        conn_id = f"ws-{self._ids}"
        info = {"id": conn_id, "kind": metric}
        for k, v in (("envId", call.env), ("resourceId", next(iter(v for k2, v in call.params.items() if k2 != "id"), None)),
                     ("clientIp", call.client_ip), ("userId", getattr(call.principal, "username", None) and f"user-{call.principal.username}"),
                     ("userAgent", call.user_agent)):
            if v:
                info[k] = v
        info["startedAt"] = self.app.store.stamp()
        self.connections[conn_id] = info
        return conn_id

    def metrics(self) -> dict:
        counts = {"projectLogsActive": 0, "containerLogsActive": 0, "containerStats": 0, "containerExec": 0, "systemStats": 0, "serviceLogsActive": 0}
        names = {"project_logs": "projectLogsActive", "container_logs": "containerLogsActive", "container_stats": "containerStats",
                 "container_exec": "containerExec", "system_stats": "systemStats", "service_logs": "serviceLogsActive"}
        for info in self.connections.values():
            counts[names[info["kind"]]] += 1
        return {"snapshot": counts, "connections": list(self.connections.values())}


def _system_stats_precheck(routes: SocketRoutes, client_ip: str):
    spec = routes.app.behaviour.system_stats
    if routes.system_clients.get(client_ip, 0) >= int(spec["max_per_ip"]):
        return int(spec["too_many"]["status"]), spec["too_many"]["body"]
    routes.system_clients[client_ip] = routes.system_clients.get(client_ip, 0) + 1
    return None


PRECHECKS: dict[str, Callable[[SocketRoutes, str], Any]] = {"system_stats": _system_stats_precheck}


# ---------------------------------------------------------------- lookups shared by the kinds


def lookup(call: Call, collection: str, key: str) -> tuple[dict | None, str]:
    """The item a path key names in the call's environment, or (None, the daemon's reason)."""
    app = call.app
    coll = app.behaviour.collections[collection]
    ctx = {"key": key}
    try:
        item = app.store.find(coll, call.env, key)
        reason = coll.not_found
    except Ambiguous:
        item, reason = None, coll.ambiguous
    return item, str(render(reason, ctx))


def daemon_text(call: Call, spec: dict) -> str | None:
    """The source's text for a down daemon, when the daemon_down fault holds."""
    mode = call.app.faults.down_mode(call.env)
    if mode is None:
        return None
    return str(render(spec[mode], {"docker_error": call.app.behaviour.daemon_down["docker_error"]}))


# ---------------------------------------------------------------- logs


def _flag(query: dict, name: str, default: str) -> bool:
    return (query.get(name) or default) == "true"


async def serve_logs(call: Call) -> None:
    spec = call.app.behaviour.logs
    d = spec["defaults"]
    q = call.query
    params = {
        "follow": (q.get("follow") or d["follow"]) == "true",
        "tail": q.get("tail") or d["tail"],
        "since": q.get("since") or "",
        "timestamps": q.get("timestamps") == "true",
        "format": "json" if (q.get("format") or d["format"]) == "json" else "text",
        "batched": q.get("batched") == "true",
    }
    resource = next(v for k, v in call.params.items() if k != call.app.behaviour.environments["param"])
    routes: SocketRoutes = call.app.sockets
    key = (call.env, call.route["source"], resource, params["format"], params["batched"], params["follow"], params["tail"],
           params["since"], params["timestamps"])
    hub = routes.log_hubs.get(key)
    if hub is None or hub.done:
        hub = Hub(key, routes.log_hubs)
        routes.log_hubs[key] = hub
        hub.task = asyncio.ensure_future(_log_source(call, hub, resource, params))
    queue = hub.join()
    try:
        await pump(call, hub, queue)
    finally:
        if hub.leave(queue):
            hub.stop()


class _Framer:
    """Arcane's forwarders: one text frame per line, one JSON object per line, or JSON
    arrays of up to 50 flushed every 400 ms (and once more when the source ends)."""

    def __init__(self, call: Call, hub: Hub, params: dict):
        self.call, self.hub, self.params = call, hub, params
        self.spec = call.app.behaviour.logs
        self.buffer: list[dict] = []
        self.flusher: asyncio.Task | None = None
        if params["format"] == "json" and params["batched"]:
            self.flusher = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.call.scaled(float(self.spec["batch"]["flush_seconds"])))
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.hub.publish(json.dumps(self.buffer, ensure_ascii=False, separators=(",", ":")))
            self.buffer = []

    def line(self, raw: str, project: bool) -> None:
        mark = self.spec["stderr"]["mark"]
        if self.params["format"] != "json":
            self.hub.publish(normalize_project_line(raw, mark)[2] if project else raw)
            return
        self.hub.seq += 1
        if project:
            level, service, text, ts = normalize_project_line(raw, mark)
        else:
            (level, text, ts), service = normalize_container_line(raw, mark), ""
        msg = log_message(self.hub.seq, level, text, ts or self.call.app.store.stamp(), service)
        if self.params["batched"]:
            self.buffer.append(msg)
            if len(self.buffer) >= int(self.spec["batch"]["max"]):
                self.flush()
        else:
            self.hub.publish(json.dumps(msg, ensure_ascii=False, separators=(",", ":")))

    def error(self, text: str) -> None:
        self.flush()
        if self.params["format"] == "json":
            self.hub.seq += 1
            msg = log_message(self.hub.seq, "error", text, self.call.app.store.stamp(), self.spec["error"]["service"])
            self.hub.publish(json.dumps(msg, ensure_ascii=False, separators=(",", ":")))
        else:
            self.hub.publish(text)

    def end(self) -> None:
        self.flush()
        if self.flusher is not None:
            self.flusher.cancel()


def _members(call: Call, source: str, src_spec: dict, item: dict) -> list[tuple[dict, str]]:
    """The log-bearing items of a source and the prefix each line gets."""
    if source == "container":
        return [(item, "")]
    if source == "service":
        tasks = [t for t in call.app.store.items(call.app.behaviour.collections["swarm_tasks"], call.env) if t.get("serviceId") == item.get("id")]
        task = tasks[0] if tasks else {}
        private = item.get("_sim") or {}
        details = str(render(src_spec["details"], {"node": private.get("node") or task.get("nodeId") or (item.get("nodes") or [""])[0],
                                                     "service": item.get("id"), "task": private.get("task") or task.get("id", "")}))
        return [(item, details + " ")]
    members = src_spec["members"]
    project = str(item.get(members["equals"]) or "")
    containers = call.app.store.items(call.app.behaviour.collections["containers"], call.env)
    out = []
    for c in containers:
        if str((c.get("labels") or {}).get(members["label"]) or "") == project:
            out.append((c, str(render(src_spec["line"], {"service": compose_name(c, project), "message": ""}))))
    return out


async def _log_source(call: Call, hub: Hub, resource: str, params: dict) -> None:
    """The Docker side of one log hub: started when its first client arrives."""
    await hub.started.wait()
    app = call.app
    spec = app.behaviour.logs
    source = call.route["source"]
    src_spec = spec["sources"][source]
    framer = _Framer(call, hub, params)
    mark = spec["stderr"]["mark"]
    try:
        down = daemon_text(call, src_spec["daemon"])
        if down is not None:
            framer.error(str(render(src_spec["error"], {"reason": down})))
            return
        if source == "project":
            coll = app.behaviour.collections[src_spec["collection"]]
            with app.store.lock:
                item = next((p for p in app.store.items(coll, call.env) if str(p.get(coll.key)) == resource), None)
            reason = src_spec["not_found"]
        else:
            item, reason = lookup(call, src_spec["collection"], resource)
            reason = str(render(src_spec["not_found"], {"reason": reason}))
        if item is None:
            framer.error(str(render(src_spec["error"], {"reason": reason})))
            return
        since_ns, bad = parse_since(params["since"], app.store.now() * 1_000_000_000)
        if bad:
            framer.error(str(render(src_spec["error"], {"reason": bad})))
            return
        members = _members(call, source, src_spec, item)
        with app.store.lock:
            lines = merge(item_lines(m, f"{i}") for i, (m, _) in enumerate(members))
        prefixes = {f"{i}": p for i, (_, p) in enumerate(members)}
        # a TTY container has one raw stream: nothing on it is marked stderr (Arcane 2.10+
        # keeps a project service's stderr apart too, live.yaml sources.project)
        ttys = {f"{i}": is_tty(m) for i, (m, _) in enumerate(members)}
        if source == "project":
            # compose's Logs reads each container with the same Tail (docker compose logs
            # --tail: "from the end of the logs for each container"), then interleaves them
            selected = merge(cut([line for line in lines if line.source == key], params["tail"], since_ns) for key in prefixes)
        else:
            selected = cut(lines, params["tail"], since_ns)
        if source != "project":
            selected = arrival_order(selected, params["follow"], ttys.get("0", False))
        last_ns = max((line.ns for line in lines), default=0)
        for line in selected:
            framer.line(_channel_line(line, params, ttys, prefixes, mark, source), source == "project")
        if not params["follow"]:
            return
        await _follow(call, framer, members, prefixes, ttys, last_ns, params, source)
    finally:
        framer.end()
        hub.done = True  # the socket stays open: only the client's leaving ends it


def _channel_line(line, params: dict, ttys: dict, prefixes: dict, mark: str, source: str) -> str:
    """A member's line as Arcane 2.10+ reads it: the stderr mark, Docker's timestamp, then
    a project service's "<name> | " or a Swarm service's details (Docker's Details), then
    the text; Arcane's normalizer takes the mark and the timestamp into the JSON frame's
    level and timestamp members (live.yaml sources.project)."""
    return channel_line(line, timestamps=params["timestamps"], tty=ttys[line.source], mark=mark, prefix=prefixes[line.source])


async def _follow(call: Call, framer: _Framer, members, prefixes, ttys, last_ns: int, params: dict, source: str) -> None:
    """New lines as the containers write them; a container that is not running ends the
    follow (Docker's follow stops with it), as does a project with none running."""
    app = call.app
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    ids = {str(m.get("id")) for m, _ in members}

    def listener(kind: str, env: str | None, payload: dict) -> None:
        if kind in ("log", "state", "reset") and (env is None or env == call.env) and (kind != "log" or payload.get("item") in ids):
            loop.call_soon_threadsafe(wake.set)

    unsubscribe = app.store.subscribe(listener)
    counter = 0
    try:
        while True:
            with app.store.lock:
                running = [m for m, _ in members if m.get("state") == "running"]
                lines = merge(item_lines(m, f"{i}") for i, (m, _) in enumerate(members))
            for line in lines:
                if line.ns > last_ns:
                    framer.line(_channel_line(line, params, ttys, prefixes, app.behaviour.logs["stderr"]["mark"], source), source == "project")
            last_ns = max([last_ns] + [line.ns for line in lines])
            if not running:
                return
            cadence = call.knobs.log_follow_seconds
            wake.clear()
            try:
                await asyncio.wait_for(wake.wait(), call.scaled(cadence) if cadence else None)
            except TimeoutError:
                counter += 1
                target = running[counter % len(running)]
                text = str(render(app.behaviour.logs["follow_line"]["text"], {"name": str((target.get("names") or [""])[0]).lstrip("/"), "n": counter}))
                app.append_log(target, text, "stdout", call.env)
    finally:
        unsubscribe()


# ---------------------------------------------------------------- container stats


async def serve_container_stats(call: Call) -> None:
    routes: SocketRoutes = call.app.sockets
    resource = call.params["containerId"]
    key = (call.env, resource)
    hub = routes.stats_hubs.get(key)
    if hub is None:
        hub = Hub(key, routes.stats_hubs)
        routes.stats_hubs[key] = hub
        hub.task = asyncio.ensure_future(_stats_source(call, hub, resource))
    queue = hub.join()
    try:
        await pump(call, hub, queue)
    finally:
        if hub.leave(queue) and hub.registry.get(key) is hub:
            # torn down 5 s after its last client leaves (a reconnect inside the grace keeps it)
            hub.idle = asyncio.get_running_loop().call_later(call.scaled(float(call.app.behaviour.container_stats["idle_teardown_seconds"])), hub.stop)


async def _stats_source(call: Call, hub: Hub, resource: str) -> None:
    await hub.started.wait()
    app = call.app
    spec = app.behaviour.container_stats
    routes: SocketRoutes = app.sockets
    interval = float(spec["interval_seconds"])

    def error(reason: str) -> None:
        hub.publish(json.dumps({"error": str(render(spec["error"], {"reason": reason})), "timestamp": app.store.stamp()},
                               separators=(",", ":")))
        if hub.registry.get(hub.key) is hub:
            del hub.registry[hub.key]  # the next connect builds a new producer

    down = daemon_text(call, spec["daemon"])
    item = None
    if down is None:
        item, reason = lookup(call, "containers", resource)
        if item is None:
            down = str(render(spec["not_found"], {"reason": reason}))
    if down is not None:
        error(down)
        await asyncio.sleep(call.scaled(float(spec["error_grace_seconds"])))
        hub.publish(CUT)  # the hub is cancelled: every client's socket is closed without a frame
        return
    host = app.behaviour.system_stats["host"]
    base = container_base(item, int(host["cpuCount"]), int(host["memoryTotal"]))
    history = routes.stats_history.setdefault((call.env, resource), [])
    n, preread = 0, ZERO_TIME
    while True:
        n += 1
        read = app.store.stamp()
        with app.store.lock:
            frame = container_frame(item, n, read, preread, base, interval)
        preread = read
        sample = history_sample(frame)
        history.append(sample)
        del history[: -int(spec["history_capacity"])]
        if hub.first_frame:
            frame["statsHistory"] = list(history)
            hub.first_frame = False
        frame["currentHistorySample"] = sample
        hub.publish(json.dumps(frame, separators=(",", ":")))
        await asyncio.sleep(call.scaled(interval))


# ---------------------------------------------------------------- system stats


async def serve_system_stats(call: Call) -> None:
    spec = call.app.behaviour.system_stats
    try:
        interval = int(call.query.get("interval") or 0)
    except ValueError:
        interval = 0
    if interval <= 0:
        interval = int(spec["default_interval"])
    routes: SocketRoutes = call.app.sockets
    sampler = routes.samplers.setdefault(call.env, {"n": 0, "clients": {}, "latest": None, "task": None})
    me = object()
    sampler["clients"][me] = interval

    async def tick() -> None:
        while sampler["clients"]:
            sampler["n"] += 1
            env_item = call.app.store.environment(call.env) or {}
            sampler["latest"] = system_frame(str(call.env), sampler["n"], spec["host"], str(env_item.get("name") or "docker-host"))
            await asyncio.sleep(call.scaled(min(sampler["clients"].values())))

    if sampler["task"] is None or sampler["task"].done():
        sampler["task"] = asyncio.ensure_future(tick())
    await asyncio.sleep(0)
    try:
        while True:
            if sampler["latest"] is not None:
                await call.conn.send_json(sampler["latest"])
            if await call.conn.wait_gone(call.scaled(interval)):
                return
    finally:
        sampler["clients"].pop(me, None)
        if not sampler["clients"] and sampler["task"] is not None:
            sampler["task"].cancel()
            sampler["task"] = None


# ---------------------------------------------------------------- diagnostics


def diagnostics_snapshot(app) -> dict:
    spec = app.behaviour.diagnostics_stream
    runtime = dict(spec["runtime"])
    runtime["uptimeSeconds"] = app.store.now() - int(app.behaviour.clock.get("start", 0))
    gc = dict(spec["gc"])
    gc["lastGc"] = app.store.stamp()
    return {"timestamp": app.store.stamp(), "runtime": runtime, "memory": dict(spec["memory"]), "gc": gc,
            "websocket": app.sockets.metrics()}


async def serve_diagnostics(call: Call) -> None:
    app = call.app
    interval = float(app.behaviour.diagnostics_stream["interval_seconds"])
    while True:
        snapshot = diagnostics_snapshot(app)
        app.check_value(snapshot, "SystemDiagnostics", "diagnostics stream frame")
        await call.conn.send_json(snapshot)
        if await call.conn.wait_gone(call.scaled(interval)):
            return


async def serve_server_logs(call: Call) -> None:
    app = call.app
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def listener(kind: str, env: str | None, payload: dict) -> None:
        if kind == "server_log":
            loop.call_soon_threadsafe(queue.put_nowait, payload["entry"])

    unsubscribe = app.store.subscribe(listener)  # subscribe before the backlog: nothing falls in between
    try:
        backlog = app.server_log_backlog()
        for entry in backlog[-int(app.behaviour.diagnostics_stream["backlog"]):]:
            await call.conn.send_json(entry)
        while True:
            getter = asyncio.ensure_future(queue.get())
            gone = asyncio.ensure_future(call.conn.gone.wait())
            done, _ = await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                return
            gone.cancel()
            await call.conn.send_json(getter.result())
    finally:
        unsubscribe()


# ---------------------------------------------------------------- terminal


def _machine(call: Call, item: dict, family: dict) -> Machine:
    app = call.app
    private = item.get("_sim") or {}
    config = private.get("config") or {}
    user = str(config.get("user") or "root").split(":")[0] or "root"
    uid = 0 if user == "root" else 1000
    hostname = str(config.get("hostname") or str(item.get("id", ""))[:12])
    env = {}
    for pair in config.get("env") or []:
        name, _, value = str(pair).partition("=")
        env[name] = value
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    env["HOSTNAME"] = hostname
    env.setdefault("TERM", "xterm")
    home = "/root" if uid == 0 else f"/home/{user}"
    env.setdefault("HOME", home)
    ip = next((n.get("ipAddress") for n in ((item.get("networkSettings") or {}).get("networks") or {}).values() if n.get("ipAddress")), "172.17.0.2")
    files = {
        "/etc/hostname": hostname + "\n",
        "/etc/hosts": f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{ip}\t{hostname}\n",
        "/etc/os-release": family["os_release"],
        "/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n" + (f"{user}:x:{uid}:{uid}::{home}:/bin/sh\n" if uid else ""),
    }
    for path, content in (private.get("files") or {}).items():
        files[str(path)] = str(content)
    dirs = {"/bin", "/dev", "/etc", "/home", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/local", "/var", "/var/log"}
    cwd = str(config.get("workingDir") or "/") or "/"
    dirs.add(cwd)
    return Machine(env=env, files=files, dirs=dirs, identity=Identity(user=user, uid=uid, gid=uid, hostname=hostname, home=home),
                   cwd=cwd, now=app.store.now)


def _family(spec: dict, item: dict) -> dict:
    image = str(item.get("image") or "")
    for family in spec["shells"]["images"]:
        if any(fnmatchcase(image, g) for g in family["match"]):
            return family
    return spec["shells"]["images"][-1]


async def serve_terminal(call: Call) -> None:
    app = call.app
    spec = app.behaviour.terminal
    conn = call.conn
    shell_path = call.query.get("shell") or spec["default_shell"]
    knobs = call.knobs
    item, reason = lookup(call, "containers", call.params["containerId"])
    down = daemon_text(call, app.behaviour.logs["sources"]["container"]["daemon"])
    docker = spec["docker"]
    if down is not None:
        reason = down.replace("failed to inspect container for logs: ", "")
    elif item is not None and item.get("state") == "paused":
        reason = str(render(docker["paused"], {"item": item}))
    elif item is not None and item.get("state") != "running":
        reason = str(render(docker["not_running"], {"item": item}))
    if down is not None or item is None or item.get("state") != "running":
        err = spec["create_error"]
        cause = str(render(err["reason"], {"docker": reason}))
        await conn.send(str(render(err["frame"], {"reason": cause})))
        if knobs.exec_close == "2.8":
            conn.abort()
        else:
            close = err["close"]
            await conn.close(int(close["code"]), (close["prefix"] + cause)[: int(close["max_reason"])])
        app.server_log("WARN", "Container exec session ended", {"containerID": call.params["containerId"], "status": 1011, "reason": cause})
        return
    family = _family(spec, item)
    shells = dict(family["shells"])
    shells.update((item.get("_sim") or {}).get("shells") or {})
    flavour_name = shells.get(shell_path)
    chunk = int(spec["read_chunk"])

    async def write(data: bytes) -> None:
        for i in range(0, len(data), chunk):
            await conn.send(data[i : i + chunk])

    if flavour_name is None:
        # the exec is created and attached; runc cannot start the shell: its error, then EOF
        await write(str(render(docker["missing_shell"], {"shell": shell_path})).encode("utf-8"))
    else:
        flavour = Flavour.from_data(flavour_name, spec["shells"]["flavours"][flavour_name])
        shell = Shell(flavour, _machine(call, item, family), write, asyncio.sleep, knobs.time_scale)
        runner = asyncio.ensure_future(shell.run())
        await conn.listen(shell.feed)
        gone = asyncio.ensure_future(conn.gone.wait())
        done, _ = await asyncio.wait({runner, gone}, return_when=asyncio.FIRST_COMPLETED)
        if runner not in done:
            runner.cancel()  # the client left: Arcane writes ^D and "exit" to the TTY, the shell ends
            return
        gone.cancel()
        exc = runner.exception()
        if exc is not None and not isinstance(exc, Gone):
            raise exc
    if knobs.exec_close == "2.8":
        conn.abort()
    else:
        done_spec = spec["shell_exited"]
        await conn.close(int(done_spec["code"]), done_spec["reason"])
    app.server_log("INFO", "Container exec session ended", {"containerID": call.params["containerId"], "status": 1000, "reason": "shell exited"})


KINDS: dict[str, Callable[[Call], Awaitable[None]]] = {
    "logs": serve_logs,
    "container_stats": serve_container_stats,
    "terminal": serve_terminal,
    "system_stats": serve_system_stats,
    "diagnostics": serve_diagnostics,
    "server_logs": serve_server_logs,
}
