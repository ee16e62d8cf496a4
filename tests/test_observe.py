"""Opt-in traces and metrics (interpreter/front/observe.py): off by default and importing
nothing; a missing extra is one line naming the setting; a span per call with no value in
it, its traceparent carried to Arcane and taken from the client; /metrics with bounded
labels, for loopback or a bearer token only."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from interpreter.config import load_settings
from interpreter.errors import ConfigError
from interpreter.front import observe
from interpreter.front.names import EXECUTE_TOOL
from tests.helpers import free_port, serve_http_in_thread
from tests.test_http import ACCEPT, client_for

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"  # looks like a credential: never in a span or a label
HOSTILE = 'evil"} 1\n# TYPE x counter\nx{a="b'  # a tool name or header written to break the exposition format
MISSING = "a" * 64  # a container ID no container has (Arcane answers 404)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def env_for(sim, **extra) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
            "ARCANE_MCP_AUDIT_LOG": "off", **extra}


# ---------------------------------------------------------------- off: nothing imported, nothing changed

PROBE = """
import sys
from interpreter.config import Settings
from interpreter.front.serve import build_runtime, build_server
from interpreter.front.httpmode import http_app
runtime = build_runtime(Settings(arcane_url="http://127.0.0.1:9", audit_log="off", transport="http", metrics={metrics!r}))
build_server(runtime)
http_app(runtime, "127.0.0.1", 8765)
print(",".join(m for m in ("opentelemetry.sdk", "prometheus_client") if m in sys.modules))
"""


def test_off_by_default_imports_neither_the_sdk_nor_prometheus():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", PROBE.format(metrics=False)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
    # the probe does see an import when one happens: metrics on imports prometheus_client
    out = subprocess.run([sys.executable, "-c", PROBE.format(metrics=True)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "prometheus_client"


def test_metrics_are_http_only():
    settings = load_settings({"ARCANE_MCP_METRICS": "true"})
    assert observe.Observer.for_settings(settings).on is False  # stdio: nothing to serve them on


# ---------------------------------------------------------------- the extra missing

MISSING_EXTRA = "import sys; sys.modules[{module!r}] = None; from interpreter.commands.cli import main; main({args!r})"


@pytest.mark.parametrize("module,args,env,setting", [
    ("opentelemetry.sdk", ["serve"], {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ("opentelemetry.exporter.otlp.proto.http", ["serve"], {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"},
     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    ("prometheus_client", ["serve", "--http", "--port", "{port}"], {"ARCANE_MCP_METRICS": "true"}, "ARCANE_MCP_METRICS"),
])
def test_a_missing_extra_is_one_line_naming_the_setting(module, args, env, setting):
    args = [a.replace("{port}", str(free_port())) for a in args]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ARCANE_"))}
    out = subprocess.run([sys.executable, "-c", MISSING_EXTRA.format(module=module, args=args)], capture_output=True, text=True,
                         env={**base, "ARCANE_MCP_AUDIT_LOG": "off", **env}, stdin=subprocess.DEVNULL, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert setting in lines[0] and "pip install 'arcane-mcp[observability]'" in lines[0] and "[observability_missing]" in lines[0]


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize("var,value", [
    ("OTEL_EXPORTER_OTLP_ENDPOINT", ".."), ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a\x07b"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c/" + "x" * 1_000_000),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1 /traces"), ("OTEL_SERVICE_NAME", "arcane\x1b[31m"),
    ("OTEL_SERVICE_NAME", "   "), ("OTEL_SERVICE_NAME", "s" * 1_000_000), ("ARCANE_MCP_METRICS", "maybe"),
    ("ARCANE_MCP_METRICS_TOKEN", "short"), ("ARCANE_MCP_METRICS_TOKEN", "a-token-of-enough-length\n"),
    ("ARCANE_MCP_METRICS_TOKEN", "t" * 1_000_000), ("ARCANE_MCP_METRICS_TOKEN", "a token with spaces in it"),
])
def test_bad_values_are_one_line_naming_the_setting(var, value):
    with pytest.raises(ConfigError) as exc:
        load_settings({var: value})
    assert exc.value.setting == var
    line = exc.value.format()
    assert "\n" not in line and len(line) < 400
    if var == "ARCANE_MCP_METRICS_TOKEN":
        assert value.strip() not in line  # a secret is never echoed


def test_empty_values_leave_everything_off():
    settings = load_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "", "ARCANE_MCP_METRICS": "",
                              "ARCANE_MCP_METRICS_TOKEN": "", "OTEL_SERVICE_NAME": ""})
    assert observe.traces_endpoint(settings) is None and settings.service_name == "arcane-mcp" and settings.metrics_token is None


def test_which_traces_endpoint_is_honoured():
    both = load_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/x"})
    assert observe.traces_endpoint(both) == ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4318/x")
    base = load_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"})
    assert observe.traces_endpoint(base) == ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/v1/traces")


# ---------------------------------------------------------------- traces, end to end


@pytest.fixture
def spans(monkeypatch):
    """Every span the servers started in this test export (the SDK's in-memory exporter)."""
    memory = InMemorySpanExporter()
    monkeypatch.setattr(observe, "span_processor", lambda endpoint: SimpleSpanProcessor(memory))
    return memory


def _every_value(span) -> list[str]:
    values = [span.name, *map(str, span.attributes.values()), *map(str, span.resource.attributes.values())]
    for event in span.events:
        values += [event.name, *map(str, (event.attributes or {}).values())]
    return values


@contextlib.contextmanager
def traced_server(sim):
    with serve_http_in_thread(env_for(sim, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_SERVICE_NAME="arcane-test")) as base:
        yield base


async def test_a_span_per_call_with_no_value_in_it(sim, spans):
    with traced_server(sim) as base:
        async with client_for(base, None) as client:
            sim.clear_requests()
            searched = await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {"search": SECRET}})
            assert not searched.is_error
            listed = await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {}})
            missing = await client.call_tool(EXECUTE_TOOL, {"action": "container.get", "params": {"containerId": MISSING}})
            assert missing.is_error
            unknown = await client.call_tool(EXECUTE_TOOL, {"action": SECRET, "params": {}})
            assert unknown.is_error
            arcane = [r for r in sim.requests() if r.path.startswith("/api/environments/0/containers")]
    finished = spans.get_finished_spans()
    calls = [s for s in finished if s.name.startswith("tools/call")]
    assert len(calls) == 4, [s.name for s in finished]
    ok, _, failed, bogus = calls
    assert ok.name == "tools/call container.list" and ok.kind.name == "SERVER"
    assert ok.attributes["arcane_mcp.action"] == "container.list" and ok.attributes["arcane_mcp.outcome"] == "executed"
    assert ok.attributes["arcane_mcp.surface"] == "dynamic" and ok.attributes["arcane_mcp.environment"] == "0"
    assert ok.attributes["http.response.status_code"] == 200 and ok.attributes["arcane_mcp.duration_ms"] >= 0
    assert ok.resource.attributes["service.name"] == "arcane-test"
    assert failed.attributes["arcane_mcp.outcome"] == "failed" and failed.attributes["http.response.status_code"] == 404
    assert failed.attributes["error.type"] == "ArcaneHTTPError" and "arcane_mcp.environment" not in failed.attributes
    assert failed.status.status_code.name == "ERROR"
    assert bogus.name == "tools/call unknown" and bogus.attributes["arcane_mcp.action"] == "unknown"
    # no value of the calls anywhere: not the argument, not the key, not a result's text
    every = httpx.get(sim.url + "/api/environments/0/containers", headers={"X-API-Key": sim.api_key}).json()["data"]
    names = [c["names"][0].lstrip("/") for c in every if c["names"][0].lstrip("/") in listed.content[0].text]
    assert names  # what the result showed
    for span in finished:
        for value in _every_value(span):
            assert SECRET not in value and sim.api_key not in value and MISSING not in value
            assert not [name for name in names if name in value]
    # the SDK's own middleware span is off: one span per call, none per message
    assert not [s for s in finished if s.name.startswith(("initialize", "tools/list", "notifications"))]
    # the requests to Arcane carry the call span's trace
    assert len(arcane) == 3
    for request, span in zip(arcane, calls[:3], strict=True):
        version, trace_id, parent_id, flags = request.header("traceparent").split("-")
        assert trace_id == f"{span.context.trace_id:032x}" and parent_id == f"{span.context.span_id:016x}"
    assert len({s.context.trace_id for s in calls}) == 4  # each call its own trace (no parent given)


