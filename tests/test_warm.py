"""Warm start (interpreter/build/warm.py): the built catalog is cached keyed by every input, a
changed input is a rebuild, and a cache file is only trusted when it is private, whole and
carries this user's HMAC; anything else is a miss that logs one debug line and builds."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import pickle
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build import warm
from interpreter.build.catalog import BuildOptions, Catalog, build
from interpreter.config import load_settings

LOGGER = "arcane_mcp.warm"


@pytest.fixture(scope="module")
def built() -> Catalog:
    """A catalog built without any cache: what a cached one must equal."""
    return build(BuildOptions(cache_dir=None))


@pytest.fixture(scope="module")
def primed(tmp_path_factory) -> Path:
    """A cache directory a first build (a miss) wrote."""
    directory = tmp_path_factory.mktemp("primed") / "cache"
    build(BuildOptions(cache_dir=directory))
    return directory


@pytest.fixture
def cache(tmp_path: Path, primed: Path) -> Path:
    """A private copy of the primed cache directory (modes kept)."""
    directory = tmp_path / "cache"
    shutil.copytree(primed, directory)
    return directory


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{warm.SUFFIX}"))


def _rules_copy(tmp_path: Path) -> Path:
    rules = tmp_path / "rules"
    shutil.copytree(RULES_DIR, rules)
    return rules


def _set_usage(rules: Path, text: str) -> None:
    path = rules / "overlays" / "container.yaml"
    old = "usage: Takes the ID or the name. Returns the whole configuration"
    body = path.read_text(encoding="utf-8")
    assert old in body
    path.write_text(body.replace(old, f"usage: {text}. Returns the whole configuration", 1), encoding="utf-8")


def test_a_build_is_cached_and_the_cached_catalog_is_the_built_one(cache, built):
    options = BuildOptions(cache_dir=cache)
    (entry,) = _entries(cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE((cache / warm.SECRET).stat().st_mode) == 0o600
    cached = warm.load(cache, warm.key(options), Catalog)
    assert isinstance(cached, Catalog)
    assert build(options) == built
    assert cached.all_actions == built.all_actions and cached.find == built.find and cached.redaction == built.redaction
    # origins are not compared by the dataclasses: they travel too
    assert cached.actions["container.get"].origins == built.actions["container.get"].origins
    assert not list(cache.glob(".tmp-*"))


def test_the_filters_apply_to_a_cached_catalog(cache):
    read_only = build(BuildOptions(cache_dir=cache, read_only=True, exclude=("image",)))
    assert read_only.actions and all(a.read_only and a.domain != "image" for a in read_only.actions.values())
    assert "container.restart" in read_only.withdrawn
    assert len(_entries(cache)) == 1  # the filters are not part of the key


def test_a_changed_rule_file_is_a_rebuild(tmp_path, cache):
    rules = _rules_copy(tmp_path)
    options = BuildOptions(rules_dir=rules, cache_dir=cache)
    before = len(_entries(cache))
    first = build(options)
    _set_usage(rules, "Changed once")
    changed = build(options)
    assert changed.actions["container.get"].usage.startswith("Changed once")
    assert first.actions["container.get"].usage != changed.actions["container.get"].usage
    assert len(_entries(cache)) == before + 2


def test_another_operator_layer_or_environment_default_is_another_key(tmp_path, cache):
    operator = tmp_path / "operator"
    (operator / "overlays").mkdir(parents=True)
    (operator / "overlays" / "container.yaml").write_text("actions:\n  get:\n    usage: Operator's words\n", encoding="utf-8")
    keys = {warm.key(BuildOptions(cache_dir=cache)), warm.key(BuildOptions(cache_dir=cache, operator_rules=operator)),
            warm.key(BuildOptions(cache_dir=cache, environment_default="7"))}
    assert len(keys) == 3
    layered = BuildOptions(cache_dir=cache, operator_rules=operator)
    assert build(layered).actions["container.get"].usage == "Operator's words"
    assert isinstance(warm.load(cache, warm.key(layered), Catalog), Catalog)
    (operator / "overlays" / "container.yaml").write_text("actions:\n  get:\n    usage: Other words\n", encoding="utf-8")
    assert warm.key(layered) not in keys and warm.load(cache, warm.key(layered), Catalog) is None  # a miss: build() builds


def test_another_engine_is_another_key(tmp_path, cache, monkeypatch):
    options = BuildOptions(cache_dir=cache)
    base = warm.key(options)
    monkeypatch.setattr(warm, "__version__", "99.0.0")
    assert warm.key(options) != base
    monkeypatch.undo()
    engine = tmp_path / "engine"
    shutil.copytree(warm.PACKAGE_DIR, engine, ignore=shutil.ignore_patterns("__pycache__", "_data"))
    monkeypatch.setattr(warm, "PACKAGE_DIR", engine)
    assert warm.key(options) == base  # the same text is the same engine
    with (engine / "render.py").open("a", encoding="utf-8") as f:
        f.write("\n# an edit\n")
    assert warm.key(options) != base


def test_a_library_release_is_an_input(cache, monkeypatch):
    options = BuildOptions(cache_dir=cache)
    base = warm.key(options)
    real = warm.metadata.distribution

    class Other:
        version = "0.0.1"

        def __init__(self, dist):
            self.dist = dist

        def read_text(self, name):
            return self.dist.read_text(name).replace(f"Version: {self.dist.version}", "Version: 0.0.1")

    monkeypatch.setattr(warm.metadata, "distribution", lambda lib: Other(real(lib)) if lib == "jsonschema" else real(lib))
    assert warm.key(options) != base


def test_the_files_hashed_are_the_ones_rglob_finds(tmp_path):
    """The key's file walk (os.scandir) finds what Path.rglob does, in the same order:
    hidden files, symlinked files, not __pycache__, not into symlinked directories."""
    root = tmp_path / "tree"
    for rel in ("a/b/x.py", ".hidden", "real/y.py", "a/__pycache__/z.py", "__pycache__/w.py", "a-c", "a/b.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel, encoding="utf-8")
    (root / "a" / "link").symlink_to(root / "real", target_is_directory=True)
    (root / "fl.py").symlink_to(root / "real" / "y.py")
    (root / "broken").symlink_to(root / "nowhere")
    for pattern in ("*", "*.py"):
        expected = sorted(p for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.relative_to(root).parts)
        assert [Path(path) for _, path in warm._files(str(root), pattern)] == expected


def test_a_catalog_file_is_an_input(tmp_path, cache):
    catalog_dir = tmp_path / "catalog"
    shutil.copytree(CATALOG_DIR, catalog_dir)
    options = BuildOptions(catalog_dir=catalog_dir, cache_dir=cache)
    base = warm.key(options)
    with (catalog_dir / "actions.yaml").open("a", encoding="utf-8") as f:
        f.write("\n# a comment changes the bytes\n")
    assert warm.key(options) != base


def _corrupt_cases(entry: Path) -> dict:
    blob = entry.read_bytes()
    head = len(warm.FORMAT) + hashlib.sha256().digest_size
    return {
        "truncated": blob[: len(blob) // 2],
        "empty": b"",
        "other format": b"something else entirely",
        "payload flipped": blob[:-10] + bytes([blob[-10] ^ 1]) + blob[-9:],
        "mac flipped": blob[: head - 1] + bytes([blob[head - 1] ^ 1]) + blob[head:],
    }


@pytest.mark.parametrize("case", ["truncated", "empty", "other format", "payload flipped", "mac flipped"])
def test_a_corrupt_entry_is_a_miss_with_one_debug_line(cache, caplog, case):
    options = BuildOptions(cache_dir=cache)
    (entry,) = _entries(cache)
    entry.write_bytes(_corrupt_cases(entry)[case])
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert warm.load(cache, warm.key(options), Catalog) is None
    lines = [r for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 1 and lines[0].levelno == logging.DEBUG


def test_a_corrupt_entry_is_rebuilt_and_rewritten(cache, built):
    options = BuildOptions(cache_dir=cache)
    (entry,) = _entries(cache)
    entry.write_bytes(entry.read_bytes()[:1000])
    assert build(options) == built
    assert isinstance(warm.load(cache, warm.key(options), Catalog), Catalog)  # rewritten whole


class _Planted:
    """A pickle that would run code when loaded: it must never be."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def _write_signed(cache: Path, cache_key: str, main: bytes, side: bytes) -> Path:
    """An entry laid out as save writes one, with a valid HMAC over these sections."""
    secret = (cache / warm.SECRET).read_bytes()
    payload = warm._payload(main, side)
    entry = cache / f"{cache_key}{warm.SUFFIX}"
    entry.write_bytes(warm.FORMAT + warm._mac(secret, cache_key, payload) + payload)
    return entry


