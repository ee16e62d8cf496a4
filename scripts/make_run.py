"""`make run`: the MCP server over HTTP on 127.0.0.1:MCP_PORT, against ARCANE_URL (Arcane mode)
or, without it, against the bundled Arcane simulator on 127.0.0.1:SIM_PORT (simulator mode).

What it promises (tests/test_make_run.py runs the target):
- both ports are tried before anything starts: a taken one is the first line of the output,
  naming the make variable that moves it (`SIM_PORT=`, `MCP_PORT=`), and nothing starts;
- the simulator and the server start together (each loads for seconds: not one after the other);
- in simulator mode, nothing the server prints (its endpoint line among it) is shown before the
  simulator has answered its health route, and a simulator that stops before it answers stops
  the server too: no endpoint is announced that would fail every call;
- one process stopping stops the other; Ctrl-C (or SIGTERM) stops both, the server draining: each
  runs in a process group of its own, so a terminal's Ctrl-C reaches this process, which sends
  each of them SIGTERM (the server drains, then both exit 0) and waits for them (a SIGKILL of
  this process leaves them running: the next make run then names their ports as taken).

Only the standard library: it runs with the checkout's .venv python, before anything is imported
from the engine or the simulator."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HOST = "127.0.0.1"
START_SECONDS = 180.0  # a loaded machine starts the simulator in ~17 s; far past that, something is wrong
STOP_SECONDS = 40.0  # the server drains for at most ARCANE_MCP_DRAIN_TIMEOUT (30 s)


def say(line: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(f"make run: {line}\n")
    stream.flush()


def port_value(variable: str, raw: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        say(f"{variable}={raw} is not a port number (1-65535): make run {variable}=<port>", err=True)
        sys.exit(2)
    return port


def try_bind(port: int) -> OSError | None:
    """None when 127.0.0.1:port can be listened on now (as both servers bind: SO_REUSEADDR)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(1)
    except OSError as exc:
        return exc
    finally:
        sock.close()
    return None


def free_neighbour(port: int, taken: set[int]) -> int | None:
    for candidate in range(port + 1, min(port + 50, 65536)):
        if candidate not in taken and try_bind(candidate) is None:
            return candidate
    return None


def check_ports(ports: list[tuple[str, int]]) -> None:
    """Every port tried before anything starts; the first problem is the first line printed."""
    (first, a), *rest = ports
    for variable, port in rest:
        if port == a:
            say(f"{variable}={port} is also {first}={a}: the two need different ports: make run {variable}=<another port>", err=True)
            sys.exit(2)
    taken = {port for _, port in ports}
    for variable, port in ports:
        exc = try_bind(port)
        if exc is None:
            continue
        other = free_neighbour(port, taken)
        fix = f"make run {variable}={other}" if other else f"make run {variable}=<another port>"
        if exc.errno == errno.EADDRINUSE:
            why = f"port {port} is already in use on {HOST}: stop the program that holds it, or choose another port: {fix}"
        elif exc.errno in (errno.EACCES, errno.EPERM):
            why = f"not allowed to listen on {HOST}:{port} (ports below 1024 need privileges): {fix}"
        else:
            why = f"cannot listen on {HOST}:{port} ({exc.strerror or exc}): {fix}"
        say(f"{variable}={port} cannot be used: {why}", err=True)
        sys.exit(2)


def answers(url: str) -> bool:
    """Whether `url` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def shown_url(url: str) -> str:
    """ARCANE_URL as it may be printed: scheme, host and path, never a user or password in it."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "(ARCANE_URL is not a URL; the server will say why)"


class Gate:
    """The server's lines, held until the gate opens (the simulator answered), then passed on."""

    def __init__(self, is_open: bool) -> None:
        self.lock = threading.Lock()
        self.is_open = is_open
        self.held: list[bytes] = []

    def line(self, data: bytes) -> None:
        with self.lock:
            if self.is_open:
                sys.stderr.buffer.write(data)
                sys.stderr.buffer.flush()
            else:
                self.held.append(data)

    def open(self) -> None:
        with self.lock:
            self.is_open = True
            sys.stderr.buffer.write(b"".join(self.held))
            sys.stderr.buffer.flush()
            self.held.clear()


def relay(stream, out) -> None:
    for data in iter(stream.readline, b""):
        out(data)


