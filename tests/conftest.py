"""Shared fixtures. Tests that need Arcane start the simulator themselves on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis profiles: a short run by default (every `make test`), the full one under CI
# (CI set to true, 1 or yes, as CI services set it) or with `--hypothesis-profile=ci`. A
# test names no count unless its examples are costly: then `tests.helpers.examples(n)`
# caps the profile's count at n (n is the test's full count).
FULL_EXAMPLES, SHORT_EXAMPLES = 1000, 100
settings.register_profile("ci", max_examples=FULL_EXAMPLES, deadline=None)
settings.register_profile("dev", max_examples=SHORT_EXAMPLES, deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes") else "dev")

# One catalog cache (interpreter/build/prebuilt.py: the builds the compiled artefact does not
# cover, such as a test's own rules directory) for the whole run, shared by every subprocess
# of `interp` the tests start (they inherit the environment): the first build of a set of
# rules pays, the rest load it. Never the user's own cache; removed when the run ends.
TEST_CACHE_DIR = tempfile.mkdtemp(prefix="arcane-mcp-test-cache-")
os.environ["ARCANE_MCP_CACHE_DIR"] = TEST_CACHE_DIR

from interpreter.build.catalog import build  # noqa: E402


def pytest_unconfigure(config):
    shutil.rmtree(TEST_CACHE_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def catalog():
    return build()


@pytest.fixture(scope="module")
def sim():
    """A simulated Arcane on 127.0.0.1 for one test module (its own state); any answer
    that breaks Arcane's contract fails the module."""
    from simulator import start_simulator

    with start_simulator() as s:
        yield s
        assert s.violations == [], s.violations


@pytest.fixture
def anyio_backend():
    return "asyncio"


DIFF_LINES_SHOWN = 300  # of a golden file's diff; the rest is counted


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/golden/* (Markdown and JSON) from the current output instead of comparing")


@pytest.fixture
def golden(request):
    """golden(name, text, ext="md"): compare with tests/golden/<name>.<ext>, or rewrite it
    with --update-goldens. A difference fails with a unified diff of the lines."""
    update = request.config.getoption("--update-goldens")
    root = Path(__file__).parent / "golden"

    def check(name: str, text: str, ext: str = "md") -> None:
        path = root / f"{name}.{ext}"
        if update:
            root.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"no golden file {path.name}; run pytest --update-goldens and review the diff"
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            import difflib

            lines = list(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), f"golden/{path.name}", "output"))
            cut = len(lines) - DIFF_LINES_SHOWN
            diff = "".join(lines[:DIFF_LINES_SHOWN]) + (f"… {cut} more diff line(s)\n" if cut > 0 else "")
            raise AssertionError(f"output differs from golden/{path.name} (pytest --update-goldens rewrites it):\n{diff}")

    return check
