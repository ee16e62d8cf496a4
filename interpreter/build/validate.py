"""The cross-reference checks over the compiled sources and the built
(unfiltered) catalog: every overlay, hint, convention, tool name, allowlist entry and extra
route points at something real. Each check is one small function in CHECKS; adding one
extends the dict, not the loop.

The stages meet in catalog.py: load.load_sources (files and their schemas), then
compile.compile_sources (models, mini-languages compiled), then the catalog's own build,
then `check` here. Every problem is placed at the origin of the value it is about (its
file, line and layer), read from the compiled models: nothing here reads a raw file.
`interp validate` is catalog.problems; the server's catalog.build refuses on the same
problems. A file that breaks its schema is still compiled and cross-checked from what of it
passes (load.readable_part), so one run reports every problem. Nothing here imports the catalog module: a check gets the catalog it checks.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from pathlib import Path

from ..errors import Problem
from ..front.names import RESERVED_TOOLS, tool_name_individual, tool_name_meta
from .load import problem_from
from .model import ACTION_ID, Origin, origin_of
from .resource_rules import rule_problems
from .schema import list_member_problem

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _at(origin: Origin | None, pointer: str | None = None) -> Origin:
    """The origin, with the pointer of the value a problem is about (when it differs)."""
    origin = origin or Origin("?", 1, 1, "")
    if pointer is None or pointer == origin.pointer:
        return origin
    return Origin(origin.file, origin.line, origin.col, pointer, origin.layer)


def _unknown(catalog, aid: str) -> str:
    near = catalog.closest(aid, pool=list(catalog.all_actions))
    return f"unknown action {aid!r}" + (f"; did you mean {', '.join(near)}?" if near else "")


# ---------------------------------------------------------------- cross-reference checks


def check_overlay_targets(c, catalog) -> list[Problem]:
    out = []
    if c.incomplete:
        return out  # the catalog is incomplete; its parse error is the problem to report
    for ov in c.overlays:
        domain = ov.domain
        if domain not in catalog.domains:
            out.append(problem_from(origin_of(ov, "domain"), f"unknown domain {domain!r}; known: {', '.join(sorted(catalog.domains))}",
                                    "unknown_domain"))
            continue
        if Path(ov.file).stem != domain:
            out.append(problem_from(origin_of(ov, "domain"), f"file {Path(ov.file).name!r} holds domain {domain!r}; name it {domain}.yaml",
                                    "overlay_file_name"))
        for name, spec in ov.actions.items():
            aid = f"{domain}.{name}"
            if aid not in catalog.all_actions:
                out.append(problem_from(origin_of(spec), _unknown(catalog, aid), "unknown_action"))
                continue
            for ph in spec.empty.names if spec.empty is not None else ():
                if ph not in catalog.all_actions:
                    out.append(problem_from(origin_of(spec, "empty"), f"unknown action {{{ph}}} in the hint", "unknown_action"))
            if spec.order and not catalog.all_actions[aid].read_only:
                out.append(problem_from(origin_of(spec, "order"), f"{aid!r} changes something: only a list says its order", "order_not_a_list"))
            if spec.item_action and spec.item_action not in catalog.all_actions:
                out.append(problem_from(origin_of(spec, "item_action"), f"unknown action {spec.item_action!r}", "unknown_action"))
            if spec.list_member:
                why = list_member_problem(catalog, catalog.all_actions[aid])
                if why:
                    out.append(problem_from(origin_of(spec, "list_member"), why, "unknown_member"))
            for key in ("related", "follow_ups"):
                for i, ref in enumerate(getattr(spec, key) or ()):
                    if ref not in catalog.all_actions:
                        out.append(problem_from(origin_of(spec, key, i), _unknown(catalog, ref), "unknown_action"))
                    elif ref == aid:
                        out.append(problem_from(origin_of(spec, key, i), f"{aid!r} names itself", "self_reference"))
                    else:
                        out += _destructive_step(catalog, aid, ref, origin_of(spec, key, i))
            out += _state_problems(catalog, aid, spec)
            out += _chunked_problems(c, catalog, aid, spec)
            out += _param_problems(catalog, aid, spec)
            out += _json_parts_problems(catalog, aid, spec)
            for f in spec.client_filters.params if spec.client_filters is not None else ():
                if not any(b.arg == f.name and b.location == "client_filter" for b in catalog.all_actions[aid].bindings):
                    out.append(problem_from(origin_of(f) or origin_of(spec, "client_filters"),
                                            f"client filter {f.name!r} would take the name of an argument of {aid}", "duplicate_argument"))
    return out


def _param_problems(catalog, aid: str, spec) -> list[Problem]:
    """`find_params` name parameters of the action; `param_enums` name string parameters
    (or string members of an object parameter, one level)."""
    from .schema import enum_target

    schema = catalog.all_actions[aid].input_schema
    props = schema.get("properties", {})
    out = []
    for i, name in enumerate(spec.find_params or ()):
        if name not in props:
            out.append(problem_from(origin_of(spec, "find_params", i), f"{name!r} is no parameter of {aid}; it has {', '.join(props) or 'none'}",
                                    "unknown_param"))
    for path, rule in (spec.param_enums or {}).items():
        target = enum_target(schema, path)
        types = (target or {}).get("type")
        if target is None or "string" not in (types if isinstance(types, list) else [types]):
            out.append(problem_from(origin_of(rule) or origin_of(spec, "param_enums"),
                                    f"{path!r} is no string parameter of {aid} (a member of an object parameter is written object.member)", "unknown_param"))
    return out


def _destructive_step(catalog, aid: str, ref: str, where: Origin | None) -> list[Problem]:
    """A destructive action may not offer a destructive next step (after a delete, a
    prune is no suggestion to make)."""
    if catalog.all_actions[aid].destructive and catalog.all_actions[ref].destructive:
        return [problem_from(where, f"{aid} is destructive and names the destructive {ref} as a next step; "
                             "offer a read instead", "destructive_next_step")]
    return []


def _state_problems(catalog, aid: str, spec) -> list[Problem]:
    """An overlay's `states`: every step an existing action other than this one, and no
    destructive step after a destructive action (`read` is compiled with the file)."""
    rule = spec.states
    if rule is None:
        return []
    out = []
    where = origin_of(rule, "steps") or origin_of(spec, "states")
    for state, refs in rule.steps.items():
        for ref in refs:
            if ref not in catalog.all_actions:
                out.append(problem_from(where, f"state {state!r}: {_unknown(catalog, ref)}", "unknown_action"))
            elif ref == aid:
                out.append(problem_from(where, f"state {state!r}: {aid!r} names itself", "self_reference"))
            else:
                out += _destructive_step(catalog, aid, ref, where)
    return out


def _chunked_problems(c, catalog, aid: str, spec) -> list[Problem]:
    """A `chunked_upload` needs the conventions' `uploads` and an upload argument of the action."""
    rule = spec.chunked_upload
    if rule is None:
        return []
    where = origin_of(spec, "chunked_upload")
    if c.conventions is None or c.conventions.uploads is None:
        return [problem_from(where, "chunked_upload needs the `uploads` section of catalog/conventions.yaml", "unknown_convention")]
    props = catalog.all_actions[aid].input_schema.get("properties", {})
    if rule.upload_argument not in props:
        return [problem_from(where, f"upload_argument {rule.upload_argument!r} is no argument of {aid}; it has {', '.join(props)}",
                             "unknown_param")]
    return []


