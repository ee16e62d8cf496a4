"""The confirmation question of a destructive call, with its blast radius.

What the person is asked before a destructive call runs, as the elicitation message
(legacy protocol), the 2026-07-28 input request, the refusal a client that cannot be
asked receives, and the safe-mode preview: the action and its target, the environment
by name and ID, every argument given that changes what happens, and what the call would
affect, read from Arcane through the reads an overlay declares (`blast_radius`,
model.BlastRead). This module is pure: the dispatcher does the reads (bounded in time
and size) and hands their answers, or why there is none, to `affected`.

Every value from Arcane is escaped here (code spans, one line, cut) and bounded (the
first `names_max` names, then "and N more").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..build.lazy_dataclass import dataclass
from ..build.model import BlastRead
from ..text import escape

NAME_MAX = 60  # characters of one name shown (cut with …)
VALUE_MAX = 80  # characters of one argument's value shown
ARGUMENTS_MAX = 12  # arguments named before "and N more"


def truthy(value: Any) -> bool:
    """JMESPath's truth: false, null, empty text, list and object are false (0 is true)."""
    return value is not None and value is not False and value != "" and value != [] and value != {}


def applies(read: BlastRead, args: Mapping[str, Any]) -> bool:
    return read.when is None or truthy(read.when.search(dict(args)))


def shown(value: Any, limit: int = NAME_MAX) -> str:
    """One untrusted value as a code span on one line, cut at `limit` characters."""
    text = escape.one_line(value, 10 * limit + 100)  # cut once before cleaning: a 1 MB name costs no 1 MB pass
    return escape.code_span(escape.one_line(escape.clean(text), limit) or text)


@dataclass
class Affected:
    """One read's result: what the call would affect, or why it could not tell."""

    label: str
    count: int | None = None  # None: could not tell
    names: tuple[str, ...] = ()  # the first names_max, as shown (code spans)
    size: int | None = None  # bytes, when the read declares sizes and some were found
    error: str | None = None  # why it could not tell

    def line(self) -> str:
        if self.count is None:
            return f"- {self.label}: could not tell ({self.error or 'no answer'})"
        if self.count == 0:
            return f"- {self.label}: none"
        text = f"- {self.label}: {self.count}"
        if self.size is not None:
            text += f" ({escape.human_bytes(self.size)})"
        if self.names:
            text += ": " + ", ".join(self.names)
            more = self.count - len(self.names)
            if more > 0:
                text += f" and {more} more"
        return text

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"label": self.label, "count": self.count}
        if self.names:
            out["names"] = list(self.names)
        if self.size is not None:
            out["size"] = self.size
        if self.error is not None:
            out["error"] = self.error
        return out


def _name_of(read: BlastRead, item: Any, name_fields: Sequence[str]) -> Any:
    if read.name is not None:
        found = read.name.search(item)
        if truthy(found):
            return found
    if isinstance(item, (str, int)) and not isinstance(item, bool):
        return item
    if isinstance(item, dict):
        for f in name_fields:
            v = item.get(f)
            if isinstance(v, list) and v:
                v = v[0]
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip():
                return v
    return None


def _matches(value: Any, target: str) -> bool:
    """`target_match`'s value is the target's name, or a list holding it."""
    return value == target or (isinstance(value, list) and target in value)


def affected(read: BlastRead, answer: Any, *, target: str | None, name_fields: Sequence[str]) -> Affected:
    """What one read's answer says the call would affect (`answer`: the read's
    structuredContent). An answer without the declared list, or a `target_match` without
    the target's name, is "could not tell", never "none"."""
    if read.items is None:
        return Affected(read.label, error="its read is not usable")
    items = read.items.search(answer)
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        return Affected(read.label, error="Arcane's answer does not have the list it reads")
    if read.target_match is not None:
        if target is None:
            return Affected(read.label, error="the target's name could not be read")
        items = [i for i in items if _matches(read.target_match.search(i), target)]
    count = len(items)
    if read.count is not None:
        total = read.count.search(answer)
        if isinstance(total, int) and not isinstance(total, bool) and total >= count:
            count = total
    size = None
    if read.size is not None:
        sizes = [s for s in (read.size.search(i) for i in items) if isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 0]
        size = int(sum(sizes)) if sizes else None
    names = []
    for item in items[: read.names_max]:
        n = _name_of(read, item, name_fields)
        names.append(shown(n) if n is not None else "(no name)")
    return Affected(read.label, count, tuple(names), size)


def failed(read: BlastRead, why: str) -> Affected:
    return Affected(read.label, error=why)


@dataclass
class Confirmation:
    """The whole question: its first line, then the arguments and what is affected."""

    head: str
    environment: dict | None = None  # {"id", "name"} of an environment-scoped call
    arguments: tuple[tuple[str, str], ...] = ()  # (argument, value as shown)
    affected: tuple[Affected, ...] = ()
    # the first line with what a handler acts with (exec's command) redacted as a preview
    # redacts it: the person asked sees the command itself, a preview never shows a secret
    masked_head: str | None = None
    masked_environment: dict | None = None

    def masked(self) -> Confirmation:
        """The question as a safe-mode preview shows it (masked_head for head, and the
        environment's ID as a preview shows it)."""
        if self.masked_head is None:
            return self
        return Confirmation(self.masked_head, self.masked_environment or self.environment, self.arguments, self.affected)

    def lines(self) -> list[str]:
        out = []
        if self.arguments:
            parts = [f"{k} {v}" for k, v in self.arguments[:ARGUMENTS_MAX]]
            more = len(self.arguments) - ARGUMENTS_MAX
            out.append("- with " + ", ".join(parts) + (f" and {more} more" if more > 0 else ""))
        out += [a.line() for a in self.affected]
        return out

    def text(self) -> str:
        return escape.clean("\n".join([self.head, *self.lines()]))

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"question": self.text()}
        if self.environment is not None:
            out["environment"] = self.environment
        if self.arguments:
            out["arguments"] = dict(self.arguments)
        if self.affected:
            out["affected"] = [a.as_dict() for a in self.affected]
        return out


__all__ = ["Affected", "Confirmation", "affected", "applies", "failed", "shown", "truthy"]
