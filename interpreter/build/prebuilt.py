"""Which built catalog a start may take instead of building one: the shipped artefact, or the
operator layer's cache.

`catalog.build` asks `load` first and, after a build from the sources, `keep`s it:

- The packaged build (the packaged catalog/ and rules/, no operator layer, the environment
  default the artefact was compiled with) is the committed artefact, compiled/catalog.json
  (artefact.py; `interp compile` writes it, `interp compile --check` compares). In a
  checkout, the artefact is first checked against the sources (a hash of every file under
  catalog/ and rules/): when they changed since it was compiled, the catalog is built from
  the sources and stderr says once that `interp compile` refreshes it. An installed wheel
  carries the artefact and the sources it was compiled from, and is not checked again.
- Any other build (an operator's rules, ARCANE_MCP_RULES / --rules; another environment
  default; a stale checkout) is built from the sources once, with every check, and kept in
  the user's cache directory under a key hashing every input file, the engine, the artefact
  format, the options and the working directory (source positions are shown relative to
  it). A cache file is read with `artefact.loads(check=True)`: anything wrong with it (not
  JSON, truncated, another key, a wrong type anywhere) is a miss and a rebuild. A cache
  directory that cannot be made or written leaves the catalog in memory only, said once on
  stderr.

Where the cache is: ARCANE_MCP_CACHE_DIR (or --cache-dir), else $XDG_CACHE_HOME/arcane-mcp,
else ~/.cache/arcane-mcp; `off` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import CATALOG_DIR, RULES_DIR, __version__
from ..paths import COMPILED_FILE, IN_CHECKOUT, PACKAGE_DIR
from . import artefact

ENV = "ARCANE_MCP_CACHE_DIR"
OFF = "off"
SUFFIX = ".catalog.json"
KEEP = 8  # cache entries kept, the ones used last
STALE_TMP_S = 3600  # a temporary file older than this was left by a killed writer

_said: set[str] = set()


def say_once(text: str) -> None:
    """One line on stderr, once per process."""
    if text not in _said:
        _said.add(text)
        print(f"arcane-mcp: {text}", file=sys.stderr, flush=True)


def default_dir(env: Any = None) -> Path | None:
    """The cache directory the environment names (ARCANE_MCP_CACHE_DIR, XDG_CACHE_HOME,
    ~/.cache), or None when the cache is off."""
    env = os.environ if env is None else env
    raw = (env.get(ENV) or "").strip()
    if raw.lower() == OFF:
        return None
    if raw:
        return Path(raw).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or ""
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "arcane-mcp"


# ---------------------------------------------------------------- the artefact


def header(options: Any, inputs: str) -> dict:
    """What an artefact records besides the catalog."""
    return {"engine": __version__, "environment_default": options.environment_default, "inputs": inputs}


def source_inputs(catalog_dir: Path, rules_dir: Path) -> str:
    return artefact.inputs_hash(("catalog", catalog_dir), ("rules", rules_dir))


def _packaged(options: Any) -> bool:
    return (options.operator_rules is None and _same(options.rules_dir, RULES_DIR) and _same(options.catalog_dir, CATALOG_DIR))


def _same(a: Path, b: Path) -> bool:
    return a == b or Path(a).resolve() == Path(b).resolve()


def _from_artefact(options: Any, expected: type) -> Any:
    try:
        head, catalog = artefact.load_file(COMPILED_FILE)
    except artefact.ArtefactError as exc:
        say_once(f"the compiled catalog {COMPILED_FILE.name} cannot be used ({exc}); building from the sources "
                 "(`interp compile` writes it again)")
        return None
    if head.get("engine") != __version__ or head.get("environment_default") != options.environment_default:
        return None  # compiled for another engine or another environment default: the cache path
    if IN_CHECKOUT:
        try:
            fresh = head.get("inputs") == source_inputs(options.catalog_dir, options.rules_dir)
        except OSError:
            fresh = False
        if not fresh:
            say_once(f"the compiled catalog ({COMPILED_FILE.parent.name}/{COMPILED_FILE.name}) is stale: catalog/ or rules/ "
                     "changed since it was compiled; building from the sources (`interp compile` refreshes it)")
            return None
    return catalog if isinstance(catalog, expected) else None


# ---------------------------------------------------------------- the cache


def _engine() -> str:
    """The engine's version; in a checkout also a hash of its modules (they change without
    the version changing)."""
    if not IN_CHECKOUT:
        return __version__
    h = hashlib.sha256(__version__.encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def cache_key(options: Any) -> str | None:
    """The key of a build with these options; None when an input cannot be read (the build
    then reports it)."""
    try:
        inputs = artefact.inputs_hash(("catalog", options.catalog_dir), ("rules", options.rules_dir),
                                      ("operator", options.operator_rules))
        shape = [f"format={artefact.FORMAT}", _engine(), sys.version, options.environment_default, str(Path.cwd()),
                 str(Path(options.catalog_dir).resolve()), str(Path(options.rules_dir).resolve()),
                 str(Path(options.operator_rules).resolve()) if options.operator_rules is not None else "", inputs]
    except OSError:
        return None
    return hashlib.sha256("\0".join(shape).encode()).hexdigest()


def _owned(path: Path) -> bool:
    """True when `path` is this user's and nobody else may write it (POSIX; elsewhere the
    platform's own permissions decide). A cache entry is read back into the rules a server
    enforces (redaction, confirmations), so a directory another user can write is not one
    to read from: the build then happens in memory."""
    if not hasattr(os, "getuid"):
        return True
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _trusted(directory: Path) -> bool:
    if directory.exists() and not _owned(directory):
        say_once(f"the catalog cache directory {directory} belongs to another user or others may write it; "
                 "it is not used (the rules are compiled in memory at every start)")
        return False
    return True


def _from_cache(directory: Path, key: str, expected: type) -> Any:
    path = directory / f"{key}{SUFFIX}"
    if not _trusted(directory) or (path.exists() and not _owned(path)):
        return None
    try:
        head, catalog = artefact.load_file(path, check=True)
    except artefact.ArtefactError:
        return None  # absent, unreadable, foreign or damaged: a miss, the build is the answer
    if head.get("key") != key or not isinstance(catalog, expected):
        return None
    try:
        os.utime(path)  # pruning keeps the entries used last
    except OSError:
        pass
    return catalog


def _write(directory: Path, key: str, catalog: Any, options: Any) -> None:
    if not _trusted(directory):
        return
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = artefact.dumps(catalog, {**header(options, ""), "key": key})
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, directory / f"{key}{SUFFIX}")
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as exc:
        say_once(f"the catalog cache directory {directory} cannot be written ({exc.strerror or type(exc).__name__}); "
                 "the rules are compiled in memory at every start")
        return
    except artefact.ArtefactError as exc:  # an engine bug: the catalog holds a value the format cannot carry
        say_once(f"the built catalog cannot be cached ({exc})")
        return
    _prune(directory)


def _prune(directory: Path) -> None:
    now = time.time()
    entries = []
    try:
        for p in directory.iterdir():
            try:
                st = p.stat()
            except OSError:
                continue
            if p.name.startswith(".tmp-") and now - st.st_mtime > STALE_TMP_S:
                p.unlink(missing_ok=True)
            elif p.name.endswith(SUFFIX):
                entries.append((st.st_mtime, p))
        for _, p in sorted(entries, reverse=True)[KEEP:]:
            p.unlink(missing_ok=True)
    except OSError:
        pass


# ---------------------------------------------------------------- what catalog.build calls


def load(options: Any, expected: type) -> Any:
    """The unfiltered catalog (an `expected`) these options build, when one is already built
    (the artefact, or the cache); None: build it (and `keep` it). catalog.py calls this
    module, so the catalog's types are given, not imported."""
    if not options.compiled:
        return None
    if _packaged(options):
        catalog = _from_artefact(options, expected)
        if catalog is not None:
            return catalog
    if options.cache_dir is None:
        return None
    key = cache_key(options)
    return _from_cache(Path(options.cache_dir), key, expected) if key else None


def keep(options: Any, catalog: Any) -> None:
    """Cache a valid build from the sources (never the packaged one while its artefact is fresh)."""
    if not options.compiled or options.cache_dir is None:
        return
    key = cache_key(options)
    if key:
        _write(Path(options.cache_dir), key, catalog, options)
