"""The path-value sweep of tests/test_path_safety.py: every action with a path parameter,
each of its path parameters given hostile values, through the real dispatcher against a
simulator that labels each request with the action it routed to.

`make test` runs a fixed sample (`sample_cases`): every (action, path parameter) pair with
one value, the value rotating over the pairs so every value is sent many times, and every
value against a fixed set of actions (the first action, by ID, of each shape: read-only or
not, one path parameter or several, a name-resolving parameter or none). `make bench` and
`python -m tests.path_sweep` run the full product (every pair x every value).

Each call is either refused before its own request is sent (invalid_path_value, or
invalid_arguments when the schema or a name lookup refuses it), or the request that
reaches the simulator is the action's own method and path template, routed to the action
itself. The safe-mode preview of every state-changing call shows the path that would be
sent, or the same refusal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from urllib.parse import unquote

from jsonschema import Draft202012Validator

from interpreter.build.schema import PATH
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.request import API_PREFIX, PATH_VALUE_MAX_BYTES, ArcaneClient, prepare
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from tests.helpers import make_dispatcher, ok_json
from tests.redaction_sweep import arguments

USER, PASSWORD = "arcane", "arcane-admin"  # the simulator's demo login (simulator/data/state)

# must never be sent as a path value: each is refused, whatever the action
HOSTILE = ["..", ".", "", "a/..", "%2e%2e", "..%2f", "/", "a/b", "x" * 2048,
           "%252e%252e", "a\\b", "a\x00b", "%2F", "..;", "../" * 5]
# odd but one segment each: sent, and must arrive as one segment of the action's own route
ODD = ["..a.", "a?b#%c é", "x" * PATH_VALUE_MAX_BYTES]
VALUES = HOSTILE + ODD
REFUSALS = ("invalid_path_value", "invalid_arguments")


def path_args(action) -> list[str]:
    return [b.arg for b in action.bindings if b.location == PATH]


def swept_actions(catalog) -> list:
    """Every action with a path parameter (pending ones aside), by ID."""
    return sorted((a for a in catalog.actions.values() if path_args(a) and not a.pending), key=lambda a: a.id)


def fixed_actions(catalog) -> list:
    """The actions every value is tried against in the sample: the first action, by ID, of
    each shape present (read-only or not, x one path parameter or several, x a parameter
    whose name is resolved to an ID or none)."""
    resolved = set(catalog.arguments)
    shapes: dict[tuple, object] = {}
    for a in swept_actions(catalog):
        args = path_args(a)
        shapes.setdefault((a.read_only, len(args) > 1, any(x in resolved for x in args)), a)
    return list(shapes.values())


def full_cases(catalog) -> list[tuple[object, str, str]]:
    return [(a, arg, v) for a in swept_actions(catalog) for arg in path_args(a) for v in VALUES]


def sample_cases(catalog) -> list[tuple[object, str, str]]:
    """A fixed, deterministic part of `full_cases`: every pair with one value (rotating),
    and every value against each of `fixed_actions`' path parameters."""
    pairs = [(a, arg) for a in swept_actions(catalog) for arg in path_args(a)]
    cases = {(a.id, arg, VALUES[i % len(VALUES)]): (a, arg, VALUES[i % len(VALUES)]) for i, (a, arg) in enumerate(pairs)}
    for a in fixed_actions(catalog):
        for arg in path_args(a):
            for v in VALUES:
                cases.setdefault((a.id, arg, v), (a, arg, v))
    order = {a.id: i for i, a in enumerate(swept_actions(catalog))}
    return sorted(cases.values(), key=lambda c: (order[c[0].id], c[1]))


def matches(template: str, raw_path: str) -> bool:
    """Whether a path the simulator received (as sent, percent-encoded) is `template` with
    each placeholder one segment that is not empty and does not decode to a dot segment or
    hold a separator, every literal segment unchanged."""
    want, got = (API_PREFIX + template).split("/"), raw_path.split("/")
    if len(want) != len(got):
        return False
    for w, g in zip(want, got, strict=True):
        if w.startswith("{") and w.endswith("}"):
            value = unquote(g)
            if value in ("", ".", "..") or "/" in value or "\\" in value:
                return False
        elif w != g:
            return False
    return True


