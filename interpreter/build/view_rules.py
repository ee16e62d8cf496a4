"""The view rules (rules/views/*.yaml), compiled, and their checks (interp validate).

A view rule says how an MCP Apps view (interpreter/front/apps.py) shows the results of the
actions it serves: its widget (table, logs, chart or detail), the JMESPath expressions that
project a result's structuredContent into the view model (interpreter/front/viewmodel.py),
the follow-up calls it offers (row and view actions), its refresh and, for logs, its
follow call. One rule may be the default (`default: true`): the detail view of an action
no other rule serves. rules/schemas/views.schema.json checks a file's shape; the checks
below what a schema cannot say (every action known, every expression valid, every row key
an action names shown or hidden by the table).

A rule compiles into frozen models (ViewRule and its parts) with its expressions compiled;
`origin` is where the rule starts (`interp explain`). The checks read the loaded data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .lazy_dataclass import dataclass
from .model import Expr, Origin, frozen_map

WIDGETS = ("table", "logs", "chart", "detail")
VIEW_URI = "ui://arcane-mcp/view/{name}.html"


@dataclass(frozen=True)
class ArgValue:
    """One argument of a follow-up call: `row` (the row's value of `ref`: the view's
    placeholder), `arg` (the served call's own argument `ref`), `last` (a value the
    builder computes, e.g. the last log line's time) or `value` (`literal`, JSON text)."""

    kind: str
    ref: str | None = None
    literal: str | None = None

    @classmethod
    def of(cls, value: Any) -> ArgValue:
        if isinstance(value, Mapping) and len(value) == 1:
            (k, v), = value.items()
            if k in ("row", "arg", "last") and isinstance(v, str):
                return cls(k, v)
        return cls("value", None, json.dumps(_plain(value), separators=(",", ":")))


@dataclass(frozen=True)
class ViewCall:
    """A row or view action: its button ID and label, the action and its arguments."""

    id: str
    action: str
    label: str
    args: tuple[tuple[str, ArgValue], ...]

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> ViewCall:
        return cls(data["id"], data["action"], data["label"], _args(data.get("args")))


@dataclass(frozen=True)
class ViewColumn:
    """One column: where its value comes from (`column`: an overlay column of the served
    action by label, else the item member of that name; `filter`: an overlay client
    filter's expression; `expr`: the rule's own expression), how the view shows it."""

    key: str
    label: str
    source: str  # column | filter | expr
    ref: str | None
    expr: Expr | None
    kind: str
    tones: Mapping[str, str] | None
    sortable: bool


@dataclass(frozen=True)
class ViewTable:
    """A table (the table widget's, or a section of a detail view)."""

    title: str
    rows: Expr
    total: Expr | None
    columns: tuple[ViewColumn, ...]
    hidden: tuple[tuple[str, Expr], ...]
    filters: tuple[str, ...]
    sort: tuple[str, str] | None  # (key, asc | desc)
    row_actions: tuple[ViewCall, ...]


@dataclass(frozen=True)
class LogRule:
    lines: Expr
    truncated: Expr | None
    streams: tuple[tuple[str, str], ...]  # (prefix, stream)
    default_stream: str | None
    time: re.Pattern | None
    follow: tuple[tuple[str, ArgValue], ...] | None


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    expr: Expr
    scale: float
    rate: bool


@dataclass(frozen=True)
class ChartRule:
    samples: Expr
    time: Expr
    charts: tuple[tuple[str, str, tuple[Series, ...]], ...]  # (title, unit, series)


@dataclass(frozen=True)
class DetailField:
    label: str
    expr: Expr
    kind: str
    tones: Mapping[str, str] | None


@dataclass(frozen=True)
class DetailRule:
    scalars: bool
    fields: tuple[DetailField, ...]
    sections: tuple[ViewTable, ...]


@dataclass(frozen=True)
class ViewRule:
    """One view (rules/views/<name>.yaml), compiled."""

    name: str
    widget: str
    title: str
    serves: tuple[str, ...]  # the action IDs whose results it shows
    default: bool  # the view of an action no other rule serves
    refresh: bool  # offer to re-run the same call
    refresh_seconds: int | None
    environment: Expr | None
    actions: tuple[ViewCall, ...]
    table: ViewTable | None = None
    logs: LogRule | None = None
    chart: ChartRule | None = None
    detail: DetailRule | None = None
    origin: Origin | None = None

    @property
    def uri(self) -> str:
        return VIEW_URI.replace("{name}", self.name)


def _args(data: Any) -> tuple[tuple[str, ArgValue], ...]:
    return tuple((str(k), ArgValue.of(v)) for k, v in (data or {}).items())


def _opt(text: Any) -> Expr | None:
    return Expr.of(text) if isinstance(text, str) else None


def _tones(data: Any) -> Mapping[str, str] | None:
    return frozen_map((str(k), str(v)) for k, v in data.items()) if isinstance(data, Mapping) else None


def _column(c: Mapping[str, Any]) -> ViewColumn:
    source = "expr" if "expr" in c else "filter" if "filter" in c else "column"
    return ViewColumn(c["key"], c["label"], source, None if source == "expr" else str(c[source]), _opt(c.get("expr")),
                      c.get("kind", "text"), _tones(c.get("tones")), bool(c.get("sortable", True)))


def _table(t: Mapping[str, Any]) -> ViewTable:
    sort = t.get("sort")
    return ViewTable(t.get("title", ""), Expr.of(t["rows"]), _opt(t.get("total")), tuple(_column(c) for c in t["columns"]),
                     tuple((str(k), Expr.of(v)) for k, v in (t.get("hidden") or {}).items()), tuple(t.get("filters") or ()),
                     (sort["key"], sort.get("dir", "asc")) if sort else None, tuple(ViewCall.of(a) for a in t.get("row_actions") or ()))


def _logs(d: Mapping[str, Any]) -> LogRule:
    follow = d.get("follow")
    return LogRule(Expr.of(d["lines"]), _opt(d.get("truncated")), tuple((s["prefix"], s["stream"]) for s in d.get("streams") or ()),
                   d.get("default_stream"), re.compile(d["time"]) if d.get("time") else None,
                   _args(follow.get("args")) if follow is not None else None)


def _chart(d: Mapping[str, Any]) -> ChartRule:
    return ChartRule(Expr.of(d["samples"]), Expr.of(d["time"]),
                     tuple((c["title"], c["unit"], tuple(Series(s["key"], s["label"], Expr.of(s["expr"]), float(s.get("scale", 1)),
                                                                 bool(s.get("rate", False))) for s in c["series"])) for c in d["charts"]))


def _detail(d: Mapping[str, Any]) -> DetailRule:
    return DetailRule(bool(d.get("scalars", False)),
                      tuple(DetailField(f["label"], Expr.of(f["expr"]), f.get("kind", "text"), _tones(f.get("tones"))) for f in d.get("fields") or ()),
                      tuple(_table(t) for t in d.get("sections") or ()))


def compile_view(data: Mapping[str, Any], origin: Origin | None = None) -> ViewRule:
    """One rule, compiled; raises JMESPathError or re.error on a bad expression."""
    refresh = data.get("refresh")
    parts = {"table": _table, "logs": _logs, "chart": _chart, "detail": _detail}
    return ViewRule(data["name"], data["widget"], data["title"], tuple(data.get("serves") or ()), bool(data.get("default", False)),
                    refresh is not None, (refresh or {}).get("seconds"), _opt(data.get("environment")),
                    tuple(ViewCall.of(a) for a in data.get("actions") or ()),
                    **{k: make(data[k]) for k, make in parts.items() if isinstance(data.get(k), Mapping)}, origin=origin)


def compile_views(loaded_views) -> tuple[ViewRule, ...]:
    """The view rules of the loaded rules/views files, by name; a rule with an expression
    that does not compile is left out (`interp validate` reports it)."""
    from jmespath.exceptions import JMESPathError

    out = []
    for ld in loaded_views:
        try:
            out.append(compile_view(ld.data or {}, ld.origin(["name"])))
        except (JMESPathError, re.error, KeyError, TypeError):
            continue
    return tuple(sorted(out, key=lambda v: v.name))


def _plain(value: Any) -> Any:
    """Loaded YAML as plain JSON values (ruamel's commented maps and sequences)."""
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
            yield where, f"not a JMESPath expression: {' '.join(str(exc).split())[:200]}", "bad_jmespath"
    time = (data.get("logs") or {}).get("time")
    if isinstance(time, str):
        try:
            if re.compile(time).groups < 1:
                yield ["logs", "time"], "the time pattern needs a group (the time)", "bad_regex"
        except re.error as exc:
            yield ["logs", "time"], f"not a regular expression: {exc}", "bad_regex"
    yield from _table_problems(data, catalog, complete)
    for where, act, table in calls(data):
        yield from _call_problems(where, act, table, catalog, complete)


def _table_problems(data: Mapping[str, Any], catalog, complete: bool) -> Iterator[tuple[list, str, str]]:
    """Filters and the sort name columns of their table. (A `column` or `filter` an
    overlay does not have, an operator's overlay may have removed: the column then reads
    the item member of that name, or nothing; not a problem.)"""
    for where, table in tables(data):
        keys = row_keys(table)
        for i, key in enumerate(table.get("filters") or ()):
            if key not in keys:
                yield [*where, "filters", i], f"the filter {key!r} is not a column of the table", "unknown_row_key"
        sort = table.get("sort") or {}
        if sort and sort.get("key") not in keys:
            yield [*where, "sort", "key"], f"the sort key {sort.get('key')!r} is not a column of the table", "unknown_row_key"


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


__all__ = ["VIEW_URI", "WIDGETS", "ArgValue", "ViewCall", "ViewColumn", "ViewRule", "ViewTable", "compile_view", "compile_views", "view_for", "view_problems"]
