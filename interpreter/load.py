"""Load YAML (and JSON) rule and inventory files, keeping line numbers.

ruamel.yaml's round-trip loader keeps the position of every key and item; `locate`
turns a JSON pointer into (line, col) so validation can point at the bad spot. `plain`
turns the loaded tree into plain dicts and lists for the engine.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from .errors import Problem


@dataclass
class Loaded:
    """One loaded file: its display name, its tree (ruamel nodes) and a plain copy."""

    name: str
    tree: Any
    data: Any
    failed: bool = False  # the file could not be read or parsed (its problem is reported once)


def _yaml() -> YAML:
    y = YAML(typ="rt")
    # YAML 1.2: `no` and `on` stay strings; unquoted dates are still a trap (see validate).
    y.version = (1, 2)
    return y


def plain(node: Any) -> Any:
    """Convert ruamel nodes to plain dicts/lists/scalars (dates become ISO strings)."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    # Dates and timestamps stay date objects on purpose: a schema that wants a string
    # then reports the unquoted YAML date instead of silently accepting "2024-01-01".
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def load_file(path: Path, display: str | None = None) -> tuple[Loaded | None, list[Problem]]:
    """Load one YAML or JSON file. Returns (loaded, problems); loaded is None on a parse error."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(name, 1, 1, "", f"cannot read the file: {exc}", "unreadable")]
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, [Problem(name, exc.lineno, exc.colno, "", f"not valid JSON: {exc.msg}", "parse_error")]
        return Loaded(name, data, data), []
    try:
        tree = _yaml().load(io.StringIO(text))
    except MarkedYAMLError as exc:
        # "while scanning a quoted scalar" points where the construct opened, which is where
        # the fix goes; the problem mark is often the end of the file
        if exc.context and exc.context.startswith("while scanning") and exc.context_mark is not None:
            mark, message = exc.context_mark, f"{exc.problem} {exc.context}"
        else:
            mark, message = exc.problem_mark or exc.context_mark, str(exc.problem or exc)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return None, [Problem(name, line, col, "", f"not valid YAML: {message}", "parse_error")]
    except YAMLError as exc:
        return None, [Problem(name, 1, 1, "", f"not valid YAML: {exc}", "parse_error")]
    return Loaded(name, tree, plain(tree)), []


def escape_pointer_token(token: Any) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer(*parts: Any) -> str:
    return "".join("/" + escape_pointer_token(p) for p in parts)


def locate(tree: Any, ptr: str | list) -> tuple[int, int]:
    """(line, col), 1-based, of the node a JSON pointer names; the nearest parent if absent."""
    parts = ptr if isinstance(ptr, list) else [p.replace("~1", "/").replace("~0", "~") for p in ptr.split("/")[1:]]
    node = tree
    line, col = 1, 1
    if isinstance(node, (CommentedMap, CommentedSeq)) and node.lc.line is not None:
        line, col = node.lc.line + 1, node.lc.col + 1
    for part in parts:
        if isinstance(node, CommentedMap):
            key = next((k for k in node if str(k) == str(part)), None)
            if key is None:
                break
            try:
                kl, kc = node.lc.key(key)
                line, col = kl + 1, kc + 1
            except (KeyError, TypeError):
                pass
            node = node[key]
        elif isinstance(node, CommentedSeq):
            try:
                idx = int(part)
                il, ic = node.lc.item(idx)
                line, col = il + 1, ic + 1
                node = node[idx]
            except (ValueError, IndexError, KeyError, TypeError):
                break
        else:
            break
    return line, col


def problem_at(loaded: Loaded, ptr: str | list, message: str, code: str) -> Problem:
    parts = ptr if isinstance(ptr, list) else None
    text_ptr = pointer(*parts) if parts is not None else ptr
    line, col = locate(loaded.tree, ptr)
    return Problem(loaded.name, line, col, text_ptr, message, code)
