"""Load the sources: catalog/ (OpenAPI document, inventory, conventions) and rules/, each
file read with its line numbers, the rules laid in layers, every file checked against its
JSON Schema.

ruamel.yaml's round-trip loader keeps the position of every key and item; `locate` turns a
JSON pointer into (line, col) and `Loaded.origin` into the Origin of the value — the file
and layer that wrote it — so every problem can point at the bad spot; `plain` turns the
loaded tree into plain dicts and lists for compile.py. ruamel's errors become Problems in
`load_file`, jsonschema's in `schema_problems`, and nowhere else. Each file kind is one
entry of the FileKind tables (where it lives, which schema checks it); `load_sources`
returns every file as Sources for catalog.build, with every problem found so far.

Layers. The packaged rules directory is complete: a missing file is an error, and it is the
only source of every default. An operator's directory (ARCANE_MCP_RULES, --rules) is laid
over it file by file and key by key with JSON Merge Patch semantics (RFC 7396): maps merge
recursively, any other value (a list, a string, a number) replaces the packaged one, and
`null` removes the packaged key. The merged file is what the schema checks and the engine
compiles; the origin of each value is the topmost layer that wrote it. The schemas are the
packaged ones: an operator's directory needs no `schemas/`.

Reading is bounded. An operator's directory is input the engine does not control, so every
file read here is held to limits before and while it is parsed, and a file beyond one is a
Problem at its line with a stable code (a bomb is refused within a fraction of a second
and a few MB):
  - MAX_BYTES (256 KiB, `yaml_too_large`): checked before the text is read (and a file
    that is not a regular one, a FIFO or a device, is not read at all). The biggest file
    shipped is 49 KB (the catalog's permissions; the biggest in rules/ 17 KB), so the
    limit is five times that. It is no larger because the round-trip
    parser is slow: some 100-300 KB a second, so a file at the limit costs seconds.
  - MAX_DEPTH (64 levels, `yaml_too_deep`): counted by the scanner for flow collections
    (`[[[[…`: its look-ahead for a possible key checks every open level at every token,
    minutes for 10,000 levels) and by the composer as it descends, so a 10,000-deep file
    stops at level 65, before any recursion can overflow (in ruamel, in `plain`, in the
    merge or in the schema check). The deepest file shipped has 10.
  - MAX_NODES (20,000 nodes once aliases are expanded, `yaml_alias_bomb` when an alias
    crosses it, `yaml_too_large` when the file's own nodes do): the composer keeps the
    expanded size of every anchored node, so an alias costs one addition however much it
    stands for, and "a billion laughs" stops at the alias that crosses the bound instead
    of being built by `plain` and the schema check. The largest file shipped has 3,027
    nodes, aliases expanded: the bound is some six times that, and no bigger because each
    node the round-trip loader builds costs 0.05-0.3 ms (a file of 20,000 one-byte items is
    refused after one to a few seconds of parsing; the bombs above stop far sooner).
  - an alias inside the node it names (`&a [*a]`) is `yaml_recursive_alias`: a cycle no
    plain value can hold.
"""

from __future__ import annotations

import copy
import io
import json
import os
import stat
from dataclasses import field
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer, ComposerError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.scanner import RoundTripScanner, ScannerError

from .. import CATALOG_DIR, RULES_DIR
from ..errors import Problem
from . import formats
from .lazy_dataclass import dataclass
from .model import Origin

PACKAGED, OPERATOR = "packaged", "operator"  # the rules layers, bottom first


@dataclass
class Loaded:
    """One loaded file: its display name, its tree (ruamel nodes) and a plain copy. A file
    of the rules merged from layers keeps each layer's file in `layers` (bottom first);
    `data` is then the merged value, `tree` the topmost layer's."""

    name: str
    tree: Any
    data: Any
    failed: bool = False  # the file could not be read or parsed (its problem is reported once)
    checked: bool = False  # it passed its schema (`data` is then what passes: load_sources drops what did not)
    layer: str = ""
    layers: tuple[Loaded, ...] = ()

    def origin(self, parts: list | tuple) -> Origin:
        """Where the value at pointer `parts` was written: the topmost layer holding the
        deepest part of it that the merged value has (the nearest parent of an absent value)."""
        parts = list(parts)
        text = pointer(*parts)
        if not self.layers:
            line, col = locate(self.tree, parts)
            return Origin(self.name, line, col, text, self.layer)
        depth = _present_depth(self.data, parts)
        for d in range(depth, -1, -1):
            prefix = parts[:d]
            for layer in reversed(self.layers):
                if _present_depth(layer.data, prefix) == d:
                    line, col = locate(layer.tree, prefix)
                    return Origin(layer.name, line, col, text, layer.layer)
        bottom = self.layers[0]
        return Origin(bottom.name, 1, 1, text, bottom.layer)