def _json_parts_problems(catalog, aid: str, spec) -> list[Problem]:
    """Each `json_parts` entry shaped its argument (catalog.json_part_arguments): the action
    had it as a text part or body member, no member took another argument's name, and each
    required member is one of its properties."""
    out = []
    action = catalog.all_actions[aid]
    for jp in spec.json_parts or ():
        where = origin_of(jp) or origin_of(spec, "json_parts")
        missing = [m for m in jp.required if m not in jp.properties]
        if missing:
            out.append(problem_from(where, f"json_parts {jp.part!r}: required member(s) {', '.join(missing)} not in its properties", "unknown_param"))
        if any(b.location == "json_part" and b.wire == jp.part for b in action.bindings):
            continue
        props = action.input_schema.get("properties", {})
        if jp.part not in props:
            out.append(problem_from(where, f"json_parts {jp.part!r} is no argument of {aid}; it has {', '.join(props)}", "unknown_param"))
        else:
            taken = [m for m in jp.properties if m in props and m != jp.part]
            why = (f"member(s) {', '.join(taken)} would take the name of an argument of {aid}" if taken
                   else f"{jp.part!r} is not a text multipart part or a body member of {aid}")
            out.append(problem_from(where, f"json_parts {jp.part!r}: {why}", "duplicate_argument" if taken else "unknown_param"))
    return out


