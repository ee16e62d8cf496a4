"""The action catalog: the single source of truth every surface, doc and audit projects.

Built once at startup from catalog/ (OpenAPI document, inventory, conventions) and rules/
(overlays and the rule files, layered), validated while built (every problem collected,
then RuleError), then filtered once (read-only, exclusions). Surfaces never re-check what
the filter decided.

The stages meet here, in one direction: load.load_sources reads every file and checks its
schema, compile.compile_sources turns each into frozen models, _build makes the actions,
validate.check cross-checks them (`assemble`). `build` serves the result; `problems` is
`interp validate`. The catalog is frozen and holds no raw rule data: every rule it carries
is a compiled model (model.py) whose `origins` say where each choice was written.
"""

from __future__ import annotations

import copy
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import CATALOG_DIR, RULES_DIR
from ..call import kinds
from ..errors import Problem, RuleError
from ..front.names import tool_name_individual
from ..text.hints import Hints
from ..text.redact import Rules as Redaction
from ..text.suggest import closest_ids
from . import artefact, prebuilt
from .lazy_dataclass import dataclass
from .model import (
    ActionOverlay,
    ArgumentRule,
    BlastRead,
    ChunkedUpload,
    ClientFilters,
    Column,
    Conventions,
    DomainOverlay,
    FindRules,
    Inventory,
    JsonPart,
    Origin,
    Rendering,
    ServerText,
    StateSteps,
    Template,
    frozen_map,
    lazy_field,
    origins_field,
)
from .resource_rules import Guide, ResourceRules
from .schema import BLOB_DEF, BLOB_SCHEMA, BODY_FIELD, CLIENT_FILTER, JSON_PART, MULTIPART, Binding, derive, params_schema_from_decl, with_enums
from .view_rules import ViewRule

if TYPE_CHECKING:
    # load, compile and validate (with ruamel.yaml and jsonschema) run only when the catalog
    # is built from the files: a start from the compiled artefact (prebuilt.py) never imports them
    from .compile import Compiled
    from .load import Sources

HTTP_METHODS = ("get", "head", "post", "put", "patch", "delete")
ACTION_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP field name (RFC 9110 token)


def _later(**default: Any) -> Any:
    """A field of an action read from the compiled artefact on first use (artefact.deferred):
    a call's parts, which neither the filter nor a tools/list reads."""
    return field(**default, metadata={"defer": True})


@artefact.deferred
@dataclass(frozen=True)
class Action:
    """One thing a model can do: an OpenAPI operation or a declared extra route.
    `origins` says where each choice comes from (the document, the inventory, an overlay).
    The fields made with `_later` are decoded from the compiled artefact when first read."""

    id: str
    domain: str
    name: str
    title: str
    description: str
    method: str
    path: str
    operation_id: str | None
    handler: str  # "rest" or an extra-route handler kind
    pending: bool  # the handler kind is not served yet
    response_kind: str  # json | empty | ndjson | text_download | binary_download | download | live_channel | ...
    read_only: bool
    destructive: bool
    idempotent: bool
    input_schema: dict  # JSON Schema served on the wire (tools/list), not a rule
    bindings: tuple[Binding, ...] = _later()
    body_media_type: str | None
    env_scoped: bool
    security: str  # either | public | bearer | apikey
    usage: str = ""
    aliases: tuple[str, ...] = _later(default=())
    related: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()
    tags: tuple[str, ...] = _later(default=())
    columns: tuple[Column, ...] = _later(default=())  # overlay: table columns of a list
    empty_hint: Template | None = _later(default=None)  # overlay: what an empty list says
    item_action: str = ""  # overlay: the action that returns one whole item
    list_member: str = ""  # overlay: the member of an object answer that holds its list (rendered as the table)
    order: str = _later(default="")  # overlay: the order a list comes in when no ordering argument is given
    states: StateSteps | None = _later(default=None)  # overlay: the next steps each state its answer reads allows
    blast_radius: tuple[BlastRead, ...] = _later(default=())  # overlay: the reads that show what a destructive call affects
    find_params: tuple[str, ...] = _later(default=())  # overlay: the optional parameters find's text lists first
    corrections: tuple[str, ...] = _later(default=())  # what the inventory corrected, for audit reports
    options: Mapping[str, Any] = _later(default_factory=frozen_map)  # an extra route's handler options
    client_filters: ClientFilters | None = _later(default=None)  # overlay: list filters applied here to the items fetched
    origins: Mapping[str, Origin] = origins_field()

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required", ()))

    @property
    def mutating(self) -> bool:
        return not self.read_only

    def tool_name(self) -> str:
        return tool_name_individual(self.id)


