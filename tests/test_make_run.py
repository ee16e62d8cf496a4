"""`make run` as a user runs it (the Makefile's target, scripts/make_run.py behind it): a taken
port is the first line, naming the make variable that moves it, and nothing starts; a free pair
serves MCP over HTTP (initialize answers) and Ctrl-C stops everything; with ARCANE_URL there is
no simulator and its port does not matter; and no endpoint is shown when the simulator stops
before it answered. The target is called with its install step taken as done (`make -o
<stamp>`, the venv running these tests as VENV): a test never reinstalls."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)
INTERP = VENV / "bin" / "interp"
READY_SECONDS = 150  # a loaded machine starts the simulator in ~17 s
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "make-run-test", "version": "1"}}}


def make_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ARCANE_URL", "ARCANE_API_KEY", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return {**env, "ARCANE_MCP_CACHE_DIR": "off", "ARCANE_MCP_AUDIT_LOG": "off", **extra}


def start_make(sim_port: int, mcp_port: int, **extra: str) -> subprocess.Popen:
    """`make run` in a session of its own (as a terminal would hold it), output merged."""
    command = ["make", "--no-print-directory", "-o", f"{VENV}/.installed", "run", f"VENV={VENV}", f"SIM_PORT={sim_port}", f"MCP_PORT={mcp_port}"]
    return subprocess.Popen(command, cwd=ROOT, env=make_env(**extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def held_port() -> socket.socket:
    """A port another program holds: bound and listening, as a running Arcane would."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Output:
    """make run's merged output, read line by line on a thread while it runs."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while not any(text in line for line in self.lines):
            assert proc.poll() is None, "make run ended: " + "\n".join(self.lines)
            assert time.monotonic() < deadline, f"nothing showed {text} within {READY_SECONDS} s: " + "\n".join(self.lines)
            time.sleep(0.2)

    def text(self) -> str:
        self.thread.join(timeout=30)
        return "\n".join(self.lines)


def initialize(mcp_port: int) -> dict:
    """The MCP initialize over HTTP."""
    r = httpx.post(f"http://127.0.0.1:{mcp_port}/mcp", json=INITIALIZE, timeout=30, headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 200, r.text
    data = next((line[5:] for line in r.text.splitlines() if line.startswith("data:")), r.text)
    return json.loads(data)


def serve(proc: subprocess.Popen, output: Output, mcp_port: int) -> dict:
    """Wait until make run shows the endpoint, then initialize there."""
    output.wait_for(f"http://127.0.0.1:{mcp_port}/mcp", proc)
    return initialize(mcp_port)


def interrupt(proc: subprocess.Popen, output: Output) -> str:
    """Ctrl-C to the whole session, as a terminal sends it; its output once everything ended."""
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=90)
    return output.text()


@pytest.mark.parametrize("variable", ["SIM_PORT", "MCP_PORT"])
def test_a_taken_port_is_the_first_line_and_nothing_starts(variable):
    with held_port() as taken:
        port = taken.getsockname()[1]
        ports = {"SIM_PORT": free_port(), "MCP_PORT": free_port()}
        ports[variable] = port
        proc = start_make(ports["SIM_PORT"], ports["MCP_PORT"])
        out, _ = proc.communicate(timeout=60)
    lines = out.splitlines()
    assert proc.returncode == 2, out
    assert f"{variable}={port}" in lines[0]
    other = next(v for v in ports if v != variable)
    assert f"{variable}=" in lines[0] and f"{other}=" not in lines[0]
    assert "--port" not in out and "ARCANE_MCP_LISTEN" not in out  # what make run cannot pass
    assert f"127.0.0.1:{ports['MCP_PORT']}/mcp" not in out
    assert "Traceback" not in out


def test_the_same_port_twice_is_refused_before_anything_starts():
    port = free_port()
    proc = start_make(port, port)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "MCP_PORT=" in out.splitlines()[0] and "SIM_PORT=" in out.splitlines()[0]


def test_a_run_against_the_simulator_serves_and_ctrl_c_stops_it():
    sim_port, mcp_port = free_port(), free_port()
    started = time.monotonic()
    proc = start_make(sim_port, mcp_port)
    output = Output(proc)
    try:
        answer = serve(proc, output, mcp_port)
        ready = time.monotonic() - started
        assert answer["result"]["serverInfo"]["name"] == "arcane-mcp"
        # the endpoint is shown only once the simulator answers
        assert httpx.get(f"http://127.0.0.1:{sim_port}/api/health", timeout=10).status_code == 200
    finally:
        out = interrupt(proc, output)
    lines = out.splitlines()
    assert "SIM_PORT" in lines[0]  # simulator mode, said first
    shown = [i for i, line in enumerate(lines) if f"http://127.0.0.1:{mcp_port}/mcp" in line]
    assert shown, out
    assert is_free(sim_port) and is_free(mcp_port), out  # both processes ended with make
    assert "Traceback" not in out
    print(f"make run: initialize answered {ready:.1f} s after the start")


def test_arcane_mode_starts_no_simulator_and_ignores_its_port():
    """With ARCANE_URL set the simulator is not started: its port may be taken. The first line
    says which Arcane is served (without the credentials of its URL)."""
    arcane_port = free_port()
    with held_port() as taken:
        sim_port, mcp_port = taken.getsockname()[1], free_port()
        proc = start_make(sim_port, mcp_port, ARCANE_URL=f"http://user:secret@127.0.0.1:{arcane_port}", ARCANE_API_KEY="arc_test_key")
        output = Output(proc)
        try:
            answer = serve(proc, output, mcp_port)
            assert answer["result"]["serverInfo"]["name"] == "arcane-mcp"
        finally:
            out = interrupt(proc, output)
    lines = out.splitlines()
    assert f"http://127.0.0.1:{arcane_port}" in lines[0] and "SIM_PORT" not in lines[0]
    assert "secret" not in out
    assert not any("arcane simulator:" in line for line in lines)
    assert is_free(mcp_port)


FAKE_INTERP = """#!{python}
# `interp simulate` replaced by the case's; every other command is the real interp
import os, socket, subprocess, sys, time, urllib.request
REAL = {interp!r}
if sys.argv[1:2] == ["simulate"]:
{simulate}
os.execv(REAL, [REAL, *sys.argv[1:]])
"""

# starts, never answers, and stops once the server is up (and has printed its endpoint line)
NEVER_ANSWERS = """
    deadline = time.monotonic() + {seconds}
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen("http://127.0.0.1:{mcp_port}/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.2)
    sys.exit(3)
"""

# another program takes the simulator's port after make run tried it: the real simulator
# then finds it taken (and says so naming its own --port flag)
PORT_TAKEN_MEANWHILE = """
    held = socket.socket()
    held.bind(("127.0.0.1", {sim_port}))
    held.listen(8)
    sys.exit(subprocess.run([REAL, *sys.argv[1:]]).returncode)
"""


def run_with_fake_simulator(tmp_path: Path, simulate: str) -> tuple[subprocess.CompletedProcess, int]:
    sim_port, mcp_port = free_port(), free_port()
    body = simulate.format(seconds=READY_SECONDS, mcp_port=mcp_port, sim_port=sim_port)
    fake = tmp_path / "interp"
    fake.write_text(FAKE_INTERP.format(python=sys.executable, interp=str(INTERP), simulate=body), encoding="utf-8")
    fake.chmod(0o755)
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_run.py"), "--interp", str(fake), "--sim-port", str(sim_port),
                        "--mcp-port", str(mcp_port), "--demo-key", "arc_demo_simulator_key"],
                       env=make_env(), capture_output=True, text=True, timeout=READY_SECONDS + 60)
    out = r.stdout + r.stderr
    assert f"127.0.0.1:{mcp_port}/mcp" not in out  # no endpoint shown
    assert is_free(mcp_port)  # the server was stopped
    assert "Traceback" not in out
    return r, sim_port


def test_no_endpoint_is_shown_when_the_simulator_never_answered(tmp_path):
    """The simulator stops without ever answering, after the server is up and has printed its
    endpoint line: that line is never shown, the server is stopped, and the run fails."""
    r, sim_port = run_with_fake_simulator(tmp_path, NEVER_ANSWERS)
    assert r.returncode == 3
    assert f"SIM_PORT={sim_port}" in r.stderr.strip().splitlines()[0]


def test_a_port_taken_after_the_check_is_still_named_by_its_variable_first(tmp_path):
    r, sim_port = run_with_fake_simulator(tmp_path, PORT_TAKEN_MEANWHILE)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2
    assert f"SIM_PORT={sim_port}" in lines[0]
    assert any("--port" in line for line in lines[1:])  # the simulator's own line, after ours
