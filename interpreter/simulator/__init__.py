"""The Arcane simulator: a stand-in for a real Arcane in tests and in `make run`.

It serves every operation of the embedded OpenAPI document over real HTTP under /api,
statefully, from two data files (docs/simulator.md):

    catalog/simulator/behaviour.yaml   which operation reads or changes which collection
    catalog/simulator/demo-state.yaml  the items, API key, login users and faults

Every answer it sends is validated against the document; an invalid one is recorded in
`violations` (a simulator bug that tests assert away). Requests are recorded, faults
(latency, 5xx, dropped connections, malformed bodies, a down Docker daemon, failing
NDJSON streams) can be set from the state file or at runtime.

    from interpreter.simulator import start_simulator
    with start_simulator() as sim:
        httpx.get(sim.url + "/api/environments/0/containers", headers={"X-API-Key": sim.api_key})
        assert sim.violations == []
"""

from __future__ import annotations

import copy
import socket
import sys
import threading
import time
from pathlib import Path

from .app import REDACTED, SECRET_HEADERS, RecordedRequest, SimulatorApp, Violation
from .faults import FaultError, Faults
from .model import BEHAVIOUR_PATH, DEMO_STATE_PATH, Behaviour, env_param, load_behaviour, load_state, path_params
from .schemas import DocSchemas
from .store import Store

__all__ = ["Simulator", "SimulatorHandle", "start_simulator", "main", "RecordedRequest", "Violation", "FaultError"]



