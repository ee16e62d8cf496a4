"""The find corpus's blind part (tests/data/find-corpus-blind.yaml) is well formed and unchanged.

Its figures are printed by `make test` (python -m tests.find_blind after the tests) and recorded by
`make bench`; they are figures, never floors, and nothing here asserts how well the ranker does.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests import find_blind

# The file as frozen before any tuning (issue 23). A change fails here on purpose: the part stops
# measuring generalisation once anybody edits it to match the rules.
FROZEN_SHA256 = "2d461d7385693230bca84f432e99c0351360b061b0e89af0b743b13ee0be9771"


@pytest.fixture(scope="module")
def entries():
    return find_blind.load()


def test_the_blind_part_is_unchanged():
    assert find_blind.sha256() == FROZEN_SHA256


def test_the_blind_part_is_well_formed(catalog, entries):
    assert len(entries) >= 150
    langs = Counter(e.lang for e in entries)
    assert all(langs[lang] >= 10 for lang in find_blind.LANGS if lang != "en"), langs
    kinds = Counter(e.kind for e in entries if e.lang == "en")
    assert set(kinds) == set(find_blind.KINDS), kinds
    unknown = [(e.query, aid) for e in entries for aid in e.expect if aid not in catalog.all_actions]
    assert unknown == []
    assert [q for q, n in Counter(e.query.lower() for e in entries).items() if n > 1] == []
    assert all(not e.changes for e in entries if e.kind == "question")


def test_the_figures_cover_every_request_and_category(catalog, entries):
    f = find_blind.evaluate(find_blind.catalog_rank_fn(catalog), entries)
    assert f.n == len(entries) == f.hits + f.misses
    assert {c for c in find_blind.CATEGORIES} <= set(f.top1)
    assert sum(f.top1[c][0] for c in find_blind.CATEGORIES) == f.n
    d = f.as_dict()
    assert 0.0 <= d["top1"] <= d["top3"] <= 1.0
    assert len(find_blind.summary(f)) == 4


def test_a_ranker_that_finds_nothing_is_all_misses_and_all_low(entries):
    f = find_blind.evaluate(lambda q: find_blind.Ranked(()), entries)
    assert (f.hits, f.misses, f.low_on_misses) == (0, len(entries), len(entries))
    assert f.mutating_first == f.destructive_first == 0
