"""One bounded table for the engine's per-process memos (escaped cells, absolute URLs,
arguments found valid, omitted-member texts): a plain dict read with `get` or `in` by the
caller, written only through `keep`, which forgets the oldest entry once the table holds
`size`. A dict keeps insertion order, so the oldest is its first key; a hit costs one dict
lookup, not a function call, which is why this is not functools.lru_cache."""

from __future__ import annotations

from typing import Any, TypeVar

V = TypeVar("V")


def keep(table: dict[Any, V], key: Any, value: V, size: int) -> V:
    """Put `value` under `key`, forgetting the oldest entry first when `table` is full; the value."""
    if key not in table and len(table) >= size:
        del table[next(iter(table))]
    table[key] = value
    return value


__all__ = ["keep"]