async def test_an_incoming_traceparent_is_the_parent(sim, spans):
    with traced_server(sim) as base:
        # in the request's _meta (the SDK's convention)
        async with client_for(base, None) as client:
            await client.call_tool(EXECUTE_TOOL, {"action": "environment.list", "params": {}}, meta={"traceparent": PARENT})
        # in the HTTP request's header
        other = "11111111111111111111111111111111"
        async with httpx.AsyncClient(headers={"traceparent": f"00-{other}-00f067aa0ba902b7-01"}, timeout=60) as http:
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            async with Client(streamable_http_client(base + "/mcp", http_client=http), mode="legacy") as client:
                await client.call_tool(EXECUTE_TOOL, {"action": "environment.list", "params": {}})
        # hostile carriers: ignored, the span is a root of its own
        async with client_for(base, None) as client:
            for meta in ({"traceparent": "00-" + "f" * 1_000_000}, {"traceparent": {"deep": [[["x"]]]}}, {"traceparent": "..\x00"},
                         {"traceparent": ""}):
                await client.call_tool(EXECUTE_TOOL, {"action": "environment.list", "params": {}}, meta=meta)
    calls = [s for s in spans.get_finished_spans() if s.name == "tools/call environment.list"]
    assert len(calls) == 6
    assert f"{calls[0].context.trace_id:032x}" == TRACE_ID and f"{calls[0].parent.span_id:016x}" == "00f067aa0ba902b7"
    assert f"{calls[1].context.trace_id:032x}" == other
    assert all(s.parent is None for s in calls[2:])


