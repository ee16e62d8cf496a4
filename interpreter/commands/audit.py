"""`interp audit`: prove the catalog covers Arcane one to one.

Three directions, each a failure when broken:

* every OpenAPI operation maps to exactly one action, or to an allowlist entry;
* every declared extra route (catalog/extra-routes.yaml) maps to an action;
* every action maps to a route: an OpenAPI operation or a declared extra route, and no
  route is served by two actions or both served and allowlisted.

Beside that the report lists what is not a failure but worth seeing: actions whose handler
kind is not served yet ("handler pending"), every classification or response-kind
correction the inventory makes (with its `why`), the routes allowlisted outside the
document, and counts. Validation problems are mentioned (run `interp validate` for them)
but only coverage decides `ok`.

`interp audit --rules` (`rules_coverage`) is a report of another kind, never a failure:
what the overlays give each domain's actions (a usage note, aliases, related actions or
follow-ups; for the actions that answer a list, columns and an empty hint) and whether the
domain has a title and a description, with totals and the covered share of each. The
checks are the literal ACTION_CHECKS table; a new one extends it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

from .. import CATALOG_DIR, RULES_DIR
from ..build.catalog import FLAG_KEYS, HTTP_METHODS, BuildOptions, assemble
from ..build.lazy_dataclass import dataclass
from ..build.schema import answer_members, list_member_problem


@dataclass
class AuditReport:
    """What `audit` found. `failures` make `ok` False; the rest is information."""

    failures: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)
    allowlisted: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        """The report as text lines: failures first, then pending handlers, corrections,
        allowlisted routes, notes, counts and a closing verdict."""
        out = list(self.failures)
        out += self.pending
        out += self.corrections
        out += self.allowlisted
        out += self.notes
        c = self.counts
        out.append(
            "counts: "
            + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in c.items())
        )
        out.append("audit: OK" if self.ok else f"audit: FAILED ({len(self.failures)} problem(s))")
        return out

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "failures": list(self.failures),
            "pending": list(self.pending),
            "corrections": list(self.corrections),
            "allowlisted": list(self.allowlisted),
            "notes": list(self.notes),
            "counts": dict(self.counts),
        }


def _document_operations(document: dict) -> dict[str, tuple[str, str, dict]]:
    """operationId (or `METHOD path` when it has none) -> (METHOD, path, operation)."""
    out: dict[str, tuple[str, str, dict]] = {}
    for path, item in (document.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        for method in HTTP_METHODS:
            op = item.get(method)
            if isinstance(op, dict):
                oid = op.get("operationId") or f"{method.upper()} {path}"
                out[oid] = (method.upper(), path, op)
    return out


def _fmt_flags(entry) -> str:
    """The corrections of an inventory entry (an OperationName or an ExtraRoute)."""
    keys = (*FLAG_KEYS, "response") if hasattr(entry, "response") else FLAG_KEYS
    return ", ".join(f"{k}={getattr(entry, k)}" for k in keys if getattr(entry, k) is not None)


@dataclass
class _Coverage:
    """What the coverage checks compare, worked out once from the built catalog: the
    document's operations and routes, the actions, the allowlist by operation and by route,
    the routes the extra routes declare and the routes the actions serve."""

    doc_ops: dict[str, tuple[str, str, dict]]
    doc_routes: dict[str, str]  # "METHOD path" -> operationId
    inventory: Any
    actions: Any
    by_operation: dict[str, Any]
    allow_ops: dict[str, int] = field(default_factory=dict)  # operationId -> allowlist entry
    allow_routes: dict[str, int] = field(default_factory=dict)  # "METHOD path" -> allowlist entry
    extra_keys: dict[str, list[str]] = field(default_factory=dict)  # "METHOD path" -> extra routes' action IDs
    served: dict[str, list[str]] = field(default_factory=dict)  # "METHOD path" -> action IDs


def _coverage(document: dict, catalog, fail: list[str]) -> _Coverage:
    """The coverage's inputs; an allowlist entry repeating an earlier one fails here."""
    doc_ops = _document_operations(document)
    actions = catalog.all_actions
    cov = _Coverage(doc_ops=doc_ops, doc_routes={f"{m} {p}": oid for oid, (m, p, _) in doc_ops.items()},
                    inventory=catalog.inventory, actions=actions,
                    by_operation={a.operation_id: a for a in actions.values() if a.operation_id})
    for i, entry in enumerate(cov.inventory.allowlist):
        kind, table = ("operation", cov.allow_ops) if entry.operation is not None else ("route", cov.allow_routes)
        if getattr(entry, kind) is None:
            continue
        key = str(getattr(entry, kind))
        if key in table:
            fail.append(f"stale allowlist: entry #{i} {kind} {key!r} repeats entry #{table[key]}")
            continue
        table[key] = i
    for route in cov.inventory.extra_routes:
        cov.extra_keys.setdefault(f"{route.method} {route.path.text}", []).append(route.action_id)
    for aid, a in actions.items():
        cov.served.setdefault(f"{a.method} {a.path}", []).append(aid)
    return cov


