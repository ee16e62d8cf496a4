"""`interp validate`: every rule and inventory file against its JSON Schema, then the
cross-reference checks of SPEC §3, all problems collected and sorted.

Each file kind is one entry of FILE_KINDS (where it lives, which schema checks it); each
cross-reference check is one small function in CHECKS. Adding a rule kind extends the
dicts, not the loop.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import jmespath
import jmespath.exceptions
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from . import CATALOG_DIR, RULES_DIR
from .errors import Problem
from .load import Loaded, load_file, pointer, problem_at

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED_TOOLS = ("arcane_find_action", "arcane_execute_action")


@dataclass(frozen=True)
class FileKind:
    schema: str  # schema file name
    schema_dir: str  # "catalog" or "rules"


# catalog files by name; rules files by folder
CATALOG_FILES = {
    "actions.yaml": FileKind("actions.schema.json", "catalog"),
    "extra-routes.yaml": FileKind("extra-routes.schema.json", "catalog"),
    "coverage-allowlist.yaml": FileKind("coverage-allowlist.schema.json", "catalog"),
}
RULE_FOLDERS = {
    "overlays": FileKind("overlay.schema.json", "rules"),
}
RULE_FILES = {
    "find.yaml": FileKind("find.schema.json", "rules"),
    "errors.yaml": FileKind("errors.schema.json", "rules"),
    "rendering.yaml": FileKind("rendering.schema.json", "rules"),
    "redaction.yaml": FileKind("redaction.schema.json", "rules"),
    "server.yaml": FileKind("server.schema.json", "rules"),
}


@lru_cache(maxsize=None)
def _validator(schema_path: str) -> Draft202012Validator:
    schema = json.loads(Path(schema_path).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _schema_path(kind: FileKind, catalog_dir: Path, rules_dir: Path) -> Path:
    base = catalog_dir if kind.schema_dir == "catalog" else rules_dir
    own = base / "schemas" / kind.schema
    if own.exists():
        return own
    # an operator's rules directory may omit schemas/: the packaged ones apply
    return (CATALOG_DIR if kind.schema_dir == "catalog" else RULES_DIR) / "schemas" / kind.schema


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def schema_problems(loaded: Loaded, validator: Draft202012Validator) -> list[Problem]:
    out = []
    for err in validator.iter_errors(loaded.data):
        # for oneOf/anyOf, the most relevant sub-error says more than "is not valid under any"
        if err.context:
            # a type mismatch with one branch says nothing when another branch has the right
            # type: prefer the errors of the branches whose type fits
            fitting = [e for e in err.context if e.validator != "type"]
            err = best_match(fitting or err.context) or err
        path = list(err.absolute_path)
        kw = err.validator
        if kw == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {}))) if isinstance(err.instance, dict) else []
            allowed = ", ".join(sorted(err.schema.get("properties", {})))
            msg = f"unknown key {', '.join(repr(e) for e in extra)}; allowed: {allowed}" if extra else err.message
            if extra:
                path = path + [extra[0]]
        elif kw == "type":
            want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
            msg = f"{_short(err.instance)} is not {'an' if str(want)[:1] in 'aeiou' else 'a'} {want}"
            if not isinstance(err.instance, (str, int, float, bool, list, dict, type(None))):
                msg += " (an unquoted YAML date or number? quote it)"
        elif kw == "required":
            msg = err.message
        elif kw == "enum":
            msg = f"{_short(err.instance)} is not one of {', '.join(map(str, err.validator_value))}"
        elif kw == "pattern":
            msg = f"{_short(err.instance)} does not match {err.validator_value}"
        else:
            msg = err.message if len(err.message) < 200 else err.message[:199] + "…"
        out.append(problem_at(loaded, path, msg, f"schema.{kw}"))
    return out


def load_sources(rules_dir: Path = RULES_DIR, catalog_dir: Path = CATALOG_DIR):
    """Load catalog/ and rules/; returns (Sources | None, schema problems). The simulator's
    own data is not the product's: it is checked when a simulator starts."""
    from .catalog import Sources

    problems: list[Problem] = []
    doc_path = catalog_dir / "arcane.openapi.json"
    try:
        document = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return None, [Problem(str(doc_path), 1, 1, "", f"cannot read the OpenAPI document: {exc}", "document_unreadable")]

    def display(p: Path) -> str:
        try:
            return str(p.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(p)

    def load_checked(path: Path, kind: FileKind) -> tuple[Loaded | None, bool]:
        """(the file, whether it passed its schema); problems are collected."""
        l, probs = load_file(path, display(path))
        problems.extend(probs)
        if l is None:
            return None, False
        sp = schema_problems(l, _validator(str(_schema_path(kind, catalog_dir, rules_dir))))
        problems.extend(sp)
        return l, not sp

    loaded: dict[str, Loaded] = {}
    for fname, kind in CATALOG_FILES.items():
        path = catalog_dir / fname
        l, _ = load_checked(path, kind)
        # inventory files are used even with schema problems (the build reports more)
        loaded[fname] = l if l is not None else Loaded(display(path), {}, {}, failed=True)
    overlays: list[Loaded] = []
    if not rules_dir.is_dir():
        problems.append(Problem(display(rules_dir), 1, 1, "", "the rules directory does not exist", "rules_missing"))
    for folder, kind in RULE_FOLDERS.items():
        for path in sorted((rules_dir / folder).glob("*.y*ml")):
            l, ok = load_checked(path, kind)
            if ok:
                overlays.append(l)
    singles: dict[str, Loaded | None] = {}
    for fname, kind in RULE_FILES.items():
        path = rules_dir / fname
        # optional files: without one, the engine's defaults apply
        l, ok = load_checked(path, kind) if path.exists() else (None, False)
        singles[fname] = l if ok else None
    if rules_dir.is_dir():
        known = set(RULE_FOLDERS) | {"schemas"}
        for child in sorted(rules_dir.iterdir()):
            if child.is_file() and child.suffix in (".yaml", ".yml") and child.name not in RULE_FILES:
                problems.append(Problem(display(child), 1, 1, "", f"unknown rule file {child.name!r}; known: {', '.join(sorted(RULE_FILES))} and the folders {', '.join(sorted(RULE_FOLDERS))}", "unknown_rule_kind"))
        for child in sorted(rules_dir.iterdir()):
            if child.is_dir() and child.name not in known and not child.name.startswith((".", "_")):
                problems.append(Problem(display(child), 1, 1, "", f"unknown rule folder {child.name!r}; known: {', '.join(sorted(known))}", "unknown_rule_kind"))
    sources = Sources(document, display(doc_path), loaded["actions.yaml"], loaded["extra-routes.yaml"],
                      loaded["coverage-allowlist.yaml"], overlays, singles.get("find.yaml"), singles.get("errors.yaml"),
                      singles.get("rendering.yaml"), singles.get("redaction.yaml"),
                      singles.get("server.yaml"))
    return sources, problems


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
    from .catalog import tool_name_individual, tool_name_meta

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
    """Regexes compile when rules load, so a typo fails validate, not a user's call."""
    out = []
    for i, entry in enumerate(((src.errors.data or {}).get("messages") or []) if src.errors else []):
        try:
            re.compile(entry.get("match", ""))
        except re.error as exc:
            out.append(problem_at(src.errors, ["messages", i, "match"], f"not a valid regular expression: {exc}", "bad_regex"))
    for i, pat in enumerate((src.redaction.data or {}).get("secret_fields") or [] if src.redaction else []):
        try:
            re.compile(pat)
        except re.error as exc:
            out.append(problem_at(src.redaction, ["secret_fields", i], f"not a valid regular expression: {exc}", "bad_regex"))
    known = {"list", "get", "action", "status"}
    incomplete = src.actions.failed or src.extra.failed  # its parse error is the problem to report
    for i, entry in enumerate(((src.errors.data or {}).get("messages") or []) if src.errors and not incomplete else []):
        for ph in re.findall(r"{([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)}", entry.get("hint", "")):
            if ph not in catalog.all_actions:
                out.append(problem_at(src.errors, ["messages", i, "hint"], f"unknown action {{{ph}}} in the hint", "unknown_action"))
    for key, entry in (((src.errors.data or {}).get("http") or {}) if src.errors else {}).items():
        for field_name in ("hint", "fallback"):
            for ph in re.findall(r"{([\w.]+)}", entry.get(field_name, "")):
                if ph not in known and ph not in catalog.all_actions and not (incomplete and "." in ph):
                    out.append(problem_at(src.errors, ["http", key, field_name], f"unknown placeholder {{{ph}}}; known: {', '.join(sorted(known))}", "unknown_placeholder"))
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


CHECKS: dict[str, Callable] = {
    "error_hints": check_error_hints,
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


def validate(rules_dir: Path = RULES_DIR, catalog_dir: Path = CATALOG_DIR) -> list[Problem]:
    """Every problem of the rules and inventory, sorted; empty when valid."""
    from .catalog import BuildOptions, _build

    sources, problems = load_sources(rules_dir, catalog_dir)
    if sources is None:
        return sorted(problems)
    catalog, build_problems = _build(sources, BuildOptions(rules_dir=rules_dir, catalog_dir=catalog_dir))
    return sorted(set(problems + build_problems + check_sources(sources, catalog)))
