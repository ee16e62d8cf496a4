"""`interp doctor` against the simulator, and the server's startup drift warning."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from click.testing import CliRunner

from interpreter.commands.cli import main
from interpreter.commands.doctor import FAIL, OK, SKIP, WARN, certificate_days, check_tls, diagnose, permissions_check, tls_verdict
from interpreter.commands.drift import compare
from interpreter.commands.update_spec import operations_of
from interpreter.config import Settings
from interpreter.front.serve import build_runtime, start_client
from simulator import start_simulator

from .helpers import data_file, free_port

DOC_2_8 = data_file("arcane-2.8.0.openapi.json")
CHECKS = ["reachable", "tls", "credential", "permissions", "version", "drift", "transport", "environment", "daemon"]


@pytest.fixture(scope="module")
def sim():
    with start_simulator() as s:
        yield s
        assert s.violations == [], s.violations


@pytest.fixture(autouse=True)
def fresh(request):
    if "sim" in request.fixturenames:
        s = request.getfixturevalue("sim")
        s.reset()
        s.set_faults({})
        s.set_knobs({})
        s.serve_document(None)
    yield


def doctor(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["doctor", "--json", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.output)


def diagnosed(catalog, **settings) -> tuple[int, dict]:
    """diagnose() in process, with the session's catalog (no catalog build per test)."""
    report = asyncio.run(diagnose(Settings(**settings), catalog))
    return report.exit_code, report.as_dict()


def severities(report: dict) -> dict[str, str]:
    return {c["check"]: c["severity"] for c in report["checks"]}


def test_everything_ok(sim):
    code, report = doctor("--arcane-url", sim.url, "--api-key", sim.api_key)
    assert code == 0 and report["worst"] == OK
    assert [c["check"] for c in report["checks"]] == CHECKS
    assert set(severities(report).values()) == {OK}
    assert all("next_step" not in c for c in report["checks"])


def test_text_table_has_one_row_per_check(sim):
    result = CliRunner().invoke(main, ["doctor", "--arcane-url", sim.url, "--api-key", sim.api_key])
    assert result.exit_code == 0
    rows = [line.split()[0:2] for line in result.output.splitlines()[1:-1]]
    assert rows == [[name, "OK"] for name in CHECKS]


def test_refused_key_fails_and_skips_what_needs_it(sim, catalog):
    code, report = diagnosed(catalog, arcane_url=sim.url, api_key="arc_wrong_key_0000")
    s = severities(report)
    assert code == 2 and s["credential"] == FAIL
    assert s["permissions"] == s["version"] == s["transport"] == s["environment"] == s["daemon"] == SKIP
    assert s["reachable"] == OK and s["drift"] == OK  # the document is public
    failed = next(c for c in report["checks"] if c["check"] == "credential")
    assert failed["next_step"] and "arc_wrong_key_0000" not in json.dumps(report)


def test_no_credential_fails(sim, catalog):
    code, report = diagnosed(catalog, arcane_url=sim.url)
    assert code == 2 and severities(report)["credential"] == FAIL


def test_unknown_default_environment(sim, catalog):
    code, report = diagnosed(catalog, arcane_url=sim.url, api_key=sim.api_key, environment_id="999")
    s = severities(report)
    assert code == 2 and s["environment"] == FAIL and s["daemon"] == SKIP


def test_docker_daemon_down(sim, catalog):
    sim.set_faults({"daemon_down": ["0"]})
    code, report = diagnosed(catalog, arcane_url=sim.url, api_key=sim.api_key)
    s = severities(report)
    assert code == 2 and s["daemon"] == FAIL and s["environment"] in (OK, WARN)


def test_permissions_verdicts():
    assert permissions_check(True, None, "0").severity == OK
    assert permissions_check(False, {"global": ["containers:list"]}, "0").severity == OK
    assert permissions_check(False, {"1": ["containers:list"]}, "1").severity == OK
    warned = permissions_check(False, {"1": ["containers:list"]}, "0")
    assert warned.severity == WARN and warned.next_step and warned.details == {"by_environment": {"1": 1}}
    assert permissions_check(None, None, "0").severity == OK  # not reported: nothing to judge