async def test_a_resource_read_is_a_span_naming_its_template(sim, spans):
    with traced_server(sim) as base:
        async with client_for(base, None) as client:
            templates = (await client.list_resource_templates()).resource_templates
            template = next(t.uri_template for t in templates if t.uri_template.count("{") == 1 and "environment" in t.uri_template)
            uri = template.split("{")[0] + "0" + template.split("}", 1)[1]
            await client.read_resource(uri)
    reads = [s for s in spans.get_finished_spans() if s.name.startswith("resources/read")]
    assert len(reads) == 1 and reads[0].attributes["arcane_mcp.resource_template"] == template
    assert reads[0].attributes["arcane_mcp.surface"] == "resource" and reads[0].attributes["arcane_mcp.outcome"] == "executed"


# ---------------------------------------------------------------- metrics, end to end


def scrape(base: str, **headers) -> dict[str, list]:
    resp = httpx.get(base + "/metrics", headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    return {f.name: f.samples for f in text_string_to_metric_families(resp.text)}


def value(families: dict, name: str, sample: str | None = None, **labels) -> float:
    found = [s.value for s in families[name] if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(found)


async def test_metrics_after_a_few_calls(sim):
    with serve_http_in_thread(env_for(sim, ARCANE_MCP_METRICS="true")) as base:
        async with client_for(base, None) as client:
            assert not (await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {}})).is_error
            refused = await client.call_tool(EXECUTE_TOOL, {"action": "container.delete", "params": {"containerId": MISSING}})
            assert refused.is_error
            assert (await client.call_tool(EXECUTE_TOOL, {"action": "container.get", "params": {"containerId": MISSING}})).is_error
            await client.call_tool(EXECUTE_TOOL, {"action": HOSTILE, "params": {}})
            with contextlib.suppress(Exception):
                await client.call_tool(HOSTILE, {})
        # refusals in front of the pool: a key Arcane refuses, a body that is not JSON
        assert httpx.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={**ACCEPT, "X-Arcane-API-Key": "arc_not_a_key_" + HOSTILE.replace("\n", " ")}).status_code == 401
        assert httpx.post(base + "/mcp", content=b"{}", headers={"Accept": ACCEPT["Accept"], "Content-Type": "text/plain",
                                                                 "X-Hostile": HOSTILE.replace("\n", " ")}).status_code == 415
        families = scrape(base)
    calls = "arcane_mcp_calls"
    assert value(families, calls, "arcane_mcp_calls_total", action="container.list", outcome="executed", surface="dynamic") == 1
    assert value(families, calls, "arcane_mcp_calls_total", action="container.delete", outcome="refused") == 1
    assert value(families, calls, "arcane_mcp_calls_total", action="container.get", outcome="failed") == 1
    assert value(families, calls, "arcane_mcp_calls_total", action="unknown", outcome="failed") == 1
    assert value(families, "arcane_mcp_arcane_responses", "arcane_mcp_arcane_responses_total", status_class="4xx", code="404") >= 1
    assert value(families, "arcane_mcp_arcane_responses", "arcane_mcp_arcane_responses_total", status_class="2xx", code="200") >= 1
    assert value(families, "arcane_mcp_arcane_responses", "arcane_mcp_arcane_responses_total", status_class="4xx", code="401") == 1
    assert value(families, "arcane_mcp_refusals", "arcane_mcp_refusals_total", reason="rejected_key") == 1
    assert value(families, "arcane_mcp_refusals", "arcane_mcp_refusals_total", reason="bad_content_type") == 1
    assert value(families, "arcane_mcp_call_errors", "arcane_mcp_call_errors_total", error="ArcaneHTTPError") == 1
    assert value(families, "arcane_mcp_call_duration_seconds", "arcane_mcp_call_duration_seconds_count", surface="dynamic") >= 4
    assert value(families, "arcane_mcp_pool_tenants") == 0 and value(families, "arcane_mcp_calls_in_flight") == 0
    # every label value comes from a closed set: no client text, no key, no digest
    for samples in families.values():
        for sample in samples:
            for label in sample.labels.values():
                assert "evil" not in label and "arc_" not in label and SECRET not in label and len(label) <= 64, sample