def _signed_sections(cache: Path, cache_key: str) -> tuple[bytes, bytes]:
    blob = (cache / f"{cache_key}{warm.SUFFIX}").read_bytes()
    main, side = warm._sections(blob[len(warm.FORMAT) + hashlib.sha256().digest_size:])
    return bytes(main), side


def test_a_pickle_naming_foreign_code_is_refused_even_with_a_valid_hmac(tmp_path, cache, caplog):
    cache_key = warm.key(BuildOptions(cache_dir=cache))
    marker = tmp_path / "planted"
    _, side = _signed_sections(cache, cache_key)
    _write_signed(cache, cache_key, pickle.dumps(_Planted(marker)), side)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert warm.load(cache, cache_key, Catalog) is None
    assert not marker.exists()
    records = [r for r in caplog.records if r.name == LOGGER]
    assert [r.levelno for r in records] == [logging.DEBUG] and "posix.mkdir" in records[0].getMessage()


def test_foreign_code_in_the_origins_section_is_refused_when_first_read(tmp_path, cache, caplog, built):
    cache_key = warm.key(BuildOptions(cache_dir=cache))
    marker = tmp_path / "planted"
    main, _ = _signed_sections(cache, cache_key)
    entry = _write_signed(cache, cache_key, main, pickle.dumps([_Planted(marker)]))
    loaded = warm.load(cache, cache_key, Catalog)
    assert loaded == built  # the main section is whole: the serving catalog is there
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert dict(loaded.actions["container.get"].origins) == {}  # no origins rather than foreign code
    assert not marker.exists()
    assert [r.levelno for r in caplog.records if r.name == LOGGER] == [logging.WARNING]
    assert not entry.exists()  # the next start rebuilds it