def test_served_document_changed_is_reported_as_drift(sim, catalog):
    other = json.loads(DOC_2_8.read_text(encoding="utf-8"))
    sim.serve_document(other)
    code, report = diagnosed(catalog, arcane_url=sim.url, api_key=sim.api_key)
    assert code == 1 and report["worst"] == WARN
    drift = next(c for c in report["checks"] if c["check"] == "drift")
    assert drift["severity"] == WARN and drift["next_step"]
    ours, theirs = operations_of(catalog.document), operations_of(other)
    removed = {r["operationId"] for r in drift["details"]["removed"]}
    added = {r["operationId"] for r in drift["details"]["added"]}
    assert removed == set(ours) - set(theirs) and removed
    assert added == set(theirs) - set(ours)
    assert drift["details"]["live_version"] == "2.8.0"
    version = next(c for c in report["checks"] if c["check"] == "version")
    assert version["severity"] == WARN and version["details"] == {"live": "2.8.0", "embedded": "2.12.0"}


def _without_sse(catalog):
    """The catalog of a server built before server-sent events were declared."""
    from dataclasses import replace

    from interpreter.call.framing import Framings

    framings = Framings(types={"application/x-json-stream": "ndjson"}, events={})
    return replace(catalog, conventions=replace(catalog.conventions, framings=framings))


@pytest.mark.parametrize("framing", ["ndjson", "sse"])
def test_transport_reports_the_framing_streams_are_served_in(sim, catalog, framing):
    sim.set_knobs({"live_framing": framing})
    code, report = diagnosed(catalog, arcane_url=sim.url, api_key=sim.api_key)
    check = next(c for c in report["checks"] if c["check"] == "transport")
    assert code == 0 and check["severity"] == OK and check["details"]["framing"] == framing
    assert [dict(r.query) for r in sim.requests() if r.path == "/api/stream"][-1] == {"channels": "environments"}


def test_a_stream_in_an_undeclared_type_is_a_transport_drift(sim, catalog):
    sim.set_knobs({"live_framing": "sse"})
    code, report = diagnosed(_without_sse(catalog), arcane_url=sim.url, api_key=sim.api_key)
    check = next(c for c in report["checks"] if c["check"] == "transport")
    assert code == 1 and report["worst"] == WARN and check["severity"] == WARN and check["next_step"]
    assert check["details"] == {"stream": "stream.watch", "content_type": "text/event-stream", "framing": None,
                                "declared": ["application/x-json-stream"]}
    assert severities(report)["drift"] == OK  # the document did not change: only the transport


def test_simulator_started_with_another_document():
    with start_simulator(document=DOC_2_8) as other:
        code, report = doctor("--arcane-url", other.url, "--api-key", other.api_key)
        s = severities(report)
        assert code == 1 and s["drift"] == WARN and s["version"] == WARN
        assert s["credential"] == OK and s["environment"] == OK and s["daemon"] == OK
        assert other.violations == []


def test_unreachable(catalog):
    code, report = diagnosed(catalog, arcane_url=f"http://127.0.0.1:{free_port()}", api_key="arc_x")
    s = severities(report)
    assert code == 2 and s["reachable"] == FAIL
    assert {s[n] for n in CHECKS[2:]} == {SKIP}


def test_no_url(monkeypatch):
    monkeypatch.delenv("ARCANE_URL", raising=False)
    code, report = doctor()
    assert code == 2 and severities(report) == {"reachable": FAIL}


# ---------------------------------------------------------------- TLS


def test_certificate_expiry_verdicts():
    now = time.time()
    assert certificate_days(time.strftime("%b %d %H:%M:%S %Y GMT", time.gmtime(now + 30 * 86400)), now) == pytest.approx(30, abs=0.01)
    assert tls_verdict(-1)[0] == FAIL
    assert tls_verdict(3)[0] == WARN
    assert tls_verdict(90)[0] == OK


def test_plain_http_off_loopback_and_unverified_https_warn():
    plain = asyncio.run(check_tls(Settings(arcane_url="http://arcane.example.com"), time.time))
    assert plain.severity == WARN and plain.next_step
    unverified = asyncio.run(check_tls(Settings(arcane_url="https://arcane.example.com", insecure_skip_verify=True), time.time))
    assert unverified.severity == WARN and unverified.next_step
    assert asyncio.run(check_tls(Settings(arcane_url="http://127.0.0.1:1"), time.time)).severity == OK


def test_https_without_tls_on_the_port_fails():
    port = free_port()  # nothing listens: the handshake cannot happen
    check = asyncio.run(check_tls(Settings(arcane_url=f"https://127.0.0.1:{port}", request_timeout=2.0), time.time))
    assert check.severity == FAIL and check.next_step


# ---------------------------------------------------------------- drift and the startup warning


def test_compare_same_document_has_no_drift(catalog):
    drift = compare(catalog.document, catalog.document)
    assert not drift.differs and drift.operations == len(operations_of(catalog.document))


