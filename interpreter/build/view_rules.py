"""The view rules (rules/views/*.yaml), compiled, and their checks (interp validate).

A view rule says how an MCP Apps view (interpreter/front/apps.py) shows the results of the
actions it serves: its widget (table, logs, chart or detail), the JMESPath expressions that
project a result's structuredContent into the view model (interpreter/front/viewmodel.py),
the follow-up calls it offers (row and view actions), its refresh and, for logs, its
follow call. One rule may be the default (`default: true`): the detail view of an action
no other rule serves. rules/schemas/views.schema.json checks a file's shape; the checks
below what a schema cannot say (every action known, every expression valid, every row key
an action names shown or hidden by the table).

The rule is kept as written (plain JSON, `spec`); the expressions are compiled once per
process by the view-model builder. `origin` is where the rule starts (`interp explain`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .lazy_dataclass import dataclass
from .model import Origin

WIDGETS = ("table", "logs", "chart", "detail")
VIEW_URI = "ui://arcane-mcp/view/{name}.html"


@dataclass(frozen=True)
class ViewRule:
    """One view (rules/views/<name>.yaml)."""

    name: str
    widget: str
    title: str
    serves: tuple[str, ...]  # the action IDs whose results it shows
    default: bool  # the view of an action no other rule serves
    spec: Mapping[str, Any]  # the rule as written (plain JSON)
    origin: Origin | None = None

    @property
    def uri(self) -> str:
        return VIEW_URI.replace("{name}", self.name)


def compile_views(loaded_views) -> tuple[ViewRule, ...]:
    """The view rules of the loaded rules/views files, by name."""
    out = []
    for ld in loaded_views:
        data = ld.data or {}
        out.append(ViewRule(data["name"], data["widget"], data["title"], tuple(data.get("serves") or ()),
                            bool(data.get("default", False)), _plain(data), ld.origin(["name"])))
    return tuple(sorted(out, key=lambda v: v.name))


def _plain(value: Any) -> Any:
    """The loaded YAML as plain JSON values (ruamel's commented maps and sequences)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def view_for(views: tuple[ViewRule, ...], action_id: str) -> ViewRule | None:
    """The view of an action: the rule serving it, else the default rule (if any)."""
    fallback = None
    for v in views:
        if action_id in v.serves:
            return v
        if v.default and fallback is None:
            fallback = v
    return fallback


# --------------------------------------------------------------------------------------
# What a rule holds, walked once (the checks and the builder read the same places)
# --------------------------------------------------------------------------------------


def tables(spec: Mapping[str, Any]) -> Iterator[tuple[list, Mapping[str, Any]]]:
    """Every table of a rule: (its pointer parts, the table) — the table widget's and each
    section of a detail view."""
    if isinstance(spec.get("table"), Mapping):
        yield ["table"], spec["table"]
    detail = spec.get("detail")
    if isinstance(detail, Mapping):
        for i, sec in enumerate(detail.get("sections") or ()):
            yield ["detail", "sections", i], sec


def expressions(spec: Mapping[str, Any]) -> Iterator[tuple[list, str]]:
    """Every JMESPath expression of a rule: (pointer parts, text)."""
    for where, table in tables(spec):
        for key in ("rows", "total"):
            if isinstance(table.get(key), str):
                yield [*where, key], table[key]
        for i, col in enumerate(table.get("columns") or ()):
            if "expr" in col:
                yield [*where, "columns", i, "expr"], col["expr"]
        for key, text in (table.get("hidden") or {}).items():
            yield [*where, "hidden", key], text
    logs = spec.get("logs") or {}
    for key in ("lines", "truncated"):
        if isinstance(logs.get(key), str):
            yield ["logs", key], logs[key]
    chart = spec.get("chart") or {}
    for key in ("samples", "time"):
        if isinstance(chart.get(key), str):
            yield ["chart", key], chart[key]
    for i, c in enumerate(chart.get("charts") or ()):
        for j, s in enumerate(c.get("series") or ()):
            yield ["chart", "charts", i, "series", j, "expr"], s["expr"]
    for i, f in enumerate((spec.get("detail") or {}).get("fields") or ()):
        yield ["detail", "fields", i, "expr"], f["expr"]
    if isinstance(spec.get("environment"), str):
        yield ["environment"], spec["environment"]


def calls(spec: Mapping[str, Any]) -> Iterator[tuple[list, Mapping[str, Any], Mapping[str, Any] | None]]:
    """Every follow-up call of a rule: (pointer parts, the call, the table whose rows it
    may name, None for a view action)."""
    for i, act in enumerate(spec.get("actions") or ()):
        yield ["actions", i], act, None
    for where, table in tables(spec):
        for i, act in enumerate(table.get("row_actions") or ()):
            yield [*where, "row_actions", i], act, table


def row_keys(table: Mapping[str, Any]) -> set[str]:
    """The keys a row of a table has: its columns' and its hidden keys."""
    return {c["key"] for c in table.get("columns") or ()} | set(table.get("hidden") or {})


# --------------------------------------------------------------------------------------
# Checks (interp validate)
# --------------------------------------------------------------------------------------


def view_problems(loaded_views, catalog, complete: bool = True) -> list:
    """What the schema cannot say about the view rules: the file is named for its view, a
    name and a served action appear once, at most one default rule, every action is in
    the catalog, every expression compiles, every column an overlay lends exists, every
    row key a call, a filter or the sort names is the table's, every argument a call
    passes is one its action takes."""
    from .load import problem_at  # ruamel, jsonschema: only when checking the rules

    out = []
    served: dict[str, str] = {}
    defaults: list[str] = []
    for ld in loaded_views:
        data = ld.data or {}
        name = data.get("name")
        if Path(ld.name).stem != name:
            out.append(problem_at(ld, ["name"], f"file {Path(ld.name).name!r} holds the view {name!r}; name it {name}.yaml",
                                  "view_file_name"))
        if data.get("default"):
            defaults.append(str(name))
            if len(defaults) > 1:
                out.append(problem_at(ld, ["default"], f"only one view may be the default; {defaults[0]!r} is already",
                                      "duplicate_default_view"))
        for i, aid in enumerate(data.get("serves") or ()):
            if aid in served:
                out.append(problem_at(ld, ["serves", i], f"{aid} is served by the view {served[aid]!r} already", "duplicate_view"))
            served[aid] = str(name)
            if complete and aid not in catalog.all_actions:
                out.append(problem_at(ld, ["serves", i], _unknown(catalog, aid), "unknown_action"))
        out += [problem_at(ld, where, msg, code) for where, msg, code in _rule_problems(data, catalog, complete)]
    return out


def _unknown(catalog, aid: Any) -> str:
    near = catalog.closest(str(aid), pool=list(catalog.all_actions))
    return f"{aid!r} is not an action" + (f"; did you mean {', '.join(near)}?" if near else "")


def _rule_problems(data: Mapping[str, Any], catalog, complete: bool) -> Iterator[tuple[list, str, str]]:
    import jmespath
    from jmespath.exceptions import JMESPathError

    widget = data.get("widget")
    if widget in WIDGETS and widget != "detail" and not data.get(widget):
        yield ["widget"], f"a {widget} view needs its `{widget}` member", "view_widget_member"
    for where, text in expressions(data):
        try:
            jmespath.compile(text)
        except JMESPathError as exc:
            yield where, f"not a JMESPath expression: {' '.join(str(exc).split())[:200]}", "bad_expression"
    yield from _table_problems(data, catalog, complete)
    for where, act, table in calls(data):
        yield from _call_problems(where, act, table, catalog, complete)


def _table_problems(data: Mapping[str, Any], catalog, complete: bool) -> Iterator[tuple[list, str, str]]:
    lent = _lent_columns(data, catalog)
    for where, table in tables(data):
        keys = row_keys(table)
        for i, col in enumerate(table.get("columns") or ()):
            if "column" in col and complete and col["column"] not in lent:
                yield ([*where, "columns", i, "column"], f"no action this view serves has the column {col['column']!r}; "
                       f"known: {', '.join(sorted(lent)) or 'none'}", "unknown_column")
            if "filter" in col and complete and col["filter"] not in _lent_filters(data, catalog):
                yield [*where, "columns", i, "filter"], f"no action this view serves has the client filter {col['filter']!r}", "unknown_column"
        for i, key in enumerate(table.get("filters") or ()):
            if key not in keys:
                yield [*where, "filters", i], f"the filter {key!r} is not a column of the table", "unknown_row_key"
        sort = table.get("sort") or {}
        if sort and sort.get("key") not in keys:
            yield [*where, "sort", "key"], f"the sort key {sort.get('key')!r} is not a column of the table", "unknown_row_key"


def _lent_columns(data: Mapping[str, Any], catalog) -> set[str]:
    """The overlay column labels of the actions a rule serves."""
    out: set[str] = set()
    for aid in data.get("serves") or ():
        action = catalog.all_actions.get(aid)
        out |= {c.label for c in (getattr(action, "columns", None) or ())}
    return out


def _lent_filters(data: Mapping[str, Any], catalog) -> set[str]:
    out: set[str] = set()
    for aid in data.get("serves") or ():
        filters = getattr(catalog.all_actions.get(aid), "client_filters", None)
        out |= {f.name for f in (filters.params if filters is not None else ())}
    return out


def _call_problems(where: list, act: Mapping[str, Any], table, catalog, complete: bool) -> Iterator[tuple[list, str, str]]:
    aid = act.get("action")
    action = catalog.all_actions.get(aid)
    if action is None:
        if complete:
            yield [*where, "action"], _unknown(catalog, aid), "unknown_action"
        return
    params = set((action.input_schema or {}).get("properties") or {})
    keys = row_keys(table) if table is not None else set()
    for param, value in (act.get("args") or {}).items():
        if param not in params:
            yield [*where, "args", param], f"{aid} takes no argument {param!r}; it takes {', '.join(sorted(params)) or 'none'}", "unknown_param"
        if isinstance(value, Mapping) and "row" in value and value["row"] not in keys:
            yield ([*where, "args", param], f"the row key {value['row']!r} is not a column or hidden key of the table"
                   + ("" if table is not None else " (a view action has no row)"), "unknown_row_key")


__all__ = ["VIEW_URI", "WIDGETS", "ViewRule", "compile_views", "view_for", "view_problems"]
