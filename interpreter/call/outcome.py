"""What an answer says about its own outcome, read through catalog/conventions.yaml `outcome`.

Arcane answers many operations with HTTP 200 and `{success: true, data: …}` while the data
reports that the operation failed, in full or in part (a prune whose image step failed, a
batch start where some containers did not start, an updater run with failed items). The
members that say so are the conventions' (JMESPath over the answer's object): this module
only knows their meanings — a boolean false that the operation failed, a message or a list
of messages, a list of failed items or a count of them — and the identity member a changing
action's answer must hold where its schema requires it.

`judge` returns a Verdict; render.py turns a failure into an error result (structuredContent
kept as Arcane sent it) and a partial failure into the first line of the text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..build.lazy_dataclass import dataclass
from ..build.model import OutcomeRules
from ..build.schema import answer_required
from ..memo import keep
from ..memo import table as memo_table
from ..text import escape

# required members of each action's answer, remembered per action ID and document
REQUIRED_MEMO_SIZE = 1024


@dataclass(frozen=True)
class Verdict:
    """An answer's own outcome: `failed` (its success member is false), the error messages
    and failed items it lists (each cut, at most list_max of them, `more_*` the rest), a
    count of failed items where only a number is given, and the identity member it lacks."""

    failed: bool = False
    errors: tuple[str, ...] = ()
    more_errors: int = 0
    items: tuple[str, ...] = ()
    more_items: int = 0
    failed_count: int = 0
    missing: str | None = None

    @property
    def partial(self) -> bool:
        """Something failed while the answer does not say the whole operation did."""
        return not self.failed and (bool(self.errors) or bool(self.items) or self.failed_count > 0)

    @property
    def clean(self) -> bool:
        return not self.failed and not self.partial and self.missing is None

    def summary(self) -> str:
        """One line (before escaping) of what failed: the count, the items, the errors."""
        parts = []
        count = max(self.failed_count, len(self.items) + self.more_items)
        if count:
            names = ", ".join(self.items)
            more = f" and {self.more_items} more" if self.more_items else ""
            parts.append(f"{count} item(s) failed" + (f": {names}{more}" if names else ""))
        if self.errors:
            more = f" (and {self.more_errors} more)" if self.more_errors else ""
            parts.append("errors: " + "; ".join(self.errors) + more)
        return "; ".join(parts)


def _text(value: Any, limit: int) -> str:
    """One listed value as a short line (escape.one_line)."""
    return escape.one_line(value, limit)


def _collect(values: Iterable[Any], limit: int, most: int) -> tuple[tuple[str, ...], int]:
    """Distinct non-empty texts, at most `most` of them, and how many more there were."""
    seen: dict[str, None] = {}
    extra = 0
    for v in values:
        if v is None or v == "" or isinstance(v, bool):
            continue
        t = _text(v, limit)
        if not t or t in seen:
            continue
        if len(seen) < most:
            seen[t] = None
        else:
            extra += 1
    return tuple(seen), extra


def _search(exprs, value: dict) -> Iterable[Any]:
    for e in exprs:
        yield e.search(value)


def judge(rules: OutcomeRules | None, value: Any, required: frozenset[str] = frozenset(), identity: str | None = None) -> Verdict:
    """The outcome an object answer reports. `required`: the members its schema requires;
    `identity`: the identifying member of the action's domain (checked only when required)."""
    if rules is None or not isinstance(value, dict):
        return Verdict()
    failed = any(v is False for v in _search(rules.success, value))
    messages: list[Any] = []
    for found in _search(rules.errors, value):
        if isinstance(found, str):
            messages.append(found)
        elif isinstance(found, list):
            messages += [m for m in found if isinstance(m, str)]
    errors, more_errors = _collect(messages, rules.text_max, rules.list_max)
    names: list[Any] = []
    count = 0
    for found in _search(rules.failed, value):
        if isinstance(found, list):
            names += found
        elif isinstance(found, int) and not isinstance(found, bool) and found > 0:
            count = max(count, found)
    items, more_items = _collect(names, rules.text_max, rules.list_max)
    missing = None
    if identity and identity in required:
        held = value.get(identity)
        if held is None or held == "":
            missing = identity
    return Verdict(failed, errors, more_errors, items, more_items, count, missing)


class Required:
    """The members an action's answer schema requires (schema.answer_required), computed
    once per action and remembered (bounded)."""

    def __init__(self, catalog):
        self.catalog = catalog
        self._memo: dict[str, frozenset[str]] = memo_table()

    def __call__(self, action) -> frozenset[str]:
        found = self._memo.get(action.id)
        if found is None:
            found = answer_required(self.catalog, action)
            keep(self._memo, action.id, found, REQUIRED_MEMO_SIZE)
        return found
