"""interpreter/memo.py: the one bounded table the per-process memos share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from interpreter.memo import keep


def test_the_oldest_entry_is_forgotten_when_the_table_is_full():
    table: dict = {}
    for k in "abc":
        assert keep(table, k, k.upper(), 2) == k.upper()
    assert table == {"b": "B", "c": "C"}
    keep(table, "c", "C2", 2)  # an existing key is replaced, nothing forgotten
    assert table == {"b": "B", "c": "C2"}


@given(st.lists(st.integers(0, 20)), st.integers(1, 8))
def test_it_never_holds_more_than_its_size_and_keeps_the_newest(keys, size):
    table: dict = {}
    for k in keys:
        keep(table, k, k, size)
        assert len(table) <= size and table[k] == k
