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
from functools import lru_cache
from typing import Any

from ..build.model import Expr
from ..build.view_rules import ViewRule, tables
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


@lru_cache(maxsize=1024)
def _expr(text: str) -> Callable[[Any], Any]:
    """A rule's expression, compiled once per process (the rules are a bounded set)."""
    return Expr.of(text).runner()


@lru_cache(maxsize=64)
def _regex(text: str) -> re.Pattern:
    return re.compile(text)


def search(text: str | None, value: Any) -> Any:
    return None if text is None else _expr(text)(value)


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

    def _args(self, target, written: Mapping[str, Any], own: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict:
        """A call's arguments: the environment of the served call (when the action takes it),
        then the rule's, `{row: k}` as the view's placeholder, `{arg: p}` the served call's."""
        params = (target.input_schema or {}).get("properties") or {}
        env = self.catalog.env_arg
        out: dict[str, Any] = {env: own[env]} if env in params and env in own else {}
        for param, value in written.items():
            if isinstance(value, Mapping) and set(value) == {"row"}:
                out[param] = {"$row": value["row"]}
            elif isinstance(value, Mapping) and set(value) == {"arg"}:
                if value["arg"] in own:
                    out[param] = own[value["arg"]]
            elif isinstance(value, Mapping) and set(value) == {"last"}:
                got = (extra or {}).get(value["last"])
                if got is not None:
                    out[param] = got
            else:
                out[param] = value
        return out

    def actions(self, written, own: Mapping[str, Any]) -> list[dict]:
        """The ACTIONs of a rule's call list; an action not served here is left out."""
        out = []
        for act in written or ():
            target = self.catalog.actions.get(act["action"])
            if target is None:
                continue
            out.append({"id": act["id"], "label": act["label"], "destructive": bool(target.destructive),
                        "call": self.call(target.id, self._args(target, act.get("args") or {}, own))})
        return out

    # ------------------------------------------------------------ the model

    def build(self, rule: ViewRule, result: ToolResult) -> dict:
        action_id = result.action or ""
        own = dict(result.arguments or {})
        value: Any = result.structured if result.structured is not None else {}
        if self.catalog.redaction is not None and action_id:
            value = self.catalog.redaction.for_resource(value, action_id)
        spec = rule.spec
        env = own.get(self.catalog.env_arg, self.environment)
        refresh = spec.get("refresh")
        model: dict[str, Any] = {
            "version": VERSION, "view": rule.name, "widget": rule.widget, "title": rule.title, "action": action_id,
            "isError": bool(result.is_error), "message": self._message(result),
            "environment": None if env is None else {"id": clean(str(env)), "name": clean(search(spec.get("environment"), value), self.scrub)},
            "refresh": self.call(action_id, own) if refresh is not None and action_id else None,
            "refreshSeconds": (refresh or {}).get("seconds"),
            "actions": self.actions(spec.get("actions"), own),
        }
        model.update(WIDGETS[rule.widget](self, spec, value, own, action_id))
        return model

    def _message(self, result: ToolResult) -> str | None:
        if not result.is_error:
            return None
        first = next((line for line in result.text.splitlines() if line.strip()), "")
        return clean(first.lstrip("# ").strip(), self.scrub)

    # ------------------------------------------------------------ widgets

    def table(self, spec, value, own, action_id) -> dict:
        t = spec.get("table") or {}
        out = self._table(t, value, own, action_id)
        total = search(t.get("total"), value)
        out.update(total=total if isinstance(total, int) and not isinstance(total, bool) else None, shown=len(out["rows"]))
        out["sort"] = {"key": t["sort"]["key"], "dir": t["sort"].get("dir", "asc")} if t.get("sort") else None
        return out

    def _table(self, t: Mapping[str, Any], value, own, action_id) -> dict:
        items = search(t.get("rows"), value)
        items = items[:MAX_ROWS] if isinstance(items, list) else []
        getters = [(c["key"], self._getter(c, action_id)) for c in t.get("columns") or ()]
        getters += [(k, _expr(text)) for k, text in (t.get("hidden") or {}).items()]
        rows = [{k: clean(get(item), self.scrub) for k, get in getters} for item in items]
        columns = [{"key": c["key"], "label": c["label"], "kind": c.get("kind", "text"), "tones": c.get("tones"),
                    "sortable": c.get("sortable", True)} for c in t.get("columns") or ()]
        labels = {c["key"]: c["label"] for c in columns}
        filters = [{"key": k, "label": labels.get(k, k),
                    "values": sorted({str(r[k]) for r in rows if r.get(k) is not None})[:MAX_FILTER_VALUES]} for k in t.get("filters") or ()]
        return {"columns": columns, "rows": rows, "rowKeys": sorted(t.get("hidden") or {}), "filters": filters,
                "rowActions": self.actions(t.get("row_actions"), own)}

    def _getter(self, col: Mapping[str, Any], action_id: str) -> Callable[[Any], Any]:
        if "expr" in col:
            return _expr(col["expr"])
        action = self.catalog.actions.get(action_id) or self.catalog.all_actions.get(action_id)
        if "filter" in col:
            filters = getattr(action, "client_filters", None)
            for f in filters.params if filters is not None else ():
                if f.name == col["filter"]:
                    return f.value.runner()
        for c in getattr(action, "columns", None) or ():
            if c.label == col.get("column"):
                return c.getter()
        return lambda item: None

    def logs(self, spec, value, own, action_id) -> dict:
        rule = spec.get("logs") or {}
        raw = search(rule.get("lines"), value)
        raw = raw if isinstance(raw, list) else []
        cut = len(raw) > MAX_LINES
        lines = [self._line(rule, text) for text in raw[-MAX_LINES:]]
        last = next((ln["time"] for ln in reversed(lines) if ln["time"]), None)
        follow = rule.get("follow")
        target = self.catalog.actions.get(action_id)
        follow_call = None
        if follow is not None and target is not None:
            args = {**own, **self._args(target, follow.get("args") or {}, own, {"time": last})}
            if last is None:
                args = {k: v for k, v in args.items() if not (isinstance((follow.get("args") or {}).get(k), Mapping) and "last" in follow["args"][k])}
            follow_call = self.call(action_id, args)
        truncated = bool(search(rule.get("truncated"), value)) or cut
        return {"lines": lines, "follow": follow_call, "truncated": truncated}

    def _line(self, rule: Mapping[str, Any], text: Any) -> dict:
        text = text if isinstance(text, str) else clean(text) or ""
        stream = rule.get("default_stream")
        for s in rule.get("streams") or ():
            if text.startswith(s["prefix"]):
                stream, text = s["stream"], text[len(s["prefix"]):]
                break
        time = None
        if rule.get("time"):
            m = _regex(rule["time"]).match(text)
            if m:
                time, text = m.group(1), text[m.end():]
        return {"stream": stream, "time": time, "text": clean(text, self.scrub)}

    def chart(self, spec, value, own, action_id) -> dict:
        rule = spec.get("chart") or {}
        samples = search(rule.get("samples"), value)
        samples = samples[-MAX_POINTS:] if isinstance(samples, list) else []
        times = [epoch_ms(search(rule.get("time"), s)) for s in samples]
        charts = [{"title": c["title"], "unit": c["unit"],
                   "series": [{"key": s["key"], "label": s["label"], "points": _points(s, samples, times)} for s in c["series"]]}
                  for c in rule.get("charts") or ()]
        return {"charts": charts}

    def detail(self, spec, value, own, action_id) -> dict:
        rule = spec.get("detail") or {}
        fields = [{"label": f["label"], "value": clean(search(f["expr"], value), self.scrub), "kind": f.get("kind", "text"),
                   "tones": f.get("tones")} for f in rule.get("fields") or ()]
        if rule.get("scalars") and isinstance(value, dict):
            fields += [{"label": clean(k, self.scrub), "value": clean(v, self.scrub), "kind": "text", "tones": None}
                       for k, v in value.items() if not k.startswith("$") and (v is None or isinstance(v, (str, int, float, bool)))]
        sections = []
        for _, sec in tables({"detail": rule}):
            built = self._table(sec, value, own, action_id)
            sections.append({"title": sec.get("title", ""), **{k: built[k] for k in ("columns", "rows", "rowKeys", "rowActions")}})
        return {"fields": fields[:MAX_FIELDS], "sections": sections}


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


def _points(series: Mapping[str, Any], samples: list, times: list[int | None]) -> list[list]:
    """A series' points [epoch ms, value]: scaled, or as a rate per second between samples."""
    get, scale = _expr(series["expr"]), series.get("scale", 1)
    values = [_number(get(s)) for s in samples]
    out: list[list] = []
    prev: tuple[int, float] | None = None
    for t, v in zip(times, values, strict=True):
        if t is None or v is None:
            continue
        if series.get("rate"):
            if prev is not None and t > prev[0]:
                out.append([t, round(max(v - prev[1], 0) / ((t - prev[0]) / 1000) * scale, 3)])
            prev = (t, v)
        else:
            out.append([t, round(v * scale, 3)])
    return out


__all__ = ["Builder", "MAX_ROWS", "MAX_TEXT", "VERSION", "clean", "epoch_ms"]
