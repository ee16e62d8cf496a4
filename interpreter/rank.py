"""The find ranker: a free-text query -> actions, best first.

Generic: every word it knows about queries (change words, stop words, synonyms, question
words, plural endings) and every weight, threshold, penalty and boost it scores with come
from rules/find.yaml (compiled: catalog.find); every word it knows about actions comes from
the catalog (IDs, titles, aliases, usage notes, descriptions).

How a query is read: folded (lower case, no accents) and split into words; stop words
dropped; each word looked up as typed, then without a plural ending (`redes` as `red`),
then as two action words run together (`apikey`), then fuzzily within its edit budget
(`lsit` is one swap from `list`); its synonyms join it at a lower weight. Each word weighs
more the rarer it is among the actions, so the key words of a long request lead. A
question ("why…", "which…", "…?") prefers read-only actions; a destructive action is never
the top result unless the query asks to change something; an action not served yet scores
less.
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from .suggest import stem, words

if TYPE_CHECKING:
    from .catalog import Action, Catalog


@dataclass(frozen=True)
class Hit:
    action: Action
    score: float


def edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (insertions, deletions, substitutions, swaps of
    two neighbours), or limit + 1 once it is certainly above `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _deletes(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


_RANKERS: dict[int, Ranker] = {}  # id(catalog) -> its index, dropped when the catalog goes


def ranker_for(catalog: Catalog) -> Ranker:
    """The index over `catalog`, built once per catalog object and shared by every surface
    over it: HTTP mode's per-key servers serve the one shared catalog (unless a key's
    permissions withdraw actions, which makes that key its own catalog), and an index is
    megabytes. Its lookup cache holds only the catalog's own words matched to query words."""
    ranker = _RANKERS.get(id(catalog))
    if ranker is None:
        ranker = _RANKERS[id(catalog)] = Ranker(catalog)
        weakref.finalize(catalog, _RANKERS.pop, id(catalog), None)  # an id is reused once its object is gone
    return ranker