def test_metrics_are_404_when_off(sim):
    with serve_http_in_thread(env_for(sim)) as base:
        resp = httpx.get(base + "/metrics", timeout=30)
        assert resp.status_code == 404 and "arcane_mcp" not in resp.text
        assert httpx.get(base + "/health", timeout=30).status_code == 200


# ---------------------------------------------------------------- who may read /metrics


def metrics_app(token: str | None) -> TestClient:
    metrics = observe.Metrics()
    metrics.call("dynamic", "container.list", "executed", 0.01, None)
    app = Starlette(routes=[Route("/metrics", observe.metrics_endpoint(metrics, token, lambda host: host == "127.0.0.1:8765"))])
    return TestClient(app, base_url="http://127.0.0.1:8765")  # its client address is "testclient": not loopback


def test_metrics_without_a_token_are_for_loopback_only():
    client = metrics_app(None)
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", headers={"Authorization": "Bearer anything-at-all-here"}).status_code == 403
    assert client.get("/metrics", headers={"Host": "evil.example"}).status_code == 421


def test_metrics_with_a_token_need_it():
    token = "t0ken-of-sufficient-length-0123"
    client = metrics_app(token)
    assert client.get("/metrics").status_code == 401
    for wrong in ("", "Bearer ", f"Bearer {token}x", f"bearer {token}", token, f"Bearer {token[:-1]}", "Bearer " + "x" * 1_000_000,
                  "Bearer ..\x01"):
        with contextlib.suppress(httpx.LocalProtocolError):  # a value httpx refuses to send is refused before the server
            assert client.get("/metrics", headers={"Authorization": wrong}).status_code == 401, wrong[:40]
    resp = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200 and "arcane_mcp_calls_total" in resp.text
    assert token not in resp.text


# ---------------------------------------------------------------- labels


