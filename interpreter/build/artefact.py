"""The compiled artefact: the built catalog as one JSON file, read at start with no YAML parser.

`interp compile` builds the catalog from catalog/ and rules/ (load, schema checks, compile,
cross-checks: seconds) and writes it to compiled/catalog.json (shipped in the wheel as
interpreter/_data/compiled/catalog.json; paths.COMPILED_FILE). `catalog.build` reads it
instead of the sources when the build is the packaged one: a start parses one JSON file and
rebuilds the models, without ruamel.yaml or jsonschema.

The format is lines of plain JSON, written compactly and deterministically (the build's own
order; frozensets sorted). The first line is what a start decodes: the header and the tables
below. Every line after it is one lazy text (a field read on first use, the lazy pool), found
by its [offset, length] in bytes from the start of the second line, so that a start neither
parses nor scans it. A value is a JSON scalar, an object (a dict whose members hold tagged
values), or an array whose first member is a tag:

    ["J", v]           a dict or list of plain JSON, taken as it is (not walked again); it
                       holds no value the catalog shares with another place
    ["l", ...]         a list          ["t", ...]  a tuple        ["f", ...]  a frozenset
    ["m", {...}]       a read-only mapping (MappingProxyType)
    ["r", text, flags] a regular expression (a LazyPattern: compiled on first use)
    ["p", text]        a compiled JMESPath expression (a LazyJMESPath: compiled on first use)
    ["o", k, v...]     an instance of class k of the `classes` table, its fields in order
    ["@", i]           entry i of the `pool` table: an object the catalog holds in more
                       than one place is written once and stays one object when read
                       (an entry is decoded when first referred to)
    ["&", i]           entry i of the `lazy_pool` table (a lazy text): a shared object met
                       first inside a lazy field
    ["D", at, n]       the value of a field whose metadata says `defer` (an action's call
                       parts: bindings, columns, next steps...), the lazy text at offset
                       `at`, `n` bytes long, decoded when the field is first read
                       (`deferred`); the shared objects it holds are in the pool
    ["L", at, n]       the value of a field whose metadata says `lazy` (every model's
                       `origins`, the OpenAPI document, the tables only `explain`, `audit`
                       or a credential's read use), the lazy text at offset `at`, `n` bytes
                       long: a mapping decoded on first use (LazyMapping), so a start pays
                       neither for the ~12,000 source positions `explain` reads nor for the
                       document's 750 kB

`classes` names each model class (module, qualified name, field names): a class of another
engine (renamed, a field added or removed) makes the file unreadable, never misread. Only
dataclasses of this package are resolved. A field whose metadata says `cache` (a runtime
memo) is written as null and made fresh from its default.

The header records FORMAT, the engine version, the options the build depends on (the
environment default) and `inputs`, a SHA-256 over the path and bytes of every file under
catalog/ and rules/ (`inputs_hash`): a checkout whose sources changed since `interp compile`
has a stale artefact (catalog.build then builds from the sources and says so once).

Reading an untrusted file (`loads(..., check=True)`: the operator layer's cache, opcache.py)
also checks every field's value against its annotation, so a file that decodes but holds a
wrong type is refused rather than crashing a tool call later. Anything wrong (not JSON,
too deep, too large, an unknown tag, class or field, a wrong type) raises ArtefactError.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
import threading
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ArtefactError
from .model import frozen_map

__all__ = ["ArtefactError", "FORMAT", "LazyMapping", "dumps", "inputs_hash", "load_file", "loads", "read_header"]

FORMAT = 4
MAX_BYTES = 64 * 1024 * 1024  # far above the ~2 MB the packaged build takes; a larger file is refused
PACKAGE = __name__.split(".", 1)[0]


# ---------------------------------------------------------------- the inputs


def _files(root: Path) -> list[tuple[str, str]]:
    """(relative posix path, path) of every file under `root`, sorted, outside __pycache__
    (plain strings: a checkout's start hashes its ~80 input files, and pathlib's objects
    cost more than reading them)."""
    top = os.fspath(root)
    found = []
    for directory, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        sub = directory[len(top):].lstrip(os.sep).replace(os.sep, "/")
        prefix = sub + "/" if sub else ""
        found.extend((prefix + name, os.path.join(directory, name)) for name in names)
    found.sort()
    return found


def inputs_hash(*roots: tuple[str, Path | None]) -> str:
    """SHA-256 over the label, relative path and bytes of every file under each (label, root);
    a missing root counts as absent."""
    h = hashlib.sha256(f"arcane-mcp inputs v{FORMAT}\n".encode())
    for label, root in roots:
        h.update(f"\0root\0{label}\0".encode())
        if root is None:
            continue
        if not os.path.isdir(root):
            h.update(b"\0absent")
            continue
        for rel, path in _files(root):
            with open(path, "rb") as f:
                data = f.read()
            h.update(f"\0{rel}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


# ---------------------------------------------------------------- writing


_SCALARS = (str, int, bool, type(None))


class _Encoder:
    def __init__(self, root: Any):
        self.classes: list[list] = []
        self.class_index: dict[type, int] = {}
        self.pool: list[Any] = []
        self.pool_index: dict[int, int] = {}
        self.lazy_pool: list[Any] = []
        self.lazy_index: dict[int, int] = {}
        self.lazy_depth = 0
        self.lazy_texts: list[bytes] = []  # the lazy section: one JSON text a line
        self.lazy_at = 0  # the offset of the next one in the lazy section
        self.plain: dict[int, bool] = {}
        # the lazy fields met, each written once everything a start reads is written (`flush`)
        self.waiting: list[tuple[list, Any]] = []
        self.deferred: list[tuple[list, Any]] = []  # the `defer` fields' values, encoded, for `flush` to write
        self.multi = self._count(root)
        self.keep: list[Any] = [root]  # holds every object whose id() is a key above

    @staticmethod
    def _children(o: Any) -> Any:
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return [getattr(o, f.name) for f in dataclasses.fields(o) if not f.metadata.get("cache")]
        if isinstance(o, (dict, Mapping)):
            return list(o.values())
        if isinstance(o, (list, tuple, frozenset, set)):
            return list(o)
        return []

    def _count(self, root: Any) -> set[int]:
        """The ids of the non-scalar objects reached more than once."""
        seen: set[int] = set()
        multi: set[int] = set()
        stack = [root]
        while stack:
            o = stack.pop()
            if type(o) is LazyMapping:  # a field read from an artefact: written as what it holds
                o = o._mapping()
            # a compiled expression is a leaf, written where it is met (jmespath hands out
            # one object per text from its cache: its sharing says nothing about the catalog)
            if isinstance(o, (*_SCALARS, float, re.Pattern, LazyPattern, LazyJMESPath)) or _is_parsed(o):
                continue
            if id(o) in seen:
                multi.add(id(o))
                continue
            seen.add(id(o))
            stack.extend(self._children(o))
        return multi

    def _is_plain(self, o: Any) -> bool:
        """True for a dict or list holding only JSON (str keys, no tuples, models, mappings)."""
        known = self.plain.get(id(o))
        if known is not None:
            return known
        t = type(o)
        if t in _SCALARS:
            return True
        if t is float:
            return o == o and o not in (float("inf"), float("-inf"))
        # a value held in another place too is written once (["@", i]), so that it is one
        # object again when read: a raw subtree holds none
        if t is dict:
            ok = all(type(k) is str and self._is_plain(v) and (type(v) not in (dict, list) or id(v) not in self.multi) for k, v in o.items())
        elif t is list:
            ok = all(self._is_plain(v) and (type(v) not in (dict, list) or id(v) not in self.multi) for v in o)
        else:
            ok = False
        self.plain[id(o)] = ok
        self.keep.append(o)
        return ok

    def enc(self, o: Any) -> Any:
        t = type(o)
        if t in _SCALARS:
            return o
        if t is LazyMapping:
            o = o._mapping()
            t = type(o)
        if t is float:
            if o != o or o in (float("inf"), float("-inf")):
                raise ArtefactError(f"a float that JSON cannot carry: {o!r}")
            return o
        i = id(o)
        hit = self.pool_index.get(i)
        if hit is not None:
            return ["@", hit]
        hit = self.lazy_index.get(i)
        if hit is not None:
            return ["&", hit]
        value = self._content(o, t)
        if i not in self.multi:
            return value
        if self.lazy_depth:  # met first inside a lazy field: in the table read on first use
            self.lazy_index[i] = len(self.lazy_pool)
            self.lazy_pool.append(value)
            return ["&", self.lazy_index[i]]
        self.pool_index[i] = len(self.pool)
        self.pool.append(value)
        return ["@", self.pool_index[i]]

    def _content(self, o: Any, t: type) -> Any:
        if t in (dict, list) and self._is_plain(o):
            return ["J", o]
        if t is dict:
            return {self._key(k): self.enc(v) for k, v in o.items()}
        if t is list:
            return ["l", *(self.enc(v) for v in o)]
        if t is tuple:
            return ["t", *(self.enc(v) for v in o)]
        if t is frozenset:
            items = [self.enc(v) for v in o]
            return ["f", *sorted(items, key=lambda v: json.dumps(v, sort_keys=True))]
        if t is types.MappingProxyType:
            return ["m", {self._key(k): self.enc(v) for k, v in o.items()}]
        if t is re.Pattern or t is LazyPattern:
            if not isinstance(o.pattern, str):
                raise ArtefactError("a bytes regular expression")
            return ["r", o.pattern, o.flags]
        if _is_parsed(o) or t is LazyJMESPath:
            return ["p", o.expression]
        if dataclasses.is_dataclass(o) and t.__module__.split(".", 1)[0] == PACKAGE:
            k = self.class_index.get(t)
            if k is None:
                fields = dataclasses.fields(t)
                k = self.class_index[t] = len(self.classes)
                self.classes.append([t.__module__, t.__qualname__, [f.name for f in fields]])
            return ["o", k, *(self._field(f, getattr(o, f.name)) for f in dataclasses.fields(t))]
        raise ArtefactError(f"a {t.__module__}.{t.__qualname__} cannot be written to the artefact")

    def _field(self, f: dataclasses.Field, value: Any) -> Any:
        if f.metadata.get("cache"):
            return None
        if f.metadata.get("defer"):
            value = self.enc(value)
            if type(value) is list and value[0] not in ("@", "&"):  # a shared object stays a reference
                entry = ["D", 0, 0]  # its [offset, length], set by `flush` (once the lazy fields it holds are)
                self.deferred.append((entry, value))
                return entry
            return value
        if f.metadata.get("lazy"):
            if not isinstance(value, Mapping):
                raise ArtefactError(f"the lazy field {f.name} holds a {type(value).__name__}, not a mapping")
            if self.lazy_depth:  # inside a lazy field (`flush`): written now, its text refers to it
                return ["L", *self.lazy_text(self.enc(value))]
            entry = ["L", 0, 0]  # its [offset, length], set by `flush`
            self.waiting.append((entry, value))
            return entry
        return self.enc(value)

    def flush(self) -> None:
        """Write the lazy fields met outside any lazy field, in the order met (one met inside
        one is written with it). They come after the rest, so that an object shared by a lazy field and a field a start
        reads is in the pool a start decodes, never in the lazy pool: a start reads no
        lazy text."""
        self.lazy_depth += 1
        try:
            at = 0
            while at < len(self.waiting):
                entry, value = self.waiting[at]
                entry[1:] = self.lazy_text(self.enc(value))
                at += 1
        finally:
            self.lazy_depth -= 1
        # then the `defer` fields' texts, encoded where they were met (their shared objects
        # in the pool), each after the lazy fields and deferred values it holds
        for entry, value in self.deferred:
            entry[1:] = self.lazy_text(value)

    def lazy_text(self, value: Any) -> list[int]:
        """[offset, length] of `value`'s JSON text, written on its own line of the lazy section."""
        text = _text(value).encode("utf-8")
        at = self.lazy_at
        self.lazy_texts.append(text)
        self.lazy_at += len(text) + 1
        return [at, len(text)]

    @staticmethod
    def _key(k: Any) -> str:
        if type(k) is not str:
            raise ArtefactError(f"a mapping key that is not a string: {k!r}")
        return k


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


