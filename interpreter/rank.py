"""The find ranker: a free-text query -> actions, best first.

Generic: every word it knows about queries (change words, stop words, synonyms) and every
weight, threshold, penalty and boost it scores with come from rules/find.yaml (compiled:
catalog.find); every word it knows about actions comes from the catalog (IDs, titles,
aliases, usage notes, descriptions). Typo tolerant through fuzzy token matching. A
destructive action is never the top result unless the query asks to change something.
"""

from __future__ import annotations

import difflib
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


class Ranker:
    """An index over one catalog, built once."""

    def __init__(self, catalog: Catalog):
        rules = catalog.find
        self.w = rules.weights
        self.change = {stem(w) for w in rules.change_words}
        self.stop = rules.stop_words
        self.synonyms = rules.synonyms
        # a query that names only a domain prefers these actions of it
        self.defaults = list(rules.noun_only_prefers)
        self._fuzzy = lru_cache(maxsize=4096)(self._fuzzy_matches)
        self.actions = list(catalog.actions.values())
        self.index = [self._fields(a) for a in self.actions]
        self.vocab = sorted({t for f in self.index for bag in f.values() if isinstance(bag, dict) for t in bag})

    @staticmethod
    def _bag(text: str, weight: float, into: dict[str, float]) -> None:
        for w in words(text):
            s = stem(w)
            into[s] = max(into.get(s, 0.0), weight)

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
            s = stem(word)
            weight = w.domain if i == len(dwords) - 1 else w.domain_other
            bag[s] = max(bag.get(s, 0.0), weight)
        # the verb (first word of the action name) weighs most, the rest less
        for i, word in enumerate(words(a.name)):
            s = stem(word)
            weight = w.verb if i == 0 else w.name_rest
            bag[s] = max(bag.get(s, 0.0), weight)
        # alias words are kept whole ("stop all containers" must not shrink to "stop containers")
        aliases = [frozenset(stem(w) for w in words(x)) for x in a.aliases]
        return {"bag": bag, "aliases": [x for x in aliases if x], "id": a.id}

    def _fuzzy_matches(self, token: str) -> tuple[str, ...]:
        if len(token) < self.w.fuzzy_min_length:
            return ()
        return tuple(difflib.get_close_matches(token, self.vocab, n=self.w.fuzzy_candidates, cutoff=self.w.fuzzy_cutoff))

    def _query_terms(self, query: str) -> list[tuple[str, float]]:
        terms: dict[str, float] = {}
        for w in words(query):
            if w in self.stop:
                continue
            terms[stem(w)] = max(terms.get(stem(w), 0), 1.0)
            for syn in self.synonyms.get(w, []):
                for sw in words(syn):
                    terms.setdefault(stem(sw), self.w.synonym)
        return list(terms.items())

    def asks_to_change(self, query: str) -> bool:
        return any(stem(w) in self.change for w in words(query))

    def rank(self, query: str, limit: int = 10, domain: str | None = None) -> list[Hit]:
        w = self.w
        q = query.strip().lower()
        terms = self._query_terms(q)
        qall = {stem(w) for w in words(q)}
        qlen = max(len({w for w in words(q) if w not in self.stop}), 1)
        exact = q if any(f["id"] == q for f in self.index) else None
        change = self.asks_to_change(q)
        hits: list[Hit] = []
        for action, f in zip(self.actions, self.index, strict=True):
            if domain and action.domain != domain:
                continue
            if exact == action.id:
                hits.append(Hit(action, w.exact_id))
                continue
            bag = f["bag"]
            score, matched = 0.0, 0
            for term, tw in terms:
                best = bag.get(term, 0.0)
                if not best:
                    for fz in self._fuzzy(term):
                        best = max(best, bag.get(fz, 0.0) * w.fuzzy)
                if best:
                    matched += 1
                score += best * tw
            # an alias whose every word is in the query: the more of the query it covers, the more it counts
            best_alias = max((min(1.0, len(al) / qlen) for al in f["aliases"] if al <= qall), default=0.0)
            score += w.alias_phrase * best_alias
            if not score:
                continue
            if action.name in self.defaults and not change:
                score += w.noun_only_bonus * (len(self.defaults) - self.defaults.index(action.name)) / len(self.defaults)
            if terms:
                score *= w.coverage_floor + (1 - w.coverage_floor) * matched / len(terms)  # reward covering the whole query
            if action.destructive and not change:
                score *= w.destructive
            if action.pending:
                score *= w.pending
            hits.append(Hit(action, round(score, 4)))
        hits.sort(key=lambda h: (-h.score, h.action.destructive, h.action.id))
        if hits and hits[0].action.destructive and not change and exact != hits[0].action.id:
            safe = next((i for i, h in enumerate(hits) if not h.action.destructive), None)
            if safe is not None:
                hits.insert(0, hits.pop(safe))
        return hits[:limit]
