"""The find corpus as a regression test: the current ranker over the built catalog keeps its
top-1/top-3 floors on both halves and never puts a destructive action first for a query that
does not ask to change or remove something. `python -m tests.find_corpus` prints the misses."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from tests.find_corpus import (
    CATEGORIES,
    KINDS,
    SPLITS,
    TOP,
    catalog_is_mutating,
    catalog_rank_fn,
    evaluate,
    load,
)

# Floors: the (top-1 >= 92 %, top-3 >= 98 % on each half); python -m tests.find_corpus
# shows the measured level. Raise them when the ranker or the rules get better, never lower them
# to make a change pass. Measured after the ranker read queries once (a word and its synonyms
# count once, joined and first-letter-kept typos, in-order aliases, a leading verb asks for its
# action's change, clause questions) and every action got a usage note: tune 98.5 % / 99.6 %,
# heldout 93.3 % / 98.8 % (tuned on the tune half's misses only; heldout read as figures and
# miss-category counts). Before: tune 93.9 % / 98.5 %, heldout 89.2 % / 97.9 %; before the
# overlays: tune 53.8 % / 73.1 %, heldout 57.9 % / 72.9 %. With 176 more requests (shorthands,
# four more languages, noun phrases, long and ambiguous requests; 680 in all): before the ranker
# read intent, tune 87.7 % / 92.0 %, heldout 82.7 % / 89.4 % (22 state-changing and 1 destructive
# action first for a request to see); after, tune 97.4 % / 99.4 %, heldout 93.0 % / 97.3 %, none.
FLOORS = {
    "tune": {"top1": 0.92, "top3": 0.98},
    "heldout": {"top1": 0.92, "top3": 0.98},
}


@pytest.fixture(scope="module")
def entries():
    return load()


@pytest.fixture(scope="module")
def figures(catalog, entries):
    rank, destructive = catalog_rank_fn(catalog)
    return evaluate(rank, destructive, entries, is_mutating=catalog_is_mutating(catalog))


def test_corpus_is_well_formed(catalog, entries):
    assert len(entries) >= 620
    problems = []
    for e in entries:
        where = f"line {e.line}: {e.query!r}"
        if e.kind not in KINDS or e.split not in SPLITS:
            problems.append(f"{where}: kind {e.kind!r} / split {e.split!r}")
        for aid in e.expect:
            if aid not in catalog.all_actions:
                problems.append(f"{where}: no action {aid!r}")
            elif catalog.all_actions[aid].destructive and not e.changes:
                problems.append(f"{where}: expects destructive {aid} but says it changes nothing")
        if not e.changes and all(aid in catalog.all_actions and catalog.all_actions[aid].mutating for aid in e.expect):
            problems.append(f"{where}: expects only actions that change state but says it changes nothing")
        if (e.kind == "other") != bool(e.lang):
            problems.append(f"{where}: a kind `other` entry names its language (lang), and only it")
        if len(e.expect) != len(set(e.expect)):
            problems.append(f"{where}: an expected ID twice")
    dupes = [q for q, n in Counter(e.query.lower() for e in entries).items() if n > 1]
    assert not problems and not dupes, problems + dupes


def test_split_is_the_frozen_alternation_and_covers_every_domain(catalog, entries):
    """Within each domain the entries alternate tune, heldout, ... in file order: nobody moved a
    query from one half to the other after the halves were frozen."""
    seen: dict[str, int] = defaultdict(int)
    wrong = []
    for e in entries:
        want = SPLITS[seen[e.domain] % 2]
        seen[e.domain] += 1
        if e.split != want:
            wrong.append(f"line {e.line}: {e.query!r} is {e.split}, the alternation says {want}")
    assert not wrong, wrong
    for split in SPLITS:
        domains = {e.domain for e in entries if e.split == split}
        assert domains == set(catalog.domains), (split, sorted(set(catalog.domains) - domains))
    for kind in KINDS:
        assert {e.split for e in entries if e.kind == kind} == set(SPLITS), kind
    # each other language has at least 12 requests
    langs = Counter(e.lang for e in entries if e.kind == "other")
    assert set(langs) >= {"de", "fr", "pt", "it"} and min(langs.values()) >= 12, langs


def test_no_destructive_action_first_unless_asked(figures):
    bad = [(o.entry.line, o.entry.query, o.ranked[0]) for o in figures.violations]
    assert bad == []


def test_no_state_changing_action_first_for_a_query_that_changes_nothing(figures):
    """A question or a noun phrase asks to see: a read answers it first, never an action that
    changes state (connect, save, create, update...)."""
    bad = [(o.entry.line, o.entry.query, o.ranked[0]) for o in figures.change_violations]
    assert bad == []


def test_every_category_is_measured_on_both_halves(figures):
    for split in SPLITS:
        for category in CATEGORIES:
            assert figures.by_category[(split, category)].n > 0, (split, category)


@pytest.mark.parametrize("split", SPLITS)
def test_top1_and_top3_floors(figures, split):
    score = figures.by_split[split]
    misses = [(o.entry.query, o.entry.expect, o.ranked) for o in figures.misses(split, k=TOP)]
    assert score.top1_rate >= FLOORS[split]["top1"], (score, figures.misses(split)[:20])
    assert score.top3_rate >= FLOORS[split]["top3"], (score, misses[:20])


def test_evaluate_counts_what_a_rank_function_returns(entries):
    """The figures come from the rank function given: an oracle scores 100 %, a ranker that
    answers a destructive ID for everything scores the violations."""
    first = entries[:12]
    oracle = evaluate(lambda q: [next(e.expect[0] for e in first if e.query == q)], lambda aid: False, first)
    assert oracle.by_split["all"].top1 == len(first) and not oracle.violations
    wrong = evaluate(lambda q: ["container.delete", "x.y", "y.z"], lambda aid: aid == "container.delete", first)
    expected_hits = sum(1 for e in first if "container.delete" in e.expect)
    assert wrong.by_split["all"].top1 == expected_hits
    assert len(wrong.violations) == sum(1 for e in first if not e.changes)
    assert len(wrong.misses()) == len(first) - expected_hits