@dataclass(frozen=True)
class Domain:
    """A domain: its title and description, its actions, and its list and get actions
    (catalog/conventions.yaml `domains`, else `<domain>.list` / `.get` when it has them)."""

    name: str
    title: str
    description: str
    action_ids: tuple[str, ...]
    list_action: str | None = None
    get_action: str | None = None
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Catalog:
    """The built, validated, filtered catalog, and every compiled rule the engine runs.

    A catalog assembled for `interp validate` from broken rules may hold None for a rule
    model whose file could not be used; `build` never returns one."""

    actions: Mapping[str, Action]
    domains: Mapping[str, Domain]
    withdrawn: Mapping[str, str]  # action id -> why it is not served
    all_actions: Mapping[str, Action]  # before filtering (audit, reference)
    document: Mapping[str, Any] = lazy_field()  # Arcane's OpenAPI document, not a rule
    conventions: Conventions
    inventory: Inventory
    overlays: Mapping[str, DomainOverlay] = lazy_field()  # by domain (their actions' parts are the actions'; audit reads them)
    arguments: Mapping[str, ArgumentRule]  # overlays' `arguments`: what an ID looks like
    rendering: Rendering
    find: FindRules
    server: ServerText
    hints: Hints
    redaction: Redaction
    resources: ResourceRules  # rules/resources.yaml (interpreter/front/resources.py, prompts.py)
    guides: tuple[Guide, ...]  # rules/guides/*.yaml, by name
    document_name: str = ""
    views: tuple[ViewRule, ...] = ()  # rules/views/*.yaml, by name (interpreter/front/apps.py)
    # the header an API key travels in: the document's apiKey security scheme (`name`,
    # `in: header`); empty when the document declares none
    api_key_header: str = ""

    @property
    def env_arg(self) -> str:
        return self.conventions.environment.argument

    def get(self, action_id: str) -> Action | None:
        return self.actions.get(action_id)

    def closest(self, text: str, n: int = 3, pool: list[str] | None = None) -> list[str]:
        """The action IDs a caller most likely meant (suggest.closest_ids; none when the find
        rules could not be compiled)."""
        if self.find is None:
            return []
        return closest_ids(str(text), pool if pool is not None else list(self.actions), self.find.did_you_mean, n)


#: What a filter recomputes; every other field of Catalog is carried over as it is
#: (dataclasses.replace), so a field added later cannot be dropped by a filter.
#: tests/test_catalog_model.py checks these two tuples cover fields(Catalog) exactly.
FILTERED_FIELDS = ("actions", "domains", "withdrawn")
CARRIED_FIELDS = ("all_actions", "document", "conventions", "inventory", "overlays", "arguments", "rendering", "find", "server",
                  "hints", "redaction", "resources", "guides", "document_name", "api_key_header", "views")


@dataclass(frozen=True)
class BuildOptions:
    environment_default: str = "0"
    read_only: bool = False
    exclude: tuple[str, ...] = ()
    rules_dir: Path = RULES_DIR  # the complete rules: the packaged ones, or a whole copy of them
    catalog_dir: Path = CATALOG_DIR
    operator_rules: Path | None = None  # ARCANE_MCP_RULES / --rules: laid over rules_dir key by key
    # where a catalog built from the sources is kept for the next start (prebuilt.py); None: not kept
    cache_dir: Path | None = field(default_factory=lambda: _default_cache_dir())
    # False: always build from the sources (neither the compiled artefact nor the cache)
    compiled: bool = True


def _default_cache_dir() -> Path | None:
    return prebuilt.default_dir()


def _classify(method: str, name: str, inventory: Inventory) -> tuple[bool, bool, bool, str]:
    """(read_only, destructive, idempotent, the rule that decided destructive)."""
    verb = name.split("_", 1)[0]
    c = inventory.classification
    read_only = method in ("GET", "HEAD")
    by_verb = verb in c.destructive_verbs
    destructive = (not read_only) and (method == "DELETE" or by_verb)
    idempotent = method in IDEMPOTENT_METHODS or verb in c.idempotent_verbs
    why = "destructive_verbs" if destructive and by_verb and method != "DELETE" else ("method" if destructive else "")
    return read_only, destructive, idempotent, why


