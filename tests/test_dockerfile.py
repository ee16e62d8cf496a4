"""The Dockerfile's lint step (hadolint is not available here; these are the rules we hold
it to): a pinned base, no build-time network beyond the package index, a non-root user,
a HEALTHCHECK against the health endpoint the server listens on, and a bind the server
accepts (a public one needs TLS or the proxy flag). No Docker engine is needed: the file is
read, instruction by instruction, and the final stage's ENTRYPOINT and CMD are started with
its ENV, as the container would start them."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from interpreter.config import parse_bool, parse_listen
from interpreter.front.httpmode import is_loopback

DOCKERFILE = Path(__file__).parents[1] / "Dockerfile"
PINNED = re.compile(r"^[\w./-]+(:\d+\.\d+\.\d+[\w.-]*)?(@sha256:[0-9a-f]{64})?$")
FETCHERS = re.compile(r"\b(curl|wget|git\s+clone|apt-get|apk\s+add|yum|dnf)\b")
PIPE_TO_SHELL = re.compile(r"\|\s*(ba|z|da)?sh\b")
HEALTH_PATH = "/health"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def final_stage(ins: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return ins[max(i for i, (w, _) in enumerate(ins) if w == "FROM"):]


def final_env(text: str) -> dict[str, str]:
    """The environment the final stage sets (ENV k=v …, later ones winning)."""
    env: dict[str, str] = {}
    for w, a in final_stage(instructions(text)):
        if w == "ENV":
            for part in shlex.split(a):
                k, _, v = part.partition("=")
                env[k] = v
    return env


def command(text: str) -> list[str]:
    """ENTRYPOINT + CMD of the final stage (exec form)."""
    ins = final_stage(instructions(text))
    entry = next((json.loads(a) for w, a in reversed(ins) if w == "ENTRYPOINT"), [])
    cmd = next((json.loads(a) for w, a in reversed(ins) if w == "CMD"), [])
    return entry + cmd


def plain_public_bind(text: str) -> bool:
    """Whether the image binds a non-loopback address with neither TLS nor the statement
    that a proxy terminates it: `interp serve --http` would then refuse to start
    (httpmode.check_posture, [tls_required])."""
    env, args = final_env(text), command(text)
    host, _ = parse_listen(env.get("ARCANE_MCP_LISTEN", "127.0.0.1:8765"))
    if is_loopback(host):
        return False
    proxy = parse_bool(env.get("ARCANE_MCP_BEHIND_TLS_PROXY", "false")) or "--behind-tls-proxy" in args
    tls = bool(env.get("ARCANE_MCP_TLS_CERT")) or "--tls-cert" in args
    return not (proxy or tls)


def problems(text: str) -> list[str]:
    """Every rule the Dockerfile breaks, as codes."""
    found = []
    ins = instructions(text)
    stages = [i for i, (w, _) in enumerate(ins) if w == "FROM"]
    if not stages:
        return ["no_from"]
    names = set()
    for i in stages:
        parts = ins[i][1].split()
        image = parts[0]
        if image not in names and not (PINNED.match(image) and (":" in image or "@" in image)):
            found.append("unpinned_base")
        if len(parts) >= 3 and parts[1].upper() == "AS":
            names.add(parts[2])
    final = ins[stages[-1]:]
    users = [a for w, a in final if w == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        found.append("runs_as_root")
    checks = [a for w, a in final if w == "HEALTHCHECK"]
    if not checks or HEALTH_PATH not in checks[-1] or checks[-1].upper().startswith("NONE"):
        found.append("no_healthcheck")
    for w, a in ins:
        if w == "RUN" and (PIPE_TO_SHELL.search(a) and FETCHERS.search(a)):
            found.append("pipe_to_shell")
        if w == "RUN" and FETCHERS.search(a):
            found.append("network_beyond_index")
        if w == "ADD" and re.search(r"https?://", a):
            found.append("network_beyond_index")
    # the health check asks the port the server listens on
    listen = next((m.group(1) for w, a in final if w == "ENV" for m in [re.search(r"ARCANE_MCP_LISTEN=\S*:(\d+)", a)] if m), None)
    if checks and listen and f":{listen}{HEALTH_PATH}" not in checks[-1]:
        found.append("healthcheck_port")
    if plain_public_bind(text):
        found.append("plain_public_bind")
    return found


def test_the_dockerfile_keeps_the_rules():
    assert problems(DOCKERFILE.read_text(encoding="utf-8")) == []


def test_the_build_stage_copies_every_package_the_wheel_ships():
    """Each top-level source folder pyproject.toml packages (the engine, the simulator, and
    the catalog and rules it maps into the engine) is copied before `pip install .`: a
    missing one would build an image whose `interp simulate` or data is absent."""
    import tomllib

    config = tomllib.loads((DOCKERFILE.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapped = config.get("package-dir", {})
    sources = {mapped[p].split("/")[0] if p in mapped else p.split(".")[0] for p in config["packages"]
               if p in mapped or not any(p.startswith(m + ".") or p == m for m in mapped)}
    assert {"interpreter", "simulator", "catalog", "rules"} <= sources
    ins = instructions(DOCKERFILE.read_text(encoding="utf-8"))
    build = ins[: max(i for i, (w, _) in enumerate(ins) if w == "FROM")]
    copied = {src.rstrip("/") for w, a in build if w == "COPY" for src in a.split()[:-1] if not src.startswith("--")}
    assert sources <= copied, sorted(sources - copied)


def test_its_entrypoint_serves_http():
    ins = instructions(DOCKERFILE.read_text(encoding="utf-8"))
    entry = next(a for w, a in reversed(ins) if w == "ENTRYPOINT")
    cmd = next(a for w, a in reversed(ins) if w == "CMD")
    # exec form (JSON arrays): the signals reach interp itself, which drains on SIGTERM
    assert json.loads(entry) == ["interp"]
    assert json.loads(cmd) == ["serve", "--http"]


GOOD = """FROM python:3.11.10-slim AS build
RUN pip install .
FROM python:3.11.10-slim
USER app
ENV ARCANE_MCP_LISTEN=0.0.0.0:8765 \\
    ARCANE_MCP_BEHIND_TLS_PROXY=true
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/health')"
"""


@pytest.mark.parametrize("edit,code", [
    (("FROM python:3.11.10-slim\nUSER", "FROM python:latest\nUSER"), "unpinned_base"),
    (("FROM python:3.11.10-slim AS", "FROM python AS"), "unpinned_base"),
    (("USER app", "USER root"), "runs_as_root"),
    (("USER app\n", ""), "runs_as_root"),
    (("HEALTHCHECK", "# HEALTHCHECK"), "no_healthcheck"),
    (("RUN pip install .", "RUN curl -fsSL https://example.com/x.sh | sh"), "pipe_to_shell"),
    (("RUN pip install .", "RUN apt-get update && apt-get install -y git"), "network_beyond_index"),
    (("RUN pip install .", "ADD https://example.com/x.tgz /x.tgz"), "network_beyond_index"),
    (("8765/health", "9000/health"), "healthcheck_port"),
    (("ARCANE_MCP_BEHIND_TLS_PROXY=true", "ARCANE_MCP_BEHIND_TLS_PROXY=false"), "plain_public_bind"),
    (("ARCANE_MCP_BEHIND_TLS_PROXY=true", "ARCANE_MCP_AUDIT_LOG=stderr"), "plain_public_bind"),
])
def test_the_lint_catches_each_rule(edit, code):
    assert problems(GOOD) == []
    old, new = edit
    assert old in GOOD
    assert code in problems(GOOD.replace(old, new, 1))


def test_the_images_command_starts_and_its_health_check_passes(tmp_path):
    """What the container runs, run here: ENTRYPOINT + CMD with the final stage's ENV (its
    PATH and home are this machine's, its port a free one); /health answers 200 and the
    HEALTHCHECK's own command, pointed at that port, exits 0."""
    from tests.helpers import free_port, start_http_server
    from tests.test_e2e import INTERP

    text = DOCKERFILE.read_text(encoding="utf-8")
    image_port = parse_listen(final_env(text)["ARCANE_MCP_LISTEN"])[1]
    port = free_port()
    env = {**final_env(text), "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "ARCANE_MCP_CACHE_DIR": "off"}
    env["ARCANE_MCP_LISTEN"] = env["ARCANE_MCP_LISTEN"].replace(f":{image_port}", f":{port}")
    args = command(text)
    assert args[0] == "interp"
    proc = start_http_server([INTERP, *args[1:]], env, port)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        check = next(a for w, a in final_stage(instructions(text)) if w == "HEALTHCHECK")
        probe = json.loads(check[check.index("CMD") + 3:].strip().replace(f":{image_port}/", f":{port}/"))
        if probe[0] == "python":  # the image's venv python is first on its PATH; here, the test's own
            probe[0] = sys.executable
        assert subprocess.run(probe, env=env, timeout=30).returncode == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