def test_labels_come_from_closed_sets():
    obs = observe.Observer()
    obs.actions = frozenset({"container.list"})
    assert obs.action_label("container.list") == "container.list"
    assert obs.action_label(HOSTILE) == "unknown" and obs.action_label("") == "unknown" and obs.action_label(None) == "none"
    metrics = observe.Metrics()
    metrics.arcane(999)
    metrics.call("dynamic", "unknown", "failed", -1.0, "SomeBugOfOurs")
    text = metrics.render()[0].decode()
    assert 'code="other"' in text and 'error="internal"' in text
    assert json.dumps(sorted(observe.OUTCOMES)) == '["declined", "executed", "failed", "previewed", "refused"]'


# ---------------------------------------------------------------- the SDK's own span


def test_the_sdks_middleware_is_off_and_the_parent_reader_on_only_with_traces(catalog, spans):
    from mcp.server._otel import OpenTelemetryMiddleware

    from interpreter.config import Settings
    from interpreter.front.serve import build_runtime, build_server

    off = build_server(build_runtime(Settings(audit_log="off")))
    assert not [m for m in off.middleware if isinstance(m, OpenTelemetryMiddleware)]
    traced = build_runtime(Settings(audit_log="off", otlp_endpoint="http://127.0.0.1:9"))  # stdio: traces too
    assert traced.dispatcher.audit.observer.tracing and traced.dispatcher.audit.observer.metrics is None
    on = build_server(traced)
    assert not [m for m in on.middleware if isinstance(m, OpenTelemetryMiddleware)]
    assert len(on.middleware) == len(off.middleware) + 1 and on.middleware[0].__name__ == "adopt"


def test_the_parent_carrier_reads_short_strings_only():
    meta = {"traceparent": PARENT, "tracestate": "k=v"}
    assert observe._carrier(meta, {"traceparent": "ignored"}) == meta  # _meta first
    assert observe._carrier({}, {"traceparent": PARENT}) == {"traceparent": PARENT}
    assert observe._carrier({"traceparent": ["x"]}, None) == {}
    assert observe._carrier({"traceparent": "0" * 513}, None) == {}
    assert observe._carrier({"traceparent": PARENT, "tracestate": "s" * 513}, None) == {"traceparent": PARENT}
    assert observe._carrier("not a mapping", None) == {}


# ---------------------------------------------------------------- the real exporter, to a recording collector


@contextlib.contextmanager
def recording_collector():
    """A tiny OTLP/HTTP collector on a free port: the bodies POSTed to /v1/traces."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/v1/traces":
                bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


async def test_interp_serve_sends_its_spans_to_an_otlp_collector(sim):
    import signal

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tests.test_http import http_server

    extra = {"ARCANE_API_KEY": sim.api_key, "OTEL_SERVICE_NAME": "arcane-e2e"}
    with recording_collector() as (collector, bodies), http_server(sim, OTEL_EXPORTER_OTLP_ENDPOINT=collector, **extra) as (base, proc):
        async with client_for(base, None) as client:
            await client.call_tool(EXECUTE_TOOL, {"action": "container.list", "params": {"search": SECRET}})
        proc.send_signal(signal.SIGTERM)  # the batch goes out as the server stops
        assert proc.wait(timeout=60) == 0
    assert bodies, "no OTLP request reached the collector"
    assert not [b for b in bodies if SECRET.encode() in b or sim.api_key.encode() in b]
    spans, services = [], set()
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"}
            spans += [s for scope in resource_spans.scope_spans for s in scope.spans]
    assert services == {"arcane-e2e"}
    assert [s.name for s in spans] == ["tools/call container.list"]
    attributes = {a.key: a.value for a in spans[0].attributes}
    assert attributes["arcane_mcp.outcome"].string_value == "executed" and attributes["http.response.status_code"].int_value == 200


async def test_a_stdio_server_sends_its_spans_when_its_client_leaves(sim):
    from tests.test_e2e import session

    with recording_collector() as (collector, bodies):
        async with session(sim.url, sim.api_key, "dynamic", "legacy", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector + "/v1/traces") as client:
            await client.call_tool(EXECUTE_TOOL, {"action": "environment.list", "params": {}})
    names = [s.name for body in bodies for rs in _request(body).resource_spans for scope in rs.scope_spans for s in scope.spans]
    assert names == ["tools/call environment.list"]


def _request(body: bytes):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return ExportTraceServiceRequest.FromString(body)
