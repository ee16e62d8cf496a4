"""The MCP server: the SDK's low-level Server with a method -> handler table built from
one Runtime (catalog + settings + dispatcher + surface). stdio and streamable HTTP.

`build_server` is a short sequence of named steps: the log capture (a call's log records
go back to its client), the tool list and its cache with list-changed tracking (ToolList),
tools/call (ToolCalls: the confirmation protocol of confirmation.py, tasks, the 403 that
re-reads what the credential may do), resources, subscriptions and prompts, then the
sealed request state and the tasks extension.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import field
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..build.access import Access
from ..build.catalog import BuildOptions, Catalog, build
from ..build.lazy_dataclass import dataclass
from ..call.dispatch import Dispatcher
from ..call.request import ArcaneClient
from ..commands.drift import startup_warning
from ..config import Settings
from ..memo import keep
from ..memo import table as memo_table
from ..text.render import ToolResult, render_error
from . import apps, confirmation, prompts, resources, subscriptions, tasks
from .call_records import AuditLog
from .frames import StdioFrames, explain_invalid, write_problem
from .surfaces import Surface, make_surface
from .wire import call_result, list_result

log = logging.getLogger("arcane_mcp")



@dataclass
class Runtime:
    settings: Settings
    catalog: Catalog
    dispatcher: Dispatcher
    surface: Surface
    access: Access | None = None  # the credential's view of the shared catalog (interpreter/build/access.py)
    # what else serves this catalog (the MCP server's resources and prompts): each has
    # `catalog` and `dispatcher`, set again when the view changes
    followers: list[Any] = field(default_factory=list)
    view: int = 0  # counts the changes of the served catalog (narrow): a session that listed an older one is told

    def narrow(self) -> None:
        """Serve the access view's catalog (narrower or wider than before): a new dispatcher
        and surface over it (same client and audit log), and the followers follow it."""
        if self.access is None or self.access.catalog is self.catalog:
            return
        self.catalog = self.access.catalog
        self.view += 1
        self.dispatcher = Dispatcher(self.catalog, self.settings, self.dispatcher.client, self.dispatcher.audit)
        self.surface = make_surface(self.settings.surface, self.catalog, self.dispatcher)
        for part in self.followers:
            part.catalog, part.dispatcher = self.catalog, self.dispatcher


async def apply_access(runtime: Runtime, known: Mapping[str, Any] | None = None) -> int:
    """Read what the configured credential may do (/auth/me) and withdraw the rest; the
    number of actions withdrawn for it. `known`: identity answers already read with this
    credential, by action ID, not asked again (access.read)."""
    if runtime.access is None:
        return 0
    await runtime.access.refresh(known)
    runtime.narrow()
    return len(runtime.access.reasons)


async def refresh_after(runtime: Runtime, result: ToolResult) -> bool:
    """After Arcane answered 403 (catalog/permissions.yaml `refresh_status`), read the
    credential's permissions again; True when the tools it sees changed."""
    access = runtime.access
    if access is None or result.http_status is None or result.http_status != access.refresh_status:
        return False
    changed = await access.refresh()
    runtime.narrow()
    return changed


def build_runtime(settings: Settings, *, audit: AuditLog | None = None, client: ArcaneClient | None = None) -> Runtime:
    """Build the catalog once (raises RuleError on invalid rules), then the surface."""
    # an operator's rules directory is laid over the packaged rules (load.py), never instead of them
    cache = {} if settings.cache_dir is None else {"cache_dir": None if settings.cache_dir == "off" else settings.cache_dir}
    options = BuildOptions(environment_default=settings.environment_id, read_only=settings.read_only,
                           exclude=settings.exclude_tools, operator_rules=settings.rules_dir, **cache)
    catalog = build(options)
    if client is None and settings.arcane_url:
        client = ArcaneClient(settings)
    dispatcher = Dispatcher(catalog, settings, client, audit or AuditLog(settings.audit_log))
    access = Access(catalog, client, settings.api_key) if client is not None else None
    return Runtime(settings, catalog, dispatcher, make_surface(settings.surface, catalog, dispatcher), access)


# ---------------------------------------------------------------- MCP logging
#
# The server's own log records (logger `arcane_mcp`, at the operator's ARCANE_MCP_LOG_LEVEL)
# that a tool call causes go back to that call's client as notifications/message, after
# the call and on its own stream: a legacy client filters them with logging/setLevel
# (default: warning), a 2026-07-28 client by the level it puts in the request's _meta (the
# SDK drops what it did not ask for). Every text passes the redaction rules and has the
# call's credential masked first.

