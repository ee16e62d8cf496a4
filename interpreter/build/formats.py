"""The rule format: the number of the rule files' shape this engine reads, and the format
changes (keys renamed, moved or removed) since older formats, both declared in data:
rules/schemas/format.yaml, checked by rules/schemas/format.schema.json. load.py reads that
file and calls `check` on every rule file of every layer before the layers merge.

A rule file may declare the format it was written for with a top-level `format: N` key
(every rule schema accepts it; load.py drops it once the schema has checked it, so nothing
compiles it). Then:
  - N newer than the engine's format: one finding at `/format` (`format_too_new`), and
    the file is not read (its keys would only add unknown-key errors);
  - N older than a change's `since`, or no `format` at all: each key the change names
    that the file holds is one finding at that key (`format_change`): `<key> was renamed
    to <new> in format 2`, and load.py drops the key, so the schema does not report it a
    second time as unknown.
A file declaring the current format is judged by the schema alone.

Pure functions of plain values: no file is read here (load.py does, with its bounds).
"""

from __future__ import annotations

import copy
from fnmatch import fnmatchcase
from typing import Any

from .lazy_dataclass import dataclass

KEY = "format"  # the top-level key of a rule file that declares its format
FILE = "format.yaml"  # in the rules' schemas/ folder
SCHEMA = "format.schema.json"
TOO_NEW, CHANGED = "format_too_new", "format_change"


@dataclass(frozen=True)
class Change:
    """One key a format renamed, moved or removed (an entry of format.yaml `changes`)."""

    since: int
    file: str  # a glob over the path inside the rules directory
    pointer: tuple[str, ...]  # the old key's tokens; `*` matches any key or item
    change: str  # renamed, moved, removed
    to: str = ""
    note: str = ""


@dataclass(frozen=True)
class Formats:
    current: int
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One finding in a file: where (pointer tokens), what to change, its code."""

    parts: tuple
    message: str
    code: str


def compile_formats(data: dict) -> Formats:
    """format.yaml's plain value (it passed its schema) as Formats."""
    changes = tuple(
        Change(int(c["since"]), str(c["file"]), tuple(_unescape(t) for t in str(c["pointer"]).split("/")[1:]),
               str(c["change"]), str(c.get("to", "")), str(c.get("note", "")))
        for c in data.get("changes") or ())
    return Formats(int(data["format"]), changes)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def declared(data: Any) -> int | None:
    """The format a file declares (a whole number at its top level), else None."""
    value = data.get(KEY) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _matches(data: Any, pattern: tuple[str, ...]) -> list[tuple]:
    """The concrete pointers (as tokens) of the values `pattern` names in `data`."""
    found: list[tuple] = []
    stack: list[tuple[Any, tuple]] = [(data, ())]
    while stack:
        node, at = stack.pop()
        depth = len(at)
        if depth == len(pattern):
            found.append(at)
            continue
        token = pattern[depth]
        if isinstance(node, dict):
            keys = list(node) if token == "*" else [k for k in node if str(k) == token]
            stack.extend((node[k], (*at, k)) for k in keys if node[k] is not None)
        elif isinstance(node, list):
            indexes = range(len(node)) if token == "*" else [int(token)] if token.isdigit() and int(token) < len(node) else []
            stack.extend((node[i], (*at, i)) for i in indexes)
    return sorted(found, key=lambda parts: [str(p) for p in parts])


def check(formats: Formats, rel: str, data: Any) -> tuple[list[Finding], bool]:
    """(the findings for one rule file, whether it can be read): `rel` is its path inside
    its rules directory (`rendering.yaml`, `overlays/container.yaml`)."""
    version = declared(data)
    if version is not None and version > formats.current:
        return [Finding((KEY,), f"the file is written for rules format {version}, and this arcane-mcp reads format "
                               f"{formats.current} and older: upgrade arcane-mcp", TOO_NEW)], False
    findings = []
    for change in formats.changes:
        if (version is not None and version >= change.since) or not fnmatchcase(rel, change.file):
            continue
        for parts in _matches(data, change.pointer):
            key = parts[-1]
            if change.change == "removed":
                text = f"{key} was removed in format {change.since}"
            else:
                text = f"{key} was {change.change} to {change.to} in format {change.since}"
            findings.append(Finding(parts, f"{text}: {change.note}" if change.note else text, CHANGED))
    return findings, True


def without(data: Any, findings: list[Finding]) -> Any:
    """A copy of `data` without the map keys the findings name (the deepest first)."""
    if not findings or not isinstance(data, dict):
        return data
    out = copy.deepcopy(data)
    for finding in sorted(findings, key=lambda f: len(f.parts), reverse=True):
        node = out
        for part in finding.parts[:-1]:
            node = node[part] if isinstance(node, (dict, list)) else None
        if isinstance(node, dict):
            node.pop(finding.parts[-1], None)
    return out
