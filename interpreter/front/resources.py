"""The MCP resources (docs/resources.md), from rules/resources.yaml.

A Docker-state resource is a view of one catalog action: reading it runs that action
through the one dispatcher (the caller's credential, the action deadline, the request
timeout, an audit record ``resource read``) with the URI's variables as arguments, and
returns the action's structuredContent redacted by rules/redaction.yaml
(redact.Rules.for_resource) as indented JSON. Tool calls redact nothing.

The rules are compiled once per loaded file (``compiled``) into frozen dataclasses; a
``Resources`` is what one server serves: the resources whose action the catalog still has
after read-only mode and exclusions (every resource action reads, so read-only and safe
mode keep them all; an excluded action takes its resource with it).

A failed read is a JSON-RPC error (``ResourceError``): not found (an unknown URI, or an
Arcane status the rules list) → ``errors.not_found.code``; another Arcane status → the
status times ``errors.status_factor``; unreachable, deadline, anything else →
``errors.internal.code``. Its message is the tool call's text (error line and next step).
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types
from mcp import MCPError

from ..build.lazy_dataclass import dataclass
from ..build.resource_rules import MIME_JSON, MIME_MARKDOWN, DataResource
from ..call.dispatch import Call
from ..errors import ResourceError
from .names import EXECUTE_TOOL, tool_name_individual, tool_name_meta
from .surfaces import action_description

RESOURCE_SURFACE = "resource"
READ_TOOL = "resources/read"
AUDIT_MESSAGE = "resource read"


@dataclass(frozen=True)
class Contents:
    """What a read returns: one text content."""

    uri: str
    mime_type: str
    text: str


class Resources:
    """The resources one server serves, over its catalog and dispatcher."""

    def __init__(self, catalog, dispatcher):
        self.catalog = catalog
        self.dispatcher = dispatcher
        self.rules = catalog.resources
        self.redaction = catalog.redaction
        # an action the server does not serve takes its resource with it
        self.data = tuple(r for r in self.rules.data if r.action in catalog.actions)
        self.guides = catalog.guides
        note = self.rules.surface_note(dispatcher.settings.surface)
        # rendered once: a guide is static text for the server's surface
        self._guide_text = {g.uri: g.markdown(note, self.rules.reminder) for g in self.guides}

    def guide_text(self, uri: str) -> str:
        """A guide's Markdown, as arcane://guides/<name> serves it on this surface."""
        return self._guide_text[uri]

    def fixed(self) -> list[DataResource]:
        return [r for r in self.data if not r.templated]

    def templates(self) -> list[DataResource]:
        return [r for r in self.data if r.templated]

    def find(self, uri: str) -> tuple[DataResource, dict[str, str]] | None:
        for r in self.data:
            values = r.match(uri)
            if values is not None:
                return r, values
        return None

    def not_found(self, uri: str) -> ResourceError:
        known = ", ".join([r.uri for r in self.data] + [g.uri for g in self.guides])
        return ResourceError(self.rules.errors.not_found,
                             f"Error: no resource has the URI {uri!r}\nNext step: Read one of {known}.", {"uri": uri})

    async def read(self, uri: str) -> Contents:
        """Read one resource; raises ResourceError."""
        if uri in self._guide_text:
            return Contents(uri, MIME_MARKDOWN, self._guide_text[uri])
        catalog_value = self._catalog_value(uri)
        if catalog_value is not None:
            return Contents(uri, MIME_JSON, json.dumps(catalog_value, indent=2, ensure_ascii=True))
        hit = self.find(uri)
        if hit is None:
            raise self.not_found(uri)
        resource, values = hit
        call = Call(resource.action, resource.call_arguments(values), surface=RESOURCE_SURFACE, tool=READ_TOOL,
                    audit_message=AUDIT_MESSAGE, template=resource.uri)
        result = await self.dispatcher.dispatch(call)
        if result.is_error:
            raise self._error(uri, result)
        value = self.redaction.for_resource(result.structured if result.structured is not None else {}, resource.action)
        # ASCII JSON: a control, bidi or invisible character in Arcane's text (a hostile
        # container name) reaches the client as a \u escape, never as the character
        return Contents(uri, MIME_JSON, json.dumps(value, indent=2, ensure_ascii=True))

    # ---------------------------------------------------------------- the action catalog

    def _entry(self, action, full: bool) -> dict:
        """One action as the catalog resources show it, on this server's surface."""
        domain, name = action.id.split(".", 1)
        surface = self.dispatcher.settings.surface
        if surface == "meta":
            tool, shape = tool_name_meta(domain), {"action": name, "params": "<parameters>"}
        elif surface == "individual":
            tool, shape = tool_name_individual(action.id), "<parameters>"
        else:
            tool, shape = EXECUTE_TOOL, {"action": action.id, "params": "<parameters>"}

        entry: dict[str, Any] = {"id": action.id, "title": action.title, "tool": tool, "arguments": shape,
                                 "required": list(action.required), "readOnly": action.read_only,
                                 "destructive": action.destructive}
        if action.destructive:
            entry["confirm"] = "confirm: true, after the user agreed"
        why = self.catalog.withdrawn.get(action.id)
        if why:
            entry["withdrawn"] = why
        if full:
            entry.update({"description": action_description(action, self.catalog), "route": f"{action.method} {action.path}",
                          "inputSchema": action.input_schema})
        return entry

    def _catalog_value(self, uri: str) -> dict | None:
        """arcane://tools and arcane://tools/{id}; None for other URIs. Every action of
        the build, served or withdrawn (read-only mode, exclusions: the entry says why)."""
        rules = self.rules
        if rules.tools is not None and uri == rules.tools.uri:
            return {"surface": self.dispatcher.settings.surface,
                    "actions": [self._entry(a, full=False) for a in self.catalog.all_actions.values()]}
        values = rules.tool.match(uri) if rules.tool is not None else None
        if values is None:
            return None
        action = self.catalog.all_actions.get(values.get("id", ""))
        if action is None:
            closest = self.catalog.closest(values.get("id", ""), pool=list(self.catalog.all_actions))
            raise ResourceError(self.rules.errors.not_found, f"Error: unknown action {values.get('id')!r}"
                                + (f"\nNext step: Did you mean {', '.join(closest)}?" if closest else ""), {"uri": uri})
        return self._entry(action, full=True)

    def _error(self, uri: str, result) -> ResourceError:
        codes = self.rules.errors
        status = result.http_status
        data: dict[str, Any] = {"uri": uri}
        if status is not None:
            data["status"] = status
        if result.error_code in ("invalid_arguments", "invalid_path_value", "unknown_action") and status is None or status in codes.not_found_statuses:
            code = codes.not_found
        elif status is not None and status >= 400:
            code = status * codes.status_factor
        else:
            code = codes.internal
        return ResourceError(code, result.text.strip(), data)


