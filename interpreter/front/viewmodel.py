"""The view model of an MCP Apps view (version 1): what a result's view renders, built by
the engine from the view rule (rules/views/*.yaml, build/view_rules.py) and the result's
structuredContent, already redacted by rules/redaction.yaml as a resource is
(redact.Rules.for_resource) and each text scrubbed of the credentials its free-text rules
find. The view evaluates nothing: every value is projected here, bounded (MAX_ROWS rows,
MAX_LINES log lines, MAX_POINTS samples, MAX_TEXT characters a text, cut with a mark) and
JSON-safe (text, a finite number or null: a boolean is written "true"/"false", a list or
an object as compact JSON text). Every value from Arcane is untrusted text for the view.

The follow-up calls (row actions, view actions, refresh, follow) are CALLs for the tool
names of the calling surface; an action the server does not serve (read-only mode, the
credential, exclusions) is left out. A row action's `{row: key}` argument becomes the
placeholder `{"$row": key}` the view replaces with that row's value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..build.model import Expr
from ..build.view_rules import ArgValue, ViewCall, ViewColumn, ViewRule, ViewTable
from ..text.render import ToolResult
from .names import EXECUTE_TOOL, tool_name_individual, tool_name_meta

VERSION = 1
MAX_ROWS = 500
MAX_LINES = 2000
MAX_POINTS = 500
MAX_TEXT = 2000
MAX_FIELDS = 64
MAX_FILTER_VALUES = 50
CUT_MARK = "…"


def search(expr: Expr | None, value: Any) -> Any:
    return None if expr is None else expr.search(value)


def clean(value: Any, scrub: Callable[[str], str] | None = None) -> str | int | float | None:
    """A value as the view model holds it: text (cut at MAX_TEXT with a mark), a finite
    number or null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return value if abs(value) < 2**53 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)[: MAX_TEXT + 1]
    if scrub is not None:
        value = scrub(value)
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + CUT_MARK


