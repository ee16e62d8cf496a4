"""The `interp` command line, as a user runs it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner

from interpreter import RULES_DIR
from interpreter.call.dispatch import Dispatcher
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from tests.helpers import free_port

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


def test_reference_and_rules_doc_find_the_checkout_they_run_in():
    """Without --root, the generated-docs checks find the checkout from the working
    directory. (validate, validate --json, validate RULES_DIR, audit, audit --json and
    audit --rules run clean in tests/test_docs.py::test_readme_command_line_runs, which
    also reads their --json reports.)"""
    assert run("reference", "--check").returncode == 0
    assert run("rules-doc", "--check").returncode == 0


def test_server_refuses_to_start_on_invalid_rules(tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES_DIR, rules)
    (rules / "overlays" / "container.yaml").write_text("domain: container\nactions:\n  restart:\n    colour: red\n")
    p = run("serve", "--rules", str(rules))
    assert p.returncode == 1 and p.stdout == ""
    problems = [line for line in p.stderr.splitlines() if line.startswith(str(rules))]
    assert [(line.split(": ", 2)[0], line.split(": ", 2)[1], line.rsplit(" ", 1)[1]) for line in problems] == [
        (f"{rules}/overlays/container.yaml:4:5", "/actions/restart/colour", "[schema.additionalProperties]")]


def test_find():
    p = run("find", "restart", "a", "container", "--limit", "1")
    assert p.returncode == 0 and "container.restart" in p.stdout


# ---------------------------------------------------------------- what a new user hit


@pytest.fixture
def busy_port():
    """A port another program holds (listening), released after the test."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    yield holder.getsockname()[1]
    holder.close()


@pytest.mark.parametrize("command", [
    ["simulate", "--port", "{port}"],
    ["serve", "--http", "--port", "{port}"],
    ["serve", "--http", "--listen", "127.0.0.1:{port}"],
])
def test_a_busy_port_is_one_line_and_nothing_is_announced(busy_port, command):
    p = run(*[c.format(port=busy_port) for c in command], env={"ARCANE_URL": "http://127.0.0.1:9", "ARCANE_API_KEY": "arc_x"})
    assert p.returncode == 2 and p.stdout == ""
    (line,) = p.stderr.splitlines()
    assert line.startswith("interp: ") and line.endswith("[port_in_use]") and str(busy_port) in line
    assert ("--port" if "--port" in command else "--listen") in line


@pytest.mark.parametrize(("args", "code"), [
    (["--error-5xx", "200"], None),  # a fault value out of range
    (["--latency", "-1"], None),
    (["--time-scale", "0"], None),  # a knob out of range
    (["--document", "{bad_json}"], "[sim_no_document]"),
    (["--state", "{bomb}"], "[yaml_alias_bomb]"),
])
def test_simulate_refuses_a_bad_value_in_lines_not_a_traceback(tmp_path, args, code):
    bad_json, bomb = tmp_path / "doc.json", tmp_path / "state.yaml"
    bad_json.write_text("{not json", encoding="utf-8")
    bomb.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)), encoding="utf-8")
    p = run("simulate", "--port", "0", *[a.format(bad_json=bad_json, bomb=bomb) for a in args])
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    lines = p.stderr.splitlines()
    if code is None:  # one line naming the value
        assert len(lines) == 1 and lines[0].startswith("interp simulate: "), p.stderr
    else:  # one line per problem, file:line:col and the code
        assert lines and lines[-1].endswith(code), p.stderr