def _child(node: Any, part: Any) -> tuple[bool, Any]:
    if isinstance(node, dict):
        if part in node:
            return True, node[part]
        key = next((k for k in node if str(k) == str(part)), None)
        return (True, node[key]) if key is not None else (False, None)
    if isinstance(node, list):
        try:
            return True, node[int(part)]
        except (ValueError, IndexError, TypeError):
            return False, None
    return False, None


def _present_depth(data: Any, parts: list) -> int:
    """How many leading parts of a pointer a plain value has (a None value is absent: in an
    operator's file it removes the key)."""
    node = data
    for i, part in enumerate(parts):
        found, node = _child(node, part)
        if not found or node is None:
            return i
    return len(parts)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON Merge Patch of plain values: a map merges key by key (None removes the
    key), anything else replaces. Neither argument is changed."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


MAX_BYTES = 256 * 1024  # a rule or catalog file (see the module's docstring for each bound)
MAX_DEPTH = 64
MAX_NODES = 20_000


def _refuse(loader: Any, error: type, code: str, message: str, mark: Any) -> None:
    """Stop the parse: ruamel's own error at `mark` (load_file maps it to a Problem), with
    the stable code left on the loader."""
    loader.refused = code
    raise error(None, None, message, mark)


TOO_DEEP = f"nesting deeper than {MAX_DEPTH} levels: flatten the value"


class _BoundedScanner(RoundTripScanner):
    """ruamel's round-trip scanner, refusing flow collections (`[`, `{`) nested deeper than
    MAX_DEPTH. The scanner looks ahead while a simple key is possible, and in flow context
    each level holds one, each look checking them all: 10,000 nested `[` would cost
    minutes of scanning before the composer saw its 65th level."""

    def fetch_flow_collection_start(self, *args: Any, **kwargs: Any) -> None:
        if self.flow_level >= MAX_DEPTH:
            _refuse(self.loader, ScannerError, "yaml_too_deep", TOO_DEEP, self.reader.get_mark())
        super().fetch_flow_collection_start(*args, **kwargs)


class _BoundedComposer(Composer):
    """ruamel's composer, holding a document to MAX_DEPTH and MAX_NODES as it is composed
    and refusing a recursive alias."""

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self.level = 0
        self.nodes = 0  # nodes so far, aliases expanded
        self.sizes: dict[int, int] = {}  # id of an anchored node -> its size, aliases expanded

    def _refuse(self, code: str, message: str, mark: Any) -> None:
        _refuse(self.loader, ComposerError, code, message, mark)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias is ruamel's own error
                size = self.sizes.get(id(target))
                if size is None:
                    self._refuse("yaml_recursive_alias", f"the alias *{event.anchor} is inside the node it names "
                                 f"(a recursive alias): write the value out instead", event.start_mark)
                self.nodes += size
                if self.nodes > MAX_NODES:
                    self._refuse("yaml_alias_bomb", f"the alias *{event.anchor} expands the file beyond {MAX_NODES:,} "
                                 f"nodes (an alias bomb?): write fewer aliases of big nodes", event.start_mark)
            return super().compose_node(parent, index)
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self._refuse("yaml_too_large", f"the file holds more than {MAX_NODES:,} nodes: split it or shorten it",
                         event.start_mark)
        if self.level >= MAX_DEPTH:
            self._refuse("yaml_too_deep", TOO_DEEP, event.start_mark)
        start = self.nodes - 1
        self.level += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.level -= 1
        if event.anchor is not None:
            self.sizes[id(node)] = self.nodes - start
        return node