class Builder:
    """Builds the view models of one server (its catalog, surface and redaction)."""

    def __init__(self, catalog, surface: str, environment: str | None = None):
        self.catalog = catalog
        self.surface = surface
        self.environment = environment  # the server's default environment (ARCANE_ENVIRONMENT_ID)
        redaction = catalog.redaction
        self.scrub = (lambda t: redaction.scrub(t, side="response")) if redaction is not None else None

    # ------------------------------------------------------------ calls

    def call(self, action_id: str, args: dict) -> dict:
        """The CALL of an action on this surface."""
        if self.surface == "individual":
            return {"name": tool_name_individual(action_id), "arguments": args}
        if self.surface == "meta":
            domain, name = action_id.split(".", 1)
            return {"name": tool_name_meta(domain), "arguments": {"action": name, "params": args}}
        return {"name": EXECUTE_TOOL, "arguments": {"action": action_id, "params": args}}

    def _args(self, target, written: tuple[tuple[str, ArgValue], ...], own: Mapping[str, Any],
              computed: Mapping[str, Any] | None = None) -> dict:
        """A call's arguments: the environment of the served call (when the action takes it),
        then the rule's: `row` as the view's placeholder, `arg` the served call's own
        argument, `last` a value computed here (left out when there is none)."""
        params = (target.input_schema or {}).get("properties") or {}
        env = self.catalog.env_arg
        out: dict[str, Any] = {env: own[env]} if env in params and env in own else {}
        for param, value in written:
            if value.kind == "row":
                out[param] = {"$row": value.ref}
            elif value.kind == "arg":
                if value.ref in own:
                    out[param] = own[value.ref]
            elif value.kind == "last":
                got = (computed or {}).get(value.ref or "")
                if got is not None:
                    out[param] = got
                else:
                    out.pop(param, None)
            else:
                out[param] = json.loads(value.literal or "null")
        return out

    def actions(self, written: tuple[ViewCall, ...], own: Mapping[str, Any]) -> list[dict]:
        """The ACTIONs of a rule's call list; an action not served here is left out."""
        out = []
        for act in written:
            target = self.catalog.actions.get(act.action)
            if target is None:
                continue
            out.append({"id": act.id, "label": act.label, "destructive": bool(target.destructive),
                        "call": self.call(target.id, self._args(target, act.args, own))})
        return out

    # ------------------------------------------------------------ the model

    def build(self, rule: ViewRule, result: ToolResult) -> dict:
        action_id = result.action or ""
        own = dict(result.arguments or {})
        value: Any = result.structured if result.structured is not None else {}
        if self.catalog.redaction is not None and action_id:
            value = self.catalog.redaction.for_resource(value, action_id)
        env = own.get(self.catalog.env_arg, self.environment)
        model: dict[str, Any] = {
            "version": VERSION, "view": rule.name, "widget": rule.widget, "title": rule.title, "action": action_id,
            "isError": bool(result.is_error), "message": self._message(result),
            "environment": None if env is None else {"id": clean(str(env)), "name": clean(search(rule.environment, value), self.scrub)},
            "refresh": self.call(action_id, own) if rule.refresh and action_id else None,
            "refreshSeconds": rule.refresh_seconds,
            "actions": self.actions(rule.actions, own),
        }
        model.update(WIDGETS[rule.widget](self, rule, value, own, action_id))
        return model

    def _message(self, result: ToolResult) -> str | None:
        if not result.is_error:
            return None
        first = next((line for line in result.text.splitlines() if line.strip()), "")
        return clean(first.lstrip("# ").strip(), self.scrub)

    # ------------------------------------------------------------ widgets

    def table(self, rule: ViewRule, value, own, action_id) -> dict:
        t = rule.table
        if t is None:
            return {"columns": [], "rows": [], "rowKeys": [], "filters": [], "rowActions": [], "total": None, "shown": 0, "sort": None}
        out = self._table(t, value, own, action_id)
        total = search(t.total, value)
        out.update(total=total if isinstance(total, int) and not isinstance(total, bool) else None, shown=len(out["rows"]))
        out["sort"] = {"key": t.sort[0], "dir": t.sort[1]} if t.sort else None
        return out

    def _table(self, t: ViewTable, value, own, action_id) -> dict:
        items = search(t.rows, value)
        items = items[:MAX_ROWS] if isinstance(items, list) else []
        getters = [(c.key, self._getter(c, action_id)) for c in t.columns] + [(k, e.runner()) for k, e in t.hidden]
        rows = [{k: clean(get(item), self.scrub) for k, get in getters} for item in items]
        columns = [{"key": c.key, "label": c.label, "kind": c.kind, "tones": dict(c.tones) if c.tones is not None else None,
                    "sortable": c.sortable} for c in t.columns]
        labels = {c.key: c.label for c in t.columns}
        filters = [{"key": k, "label": labels.get(k, k),
                    "values": sorted({str(r[k]) for r in rows if r.get(k) is not None})[:MAX_FILTER_VALUES]} for k in t.filters]
        return {"columns": columns, "rows": rows, "rowKeys": [k for k, _ in t.hidden], "filters": filters,
                "rowActions": self.actions(t.row_actions, own)}

    def _getter(self, col: ViewColumn, action_id: str) -> Callable[[Any], Any]:
        """The column's value of an item: its expression, the overlay's client filter or
        column it names, else the item member of that name."""
        if col.expr is not None:
            return col.expr.runner()
        action = self.catalog.actions.get(action_id) or self.catalog.all_actions.get(action_id)
        if col.source == "filter":
            filters = getattr(action, "client_filters", None)
            for f in filters.params if filters is not None else ():
                if f.name == col.ref:
                    return f.value.runner()
            return lambda item: None
        for c in getattr(action, "columns", None) or ():
            if c.label == col.ref:
                return c.getter()
        name = col.ref
        return lambda item: item.get(name) if isinstance(item, dict) else None

    def logs(self, rule: ViewRule, value, own, action_id) -> dict:
        lr = rule.logs
        raw = search(lr.lines, value) if lr is not None else None
        raw = raw if isinstance(raw, list) else []
        lines = [self._line(lr, text) for text in raw[-MAX_LINES:]]
        last = next((ln["time"] for ln in reversed(lines) if ln["time"]), None)
        target = self.catalog.actions.get(action_id)
        follow = None
        if lr is not None and lr.follow is not None and target is not None:
            follow = self.call(action_id, {**own, **self._args(target, lr.follow, own, {"time": last})})
            if last is None:
                _drop_last(follow, lr.follow, self.surface)
        truncated = bool(search(lr.truncated, value)) if lr is not None else False
        return {"lines": lines, "follow": follow, "truncated": truncated or len(raw) > MAX_LINES}

    def _line(self, lr, text: Any) -> dict:
        text = text if isinstance(text, str) else str(clean(text) or "")
        stream = lr.default_stream
        for prefix, named in lr.streams:
            if text.startswith(prefix):
                stream, text = named, text[len(prefix):]
                break
        time = None
        if lr.time is not None:
            m = lr.time.match(text)
            if m:
                time, text = clean(m.group(1)), text[m.end():]
        return {"stream": stream, "time": time, "text": clean(text, self.scrub)}

    def chart(self, rule: ViewRule, value, own, action_id) -> dict:
        cr = rule.chart
        if cr is None:
            return {"charts": []}
        samples = search(cr.samples, value)
        samples = samples[-MAX_POINTS:] if isinstance(samples, list) else []
        times = [epoch_ms(cr.time.search(s)) for s in samples]
        charts = [{"title": title, "unit": unit,
                   "series": [{"key": s.key, "label": s.label, "points": _points(s, samples, times)} for s in series]}
                  for title, unit, series in cr.charts]
        return {"charts": charts}

    def detail(self, rule: ViewRule, value, own, action_id) -> dict:
        dr = rule.detail
        if dr is None:
            return {"fields": [], "sections": []}
        fields = [{"label": f.label, "value": clean(f.expr.search(value), self.scrub), "kind": f.kind,
                   "tones": dict(f.tones) if f.tones is not None else None} for f in dr.fields]
        if dr.scalars and isinstance(value, dict):
            fields += [{"label": clean(k, self.scrub), "value": clean(v, self.scrub), "kind": "text", "tones": None}
                       for k, v in value.items() if not str(k).startswith("$") and (v is None or isinstance(v, (str, int, float, bool)))]
        sections = []
        for sec in dr.sections:
            built = self._table(sec, value, own, action_id)
            sections.append({"title": sec.title, **{k: built[k] for k in ("columns", "rows", "rowKeys", "rowActions")}})
        return {"fields": fields[:MAX_FIELDS], "sections": sections}


