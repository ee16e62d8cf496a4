"""Rule files are read safely: an alias bomb, a file too large, nesting too deep and a
recursive alias in a rule or catalog file are each refused with file:line and a stable code
(interpreter/build/load.py, "Reading is bounded"), by the loader and by `interp validate`.
Nothing here times anything: the work is counted (tokens scanned, nodes composed)."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml.error import MarkedYAMLError

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build import load
from interpreter.build.catalog import problems
from interpreter.build.load import MAX_BYTES, MAX_DEPTH, MAX_NODES, load_file, plain
from interpreter.commands.cli import main

# a billion laughs, ten-fold: each line's list holds ten of the line above; the expanded
# count crosses MAX_NODES (50,000) at the 4th alias of line 5 (a4: 11,111 nodes each)
BOMB = "".join([
    "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n",
    *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)),
])
BOMB_LINE = 5
DEEP_FLOW = "x: " + "[" * 10_000 + "]" * 10_000 + "\n"
DEEP_BLOCK = "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v\n"
RECURSIVE = "actions:\n  list: &r\n    not_a_key: 1\n    again: *r\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _one(path: Path) -> tuple[str, int, int]:
    loaded, found = load_file(path)
    assert loaded is None and len(found) == 1, found
    return found[0].code, found[0].line, found[0].col


def _refused(text: str) -> tuple[str, object]:
    """Parse with the engine's loader; (the code it left, the loader) after the refusal."""
    y = load._yaml()
    with pytest.raises(MarkedYAMLError):
        y.load(io.StringIO(text))
    return y.refused, y


# ---------------------------------------------------------------- the loader


def test_an_alias_bomb_stops_at_the_alias_that_crosses_the_bound(tmp_path):
    assert _one(_write(tmp_path / "find.yaml", BOMB))[:2] == ("yaml_alias_bomb", BOMB_LINE)
    code, y = _refused(BOMB)
    assert code == "yaml_alias_bomb"
    # the work: the tokens of five short lines, not 10^10 nodes
    assert y._scanner.tokens_taken < 200
    assert MAX_NODES < y._composer.nodes <= MAX_NODES + 11_111


def test_a_merge_key_bomb_is_refused(tmp_path):
    text = "base: &b {" + ", ".join(f"k{i}: v" for i in range(100)) + "}\n"
    text += "".join(f"m{i}: {{<<: *b, own: {i}}}\n" for i in range(600))
    code, line, _ = _one(_write(tmp_path / "find.yaml", text))
    assert code == "yaml_alias_bomb" and 2 <= line <= 601


@pytest.mark.parametrize("text", [
    "a: &r [*r]\n",
    "a: &r {self: *r}\n",
    "a: &r\n  b:\n    c: [1, *r]\n",
    RECURSIVE,
])
def test_a_recursive_alias_is_an_error(tmp_path, text):
    code, line, _ = _one(_write(tmp_path / "find.yaml", text))
    assert code == "yaml_recursive_alias"
    assert line == next(i for i, row in enumerate(text.splitlines(), 1) if "*r" in row)


@pytest.mark.parametrize("text,line", [
    (DEEP_FLOW, 1),
    ("x: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n", 1),
    (DEEP_BLOCK, MAX_DEPTH),
    ("- " * 1000 + "x\n", 1),
])
def test_nesting_beyond_the_limit_is_refused_without_recursion(tmp_path, text, line):
    code, at, _ = _one(_write(tmp_path / "find.yaml", text))
    assert (code, at) == ("yaml_too_deep", line)
    _, y = _refused(text)
    assert y._scanner.tokens_taken < 4 * MAX_DEPTH  # stopped near the limit, not after 10,000 levels


def test_nesting_at_the_limit_loads(tmp_path):
    # the root map is level 1, so MAX_DEPTH - 2 brackets put the innermost scalar at MAX_DEPTH
    n = MAX_DEPTH - 2
    loaded, found = load_file(_write(tmp_path / "find.yaml", "x: " + "[" * n + "1" + "]" * n + "\n"))
    assert found == [] and loaded is not None
    loaded, found = load_file(_write(tmp_path / "find.yaml", "x: " + "[" * (n + 1) + "1" + "]" * (n + 1) + "\n"))
    assert [p.code for p in found] == ["yaml_too_deep"]


