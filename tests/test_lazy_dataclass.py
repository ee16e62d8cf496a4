"""interpreter/build/lazy_dataclass.py: a class made by the engine's `dataclass` behaves as the
standard `dataclasses.dataclass` makes it, for any fields, options and calls: the same
instances, repr, equality, hash, frozen errors and TypeErrors, before and after its
methods were compiled; and it is a dataclass for `fields`, `replace`, `asdict` and pickle."""

from __future__ import annotations

import dataclasses
import pickle
import typing  # noqa: F401 - named by the annotations the classes are made with
from collections.abc import Mapping
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreter.build.lazy_dataclass import dataclass
from tests.helpers import examples

NAMES = ["a", "b", "c", "d", "e"]

field_spec = st.fixed_dictionaries({
    "annotation": st.sampled_from(["object", "int", "tuple[str, ...]", "ClassVar[int]", "typing.ClassVar[str]"]),
    "default": st.sampled_from(["none", "value", "factory"]),
    "init": st.booleans(),
    "repr": st.booleans(),
    "compare": st.booleans(),
    "hash": st.sampled_from([None, True, False]),
})
values = st.one_of(st.integers(-3, 3), st.text(max_size=2), st.tuples(st.integers(0, 2)), st.none())


def _body(specs: list[dict]) -> dict:
    body: dict = {"__annotations__": {}, "__module__": __name__}
    for name, spec in zip(NAMES, specs, strict=False):
        body["__annotations__"][name] = spec["annotation"]
        options = {k: spec[k] for k in ("init", "repr", "compare", "hash")}
        if spec["default"] == "value":
            options["default"] = f"default-{name}"
        elif spec["default"] == "factory":
            options["default_factory"] = lambda name=name: [name]
        body[name] = dataclasses.field(**options)
    return body


def _make(decorator, specs: list[dict], frozen: bool, eq: bool, order: bool):
    """The class the decorator makes, or the exception it raises."""
    try:
        return decorator(type("Sample", (), _body(specs)), frozen=frozen, eq=eq, order=order)
    except Exception as exc:  # noqa: BLE001 - the same definition errors are the point
        return exc


def _outcome(call):
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001
        return (type(exc), str(exc))


def _same_instances(std, mine) -> None:
    """Same state, repr, equality, hash and frozen behaviour (instances of different classes
    compare by what they hold)."""
    assert type(mine).__name__ == type(std).__name__
    assert vars(mine) == vars(std)
    assert _outcome(lambda: repr(mine)) == _outcome(lambda: repr(std))


@settings(max_examples=examples(300))
@given(st.lists(field_spec, max_size=5), st.booleans(), st.booleans(), st.booleans(),
       st.lists(values, max_size=6), st.dictionaries(st.sampled_from(NAMES + ["zz"]), values, max_size=3),
       st.booleans())
