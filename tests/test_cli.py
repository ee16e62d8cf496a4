"""The `interp` command line, as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from interpreter import CATALOG_DIR, RULES_DIR

INTERP = str(Path(sys.executable).parent / "interp")
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_MCP_AUDIT_LOG": "off"}


def run(*args, env=None, timeout=60):
    return subprocess.run([INTERP, *args], capture_output=True, text=True, timeout=timeout, env={**ENV, **(env or {})})


def test_call_container_list_prints_the_demo_containers(sim):
    p = run("call", "container.list", "limit=5", env={"ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key})
    assert p.returncode == 0, p.stderr
    first = sim.items("containers")[0]
    assert "5 item(s) —" in p.stdout and first["id"] in p.stdout


def test_call_json_prints_the_whole_tool_result(sim):
    p = run("call", "container.list", "limit=2", "--json", env={"ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key})
    out = json.loads(p.stdout)
    assert out["isError"] is False and len(out["structuredContent"]["items"]) == 2
    assert out["content"][0]["type"] == "text" and out["content"][0]["annotations"]["audience"] == ["assistant"]


def test_call_error_exit_status(sim):
    p = run("call", "container.get", "containerId=nope", env={"ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key})
    assert p.returncode == 1 and "Next step:" in p.stdout


def test_validate_and_audit_and_reference_are_clean():
    assert run("validate", str(RULES_DIR)).returncode == 0
    p = run("validate", "--json")
    assert json.loads(p.stdout) == {"ok": True, "problems": []}
    assert run("audit").returncode == 0
    assert run("reference", "--check").returncode == 0


def test_server_refuses_to_start_on_invalid_rules(tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES_DIR, rules)
    (rules / "overlays" / "container.yaml").write_text("domain: container\nactions:\n  restart:\n    colour: red\n")
    p = run("serve", "--rules", str(rules))
    assert p.returncode == 1
    assert "the rules are invalid" in p.stderr
    assert "rules/overlays/container.yaml:4:5: /actions/restart/colour: unknown key 'colour'" in p.stderr


def test_find():
    p = run("find", "restart", "a", "container", "--limit", "1")
    assert p.returncode == 0 and "container.restart" in p.stdout
