"""MCP Apps views: the `io.modelcontextprotocol/ui` extension, the server side.

The server advertises the extension (`extensions["io.modelcontextprotocol/ui"] = {}`). For a
client that declares it (capabilities.extensions with the `text/html;profile=mcp-app` MIME
type: the SDK's `client_supports_apps`, read per request, so per request on 2026-07-28),
and for no other:

* tools/list: a tool that has a view carries `_meta.ui.resourceUri` (merged into any
  `_meta` it has): on the individual surface, a tool whose action a view rule serves
  names that view; on the dynamic and meta surfaces, the execute and domain tools name
  the routing view (one document that shows the widget of the action a result came from);
* resources/list lists, and resources/read serves, `ui://arcane-mcp/view/<name>.html` per
  view rule and `ui://arcane-mcp/view/router.html` (MIME `text/html;profile=mcp-app`);
* a tools/call result whose action has a view (or the default view) carries the view model
  in `_meta["arcane-mcp/view"]` (viewmodel.py).

Every other client sees what it saw before: the same tools/list and resources/list, no
ui:// resource (reading one is "not found", as for any unknown URI), no result `_meta`.

The document of a view: interpreter/views/shell.html with its markers replaced: %%STYLE%%
and %%SCRIPT%% by the .css and .js files order.txt names, concatenated in order (an asset
holding `</script` or `</style` is refused); %%CSP%% by a policy allowing exactly that one
script and that one style by their SHA-256; %%CONFIG%% by `{"version": 1, "view": name}`
(null: the router) as JSON with `<`, `>`, `&`, U+2028, U+2029 escaped. Built once per
process. The calls a view makes are tools/calls from the host, through the same
dispatcher: confirmation, read-only and safe mode, permissions, audit apply unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID, client_supports_apps

from ..build.view_rules import VIEW_URI, view_for
from ..errors import AssetError
from ..text.render import ToolResult
from .names import EXECUTE_TOOL, TOOL_PREFIX, tool_name_individual
from .viewmodel import Builder

log = logging.getLogger("arcane_mcp")

VIEW_META = "arcane-mcp/view"
ROUTER = "router"
URI_PREFIX = VIEW_URI.split("{", 1)[0]
ASSETS = Path(__file__).resolve().parent.parent / "views"
MARKERS = ("%%CSP%%", "%%STYLE%%", "%%SCRIPT%%", "%%CONFIG%%")
CLOSING = re.compile(r"</\s*(script|style)", re.IGNORECASE)
RESOURCE_META = {"ui": {"csp": {}, "prefersBorder": True}}
CSP = ("default-src 'none'; script-src 'sha256-{script}'; style-src 'sha256-{style}'; img-src data:; "
       "connect-src 'none'; base-uri 'none'; form-action 'none'")


def declared(ctx) -> bool:
    """Whether this request's client declares the extension with the app MIME type."""
    try:
        return bool(client_supports_apps(ctx))
    except Exception:  # no session or capabilities (an in-process call): not declared
        return False


