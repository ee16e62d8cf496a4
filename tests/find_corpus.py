"""The find corpus (tests/data/find-corpus.yaml): how well a ranker finds the action a user means.

`evaluate` runs a rank function over the corpus and returns the figures (top-1/top-3 per split,
by kind and by category, destructive-at-top and change-at-top violations, the confidence of
each top result, misses); `tests/test_find_corpus.py` asserts floors on them and the benchmark
reads the same figures. `overlay_coverage` counts what the overlays add to the catalog.
`python -m tests.find_corpus [--split heldout] [--corpus FILE]` prints a report; any file of the
same shape can be measured (`--corpus`).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

CORPUS = Path(__file__).parent / "data" / "find-corpus.yaml"
SPLITS = ("tune", "heldout")
KINDS = ("imperative", "cli", "question", "noun", "long", "typo", "abbrev", "spanish", "other", "ambiguous")
# the categories the report (and the issue) counts: each a set of kinds
CATEGORIES = {
    "short": ("imperative", "cli"),
    "question": ("question", "noun"),
    "long": ("long",),
    "typo/abbrev": ("typo", "abbrev"),
    "spanish": ("spanish",),
    "other-lang": ("other",),
    "ambiguous": ("ambiguous",),
}
CONFIDENCES = ("high", "medium", "low")
TOP = 3  # the top-k the corpus measures besides top-1

# A rank function: a query -> action IDs, best first (at least TOP of them when it has them), or
# the ranker's hits (each with `.action.id` and `.confidence`), whose confidences are measured too.
RankFn = Callable[[str], Sequence[Any]]


@dataclass(frozen=True)
class Entry:
    """One corpus query and the actions that answer it."""

    query: str
    expect: tuple[str, ...]
    changes: bool
    kind: str
    split: str
    line: int
    lang: str = ""  # the language of a kind `other` entry (de, fr, pt, it)

    @property
    def domain(self) -> str:
        return self.expect[0].split(".", 1)[0]


@dataclass(frozen=True)
class Outcome:
    entry: Entry
    ranked: tuple[str, ...]  # the top TOP action IDs
    top_destructive: bool
    top_mutating: bool = False
    confidence: str = ""  # the top result's confidence ("" when the rank function gives none)

    @property
    def top1(self) -> bool:
        return bool(self.ranked) and self.ranked[0] in self.entry.expect

    @property
    def top3(self) -> bool:
        return any(r in self.entry.expect for r in self.ranked[:TOP])

    @property
    def violation(self) -> bool:
        """A destructive action first for a query that does not ask to change or remove."""
        return self.top_destructive and not self.entry.changes

    @property
    def change_violation(self) -> bool:
        """A state-changing action first for a query that asks to see, not to change."""
        return self.top_mutating and not self.entry.changes


@dataclass(frozen=True)
class Confidence:
    """How well "low" on the top result tells a miss: the share of top-1 misses marked low (the
    more the better) and the share of top-1 hits marked low (the fewer the better)."""

    misses: int
    misses_low: int
    hits: int
    hits_low: int

    @property
    def misses_low_rate(self) -> float:
        return self.misses_low / self.misses if self.misses else 0.0

    @property
    def hits_low_rate(self) -> float:
        return self.hits_low / self.hits if self.hits else 0.0


def confidence_rates(outcomes: Sequence[Outcome]) -> Confidence:
    rated = [o for o in outcomes if o.confidence]
    miss = [o for o in rated if not o.top1]
    hit = [o for o in rated if o.top1]
    return Confidence(len(miss), sum(o.confidence == "low" for o in miss), len(hit), sum(o.confidence == "low" for o in hit))


@dataclass(frozen=True)
class Score:
    n: int
    top1: int
    top3: int

    @property
    def top1_rate(self) -> float:
        return self.top1 / self.n if self.n else 0.0

    @property
    def top3_rate(self) -> float:
        return self.top3 / self.n if self.n else 0.0


def _score(outcomes: Sequence[Outcome]) -> Score:
    return Score(len(outcomes), sum(o.top1 for o in outcomes), sum(o.top3 for o in outcomes))


@dataclass(frozen=True)
class Figures:
    """Everything the corpus measures for one ranker."""

    outcomes: tuple[Outcome, ...]
    by_split: dict[str, Score] = field(default_factory=dict)
    by_kind: dict[tuple[str, str], Score] = field(default_factory=dict)  # (split, kind)
    by_category: dict[tuple[str, str], Score] = field(default_factory=dict)  # (split, category)
    confidence: dict[str, Confidence] = field(default_factory=dict)  # split (and "all") -> rates

    @property
    def violations(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.violation]

    @property
    def change_violations(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.change_violation]

    def misses(self, split: str | None = None, k: int = 1) -> list[Outcome]:
        return [o for o in self.outcomes if (split is None or o.entry.split == split)
                and not (o.top1 if k == 1 else o.top3)]


def load(path: Path = CORPUS) -> list[Entry]:
    """The corpus entries in file order."""
    data = YAML(typ="rt").load(path.read_text(encoding="utf-8"))
    out = []
    for item in data["queries"]:
        expect = item["expect"]
        out.append(Entry(query=str(item["query"]), expect=tuple([expect] if isinstance(expect, str) else expect),
                         changes=bool(item["changes"]), kind=str(item["kind"]), split=str(item["split"]),
                         line=item.lc.line + 1, lang=str(item.get("lang", ""))))
    return out


def catalog_rank_fn(catalog=None) -> tuple[RankFn, Callable[[str], bool]]:
    """The current ranker (interpreter.text.rank.Ranker) over a catalog (default: the built one),
    giving its hits (IDs and confidences), and a test of whether an action ID is destructive."""
    from interpreter.build.catalog import build
    from interpreter.text.rank import Ranker

    catalog = catalog or build()
    ranker = Ranker(catalog)

    def rank(query: str) -> list:
        return ranker.rank(query, TOP)

    return rank, (lambda aid: catalog.actions[aid].destructive if aid in catalog.actions else False)


def catalog_is_mutating(catalog=None) -> Callable[[str], bool]:
    """Whether an action ID changes state (is not read-only) in a catalog (default: the built one)."""
    from interpreter.build.catalog import build

    catalog = catalog or build()
    return lambda aid: catalog.actions[aid].mutating if aid in catalog.actions else False


def evaluate(rank: RankFn | None = None, is_destructive: Callable[[str], bool] | None = None,
             entries: Sequence[Entry] | None = None, *, is_mutating: Callable[[str], bool] | None = None,
             path: Path | None = None) -> Figures:
    """Run `rank` over the corpus at `path` (default: tests/data/find-corpus.yaml), or over
    `entries`; `rank` defaults to the current ranker over the built catalog."""
    if rank is None:
        rank, default_destructive = catalog_rank_fn()
        is_destructive = is_destructive or default_destructive
        is_mutating = is_mutating or catalog_is_mutating()
    is_destructive = is_destructive or (lambda aid: False)
    is_mutating = is_mutating or (lambda aid: False)
    entries = load(path or CORPUS) if entries is None else entries
    outcomes = []
    for e in entries:
        got = tuple(rank(e.query))[:TOP]
        ranked = tuple(x if isinstance(x, str) else x.action.id for x in got)
        confidence = "" if not got or isinstance(got[0], str) else str(getattr(got[0], "confidence", ""))
        outcomes.append(Outcome(e, ranked, bool(ranked) and is_destructive(ranked[0]),
                                bool(ranked) and is_mutating(ranked[0]), confidence))
    by_split = {s: _score([o for o in outcomes if o.entry.split == s]) for s in SPLITS}
    by_split["all"] = _score(outcomes)
    by_kind = {(s, k): _score([o for o in outcomes if o.entry.split == s and o.entry.kind == k])
               for s in SPLITS for k in KINDS}
    by_category = {(s, c): _score([o for o in outcomes if o.entry.split == s and o.entry.kind in ks])
                   for s in SPLITS for c, ks in CATEGORIES.items()}
    confidence = {s: confidence_rates([o for o in outcomes if o.entry.split == s]) for s in SPLITS}
    confidence["all"] = confidence_rates(outcomes)
    return Figures(tuple(outcomes), by_split, by_kind, by_category, confidence)


def overlay_coverage(catalog=None) -> dict[str, int]:
    """What the overlays add over the OpenAPI document: counts over every action."""
    from interpreter.build.catalog import build

    catalog = catalog or build()
    acts = list(catalog.all_actions.values())
    lists = [a for a in acts if a.name == "list" or a.name.startswith("list_")]
    return {
        "actions": len(acts),
        "domains": len(catalog.domains),
        "domains_with_description": sum(1 for d in catalog.domains.values() if d.description),
        "usage_notes": sum(1 for a in acts if a.usage),
        "actions_with_aliases": sum(1 for a in acts if a.aliases),
        "aliases": sum(len(a.aliases) for a in acts),
        "actions_with_related_or_follow_ups": sum(1 for a in acts if a.related or a.follow_ups),
        "related_and_follow_ups": sum(len(a.related) + len(a.follow_ups) for a in acts),
        "list_actions": len(lists),
        "list_actions_with_columns": sum(1 for a in lists if a.columns),
        "list_actions_with_empty": sum(1 for a in lists if a.empty_hint),
        "actions_with_columns": sum(1 for a in acts if a.columns),
        "actions_with_empty": sum(1 for a in acts if a.empty_hint),
    }


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def report(figures: Figures, *, misses: bool = True, split: str | None = None, out=sys.stdout) -> None:
    """Print top-1/top-3 per split, category and kind, the confidence rates, violations and
    (optionally) the misses."""
    w = out.write
    w("split    queries  top-1   top-3\n")
    for s in (*SPLITS, "all"):
        sc = figures.by_split[s]
        w(f"{s:8} {sc.n:7}  {_pct(sc.top1_rate)}  {_pct(sc.top3_rate)}\n")
    w("\nby category: tune top-1 / top-3 | heldout top-1 / top-3\n")
    for c in CATEGORIES:
        t, h = figures.by_category[("tune", c)], figures.by_category[("heldout", c)]
        w(f"  {c:12} {t.top1:3}/{t.n:<3} {_pct(t.top1_rate)} {_pct(t.top3_rate)} | "
          f"{h.top1:3}/{h.n:<3} {_pct(h.top1_rate)} {_pct(h.top3_rate)}\n")
    w("\nby kind (top-1 tune / heldout)\n")
    for k in KINDS:
        t, h = figures.by_kind[("tune", k)], figures.by_kind[("heldout", k)]
        w(f"  {k:10} {t.top1:3}/{t.n:<3} {_pct(t.top1_rate)}   {h.top1:3}/{h.n:<3} {_pct(h.top1_rate)}\n")
    w("\nconfidence \"low\" on the top result: share of top-1 misses marked low | share of top-1 hits marked low\n")
    for s in (*SPLITS, "all"):
        c = figures.confidence.get(s)
        if c is not None and c.misses + c.hits:
            w(f"  {s:8} {c.misses_low:3}/{c.misses:<3} {_pct(c.misses_low_rate)} | {c.hits_low:3}/{c.hits:<3} {_pct(c.hits_low_rate)}\n")
    dom = Counter(o.entry.domain for o in figures.outcomes)
    w(f"\ndomains: {len(dom)}; destructive-at-top violations: {len(figures.violations)}; "
      f"change-at-top for a query that changes nothing: {len(figures.change_violations)}\n")
    for o in figures.violations:
        w(f"  VIOLATION line {o.entry.line}: {o.entry.query!r} -> {o.ranked[0]}\n")
    for o in figures.change_violations:
        w(f"  CHANGE line {o.entry.line}: {o.entry.query!r} -> {o.ranked[0]}\n")
    if misses:
        for s in ([split] if split else SPLITS):
            ms = figures.misses(s)
            w(f"\ntop-1 misses in {s} ({len(ms)}):\n")
            for o in ms:
                mark = "  " if o.top3 else "!!"  # !! = not in the top 3 either
                w(f" {mark} [{o.confidence or '-'}] {o.entry.query!r}: want {'|'.join(o.entry.expect)}, got {', '.join(o.ranked) or '(nothing)'}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.find_corpus", description=__doc__.splitlines()[0])
    ap.add_argument("--no-misses", action="store_true", help="only the figures")
    ap.add_argument("--split", choices=SPLITS, help="list the misses of this split only")
    ap.add_argument("--coverage", action="store_true", help="also print the overlay coverage")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="a corpus file of the same shape (default: %(default)s)")
    args = ap.parse_args(argv)
    report(evaluate(path=args.corpus), misses=not args.no_misses, split=args.split)
    if args.coverage:
        sys.stdout.write("\noverlay coverage\n")
        for k, v in overlay_coverage().items():
            sys.stdout.write(f"  {k:36} {v}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
