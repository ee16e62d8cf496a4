"""Words and "did you mean": how a free-text query and a mistyped action ID are split into
tokens, and which action IDs a mistyped one most likely meant (thresholds from
rules/find.yaml `did_you_mean`). Shared by the ranker and by the catalog (unknown action
errors, validation suggestions); it imports neither.
"""

from __future__ import annotations

import re
import unicodedata

from .model import DidYouMean
from .redact import name_words

WORD = re.compile(r"[a-z0-9]+")


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
    for suffix in ("ies", "ing", "es", "s", "ed"):
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


def _similar(a: str, b: str, token_match: float) -> float:
    if a == b:
        return 1.0
    import difflib  # only a caller's typo gets here: a start does not import it

    r = difflib.SequenceMatcher(None, a, b).ratio()
    return r if r >= token_match else 0.0


def _token_score(query: list[str], cand: list[str], token_match: float) -> float:
    """How well the query's tokens cover the candidate's, in any order (swaps are free),
    each token matched once; divided by the longer of the two."""
    free = list(cand)
    total = 0.0
    for q in sorted(query, key=lambda t: -max((_similar(t, c, token_match) for c in cand), default=0)):
        best = max(range(len(free)), key=lambda i: _similar(q, free[i], token_match), default=None)
        if best is not None and _similar(q, free[best], token_match):
            total += _similar(q, free.pop(best), token_match)
    return total / max(len(query), len(cand), 1)


def closest_ids(text: str, pool: list[str], rules: DidYouMean, n: int = 3) -> list[str]:
    """The action IDs a caller most likely meant, best first.

    Token-aware: ``restart_container``, ``container_restart``, ``containers.restart``,
    ``restart-container`` and ``container.rstart`` all find ``container.restart``. Tokens
    match in any order, singular or plural, and with small misspellings; the whole-string
    similarity breaks ties (and finds a name whose tokens all differ a little).
    """
    import difflib

    query = id_tokens(text)
    flat = "".join(query)
    scored = []
    for aid in pool:
        score = _token_score(query, id_tokens(aid), rules.token_match)
        whole = difflib.SequenceMatcher(None, flat, "".join(id_tokens(aid))).ratio()
        if score >= rules.cutoff or whole >= rules.token_match:
            scored.append((-max(score, whole * rules.whole_factor), -whole, aid))
    return [aid for _, _, aid in sorted(scored)[:n]]
