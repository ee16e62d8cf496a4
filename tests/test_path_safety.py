"""Arguments can never change the route (issue 20): every action with a path parameter,
each of its path parameters in turn given each value of a hostile set, through the real
dispatcher against the simulator. Each call is either refused before its own request is
sent (invalid_path_value, or invalid_arguments when the schema or a name lookup refuses
it), or the request that reaches the simulator is the action's own method and path
template, routed to the action itself. The safe-mode preview of every state-changing call
shows the path that would be sent, or the same refusal. Also: a query string too long for
a URL and non-finite numbers are invalid arguments, never an internal error."""

from __future__ import annotations

import math
from urllib.parse import unquote

import pytest
from jsonschema import Draft202012Validator

from interpreter.build.schema import PATH
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.request import (
    API_PREFIX,
    PATH_VALUE_MAX_BYTES,
    QUERY_MAX_BYTES,
    ArcaneClient,
    check_arguments,
    path_value_problem,
    prepare,
    route_problem,
)
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from tests.helpers import make_dispatcher, ok_json
from tests.redaction_sweep import arguments

USER, PASSWORD = "arcane", "arcane-admin"  # the simulator's demo login (simulator/data/state)

pytestmark = pytest.mark.anyio

# must never be sent as a path value: each is refused, whatever the action
HOSTILE = ["..", ".", "", "a/..", "%2e%2e", "..%2f", "/", "a/b", "x" * 2048,
           "%252e%252e", "a\\b", "a\x00b", "%2F", "..;", "../" * 5]
# odd but one segment each: sent, and must arrive as one segment of the action's own route
ODD = ["..a.", "a?b#%c é", "x" * PATH_VALUE_MAX_BYTES]
REFUSALS = ("invalid_path_value", "invalid_arguments")


def path_args(action) -> list[str]:
    return [b.arg for b in action.bindings if b.location == PATH]


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


@pytest.fixture(scope="module")
def labelled_sim(catalog):
    """A simulator that labels each request with the engine action it routed to."""
    from simulator import start_simulator

    with start_simulator(catalog=catalog) as s:
        yield s


def _dispatcher(catalog, sim, **kw) -> tuple[Dispatcher, ArcaneClient]:
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


def test_path_value_problem_refuses_what_can_leave_one_segment():
    for value in HOSTILE:
        assert path_value_problem(value) is not None, repr(value)
    for value in ODD:
        assert path_value_problem(value) is None, repr(value)
    # the text is percent-decoded until it no longer changes: a triple encoding is caught too
    assert path_value_problem("%25252e%25252e") is not None and path_value_problem("%2525") is None
    # look-alikes a proxy that normalises Unicode (NFKC) would turn into `..` or `/`, raw or encoded
    for value in ("\uff0e\uff0e", "a\uff0fb", "%EF%BC%8E%EF%BC%8E", "\uff3c"):
        assert path_value_problem(value) is not None, repr(value)
    for value in ("\u540d\u524d", "caf\u00e9", "\u2215"):  # other text stays one segment
        assert path_value_problem(value) is None, repr(value)


def test_route_problem_checks_segments_and_literals():
    t = "/environments/{id}/volumes/{volumeName}"
    assert route_problem(t, "/environments/0/volumes/web") is None
    assert route_problem(t, "/environments/0/volumes/%2E%2E") is not None  # a dot segment once decoded
    assert route_problem(t, "/environments/0/volumes/") is not None
    assert route_problem(t, "/environments/0/volumes/a/b") is not None
    assert route_problem(t, "/environments/0/networks/web") is not None