TABLES = ("classes", "pool", "lazy_pool", "root")


def dumps(catalog: Any, header: Mapping[str, Any]) -> bytes:
    """The artefact of `catalog`: the first line (compact JSON) is what a start decodes, each
    line after it one lazy text (compact JSON), every line ending with a newline."""
    e = _Encoder(catalog)
    root = e.enc(catalog)
    e.flush()
    lazy_pool = e.lazy_text(e.lazy_pool)
    doc = {"format": FORMAT, **header, "classes": e.classes, "pool": e.pool, "lazy_pool": lazy_pool, "root": root}
    return b"".join([(_text(doc) + "\n").encode("utf-8"), *(text + b"\n" for text in e.lazy_texts)])


# ---------------------------------------------------------------- reading


def read_header(data: bytes) -> dict:
    """The header members of an artefact (everything but the tables), or ArtefactError."""
    doc, _ = _parse(data)
    return {k: v for k, v in doc.items() if k not in TABLES}


def _parse(data: bytes) -> tuple[dict, bytes]:
    """(the first line's object, the lazy section: every byte after that line)."""
    if len(data) > MAX_BYTES:
        raise ArtefactError(f"it is larger than {MAX_BYTES} bytes")
    end = data.find(b"\n")
    if end < 0:
        raise ArtefactError("it has no end of line (truncated, or not an artefact)")
    try:
        doc = json.loads(data[:end])
    except (ValueError, RecursionError) as exc:
        raise ArtefactError(f"it is not JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ArtefactError(f"it is not a compiled catalog of format {FORMAT}")
    return doc, data[end + 1:]


def _resolve(entry: Any) -> type:
    if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry[:2])
            and isinstance(entry[2], list)):
        raise ArtefactError("a malformed class entry")
    module, qualname, names = entry
    if module.split(".", 1)[0] != PACKAGE:
        raise ArtefactError(f"it names a class outside this package: {module}")
    try:
        obj: Any = __import__(module, fromlist=["_"])
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise ArtefactError(f"it names an unknown class {module}.{qualname}") from None
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        raise ArtefactError(f"{module}.{qualname} is not a model class")
    if [f.name for f in dataclasses.fields(obj)] != names:
        raise ArtefactError(f"the fields of {qualname} differ from this engine's (recompile)")
    return obj


