"""Opt-in observability (docs/operators.md "Traces and metrics"): OpenTelemetry traces to an
OTLP/HTTP collector and Prometheus metrics on HTTP mode's /metrics. Both need the
`observability` extra; without a setting that asks for them nothing here imports it.

Traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces;
OTEL_SERVICE_NAME): one SERVER span per tool call and per resource read, started where
the dispatcher starts a call (`Observer.span`) and given its attributes where the call's
audit record is written (`Observer.observe`): the action (only an action of the catalog),
the surface, the outcome of the audit record, the resource template, Arcane's status,
the error class, the duration, and the environment only when Arcane answered the call for
it. Never an argument value, a key, a header or a result. The provider is this server's
own, never the process's global one, and the SDK's OpenTelemetryMiddleware is taken off
every server (`install`): it would make a second span per request, name a tool the
client made up and record an exception's text. The parent is the request's W3C
`traceparent`, from its `_meta` (the SDK's convention, mcp/shared/_otel.py) or else from
the HTTP request's header; every request to Arcane carries the call span's `traceparent`
(`http_hooks`).

Metrics (ARCANE_MCP_METRICS, HTTP mode): a registry per app, whose labels come only from
closed sets (the catalog's action IDs, the audit outcomes, the refusal reasons of
rules/server.yaml, Arcane's status codes, the engine's error classes), never from what a
client sends. /metrics answers a loopback client, or with ARCANE_MCP_METRICS_TOKEN set
any client sending that bearer token and no other.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from .. import __version__
from ..errors import CallError, ConfigError

EXTRA = "pip install 'arcane-mcp[observability]'"
OUTCOMES = frozenset({"executed", "previewed", "refused", "declined", "failed"})
UNKNOWN = "unknown"  # an action the catalog does not have (the client's text is never a label)
NONE = "none"  # a record without an action (a tool name refused before any action was read)
OTHER = "other"
TRACE_HEADER_MAX = 512  # a traceparent or tracestate longer than this is not read
_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SURFACE = re.compile(r"[a-z][a-z_-]{0,31}")
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def _error_classes() -> frozenset[str]:
    found, todo = set(), [CallError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return frozenset(found)


def _require(setting: str, modules: tuple[str, ...]) -> None:
    """The extra's modules, or the one line naming the setting that needs them."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise ConfigError(f"{setting} needs the observability extra ({name} is not installed): {EXTRA}", setting=setting,
                              code="observability_missing") from None


def traces_endpoint(settings: Any) -> tuple[str, str] | None:
    """(the setting that asked for traces, the OTLP/HTTP traces URL), or None: no traces."""
    if settings.otlp_traces_endpoint:
        return "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", settings.otlp_traces_endpoint
    if settings.otlp_endpoint:
        return "OTEL_EXPORTER_OTLP_ENDPOINT", settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    return None