async def test_every_path_parameter_of_every_action_against_hostile_values(catalog, labelled_sim):
    sim = labelled_sim
    actions = [a for a in catalog.actions.values() if path_args(a) and not a.pending]
    assert len(actions) > 250  # every action with a path parameter, not a sample
    d, client = _dispatcher(catalog, sim)
    safe, safe_client = _dispatcher(catalog, sim, safe_mode=True)
    # the dispatcher's reads for a call besides the action's own request: the list actions
    # through which a path argument's name is resolved to an ID (rules/arguments)
    lookups = {rule.list_action for rule in catalog.arguments.values()}
    total = refused = sent = previews = 0
    by_code: dict[str, int] = {}
    wrong: list[str] = []
    try:
        await client.start()  # the session's login, before the sweep's request log is read
        await safe_client.start()
        for a in actions:
            base = await fitted_arguments(catalog, a)
            for arg in path_args(a):
                for value in HOSTILE + ODD:
                    total += 1
                    args = {**base, arg: value}
                    sim.clear_requests()
                    res = await d.dispatch(Call(a.id, args, confirm=True))
                    got = sim.requests()
                    # the action's own request: routed to it, or to a route outside Arcane's document
                    # (the simulator labels none) with the action's own method and template
                    own = [r for r in got if r.action == a.id or r.action is None and r.method == a.method and matches(a.path, r.raw_path)]
                    stray = [r for r in got if r not in own and r.action not in lookups]
                    label = f"{a.id} {arg}={value[:20]!r}"
                    if stray or any(r.method != a.method or not matches(a.path, r.raw_path) for r in own):
                        wrong.append(f"{label}: {[(r.method, r.raw_path, r.action) for r in got]}")
                        continue
                    if own:
                        sent += 1
                        if value in HOSTILE:
                            wrong.append(f"{label}: a hostile value was sent: {[(r.method, r.raw_path) for r in own]}")
                    elif res.is_error and res.error_code in REFUSALS and arg in res.error_fields:
                        refused += 1
                        by_code[res.error_code] = by_code.get(res.error_code, 0) + 1
                        assert "Traceback" not in res.text and res.text.count("\n") <= 3, res.text
                        # what the schema lets through, the path check refuses with its own code
                        if value in HOSTILE and Draft202012Validator(a.input_schema["properties"][arg]).is_valid(value) \
                                and res.error_code != "invalid_path_value":
                            wrong.append(f"{label}: refused as {res.error_code}, not invalid_path_value: {res.text[:200]!r}")
                    else:
                        wrong.append(f"{label}: neither sent nor refused for the path value: "
                                     f"{res.error_code} {res.error_fields} {res.text[:200]!r}")
                        continue
                    if a.read_only:
                        continue
                    # the safe-mode preview of the same call: the same refusal, or the path sent
                    sim.clear_requests()
                    shown = await safe.dispatch(Call(a.id, args, confirm=True))
                    preview = (shown.structured or {}) if not shown.is_error else {}
                    if not preview.get("preview"):
                        if not (shown.is_error and shown.error_code in REFUSALS and arg in shown.error_fields) or own \
                                or [r for r in sim.requests() if r.method != "GET"]:  # at most a name's lookup was read
                            wrong.append(f"{label}: safe mode answered {shown.error_code} {shown.text[:200]!r}")
                        continue
                    if res.error_code == "invalid_path_value":
                        wrong.append(f"{label}: refused, yet safe mode previews {preview['path']!r}")
                        continue
                    previews += 1
                    full = {catalog.env_arg: safe.settings.environment_id, **args} \
                        if catalog.env_arg in a.input_schema["properties"] else args
                    # a preview sends at most the confirmation question's reads, never a change
                    changed = [r for r in sim.requests() if r.method != "GET"]
                    if not same_path(a, preview, own[0].raw_path if own else None, full) or changed:
                        wrong.append(f"{label}: the preview shows {preview['path']!r}, the request was "
                                     f"{own[0].raw_path if own else prepare(a, full).path!r}")
    finally:
        await client.aclose()
        await safe_client.aclose()
    values = len(HOSTILE) + len(ODD)
    print(f"\npath sweep: {len(actions)} actions with path parameters ({total // values} path parameters) x {values} values"
          f" = {total} calls; refused {refused} {by_code}, sent {sent}, wrong route {len(wrong)}; safe-mode previews {previews}")
    assert not wrong, f"{len(wrong)} wrong:\n" + "\n".join(wrong[:30])
    assert sent + refused == total
    assert sent > 0 and refused >= total // values * len(HOSTILE)