class _Decoder:
    def __init__(self, classes: list, check: bool):
        self.classes = []
        for entry in classes:
            cls = _resolve(entry)
            fields = dataclasses.fields(cls)
            fresh = {f.name: f.default_factory for f in fields if f.metadata.get("cache")}
            hints = _hints(cls, fields) if check else None
            # an untrusted file is read whole now; the packaged one leaves `defer` fields for their first use
            deferred = frozenset() if check else frozenset(f.name for f in fields if f.metadata.get("defer"))
            self.classes.append((cls, tuple(f.name for f in fields), fresh, hints, deferred))
        self.raw_pool: list[Any] = []
        self.pool: list[Any] = []
        self.section = b""  # the lazy section (every line after the first)
        self.lazy_pool_at: Any = None  # [offset, length] of the lazy pool table in it
        self.raw_lazy: list[Any] | None = None
        self.lazy: list[Any] = []
        self.check = check
        self.lock = threading.RLock()  # held while a deferred field is decoded (`_Deferred`)
        self.tags: dict[str, Callable[[list], Any]] = {
            "J": self._raw, "l": lambda v: self._items(v), "t": lambda v: tuple(self._items(v)),
            "f": lambda v: frozenset(self._items(v)), "m": self._mapping, "r": self._regex,
            "p": self._jmespath, "o": self._object, "@": self._ref, "&": self._lazy_ref, "L": self._lazy, "D": self._deferred}

    def dec(self, v: Any) -> Any:
        t = type(v)
        if t is list:
            # the three tags most values carry first (objects, pool references, tuples), each
            # as its own branch would run it; every other tag through the table
            tag = v[0] if v else None
            if tag == "o":
                return self._object(v)
            if tag == "@" and len(v) == 2:
                i = v[1]
                if type(i) is int and 0 <= i < len(self.pool):
                    hit = self.pool[i]
                    if hit is not _PENDING and hit is not _CYCLE:
                        return hit
                return self._ref(v)
            if tag == "t":
                dec = self.dec
                return tuple([dec(x) if type(x) in _CONTAINERS else x for x in v[1:]])
            if type(tag) is not str:
                raise ArtefactError("an untagged array")
            run = self.tags.get(tag)
            if run is None:
                raise ArtefactError(f"an unknown tag {tag[:20]!r}")
            return run(v)
        if t is dict:
            dec = self.dec
            return {k: dec(x) if type(x) in _CONTAINERS else x for k, x in v.items()}
        return v

    def _items(self, v: list) -> list:
        dec = self.dec
        return [dec(x) if type(x) in _CONTAINERS else x for x in v[1:]]

    def _raw(self, v: list) -> Any:
        if len(v) != 2 or type(v[1]) not in (dict, list):
            raise ArtefactError("a malformed J entry")
        return v[1]

    def _mapping(self, v: list) -> Any:
        if len(v) != 2 or type(v[1]) is not dict:
            raise ArtefactError("a malformed m entry")
        dec = self.dec
        return types.MappingProxyType({k: dec(x) if type(x) in _CONTAINERS else x for k, x in v[1].items()})

    def _regex(self, v: list) -> Any:
        if len(v) != 3 or type(v[1]) is not str or type(v[2]) is not int:
            raise ArtefactError("a malformed r entry")
        if not self.check:
            return LazyPattern(v[1], v[2])
        try:  # an untrusted file: compiled now, so that a bad one is a miss, not a failure later
            return re.compile(v[1], v[2])
        except (re.error, ValueError, OverflowError, TypeError) as exc:
            raise ArtefactError(f"a regular expression that does not compile ({exc})") from None

    def _jmespath(self, v: list) -> Any:
        if len(v) != 2 or type(v[1]) is not str:
            raise ArtefactError("a malformed p entry")
        if not self.check:
            return LazyJMESPath(v[1])

        import jmespath  # an untrusted file (the operator layer's cache): compiled now

        try:
            return jmespath.compile(v[1])
        except Exception as exc:  # jmespath's own errors, whatever the text
            raise ArtefactError(f"a JMESPath expression that does not compile ({type(exc).__name__})") from None

    def _ref(self, v: list) -> Any:
        return self._entry(v, self.pool, self.raw_pool)

    def _lazy_ref(self, v: list) -> Any:
        if self.raw_lazy is None:
            raw = self.lazy_json(self.lazy_pool_at)
            if not isinstance(raw, list):
                raise ArtefactError("a lazy pool table that is not a list")
            self.raw_lazy, self.lazy = raw, [_PENDING] * len(raw)
        return self._entry(v, self.lazy, self.raw_lazy)

    def _entry(self, v: list, table: list, raw: list) -> Any:
        if len(v) != 2 or type(v[1]) is not int or not 0 <= v[1] < len(table):
            raise ArtefactError("a reference to no pool entry")
        i = v[1]
        hit = table[i]
        if hit is _PENDING:
            table[i] = _CYCLE
            hit = table[i] = self.dec(raw[i])
        elif hit is _CYCLE:
            raise ArtefactError("a pool entry that refers to itself")
        return hit

    def lazy_json(self, at: Any) -> Any:
        """The JSON value at [offset, length] of the lazy section."""
        if not (type(at) is list and len(at) == 2 and all(type(x) is int and x >= 0 for x in at)
                and at[0] + at[1] <= len(self.section)):
            raise ArtefactError("a reference to no lazy text")
        try:
            return json.loads(self.section[at[0]:at[0] + at[1]])
        except (ValueError, RecursionError) as exc:
            raise ArtefactError(f"a part of it is not JSON ({type(exc).__name__})") from None

    def _deferred(self, v: list) -> Any:
        if len(v) != 3:
            raise ArtefactError("a malformed D entry")
        return self.dec(self.lazy_json(v[1:]))

    def _lazy(self, v: list) -> Any:
        if len(v) != 3:
            raise ArtefactError("a malformed L entry")
        at = v[1:]
        if self.check:  # an untrusted file is read whole, and checked, now
            value = self.dec(self.lazy_json(at))
            if not isinstance(value, Mapping):
                raise ArtefactError("a lazy field that is not a mapping")
            return value
        return LazyMapping(self, at)

    def _object(self, v: list) -> Any:
        k = v[1] if len(v) > 1 else None
        if type(k) is not int or not 0 <= k < len(self.classes):
            raise ArtefactError("an object of no class")
        cls, names, fresh, hints, deferred = self.classes[k]
        if len(v) != len(names) + 2:
            raise ArtefactError(f"a {cls.__qualname__} with {len(v) - 2} fields, not {len(names)}")
        obj = object.__new__(cls)
        dec = self.dec
        d = obj.__dict__
        if deferred:
            later = {}
            for name, x in zip(names, v[2:], strict=True):
                if type(x) not in _CONTAINERS:
                    d[name] = x
                elif name in deferred:
                    later[name] = x
                else:
                    d[name] = dec(x)
            if later:
                d[DEFERRED] = _Later(self, later)
        else:
            d.update(zip(names, [dec(x) if type(x) in _CONTAINERS else x for x in v[2:]], strict=True))
        if fresh:
            for name, factory in fresh.items():
                d[name] = factory()
        if hints is not None:
            for name, hint in hints.items():
                if not _accepts(hint, d[name]):
                    raise ArtefactError(f"{cls.__qualname__}.{name} holds a {type(d[name]).__name__}")
        return obj


