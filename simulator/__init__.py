"""The Arcane simulator: a stand-in for a real Arcane in tests and in `make run`.

It serves every operation of an OpenAPI document (Arcane's own, embedded, by default)
over real HTTP under /api, statefully, from its own data (docs/simulator.md):

    simulator/data/behaviour/*.yaml   what each operation does (by operationId),
                                                  the permission it needs, Arcane's texts,
                                                  each behaviour with the source it follows
    simulator/data/state/*.yaml       the items, API keys, login users and faults

It imports nothing from the engine: routes, parameters, security and responses come
from the document, the corrections the document needs from the behaviour data. Every
answer it sends is validated against the document; an invalid one is recorded in
`violations` (a simulator bug that tests assert away). Requests are recorded; faults
(latency, 5xx, dropped connections, malformed bodies, a down Docker daemon, an
unreachable agent, failing or silent NDJSON streams, WebSockets cut or silent after N
frames or refused) can be set from the state or at runtime; knobs set how fast its clocks
run. Arcane's WebSocket routes (logs, stats, a terminal, diagnostics) and its live
channel are served on the same port; every socket is recorded with the frames it got.

    from simulator import start_simulator
    with start_simulator() as sim:
        httpx.get(sim.url + "/api/environments/0/containers", headers={"X-API-Key": sim.api_key})
        assert sim.violations == []
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .app import REDACTED, SECRET_HEADERS, RecordedRequest, SimulatorApp, Violation
from .document import DOCUMENT_PATH, Operation, load_document, operations
from .faults import FaultError, Faults, parse_faults
from .knobs import KnobError, KnobHolder, Knobs
from .listen import bind
from .model import BEHAVIOUR_PATH, DEMO_STATE_PATH, ApiKey, Behaviour, load_behaviour, load_files, load_state
from .schemas import DocSchemas
from .sockets import RecordedSocket, SocketRecord
from .store import Store

__all__ = ["Simulator", "SimulatorHandle", "start_simulator", "main", "check_data", "RecordedRequest", "RecordedSocket", "Violation",
           "FaultError", "KnobError", "Knobs"]


def _behaviour_prefix(path: Path) -> tuple[str, str]:
    """The environment prefix and parameter, read from the behaviour data before the
    document's operations are built (they decide which operations are per environment)."""
    files, _ = load_files(path, "behaviour.schema.json")  # parsed once, cached for load_behaviour
    for loaded in files:
        env = (loaded.data or {}).get("environments")
        if isinstance(env, dict) and "path_prefix" in env:
            return env["path_prefix"], env.get("param", "id")
    return "/environments/{id}/", "id"


def check_data(behaviour: str | Path | None = None, state: str | Path | None = None, document: str | Path | None = None):
    """Load and check the simulator's data against its schemas and the document (a
    RuleError lists every problem); returns (Behaviour, StateData). The simulator runs this
    when it starts."""
    behaviour_path = Path(behaviour) if behaviour else BEHAVIOUR_PATH
    doc = DocSchemas(load_document(document))
    prefix, param = _behaviour_prefix(behaviour_path)
    ops = {o.operation_id: o for o in operations(doc.document, prefix, param)}
    strict = document is None or Path(document).resolve() == DOCUMENT_PATH.resolve()
    b = load_behaviour(doc, ops, behaviour_path, strict=strict)
    return b, load_state(b, doc, Path(state) if state else DEMO_STATE_PATH, strict=strict)


def _raw_path(scope) -> str:
    """The request's path as it arrived, percent-encoding kept (ASGI `raw_path`, without the query)."""
    raw = scope.get("raw_path")
    return raw.split(b"?", 1)[0].decode("latin-1") if isinstance(raw, bytes) else scope.get("path", "")


