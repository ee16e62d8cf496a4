"""The small template language of the simulator's YAML files.

Behaviour data (simulator/data/behaviour/*.yaml) and `$repeat` entries of a state are
templates: plain YAML values in which

* a string holding `{expr}` placeholders is interpolated; a string that is exactly one
  placeholder yields the raw value (so `"{item.created}"` stays an integer);
* `{{` and `}}` are literal braces;
* a mapping whose only key starts with `$` is an operator (`$count`, `$sum`, `$group`,
  `$select`, `$each`, `$csv`, `$switch`, `$find`);
* every other mapping and list is rendered member by member; a key holding a
  placeholder is rendered too (`{"{item.name}": …}` names a member by a value).

`expr` is a path (`item.names.0`, `item.labels["com.docker.compose.project"]`,
`body.name`, `query.force`, `path.containerId`, `env`, `n`, `now`) or a quoted
literal (`'text'`), followed by `|filter` or `|filter:argument` steps. The argument is
everything after the first colon, verbatim, so `|split::` splits on ":". `a ?? b` is `a`
unless it is missing or empty, then `b`. Filters are listed in FILTERS;
docs/simulator.md describes each.

Nothing here knows a domain: the behaviour file says what to render.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["TemplateError", "render", "evaluate", "get_path", "parse_path", "matches_where", "FILTERS"]


class TemplateError(ValueError):
    """A template cannot be parsed or evaluated (a behaviour-file bug, reported with its text)."""


_MISSING = object()
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")
_PATH_TOKEN = re.compile(r"""\s*(?:\[\s*(?:"([^"]*)"|'([^']*)'|(-?\d+))\s*\]|\.?([^.\[\]]+))""")


def parse_path(text: str) -> tuple[str | int, ...]:
    """`a.b.0` / `labels["x.y"]` -> ("a", "b", 0) / ("labels", "x.y")."""
    text = text.strip()
    parts: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _PATH_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise TemplateError(f"bad path {text!r} at {text[pos:]!r}")
        dq, sq, idx, bare = m.groups()
        if idx is not None:
            parts.append(int(idx))
        elif dq is not None or sq is not None:
            parts.append(dq if dq is not None else sq)
        else:
            parts.append(int(bare) if bare.lstrip("-").isdigit() else bare)
        pos = m.end()
    return tuple(parts)


def get_path(value: Any, path: Iterable[str | int], default: Any = None) -> Any:
    node = value
    for part in path:
        if isinstance(node, Mapping):
            if part in node:
                node = node[part]
            elif str(part) in node:
                node = node[str(part)]
            else:
                return default
        elif isinstance(node, (list, tuple)) and isinstance(part, int):
            if -len(node) <= part < len(node):
                node = node[part]
            else:
                return default
        else:
            return default
    return node


def _literal(arg: str) -> Any:
    """A filter argument or default: JSON scalars (1, true, null) keep their type."""
    try:
        v = json.loads(arg)
    except (ValueError, TypeError):
        return arg
    return v if isinstance(v, (int, float, bool)) or v is None else arg