def loads(data: bytes, *, check: bool = False) -> tuple[dict, Any]:
    """(header, the object) of an artefact; ArtefactError when it cannot be read. With
    `check`, every model field's value is checked against its annotation."""
    doc, section = _parse(data)
    classes, pool, root = doc.get("classes"), doc.get("pool"), doc.get("root")
    if not isinstance(classes, list) or not isinstance(pool, list):
        raise ArtefactError("it has no class or pool table")
    header = {k: v for k, v in doc.items() if k not in TABLES}
    d = _Decoder(classes, check)
    d.raw_pool = pool
    d.pool = [_PENDING] * len(pool)
    d.section, d.lazy_pool_at = section, doc.get("lazy_pool")
    try:
        return header, d.dec(root)
    except RecursionError:
        raise ArtefactError("it is nested too deeply") from None


def _is_parsed(o: Any) -> bool:
    """jmespath's ParsedResult (not imported to ask)."""
    t = type(o)
    return t.__name__ == "ParsedResult" and t.__module__.startswith("jmespath.")


_PATTERN_METHODS = ("search", "match", "fullmatch", "sub", "subn", "finditer", "findall", "split", "groups", "groupindex")


class LazyPattern:
    """A regular expression of the packaged artefact, compiled when first used (a start
    compiles ~275 of them otherwise, and uses a few). It answers as the compiled pattern
    does: the first use puts the pattern's methods in this object's slots, so later calls
    cost what they cost on the pattern itself."""

    __slots__ = ("pattern", "flags", "_real", *_PATTERN_METHODS)

    def __init__(self, pattern: str, flags: int):
        self.pattern, self.flags, self._real = pattern, flags, None

    def compiled(self) -> re.Pattern:
        if self._real is None:
            real = re.compile(self.pattern, self.flags)
            for name in _PATTERN_METHODS:
                setattr(self, name, getattr(real, name))
            self._real = real
        return self._real

    def __getattr__(self, name: str) -> Any:  # a slot not filled yet, or another attribute
        if name.startswith("__") or name == "_real":
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (LazyPattern, re.Pattern)):
            return (self.pattern, self.flags) == (other.pattern, other.flags)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"re.compile({self.pattern!r}, {self.flags})"