def test_serve_http_announces_only_once_it_listens(sim):
    port = free_port()
    env = {**ENV, "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key}
    proc = subprocess.Popen([INTERP, "serve", "--http", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # blocks until the announcement
        # once it is said, the address answers: the announcement followed the bind and startup
        assert f"http://127.0.0.1:{port}/mcp" in line
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_find_writes_the_find_tools_lines(catalog):
    from interpreter.front.names import FIND_TOOL
    from interpreter.front.surfaces import find_line, make_surface

    action = catalog.actions["container.logs"]
    p = run("find", *action.title.split(), "--limit", "10")
    assert p.returncode == 0
    # the action is among the hits (where it ranks is the ranker's business)
    rows = [r.split(None, 1) for r in p.stdout.splitlines()]
    line = next(text for score, text in rows if text.split(" ", 1)[0] == action.id)
    assert all(float(score) >= 0 for score, _ in rows)
    # the same line the tool writes (the ranker's confidence, when it gives one, ends it)
    assert line.startswith(find_line(action, catalog)) and "not served yet" not in line
    surface = make_surface("dynamic", catalog, Dispatcher(catalog, Settings(audit_log="off"), None, AuditLog("off")))
    tool_text = asyncio.run(surface.call(FIND_TOOL, {"query": action.title, "limit": 10})).text
    assert f"- {line}" in tool_text.splitlines()
    # an action a later catalog declares before its handler kind is served is marked so
    assert "not served yet" in find_line(dataclasses.replace(action, pending=True), catalog)


def _flag_command():
    """A command with the real setting flags, answering the parsed settings as JSON."""
    from interpreter.commands.cli import _settings, setting_options

    @click.command()
    @setting_options
    def show(**flags):
        s = _settings(flags)
        click.echo(json.dumps({"read_only": s.read_only, "safe_mode": s.safe_mode, "insecure_skip_verify": s.insecure_skip_verify,
                               "output_schemas": s.output_schemas, "http_stateful": s.http_stateful}))

    return show


BOOL_FLAGS = {"--read-only": "read_only", "--safe-mode": "safe_mode", "--insecure-skip-verify": "insecure_skip_verify",
              "--output-schemas": "output_schemas", "--http-stateful": "http_stateful"}


@pytest.mark.parametrize("flag", sorted(BOOL_FLAGS))
def test_boolean_flags_are_bare_and_keep_env_parity(flag):
    from interpreter.config import SETTINGS

    runner, cmd = CliRunner(), _flag_command()
    attr = BOOL_FLAGS[flag]
    var = next(s.env for s in SETTINGS if s.attr == attr)
    value = lambda args, env=None: json.loads(runner.invoke(cmd, args, env=env or {}, catch_exceptions=False).output)[attr]  # noqa: E731
    assert value([]) is False
    assert value([flag]) is True
    assert value([], {var: "true"}) is True
    assert value(["--no-" + flag[2:]], {var: "true"}) is False  # the flag wins, both ways
    assert value([flag], {var: "false"}) is True
    # a value after the flag is refused by click (usage error), never taken as the next argument
    assert runner.invoke(cmd, [f"{flag}=false"]).exit_code == 2


def test_bare_flags_reach_the_dispatcher():
    # no Arcane: read-only withdraws the action; safe mode previews it (nothing to send to)
    p = run("call", "container.restart", "containerId=abc", "--read-only", "--json")
    assert p.returncode == 1 and json.loads(p.stdout)["isError"] is True
    p = run("call", "container.restart", "containerId=abc", "--safe-mode", "--json")
    preview = json.loads(p.stdout)
    assert p.returncode == 0 and preview["structuredContent"]["method"] == "POST"
    assert preview["structuredContent"]["path"].endswith("/containers/abc/restart")


def _call_at_a_terminal(sim, state_home: Path) -> tuple[int, str]:
    """`interp call` with stderr on a pseudo-terminal (as a person runs it): (status, what the terminal showed)."""
    import pty

    leader, follower = pty.openpty()
    env = {"PATH": ENV["PATH"], "HOME": str(state_home), "XDG_STATE_HOME": str(state_home / "state"),
           "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key}
    proc = subprocess.run([INTERP, "call", "container.list", "limit=1"], env=env, stdout=subprocess.DEVNULL,
                          stderr=follower, timeout=60)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return proc.returncode, shown.decode(errors="replace")


def test_audit_records_stay_off_an_interactive_terminal(sim, tmp_path):
    target = tmp_path / "state" / "arcane-mcp" / "audit.jsonl"
    status, first = _call_at_a_terminal(sim, tmp_path)
    assert status == 0 and target.is_file()
    assert '"kind":"audit"' not in first and str(target) in first  # said once where they go
    status, second = _call_at_a_terminal(sim, tmp_path)
    assert status == 0 and second.strip() == ""  # ...and only once
    records = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [(r["action"], r["outcome"], r["kind"]) for r in records] == [("container.list", "executed", "audit")] * 2
    assert target.stat().st_mode & 0o077 == 0


def test_audit_records_go_where_the_operator_points(sim, tmp_path):
    env = {"ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key}
    p = run("call", "container.list", "limit=1", env={**env, "ARCANE_MCP_AUDIT_LOG": "stderr"})
    assert [json.loads(line)["action"] for line in p.stderr.splitlines()] == ["container.list"]
    p = subprocess.run([INTERP, "call", "container.list", "limit=1"], capture_output=True, text=True, timeout=60,
                       env={"PATH": ENV["PATH"], **env})  # unset, and stderr is a pipe: stderr as before
    assert [json.loads(line)["kind"] for line in p.stderr.splitlines()] == ["audit"]
    log = tmp_path / "audit.jsonl"
    p = run("call", "container.list", "limit=1", env={**env, "ARCANE_MCP_AUDIT_LOG": str(log)})
    assert p.stderr == "" and json.loads(log.read_text(encoding="utf-8"))["action"] == "container.list"
    p = run("call", "container.list", env={**env, "ARCANE_MCP_AUDIT_LOG": str(tmp_path / "missing" / "audit.jsonl")})
    assert p.returncode == 2 and p.stderr.startswith("interp: ARCANE_MCP_AUDIT_LOG=") and p.stderr.rstrip().endswith("[invalid_setting]")