MCP_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_CLIENT_LEVEL = "warning"
LOG_TEXT_MAX = 2000
_call_records: ContextVar[list[logging.LogRecord] | None] = ContextVar("arcane_mcp_call_records", default=None)


class _CallLogCapture(logging.Handler):
    """Keeps the records logged while a tool call runs, for that call's client."""

    def emit(self, record: logging.LogRecord) -> None:
        sink = _call_records.get()
        if sink is not None:
            sink.append(record)


_CAPTURE = _CallLogCapture()


def _mcp_level(record: logging.LogRecord) -> str:
    if record.levelno >= logging.CRITICAL:
        return "critical"
    if record.levelno >= logging.ERROR:
        return "error"
    if record.levelno >= logging.WARNING:
        return "warning"
    return "info" if record.levelno >= logging.INFO else "debug"


@dataclass
class ClientLogLevel:
    """The level a legacy client chose with logging/setLevel."""

    level: str = DEFAULT_CLIENT_LEVEL


SESSION_LEVELS_MAX = 1024  # stateful HTTP sessions whose level is remembered (least recent forgotten first)


def session_id(ctx: ServerRequestContext) -> str:
    """The Mcp-Session-Id a request carries (stateful HTTP: the session manager issued it and
    refuses an unknown one); "" without one (stdio, stateless HTTP)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    return (headers.get("mcp-session-id") if headers is not None else None) or ""


class ClientLogLevels:
    """The legacy clients' levels of one server. With stateful HTTP (`per_session`) each
    session has its own, found by the Mcp-Session-Id its requests carry (the session
    manager issued it and refuses an unknown one), so two sessions of one key never change
    each other's; stdio and stateless HTTP have no session to hold it, so there it is the
    server's (per key)."""

    def __init__(self, per_session: bool) -> None:
        self.per_session = per_session
        self.shared = ClientLogLevel()
        self.sessions: OrderedDict[str, ClientLogLevel] = OrderedDict()

    def of(self, ctx: ServerRequestContext) -> ClientLogLevel:
        sid = session_id(ctx) if self.per_session else ""
        if not sid:
            return self.shared
        chosen = self.sessions.get(sid)
        if chosen is None:
            chosen = self.sessions[sid] = ClientLogLevel()
            while len(self.sessions) > SESSION_LEVELS_MAX:
                self.sessions.popitem(last=False)
        self.sessions.move_to_end(sid)
        return chosen


def log_text(record: logging.LogRecord, runtime: Runtime) -> str:
    """A record's message as a client may see it: the credential's values masked, then the
    redaction rules' free-text scrub, on one bounded line (never the traceback)."""
    try:
        text = record.getMessage()
    except Exception:  # a record whose arguments do not fit its format: its bare format
        text = str(record.msg)
    client = runtime.dispatcher.client
    creds = client.credentials if client is not None else None
    secrets = creds.secrets() if creds is not None and hasattr(creds, "secrets") else []
    marker = runtime.catalog.redaction.marker
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, marker)
    text = runtime.catalog.redaction.scrub(" ".join(text.split()))
    return text[:LOG_TEXT_MAX] + ("…" if len(text) > LOG_TEXT_MAX else "")


async def _send_call_logs(ctx: ServerRequestContext, records: list[logging.LogRecord], runtime: Runtime,
                          chosen: ClientLogLevel, modern: bool) -> None:
    floor = MCP_LEVELS.index(chosen.level) if not modern else 0  # modern: the SDK applies the request's level
    for record in records:
        level = _mcp_level(record)
        if MCP_LEVELS.index(level) < floor:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK marks logging deprecated at 2026-07-28; both eras use it here
                await ctx.session.send_log_message(level, log_text(record, runtime), logger=record.name,
                                                   related_request_id=ctx.request_id)
        except Exception:  # a log notification is best effort; the answer still goes out
            log.debug("log notification failed", exc_info=True)


