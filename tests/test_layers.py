"""Layered rules: an operator's directory (ARCANE_MCP_RULES, --rules) is laid over the
packaged rules file by file and key by key (JSON Merge Patch, RFC 7396); validation runs on
the merged result and names the layer of each problem."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from interpreter import RULES_DIR
from interpreter.build.catalog import BuildOptions, build, problems
from interpreter.build.load import OPERATOR, PACKAGED, merge_patch
from interpreter.config import Settings
from interpreter.errors import RuleError
from interpreter.front.names import EXECUTE_TOOL, tool_name_individual, tool_name_meta
from interpreter.front.serve import build_runtime
from interpreter.front.surfaces import make_surface
from tests.helpers import examples, make_dispatcher, ok_json

pytestmark = pytest.mark.anyio

# The one change: container.list's columns (a new label, one packaged column dropped), and
# its packaged usage note removed explicitly with null.
OPERATOR_OVERLAY = """\
actions:
  list:
    columns: [id, {label: Operator Name, expr: "names[0]", whole: true}, state]
    usage: null
"""
CONTAINERS = [{"id": "c1", "names": ["/web"], "state": "running", "status": "Up 2 hours", "image": "nginx:1.27"}]
PAGE = {"totalItems": 1, "totalPages": 1, "currentPage": 1, "itemsPerPage": 20}


@pytest.fixture
def operator_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "operator"
    (directory / "overlays").mkdir(parents=True)
    (directory / "overlays" / "container.yaml").write_text(OPERATOR_OVERLAY, encoding="utf-8")
    return directory


def _table_header(markdown: str) -> list[str]:
    """The header cells of the first table of a result, read with a Markdown parser."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    cells, inside = [], False
    for i, tok in enumerate(tokens):
        if tok.type == "thead_open":
            inside = True
        elif tok.type == "thead_close":
            return cells
        elif inside and tok.type == "inline" and tokens[i - 1].type == "th_open":
            cells.append(tok.content)
    return cells


def _call(surface: str, action_id: str) -> tuple[str, dict]:
    domain, name = action_id.split(".", 1)
    if surface == "dynamic":
        return EXECUTE_TOOL, {"action": action_id, "params": {}}
    if surface == "meta":
        return tool_name_meta(domain), {"action": name, "params": {}}
    return tool_name_individual(action_id), {}


async def test_one_changed_overlay_file_shows_on_all_three_surfaces(operator_dir):
    runtime = build_runtime(Settings(arcane_url="http://arcane.test", api_key="arc_test_key", audit_log="off",
                                     rules_dir=operator_dir))
    catalog = runtime.catalog
    action = catalog.actions["container.list"]
    assert [c.label for c in action.columns] == ["id", "Operator Name", "state"]
    assert action.usage == ""  # null removed the packaged value
    # every other packaged value of the same file and action stays
    packaged = build().actions["container.list"]
    assert action.aliases == packaged.aliases and action.related == packaged.related and action.empty_hint == packaged.empty_hint
    assert catalog.actions["container.get"] == build().actions["container.get"]
    assert action.origins["columns"].layer == OPERATOR and action.origins["related"].layer == PACKAGED
    headers = {}
    for surface in ("dynamic", "meta", "individual"):
        dispatcher, rec = make_dispatcher(catalog, lambda r: ok_json(CONTAINERS, pagination=PAGE))
        tool, args = _call(surface, "container.list")
        result = await make_surface(surface, catalog, dispatcher).call(tool, args)
        assert not result.is_error, result.text
        assert len(rec.requests) == 1
        headers[surface] = _table_header(result.text)
    assert headers["dynamic"] == headers["meta"] == headers["individual"] == ["id", "Operator Name", "state"]


def test_without_an_operator_directory_the_packaged_columns_apply():
    assert "Operator Name" not in [c.label for c in build().actions["container.list"].columns]


def test_an_operator_problem_names_the_operator_layer(operator_dir):
    (operator_dir / "overlays" / "container.yaml").write_text(
        "actions:\n  list:\n    columns: [id, {label: x, expr: 'names[0'}]\n  nosuch: {usage: hi}\n", encoding="utf-8")
    found = problems(operator_rules=operator_dir)
    by_code = {p.code: p for p in found}
    assert set(by_code) == {"bad_jmespath", "unknown_action"}
    assert all(p.layer == OPERATOR and p.file.endswith("overlays/container.yaml") for p in found)
    assert by_code["bad_jmespath"].pointer == "/actions/list/columns/1/expr" and by_code["bad_jmespath"].line == 3
    with pytest.raises(RuleError):
        build(BuildOptions(operator_rules=operator_dir))