def check_blast_radius(c, catalog) -> list[Problem]:
    """Each `blast_radius` read names a read-only action, passes it only arguments it has
    (with placeholders naming the overlaid action's arguments) and every one it requires
    besides the environment (its JMESPath was compiled when the rules loaded)."""
    out: list[Problem] = []
    if c.incomplete:
        return out
    for ov in c.overlays:
        for name, spec in ov.actions.items():
            aid = f"{ov.domain}.{name}"
            action = catalog.all_actions.get(aid)
            if action is None or not spec.blast_radius:
                continue  # an unknown action is check_overlay_targets' problem
            own = action.input_schema.get("properties", {})
            for read in spec.blast_radius:
                look = catalog.all_actions.get(read.action)
                if look is None:
                    out.append(problem_from(origin_of(read, "action"), _unknown(catalog, read.action), "unknown_action"))
                    continue
                if not look.read_only:
                    out.append(problem_from(origin_of(read, "action"), f"{read.action!r} changes state; a blast_radius read must only read",
                                            "not_read_only"))
                props = look.input_schema.get("properties", {})
                for key, value in read.arguments:
                    if key not in props:
                        out.append(problem_from(origin_of(read, "arguments"), f"{key!r} is no argument of {read.action}; it has {', '.join(props) or 'none'}",
                                                "unknown_param"))
                    for ph in getattr(value, "names", ()):
                        if ph not in own:
                            out.append(problem_from(origin_of(read, "arguments"), f"{{{ph}}} is no argument of {aid}; it has {', '.join(own) or 'none'}",
                                                    "unknown_param"))
                given = {k for k, _ in read.arguments} | {catalog.env_arg}
                missing = [r for r in look.required if r not in given]
                if missing:
                    out.append(problem_from(origin_of(read, "arguments") or origin_of(read, "action"),
                                            f"{read.action} requires {', '.join(missing)}; pass it in arguments", "missing_param"))
    return out


def _where(c, action) -> Origin:
    """The inventory entry an action comes from (its operation's name, or its route's id)."""
    if action.operation_id:
        return origin_of(c.inventory.operations[action.operation_id])
    route = next(r for r in c.inventory.extra_routes if r.action_id == action.id)
    return origin_of(route, "id")


def check_tool_names(c, catalog) -> list[Problem]:
    out = []
    seen: dict[str, str] = {}
    for aid, a in catalog.all_actions.items():
        tname = tool_name_individual(aid)
        if not TOOL_NAME.match(tname):
            out.append(problem_from(_where(c, a), f"tool name {tname!r} is longer than 64 characters or has characters outside A-Z a-z 0-9 _ -",
                                    "bad_tool_name"))
        if tname in seen:
            out.append(problem_from(_where(c, a), f"{aid!r} and {seen[tname]!r} both render to the tool name {tname!r}", "tool_name_clash"))
        elif tname in RESERVED_TOOLS or tool_name_meta(a.domain) in RESERVED_TOOLS:
            out.append(problem_from(_where(c, a), f"{aid!r} renders to the reserved tool name {tname!r}", "tool_name_clash"))
        seen[tname] = aid
    return out