def same_path(action, preview: dict, received: str | None, args: dict) -> bool:
    """Whether a preview's path is the one sent: the path the simulator received, byte for
    byte, a masked secret's segment aside; or, when nothing was sent (a name resolved to
    its ID only when sent), exactly the path prepare builds."""
    path = preview["path"]
    if received is None:
        return path == API_PREFIX + prepare(action, args).path
    hidden = {p.split("/")[2] for p in preview.get("masked", []) if p.startswith("/path/")}
    wire = {b.wire: b.arg for b in action.bindings if b.location == PATH}
    template = (API_PREFIX + action.path).split("/")
    shown, got = path.split("/"), received.split("/")
    if not len(template) == len(shown) == len(got):
        return False
    return all(s == g for t, s, g in zip(template, shown, got, strict=True)
               if not (t.startswith("{") and wire.get(t[1:-1]) in hidden))


def dispatcher(catalog, sim, **kw) -> tuple[Dispatcher, ArcaneClient]:
    """An API key and a user session (the simulator's demo user): every action can be sent."""
    settings = Settings(arcane_url=sim.url, api_key=sim.api_key, username=USER, password=PASSWORD, audit_log="off", **kw)
    client = ArcaneClient(settings)
    return Dispatcher(catalog, settings, client, AuditLog("off")), client


async def fitted_arguments(catalog, action) -> dict:
    """Arguments that pass validation and the handler's own checks (arguments only one of
    which may be given): the sweep's failures are then the path value's alone. Tried
    against an in-memory Arcane that answers every request with an empty success."""
    planted, _ = arguments(catalog, action.id)
    planted.pop(catalog.env_arg, None)  # the default environment, which exists
    d, _ = make_dispatcher(catalog, lambda r: ok_json({}))
    args = {k: v for k, v in planted.items() if k in action.required}  # the fewest first: a faster sweep
    res = await d.dispatch(Call(action.id, args, confirm=True))
    if res.error_code != "invalid_arguments":
        return args
    args = planted
    for _ in range(len(args)):
        res = await d.dispatch(Call(action.id, args, confirm=True))
        extra = [f for f in res.error_fields if f in args and f not in action.required and f not in path_args(action)]
        if res.error_code != "invalid_arguments" or not extra:
            break
        del args[extra[-1]]
    return args


@dataclass
class Outcome:
    total: int = 0
    refused: int = 0
    sent: int = 0
    previews: int = 0
    by_code: dict[str, int] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)
    actions: set[str] = field(default_factory=set)
    values: set[str] = field(default_factory=set)
    hostile_calls: int = 0

    def summary(self) -> str:
        return (f"path sweep: {self.total} calls over {len(self.actions)} actions and {len(self.values)} values; "
                f"refused {self.refused} {self.by_code}, sent {self.sent}, wrong {len(self.wrong)}; "
                f"safe-mode previews {self.previews}")


async def sweep(catalog, sim, cases) -> Outcome:
    """Run `cases` ((action, path argument, value) triples) through the dispatcher and a
    safe-mode one, against `sim` (started with `catalog`, so it labels requests)."""
    d, client = dispatcher(catalog, sim)
    safe, safe_client = dispatcher(catalog, sim, safe_mode=True)
    # the dispatcher's reads for a call besides the action's own request: the list actions
    # through which a path argument's name is resolved to an ID (rules/arguments)
    lookups = {rule.list_action for rule in catalog.arguments.values()}
    out = Outcome()
    fitted: dict[str, dict] = {}
    try:
        await client.start()  # the session's login, before the sweep's request log is read
        await safe_client.start()
        for a, arg, value in cases:
            if a.id not in fitted:
                fitted[a.id] = await fitted_arguments(catalog, a)
            out.total += 1
            out.actions.add(a.id)
            out.values.add(value)
            out.hostile_calls += value in HOSTILE
            await _one(catalog, sim, d, safe, lookups, a, arg, value, {**fitted[a.id], arg: value}, out)
    finally:
        await client.aclose()
        await safe_client.aclose()
    return out


