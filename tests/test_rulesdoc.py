"""The rule and inventory schemas document every key, and docs/rules.md is generated from
them (`interp rules-doc`): up to date, complete, and well-formed Markdown in both parsers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from interpreter.commands.rulesdoc import TEMPLATE, check, generate, type_label, write
from interpreter.errors import ConfigError

from .escape_oracle import PARSERS, El, html_tree, text_of

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIRS = ("rules/schemas", "catalog/schemas")


def schema_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for d in SCHEMA_DIRS for p in (root / d).glob("*.json"))


def _shape(node: dict) -> bool:
    """A oneOf/anyOf branch that says what the value is (not a bare `$ref`, not a
    constraint such as `{required: [route]}`)."""
    return any(k in node for k in ("type", "const", "enum", "properties", "items"))


def undocumented(schema: dict) -> list[str]:
    """JSON pointers (into the schema) of every node an operator reads that has no
    description: the file itself, every property, every map's value schema, every `$defs`
    entry, every list's item schema that is an object or a choice, every branch of a
    choice that is a shape of its own."""
    out: list[str] = []

    def visit(node, ptr: str, needs: bool) -> None:
        if not isinstance(node, dict):
            return
        if needs and not str(node.get("description") or "").strip():
            out.append(ptr or "/")
        for name, sub in (node.get("properties") or {}).items():
            visit(sub, f"{ptr}/properties/{name}", True)
        if isinstance(node.get("additionalProperties"), dict):
            visit(node["additionalProperties"], f"{ptr}/additionalProperties", True)
        items = node.get("items")
        if isinstance(items, dict):
            objectish = items.get("type") == "object" or any(k in items for k in ("properties", "additionalProperties", "oneOf", "anyOf"))
            visit(items, f"{ptr}/items", objectish)
        for key in ("oneOf", "anyOf"):
            for i, branch in enumerate(node.get(key) or ()):
                visit(branch, f"{ptr}/{key}/{i}", isinstance(branch, dict) and _shape(branch))
        for name, sub in (node.get("$defs") or {}).items():
            visit(sub, f"{ptr}/$defs/{name}", True)

    visit(schema, "", True)
    return out


def test_every_schema_node_has_a_description() -> None:
    missing = []
    for path in schema_files():
        rel = path.relative_to(ROOT).as_posix()
        missing += [f"{rel}#{ptr} has no description" for ptr in undocumented(json.loads(path.read_text(encoding="utf-8")))]
    assert missing == [], "describe what each key decides and its effect:\n" + "\n".join(missing)


def test_the_walker_names_the_pointer_that_lacks_a_description() -> None:
    schema = {"title": "t: x", "description": "d", "type": "object", "properties": {
        "a": {"type": "object", "description": "a", "properties": {"b": {"type": "string"}}},
        "m": {"type": "object", "description": "m", "additionalProperties": {"type": "object", "properties": {}}},
        "l": {"type": "array", "description": "l", "items": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/x"}], "description": "one"}},
        "s": {"type": "array", "description": "scalars need no item description", "items": {"type": "string"}},
    }, "$defs": {"x": {"type": "integer"}}}
    assert undocumented(schema) == ["/properties/a/properties/b", "/properties/m/additionalProperties",
                                    "/properties/l/items/oneOf/0", "/$defs/x"]


def test_schema_examples_are_valid_values() -> None:
    """An example is what an operator may copy: it must pass the schema of its key."""
    bad = []
    for path in schema_files():
        root = json.loads(path.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(root)

        def visit(node, ptr: str, path: Path = path, root: dict = root) -> None:
            if isinstance(node, dict):
                if "examples" in node:
                    assert isinstance(node["examples"], list) and node["examples"], f"{path.name}#{ptr}: examples must be a non-empty list"
                    sub = {k: v for k, v in node.items() if k != "$defs"} | {"$defs": root.get("$defs", {})}
                    for i, example in enumerate(node["examples"]):
                        for err in Draft202012Validator(sub).iter_errors(example):
                            bad.append(f"{path.name}#{ptr}/examples/{i}: {err.message[:120]}")
                for key, value in node.items():
                    if key not in ("examples", "const", "enum", "default"):
                        visit(value, f"{ptr}/{key}")
            elif isinstance(node, list):
                for i, value in enumerate(node):
                    visit(value, f"{ptr}/{i}")

        visit(root, "")
    assert bad == []


def test_every_schema_title_names_a_packaged_file_or_folder() -> None:
    for path in schema_files():
        title = json.loads(path.read_text(encoding="utf-8"))["title"]
        target, _, summary = title.partition(": ")
        assert summary, f"{path.name}: title {title!r} is not '<file>: <what it decides>'"
        pattern = re.sub(r"<[^>]+>", "*", target)
        assert any(fnmatch(p.relative_to(ROOT).as_posix(), pattern) for p in (ROOT / target.split("/", 1)[0]).rglob("*")), title


# ---------------------------------------------------------------- the generated page


def test_docs_rules_md_is_up_to_date() -> None:
    # fails when a schema or docs/rules.template.md changed and `interp rules-doc` was not run
    assert check(ROOT) == []


def _tables(html: str) -> list[list[list[El]]]:
    """Every table of a rendered page: rows of cells (header row first)."""
    found = []

    def walk(node) -> None:
        if not isinstance(node, El):
            return
        if node.tag == "table":
            rows = []

            def rows_of(n) -> None:
                for c in n.children:
                    if isinstance(c, El) and c.tag == "tr":
                        rows.append([x for x in c.children if isinstance(x, El) and x.tag in ("td", "th")])
                    elif isinstance(c, El):
                        rows_of(c)

            rows_of(node)
            found.append(rows)
        for c in node.children:
            walk(c)

    walk(html_tree(html))
    return found


def _tags(node) -> set[str]:
    if not isinstance(node, El):
        return set()
    return {node.tag}.union(*(_tags(c) for c in node.children))


def _plain(markdown: str) -> str:
    """What a reader sees of the schema's own Markdown (single-backtick code spans only)."""
    return " ".join(str(markdown).split()).replace("`", "")


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_every_key_and_description_is_in_a_table(parser: str) -> None:
    page = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    key_rows = [rows for rows in _tables(PARSERS[parser](page)) if [text_of(c) for c in rows[0]] == ["key", "type", "description", "example"]]
    cells = [[text_of(c) for c in row] for rows in key_rows for row in rows[1:]]
    for rows in key_rows:
        for row in rows[1:]:
            assert len(row) == 4
            for cell in row:
                # nothing but text and code: no emphasis, link, HTML or lost cell boundary
                assert _tags(cell) <= {"td", "code"}, (parser, text_of(row[0]), _tags(cell))
    keys = [c[0].removesuffix(" (required)") for c in cells]
    descriptions = " ".join(c[2] for c in cells)
    for path in schema_files():
        schema = json.loads(path.read_text(encoding="utf-8"))

        def visit(node, under: str, path: Path = path) -> None:
            if not isinstance(node, dict):
                return
            for name, sub in (node.get("properties") or {}).items():
                assert any(k == name or k.endswith("." + name) for k in keys), f"{path.name}: key {name!r} ({under}) has no row"
                if isinstance(sub, dict) and sub.get("description"):
                    assert _plain(sub["description"]) in descriptions, f"{path.name}: the description of {under}/{name} is not on the page"
                visit(sub, f"{under}/{name}")
            for key in ("additionalProperties", "items"):
                visit(node.get(key), under)
            for key in ("oneOf", "anyOf"):
                for branch in node.get(key) or ():
                    visit(branch, under)
            for name, sub in (node.get("$defs") or {}).items():
                visit(sub, f"$defs/{name}")

        visit(schema, "")
        assert _plain(schema["description"]) in _plain(text_of(html_tree(PARSERS[parser](page)))), path.name