def config_json(view: str | None) -> str:
    """The document's config: JSON that cannot close its <script> element or break a line."""
    text = json.dumps({"version": 1, "view": view}, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def digest(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


@lru_cache(maxsize=4)
def assets(folder: str = str(ASSETS)) -> tuple[str, str, str]:
    """(shell, style, script) of the views, read once per process; raises AssetError."""
    root = Path(folder)
    try:
        shell = (root / "shell.html").read_text(encoding="utf-8")
        names = [n.strip() for n in (root / "order.txt").read_text(encoding="utf-8").splitlines() if n.strip() and not n.startswith("#")]
        parts = {n: (root / n).read_text(encoding="utf-8") for n in names if "/" not in n and "\\" not in n and not n.startswith(".")}
    except OSError as exc:
        raise AssetError(f"the view assets cannot be read: {exc}") from None
    for marker in MARKERS:
        if shell.count(marker) != 1:
            raise AssetError(f"shell.html must hold {marker} exactly once")
    for name, text in parts.items():
        if CLOSING.search(text):
            raise AssetError(f"the view asset {name} holds a closing script or style tag")
    style = "\n".join(parts[n] for n in names if n.endswith(".css"))
    script = "\n".join(parts[n] for n in names if n.endswith(".js"))
    return shell, style, script


@lru_cache(maxsize=64)
def document(view: str | None, folder: str = str(ASSETS)) -> str:
    """The assembled HTML document of one view (None: the router), built once per process."""
    shell, style, script = assets(folder)
    csp = CSP.format(script=digest(script), style=digest(style))
    # one pass, so that a marker written inside an asset is never replaced
    values = {"%%CSP%%": csp, "%%STYLE%%": style, "%%SCRIPT%%": script, "%%CONFIG%%": config_json(view)}
    return re.sub("|".join(map(re.escape, MARKERS)), lambda m: values[m.group(0)], shell)


class Apps:
    """The extension for one server (its runtime: catalog and surface follow it)."""

    def __init__(self, runtime):
        self.runtime = runtime
        self._tools: dict[int, tuple[list[dict], list[dict]]] = {}

    @property
    def views(self):
        return self.runtime.catalog.views

    @property
    def enabled(self) -> bool:
        if not self.views:
            return False
        try:
            assets()
        except AssetError as exc:
            log.warning("MCP Apps views are off: %s", exc)
            return False
        return True

    def uri(self, name: str | None) -> str:
        return VIEW_URI.replace("{name}", name or ROUTER)

    # ------------------------------------------------------------ tools/list

    def tool_meta(self, tools: list[dict], is_declared: bool) -> list[dict]:
        """tools/list's tools for this client: as they are, or with `_meta.ui` (cached per listing)."""
        if not is_declared or not self.enabled:
            return tools
        hit = self._tools.get(id(tools))
        if hit is not None and hit[0] is tools:
            return hit[1]
        out = []
        by_tool = {tool_name_individual(aid): aid for aid in self.runtime.catalog.actions}
        for t in tools:
            uri = self._tool_uri(t["name"], by_tool)
            if uri is None:
                out.append(t)
                continue
            meta = dict(t.get("_meta") or {})
            meta["ui"] = {**(meta.get("ui") or {}), "resourceUri": uri}
            out.append({**t, "_meta": meta})
        self._tools = {id(tools): (tools, out)}
        return out

    def _tool_uri(self, name: str, by_tool: dict[str, str]) -> str | None:
        surface = self.runtime.settings.surface
        if surface == "individual":
            view = view_for(self.views, by_tool[name]) if name in by_tool else None
            return self.uri(view.name) if view is not None and not view.default else None
        if name == EXECUTE_TOOL or (surface == "meta" and name.startswith(TOOL_PREFIX)):
            return self.uri(None)
        return None

    # ------------------------------------------------------------ resources

    def listed(self) -> list[types.Resource]:
        out = [types.Resource(uri=self.uri(v.name), name=f"view-{v.name}", title=f"View: {v.title}", mime_type=APP_MIME_TYPE,
                              description=f"MCP Apps view ({v.widget}) of {', '.join(v.serves) or 'any action without its own view'}",
                              _meta=RESOURCE_META) for v in self.views]
        out.append(types.Resource(uri=self.uri(None), name=f"view-{ROUTER}", title="View: any result", mime_type=APP_MIME_TYPE,
                                  description="MCP Apps routing view: shows the widget of the action a result came from",
                                  _meta=RESOURCE_META))
        return out

    def read(self, uri: str) -> types.ReadResourceResult | None:
        """A view's document; None for a URI that is no view."""
        if not uri.startswith(URI_PREFIX) or not uri.endswith(".html"):
            return None
        name = uri[len(URI_PREFIX):-len(".html")]
        if name != ROUTER and name not in {v.name for v in self.views}:
            return None
        text = document(None if name == ROUTER else name)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=APP_MIME_TYPE, text=text, _meta=RESOURCE_META)],
                                        ttl_ms=0, cache_scope="private")

    def wrap_resources(self, handlers: dict[str, Any]) -> dict[str, Any]:
        """resources/list and resources/read with the views added for a declaring client."""
        list_resources, read_resource = handlers["on_list_resources"], handlers["on_read_resource"]

        async def on_list_resources(ctx, params):
            answer = await list_resources(ctx, params)
            if not declared(ctx) or not self.enabled:
                return answer
            return answer.model_copy(update={"resources": [*answer.resources, *self.listed()]})

        async def on_read_resource(ctx, params):
            if declared(ctx) and self.enabled:
                got = self.read(str(params.uri))
                if got is not None:
                    return got
            return await read_resource(ctx, params)

        return {**handlers, "on_list_resources": on_list_resources, "on_read_resource": on_read_resource}

    # ------------------------------------------------------------ tools/call

    def result(self, ctx, result: ToolResult, wire: dict[str, Any]) -> dict[str, Any]:
        """A tools/call answer with the view model in `_meta` for a declaring client."""
        if result.action is None or not declared(ctx) or not self.enabled:
            return wire
        view = view_for(self.views, result.action)
        if view is None:
            return wire
        try:
            settings = self.runtime.settings
            model = Builder(self.runtime.catalog, settings.surface, settings.environment_id).build(view, result)
        except Exception:  # a bug of ours costs the view, never the answer
            log.exception("the view model could not be built")
            return wire
        return {**wire, "_meta": {**(wire.get("_meta") or {}), VIEW_META: model}}


def register(server, apps: Apps) -> None:
    """Advertise the extension (settings: none)."""
    if apps.enabled:
        server.extensions[EXTENSION_ID] = {}


__all__ = ["ROUTER", "VIEW_META", "Apps", "AssetError", "assets", "config_json", "declared", "document", "register"]
