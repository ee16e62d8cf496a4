"""Words and "did you mean": how a free-text query and a mistyped action ID are split into
tokens, and which action IDs a mistyped one most likely meant. Shared by the ranker and by
the catalog (unknown action errors, validation suggestions); it imports neither.
"""

from __future__ import annotations

import difflib
import re

from .redact import name_words

WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower().replace("_", " "))


def stem(word: str) -> str:
    for suffix in ("ies", "ing", "es", "s", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            base = word[: -len(suffix)]
            return base + "y" if suffix == "ies" else base
    return word


# ---------------------------------------------------------------- "did you mean"

TOKEN_MATCH = 0.75  # a misspelt token still counts above this similarity (rstart ~ restart)
CLOSEST_CUTOFF = 0.5  # the share of the tokens a suggestion must match


def id_tokens(text: str) -> list[str]:
    """An action name's tokens, singular: split on `.` `_` `-`, spaces and camelCase
    (``containers.restart``, ``restart-container``, ``restartContainer`` → container,
    restart in some order)."""
    return [stem(w) for w in name_words(text)]


def _similar(a: str, b: str) -> float:
    if a == b:
        return 1.0
    r = difflib.SequenceMatcher(None, a, b).ratio()
    return r if r >= TOKEN_MATCH else 0.0


def _token_score(query: list[str], cand: list[str]) -> float:
    """How well the query's tokens cover the candidate's, in any order (swaps are free),
    each token matched once; divided by the longer of the two."""
    free = list(cand)
    total = 0.0
    for q in sorted(query, key=lambda t: -max((_similar(t, c) for c in cand), default=0)):
        best = max(range(len(free)), key=lambda i: _similar(q, free[i]), default=None)
        if best is not None and _similar(q, free[best]):
            total += _similar(q, free.pop(best))
    return total / max(len(query), len(cand), 1)


def closest_ids(text: str, pool: list[str], n: int = 3) -> list[str]:
    """The action IDs a caller most likely meant, best first.

    Token-aware: ``restart_container``, ``container_restart``, ``containers.restart``,
    ``restart-container`` and ``container.rstart`` all find ``container.restart``. Tokens
    match in any order, singular or plural, and with small misspellings; the whole-string
    similarity breaks ties (and finds a name whose tokens all differ a little).
    """
    query = id_tokens(text)
    flat = "".join(query)
    scored = []
    for aid in pool:
        score = _token_score(query, id_tokens(aid))
        whole = difflib.SequenceMatcher(None, flat, "".join(id_tokens(aid))).ratio()
        if score >= CLOSEST_CUTOFF or whole >= TOKEN_MATCH:
            scored.append((-max(score, whole * 0.9), -whole, aid))
    return [aid for _, _, aid in sorted(scored)[:n]]
