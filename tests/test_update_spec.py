"""`interp update-spec`: importing a new Arcane OpenAPI document refuses until every
operation has a name and no name is left without its operation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build.load import load_file
from interpreter.commands.update_spec import document_url, operations_of, serialize, suggest_name, update_spec

from .helpers import data_file

DOC_2_12 = CATALOG_DIR / "arcane.openapi.json"
# vendored (tests/data/SOURCE.md); data_file fails, never skips, when it is missing
DOC_2_8 = data_file("arcane-2.8.0.openapi.json")

OPS_2_12 = operations_of(json.loads(DOC_2_12.read_text(encoding="utf-8")))
OPS_2_8 = operations_of(json.loads(DOC_2_8.read_text(encoding="utf-8")))
NEW_IN_2_12 = sorted(set(OPS_2_12) - set(OPS_2_8))


def copy_sources(root: Path) -> tuple[Path, Path]:
    shutil.copytree(CATALOG_DIR, root / "catalog")
    shutil.copytree(RULES_DIR, root / "rules")
    return root / "catalog", root / "rules"


def restrict_names(actions_yaml: Path, keep: set[str]) -> None:
    """Keep only the names of the operations in `keep` (an inventory of an older Arcane)."""
    yaml = YAML(typ="rt")
    data = yaml.load(actions_yaml.read_text(encoding="utf-8"))
    for oid in list(data["operations"]):
        if oid not in keep:
            del data["operations"][oid]
    with actions_yaml.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)


@pytest.fixture
def era_2_8(tmp_path: Path) -> tuple[Path, Path]:
    """A catalog as it was for Arcane 2.8.0: the 2.8.0 document, names for its operations only."""
    catalog_dir, rules_dir = copy_sources(tmp_path)
    shutil.copyfile(DOC_2_8, catalog_dir / "arcane.openapi.json")
    restrict_names(catalog_dir / "actions.yaml", set(OPS_2_8))
    return catalog_dir, rules_dir


def test_the_two_documents_differ_as_expected() -> None:
    assert len(OPS_2_8) == 347 and len(OPS_2_12) == 410
    assert len(NEW_IN_2_12) == 63
    assert not set(OPS_2_8) - set(OPS_2_12)


def test_from_2_8_names_to_2_12_refuses_with_exactly_the_new_operations(era_2_8) -> None:
    catalog_dir, rules_dir = era_2_8
    report = update_spec(str(DOC_2_12), catalog_dir, rules_dir)
    assert report.error is None
    assert not report.ok
    assert [op.operation_id for op in report.unnamed] == NEW_IN_2_12
    assert report.new_operations == NEW_IN_2_12
    assert report.removed_operations == [] and report.vanished == []
    assert report.old_version == "2.8.0" and report.new_version == "2.12.0"
    assert report.operations == 410
    assert 0 < len(report.changed_operations) < 347
    # a few known ones, by name
    by_id = {op.operation_id: op for op in report.unnamed}
    for oid in ("download-container-logs", "edit-container", "rename-volume", "patch-image", "connect-network-container"):
        assert oid in by_id
    logs = by_id["download-container-logs"]
    assert (logs.method, logs.path, logs.summary) == ("GET", "/environments/{id}/containers/{containerId}/logs/download", "Download container logs")
    assert logs.suggestion == "container.download_logs"
    assert logs.yaml_line() == ("  download-container-logs: container.download_logs  "
                                "# GET /environments/{id}/containers/{containerId}/logs/download — Download container logs")
    assert by_id["rename-volume"].suggestion == "volume.rename"
    lines = report.lines()
    assert "document: Arcane 2.8.0 -> 2.12.0, 410 operations" in lines
    assert f"operations: 63 new, 0 removed, {len(report.changed_operations)} changed" in lines
    assert "63 operation(s) without a name; add to catalog/actions.yaml under `operations:` (check each suggested name):" in lines
    assert logs.yaml_line() in lines
    assert lines[-1].startswith("update-spec: refused")
    # written, byte for byte the embedded form
    assert report.written
    assert (catalog_dir / "arcane.openapi.json").read_bytes() == DOC_2_12.read_bytes()
    json.dumps(report.as_dict())


def test_an_untagged_suggestion_starts_after_the_declared_environment_prefix() -> None:
    """Without tags to vote, the domain is the path's first noun after the environment's
    prefix: catalog/conventions.yaml `environment.path_prefix`, not a spelled one."""
    prefix = load_file(CATALOG_DIR / "conventions.yaml")[0].data["environment"]["path_prefix"]
    path = prefix.rstrip("/") + "/widgets/{widgetId}/parts"
    assert suggest_name("list-widget-parts", "GET", path, {}, {}, {}, set(), prefix) == "widget.list_parts"
    # another declared prefix is stripped the same way; an undeclared one is a noun
    assert suggest_name("list-widget-parts", "GET", "/hosts/{h}/widgets/{w}/parts", {}, {}, {}, set(), "/hosts/{h}/") == "widget.list_parts"
    unscoped = suggest_name("list-widget-parts", "GET", "/hosts/{h}/widgets/{w}/parts", {}, {}, {}, set(), prefix)
    assert unscoped.split(".")[0] == "host"
    # a path that is only the prefix keeps its noun
    assert suggest_name("get-env", "GET", prefix, {}, {}, {}, set(), prefix).split(".")[0] == "environment"


def test_naming_the_new_operations_resolves_it(era_2_8) -> None:
    catalog_dir, rules_dir = era_2_8
    assert not update_spec(str(DOC_2_12), catalog_dir, rules_dir).ok
    shutil.copyfile(CATALOG_DIR / "actions.yaml", catalog_dir / "actions.yaml")
    report = update_spec(str(DOC_2_12), catalog_dir, rules_dir)
    assert report.ok, report.lines()
    assert not report.written  # already the same bytes
    assert report.unnamed == [] and report.vanished == [] and report.other_problems == []
    assert report.lines()[-1].startswith("update-spec: OK")


def test_from_2_12_names_to_2_8_lists_every_vanished_name(tmp_path: Path) -> None:
    catalog_dir, rules_dir = copy_sources(tmp_path)
    report = update_spec(str(DOC_2_8), catalog_dir, rules_dir)
    assert not report.ok
    assert report.unnamed == []
    assert [v.operation_id for v in report.vanished] == NEW_IN_2_12
    assert report.removed_operations == NEW_IN_2_12
    names = YAML(typ="safe").load((CATALOG_DIR / "actions.yaml").read_text(encoding="utf-8"))["operations"]
    for v in report.vanished:
        entry = names[v.operation_id]
        assert v.action_id == (entry["id"] if isinstance(entry, dict) else entry)
    assert "  download-container-logs: container.download_logs" in report.lines()
    # the 2.8.0 document is written in the embedded form, whatever form it came in
    text = (catalog_dir / "arcane.openapi.json").read_text(encoding="utf-8")
    assert text == serialize(json.loads(DOC_2_8.read_text(encoding="utf-8")))


def test_embedded_document_is_in_the_stable_form() -> None:
    text = DOC_2_12.read_text(encoding="utf-8")
    assert serialize(json.loads(text)) == text


@pytest.mark.parametrize(
    "content, code",
    [
        (None, "unreadable"),
        ("{not json", "not_json"),
        (b"\xff\xfe{}", "not_utf8"),
        ("[1, 2]", "not_object"),
        ('{"swagger": "2.0", "paths": {"/a": {}}}', "not_openapi"),
        ('{"openapi": "3.1.0", "paths": {}}', "no_paths"),
    ],
)
def test_bad_sources_write_nothing(tmp_path: Path, content, code) -> None:
    catalog_dir, rules_dir = copy_sources(tmp_path)
    source = tmp_path / "new.json"
    if isinstance(content, bytes):
        source.write_bytes(content)
    elif content is not None:
        source.write_text(content, encoding="utf-8")
    before = (catalog_dir / "arcane.openapi.json").read_bytes()
    report = update_spec(str(source), catalog_dir, rules_dir)
    assert not report.ok and report.error and report.error_code == code
    assert report.lines()[-1] == "update-spec: nothing written"
    assert (catalog_dir / "arcane.openapi.json").read_bytes() == before
    assert sorted(p.name for p in catalog_dir.iterdir()) == sorted(p.name for p in CATALOG_DIR.iterdir())


# ---------------------------------------------------------------- URL mode


class _Handler(BaseHTTPRequestHandler):
    body = DOC_2_12.read_bytes()

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/api/openapi.json":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)
        elif self.path == "/moved/api/openapi.json":
            self.send_response(302)
            self.send_header("Location", "http://elsewhere.invalid/api/openapi.json")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/slow/api/openapi.json":
            time.sleep(1.5)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, *args):  # keep the test output quiet
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("suffix", ["", "/", "/api", "/api/openapi.json"])
def test_url_mode(era_2_8, server, suffix) -> None:
    catalog_dir, rules_dir = era_2_8
    report = update_spec(server + suffix, catalog_dir, rules_dir)
    assert report.error is None
    assert report.source == f"{server}/api/openapi.json"
    assert [op.operation_id for op in report.unnamed] == NEW_IN_2_12
    assert (catalog_dir / "arcane.openapi.json").read_bytes() == DOC_2_12.read_bytes()


@pytest.mark.parametrize(
    "path, code",
    [
        ("/moved", "redirect"),
        ("/nowhere", "http_status"),
    ],
)
def test_url_errors_write_nothing(tmp_path: Path, server, path, code) -> None:
    catalog_dir, rules_dir = copy_sources(tmp_path)
    before = (catalog_dir / "arcane.openapi.json").read_bytes()
    report = update_spec(server + path, catalog_dir, rules_dir)
    assert not report.ok and report.error_code == code
    assert (catalog_dir / "arcane.openapi.json").read_bytes() == before


def test_url_timeout(tmp_path: Path, server) -> None:
    catalog_dir, rules_dir = copy_sources(tmp_path)
    report = update_spec(server + "/slow", catalog_dir, rules_dir, timeout=0.3)
    assert report.error and report.error_code == "timeout"


def test_unreachable_url(tmp_path: Path) -> None:
    catalog_dir, rules_dir = copy_sources(tmp_path)
    report = update_spec("http://127.0.0.1:9/", catalog_dir, rules_dir, timeout=2)
    assert report.error and report.error_code == "unreachable"


@pytest.mark.parametrize(
    "source, url",
    [
        ("http://arcane:3552", "http://arcane:3552/api/openapi.json"),
        ("https://arcane.example/", "https://arcane.example/api/openapi.json"),
        ("https://arcane.example/api", "https://arcane.example/api/openapi.json"),
        ("https://arcane.example/api/", "https://arcane.example/api/openapi.json"),
        ("https://h/sub/api/openapi.json", "https://h/sub/api/openapi.json"),
        ("https://h/sub", "https://h/sub/api/openapi.json"),
    ],
)
def test_document_url(source, url) -> None:
    assert document_url(source) == url


# ---------------------------------------------------------------- where it writes


def _checkout(root: Path) -> tuple[Path, Path]:
    """A minimal arcane-mcp checkout: pyproject.toml naming the project, catalog/ and rules/."""
    dirs = copy_sources(root)
    (root / "pyproject.toml").write_text('[project]\nname = "arcane-mcp"\n', encoding="utf-8")
    return dirs


def _interp(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "interp"), *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={"PATH": os.environ["PATH"], "ARCANE_MCP_AUDIT_LOG": "off"})


def test_the_command_writes_into_the_checkout_it_is_given_or_finds(tmp_path: Path) -> None:
    catalog_dir, _ = _checkout(tmp_path / "clone")
    old = DOC_2_8.read_text(encoding="utf-8")
    # from a folder inside the checkout: found upwards; the 2.8.0 document is written there
    (tmp_path / "clone" / "docs").mkdir()
    p = _interp("update-spec", str(DOC_2_8), cwd=tmp_path / "clone" / "docs")
    assert p.returncode == 1  # the 2.12 names of the 63 operations 2.8.0 lacks are now stale
    assert (catalog_dir / "arcane.openapi.json").read_text(encoding="utf-8") == serialize(json.loads(old))
    # from anywhere else with --root: back to 2.12.0, clean
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = _interp("update-spec", str(DOC_2_12), "--root", str(tmp_path / "clone"), cwd=elsewhere)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (catalog_dir / "arcane.openapi.json").read_bytes() == DOC_2_12.read_bytes()
    assert CATALOG_DIR.joinpath("arcane.openapi.json").read_bytes() == DOC_2_12.read_bytes()  # the checkout running the test: untouched


def test_the_command_refuses_without_a_checkout(tmp_path: Path) -> None:
    copy_sources(tmp_path)  # catalog/ and rules/ alone are not a checkout: no pyproject.toml naming arcane-mcp
    before = (tmp_path / "catalog" / "arcane.openapi.json").read_bytes()
    for args in (("update-spec", str(DOC_2_8)), ("update-spec", str(DOC_2_8), "--root", str(tmp_path))):
        p = _interp(*args, cwd=tmp_path)
        assert p.returncode == 2 and p.stdout == ""
        (line,) = p.stderr.splitlines()
        assert line.endswith("[checkout_required]") and "--root" in line
    assert (tmp_path / "catalog" / "arcane.openapi.json").read_bytes() == before
