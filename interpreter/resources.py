"""The MCP resources (spec/resources.es.txt, SPEC.md §7), from rules/resources.yaml.

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
import re
from dataclasses import dataclass
from typing import Any

from .errors import Problem

MIME_JSON = "application/json"
RESOURCE_SURFACE = "resource"
READ_TOOL = "resources/read"
AUDIT_MESSAGE = "resource read"
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# what a variable's value may be: no `/` (it would name another resource), not empty
_SEGMENT = "[^/?#]+"


# --------------------------------------------------------------------------------------
# Compiled rules
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataResource:
    """One Docker-state resource (rules/resources.yaml ``data``)."""

    uri: str  # the URI, or the URI template
    name: str
    title: str
    description: str
    action: str
    arguments: tuple[tuple[str, Any], ...]  # the action's arguments; "{var}" strings are variables
    link: bool
    variables: tuple[str, ...]
    matcher: re.Pattern  # matches a concrete URI, one group per variable

    @property
    def templated(self) -> bool:
        return bool(self.variables)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of a concrete URI this resource answers, or None."""
        from urllib.parse import unquote

        m = self.matcher.fullmatch(uri)
        return None if m is None else {k: unquote(v) for k, v in m.groupdict().items()}

    def call_arguments(self, values: dict[str, str]) -> dict[str, Any]:
        """The action's arguments for these variable values."""
        out = {}
        for name, value in self.arguments:
            var = _whole_variable(value)
            out[name] = values[var] if var else value
        return out

    def uri_for(self, call_args: dict[str, Any]) -> str | None:
        """This template filled from an action call's arguments (the inverse of
        call_arguments), or None when an argument it needs is missing."""
        from urllib.parse import quote

        values = {}
        for name, value in self.arguments:
            var = _whole_variable(value)
            if var is not None:
                if call_args.get(name) in (None, ""):
                    return None
                values[var] = quote(str(call_args[name]), safe="")
        if set(values) != set(self.variables):
            return None
        return _VARIABLE.sub(lambda m: values[m.group(1)], self.uri)


def _whole_variable(value: Any) -> str | None:
    m = _VARIABLE.fullmatch(value) if isinstance(value, str) else None
    return m.group(1) if m else None


def _matcher(uri: str) -> re.Pattern:
    parts, pos = [], 0
    for m in _VARIABLE.finditer(uri):
        parts += [re.escape(uri[pos:m.start()]), f"(?P<{m.group(1)}>{_SEGMENT})"]
        pos = m.end()
    parts.append(re.escape(uri[pos:]))
    return re.compile("".join(parts))


@dataclass(frozen=True)
class ErrorCodes:
    """rules/resources.yaml ``errors``: the JSON-RPC code of a failed read."""

    not_found: int
    not_found_statuses: frozenset[int]
    status_factor: int
    internal: int


@dataclass(frozen=True)
class ResourceRules:
    """rules/resources.yaml, compiled."""

    data: tuple[DataResource, ...]
    errors: ErrorCodes

    @classmethod
    def compile(cls, data: dict) -> ResourceRules:
        resources = []
        for e in data.get("data") or ():
            uri = e["uri"]
            resources.append(DataResource(
                uri=uri, name=e["name"], title=e["title"], description=e["description"], action=e["action"],
                arguments=tuple((e.get("arguments") or {}).items()), link=bool(e.get("link", False)),
                variables=tuple(_VARIABLE.findall(uri)), matcher=_matcher(uri)))
        err = data.get("errors") or {}
        nf = err.get("not_found") or {}
        codes = ErrorCodes(int(nf.get("code", -32602)), frozenset(nf.get("statuses") or (404,)),
                           int(err.get("status_factor", -100)), int((err.get("internal") or {}).get("code", -32603)))
        return cls(tuple(resources), codes)


_COMPILED: dict[int, tuple[dict, ResourceRules]] = {}


def compiled(data: dict | None) -> ResourceRules:
    """The compiled rules for a loaded rules dict, compiled once per dict."""
    data = data or {}
    hit = _COMPILED.get(id(data))
    if hit is None or hit[0] is not data:
        hit = (data, ResourceRules.compile(data))
        _COMPILED[id(data)] = hit
    return hit[1]


# --------------------------------------------------------------------------------------
# Checks (interp validate)
# --------------------------------------------------------------------------------------


