"""`dataclass`: the standard decorator, with its generated methods compiled when first used.

Python 3.11's `dataclass` writes each generated method (`__init__`, `__repr__`, `__eq__`,
`__hash__` and, frozen, `__setattr__`/`__delattr__`) as source text and compiles it with
`exec` while the class is defined: about 1.4 ms per class, some 150 ms for the hundred-odd
classes a server start imports, though a warm start makes instances of only a few of them
(the catalog's models come out of the pickle, which calls no `__init__`).

This `dataclass` (the engine's modules import it instead of the standard one) lets
`dataclasses.dataclass` do at once all it does that is not generated code
(fields, defaults, `__match_args__`, the checks on mutable defaults), and puts a stand-in
for each of `__init__`, `__repr__`, `__eq__`, `__hash__` (and, ordered, `__lt__`...). The first call of a stand-in
has `dataclass` generate that method for the same fields and options (on a scratch class
with the same fields; only that one: a start calls the `__init__` of a few classes and
nothing else of them) and puts the real one in the stand-in's place: from then on the
class has exactly the methods `dataclass` would have given it. The frozen `__setattr__` and
`__delattr__` do not depend on the fields' code and are plain functions here, with
dataclass's rule (an instance of the class itself, or any field name, raises
`dataclasses.FrozenInstanceError`).

A method the class defines itself is kept, as `dataclass` keeps it; `__hash__` follows
dataclass's table (frozen with eq: the fields' hash; eq alone: unhashable). The result is a
dataclass: `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` work, pickling is
the plain instance's. Only the options this code base uses are offered (`frozen`, `eq`,
`order`); `InitVar`, `kw_only` fields and `__slots__` are refused at definition, and a
class that needs another option (`slots`, `unsafe_hash`...) uses `dataclasses.dataclass`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound=type)
_MISSING = dataclasses.MISSING
_PLACEHOLDER_DOC = "\0"  # keeps dataclass from computing a doc with inspect.signature


def dataclass(cls: T | None = None, /, *, frozen: bool = False, eq: bool = True, order: bool = False) -> Any:
    """`dataclasses.dataclass(cls, frozen=..., eq=..., order=...)`, the generated methods
    compiled on their first call."""

    def wrap(target: T) -> T:
        return _process(target, frozen, eq, order)

    return wrap if cls is None else wrap(cls)


ORDER = ("__lt__", "__le__", "__gt__", "__ge__")


def _process(cls: T, frozen: bool, eq: bool, order: bool) -> T:
    own = dict(cls.__dict__)
    if "__slots__" in own:
        raise TypeError(f"dataclass {cls.__qualname__}: __slots__ is not supported; use dataclasses.dataclass")
    documented = bool(own.get("__doc__"))
    if not documented:
        cls.__doc__ = _PLACEHOLDER_DOC
    _fields_of(cls)
    fields = dataclasses.fields(cls)  # without the ClassVar and InitVar pseudo-fields
    if any(_is_initvar(f) for f in cls.__dataclass_fields__.values() if f not in fields):
        raise TypeError(f"dataclass {cls.__qualname__}: InitVar is not supported; use dataclasses.dataclass")
    if any(f.kw_only for f in fields):
        raise TypeError(f"dataclass {cls.__qualname__}: kw_only fields are not supported; use dataclasses.dataclass")
    # dataclass's checks on the options, in its order
    if order and not eq:
        raise ValueError("eq must be true if order is true")
    defaulted = False
    for f in fields:  # the one check dataclass makes while writing __init__
        if f.init:
            if f.default is not _MISSING or f.default_factory is not _MISSING:
                defaulted = True
            elif defaulted:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
    for name in ORDER if order else ():
        if name in own:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}. Consider using functools.total_ordering")
    for name in ("__setattr__", "__delattr__") if frozen else ():
        if name in own:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    if not documented:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields)})"
    generated = ["__init__", "__repr__"] + (["__eq__"] if eq else []) + (list(ORDER) if order else [])
    if eq:
        own_hash = own.get("__hash__", _MISSING)
        explicit = not (own_hash is _MISSING or (own_hash is None and "__eq__" in own))
        if not explicit:
            if frozen:
                generated.append("__hash__")
            else:
                cls.__hash__ = None  # type: ignore[assignment]
    made: dict[str, Callable] = {}
    for name in generated:
        if name not in own:
            setattr(cls, name, _stand_in(cls, name, frozen, made))
    if frozen:
        for name, fn in _frozen(cls, fields).items():
            fn.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, fn)
    return cls


_SPECIAL = ("ClassVar", "InitVar", "KW_ONLY")  # the annotations dataclass must read itself


def _fields_of(cls: type) -> None:
    """`dataclasses.dataclass(cls, init=False, repr=False, eq=False)`: the fields, nothing
    generated. dataclass matches each string annotation (all of them, under `from
    __future__ import annotations`) against ClassVar, InitVar and KW_ONLY with a regular
    expression and a module lookup; an annotation that names none of the three is handed
    over as a plain type and given back to its field afterwards (a third of the time)."""
    own = cls.__dict__.get("__annotations__", {})
    plain = {name: t for name, t in own.items() if isinstance(t, str) and not any(w in t for w in _SPECIAL)}
    if plain:
        cls.__annotations__ = {name: (object if name in plain else t) for name, t in own.items()}
    try:
        dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False)
    finally:
        if plain:
            cls.__annotations__ = own
    for f in cls.__dataclass_fields__.values():
        if f.name in plain and f.type is object:
            f.type = plain[f.name]


def _is_initvar(f: dataclasses.Field) -> bool:
    # an annotation is a string under `from __future__ import annotations`
    return isinstance(f.type, dataclasses.InitVar) or f.type is dataclasses.InitVar or "InitVar" in str(f.type)


def _stand_in(cls: type, name: str, frozen: bool, made: dict[str, Callable]) -> Callable:
    """The method `name` until its first call, which puts dataclass's own in its place."""

    def real() -> Callable:
        if name not in made:
            made.update(_generate(cls, name, frozen))
        method = made[name]
        if cls.__dict__.get(name) is stand_in:
            setattr(cls, name, method)
        return method

    def stand_in(self: Any, *args: Any, **kwargs: Any) -> Any:
        return real()(self, *args, **kwargs)

    stand_in.__name__ = name
    stand_in.__qualname__ = f"{cls.__qualname__}.{name}"
    return stand_in