def _security(op: dict, document: dict) -> str:
    sec = op.get("security", document.get("security", []))
    if sec == [] or sec == [{}]:
        return "public"
    schemes = {k for s in sec for k in s}
    types = document.get("components", {}).get("securitySchemes", {})
    has_key = any(types.get(s, {}).get("type") == "apiKey" for s in schemes)
    has_bearer = any(types.get(s, {}).get("scheme") == "bearer" for s in schemes)
    if has_key and has_bearer:
        return "either"
    if has_bearer:
        return "bearer"
    if has_key:
        return "apikey"
    return "either"


def _api_key_header(doc: dict, document_name: str) -> tuple[str, list[Problem]]:
    """The header of the document's apiKey security scheme (components.securitySchemes:
    `type: apiKey`, its `name` and `in`); "" when it declares none. A key sent anywhere but
    a header, or schemes naming different headers, are problems."""
    from .load import pointer, problem_from  # ruamel, jsonschema: only when building from the sources

    components = doc.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    found: dict[str, str] = {}  # header -> scheme
    problems: list[Problem] = []
    for scheme, spec in schemes.items() if isinstance(schemes, dict) else ():
        if not isinstance(spec, dict) or spec.get("type") != "apiKey":
            continue
        where = Origin(document_name, 0, 0, pointer("components", "securitySchemes", scheme))
        name, place = spec.get("name"), spec.get("in")
        if place != "header" or not isinstance(name, str) or not HEADER_NAME.match(name):
            problems.append(problem_from(where, f"the apiKey scheme {scheme!r} sends the key as {place!r} {name!r}; "
                                                "only a header (`in: header`, a token `name`) is supported", "security_scheme_unsupported"))
            continue
        found.setdefault(name.lower(), name)
    if len(found) > 1:
        where = Origin(document_name, 0, 0, pointer("components", "securitySchemes"))
        problems.append(problem_from(where, f"apiKey schemes name different headers ({', '.join(sorted(found.values()))}); "
                                            "the key is sent in one", "security_scheme_unsupported"))
        return "", problems
    return next(iter(found.values()), ""), problems


def _default_response_kind(op: dict, method: str) -> str:
    for status, resp in op.get("responses", {}).items():
        if status.startswith("2"):
            content = resp.get("content") or {}
            if not content:
                return "empty"
            if any("json" in ct for ct in content):
                return "json"
            return "binary_download"
    return "empty"


def assemble(options: BuildOptions, *, sources: Sources | None = None) -> tuple[Sources | None, Catalog | None, list[Problem]]:
    """Load (unless `sources` is given), compile, build unfiltered and cross-check:
    (sources, catalog, every problem, sorted). Sources and catalog are None when the
    document is unreadable."""
    # the builder from the sources (ruamel, jsonschema): never at a start from the artefact
    from .compile import compile_sources
    from .load import load_sources
    from .validate import check

    found: list[Problem] = []
    if sources is None:
        sources, found = load_sources(options.rules_dir, options.catalog_dir, options.operator_rules)
        if sources is None:
            return None, None, sorted(found)
    compiled, compile_problems = compile_sources(sources)
    catalog, build_problems = _build(compiled, options)
    return sources, catalog, sorted(set(found + compile_problems + build_problems + check(compiled, catalog)))


def build(options: BuildOptions | None = None, sources: Sources | None = None) -> Catalog:
    """Build the catalog; raises RuleError with every problem found. Without `sources`, a
    catalog already built for the same inputs is taken instead (prebuilt.py: the compiled
    artefact, or the operator layer's cache), and a valid build is cached for the next start."""
    options = options or BuildOptions()
    if sources is None:
        ready = prebuilt.load(options, Catalog)
        if ready is not None:
            return _filter(ready, options)
    _, catalog, found = assemble(options, sources=sources)
    if found:
        raise RuleError(found)
    if sources is None:
        prebuilt.keep(options, catalog)
    return _filter(catalog, options)


def problems(rules_dir: Path = RULES_DIR, catalog_dir: Path = CATALOG_DIR, operator_rules: Path | None = None) -> list[Problem]:
    """`interp validate`: every problem of the rules (the operator's laid over `rules_dir`,
    when given) and the inventory, sorted; empty when valid."""
    return assemble(BuildOptions(rules_dir=rules_dir, catalog_dir=catalog_dir, operator_rules=operator_rules))[2]


