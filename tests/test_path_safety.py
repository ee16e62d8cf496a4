"""Arguments can never change the route (issue 20): every action with a path parameter,
each of its path parameters given hostile values, through the real dispatcher against the
simulator (tests/path_sweep.py: a fixed sample here, every parameter x every value in
`make bench` and `python -m tests.path_sweep`). Each call is either refused before its own
request is sent (invalid_path_value, or invalid_arguments when the schema or a name lookup
refuses it), or the request that reaches the simulator is the action's own method and path
template, routed to the action itself. The safe-mode preview of every state-changing call
shows the path that would be sent, or the same refusal. Also: a query string too long for
a URL and non-finite numbers are invalid arguments, never an internal error."""

from __future__ import annotations

import math

import pytest

from interpreter.call.dispatch import Call
from interpreter.call.request import QUERY_MAX_BYTES, check_arguments, path_value_problem, route_problem
from tests import path_sweep as S
from tests.helpers import make_dispatcher, ok_json

pytestmark = pytest.mark.anyio

HOSTILE, ODD = S.HOSTILE, S.ODD
_dispatcher = S.dispatcher


@pytest.fixture(scope="module")
def labelled_sim(catalog):
    """A simulator that labels each request with the engine action it routed to."""
    from simulator import start_simulator

    with start_simulator(catalog=catalog) as s:
        yield s


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


def test_the_sample_covers_every_action_parameter_and_value(catalog):
    """The sample make test sends: every (action, path parameter) pair at least once, every
    value at least once on every pair's side, every value against every parameter of each
    fixed action; a part of the full product, the same on every run."""
    full, sample = S.full_cases(catalog), S.sample_cases(catalog)
    key = lambda c: (c[0].id, c[1], c[2])  # noqa: E731
    assert len(S.swept_actions(catalog)) > 250  # every action with a path parameter
    assert {key(c) for c in sample} <= {key(c) for c in full} and len(sample) < len(full) // 4
    assert {(a.id, arg) for a, arg, _ in sample} == {(a.id, arg) for a, arg, _ in full}
    assert {v for _, _, v in sample} == set(S.VALUES)
    fixed = S.fixed_actions(catalog)
    assert len(fixed) >= 4 and {a.read_only for a in fixed} == {True, False}
    assert any(len(S.path_args(a)) > 1 for a in fixed) and any(set(S.path_args(a)) & set(catalog.arguments) for a in fixed)
    for a in fixed:
        for arg in S.path_args(a):
            assert {v for b, x, v in sample if b.id == a.id and x == arg} == set(S.VALUES), (a.id, arg)
    assert [key(c) for c in sample] == [key(c) for c in S.sample_cases(catalog)]  # fixed, not drawn


async def test_path_parameters_against_hostile_values(catalog, labelled_sim):
    cases = S.sample_cases(catalog)
    out = await S.sweep(catalog, labelled_sim, cases)
    print("\n" + out.summary())
    assert not out.wrong, f"{len(out.wrong)} wrong:\n" + "\n".join(out.wrong[:30])
    assert out.total == len(cases) and out.sent + out.refused == out.total
    assert out.actions == {a.id for a in S.swept_actions(catalog)} and out.values == set(S.VALUES)
    assert out.sent > 0 and out.refused >= out.hostile_calls > 0  # every hostile value refused
    assert out.by_code.get("invalid_path_value", 0) > 0 and out.previews > 0


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
