"""The MCP server: the SDK's low-level Server with a method -> handler table built from
one Runtime (catalog + settings + dispatcher + surface). stdio and streamable HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import Server

from . import __version__, prompts, resources
from .access import Access
from .auditlog import AuditLog
from .catalog import BuildOptions, Catalog, build
from .config import Settings
from .dispatch import Dispatcher
from .errors import ConfigError
from .render import ToolResult
from .request import ArcaneClient
from .surfaces import Surface, make_surface

log = logging.getLogger("arcane_mcp")



@dataclass
class Runtime:
    settings: Settings
    catalog: Catalog
    dispatcher: Dispatcher
    surface: Surface
    access: Access | None = None  # the credential's view of the shared catalog (interpreter/access.py)

    def narrow(self) -> None:
        """Serve the access view's catalog: a new dispatcher and surface over it (same
        client and audit log)."""
        if self.access is None or self.access.catalog is self.catalog:
            return
        self.catalog = self.access.catalog
        self.dispatcher = Dispatcher(self.catalog, self.settings, self.dispatcher.client, self.dispatcher.audit)
        self.surface = make_surface(self.settings.surface, self.catalog, self.dispatcher)


async def apply_access(runtime: Runtime) -> int:
    """Read what the configured credential may do (/auth/me) and withdraw the rest; the
    number of actions withdrawn for it."""
    if runtime.access is None:
        return 0
    await runtime.access.refresh()
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
    options = BuildOptions(environment_default=settings.environment_id, read_only=settings.read_only,
                           exclude=settings.exclude_tools, operator_rules=settings.rules_dir)
    catalog = build(options)
    if client is None and settings.arcane_url:
        client = ArcaneClient(settings)
    dispatcher = Dispatcher(catalog, settings, client, audit or AuditLog(settings.audit_log))
    access = Access(catalog, client, settings.api_key) if client is not None else None
    return Runtime(settings, catalog, dispatcher, make_surface(settings.surface, catalog, dispatcher), access)


def to_call_result(result: ToolResult) -> types.CallToolResult:
    content: list[Any] = [types.TextContent(type="text", text=result.text, annotations=types.Annotations(audience=["assistant"]))]
    for _, blob in enumerate(result.blobs):
        digest = hashlib.sha256(blob.data).hexdigest()[:16]
        content.append(types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri=f"arcane://download/{digest}/{blob.filename}", mime_type=blob.mime_type,
                                                blob=base64.b64encode(blob.data).decode("ascii")),
            annotations=types.Annotations(audience=["user"]),
        ))
    content += [types.ResourceLink(type="resource_link", uri=link.uri, name=link.name, title=link.title, mime_type=link.mime_type)
                for link in result.links]
    return types.CallToolResult(content=content, structured_content=result.structured, is_error=result.is_error)


def result_wire(result: ToolResult) -> dict:
    return to_call_result(result).model_dump(by_alias=True, exclude_none=True, mode="json")


CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm", "description": "Yes, do it"}},
    "required": ["confirm"],
}
CONFIRM_KEY = "confirm"


def _answer(result: Any) -> str:
    """accept (with confirm: true) -> "accept"; accept with confirm false -> "decline"."""
    action = getattr(result, "action", None) or (result.get("action") if isinstance(result, dict) else None)
    content = getattr(result, "content", None) if not isinstance(result, dict) else result.get("content")
    if action == "accept":
        return "accept" if (content or {}).get("confirm") is True else "decline"
    return str(action or "cancel")


def _state_for(tool: str) -> str:
    # the SDK's RequestStateBoundary seals this and binds it to the tool and its arguments
    return f"arcane-mcp/confirm/v1/{tool}"


def build_server(runtime: Runtime) -> Server:
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
    from mcp.types.version import MODERN_PROTOCOL_VERSIONS

    # the tools of the runtime's current surface: a 403 may narrow it (refresh_after)
    listing: dict[str, Any] = {}

    def current() -> tuple[list[types.Tool], dict[str, dict]]:
        if listing.get("surface") is not runtime.surface:
            tools = [types.Tool.model_validate(t.as_wire()) for t in runtime.surface.tools()]
            listing.update(surface=runtime.surface, tools=tools, schemas={t.name: t.input_schema for t in tools})
        return listing["tools"], listing["schemas"]

    async def on_list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=current()[0])

    async def on_call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        schemas = current()[1]
        surface = runtime.surface
        if params.name not in schemas:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}", data={"tool": params.name})

        async def progress(done: float, total: float | None, message: str) -> None:
            try:
                await ctx.session.report_progress(done, total, message)
            except Exception:  # progress is best effort; the call goes on
                log.debug("progress notification failed", exc_info=True)

        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        caps = ctx.session.client_capabilities
        can_elicit = caps is not None and getattr(caps, "elicitation", None) is not None
        extra: dict[str, Any] = {}
        responses = params.input_responses or {}
        if modern and CONFIRM_KEY in responses:
            # the boundary has verified the seal; it must also be the state we minted
            if params.request_state != _state_for(params.name):
                raise MCPError(code=types.INVALID_PARAMS, message="Invalid or missing requestState for this confirmation",
                               data={"tool": params.name})
            extra["answer"] = _answer(responses[CONFIRM_KEY])
        elif modern:
            extra["can_request_input"] = can_elicit
        elif can_elicit and ctx.session.can_send_request:
            async def elicit(question: str) -> str:
                try:
                    result = await ctx.session.elicit_form(question, CONFIRM_SCHEMA, related_request_id=ctx.request_id)
                except MCPError:
                    return "cancel"
                return _answer(result)

            extra["elicit"] = elicit
        try:
            result = await surface.call(params.name, params.arguments, progress, **extra)
        except Exception:
            log.exception("tool call failed unexpectedly")
            from .render import render_error

            result = render_error("internal error in arcane-mcp", "Retry once; if it repeats, report it with the server's log.", code="internal")
        if await refresh_after(runtime, result):
            for part in (served, served_prompts):  # the resources and prompts follow the narrowed catalog
                part.catalog, part.dispatcher = runtime.catalog, runtime.dispatcher
            with contextlib.suppress(Exception):  # best effort: the next tools/list is right anyway
                await ctx.session.send_tool_list_changed()
        if result.ask is not None:
            return types.InputRequiredResult(
                input_requests={CONFIRM_KEY: types.ElicitRequest(params=types.ElicitRequestFormParams(
                    message=result.ask, requested_schema=CONFIRM_SCHEMA))},
                request_state=_state_for(params.name))
        return to_call_result(result)

    instructions = runtime.catalog.server.instructions
    server = Server("arcane-mcp", version=__version__, title="Arcane", instructions=instructions,
                    on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                    get_tool_input_schema=lambda name: current()[1].get(name),
                    **resources.mcp_handlers(served := resources.for_runtime(runtime.catalog, runtime.dispatcher)),
                    **prompts.mcp_handlers(served_prompts := prompts.Prompts(runtime.catalog, runtime.dispatcher, served)))
    secret = runtime.settings.state_secret
    security = RequestStateSecurity(keys=[secret]) if secret else RequestStateSecurity(keys=[_process_key()])
    server.middleware.append(RequestStateBoundary(security, default_audience=server.name))
    return server


_PROCESS_KEY: bytes | None = None


def _process_key() -> bytes:
    """Without ARCANE_MCP_STATE_SECRET, a per-process key: confirmations survive neither a
    restart nor a hop to another replica (set the secret when running several)."""
    global _PROCESS_KEY
    if _PROCESS_KEY is None:
        import os

        _PROCESS_KEY = os.urandom(32)
    return _PROCESS_KEY


_background: set[asyncio.Task] = set()  # tasks the loop must not lose before they end


async def start_client(runtime: Runtime) -> asyncio.Task | None:
    """Start the Arcane client (a session logs in; a refused login raises ConfigError), then
    compare the live OpenAPI document with the embedded one in the background: one warning
    line when they differ (drift.startup_warning), never a delay or a failure of startup."""
    client = runtime.dispatcher.client
    if client is None:
        return None
    await client.start()
    from .drift import startup_warning

    task = asyncio.create_task(startup_warning(client, runtime.catalog))
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def serve_stdio(runtime: Runtime) -> None:
    from mcp.server.lowlevel import NotificationOptions
    from mcp.server.stdio import stdio_server

    await start_client(runtime)
    if runtime.dispatcher.client is not None:
        await apply_access(runtime)  # the configured credential sees only what it may do
    server = build_server(runtime)
    try:
        async with stdio_server() as (read_stream, write_stream):
            options = server.create_initialization_options(NotificationOptions(tools_changed=runtime.access is not None))
            await server.run(read_stream, write_stream, options)
    finally:
        if runtime.dispatcher.client is not None:
            await runtime.dispatcher.client.aclose()


def http_app(runtime: Runtime, host: str, port: int, on_ready: Callable[[], None] | None = None):
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    from .listen import address_text

    server = build_server(runtime)
    here = address_text(host, port)
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", here, *runtime.settings.allowed_hosts]
    origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}", f"http://{here}",
               *runtime.settings.allowed_origins]
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=not runtime.settings.http_stateful, json_response=False,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins),
        host=host,
    )

    async def health(request):
        return JSONResponse({"status": "ok", "version": __version__, "surface": runtime.settings.surface,
                             "actions": len(runtime.catalog.actions)})

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if runtime.dispatcher.client is not None:
            try:
                await start_client(runtime)
            except Exception as exc:  # a refused login: one line, then stop
                print(f"interp: {exc.format() if isinstance(exc, ConfigError) else exc}", file=sys.stderr, flush=True)
                raise SystemExit(2) from None
        async with server.session_manager.run():
            if on_ready is not None:
                on_ready()  # only now: the socket is bound and the login (if any) went through
            yield
        if runtime.dispatcher.client is not None:
            await runtime.dispatcher.client.aclose()

    return Starlette(routes=[Route("/health", health), Mount("/", app=mcp_app)], lifespan=lifespan)


def serve_http(runtime: Runtime, sock: socket.socket, on_ready: Callable[[], None] | None = None) -> None:
    """Serve streamable HTTP on an already bound socket (listen.bind), so a busy port
    fails before anything is announced; `on_ready` runs once the server is up."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    app = http_app(runtime, host, port, on_ready)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
