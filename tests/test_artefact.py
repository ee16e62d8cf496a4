"""The compiled artefact (compiled/catalog.json, interpreter/build/artefact.py) and the
operator layer's cache (interpreter/build/prebuilt.py): a start reads one JSON file, with no
YAML parser and no schema validation, and gets the very catalog a build from the sources
gives; anything wrong with a file is a rebuild or a one-line error."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interpreter.build import artefact, prebuilt
from interpreter.build import catalog as catalog_module
from interpreter.build.catalog import BuildOptions, build
from interpreter.commands import compiled
from interpreter.front.surfaces import make_surface
from tests.helpers import make_dispatcher, ok_json

ROOT = Path(__file__).resolve().parent.parent
INTERP = str(Path(sys.executable).parent / "interp")
OPERATOR_OVERLAY = "actions:\n  list:\n    usage: An operator's note.\n"
SOURCES = ("pyproject.toml", "catalog", "rules", "compiled")


def _run(args: list[str], cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=240, cwd=cwd,
                          env={**os.environ, "ARCANE_MCP_AUDIT_LOG": "off", **env})


@pytest.fixture(scope="module")
def both() -> tuple:
    """(the catalog from the artefact, the catalog built from the sources)."""
    return build(BuildOptions(cache_dir=None)), build(BuildOptions(cache_dir=None, compiled=False))


def _operator_dir(where: Path) -> Path:
    directory = where / "operator"
    (directory / "overlays").mkdir(parents=True)
    (directory / "overlays" / "container.yaml").write_text(OPERATOR_OVERLAY, encoding="utf-8")
    return directory


@pytest.fixture
def operator_dir(tmp_path: Path) -> Path:
    return _operator_dir(tmp_path)


@pytest.fixture(scope="module")
def layered(tmp_path_factory) -> tuple:
    """One operator layer compiled into a cache, for the tests that damage or guard an
    entry: (its operator directory, the catalog, the entry's file name, the entry's bytes).
    Nothing changes the directory; each test writes the entry into a cache of its own."""
    operator = _operator_dir(tmp_path_factory.mktemp("layer"))
    cache = tmp_path_factory.mktemp("layer-cache") / "cache"
    first = build(BuildOptions(operator_rules=operator, cache_dir=cache))
    (entry,) = _entries(cache)
    return operator, first, entry.name, entry.read_bytes()


def _seeded(layered: tuple, cache: Path) -> tuple:
    """A cache directory holding the layer's entry as a build writes it (the directory 0700,
    the entry 0600); the options that look it up, the catalog, the entry's path and bytes."""
    operator, first, name, data = layered
    options = BuildOptions(operator_rules=operator, cache_dir=cache)
    assert prebuilt.cache_key(options) + prebuilt.SUFFIX == name  # the very entry these options look up
    cache.mkdir(mode=0o700)
    entry = cache / name
    entry.write_bytes(data)
    entry.chmod(0o600)
    return options, first, entry, data


@pytest.fixture(autouse=True)
def _fresh_notices():
    prebuilt._said.clear()
    yield
    prebuilt._said.clear()


# ---------------------------------------------------------------- the packaged artefact