def test_a_file_beyond_the_size_limit_is_not_parsed(tmp_path):
    path = _write(tmp_path / "find.yaml", "# padding\n" * (MAX_BYTES // 10 + 1))
    assert path.stat().st_size > MAX_BYTES
    assert _one(path) == ("yaml_too_large", 1, 1)
    # 1 MB of one string, and 30 MB: the same answer, the text is never read past the limit
    assert _one(_write(tmp_path / "big.yaml", "k: " + "a" * 1_000_000 + "\n"))[0] == "yaml_too_large"
    with open(tmp_path / "huge.yaml", "wb") as f:
        f.truncate(30 * 1024 * 1024)
    assert _one(tmp_path / "huge.yaml")[0] == "yaml_too_large"


def test_too_many_nodes_without_aliases_is_too_large(tmp_path):
    text = "x: [" + ",".join("1" for _ in range(MAX_NODES)) + "]\n"
    assert len(text.encode()) <= MAX_BYTES
    assert _one(_write(tmp_path / "find.yaml", text))[:2] == ("yaml_too_large", 1)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_not_read(tmp_path):
    fifo = tmp_path / "find.yaml"
    os.mkfifo(fifo)
    assert _one(fifo)[0] == "unreadable"  # no writer: reading it would wait for ever


def test_deep_or_huge_json_is_refused(tmp_path):
    assert _one(_write(tmp_path / "x.json", "[" * 100_000 + "]" * 100_000))[0] == "yaml_too_deep"
    # 80 levels: within what json parses, beyond what the schema check may recurse into
    assert _one(_write(tmp_path / "y.json", '{"a": ' + "[" * 80 + "1" + "]" * 80 + "}"))[0] == "yaml_too_deep"
    assert _one(_write(tmp_path / "z.json", json.dumps([0] * (MAX_NODES + 1))))[0] == "yaml_too_large"


def _count(value) -> int:
    """Nodes of a plain value as the composer counts them: a map, its keys and values."""
    if isinstance(value, dict):
        return 1 + sum(1 + _count(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_count(v) for v in value)
    return 1


@pytest.mark.parametrize("text", [
    "a: 1\nb: [1, 2, {c: 3}]\n",
    "a: &x [1, 2, 3]\nb: *x\nc: [*x, *x]\n",
    "a: &x {k: &y [1, 2]}\nb: [*x, *y, *x]\nc: {d: *y}\n",
    "base: &b {k: 1, j: 2}\nm: {<<: *b, own: 3}\n",
])
def test_the_expanded_count_is_the_size_of_the_plain_value(text):
    y = load._yaml()
    tree = y.load(io.StringIO(text))
    data = plain(tree)
    if "<<" in text:  # a merge key adds the merged keys, never more than its alias's size
        assert y._composer.nodes >= _count(data) - 2
    else:
        assert y._composer.nodes == _count(data)


def test_the_limits_leave_room_above_every_shipped_file():
    """Each bound is the biggest shipped file's figure times a margin (load.py says why)."""
    files = [p for d in (CATALOG_DIR, RULES_DIR) for p in d.rglob("*.y*ml")]  # the simulator's: test_simulator.py
    assert len(files) > 50
    most_bytes = most_nodes = deepest = 0
    for path in files:
        levels = [0]
        y = load._yaml()
        original = y.Composer.compose_node

        def compose_node(self, parent, index, _original=original, _levels=levels):
            _levels[0] = max(_levels[0], self.level + 1)
            return _original(self, parent, index)

        y.Composer = type("Counting", (y.Composer,), {"compose_node": compose_node})
        y.compose(io.StringIO(path.read_text(encoding="utf-8")))
        most_bytes = max(most_bytes, path.stat().st_size)
        most_nodes = max(most_nodes, y._composer.nodes)
        deepest = max(deepest, levels[0])
    assert 4 * most_bytes <= MAX_BYTES
    assert 6 * most_nodes <= MAX_NODES
    assert 4 * deepest <= MAX_DEPTH


# ---------------------------------------------------------------- interp validate


@pytest.fixture
def bombs(tmp_path: Path) -> Path:
    """An operator's directory with one bomb in each of several files."""
    directory = tmp_path / "operator"
    _write(directory / "find.yaml", BOMB)
    _write(directory / "errors.yaml", "# padding\n" * (MAX_BYTES // 10 + 1))
    _write(directory / "rendering.yaml", DEEP_FLOW)
    _write(directory / "overlays" / "container.yaml", RECURSIVE)
    _write(directory / "overlays" / "image.yaml", DEEP_BLOCK)
    return directory


EXPECTED = {
    "find.yaml": ("yaml_alias_bomb", BOMB_LINE),
    "errors.yaml": ("yaml_too_large", 1),
    "rendering.yaml": ("yaml_too_deep", 1),
    "container.yaml": ("yaml_recursive_alias", 4),
    "image.yaml": ("yaml_too_deep", MAX_DEPTH),
}


def test_interp_validate_refuses_each_bomb_with_its_code_and_line(bombs):
    result = CliRunner().invoke(main, ["validate", str(bombs)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.stdout.splitlines()
    assert len(lines) == len(EXPECTED), lines
    found = {}
    for row in lines:  # file:line:col: /pointer: message (operator layer) [code]
        name = next(n for n in EXPECTED if f"{n}:" in row)
        code, line = EXPECTED[name]
        assert f"{name}:{line}:" in row and row.endswith(f"(operator layer) [{code}]"), row
        found[name] = (code, line)
    assert found == EXPECTED


def test_a_bomb_in_a_catalog_file_is_refused(tmp_path):
    catalog = tmp_path / "catalog"
    shutil.copytree(CATALOG_DIR, catalog)
    _write(catalog / "extra-routes.yaml", BOMB)
    found = problems(rules_dir=RULES_DIR, catalog_dir=catalog)
    assert [(Path(p.file).name, p.code, p.line) for p in found if p.code.startswith("yaml_")] == [
        ("extra-routes.yaml", "yaml_alias_bomb", BOMB_LINE)]
