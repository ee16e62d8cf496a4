"""The repository is self-contained: every file a test reads is vendored under tests/data/
with its provenance, and nothing reads ../shared beside the checkout."""

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
    # ../shared is reference material of the team, never a test or run-time dependency
    pattern = re.compile(r"""\.\./shared|/\s*["']shared["']|parents?\[\d\]\s*/\s*["']shared""")
    files = [*ROOT.glob("interpreter/**/*.py"), *ROOT.glob("tests/**/*.py"), ROOT / "Makefile", ROOT / "pyproject.toml",
             *ROOT.glob(".ci/*")]
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in files if p != Path(__file__)
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert hits == []
