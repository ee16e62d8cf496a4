"""The find ranker: a free-text query -> actions, best first.

Generic: every word it knows about queries (change words, stop words, synonyms, question
words, plural endings) and every weight, threshold, penalty and boost it scores with come
from rules/find.yaml (compiled: catalog.find); every word it knows about actions comes from
the catalog (IDs, titles, aliases, usage notes, descriptions).

How a query is read (Ranker.read): folded (lower case, no accents) and split into words;
two neighbours that spell one action word joined (`log out` as `logout`); stop words
dropped; each word looked up as typed, then without a plural ending (`redes` as `red`),
then as two action words run together (`apikey`), then fuzzily within its edit budget
(`lsit` is one swap from `list`; a short word keeps its first letter, and a word the
synonym table knows is never a typo). A word and its synonyms count once for an action,
whichever counts more there. Each word weighs more the rarer it is among the actions, so
the key words of a long request lead; an alias counts most when its words are all in the
query, more in its own order. A question (a clause starting "why…", "which…", or a final
"?") prefers read-only actions; a destructive action is never the top result unless the
query asks to change something (a change word, or a lead with that action's own verb:
"update this container…"); an action not served yet scores less.

Every query costs bounded work: only its first `max_words` words are read, only the first
`fuzzy.words` words not found as typed are tried fuzzily, and a word longer than any word the
ranker knows (with a plural ending, two run together, and the edit budget: Ranker.inert) can
match nothing, so it is kept only that long and neither tried fuzzily nor split.
"""

from __future__ import annotations

import math
import re
import weakref
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING

from ..build.lazy_dataclass import dataclass
from .suggest import STEM_SUFFIXES, WORK, stem, words

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..build.catalog import Action, Catalog


CONFIDENCES = ("high", "medium", "low")


@dataclass(frozen=True)
class Hit:
    action: Action
    score: float
    confidence: str = "medium"  # "high" | "medium" | "low": how sure the ranker is (rules/find.yaml `confidence`)


@dataclass(frozen=True)
class Term:
    """One query word: the action words it counts as (with multipliers), and its synonyms'."""

    word: str
    matches: tuple[tuple[str, float], ...]
    synonyms: tuple[tuple[str, tuple[tuple[str, float], ...]], ...]


@dataclass(frozen=True)
class Reading:
    """A query as the ranker reads it (Ranker.read)."""

    query: str
    terms: tuple[Term, ...]
    forms: frozenset[str]  # every form of every word, stop words and typos' closest words too
    sequence: tuple[frozenset[str], ...]  # the forms of each word, in the query's order
    lead: frozenset[str]  # the first word's forms and its synonyms': the verb an imperative leads with
    change: bool  # a change word, and not a question
    question: bool
    see: bool = False  # it asks to see: a question, or no word that asks to do (a noun phrase)
    ask: frozenset[str] = frozenset()  # the request's own verb: its first word that is an action verb
    ask_word: str = ""  # that word as the query has it
    about: frozenset[str] = frozenset()  # the request's object: the first domain word after its verb
    one: bool = False  # it points at one named thing (a name no action has, `one_words`) and not at all
    size: int = 0  # its words that match some action: what the confidence's share is of
    many: frozenset[str] = frozenset()  # the domain words it says in the plural ("which api keys…")
    meant: frozenset[str] = frozenset()  # every form of its words and of their synonyms' words
    context: frozenset[str] = frozenset()  # words only outside the request's own clause or words (weigh less)


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


# what ends a clause of a query (a comma, a full stop, a dash between spaces…)
_CLAUSE = re.compile(r"[,;:.!?¿¡()]+|\s[-–—]\s")


# a name as users write one: letters and digits joined by - _ . : / @ ("old-cache", "nginx:1.19")
_NAME = re.compile(r"[a-z0-9][-_.:/@][a-z0-9]")


# the same for the parts of a request, where a dot must end a sentence (".env", "1.19" do not)
_PARTS = re.compile(r"[,;:!?¿¡()]+|\.(?=\s|$)|\s[-–—]\s")