def for_runtime(catalog, dispatcher) -> Resources:
    """The resources a server built over this catalog and dispatcher serves."""
    return Resources(catalog, dispatcher)


# --------------------------------------------------------------------------------------
# The MCP handlers (serve.build_server passes them to the SDK's low-level Server)
# --------------------------------------------------------------------------------------

# Docker state belongs to one credential and changes at any time: never cached, and the
# 2026-07-28 cache hints say so explicitly on every resource result
CACHE = {"ttl_ms": 0, "cache_scope": "private"}


def mcp_handlers(resources: Resources) -> dict[str, Any]:
    """The ``on_*`` handlers of resources/list, resources/templates/list and
    resources/read (passing them is what declares the ``resources`` capability)."""
    listed = [types.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=MIME_JSON)
              for r in resources.fixed()]
    rules = resources.rules
    if rules.tools is not None:
        listed.append(types.Resource(uri=rules.tools.uri, name=rules.tools.name, title=rules.tools.title,
                                     description=rules.tools.description, mime_type=MIME_JSON))
    listed += [types.Resource(uri=g.uri, name=g.name, title=g.title, description=g.description, mime_type=MIME_MARKDOWN)
               for g in resources.guides]
    templates = [types.ResourceTemplate(uri_template=r.uri, name=r.name, title=r.title, description=r.description,
                                        mime_type=MIME_JSON) for r in resources.templates()]
    if rules.tool is not None:
        templates.append(types.ResourceTemplate(uri_template=rules.tool.uri, name=rules.tool.name, title=rules.tool.title,
                                                description=rules.tool.description, mime_type=MIME_JSON))

    async def on_list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=listed, **CACHE)

    async def on_list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=templates, **CACHE)

    async def on_read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        try:
            got = await resources.read(str(params.uri))
        except ResourceError as err:
            raise MCPError(code=err.code, message=err.message, data=err.data) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=got.uri, mime_type=got.mime_type, text=got.text)],
                                        **CACHE)

    return {"on_list_resources": on_list_resources, "on_list_resource_templates": on_list_resource_templates,
            "on_read_resource": on_read_resource}
