"""The test host: the host side of the MCP Apps bridge (the ext-apps specification, stable
2026-01-26), written in Python. A page of this directory (host.html, served by HostPages)
holds the view in an iframe sandboxed to `allow-scripts` (an opaque origin) loaded by
`srcdoc` from the document the server serves at `resources/read ui://...`; the page relays
the view's messages here through a binding; ViewHost answers them: `ui/initialize` with a
host context (theme), the view's `tools/call` and `resources/read` forwarded to the MCP
server through a real client session (which declares the extension and answers elicitation
as the test chose), and the notifications a host sends after its own tools/call
(tool-input, then tool-result)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
from mcp import Client, MCPError
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from tests.browser.cdp import Page, wait_until

HERE = Path(__file__).resolve().parent
PAGES = {"/host.html": "text/html; charset=utf-8", "/host.js": "text/javascript; charset=utf-8",
         "/host.css": "text/css; charset=utf-8"}
# The specification's restrictive default for a view whose resource declares no domains; the
# srcdoc iframe inherits the page's policy, so the view runs under this one AND its own.
HOST_CSP = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; media-src 'self' data:; connect-src 'none'")
SPEC_VERSION = "2026-01-26"
VIEW_META_KEY = "arcane-mcp/view"
WIDTH = 760


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0]
        if path not in PAGES:
            self.send_response(404 if path != "/favicon.ico" else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = (HERE / path.lstrip("/")).read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", PAGES[path])
        self.send_header("Content-Security-Policy", HOST_CSP)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def host_pages():
    """The host page's files on a free port of 127.0.0.1; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Elicitations:
    """The person behind the host: answers each confirmation question with `answer`
    ("accept" or "decline") and keeps the questions."""

    def __init__(self):
        self.answer = "decline"
        self.asked: list[Any] = []

    async def __call__(self, context, params):
        self.asked.append(params)
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action=self.answer)


@contextlib.asynccontextmanager
async def mcp_client(base: str, elicit: Elicitations, *, apps: bool = True):
    """A client session over streamable HTTP to `interp serve --http` at `base`; `apps`:
    it declares the MCP Apps extension with the HTML MIME type."""
    extensions = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})] if apps else []
    async with httpx.AsyncClient(timeout=60) as http, \
            Client(streamable_http_client(base + "/mcp", http_client=http), mode="auto",
                   elicitation_callback=elicit, extensions=extensions) as client:
        yield client


