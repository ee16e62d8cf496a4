"""`interp validate` against broken rule and inventory fixtures.

Each folder of tests/fixtures/broken_rules/ is one case, run against a copy of the real
catalog/ and rules/:

    catalog/…, rules/…   files laid over the copy (added or replaced)
    edit.yaml            optional list of {file, replace, with}: `replace` occurs exactly once
                         in `file` (relative to the copy) and becomes `with`
    expect.txt           the exact report lines, paths relative to the copy; `#` lines are
                         comments; `{line:TEXT}` stands for the number of the first line of that
                         file (after the edits) that starts with TEXT, so a case does not break
                         when unrelated lines of the shared inventory move
    xfail.txt            optional: a known defect, the reason; the case then expects the
                         right location and code (message not compared) and is a strict xfail

The shipped files are parsed once per session (`base`): a case's copy takes the base's
parse of every file whose bytes it did not change, and that file's clean schema check, and
parses and checks the files its edit touched; compilation, the build and every
cross-check run whole for each case. test_the_shared_parse_changes_no_report runs a case
both ways; test_no_case_changed_the_shared_parse (last) checks nothing changed the base.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build import load
from interpreter.build.catalog import problems as validate
from interpreter.build.load import Loaded
from interpreter.errors import Problem

CASES_DIR = Path(__file__).parent / "fixtures" / "broken_rules"
CASES = sorted(p.name for p in CASES_DIR.iterdir() if p.is_dir())
LINE_RE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<pointer>\S*): (?P<message>.*) \[(?P<code>[^\]]+)\]$")
PLACEHOLDER = re.compile(r"\{line:([^}]*)\}")


def copy_sources(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the real catalog/ and rules/ under tmp_path."""
    catalog_dir, rules_dir = tmp_path / "catalog", tmp_path / "rules"
    shutil.copytree(CATALOG_DIR, catalog_dir)
    shutil.copytree(RULES_DIR, rules_dir)
    return catalog_dir, rules_dir


class SharedBase:
    """The shipped catalog/ and rules/, copied and parsed once: `problems(root)` validates
    a case's copy under `root` reading the base's parse for each file the case left as it
    was, and parsing the others."""

    def __init__(self, root: Path):
        copy_sources(root)
        self.root = root
        self.parsed: dict[str, tuple[bytes, Loaded]] = {}
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in (".yaml", ".yml"):
                loaded, found = load.load_file(path)
                assert loaded is not None and found == [], found
                self.parsed[path.relative_to(root).as_posix()] = (path.read_bytes(), loaded)
        self._values = {id(loaded.data) for _, loaded in self.parsed.values()}
        self._clean: set[tuple[int, int]] = set()  # (a base value, a schema's validator) found clean

    def problems(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> list[Problem]:
        parse, check = load.load_file, load.schema_problems

        def load_file(path: Path, display: str | None = None):
            try:
                rel = Path(path).relative_to(root).as_posix()
            except ValueError:
                return parse(path, display)
            known = self.parsed.get(rel)
            if known is None or Path(path).read_bytes() != known[0]:
                return parse(path, display)
            return Loaded(display or str(path), known[1].tree, known[1].data), []

        def schema_problems(loaded: Loaded, validator) -> list[Problem]:
            # validators are kept by their schema's text: an edited schema is another one
            key = (id(loaded.data), id(validator))
            if key in self._clean:
                return []
            found = check(loaded, validator)
            if not found and key[0] in self._values:
                self._clean.add(key)
            return found

        with monkeypatch.context() as m:
            m.setattr(load, "load_file", load_file)
            m.setattr(load, "schema_problems", schema_problems)
            return validate(root / "rules", root / "catalog")


@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory) -> SharedBase:
    return SharedBase(tmp_path_factory.mktemp("shipped"))


def apply_case(case_dir: Path, root: Path) -> None:
    for f in sorted(case_dir.rglob("*")):
        rel = f.relative_to(case_dir)
        if f.is_file() and rel.parts[0] in ("catalog", "rules"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, root / rel)
    edit_file = case_dir / "edit.yaml"
    if edit_file.exists():
        for edit in YAML(typ="safe").load(edit_file.read_text(encoding="utf-8")):
            target = root / edit["file"]
            text = target.read_text(encoding="utf-8")
            assert text.count(edit["replace"]) == 1, f"{case_dir.name}: {edit['replace']!r} must occur once in {edit['file']}"
            target.write_text(text.replace(edit["replace"], edit["with"]), encoding="utf-8")