async def _one(catalog, sim, d, safe, lookups, a, arg, value, args, out: Outcome) -> None:
    sim.clear_requests()
    res = await d.dispatch(Call(a.id, args, confirm=True))
    got = sim.requests()
    # the action's own request: routed to it, or to a route outside Arcane's document
    # (the simulator labels none) with the action's own method and template
    own = [r for r in got if r.action == a.id or r.action is None and r.method == a.method and matches(a.path, r.raw_path)]
    stray = [r for r in got if r not in own and r.action not in lookups]
    label = f"{a.id} {arg}={value[:20]!r}"
    wrong = out.wrong
    if stray or any(r.method != a.method or not matches(a.path, r.raw_path) for r in own):
        wrong.append(f"{label}: {[(r.method, r.raw_path, r.action) for r in got]}")
        return
    if own:
        out.sent += 1
        if value in HOSTILE:
            wrong.append(f"{label}: a hostile value was sent: {[(r.method, r.raw_path) for r in own]}")
    elif res.is_error and res.error_code in REFUSALS and arg in res.error_fields:
        out.refused += 1
        out.by_code[res.error_code] = out.by_code.get(res.error_code, 0) + 1
        if "Traceback" in res.text or res.text.count("\n") > 3:
            wrong.append(f"{label}: the refusal is not a short error: {res.text[:200]!r}")
        # what the schema lets through, the path check refuses with its own code
        if value in HOSTILE and Draft202012Validator(a.input_schema["properties"][arg]).is_valid(value) \
                and res.error_code != "invalid_path_value":
            wrong.append(f"{label}: refused as {res.error_code}, not invalid_path_value: {res.text[:200]!r}")
    else:
        wrong.append(f"{label}: neither sent nor refused for the path value: "
                     f"{res.error_code} {res.error_fields} {res.text[:200]!r}")
        return
    if a.read_only:
        return
    # the safe-mode preview of the same call: the same refusal, or the path sent
    sim.clear_requests()
    shown = await safe.dispatch(Call(a.id, args, confirm=True))
    preview = (shown.structured or {}) if not shown.is_error else {}
    if not preview.get("preview"):
        if not (shown.is_error and shown.error_code in REFUSALS and arg in shown.error_fields) or own \
                or [r for r in sim.requests() if r.method != "GET"]:  # at most a name's lookup was read
            wrong.append(f"{label}: safe mode answered {shown.error_code} {shown.text[:200]!r}")
        return
    if res.error_code == "invalid_path_value":
        wrong.append(f"{label}: refused, yet safe mode previews {preview['path']!r}")
        return
    out.previews += 1
    full = {catalog.env_arg: safe.settings.environment_id, **args} \
        if catalog.env_arg in a.input_schema["properties"] else args
    # a preview sends at most the confirmation question's reads, never a change
    changed = [r for r in sim.requests() if r.method != "GET"]
    if not same_path(a, preview, own[0].raw_path if own else None, full) or changed:
        wrong.append(f"{label}: the preview shows {preview['path']!r}, the request was "
                     f"{own[0].raw_path if own else prepare(a, full).path!r}")


async def full_sweep() -> tuple[Outcome, float]:
    """The whole product, for `make bench`: (outcome, seconds)."""
    from interpreter.build.catalog import build
    from simulator import start_simulator

    catalog = build()
    # the sweep's expected failures (a sent odd value Arcane refuses, a refused websocket) are
    # logged as warnings by the dispatcher and the simulator's server: not the bench's output
    quiet = [logging.getLogger(name) for name in ("arcane_mcp", "uvicorn.error")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.CRITICAL)
    t = time.perf_counter()
    try:
        with start_simulator(catalog=catalog) as sim:
            out = await sweep(catalog, sim, full_cases(catalog))
    finally:
        for q, level in zip(quiet, levels, strict=True):
            q.setLevel(level)
    return out, time.perf_counter() - t


if __name__ == "__main__":
    result, seconds = asyncio.run(full_sweep())
    print(f"{result.summary()}; {seconds:.0f} s")
    for line in result.wrong[:30]:
        print(line)