def _after(ready: asyncio.Future | None, handlers: dict[str, Any], wait: float = 0.0) -> dict[str, Any]:
    """The request handlers, each waiting first for `ready` (the configured credential's
    view, read while the client initializes) when it is given and not done yet, for at
    most `wait` seconds from the first request: an Arcane that does not answer does not
    hold tools/list for its whole request timeout. Past it the catalog served is the whole
    one until the view arrives (Runtime.view: a session that listed it is told at its next
    call)."""
    if ready is None:
        return handlers
    deadline: list[float] = []

    async def settled() -> None:
        loop = asyncio.get_running_loop()
        if not deadline:
            deadline.append(loop.time() + wait)
        left = deadline[0] - loop.time()
        if left > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(ready), left)  # shielded: a cancelled request must not cancel the read

    def gate(handler: Any) -> Any:
        async def gated(ctx: Any, params: Any) -> Any:
            if not ready.done():
                await settled()
            return await handler(ctx, params)

        return gated

    return {name: gate(handler) for name, handler in handlers.items()}


@contextlib.contextmanager
def captured_logs() -> Iterator[list[logging.LogRecord]]:
    """The server's log records of the tool call running in this context, as they come."""
    records: list[logging.LogRecord] = []
    token = _call_records.set(records)
    try:
        yield records
    finally:
        _call_records.reset(token)


class ToolList:
    """The tools of the runtime's current surface (a 403 may narrow it, refresh_after),
    built once per surface, and the view each session last listed, by its Mcp-Session-Id
    ("": stdio's one session; a request of stateless HTTP): a stateful HTTP session
    outlives the re-check of its key that narrowed or widened what it may do, and is told
    at its next call to list again."""

    def __init__(self, runtime: Runtime, answered: asyncio.Event | None = None) -> None:
        self.runtime = runtime
        self.listing: dict[str, Any] = {}
        self.listed: dict[str, int] = memo_table()
        self.answered = answered  # set when a tools/list is answered
        self.apps: apps.Apps | None = None  # MCP Apps views: `_meta.ui` for a client that declares them

    def current(self) -> tuple[list[dict], dict[str, dict]]:
        """(the tools' wire form as mappings, input schema by name); wire.list_result: the SDK validates the answer itself."""
        runtime, listing = self.runtime, self.listing
        if listing.get("surface") is not runtime.surface:
            tools = [t.as_wire() for t in runtime.surface.tools()]
            # the schemas a call is validated against: the originals, whatever dialect is listed
            schemas = {t["name"]: t["inputSchema"] for t in tools}
            if runtime.settings.schema_dialect == "portable":
                from .dialect import portable_tool

                tools = [portable_tool(t) for t in tools]
            listing.update(surface=runtime.surface, tools=tools, schemas=schemas)
        return listing["tools"], listing["schemas"]

    def schema(self, name: str) -> dict | None:
        return self.current()[1].get(name)

    async def tell_changed(self, ctx: ServerRequestContext) -> None:
        keep(self.listed, session_id(ctx), self.runtime.view, SESSION_LEVELS_MAX)
        with contextlib.suppress(Exception):  # best effort: the next tools/list is right anyway
            await ctx.session.send_tool_list_changed()

    async def follow(self, ctx: ServerRequestContext) -> None:
        """A session that listed an older view than the one served is told to list again."""
        if self.listed.get(session_id(ctx), self.runtime.view) != self.runtime.view:
            await self.tell_changed(ctx)

    async def on_list_tools(self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        keep(self.listed, session_id(ctx), self.runtime.view, SESSION_LEVELS_MAX)
        tools = self.current()[0]
        if self.apps is not None:  # keyed by whether the client declared the extension (apps.Apps.tool_meta)
            tools = self.apps.tool_meta(tools, apps.declared(ctx))
        answer = list_result(tools)
        if self.answered is not None:
            self.answered.set()
        return answer


def _progress(ctx: ServerRequestContext) -> tuple[Callable[..., Awaitable[None]], Callable[[], None]]:
    """The call's progress notifications (best effort), and what mutes them once the call became a task."""
    muted: list[bool] = []

    async def progress(done: float, total: float | None, message: str) -> None:
        if muted:
            return
        try:
            await ctx.session.report_progress(done, total, message)
        except Exception:  # progress is best effort; the call goes on
            log.debug("progress notification failed", exc_info=True)

    return progress, lambda: muted.append(True)


class ToolCalls:
    """tools/call of one server: the tool's surface call with the confirmation protocol
    (confirmation.py), as a task when the request asks for one (tasks.py), its log records
    sent back to its client, and a 403 that re-reads what the credential may do."""

    def __init__(self, runtime: Runtime, tools: ToolList, levels: ClientLogLevels) -> None:
        self.runtime, self.tools, self.levels = runtime, tools, levels
        self.tasks: tasks.Tasks | None = None  # set once the server's request-state codec exists

    async def on_call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        await self.tools.follow(ctx)
        if params.name not in self.tools.current()[1]:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}", data={"tool": params.name})
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        extra = confirmation.call_extras(ctx, params, modern)
        with captured_logs() as records:
            result = await self._call(ctx, params, modern, extra)
        if isinstance(result, dict):
            return result  # the task handle (resultType "task"): 2026-07-28 only
        if records:
            await _send_call_logs(ctx, records, self.runtime, self.levels.of(ctx), modern)
        if await refresh_after(self.runtime, result):  # the resources and prompts follow (Runtime.followers)
            await self.tools.tell_changed(ctx)
        asked = confirmation.input_required(result, params.name, params.arguments, self.runtime.settings.confirm_expiry)
        if asked is not None:
            return asked
        return self.tools.apps.result(ctx, result, call_result(result)) if self.tools.apps is not None else call_result(result)

    async def _call(self, ctx: ServerRequestContext, params: types.CallToolRequestParams, modern: bool,
                    extra: dict[str, Any]) -> ToolResult | dict:
        """The surface's call, as a task when the request declares the extension; a bug of
        ours becomes an internal-error result, never a traceback."""
        surface = self.runtime.surface
        progress, mute = _progress(ctx)
        try:
            runner = self.tasks
            if modern and runner is not None and runner.enabled and tasks.declared(ctx):
                return await runner.run_call(
                    lambda on_started: surface.call(params.name, params.arguments, progress, on_started=on_started, **extra),
                    surface.name, mute)
            return await surface.call(params.name, params.arguments, progress, **extra)
        except Exception:
            log.exception("tool call failed unexpectedly")

            return render_error("internal error in arcane-mcp", "Retry once; if it repeats, report it with the server's log.", code="internal")


