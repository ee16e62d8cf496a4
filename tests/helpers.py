"""Helpers shared by unit tests (an in-memory Arcane through httpx.MockTransport)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
from hypothesis import settings

from interpreter.call.dispatch import Dispatcher
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog

DATA_DIR = Path(__file__).resolve().parent / "data"


def data_file(name: str) -> Path:
    """A vendored test data file (tests/data/, provenance in tests/data/SOURCE.md). A
    missing one fails the test that needs it: never a skip, never a download."""
    path = DATA_DIR / name
    assert path.is_file(), f"test data file missing: {path} (it is part of the repository; see tests/data/SOURCE.md)"
    return path


def examples(full: int) -> int:
    """The example count of a Hypothesis test whose examples are costly: the profile's
    (tests/conftest.py: short by default, the full one under CI), at most `full`. Read when
    the test module is imported, after the profile is loaded."""
    return min(full, settings.default.max_examples)


class Recorder:
    """An in-memory Arcane for unit tests: answers from a handler, records requests."""

    def __init__(self, handler):
        self.handler = handler
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        return self.handler(request)


def fresh_simulator(sim, knobs: dict) -> None:
    """The demo state, no faults, the given knobs, an empty request log: each live test
    starts from the same simulator."""
    sim.reset()
    sim.set_faults({})
    sim.set_knobs(knobs)
    sim.clear_requests()


def make_dispatcher(catalog, handler, **settings_kw):
    settings = Settings(arcane_url="http://arcane.test", api_key="arc_test_key", audit_log="off", **settings_kw)
    rec = Recorder(handler)
    client = ArcaneClient(settings, transport=httpx.MockTransport(rec))
    return Dispatcher(catalog, settings, client, AuditLog("off")), rec


async def dispatch_to(sim, action: str, args: dict, confirm: bool = False):
    """One call through a dispatcher of the built catalog to the simulator: (result, the
    requests the simulator received for it)."""
    from interpreter.build.catalog import build
    from interpreter.call.dispatch import Call

    s = Settings(arcane_url=sim.url, api_key=sim.api_key, audit_log="off")
    client = ArcaneClient(s)
    try:
        sim.clear_requests()
        res = await Dispatcher(build(), s, client, AuditLog("off")).dispatch(Call(action, args, confirm))
    finally:
        await client.aclose()
    return res, sim.requests()


def ok_json(data, **extra):
    return httpx.Response(200, json={"success": True, "data": data, **extra})


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_http_server(command: list[str], env: dict, port: int, *, scheme: str = "http", verify=True):
    """Start `interp serve --http` and wait for /health (over `scheme`, trusting `verify`:
    a CA file for a TLS server); returns the process."""
    import subprocess
    import time

    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(150):
        try:
            if httpx.get(f"{scheme}://127.0.0.1:{port}/health", timeout=1, verify=verify).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise AssertionError("the HTTP server did not start: " + proc.stderr.read().decode(errors="replace")[-2000:])


# uvicorn servers made by interpreter.front.httpmode, by the thread running each: what stops
# a server run in a thread of the test process (serve_http_in_thread)
_THREAD_SERVERS: dict[int, object] = {}


def _track_uvicorn_servers() -> None:
    """Record each server httpmode makes (its own class, its own configuration, unchanged)
    under the thread that runs it; installed once per test process."""
    import threading

    from interpreter.front import httpmode

    made = httpmode._uvicorn_server
    if getattr(made, "tracked", False):
        return

    def tracked():
        base = made()

        class Tracked(base):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                _THREAD_SERVERS[threading.get_ident()] = self

        return Tracked

    tracked.tracked = True
    httpmode._uvicorn_server = tracked


@contextlib.contextmanager
def serve_http_in_thread(env: dict, host: str = "127.0.0.1"):
    """`interp serve --http` as its command runs it (settings from `env`, the posture check,
    the bound socket, build_runtime, httpmode.serve_http with its uvicorn configuration), on
    a thread of the test process: for tests of what the server answers, not of its process
    (a start costs no interpreter start, no imports, no catalog read). Yields the base URL."""
    import dataclasses
    import threading

    from interpreter.config import load_settings
    from interpreter.front import httpmode
    from interpreter.front.listen import bind
    from interpreter.front.serve import build_runtime

    _track_uvicorn_servers()
    settings = dataclasses.replace(load_settings(env), transport="http")
    httpmode.check_posture(settings, host)
    sock = bind(host, 0, setting="--port")
    port = sock.getsockname()[1]
    runtime = build_runtime(settings)
    ready, failed = threading.Event(), []

    def run() -> None:
        try:
            httpmode.serve_http(runtime, sock, on_ready=ready.set)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            failed.append(exc)
        finally:
            ready.set()

    thread = threading.Thread(target=run, name=f"interp-http-{port}", daemon=True)
    thread.start()
    assert ready.wait(120) and not failed, f"the in-process HTTP server did not start: {failed!r}"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server = _THREAD_SERVERS.pop(thread.ident, None)
        if server is not None:
            server.should_exit = True
            thread.join(30)
            if thread.is_alive():  # a client left a stream open past the graceful shutdown
                server.force_exit = True
                thread.join(30)
        assert not thread.is_alive(), "the in-process HTTP server did not stop"


DOCUMENT_PATH = "/api/openapi.json"  # where the stdio server's drift check reads Arcane's live document


async def _document_reads(url: str) -> int | None:
    """How often the simulator at `url` has served its OpenAPI document (None: not a simulator)."""
    try:
        async with httpx.AsyncClient(base_url=url, timeout=5) as c:
            r = await c.get("/_sim/requests")
    except httpx.HTTPError:
        return None
    if r.status_code != 200 or not isinstance(r.json(), list):
        return None
    return sum(1 for x in r.json() if isinstance(x, dict) and x.get("method") == "GET" and x.get("path") == DOCUMENT_PATH)


async def list_tools_then_drift_read(client, url: str, seconds: float = 15.0) -> None:
    """What a client does after initialize (tools/list), then wait until the stdio server's
    drift check has read Arcane's live document (it runs once, in the background, after
    the first tools/list is answered): a test's record of requests starts after it, so the
    record holds the test's own calls only. Not a simulator: nothing to wait for."""
    import anyio

    before = await _document_reads(url)
    await client.list_tools()
    if before is None:
        return
    with anyio.move_on_after(seconds):
        while (await _document_reads(url) or 0) <= before:
            await anyio.sleep(0.05)