def test_origins_are_read_on_first_use_only(cache, built):
    loaded = warm.load(cache, warm.key(BuildOptions(cache_dir=cache)), Catalog)
    section = loaded.actions["container.get"].origins._section
    assert section._table is None  # a server start never reads them
    assert loaded.actions["container.get"].origins == built.actions["container.get"].origins
    assert section._table is not None
    ours = {a: dict(x.origins) for a, x in loaded.all_actions.items()}
    assert ours == {a: dict(x.origins) for a, x in built.all_actions.items()}
    assert loaded.inventory.origins == built.inventory.origins and loaded.overlays["container"].origins == built.overlays["container"].origins


def _patterns(root) -> list[re.Pattern]:
    """Every compiled regular expression reachable from `root`, in a stable order."""
    found, seen, stack = [], set(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float)):
            continue
        seen.add(id(obj))
        if isinstance(obj, re.Pattern):
            found.append(obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            stack.extend(getattr(obj, f.name, None) for f in dataclasses.fields(obj) if f.name != "origins")
        elif isinstance(obj, Mapping):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
    return found


def test_regular_expressions_come_back_as_the_same_programs(cache, built, monkeypatch):
    cache_key = warm.key(BuildOptions(cache_dir=cache))
    compiled = []
    real = re._compile
    monkeypatch.setattr(re, "_compile", lambda *args: compiled.append(args) or real(*args))
    loaded = warm.load(cache, cache_key, Catalog)
    monkeypatch.undo()
    assert compiled == []  # none went through re's parser and compiler again
    ours, theirs = _patterns(loaded), _patterns(built)
    assert len(ours) == len(theirs) > 100
    # Pattern equality compares the pattern, the flags and the compiled program
    assert ours == theirs
    assert [(p.groups, p.groupindex) for p in ours] == [(q.groups, q.groupindex) for q in theirs]


def test_a_pattern_the_program_cannot_rebuild_is_stored_as_its_source(monkeypatch):
    pattern = re.compile(r"(?P<word>[a-z]+)-\d+", re.IGNORECASE)
    assert warm._reduce_pattern(pattern)[0] is warm._pattern
    monkeypatch.setattr(warm, "_pattern", lambda *args: re.compile("something else"))
    assert warm._reduce_pattern(pattern) == (re._compile, (pattern.pattern, pattern.flags))


def test_a_cut_short_main_section_is_a_miss(cache, caplog):
    cache_key = warm.key(BuildOptions(cache_dir=cache))
    main, side = _signed_sections(cache, cache_key)
    entry = cache / f"{cache_key}{warm.SUFFIX}"
    secret = (cache / warm.SECRET).read_bytes()
    payload = warm._payload(main, side)
    payload = payload[:4] + b"\xff" * 4 + payload[8:]  # a length past the end
    entry.write_bytes(warm.FORMAT + warm._mac(secret, cache_key, payload) + payload)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert warm.load(cache, cache_key, Catalog) is None
    assert [r.levelno for r in caplog.records if r.name == LOGGER] == [logging.DEBUG]


def test_an_entry_under_another_key_is_refused(cache):
    (entry,) = _entries(cache)
    other = "0" * 64
    shutil.copy(entry, cache / f"{other}{warm.SUFFIX}")
    os.chmod(cache / f"{other}{warm.SUFFIX}", 0o600)
    assert warm.load(cache, other, Catalog) is None  # the HMAC covers the key


@pytest.mark.parametrize("target", ["dir", "secret", "entry"])
def test_a_cache_others_can_touch_is_not_used(cache, built, target):
    options = BuildOptions(cache_dir=cache)
    (entry,) = _entries(cache)
    path = {"dir": cache, "secret": cache / warm.SECRET, "entry": entry}[target]
    os.chmod(path, stat.S_IMODE(path.stat().st_mode) | 0o022)
    assert warm.load(cache, warm.key(options), Catalog) is None
    before = entry.read_bytes()
    warm.save(cache, warm.key(options), replace(built, document_name="another"))
    # a loose directory or secret is not written to either; a loose entry is replaced
    assert (entry.read_bytes() == before) == (target != "entry")


def test_a_symlinked_entry_is_not_followed(tmp_path, cache):
    options = BuildOptions(cache_dir=cache)
    (entry,) = _entries(cache)
    elsewhere = tmp_path / "elsewhere"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)
    assert warm.load(cache, warm.key(options), Catalog) is None