def test_one_section_per_schema_and_the_files_table() -> None:
    page = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for path in schema_files():
        schema = json.loads(path.read_text(encoding="utf-8"))
        target = schema["title"].split(": ", 1)[0]
        rel = path.relative_to(ROOT).as_posix()
        assert page.count(f"\n## `{target}`\n") == 1, target
        assert f"| `{target}` | [`{rel}`](../{rel}) |" in page, rel


def test_the_hand_written_parts_are_kept() -> None:
    template = (ROOT / TEMPLATE).read_text(encoding="utf-8")
    page = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for line in template.splitlines():
        if line.strip() and not line.startswith("<!--"):
            assert line in page, line
    assert "<!--" not in page


def test_deterministic() -> None:
    assert generate(ROOT) == generate(ROOT)
    assert generate(ROOT).endswith("\n") and not generate(ROOT).endswith("\n\n")


@pytest.mark.parametrize(
    "schema, label",
    [
        ({"type": "string"}, "string"),
        ({"type": "integer", "minimum": 1, "maximum": 500}, "integer (1 to 500)"),
        ({"type": "array", "items": {"type": "string"}}, "list of string"),
        ({"type": "object", "additionalProperties": {"type": "boolean"}}, "map of boolean"),
        ({"enum": ["whole", "values"]}, "one of `whole`, `values`"),
        ({"const": 1}, "`1`"),
        ({"oneOf": [{"type": "string"}, {"type": "object", "properties": {}}]}, "string or object"),
        ({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, "object"),
        ({"$ref": "#/$defs/word"}, "word"),
        ({"$ref": "#/$defs/hint"}, "`hint` (below)"),
        ({"type": "string", "format": "regex"}, "string (regex)"),
    ],
)
def test_type_label(schema, label) -> None:
    root = {"$defs": {"word": {"title": "word", "type": "string"}, "hint": {"type": "object", "properties": {"hint": {"type": "string"}}}}}
    assert type_label(schema, root) == label


# ---------------------------------------------------------------- a checkout's copy


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    for name in ("rules", "catalog"):
        shutil.copytree(ROOT / name, tmp_path / name)
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / TEMPLATE, tmp_path / TEMPLATE)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "arcane-mcp"\n', encoding="utf-8")
    return tmp_path