def _doc_origin(c: Compiled, path: str, method: str, key: str = "") -> Origin:
    """The document's origin of an operation (JSON: a pointer, no line)."""
    from .load import pointer  # ruamel, jsonschema: only when building from the sources

    parts = ("paths", path, method) + ((key,) if key else ())
    return Origin(c.document_name, 0, 0, pointer(*parts))


#: The classification flags an inventory entry (an operation or an extra route) may declare.
FLAG_KEYS = ("read_only", "destructive", "idempotent")
#: Methods idempotent by HTTP itself; any other is idempotent only by its verb
#: (catalog/actions.yaml `classification.idempotent_verbs`).
IDEMPOTENT_METHODS = ("GET", "HEAD", "PUT", "DELETE")
#: The members of an operation that give an action's title and description (their origins).
DOC_TEXT = (("title", "summary"), ("description", "description"))


def _declared(value: Any, default: Any) -> Any:
    """What the inventory declares, else what the rules derived."""
    return value if value is not None else default


def _build(c: Compiled, options: BuildOptions) -> tuple[Catalog, list[Problem]]:
    """The unfiltered catalog from the compiled rules, and the problems found on the way: the
    OpenAPI operations' actions, then the extra routes', then what the overlays say."""
    problems: list[Problem] = []
    actions: dict[str, Action] = {}
    env = c.conventions.environment if c.conventions is not None else None
    if env is not None:
        _operation_actions(c, options, actions, problems)
        _extra_route_actions(c, options, actions, problems)
    _overlay_actions(c, actions)
    key_header, key_problems = _api_key_header(c.document, c.document_name)
    problems += key_problems
    ordered = frozen_map(sorted(actions.items()))
    catalog = Catalog(actions=ordered, domains=_domains(actions, c), withdrawn=frozen_map(), all_actions=ordered, document=c.document,
                      conventions=c.conventions, inventory=c.inventory, overlays=frozen_map((ov.domain, ov) for ov in c.overlays),
                      arguments=_overlay_arguments(c), rendering=c.rendering, find=c.find, server=c.server, hints=c.hints,
                      redaction=c.redaction, resources=c.resources, guides=c.guides, document_name=c.document_name,
                      api_key_header=key_header, views=c.views)
    return catalog, problems


def _operation_actions(c: Compiled, options: BuildOptions, actions: dict[str, Action], problems: list[Problem]) -> None:
    """An action for each named operation of the document; an operation without a name (and
    not allowlisted), a name used twice and a name whose operation is gone are problems."""
    from .load import problem_from  # ruamel, jsonschema: only when building from the sources

    inv = c.inventory
    # operations allowlisted on purpose need no name (by operationId or by "METHOD /path")
    allowlisted = {e.operation or e.route for e in inv.allowlist}
    seen_ops: set[str] = set()
    for path, item in c.document.get("paths", {}).items():
        for method in HTTP_METHODS:
            op = item.get(method)
            if not op:
                continue
            oid = op.get("operationId") or f"{method.upper()} {path}"
            seen_ops.add(oid)
            entry = inv.operations.get(oid)
            if entry is None:
                if c.incomplete or oid in allowlisted or f"{method.upper()} {path}" in allowlisted:
                    continue  # a parse error is reported once; an allowlisted operation is not an action
                where = inv.origins.get("operations") or (inv.origins.get("") if inv.origins else None)
                problems.append(problem_from(where, f"operation {oid!r} ({method.upper()} {path}) has no name; add `{oid}: domain.action`",
                                             "unnamed_operation"))
            elif not ACTION_ID.match(entry.action_id):
                continue  # the schema check reports the malformed name
            elif entry.action_id in actions:
                problems.append(problem_from(entry.origins[""], f"duplicate action ID {entry.action_id!r} "
                                             f"(also {actions[entry.action_id].operation_id!r})", "duplicate_id"))
            else:
                actions[entry.action_id] = _operation_action(c, options, path, item, method, op, oid, entry)
    for oid, entry in inv.operations.items():
        if oid not in seen_ops:
            problems.append(problem_from(entry.origins[""], f"operation {oid!r} is not in the OpenAPI document any more; "
                                         "remove or rename this entry", "stale_operation"))