def _operations_covered(cov: _Coverage, report: AuditReport) -> None:
    """1. Every OpenAPI operation -> an action carrying its route, or the allowlist."""
    names = cov.inventory.operations
    for oid, (method, path, _) in sorted(cov.doc_ops.items()):
        route = f"{method} {path}"
        action = cov.by_operation.get(oid)
        if action is not None:
            if (action.method, action.path) != (method, path):
                report.failures.append(f"unrouted action: {action.id} is named for operation {oid!r} "
                                       f"but carries {action.method} {action.path}, not {route}")
            continue
        if oid in cov.allow_ops or route in cov.allow_routes:
            continue
        entry = names.get(oid)
        if entry is None:
            why = "no name in actions.yaml and no allowlist entry"
        else:
            why = f"its name {entry.action_id!r} in actions.yaml makes no action (a duplicate or malformed ID)"
        report.failures.append(f"uncovered operation: {oid} ({route}): {why}")


def _extra_routes_covered(cov: _Coverage, report: AuditReport) -> None:
    """2. Every declared extra route -> an action of its own, on a route the document lacks."""
    for i, route in enumerate(cov.inventory.extra_routes):
        aid = route.action_id
        key = f"{route.method} {route.path.text}"
        a = cov.actions.get(aid)
        if a is None or a.operation_id is not None or f"{a.method} {a.path}" != key:
            report.failures.append(f"uncovered route: extra route #{i} {key} ({aid or 'no id'}) maps to no action "
                                   "(a duplicate or malformed ID)")
        if key in cov.doc_routes:
            report.failures.append(f"double route: extra route #{i} {key} ({aid}) is also OpenAPI operation "
                                   f"{cov.doc_routes[key]!r}; name the operation in actions.yaml instead")


def _actions_routed(cov: _Coverage, report: AuditReport) -> None:
    """3. Every action -> a route; no route served twice."""
    for aid, a in cov.actions.items():
        if a.operation_id is not None:
            if a.operation_id not in cov.doc_ops:
                report.failures.append(f"unrouted action: {aid} names operation {a.operation_id!r}, "
                                       "which is not in the OpenAPI document")
        elif f"{a.method} {a.path}" not in cov.extra_keys:
            report.failures.append(f"unrouted action: {aid} ({a.method} {a.path}) is neither an OpenAPI operation "
                                   "nor a declared extra route")
    for key, ids in sorted(cov.served.items()):
        if len(ids) > 1:
            report.failures.append(f"double route: {key} is served by {len(ids)} actions: {', '.join(sorted(ids))}")


