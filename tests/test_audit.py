"""`interp audit`: 1:1 coverage on the real catalog, and failures on broken copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build.catalog import build
from interpreter.commands.audit import audit

FAVICON_NAME = next(line + "\n" for line in (CATALOG_DIR / "actions.yaml").read_text().splitlines() if line.startswith("  get-favicon:"))
UNCOVERED_FAVICON = "uncovered operation: get-favicon (GET /app-images/favicon): no name in actions.yaml and no allowlist entry"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(CATALOG_DIR, tmp_path / "catalog")
    shutil.copytree(RULES_DIR, tmp_path / "rules")
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def run(root: Path):
    return audit(root / "catalog", root / "rules")


def allowlist(root: Path, *entries: str) -> None:
    edit(root / "catalog" / "coverage-allowlist.yaml", "routes:\n", "routes:\n" + "".join(entries))


def test_real_catalog_passes() -> None:
    report = audit()
    catalog = build()
    assert report.ok, report.failures
    assert report.failures == []
    lines = report.lines()
    assert lines[-1] == "audit: OK"
    doc_ops = sum(1 for item in catalog.document["paths"].values() for m in item if m in ("get", "head", "post", "put", "patch", "delete"))
    c = report.counts
    assert c["operations"] == doc_ops == 410
    assert c["actions"] == len(catalog.all_actions)
    assert c["domains"] == len(catalog.domains)
    assert c["extra_routes"] == sum(1 for a in catalog.all_actions.values() if a.operation_id is None)
    assert c["allowlisted"] == len(catalog.inventory.allowlist)
    assert c["pending"] == sum(a.pending for a in catalog.all_actions.values()) == 0  # every handler kind is served
    # every operation is covered: actions from operations + allowlisted operations == operations
    assert sum(1 for a in catalog.all_actions.values() if a.operation_id) == doc_ops
    assert any(line.startswith("counts: operations 410, actions ") for line in lines)


def test_no_route_is_pending() -> None:
    report = audit()
    # every handler kind is served (compile refuses a served kind marked pending)
    assert report.pending == []
    assert report.ok


def test_corrections_are_listed_with_their_why() -> None:
    report = audit()
    assert "correction: auth.change_password (change-password): destructive=True — replaces the password; other sessions may end" in report.corrections
    assert "correction: auth.logout (logout): destructive=False" in report.corrections
    assert any(c.startswith("correction: container.download_logs (download-container-logs): response=text_download — ") for c in report.corrections)
    assert "correction: container.exec (extra route): destructive=True, idempotent=False" in report.corrections
    assert report.counts["corrections"] == len(report.corrections)


def test_as_dict_is_json() -> None:
    d = audit().as_dict()
    assert d["ok"] is True and set(d) >= {"failures", "pending", "corrections", "counts"}
    json.dumps(d)


def test_allowlisted_operation_is_covered_until_its_entry_is_removed(copy: Path) -> None:
    edit(copy / "catalog" / "actions.yaml", FAVICON_NAME, "")
    allowlist(copy, "  - operation: get-favicon\n    reason: The favicon is for browsers, not for a model.\n")
    report = run(copy)
    assert report.ok, report.failures
    assert "allowlisted: get-favicon (GET /app-images/favicon): The favicon is for browsers, not for a model." in report.allowlisted
    # the entry removed: the operation is uncovered
    edit(copy / "catalog" / "coverage-allowlist.yaml", "  - operation: get-favicon\n    reason: The favicon is for browsers, not for a model.\n", "")
    report = run(copy)
    assert not report.ok
    assert report.failures == [UNCOVERED_FAVICON]
    assert report.lines()[-1] == "audit: FAILED (1 problem(s))"


def test_allowlisted_route_covers_an_operation(copy: Path) -> None:
    edit(copy / "catalog" / "actions.yaml", FAVICON_NAME, "")
    allowlist(copy, "  - route: GET /app-images/favicon\n    reason: The favicon is for browsers, not for a model.\n")
    report = run(copy)
    assert report.ok, report.failures
    assert "allowlisted: get-favicon (GET /app-images/favicon): The favicon is for browsers, not for a model." in report.allowlisted


def test_unnamed_operation_fails(copy: Path) -> None:
    edit(copy / "catalog" / "actions.yaml", FAVICON_NAME, "")
    report = run(copy)
    assert report.failures == [UNCOVERED_FAVICON]
    # the unnamed operation, and the overlay entry that named its action (now unknown)
    assert [line.split()[4] for line in report.notes if line.startswith("note: interp validate reports ")] == ["2"]


def test_stale_allowlist_entries_fail(copy: Path) -> None:
    allowlist(
        copy,
        "  - route: GET /app-images/favicon\n    reason: Served as an action, so stale.\n",
        "  - operation: get-logo\n    reason: Served as an action, so stale.\n",
        "  - operation: get-banner\n    reason: No such operation in the document.\n",
        "  - route: GET /debug/pprof/cmdline\n    reason: An extra route served as an action, so stale.\n",
    )
    report = run(copy)
    assert report.failures == [
        "stale allowlist: entry #1 operation 'get-logo' is served as app_image.get_logo",
        "stale allowlist: entry #2 operation 'get-banner' is not in the OpenAPI document",
        "stale allowlist: entry #0 route 'GET /app-images/favicon' is served as app_image.get_favicon",
        "stale allowlist: entry #3 route 'GET /debug/pprof/cmdline' is served as diagnostics.cmdline",
    ]


def test_repeated_allowlist_entry_fails(copy: Path) -> None:
    allowlist(copy, "  - route: POST /events\n    reason: The same route a second time.\n")
    assert run(copy).failures == ["stale allowlist: entry #1 route 'POST /events' repeats entry #0"]


def test_extra_route_without_action_fails(copy: Path) -> None:
    # the extra route takes an operation's ID: the operation keeps it, the route has no action
    edit(copy / "catalog" / "extra-routes.yaml", "  - id: diagnostics.cmdline\n", "  - id: diagnostics.get\n")
    report = run(copy)
    assert report.failures == [
        "uncovered route: extra route #11 GET /debug/pprof/cmdline (diagnostics.get) maps to no action (a duplicate or malformed ID)",
    ]


def test_extra_route_that_is_an_openapi_route_fails(copy: Path) -> None:
    edit(copy / "catalog" / "extra-routes.yaml", "routes:\n",
         "routes:\n  - id: app_image.favicon_again\n    method: GET\n    path: /app-images/favicon\n    handler: binary_download\n"
         "    title: Favicon\n    description: The favicon, declared twice.\n    params: {}\n")
    report = run(copy)
    assert report.failures == [
        "double route: extra route #0 GET /app-images/favicon (app_image.favicon_again) is also OpenAPI operation 'get-favicon'; "
        "name the operation in actions.yaml instead",
        "double route: GET /app-images/favicon is served by 2 actions: app_image.favicon_again, app_image.get_favicon",
    ]


def test_duplicate_name_leaves_an_operation_uncovered(copy: Path) -> None:
    edit(copy / "catalog" / "actions.yaml", '  get-logo-email: {id: app_image.get_logo_email, response: "binary_download"',
         '  get-logo-email: {id: app_image.get_logo, response: "binary_download"')
    report = run(copy)
    assert report.failures == [
        "uncovered operation: get-logo-email (GET /app-images/logo-email): its name 'app_image.get_logo' in actions.yaml makes no action "
        "(a duplicate or malformed ID)",
    ]


def test_unreadable_document_fails(copy: Path) -> None:
    (copy / "catalog" / "arcane.openapi.json").write_text("{not json", encoding="utf-8")
    report = run(copy)
    assert not report.ok
    assert len(report.failures) == 1 and report.failures[0].startswith("unreadable: ")
    assert report.failures[0].endswith("[document_unreadable]")