def _yaml() -> YAML:
    y = YAML(typ="rt")
    # YAML 1.2: `no` and `on` stay strings; unquoted dates are still a trap (see validate).
    y.version = (1, 2)
    y.Scanner, y.Composer = _BoundedScanner, _BoundedComposer
    y.refused = ""
    return y


def _read_bounded(path: Path, name: str) -> tuple[str | None, Problem | None]:
    """(the text, None) of a regular file of at most MAX_BYTES, else (None, the Problem). A
    FIFO or a device is never read (opening it does not wait for a writer), and a file that
    grows while it is read is cut at the limit and refused."""
    too_large = f"the file is too large (more than {MAX_BYTES:,} bytes): split it or shorten it"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None, Problem(name, 1, 1, "", "cannot read the file: it is not a regular file", "unreadable")
            if os.fstat(f.fileno()).st_size > MAX_BYTES:
                return None, Problem(name, 1, 1, "", too_large, "yaml_too_large")
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            return None, Problem(name, 1, 1, "", too_large, "yaml_too_large")
        return data.decode("utf-8"), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, Problem(name, 1, 1, "", f"cannot read the file: {exc}", "unreadable")


def _json_bounded(data: Any) -> tuple[str, str] | None:
    """(code, message) when a parsed JSON value is deeper than MAX_DEPTH or has more than
    MAX_NODES nodes (a walk with its own stack: no recursion)."""
    stack, nodes = [(data, 1)], 0
    while stack:
        value, level = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return "yaml_too_large", f"the file holds more than {MAX_NODES:,} nodes: split it or shorten it"
        if level > MAX_DEPTH:
            return "yaml_too_deep", TOO_DEEP
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((c, level + 1) for c in children)
    return None


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
    text, unread = _read_bounded(path, name)
    if unread is not None:
        return None, [unread]
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, [Problem(name, exc.lineno, exc.colno, "", f"not valid JSON: {exc.msg}", "parse_error")]
        except RecursionError:
            return None, [Problem(name, 1, 1, "", TOO_DEEP, "yaml_too_deep")]
        bounded = _json_bounded(data)
        if bounded is not None:
            return None, [Problem(name, 1, 1, "", bounded[1], bounded[0])]
        return Loaded(name, data, data), []
    y = _yaml()
    try:
        tree = y.load(io.StringIO(text))
    except MarkedYAMLError as exc:
        refused = y.refused
        if refused:
            mark = exc.problem_mark
            line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            return None, [Problem(name, line, col, "", str(exc.problem), refused)]
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
            key = part if part in node else next((k for k in node if str(k) == str(part)), None)
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


def parts_of(ptr: str) -> list[str]:
    """A JSON pointer's tokens, unescaped."""
    return [p.replace("~1", "/").replace("~0", "~") for p in ptr.split("/")[1:]] if ptr else []


def problem_at(loaded: Loaded, ptr: str | list | tuple, message: str, code: str) -> Problem:
    """A Problem at the value a pointer names (or its nearest parent), in the file and layer
    that wrote it."""
    parts = list(ptr) if isinstance(ptr, (list, tuple)) else parts_of(ptr)
    return problem_from(loaded.origin(parts), message, code)


def problem_from(origin: Origin, message: str, code: str) -> Problem:
    """A Problem at an Origin (a compiled model's `origins` entry)."""
    return Problem(origin.file, origin.line, origin.col, origin.pointer, message, code, origin.layer)


# ---------------------------------------------------------------- sources


@dataclass
class Sources:
    """Every source file, loaded: the OpenAPI document, the inventory and conventions
    files, the overlays that passed their schema, and each rule file (None when it could
    not be read or broke its schema: its problems are reported)."""

    document: dict
    document_name: str
    actions: Loaded
    extra: Loaded
    allowlist: Loaded
    conventions: Loaded
    overlays: list[Loaded]
    find: Loaded | None = None
    errors: Loaded | None = None
    rendering: Loaded | None = None
    redaction: Loaded | None = None
    server: Loaded | None = None
    resources: Loaded | None = None
    guides: list[Loaded] = field(default_factory=list)  # rules/guides/*.yaml (interpreter/front/resources.py)
    permissions: Loaded | None = None  # catalog/permissions.yaml (interpreter/build/access.py)
    views: list[Loaded] = field(default_factory=list)  # rules/views/*.yaml (interpreter/front/apps.py)


