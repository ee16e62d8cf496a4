"""Expr's direct path walker (model.evaluator) agrees with jmespath's own interpreter on
every member/index path and any JSON value, including the values where a step finds the
wrong type, a missing member or an index past the end; other expressions still go through
jmespath, and a type error on untrusted data is None, not a failure."""

from __future__ import annotations

import jmespath
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreter.build.model import Expr, _path_steps
from tests.helpers import examples

KEYS = ["a", "b", "names", "x-y"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    max_leaves=20)

step = st.one_of(st.sampled_from(KEYS).map(lambda k: ("member", k)), st.integers(-4, 4).map(lambda i: ("index", i)))


def _text(steps: list[tuple[str, object]]) -> str:
    out = ""
    for kind, key in steps:
        if kind == "member":
            out += ("." if out else "") + f'"{key}"'
        else:
            out += f"[{key}]" if out else f"@[{key}]"
    return out or "@"


@settings(max_examples=examples(400))
@given(st.lists(step, max_size=5), json_values)
def test_paths_agree_with_jmespath(steps, value):
    text = _text(steps)
    expr = Expr.of(text)
    assert _path_steps(expr.parsed) is not None  # the walker, not the fallback, answered
    assert expr.search(value) == jmespath.search(text, value)


@settings(max_examples=examples(200))
@given(json_values)
def test_other_expressions_still_run_through_jmespath(value):
    for text in ("length(names)", "names[*].a", "a || b", "keys(@)"):
        expr = Expr.of(text)
        assert _path_steps(expr.parsed) is None
        try:
            expected = jmespath.search(text, value)
        except jmespath.exceptions.JMESPathError:
            expected = None  # a type error on untrusted data: no result
        assert expr.search(value) == expected


def test_the_column_expressions_the_overlays_use_are_walked(catalog):
    exprs = [c.expr for a in catalog.actions.values() for c in (a.columns or ()) if c.expr is not None]
    assert exprs
    walked = [e for e in exprs if _path_steps(e.parsed) is not None]
    assert len(walked) >= len(exprs) // 2