class LazyJMESPath:
    """A JMESPath expression of the packaged artefact, parsed when first used (jmespath's
    parser is Python); it answers as jmespath's ParsedResult does."""

    __slots__ = ("expression", "_real", "parsed", "search")

    def __init__(self, expression: str):
        self.expression, self._real = expression, None

    def compiled(self) -> Any:
        if self._real is None:
            import jmespath  # at the first expression a call evaluates, not at start

            real = jmespath.compile(self.expression)
            self.parsed, self.search = real.parsed, real.search
            self._real = real
        return self._real

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_real":
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, LazyJMESPath) or hasattr(other, "expression"):
            return self.expression == getattr(other, "expression", None)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.expression)

    def __repr__(self) -> str:
        return f"<ParsedResult {self.expression!r}>"


_CONTAINERS = frozenset((list, dict))
_PENDING = object()  # a pool entry not decoded yet
_CYCLE = object()  # a pool entry being decoded


class LazyMapping(Mapping):
    """A mapping field of a model read from the artefact, decoded on its first use. The
    packaged artefact was written by `interp compile` from a valid build, so decoding it
    later fails only if the file was changed under the engine: then it reads empty and one
    warning says so."""

    __slots__ = ("_decoder", "_raw", "_value")

    def __init__(self, decoder: _Decoder, raw: Any):
        self._decoder: _Decoder | None = decoder
        self._raw = raw
        self._value: Mapping | None = None

    def _mapping(self) -> Mapping:
        if self._value is None:
            try:
                value = self._decoder.dec(self._decoder.lazy_json(self._raw))
                if not isinstance(value, Mapping):
                    raise ArtefactError("a lazy field that is not a mapping")
            except (ArtefactError, RecursionError) as exc:
                logging.getLogger("arcane_mcp.artefact").warning("a part of the compiled catalog cannot be read (%s); it reads empty", exc)
                value = frozen_map()
            self._value, self._decoder, self._raw = value, None, None
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self._mapping()[key]

    def __iter__(self) -> Any:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def __repr__(self) -> str:
        return repr(dict(self._mapping()))