def _allowlist_current(cov: _Coverage, report: AuditReport) -> None:
    """4. The allowlist: an entry naming no operation, or a served one, is stale; the rest is listed."""
    allowlist = cov.inventory.allowlist
    for oid, i in sorted(cov.allow_ops.items(), key=lambda kv: kv[1]):
        if oid not in cov.doc_ops:
            report.failures.append(f"stale allowlist: entry #{i} operation {oid!r} is not in the OpenAPI document")
        elif oid in cov.by_operation:
            report.failures.append(f"stale allowlist: entry #{i} operation {oid!r} is served as {cov.by_operation[oid].id}")
        else:
            m, p, _ = cov.doc_ops[oid]
            report.allowlisted.append(f"allowlisted: {oid} ({m} {p}): {allowlist[i].reason}")
    for route, i in sorted(cov.allow_routes.items(), key=lambda kv: kv[1]):
        if route in cov.served:
            report.failures.append(f"stale allowlist: entry #{i} route {route!r} is served as "
                                   f"{', '.join(sorted(cov.served[route]))}")
        elif route in cov.doc_routes:
            report.allowlisted.append(f"allowlisted: {cov.doc_routes[route]} ({route}): {allowlist[i].reason}")
        else:
            report.allowlisted.append(f"allowlisted (outside OpenAPI): {route}: {allowlist[i].reason}")


def _pending_handlers(cov: _Coverage, report: AuditReport) -> None:
    """Information: the actions whose handler kind is not served yet."""
    for aid, a in cov.actions.items():
        if a.pending:
            report.pending.append(f"handler pending: {aid} ({a.method} {a.path}) handler {a.handler}")


def _corrections(cov: _Coverage, report: AuditReport) -> None:
    """Information: every classification or response-kind correction of the inventory (operations
    by action ID, with their `why`, then extra routes by action ID)."""
    names = cov.inventory.operations
    for oid in sorted(names, key=lambda o: names[o].action_id):
        spec = names[oid]
        flags = _fmt_flags(spec)
        if flags:
            report.corrections.append(f"correction: {spec.action_id} ({oid}): {flags}" + (f" — {spec.why}" if spec.why else ""))
    for route in sorted(cov.inventory.extra_routes, key=lambda r: r.action_id):
        flags = _fmt_flags(route)
        if flags:
            report.corrections.append(f"correction: {route.action_id} (extra route): {flags}")


def _contradictions(cov: _Coverage, report: AuditReport) -> None:
    """Information: an action both read-only and destructive (read-only mode would serve it)."""
    for aid, a in cov.actions.items():
        if a.read_only and a.destructive:
            report.notes.append(f"warning: {aid} is both read-only and destructive; read-only mode would still serve it "
                                "(set read_only: false where it is declared)")


def _counts(cov: _Coverage, report: AuditReport) -> dict[str, int]:
    return {
        "operations": len(cov.doc_ops),
        "actions": len(cov.actions),
        "domains": len({a.domain for a in cov.actions.values()}),
        "extra_routes": len(cov.inventory.extra_routes),
        "allowlisted": len(cov.inventory.allowlist),
        "allowlisted_outside_openapi": sum(1 for r in cov.allow_routes if r not in cov.doc_routes),
        "pending": len(report.pending),
        "corrections": len(report.corrections),
    }


#: The audit, in order: the four coverage directions (failures), then what is only shown.
#: A new check is one more step here.
AUDIT_STEPS: tuple[Callable[[_Coverage, AuditReport], None], ...] = (
    _operations_covered, _extra_routes_covered, _actions_routed, _allowlist_current,
    _pending_handlers, _corrections, _contradictions,
)


def audit(catalog_dir: Path = CATALOG_DIR, rules_dir: Path = RULES_DIR) -> AuditReport:
    """audit(catalog_dir: Path = CATALOG_DIR, rules_dir: Path = RULES_DIR) -> AuditReport

    Prove 1:1 coverage between Arcane's routes (OpenAPI operations, declared extra routes,
    allowlist) and the catalog's actions. `report.ok` is False on any uncovered operation,
    extra route without an action, action without a route, route covered twice, or stale
    allowlist entry; `report.lines()` is the text `interp audit` prints.
    """
    report = AuditReport()
    sources, catalog, problems = assemble(BuildOptions(rules_dir=Path(rules_dir), catalog_dir=Path(catalog_dir)))
    if sources is None:
        report.failures += [f"unreadable: {p.format()}" for p in problems]
        report.counts = {"operations": 0, "actions": 0}
        return report
    cov = _coverage(sources.document, catalog, report.failures)
    for step in AUDIT_STEPS:
        step(cov, report)
    if problems:
        report.notes.append(f"note: interp validate reports {len(problems)} problem(s); run it for the details")
    report.counts = _counts(cov, report)
    return report



