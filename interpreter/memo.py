"""One bounded table for the engine's per-process memos (escaped cells, absolute URLs,
arguments found valid, omitted-member texts): made by `table`, read with `get` or `in` by
the caller, written only through `keep`, which forgets the oldest entry once the table
holds `size`. A hit costs one dict lookup, not a function call, which is why this is not
functools.lru_cache.

The table is an OrderedDict, not a plain dict, though both keep insertion order: a plain
dict leaves a hole where its first key was deleted, and finding the next first key walks
every hole left since the dict last grew, so a full memo of 8,192 cells spent some 5 µs
forgetting each one (docs/performance.md, Per call). An OrderedDict finds its first key
through its own links, at once, and reads as fast (tests/test_memo.py checks the memos are
made by `table` and forget in insertion order)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, TypeVar

V = TypeVar("V")


def table() -> OrderedDict:
    """A new, empty memo table for `keep`."""
    return OrderedDict()


def keep(table: dict[Any, V], key: Any, value: V, size: int) -> V:
    """Put `value` under `key`, forgetting the oldest entry first when `table` is full; the value."""
    if key not in table and len(table) >= size:
        del table[next(iter(table))]
    table[key] = value
    return value


__all__ = ["keep", "table"]