class Simulator:
    """One simulated Arcane: catalog, document, behaviour, state, faults and records.

    Thread-safe: the server thread handles requests while a test thread reads records,
    changes faults or resets the state.
    """

    def __init__(self, state: str | Path | None = None, *, faults: dict | None = None, api_key: str | None = None,
                 behaviour: str | Path | None = None, catalog=None):
        if catalog is None:
            from ..catalog import build

            catalog = build()
        self.catalog = catalog
        self.doc = DocSchemas(catalog.document)
        self.behaviour: Behaviour = load_behaviour(catalog, self.doc, Path(behaviour) if behaviour else BEHAVIOUR_PATH)
        self.state_data = load_state(self.behaviour, self.doc, Path(state) if state else DEMO_STATE_PATH)
        self.api_key = api_key or self.state_data.api_key
        self.api_keys = frozenset({self.api_key})
        # the user an API key acts for (Arcane keys belong to a user); the first login user
        self.api_key_user = self.state_data.users[0]["username"] if self.state_data.users else "arcane"
        self.store = Store(self.behaviour, self.state_data)
        self.faults = Faults.from_spec(self.state_data.faults if faults is None else faults)
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._violations: list[Violation] = []
        self.app = SimulatorApp(self)

    # ------------------------------------------------------------ records

    def record(self, request, body: bytes, action_id: str | None, credential: str | None) -> None:
        headers = []
        for k, v in request.scope["headers"]:
            name = k.decode("latin-1").lower()
            headers.append((name, REDACTED if name in SECRET_HEADERS else v.decode("latin-1")))
        rec = RecordedRequest(request.method, request.url.path, tuple(request.query_params.multi_items()), tuple(headers), body, action_id, credential)
        with self._lock:
            self._requests.append(rec)

    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

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
        """Back to the loaded state (items, sessions, clock); faults and records are kept."""
        self.store.reset()

    def set_faults(self, faults: dict | None) -> dict:
        """Replace every fault knob (FaultError if malformed); returns the normalised setting."""
        self.faults.replace_with(faults or {})
        return self.faults.as_dict()

    def expire_sessions(self, *, refresh: bool = False) -> int:
        """Invalidate every access token; refresh tokens keep working unless `refresh`."""
        return self.store.expire_sessions(refresh=refresh)

    def set_users(self, users: list[dict]) -> None:
        """Replace the login users ({username, password, mfa?}) until the next reset: change
        a password or remove a user. Issued sessions are kept (expire them to force a login)."""
        for u in users:
            if not isinstance(u, dict) or not isinstance(u.get("username"), str) or not isinstance(u.get("password"), str) \
                    or not set(u) <= {"username", "password", "mfa"}:
                raise ValueError(f"a login user is {{username, password, mfa?}}, not {u!r}")
        self.store.set_users(users)

    @property
    def users(self) -> list[dict]:
        with self.store.lock:
            return [dict(u) for u in self.store.users]

    def items(self, collection: str, environment: str | None = "0") -> list[dict]:
        """A copy of one collection's items (the environment is ignored for global ones)."""
        coll = self.behaviour.collections[collection]
        with self.store.lock:
            return copy.deepcopy(self.store.items(coll, environment))

    def sample_path_params(self, action_id: str, environment: str = "0") -> dict[str, str]:
        """Path parameters that name existing items where the behaviour file says which.

        The environment parameter gets `environment`. A parameter that keys a collection,
        in this action's behaviour or in another's at the same place of the same path
        (`/environments/{id}/containers/{containerId}…`), gets the first item's key in that
        environment. Anything else gets "sample".
        """
        action = self.catalog.all_actions[action_id]
        env_wire = env_param(action, self.catalog.env_arg)
        out = {}
        for p in path_params(action.path):
            if p == env_wire:
                out[p] = environment
                continue
            prefix = action.path[: action.path.index("{" + p + "}")]
            coll_name = None
            for b in [self.behaviour.operations.get(action_id)] + list(self.behaviour.operations.values()):
                if b is None or b.key != p or not b.collection:
                    continue
                other = self.catalog.all_actions[b.action_id].path
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


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket (listen.bind: TCP_NODELAY-ready); a busy port is a
    ListenError naming `--port`, before anything is announced."""
    from ..listen import bind

    return bind(host, port, setting="--port")


class SimulatorHandle:
    """A Simulator served by uvicorn on 127.0.0.1 in a background thread."""

    def __init__(self, simulator: Simulator, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        self.simulator = simulator
        self._sock = listening_socket(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        # date_header=False: the app sends the simulated clock's Date (see SimulatorApp)
        config = uvicorn.Config(simulator.app, log_level="warning", lifespan="off", access_log=False,
                                timeout_graceful_shutdown=1, timeout_keep_alive=5, date_header=False)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_key(self) -> str:
        return self.simulator.api_key

    def start(self, timeout: float = 10.0) -> "SimulatorHandle":
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, name="arcane-simulator", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the Arcane simulator did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> "SimulatorHandle":
        return self.start() if self._thread is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # the Simulator's API, reachable from the handle
    def requests(self) -> list[RecordedRequest]:
        return self.simulator.requests()

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

    def sample_path_params(self, action_id: str, environment: str = "0") -> dict[str, str]:
        return self.simulator.sample_path_params(action_id, environment)

    @property
    def behaviour(self) -> Behaviour:
        return self.simulator.behaviour


def start_simulator(state: str | Path | None = None, faults: dict | None = None, *, api_key: str | None = None,
                    behaviour: str | Path | None = None, catalog=None, host: str = "127.0.0.1", port: int = 0) -> SimulatorHandle:
    """Start a simulator on a free port; use it as a context manager (stops on exit).

    `state` is a state file (the demo state when None); `faults` replaces the state
    file's `faults:` section when given; `api_key` replaces the state file's key.
    """
    return SimulatorHandle(Simulator(state, faults=faults, api_key=api_key, behaviour=behaviour, catalog=catalog), host, port).start()


def main(host: str = "127.0.0.1", port: int = 0, state_path: str | Path | None = None, api_key: str | None = None,
         faults: dict | None = None) -> None:
    """Run a simulator in the foreground until interrupted (the `interp simulate` command)."""
    import uvicorn

    simulator = Simulator(state_path, faults=faults, api_key=api_key)
    sock = listening_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    print(f"arcane simulator: http://{bound_host}:{bound_port} (api key: {simulator.api_key})", file=sys.stdout, flush=True)
    config = uvicorn.Config(simulator.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, date_header=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