def _drop_last(call: dict, written: tuple[tuple[str, ArgValue], ...], surface: str) -> None:
    """Leave out of a follow call the arguments whose computed value is unknown."""
    args = call["arguments"] if surface == "individual" else call["arguments"]["params"]
    for param, value in written:
        if value.kind == "last":
            args.pop(param, None)


WIDGETS: dict[str, Callable[..., dict]] = {"table": Builder.table, "logs": Builder.logs, "chart": Builder.chart, "detail": Builder.detail}

_FRACTION = re.compile(r"(\.\d{6})\d+")


def epoch_ms(value: Any) -> int | None:
    """A time as epoch milliseconds: RFC 3339 text (nanoseconds cut to micro), or epoch
    seconds (milliseconds when it is that large)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(value if value > 1e11 else value * 1000)
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(_FRACTION.sub(r"\1", value[:64])).timestamp() * 1000)
        except ValueError:
            return None
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _points(series, samples: list, times: list[int | None]) -> list[list]:
    """A series' points [epoch ms, value]: scaled, or as a rate per second between samples."""
    get, scale = series.expr.runner(), series.scale
    values = [_number(get(s)) for s in samples]
    out: list[list] = []
    prev: tuple[int, float] | None = None
    for t, v in zip(times, values, strict=True):
        if t is None or v is None:
            continue
        if series.rate:
            if prev is not None and t > prev[0]:
                out.append([t, round(max(v - prev[1], 0) / ((t - prev[0]) / 1000) * scale, 3)])
            prev = (t, v)
        else:
            out.append([t, round(v * scale, 3)])
    return out


__all__ = ["Builder", "MAX_ROWS", "MAX_TEXT", "VERSION", "clean", "epoch_ms"]