DEFERRED = "__artefact_later__"  # the instance member holding a model's undecoded `defer` fields


class _Later:
    """The undecoded values of one model's `defer` fields, and the decoder that reads them.
    Shared, never changed, by a copy of the model (copy.copy, dataclasses.replace reads
    the fields instead)."""

    __slots__ = ("decoder", "raw")

    def __init__(self, decoder: _Decoder, raw: dict[str, Any]):
        self.decoder, self.raw = decoder, raw

    def __copy__(self) -> _Later:
        return self

    def __deepcopy__(self, memo: Any) -> _Later:
        return self


class _Deferred:
    """The class attribute of a field whose metadata says `defer` (`deferred` puts it): a
    model read from the packaged artefact holds that field's value undecoded, and its
    first read decodes it into the instance, where every later read finds it (a plain
    attribute: this non-data descriptor is not asked again). A model made by its
    `__init__` holds every field already; on the class, the attribute is the default."""

    __slots__ = ("name", "default")

    def __init__(self, name: str, default: Any):
        self.name, self.default = name, default

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            if self.default is dataclasses.MISSING:
                raise AttributeError(self.name)
            return self.default
        d = obj.__dict__
        later = d.get(DEFERRED)
        if later is None or self.name not in later.raw:
            raise AttributeError(self.name)
        # one decode at a time per artefact: a shared pool entry half decoded by another
        # thread would read as a cycle
        with later.decoder.lock:
            if self.name in d:
                return d[self.name]
            try:
                value = later.decoder.dec(later.raw[self.name])
            except RecursionError:
                raise ArtefactError("it is nested too deeply") from None
            d[self.name] = value
        return value