# ---------------------------------------------------------------- `interp audit --rules`


def answers_list(catalog, action) -> bool:
    """Whether the action's JSON answer is a list: its structuredContent has the envelope's
    `items` member, or the array member its overlay names as `list_member`
    (schema.answer_members). Extra routes answer no JSON list."""
    members = answer_members(catalog, action)
    return _is_array(members.get(catalog.conventions.envelope.items)) or bool(action.list_member and list_member_problem(catalog, action) is None)


def _is_array(node: Any) -> bool:
    # output_schema lets every member also be null (`anyOf: [schema, null]`, nested). The
    # envelope's `items` counts only as `type: array` (schema.may_be_array also takes a type
    # list holding "array": a few answers type a non-list `items` member that way)
    if not isinstance(node, dict):
        return False
    return node.get("type") == "array" or any(_is_array(b) for b in node.get("anyOf") or ())


@dataclass(frozen=True)
class Check:
    """One thing an overlay may give an action: what the report calls it, which actions
    it applies to (`lists`: only actions that answer a list) and whether one has it."""

    label: str
    lists: bool
    present: Callable[[Any], bool]


#: What `interp audit --rules` counts per action, keyed by the word its JSON uses.
ACTION_CHECKS: dict[str, Check] = {
    "usage": Check("usage note", False, lambda a: bool(a.usage.strip())),
    "aliases": Check("aliases", False, lambda a: bool(a.aliases)),
    "next_steps": Check("related or follow-ups", False, lambda a: bool(a.related or a.follow_ups)),
    "columns": Check("columns", True, lambda a: bool(a.columns)),
    "empty": Check("empty hint", True, lambda a: a.empty_hint is not None and bool(a.empty_hint.text.strip())),
}
#: What it counts per domain: the overlay keys that name the domain's meta tool.
DOMAIN_KEYS = ("title", "description")


@dataclass(frozen=True)
class DomainCoverage:
    """One domain: its counts, which domain keys its overlay declares, and per check
    the action IDs that lack it."""

    domain: str
    actions: tuple[str, ...]
    lists: tuple[str, ...]
    declared: dict[str, bool]
    missing: dict[str, tuple[str, ...]]

    def as_dict(self) -> dict:
        return {"domain": self.domain, "actions": len(self.actions), "list_actions": len(self.lists),
                **{k: v for k, v in self.declared.items()}, "missing": {k: list(v) for k, v in self.missing.items()}}