def check_allowlist(c, catalog) -> list[Problem]:
    out = []
    doc_ops = {}
    for path, item in catalog.document.get("paths", {}).items():
        for method, op in item.items():
            if isinstance(op, dict) and "operationId" in op:
                doc_ops[op["operationId"]] = f"{method.upper()} {path}"
    served_routes = {f"{a.method} {a.path}" for a in catalog.all_actions.values()}
    named_ops = {a.operation_id for a in catalog.all_actions.values() if a.operation_id}
    for entry in c.inventory.allowlist:
        if entry.operation is not None:
            if entry.operation not in doc_ops:
                out.append(problem_from(origin_of(entry, "operation"), f"stale entry: operation {entry.operation!r} is not in the OpenAPI document",
                                        "stale_allowlist"))
            elif entry.operation in named_ops:
                out.append(problem_from(origin_of(entry, "operation"), f"stale entry: operation {entry.operation!r} is served as an action",
                                        "stale_allowlist"))
        elif entry.route in served_routes:
            out.append(problem_from(origin_of(entry, "route"), f"stale entry: {entry.route!r} is served as an action", "stale_allowlist"))
    return out


def check_extra_routes(c, catalog) -> list[Problem]:
    out = []
    doc_routes = set()
    for path, item in catalog.document.get("paths", {}).items():
        for method in item:
            doc_routes.add(f"{method.upper()} {path}")
    for route in c.inventory.extra_routes:
        key = f"{route.method} {route.path.text}"
        if key in doc_routes:
            out.append(problem_from(origin_of(route, "path"), f"{key} is in the OpenAPI document; name its operation in actions.yaml instead",
                                    "extra_route_in_document"))
    return out


def _entry_origin(hints, parts: tuple) -> Origin | None:
    """The origin of a pointer inside errors.yaml, from the entry it belongs to."""
    for e in hints.entries():
        if parts[:len(e.where)] == e.where:
            rest = parts[len(e.where):]
            key = "/".join(map(str, rest))
            origin = e.origins.get(key) or (e.origins.get(str(rest[0])) if rest else None) or e.origins.get("")
            return _at(origin, "/" + "/".join(str(p) for p in parts))
    return None


def check_error_hints(c, catalog) -> list[Problem]:
    """Every hint names actions that exist and suit its purpose, for every action it
    applies to (its regexes and templates were compiled when the rules loaded)."""
    if c.hints is None or c.incomplete:
        return []  # an unusable errors.yaml or an incomplete catalog: their problems are reported
    return [problem_from(_entry_origin(c.hints, tuple(where)), message, code) for where, message, code in c.hints.problems(catalog)]


def check_redaction(c, catalog) -> list[Problem]:
    """Every `actions` glob of a position or kept entry names at least one action (its
    regexes and pointer patterns were compiled when the rules loaded)."""
    if c.redaction is None or c.incomplete:
        return []
    out = []
    for entries in (c.redaction.positions, c.redaction.kept):
        for entry in entries:
            for j, glob in enumerate(entry.actions):
                if not any(fnmatch.fnmatchcase(aid, glob) for aid in catalog.all_actions):
                    near = catalog.closest(glob, pool=list(catalog.all_actions))
                    out.append(problem_from(origin_of(entry, "actions", j), f"{glob!r} names no action"
                                            + (f"; did you mean {', '.join(near)}?" if near else ""), "unknown_action"))
    return out