def dump(model) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class ViewHost:
    """One view at a time in `page`, its bridge answered here."""

    def __init__(self, page: Page, pages_url: str, client: Client | None = None):
        self.page, self.pages_url, self.client = page, pages_url, client
        self.theme = "light"
        self.width = WIDTH
        self.frame: str | None = None
        self.reset()

    def reset(self) -> None:
        self.received: list[dict] = []       # every message from the view
        self.view_calls: list[dict] = []     # the view's tools/call: {"params", "result" | "error"}
        self.sizes: list[dict] = []
        self.answers: dict[Any, dict] = {}   # the view's answers to the host's requests
        self.initialized = False
        self.init_params: dict | None = None
        self._next_id = 1

    async def attach(self) -> ViewHost:
        await self.page.add_binding("hostRelay", self._on_message)
        return self

    # -- what the view sends ------------------------------------------------------------
    async def _on_message(self, payload: str) -> None:
        msg = json.loads(payload)
        self.received.append(msg)
        method = msg.get("method")
        if method is None:
            if "id" in msg:
                self.answers[msg["id"]] = msg
            return
        if "id" not in msg:
            self._notified(method, msg.get("params") or {})
            return
        try:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": await self._answer(method, msg.get("params") or {})}
        except MCPError as err:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": err.code, "message": str(err)}}
        except _Refused as err:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": err.code, "message": err.message}}
        await self.send(reply)

    def _notified(self, method: str, params: dict) -> None:
        if method == "ui/notifications/initialized":
            self.initialized = True
        elif method == "ui/notifications/size-changed":
            self.sizes.append(params)
            if isinstance(params.get("height"), int | float):
                asyncio.get_running_loop().create_task(self.page.evaluate(f"hostResize({float(params['height'])})"))

    async def _answer(self, method: str, params: dict) -> dict:
        if method == "ui/initialize":
            self.init_params = params
            return {"protocolVersion": SPEC_VERSION, "hostInfo": {"name": "arcane-mcp-test-host", "version": "1"},
                    "hostCapabilities": {"serverTools": {}, "serverResources": {}, "logging": {}},
                    "hostContext": self.context()}
        if method == "ping":
            return {}
        if method == "ui/request-display-mode":
            return {"mode": "inline"}
        if method in ("ui/open-link", "ui/message", "ui/update-model-context"):
            return {}
        if method == "tools/call":
            return await self._forward_call(params)
        if method == "resources/read":
            if self.client is None:
                raise _Refused(-32603, "this host has no server")
            return dump(await self.client.read_resource(params["uri"]))
        raise _Refused(-32601, f"method not found: {method}")

    async def _forward_call(self, params: dict) -> dict:
        record = {"params": params}
        self.view_calls.append(record)
        if self.client is None:
            record["error"] = "no server"
            raise _Refused(-32603, "this host has no server")
        try:
            result = dump(await self.client.call_tool(params["name"], params.get("arguments") or {}))
        except MCPError as err:
            record["error"] = {"code": err.code, "message": str(err)}
            raise
        record["result"] = result
        return result

    def context(self) -> dict:
        return {"theme": self.theme, "displayMode": "inline", "availableDisplayModes": ["inline"],
                "containerDimensions": {"width": self.width, "maxHeight": 4000}, "locale": "en-US",
                "timeZone": "UTC", "platform": "web"}

    # -- what the host sends ------------------------------------------------------------
    async def send(self, message: dict) -> None:
        delivered = await self.page.evaluate(f"hostSend({json.dumps(message)})")
        assert delivered, "the view's frame is gone"

    async def notify(self, method: str, params: dict) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict, timeout: float = 10) -> dict:
        ident = f"host-{self._next_id}"
        self._next_id += 1
        await self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return await wait_until(lambda: self.answers.get(ident), f"the view's answer to {method}", timeout)

    async def show(self, html: str, *, theme: str = "light", arguments: dict | None = None,
                   result: dict | None = None, sandbox: str = "allow-scripts") -> str:
        """Load `html` as the view, complete the handshake, then send tool-input and (when
        given) tool-result, as a host does after its own tools/call. Returns the frame id."""
        self.reset()
        self.theme = theme
        await self.page.set_color_scheme(theme)
        await self.page.navigate(self.pages_url + "/host.html")
        self.page.contexts = {k: v for k, v in self.page.contexts.items() if v.get("frameId") == self.page.main_frame}
        await self.page.evaluate(f"hostLoad({json.dumps(html)}, {self.width}, {json.dumps(sandbox)}, "
                                 f"{json.dumps(theme == 'dark')})")
        self.frame = await self.page.child_frame()
        await wait_until(lambda: self.initialized, "ui/notifications/initialized from the view")
        await self.notify("ui/notifications/tool-input", {"arguments": arguments or {}})
        if result is not None:
            await self.notify("ui/notifications/tool-result", result)
        return self.frame

    async def in_view(self, expression: str) -> Any:
        """Evaluate `expression` in the view's document (its main world)."""
        return await self.page.evaluate(expression, frame=self.frame)

    async def settle(self, what: str, check: str, timeout: float = 20) -> Any:
        """Wait until `check` (a JavaScript expression in the view) is truthy."""
        return await wait_until(lambda: self.in_view(check), what, timeout)

    async def set_theme(self, theme: str) -> None:
        self.theme = theme
        await self.page.set_color_scheme(theme)
        await self.notify("ui/notifications/host-context-changed", {"theme": theme})

    # -- the host's own calls to the server --------------------------------------------
    async def view_uri(self, tool: str) -> str | None:
        tools = await self.client.list_tools()
        found = next(t for t in tools.tools if t.name == tool)
        ui = (found.meta or {}).get("ui") or {}
        return ui.get("resourceUri")

    async def read_view(self, uri: str) -> tuple[str, dict]:
        read = await self.client.read_resource(uri)
        content = read.contents[0]
        assert content.mime_type == APP_MIME_TYPE, content.mime_type
        return content.text, dump(read)["contents"][0]

    async def call_and_show(self, tool: str, arguments: dict, *, theme: str = "light") -> dict:
        """The host's own tools/call of a tool that names a view: its document read from the
        server, shown, and the call's result sent to it. Returns the result."""
        uri = await self.view_uri(tool)
        assert uri and uri.startswith("ui://"), f"{tool} names no view: {uri!r}"
        html, _ = await self.read_view(uri)
        result = dump(await self.client.call_tool(tool, arguments))
        await self.show(html, theme=theme, arguments=arguments, result=result)
        return result


class _Refused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message
