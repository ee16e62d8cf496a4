"""Shared fixtures. Tests that need Arcane start the simulator themselves on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from interpreter.auditlog import AuditLog
from interpreter.catalog import BuildOptions, build
from interpreter.config import Settings
from interpreter.dispatch import Dispatcher
from interpreter.request import ArcaneClient


@pytest.fixture(scope="session")
def catalog():
    return build()


@pytest.fixture(scope="module")
def sim():
    """A simulated Arcane on 127.0.0.1 for one test module (its own state); any answer
    that breaks Arcane's contract fails the module."""
    from interpreter.simulator import start_simulator

    with start_simulator() as s:
        yield s
        assert s.violations == [], s.violations


@pytest.fixture
def anyio_backend():
    return "asyncio"


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/golden/*.md from the current output instead of comparing")


@pytest.fixture
def golden(request):
    """golden(name, text): compare with tests/golden/<name>.md, or rewrite it with --update-goldens."""
    update = request.config.getoption("--update-goldens")
    root = Path(__file__).parent / "golden"

    def check(name: str, text: str) -> None:
        path = root / f"{name}.md"
        if update:
            root.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"no golden file {path.name}; run pytest --update-goldens and review the diff"
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            import difflib

            diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), f"golden/{name}.md", "output"))
            raise AssertionError(f"output differs from golden/{name}.md (pytest --update-goldens rewrites it):\n{diff}")

    return check
