"""Warm start: the assembled catalog kept on disk, keyed by a hash of everything it is built from.

Building the catalog parses some sixty round-trip YAML files (load.py), checks each against
its schema, compiles and cross-checks them: seconds, paid by every `interp` command and
every server start. `catalog.build` asks `load` first; on a miss it builds and `save`s.

The key is a SHA-256 over: this format, the engine (its version and the text of every
module of this package), the Python and library versions whose objects the file holds,
the build options that shape the catalog (the environment default, the directories read,
the working directory that their displayed names are relative to), and the path and bytes
of every file under catalog/, the rules directory and the operator's directory. A changed
file, another operator layer or another engine is another key: a stale entry is never
found, only pruned (the newest KEEP stay).

Trust. The file is a pickle, and unpickling an attacker's file runs their code, so a file
is only read when: its directory is owned by this user with no access for anyone else
(0700; created so, never repaired: a looser one is not used); it is a regular file, opened
without following a symlink; and it carries an HMAC-SHA256 over the key and the payload,
keyed by a per-user secret (`key`, 32 random bytes, 0600, in the same directory). The
unpickler then resolves only this package's classes, jmespath's parse results and
compiled regular expressions. Anything else — missing, unreadable, foreign, truncated,
tampered with, from another engine — is a miss: one debug log line, then a normal build.
Writes go to a private temporary file renamed over the entry, so a reader sees a whole
file or none.

Speed. A warm start is what `interp serve` pays before it answers, so the file is laid out
for loading: each regular expression is stored as its compiled program (re's own parser and
code generator, checked at save to rebuild the very same pattern) and rebuilt by _sre
without parsing the source again; and the `origins` of every model (where each choice was
written: half the file, read only by `interp explain` and the build) go in a second section
that is unpickled on the first read of any of them. The HMAC covers both sections and is
checked before anything is unpickled.

Where: ARCANE_MCP_CACHE_DIR (or --cache-dir), else $XDG_CACHE_HOME/arcane-mcp, else
~/.cache/arcane-mcp; `off` turns the cache off.
"""

from __future__ import annotations

import copyreg
import dataclasses
import gc
import hashlib
import hmac
import io
import logging
import os
import pickle
import re
import secrets
import stat
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import __version__
from ..errors import Refused
from ..paths import PACKAGE_DIR
from .model import frozen_map

# catalog.py calls this module, so the catalog's types are not imported here: `key` reads
# a BuildOptions, `load` is given the class to expect and `save` stores what it is given
BuildOptions = Any
Catalog = Any

log = logging.getLogger("arcane_mcp.warm")

ENV = "ARCANE_MCP_CACHE_DIR"
OFF = "off"
FORMAT = b"arcane-mcp catalog cache v2\n"
SUFFIX = ".catalog"
SECRET = "key"
SECRET_BYTES = 32
TOUCH_AFTER_S = 3600  # an entry used is marked so (for pruning) at most this often
STALE_TMP_S = 3600  # a temporary file older than this lost its writer
KEEP = 8  # entries kept (one per set of inputs: packaged rules, an operator's layer, a test's copy...)
LIBRARIES = ("ruamel.yaml", "jsonschema", "jmespath")  # their versions shape what load and compile produce
# what a cache file may name besides this package's own classes
ALLOWED_GLOBALS = {("re", "_compile"), ("jmespath.parser", "ParsedResult")}

ORIGINS = "origins"  # the models' field that goes in the second section
_MAIN_LEN = struct.Struct(">Q")  # the payload: the main section's length, the main section, the origins section


def default_dir(env: Any = None) -> Path | None:
    """The cache directory the environment names (ARCANE_MCP_CACHE_DIR, XDG_CACHE_HOME,
    ~/.cache), or None when the cache is off or this platform has no owner to check."""
    env = os.environ if env is None else env
    raw = (env.get(ENV) or "").strip()
    if raw.lower() == OFF or not hasattr(os, "getuid"):
        return None
    if raw:
        return Path(raw).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or ""
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "arcane-mcp"