def test_the_committed_artefact_is_up_to_date() -> None:
    p = _run([INTERP, "compile", "--check"])
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_start_imports_no_yaml_parser_and_no_schema_validator() -> None:
    # a serve start (stdin closed: it builds, starts and ends) and a bare build in a fresh process
    p = _run([INTERP, "serve", "--arcane-url", "http://127.0.0.1:9"], PYTHONPROFILEIMPORTTIME="1")
    imported = {line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert p.returncode == 0 and len(imported) > 100
    assert not {m for m in imported if m.split(".")[0] in ("ruamel", "jsonschema")}
    assert [line for line in p.stderr.splitlines() if not line.startswith("import time:")] == []  # not stale: no notice
    code = ("import sys; from interpreter.build.catalog import build; c = build(); "
            "print(len(c.actions), sorted(m for m in sys.modules if m.split('.')[0] in ('ruamel', 'jsonschema')))")
    p = _run([sys.executable, "-c", code])
    assert p.returncode == 0 and p.stdout.split(" ", 1)[1].strip() == "[]", p.stdout + p.stderr


def test_the_artefact_catalog_is_the_built_one(both) -> None:
    loaded, built = both
    assert loaded == built
    assert list(loaded.all_actions) == list(built.all_actions) and loaded.document == built.document
    for aid, action in built.all_actions.items():
        other = loaded.all_actions[aid]
        for f in dataclasses.fields(action):
            mine, theirs = getattr(other, f.name), getattr(action, f.name)
            assert (dict(mine) if f.name == "origins" else mine) == (dict(theirs) if f.name == "origins" else theirs), (aid, f.name)
    # source positions survive (what explain prints): the same file:line, relative to the checkout
    assert dict(loaded.rendering.origins) == dict(built.rendering.origins) and loaded.rendering.origins
    assert dict(loaded.domains["container"].origins) == dict(built.domains["container"].origins)
    # the same object where the built catalog shares one
    assert loaded.actions["container.list"] is loaded.all_actions["container.list"]
    assert loaded.all_actions["container.list"].columns == loaded.overlays["container"].actions["list"].columns


def test_every_surface_lists_the_same_tools(both) -> None:
    loaded, built = both
    for name in ("dynamic", "meta", "individual"):
        a = make_surface(name, loaded, make_dispatcher(loaded, lambda r: ok_json({}))[0]).tools()
        b = make_surface(name, built, make_dispatcher(built, lambda r: ok_json({}))[0]).tools()
        assert [dataclasses.asdict(t) if dataclasses.is_dataclass(t) else vars(t) for t in a] == \
            [dataclasses.asdict(t) if dataclasses.is_dataclass(t) else vars(t) for t in b], name


def _deferred_names() -> list[str]:
    return [f.name for f in dataclasses.fields(catalog_module.Action) if f.metadata.get("defer")]


def _held_back(model) -> set[str]:
    """The fields of a model read from the artefact that wait for their first read (a
    field whose written value is a scalar, like a None, is set at once)."""
    later = vars(model).get(artefact.DEFERRED)
    return set(later.raw) if later is not None else set()


def test_an_actions_call_parts_are_decoded_from_the_artefact_on_first_read(both) -> None:
    """The `defer` fields of an action (bindings, columns, next steps...) are decoded when
    first read, to the same values as the built catalog's; a model made by its __init__
    and one read checked (an untrusted file) hold them at once."""
    built = both[1]
    deferred = _deferred_names()
    assert {"bindings", "columns", "states", "blast_radius"} <= set(deferred)
    _, loaded = artefact.load_file(prebuilt.COMPILED_FILE)
    action = loaded.actions["container.list"]
    assert {"bindings", "columns"} <= _held_back(action) <= set(deferred)
    assert not _held_back(action) & set(vars(action))
    assert action.columns == built.actions["container.list"].columns and action.columns
    assert "columns" in vars(action) and "bindings" not in vars(action)
    copied = copy.copy(action)
    assert copied.bindings == built.actions["container.list"].bindings and copied == built.actions["container.list"]
    assert dataclasses.replace(action, title="x").bindings == action.bindings
    # on the class, the field is its default; a field without one is not a class attribute
    assert catalog_module.Action.columns == () and not hasattr(catalog_module.Action, "bindings")
    made = dataclasses.replace(built.actions["container.list"])
    assert set(deferred) <= set(vars(made))
    _, checked = artefact.loads(prebuilt.COMPILED_FILE.read_bytes(), check=True)
    assert all(set(deferred) <= set(vars(a)) and not _held_back(a) for a in checked.actions.values())


def test_a_start_decodes_no_actions_call_parts(monkeypatch) -> None:
    """Filtering the catalog, making the dispatcher (the client's URL table) and listing
    the tools of every surface read no action's `defer` fields, and no lazy text at all."""
    read_texts: list = []
    real = artefact._Decoder.lazy_json
    monkeypatch.setattr(artefact._Decoder, "lazy_json", lambda self, at: read_texts.append(at) or real(self, at))
    deferred = set(_deferred_names()) - {"states"}  # the filter reads each action's next steps
    for name in ("dynamic", "meta", "individual"):
        loaded = build(BuildOptions(cache_dir=None))
        assert make_surface(name, loaded, make_dispatcher(loaded, lambda r: ok_json({}))[0]).tools()
        assert sum(len(_held_back(a)) for a in loaded.all_actions.values()) > len(loaded.all_actions), name
        read = {aid: deferred & _held_back(a) & set(vars(a)) for aid, a in loaded.all_actions.items()}
        assert not any(read.values()) and read_texts == [], name


def test_the_artefact_is_compact_deterministic_and_says_what_it_is(both) -> None:
    data = (ROOT / "compiled" / "catalog.json").read_bytes()
    head = artefact.read_header(data)
    assert head["format"] == artefact.FORMAT and head["environment_default"] == "0"
    assert head["inputs"] == prebuilt.source_inputs(ROOT / "catalog", ROOT / "rules")
    assert data.endswith(b"\n") and len(data) < 4_000_000
    # the first line is what a start parses; each line after it one lazy text, whose
    # [offset, length] the first line (or another lazy text) gives: every line is referred
    # to, and every reference is one whole line
    first, section = data.split(b"\n", 1)
    lines = section.split(b"\n")[:-1]
    starts, at = {}, 0
    for line in lines:
        starts[at] = len(line)
        at += len(line) + 1
    refs = [[json.loads(first)["lazy_pool"]]]
    for text in (first, *lines):
        refs.append([v[1:] for tag in ("L", "D") for v in _tagged(json.loads(text), tag)])
    found = [tuple(r) for group in refs for r in group]
    assert sorted(found) == sorted(starts.items()) and len(lines) > 1000
    assert len(first) < len(data) // 2  # the document and the origins are not on the first line
    assert artefact.dumps(both[0], {"x": 1}) == artefact.dumps(both[1], {"x": 1})


def test_compile_check_catches_a_stale_artefact(tmp_path: Path) -> None:
    for name in SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, tmp_path / name)
    overlay = tmp_path / "rules" / "overlays" / "container.yaml"
    overlay.write_text(overlay.read_text(encoding="utf-8") + "\n# a changed rule file\n", encoding="utf-8")
    p = _run([INTERP, "compile", "--check", "--root", str(tmp_path)])
    assert p.returncode == 1 and "compiled/catalog.json" in p.stdout
    assert _run([INTERP, "compile", "--root", str(tmp_path)]).returncode == 0
    assert compiled.check(tmp_path) == []


