"""`interp explain ACTION`: every choice the engine made for one action, and where each
comes from.

A read of the built catalog, nothing more: each decision is a `Decision` (what, the value,
the file:line of the compiled model's `origins` that set it, and a short reason when a
rule rather than a written value decided). No decision is recomputed here with rules of
its own; where the catalog keeps only the outcome (classification), the reason names the
declared rule that produced it (catalog._classify's inputs: the method, actions.yaml
`classification`, an `operations` correction).
"""

from __future__ import annotations

from typing import Any

from ..build.access import entry_for
from ..build.catalog import Action, Catalog
from ..build.lazy_dataclass import dataclass
from ..build.model import Origin, origin_of
from ..build.view_rules import view_for
from ..call.transport import API_PREFIX
from ..errors import UnknownAction
from ..front.names import EXECUTE_TOOL, FIND_TOOL, tool_name_individual, tool_name_meta
from ..text.redact import REQUEST, RESPONSE, schema_secret_paths
from .audit import answers_list

SURFACES = ("dynamic", "meta", "individual")


@dataclass(frozen=True)
class Decision:
    """One choice: `topic` (a section), `what`, the value, its origin and why."""

    topic: str
    what: str
    value: Any
    origin: Origin | None = None
    why: str = ""

    def as_dict(self) -> dict:
        out = {"topic": self.topic, "what": self.what, "value": self.value,
               "origin": self.origin.as_dict() if self.origin is not None else None}
        if self.why:
            out["why"] = self.why
        return out

    def line(self) -> str:
        value = self.value if isinstance(self.value, str) else _text(self.value)
        where = f"  [{where_text(self.origin)}]" if self.origin is not None else ""
        why = f"  ({self.why})" if self.why else ""
        return f"  {self.what}: {value}{where}{why}"


def where_text(origin: Origin) -> str:
    """file:line:col, or file#pointer for a place in a JSON file (the OpenAPI document has
    no lines worth naming)."""
    return f"{origin.file}#{origin.pointer}" if origin.line == 0 else str(origin)


def _text(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_text(v)}" for k, v in value.items()) or "(none)"
    return str(value)


def explain(catalog: Catalog, action_id: str, surface: str | None = None) -> list[Decision]:
    """Every decision for one action of `catalog` (a filtered catalog: withdrawn actions
    are explained too, with why). `surface` marks the configured surface. Raises
    UnknownAction (with did-you-mean) for an ID the catalog does not know."""
    a = catalog.all_actions.get(action_id)
    if a is None:
        near = catalog.closest(action_id, pool=list(catalog.all_actions))
        raise UnknownAction(f"unknown action {action_id!r}" + (f"; did you mean {', '.join(near)}?" if near else "; run `interp find WORDS`"),
                            code="unknown_action")
    served = catalog.actions.get(action_id)
    out: list[Decision] = []
    out += _identity(catalog, a)
    out += _classification(catalog, a)
    out += _exposure(catalog, a, served, surface)
    out += _inputs(catalog, a)
    out += _rendering(catalog, served or a)
    out += _guidance(a, served)
    out += _redaction(catalog, a)
    out += _hints(catalog, a)
    out += _view(catalog, a)
    return out


def _identity(catalog: Catalog, a: Action) -> list[Decision]:
    o = a.origins
    rows = [Decision("route", "action", a.id, o.get("id"), "named in the inventory" if a.operation_id else "an extra route"),
            Decision("route", "operation", a.operation_id, _op_origin(catalog, a)),
            Decision("route", "method", a.method, o.get("method")),
            Decision("route", "path", API_PREFIX + a.path, o.get("path")),
            Decision("route", "environment scoped", a.env_scoped, origin_of(catalog.conventions.environment, "path_prefix"),
                     f"the path is under {catalog.conventions.environment.path_prefix}" if a.env_scoped else ""),
            Decision("route", "security", a.security, None, "the operation's security schemes" if a.operation_id else "extra-routes.yaml"),
            _permission(catalog, a),
            Decision("route", "handler", a.handler, o.get("handler")),
            Decision("route", "response kind", a.response_kind, o.get("response_kind"),
                     "corrected in actions.yaml" if any(c.startswith("response=") for c in a.corrections)
                     else ("the handler kind" if a.handler != "rest" else "the document's 2xx response")),
            Decision("route", "title", a.title, o.get("title")),
            ]
    return rows


def _permission(catalog: Catalog, a: Action) -> Decision:
    """What Arcane checks before it runs the action (catalog/permissions.yaml), which decides
    whether a credential sees it."""
    entry = entry_for(catalog, a)
    if entry is None:
        return Decision("route", "permission", None, None, "no entry in permissions.yaml: nothing is withdrawn for it")
    if entry.permission:
        value = entry.permission + (" and global admin" if entry.global_admin else "")
    elif entry.by_param:
        value = f"by {entry.by_param}: " + ", ".join(f"{k}={v}" for k, v in sorted(entry.by_value.items()))
    else:
        value = entry.check
    why = [f"Arcane's check at {entry.src}"] if entry.src else []
    if entry.permissions():
        why.append("a credential without it does not see the action")
    return Decision("route", "permission", value, origin_of(entry), "; ".join(why))


