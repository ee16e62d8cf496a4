"""Helpers shared by unit tests (an in-memory Arcane through httpx.MockTransport)."""

from __future__ import annotations

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