def test_compare_names_a_moved_operation(catalog):
    live = json.loads(json.dumps(dict(catalog.document)))  # a Mapping read on first use (artefact.LazyMapping)
    path = "/environments/{id}/containers"
    live["paths"]["/environments/{id}/containers-moved"] = {"get": live["paths"][path].pop("get")}
    drift = compare(catalog.document, live)
    assert [oid for oid, _ in drift.changed] == ["list-containers"] and not drift.added and not drift.removed


def _startup(settings: Settings, caplog):
    """Start a runtime's client as the server does and wait for the drift check."""
    runtime = build_runtime(settings)

    async def run():
        task = await start_client(runtime)
        try:
            return await task
        finally:
            await runtime.dispatcher.client.aclose()

    with caplog.at_level(logging.DEBUG, logger="arcane_mcp"):
        return asyncio.run(run())


def test_startup_warns_once_when_the_live_document_differs(sim, caplog):
    sim.serve_document(json.loads(DOC_2_8.read_text(encoding="utf-8")))
    drift = _startup(Settings(arcane_url=sim.url, api_key=sim.api_key), caplog)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "arcane_mcp"]
    assert drift is not None and drift.differs
    assert len(warnings) == 1 and "2.8.0" in warnings[0].getMessage()


def test_startup_is_quiet_when_the_document_matches(sim, caplog):
    drift = _startup(Settings(arcane_url=sim.url, api_key=sim.api_key), caplog)
    assert drift is not None and not drift.differs
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == "arcane_mcp"]


def test_startup_drift_check_never_fails_startup(caplog):
    assert _startup(Settings(arcane_url=f"http://127.0.0.1:{free_port()}", api_key="arc_x"), caplog) is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == "arcane_mcp"]


DEMO_SCOPED_KEY = "arc_sim_readonly_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"  # containers:list/read, environments:read on "0"
AGENT_KEY = "arc_sim_agentonly_5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b"  # grants on the remote agent only


def test_a_scoped_key_is_judged_by_its_own_grants(sim):
    # the owner is an admin: /auth/me says so, but the key holds only its own grants
    code, report = doctor("--arcane-url", sim.url, "--api-key", DEMO_SCOPED_KEY)
    perms = next(c for c in report["checks"] if c["check"] == "permissions")
    assert perms["severity"] == OK and perms["details"]["source"] == "key"
    assert perms["details"]["by_environment"] == {"global": 0, "0": 3}
    assert "administrator" not in perms["summary"]
    code, report = doctor("--arcane-url", sim.url, "--api-key", AGENT_KEY)
    perms = next(c for c in report["checks"] if c["check"] == "permissions")
    assert perms["severity"] == WARN and perms["details"]["source"] == "key" and perms["next_step"]
    assert perms["details"]["by_environment"].get("0", 0) == 0


def test_the_bootstrap_key_is_its_owner(sim):
    code, report = doctor("--arcane-url", sim.url, "--api-key", sim.api_key)
    perms = next(c for c in report["checks"] if c["check"] == "permissions")
    assert perms["severity"] == OK and "source" not in perms.get("details", {})


def test_the_stdio_drift_check_waits_for_the_first_tools_list(sim, caplog):
    """serve_stdio passes the event its first tools/list answer sets: the live document is
    not asked for before it (the check is off the start's way), and is asked for after it."""
    sim.serve_document(json.loads(DOC_2_8.read_text(encoding="utf-8")))
    runtime = build_runtime(Settings(arcane_url=sim.url, api_key=sim.api_key))
    document = runtime.catalog.conventions.diagnostics.document

    def asked() -> int:
        return sum(1 for r in sim.requests() if r.path.endswith(document))

    async def run():
        listed = asyncio.Event()
        before = asked()
        task = await start_client(runtime, after=listed)
        try:
            await asyncio.sleep(0.5)
            waited = asked() - before
            listed.set()
            drift = await asyncio.wait_for(task, 30)
            return waited, asked() - before, drift
        finally:
            await runtime.dispatcher.client.aclose()

    with caplog.at_level(logging.DEBUG, logger="arcane_mcp"):
        waited, after, drift = asyncio.run(run())
    assert (waited, after) == (0, 1) and drift is not None and drift.differs
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "arcane_mcp"]
    assert len(warnings) == 1


def test_the_stdio_server_sets_the_event_when_it_answers_tools_list():
    from interpreter.front.serve import ToolList

    runtime = build_runtime(Settings(arcane_url="http://127.0.0.1:9", api_key="arc_x"))
    answered = asyncio.Event()
    tools = ToolList(runtime, answered)
    assert not answered.is_set()
    result = asyncio.run(tools.on_list_tools(None, None))
    assert answered.is_set() and result["tools"]