def expected_lines(case_dir: Path, root: Path) -> list[str]:
    out = []
    for raw in (case_dir / "expect.txt").read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        fname = raw.split(":", 1)[0]

        def line_of(m: re.Match, fname=fname) -> str:
            lines = (root / fname).read_text(encoding="utf-8").splitlines()
            hits = [i for i, text in enumerate(lines, 1) if text.startswith(m.group(1))]
            assert hits, f"{case_dir.name}: no line of {fname} starts with {m.group(1)!r}"
            return str(hits[0])

        out.append(PLACEHOLDER.sub(line_of, raw))
    return out


def normalise(problem: Problem, root: Path) -> str:
    text = problem.format()
    for prefix in {str(root) + "/", str(root.resolve()) + "/"}:
        text = text.replace(prefix, "")
    return text


def location(line: str) -> tuple:
    m = LINE_RE.match(line)
    assert m, f"not a report line: {line!r}"
    return (m["file"], int(m["line"]), int(m["col"]), m["pointer"], m["code"])


@pytest.mark.parametrize("case", CASES)
def test_broken_rules_case(case: str, tmp_path: Path, request, base: SharedBase, monkeypatch) -> None:
    case_dir = CASES_DIR / case
    copy_sources(tmp_path)
    apply_case(case_dir, tmp_path)
    expected = expected_lines(case_dir, tmp_path)
    problems = base.problems(tmp_path, monkeypatch)
    got = [normalise(p, tmp_path) for p in problems]
    xfail = case_dir / "xfail.txt"
    if xfail.exists():
        request.applymarker(pytest.mark.xfail(reason=xfail.read_text(encoding="utf-8").strip(), strict=True))
        assert [location(g) for g in got] == [location(e) for e in expected]
        return
    assert got == expected
    # codes and pointers, apart from the wording
    assert [(p.code, p.pointer or "/") for p in problems] == [(location(e)[4], location(e)[3]) for e in expected]


def test_the_shared_parse_changes_no_report(tmp_path: Path, base: SharedBase, monkeypatch) -> None:
    """A case that edits a catalog file and a rule file reports the same problems, at the
    same places, whether its copy is parsed whole or reads the base's parse."""
    copy_sources(tmp_path)
    apply_case(CASES_DIR / "duplicate_id", tmp_path)
    parsed = []
    real = load.load_file
    monkeypatch.setattr(load, "load_file", lambda path, display=None: parsed.append(path) or real(path, display))
    whole = validate(tmp_path / "rules", tmp_path / "catalog")
    assert len(parsed) == len(base.parsed)
    parsed.clear()
    shared = base.problems(tmp_path, monkeypatch)
    assert shared == whole and [p.code for p in whole] == ["duplicate_id"]
    # only the two edited files were parsed again
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in parsed) == ["catalog/actions.yaml", "rules/overlays/app_image.yaml"]


def test_every_case_has_an_expectation() -> None:
    assert len(CASES) >= 12
    for case in CASES:
        d = CASES_DIR / case
        assert (d / "expect.txt").exists(), case
        assert (d / "edit.yaml").exists() or (d / "catalog").exists() or (d / "rules").exists(), case


def test_real_rules_are_valid() -> None:
    assert [p.format() for p in validate(RULES_DIR, CATALOG_DIR)] == []


def test_problem_as_dict_has_every_field(tmp_path: Path, base: SharedBase, monkeypatch) -> None:
    copy_sources(tmp_path)
    apply_case(CASES_DIR / "stale_allowlist", tmp_path)
    problems = base.problems(tmp_path, monkeypatch)
    assert problems and problems == sorted(problems)
    for p in problems:
        d = p.as_dict()
        assert set(d) == {"file", "line", "col", "pointer", "message", "code", "layer"}
        assert isinstance(d["line"], int) and d["line"] >= 1 and isinstance(d["col"], int) and d["col"] >= 1
        assert d["pointer"].startswith("/") and d["message"] and d["code"] == "stale_allowlist"
        json.dumps(d)


def test_copy_is_isolated_from_the_real_files(tmp_path: Path) -> None:
    before = (CATALOG_DIR / "actions.yaml").read_bytes()
    copy_sources(tmp_path)
    apply_case(CASES_DIR / "unnamed_operation", tmp_path)
    assert (CATALOG_DIR / "actions.yaml").read_bytes() == before
    assert (tmp_path / "catalog" / "actions.yaml").read_bytes() != before


# ---------------------------------------------------------------- every problem in one run