#: what dataclass is asked to generate for each method (the other options: the class's);
#: `frozen` matters to `__init__` (it assigns through object.__setattr__) and `__hash__`
#: (made only for a frozen class) and is otherwise left off, as it adds two methods to make
_FOR = {"__init__": {"init": True, "repr": False, "eq": False},
        "__repr__": {"init": False, "repr": True, "eq": False, "frozen": False},
        "__eq__": {"init": False, "repr": False, "eq": True, "frozen": False},
        "__hash__": {"init": False, "repr": False, "eq": True},
        **{name: {"init": False, "repr": False, "eq": True, "frozen": False, "order": True} for name in ORDER}}


def _generate(cls: type, name: str, frozen: bool) -> dict[str, Callable]:
    """dataclass's method `name` for `cls`'s fields (and what dataclass made with it),
    made on a scratch class with the same fields, options and `__post_init__` (the methods
    refer to their instance, never to the class they were made on). Only what is called
    is made: a start calls the `__init__` of a few classes and nothing else of them."""
    fields = dataclasses.fields(cls)
    body: dict[str, Any] = {"__annotations__": {f.name: f.type for f in fields},
                            "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    for f in fields:
        options: dict[str, Any] = {"init": f.init, "repr": f.repr, "hash": f.hash, "compare": f.compare,
                                   "metadata": f.metadata}
        if f.default is not _MISSING:
            options["default"] = f.default
        elif f.default_factory is not _MISSING:
            options["default_factory"] = f.default_factory
        body[f.name] = dataclasses.field(**options)
    if hasattr(cls, "__post_init__"):
        body["__post_init__"] = cls.__post_init__
    options = {"frozen": frozen, "order": False, **_FOR[name]}
    scratch = dataclasses.dataclass(type(cls.__name__, (), body), **options)
    return {name: scratch.__dict__[name] for name in ("__init__", "__repr__", "__eq__", "__hash__", *ORDER)
            if callable(scratch.__dict__.get(name))}


def _frozen(cls: type, fields: tuple[dataclasses.Field, ...]) -> dict[str, Callable]:
    names = frozenset(f.name for f in fields)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return {"__setattr__": __setattr__, "__delattr__": __delattr__}