def write_stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def start(command: list[str], **kwargs) -> subprocess.Popen:
    try:
        return subprocess.Popen(command, process_group=0, **kwargs)
    except OSError as exc:
        say(f"cannot start {command[0]} ({exc.strerror or exc}): run make install first", err=True)
        sys.exit(2)


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each process still running (the server drains), then wait; kill what stays."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interp", required=True)
    parser.add_argument("--sim-port", required=True)
    parser.add_argument("--mcp-port", required=True)
    parser.add_argument("--demo-key", required=True)
    args = parser.parse_args()

    arcane_url = os.environ.get("ARCANE_URL", "")
    simulated = not arcane_url
    sim_port = port_value("SIM_PORT", args.sim_port) if simulated else 0
    mcp_port = port_value("MCP_PORT", args.mcp_port)
    check_ports([("SIM_PORT", sim_port), ("MCP_PORT", mcp_port)] if simulated else [("MCP_PORT", mcp_port)])

    requested: list[int] = []

    def on_signal(signum, _frame) -> None:
        requested.append(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)

    env = dict(os.environ)
    sim = None
    # the simulator's complaints, held until it answers: when it stops first, the line naming
    # SIM_PORT comes before them (its own names the flag of `interp simulate`)
    sim_gate, sim_readers = Gate(is_open=False), []
    if simulated:
        sim_url = f"http://{HOST}:{sim_port}"
        say(f"simulator mode: ARCANE_URL is not set, so the bundled Arcane SIMULATOR with demo data (not a real Arcane) "
            f"starts on {HOST}:{sim_port} (SIM_PORT), with the MCP server on {HOST}:{mcp_port} (MCP_PORT)")
        env.update(ARCANE_URL=sim_url, ARCANE_API_KEY=args.demo_key)
        sim = start([args.interp, "simulate", "--port", str(sim_port), "--api-key", args.demo_key], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        threading.Thread(target=relay, args=(sim.stdout, write_stdout), daemon=True).start()
        sim_readers.append(threading.Thread(target=relay, args=(sim.stderr, sim_gate.line), daemon=True))
        sim_readers[0].start()
    else:
        say(f"Arcane mode: serving the Arcane at {shown_url(arcane_url)} (ARCANE_URL; no simulator) on {HOST}:{mcp_port} (MCP_PORT)")
    try:
        server = start([args.interp, "serve", "--http", "--listen", f"{HOST}:{mcp_port}"], env=env, stderr=subprocess.PIPE)
    except SystemExit:
        if sim is not None:
            stop([sim])
        raise
    gate = Gate(is_open=not simulated)
    reader = threading.Thread(target=relay, args=(server.stderr, gate.line), daemon=True)
    reader.start()

    sys.exit(supervise(sim, sim_port, server, mcp_port, (gate, sim_gate), (reader, *sim_readers), requested))


def supervise(sim, sim_port: int, server, mcp_port: int, gates: tuple[Gate, Gate], readers: tuple[threading.Thread, ...],
              requested: list[int]) -> int:
    """Watch both processes until a stop is asked or one of them ends; the exit code of make run."""
    procs = [p for p in (sim, server) if p is not None]
    gate, sim_gate = gates
    started = time.monotonic()
    sim_answered = sim is None
    ready = False
    while True:
        if requested:
            say("stopping")
            stop(procs)
            if sim_answered:
                gate.open()
                sim_gate.open()
            return 0
        if server.poll() is not None:
            stop(procs)
            readers[0].join(timeout=5)
            gate.open()
            sim_gate.open()
            taken = not ready and try_bind(mcp_port) is not None
            hint = f" (port {mcp_port} is taken now: make run MCP_PORT=<another port>)" if taken else ""
            say(f"the MCP server (MCP_PORT={mcp_port}) stopped (exit {server.returncode}; its lines above){hint}", err=True)
            return server.returncode or 1
        if sim is not None and sim.poll() is not None:
            stop(procs)
            for reader in readers[1:]:
                reader.join(timeout=5)
            if not sim_answered:
                taken = try_bind(sim_port) is not None
                hint = f"port {sim_port} is taken now: make run SIM_PORT=<another port>; " if taken else ""
                say(f"the simulator (SIM_PORT={sim_port}) stopped (exit {sim.returncode}) before it answered: {hint}nothing is served "
                    "(its lines below)", err=True)
            else:
                gate.open()
                say(f"the simulator (SIM_PORT={sim_port}) stopped (exit {sim.returncode}; its lines below): the MCP server is stopped too",
                    err=True)
            sim_gate.open()
            return sim.returncode or 1
        if not sim_answered:
            sim_answered = answers(f"http://{HOST}:{sim_port}/api/health")
            if sim_answered:
                gate.open()
                sim_gate.open()
        if sim_answered and not ready and answers(f"http://{HOST}:{mcp_port}/health"):
            ready = True
            say(f"ready in {time.monotonic() - started:.1f} s; client config: "
                f'{{"mcpServers": {{"arcane": {{"type": "http", "url": "http://{HOST}:{mcp_port}/mcp"}}}}}}')
        if not ready and time.monotonic() - started > START_SECONDS:
            stop(procs)
            sim_gate.open()
            if sim_answered:
                gate.open()
            say(f"not ready after {START_SECONDS:.0f} s ({'the MCP server' if sim_answered else 'the simulator'} did not answer): stopped both",
                err=True)
            return 1
        time.sleep(0.2)


if __name__ == "__main__":
    main()