def _operation_action(c: Compiled, options: BuildOptions, path: str, item: dict, method: str, op: dict, oid: str, entry) -> Action:
    """The action of one named operation: the document's route, text and schema, the
    classification by method and verb unless the inventory entry declares it."""

    domain, name = entry.action_id.split(".", 1)
    ro, de, idem, why = _classify(method.upper(), name, c.inventory)
    ro = _declared(entry.read_only, ro)
    de = _declared(entry.destructive, de and not ro)
    idem = _declared(entry.idempotent, idem)
    kind = entry.response or _default_response_kind(op, method.upper())
    corrections = [f"{key}={getattr(entry, key)}" for key in FLAG_KEYS if getattr(entry, key) is not None]
    corrections += [f"response={kind}"] if entry.response is not None else []
    derived = _operation_schema(c, options, path, item, op, kind)
    if entry.optional:
        derived = _optional_members(derived, entry.optional)
        corrections.append(f"optional={','.join(entry.optional)}")
    by_rule = {"destructive": "destructive_verbs" if why == "destructive_verbs" else None,
               "idempotent": "idempotent_verbs" if idem and method.upper() not in IDEMPOTENT_METHODS else None}
    return Action(
        id=entry.action_id, domain=domain, name=name,
        title=(op.get("summary") or name.replace("_", " ")).strip(),
        description=(op.get("description") or "").strip(),
        method=method.upper(), path=path, operation_id=oid,
        handler=kind if kind in kinds.handled_response_kinds() else "rest", pending=not kinds.response_kinds().get(kind, True),
        response_kind=kind, read_only=ro, destructive=de, idempotent=idem,
        input_schema=derived.schema, bindings=derived.bindings, body_media_type=derived.body_media_type,
        env_scoped=derived.env_param is not None, security=_security(op, c.document),
        tags=tuple(op.get("tags") or ()), corrections=tuple(corrections),
        origins=_operation_origins(c, path, method, op, entry, by_rule),
    )


def _optional_members(derived, optional: Mapping[str, str]):
    """The inventory's `optional` correction: body members the document requires and Arcane
    does not need are not required arguments; a call that leaves one out sends its declared
    neutral value (Arcane's request validation still wants the member). A member that is no
    body argument is left alone (validate.check_optional reports it)."""
    schema = copy.deepcopy(derived.schema)
    bindings = []
    for b in derived.bindings:
        if b.location == BODY_FIELD and b.wire in optional:
            b = replace(b, fill=optional[b.wire])
            schema["required"] = [r for r in schema.get("required", ()) if r != b.arg]
        bindings.append(b)
    if not schema.get("required"):
        schema.pop("required", None)
    return replace(derived, schema=schema, bindings=tuple(bindings))


def _operation_schema(c: Compiled, options: BuildOptions, path: str, item: dict, op: dict, kind: str):
    """The operation's flat input schema and bindings (schema.derive); a live channel's
    capture bounds are arguments too (catalog/conventions.yaml `live`)."""
    env = c.conventions.environment
    derived = derive(c.document, path, op, item, env_path_prefix=env.path_prefix, env_path_param=env.path_param, env_arg=env.argument,
                     env_default=options.environment_default, env_description=env.description,
                     withheld_headers=c.inventory.withheld_headers)
    if kind == "live_channel" and c.conventions.live is not None:
        derived = replace(derived, schema=c.conventions.live.extend_schema(derived.schema))
    return derived


def _operation_origins(c: Compiled, path: str, method: str, op: dict, entry, by_rule: dict) -> Mapping[str, Origin]:
    """Where each choice of an operation's action was written: the document, the inventory
    entry, or the classification rule that decided a flag."""
    at = _doc_origin(c, path, method)
    origins = {"id": entry.origins.get("id") or entry.origins.get(""), "method": at, "path": at, "input_schema": at}
    origins.update((key, _doc_origin(c, path, method, member)) for key, member in DOC_TEXT if op.get(member))
    origins["response_kind"] = entry.origins.get("response") or _doc_origin(c, path, method, "responses")
    for flag in FLAG_KEYS:
        rule = by_rule.get(flag)
        origins[flag] = entry.origins.get(flag) or (c.inventory.classification.origins.get(rule) if rule else None) or at
    return frozen_map((k, v) for k, v in origins.items() if v)


def _extra_route_actions(c: Compiled, options: BuildOptions, actions: dict[str, Action], problems: list[Problem]) -> None:
    """An action for each declared extra route; an ID already taken is a problem."""
    from .load import problem_from  # ruamel, jsonschema: only when building from the sources

    for route in c.inventory.extra_routes:
        if not ACTION_ID.match(route.action_id):
            continue
        if route.action_id in actions:
            problems.append(problem_from(route.origins["id"], f"duplicate action ID {route.action_id!r}", "duplicate_id"))
            continue
        actions[route.action_id] = _extra_route_action(c, options, route)