@dataclass(frozen=True)
class FileKind:
    schema: str  # schema file name
    schema_dir: str  # "catalog" or "rules"


# catalog files by name; rules files by folder
CATALOG_FILES = {
    "actions.yaml": FileKind("actions.schema.json", "catalog"),
    "extra-routes.yaml": FileKind("extra-routes.schema.json", "catalog"),
    "coverage-allowlist.yaml": FileKind("coverage-allowlist.schema.json", "catalog"),
    "conventions.yaml": FileKind("conventions.schema.json", "catalog"),
    "permissions.yaml": FileKind("permissions.schema.json", "catalog"),
}
# rules/guides/*.yaml: the workflow guides (interpreter/front/resources.py serves them)
GUIDES = "guides"
# rules/views/*.yaml: the MCP Apps views (interpreter/front/apps.py serves them)
VIEWS = "views"
RULE_FOLDERS = {
    "overlays": FileKind("overlay.schema.json", "rules"),
    GUIDES: FileKind("guide.schema.json", "rules"),
    VIEWS: FileKind("views.schema.json", "rules"),
}
RULE_FILES = {
    "find.yaml": FileKind("find.schema.json", "rules"),
    "errors.yaml": FileKind("errors.schema.json", "rules"),
    "rendering.yaml": FileKind("rendering.schema.json", "rules"),
    "redaction.yaml": FileKind("redaction.schema.json", "rules"),
    "server.yaml": FileKind("server.schema.json", "rules"),
    "resources.yaml": FileKind("resources.schema.json", "rules"),
}
SCHEMAS = "schemas"


def _validator(schema_path: str) -> Draft202012Validator:
    return _validator_of(Path(schema_path).read_text(encoding="utf-8"))


@cache
def _validator_of(text: str) -> Draft202012Validator:
    """A schema's validator, by its text: a copy of the packaged schemas (a test's, a
    checkout's) is checked once, and an edited file is never judged by its old text."""
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _schema_path(kind: FileKind, catalog_dir: Path, rules_dir: Path) -> Path:
    base = catalog_dir if kind.schema_dir == "catalog" else rules_dir
    own = base / SCHEMAS / kind.schema
    if own.exists():
        return own
    # a copy of the packaged directories without schemas/: the packaged ones apply
    return (CATALOG_DIR if kind.schema_dir == "catalog" else RULES_DIR) / SCHEMAS / kind.schema


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def schema_problems(loaded: Loaded, validator: Draft202012Validator) -> list[Problem]:
    """The file's schema errors as Problems at their lines: jsonschema's errors are mapped
    to Problems here and nowhere else."""
    out = []
    for err in validator.iter_errors(loaded.data):
        # for oneOf/anyOf, the most relevant sub-error says more than "is not valid under any"
        if err.context:
            # a type mismatch with one branch says nothing when another branch has the right
            # type: prefer the errors of the branches whose type fits
            fitting = [e for e in err.context if e.validator != "type"]
            err = best_match(fitting or err.context) or err
        path = list(err.absolute_path)
        kw = err.validator
        if kw == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {}))) if isinstance(err.instance, dict) else []
            allowed = ", ".join(sorted(err.schema.get("properties", {})))
            msg = f"unknown key {', '.join(repr(e) for e in extra)}; allowed: {allowed}" if extra else err.message
            if extra:
                path = path + [extra[0]]
        elif kw == "type":
            want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
            msg = f"{_short(err.instance)} is not {'an' if str(want)[:1] in 'aeiou' else 'a'} {want}"
            if not isinstance(err.instance, (str, int, float, bool, list, dict, type(None))):
                msg += " (an unquoted YAML date or number? quote it)"
        elif kw == "required":
            msg = err.message
        elif kw == "enum":
            msg = f"{_short(err.instance)} is not one of {', '.join(map(str, err.validator_value))}"
        elif kw == "pattern":
            msg = f"{_short(err.instance)} does not match {err.validator_value}"
        else:
            msg = err.message if len(err.message) < 200 else err.message[:199] + "…"
        out.append(problem_at(loaded, path, msg, f"schema.{kw}"))
    return out


