"""The MCP Inspector's schema portability check (`@modelcontextprotocol/inspector`, npm; its CLI's
`--method tools/list --strict`) against `interp serve` (stdio) and the simulator: the individual
surface with output schemas on lists no finding in the portable dialect, and some in the
standard one (type lists such as `["string", "null"]`), so the check is seen to check.

Node 22 and the Inspector come from the npm registry into the conformance test's cache
directory ($XDG_CACHE_HOME/arcane-mcp/conformance, or ~/.cache/…), installed once and reused.
The Inspector follows tools/list's `nextCursor` (the list is three pages with output schemas
on); the test checks it saw every tool the server lists.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.test_conformance import NODE_MAJOR, cache_dir, npm_install
from tests.test_e2e import INTERP

# the first run installs Node and the Inspector from the registry
pytestmark = pytest.mark.timeout(1200)

PACKAGE = "@modelcontextprotocol/inspector"
VERSION = "2.12.0"


@pytest.fixture(scope="module")
def inspector() -> tuple[str, str]:
    """(node, the Inspector's CLI script)."""
    node_dir = cache_dir() / f"node{NODE_MAJOR}"
    npm_install(node_dir, f"node@{NODE_MAJOR}", "node", lambda v: v.split(".")[0] == NODE_MAJOR)
    where = cache_dir() / f"inspector-{VERSION}"
    npm_install(where, f"{PACKAGE}@{VERSION}", PACKAGE, lambda v: v == VERSION)
    cli = where / "node_modules" / PACKAGE / "clients" / "cli" / "build" / "index.js"
    assert cli.is_file(), f"{PACKAGE} {VERSION} has no CLI at {cli}"
    return str(node_dir / "node_modules" / ".bin" / "node"), str(cli)


def strict_findings(inspector, sim, dialect: str) -> tuple[int, list[dict]]:
    """(how many tools the Inspector listed, its schema findings) for one dialect."""
    node, cli = inspector
    env = {"ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key, "ARCANE_MCP_AUDIT_LOG": "off",
           "ARCANE_MCP_SURFACE": "individual", "ARCANE_MCP_OUTPUT_SCHEMAS": "true", "ARCANE_MCP_SCHEMA_DIALECT": dialect}
    args = [node, cli, "--transport", "stdio"]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    args += ["--method", "tools/list", "--strict", "--format", "json", "--", INTERP, "serve"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    # exit 6 is the Inspector's "an error-severity finding" (the warnings alone exit 0)
    assert r.returncode in (0, 6), f"the Inspector failed ({r.returncode}): {r.stderr[-2000:]}"
    out = json.loads(r.stdout)
    findings = [dict(f, tool=t["toolName"]) for t in out.get("schemaFindings", []) for f in t["findings"]]
    return len(out["result"]["tools"]), findings


def test_portable_has_no_strict_finding_and_standard_has_some(inspector, sim, catalog):
    from interpreter.front.surfaces import make_surface
    from tests.helpers import make_dispatcher, ok_json

    dispatcher, _ = make_dispatcher(catalog, lambda r: ok_json({}))
    listed = len(make_surface("individual", catalog, dispatcher).tools())
    seen, portable = strict_findings(inspector, sim, "portable")
    assert seen == listed, f"the Inspector saw {seen} of {listed} tools (did it follow nextCursor?)"
    assert portable == [], portable[:5]
    seen, standard = strict_findings(inspector, sim, "standard")
    assert seen == listed
    rules = {f["rule"] for f in standard}
    assert "type-union" in rules and {f["schema"] for f in standard} == {"inputSchema", "outputSchema"}