def _route_flags(route, name: str, inv: Inventory) -> tuple[bool, bool, bool]:
    """(read_only, destructive, idempotent) of an extra route: declared, else by handler,
    method and verb. A destructive route is never read-only, whatever its HTTP method (exec
    is a GET upgrade)."""
    ro, de, idem, _ = _classify(route.method, name, inv)
    if route.handler in kinds.reading_kinds() and route.read_only is None:
        ro, de = True, False
    de = _declared(route.destructive, de and not _declared(route.read_only, ro))
    ro = False if de else _declared(route.read_only, ro)
    return ro, de, _declared(route.idempotent, idem)


def _route_params(route) -> dict[str, dict]:
    """An extra route's declared parameters, and its capture's bounds (arguments the
    handler reads: interpreter/call/wsclient.py), as params_schema_from_decl takes them."""
    decl = {p.name: {"in": p.location, "wire": p.wire, "required": p.required, **p.schema} for p in route.params}
    for b in route.capture.bounds.values() if route.capture is not None else ():
        decl[b.argument] = {"in": "handler", "type": "integer", "minimum": 1, "maximum": b.max, "default": b.default,
                            **({"description": b.description} if b.description else {})}
    return decl


#: An extra route's origins: its own keys, and the keys whose value another key decides.
ROUTE_ORIGINS = ("id", "method", "path", "title", "description", "handler", "read_only", "destructive", "idempotent",
                 "security", "options")
ROUTE_ORIGIN_FROM = (("response_kind", "handler"), ("input_schema", "params"), ("pending", "status"))


def _extra_route_action(c: Compiled, options: BuildOptions, route) -> Action:
    """The action of one declared extra route."""
    env = c.conventions.environment
    domain, name = route.action_id.split(".", 1)
    ro, de, idem = _route_flags(route, name, c.inventory)
    schema, bindings = params_schema_from_decl(_route_params(route), env.argument, options.environment_default, env.description)
    origins = {k: route.origins.get(k) for k in ROUTE_ORIGINS}
    origins.update((k, route.origins.get(src)) for k, src in ROUTE_ORIGIN_FROM)
    return Action(
        id=route.action_id, domain=domain, name=name, title=route.title or name.replace("_", " "),
        description=route.description, method=route.method, path=route.path.text, operation_id=None,
        handler=route.handler, pending=route.pending,
        response_kind=route.handler, read_only=ro, destructive=de, idempotent=idem,
        input_schema=schema, bindings=bindings, body_media_type=None,
        env_scoped=route.path.text.startswith(env.path_prefix), security=route.security or "either", options=route.options,
        origins=frozen_map((k, v) for k, v in origins.items() if v),
    )


def _overlay_actions(c: Compiled, actions: dict[str, Action]) -> None:
    """Each overlay's action entries laid on the actions (an unknown action: validate.check reports it)."""
    for ov in c.overlays:
        for name, spec in ov.actions.items():
            aid = f"{ov.domain}.{name}"
            if aid in actions:
                actions[aid] = _overlaid(actions[aid], spec)


def _overlay_arguments(c: Compiled) -> Mapping[str, ArgumentRule]:
    """The overlays' `arguments`, the first declaration of each (validate reports a second)."""
    arguments: dict[str, ArgumentRule] = {}
    for ov in c.overlays:
        for arg, rule in ov.arguments.items():
            arguments.setdefault(arg, rule)
    return frozen_map(arguments)


def _overlaid(a: Action, spec: ActionOverlay) -> Action:
    """The action with what its overlay says; each value's origin is the overlay's."""
    changes: dict[str, Any] = {}
    for key, attr in (("title", "title"), ("description", "description"), ("usage", "usage"), ("aliases", "aliases"),
                      ("related", "related"), ("follow_ups", "follow_ups"), ("columns", "columns"), ("empty", "empty_hint"),
                      ("item_action", "item_action"), ("list_member", "list_member"), ("order", "order"), ("states", "states"),
                      ("blast_radius", "blast_radius"), ("find_params", "find_params")):
        value = getattr(spec, key)
        if value is not None:
            changes[attr] = value
    origins = dict(a.origins)
    for key, origin in spec.origins.items():
        if key:
            origins["empty_hint" + key[5:] if key.startswith("empty") else key] = origin
    if spec.chunked_upload is not None and spec.chunked_upload.upload_argument in a.input_schema.get("properties", {}):
        changes.update(_chunked(a, spec.chunked_upload))
    if spec.json_parts:
        changes.update(json_part_arguments(a, spec.json_parts))
    if spec.client_filters is not None:
        changes.update(client_filter_arguments(a, spec.client_filters))
    if spec.param_enums:
        schema, applied = with_enums(changes.get("input_schema", a.input_schema), spec.param_enums)
        if applied:
            changes["input_schema"] = schema
            changes["corrections"] = (*a.corrections, *(f"enum {path}" for path in applied))
    return replace(a, **changes, origins=frozen_map(origins))