@dataclass
class RulesCoverage:
    """What `audit --rules` found: per domain, then totals. A report: nothing in it is
    a failure except rules that could not be read at all (`unreadable`)."""

    domains: list[DomainCoverage] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict:
        """Counts over every domain: actions, lists, domains lacking each domain key, and
        per check the actions it applies to, the actions lacking it and the covered share."""
        applicable = {k: sum(len(d.lists if c.lists else d.actions) for d in self.domains) for k, c in ACTION_CHECKS.items()}
        missing = {k: sum(len(d.missing[k]) for d in self.domains) for k in ACTION_CHECKS}
        out = {
            "domains": len(self.domains),
            "actions": sum(len(d.actions) for d in self.domains),
            "list_actions": sum(len(d.lists) for d in self.domains),
            **{f"domains_without_{k}": sum(not d.declared[k] for d in self.domains) for k in DOMAIN_KEYS},
            "applicable": applicable,
            "missing": missing,
            "percent_covered": {k: _percent(applicable[k] - missing[k], applicable[k]) for k in ACTION_CHECKS},
        }
        for k in DOMAIN_KEYS:
            out["percent_covered"][f"domain_{k}"] = _percent(len(self.domains) - out[f"domains_without_{k}"], len(self.domains))
        return out

    def as_dict(self) -> dict:
        return {"checks": {k: {"label": c.label, "applies_to": "list actions" if c.lists else "actions"} for k, c in ACTION_CHECKS.items()},
                "domains": [d.as_dict() for d in self.domains], "totals": self.totals(),
                "unreadable": list(self.unreadable), "notes": list(self.notes)}

    def lines(self) -> list[str]:
        """The report as text: a table of what is missing per domain, the totals with the
        covered share of each check, then the action IDs behind every count."""
        if self.unreadable:
            return [f"unreadable: {u}" for u in self.unreadable] + ["audit --rules: the rules could not be read"]
        t = self.totals()
        heads = ["domain", "actions", "lists", *(c.label for c in ACTION_CHECKS.values()), *DOMAIN_KEYS]
        rows = [[d.domain, str(len(d.actions)), str(len(d.lists)), *(str(len(d.missing[k])) for k in ACTION_CHECKS),
                 *("yes" if d.declared[k] else "no" for k in DOMAIN_KEYS)] for d in self.domains]
        rows.append(["total", str(t["actions"]), str(t["list_actions"]), *(str(t["missing"][k]) for k in ACTION_CHECKS),
                     *(f"{len(self.domains) - t[f'domains_without_{k}']}/{len(self.domains)}" for k in DOMAIN_KEYS)])
        widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
        fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()  # noqa: E731
        out = [f"rules coverage: {t['domains']} domains, {t['actions']} actions, {t['list_actions']} answer a list; "
               "each action column counts the actions that lack it (lists: only the actions that answer a list)",
               fmt(heads), *(fmt(r) for r in rows)]
        covered = [f"{c.label} {t['applicable'][k] - t['missing'][k]}/{t['applicable'][k]} ({_shown(t['percent_covered'][k])})"
                   for k, c in ACTION_CHECKS.items()]
        covered += [f"domain {k} {len(self.domains) - t[f'domains_without_{k}']}/{len(self.domains)} ({_shown(t['percent_covered'][f'domain_{k}'])})"
                    for k in DOMAIN_KEYS]
        out.append("covered: " + ", ".join(covered))
        for d in self.domains:
            gaps = [f"no {c.label}: {', '.join(d.missing[k])}" for k, c in ACTION_CHECKS.items() if d.missing[k]]
            gaps += [f"no {k}" for k in DOMAIN_KEYS if not d.declared[k]]
            if gaps:
                out.append(f"{d.domain}: " + "; ".join(gaps))
        out += self.notes
        out.append("audit --rules: a report (it never fails on a gap)")
        return out


def _percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 1) if whole else None


def _shown(percent: float | None) -> str:
    return "—" if percent is None else f"{percent:.1f}%"


def rules_coverage(catalog_dir: Path = CATALOG_DIR, rules_dir: Path = RULES_DIR) -> RulesCoverage:
    """rules_coverage(catalog_dir: Path = CATALOG_DIR, rules_dir: Path = RULES_DIR) -> RulesCoverage

    What the overlays give every action and domain of the unfiltered catalog: per domain,
    the actions without a usage note, aliases or next steps (related or follow-ups), the
    list actions without columns or an empty hint, and whether the domain has a title and
    a description. `lines()` is what `interp audit --rules` prints."""
    report = RulesCoverage()
    sources, catalog, problems = assemble(BuildOptions(rules_dir=Path(rules_dir), catalog_dir=Path(catalog_dir)))
    if sources is None or catalog is None:
        report.unreadable = [p.format() for p in problems]
        return report
    overlays = catalog.overlays or {}
    by_domain: dict[str, list] = {}
    for a in catalog.all_actions.values():
        by_domain.setdefault(a.domain, []).append(a)
    for domain, actions in sorted(by_domain.items()):
        actions.sort(key=lambda a: a.id)
        lists = [a for a in actions if answers_list(catalog, a)]
        overlay = overlays.get(domain)
        report.domains.append(DomainCoverage(
            domain, tuple(a.id for a in actions), tuple(a.id for a in lists),
            {k: bool(str(getattr(overlay, k, None) or "").strip()) for k in DOMAIN_KEYS},
            {k: tuple(a.id for a in (lists if c.lists else actions) if not c.present(a)) for k, c in ACTION_CHECKS.items()}))
    if problems:
        report.notes.append(f"note: interp validate reports {len(problems)} problem(s); the counts cover what loaded")
    return report