def _deletes(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


def _in_order(phrase: tuple[frozenset[str], ...], sequence: tuple[frozenset[str], ...]) -> bool:
    """Whether a phrase's words appear in the query in the phrase's order (others may come between)."""
    it = iter(sequence)
    return all(any(forms & word for word in it) for forms in phrase)


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
        self.max_words = rules.max_words
        self.intent = rules.intent
        self.conf = rules.confidence
        # words read as other words, whole (shorthands, other languages): (words…) -> words
        self.rewrites = {tuple(k.split()): v for k, v in rules.rewrites.items()}
        self.leading = {tuple(k.split()): v for k, v in rules.leading.items()}
        self.rewrite_max = max(map(len, (*self.rewrites, *self.leading)), default=0)
        # a query that names only a domain prefers these actions of it
        self.defaults = list(rules.noun_only_prefers)
        self.collective = frozenset(rules.intent.collective_verbs)
        self.default_forms = frozenset(f for name in self.defaults for x in words(name) for f in self.forms(x))
        self._index_actions(catalog)
        self._read_verbs()
        self._order_actions()
        self._weigh_words()
        self._bound_words()
        self._lookup = lru_cache(maxsize=8192)(self._matches)
        self._fuzzy = lru_cache(maxsize=8192)(self._fuzzy)  # type: ignore[method-assign]  # a word's lookup and closest share it
        self._closest = lru_cache(maxsize=8192)(self._closest_words)

    def _index_actions(self, catalog: Catalog) -> None:
        """Each action's fields, the words naming each domain's actions, the actions by their
        aliases' first words and the words that name an action."""
        self.actions = list(catalog.actions.values())
        self.index = [self._fields(a) for a in self.actions]
        # the words that name each domain's actions: a query holding one names an action, not only its domain
        self.named: dict[str, set[str]] = {}
        # the actions with an alias whose first word has this form: only they can match an alias phrase
        self.alias_first: dict[str, set[int]] = {}
        for i, f in enumerate(self.index):
            for al in f["aliases"]:
                for form in al[0]:
                    self.alias_first.setdefault(form, set()).add(i)
        for a, f in zip(self.actions, self.index, strict=True):
            self.named.setdefault(a.domain, set()).update(f["name"])
        # the words that name an action (its name, domain, title or an alias), not only describe it
        strong = min(self.w.alias, self.w.title)
        self.named_words = frozenset(form for f in self.index for form, weight in f["bag"].items() if weight >= strong)

    def _read_verbs(self) -> None:
        """The domains' words, the actions' verbs, and the words that ask to see or to do."""
        # the verbs of the actions (their names' first words), and those that ask to do: the verbs
        # of actions that change state, and the change words, but no word that asks to see
        domains_of: dict[str, set[str]] = {}
        for a, f in zip(self.actions, self.index, strict=True):
            for form in f["verb"]:
                domains_of.setdefault(form, set()).add(a.domain)
        # (a verb is the first name word of an action, unless it names a domain too and is no
        # verb in another: `image` in vulnerability.image_summary is a noun, `update` a verb)
        self.heads = frozenset(f for d in {a.domain for a in self.actions} for x in words(d) for f in self.forms(x))
        self.verbs = frozenset(v for v, ds in domains_of.items() if v not in self.heads or len(ds) > 1)
        see = self.see_forms = frozenset(f for w in self.intent.see_words for f in self.forms(w))
        # and the first words of their aliases ("back up", joined, "attach", "fire") that lead more of
        # them than of the reads' aliases ("docker ps", "container logs"); a domain's word ("backup")
        # that leads one of them asks to do only as a request's first word (Ranker.read)
        doing: set[str] = set()
        leads: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}
        for a, f in zip(self.actions, self.index, strict=True):
            if a.mutating:
                doing |= f["verb"]
            for alias in a.aliases:
                ws = words(alias)
                joined = "".join(ws[:2])
                leads[a.mutating].update(self.forms(joined if joined in self.named_words else ws[0]) if ws else ())
        doing |= {w for w, n in leads[True].items() if n > leads[False][w] or w in self.heads}
        self.do_words = frozenset(doing - see - self.stop)
        self.markers = [tuple(words(m)) for m in self.intent.markers]

    def _order_actions(self) -> None:
        """Each domain's main actions and every action's place, for ties."""
        # a domain's main actions, for ties: its noun_only_prefers actions in order, then the rest
        self.main: dict[str, list[str]] = {}
        for name in self.defaults:
            for a in self.actions:
                if a.name == name and name not in self.main.setdefault(a.domain, []):
                    self.main[a.domain].append(name)
        self.order = {a.id: (self.defaults.index(a.name) if a.name in self.defaults else len(self.defaults), i)
                      for i, a in enumerate(self.actions)}

    def _weigh_words(self) -> None:
        """How rare each action word is, the vocabulary and its one-letter deletions."""
        df = Counter(form for f in self.index for form in f["bag"])
        n = max(len(self.actions), 1)
        top = math.log((n + 1) / 2) or 1.0
        # how rare each word is among the actions: 1 for a word one action has, 0 for all
        self.rarity = {form: max(0.0, math.log((n + 1) / (c + 1)) / top) for form, c in df.items()}
        self.vocab = frozenset(df)
        shortest = min((m for m, _ in self.w.fuzzy_edits), default=0)
        # the one-letter deletions of every action word, for fuzzy candidates (symmetric delete)
        self.deletions: dict[str, set[str]] = {}
        for word in self.vocab - self.stop:
            if shortest and len(word) >= shortest - 1:
                for d in _deletes(word) | {word}:
                    self.deletions.setdefault(d, set()).add(word)

    def _bound_words(self) -> None:
        """The lengths past which a query word can mean nothing here."""
        # the longest word that can mean anything here: an action word, a synonym, a stop, change or
        # question word. A query word longer than `inert` is none of them, nor one of them with a
        # plural or stem ending, nor within the edit budget of one, nor two of them run together
        # (each part at most `part_max`): it matches nothing, whatever its letters
        self.longest_action_word = max(map(len, self.vocab), default=0)
        rewritten = {w for k in (*self.rewrites, *self.leading) for w in k}
        longest = max(map(len, self.vocab | set(self.synonyms) | self.stop | self.change | self.question.words | rewritten), default=0)
        ending = max([len(s) for s, _ in self.plurals.endings] + [len(s) for s in STEM_SUFFIXES])
        self.part_max = longest + ending
        self.inert = 2 * self.part_max + max((n for _, n in self.w.fuzzy_edits), default=0)

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
        name = words(a.name)
        return {"bag": bag, "aliases": [x for x in aliases if x], "id": a.id,
                "head": frozenset(self.forms(dwords[-1])) if dwords else frozenset(),
                "verb": frozenset(self.forms(name[0])) if name else frozenset(),
                "name": frozenset(f for x in name for f in self.forms(x))}

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
        if not budget or word.isdigit() or len(word) - budget > self.longest_action_word:
            return []  # (a word this long is more than its budget away from every action word)
        probes = {word} | _deletes(word)
        if budget > 1:
            probes |= {d2 for d in _deletes(word) for d2 in _deletes(d)}
        WORK["probe"] += len(probes)
        found = {c for p in probes for c in self.deletions.get(p, ())}
        if len(word) < self.w.fuzzy_keep_first_below:
            found = {c for c in found if c[:1] == word[:1]}
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
        """Two action words run together ("apikey" -> api, key), or None. Each part is at
        most `part_max` long: only the split points that allows are tried."""
        m = self.w.fuzzy_split_min
        for i in range(max(m, len(word) - self.part_max), min(len(word) - m, self.part_max) + 1):
            WORK["probe"] += 1
            if self._known(word[:i]) and self._known(word[i:]):
                return [word[:i], word[i:]]
        return None

    def _synonyms(self, word: str) -> tuple[str, ...]:
        for form in self.forms(word):
            if form in self.synonyms:
                return self.synonyms[form]
        return ()

    def _closest_words(self, word: str) -> tuple[str, ...]:
        """The action words closest to an unknown word (a typo's likely meanings); none for a
        word the synonym table knows ("top" is docker top, not a typo of stop)."""
        found = self._fuzzy(word) if not self._known(word) and not self._synonyms(word) else []
        return tuple(c for c, d in found if d == found[0][1])

    def words(self, query: str) -> list[str]:
        """The words a query is read as: its first `max_words`, shorthands and other languages'
        words read as the words they stand for (rules/find.yaml `shorthands`, `languages`), each
        cut to `inert` + 1 letters (a word that long already matches nothing, so cutting it
        changes nothing but what it costs to look up and keep)."""
        return [w[: self.inert + 1] for w in self.rewrite(words(query)[: self.max_words])[: self.max_words]]

    def rewrite(self, ws: list[str]) -> list[str]:
        """Words with each shorthand or other language's word (or run of a few) replaced by the
        words it stands for; a stop word is none, except a leading shorthand as the first word.
        At most `rewrite_max` lookups a word."""
        out: list[str] = []
        i = 0
        while i < len(ws):
            for n in range(min(self.rewrite_max, len(ws) - i), 0, -1):
                key = tuple(ws[i: i + n])
                got = self.leading.get(key) if i == 0 else None
                if got is None and not (n == 1 and key[0] in self.stop):
                    got = self.rewrites.get(key)
                if got is not None:
                    out.extend(got)
                    i += n
                    break
            else:
                out.append(ws[i])
                i += 1
        return out

    def _joined(self, ws: list[str], parts: bool = False) -> list[str]:
        """The words with two neighbours that spell one action word joined ("log out" ->
        logout, "back up" -> backup, "web hook" -> webhook); with `parts`, the two words stay
        on either side of the joined one."""
        m = self.w.fuzzy_split_min
        out: list[str] = []
        i = 0
        while i < len(ws):
            if i + 1 < len(ws):
                a, b = ws[i], ws[i + 1]
                joined = a + b
                if (len(joined) >= 2 * m and min(len(a), len(b)) > 1 and not joined.isdigit()
                        and joined not in self.stop and any(f in self.named_words for f in self.forms(joined))):
                    out.extend((a, joined, b) if parts else (joined,))
                    i += 2
                    continue
            out.append(ws[i])
            i += 1
        return out

    def _typos(self, raw: list[str]) -> frozenset[str]:
        """The words of a query tried fuzzily: the first `fuzzy.words` distinct ones neither
        found as typed nor in the synonym table (the others count as words no action has)."""
        out: dict[str, None] = {}
        for w in raw:
            if len(out) >= self.w.fuzzy_words:
                break
            if w not in self.stop and w not in out and not self._known(w) and not self._synonyms(w):
                out[w] = None
        return frozenset(out)

    def read(self, query: str) -> Reading:
        """How the ranker reads a query: its terms (each word with its synonyms), every form
        of its words (for alias phrases), its leading verb, whether it asks to change
        something and whether it is a question."""
        q = query.strip().lower()
        raw = self._joined(self.words(q))
        typos = self._typos(raw)
        terms = self._terms(raw, typos)
        closest = {w: self._closest(w) if w in typos else () for w in raw if w not in self.stop}
        # alias phrases see the words as typed too ("back up volume" is an alias as much as "backup volume")
        sequence = tuple(frozenset(f for y in (x, *closest.get(x, ())) for f in self.forms(y))
                         for x in self._joined(self.words(q), parts=True))
        forms = frozenset().union(*sequence)
        first, ask_raw, cut = self._request(q, raw)
        context = frozenset(t.word for t in terms) - set(ask_raw) if (first is not None or cut) else frozenset()
        ask_words = [w for w in ask_raw if w not in self.stop and w not in self.intent.first_words]

        def meant(x: str) -> tuple[str, ...]:  # a word, its synonyms' words and a typo's closest words
            return (x, *(sw for syn in self._synonyms(x) for sw in words(syn)), *closest.get(x, ()))

        lead: frozenset[str] = frozenset()
        if ask_words:
            lead = frozenset(f for y in meant(ask_words[0]) for f in self.forms(y))
        ask, ask_word, about, does = self._asks(ask_words, meant)
        question = self.is_question(first or q)
        asked = any(stem(y) in self.change for x in ask_raw for y in (x, *closest.get(x, ())))
        wide = any(x in self.intent.all_words for x in raw)
        one = not wide and (any(x in self.intent.one_words for x in raw) or bool(_NAME.search(q)))
        size = len([t for t in terms if t.matches or any(m for _, m in t.synonyms)])
        many = frozenset(f for x in raw if x not in self.heads for f in self.forms(x)[1:] if f in self.heads)
        return Reading(q, terms, forms, sequence, lead, asked and not question, question,
                       see=question or not does, ask=ask, ask_word=ask_word, about=about, one=one, size=size, many=many,
                       context=context, meant=frozenset(f for x in raw for y in meant(x) for f in self.forms(y)))

    def _terms(self, raw: list[str], typos: frozenset[str]) -> tuple[Term, ...]:
        """The query's terms: each meaningful word (an unknown one split in two where it can be)
        with what it matches and its synonyms' words with theirs."""
        groups: list[tuple[str, tuple[str, ...]]] = []
        seen: set[str] = set()
        typo_syns: set[str] = set()
        for w in raw:
            if w in self.stop:
                continue
            syns = self._synonyms(w)
            if not syns and w in typos:
                # a misspelt word means what its closest word means ("shwo" shows as "show" does)
                near = self._closest(w)
                syns = self._synonyms(near[0]) if len(near) == 1 else ()
                if syns:
                    typo_syns.add(w)
            parts = [w]
            if not syns and not self._known(w) and len(w) >= 2 * self.w.fuzzy_split_min:
                parts = self._split(w) or [w]
            for part in parts:
                if part not in seen:
                    seen.add(part)
                    groups.append((part, tuple(sw for syn in syns for sw in words(syn))))
        own = set(seen)
        return tuple(Term(word, self._lookup(word) if self._known(word) or ((not syns or word in typo_syns) and word in typos) else (),
                          tuple((s, self._lookup(s)) for s in dict.fromkeys(syns) if s not in own))
                     for word, syns in groups)

    def _request(self, q: str, raw: list[str]) -> tuple[str | None, list[str], int]:
        """The clause that is the request (None for the whole query), its words from the last
        request marker on, and where that marker ended."""
        # the request: the clause that says what to do first ("…, but first show me…"), else the whole
        clauses = [c for c in _PARTS.split(q) if words(c)]
        first = next((c for c in clauses if set(words(c)) & self.intent.first_words), None)
        if first is None and len(clauses) > 1:
            # else the last clause that leads with a verb ("there are too many old events, delete them")
            first = next((c for c in reversed(clauses) if self._leads_with_verb(c)), None)
        ask_raw = raw if first is None else self._joined(self.words(first))
        # what follows the last request marker ("…, can you test…", "I want to remove…") is the request
        cut = max((i + len(m) for m in self.markers for i in range(len(ask_raw)) if tuple(ask_raw[i: i + len(m)]) == m), default=0)
        return first, ask_raw[cut:] or ask_raw, cut

    def _asks(self, ask_words: list[str], meant: Callable[[str], tuple[str, ...]]
              ) -> tuple[frozenset[str], str, frozenset[str], bool]:
        """The request's verb (its forms and the word), the domain it names after it, and
        whether the request asks to do something rather than to see."""
        ask, ask_word, about = frozenset(), "", frozenset()
        for i, x in enumerate(ask_words):
            # the word's own verb, else its synonyms' ("rid" is remove, prune or delete)
            fs = (frozenset(f for f in self.forms(x) if f in self.verbs)
                  or frozenset(f for y in meant(x) for f in self.forms(y) if f in self.verbs))
            if fs:
                ask, ask_word = fs, x
                about = next((hs for y in ask_words[i + 1:] if (hs := frozenset(self.forms(y)) & self.heads)), frozenset())
                break
        # a word that asks to do; one that names a domain too ("backup") only as the request's first word
        does = any((f in self.do_words and (i == 0 or f not in self.heads)) or stem(y) in self.change
                   for i, x in enumerate(ask_words) for y in meant(x) for f in self.forms(y))
        if ask_words and (lead_forms := set(self.forms(ask_words[0]))) & self.see_forms and not lead_forms & self.verbs:
            does = False  # a request that leads with "show", "see" asks to see, whatever it names
        if ask_words and ask_word not in ("", ask_words[0]) and not does:
            # a request to see that does not lead with its verb names things: "image history" is a
            # noun phrase about images, not the action named history
            ask, ask_word = frozenset(), ""
        return ask, ask_word, about, does

    def _leads_with_verb(self, clause: str) -> bool:
        """Whether a clause's first meaningful word is an action verb, asks to do or to see."""
        ws = [w for w in self.words(clause) if w not in self.stop]
        if not ws:
            return False
        fs = {f for y in (ws[0], *(sw for syn in self._synonyms(ws[0]) for sw in words(syn))) for f in self.forms(y)}
        return bool(fs & (self.verbs | self.do_words | self.see_forms)) or stem(ws[0]) in self.change

    def _query_terms(self, query: str) -> list[tuple[str, float]]:
        """(query word, weight): the words themselves 1, their synonyms' words `synonym`."""
        out: dict[str, float] = {}
        for t in self.read(query).terms:
            out[t.word] = 1.0
            for s, _ in t.synonyms:
                out.setdefault(s, self.w.synonym)
        return list(out.items())

    # ------------------------------------------------------------ the query

    def asks_to_change(self, query: str) -> bool:
        """Whether the query holds a change word (or a typo of one: "prnue"), question or not."""
        raw = self._joined(self.words(query.strip().lower()))
        typos = self._typos(raw)
        return any(stem(y) in self.change for x in raw if x not in self.stop for y in (x, *(self._closest(x) if x in typos else ())))

    def is_question(self, query: str) -> bool:
        """Whether the query asks about state (rules/find.yaml `question`): a clause (the
        text between punctuation: "it exited, what happened") starts with a question word,
        or the query ends with "?"; a clause that starts as a request ("how do I…", "can
        you…") makes it a request."""
        clauses = [ws for part in _CLAUSE.split(query) if (ws := words(part))]
        if not clauses:
            return False
        if any(tuple(ws[: len(r)]) == r for ws in clauses for r in self.question.requests if r):
            return False
        return any(ws[0] in self.question.words for ws in clauses) or query.rstrip().endswith("?")

    def _asked(self, r: Reading, f: dict) -> bool:
        """Whether the query asks for this action's change: a change word, or (not a
        question) it leads with the action's own verb ("update this container…", "set the
        recovery key")."""
        return r.change or (not r.question and bool(f["verb"] & r.lead))

    def rank(self, query: str, limit: int = 10, domain: str | None = None) -> list[Hit]:
        w = self.w
        r = self.read(query)
        q = r.query
        known = [t for t in r.terms if t.matches or any(m for _, m in t.synonyms)]
        exact = q if any(f["id"] == q for f in self.index) else None
        # an action none of whose words is a query form (nor an alias's first word) scores 0: skipped unscored
        qforms = {form for t in known for form, _ in (*t.matches, *(x for _, m in t.synonyms for x in m))}
        with_alias = set().union(*(self.alias_first.get(form, ()) for form in r.forms))
        hits: list[Hit] = []
        shares: dict[str, float] = {}  # action ID -> the share of the query's meaningful words it matched
        for i, (action, f) in enumerate(zip(self.actions, self.index, strict=True)):
            if domain and action.domain != domain:
                continue
            if exact == action.id:
                hits.append(Hit(action, w.exact_id))
                continue
            bag = f["bag"]
            if i not in with_alias and not any(form in bag for form in qforms):
                continue
            score, matched = self._matched(r, known, action, f)
            if not score:
                continue
            score = self._adjusted(r, known, action, f, score, matched)
            hits.append(Hit(action, round(score, 4)))
            shares[action.id] = matched / max(r.size, 1)
        # ties: a read first, then the domain's main actions (noun_only_prefers), then catalog order
        hits.sort(key=lambda h: (-h.score, h.action.mutating, h.action.destructive, h.action.pending, self.order[h.action.id]))
        self._safe_first(r, hits, exact)
        if exact is None and hits and max(shares.values(), default=0.0) < self.conf.min_matched:
            return []  # nothing meaningful matched
        return self._rated(hits[: limit + 1], shares, exact)[:limit]  # (the next one sets the last one's margin)

    def _matched(self, r: Reading, known: list[Term], action: Action, f: dict) -> tuple[float, int]:
        """An action's score from the query's words and its alias phrases, before the
        adjustments for what the query asks, and how many of the words it matched."""
        w = self.w
        bag = f["bag"]
        score, matched = 0.0, 0
        for t in known:
            # the word itself or its synonyms, whichever counts more here (never both: "update"
            # and its synonym "updates" are one word of the query)
            best = max(max((bag.get(form, 0.0) * mult for form, mult in t.matches), default=0.0),
                       w.synonym * sum(max((bag.get(form, 0.0) * mult for form, mult in m), default=0.0)
                                       for _, m in t.synonyms))
            if best:
                matched += 1
                if t.word == r.ask_word and f["verb"] & r.ask and not (r.see and action.mutating):
                    best *= self.intent.ask_verb  # the request's own verb, on the action it names (a read, for a question)
                elif r.about and f["head"] & r.about and any(form in r.about for form, _ in t.matches):
                    best *= self.intent.ask_verb  # and its object, on the actions of the domain it names
                if t.word in r.context:
                    best *= self.intent.context  # context cannot outvote the request
            score += best
        # an alias whose every word is in the query: the more of the query it covers, the more it counts
        qlen = max(len(known), 1)
        best_alias = max((min(1.0, len(al) / qlen) * (1.0 if _in_order(al, r.sequence) else w.alias_unordered)
                          for al in f["aliases"] if all(forms & r.forms for forms in al)), default=0.0)
        score += w.alias_phrase * best_alias
        return score, matched

    def _adjusted(self, r: Reading, known: list[Term], action: Action, f: dict, score: float, matched: int) -> float:
        """A matched action's score adjusted for what the query asks: a domain's list, the share
        of the query covered, a read or a change asked for, one thing or everything."""
        w = self.w
        asked = self._asked(r, f)
        # a query naming a domain and no action of it prefers its list (then get)
        if action.name in self.defaults and not asked and not (r.forms & (self.named[action.domain] - f["name"])):
            # (by its place among the ones its domain has: a domain without a list prefers its get whole)
            score += w.noun_only_bonus * (len(self.defaults) - self.main[action.domain].index(action.name)) / len(self.defaults)
        if known:
            # reward covering the whole query; words no action has (names, numbers) do not dilute it
            score *= w.coverage_floor + (1 - w.coverage_floor) * matched / len(known)
        if (r.see and f["head"] & r.many and self.defaults and action.name == self.defaults[0]
                and not (r.meant & (self.named[action.domain] - f["name"] - self.default_forms))):
            score += self.intent.many_list  # "which api keys have expired?" asks for the list
        if action.mutating and r.see:
            score *= self.question.mutating if r.question else self.intent.see_mutating
        if action.destructive and not asked:
            score *= w.destructive
        if r.one and r.change and f["verb"] & self.collective:
            score *= self.intent.one_thing  # one named thing, not everything at once
        if action.pending:
            score *= w.pending
        return score

    def _safe_first(self, r: Reading, hits: list[Hit], exact: str | None) -> None:
        """A destructive action the query does not ask for gives first place to the best
        action that is not destructive (in place)."""
        if hits and hits[0].action.destructive and exact != hits[0].action.id:
            top = self.index[self.actions.index(hits[0].action)]
            if not self._asked(r, top):
                safe = next((i for i, h in enumerate(hits) if not h.action.destructive), None)
                if safe is not None:
                    hits.insert(0, hits.pop(safe))

    def _rated(self, hits: list[Hit], shares: dict[str, float], exact: str | None) -> list[Hit]:
        """The hits with their confidence (rules/find.yaml `confidence`): the best result's from its
        score, its margin over the next and the share of the query it matched; the others' at
        most "medium", "low" when their own score or share is below `low`'s."""
        if not hits:
            return hits
        c = self.conf
        out = []
        for i, h in enumerate(hits):
            nxt = hits[i + 1].score if i + 1 < len(hits) else 0.0
            margin = (h.score - nxt) / h.score if h.score > 0 else 0.0
            share = 1.0 if h.action.id == exact else shares.get(h.action.id, 0.0)
            if h.action.id == exact or (i == 0 and h.score >= c.high_score and margin >= c.high_margin and share >= c.high_matched):
                level = "high"
            elif h.score < c.low_score or share < c.low_matched or (i == 0 and margin < c.low_margin):
                level = "low"
            else:
                level = "medium"
            if i and CONFIDENCES.index(level) < CONFIDENCES.index(out[0].confidence):
                level = out[0].confidence if out[0].confidence != "high" else "medium"
            out.append(Hit(h.action, h.score, level))
        return out