async def test_a_megabyte_in_a_query_argument_is_an_invalid_argument(catalog, labelled_sim):
    d, client = _dispatcher(catalog, labelled_sim)
    try:
        labelled_sim.clear_requests()
        res = await d.dispatch(Call("container.list", {"search": "x" * 1_000_000}))
        assert res.is_error and res.error_code == "invalid_arguments" and res.error_fields == ["search"]
        assert "Traceback" not in res.text and "internal" not in res.text and labelled_sim.requests() == []
        # at the cap it is sent
        res = await d.dispatch(Call("container.list", {"search": "x" * (QUERY_MAX_BYTES - 100)}))
        assert res.error_code != "invalid_arguments" and len(labelled_sim.requests()) == 1
        # a megabyte in a path argument: invalid_path_value, nothing sent
        labelled_sim.clear_requests()
        res = await d.dispatch(Call("container.get", {"containerId": "x" * 1_000_000}))
        assert res.is_error and res.error_code == "invalid_path_value" and res.error_fields == ["containerId"]
        assert labelled_sim.requests() == []
    finally:
        await client.aclose()


async def test_a_body_string_is_bounded_only_by_the_body_cap(catalog):
    """A megabyte in a body string (a Compose file, an image reference) is a body, not a
    URL: it is sent whole, not refused for its length."""
    d, rec = make_dispatcher(catalog, lambda r: ok_json({"id": "c1"}))
    res = await d.dispatch(Call("container.create", {"name": "web", "image": "x" * 1_000_000}))
    assert not res.is_error, res.text
    assert len(rec.requests) == 1 and len(rec.requests[0].content) > 1_000_000


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
async def test_non_finite_numbers_are_refused_at_validation(catalog, labelled_sim, number):
    d, client = _dispatcher(catalog, labelled_sim)
    try:
        labelled_sim.clear_requests()
        res = await d.dispatch(Call("container.create", {"name": "web", "image": "nginx", "cpus": number}))
        assert res.is_error and res.error_code == "invalid_arguments" and res.error_fields == ["cpus"]
        assert labelled_sim.requests() == []
        deep = {"name": "web", "image": "nginx", "labels": {"a": "b"}, "cpus": 1.0}
        assert check_arguments(catalog.actions["container.create"], deep) is None
    finally:
        await client.aclose()


async def test_a_refused_value_is_refused_before_the_question(catalog, labelled_sim):
    """A destructive call with a hostile path value is refused before the user is asked
    (nothing is read to name the target either), and in safe mode the same way."""
    asked = []

    async def elicit(question):
        asked.append(question)
        return "accept"

    for kw in ({}, {"safe_mode": True}):
        d, client = _dispatcher(catalog, labelled_sim, **kw)
        try:
            labelled_sim.clear_requests()
            res = await d.dispatch(Call("volume.remove", {"volumeName": ".."}, elicit=elicit))
            assert res.is_error and res.error_code == "invalid_path_value" and res.error_fields == ["volumeName"]
            assert asked == [] and labelled_sim.requests() == []
        finally:
            await client.aclose()


@pytest.mark.parametrize("value", ["key\r\nX-Injected: 1", "clé", "k" * 9000])
async def test_a_header_argument_cannot_carry_a_line_break_or_a_megabyte(catalog, value):
    """A value bound into a header: a line break (another header), non-ASCII (an encoding
    error, once an internal error) or a huge value is an invalid argument naming it."""
    d, rec = make_dispatcher(catalog, lambda r: ok_json({}))
    res = await d.dispatch(Call("job.run", {"jobId": "prune", "idempotencyKey": value}))
    assert res.is_error and res.error_code == "invalid_arguments" and res.error_fields == ["idempotencyKey"]
    assert rec.requests == []
    res = await d.dispatch(Call("job.run", {"jobId": "prune", "idempotencyKey": "run-42"}))
    assert not res.is_error and rec.requests[0].headers["Idempotency-Key"] == "run-42"


async def test_a_dot_segment_in_a_resource_uri_is_not_found_and_sends_nothing(labelled_sim):
    """A resource template's variable binds a path argument too: `..` is refused as for a
    tool call (resource not found, -32602), and nothing reaches Arcane."""
    from mcp import MCPError

    from tests.test_resources import memory_session

    async with memory_session(labelled_sim.url, labelled_sim.api_key, surface="dynamic") as client:
        for uri in ("arcane://environment/0/container/..", "arcane://environment/../containers",
                    "arcane://environment/0/container/%2e%2e"):
            labelled_sim.clear_requests()
            with pytest.raises(MCPError) as err:
                await client.read_resource(uri)
            assert err.value.code == -32602 and err.value.data == {"uri": uri}, (uri, err.value.message)
            assert labelled_sim.requests() == [], uri
