"""The cross-reference checks of SPEC §3 over the loaded sources and the built (unfiltered)
catalog: every overlay, hint, tool name, allowlist entry and extra route points at
something real. Each check is one small function in CHECKS; adding one extends the dict,
not the loop.

The stages meet in catalog.py: load.load_sources (files and their schemas), then the
catalog's own build, then check_sources here. `interp validate` is catalog.problems; the
server's catalog.build refuses on the same problems. Nothing here imports the catalog
module: a check gets the catalog it checks.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Callable

import jmespath
import jmespath.exceptions

from .errors import Problem
from .load import problem_at
from .names import RESERVED_TOOLS, tool_name_individual, tool_name_meta

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# ---------------------------------------------------------------- cross-reference checks


def check_overlay_targets(src, catalog) -> list[Problem]:
    out = []
    if src.actions.failed or src.extra.failed:
        return out  # the catalog is incomplete; its parse error is the problem to report
    for ov in src.overlays:
        data = ov.data or {}
        domain = data.get("domain")
        if domain not in catalog.domains:
            out.append(problem_at(ov, ["domain"], f"unknown domain {domain!r}; known: {', '.join(sorted(catalog.domains))}", "unknown_domain"))
            continue
        expected = Path(ov.name).stem
        if expected != domain:
            out.append(problem_at(ov, ["domain"], f"file {Path(ov.name).name!r} holds domain {domain!r}; name it {domain}.yaml", "overlay_file_name"))
        for name, spec in (data.get("actions") or {}).items():
            aid = f"{domain}.{name}"
            if aid not in catalog.all_actions:
                near = catalog.closest(aid, pool=list(catalog.all_actions))
                out.append(problem_at(ov, ["actions", name], f"unknown action {aid!r}" + (f"; did you mean {', '.join(near)}?" if near else ""), "unknown_action"))
                continue
            for ph in re.findall(r"{([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)}", spec.get("empty", "")):
                if ph not in catalog.all_actions:
                    out.append(problem_at(ov, ["actions", name, "empty"], f"unknown action {{{ph}}} in the hint", "unknown_action"))
            ref = spec.get("item_action")
            if ref and ref not in catalog.all_actions:
                out.append(problem_at(ov, ["actions", name, "item_action"], f"unknown action {ref!r}", "unknown_action"))
            for i, col in enumerate(spec.get("columns") or []):
                if isinstance(col, dict):
                    try:
                        jmespath.compile(col["expr"])
                    except jmespath.exceptions.JMESPathError as exc:
                        out.append(problem_at(ov, ["actions", name, "columns", i, "expr"], f"not a valid JMESPath expression: {str(exc).splitlines()[0]}", "bad_jmespath"))
            for key in ("related", "follow_ups"):
                for i, ref in enumerate(spec.get(key) or []):
                    if ref not in catalog.all_actions:
                        near = catalog.closest(ref, pool=list(catalog.all_actions))
                        out.append(problem_at(ov, ["actions", name, key, i], f"unknown action {ref!r}" + (f"; did you mean {', '.join(near)}?" if near else ""), "unknown_action"))
                    elif ref == aid:
                        out.append(problem_at(ov, ["actions", name, key, i], f"{aid!r} names itself", "self_reference"))
    return out


def check_tool_names(src, catalog) -> list[Problem]:
    out = []
    seen: dict[str, str] = {}
    route_index = {r.get("id"): i for i, r in enumerate((src.extra.data or {}).get("routes") or [])}
    for aid, a in catalog.all_actions.items():
        tname = tool_name_individual(aid)
        where = ["operations", a.operation_id] if a.operation_id else ["routes", route_index.get(aid, 0), "id"]
        loaded = src.actions if a.operation_id else src.extra
        if not TOOL_NAME.match(tname):
            out.append(problem_at(loaded, where, f"tool name {tname!r} is longer than 64 characters or has characters outside A-Z a-z 0-9 _ -", "bad_tool_name"))
        if tname in seen:
            out.append(problem_at(loaded, where, f"{aid!r} and {seen[tname]!r} both render to the tool name {tname!r}", "tool_name_clash"))
        elif tname in RESERVED_TOOLS or tool_name_meta(a.domain) in RESERVED_TOOLS:
            out.append(problem_at(loaded, where, f"{aid!r} renders to the reserved tool name {tname!r}", "tool_name_clash"))
        seen[tname] = aid
    return out


def check_allowlist(src, catalog) -> list[Problem]:
    out = []
    doc_ops = {}
    for path, item in catalog.document.get("paths", {}).items():
        for method, op in item.items():
            if isinstance(op, dict) and "operationId" in op:
                doc_ops[op["operationId"]] = f"{method.upper()} {path}"
    served_routes = {f"{a.method} {a.path}" for a in catalog.all_actions.values()}
    named_ops = {a.operation_id for a in catalog.all_actions.values() if a.operation_id}
    for i, entry in enumerate((src.allowlist.data or {}).get("routes") or []):
        if "operation" in entry:
            if entry["operation"] not in doc_ops:
                out.append(problem_at(src.allowlist, ["routes", i, "operation"], f"stale entry: operation {entry['operation']!r} is not in the OpenAPI document", "stale_allowlist"))
            elif entry["operation"] in named_ops:
                out.append(problem_at(src.allowlist, ["routes", i, "operation"], f"stale entry: operation {entry['operation']!r} is served as an action", "stale_allowlist"))
        elif entry.get("route") in served_routes:
            out.append(problem_at(src.allowlist, ["routes", i, "route"], f"stale entry: {entry['route']!r} is served as an action", "stale_allowlist"))
    return out


def check_extra_routes(src, catalog) -> list[Problem]:
    out = []
    doc_routes = set()
    for path, item in catalog.document.get("paths", {}).items():
        for method in item:
            doc_routes.add(f"{method.upper()} {path}")
    for i, route in enumerate((src.extra.data or {}).get("routes") or []):
        key = f"{route.get('method')} {route.get('path')}"
        if key in doc_routes:
            out.append(problem_at(src.extra, ["routes", i, "path"], f"{key} is in the OpenAPI document; name its operation in actions.yaml instead", "extra_route_in_document"))
    return out


def check_error_hints(src, catalog) -> list[Problem]:
    """Regexes compile when rules load, so a typo fails validate, not a user's call; every
    hint names actions that exist and suit its purpose, for every action it applies to."""
    from .hints import Hints

    if not src.errors:
        return []
    data = src.errors.data or {}
    out = []
    for i, entry in enumerate(data.get("messages") or []):
        try:
            re.compile(entry.get("match", ""))
        except re.error as exc:
            out.append(problem_at(src.errors, ["messages", i, "match"], f"not a valid regular expression: {exc}", "bad_regex"))
    if out or src.actions.failed or src.extra.failed:
        return out  # an incomplete catalog: its parse error is the problem to report
    for where, message, code in Hints(data).problems(catalog):
        out.append(problem_at(src.errors, list(where), message, code))
    return out


def check_redaction(src, catalog) -> list[Problem]:
    """Regexes and pointer patterns compile when rules load; every `actions` glob of a
    position or kept entry names at least one action."""
    from .redact import rule_problems

    if not src.redaction:
        return []
    data = src.redaction.data or {}
    out = [problem_at(src.redaction, where, message, code) for where, message, code in rule_problems(data)]
    if src.actions.failed or src.extra.failed:
        return out  # the catalog is incomplete; its parse error is the problem to report
    for section in ("positions", "kept"):
        for i, entry in enumerate(data.get(section) or ()):
            for j, glob in enumerate(entry.get("actions") or ()):
                if not any(fnmatch.fnmatchcase(aid, glob) for aid in catalog.all_actions):
                    near = catalog.closest(glob, pool=list(catalog.all_actions))
                    out.append(problem_at(src.redaction, [section, i, "actions", j], f"{glob!r} names no action"
                                          + (f"; did you mean {', '.join(near)}?" if near else ""), "unknown_action"))
    return out


def check_wire_rules(src, catalog) -> list[Problem]:
    """The stream frames, error shapes and argument rules compile, and name served actions."""
    out = []
    inv = src.actions.data or {}

    def expr(loaded, path, text) -> None:
        try:
            jmespath.compile(text)
        except jmespath.exceptions.JMESPathError as exc:
            out.append(problem_at(loaded, path, f"not a valid JMESPath expression: {str(exc).splitlines()[0]}", "bad_jmespath"))

    def regex(loaded, path, text) -> None:
        try:
            re.compile(text)
        except re.error as exc:
            out.append(problem_at(loaded, path, f"not a valid regular expression: {exc}", "bad_regex"))

    def action(loaded, path, aid) -> None:
        if not (src.actions.failed or src.extra.failed) and aid not in catalog.all_actions:
            near = catalog.closest(aid, pool=list(catalog.all_actions))
            out.append(problem_at(loaded, path, f"unknown action {aid!r}" + (f"; did you mean {', '.join(near)}?" if near else ""), "unknown_action"))

    streams = inv.get("streams") if isinstance(inv.get("streams"), dict) else {}
    for key, value in (streams.get("frames") or {}).items():
        if key != "legacy_text":
            for i, e in enumerate([value] if isinstance(value, str) else value or []):
                expr(src.actions, ["streams", "frames", key] + ([] if isinstance(value, str) else [i]), e)
    if (streams.get("follow") or {}).get("action"):
        action(src.actions, ["streams", "follow", "action"], streams["follow"]["action"])
    progress = streams.get("progress") or {}
    for i, line in enumerate(progress.get("lines") or []):
        regex(src.actions, ["streams", "progress", "lines", i, "match"], line.get("match", ""))
    for i, pat in enumerate(progress.get("percent") or []):
        regex(src.actions, ["streams", "progress", "percent", i], pat)
    for i, entry in enumerate(inv.get("error_shapes") or []):
        msg = entry.get("message")
        for j, e in enumerate([msg] if isinstance(msg, str) else msg or []):
            expr(src.actions, ["error_shapes", i, "message"] + ([] if isinstance(msg, str) else [j]), e)
        for key in ("items", "location", "text"):
            if (entry.get("details") or {}).get(key):
                expr(src.actions, ["error_shapes", i, "details", key], entry["details"][key])
    declared: dict[str, str] = {}
    for ov in src.overlays:
        for arg, spec in ((ov.data or {}).get("arguments") or {}).items():
            if arg in declared:
                out.append(problem_at(ov, ["arguments", arg], f"argument {arg!r} is declared in {declared[arg]} already", "duplicate_argument"))
                continue
            declared[arg] = ov.name
            regex(ov, ["arguments", arg, "id_pattern"], spec.get("id_pattern", ""))
            action(ov, ["arguments", arg, "list"], spec.get("list", ""))
            if not (src.actions.failed or src.extra.failed) and not any(
                    b.arg == arg and b.location == "path" for a in catalog.all_actions.values() for b in a.bindings):
                out.append(problem_at(ov, ["arguments", arg], f"no action takes {arg!r} as a path argument", "unused_argument"))
    return out


def check_resources(src, catalog) -> list[Problem]:
    """Every resource names a catalog action and uses only its URI's variables; guides
    name only actions the catalog has (interpreter/resources.py)."""
    from .resource_rules import rule_problems

    return rule_problems(src, catalog)


CHECKS: dict[str, Callable] = {
    "resources": check_resources,
    "error_hints": check_error_hints,
    "redaction": check_redaction,
    "wire_rules": check_wire_rules,
    "overlay_targets": check_overlay_targets,
    "tool_names": check_tool_names,
    "allowlist": check_allowlist,
    "extra_routes": check_extra_routes,
}


def check_sources(src, catalog) -> list[Problem]:
    out: list[Problem] = []
    for check in CHECKS.values():
        out += check(src, catalog)
    return out
