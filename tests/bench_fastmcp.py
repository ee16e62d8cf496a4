"""FastMCP `from_openapi` beside arcane-mcp, for `make bench` (issue 12's comparison).

FastMCP lives in its own venv (`make bench` creates .venv-fastmcp from
bench/fastmcp-requirements.txt; FASTMCP_PYTHON names another interpreter), never in .venv:
this module only spawns it. bench/fastmcp_server.py is the server (`serve`) and the per-call
measurement inside that venv (`calls`).

Engine overhead per call is measured the same way for both: the median of the 50-container
list call through an in-memory MCP session, minus a bare low-level SDK server's trivial tool
call, minus the direct httpx call for the same data (each side in its own process, with its
own httpx). Not a test: nothing asserts a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from tests.bench_overhead import _containers

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "fastmcp_server.py"
REQUIREMENTS = ROOT / "bench" / "fastmcp-requirements.txt"


def python() -> str:
    """The interpreter that has FastMCP (the Makefile's .venv-fastmcp unless FASTMCP_PYTHON)."""
    exe = os.environ.get("FASTMCP_PYTHON") or str(ROOT / ".venv-fastmcp" / "bin" / "python")
    if not Path(exe).is_file():
        raise SystemExit(f"FastMCP's interpreter {exe} is missing: run `make bench` (it creates .venv-fastmcp) "
                         "or set FASTMCP_PYTHON to a Python with bench/fastmcp-requirements.txt installed")
    return exe


def version() -> str:
    """The pinned FastMCP version (bench/fastmcp-requirements.txt)."""
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("fastmcp=="):
            return line.split("==", 1)[1].strip()
    return "?"


def serve_command(url: str, api_key: str) -> tuple[list[str], dict]:
    """The stdio server command and its environment (no banner, no update check: no network)."""
    return [python(), str(SCRIPT), "serve", url, api_key], {"FASTMCP_SHOW_SERVER_BANNER": "false", "FASTMCP_CHECK_FOR_UPDATES": "off",
                                                             "FASTMCP_LOG_LEVEL": "WARNING"}


def body() -> dict:
    """The 50-container answer both sides are given; FastMCP validates Arcane's output schema,
    which requires `counts`, so it is there (arcane-mcp's side reads the same items)."""
    data = _containers()
    data["counts"] = {"runningContainers": 33, "stoppedContainers": 17, "totalContainers": 50}
    return data


def fastmcp_calls() -> dict:
    """FastMCP's per-call medians (ms), measured in its own venv."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(body(), f)
    try:
        out = subprocess.run([python(), str(SCRIPT), "calls", f.name], capture_output=True, text=True, timeout=900, check=False,
                             env={**os.environ, "FASTMCP_CHECK_FOR_UPDATES": "off"})
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(f"bench/fastmcp_server.py calls failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