def _op_origin(catalog: Catalog, a: Action) -> Origin | None:
    entry = catalog.inventory.operations.get(a.operation_id or "")
    return origin_of(entry) if entry is not None else None


def _classification(catalog: Catalog, a: Action) -> list[Decision]:
    """read_only / destructive / idempotent, each with the rule or correction behind it."""
    inv = catalog.inventory
    entry = inv.operations.get(a.operation_id or "")
    verb = a.name.split("_", 1)[0]
    c = inv.classification
    reasons: dict[str, str] = {}
    for flag in ("read_only", "destructive", "idempotent"):
        corrected = entry is not None and getattr(entry, flag) is not None
        if corrected:
            reasons[flag] = "corrected in actions.yaml" + (f": {entry.why}" if entry.why else "")
        elif flag == "read_only":
            reasons[flag] = f"method {a.method}" + (" reads" if a.read_only else " changes state")
        elif flag == "destructive":
            if not a.destructive:
                reasons[flag] = "read-only" if a.read_only else f"{a.method}, and {verb!r} is not in destructive_verbs"
            elif verb in c.destructive_verbs and a.method != "DELETE":
                reasons[flag] = f"{verb!r} is in destructive_verbs"
            else:
                reasons[flag] = "method DELETE" if a.method == "DELETE" else "declared on the route"
        else:
            if a.idempotent and verb in c.idempotent_verbs and a.method not in ("GET", "HEAD", "PUT", "DELETE"):
                reasons[flag] = f"{verb!r} is in idempotent_verbs"
            else:
                reasons[flag] = f"method {a.method}"
    rows = [Decision("classification", flag.replace("_", "-"), getattr(a, flag), a.origins.get(flag), reasons[flag])
            for flag in ("read_only", "destructive", "idempotent")]
    if a.destructive:
        rows.append(Decision("classification", "needs confirm", True, a.origins.get("destructive"), "destructive actions run only with confirm: true"))
    return rows


def _exposure(catalog: Catalog, a: Action, served: Action | None, surface: str | None) -> list[Decision]:
    rows = [Decision("exposure", "served", served is not None, None,
                     catalog.withdrawn.get(a.id, "") if served is None else ""),
            Decision("exposure", "pending", a.pending, a.origins.get("pending") or a.origins.get("handler"),
                     f"the {a.handler} handler is not served yet; a call answers that it is not available" if a.pending else "")]
    if served is None:
        return rows
    names = {"dynamic": f"{EXECUTE_TOOL} with action={a.id!r} (found by {FIND_TOOL})",
             "meta": f"{tool_name_meta(a.domain)} with action={a.name!r}",
             "individual": tool_name_individual(a.id)}
    for s in SURFACES:
        rows.append(Decision("exposure", f"surface {s}", names[s], None, "the configured surface" if s == surface else ""))
    return rows


def _inputs(catalog: Catalog, a: Action) -> list[Decision]:
    props = a.input_schema.get("properties", {})
    required = set(a.required)
    rows = []
    for b in a.bindings:
        spec = props.get(b.arg, {})
        kind = spec.get("type") or ("object" if "properties" in spec else "any")
        value = f"{kind}{', required' if b.arg in required else ''} -> {b.location} {b.wire!r}"
        why = []
        if b.renamed_from:
            why.append(f"renamed from {b.renamed_from!r} (a clash)")
        if b.member:
            why.append(f"member {b.member!r} of the JSON text sent as {b.wire!r} (overlay json_parts)")
        if b.location == "client_filter":
            why.append("not sent: kept items are filtered here (overlay client_filters)")
        if b.fill is not None and b.location == "body_field":
            why.append(f"when left out, {b.fill} is sent (inventory optional)")
        if b.arg == catalog.env_arg:
            why.append(f"the environment argument; default {spec.get('default', '')!r}")
        rows.append(Decision("inputs", f"argument {b.arg}", value, a.origins.get("input_schema"), "; ".join(why)))
        rule = catalog.arguments.get(b.arg) if b.location == "path" else None
        if rule is not None:
            rows.append(Decision("inputs", f"name resolution {b.arg}",
                                 f"an ID matches {rule.id_pattern.pattern if rule.id_pattern else '?'}; a name is looked up with "
                                 f"{rule.list_action} by {', '.join(rule.name_fields)} -> {rule.id_field}",
                                 origin_of(rule), "resolves names" if rule.resolve else "IDs only (resolve: false)"))
    if not a.bindings:
        rows.append(Decision("inputs", "arguments", [], a.origins.get("input_schema")))
    return rows


