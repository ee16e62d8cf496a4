"""Docs that stay true: every `interp` command line the README shows runs, every Markdown
page renders with its tables intact, no page cites a file the repository does not hold,
and the package's module map names every module.

The README's command lines are synopses (`interp call ACTION key=value… [--json]`): each is
matched to concrete runs here (RUNS), or, when it serves until stopped, to its `--help` with
the reason (HELP_ONLY). A synopsis in neither table, or an entry whose synopsis the README no
longer shows, fails the test: nothing is skipped silently. Every flag a synopsis shows must
be one its command accepts (its `--help` names it).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cmarkgfm
import pytest
from markdown_it import MarkdownIt

import interpreter

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted([README, *(ROOT / "docs").rglob("*.md")])
INTERP = str(Path(sys.executable).parent / "interp")
# the catalog cache the whole run shares (tests/conftest.py), so each run starts warm
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_MCP_AUDIT_LOG": "off",
       **{k: os.environ[k] for k in ("ARCANE_MCP_CACHE_DIR",) if k in os.environ}}


def md() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


# ---------------------------------------------------------------- (a) the README's command lines


def readme_synopses() -> list[str]:
    """Every `interp …` line of the README's fenced blocks, without its trailing comment."""
    out = []
    for tok in md().parse(README.read_text(encoding="utf-8")):
        if tok.type in ("fence", "code_block"):
            for line in tok.content.splitlines():
                line = line.split("  #", 1)[0].strip()
                if line.startswith("interp "):
                    out.append(line)
    return out


def key_of(synopsis: str) -> str:
    """The command words of a synopsis: up to the first placeholder or optional part."""
    words = []
    for word in synopsis.split()[1:]:
        if word.startswith("[") or not re.fullmatch(r"--?[a-z][a-z-]*|[a-z][a-z-]*", word):
            break
        words.append(word)
    return " ".join(words)