# An operator's overlay with three problems of three stages: an unknown key (the schema),
# a column whose JMESPath does not compile (compiling) and an action the catalog does not
# have (the cross-check). Laid over the packaged container.yaml.
OPERATOR_THREE = """\
actions:
  counts:
    colour: blue
  list:
    columns: [id, {label: name, expr: "names[0"}]
  kil:
    usage: A typo of kill.
"""


def test_an_operator_file_reports_all_three_problems_in_one_run(tmp_path: Path) -> None:
    op = tmp_path / "operator"
    (op / "overlays").mkdir(parents=True)
    (op / "overlays" / "container.yaml").write_text(OPERATOR_THREE, encoding="utf-8")
    found = validate(RULES_DIR, CATALOG_DIR, operator_rules=op)
    assert found == sorted(found)
    assert [(p.pointer, p.code, p.layer, p.line) for p in found] == [
        ("/actions/counts/colour", "schema.additionalProperties", "operator", 3),
        ("/actions/list/columns/1/expr", "bad_jmespath", "operator", 5),
        ("/actions/kil", "unknown_action", "operator", 6),
    ]
    assert all(p.file.endswith("container.yaml") for p in found)


def test_validate_cli_prints_every_problem_and_no_traceback(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from interpreter.commands.cli import main

    op = tmp_path / "operator"
    (op / "overlays").mkdir(parents=True)
    (op / "overlays" / "container.yaml").write_text(OPERATOR_THREE, encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(op), "--json"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    report = json.loads(result.output)
    assert report["ok"] is False
    assert [p["code"] for p in report["problems"]] == ["schema.additionalProperties", "bad_jmespath", "unknown_action"]
    assert "Traceback" not in result.output


# Files that are partly or wholly unreadable against their schema, in odd shapes; each gets
# its problems and none stops the others being checked (or crashes validate).
DEEP = "x: " + "[" * 10_000 + "]" * 10_000 + "\n"
ODD_OVERLAYS = {
    "container.yaml": "actions: [1, 2]\n",  # a list where a mapping belongs
    "image.yaml": "actions:\n  list: null\n  get: {usage: 7, related: [image.lsit]}\n",
    "volume.yaml": "actions:\n  list:\n    columns: \"name\"\n    related: [volume.gte]\n",
    "network.yaml": "actions:\n  list:\n    \"\\u0007bell\": 1\n    \"\": 2\n    usage: \"\\u0000\"\n",
    "project.yaml": "actions:\n  list:\n    columns: [{label: a, expr: \"[\"}, {expr: b}, 3]\n",
    "port.yaml": "actions:\n  list:\n    " + DEEP,
    "swarm.yaml": "domain: 12\n",
    "user.yaml": "- just\n- a list\n",
}


def test_odd_operator_files_each_get_their_problems_and_nothing_crashes(tmp_path: Path) -> None:
    op = tmp_path / "operator"
    (op / "overlays").mkdir(parents=True)
    for name, text in ODD_OVERLAYS.items():
        (op / "overlays" / name).write_text(text, encoding="utf-8")
    (op / "overlays" / "build.yaml").write_text("actions:\n  " + "x" * 1_000_000 + ": {}\n", encoding="utf-8")
    found = validate(RULES_DIR, CATALOG_DIR, operator_rules=op)
    assert found == sorted(found)
    by_file: dict[str, list[tuple[str, str]]] = {}
    for p in found:
        assert p.code and (p.pointer == "" or p.pointer.startswith("/")) and p.line >= 1 and p.layer == "operator"
        by_file.setdefault(Path(p.file).name, []).append((p.pointer, p.code))
    assert set(by_file) == set(ODD_OVERLAYS) | {"build.yaml"}
    # what could still be read was cross-checked after the schema errors
    assert ("/actions/get/related/0", "unknown_action") in by_file["image.yaml"]
    assert ("/actions/get/usage", "schema.type") in by_file["image.yaml"]
    assert ("/actions/list/related/0", "unknown_action") in by_file["volume.yaml"]
    assert ("/actions/list/columns", "schema.type") in by_file["volume.yaml"]
    assert [(ptr or "/", code) for ptr, code in by_file["user.yaml"]] == [("/", "schema.type")]  # the file as a whole: nothing to read
def test_no_case_changed_the_shared_parse(base: SharedBase) -> None:
    """The cases share the base's parsed values: none of them changed one (this file's
    tests run in order, this one last)."""
    for rel, (_, shared) in base.parsed.items():
        fresh, _ = load.load_file(base.root / rel)
        assert fresh.data == shared.data, rel
        assert load.plain(fresh.tree) == load.plain(shared.tree), rel