def _files(root: str, pattern: str) -> list[tuple[tuple[str, ...], str]]:
    """(relative path parts, path) of every file under `root` whose name matches `pattern`,
    in the order of their parts, outside __pycache__ and symlinked directories (as
    Path.rglob walks them; os.scandir knows each entry's type without a stat)."""
    found = []
    stack: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    while stack:
        directory, rel = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append((entry.path, (*rel, entry.name)))
                elif fnmatchcase(entry.name, pattern) and entry.is_file():
                    found.append(((*rel, entry.name), entry.path))
    found.sort()
    return found


def _hash_files(h: Any, label: str, directory: Path | None, pattern: str = "*") -> None:
    h.update(f"\0dir\0{label}\0".encode())
    if directory is None:
        return
    root = os.fspath(directory)
    if not os.path.isdir(root):
        h.update(b"\0absent")
        return
    for parts, path in _files(root, pattern):
        with open(path, "rb") as f:
            data = f.read()
        h.update(f"\0{'/'.join(parts)}\0{len(data)}\0".encode())
        h.update(data)


def key(options: BuildOptions) -> str | None:
    """The cache key of a build with these options; None when an input cannot be read (the
    build then reports it)."""
    h = hashlib.sha256(FORMAT)
    versions = [__version__, sys.version, sys.platform]
    for lib in LIBRARIES:
        try:
            dist = metadata.distribution(lib)
        except metadata.PackageNotFoundError:
            versions.append(f"{lib}=?")
            continue
        # its whole METADATA text (the Version line and more): parsing it as email headers,
        # as metadata.version does, costs more than hashing it
        versions.append(f"{lib}={dist.read_text('METADATA') or dist.version}")
    op = options.operator_rules
    shape = [options.environment_default, str(Path(options.catalog_dir).resolve()), str(Path(options.rules_dir).resolve()),
             str(Path(op).resolve()) if op is not None else "", str(Path.cwd().resolve())]
    h.update("\0".join(versions + shape).encode())
    try:
        _hash_files(h, "engine", PACKAGE_DIR, "*.py")
        _hash_files(h, "catalog", options.catalog_dir)
        _hash_files(h, "rules", options.rules_dir)
        _hash_files(h, "operator", op)
    except OSError as exc:
        log.debug("catalog cache not used: an input cannot be read (%s)", exc)
        return None
    return h.hexdigest()


def _private_dir(directory: Path, create: bool) -> Path:
    """The directory, when this user owns it and nobody else can enter it (created 0700)."""
    if create:
        try:
            directory.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"{directory} is not a directory")
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise Refused(f"{directory} must be owned by this user with mode 0700 (it is {stat.filemode(st.st_mode)})")
    return directory


def _read_private(path: Path) -> tuple[bytes, float]:
    """A regular file of this user's that only they can read, opened without following a
    symlink: (its bytes, its mtime)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise Refused(f"{path.name} is not a private regular file of this user")
        return f.read(), st.st_mtime


def _write_private(directory: Path, data: bytes) -> str:
    """A new 0600 temporary file in `directory` holding `data` (mkstemp creates it 0600)."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _secret(directory: Path, create: bool) -> bytes:
    path = directory / SECRET
    try:
        data, _ = _read_private(path)
    except FileNotFoundError:
        if not create:
            raise
        tmp = _write_private(directory, secrets.token_bytes(SECRET_BYTES))
        try:
            os.link(tmp, path)  # atomic, and never replaces a secret another process made first
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        data, _ = _read_private(path)
    if len(data) != SECRET_BYTES:
        raise Refused(f"{SECRET} is not {SECRET_BYTES} bytes")
    return data


def _mac(secret: bytes, cache_key: str, payload: bytes) -> bytes:
    return hmac.new(secret, FORMAT + cache_key.encode() + b"\0" + payload, hashlib.sha256).digest()


# ---------------------------------------------------------------- the two sections


def _pattern(pattern: str | bytes, flags: int, code: list[int], groups: int, groupindex: dict, indexgroup: tuple) -> re.Pattern:
    """A compiled regular expression rebuilt from its program (what re.compile hands _sre
    after parsing): _sre checks the program before it makes the pattern."""
    import _sre

    return _sre.compile(pattern, flags, code, groups, groupindex, indexgroup)


