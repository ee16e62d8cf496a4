"""The official MCP conformance suite (@modelcontextprotocol/conformance, npm) against
`interp serve --http`, stateless and stateful: the current release and the 0.2 pre-release
line (which adds the 2026-07-28 stateless, header-validation and tasks scenarios).

Node 22 and the suite come from the npm registry (`npm` on PATH is all a CI machine needs;
the suite needs Node 22, which `npm install node@22` provides) into a cache directory:
$XDG_CACHE_HOME/arcane-mcp/conformance (or ~/.cache/…), installed once and reused. Each
run passes the suite its expected-failures file (tests/conformance/): every listed entry
needs one of the suite's own fixture tools, prompts or resources (the file names which),
so a new failure, or a listed entry that starts passing, fails the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import free_port, start_http_server
from tests.test_e2e import INTERP

# the first run installs Node and two suites from the registry, then starts two servers
pytestmark = pytest.mark.timeout(1800)

HERE = Path(__file__).resolve().parent / "conformance"
PACKAGE = "@modelcontextprotocol/conformance"
VERSIONS = ("0.1.16", "0.2.0-alpha.12")
NODE_MAJOR = "22"
MODES = ("stateless", "stateful")
# scenarios that need no fixture and must have run and passed in every run of that version
MUST_PASS = {
    "0.1.16": ("server-initialize", "ping", "tools-list", "resources-list", "prompts-list", "completion-complete",
               "logging-set-level", "dns-rebinding-protection"),
    "0.2.0-alpha.12": ("server-initialize", "ping", "tools-list", "resources-list", "prompts-list", "completion-complete",
                       "logging-set-level", "dns-rebinding-protection", "http-header-validation", "caching",
                       "sep-2164-resource-not-found", "input-required-result-unsupported-methods",
                       "input-required-result-validate-input"),
}
STATEFUL_ONLY = {"0.1.16": ("server-sse-multiple-streams",),
                 "0.2.0-alpha.12": ("server-sse-multiple-streams", "server-session-lifecycle")}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "arcane-mcp" / "conformance"


def _installed_version(where: Path, package: str) -> str | None:
    manifest = where / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def npm_install(where: Path, spec: str, package: str, wanted) -> None:
    """`npm install spec` into its own directory, unless what is there already fits."""
    if (v := _installed_version(where, package)) is not None and wanted(v):
        return
    npm = shutil.which("npm")
    assert npm, "the conformance test needs npm on PATH (it installs Node 22 and the suite from the npm registry)"
    where.mkdir(parents=True, exist_ok=True)
    (where / "package.json").write_text(json.dumps({"name": "arcane-mcp-conformance", "private": True}))
    r = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", spec], cwd=where,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"npm install {spec} failed: {r.stderr[-2000:]}"
    assert (v := _installed_version(where, package)) is not None and wanted(v), f"npm installed {package} {v}"


@pytest.fixture(scope="module")
def node() -> Path:
    where = cache_dir() / f"node{NODE_MAJOR}"
    npm_install(where, f"node@{NODE_MAJOR}", "node", lambda v: v.split(".")[0] == NODE_MAJOR)
    return where / "node_modules" / ".bin" / "node"


@pytest.fixture(scope="module")
def suites() -> dict[str, Path]:
    out = {}
    for version in VERSIONS:
        where = cache_dir() / version
        npm_install(where, f"{PACKAGE}@{version}", PACKAGE, lambda v, version=version: v == version)
        out[version] = where / "node_modules" / PACKAGE / "dist" / "index.js"
    return out


@pytest.fixture(scope="module")
def servers(sim):
    """Both modes on loopback, where a request without a key uses the server's own (the
    suite sends none), with the default limits: the suite is one fast client, and no
    interactive client may be refused by them."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
            "ARCANE_MCP_AUDIT_LOG": "off"}
    procs, urls = [], {}
    try:
        for mode in MODES:
            port = free_port()
            env = {**base, "ARCANE_MCP_HTTP_STATEFUL": "true" if mode == "stateful" else "false"}
            procs.append(start_http_server([INTERP, "serve", "--http", "--port", str(port)], env, port))
            urls[mode] = f"http://127.0.0.1:{port}/mcp"
        yield urls
    finally:
        for p in procs:
            with contextlib.suppress(Exception):
                p.terminate()
                p.wait(timeout=30)


def scenario_checks(out: Path) -> dict[str, list[dict]]:
    """checks.json of every scenario the run wrote, by scenario name (the directory is
    server-<scenario>-<ISO timestamp>)."""
    found = {}
    for checks in out.glob("server-*/checks.json"):
        m = re.match(r"server-(.+?)-\d{4}-\d\d-\d\dT", checks.parent.name)
        assert m, checks.parent.name
        found[m.group(1)] = json.loads(checks.read_text())
    return found


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("version", VERSIONS)
def test_conformance_suite(node, suites, servers, version, mode, tmp_path):
    baseline = HERE / f"expected-failures-{version}-{mode}.yaml"
    args = [str(node), str(suites[version]), "server", "--url", servers[mode], "--expected-failures", str(baseline),
            "-o", str(tmp_path)]
    if version.startswith("0.2"):
        args += ["--suite", "all"]  # pending, draft and extension scenarios too (stateless, header validation, tasks)
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    ran = scenario_checks(tmp_path)
    must = MUST_PASS[version] + (STATEFUL_ONLY[version] if mode == "stateful" else ())
    for scenario in must:
        assert scenario in ran, f"{scenario} did not run"
        statuses = {c["status"] for c in ran[scenario]}
        assert "SUCCESS" in statuses and not statuses & {"FAILURE", "WARNING"}, (scenario, ran[scenario])
