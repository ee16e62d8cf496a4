"""Reading one simulator data file (YAML, or JSON as YAML 1.2 reads it) with the line of
every value, within bounds.

The behaviour and the demo state ship with the simulator, but `--state` and `behaviour=`
name any file, so a file is held to limits while it is read, each refusal a Problem with a
stable code instead of a hang or a RecursionError:

  MAX_BYTES  256 KiB (`yaml_too_large`), checked before the text is read; a FIFO or a device
             is not read at all. The biggest shipped file (behaviour/permissions.yaml) is 52 KB.
  MAX_DEPTH  100 levels (`yaml_too_deep`): flow collections (`[[[[…`) are counted by the
             scanner, whose look-ahead grows with every open level (10,000 levels would
             cost minutes), and every node by the composer as it descends, before any
             recursion can overflow. The deepest shipped file has 19 (state templates).
  MAX_NODES  20,000 nodes, aliases expanded (the biggest shipped file has 2,966) (`yaml_too_large`, or `yaml_alias_bomb` when an
             alias crosses it): the composer keeps the expanded size of each anchored node,
             so "a billion laughs" stops at the alias that crosses the bound before any
             plain copy is built. An alias inside the node it names is `yaml_recursive_alias`.

The round-trip loader keeps positions; `Loaded.position(parts)` turns a JSON pointer's parts
into (line, col) of the value (its nearest present parent when absent). ruamel's errors
become Problems here and nowhere else in the simulator. tests/test_simulator.py checks
that each bound leaves room above every shipped file and refuses each bomb.
"""

from __future__ import annotations

import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.scanner import RoundTripScanner

from .errors import Problem

MAX_BYTES = 256 * 1024
MAX_DEPTH = 100
MAX_NODES = 20_000
TOO_DEEP = f"nesting deeper than {MAX_DEPTH} levels: flatten the value"
TOO_MANY = f"the file holds more than {MAX_NODES:,} nodes: split it or shorten it"


class _Refused(Exception):
    """A bound was crossed while parsing (caught in load_file only)."""

    def __init__(self, code: str, message: str, mark: Any):
        super().__init__(message)
        self.code, self.message, self.mark = code, message, mark


class _Scanner(RoundTripScanner):
    def fetch_flow_collection_start(self, *args: Any, **kwargs: Any) -> None:
        if self.flow_level >= MAX_DEPTH:
            raise _Refused("yaml_too_deep", TOO_DEEP, self.reader.get_mark())
        super().fetch_flow_collection_start(*args, **kwargs)


class _Composer(Composer):
    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self.depth = 0
        self.count = 0  # nodes composed so far, each alias counted as the size of its target
        self.expanded: dict[int, int] = {}  # id(anchored node) -> its size, aliases expanded

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias is ruamel's own error
                if id(target) not in self.expanded:
                    raise _Refused("yaml_recursive_alias", f"the alias *{event.anchor} is inside the node it names: "
                                   f"write the value out instead", event.start_mark)
                self.count += self.expanded[id(target)]
                if self.count > MAX_NODES:
                    raise _Refused("yaml_alias_bomb", f"the alias *{event.anchor} expands the file beyond {MAX_NODES:,} "
                                   f"nodes: write fewer aliases of big nodes", event.start_mark)
            return super().compose_node(parent, index)
        self.count += 1
        if self.count > MAX_NODES:
            raise _Refused("yaml_too_large", TOO_MANY, event.start_mark)
        if self.depth >= MAX_DEPTH:
            raise _Refused("yaml_too_deep", TOO_DEEP, event.start_mark)
        first = self.count - 1
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if event.anchor is not None:
            self.expanded[id(node)] = self.count - first
        return node


def parser() -> YAML:
    """A round-trip YAML 1.2 parser (`no`, `on` stay strings) holding to the bounds."""
    y = YAML(typ="rt")
    y.version = (1, 2)
    y.Scanner, y.Composer = _Scanner, _Composer
    return y


def plain(node: Any) -> Any:
    """ruamel's nodes as plain dicts, lists and scalars (a date stays a date: the schema
    then refuses an unquoted one where it wants a string)."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    for kind in (str, bool, int, float):  # bool before int: ruamel's booleans are ints
        if isinstance(node, kind):
            return kind(node)
    return node


@dataclass(frozen=True)
class Loaded:
    """One parsed file: its display name, the round-trip tree (positions) and a plain copy."""

    name: str
    tree: Any
    data: Any

    def position(self, parts: list | tuple) -> tuple[int, int]:
        """(line, col), 1-based, of the value at these pointer parts, or of its nearest parent."""
        node, where = self.tree, (1, 1)
        if isinstance(node, (CommentedMap, CommentedSeq)) and node.lc.line is not None:
            where = (node.lc.line + 1, node.lc.col + 1)
        for part in parts:
            if isinstance(node, CommentedMap):
                key = part if part in node else next((k for k in node if str(k) == str(part)), None)
                if key is None:
                    break
                try:
                    line, col = node.lc.key(key)
                    where = (line + 1, col + 1)
                except (KeyError, TypeError):
                    pass
                node = node[key]
            elif isinstance(node, CommentedSeq):
                try:
                    index = int(part)
                    line, col = node.lc.item(index)
                except (ValueError, IndexError, KeyError, TypeError):
                    break
                where, node = (line + 1, col + 1), node[index]
            else:
                break
        return where


def pointer(parts: list | tuple) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def problem_at(loaded: Loaded, parts: list | tuple, message: str, code: str) -> Problem:
    """A Problem at the value these pointer parts name (or its nearest parent)."""
    line, col = loaded.position(parts)
    return Problem(loaded.name, line, col, pointer(parts), message, code)


def _read(path: Path, name: str) -> tuple[str | None, Problem | None]:
    too_large = f"the file is too large (more than {MAX_BYTES:,} bytes): split it or shorten it"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO does not block the open
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None, Problem(name, 1, 1, "", "cannot read the file: it is not a regular file", "unreadable")
            data = b"" if info.st_size > MAX_BYTES else f.read(MAX_BYTES + 1)
        if info.st_size > MAX_BYTES or len(data) > MAX_BYTES:
            return None, Problem(name, 1, 1, "", too_large, "yaml_too_large")
        return data.decode("utf-8"), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, Problem(name, 1, 1, "", f"cannot read the file: {exc}", "unreadable")


def _at(mark: Any) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def load_file(path: Path, name: str | None = None) -> tuple[Loaded | None, list[Problem]]:
    """(the loaded file, []) or (None, [the one Problem that stopped it])."""
    name = name or str(path)
    text, unread = _read(path, name)
    if unread is not None:
        return None, [unread]
    try:
        tree = parser().load(io.StringIO(text))
    except _Refused as exc:
        return None, [Problem(name, *_at(exc.mark), "", exc.message, exc.code)]
    except MarkedYAMLError as exc:
        # "while scanning …" points where the construct opened, which is where the fix goes
        if exc.context and exc.context.startswith("while scanning") and exc.context_mark is not None:
            mark, message = exc.context_mark, f"{exc.problem} {exc.context}"
        else:
            mark, message = exc.problem_mark or exc.context_mark, str(exc.problem or exc)
        return None, [Problem(name, *_at(mark), "", f"not valid YAML: {message}", "parse_error")]
    except YAMLError as exc:
        return None, [Problem(name, 1, 1, "", f"not valid YAML: {exc}", "parse_error")]
    return Loaded(name, tree, plain(tree)), []