NEW_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "catalog/conventions.yaml: Arcane's conventions",
    "description": "What Arcane does the same way everywhere.",
    "type": "object",
    "properties": {"envelope": {"type": "object", "description": "The envelope.",
                                "properties": {"data": {"type": "string", "examples": ["data"]}}}},
}


def test_a_new_schema_is_documented_through_its_folders_rest_marker(clone: Path) -> None:
    (clone / "catalog" / "schemas" / "conventions.schema.json").write_text(json.dumps(NEW_SCHEMA), encoding="utf-8")
    page = generate(clone)
    assert "\n## `catalog/conventions.yaml`\n" in page
    assert "| `envelope.data` | string |  | `data` |" in page
    assert "| `catalog/conventions.yaml` | [`catalog/schemas/conventions.schema.json`]" in page
    # and the description test names the pointer that still needs one
    assert undocumented(NEW_SCHEMA) == ["/properties/envelope/properties/data"]


def test_write_then_check(clone: Path) -> None:
    assert check(clone) == ["docs/rules.md (missing)"]
    assert write(clone) == ["docs/rules.md"]
    assert check(clone) == [] and write(clone) == []
    assert (clone / "docs" / "rules.md").read_text(encoding="utf-8") == (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    schema = clone / "rules" / "schemas" / "find.schema.json"
    data = json.loads(schema.read_text(encoding="utf-8"))
    data["properties"]["stop_words"]["description"] = "Changed."
    schema.write_text(json.dumps(data), encoding="utf-8")
    assert check(clone) == ["docs/rules.md (differs)"]
    assert write(clone) == ["docs/rules.md"] and check(clone) == []


@pytest.mark.parametrize("edit, found", [
    (lambda t: t + "\n<!-- rules-doc: tables -->\n", "unknown marker 'tables'"),
    (lambda t: t + "\n<!-- rules-doc: kind rules/schemas/nothing.schema.json -->\n", "no schema 'rules/schemas/nothing.schema.json'"),
    (lambda t: t + "\n<!-- rules-doc: kind rules/schemas/find.schema.json -->\n", "rules/schemas/find.schema.json is placed 2 times"),
    (lambda t: t.replace("<!-- rules-doc: rest catalog/schemas -->", ""), "catalog/schemas/actions.schema.json is never placed"),
])
def test_template_problems_are_named(clone: Path, edit, found: str) -> None:
    path = clone / TEMPLATE
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        generate(clone)
    assert exc.value.code == "rules_doc" and found in str(exc.value)


def test_a_schema_without_a_file_title_is_named(clone: Path) -> None:
    (clone / "rules" / "schemas" / "x.schema.json").write_text(json.dumps({"title": "no file here"}), encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        generate(clone)
    assert "rules/schemas/x.schema.json: its title must be" in str(exc.value)


def test_the_command(clone: Path) -> None:
    interp = str(Path(sys.executable).parent / "interp")
    env = {"PATH": os.environ["PATH"], "ARCANE_MCP_AUDIT_LOG": "off"}
    run = lambda *args: subprocess.run([interp, "rules-doc", *args], capture_output=True, text=True, timeout=120, cwd=clone, env=env)  # noqa: E731
    p = run("--check")
    assert p.returncode == 1 and "out of date: docs/rules.md (missing)" in p.stdout
    assert run().returncode == 0
    assert run("--check").returncode == 0
    (clone / TEMPLATE).write_text("<!-- rules-doc: nonsense -->\n", encoding="utf-8")
    p = run("--check")
    assert p.returncode == 2 and p.stderr.rstrip().endswith("[rules_doc]") and len(p.stderr.strip().splitlines()) == 1