def rule_problems(src, catalog) -> list[Problem]:
    """What the schema cannot say about rules/resources.yaml: every action is in the
    catalog, every `{variable}` of the arguments is one of its URI's, URIs are unique, a
    `link` is on a template."""
    from .load import problem_at

    loaded = getattr(src, "resources", None)
    if loaded is None:
        return []
    out: list[Problem] = []
    seen: set[str] = set()
    complete = not (src.actions.failed or src.extra.failed)
    for i, e in enumerate((loaded.data or {}).get("data") or ()):
        uri = e.get("uri", "")
        if uri in seen:
            out.append(problem_at(loaded, ["data", i, "uri"], f"{uri!r} is declared twice", "duplicate_uri"))
        seen.add(uri)
        aid = e.get("action", "")
        if complete and aid not in catalog.all_actions:
            near = catalog.closest(aid, pool=list(catalog.all_actions))
            out.append(problem_at(loaded, ["data", i, "action"], f"unknown action {aid!r}"
                                  + (f"; did you mean {', '.join(near)}?" if near else ""), "unknown_action"))
        variables = set(_VARIABLE.findall(uri))
        for name, value in (e.get("arguments") or {}).items():
            var = _whole_variable(value)
            if isinstance(value, str) and "{" in value and var is None:
                out.append(problem_at(loaded, ["data", i, "arguments", name], f"{value!r} must be exactly one {{variable}}", "bad_variable"))
            elif var is not None and var not in variables:
                out.append(problem_at(loaded, ["data", i, "arguments", name], f"{{{var}}} is not a variable of {uri!r}", "unknown_variable"))
            elif complete and aid in catalog.all_actions and name not in catalog.all_actions[aid].input_schema.get("properties", {}):
                out.append(problem_at(loaded, ["data", i, "arguments", name], f"{aid} takes no argument {name!r}", "unknown_argument"))
        used = {_whole_variable(v) for v in (e.get("arguments") or {}).values()} - {None}
        for var in sorted(variables - used):
            out.append(problem_at(loaded, ["data", i, "uri"], f"the variable {{{var}}} is passed to no argument", "unused_variable"))
        if e.get("link") and not variables:
            out.append(problem_at(loaded, ["data", i, "link"], "a resource_link is filled from a template: this URI has no variable", "bad_link"))
    return out


# --------------------------------------------------------------------------------------
# Serving
# --------------------------------------------------------------------------------------


class ResourceError(Exception):
    """A failed read, as the JSON-RPC error it becomes."""

    def __init__(self, code: int, message: str, data: dict):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass(frozen=True)
class Link:
    """A resource_link to put at the end of a tool result."""

    uri: str
    name: str
    title: str
    mime_type: str = MIME_JSON


@dataclass(frozen=True)
class Contents:
    """What a read returns: one text content."""

    uri: str
    mime_type: str
    text: str


class Resources:
    """The resources one server serves, over its catalog and dispatcher."""

    def __init__(self, catalog, dispatcher):
        from .redact import for_catalog

        self.catalog = catalog
        self.dispatcher = dispatcher
        self.rules = compiled(catalog.resource_rules)
        self.redaction = for_catalog(catalog)
        # an action the server does not serve takes its resource with it
        self.data = tuple(r for r in self.rules.data if r.action in catalog.actions)

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
        known = ", ".join(r.uri for r in self.data)
        return ResourceError(self.rules.errors.not_found,
                             f"Error: no resource has the URI {uri!r}\nNext step: Read one of {known}.", {"uri": uri})

    async def read(self, uri: str) -> Contents:
        """Read one resource; raises ResourceError."""
        from .dispatch import Call

        hit = self.find(uri)
        if hit is None:
            raise self.not_found(uri)
        resource, values = hit
        call = Call(resource.action, resource.call_arguments(values), surface=RESOURCE_SURFACE, tool=READ_TOOL,
                    audit_message=AUDIT_MESSAGE)
        result = await self.dispatcher.dispatch(call)
        if result.is_error:
            raise self._error(uri, result)
        value = self.redaction.for_resource(result.structured if result.structured is not None else {}, resource.action)
        return Contents(uri, MIME_JSON, json.dumps(value, indent=2, ensure_ascii=False))

    def _error(self, uri: str, result) -> ResourceError:
        codes = self.rules.errors
        status = result.http_status
        data: dict[str, Any] = {"uri": uri}
        if status is not None:
            data["status"] = status
        if result.error_code in ("invalid_arguments", "unknown_action") and status is None or status in codes.not_found_statuses:
            code = codes.not_found
        elif status is not None and status >= 400:
            code = status * codes.status_factor
        else:
            code = codes.internal
        return ResourceError(code, result.text.strip(), data)


def links_for(catalog, action_id: str, args: dict[str, Any]) -> list[Link]:
    """The resource_link a successful call of this action ends with: the resource whose
    `link` names it, its template filled from the call's arguments (after the default
    environment was filled in); none for other actions or missing arguments."""
    for r in compiled(catalog.resource_rules).data:
        if r.link and r.action == action_id:
            uri = r.uri_for(args)
            return [Link(uri, r.name, r.title)] if uri else []
    return []


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
    import mcp.types as types
    from mcp import MCPError

    listed = [types.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=MIME_JSON)
              for r in resources.fixed()]
    templates = [types.ResourceTemplate(uri_template=r.uri, name=r.name, title=r.title, description=r.description,
                                        mime_type=MIME_JSON) for r in resources.templates()]

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
