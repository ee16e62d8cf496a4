"""The action catalog: the single source of truth every surface, doc and audit projects.

Built once at startup from catalog/ (OpenAPI document + inventory) and rules/ (overlays),
validated while built (every problem collected, then RuleError), then filtered once
(read-only, exclusions). Surfaces never re-check what the filter decided.

The stages meet here, in one direction: load.load_sources reads every file and checks its
schema, _build makes the actions, validate.check_sources cross-checks both (`assemble`).
`build` serves the result; `problems` is `interp validate`.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import CATALOG_DIR, RULES_DIR
from .errors import Problem, RuleError
from .load import Loaded, Sources, load_sources, problem_at
from .names import tool_name_individual
from .schema import Binding, derive, params_schema_from_decl
from .suggest import closest_ids
from .validate import check_sources

HTTP_METHODS = ("get", "head", "post", "put", "patch", "delete")
ACTION_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Action:
    """One thing a model can do: an OpenAPI operation or a declared extra route."""

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
    input_schema: dict
    bindings: tuple[Binding, ...]
    body_media_type: str | None
    env_scoped: bool
    security: str  # either | public | bearer | apikey
    usage: str = ""
    aliases: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    columns: tuple = ()  # overlay: table columns of a list (field names or {label, expr})
    empty_hint: str = ""  # overlay: what an empty list says
    item_action: str = ""  # overlay: the action that returns one whole item
    corrections: tuple[str, ...] = ()  # what the inventory corrected, for audit reports

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
    name: str
    title: str
    description: str
    action_ids: tuple[str, ...]


@dataclass
class Catalog:
    """The built, validated, filtered catalog."""

    actions: dict[str, Action]
    domains: dict[str, Domain]
    withdrawn: dict[str, str]  # action id -> why it is not served
    document: dict
    allowlist: list[dict]
    all_actions: dict[str, Action]  # before filtering (audit, reference)
    env_arg: str = "environmentId"
    find_rules: dict = field(default_factory=dict)
    error_rules: dict = field(default_factory=dict)
    render_rules: dict = field(default_factory=dict)
    redaction_rules: dict = field(default_factory=dict)
    server_rules: dict = field(default_factory=dict)
    stream_rules: dict = field(default_factory=dict)  # actions.yaml `streams`: frames of ndjson streams
    error_shapes: list = field(default_factory=list)  # actions.yaml `error_shapes`: where error texts are
    argument_rules: dict = field(default_factory=dict)  # overlays' `arguments`: what an ID looks like

    def get(self, action_id: str) -> Action | None:
        return self.actions.get(action_id)

    def closest(self, text: str, n: int = 3, pool: list[str] | None = None) -> list[str]:
        """The action IDs a caller most likely meant (suggest.closest_ids)."""
        return closest_ids(str(text), pool if pool is not None else list(self.actions), n)


@dataclass(frozen=True)
class BuildOptions:
    environment_default: str = "0"
    read_only: bool = False
    exclude: tuple[str, ...] = ()
    rules_dir: Path = RULES_DIR
    catalog_dir: Path = CATALOG_DIR


def _classify(method: str, name: str, classification: dict) -> tuple[bool, bool, bool]:
    verb = name.split("_", 1)[0]
    read_only = method in ("GET", "HEAD")
    destructive = (not read_only) and (method == "DELETE" or verb in classification.get("destructive_verbs", []))
    idempotent = method in ("GET", "HEAD", "PUT", "DELETE") or verb in classification.get("idempotent_verbs", [])
    return read_only, destructive, idempotent


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
    """Load (unless `sources` is given), build unfiltered and cross-check: (sources, catalog,
    every problem, sorted). Sources and catalog are None when the document is unreadable.
    The simulator's own data is not the product's: a simulator checks it when it starts."""
    found: list[Problem] = []
    if sources is None:
        sources, found = load_sources(options.rules_dir, options.catalog_dir)
        if sources is None:
            return None, None, sorted(found)
    catalog, build_problems = _build(sources, options)
    return sources, catalog, sorted(set(found + build_problems + check_sources(sources, catalog)))


def build(options: BuildOptions | None = None, sources: Sources | None = None) -> Catalog:
    """Build the catalog; raises RuleError with every problem found."""
    options = options or BuildOptions()
    _, catalog, found = assemble(options, sources=sources)
    if found:
        raise RuleError(found)
    return _filter(catalog, options)


def problems(rules_dir: Path = RULES_DIR, catalog_dir: Path = CATALOG_DIR) -> list[Problem]:
    """`interp validate`: every problem of the rules and the inventory, sorted; empty when valid."""
    return assemble(BuildOptions(rules_dir=rules_dir, catalog_dir=catalog_dir))[2]


def _build(src: Sources, options: BuildOptions) -> tuple[Catalog, list[Problem]]:
    problems: list[Problem] = []
    doc = src.document
    inv = src.actions.data or {}
    env = inv.get("environment", {})
    env_prefix = env.get("path_prefix", "/environments/{id}/")
    env_param = env.get("path_param", "id")
    env_arg = env.get("argument", "environmentId")
    classification = inv.get("classification", {})
    withheld = frozenset(h.lower() for h in inv.get("withheld_headers", []))
    names: dict = inv.get("operations") or {}
    # operations allowlisted on purpose need no name (by operationId or by "METHOD /path")
    allowlisted = {e.get("operation") or e.get("route") for e in ((src.allowlist.data or {}).get("routes") or [])}

    actions: dict[str, Action] = {}
    seen_ops: set[str] = set()
    for path, item in doc.get("paths", {}).items():
        for method in HTTP_METHODS:
            op = item.get(method)
            if not op:
                continue
            oid = op.get("operationId") or f"{method.upper()} {path}"
            seen_ops.add(oid)
            entry = names.get(oid)
            if entry is None:
                if src.actions.failed or oid in allowlisted or f"{method.upper()} {path}" in allowlisted:
                    continue  # a parse error is reported once; an allowlisted operation is not an action
                problems.append(problem_at(src.actions, ["operations"], f"operation {oid!r} ({method.upper()} {path}) has no name; add `{oid}: domain.action`", "unnamed_operation"))
                continue
            spec = entry if isinstance(entry, dict) else {"id": entry}
            aid = spec.get("id", "")
            if not ACTION_ID.match(str(aid)):
                continue  # the schema check reports the malformed name
            if aid in actions:
                problems.append(problem_at(src.actions, ["operations", oid], f"duplicate action ID {aid!r} (also {actions[aid].operation_id!r})", "duplicate_id"))
                continue
            domain, name = aid.split(".", 1)
            ro, de, idem = _classify(method.upper(), name, classification)
            corrections = []
            for key in ("read_only", "destructive", "idempotent"):
                if key in spec:
                    corrections.append(f"{key}={spec[key]}")
            ro = spec.get("read_only", ro)
            de = spec.get("destructive", de if not ro else False)
            idem = spec.get("idempotent", idem)
            kind = spec.get("response") or _default_response_kind(op, method.upper())
            if "response" in spec:
                corrections.append(f"response={kind}")
            derived = derive(doc, path, op, item, env_path_prefix=env_prefix, env_path_param=env_param, env_arg=env_arg,
                             env_default=options.environment_default, withheld_headers=withheld)
            pending = kind == "live_channel"
            actions[aid] = Action(
                id=aid, domain=domain, name=name,
                title=(op.get("summary") or name.replace("_", " ")).strip(),
                description=(op.get("description") or "").strip(),
                method=method.upper(), path=path, operation_id=oid,
                handler="live_channel" if pending else "rest", pending=pending,
                response_kind=kind, read_only=ro, destructive=de, idempotent=idem,
                input_schema=derived.schema, bindings=derived.bindings, body_media_type=derived.body_media_type,
                env_scoped=derived.env_param is not None, security=_security(op, doc),
                tags=tuple(op.get("tags") or ()), corrections=tuple(corrections),
            )
    for oid in names:
        if oid not in seen_ops:
            problems.append(problem_at(src.actions, ["operations", oid], f"operation {oid!r} is not in the OpenAPI document any more; remove or rename this entry", "stale_operation"))

    for i, route in enumerate((src.extra.data or {}).get("routes") or []):
        aid = route.get("id", "")
        if not ACTION_ID.match(str(aid)):
            continue
        if aid in actions:
            problems.append(problem_at(src.extra, ["routes", i, "id"], f"duplicate action ID {aid!r}", "duplicate_id"))
            continue
        domain, name = aid.split(".", 1)
        method = str(route.get("method", "GET")).upper()
        ro, de, idem = _classify(method, name, classification)
        if route.get("handler") in ("websocket_capture", "live_channel") and "read_only" not in route:
            ro, de = True, False
        de = route.get("destructive", de if not route.get("read_only", ro) else False)
        # a destructive route is never read-only, whatever its HTTP method (exec is a GET upgrade)
        ro = False if de else route.get("read_only", ro)
        schema, bindings = params_schema_from_decl(route.get("params") or {}, env_arg, options.environment_default)
        path = route.get("path", "")
        actions[aid] = Action(
            id=aid, domain=domain, name=name, title=route.get("title", name.replace("_", " ")),
            description=route.get("description", ""), method=method, path=path, operation_id=None,
            handler=route.get("handler", ""), pending=route.get("status") == "pending",
            response_kind=route.get("handler", ""), read_only=ro, destructive=de, idempotent=route.get("idempotent", idem),
            input_schema=schema, bindings=bindings, body_media_type=None,
            env_scoped=path.startswith(env_prefix), security=route.get("security", "either"),
        )

    # overlays
    for ov in src.overlays:
        data = ov.data or {}
        domain = data.get("domain")
        for name, spec in (data.get("actions") or {}).items():
            aid = f"{domain}.{name}"
            if aid not in actions:
                continue  # check_sources reports it
            a = actions[aid]
            actions[aid] = replace(
                a,
                title=spec.get("title", a.title),
                description=spec.get("description", a.description),
                usage=spec.get("usage", a.usage),
                aliases=tuple(spec.get("aliases", a.aliases)),
                related=tuple(spec.get("related", a.related)),
                follow_ups=tuple(spec.get("follow_ups", a.follow_ups)),
                columns=tuple(c if isinstance(c, str) else tuple(sorted(c.items())) for c in spec.get("columns", ())),
                empty_hint=spec.get("empty", a.empty_hint),
                item_action=spec.get("item_action", a.item_action),
            )

    arguments: dict = {}
    for ov in src.overlays:
        for arg, spec in ((ov.data or {}).get("arguments") or {}).items():
            arguments.setdefault(arg, spec)  # check_overlay_targets reports a second declaration

    domains = _domains(actions, src.overlays)
    catalog = Catalog(actions=dict(sorted(actions.items())), domains=domains, withdrawn={}, document=doc,
                      allowlist=(src.allowlist.data or {}).get("routes") or [], all_actions=dict(sorted(actions.items())),
                      env_arg=env_arg, find_rules=(src.find.data if src.find else {}) or {},
                      error_rules=(src.errors.data if src.errors else {}) or {},
                      render_rules=(src.rendering.data if src.rendering else {}) or {},
                      redaction_rules=(src.redaction.data if src.redaction else {}) or {},
                      server_rules=(src.server.data if src.server else {}) or {},
                      stream_rules=inv.get("streams") or {}, error_shapes=inv.get("error_shapes") or [],
                      argument_rules=arguments)
    return catalog, problems


def _domains(actions: dict[str, Action], overlays: list[Loaded]) -> dict[str, Domain]:
    meta = {}
    for ov in overlays:
        data = ov.data or {}
        if data.get("domain"):
            meta[data["domain"]] = data
    out: dict[str, Domain] = {}
    for dom in sorted({a.domain for a in actions.values()}):
        ids = tuple(sorted(a.id for a in actions.values() if a.domain == dom))
        m = meta.get(dom, {})
        out[dom] = Domain(dom, m.get("title", dom.replace("_", " ").capitalize()), m.get("description", ""), ids)
    return out


def matches_exclusion(action: Action, patterns: tuple[str, ...]) -> str | None:
    """The exclusion pattern (action ID, domain or glob) that withdraws this action, if any."""
    for pat in patterns:
        if pat == action.id or pat == action.domain or fnmatch.fnmatchcase(action.id, pat):
            return pat
    return None


def _filter(catalog: Catalog, options: BuildOptions) -> Catalog:
    kept: dict[str, Action] = {}
    withdrawn: dict[str, str] = {}
    for aid, a in catalog.all_actions.items():
        if options.read_only and not a.read_only:
            withdrawn[aid] = "read-only mode (ARCANE_MCP_READ_ONLY) withdraws every action that changes state"
            continue
        pat = matches_exclusion(a, options.exclude)
        if pat:
            withdrawn[aid] = f"excluded by ARCANE_MCP_EXCLUDE_TOOLS ({pat!r})"
            continue
        kept[aid] = a
    # related/follow-ups never name an action this server does not serve
    for aid, a in list(kept.items()):
        rel = tuple(r for r in a.related if r in kept)
        fol = tuple(f for f in a.follow_ups if f in kept)
        item = a.item_action if a.item_action in kept else ""
        if rel != a.related or fol != a.follow_ups or item != a.item_action:
            kept[aid] = replace(a, related=rel, follow_ups=fol, item_action=item)
    domains = {}
    for name, d in catalog.domains.items():
        ids = tuple(i for i in d.action_ids if i in kept)
        if ids:
            domains[name] = replace(d, action_ids=ids)
    return Catalog(actions=kept, domains=domains, withdrawn=withdrawn, document=catalog.document,
                   allowlist=catalog.allowlist, all_actions=catalog.all_actions, env_arg=catalog.env_arg,
                   find_rules=catalog.find_rules, error_rules=catalog.error_rules, render_rules=catalog.render_rules,
                   redaction_rules=catalog.redaction_rules, server_rules=catalog.server_rules,
                   stream_rules=catalog.stream_rules, error_shapes=catalog.error_shapes, argument_rules=catalog.argument_rules)