def span_processor(endpoint: str) -> Any:
    """The spans' way out: batched to the collector (tests put an in-memory exporter here)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    return BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint))


class _CallSpan:
    __slots__ = ("span", "ended")

    def __init__(self, span: Any):
        self.span, self.ended = span, False


_current: ContextVar[_CallSpan | None] = ContextVar("arcane_mcp_call_span", default=None)


class Observer:
    """What one server observes. The default (`Observer()`) observes nothing and imports
    nothing; `for_settings` makes the one the settings ask for."""

    def __init__(self) -> None:
        self.tracer: Any = None
        self.provider: Any = None
        self.metrics: Metrics | None = None
        self.actions: frozenset[str] = frozenset()  # the catalog's action IDs: the only action labels
        self.on = False  # anything to do at all

    @property
    def tracing(self) -> bool:
        return self.tracer is not None

    @classmethod
    def for_settings(cls, settings: Any, actions: frozenset[str] = frozenset()) -> Observer:
        """Traces when an OTLP endpoint is set; metrics when ARCANE_MCP_METRICS is on in HTTP
        mode. Raises ConfigError naming the setting when the extra is missing."""
        observer = cls()
        observer.actions = actions
        traces = traces_endpoint(settings)
        if traces is not None:
            setting, endpoint = traces
            _require(setting, ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"))
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider

            resource = Resource.create({"service.name": settings.service_name, "service.version": __version__})
            observer.provider = TracerProvider(resource=resource)
            observer.provider.add_span_processor(span_processor(endpoint))
            observer.tracer = observer.provider.get_tracer("arcane-mcp", __version__)
        if settings.metrics and settings.transport == "http":
            _require("ARCANE_MCP_METRICS", ("prometheus_client",))
            observer.metrics = Metrics()
        observer.on = observer.tracing or observer.metrics is not None
        return observer

    def shutdown(self) -> None:
        """Send the spans still batched (at the end of a server)."""
        if self.provider is not None:
            self.provider.shutdown()

    # ------------------------------------------------------------ labels

    def action_label(self, action: str | None) -> str:
        if action is None:
            return NONE
        return action if action in self.actions else UNKNOWN

    # ------------------------------------------------------------ the hooks

    @contextlib.contextmanager
    def span(self, surface: str, action: str, template: str | None = None) -> Iterator[None]:
        """The span of one call (Dispatcher.dispatch): current while the call runs, so the
        requests to Arcane carry it; its attributes come from the call's audit record."""
        from opentelemetry.trace import SpanKind

        label = self.action_label(action)
        attributes = {"arcane_mcp.surface": surface if _SURFACE.fullmatch(surface) else OTHER, "arcane_mcp.action": label}
        if template is not None:
            attributes["arcane_mcp.resource_template"] = template
        name = f"resources/read {template}" if template is not None else f"tools/call {label}"
        with self.tracer.start_as_current_span(name, kind=SpanKind.SERVER, attributes=attributes,
                                               record_exception=False, set_status_on_exception=False) as span:
            held = _CallSpan(span)
            token = _current.set(held)
            try:
                yield
            finally:
                _current.reset(token)
                if not held.ended:  # no record: an input-required round (the retry that answers is recorded)
                    span.set_attribute("arcane_mcp.outcome", "input_required")

    def observe(self, record: Any) -> None:
        """A call's audit record (AuditLog.write): its span's attributes, and the metrics."""
        outcome = record.outcome if record.outcome in OUTCOMES else OTHER
        held = _current.get()
        if held is not None and not held.ended:
            held.ended = True
            self._end_span(held.span, record, outcome)
        if self.metrics is not None:
            surface = record.surface if _SURFACE.fullmatch(record.surface or "") else OTHER
            self.metrics.call(surface, self.action_label(record.action), outcome, record.duration_ms / 1000.0,
                              record.error_class)

    def _end_span(self, span: Any, record: Any, outcome: str) -> None:
        from opentelemetry.trace import StatusCode

        attributes: dict[str, Any] = {"arcane_mcp.outcome": outcome, "arcane_mcp.duration_ms": float(record.duration_ms)}
        if record.http_status is not None:
            attributes["http.response.status_code"] = int(record.http_status)
        if record.error_class:
            attributes["error.type"] = record.error_class if record.error_class in ERROR_CLASSES else "internal"
        # the environment is the client's argument: named only once Arcane answered the call for it
        if outcome == "executed" and record.environment and _ID.fullmatch(record.environment):
            attributes["arcane_mcp.environment"] = record.environment
        span.set_attributes(attributes)
        if outcome == "failed":
            span.set_status(StatusCode.ERROR)

    def refused(self, reason: str) -> None:
        """A refusal in front of the pool (httpmode.Refusals: its reason is one of rules/server.yaml's)."""
        if self.metrics is not None:
            self.metrics.refusals.labels(reason).inc()

    def http_hooks(self) -> dict[str, list[Callable]] | None:
        """The Arcane client's httpx event hooks: the call span's traceparent on every
        request, Arcane's answers counted by status. None when there is nothing to do."""
        if not self.on:
            return None
        hooks: dict[str, list[Callable]] = {"request": [], "response": []}
        if self.tracing:
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            propagator = TraceContextTextMapPropagator()

            async def carry(request: Any) -> None:
                propagator.inject(request.headers)

            hooks["request"].append(carry)
        if self.metrics is not None:
            metrics = self.metrics

            async def count(response: Any) -> None:
                metrics.arcane(response.status_code)

            hooks["response"].append(count)
        return hooks


ERROR_CLASSES = _error_classes()


# ---------------------------------------------------------------- the parent of a call's span


