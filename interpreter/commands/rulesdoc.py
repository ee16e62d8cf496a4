"""`interp rules-doc`: docs/rules.md, generated from the JSON Schemas of the rule and
inventory files and a hand-written template.

Every schema in `rules/schemas/` and `catalog/schemas/` is one file kind. Its `title`
names the file or folder and says what it decides (`rules/find.yaml: how
arcane_find_action reads a query`), its `description` opens the kind's section, and every
key below it becomes one row of the kind's table: its path (`actions.<action>.columns[]`),
type, whether it is required, its `default` when the schema declares one, its description
and its `examples`. A `$defs` object that several keys share (`$ref` to an object with
properties) is a table of its own under the kind's.

The hand-written parts (the introduction, how find reads a query, the checks) live in
docs/rules.template.md. A line of the template that is a marker is replaced:

    <!-- rules-doc: files -->                   the table of every file kind
    <!-- rules-doc: kind <schema path> -->      one kind's section, here
    <!-- rules-doc: rest <schema folder> -->    every kind of that folder not placed by
                                                a `kind` marker, sorted by schema name
    <!-- rules-doc: note <text> -->             a note for the template's reader; dropped

Every schema must be placed exactly once, so a schema file added later is documented as
soon as it exists (through its folder's `rest` marker). Output is deterministic, so
`interp rules-doc --check` fails CI when docs/rules.md falls behind the schemas or the
template. Like `interp reference`, it reads and writes a checkout only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..build.lazy_dataclass import dataclass
from ..errors import ConfigError
from ..text import escape

OUTPUT = Path("docs") / "rules.md"
TEMPLATE = Path("docs") / "rules.template.md"
SCHEMA_FOLDERS = (Path("rules") / "schemas", Path("catalog") / "schemas")
MARKER = re.compile(r"^<!--\s*rules-doc:\s*(\S+)\s*(.*?)\s*-->\s*$")
TABLE_HEAD = ["| key | type | description | example |", "|---|---|---|---|"]
NO_DEFAULT = object()


@dataclass(frozen=True)
class Row:
    """One key of a file kind: a row of its table."""

    key: str  # display path: `actions.<action>.columns[].label`
    type: str  # Markdown
    required: bool
    default: Any  # NO_DEFAULT when the schema declares none
    description: str  # the schema's Markdown
    examples: tuple


@dataclass(frozen=True)
class Shape:
    """A `$defs` object that keys share, documented once."""

    name: str
    description: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Kind:
    """One file kind: its schema, the file or folder it checks, and its keys."""

    schema: str  # POSIX path from the checkout: `rules/schemas/find.schema.json`
    target: str  # `rules/find.yaml`, `rules/overlays/<domain>.yaml`
    summary: str  # what it decides: the title after the target
    description: str
    rows: tuple[Row, ...]
    shapes: tuple[Shape, ...]

    @property
    def folder(self) -> str:
        return self.schema.rsplit("/", 1)[0]


# ---------------------------------------------------------------- reading a schema


def _deref(node: Any, root: dict) -> Any:
    """The node a local `$ref` points at (followed to the end), else the node itself."""
    seen = 0
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/") and seen < 16:
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
        node, seen = target, seen + 1
    return node


def _is_shape(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("properties"), dict)


def _is_alternative(branch: Any) -> bool:
    """A `oneOf`/`anyOf` branch that is a shape of the value, not a constraint on it
    (`{required: [route]}` says which keys, not what the value is)."""
    return isinstance(branch, dict) and any(k in branch for k in ("$ref", "type", "const", "enum", "properties", "items", "oneOf", "anyOf"))


def _ref_name(node: dict) -> str:
    return node["$ref"].rsplit("/", 1)[-1]


def _literal(value: Any) -> str:
    """A value as an operator writes it in YAML: a string as is, anything else as JSON
    (JSON is YAML's flow style)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def type_label(node: Any, root: dict) -> str:
    """A short type for a key, in Markdown: `list of string`, `map of object`, `integer
    (1 to 500)`, a shared shape's name, a `$defs` entry's title (`action ID`)."""
    if not isinstance(node, dict):
        return "any"
    if "$ref" in node:
        target = _deref(node, root)
        if _is_shape(target):
            return f"{escape.code_span(_ref_name(node), cell=True)} (below)"
        return str(target.get("title")) if isinstance(target, dict) and target.get("title") else type_label(target, root)
    if "const" in node:
        return escape.code_span(_literal(node["const"]), cell=True)
    if "enum" in node:
        return "one of " + ", ".join(escape.code_span(_literal(v), cell=True) for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        shapes = [b for b in node.get(key) or () if _is_alternative(b)]
        if shapes:
            return " or ".join(dict.fromkeys(type_label(b, root) for b in shapes))
    types = node.get("type")
    types = [t for t in (types if isinstance(types, list) else [types]) if t]
    if not types:
        return "object" if "properties" in node or "additionalProperties" in node else "any"
    labels = []
    for t in types:
        if t == "array":
            labels.append("list of " + type_label(node["items"], root) if isinstance(node.get("items"), dict) else "list")
        elif t == "object" and isinstance(node.get("additionalProperties"), dict) and not node.get("properties"):
            labels.append("map of " + type_label(node["additionalProperties"], root))
        elif t in ("integer", "number") and ("minimum" in node or "maximum" in node):
            lo, hi = node.get("minimum"), node.get("maximum")
            bounds = f"{lo} to {hi}" if lo is not None and hi is not None else f"at least {lo}" if lo is not None else f"at most {hi}"
            labels.append(f"{t} ({bounds})")
        elif t == "string" and node.get("format"):
            labels.append(f"string ({node['format']})")
        else:
            labels.append(t)
    return " or ".join(labels)


def _placeholder(node: dict) -> str:
    """How a map's key is written in a path: the title of its `propertyNames`, else of
    its values' schema, else `key`."""
    for sub in (node.get("propertyNames"), node.get("additionalProperties")):
        if isinstance(sub, dict) and sub.get("title"):
            return f"<{sub['title']}>"
    return "<key>"


class _Walk:
    """Rows for one schema; the shared shapes met on the way."""

    def __init__(self, root: dict):
        self.root = root
        self.shapes: dict[str, None] = {}

    def key(self, node: dict, key: str, required: bool, out: list[Row]) -> None:
        """The row of `key`, holding `node`, then the rows of what it contains."""
        target = _deref(node, self.root)
        target = target if isinstance(target, dict) else {}
        description = str(node.get("description") or target.get("description") or "")
        branches = [b for b in node.get("oneOf") or node.get("anyOf") or () if _is_alternative(b)]
        # a key that is one of several shapes says what each one means
        if branches and all(_deref(b, self.root).get("description") for b in branches):
            description += "".join(f" ({type_label(b, self.root)}) {_deref(b, self.root)['description']}" for b in branches)
        examples = node.get("examples") or target.get("examples") or [e for b in branches for e in b.get("examples") or ()]
        default = node.get("default", target.get("default", NO_DEFAULT))
        out.append(Row(key, type_label(node, self.root), required, default, description, tuple(examples)))
        if "$ref" in node and _is_shape(target):
            self.shapes.setdefault(_ref_name(node), None)
            return
        self.children(target, key, out)

    def children(self, node: dict, key: str, out: list[Row]) -> None:
        """The rows of an object's members, a map's values, a list's items and the
        members of object branches, each under `key`."""
        required = set(node.get("required") or ())
        for name, sub in (node.get("properties") or {}).items():
            if isinstance(sub, dict):
                self.key(sub, f"{key}.{name}" if key else name, name in required, out)
        values = node.get("additionalProperties")
        if isinstance(values, dict):
            self.key(values, f"{key}.{_placeholder(node)}" if key else _placeholder(node), False, out)
        items = node.get("items")
        if isinstance(items, dict):
            shown = _deref(items, self.root)
            # a list of scalars is described by its own row; a list of objects gets one per item
            if items.get("description") or _is_shape(shown) or "oneOf" in items or isinstance(shown.get("additionalProperties"), dict):
                self.key(items, f"{key}[]", False, out)
        for branch in node.get("oneOf") or node.get("anyOf") or ():
            shown = _deref(branch, self.root)
            if _is_shape(shown):
                self.children(shown, key, out)


def read_kind(path: Path, rel: str) -> tuple[Kind | None, list[str]]:
    """One schema file as a Kind; (None, problems) when it cannot be documented."""
    try:
        root = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [f"{rel}: cannot read the schema: {exc}"]
    title = root.get("title") if isinstance(root, dict) else None
    if not isinstance(title, str) or ": " not in title:
        return None, [f"{rel}: its title must be '<file or folder>: <what it decides>', e.g. 'rules/find.yaml: how arcane_find_action reads a query'"]
    target, summary = title.split(": ", 1)
    walk = _Walk(root)
    rows: list[Row] = []
    walk.children(root, "", rows)
    shapes = []
    for name in walk.shapes:  # shapes may name further shapes: the dict grows while read
        node = root["$defs"][name]
        shape_rows: list[Row] = []
        walk.children(node, name, shape_rows)
        shapes.append(Shape(name, str(node.get("description") or ""), tuple(shape_rows)))
    return Kind(rel, target, summary, str(root.get("description") or ""), tuple(rows), tuple(shapes)), []


def kinds(root: Path) -> tuple[list[Kind], list[str]]:
    """Every schema of a checkout's schema folders, sorted by path; and the problems."""
    out, problems = [], []
    for folder in SCHEMA_FOLDERS:
        for path in sorted((root / folder).glob("*.json")):
            kind, found = read_kind(path, path.relative_to(root).as_posix())
            problems += found
            if kind is not None:
                out.append(kind)
    return out, problems


# ---------------------------------------------------------------- Markdown


def _prose(text: str) -> str:
    """The schema's own Markdown on one table-safe line: whitespace collapsed, `|`
    escaped everywhere (GFM splits cells before it sees code spans), `<` outside code
    spans escaped so no tag can form."""
    text = " ".join(str(text).split())
    parts = re.split(r"(`+[^`]*`+)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "\\<") for p in parts).replace("|", "\\|")


def _row_line(row: Row) -> str:
    key = escape.code_span(row.key, cell=True) + (" (required)" if row.required else "")
    description = _prose(row.description)
    if row.default is not NO_DEFAULT:
        description += (" " if description else "") + "Default: " + escape.code_span(_literal(row.default), cell=True) + "."
    examples = ", ".join(escape.code_span(_literal(e), cell=True) for e in row.examples)
    return f"| {key} | {row.type} | {description} | {examples} |"


def _table(rows: tuple[Row, ...]) -> list[str]:
    return TABLE_HEAD + [_row_line(r) for r in rows] if rows else ["No keys."]


def _link(schema: str) -> str:
    """A link from docs/ to a schema file of the checkout."""
    return f"[{escape.code_span(schema)}](../{schema})"


def kind_section(kind: Kind) -> list[str]:
    """One file kind: heading, what it decides, the schema, the keys, the shared shapes."""
    out = [f"## {escape.code_span(kind.target)}", "",
           f"{_prose(kind.summary[:1].upper() + kind.summary[1:])}. Schema: {_link(kind.schema)}.", ""]
    if kind.description:
        out += [_prose(kind.description), ""]
    out += _table(kind.rows) + [""]
    for shape in kind.shapes:
        out += [f"**{escape.code_span(shape.name)}**, a shape the keys above share: {_prose(shape.description)}", ""]
        out += _table(shape.rows) + [""]
    return out


def files_table(placed: list[Kind]) -> list[str]:
    """Every file kind, in the order the page documents them."""
    out = ["| file or folder | schema | what it decides |", "|---|---|---|"]
    for k in placed:
        out.append(f"| {escape.code_span(k.target, cell=True)} | {_link(k.schema)} | {_prose(k.summary)} |")
    return out


def generate(root: Path) -> str:
    """generate(root: Path) -> str

    docs/rules.md for the checkout at `root`: the template with its markers filled from
    the schemas. Raises ConfigError (code `rules_doc`) naming every problem: an unreadable
    or untitled schema, an unknown marker, a schema placed twice or never, a `kind`
    marker naming no schema, a missing template.
    """
    root = Path(root)
    try:
        template = (root / TEMPLATE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {TEMPLATE.as_posix()}: {exc}", setting=TEMPLATE.as_posix(), code="rules_doc") from None
    all_kinds, problems = kinds(root)
    by_schema = {k.schema: k for k in all_kinds}
    lines = template.splitlines()
    markers = [(i, m.group(1), m.group(2)) for i, line in enumerate(lines) if (m := MARKER.match(line))]
    explicit = [arg for _, word, arg in markers if word == "kind"]
    placed: dict[str, int] = {}
    plan: dict[int, list[Kind] | str] = {}
    for i, word, arg in markers:
        if word == "kind":
            if arg not in by_schema:
                problems.append(f"{TEMPLATE.as_posix()}:{i + 1}: no schema {arg!r}; known: {', '.join(sorted(by_schema))}")
                continue
            plan[i] = [by_schema[arg]]
        elif word == "rest":
            plan[i] = [k for k in all_kinds if k.folder == arg.rstrip("/") and k.schema not in explicit]
        elif word in ("files", "note"):
            plan[i] = word
        else:
            problems.append(f"{TEMPLATE.as_posix()}:{i + 1}: unknown marker {word!r}; known: files, kind, rest, note")
            continue
        for k in plan[i] if isinstance(plan[i], list) else ():
            placed[k.schema] = placed.get(k.schema, 0) + 1
    for schema in by_schema:
        if placed.get(schema, 0) != 1:
            how = "is never placed" if not placed.get(schema) else f"is placed {placed[schema]} times"
            problems.append(f"{schema} {how} in {TEMPLATE.as_posix()}: add `<!-- rules-doc: kind {schema} -->` "
                            f"or `<!-- rules-doc: rest {schema.rsplit('/', 1)[0]} -->` once")
    if problems:
        raise ConfigError("; ".join(problems), setting=TEMPLATE.as_posix(), code="rules_doc")
    order = [k for i in sorted(plan) if isinstance(plan[i], list) for k in plan[i]]
    out: list[str] = []
    for i, line in enumerate(lines):
        step = plan.get(i)
        if step is None:
            out.append(line)
        elif step == "files":
            out += files_table(order)
        elif isinstance(step, list):
            for k in step:
                out += kind_section(k)
            if out and out[-1] == "":
                out.pop()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n") + "\n"


def write(root: Path) -> list[str]:
    """write(root: Path) -> list[str]

    Write docs/rules.md of the checkout at `root`; returns the relative paths changed
    (empty when it was up to date)."""
    root = Path(root)
    text = generate(root)
    path = root / OUTPUT
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")
    return [OUTPUT.as_posix()]


def check(root: Path) -> list[str]:
    """check(root: Path) -> list[str]

    `docs/rules.md (differs|missing)` when the file on disk is not what `write` would
    write; empty when up to date."""
    root = Path(root)
    text = generate(root)
    path = root / OUTPUT
    if not path.exists():
        return [f"{OUTPUT.as_posix()} (missing)"]
    return [] if path.read_text(encoding="utf-8") == text else [f"{OUTPUT.as_posix()} (differs)"]