def _reduce_pattern(p: re.Pattern) -> tuple:
    """Store a pattern as its program when re's internals give back exactly this pattern
    (Pattern equality compares the program), else as its source (re._compile, the
    default: recompiled at load)."""
    try:
        from re import _compiler, _parser

        parsed = _parser.parse(p.pattern, p.flags)
        code = [int(op) for op in _compiler._code(parsed, p.flags)]  # its opcodes are named int constants
        state = parsed.state
        indexgroup = [None] * state.groups
        for name, i in state.groupdict.items():
            indexgroup[i] = name
        args = (p.pattern, p.flags | state.flags, code, state.groups - 1, dict(state.groupdict), tuple(indexgroup))
        if _pattern(*args) == p:
            return _pattern, args
    except Exception:  # another Python's internals: the source is always right
        pass
    return re._compile, (p.pattern, p.flags)


class _Pickler(pickle.Pickler):
    """Writes the main section; every non-empty `origins` mapping found by `_origins_of`
    becomes a reference into the origins section."""

    dispatch_table = copyreg.dispatch_table.copy()
    # MappingProxyType cannot be pickled; every frozen mapping of the models is a frozen_map
    dispatch_table[MappingProxyType] = lambda m: (frozen_map, (dict(m),))
    dispatch_table[re.Pattern] = _reduce_pattern

    def __init__(self, file: Any, origins: dict[int, int]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._origins = origins

    def persistent_id(self, obj: Any) -> int | None:
        return self._origins.get(id(obj))


def _origins_of(root: Any) -> list[Mapping]:
    """Every distinct non-empty `origins` mapping of the models reachable from `root`."""
    found: dict[int, Mapping] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, (str, bytes, int, float, bool, type(None), re.Pattern)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                value = getattr(obj, f.name, None)
                if f.name == ORIGINS and isinstance(value, Mapping):
                    if value:
                        found.setdefault(id(value), value)
                else:
                    stack.append(value)
        elif isinstance(obj, Mapping):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
    return list(found.values())


def _dumps(catalog: Catalog) -> bytes:
    """The payload of an entry: the main section's length, the main section, the origins section."""
    table = _origins_of(catalog)
    main = io.BytesIO()
    _Pickler(main, {id(m): i for i, m in enumerate(table)}).dump(catalog)
    side = io.BytesIO()
    _Pickler(side, {}).dump(table)
    return _payload(main.getvalue(), side.getvalue())


def _payload(main: bytes, side: bytes) -> bytes:
    """The sections as one payload (the HMAC covers it whole)."""
    return _MAIN_LEN.pack(len(main)) + main + side


def _sections(payload: bytes) -> tuple[memoryview, bytes]:
    """(main section, origins section) of a payload whose HMAC matched."""
    if len(payload) < _MAIN_LEN.size:
        raise Refused("it has no sections")
    (main_len,) = _MAIN_LEN.unpack_from(payload)
    main_end = _MAIN_LEN.size + main_len
    if main_end > len(payload):
        raise Refused("its main section is cut short")
    return memoryview(payload)[_MAIN_LEN.size:main_end], payload[main_end:]


class _Unpickler(pickle.Unpickler):
    """Resolves only this package's names and ALLOWED_GLOBALS; a reference into the origins
    section becomes a _LazyOrigins of `section`."""

    def __init__(self, file: Any, section: _OriginsSection | None = None):
        super().__init__(file)
        self._section = section

    def find_class(self, module: str, name: str) -> Any:
        if module.split(".", 1)[0] == __package__.split(".", 1)[0] or (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise Refused(f"the file names {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if self._section is None or type(pid) is not int or pid < 0:
            raise Refused("the file refers to an origins section it does not have")
        return _LazyOrigins(self._section, pid)


class _OriginsSection:
    """The origins section of one loaded (HMAC-checked) entry, unpickled on first use.

    It was checked with the rest of the file, so it fails only if this engine wrote it
    wrong: then every origins mapping reads empty, one warning says so and the entry is
    removed (the next start rebuilds it)."""

    def __init__(self, path: Path, data: bytes):
        self._path = path
        self._data: bytes | None = data
        self._table: list[Mapping] | None = None
        self._lock = threading.Lock()

    def get(self, index: int) -> Mapping:
        if self._table is None:
            with self._lock:
                if self._table is None:
                    self._table = self._load()
        return self._table[index] if index < len(self._table) else EMPTY_ORIGINS

    def _load(self) -> list[Mapping]:
        data, self._data = self._data, None
        try:
            table = _Unpickler(io.BytesIO(data)).load()
            if not isinstance(table, list) or not all(isinstance(m, Mapping) for m in table):
                raise Refused("its origins section is not a list of mappings")
            return table
        except Exception as exc:  # whatever it is: no origins now, a rebuild next start
            log.warning("the catalog cache's origins could not be read (%s: %s); %s is removed and will be rebuilt",
                        type(exc).__name__, exc, self._path.name)
            try:
                self._path.unlink()
            except OSError:
                pass
            return []


EMPTY_ORIGINS: Mapping = MappingProxyType({})


class _LazyOrigins(Mapping):
    """One model's `origins`, read from the entry's origins section on first use."""

    __slots__ = ("_section", "_index")

    def __init__(self, section: _OriginsSection, index: int):
        self._section = section
        self._index = index

    def _mapping(self) -> Mapping:
        return self._section.get(self._index)

    def __getitem__(self, key: str) -> Any:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def __repr__(self) -> str:
        return repr(dict(self._mapping()))

    def __reduce__(self) -> tuple:
        return frozen_map, (dict(self._mapping()),)


def load(directory: Path, cache_key: str, expected: type) -> Catalog | None:
    """The cached, unfiltered catalog for `cache_key`, or None (a miss: one debug line)."""
    path = directory / f"{cache_key}{SUFFIX}"
    try:
        _private_dir(directory, create=False)
        secret = _secret(directory, create=False)
        blob, mtime = _read_private(path)
        mac_len = hashlib.sha256().digest_size
        if not blob.startswith(FORMAT) or len(blob) < len(FORMAT) + mac_len:
            raise Refused("not a cache file of this format")
        mac, payload = blob[len(FORMAT):len(FORMAT) + mac_len], blob[len(FORMAT) + mac_len:]
        if not hmac.compare_digest(mac, _mac(secret, cache_key, payload)):
            raise Refused("its HMAC does not match")
        main, side = _sections(payload)
        section = _OriginsSection(path, side)
        # the collector would walk the growing object graph again and again while it loads
        collecting = gc.isenabled()
        gc.disable()
        try:
            catalog = _Unpickler(io.BytesIO(main), section).load()
        finally:
            if collecting:
                gc.enable()
        if not isinstance(catalog, expected):
            raise Refused("it holds no catalog")
    except FileNotFoundError:
        log.debug("catalog cache miss: no entry %s in %s", path.name, directory)
        return None
    except Exception as exc:  # whatever is wrong with a cache file, the build is the answer
        log.debug("catalog cache not used (%s: %s); building", type(exc).__name__, exc)
        return None
    if time.time() - mtime > TOUCH_AFTER_S:
        try:
            os.utime(path)  # pruning keeps the entries used last
        except OSError:
            pass
    return catalog


def save(directory: Path, cache_key: str, catalog: Catalog) -> None:
    """Store the unfiltered catalog under `cache_key` (atomically); a failure is one debug line."""
    try:
        _private_dir(directory, create=True)
        secret = _secret(directory, create=True)
        payload = _dumps(catalog)
        tmp = _write_private(directory, FORMAT + _mac(secret, cache_key, payload) + payload)
        os.replace(tmp, directory / f"{cache_key}{SUFFIX}")
        _prune(directory)
    except Exception as exc:  # a cache that cannot be written costs the next start a build, nothing more
        log.debug("catalog cache not written (%s: %s)", type(exc).__name__, exc)


def _prune(directory: Path) -> None:
    """Keep the KEEP entries used last, and drop temporary files a killed writer left."""
    now = time.time()
    for p in directory.glob(".tmp-*"):
        try:
            if now - p.stat().st_mtime > STALE_TMP_S:
                p.unlink()
        except OSError:
            continue
    entries = []
    for p in directory.glob(f"*{SUFFIX}"):
        try:
            entries.append((p.stat().st_mtime, p))
        except OSError:
            continue
    for _, p in sorted(entries, reverse=True)[KEEP:]:
        try:
            p.unlink()
        except OSError:
            pass
