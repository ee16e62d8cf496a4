"""The repository is self-contained: every file a test reads is vendored under tests/data/
with its provenance, and nothing reads the team's reference folder beside the checkout
(the `shared` sibling directory, which a user's clone does not have)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from .helpers import DATA_DIR, data_file

ROOT = Path(__file__).resolve().parents[1]
SOURCE_ROW = re.compile(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \| ([\d,]+) \|$", re.M)


def test_every_vendored_file_matches_its_provenance_note() -> None:
    rows = SOURCE_ROW.findall((DATA_DIR / "SOURCE.md").read_text(encoding="utf-8"))
    assert {name for name, _, _ in rows} == {p.name for p in DATA_DIR.iterdir() if p.suffix == ".json"}
    for name, digest, size in rows:
        blob = data_file(name).read_bytes()
        assert (hashlib.sha256(blob).hexdigest(), len(blob)) == (digest, int(size.replace(",", ""))), name


def test_data_file_fails_on_a_missing_file() -> None:
    try:
        data_file("no-such-file.json")
    except AssertionError as exc:
        assert "no-such-file.json" in str(exc)
    else:
        raise AssertionError("data_file accepted a missing file")


def test_nothing_reads_the_shared_folder_beside_the_checkout() -> None:
    # the sibling reference folder is the team's material, never a test or run-time dependency
    pattern = re.compile(r"""\.\./shared|/\s*["']shared["']|parents?\[\d\]\s*/\s*["']shared""")
    files = [*ROOT.glob("interpreter/**/*.py"), *ROOT.glob("simulator/**/*.py"), *ROOT.glob("tests/**/*.py"), ROOT / "Makefile", ROOT / "pyproject.toml",
             *ROOT.glob(".ci/*")]
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in files if p != Path(__file__)
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert hits == []


# ---------------------------------------------------------------- boundaries a reader relies on

PACKAGE = ROOT / "interpreter"
SIMULATOR = ROOT / "simulator"  # its own top-level package (tests/test_simulator.py checks its imports)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The interpreter modules a file imports, at module level or inside functions."""
    import ast

    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            out |= {target} & modules
            out |= {f"{target}.{a.name}" for a in node.names} & modules
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & modules
    return out - {name}


def test_no_import_cycle_between_interpreter_modules() -> None:
    graph = {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}
    cycles = []
    for start in graph:
        stack = [(start, (start,))]
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" -> ".join(path + (start,)))
                elif nxt not in path:
                    stack.append((nxt, path + (nxt,)))
    assert cycles == []
    assert "interpreter.build.validate" not in graph["interpreter.build.load"] and "interpreter.build.catalog" not in graph["interpreter.build.validate"]


def test_every_engine_exception_class_is_in_errors_py() -> None:
    import importlib
    import inspect

    elsewhere = []
    for path in PACKAGE.rglob("*.py"):  # the engine; the simulator (a test double) keeps its own
        module = importlib.import_module(_module_name(path))
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__ \
                    and module.__name__ != "interpreter.errors":
                elsewhere.append(f"{module.__name__}.{name}")
    assert elsewhere == []


def _caught(path: Path) -> set[str]:
    """Dotted names of the exception types a file's `except` clauses name."""
    import ast

    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            for t in (node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]):
                out.add(ast.unparse(t))
    return out


def test_foreign_errors_are_mapped_at_one_boundary_each() -> None:
    where: dict[str, set[str]] = {"httpx": set(), "ruamel": set(), "jsonschema": set()}
    for path in PACKAGE.rglob("*.py"):
        for name in _caught(path):
            if name.startswith("httpx."):
                where["httpx"].add(path.name)
            if name in ("MarkedYAMLError", "YAMLError") or name.startswith("ruamel"):
                where["ruamel"].add(path.name)
            if name in ("ValidationError", "SchemaError") or name.startswith("jsonschema"):
                where["jsonschema"].add(path.name)
    assert where == {"httpx": {"transport.py"}, "ruamel": {"load.py"}, "jsonschema": set()}


def test_pyproject_lists_every_package_and_data_folder() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    code = {_module_name(p.parent / "__init__.py") for top in (PACKAGE, SIMULATOR) for p in top.rglob("__init__.py")}
    sim_data = {d.relative_to(ROOT).as_posix().replace("/", ".") for d in [SIMULATOR / "data", *(SIMULATOR / "data").rglob("*")]
                if d.is_dir() and "__pycache__" not in d.parts}
    data = {f"interpreter._data.{d.relative_to(ROOT).as_posix().replace('/', '.')}"
            for top in ("catalog", "rules", "compiled") for d in [ROOT / top, *(ROOT / top).rglob("*")]
            if d.is_dir() and any(f.suffix in (".json", ".yaml", ".yml") for f in d.iterdir())}
    # a package or data folder missing here would be missing from the wheel
    assert code | data | sim_data <= listed
    assert "simulator" in code and "simulator.data.behaviour" in sim_data
    # the simulator's data ships by glob (and its README, which says what it is)
    assert set(config["package-data"]["simulator"]) >= {"**/*.yaml", "**/*.json", "README.md"}
    assert {v: k for k, v in config["package-dir"].items()} == {"catalog": "interpreter._data.catalog", "rules": "interpreter._data.rules",
                                                                "compiled": "interpreter._data.compiled"}
    assert config["package-data"]["interpreter._data.compiled"] == ["catalog.json"]


def test_every_supported_python_is_tested() -> None:
    """pyproject's classifiers name the Pythons the package supports: the one of .venv
    (`make test`, this run) and each of the Makefile's OTHER_PYTHONS (`make test-pythons`)."""
    import sys
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    others = re.search(r"^OTHER_PYTHONS \?= (.+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    assert others is not None
    oldest = min(declared, key=lambda v: tuple(map(int, v.split("."))))
    assert declared == {oldest, *others.group(1).split()}
    assert project["requires-python"] == f">={oldest}"
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in declared


def test_the_checkout_test_reads_the_project_name_as_tomllib_does(tmp_path: Path) -> None:
    """paths.is_checkout reads [project].name line by line (no TOML parser at a start): it
    agrees with tomllib on this checkout's pyproject.toml, finds the name only in that
    table, and a directory is a checkout only with that name and catalog/ and rules/."""
    import tomllib

    from interpreter.paths import PROJECT_NAME, is_checkout, project_name

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert project_name(text) == tomllib.loads(text)["project"]["name"] == PROJECT_NAME
    assert is_checkout(ROOT)
    cases = {
        '[tool.x]\nname = "arcane-mcp"\n[project]\nversion = "1"\n': None,
        '[project]\nversion = "1"  # x\nname = \'arcane-mcp\'  # ours\n': "arcane-mcp",
        '[ project ]\nname="other"\n': "other",
        '[project]\nname = arcane-mcp\n': None,
    }
    for sample, expected in cases.items():
        assert project_name(sample) == expected, sample
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "arcane-mcp"\n', encoding="utf-8")
    assert not is_checkout(tmp_path)  # no catalog/ nor rules/
    (tmp_path / "catalog").mkdir()
    (tmp_path / "rules").mkdir()
    assert is_checkout(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "another"\n', encoding="utf-8")
    assert not is_checkout(tmp_path)