def check_conventions(c, catalog) -> list[Problem]:
    """Every action ID the conventions name exists (the session's, the activity's, each
    domain's list and get, which must be of that domain); every domain `outcome.identity`
    names exists; every domain without a
    `<domain>.list` or `.get` declares it (or none)."""
    conv = c.conventions
    if conv is None or c.incomplete:
        return []
    out = []

    def exists(model, field: str, aid: str | None) -> None:
        if aid is not None and aid not in catalog.all_actions:
            out.append(problem_from(origin_of(model, field), _unknown(catalog, aid), "unknown_action"))

    for field in ("login", "refresh", "logout"):
        exists(conv.session, field, getattr(conv.session, field))
    for field in ("create", "chunk", "abort") if conv.uploads is not None else ():
        exists(conv.uploads, field, getattr(conv.uploads, field))
    exists(conv.activity, "action", conv.activity.action)
    for probe in conv.diagnostics.probes().values():
        exists(probe, "action", probe.action)
    if conv.diagnostics.transport is not None:
        exists(conv.diagnostics.transport, "action", conv.diagnostics.transport.action)
    for dom, roles in conv.domains.items():
        if dom not in catalog.domains:
            out.append(problem_from(origin_of(roles), f"unknown domain {dom!r}; known: {', '.join(sorted(catalog.domains))}", "unknown_domain"))
            continue
        for role in sorted(roles.declared):
            aid = getattr(roles, role)
            exists(roles, role, aid)
            if aid is not None and aid in catalog.all_actions and not aid.startswith(dom + "."):
                out.append(problem_from(origin_of(roles, role), f"{aid!r} is not an action of {dom!r}; a domain's {role} action is its own",
                                        "unknown_action"))
    for dom in conv.outcome.identity_domains if conv.outcome is not None else ():
        if dom not in catalog.domains:
            out.append(problem_from(_at(origin_of(conv.outcome, "identity") or origin_of(conv), f"/outcome/identity/domains/{dom}"),
                                    f"unknown domain {dom!r}; known: {', '.join(sorted(catalog.domains))}", "unknown_domain"))
    where = origin_of(conv, "domains") or origin_of(conv)
    for dom, _ in catalog.domains.items():
        declared = conv.domains.get(dom)
        for role in ("list", "get"):
            if f"{dom}.{role}" not in catalog.all_actions and (declared is None or role not in declared.declared):
                out.append(problem_from(_at(where, f"/domains/{dom}"), f"domain {dom!r} has no {dom}.{role}: declare its {role} action "
                                        f"(`{dom}: {{{role}: {dom}.…}}`) or `{role}: none`", "undeclared_role"))
    return out


def check_arguments(c, catalog) -> list[Problem]:
    """An argument is declared once, its list action exists, and some action takes it as
    a path argument (its ID pattern was compiled when the rules loaded)."""
    out = []
    declared: dict[str, str] = {}
    for ov in c.overlays:
        for arg, rule in ov.arguments.items():
            if arg in declared:
                out.append(problem_from(origin_of(rule), f"argument {arg!r} is declared in {declared[arg]} already", "duplicate_argument"))
                continue
            declared[arg] = origin_of(rule).file if origin_of(rule) else ov.file
            if c.incomplete:
                continue
            if rule.list_action not in catalog.all_actions:
                out.append(problem_from(origin_of(rule, "list"), _unknown(catalog, rule.list_action), "unknown_action"))
            if not any(b.arg == arg and b.location == "path" for a in catalog.all_actions.values() for b in a.bindings):
                out.append(problem_from(origin_of(rule), f"no action takes {arg!r} as a path argument", "unused_argument"))
    return out


def check_resources(c, catalog) -> list[Problem]:
    """Every resource names a catalog action and uses only its URI's variables; guides
    name only actions the catalog has (interpreter/front/resources.py)."""
    return rule_problems(c.resource_file, c.guide_files, catalog, complete=not c.incomplete)


def check_views(c, catalog) -> list[Problem]:
    """The view rules name known actions, valid expressions and their tables' row keys
    (interpreter/build/view_rules.py)."""
    from .view_rules import view_problems

    return view_problems(c.view_files, catalog, complete=not c.incomplete)