class Simulator:
    """One simulated Arcane: document, behaviour, state, faults and records.

    Thread-safe: the server thread handles requests while a test thread reads records,
    changes faults or resets the state.

    `document` serves another OpenAPI document (another Arcane version): its operations
    are routed, the behaviour data of operations it lacks is skipped. `labels` names
    operations the caller's way (the tests give the engine's action IDs): records carry
    the label, fault `match` globs may use it; nothing else reads it.
    """

    def __init__(self, state: str | Path | None = None, *, faults: dict | None = None, api_key: str | None = None,
                 behaviour: str | Path | None = None, document: str | Path | None = None,
                 labels: Mapping[str, str] | None = None, catalog: Any = None, knobs: dict | None = None):
        behaviour_path = Path(behaviour) if behaviour else BEHAVIOUR_PATH
        self.document_path = Path(document) if document else DOCUMENT_PATH
        self.doc = DocSchemas(load_document(self.document_path))
        prefix, param = _behaviour_prefix(behaviour_path)
        self.operations: dict[str, Operation] = {o.operation_id: o for o in operations(self.doc.document, prefix, param)}
        strict = self.document_path.resolve() == DOCUMENT_PATH.resolve()
        self.behaviour: Behaviour = load_behaviour(self.doc, self.operations, behaviour_path, strict=strict)
        self.state_data = load_state(self.behaviour, self.doc, Path(state) if state else None, strict=strict)
        if labels is None and catalog is not None:
            labels = labels_from_catalog(catalog, self.operations, self.behaviour.websockets["routes"])
        self.labels: dict[str, str] = dict(labels or {})
        self.route_names = frozenset(r["name"] for r in self.behaviour.websockets["routes"])
        self._names = frozenset(self.operations) | self.route_names | frozenset(self.labels.values())
        self.api_key = api_key or self.state_data.api_key
        if api_key:
            first = self.state_data.api_keys[0]
            keys = ((ApiKey(api_key, first.name, first.owner, first.kind, first.permissions, first.environment, first.expires_at),)
                    + self.state_data.api_keys[1:])
            self.state_data = type(self.state_data)(**{**self.state_data.__dict__, "api_key": api_key, "api_keys": keys})
        self.api_key_user = self.state_data.api_keys[0].owner
        self.store = Store(self.behaviour, self.state_data)
        self.faults = Faults()
        self.set_faults(self.state_data.faults if faults is None else faults)
        self.knobs = KnobHolder()
        self.set_knobs(self.state_data.knobs if knobs is None else knobs)
        self.app_url: str | None = None  # where it serves (Arcane's APP_URL, for the WebSocket Origin check)
        self.rate_limits_enabled = True
        self.served_document: dict = self.doc.document
        self._lock = threading.Lock()
        self.records_lock = self._lock
        self._requests: list[RecordedRequest] = []
        self._sockets: list[SocketRecord] = []
        self._uploads: list[dict] = []
        self._violations: list[Violation] = []
        self.app = SimulatorApp(self)

    # ------------------------------------------------------------ records

    def record(self, request, body: bytes, operation: str | None, label: str | None, credential: str | None) -> None:
        headers, digest = [], None
        for k, v in request.scope["headers"]:
            name = k.decode("latin-1").lower()
            headers.append((name, REDACTED if name in SECRET_HEADERS else v.decode("latin-1")))
            if name == "x-api-key":
                digest = hashlib.sha256(v).hexdigest()
        rec = RecordedRequest(request.method, request.url.path, tuple(request.query_params.multi_items()), tuple(headers), body,
                              operation, credential, label, digest, _raw_path(request.scope))
        with self._lock:
            self._requests.append(rec)

    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget the recorded requests, sockets and consumed uploads."""
        with self._lock:
            self._requests.clear()
            self._sockets.clear()
            self._uploads.clear()

    def record_socket(self, ws, route: str | None, label: str | None, credential: str | None) -> SocketRecord:
        """A WebSocket connection, recorded like a request (its handshake is a GET in
        `requests()`, too) and kept up to date as frames come and go."""
        headers = []
        for k, v in ws.scope["headers"]:
            name = k.decode("latin-1").lower()
            headers.append((name, REDACTED if name in SECRET_HEADERS else v.decode("latin-1")))
        query = tuple(ws.query_params.multi_items())
        rec = SocketRecord(route, ws.url.path, query, tuple(headers), credential, label or route)
        req = RecordedRequest("GET", ws.url.path, query, tuple(headers), b"", None, credential, label or route,
                              raw_path=_raw_path(ws.scope))
        with self._lock:
            self._sockets.append(rec)
            self._requests.append(req)
        return rec

    def sockets(self) -> list[RecordedSocket]:
        """Every WebSocket connection so far: path, query, headers (credentials redacted),
        the status it got (101, or the refusal's), the frames the client sent, how it ended."""
        with self._lock:
            return [r.frozen() for r in self._sockets]

    def clear_sockets(self) -> None:
        with self._lock:
            self._sockets.clear()

    def record_upload(self, upload: dict) -> None:
        with self._lock:
            self._uploads.append(dict(upload))

    def uploads(self) -> list[dict]:
        """The upload sessions consumed so far: {operation, environment, id, kind, filename,
        size, sha256, bytes, blob?} — the digest of the bytes the consumer read."""
        with self._lock:
            return [dict(u) for u in self._uploads]

    def add_violation(self, v: Violation) -> None:
        with self._lock:
            self._violations.append(v)

    @property
    def violations(self) -> list[Violation]:
        with self._lock:
            return list(self._violations)

    def clear_violations(self) -> None:
        with self._lock:
            self._violations.clear()

    # ------------------------------------------------------------ state and faults

    @property
    def state(self) -> dict:
        """A deep copy of the current state (global and per-environment collections)."""
        return self.store.snapshot()

    def reset(self) -> None:
        """Back to the loaded state (items, sessions, keys, clock, rate limits); faults,
        records and the served document are kept."""
        self.store.reset()
        self.app.reset()

    def set_faults(self, faults: dict | None) -> dict:
        """Replace every fault knob (FaultError if malformed, or if a `match` glob names no
        operation); returns the normalised setting."""
        rules, _, _ = parse_faults(faults or {})
        for rule in rules:
            for glob in rule.match:
                if not glob.startswith("/") and not any(fnmatch.fnmatchcase(n, glob) for n in self._names):
                    raise FaultError(f"{rule.knob}.match {glob!r} names no operation (an operationId, a label, or a /path glob)")
        self.faults.replace_with(faults or {})
        return self.faults.as_dict()

    def set_knobs(self, knobs: dict | None) -> dict:
        """Replace every timing knob (KnobError if malformed); returns them all."""
        return self.knobs.replace_with(knobs or {}).as_dict()

    def append_log(self, container: str, text: str, stream: str = "stdout", environment: str = "0") -> None:
        """A container writes one line now (stdout or stderr): followers get it at once, a
        later read or download has it. `container` is an ID, a name or a unique prefix."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"a log line goes to stdout or stderr, not {stream!r}")
        coll = self.behaviour.collections["containers"]
        with self.store.lock:
            item = self.store.find(coll, environment, container)
        if item is None:
            raise ValueError(f"no container {container!r} in environment {environment!r}")
        self.app.append_log(item, text, stream, environment)

    def change_behind_arcane(self, collection: str, key: str, fields: Mapping[str, Any], environment: str = "0") -> None:
        """A change made on the host behind Arcane's back (the Docker CLI: `docker stop`):
        the item's members take `fields` at once, and no activity is published, so only
        Arcane's own polls (the dashboard snapshot, a list) show it. `key` is an ID, a name
        or a unique prefix."""
        coll = self.behaviour.collections[collection]
        with self.store.lock:
            item = self.store.find(coll, environment, key)
            if item is None:
                raise ValueError(f"no {collection} item {key!r} in environment {environment!r}")
            item.update(copy.deepcopy(dict(fields)))
        self.store.notify("state", environment)

    def federated_token(self, subject: str | None = None, *, credential: str | None = None, audience: str | None = None,
                        issuer: str | None = None, expires_in: int = 300, jti: str | None = None, claims: dict | None = None,
                        key: str | None = None) -> str:
        """A subject token for the token exchange: an HS256 JWT signed with a federated
        credential's `_sim.signing_key` (the first credential, or the one named), whose
        iss, sub and aud match that credential unless given; `exp` is `expires_in` seconds
        after the simulated clock's now."""
        from .extras import mint_jwt

        creds = self.items("federated_credentials", None)
        cred = next((c for c in creds if credential in (None, c.get("id"), c.get("name"))), None)
        if cred is None:
            raise ValueError(f"no federated credential {credential!r}")
        body = {"iss": issuer or cred.get("issuerUrl"), "sub": subject or cred.get("subjectMatch"),
                "aud": audience or (cred.get("audiences") or [""])[0], "iat": self.now(), "exp": self.now() + int(expires_in)}
        if jti:
            body["jti"] = jti
        body.update(claims or {})
        return mint_jwt(body, key or str((cred.get("_sim") or {}).get("signing_key") or ""))

    def expire_sessions(self, *, refresh: bool = False) -> int:
        """Every access token expires; refresh tokens keep working unless `refresh`."""
        return self.store.expire_sessions(refresh=refresh)

    def set_users(self, users: list[dict]) -> None:
        """Replace the login users ({username, password, mfa?, roles?}) until the next reset:
        change a password, a role, or remove a user. Issued sessions are kept."""
        for u in users:
            if not isinstance(u, dict) or not isinstance(u.get("username"), str) or not isinstance(u.get("password"), str) \
                    or not set(u) <= {"username", "password", "mfa", "roles"}:
                raise ValueError(f"a login user is {{username, password, mfa?, roles?}}, not {u!r}")
            for r in u.get("roles") or ():
                if r.get("role") not in self.behaviour.permissions.roles:
                    raise ValueError(f"unknown role {r.get('role')!r}; known: {', '.join(sorted(self.behaviour.permissions.roles))}")
        self.store.set_users(users)

    @property
    def users(self) -> list[dict]:
        with self.store.lock:
            return [dict(u) for u in self.store.users]

    def add_api_key(self, key: str, permissions: list | None = None, *, environment: str | None = None,
                    expires_at: int | None = None, kind: str | None = None, owner: str | None = None, name: str | None = None) -> None:
        """Accept another key until the next reset: `scoped` with its own grants
        (["containers:list", {"permission": …, "environmentId": …}]), or `personal` (the
        owner's roles); optionally bound to one environment, optionally expiring at an
        epoch second of the simulated clock."""
        grants = []
        for g in permissions or ():
            perm, env = (g, None) if isinstance(g, str) else (g["permission"], g.get("environmentId"))
            if perm not in self.behaviour.permissions.catalog:
                raise ValueError(f"unknown permission {perm!r}")
            grants.append((perm, env))
        kind = kind or ("scoped" if permissions is not None else "personal")
        if kind not in ("scoped", "personal"):
            raise ValueError(f"a key is scoped or personal, not {kind!r}")
        self.store.add_api_key(ApiKey(key, name or key[:12], owner or self.api_key_user, kind, tuple(grants), environment, expires_at))

    def advance_clock(self, seconds: float) -> int:
        """Move the simulated clock forward (rate-limit windows refill, keys expire)."""
        return self.store.advance_clock(seconds)

    def now(self) -> int:
        return self.store.now()

    def serve_document(self, document: dict | None) -> None:
        """What GET /api/openapi.json answers from now on (None: the document in use), to
        simulate a server whose version drifted from the client's catalog."""
        self.served_document = document if document is not None else self.doc.document

    def items(self, collection: str, environment: str | None = "0") -> list[dict]:
        """A copy of one collection's items (the environment is ignored for global ones)."""
        coll = self.behaviour.collections[collection]
        with self.store.lock:
            return copy.deepcopy(self.store.items(coll, environment))

    def sample_path_params(self, operation_id: str, environment: str = "0") -> dict[str, str]:
        """Path parameters that name existing items where the behaviour data says which.

        The environment parameter gets `environment`. A parameter that keys a collection,
        in this operation's behaviour or in another's at the same place of the same path
        (`/environments/{id}/containers/{containerId}…`), gets the first item's key in that
        environment. Anything else gets "sample". A label is accepted for the operation.
        """
        by_label = {v: k for k, v in self.labels.items()}
        op = self.operations[by_label.get(operation_id, operation_id)]
        out = {}
        for p in op.params:
            if p == op.env_param:
                out[p] = environment
                continue
            prefix = op.path[: op.path.index("{" + p + "}")]
            coll_name = None
            for b in [self.behaviour.operations.get(op.operation_id)] + list(self.behaviour.operations.values()):
                if b is None or b.key != p or not b.collection:
                    continue
                other = self.operations[b.operation_id].path
                if other[: other.index("{" + p + "}")] == prefix:
                    coll_name = b.collection
                    break
            value = "sample"
            if coll_name:
                coll = self.behaviour.collections[coll_name]
                items = self.items(coll_name, environment)
                if items:
                    value = str(items[0].get(coll.key))
            out[p] = value
        return out


def labels_from_catalog(catalog: Any, operations: Mapping[str, Operation], routes: list[dict]) -> dict[str, str]:
    """An engine catalog's action IDs as labels (a convenience for the engine's tests):
    by operationId, and for routes outside the document by method and path."""
    labels: dict[str, str] = {}
    by_path = {("GET", r["path"]): r["name"] for r in routes}
    for a in catalog.all_actions.values():
        op_id = getattr(a, "operation_id", None)
        if op_id:
            labels[op_id] = a.id
            continue
        method, path = getattr(a, "method", None), getattr(a, "path", None)
        if isinstance(method, str) and isinstance(path, str) and (method.upper(), path) in by_path:
            labels[by_path[(method.upper(), path)]] = a.id
    return labels


def uvicorn_config(app, **kwargs):
    """uvicorn's settings for a simulator: Arcane's Date from the simulated clock, its 54 s
    WebSocket pings, no permessage-deflate (Arcane ≥ 2.10.2 turned compression off), and
    its idle keep-alive of 120 s (http.Server IdleTimeout, internal/bootstrap/
    server_bootstrap.go:199). uvicorn's own 5 s equals httpx's keep-alive expiry, so a
    client reusing a connection idle for just under 5 s met a socket the server was closing
    (ReadError: the load bench's sporadic errors); Arcane never closes that early."""
    import uvicorn

    return uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, date_header=False,
                          ws_ping_interval=54.0, ws_ping_timeout=10.0, ws_per_message_deflate=False, timeout_keep_alive=120,
                          **kwargs)


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket (listen.bind: TCP_NODELAY-ready); a busy port is a
    BindError naming `--port`, before anything is announced."""
    return bind(host, port, setting="--port")


class SimulatorHandle:
    """A Simulator served by uvicorn on 127.0.0.1 in a background thread."""

    def __init__(self, simulator: Simulator, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        self.simulator = simulator
        self._sock = listening_socket(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        simulator.app_url = self.url
        # date_header=False: the app sends the simulated clock's Date (see SimulatorApp)
        config = uvicorn_config(simulator.app, access_log=False)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_key(self) -> str:
        return self.simulator.api_key

    def start(self, timeout: float = 10.0) -> SimulatorHandle:
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, name="arcane-simulator", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the Arcane simulator did not start")
            time.sleep(0.01)
        return self

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._server.force_exit = True  # endless streams (the live channel, followed logs) would hold a graceful stop
        if self._thread is not None:
            self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> SimulatorHandle:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # the Simulator's API, reachable from the handle
    def requests(self) -> list[RecordedRequest]:
        return self.simulator.requests()

    def sockets(self) -> list[RecordedSocket]:
        return self.simulator.sockets()

    def uploads(self) -> list[dict]:
        return self.simulator.uploads()

    def set_knobs(self, knobs: dict | None) -> dict:
        return self.simulator.set_knobs(knobs)

    @property
    def knobs(self) -> Knobs:
        return self.simulator.knobs.current

    def append_log(self, container: str, text: str, stream: str = "stdout", environment: str = "0") -> None:
        self.simulator.append_log(container, text, stream, environment)

    def change_behind_arcane(self, collection: str, key: str, fields: Mapping[str, Any], environment: str = "0") -> None:
        self.simulator.change_behind_arcane(collection, key, fields, environment)

    def federated_token(self, subject: str | None = None, **kwargs) -> str:
        return self.simulator.federated_token(subject, **kwargs)

    def clear_requests(self) -> None:
        self.simulator.clear_requests()

    @property
    def violations(self) -> list[Violation]:
        return self.simulator.violations

    def clear_violations(self) -> None:
        self.simulator.clear_violations()

    @property
    def state(self) -> dict:
        return self.simulator.state

    def items(self, collection: str, environment: str | None = "0") -> list[dict]:
        return self.simulator.items(collection, environment)

    def set_faults(self, faults: dict | None) -> dict:
        return self.simulator.set_faults(faults)

    def reset(self) -> None:
        self.simulator.reset()

    def expire_sessions(self, *, refresh: bool = False) -> int:
        return self.simulator.expire_sessions(refresh=refresh)

    def set_users(self, users: list[dict]) -> None:
        self.simulator.set_users(users)

    @property
    def users(self) -> list[dict]:
        return self.simulator.users

    def sample_path_params(self, operation_id: str, environment: str = "0") -> dict[str, str]:
        return self.simulator.sample_path_params(operation_id, environment)

    def add_api_key(self, key: str, permissions: list | None = None, **kwargs) -> None:
        self.simulator.add_api_key(key, permissions, **kwargs)

    def advance_clock(self, seconds: float) -> int:
        return self.simulator.advance_clock(seconds)

    def serve_document(self, document: dict | None) -> None:
        self.simulator.serve_document(document)

    @property
    def rate_limits_enabled(self) -> bool:
        return self.simulator.rate_limits_enabled

    @rate_limits_enabled.setter
    def rate_limits_enabled(self, value: bool) -> None:
        self.simulator.rate_limits_enabled = bool(value)

    @property
    def behaviour(self) -> Behaviour:
        return self.simulator.behaviour

    @property
    def operations(self) -> dict[str, Operation]:
        return self.simulator.operations


def start_simulator(state: str | Path | None = None, faults: dict | None = None, *, api_key: str | None = None,
                    behaviour: str | Path | None = None, document: str | Path | None = None,
                    labels: Mapping[str, str] | None = None, catalog: Any = None, knobs: dict | None = None,
                    host: str = "127.0.0.1", port: int = 0) -> SimulatorHandle:
    """Start a simulator on a free port; use it as a context manager (stops on exit).

    `state` is a state file or directory (the demo state when None); `faults` replaces the
    state's `faults:` when given; `api_key` replaces the bootstrap key; `document` serves
    another OpenAPI document; `labels` (or an engine `catalog`, for its action IDs) names
    operations for records and fault matches; `knobs` replaces the state's `knobs:`.
    """
    return SimulatorHandle(Simulator(state, faults=faults, api_key=api_key, behaviour=behaviour, document=document,
                                     labels=labels, catalog=catalog, knobs=knobs), host, port).start()


def main(host: str = "127.0.0.1", port: int = 0, state_path: str | Path | None = None, api_key: str | None = None,
         faults: dict | None = None, document: str | Path | None = None, knobs: dict | None = None) -> None:
    """Run a simulator in the foreground until interrupted (the `interp simulate` command)."""
    import uvicorn

    simulator = Simulator(state_path, faults=faults, api_key=api_key, document=document, knobs=knobs)
    sock = listening_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    simulator.app_url = f"http://{bound_host}:{bound_port}"
    print(f"arcane simulator: http://{bound_host}:{bound_port} (api key: {simulator.api_key})", file=sys.stdout, flush=True)
    config = uvicorn_config(simulator.app)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