def test_behaves_as_the_standard_dataclass(specs, frozen, eq, order, args, kwargs, compile_first):
    std = _make(dataclasses.dataclass, specs, frozen, eq, order)
    mine = _make(dataclass, specs, frozen, eq, order)
    if isinstance(std, Exception):
        assert type(mine) is type(std) and str(mine) == str(std)
        return
    assert dataclasses.is_dataclass(mine)
    assert [(f.name, f.type, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(mine)] == \
        [(f.name, f.type, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(std)]
    assert mine.__annotations__ == std.__annotations__
    assert mine.__match_args__ == std.__match_args__
    if compile_first:  # the stand-ins replaced by the compiled methods, or not yet
        _outcome(lambda: mine())
    a_std, a_mine = _outcome(lambda: std(*args, **kwargs)), _outcome(lambda: mine(*args, **kwargs))
    assert a_mine[0] == a_std[0]
    if a_std[0] != "ok":
        assert a_mine[1].replace(type(mine).__qualname__, "Sample") == a_std[1].replace(type(std).__qualname__, "Sample")
        return
    x_std, x_mine = a_std[1], a_mine[1]
    _same_instances(x_std, x_mine)
    y_std, y_mine = std(*args, **kwargs), mine(*args, **kwargs)
    assert _outcome(lambda: x_mine == y_mine) == _outcome(lambda: x_std == y_std)
    assert (x_mine == object()) == (x_std == object())
    if order:
        assert _outcome(lambda: x_mine < y_mine) == _outcome(lambda: x_std < y_std)
        assert _outcome(lambda: x_mine >= y_mine) == _outcome(lambda: x_std >= y_std)
        assert _outcome(lambda: x_mine < 1)[0] == _outcome(lambda: x_std < 1)[0]
    assert (type(mine).__hash__ is None) == (type(std).__hash__ is None)
    if type(std).__hash__ is not None:
        hashed_std, hashed_mine = _outcome(lambda: hash(x_std)), _outcome(lambda: hash(x_mine))
        assert hashed_mine[0] == hashed_std[0]
        if eq and frozen and hashed_std[0] == "ok":
            assert hashed_mine == hashed_std
    replaced_std, replaced_mine = _outcome(lambda: dataclasses.replace(x_std)), _outcome(lambda: dataclasses.replace(x_mine))
    assert replaced_mine[0] == replaced_std[0]
    if replaced_std[0] == "ok":
        _same_instances(replaced_std[1], replaced_mine[1])
    assert _outcome(lambda: dataclasses.asdict(x_mine)) == _outcome(lambda: dataclasses.asdict(x_std))
    for name in [*NAMES[:len(specs)], "other"]:
        assert _outcome(lambda n=name: setattr(y_mine, n, 1))[0] == _outcome(lambda n=name: setattr(y_std, n, 1))[0]
        assert _outcome(lambda n=name: delattr(y_mine, n))[0] == _outcome(lambda n=name: delattr(y_std, n))[0]
        assert vars(y_mine) == vars(y_std)


@dataclass(frozen=True)
class Sample:
    """A module-level class, so pickle can find it."""

    name: str
    tags: tuple = ()
    extra: Mapping = dataclasses.field(default_factory=dict, compare=False, repr=False)
    LIMIT: ClassVar[int] = 3


@dataclass(frozen=True)
class Checked:
    value: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", abs(self.value))


def test_pickles_and_copies_as_a_dataclass():
    one = Sample("x", ("a",), {"k": 1})
    again = pickle.loads(pickle.dumps(one))
    assert again == one and again.extra == {"k": 1} and hash(again) == hash(one)
    assert [f.name for f in dataclasses.fields(Sample)] == ["name", "tags", "extra"]  # not the ClassVar
    assert [f.type for f in dataclasses.fields(Sample)] == ["str", "tuple", "Mapping"]
    assert Sample.__annotations__["LIMIT"] == "ClassVar[int]"
    assert Sample.LIMIT == 3 and Sample.tags == ()
    assert dataclasses.replace(one, name="y").name == "y"
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.name = "z"


def test_post_init_runs_and_the_class_keeps_its_own_methods():
    assert Checked(-4).value == 4
    assert Checked.__doc__ == "Checked(value)"

    @dataclass(frozen=True)
    class Own:
        value: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

    assert repr(Own(1)) == "own" and Own(1) == Own(2)
    assert Own.__hash__ is None  # as dataclass leaves it: the class's __eq__ without __hash__


def test_the_first_call_puts_the_compiled_method_in_place():
    @dataclass(frozen=True)
    class Fresh:
        value: int = 0

    stand_in = Fresh.__dict__["__init__"]
    Fresh(1)
    assert Fresh.__dict__["__init__"] is not stand_in
    assert Fresh.__init__.__qualname__.endswith("Fresh.__init__")


@pytest.mark.parametrize("body", [
    {"__annotations__": {"x": "dataclasses.InitVar[int]"}},
    {"__annotations__": {"x": "int"}, "x": dataclasses.field(kw_only=True)},
    {"__annotations__": {"x": "int"}, "__slots__": ("x",)},
])
def test_refuses_what_it_does_not_support(body):
    with pytest.raises(TypeError):
        dataclass(type("Unsupported", (), dict(body, __module__=__name__)), frozen=True)