def test_a_stale_checkout_builds_from_the_sources_and_says_so_once(tmp_path: Path) -> None:
    for name in (*SOURCES, "interpreter"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, tmp_path / name,
                                                                      **({"ignore": shutil.ignore_patterns("__pycache__")} if name == "interpreter" else {}))
    code = "from interpreter.build.catalog import build; build(); build(); print('ok')"
    fresh = _run([sys.executable, "-c", code], cwd=tmp_path, ARCANE_MCP_CACHE_DIR="off", PYTHONPATH=str(tmp_path))
    assert fresh.returncode == 0 and fresh.stderr == "", fresh.stderr
    rendering = tmp_path / "rules" / "rendering.yaml"
    rendering.write_text(rendering.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    stale = _run([sys.executable, "-c", code], cwd=tmp_path, ARCANE_MCP_CACHE_DIR="off", PYTHONPATH=str(tmp_path))
    assert stale.returncode == 0 and stale.stdout.strip() == "ok"
    assert len(stale.stderr.splitlines()) == 1 and "interp compile" in stale.stderr


def test_an_unreadable_packaged_artefact_is_a_build_and_one_line(tmp_path, monkeypatch, capsys, both) -> None:
    bad = tmp_path / "catalog.json"
    bad.write_bytes((ROOT / "compiled" / "catalog.json").read_bytes()[:5000])
    monkeypatch.setattr(prebuilt, "COMPILED_FILE", bad)
    assert build(BuildOptions(cache_dir=None)) == both[1]
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "interp compile" in err


# ---------------------------------------------------------------- the operator layer's cache


def _first_object(value, k: int):
    """The first encoded instance of class k in a decoded artefact table."""
    if isinstance(value, list):
        if value[:2] == ["o", k]:
            return value
        items = value
    elif isinstance(value, dict):
        items = list(value.values())
    else:
        return None
    for item in items:
        hit = _first_object(item, k)
        if hit is not None:
            return hit
    return None


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{prebuilt.SUFFIX}"))


def _no_build(monkeypatch) -> None:
    def refuse(*a, **k):
        raise AssertionError("built from the sources")
    monkeypatch.setattr(catalog_module, "assemble", refuse)


def test_the_operator_layer_is_compiled_once_then_read_from_the_cache(tmp_path, operator_dir, monkeypatch) -> None:
    cache = tmp_path / "cache"
    options = BuildOptions(operator_rules=operator_dir, cache_dir=cache)
    first = build(options)
    assert first.actions["container.list"].usage == "An operator's note."
    assert len(_entries(cache)) == 1
    with monkeypatch.context() as m:
        _no_build(m)
        second = build(options)  # a hit: no YAML read
    assert second == first and dict(second.actions["container.list"].origins) == dict(first.actions["container.list"].origins)
    # a changed file is another key: built again, and kept beside the first
    (operator_dir / "overlays" / "container.yaml").write_text(OPERATOR_OVERLAY.replace("An operator's", "Another"), encoding="utf-8")
    third = build(options)
    assert third.actions["container.list"].usage == "Another note." and len(_entries(cache)) == 2


def test_an_unusable_cache_directory_is_memory_only_said_once(tmp_path, operator_dir, capsys) -> None:
    (tmp_path / "a-file").write_text("x")
    options = BuildOptions(operator_rules=operator_dir, cache_dir=tmp_path / "a-file" / "cache")
    assert build(options).actions["container.list"].usage == "An operator's note."
    assert build(options).actions["container.list"].usage == "An operator's note."
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "memory" in err[0]


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX ownership and modes")
def test_a_cache_directory_others_may_write_is_neither_read_nor_written(tmp_path, layered, monkeypatch, capsys) -> None:
    """An entry is read back into the rules a server enforces: in a directory another user
    could write, it could have been planted. The build then happens in memory, said once."""
    cache = tmp_path / "cache"
    options, _, entry, _ = _seeded(layered, cache)  # a valid entry for this key
    calls = []
    real = catalog_module.assemble
    monkeypatch.setattr(catalog_module, "assemble", lambda *a, **k: calls.append(1) or real(*a, **k))
    os.chmod(cache, 0o777)
    capsys.readouterr()
    assert build(options).actions["container.list"].usage == "An operator's note."
    assert build(options).actions["container.list"].usage == "An operator's note."
    assert len(calls) == 2 and _entries(cache) == [entry]  # built both times; nothing written beside it
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and str(cache) in err[0]
    os.chmod(cache, 0o700)
    os.chmod(entry, 0o666)  # the entry itself writable by others: not read either
    build(options)
    assert len(calls) == 3
    os.chmod(entry, 0o600)
    build(options)
    assert len(calls) == 3  # this user's entry in this user's directory: read


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "wrong_type", "other_key", "deep", "huge"])
def test_a_damaged_cache_file_is_a_rebuild(tmp_path, layered, damage, capsys) -> None:
    options, first, entry, data = _seeded(layered, tmp_path / "cache")
    if damage == "garbage":
        data = b"\x00\xff not json"
    elif damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = b""
    elif damage == "wrong_type":  # an action's title that is a number: it decodes, but the model holds a str
        line, lazy = data.split(b"\n", 1)
        doc = json.loads(line)
        k = next(i for i, c in enumerate(doc["classes"]) if c[1] == "Action")
        action = _first_object(doc["pool"], k)
        action[2 + doc["classes"][k][2].index("title")] = 12345
        data = json.dumps(doc).encode() + b"\n" + lazy
    elif damage == "other_key":
        head = artefact.read_header(data)
        data = data.replace(head["key"].encode(), b"0" * 64)
    elif damage == "deep":
        data = b'{"format":3,"key":"' + artefact.read_header(data)["key"].encode() + b'","classes":[],"pool":[],' \
               b'"lazy_pool":[0,2],"root":' + b'["l",' * 100_000 + b"1" + b"]" * 100_000 + b"}\n[]\n"
    elif damage == "huge":
        data = data + b" " * (artefact.MAX_BYTES + 1 - len(data))
    entry.write_bytes(data)
    again = build(options)
    assert again == first and again.actions["container.list"].title == first.actions["container.list"].title
    assert capsys.readouterr().err == ""
    assert artefact.load_file(entry, check=True)[1] == first  # the rebuild rewrote the entry