#: How many rounds `readable_part` drops values in: each round drops at least one key, and a
#: round's errors are all dropped together, so real files need one or two.
PRUNE_ROUNDS = 50


def _prune_path(data: Any, err: Any) -> list | None:
    """The pointer (as parts) of the mapping key to drop for one schema error: for an unknown
    key, that key; else the value the error is about, cut back to the deepest key of a
    mapping (dropping a list item would shift the indexes the origins of its siblings are
    read at). None when the error is about the file itself (nothing smaller to drop)."""
    path = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})), key=str)
        if extra:
            return [path + [key] for key in extra]
    node, cut = data, None
    for i, part in enumerate(path):
        if isinstance(node, dict) and part in node:
            cut = i + 1
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            break
    return [path[:cut]] if cut else None


def _drop(data: Any, parts: list) -> bool:
    node = data
    for part in parts[:-1]:
        node = node[part]
    if isinstance(node, dict) and parts[-1] in node:
        del node[parts[-1]]
        return True
    return False


def readable_part(data: Any, validator: Draft202012Validator) -> Any:
    """The part of a file that passes its schema: a copy of `data` with each value a schema
    error is about dropped (the key of the nearest mapping holding it), round after round,
    until the schema holds; None when an error is about the file as a whole. The schema
    errors are reported from the whole file; this part is what compiling and the
    cross-checks still read, so one run reports the problems after a schema error too."""
    part = copy.deepcopy(data)
    for _ in range(PRUNE_ROUNDS):
        errors = list(validator.iter_errors(part))
        if not errors:
            return part
        cuts = []
        for err in errors:
            paths = _prune_path(part, err)
            if not paths:
                return None
            cuts += paths
        # the longest first: dropping a parent first would leave its child's path dangling
        dropped = False
        for parts in sorted(cuts, key=len, reverse=True):
            try:
                dropped = _drop(part, parts) or dropped
            except (KeyError, IndexError, TypeError):
                continue  # under a value dropped already
        if not dropped:
            return None
    return None