def test_a_packaged_problem_names_the_packaged_layer(tmp_path, operator_dir):
    packaged = tmp_path / "packaged"
    shutil.copytree(RULES_DIR, packaged)
    path = packaged / "rendering.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("max_rows: 50", "max_rows: many"), encoding="utf-8")
    found = problems(rules_dir=packaged, operator_rules=operator_dir)
    assert [(p.code, p.layer, p.pointer) for p in found] == [("schema.type", PACKAGED, "/max_rows")]


def test_a_merged_value_is_checked_by_the_schema_and_reported_where_the_operator_wrote_it(operator_dir):
    (operator_dir / "rendering.yaml").write_text("cell_max: 0\n", encoding="utf-8")
    found = problems(operator_rules=operator_dir)
    assert [(p.code, p.layer, p.pointer, p.line) for p in found] == [("schema.minimum", OPERATOR, "/cell_max", 1)]


def test_an_operator_may_remove_a_required_key_only_to_be_told(operator_dir):
    (operator_dir / "rendering.yaml").write_text("max_rows: null\n", encoding="utf-8")
    found = problems(operator_rules=operator_dir)
    assert [(p.code, p.layer) for p in found] == [("schema.required", OPERATOR)]


def test_an_operator_rendering_limit_applies(operator_dir):
    (operator_dir / "rendering.yaml").write_text("max_rows: 2\n", encoding="utf-8")
    catalog = build(BuildOptions(operator_rules=operator_dir))
    assert catalog.rendering.max_rows == 2 and catalog.rendering.cell_max == build().rendering.cell_max
    assert catalog.rendering.origins["max_rows"].layer == OPERATOR and catalog.rendering.origins["cell_max"].layer == PACKAGED


def test_unknown_operator_files_are_named(operator_dir):
    (operator_dir / "colours.yaml").write_text("a: 1\n", encoding="utf-8")
    (operator_dir / "themes").mkdir()
    found = problems(operator_rules=operator_dir)
    assert sorted((p.code, p.layer) for p in found) == [("unknown_rule_kind", OPERATOR)] * 2


def test_a_packaged_rule_file_missing_is_an_error_not_a_default(tmp_path):
    packaged = tmp_path / "packaged"
    shutil.copytree(RULES_DIR, packaged)
    (packaged / "rendering.yaml").unlink()
    found = problems(rules_dir=packaged)
    assert [p.code for p in found] == ["rule_file_missing"]


def test_interp_validate_reports_the_layer(operator_dir):
    (operator_dir / "overlays" / "container.yaml").write_text("actions:\n  list:\n    related: [container.nosuch]\n",
                                                               encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "interpreter.commands.cli", "validate", "--json", str(operator_dir)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert [(p["code"], p["layer"]) for p in report["problems"]] == [("unknown_action", OPERATOR)]
    text = subprocess.run([sys.executable, "-m", "interpreter.commands.cli", "validate", str(operator_dir)],
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 1 and "(operator layer)" in text.stdout


# ---------------------------------------------------------------- JSON Merge Patch

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
                    max_leaves=12)


@settings(max_examples=examples(200))
@given(JSON, JSON)
def test_merge_patch_follows_rfc_7396(target, patch):
    before = (json.dumps(target, sort_keys=True), json.dumps(patch, sort_keys=True))
    merged = merge_patch(target, patch)
    assert (json.dumps(target, sort_keys=True), json.dumps(patch, sort_keys=True)) == before  # neither is changed
    if not isinstance(patch, dict):
        assert merged == patch
        return
    assert isinstance(merged, dict)
    base = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            assert key not in merged
        elif isinstance(value, dict):
            assert merged[key] == merge_patch(base.get(key), value)
        else:
            assert merged[key] == value
    for key in set(base) - set(patch):
        assert merged[key] == base[key]
    # applying the same patch again changes nothing (a patch is idempotent)
    assert merge_patch(merged, patch) == merged