def _carrier(meta: Any, headers: Any) -> dict[str, str]:
    """traceparent and tracestate, from the request's _meta when it has a traceparent, else
    from its HTTP headers; a value that is not a short string is not read."""
    for source in (meta, headers):
        if source is None or not hasattr(source, "get"):
            continue
        parent = source.get("traceparent")
        if isinstance(parent, str) and len(parent) <= TRACE_HEADER_MAX:
            carrier = {"traceparent": parent}
            state = source.get("tracestate")
            if isinstance(state, str) and len(state) <= TRACE_HEADER_MAX:
                carrier["tracestate"] = state
            return carrier
    return {}


def parent_middleware() -> Callable:
    """A server middleware: the request's W3C trace context (its _meta's, else its HTTP
    header's) is the current context while it is served, so a call's span is its child."""
    from opentelemetry import context
    from opentelemetry.trace import get_current_span
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    propagator = TraceContextTextMapPropagator()

    async def adopt(ctx: Any, call_next: Callable) -> Any:
        carrier = _carrier(getattr(ctx, "meta", None), getattr(getattr(ctx, "request", None), "headers", None))
        parent = propagator.extract(carrier) if carrier else None
        if parent is None or not get_current_span(parent).get_span_context().is_valid:
            return await call_next(ctx)
        token = context.attach(parent)
        try:
            return await call_next(ctx)
        finally:
            context.detach(token)

    return adopt


def install(server: Any, observer: Observer) -> None:
    """The SDK's OpenTelemetryMiddleware off (see the module's docstring); with traces, the
    parent's middleware first."""
    from mcp.server._otel import OpenTelemetryMiddleware

    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    if observer.tracing:
        server.middleware.insert(0, parent_middleware())


# ---------------------------------------------------------------- metrics


class Metrics:
    """The Prometheus metrics of one HTTP app, in their own registry."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter("arcane_mcp_calls", "Tool calls and resource reads, by surface, action and audit outcome",
                             ["surface", "action", "outcome"], registry=registry)
        self.latency = Histogram("arcane_mcp_call_duration_seconds", "How long a call took, by surface", ["surface"],
                                 buckets=LATENCY_BUCKETS, registry=registry)
        self.errors = Counter("arcane_mcp_call_errors", "Failed calls, by the engine's error class", ["error"], registry=registry)
        self.responses = Counter("arcane_mcp_arcane_responses", "Arcane's answers, by status class and status code",
                                 ["status_class", "code"], registry=registry)
        self.refusals = Counter("arcane_mcp_refusals", "HTTP requests refused in front of the MCP servers, by reason",
                                ["reason"], registry=registry)

    def call(self, surface: str, action: str, outcome: str, seconds: float, error: str | None) -> None:
        self.calls.labels(surface, action, outcome).inc()
        self.latency.labels(surface).observe(max(0.0, seconds))
        if error:
            self.errors.labels(error if error in ERROR_CLASSES else "internal").inc()

    def arcane(self, status: int) -> None:
        if isinstance(status, int) and 100 <= status <= 599:
            self.responses.labels(f"{status // 100}xx", str(status)).inc()
        else:
            self.responses.labels(OTHER, OTHER).inc()

    def watch(self, tenants: Callable[[], float], running: Callable[[], float], waiting: Callable[[], float]) -> None:
        """The pool's gauges, read at each scrape."""
        from prometheus_client import Gauge

        for name, doc, read in (("arcane_mcp_pool_tenants", "Per-key MCP servers in the pool", tenants),
                                ("arcane_mcp_calls_in_flight", "Calls being served now, all keys together", running),
                                ("arcane_mcp_calls_waiting", "Calls waiting for their key's turn", waiting)):
            Gauge(name, doc, registry=self.registry).set_function(read)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def metrics_endpoint(metrics: Metrics, token: str | None, host_allowed: Callable[[str], bool]) -> Callable:
    """/metrics: with a token, any client that sends it as a bearer token (and none
    other); without one, loopback clients only. The Host must be one /mcp accepts."""
    import hmac

    from starlette.responses import JSONResponse, Response

    expected = f"Bearer {token}".encode() if token else None

    async def serve(request: Any) -> Any:
        if not host_allowed(request.headers.get("host") or ""):
            return JSONResponse({"error": "host_not_allowed"}, status_code=421)
        if expected is not None:
            given = (request.headers.get("authorization") or "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, expected):
                return JSONResponse({"error": "metrics_token_required"}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        elif not _loopback(request.client.host if request.client else ""):
            return JSONResponse({"error": "metrics_loopback_only"}, status_code=403)
        body, media = metrics.render()
        return Response(body, media_type=media)

    return serve
