"""Words and "did you mean": how a free-text query and a mistyped action ID are split into
tokens, and which action IDs a mistyped one most likely meant (thresholds from
rules/find.yaml `did_you_mean`). Shared by the ranker and by the catalog (unknown action
errors, validation suggestions); it imports neither.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache

from ..build.model import DidYouMean
from .redact import name_words

WORD = re.compile(r"[a-z0-9]+")
STEM_SUFFIXES = ("ies", "ing", "es", "s", "ed")

#: The work the searches of free text have done, by kind, so a test can count what one input
#: cost (never time it): "similarity", the string comparisons "did you mean" made
#: (closest_ids); "probe", the candidate strings the find ranker built for a word (its fuzzy
#: deletions and split points, rank.Ranker). Only ever added to.
WORK: Counter[str] = Counter()


def fold(text: str) -> str:
    """Lower case without accents ("Ejecución" -> "ejecucion", "volúmenes" -> "volumenes")."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def words(text: str) -> list[str]:
    """The words of a text, folded, split at anything but a-z and 0-9 (`_` splits too)."""
    return WORD.findall(fold(text).replace("_", " "))


def stem(word: str) -> str:
    for suffix in STEM_SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            base = word[: -len(suffix)]
            return base + "y" if suffix == "ies" else base
    return word


# ---------------------------------------------------------------- "did you mean"


def id_tokens(text: str) -> list[str]:
    """An action name's tokens, singular: split on `.` `_` `-`, spaces and camelCase
    (``containers.restart``, ``restart-container``, ``restartContainer`` → container,
    restart in some order)."""
    return [stem(w) for w in name_words(text)]


@lru_cache(maxsize=8192)
def _letters(text: str) -> Counter[str]:
    return Counter(text)


def _letters_bound(a: str, b: str) -> float:
    """The most similar two strings with these letters can be, in any order (difflib's
    quick_ratio, with each string's letters counted once and kept)."""
    return 2 * sum((_letters(a) & _letters(b)).values()) / ((len(a) + len(b)) or 1)


def _length_bound(a: str, b: str) -> float:
    """The most similar two strings of these lengths can be (difflib's ratio is 2 x the
    matching characters / both lengths): computed without comparing anything."""
    return 2 * min(len(a), len(b)) / ((len(a) + len(b)) or 1)


class _Similarity:
    """difflib's similarity of two tokens, 0 below `token_match`; each pair compared once
    per closest_ids call, a pair whose lengths alone rule it out not compared at all, and one
    whose letters rule it out (their count bounds the similarity) not aligned."""

    def __init__(self, token_match: float):
        self.token_match = token_match
        self.known: dict[tuple[str, str], float] = {}

    def __call__(self, a: str, b: str) -> float:
        r = self.known.get((a, b))
        if r is None:
            if a == b:
                r = 1.0
            elif _length_bound(a, b) < self.token_match:
                r = 0.0
            else:
                import difflib  # only a caller's typo gets here: a start does not import it

                WORK["similarity"] += 1
                r = difflib.SequenceMatcher(None, a, b).ratio() if _letters_bound(a, b) >= self.token_match else 0.0
                r = r if r >= self.token_match else 0.0
            self.known[(a, b)] = r
        return r


def _token_score(query: list[str], cand: list[str], similar: _Similarity) -> float:
    """How well the query's tokens cover the candidate's, in any order (swaps are free),
    each token matched once (the best matched first); divided by the longer of the two."""
    rows = [[similar(q, c) for c in cand] for q in query]
    free = list(range(len(cand)))
    total = 0.0
    for row in sorted(rows, key=lambda row: -max(row, default=0)):
        best = max(free, key=row.__getitem__, default=None)
        if best is not None and row[best]:
            total += row[best]
            free.remove(best)
    return total / max(len(query), len(cand), 1)


@lru_cache(maxsize=4096)
def _id_tokens(aid: str) -> tuple[tuple[str, ...], str]:
    tokens = tuple(id_tokens(aid))
    return tokens, "".join(tokens)


def closest_ids(text: str, pool: list[str], rules: DidYouMean, n: int = 3) -> list[str]:
    """The action IDs a caller most likely meant, best first.

    Token-aware: ``restart_container``, ``container_restart``, ``containers.restart``,
    ``restart-container`` and ``container.rstart`` all find ``container.restart``. Tokens
    match in any order, singular or plural, and with small misspellings; the whole-string
    similarity breaks ties (and finds a name whose tokens all differ a little).

    Bounded: a name longer than `rules.max_length` gets none; below it each pair of tokens
    is compared at most once, a pair too different in length to reach `token_match` is not
    compared, nor an action whose token count and length rule out both thresholds.
    """
    if len(text) > rules.max_length:
        return []
    import difflib  # only an unknown action name gets here: a start does not import it

    query = id_tokens(text)
    flat = "".join(query)
    similar = _Similarity(rules.token_match)
    scored = []
    for aid in pool:
        tokens, whole_text = _id_tokens(aid)
        # what the counts and lengths alone allow: the token score is at most the shorter
        # token list over the longer, the whole similarity at most _length_bound
        if (min(len(query), len(tokens)) < rules.cutoff * max(len(query), len(tokens), 1)
                and _length_bound(flat, whole_text) < rules.token_match):
            continue  # neither can reach its threshold: not compared
        score = _token_score(query, list(tokens), similar)
        WORK["similarity"] += 1
        if score < rules.cutoff and _letters_bound(flat, whole_text) < rules.token_match:
            continue
        whole = difflib.SequenceMatcher(None, flat, whole_text).ratio()
        if score >= rules.cutoff or whole >= rules.token_match:
            scored.append((-max(score, whole * rules.whole_factor), -whole, aid))
    return [aid for _, _, aid in sorted(scored)[:n]]
