"""Load the sources: catalog/ (OpenAPI document, inventory) and rules/, each file read
with its line numbers and checked against its JSON Schema.

ruamel.yaml's round-trip loader keeps the position of every key and item; `locate`
turns a JSON pointer into (line, col) so every problem can point at the bad spot; `plain`
turns the loaded tree into plain dicts and lists for the engine. ruamel's errors become
Problems in `load_file`, jsonschema's in `schema_problems`, and nowhere else. Each file kind
is one entry of the FileKind tables (where it lives, which schema checks it); `load_sources`
returns every file as Sources for catalog.build, with every problem found so far.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from . import CATALOG_DIR, RULES_DIR
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


# ---------------------------------------------------------------- sources


@dataclass
class Sources:
    """Every source file, loaded: the OpenAPI document, the inventory files, the overlays
    that passed their schema, and each optional rule file (None when absent or invalid)."""

    document: dict
    document_name: str
    actions: Loaded
    extra: Loaded
    allowlist: Loaded
    overlays: list[Loaded]
    find: Loaded | None = None
    errors: Loaded | None = None
    rendering: Loaded | None = None
    redaction: Loaded | None = None
    server: Loaded | None = None
    resources: Loaded | None = None
    guides: list[Loaded] = field(default_factory=list)  # rules/guides/*.yaml (interpreter/resources.py)


@dataclass(frozen=True)
class FileKind:
    schema: str  # schema file name
    schema_dir: str  # "catalog" or "rules"


# catalog files by name; rules files by folder
CATALOG_FILES = {
    "actions.yaml": FileKind("actions.schema.json", "catalog"),
    "extra-routes.yaml": FileKind("extra-routes.schema.json", "catalog"),
    "coverage-allowlist.yaml": FileKind("coverage-allowlist.schema.json", "catalog"),
}
RULE_FOLDERS = {
    "overlays": FileKind("overlay.schema.json", "rules"),
}
# rules/guides/*.yaml: the workflow guides, each checked by this schema
GUIDES = ("guides", FileKind("guide.schema.json", "rules"))
RULE_FILES = {
    "find.yaml": FileKind("find.schema.json", "rules"),
    "errors.yaml": FileKind("errors.schema.json", "rules"),
    "rendering.yaml": FileKind("rendering.schema.json", "rules"),
    "redaction.yaml": FileKind("redaction.schema.json", "rules"),
    "server.yaml": FileKind("server.schema.json", "rules"),
    "resources.yaml": FileKind("resources.schema.json", "rules"),
}


@lru_cache(maxsize=None)
def _validator(schema_path: str) -> Draft202012Validator:
    schema = json.loads(Path(schema_path).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _schema_path(kind: FileKind, catalog_dir: Path, rules_dir: Path) -> Path:
    base = catalog_dir if kind.schema_dir == "catalog" else rules_dir
    own = base / "schemas" / kind.schema
    if own.exists():
        return own
    # an operator's rules directory may omit schemas/: the packaged ones apply
    return (CATALOG_DIR if kind.schema_dir == "catalog" else RULES_DIR) / "schemas" / kind.schema


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


def load_sources(rules_dir: Path = RULES_DIR, catalog_dir: Path = CATALOG_DIR):
    """Load catalog/ and rules/; returns (Sources | None, schema problems). The
    simulator's own data is not the product's: a simulator checks it when it starts."""
    problems: list[Problem] = []
    doc_path = catalog_dir / "arcane.openapi.json"
    try:
        document = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return None, [Problem(str(doc_path), 1, 1, "", f"cannot read the OpenAPI document: {exc}", "document_unreadable")]

    def display(p: Path) -> str:
        try:
            return str(p.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(p)

    def load_checked(path: Path, kind: FileKind) -> tuple[Loaded | None, bool]:
        """(the file, whether it passed its schema); problems are collected."""
        l, probs = load_file(path, display(path))
        problems.extend(probs)
        if l is None:
            return None, False
        sp = schema_problems(l, _validator(str(_schema_path(kind, catalog_dir, rules_dir))))
        problems.extend(sp)
        return l, not sp

    loaded: dict[str, Loaded] = {}
    for fname, kind in CATALOG_FILES.items():
        path = catalog_dir / fname
        l, _ = load_checked(path, kind)
        # inventory files are used even with schema problems (the build reports more)
        loaded[fname] = l if l is not None else Loaded(display(path), {}, {}, failed=True)
    overlays: list[Loaded] = []
    if not rules_dir.is_dir():
        problems.append(Problem(display(rules_dir), 1, 1, "", "the rules directory does not exist", "rules_missing"))
    for folder, kind in RULE_FOLDERS.items():
        for path in sorted((rules_dir / folder).glob("*.y*ml")):
            l, ok = load_checked(path, kind)
            if ok:
                overlays.append(l)
    guides: list[Loaded] = []
    for path in sorted((rules_dir / GUIDES[0]).glob("*.y*ml")):
        l, ok = load_checked(path, GUIDES[1])
        if ok:
            guides.append(l)
    singles: dict[str, Loaded | None] = {}
    for fname, kind in RULE_FILES.items():
        path = rules_dir / fname
        # optional files: without one, the engine's defaults apply
        l, ok = load_checked(path, kind) if path.exists() else (None, False)
        singles[fname] = l if ok else None
    if rules_dir.is_dir():
        known = set(RULE_FOLDERS) | {"schemas", GUIDES[0]}
        for child in sorted(rules_dir.iterdir()):
            if child.is_file() and child.suffix in (".yaml", ".yml") and child.name not in RULE_FILES:
                problems.append(Problem(display(child), 1, 1, "", f"unknown rule file {child.name!r}; known: {', '.join(sorted(RULE_FILES))} and the folders {', '.join(sorted(RULE_FOLDERS))}", "unknown_rule_kind"))
        for child in sorted(rules_dir.iterdir()):
            if child.is_dir() and child.name not in known and not child.name.startswith((".", "_")):
                problems.append(Problem(display(child), 1, 1, "", f"unknown rule folder {child.name!r}; known: {', '.join(sorted(known))}", "unknown_rule_kind"))
    sources = Sources(document, display(doc_path), loaded["actions.yaml"], loaded["extra-routes.yaml"],
                      loaded["coverage-allowlist.yaml"], overlays, singles.get("find.yaml"), singles.get("errors.yaml"),
                      singles.get("rendering.yaml"), singles.get("redaction.yaml"),
                      singles.get("server.yaml"), singles.get("resources.yaml"), guides)
    return sources, problems