def display(p: Path) -> str:
    """A path as reports show it: relative to the working directory when under it."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def same_dir(a: Path | None, b: Path | None) -> bool:
    return a is not None and b is not None and Path(a).resolve() == Path(b).resolve()


def _layer_files(rules_dir: Path, layer: str, complete: bool, problems: list[Problem]) -> dict[str, Path]:
    """The rule files of one layer by their path inside it (`find.yaml`, `overlays/x.yaml`);
    unknown files and folders are problems, and so is a missing file of a complete layer."""
    files: dict[str, Path] = {}
    if not rules_dir.is_dir():
        problems.append(Problem(display(rules_dir), 1, 1, "", "the rules directory does not exist", "rules_missing", layer))
        return files
    for fname in RULE_FILES:
        path = rules_dir / fname
        if path.is_file():
            files[fname] = path
        elif complete:
            problems.append(Problem(display(path), 1, 1, "", f"the rule file {fname} is missing; the packaged rules must hold every "
                                    f"rule file ({', '.join(RULE_FILES)}): reinstall, or restore it", "rule_file_missing", layer))
    for folder in RULE_FOLDERS:
        if complete and not (rules_dir / folder).is_dir():
            problems.append(Problem(display(rules_dir / folder), 1, 1, "", f"the rule folder {folder}/ is missing", "rule_file_missing", layer))
        for path in sorted((rules_dir / folder).glob("*.y*ml")):
            files[f"{folder}/{path.name}"] = path
    known = set(RULE_FOLDERS) | {SCHEMAS}
    for child in sorted(rules_dir.iterdir()):
        if child.is_file() and child.suffix in (".yaml", ".yml") and child.name not in RULE_FILES:
            problems.append(Problem(display(child), 1, 1, "", f"unknown rule file {child.name!r}; known: {', '.join(sorted(RULE_FILES))} "
                                    f"and the folders {', '.join(sorted(RULE_FOLDERS))}", "unknown_rule_kind", layer))
        elif child.is_dir() and child.name not in known and not child.name.startswith((".", "_")):
            problems.append(Problem(display(child), 1, 1, "", f"unknown rule folder {child.name!r}; known: {', '.join(sorted(known))}",
                                    "unknown_rule_kind", layer))
    return files


def _operator_schemas(operator_dir: Path, base_dir: Path, problems: list[Problem]) -> None:
    """An operator's directory needs no schemas/: the packaged schemas always apply. A copy
    of them is harmless; one that differs would not apply, so it is reported."""
    own = operator_dir / SCHEMAS
    if not own.is_dir():
        return
    for path in sorted(own.glob("*.json")):
        packaged = base_dir / SCHEMAS / path.name
        if not packaged.is_file():
            packaged = RULES_DIR / SCHEMAS / path.name
        try:
            same = packaged.is_file() and packaged.read_bytes() == path.read_bytes()
        except OSError:
            same = False
        if not same:
            problems.append(Problem(display(path), 1, 1, "", "an operator's schema does not apply (the packaged schemas check every "
                                    "layer); remove schemas/ from the operator's directory", "operator_schema", OPERATOR))


def _formats(rules_dir: Path, problems: list[Problem]) -> formats.Formats | None:
    """The rule format and its changes (schemas/format.yaml beside the rules' schemas, else
    the packaged one); None, with its problems reported, when it cannot be read."""
    path = rules_dir / SCHEMAS / formats.FILE
    if not path.is_file():
        path = RULES_DIR / SCHEMAS / formats.FILE
    ld, probs = load_file(path, display(path))
    problems.extend(probs)
    if ld is None:
        return None
    schema = path.parent / formats.SCHEMA
    sp = schema_problems(ld, _validator(str(schema if schema.is_file() else RULES_DIR / SCHEMAS / formats.SCHEMA)))
    problems.extend(sp)
    return None if sp else formats.compile_formats(ld.data)


def _format_checked(ld: Loaded, rel: str, fmt: formats.Formats | None, problems: list[Problem]) -> Loaded | None:
    """One layer's rule file against the format changes (formats.py): each key a later
    format renamed, moved or removed is reported and dropped; None for a file written for
    a newer format than this engine reads (reported)."""
    if fmt is None:
        return ld
    findings, readable = formats.check(fmt, rel, ld.data)
    problems.extend(problem_at(ld, list(f.parts), f.message, f.code) for f in findings)
    if not readable:
        return None
    ld.data = formats.without(ld.data, findings)
    return ld


class _SchemaCheck:
    """Checks a loaded file against its kind's schema, reporting into `problems`."""

    def __init__(self, catalog_dir: Path, rules_dir: Path, problems: list[Problem]):
        self.catalog_dir, self.rules_dir, self.problems = catalog_dir, rules_dir, problems

    def __call__(self, ld: Loaded, kind: FileKind, prune: bool = True) -> bool:
        """Report the file's schema errors; True when it passes the schema, or (with
        `prune`) when its readable part does (`readable_part`; it then replaces `ld.data`)."""
        validator = _validator(str(_schema_path(kind, self.catalog_dir, self.rules_dir)))
        sp = schema_problems(ld, validator)
        self.problems.extend(sp)
        if sp:
            part = readable_part(ld.data, validator) if prune else None
            if part is None:
                return False
            ld.data = part
        ld.checked = True
        return True


