"""The find ranker: a free-text query -> actions, best first.

Generic: every word it knows about queries (change words, stop words, synonyms) comes
from rules/find.yaml; every word it knows about actions comes from the catalog (IDs,
titles, aliases, usage notes, descriptions). Typo tolerant through fuzzy token matching.
A destructive action is never the top result unless the query asks to change something.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from .suggest import stem, words

if TYPE_CHECKING:
    from .catalog import Action, Catalog

# field weights: where a query word is found in an action
W_NAME = 5.0  # the action part of the ID (restart in container.restart)
W_NAME_REST = 3.0
W_DOMAIN = 4.0  # the domain part
W_ALIAS_PHRASE = 8.0  # a whole alias found in the query
W_ALIAS = 2.5
W_TITLE = 2.5
W_USAGE = 1.0
W_DESC = 0.6
SYNONYM_FACTOR = 0.8
FUZZY_FACTOR = 0.7
DESTRUCTIVE_FACTOR = 0.35
PENDING_FACTOR = 0.5
DEFAULT_BONUS = 1.5


@dataclass(frozen=True)
class Hit:
    action: Action
    score: float


class Ranker:
    """An index over one catalog, built once."""

    def __init__(self, catalog: Catalog):
        rules = catalog.find_rules or {}
        self.change = {stem(w) for w in rules.get("change_words", [])}
        self.stop = set(rules.get("stop_words", []))
        self.synonyms = {k: list(v) for k, v in (rules.get("synonyms") or {}).items()}
        # a query that names only a domain prefers these actions of it
        self.defaults = list(rules.get("noun_only_prefers", []))
        self.actions = list(catalog.actions.values())
        self.index = [self._fields(a) for a in self.actions]
        self.vocab = sorted({t for f in self.index for bag in f.values() if isinstance(bag, dict) for t in bag})

    @staticmethod
    def _bag(text: str, weight: float, into: dict[str, float]) -> None:
        for w in words(text):
            s = stem(w)
            into[s] = max(into.get(s, 0.0), weight)

    def _fields(self, a: Action) -> dict:
        bag: dict[str, float] = {}
        self._bag(a.description, W_DESC, bag)
        self._bag(a.usage, W_USAGE, bag)
        self._bag(a.title, W_TITLE, bag)
        for alias in a.aliases:
            self._bag(alias, W_ALIAS, bag)
        # the head noun of a domain (backup in volume_backup) weighs fully, the others half
        dwords = words(a.domain)
        for i, w in enumerate(dwords):
            s = stem(w)
            weight = W_DOMAIN if i == len(dwords) - 1 else W_DOMAIN / 2
            bag[s] = max(bag.get(s, 0.0), weight)
        # the verb (first word of the action name) weighs fully, the rest like a title word
        for i, w in enumerate(words(a.name)):
            s = stem(w)
            weight = W_NAME if i == 0 else W_NAME_REST
            bag[s] = max(bag.get(s, 0.0), weight)
        # alias words are kept whole ("stop all containers" must not shrink to "stop containers")
        aliases = [frozenset(stem(w) for w in words(x)) for x in a.aliases]
        return {"bag": bag, "aliases": [x for x in aliases if x], "id": a.id}

    @lru_cache(maxsize=4096)
    def _fuzzy(self, token: str) -> tuple[str, ...]:
        if len(token) < 4:
            return ()
        return tuple(difflib.get_close_matches(token, self.vocab, n=3, cutoff=0.8))

    def _query_terms(self, query: str) -> list[tuple[str, float]]:
        terms: dict[str, float] = {}
        for w in words(query):
            if w in self.stop:
                continue
            terms[stem(w)] = max(terms.get(stem(w), 0), 1.0)
            for syn in self.synonyms.get(w, []):
                for sw in words(syn):
                    terms.setdefault(stem(sw), SYNONYM_FACTOR)
        return list(terms.items())

    def asks_to_change(self, query: str) -> bool:
        return any(stem(w) in self.change for w in words(query))

    def rank(self, query: str, limit: int = 10, domain: str | None = None) -> list[Hit]:
        q = query.strip().lower()
        terms = self._query_terms(q)
        qall = {stem(w) for w in words(q)}
        qlen = max(len({w for w in words(q) if w not in self.stop}), 1)
        exact = q if any(f["id"] == q for f in self.index) else None
        change = self.asks_to_change(q)
        hits: list[Hit] = []
        for action, f in zip(self.actions, self.index):
            if domain and action.domain != domain:
                continue
            if exact == action.id:
                hits.append(Hit(action, 1000.0))
                continue
            bag = f["bag"]
            score, matched = 0.0, 0
            for term, tw in terms:
                best = bag.get(term, 0.0)
                if not best:
                    for fz in self._fuzzy(term):
                        best = max(best, bag.get(fz, 0.0) * FUZZY_FACTOR)
                if best:
                    matched += 1
                score += best * tw
            # an alias whose every word is in the query: the more of the query it covers, the more it counts
            best_alias = max((min(1.0, len(al) / qlen) for al in f["aliases"] if al <= qall), default=0.0)
            score += W_ALIAS_PHRASE * best_alias
            if not score:
                continue
            if action.name in self.defaults and not change:
                score += DEFAULT_BONUS * (len(self.defaults) - self.defaults.index(action.name)) / len(self.defaults)
            if terms:
                score *= 0.5 + 0.5 * matched / len(terms)  # reward covering the whole query
            if action.destructive and not change:
                score *= DESTRUCTIVE_FACTOR
            if action.pending:
                score *= PENDING_FACTOR
            hits.append(Hit(action, round(score, 4)))
        hits.sort(key=lambda h: (-h.score, h.action.destructive, h.action.id))
        if hits and hits[0].action.destructive and not change and exact != hits[0].action.id:
            safe = next((i for i, h in enumerate(hits) if not h.action.destructive), None)
            if safe is not None:
                hits.insert(0, hits.pop(safe))
        return hits[:limit]
