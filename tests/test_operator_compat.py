"""Operators' rule directories keep working from one release to the next.

tests/operator_dirs/site-ops/ is a FROZEN copy of an operator's directory written for rules
format 1: a render tweak, a redaction addition, an overlay change and a guide of its own.
NEVER edit it to make a test pass. A release that breaks it must raise the rule format and
list the change in rules/schemas/format.yaml `changes` (interpreter/build/formats.py); the
operator is then told, one line per key, what to change, and this file tests those lines.

The format mechanism itself is tested with a test-only format file (FORMAT_2: the next
release, as it would ship) laid into a copy of the packaged rules.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from interpreter import RULES_DIR
from interpreter.build import formats
from interpreter.build.catalog import BuildOptions, build, problems
from interpreter.build.load import OPERATOR, RULE_FILES, RULE_FOLDERS, SCHEMAS
from interpreter.config import Settings
from interpreter.errors import RuleError
from interpreter.front.names import EXECUTE_TOOL, tool_name_individual, tool_name_meta
from interpreter.front.serve import build_runtime
from interpreter.front.surfaces import make_surface
from tests.helpers import make_dispatcher, ok_json

pytestmark = pytest.mark.anyio

SITE_OPS = Path(__file__).parent / "operator_dirs" / "site-ops"
VOLUMES = [{"name": "pgdata", "driver": "local", "scope": "local", "inUse": True, "size": 1024, "createdAt": "2026-01-02T03:04:05Z"}]
PAGE = {"totalItems": 1, "totalPages": 1, "currentPage": 1, "itemsPerPage": 20}

# The next release, as a test imagines it: format 2 renames rendering's max_rows and drops
# the overlays' aliases (the schemas of the copy are left as they are: the format check
# runs first and drops the keys it reports, so the schema does not report them again).
FORMAT_2 = """\
format: 2
changes:
  - {since: 2, file: rendering.yaml, pointer: /max_rows, change: renamed, to: rows_max}
  - {since: 2, file: "overlays/*.yaml", pointer: /actions/*/aliases, change: removed, note: find.yaml synonyms cover them}
"""


def _options(**kw) -> BuildOptions:
    return BuildOptions(cache_dir=None, **kw)


@pytest.fixture(scope="module")
def site_catalog():
    return build(_options(operator_rules=SITE_OPS))


@pytest.fixture
def release_2(tmp_path: Path) -> Path:
    """A copy of the packaged rules whose format file is FORMAT_2."""
    rules = tmp_path / "rules"
    shutil.copytree(RULES_DIR, rules)
    (rules / SCHEMAS / formats.FILE).write_text(FORMAT_2, encoding="utf-8")
    return rules


def _operator(tmp_path: Path, files: dict[str, str]) -> Path:
    directory = tmp_path / "operator"
    for rel, text in files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(text, encoding="utf-8")
    return directory


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.lstrip().startswith(text))


# ---------------------------------------------------------------- the frozen directory


def test_the_frozen_directory_validates_clean():
    assert problems(operator_rules=SITE_OPS) == []
    out = subprocess.run([sys.executable, "-m", "interpreter.commands.cli", "validate", "--json", str(SITE_OPS)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["problems"] == []


def test_the_frozen_directory_exercises_the_format_key_and_its_absence():
    yaml = YAML(typ="safe")
    declared = {p.relative_to(SITE_OPS).as_posix(): formats.declared(yaml.load(p.read_text(encoding="utf-8")))
                for p in SITE_OPS.rglob("*.yaml")}
    assert {"rendering.yaml", "redaction.yaml", "overlays/volume.yaml"} <= set(declared)
    assert any(r.startswith("guides/") for r in declared)
    assert set(declared.values()) == {1, None}


def test_each_change_of_the_frozen_directory_applies(site_catalog):
    packaged = build(_options())
    # render tweak
    assert (site_catalog.rendering.cell_max, site_catalog.rendering.max_rows) == (80, 25)
    assert site_catalog.rendering.origins["cell_max"].layer == OPERATOR
    assert site_catalog.rendering.max_columns == packaged.rendering.max_columns
    # redaction addition: a new secret word, and the operator's marker in previews
    redacted = site_catalog.redaction.redact({"doorPin": "4711", "name": "front"}).value
    assert redacted == {"doorPin": "[masked by site policy]", "name": "front"}
    assert packaged.redaction.redact({"doorPin": "4711"}).value == {"doorPin": "4711"}
    # overlay change: columns, aliases, a usage note removed and one replaced
    action = site_catalog.actions["volume.list"]
    assert [c.label for c in action.columns] == ["name", "driver", "Mounted", "size"]
    assert "storage list" in action.aliases and action.usage == ""
    assert site_catalog.actions["volume.remove"].usage != packaged.actions["volume.remove"].usage
    assert site_catalog.actions["volume.get"] == packaged.actions["volume.get"]
    # a guide of its own, beside the packaged ones; the `format` key is not part of any model
    names = [g.name for g in site_catalog.guides]
    assert "rotate-a-registry-credential" in names and set(names) > {g.name for g in packaged.guides}


def _call(surface: str, action_id: str) -> tuple[str, dict]:
    domain, name = action_id.split(".", 1)
    if surface == "dynamic":
        return EXECUTE_TOOL, {"action": action_id, "params": {}}
    if surface == "meta":
        return tool_name_meta(domain), {"action": name, "params": {}}
    return tool_name_individual(action_id), {}


@pytest.mark.parametrize("surface", ["dynamic", "meta", "individual"])
async def test_the_overlay_shows_on_every_surface(surface):
    runtime = build_runtime(Settings(arcane_url="http://arcane.test", api_key="arc_test_key", audit_log="off", rules_dir=SITE_OPS))
    dispatcher, rec = make_dispatcher(runtime.catalog, lambda r: ok_json(VOLUMES, pagination=PAGE))
    tool, args = _call(surface, "volume.list")
    result = await make_surface(surface, runtime.catalog, dispatcher).call(tool, args)
    assert not result.is_error, result.text
    assert len(rec.requests) == 1
    header = next(line for line in result.text.splitlines() if line.startswith("|"))
    assert [c.strip() for c in header.strip("|").split("|")] == ["name", "driver", "Mounted", "size"]


# ---------------------------------------------------------------- the format mechanism


def test_every_rule_schema_accepts_the_format_key_and_the_shipped_format_file_is_consistent():
    for kind in [*RULE_FILES.values(), *RULE_FOLDERS.values()]:
        schema = json.loads((RULES_DIR / SCHEMAS / kind.schema).read_text(encoding="utf-8"))
        assert schema["properties"][formats.KEY]["type"] == "integer", kind.schema
    shipped = YAML(typ="safe").load((RULES_DIR / SCHEMAS / formats.FILE).read_text(encoding="utf-8"))
    compiled = formats.compile_formats(shipped)
    assert compiled.current >= 1 and all(c.since <= compiled.current for c in compiled.changes)


def test_the_frozen_directory_under_the_next_format_gets_one_line_per_changed_key(release_2):
    found = problems(rules_dir=release_2, operator_rules=SITE_OPS)
    assert {p.code for p in found} == {formats.CHANGED}
    assert all(p.layer == OPERATOR for p in found)
    by_pointer = {p.pointer: p for p in found}
    # rendering.yaml declares format 1; the overlay declares none: both are checked
    assert set(by_pointer) == {"/max_rows", "/actions/list/aliases"}
    rename = by_pointer["/max_rows"]
    assert rename.file.endswith("rendering.yaml") and rename.line == _line_of(SITE_OPS / "rendering.yaml", "max_rows:")
    assert "rows_max" in rename.message and "2" in rename.message
    removed = by_pointer["/actions/list/aliases"]
    assert removed.file.endswith("overlays/volume.yaml") and removed.line == _line_of(SITE_OPS / "overlays" / "volume.yaml", "aliases:")
    line = rename.format()
    assert line.startswith(f"{rename.file}:{rename.line}:{rename.col}: /max_rows: ") and line.endswith(f"[{formats.CHANGED}]")


def test_a_file_declaring_the_new_format_is_judged_by_the_schema_alone(release_2, tmp_path):
    op = _operator(tmp_path, {"rendering.yaml": "format: 2\nmax_rows: 5\n"})
    assert problems(rules_dir=release_2, operator_rules=op) == []
    assert build(_options(rules_dir=release_2, operator_rules=op)).rendering.max_rows == 5


def test_the_packaged_layer_is_never_checked_against_old_formats(release_2):
    # the packaged rendering.yaml still holds max_rows in this copy: it is the release's own
    assert problems(rules_dir=release_2) == []


def test_a_newer_format_than_the_engine_reads_is_one_line(tmp_path):
    op = _operator(tmp_path, {"rendering.yaml": "format: 99\nmax_rows: 5\nrows_max: 5\n"})
    found = problems(operator_rules=op)
    assert [(p.code, p.pointer, p.layer, p.line) for p in found] == [(formats.TOO_NEW, "/format", OPERATOR, 1)]
    with pytest.raises(RuleError):
        build(_options(operator_rules=op))


@pytest.mark.parametrize("value", ['"one"', "0", "true", "1.5"])
def test_a_format_that_is_not_a_whole_number_is_a_schema_problem(tmp_path, value):
    op = _operator(tmp_path, {"overlays/volume.yaml": f"format: {value}\n"})
    found = problems(operator_rules=op)
    assert [(p.pointer, p.layer) for p in found] == [("/format", OPERATOR)]
    assert found[0].code.startswith("schema.")


def test_a_broken_format_file_is_reported_not_raised(tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES_DIR, rules)
    (rules / SCHEMAS / formats.FILE).write_text("format: zero\nchanges:\n  - {since: 2, file: x.yaml, pointer: /a, change: renamed}\n",
                                               encoding="utf-8")
    found = problems(rules_dir=rules)
    assert found and all(p.file.endswith(formats.FILE) and p.code.startswith("schema.") for p in found)
    assert {p.pointer for p in found} >= {"/format", "/changes/0"}


def test_the_format_check_itself():
    fmt = formats.compile_formats({"format": 3, "changes": [
        {"since": 2, "file": "overlays/*.yaml", "pointer": "/actions/*/columns", "change": "moved", "to": "/columns"},
        {"since": 3, "file": "find.yaml", "pointer": "/weights/x", "change": "removed", "note": "use y"}]})
    overlay = {"format": 1, "actions": {"b": {"columns": [1]}, "a": {"columns": [2]}, "c": {}}}
    findings, readable = formats.check(fmt, "overlays/one.yaml", overlay)
    assert readable and [(f.parts, f.code) for f in findings] == [(("actions", "a", "columns"), formats.CHANGED),
                                                                  (("actions", "b", "columns"), formats.CHANGED)]
    assert all("/columns" in f.message for f in findings)
    assert formats.without(overlay, findings) == {"format": 1, "actions": {"b": {}, "a": {}, "c": {}}}
    assert overlay["actions"]["a"] == {"columns": [2]}  # the file's own value is not changed
    # a file declaring the format of the change, or another file, is not concerned
    assert formats.check(fmt, "overlays/one.yaml", {"format": 2, "actions": {"a": {"columns": []}}}) == ([], True)
    assert formats.check(fmt, "find.yaml", {"actions": {"a": {"columns": []}}}) == ([], True)
    # no format declared: every change applies
    findings, readable = formats.check(fmt, "find.yaml", {"weights": {"x": 1, "y": 2}})
    assert readable and [(f.parts, f.code) for f in findings] == [(("weights", "x"), formats.CHANGED)]
    assert "use y" in findings[0].message
    findings, readable = formats.check(fmt, "find.yaml", {"format": 4, "weights": {"x": 1}})
    assert not readable and [(f.parts, f.code) for f in findings] == [(("format",), formats.TOO_NEW)]
    assert [formats.declared(d) for d in ({"format": True}, {"format": "2"}, [], None, {"format": 2})] == [None, None, None, None, 2]