def load_sources(rules_dir: Path = RULES_DIR, catalog_dir: Path = CATALOG_DIR, operator_dir: Path | None = None):
    """Load catalog/ and rules/ (with an operator's directory laid over `rules_dir` when
    given and not the same directory); returns (Sources | None, problems). The simulator's
    own data is not the product's: a simulator checks it when it starts."""
    doc_path = catalog_dir / "arcane.openapi.json"
    try:
        document = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return None, [Problem(str(doc_path), 1, 1, "", f"cannot read the OpenAPI document: {exc}", "document_unreadable")]
    problems: list[Problem] = []
    schema_checked = _SchemaCheck(catalog_dir, rules_dir, problems)
    loaded = _catalog_files(catalog_dir, schema_checked, problems)
    by_file = _rule_layers(rules_dir, operator_dir, problems)
    folders, singles = _rule_files(by_file, schema_checked)
    sources = Sources(document, display(doc_path), loaded["actions.yaml"], loaded["extra-routes.yaml"],
                      loaded["coverage-allowlist.yaml"], loaded["conventions.yaml"], folders["overlays"],
                      singles.get("find.yaml"), singles.get("errors.yaml"), singles.get("rendering.yaml"),
                      singles.get("redaction.yaml"), singles.get("server.yaml"), singles.get("resources.yaml"), folders[GUIDES],
                      loaded["permissions.yaml"], folders[VIEWS])
    return sources, problems


def _catalog_files(catalog_dir: Path, schema_checked: _SchemaCheck, problems: list[Problem]) -> dict[str, Loaded]:
    """catalog/'s files by name, each checked against its schema; an unreadable one is an empty, failed Loaded."""
    loaded: dict[str, Loaded] = {}
    for fname, kind in CATALOG_FILES.items():
        path = catalog_dir / fname
        ld, probs = load_file(path, display(path))
        problems.extend(probs)
        if ld is not None:
            # the inventory files are used whole even with schema problems (the build reports
            # more); the conventions are compiled only from what passes their schema
            schema_checked(ld, kind, prune=fname == "conventions.yaml")
        loaded[fname] = ld if ld is not None else Loaded(display(path), {}, {}, failed=True)
    return loaded


def _rule_layers(rules_dir: Path, operator_dir: Path | None, problems: list[Problem]) -> dict[str, list[Loaded | None]]:
    """Each rule file (by its path under the rules directory) as each layer has it: the
    packaged rules, then the operator's (None where a layer's file could not be parsed)."""
    if same_dir(operator_dir, rules_dir):
        operator_dir = None
    layers = [(PACKAGED if operator_dir is not None else "", rules_dir, True)]
    if operator_dir is not None:
        layers.append((OPERATOR, operator_dir, False))
        _operator_schemas(operator_dir, rules_dir, problems)
    by_file: dict[str, list[Loaded | None]] = {}
    fmt = _formats(rules_dir, problems)
    for layer, directory, complete in layers:
        for rel, path in _layer_files(directory, layer, complete, problems).items():
            ld, probs = load_file(path, display(path))
            problems.extend(Problem(p.file, p.line, p.col, p.pointer, p.message, p.code, layer) for p in probs)
            if ld is not None:
                ld.layer = layer
                if not complete:  # an operator's layer; the packaged rules are this release's format
                    ld = _format_checked(ld, rel, fmt, problems)
            by_file.setdefault(rel, []).append(ld)
    return by_file


def _merged(parts: list[Loaded | None]) -> Loaded | None:
    """A rule file merged over its layers; None when a layer could not be parsed."""
    if not parts or any(p is None for p in parts):
        return None
    if len(parts) == 1:
        return parts[0]
    data: Any = None
    for p in parts:
        data = merge_patch(data, p.data) if data is not None else p.data
    top = parts[-1]
    return Loaded(top.name, top.tree, data, layer=top.layer, layers=tuple(parts))


def _rule_files(by_file: dict[str, list[Loaded | None]], schema_checked: _SchemaCheck):
    """The merged rule files that pass their schema: (the files of each rule folder by
    folder, the single files by name, None for one that does not)."""
    folders: dict[str, list[Loaded]] = {folder: [] for folder in RULE_FOLDERS}
    singles: dict[str, Loaded | None] = {}
    for rel in sorted(by_file):
        ld = _merged(by_file.get(rel) or [])
        folder = rel.split("/", 1)[0] if "/" in rel else None
        kind = RULE_FOLDERS[folder] if folder else RULE_FILES[rel]
        ok = ld is not None and schema_checked(ld, kind)
        if ok and isinstance(ld.data, dict):
            ld.data.pop(formats.KEY, None)  # checked by the schema and formats.py; nothing compiles it
        if folder:
            if ok:
                folders[folder].append(ld)
        else:
            singles[rel] = ld if ok else None
    return folders, singles