def test_an_existing_loose_directory_is_not_used_nor_repaired(tmp_path, built):
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o777)
    warm.save(loose, "a" * 64, built)
    assert list(loose.iterdir()) == []
    assert stat.S_IMODE(loose.stat().st_mode) == 0o777


def test_old_entries_are_pruned(cache, built, monkeypatch):
    monkeypatch.setattr(warm, "KEEP", 2)
    options = BuildOptions(cache_dir=cache)
    catalog = built
    for i in range(4):
        warm.save(cache, f"{i:064x}", catalog)
        os.utime(cache / f"{i:064x}{warm.SUFFIX}", (1_000_000 + i, 1_000_000 + i))
    stale = cache / ".tmp-left-by-a-killed-writer"
    stale.write_bytes(b"x")
    os.utime(stale, (1_000_000, 1_000_000))
    warm.save(cache, warm.key(options), catalog)
    assert [p.name for p in _entries(cache)] == sorted([f"{3:064x}{warm.SUFFIX}", f"{warm.key(options)}{warm.SUFFIX}"])
    assert not stale.exists()


def test_the_directory_setting(tmp_path):
    assert warm.default_dir({"ARCANE_MCP_CACHE_DIR": "off"}) is None
    assert warm.default_dir({"ARCANE_MCP_CACHE_DIR": " OFF "}) is None
    assert warm.default_dir({"ARCANE_MCP_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert warm.default_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "arcane-mcp"
    assert warm.default_dir({"XDG_CACHE_HOME": "relative"}) == Path.home() / ".cache" / "arcane-mcp"
    assert load_settings({"ARCANE_MCP_CACHE_DIR": "off"}).cache_dir == "off"
    assert load_settings({"ARCANE_MCP_CACHE_DIR": str(tmp_path)}).cache_dir == tmp_path
    assert load_settings({}).cache_dir is None


def test_the_server_honours_the_setting(tmp_path, cache, monkeypatch):
    from interpreter.config import Settings
    from interpreter.front import serve

    asked = []

    def spy(options):
        asked.append(options.cache_dir)
        return build(replace(options, cache_dir=cache))  # served from the primed copy

    monkeypatch.setattr(serve, "build", spy)
    monkeypatch.setenv(warm.ENV, str(tmp_path / "from-env"))
    for value in (tmp_path / "flag", None, "off"):
        serve.build_runtime(Settings(audit_log="off", cache_dir=value))
    assert asked == [tmp_path / "flag", tmp_path / "from-env", None]


def test_runtime_memo_tables_are_not_cached(cache, built):
    catalog = built
    catalog.redaction.is_secret_name("password")
    assert catalog.redaction.caches.secret_names
    warm.save(cache, "f" * 64, replace(catalog))
    loaded = warm.load(cache, "f" * 64, Catalog)
    assert loaded.redaction.caches.secret_names == {} and loaded.redaction == catalog.redaction