def check_permissions(c, catalog) -> list[Problem]:
    """catalog/permissions.yaml names every operation of the document and every extra
    route, nothing else, and its identity reads name catalog actions."""
    perms = c.inventory.permissions
    if perms is None or c.incomplete:
        return []
    out = []
    doc_ops = {op["operationId"] for item in catalog.document.get("paths", {}).values() for op in item.values()
               if isinstance(op, dict) and "operationId" in op}
    doc_routes = {f"{m.upper()} {p}" for p, item in catalog.document.get("paths", {}).items() for m in item}
    routes = {r.action_id for r in c.inventory.extra_routes}
    # a route that is no action of its own (a duplicate ID, a route of the document) has its own problem
    served = {r.action_id for r in c.inventory.extra_routes if f"{r.method} {r.path.text}" not in doc_routes
              and getattr(catalog.all_actions.get(r.action_id), "operation_id", "") is None}
    where = origin_of(perms, "")
    for oid in sorted(doc_ops - set(perms.operations)):
        out.append(problem_from(origin_of(perms, "operations") or where,
                                f"operation {oid!r} has no entry under operations; add the permission Arcane checks for it", "missing_permission"))
    for oid in sorted(set(perms.operations) - doc_ops):
        out.append(problem_from(origin_of(perms.operations[oid], ""), f"stale entry: operation {oid!r} is not in the OpenAPI document",
                                "stale_permission"))
    for aid in sorted(served - set(perms.routes)):
        out.append(problem_from(origin_of(perms, "routes") or where, f"extra route {aid!r} has no entry under routes; add the permission Arcane checks for it",
                                "missing_permission"))
    for aid in sorted(set(perms.routes) - routes):
        out.append(problem_from(origin_of(perms.routes[aid], ""), f"stale entry: {aid!r} is no extra route", "stale_permission"))
    if perms.identity is not None:
        for key in ("me", "my_keys"):
            aid = getattr(perms.identity, key)
            if aid not in catalog.all_actions:
                out.append(problem_from(origin_of(perms, "identity") or where, f"identity.{key}: {_unknown(catalog, aid)}", "unknown_action"))
    return out


def check_rendering(c, catalog) -> list[Problem]:
    """A field name in two of rendering.yaml's unit lists would be read two ways."""
    r = c.rendering
    if r is None:
        return []
    out, seen = [], {}
    for key in ("byte_fields", "duration_nanosecond_fields", "duration_millisecond_fields", "duration_second_fields",
                "duration_minute_fields", "epoch_second_fields", "epoch_millisecond_fields"):
        for name in sorted(getattr(r, key)):
            first = seen.setdefault(name, key)
            if first != key:
                out.append(problem_from(origin_of(r, key), f"{name!r} is in {first} and {key}: a field has one unit", "unit_conflict"))
    return out


def check_optional(c, catalog) -> list[Problem]:
    """Each member of an inventory entry's `optional` is a body argument of its operation."""
    out: list[Problem] = []
    if c.incomplete or c.inventory is None:
        return out
    by_operation = {a.operation_id: a for a in catalog.all_actions.values() if a.operation_id}
    for oid, entry in c.inventory.operations.items():
        action = by_operation.get(oid)
        if not entry.optional or action is None:
            continue
        filled = {b.wire for b in action.bindings if b.location == "body_field" and b.fill is not None}
        missing = [m for m in entry.optional if m not in filled]
        if missing:
            body = [b.wire for b in action.bindings if b.location == "body_field"]
            out.append(problem_from(origin_of(entry, "optional") or origin_of(entry),
                                    f"optional member(s) {', '.join(missing)} are no body member of {oid}; it has {', '.join(body) or 'none'}",
                                    "unknown_param"))
    return out


CHECKS: dict[str, Callable] = {
    "rendering": check_rendering,
    "optional": check_optional,
    "resources": check_resources,
    "views": check_views,
    "error_hints": check_error_hints,
    "redaction": check_redaction,
    "conventions": check_conventions,
    "arguments": check_arguments,
    "overlay_targets": check_overlay_targets,
    "blast_radius": check_blast_radius,
    "tool_names": check_tool_names,
    "allowlist": check_allowlist,
    "extra_routes": check_extra_routes,
    "permissions": check_permissions,
}


def check(compiled, catalog) -> list[Problem]:
    """Every cross-reference problem of the compiled sources and the unfiltered catalog."""
    out: list[Problem] = []
    for fn in CHECKS.values():
        out += fn(compiled, catalog)
    return out


__all__ = ["ACTION_ID", "CHECKS", "check"]
