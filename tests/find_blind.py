"""The find corpus's third part (tests/data/find-corpus-blind.yaml): figures, never floors.

247 requests written from the action list alone by someone who had read none of the rules, the
overlays or the other corpus, frozen before any tuning for issue 23. It measures how the ranker
generalises, so nobody tunes against it: its report gives figures per category and language and,
unless asked with --misses, no query. `make test` prints its figures at the end
(tests/conftest.py) and `make bench` records them; tests/test_find_blind.py checks that the file
is well formed and unchanged, not how well it scores.

    python -m tests.find_blind            the figures
    python -m tests.find_blind --summary  the four lines make test prints
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml import YAML

CORPUS = Path(__file__).parent / "data" / "find-corpus-blind.yaml"
KINDS = ("short", "question", "long", "typo", "ambiguous")
LANGS = ("en", "es", "de", "fr", "pt", "it")
# The categories: English by kind, Spanish, and the other languages together.
CATEGORIES = ("short", "question", "long", "typo", "ambiguous", "spanish", "other languages")
TOP = 3


@dataclass(frozen=True)
class Entry:
    query: str
    expect: tuple[str, ...]
    changes: bool
    kind: str
    lang: str

    @property
    def category(self) -> str:
        if self.lang == "en":
            return self.kind
        return "spanish" if self.lang == "es" else "other languages"


@dataclass(frozen=True)
class Ranked:
    """What a ranker answered for one request: the top IDs, whether the first changes state or
    is destructive, and the first's confidence (None when the ranker gives none)."""

    ids: tuple[str, ...]
    first_destructive: bool = False
    first_mutating: bool = False
    confidence: str | None = None


@dataclass
class Figures:
    n: int = 0
    top1: dict[str, list[int]] = field(default_factory=dict)  # category or lang -> [n, top1, top3]
    destructive_first: int = 0  # a destructive action first for a request that changes nothing
    mutating_first: int = 0  # a state-changing action first for a request that changes nothing
    misses: int = 0
    low_on_misses: int = 0  # misses whose first result says "low"
    hits: int = 0
    low_on_hits: int = 0

    def rate(self, key: str, k: int = 1) -> float:
        n, t1, t3 = self.top1.get(key, (0, 0, 0))
        return (t1 if k == 1 else t3) / n if n else 0.0

    def as_dict(self) -> dict:
        return {
            "queries": self.n,
            "top1": self.rate("all"), "top3": self.rate("all", 3),
            "by_category": {c: {"n": self.top1[c][0], "top1": self.rate(c), "top3": self.rate(c, 3)}
                            for c in (*CATEGORIES, *LANGS) if c in self.top1},
            "destructive_first": self.destructive_first,
            "state_changing_first_for_a_look": self.mutating_first,
            "low_confidence_on_misses": [self.low_on_misses, self.misses],
            "low_confidence_on_hits": [self.low_on_hits, self.hits],
        }


def sha256(path: Path = CORPUS) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(path: Path = CORPUS) -> list[Entry]:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    out = []
    for item in data["queries"]:
        expect = item["expect"]
        out.append(Entry(str(item["query"]), tuple([expect] if isinstance(expect, str) else expect),
                         bool(item["changes"]), str(item["kind"]), str(item["lang"])))
    return out


def catalog_rank_fn(catalog=None) -> Callable[[str], Ranked]:
    """The current ranker over a catalog (default: the built one)."""
    from interpreter.build.catalog import build
    from interpreter.text.rank import Ranker

    ranker = Ranker(catalog or build())

    def rank(query: str) -> Ranked:
        hits = ranker.rank(query, TOP)
        if not hits:
            return Ranked(())
        first = hits[0]
        return Ranked(tuple(h.action.id for h in hits), first.action.destructive, not first.action.read_only,
                      getattr(first, "confidence", None))

    return rank


def evaluate(rank: Callable[[str], Ranked] | None = None, entries: Sequence[Entry] | None = None) -> Figures:
    rank = rank or catalog_rank_fn()
    entries = load() if entries is None else entries
    f = Figures()
    for e in entries:
        r = rank(e.query)
        hit1 = bool(r.ids) and r.ids[0] in e.expect
        hit3 = any(i in e.expect for i in r.ids[:TOP])
        f.n += 1
        for key in ("all", e.category, e.lang):
            row = f.top1.setdefault(key, [0, 0, 0])
            row[0] += 1
            row[1] += hit1
            row[2] += hit3
        if not e.changes and r.ids:
            f.destructive_first += r.first_destructive
            f.mutating_first += r.first_mutating
        low = not r.ids or r.confidence == "low"
        if hit1:
            f.hits += 1
            f.low_on_hits += low
        else:
            f.misses += 1
            f.low_on_misses += low
    return f


def summary(f: Figures) -> list[str]:
    """The figures as a few lines (what `make test` prints)."""
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    cats = ", ".join(f"{c} {pct(f.rate(c))}" for c in CATEGORIES if c in f.top1)
    return [
        f"find corpus, blind part ({f.n} requests, figures not floors): top-1 {pct(f.rate('all'))}, top-3 {pct(f.rate('all', 3))}",
        f"  top-1 by category: {cats}",
        f"  a state-changing action first for a request that changes nothing: {f.mutating_first} (destructive: {f.destructive_first})",
        f"  'low' confidence on the first result: {f.low_on_misses} of {f.misses} misses, {f.low_on_hits} of {f.hits} hits",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.find_blind", description=__doc__.splitlines()[0])
    ap.add_argument("--misses", action="store_true",
                    help="also list the misses (for reading after a change, never for tuning the rules)")
    ap.add_argument("--summary", action="store_true", help="only the four summary lines (what make test prints)")
    args = ap.parse_args(argv)
    f = evaluate()
    out = sys.stdout.write
    for line in summary(f):
        out(line + "\n")
    if args.summary:
        return 0
    out("\ncategory          n   top-1   top-3\n")
    for c in (*CATEGORIES, *LANGS):
        if c in f.top1:
            out(f"{c:16} {f.top1[c][0]:3}  {100 * f.rate(c):5.1f}%  {100 * f.rate(c, 3):5.1f}%\n")
    if args.misses:
        rank = catalog_rank_fn()
        for e in load():
            r = rank(e.query)
            if not (r.ids and r.ids[0] in e.expect):
                out(f"  [{e.category}] {e.query!r}: want {'|'.join(e.expect)}, got {', '.join(r.ids) or '(nothing)'}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