def _iso(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _dt.datetime.fromtimestamp(value, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def _hex(value: Any, arg: str) -> str:
    n = int(arg or 64)
    out = ""
    seed = str(value)
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()
        i += 1
    return out[:n]


def _split(value: Any, arg: str) -> Any:
    return str(value).split(arg or None) if value is not None else []


def _eq(value: Any, arg: str) -> bool:
    return _scalar_text(value) == arg


def _imagefile(value: Any, arg: str) -> str:
    """An image reference as Arcane's export names it: / : @ become _, then ".tar"."""
    name = str(value or "")
    for ch in "/:@":
        name = name.replace(ch, "_")
    return (name.strip("._-") or "image") + ".tar"


def _yaml(value: Any, arg: str) -> Any:
    """Text parsed as YAML (a Compose file's services, say); None when it does not parse."""
    if not isinstance(value, str) or not value.strip():
        return None
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        parsed = YAML(typ="safe").load(io.StringIO(value))
    except YAMLError:
        return None
    return json.loads(json.dumps(parsed, default=str))


def _logtext(private: Any) -> str:
    """A container's whole log as `docker logs --timestamps` shows it: its stdout (`logs`)
    and stderr lines in time order, without marks."""
    if not isinstance(private, Mapping):
        return ""
    lines = []
    for n, member in enumerate(("logs", "stderr")):
        for i, line in enumerate(str(private.get(member) or "").splitlines()):
            lines.append((line.split(" ", 1)[0], n, i, line))
    return "".join(line + "\n" for *_, line in sorted(lines))


def _int_or_zero(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _map(value: Any, table: str) -> Any:
    """`map:a=x,b=y`: the value looked up in a small table (missing: None, so `?? b` falls back)."""
    pairs = dict(entry.partition("=")[::2] for entry in table.split(",") if entry)
    return pairs.get(_scalar_text(value))


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


FILTERS: dict[str, Callable[[Any, str], Any]] = {
    "default": lambda v, a: _literal(a) if v is None or v == "" else v,
    "eq": _eq,
    "ne": lambda v, a: not _eq(v, a),
    "lstrip": lambda v, a: str(v).lstrip(a or None) if v is not None else v,
    "rstrip": lambda v, a: str(v).rstrip(a or None) if v is not None else v,
    "iso": lambda v, a: _iso(v),
    "first": lambda v, a: (v[0] if v else None) if isinstance(v, (list, tuple)) else v,
    "last": lambda v, a: (v[-1] if v else None) if isinstance(v, (list, tuple)) else v,
    "lower": lambda v, a: str(v).lower() if v is not None else v,
    "upper": lambda v, a: str(v).upper() if v is not None else v,
    "str": lambda v, a: _scalar_text(v),
    "int": lambda v, a: int(v) if v not in (None, "") else 0,
    "bool": lambda v, a: v if isinstance(v, bool) else _scalar_text(v).lower() in ("1", "true", "yes", "on"),
    "not": lambda v, a: not v,
    "hex": _hex,
    "short": lambda v, a: str(v)[: int(a or 12)] if v is not None else v,
    "format": lambda v, a: format(v, a),
    "json": lambda v, a: json.dumps(v, ensure_ascii=False, sort_keys=True),
    "join": lambda v, a: (a if a else ",").join(map(_scalar_text, v)) if isinstance(v, (list, tuple)) else _scalar_text(v),
    "split": _split,
    "before": lambda v, a: str(v).rpartition(a)[0] if v is not None and a in str(v) else v,
    "after": lambda v, a: str(v).rpartition(a)[2] if v is not None and a in str(v) else "",
    "len": lambda v, a: len(v) if v is not None else 0,
    "add": lambda v, a: (v or 0) + _literal(a),
    "oneof": lambda v, a: _scalar_text(v) in a.split(","),
    "prefix": lambda v, a: (a + _scalar_text(v)) if v not in (None, "") else "",
    "imagefile": _imagefile,
    "basename": lambda v, a: str(v or "").rstrip("/").rsplit("/", 1)[-1],
    "dirname": lambda v, a: "/" + str(v or "").strip("/").rpartition("/")[0],
    "public": lambda v, a: {k: x for k, x in v.items() if k != "_sim"} if isinstance(v, dict) else v,
    "yaml": _yaml,
    "at": lambda v, a: v.get(a) if isinstance(v, dict) else None,
    "items": lambda v, a: [{"key": k, "value": x} for k, x in v.items()] if isinstance(v, dict) else [],
    "list": lambda v, a: v if isinstance(v, list) else ([] if v is None else [v]),
    "range": lambda v, a: list(range(1, min(_int_or_zero(v), int(a or 100)) + 1)),
    "logtext": lambda v, a: _logtext(v),
    "map": lambda v, a: _map(v, a),
}

# Filters that read the context too: `oneof_data:NAME` tests the value against the named
# list of the behaviour's `data:` section (ctx["data"]).
CTX_FILTERS: dict[str, Callable[[Any, str, Mapping[str, Any]], Any]] = {
    "oneof_data": lambda v, a, ctx: _scalar_text(v) in map(_scalar_text, (ctx.get("data") or {}).get(a, [])),
}


def _split_pipes(expr: str) -> list[str]:
    """Split on `|` outside quotes and brackets."""
    out, buf, quote, depth = [], [], None, 0
    for ch in expr:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif ch == "[":
            depth += 1
            buf.append(ch)
        elif ch == "]":
            depth -= 1
            buf.append(ch)
        elif ch == "|" and depth == 0:
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    out.append("".join(buf))
    return out


def _split_alternatives(expr: str) -> list[str]:
    """Split on `??` outside quotes: `a ?? b` is a, or b when a is missing or empty."""
    out, buf, quote, i = [], [], None, 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif expr.startswith("??", i):
            out.append("".join(buf))
            buf = []
            i += 2
            continue
        buf.append(ch)
        i += 1
    out.append("".join(buf))
    return out


def evaluate(expr: str, ctx: Mapping[str, Any]) -> Any:
    """Evaluate one placeholder expression (without braces); `a ?? b` falls back to b."""
    alternatives = _split_alternatives(expr)
    value: Any = None
    for alt in alternatives:
        value = _evaluate_one(alt, ctx)
        if value is not None and value != "":
            return value
    return value


def _evaluate_one(expr: str, ctx: Mapping[str, Any]) -> Any:
    steps = _split_pipes(expr)
    head = steps[0].strip()
    if len(head) >= 2 and head[0] == head[-1] and head[0] in "'\"":
        value: Any = head[1:-1]
    elif head == "":
        raise TemplateError(f"empty expression in {{{expr}}}")
    else:
        path = parse_path(head)
        root = path[0]
        if root not in ctx:
            raise TemplateError(f"unknown name {root!r} in {{{expr}}}; known: {', '.join(sorted(map(str, ctx)))}")
        base = ctx[root]
        if callable(base):  # generated values (fresh IDs, counters) are computed on use
            base = base()
        value = get_path(base, path[1:]) if len(path) > 1 else base
    for step in steps[1:]:
        name, _, arg = step.partition(":")  # the argument is taken verbatim (`|join: ` joins with a space)
        name = name.strip()
        fn = FILTERS.get(name)
        ctx_fn = CTX_FILTERS.get(name)
        if fn is None and ctx_fn is None:
            raise TemplateError(f"unknown filter {name!r} in {{{expr}}}; known: {', '.join(sorted([*FILTERS, *CTX_FILTERS]))}")
        try:
            value = fn(value, arg) if fn is not None else ctx_fn(value, arg, ctx)
        except (TypeError, ValueError) as exc:
            raise TemplateError(f"filter {name!r} failed on {value!r} in {{{expr}}}: {exc}") from exc
    return value


def _render_string(text: str, ctx: Mapping[str, Any]) -> Any:
    matches = list(_PLACEHOLDER.finditer(text))
    if not matches:
        return text
    if len(matches) == 1 and matches[0].group(1) is not None and matches[0].span() == (0, len(text)):
        return evaluate(matches[0].group(1), ctx)
    out = []
    pos = 0
    for m in matches:
        out.append(text[pos : m.start()])
        token = m.group(0)
        if token == "{{":
            out.append("{")
        elif token == "}}":
            out.append("}")
        else:
            out.append(_scalar_text(evaluate(m.group(1), ctx)))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def matches_where(item: Any, where: Mapping[str, Any] | None, ctx: Mapping[str, Any]) -> bool:
    """Every `path: value` of `where` holds for `item` (a list field holds when it contains
    the value); a path with `{placeholders}` is rendered first (a member named by a value)."""
    for key, expected in (where or {}).items():
        want = render(expected, ctx)
        got = get_path(item, parse_path(_render_string(key, ctx) if "{" in key else key))
        if isinstance(want, list) and not isinstance(got, list):
            # a list of values: the member is one of them
            if got not in want and _scalar_text(got) not in map(_scalar_text, want):
                return False
        elif isinstance(got, list) and not isinstance(want, list):
            if want not in got and _scalar_text(want) not in map(_scalar_text, got):
                return False
        elif got != want and _scalar_text(got) != _scalar_text(want):
            return False
    return True


def _items(ctx: Mapping[str, Any], spec: Mapping[str, Any]) -> list:
    """The items an operator works on: `from: <collection>` (the state, through
    ctx["state"]), or `of: <path>` in the context (default: the operation's collection);
    none when a `when` template renders false."""
    if "when" in spec and not render(spec["when"], ctx):
        return []  # a condition that does not hold: nothing to go over
    if "from" in spec:
        lookup = ctx.get("state")
        if not callable(lookup):
            raise TemplateError(f"`from: {spec['from']}` needs the simulator's state in this context")
        items = lookup(spec["from"])
    elif isinstance(spec.get("of"), str) and "{" in spec["of"]:
        items = render(spec["of"], ctx)  # a template giving the list
        if items is None:
            items = []
        if not isinstance(items, list):
            raise TemplateError(f"`of: {spec['of']}` does not give a list")
    else:
        source = spec.get("of", "collection")
        path = parse_path(source)
        items = get_path(ctx, path) if path and path[0] in ctx else None
        if items is None and path and path[0] in ctx:
            items = []  # a missing member: nothing to go over
        if not isinstance(items, list):
            raise TemplateError(f"`of: {source}` does not name a list in this context")
    out = [i for i in items if matches_where(i, spec.get("where"), ctx)]
    if spec.get("where_not"):
        out = [i for i in out if not matches_where(i, spec.get("where_not"), ctx)]
    return out


def _op_count(spec: Any, ctx: Mapping[str, Any]) -> int:
    return len(_items(ctx, spec or {}))


def _op_sum(spec: Any, ctx: Mapping[str, Any]) -> Any:
    field = parse_path(spec["field"])
    total = 0
    for item in _items(ctx, spec):
        v = get_path(item, field)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            total += v
    return total


def _op_group(spec: Any, ctx: Mapping[str, Any]) -> Any:
    """Group a list by a field: [{<name_key>: value, <items_key>: [...]}, ...] in first-seen order."""
    when = spec.get("when")
    if when is not None and not render(when, ctx):
        return None
    field = parse_path(spec["by"])
    name_key = spec.get("name_key", "groupName")
    items_key = spec.get("items_key", "items")
    groups: dict[str, list] = {}
    for item in _items(ctx, spec):
        value = get_path(item, field)
        name = _scalar_text(value) if value not in (None, "") else str(spec.get("default", ""))
        groups.setdefault(name, []).append(item)
    return [{name_key: name, items_key: members} for name, members in groups.items()]


def _op_select(spec: Any, ctx: Mapping[str, Any]) -> Any:
    """The matching items (or one `field` of each), private members left out."""
    items = [{k: v for k, v in i.items() if k != "_sim"} if isinstance(i, dict) else i for i in _items(ctx, spec)]
    if spec.get("field"):
        path = parse_path(spec["field"])
        values = [get_path(i, path) for i in items]
        if spec.get("unique"):
            values = list(dict.fromkeys(_scalar_text(v) for v in values if v not in (None, "")))
        return (values[0] if values else None) if spec.get("one") else values
    return (items[0] if items else None) if spec.get("one") else items


def _op_each(spec: Any, ctx: Mapping[str, Any]) -> list:
    """`line` (or `item`) rendered once per item (`it`): a list, flattened into the enclosing list."""
    template = spec["line"] if "line" in spec else spec["item"]
    return [render(template, {**ctx, "it": it}) for it in _items(ctx, spec)]


def _op_csv(spec: Any, ctx: Mapping[str, Any]) -> str:
    """CSV rows (no header) of `fields` of the items; fields with , " or a newline are quoted."""
    def cell(v: Any) -> str:
        text = _scalar_text(v)
        return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n\r') else text
    fields = [parse_path(f) for f in spec["fields"]]
    return "".join(",".join(cell(get_path(i, f)) for f in fields) + "\n" for i in _items(ctx, spec))


def _op_switch(spec: Any, ctx: Mapping[str, Any]) -> Any:
    """`value` rendered to text picks one of `cases` (rendered), else `default` (or null)."""
    key = _scalar_text(render(spec["value"], ctx))
    cases = spec.get("cases") or {}
    return render(cases[key], ctx) if key in cases else render(spec.get("default"), ctx)


def _op_find(spec: Any, ctx: Mapping[str, Any]) -> Any:
    """`$find: {from: C, key: <template>}`: the item of collection C a path key would name
    (its lookup members, trims and unique prefixes, as the simulator resolves a path
    parameter), private members left out; None when nothing (or more than one) matches."""
    lookup = ctx.get("find")
    if not callable(lookup):
        raise TemplateError(f"`$find` needs the simulator's state in this context (from: {spec.get('from')!r})")
    if "when" in spec and not render(spec["when"], ctx):
        return None
    key = render(spec.get("key"), ctx)
    if key in (None, ""):
        return None
    item = lookup(spec["from"], _scalar_text(key))
    return {k: v for k, v in item.items() if k != "_sim"} if isinstance(item, dict) else None


OPERATORS: dict[str, Callable[[Any, Mapping[str, Any]], Any]] = {
    "$count": _op_count,
    "$sum": _op_sum,
    "$group": _op_group,
    "$select": _op_select,
    "$each": _op_each,
    "$csv": _op_csv,
    "$switch": _op_switch,
    "$find": _op_find,
}


def render(template: Any, ctx: Mapping[str, Any]) -> Any:
    """Render a template value against a context."""
    if isinstance(template, str):
        return _render_string(template, ctx)
    if isinstance(template, Mapping):
        if len(template) == 1:
            (key, spec), = template.items()
            if isinstance(key, str) and key.startswith("$"):
                op = OPERATORS.get(key)
                if op is None:
                    raise TemplateError(f"unknown operator {key!r}; known: {', '.join(sorted(OPERATORS))}")
                return op(spec, ctx)
        return {(_scalar_text(_render_string(k, ctx)) if isinstance(k, str) and "{" in k else k): render(v, ctx)
                for k, v in template.items()}
    if isinstance(template, list):
        out = []
        for v in template:
            rendered = render(v, ctx)
            # an $each inside a list spreads its lines into the list
            if isinstance(v, Mapping) and len(v) == 1 and "$each" in v and isinstance(rendered, list):
                out.extend(rendered)
            else:
                out.append(rendered)
        return out
    return template