def deferred(cls: type) -> type:
    """Class decorator (after `dataclass`): the fields whose metadata says `defer` are read
    from the packaged artefact when first used, not at start (a start lists the tools; the
    actions' bindings, columns and next steps are a call's). The model is unchanged to
    every reader: dataclasses.fields, replace, ==, hash and repr see the same values."""
    for f in dataclasses.fields(cls):
        if f.metadata.get("defer"):
            setattr(cls, f.name, _Deferred(f.name, f.default))
    return cls


# ---------------------------------------------------------------- the type check of an untrusted file


def _hints(cls: type, fields: tuple) -> dict[str, Any]:
    """Each field's annotation, evaluated in its class's module; one that cannot be
    evaluated (a name imported for type checkers only) is not checked."""
    namespace = dict(vars(sys.modules[cls.__module__]))
    out = {}
    for f in fields:
        if f.metadata.get("cache"):
            continue
        hint = f.type
        if isinstance(hint, str):
            try:
                hint = eval(hint, namespace)  # noqa: S307 - the annotation text of this package's own class
            except Exception:
                continue
        out[f.name] = hint
    return out


def _accepts(hint: Any, value: Any) -> bool:
    """Whether `value` has the shape `hint` annotates (containers with their items)."""
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts(a, value) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_accepts(args[0], x) for x in value)
        return not args or (len(args) == len(value) and all(_accepts(a, x) for a, x in zip(args, value, strict=True)))
    if origin in (frozenset, set, list):
        return isinstance(value, origin) and (not args or all(_accepts(args[0], x) for x in value))
    if origin in (dict, Mapping):
        if not isinstance(value, origin):
            return False
        return not args or all(_accepts(args[0], k) and _accepts(args[1], x) for k, x in value.items())
    if origin is typing.Literal:
        return value in args
    if origin is not None:
        return isinstance(value, origin) if isinstance(origin, type) else True
    if isinstance(hint, type):
        if hint is int:
            return type(value) is int
        if hint is float:
            return type(value) in (int, float)
        return isinstance(value, hint)
    return True


def load_file(path: Path, *, check: bool = False) -> tuple[dict, Any]:
    """`loads` of a file, refusing one larger than MAX_BYTES before reading it."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ArtefactError(f"it cannot be read ({exc.strerror or type(exc).__name__})") from None
    return loads(data, check=check)