def client_filter_arguments(a: Action, filters: ClientFilters) -> dict[str, Any]:
    """The action with each client filter as an argument (its values as an enum; bound
    nowhere in the request: the rest handler applies it to the items). A parameter whose
    name the action has already is left out (validate.check reports it)."""
    schema = copy.deepcopy(a.input_schema)
    props = schema.setdefault("properties", {})
    bindings = list(a.bindings)
    for f in filters.params:
        if f.name in props:
            continue
        props[f.name] = {"type": "string", "enum": list(f.values), **({"description": f.description} if f.description else {})}
        bindings.append(Binding(f.name, CLIENT_FILTER, f.name))
    return {"input_schema": schema, "bindings": tuple(bindings), "client_filters": filters}


def json_part_target(a: Action, part: str) -> Binding | None:
    """The binding of the argument `part` when it is one JSON text a `json_parts` entry can
    shape: a multipart part that is not a file, or a string member of the JSON body."""
    for b in a.bindings:
        if b.arg == part and not b.is_blob and not b.is_array and b.location in (MULTIPART, BODY_FIELD):
            return b
    return None


def json_part_arguments(a: Action, parts: tuple[JsonPart, ...]) -> dict[str, Any]:
    """The action with each shaped JSON-text argument replaced by one argument per member
    (overlay `json_parts`): the part's argument leaves the schema, the members join it (a
    member required when the part was and the entry says so), and their bindings say which
    part and member each fills. A part the action lacks or a member that clashes with an
    argument is left as it is (validate.check reports both)."""
    schema = copy.deepcopy(a.input_schema)
    props = schema.setdefault("properties", {})
    required = list(schema.get("required", ()))
    bindings = list(a.bindings)
    for jp in parts:
        target = json_part_target(a, jp.part)
        if target is None or any(m in props and m != jp.part for m in jp.properties):
            continue
        part_required = jp.part in required
        props.pop(jp.part, None)
        required = [r for r in required if r != jp.part]
        at = bindings.index(target)
        members = []
        for member, mschema in jp.properties.items():
            props[member] = copy.deepcopy(mschema)
            if part_required and member in jp.required:
                required.append(member)
            members.append(Binding(member, JSON_PART, target.wire, member=member, fill=jp.fill, via=target.location))
        bindings[at:at + 1] = members
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    return {"input_schema": schema, "bindings": tuple(bindings)}


def _chunked(a: Action, rule: ChunkedUpload) -> dict[str, Any]:
    """An action that consumes an upload session, served by the chunked_upload handler:
    it also takes the content (a Blob) or a local file, and the session's ID argument is
    no longer required (exactly one of the three is given, the handler checks)."""
    schema = copy.deepcopy(a.input_schema)
    props = schema["properties"]
    props[rule.content_argument] = {"$ref": f"#/$defs/{BLOB_DEF}", "description": "The content to upload in chunks (text or base64, and its filename)"}
    props[rule.file_argument] = {"type": "string", "description": "Path of a local file to upload in chunks (stdio only, under ARCANE_MCP_UPLOAD_DIRS)"}
    schema.setdefault("$defs", {})[BLOB_DEF] = copy.deepcopy(BLOB_SCHEMA)
    schema["properties"][rule.upload_argument] = {**schema["properties"][rule.upload_argument],
                                                  "description": f"ID of a complete upload session (or pass {rule.content_argument} or {rule.file_argument})"}
    required = [r for r in schema.get("required", ()) if r != rule.upload_argument]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    options = {"kind": rule.kind, "chunk_size": rule.chunk_size, "upload_argument": rule.upload_argument,
               "content_argument": rule.content_argument, "file_argument": rule.file_argument}
    return {"handler": "chunked_upload", "input_schema": schema, "options": frozen_map(options)}