def _capture_logs(runtime: Runtime) -> ClientLogLevels:
    """The server's log records of a call go back to its client (installed once per
    process); the legacy clients' chosen levels, per session on stateful HTTP."""
    arcane_log = logging.getLogger("arcane_mcp")
    if _CAPTURE not in arcane_log.handlers:
        arcane_log.addHandler(_CAPTURE)
    return ClientLogLevels(per_session=runtime.settings.http_stateful)


def _resource_handlers(runtime: Runtime, views: apps.Apps) -> dict[str, Any]:
    """Resources (with the MCP Apps views for a client that declares them), their
    subscriptions over Arcane's live channel (rules/resources.yaml `updates`) and prompts,
    following the runtime's view (Runtime.followers)."""
    served = resources.for_runtime(runtime.catalog, runtime.dispatcher)
    served_prompts = prompts.Prompts(runtime.catalog, runtime.dispatcher, served)
    runtime.followers = [served, served_prompts]
    hub = subscriptions.for_resources(served)
    return {**views.wrap_resources(resources.mcp_handlers(served)), **subscriptions.mcp_handlers(hub), **prompts.mcp_handlers(served_prompts)}


def _sealed(server: Server, runtime: Runtime, principal: str | None) -> Any:
    """Seal the request state of a confirmation round (ARCANE_MCP_STATE_SECRET, else a
    per-process key) for ARCANE_MCP_CONFIRM_EXPIRY, bound to the client's key in HTTP mode,
    each round answered once (confirmation.early_refusals); the security it uses."""
    secret = runtime.settings.state_secret
    keys = [secret] if secret else [_process_key()]
    ttl = runtime.settings.confirm_expiry
    security = (RequestStateSecurity(keys=keys, ttl=ttl, bind_principal=lambda ctx: principal) if principal is not None
                else RequestStateSecurity(keys=keys, ttl=ttl))
    # outside the boundary: an answered, expired or re-argued round gets its own code
    server.middleware.append(confirmation.early_refusals(security.codec))
    server.middleware.append(RequestStateBoundary(security, default_audience=server.name))
    server.middleware.append(explain_invalid)  # innermost: the SDK's refusals of a request's shape, in one clear line
    return security


