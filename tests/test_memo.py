"""interpreter/memo.py: the one bounded table the per-process memos share."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given
from hypothesis import strategies as st

from interpreter.memo import keep, table


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


def test_the_memos_are_made_by_table():
    # a plain dict walks the holes its forgotten keys left to find the next oldest (some
    # 5 us a cell in a full memo of 8,192); the memos are made by table(), an OrderedDict
    from interpreter.call.request import ArcaneClient
    from interpreter.config import Settings
    from interpreter.text import escape

    assert type(table()) is OrderedDict
    assert type(escape._memo(3, False)) is OrderedDict
    assert type(ArcaneClient(Settings(arcane_url="http://arcane.test"))._urls) is OrderedDict


def test_the_table_forgets_in_insertion_order_across_many_rounds():
    memo = table()
    for i in range(5000):
        keep(memo, i, i, 100)
    assert list(memo) == list(range(4900, 5000))