def _domains(actions: dict[str, Action], c: Compiled) -> Mapping[str, Domain]:
    meta = {ov.domain: ov for ov in c.overlays}
    roles = c.conventions.domains if c.conventions is not None else {}
    out: dict[str, Domain] = {}
    for dom in sorted({a.domain for a in actions.values()}):
        ids = tuple(sorted(a.id for a in actions.values() if a.domain == dom))
        ov = meta.get(dom)
        declared = roles.get(dom)
        origins: dict[str, Origin] = {}
        found = {}
        for role in ("list", "get"):
            if declared is not None and role in declared.declared:
                found[role] = getattr(declared, role)
                if declared.origins.get(role):
                    origins[f"{role}_action"] = declared.origins[role]
            else:
                found[role] = f"{dom}.{role}" if f"{dom}.{role}" in actions else None
        if ov is not None:
            origins.update({k: v for k, v in ov.origins.items() if k in ("title", "description")})
        out[dom] = Domain(dom, ov.title if ov is not None and ov.title else dom.replace("_", " ").capitalize(),
                          (ov.description if ov is not None else None) or "", ids, found["list"], found["get"],
                          origins=frozen_map(origins))
    return frozen_map(out)


def matches_exclusion(action: Action, patterns: tuple[str, ...]) -> str | None:
    """The exclusion pattern (action ID, domain or glob) that withdraws this action, if any."""
    for pat in patterns:
        if pat == action.id or pat == action.domain or fnmatch.fnmatchcase(action.id, pat):
            return pat
    return None


def _filter(catalog: Catalog, options: BuildOptions) -> Catalog:
    """A new catalog with the served actions only (FILTERED_FIELDS recomputed, every other
    field carried over)."""
    withdrawn: dict[str, str] = {}
    for aid, a in catalog.all_actions.items():
        if options.read_only and not a.read_only:
            withdrawn[aid] = "read-only mode (ARCANE_MCP_READ_ONLY) withdraws every action that changes state"
            continue
        pat = matches_exclusion(a, options.exclude)
        if pat:
            withdrawn[aid] = f"excluded by ARCANE_MCP_EXCLUDE_TOOLS ({pat!r})"
    return _narrow(catalog, withdrawn)


def withdraw(catalog: Catalog, reasons: Mapping[str, str]) -> Catalog:
    """The catalog with `reasons` (action id -> why) withdrawn on top of what it withdraws
    already (read-only mode, exclusions). Apply it to the shared catalog each time: a
    per-credential catalog is never narrowed again, so a refresh can serve an action again."""
    withdrawn = dict(catalog.withdrawn)
    for aid, why in reasons.items():
        if aid in catalog.actions:
            withdrawn[aid] = why
    return _narrow(catalog, withdrawn)


def _narrow(catalog: Catalog, withdrawn: dict[str, str]) -> Catalog:
    """The catalog without the `withdrawn` actions, and without what names them; the
    catalog itself when that withdraws nothing more (a start's usual case: no model is
    made again, and no model's generated __init__ is compiled for it)."""
    kept = {aid: a for aid, a in catalog.actions.items() if aid not in withdrawn}
    same = len(kept) == len(catalog.actions) and dict(withdrawn) == dict(catalog.withdrawn)
    # related/follow-ups never name an action this server does not serve
    for aid, a in list(kept.items()):
        rel = tuple(r for r in a.related if r in kept)
        fol = tuple(f for f in a.follow_ups if f in kept)
        item = a.item_action if a.item_action in kept else ""
        states = a.states
        if states is not None and any(s not in kept for s in states.gated):
            states = replace(states, steps=frozen_map((k, tuple(s for s in v if s in kept)) for k, v in states.steps.items()))
        if rel != a.related or fol != a.follow_ups or item != a.item_action or states is not a.states:
            kept[aid] = replace(a, related=rel, follow_ups=fol, item_action=item, states=states)
            same = False
    domains = {}
    for name, d in catalog.domains.items():
        ids = tuple(i for i in d.action_ids if i in kept)
        if ids:
            domains[name] = d if ids == d.action_ids else replace(d, action_ids=ids)
        same = same and ids == d.action_ids
    if same:
        return catalog
    return replace(catalog, actions=frozen_map(kept), domains=frozen_map(domains), withdrawn=frozen_map(withdrawn))