def build_server(runtime: Runtime, *, principal: str | None = None, ready: asyncio.Future | None = None,
                 listed: asyncio.Event | None = None) -> Server:
    """The MCP server of one runtime. `principal` (HTTP mode: the digest of the client's key)
    binds sealed confirmation state to that key: a round started with one key cannot be
    answered with another. `ready` (stdio): the credential's view being read; every request
    but initialize (and logging/setLevel) waits for it, so the first tools/list is already
    the credential's while its reads overlap the client's handshake. `listed` is set once
    a tools/list is answered (the stdio drift check waits for it)."""
    levels = _capture_logs(runtime)
    tools = ToolList(runtime, listed)
    calls = ToolCalls(runtime, tools, levels)
    tools.apps = apps.Apps(runtime)

    async def on_set_level(ctx: ServerRequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        levels.of(ctx).level = params.level
        return types.EmptyResult()

    served = {"on_list_tools": tools.on_list_tools, "on_call_tool": calls.on_call_tool, **_resource_handlers(runtime, tools.apps)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # logging is deprecated at 2026-07-28, still served to legacy clients
        server = Server("arcane-mcp", version=__version__, title="Arcane", instructions=runtime.catalog.server.instructions,
                        on_set_logging_level=on_set_level, get_tool_input_schema=tools.schema,
                        **_after(ready, served, runtime.settings.access_wait))
    security = _sealed(server, runtime, principal)
    # long operations as MCP tasks: their IDs are sealed with the same codec as the request state
    calls.tasks = tasks.Tasks(runtime, security.codec)
    if calls.tasks.enabled:
        tasks.register(server, calls.tasks)
    apps.register(server, tools.apps)
    return server


_PROCESS_KEY: bytes | None = None


def _process_key() -> bytes:
    """Without ARCANE_MCP_STATE_SECRET, a per-process key: confirmations survive neither a
    restart nor a hop to another replica (set the secret when running several)."""
    global _PROCESS_KEY
    if _PROCESS_KEY is None:
        _PROCESS_KEY = os.urandom(32)
    return _PROCESS_KEY


_background: set[asyncio.Task] = set()  # tasks the loop must not lose before they end


#: stdio: the drift check waits at most this long for the first tools/list to be answered
DRIFT_AFTER_LIST_S = 5.0
#: and starts this long after that answer, once it is written
DRIFT_SETTLE_S = 0.1


async def start_client(runtime: Runtime, after: asyncio.Event | None = None) -> asyncio.Task | None:
    """Start the Arcane client (a session logs in; a refused login raises ConfigError), then
    compare the live OpenAPI document with the embedded one in the background: one warning
    line when they differ (drift.startup_warning), never a delay or a failure of startup.
    With `after` (stdio: set when the first tools/list is answered) the comparison waits
    for it (at most DRIFT_AFTER_LIST_S), so that its request is not on the start's way."""
    client = runtime.dispatcher.client
    if client is None:
        return None
    await client.start()

    task = asyncio.create_task(_drift_check(runtime, after))
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def _drift_check(runtime: Runtime, after: asyncio.Event | None) -> Any:
    if after is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(after.wait(), DRIFT_AFTER_LIST_S)
        await asyncio.sleep(DRIFT_SETTLE_S)
    return await startup_warning(runtime.dispatcher.client, runtime.catalog)


async def _read_access(runtime: Runtime) -> None:
    """apply_access for a start; should it fail unexpectedly, nothing is withdrawn (Arcane
    still refuses what it refuses) and the server goes on."""
    try:
        await apply_access(runtime)
    except Exception as exc:
        log.warning("could not read what the configured credential may do (%s); nothing is withdrawn for it", type(exc).__name__)


async def serve_stdio(runtime: Runtime) -> None:
    listed = asyncio.Event()  # the first tools/list is answered: the drift check may start
    await start_client(runtime, after=listed)
    ready = None
    if runtime.dispatcher.client is not None and runtime.access is not None:
        # the configured credential sees only what it may do: its reads go on while the
        # client initializes, and the first request after initialize waits for them
        ready = asyncio.create_task(_read_access(runtime))
        _background.add(ready)
        ready.add_done_callback(_background.discard)
    server = build_server(runtime, ready=ready, listed=listed)
    # the lines are checked before the SDK reads them: a malformed frame gets its JSON-RPC
    # error (frames.py) where the SDK would drop it and leave the client waiting
    lines = StdioFrames(runtime.settings.max_body_bytes)
    try:
        async with stdio_server(stdin=lines) as (read_stream, write_stream):
            lines.answer = functools.partial(write_problem, write_stream)
            options = server.create_initialization_options(NotificationOptions(tools_changed=runtime.access is not None))
            await server.run(read_stream, write_stream, options)
    finally:
        lines.close()
        if runtime.dispatcher.client is not None:
            await runtime.dispatcher.client.aclose()