def _rendering(catalog: Catalog, a: Action) -> list[Decision]:
    r = catalog.rendering
    rows = []
    if a.columns:
        for i, col in enumerate(a.columns):
            shown = col.field if col.expr is None else f"expr {col.expr.text}"
            rows.append(Decision("rendering", f"column {col.label}", shown, origin_of(a, "columns", i) or origin_of(col)))
    elif answers_list(catalog, a):
        rows.append(Decision("rendering", "columns", f"by name: identity, state and describe fields, up to {r.max_columns}",
                             origin_of(r, "identity_fields"), "no overlay columns"))
    rows.append(Decision("rendering", "empty hint", a.empty_hint.text if a.empty_hint else None, a.origins.get("empty_hint")))
    domain = catalog.domains.get(a.domain)
    if a.item_action:
        rows.append(Decision("rendering", "item action", a.item_action, a.origins.get("item_action")))
    elif domain is not None and domain.get_action and domain.get_action != a.id:
        rows.append(Decision("rendering", "item action", domain.get_action, domain.origins.get("get_action"),
                             "the domain's get action" + ("" if domain.origins.get("get_action") else f" ({a.domain}.get)")))
    rows.append(Decision("rendering", "limits", {"rows": r.max_rows, "cell": r.cell_max, "next steps": r.next_steps_max},
                         origin_of(r)))
    return rows


def _guidance(a: Action, served: Action | None) -> list[Decision]:
    shown = served or a
    rows = [Decision("guidance", "usage", a.usage or None, a.origins.get("usage")),
            Decision("guidance", "aliases", list(a.aliases), a.origins.get("aliases")),
            Decision("guidance", "find params", list(a.find_params), a.origins.get("find_params"),
                     "listed first among the optional parameters in each arcane_find_action result" if a.find_params else "")]
    closed = [c.removeprefix("enum ") for c in a.corrections if c.startswith("enum ")]
    if closed:
        rows.append(Decision("guidance", "closed sets", closed, a.origins.get("param_enums"),
                             "the overlay's param_enums: each is the parameter's enum in the served schema"))
    for key in ("related", "follow_ups"):
        value, kept = list(getattr(a, key)), list(getattr(shown, key))
        dropped = [x for x in value if x not in kept]
        rows.append(Decision("guidance", key.replace("_", "-"), kept, a.origins.get(key),
                             f"not served here, left out: {', '.join(dropped)}" if dropped else ""))
    return rows


def _redaction(catalog: Catalog, a: Action) -> list[Decision]:
    red = catalog.redaction
    rows = []
    # a preview shows a request that changes state; a resource is a read's answer
    for side, what in ((REQUEST, "preview masks"), (RESPONSE, "resource redacts")):
        for pos in red.positions:
            if pos.applies(a.id, side) and (pos.actions or side == RESPONSE) and (a.read_only if side == RESPONSE else a.mutating):
                rows.append(Decision("redaction", what, f"{', '.join(p.text for p in pos.patterns)} ({pos.hide})", origin_of(pos), pos.reason))
    general = [p for p in red.positions if not p.actions and p.applies(a.id, REQUEST)]
    if general and a.mutating:  # a safe-mode preview is of a request that changes state
        rows.append(Decision("redaction", "preview masks", f"{len(general)} rule(s) for every action",
                             origin_of(red, "positions")))
    props = a.input_schema.get("properties", {})
    secret = sorted(k for k in props if red.is_secret_name(k)) + list(schema_secret_paths(a.input_schema))
    rows.append(Decision("redaction", "secret arguments", sorted(set(secret)), origin_of(red, "names"),
                         "by name words, format: password or writeOnly; masked in previews and audit records"))
    return rows


def _view(catalog: Catalog, a: Action) -> list[Decision]:
    """The MCP Apps view of the action's results (rules/views/), for a client that declares the extension."""
    view = view_for(catalog.views, a.id)
    if view is None:
        return [Decision("view", "MCP Apps view", None, None, "no view rule serves it and there is no default view")]
    why = "the default view: no other view rule serves it" if view.default else f"a {view.widget} view"
    return [Decision("view", "MCP Apps view", view.uri, view.origin, why)]


def _hints(catalog: Catalog, a: Action) -> list[Decision]:
    rows = []
    for e in catalog.hints.messages:
        if e.actions and e.applies_to(a.id):
            rows.append(Decision("hints", "message hint", f"{e.regex.pattern if e.regex else ''} -> {e.hint.text}", origin_of(e),
                                 f"only for {', '.join(e.actions)}"))
    general = sum(1 for e in catalog.hints.messages if not e.actions)
    rows.append(Decision("hints", "message hints for every action", general, origin_of(catalog.hints, "messages")))
    rows.append(Decision("hints", "status hints", sorted(catalog.hints.http), origin_of(catalog.hints, "http")))
    return rows


@dataclass(frozen=True)
class Explained:
    """One action's decisions, as `interp explain` prints them."""

    action_id: str
    decisions: list[Decision]

    def as_dict(self) -> dict:
        """The --json form: the action and its decisions, in order."""
        return {"action": self.action_id, "decisions": [d.as_dict() for d in self.decisions]}

    def lines(self) -> list[str]:
        """The text form: one section per topic, one line per decision with its origin."""
        out, topic = [f"# {self.action_id}"], None
        for d in self.decisions:
            if d.topic != topic:
                topic = d.topic
                out.append(f"{topic}:")
            out.append(d.line())
        return out