def _tagged(value, tag: str):
    """Every array of `value` whose first member is `tag`."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            if v and v[0] == tag:
                yield v
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())


# ---------------------------------------------------------------- the format, attacked


def _small() -> bytes:
    return artefact.dumps(build(BuildOptions(cache_dir=None)).rendering, {})


_HEAD = b'{"format":3,"classes":[],"pool":[],"lazy_pool":[0,2],'
_LAZY = b"\n[]\n"


@pytest.mark.parametrize("text", [
    b"", b"[]", b"{}", b"{}\n", b'{"format":99}\n', b'{"format":2}\n', b'{"format":3}\n',
    _HEAD + b'"root":["zz"]}' + _LAZY,
    b'{"format":3,"classes":[["os","system",[]]],"pool":[],"lazy_pool":[0,2],"root":["o",0]}' + _LAZY,
    b'{"format":3,"classes":[["interpreter.build.model","Nope",[]]],"pool":[],"lazy_pool":[0,2],"root":1}' + _LAZY,
    b'{"format":3,"classes":[["interpreter.build.model","Origin",["file"]]],"pool":[],"lazy_pool":[0,2],"root":1}' + _LAZY,
    b'{"format":3,"classes":[],"pool":[["@",0]],"lazy_pool":[0,2],"root":["@",0]}' + _LAZY,
    _HEAD + b'"root":["@",7]}' + _LAZY,
    b'{"format":3,"classes":[],"pool":[],"lazy_pool":[0,1],"root":["&",0]}\n{\n',
    b'{"format":3,"classes":[],"pool":[],"lazy_pool":[0,99],"root":["&",0]}' + _LAZY,
    b'{"format":3,"classes":[],"pool":[],"lazy_pool":"[]","root":["&",0]}' + _LAZY,
    _HEAD + b'"root":["&",0]}' + _LAZY,
    _HEAD + b'"root":{"a":["L",0,2]}}' + _LAZY,  # a lazy value where no lazy field is
    _HEAD + b'"root":["L",3,1]}' + _LAZY,
    _HEAD + b'"root":["L",-1,2]}' + _LAZY,
    _HEAD + b'"root":["L","0",2]}' + _LAZY,
    _HEAD + b'"root":["L",0]}' + _LAZY,
    _HEAD + b'"root":["r","(",0]}' + _LAZY,
    _HEAD + b'"root":["p","a[["]}' + _LAZY,
    _HEAD + b'"root":["o","x"]}' + _LAZY,
    _HEAD + b'"root":[]}' + _LAZY,
    _HEAD + b'"root":' + b"[" * 50_000 + b"]" * 50_000 + b"}" + _LAZY,
    _HEAD + b'"root":["l",1]}',  # no end of line: truncated
])
def test_a_malformed_artefact_is_one_error(text: bytes) -> None:
    with pytest.raises(artefact.ArtefactError) as exc:
        artefact.loads(text, check=True)
    assert "\n" not in str(exc.value)


def test_a_model_field_of_the_wrong_type_is_refused_when_checked() -> None:
    line, lazy = _small().split(b"\n", 1)
    doc = json.loads(line)
    origin = next(i for i, c in enumerate(doc["classes"]) if c[1] == "Rendering")
    assert doc["root"][:2] == ["o", origin]
    doc["root"][2] = ["l", "not", "an int"]  # max_rows or whatever comes first: never a list
    with pytest.raises(artefact.ArtefactError):
        artefact.loads(json.dumps(doc).encode() + b"\n" + lazy, check=True)


@given(st.integers(min_value=0), st.binary(max_size=8))
def test_any_damage_is_an_artefact_error_or_a_catalog_part(cut: int, junk: bytes) -> None:
    data = _SMALL
    at = cut % len(data)
    for damaged in (data[:at], data[:at] + junk + data[at + len(junk):]):
        try:
            artefact.loads(damaged, check=True)
        except artefact.ArtefactError:
            pass


_SMALL = _small()