class Ranker:
    """An index over one catalog, built once."""

    def __init__(self, catalog: Catalog):
        rules = catalog.find
        self.w = rules.weights
        self.question = rules.question
        self.plurals = rules.plurals
        self.change = {stem(w) for w in rules.change_words}
        self.stop = rules.stop_words
        self.synonyms = rules.synonyms
        # a query that names only a domain prefers these actions of it
        self.defaults = list(rules.noun_only_prefers)
        self.actions = list(catalog.actions.values())
        self.index = [self._fields(a) for a in self.actions]
        df = Counter(form for f in self.index for form in f["bag"])
        n = max(len(self.actions), 1)
        top = math.log((n + 1) / 2) or 1.0
        # how rare each word is among the actions: 1 for a word one action has, 0 for all
        self.rarity = {form: max(0.0, math.log((n + 1) / (c + 1)) / top) for form, c in df.items()}
        self.vocab = frozenset(df)
        shortest = min((m for m, _ in self.w.fuzzy_edits), default=0)
        # the one-letter deletions of every action word, for fuzzy candidates (symmetric delete)
        self.deletions: dict[str, set[str]] = {}
        for word in self.vocab:
            if shortest and len(word) >= shortest - 1:
                for d in _deletes(word) | {word}:
                    self.deletions.setdefault(d, set()).add(word)
        self._lookup = lru_cache(maxsize=8192)(self._matches)

    # ------------------------------------------------------------ words

    def forms(self, word: str) -> tuple[str, ...]:
        """A word and its stems without a plural ending (rules/find.yaml `plurals`)."""
        out = [word]
        for strip, add in self.plurals.endings:
            if word.endswith(strip) and len(word) - len(strip) >= self.plurals.min_stem:
                form = word[: -len(strip)] + add
                if form not in out:
                    out.append(form)
        return tuple(out)

    def _bag(self, text: str, weight: float, into: dict[str, float]) -> None:
        for w in words(text):
            for form in self.forms(w):
                into[form] = max(into.get(form, 0.0), weight)

    def _fields(self, a: Action) -> dict:
        w = self.w
        bag: dict[str, float] = {}
        self._bag(a.description, w.description, bag)
        self._bag(a.usage, w.usage, bag)
        self._bag(a.title, w.title, bag)
        for alias in a.aliases:
            self._bag(alias, w.alias, bag)
        # the head noun of a domain (backup in volume_backup) weighs most, the others less
        dwords = words(a.domain)
        for i, word in enumerate(dwords):
            self._bag(word, w.domain if i == len(dwords) - 1 else w.domain_other, bag)
        # the verb (first word of the action name) weighs most, the rest less
        for i, word in enumerate(words(a.name)):
            self._bag(word, w.verb if i == 0 else w.name_rest, bag)
        # alias words are kept whole ("stop all containers" must not shrink to "stop containers")
        aliases = [tuple(frozenset(self.forms(x)) for x in words(alias)) for alias in a.aliases]
        return {"bag": bag, "aliases": [x for x in aliases if x], "id": a.id}

    def _weight(self, form: str) -> float:
        r = self.w.rarity
        return r + (1 - r) * self.rarity.get(form, 0.0)

    def _budget(self, word: str) -> int:
        edits = 0
        for min_length, n in self.w.fuzzy_edits:
            if len(word) >= min_length:
                edits = n
        return edits

    def _fuzzy(self, word: str) -> list[tuple[str, int]]:
        """Action words within the word's edit budget, closest first (at most `candidates`)."""
        budget = self._budget(word)
        if not budget or word.isdigit():
            return []
        probes = {word} | _deletes(word)
        if budget > 1:
            probes |= {d2 for d in _deletes(word) for d2 in _deletes(d)}
        found = {c for p in probes for c in self.deletions.get(p, ())}
        scored = sorted((d, c) for c in found if (d := edit_distance(word, c, budget)) <= budget)
        return [(c, d) for d, c in scored[: self.w.fuzzy_candidates]]

    def _matches(self, word: str) -> tuple[tuple[str, float], ...]:
        """The action words a query word counts as, each with its multiplier (rarity, and
        the fuzzy factors for a misspelt word); empty when it matches nothing."""
        present = [f for f in self.forms(word) if f in self.vocab]
        if present:
            weight = self._weight(present[0])
            return tuple((f, weight) for f in present)
        w = self.w
        return tuple((c, w.fuzzy * (w.fuzzy_second_edit if d > 1 else 1.0) * self._weight(c)) for c, d in self._fuzzy(word))

    def _known(self, word: str) -> bool:
        return any(f in self.vocab for f in self.forms(word))

    def _split(self, word: str) -> list[str] | None:
        """Two action words run together ("apikey" -> api, key), or None."""
        m = self.w.fuzzy_split_min
        for i in range(m, len(word) - m + 1):
            if self._known(word[:i]) and self._known(word[i:]):
                return [word[:i], word[i:]]
        return None

    def _synonyms(self, word: str) -> tuple[str, ...]:
        for form in self.forms(word):
            if form in self.synonyms:
                return self.synonyms[form]
        return ()

    def _query_terms(self, query: str) -> list[tuple[str, float]]:
        """(query word, weight): the words themselves 1, their synonyms' words `synonym`."""
        terms: dict[str, float] = {}
        for w in words(query):
            if w in self.stop:
                continue
            syns = self._synonyms(w)
            parts = [w]
            if not syns and not self._known(w) and len(w) >= 2 * self.w.fuzzy_split_min:
                parts = self._split(w) or [w]
            for part in parts:
                terms[part] = 1.0
            for syn in syns:
                for sw in words(syn):
                    terms.setdefault(sw, self.w.synonym)
        return list(terms.items())

    # ------------------------------------------------------------ the query

    def asks_to_change(self, query: str) -> bool:
        return any(stem(w) in self.change for w in words(query))

    def is_question(self, query: str) -> bool:
        """Whether the query asks about state (rules/find.yaml `question`)."""
        ws = words(query)
        if not ws:
            return False
        if any(tuple(ws[: len(r)]) == r for r in self.question.requests if r):
            return False
        return ws[0] in self.question.words or query.rstrip().endswith("?")

    def rank(self, query: str, limit: int = 10, domain: str | None = None) -> list[Hit]:
        w = self.w
        q = query.strip().lower()
        terms = self._query_terms(q)
        matches = [(self._lookup(term), tw) for term, tw in terms]
        known = [m for m in matches if m[0]]
        qall = {f for x in words(q) for f in self.forms(x)}  # stop words too: aliases hold them ("who am i")
        qlen = max(sum(1 for x in words(q) if x not in self.stop and (self._known(x) or self._synonyms(x))), 1)
        exact = q if any(f["id"] == q for f in self.index) else None
        question = self.is_question(q)
        change = self.asks_to_change(q) and not question
        hits: list[Hit] = []
        for action, f in zip(self.actions, self.index, strict=True):
            if domain and action.domain != domain:
                continue
            if exact == action.id:
                hits.append(Hit(action, w.exact_id))
                continue
            bag = f["bag"]
            score, matched = 0.0, 0
            for found, tw in known:
                best = max(bag.get(form, 0.0) * mult for form, mult in found)
                if best:
                    matched += 1
                score += best * tw
            # an alias whose every word is in the query: the more of the query it covers, the more it counts
            best_alias = max((min(1.0, len(al) / qlen) for al in f["aliases"] if all(forms & qall for forms in al)), default=0.0)
            score += w.alias_phrase * best_alias
            if not score:
                continue
            if action.name in self.defaults and not change:
                score += w.noun_only_bonus * (len(self.defaults) - self.defaults.index(action.name)) / len(self.defaults)
            if known:
                # reward covering the whole query; words no action has (names, numbers) do not dilute it
                score *= w.coverage_floor + (1 - w.coverage_floor) * matched / len(known)
            if question and action.mutating:
                score *= self.question.mutating
            if action.destructive and not change:
                score *= w.destructive
            if action.pending:
                score *= w.pending
            hits.append(Hit(action, round(score, 4)))
        hits.sort(key=lambda h: (-h.score, h.action.destructive, h.action.pending, h.action.id))
        if hits and hits[0].action.destructive and not change and exact != hits[0].action.id:
            safe = next((i for i, h in enumerate(hits) if not h.action.destructive), None)
            if safe is not None:
                hits.insert(0, hits.pop(safe))
        return hits[:limit]
