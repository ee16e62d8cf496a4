"""Configuration: every setting is one row of SETTINGS (environment variable, CLI flag,
parser, default, doc). A bad value stops startup with one line naming the variable and
the accepted form. No `.env` file is ever read implicitly.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .build.lazy_dataclass import dataclass
from .errors import ConfigError

SURFACES = ("dynamic", "meta", "individual")


def parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("a boolean: true/false, 1/0, yes/no, on/off")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(text: str) -> float:
    """`90s`, `5m`, `1h`, `250ms`, or plain seconds (`30`) -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError("a duration such as 30s, 5m, 1h, 250ms or plain seconds")
    value = float(m.group(1))
    unit = m.group(2) or "s"
    seconds = value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if not seconds > 0 or seconds == float("inf"):  # a long run of digits reads as infinity: no deadline at all
        raise ValueError("a positive, finite duration such as 30s or 5m")
    return seconds


_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.I)


def parse_size(text: str) -> int:
    """`10MiB`, `500kb`, `1048576` -> bytes."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError("a size in bytes, or with a unit: 512KiB, 10MiB, 1GB")
    mult = {"b": 1, "kb": 1000, "kib": 1024, "mb": 10**6, "mib": 1024**2, "gb": 10**9, "gib": 1024**3}[(m.group(2) or "b").lower()]
    n = int(m.group(1)) * mult
    if n <= 0:
        raise ValueError("a positive size such as 10MiB")
    return n


def parse_surface(text: str) -> str:
    t = text.strip().lower()
    if t not in SURFACES:
        raise ValueError("one of " + ", ".join(SURFACES))
    return t


def parse_url(text: str) -> str:
    t = text.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", t):
        raise ValueError("an http(s) URL such as https://arcane.example.com")
    if t.endswith("/api"):
        t = t[: -len("/api")]
    return t


def parse_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


_ORIGIN = re.compile(r"^https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$")


def parse_origins(text: str) -> tuple[str, ...]:
    """Exact browser origins (scheme://host[:port]), comma-separated: never `*` nor a path."""
    origins = parse_list(text)
    for origin in origins:
        if not _ORIGIN.match(origin):
            raise ValueError("exact origins such as https://app.example.com,http://localhost:3000 (no *, no path)")
    return origins


def parse_env_id(text: str) -> str:
    t = text.strip()
    if not t or "/" in t:
        raise ValueError("an environment ID such as 0")
    return t


def parse_log_level(text: str) -> str:
    t = text.strip().upper()
    if t not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError("one of debug, info, warning, error")
    return t


SCHEMA_DIALECTS = ("standard", "portable")


def parse_schema_dialect(text: str) -> str:
    t = text.strip().lower()
    if t not in SCHEMA_DIALECTS:
        raise ValueError("one of " + ", ".join(SCHEMA_DIALECTS))
    return t


def parse_listen(text: str) -> tuple[str, int]:
    """`host:port`, `[v6-address]:port`, or `:port` (127.0.0.1) -> (host, port)."""
    t = text.strip()
    form = "host:port such as 127.0.0.1:8765 or [::1]:8765"
    if t.startswith("["):
        host, sep, port = t[1:].partition("]:")
        if not sep or not host or ":" not in host:
            raise ValueError(form)
    else:
        host, sep, port = t.rpartition(":")
        if not sep or ":" in host or any(c.isspace() for c in host):
            raise ValueError(form)
        host = host or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{form} (the port is a number from 1 to 65535)")
    return host, int(port)


def parse_count(text: str) -> int:
    t = text.strip()
    if not t.isdigit() or int(t) <= 0:
        raise ValueError("a whole number from 1 up")
    return int(t)


def parse_retry_ms(text: str) -> int:
    """Milliseconds a client waits before it reconnects: `2000`, from 1 to 600000 (10 minutes)."""
    t = text.strip()
    if not t.isdigit() or not 0 < int(t) <= 600_000:
        raise ValueError("milliseconds from 1 to 600000, such as 2000")
    return int(t)


def parse_rate(text: str) -> float:
    """Requests per second: `10`, `2.5`, or `0` (no limit)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError("requests per second such as 10 or 2.5 (0 turns the limit off)") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError("requests per second such as 10 or 2.5 (0 turns the limit off)")
    return value


def parse_path(text: str) -> Path:
    return Path(text).expanduser()


def parse_paths(text: str) -> tuple[Path, ...]:
    paths = tuple(Path(p.strip()).expanduser() for p in text.split(",") if p.strip())
    if any(not p.is_absolute() for p in paths):
        raise ValueError("comma-separated absolute directory paths")
    return paths
def parse_cache_dir(text: str) -> Path | str:
    """A directory, or `off`."""
    t = text.strip()
    return "off" if t.lower() == "off" else Path(t).expanduser()


def parse_str(text: str) -> str:
    return text


_PRINTABLE = re.compile(r"[\x21-\x7e]+")


def parse_endpoint(text: str) -> str:
    """An OTLP/HTTP collector URL, kept as given (no /api trimmed, unlike ARCANE_URL)."""
    t = text.strip()
    if len(t) > 2048 or not _PRINTABLE.fullmatch(t) or not re.match(r"^https?://[^/]+", t):
        raise ValueError("an http(s) URL such as http://127.0.0.1:4318")
    return t


def parse_service_name(text: str) -> str:
    t = text.strip()
    if not t or len(t) > 255 or not t.isprintable():
        raise ValueError("a service name such as arcane-mcp (printable, at most 255 characters)")
    return t


def parse_token(text: str) -> str:
    if len(text) < 16 or len(text) > 512 or not _PRINTABLE.fullmatch(text):
        raise ValueError("a bearer token of 16 to 512 visible ASCII characters (e.g. from `openssl rand -hex 32`)")
    return text


def parse_secret(text: str) -> str:
    if len(text) < 32:
        raise ValueError("a random secret of at least 32 characters (e.g. from `openssl rand -hex 32`)")
    return text


@dataclass(frozen=True)
class Setting:
    attr: str
    env: str
    flag: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    secret: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting("arcane_url", "ARCANE_URL", "--arcane-url", parse_url, None, "Arcane's base URL (without /api)"),
    Setting("api_key", "ARCANE_API_KEY", "--api-key", parse_str, None, "Arcane API key, sent in the header of the OpenAPI document's apiKey scheme",
            secret=True),
    Setting("username", "ARCANE_USERNAME", "--username", parse_str, None, "Arcane user name for a session login"),
    Setting("password", "ARCANE_PASSWORD", "--password", parse_str, None, "Arcane password for a session login", secret=True),
    Setting("environment_id", "ARCANE_ENVIRONMENT_ID", "--environment-id", parse_env_id, "0", "Default environment (Docker host) ID"),
    Setting("surface", "ARCANE_MCP_SURFACE", "--surface", parse_surface, "dynamic", "Tool surface: dynamic, meta or individual"),
    Setting("read_only", "ARCANE_MCP_READ_ONLY", "--read-only", parse_bool, False, "Withdraw every action that changes state"),
    Setting("safe_mode", "ARCANE_MCP_SAFE_MODE", "--safe-mode", parse_bool, False, "State-changing actions return a preview instead of running"),
    Setting("exclude_tools", "ARCANE_MCP_EXCLUDE_TOOLS", "--exclude-tools", parse_list, (), "Comma-separated action IDs, domains or globs to withdraw"),
    Setting("action_timeout", "ARCANE_MCP_ACTION_TIMEOUT", "--action-timeout", parse_duration, 120.0, "Deadline of one tool call (e.g. 90s, 5m)"),
    Setting("request_timeout", "ARCANE_MCP_REQUEST_TIMEOUT", "--request-timeout", parse_duration, 30.0,
            "Deadline of one HTTP request to Arcane without progress"),
    Setting("read_timeout", "ARCANE_MCP_READ_TIMEOUT", "--read-timeout", parse_duration, 10.0,
            "Deadline of one read the server makes for itself (a name looked up, a confirmation's target, the credential's permissions)"),
    Setting("access_wait", "ARCANE_MCP_ACCESS_WAIT", "--access-wait", parse_duration, 10.0,
            "stdio: how long requests after initialize wait for the credential's permissions before the whole catalog is served"),
    Setting("log_first_frame", "ARCANE_MCP_LOG_FIRST_FRAME", "--log-first-frame", parse_duration, 10.0,
            "How long a log capture waits for Arcane's first frame (within its seconds bound) before it reports that none came"),
    Setting("max_download_bytes", "ARCANE_MCP_MAX_DOWNLOAD_BYTES", "--max-download-bytes", parse_size, 10 * 1024 * 1024, "Cap on downloaded bytes per call"),
    Setting("output_schemas", "ARCANE_MCP_OUTPUT_SCHEMAS", "--output-schemas", parse_bool, False,
            "Experimental: declare output schemas on the individual surface"),
    Setting("schema_dialect", "ARCANE_MCP_SCHEMA_DIALECT", "--schema-dialect", parse_schema_dialect, "standard",
            "Listed schemas: standard (JSON Schema), or portable (one type each, nullable, no $ref: for single-type dialects)"),
    Setting("tools_page_bytes", "ARCANE_MCP_TOOLS_PAGE_BYTES", "--tools-page-bytes", parse_size, 384 * 1024,
            "Most bytes of tools in one tools/list page; a longer list is paged with nextCursor"),
    Setting("rules_dir", "ARCANE_MCP_RULES", "--rules", parse_path, None,
            "An operator's rules directory laid over the packaged rules/ (file by file, key by key; null removes a key)"),
    Setting("ca_file", "ARCANE_MCP_CA_FILE", "--ca-file", parse_path, None, "CA bundle to verify Arcane's TLS certificate"),
    Setting("insecure_skip_verify", "ARCANE_MCP_INSECURE_SKIP_VERIFY", "--insecure-skip-verify", parse_bool, False,
            "Do not verify Arcane's TLS certificate (testing only)"),
    Setting("listen", "ARCANE_MCP_LISTEN", "--listen", parse_listen, ("127.0.0.1", 8765), "HTTP mode: address to listen on (host:port, [::1]:port)"),
    Setting("allowed_hosts", "ARCANE_MCP_ALLOWED_HOSTS", "--allowed-hosts", parse_list, (), "HTTP mode: extra Host header values accepted"),
    Setting("allowed_origins", "ARCANE_MCP_ALLOWED_ORIGINS", "--allowed-origins", parse_list, (), "HTTP mode: extra Origin values accepted"),
    Setting("allow_anonymous", "ARCANE_MCP_ALLOW_ANONYMOUS", "--allow-anonymous", parse_bool, None,
            "HTTP mode: a request without X-Arcane-API-Key uses the server's own credential, when it has one "
            "(default: only on a loopback bind)"),
    Setting("pool_size", "ARCANE_MCP_POOL_SIZE", "--pool-size", parse_count, 100,
            "HTTP mode: most per-key servers kept at once (least recently used goes first)"),
    Setting("pool_idle", "ARCANE_MCP_POOL_IDLE", "--pool-idle", parse_duration, 3600.0, "HTTP mode: a per-key server unused this long is closed"),
    Setting("key_revalidate", "ARCANE_MCP_KEY_REVALIDATE", "--key-revalidate", parse_duration, 900.0,
            "HTTP mode: a client's key is checked with Arcane again after this long (a revoked key stops working)"),
    Setting("key_check_rate", "ARCANE_MCP_KEY_CHECK_RATE", "--key-check-rate", parse_rate, 5.0,
            "HTTP mode: keys new to this server checked with Arcane per second, all clients together (0: no limit)"),
    Setting("key_check_burst", "ARCANE_MCP_KEY_CHECK_BURST", "--key-check-burst", parse_count, 50,
            "HTTP mode: new keys that may be checked with Arcane in a burst above that rate"),
    Setting("rejected_key_ttl", "ARCANE_MCP_REJECTED_KEY_TTL", "--rejected-key-ttl", parse_duration, 60.0,
            "HTTP mode: a key Arcane refused is refused again without asking Arcane for this long"),
    Setting("rejected_key_cache", "ARCANE_MCP_REJECTED_KEY_CACHE", "--rejected-key-cache", parse_count, 10_000,
            "HTTP mode: most refused keys remembered, by digest (the oldest are forgotten first)"),
    Setting("max_in_flight", "ARCANE_MCP_MAX_IN_FLIGHT", "--max-in-flight", parse_count, 8,
            "HTTP mode: calls of one key served at once (what bounds its load on Arcane); more wait their turn"),
    Setting("queue_size", "ARCANE_MCP_QUEUE_SIZE", "--queue-size", parse_count, 256,
            "HTTP mode: calls of one key that may wait for a turn; beyond, 429 with Retry-After"),
    Setting("queue_wait", "ARCANE_MCP_QUEUE_WAIT", "--queue-wait", parse_duration, 30.0,
            "HTTP mode: longest a call waits for its turn before 429 with Retry-After"),
    Setting("rate_limit", "ARCANE_MCP_RATE_LIMIT", "--rate-limit", parse_rate, 50.0,
            "HTTP mode: requests per second per client (its key; without one, its address and session), "
            "far above any interactive client: a guard against runaway loops (0: no limit)"),
    Setting("rate_burst", "ARCANE_MCP_RATE_BURST", "--rate-burst", parse_count, 500,
            "HTTP mode: requests per client allowed in a burst above the rate (a client's busiest start stays below it)"),
    Setting("anonymous_rate_limit", "ARCANE_MCP_ANONYMOUS_RATE_LIMIT", "--anonymous-rate-limit", parse_rate, 100.0,
            "HTTP mode: requests per second without a key, all such clients together (0: no limit)"),
    Setting("anonymous_rate_burst", "ARCANE_MCP_ANONYMOUS_RATE_BURST", "--anonymous-rate-burst", parse_count, 1000,
            "HTTP mode: requests without a key allowed in a burst above that rate, all such clients together"),
    Setting("max_body_bytes", "ARCANE_MCP_MAX_BODY_BYTES", "--max-body-bytes", parse_size, 4 * 1024 * 1024,
            "Cap on a request body (HTTP) and on one stdio message"),
    Setting("keep_alive", "ARCANE_MCP_KEEP_ALIVE", "--keep-alive", parse_duration, 300.0,
            "HTTP mode: how long an idle client connection stays open between requests"),
    Setting("header_timeout", "ARCANE_MCP_HEADER_TIMEOUT", "--header-timeout", parse_duration, 10.0,
            "HTTP mode: a connection whose request headers are not all in within this long is closed (also a new connection that sends nothing)"),
    Setting("body_timeout", "ARCANE_MCP_BODY_TIMEOUT", "--body-timeout", parse_duration, 60.0,
            "HTTP mode: a request body not all in within this long is refused (408) and its connection closed"),
    Setting("cors_origins", "ARCANE_MCP_CORS_ORIGINS", "--cors-origins", parse_origins, (),
            "HTTP mode: browser origins (exact, comma-separated) answered with CORS headers; none by default"),
    Setting("drain_timeout", "ARCANE_MCP_DRAIN_TIMEOUT", "--drain-timeout", parse_duration, 30.0,
            "HTTP mode: after SIGTERM, how long calls in flight may take to finish"),
    Setting("tls_cert", "ARCANE_MCP_TLS_CERT", "--tls-cert", parse_path, None, "HTTP mode: TLS certificate (PEM) to serve HTTPS"),
    Setting("tls_key", "ARCANE_MCP_TLS_KEY", "--tls-key", parse_path, None, "HTTP mode: TLS private key (PEM) of --tls-cert"),
    Setting("behind_tls_proxy", "ARCANE_MCP_BEHIND_TLS_PROXY", "--behind-tls-proxy", parse_bool, False,
            "HTTP mode: a reverse proxy terminates TLS, so a non-loopback bind may serve plain HTTP"),
    Setting("http_stateful", "ARCANE_MCP_HTTP_STATEFUL", "--http-stateful", parse_bool, False,
            "HTTP mode: keep MCP sessions (legacy clients can then be asked to confirm)"),
    Setting("sse_retry_ms", "ARCANE_MCP_SSE_RETRY_MS", "--sse-retry-ms", parse_retry_ms, 2000,
            "HTTP mode, stateful: the retry hint (milliseconds) an SSE stream gives a client for reconnecting after it breaks"),
    Setting("event_store_events", "ARCANE_MCP_EVENT_STORE_EVENTS", "--event-store-events", parse_count, 10_000,
            "HTTP mode, stateful: most SSE events kept per key for replay after a broken stream (the oldest go first; "
            "one stream at most a quarter)"),
    Setting("event_store_bytes", "ARCANE_MCP_EVENT_STORE_BYTES", "--event-store-bytes", parse_size, 16 * 1024 * 1024,
            "HTTP mode, stateful: most bytes of SSE events kept per key for replay (one stream at most a quarter)"),
    Setting("event_store_ttl", "ARCANE_MCP_EVENT_STORE_TTL", "--event-store-ttl", parse_duration, 300.0,
            "HTTP mode, stateful: how long an SSE event is kept for replay after a broken stream"),
    Setting("state_secret", "ARCANE_MCP_STATE_SECRET", "--state-secret", parse_secret, None,
            "Key (32+ characters) sealing the state of a confirmation round; share it across replicas", secret=True),
    Setting("confirm_expiry", "ARCANE_MCP_CONFIRM_EXPIRY", "--confirm-expiry", parse_duration, 120.0,
            "How long a 2026-07-28 confirmation round may be answered; each round is answered once, on the replica that sees it"),
    Setting("audit_log", "ARCANE_MCP_AUDIT_LOG", "--audit-log", parse_str, "auto",
            "Audit records: stderr, off, or a file path; unset, stderr unless it is a terminal, then a per-user file"),
    Setting("upload_dirs", "ARCANE_MCP_UPLOAD_DIRS", "--upload-dirs", parse_paths, (),
            "stdio only: comma-separated directories whose files a chunked upload may read (default none; never over HTTP)"),
    Setting("cache_dir", "ARCANE_MCP_CACHE_DIR", "--cache-dir", parse_cache_dir, None,
            "Where a catalog built from operator rules is kept for the next start, or off; unset, $XDG_CACHE_HOME/arcane-mcp"),
    # observability (interpreter/front/observe.py; needs the `observability` extra when set)
    Setting("otlp_endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "--otlp-endpoint", parse_endpoint, None,
            "Traces: an OTLP/HTTP collector's base URL (spans go to <url>/v1/traces); unset, no traces"),
    Setting("otlp_traces_endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "--otlp-traces-endpoint", parse_endpoint, None,
            "Traces: the OTLP/HTTP traces URL as is (wins over OTEL_EXPORTER_OTLP_ENDPOINT)"),
    Setting("service_name", "OTEL_SERVICE_NAME", "--service-name", parse_service_name, "arcane-mcp", "Traces: the service.name of the spans"),
    Setting("metrics", "ARCANE_MCP_METRICS", "--metrics", parse_bool, False,
            "HTTP mode: serve Prometheus metrics on /metrics (to loopback clients only, unless ARCANE_MCP_METRICS_TOKEN is set)"),
    Setting("metrics_token", "ARCANE_MCP_METRICS_TOKEN", "--metrics-token", parse_token, None,
            "HTTP mode: /metrics answers any client sending Authorization: Bearer <this token>, and no other", secret=True),
    Setting("log_level", "ARCANE_MCP_LOG_LEVEL", "--log-level", parse_log_level, "WARNING", "Server log level: debug, info, warning, error"),
)


@dataclass(frozen=True)
class Settings:
    arcane_url: str | None = None
    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    environment_id: str = "0"
    surface: str = "dynamic"
    read_only: bool = False
    safe_mode: bool = False
    exclude_tools: tuple[str, ...] = ()
    action_timeout: float = 120.0
    request_timeout: float = 30.0
    read_timeout: float = 10.0
    access_wait: float = 10.0
    log_first_frame: float = 10.0
    max_download_bytes: int = 10 * 1024 * 1024
    output_schemas: bool = False
    schema_dialect: str = "standard"
    tools_page_bytes: int = 384 * 1024
    rules_dir: Path | None = None
    ca_file: Path | None = None
    insecure_skip_verify: bool = False
    listen: tuple[str, int] = ("127.0.0.1", 8765)
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    allow_anonymous: bool | None = None
    pool_size: int = 100
    pool_idle: float = 3600.0
    key_revalidate: float = 900.0
    key_check_rate: float = 5.0
    key_check_burst: int = 50
    rejected_key_ttl: float = 60.0
    rejected_key_cache: int = 10_000
    max_in_flight: int = 8
    queue_size: int = 256
    queue_wait: float = 30.0
    rate_limit: float = 50.0
    rate_burst: int = 500
    anonymous_rate_limit: float = 100.0
    anonymous_rate_burst: int = 1000
    max_body_bytes: int = 4 * 1024 * 1024
    keep_alive: float = 300.0
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    cors_origins: tuple[str, ...] = ()
    drain_timeout: float = 30.0
    tls_cert: Path | None = None
    tls_key: Path | None = None
    behind_tls_proxy: bool = False
    http_stateful: bool = False
    sse_retry_ms: int = 2000
    event_store_events: int = 10_000
    event_store_bytes: int = 16 * 1024 * 1024
    event_store_ttl: float = 300.0
    state_secret: str | None = None
    confirm_expiry: float = 120.0
    audit_log: str = "auto"
    upload_dirs: tuple[Path, ...] = ()
    cache_dir: Path | str | None = None  # a directory, "off", or None for the default (prebuilt.default_dir)
    otlp_endpoint: str | None = None
    otlp_traces_endpoint: str | None = None
    service_name: str = "arcane-mcp"
    metrics: bool = False
    metrics_token: str | None = None
    log_level: str = "WARNING"
    transport: str = ""  # "stdio" or "http", set by `interp serve` (not a setting): local files are read over stdio only

    def __init__(self, **values: Any) -> None:
        """The values named, every other field its default (every caller names them; a field
        the class does not have is the TypeError the generated one raises). Written out: the
        generated `__init__` of ~50 fields is compiled at its first call, ~4 ms of a start."""
        defaults = _defaults()
        for name in values:
            if name not in defaults:
                raise TypeError(f"Settings.__init__() got an unexpected keyword argument {name!r}")
        for name, default in defaults.items():
            object.__setattr__(self, name, values.get(name, default))

    def redacted(self) -> dict:
        """The settings with secrets replaced, for logs."""
        out = {}
        for s in SETTINGS:
            v = getattr(self, s.attr)
            out[s.attr] = ("[set]" if v else None) if s.secret else (str(v) if isinstance(v, Path) else v)
        return out


_DEFAULTS: dict[str, Any] = {}


def _defaults() -> dict[str, Any]:
    """Each field of Settings and its default (every field has one, none a factory)."""
    if not _DEFAULTS:
        _DEFAULTS.update((f.name, f.default) for f in dataclasses.fields(Settings))
    return _DEFAULTS


def load_settings(env: dict[str, str] | None = None, flags: dict[str, Any] | None = None) -> Settings:
    """Settings from the environment, overridden by CLI flags (already-parsed text values).

    Raises ConfigError naming the variable (or flag) and the accepted form.
    """
    env = os.environ if env is None else env
    flags = flags or {}
    values: dict[str, Any] = {}
    for s in SETTINGS:
        raw, source = None, s.env
        if flags.get(s.attr) is not None:
            raw, source = flags[s.attr], s.flag
        elif env.get(s.env) not in (None, ""):
            raw = env[s.env]
        if raw is None:
            continue
        if not isinstance(raw, str):
            values[s.attr] = raw
            continue
        try:
            values[s.attr] = s.parse(raw)
        except ValueError as exc:
            # the value as typed, cut: the error is one short line whatever was set
            shown = "(hidden)" if s.secret else repr(raw if len(raw) <= 80 else raw[:80] + "…")
            raise ConfigError(f"{source}={shown} is invalid: expected {exc}", setting=source) from None
    settings = Settings(**values)
    if (settings.username is None) != (settings.password is None):
        missing = "ARCANE_PASSWORD" if settings.password is None else "ARCANE_USERNAME"
        raise ConfigError("ARCANE_USERNAME and ARCANE_PASSWORD go together: set both, or neither and use ARCANE_API_KEY",
                          setting=missing, code="incomplete_login")
    if settings.ca_file is not None and not settings.ca_file.is_file():
        raise ConfigError(f"ARCANE_MCP_CA_FILE={str(settings.ca_file)!r} is invalid: expected a readable CA bundle file",
                          setting="ARCANE_MCP_CA_FILE")
    if (settings.tls_cert is None) != (settings.tls_key is None):
        missing = "ARCANE_MCP_TLS_KEY" if settings.tls_key is None else "ARCANE_MCP_TLS_CERT"
        raise ConfigError("ARCANE_MCP_TLS_CERT and ARCANE_MCP_TLS_KEY go together: set both, or neither", setting=missing,
                          code="incomplete_tls")
    for var, path in (("ARCANE_MCP_TLS_CERT", settings.tls_cert), ("ARCANE_MCP_TLS_KEY", settings.tls_key)):
        if path is not None and not path.is_file():
            raise ConfigError(f"{var}={str(path)!r} is invalid: expected a readable PEM file", setting=var)
    if settings.rules_dir is not None and not settings.rules_dir.is_dir():
        raise ConfigError(f"ARCANE_MCP_RULES={str(settings.rules_dir)!r} is invalid: expected a rules directory",
                          setting="ARCANE_MCP_RULES")
    return settings
