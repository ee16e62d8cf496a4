"""`interp compile`: compiled/catalog.json, the artefact a start reads, compiled from a
checkout's catalog/ and rules/ (interpreter/build/artefact.py, prebuilt.py); `--check` says
whether the committed one is what a compile gives now."""

from __future__ import annotations

import os
from pathlib import Path

from ..build import artefact, prebuilt
from ..build.catalog import BuildOptions, assemble
from ..errors import RuleError
from ..paths import COMPILED_FILE

TARGET = f"{COMPILED_FILE.parent.name}/{COMPILED_FILE.name}"


def compiled_bytes(root: Path) -> bytes:
    """The artefact of the checkout at `root`, built from its catalog/ and rules/ with every
    check (RuleError when they are invalid). Source positions are relative to the root."""
    root = Path(root).resolve()
    options = BuildOptions(catalog_dir=root / "catalog", rules_dir=root / "rules", cache_dir=None, compiled=False)
    before = os.getcwd()
    os.chdir(root)  # load.display names each file relative to the working directory
    try:
        _, catalog, found = assemble(options)
    finally:
        os.chdir(before)
    if found:
        raise RuleError(found)
    return artefact.dumps(catalog, prebuilt.header(options, prebuilt.source_inputs(options.catalog_dir, options.rules_dir)))


def check(root: Path) -> list[str]:
    """What differs between the checkout's artefact and a fresh compile (empty: up to date)."""
    try:
        current = (Path(root) / TARGET).read_bytes()
    except OSError:
        return [f"{TARGET} (missing)"]
    return [] if current == compiled_bytes(root) else [TARGET]


def write(root: Path) -> list[str]:
    """Write the checkout's artefact; the files changed."""
    path = Path(root) / TARGET
    data = compiled_bytes(root)
    try:
        if path.read_bytes() == data:
            return []
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return [TARGET]