def shown_flags(synopsis: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", synopsis))


SIM = object()  # stands for the simulator's URL and key in the environment of a run
TMP_ROOT = "{tmp_root}"  # a copy of the checkout's catalog/, rules/ and pyproject.toml

# synopsis key -> the command lines run for it, each expected to exit 0 ("sim": against
# the simulator fixture)
RUNS: dict[str, tuple[list[str], ...]] = {
    "call": (["call", "container.list", "limit=2", SIM], ["call", "container.list", "limit=2", "--json", SIM]),
    "find": (["find", "restart a container"],),
    "explain": (["explain", "container.list"], ["explain", "container.restart", "--json"]),
    "doctor": (["doctor", "--json", SIM],),
    "validate": (["validate"], ["validate", "--json"], ["validate", str(interpreter.RULES_DIR)]),
    "audit": (["audit"], ["audit", "--json"]),
    "audit --rules": (["audit", "--rules"], ["audit", "--rules", "--json"]),
    "reference": (["reference", "--check", "--root", str(ROOT)],),
    "rules-doc": (["rules-doc", "--check", "--root", str(ROOT)],),
    "manifest": (["manifest", "--check", "--root", str(ROOT)],),
    "compile": (["compile", "--check", "--root", str(ROOT)],),
    # the shipped document into a copy: the command's whole path, nothing of this checkout changed
    "update-spec": (["update-spec", TMP_ROOT + "/catalog/arcane.openapi.json", "--root", TMP_ROOT],),
}
# synopsis key -> why only its --help is run
HELP_ONLY: dict[str, str] = {
    "serve": "serves until stopped (stdio or HTTP); tests/test_cli.py and tests/test_http.py start it",
    "simulate": "serves until stopped; the sim fixture (tests/conftest.py) starts the same simulator",
}


def run(args: list[str], env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([INTERP, *args], capture_output=True, text=True, timeout=timeout, env={**ENV, **(env or {})},
                          stdin=subprocess.DEVNULL)


def test_every_readme_command_line_is_accounted_for() -> None:
    keys = [key_of(s) for s in readme_synopses()]
    assert len(keys) >= 10 and len(set(keys)) == len(keys), keys
    assert set(keys) == set(RUNS) | set(HELP_ONLY), "a README synopsis without a run, or a run the README no longer shows"
    assert not set(RUNS) & set(HELP_ONLY)
    assert sorted(HELP_ONLY) == ["serve", "simulate"]  # the only two not run, each with its reason


@pytest.mark.parametrize("synopsis", readme_synopses(), ids=key_of)
def test_readme_command_line_runs(synopsis: str, request, tmp_path: Path) -> None:
    key = key_of(synopsis)
    command = key.split()[0]
    helped = run([command, "--help"], timeout=60)
    assert helped.returncode == 0, helped.stderr
    for flag in shown_flags(synopsis):
        assert flag in helped.stdout, f"{synopsis!r} shows {flag}, which `interp {command} --help` does not name"
    if key in HELP_ONLY:
        assert HELP_ONLY[key]
        return
    runs = RUNS[key]
    for args in runs:
        env = {}
        if SIM in args:
            sim = request.getfixturevalue("sim")
            env = {"ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key}
            args = [a for a in args if a is not SIM]
        if any(TMP_ROOT in a for a in args):
            for part in ("catalog", "rules"):
                shutil.copytree(ROOT / part, tmp_path / part)
            shutil.copyfile(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
            args = [a.replace(TMP_ROOT, str(tmp_path)) for a in args]
        p = run(args, env)
        assert p.returncode == 0, f"interp {' '.join(args)}: exit {p.returncode}\n{p.stderr[-2000:]}"
        assert "Traceback" not in p.stderr
        if args[0] in ("validate", "audit") and "--json" in args and "--rules" not in args:  # the shipped rules: a clean report
            report = json.loads(p.stdout)
            assert report["ok"] is True and report.get("problems", []) == [] and report.get("failures", []) == [], report
    if key == "update-spec":
        assert (tmp_path / "catalog" / "arcane.openapi.json").read_bytes() == (ROOT / "catalog" / "arcane.openapi.json").read_bytes()


# ---------------------------------------------------------------- (b) tables intact

PIPE = re.compile(r"(?<!\\)\|")


def cells(line: str) -> int:
    """The cells of a pipe-table row as GFM splits it (an unescaped `|` separates cells,
    inside code spans too)."""
    text = line.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    return len(PIPE.split(text))


def page_id(p: Path) -> str:
    return str(p.relative_to(ROOT))


def table_problems(text: str) -> list[str]:
    tokens = md().parse(text)
    lines = text.splitlines()
    out = []
    for i, tok in enumerate(tokens):
        if tok.type == "table_open":
            first, last = tok.map
            width = cells(lines[first])
            for n in range(first, last):
                if n == first + 1:
                    continue  # the delimiter row
                if cells(lines[n]) != width:
                    out.append(f"line {n + 1}: {cells(lines[n])} cells, the header has {width}")
        elif tok.type == "paragraph_open" and tokens[i + 1].type == "inline":
            rows = tokens[i + 1].content.splitlines()
            if rows and all(r.lstrip().startswith("|") for r in rows):
                out.append(f"line {tok.map[0] + 1}: a paragraph of `|` lines (a table broken by a blank line, or a row without its header)")
    return out


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_table_is_intact(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert table_problems(text) == []
    # a second parser agrees on how many tables there are
    tables = sum(1 for t in md().parse(text) if t.type == "table_open")
    html = cmarkgfm.github_flavored_markdown_to_html(text)
    assert html.count("<table>") == tables


def test_the_table_checks_catch_a_broken_table() -> None:
    broken = "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n"
    assert any("paragraph of `|` lines" in p for p in table_problems(broken))
    assert any("3 cells" in p for p in table_problems("| a | b |\n|---|---|\n| 1 | 2 | 3 |\n"))
    assert table_problems("| a | b |\n|---|---|\n| `x \\| y` | 2 |\n") == []


# ---------------------------------------------------------------- (c) no citation of a missing file

REPO_TOP = ("docs", "rules", "catalog", "interpreter", "tests", "bench", "simulator")
REPO_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(REPO_TOP) + r")/[\w./<>{}*…-]*|[\w-]+\.(?:md|toml|json))")
# files of design notes that were never part of the repository
FOREIGN = re.compile(r"\bSPEC(?:\.md| §)|(?<![\w/])(?:spec|notes|shared)/[\w.-]+\.(?:txt|md)")


def cited_paths(text: str) -> list[str]:
    """Repository paths a page names: relative link targets, backticked paths and
    paths in the prose."""
    out = []
    for tok in md().parse(text):
        for child in tok.children or ():
            if child.type == "link_open":
                href = child.attrs.get("href", "")
                if href and not re.match(r"^[a-z][a-z+.-]*:|^#", href):
                    out.append("./" + href.split("#", 1)[0])
            elif child.type in ("code_inline", "text"):
                out += [m.group(1) for m in REPO_PATH.finditer(child.content) if "/" in m.group(1)]
    return out


# paths a page names on purpose that a checkout does not hold, each with why
NOT_IN_A_CHECKOUT = {
    "bench/results.json": "written by `make bench`, not in git",
    "interpreter/_data": "where the wheel puts catalog/ and rules/ (docs/packaging.md)",
}


def missing(page: Path, cited: str) -> bool:
    """Whether a cited path names nothing in the repository (a pattern like
    `rules/overlays/<domain>.yaml` needs its fixed folder)."""
    if cited.startswith("./"):
        target = page.parent / cited[2:]
        return not target.exists()
    path = cited.rstrip(".,;:)")
    fixed = re.split(r"[<>{}*…]", path, maxsplit=1)[0]
    if fixed != path:
        fixed = fixed.rsplit("/", 1)[0]
    if any(fixed == k or fixed.startswith(k + "/") for k in NOT_IN_A_CHECKOUT):
        return False
    return not (ROOT / fixed).exists()


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_no_page_cites_a_file_the_repository_does_not_hold(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert [m.group(0) for m in FOREIGN.finditer(text)] == []
    assert [c for c in cited_paths(text) if missing(page, c)] == []


SOURCES = sorted([*(ROOT / "interpreter").rglob("*.py"), *(ROOT / "catalog").glob("*.yaml"), *(ROOT / "rules").rglob("*.yaml"),
                  ROOT / "Makefile", ROOT / "Dockerfile", ROOT / "pyproject.toml"])


def test_no_source_file_cites_design_notes_the_repository_does_not_hold() -> None:
    cited = {page_id(f): FOREIGN.findall(f.read_text(encoding="utf-8")) for f in SOURCES}
    assert len(cited) > 60
    assert {f: found for f, found in cited.items() if found} == {}


def test_the_citation_check_sees_what_it_should() -> None:
    text = "See [x](docs/nope.md), `rules/nope.yaml` and docs/gone.md; `rules/overlays/<domain>.yaml` is a pattern."
    found = cited_paths(text)
    assert [c for c in found if missing(README, c)] == ["./docs/nope.md", "rules/nope.yaml", "docs/gone.md"]
    assert FOREIGN.findall("as SPEC.md §7 and spec/resources.es.txt say; SPEC §3") == ["SPEC.md", "spec/resources.es.txt", "SPEC §"]
    assert FOREIGN.findall("`format:SPEC`, a spec") == []


# ---------------------------------------------------------------- the module map


def _mapped(doc: str) -> list[str]:
    return re.findall(r"^    ([a-z_]+)\s{2,}\S", doc, flags=re.M)


def test_the_module_map_names_every_module() -> None:
    """The root map names every stage package and every shared module; each package's map
    names every module in its folder and nothing else."""
    doc = interpreter.__doc__
    mapped = _mapped(doc)
    modules = {m.name for m in pkgutil.iter_modules(interpreter.__path__) if not m.ispkg}
    packages = {m.name for m in pkgutil.iter_modules(interpreter.__path__) if m.ispkg} - {"_data"}
    assert len(mapped) == len(set(mapped)), "a name mapped twice"
    assert set(mapped) == modules | packages
    assert " will " not in doc  # a map says what is, not what is planned
    for name in sorted(packages):
        package = importlib.import_module(f"interpreter.{name}")
        inner = _mapped(package.__doc__ or "")
        files = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert len(inner) == len(set(inner)), f"{name}: a module mapped twice"
        assert set(inner) == files, f"interpreter/{name}/__init__.py maps {sorted(set(inner) ^ files)} wrongly"
        assert " will " not in package.__doc__
