"""`interp audit --rules`: what the overlays leave out, per domain. The expected counts are
computed here from the overlay files and the OpenAPI document themselves, not from the
engine's catalog."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.commands.audit import ACTION_CHECKS, DOMAIN_KEYS, rules_coverage

from .test_overlay_columns import item_schema

INTERP = str(Path(sys.executable).parent / "interp")


def _overlays(rules_dir: Path) -> dict[str, dict]:
    yaml = YAML(typ="safe")
    out = {}
    for path in sorted((rules_dir / "overlays").glob("*.yaml")):
        data = yaml.load(path.read_text(encoding="utf-8"))
        out[data["domain"]] = data
    return out


def _action_ids(catalog_dir: Path) -> dict[str, tuple[str, str, str | None]]:
    """action ID -> (method, path, operationId or None), from actions.yaml, extra-routes.yaml
    and the document."""
    yaml = YAML(typ="safe")
    doc = json.loads((catalog_dir / "arcane.openapi.json").read_text(encoding="utf-8"))
    names = yaml.load((catalog_dir / "actions.yaml").read_text(encoding="utf-8"))["operations"]
    out = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") in names:
                entry = names[op["operationId"]]
                aid = entry["id"] if isinstance(entry, dict) else entry
                out[aid] = (method.upper(), path, op["operationId"])
    for route in yaml.load((catalog_dir / "extra-routes.yaml").read_text(encoding="utf-8"))["routes"]:
        out[route["id"]] = (route["method"], route["path"], None)
    return out


class _Action:  # what test_overlay_columns.item_schema reads
    def __init__(self, method: str, path: str, operation_id: str | None, list_member: str | None = None):
        self.method, self.path, self.operation_id, self.list_member = method, path, operation_id, list_member


def expected(catalog_dir: Path = CATALOG_DIR, rules_dir: Path = RULES_DIR) -> dict[str, dict]:
    """Per domain: actions, lists, and per check the IDs that lack it; domain keys."""
    doc = json.loads((catalog_dir / "arcane.openapi.json").read_text(encoding="utf-8"))
    overlays = _overlays(rules_dir)
    names = YAML(typ="safe").load((catalog_dir / "actions.yaml").read_text(encoding="utf-8"))["operations"]
    kinds = {(e["id"] if isinstance(e, dict) else e): (e.get("response") if isinstance(e, dict) else None) for e in names.values()}
    out: dict[str, dict] = {}
    for aid, (method, path, oid) in sorted(_action_ids(catalog_dir).items()):
        domain, name = aid.split(".", 1)
        spec = ((overlays.get(domain) or {}).get("actions") or {}).get(name) or {}
        d = out.setdefault(domain, {"actions": [], "lists": [], "missing": {k: [] for k in ACTION_CHECKS},
                                    **{k: bool((overlays.get(domain) or {}).get(k)) for k in DOMAIN_KEYS}})
        d["actions"].append(aid)
        is_list = oid is not None and kinds.get(aid) in (None, "json") and item_schema(doc, _Action(method, path, oid, spec.get("list_member"))) is not None
        if is_list:
            d["lists"].append(aid)
        has = {"usage": bool(spec.get("usage")), "aliases": bool(spec.get("aliases")),
               "next_steps": bool(spec.get("related") or spec.get("follow_ups")),
               "columns": bool(spec.get("columns")), "empty": bool(spec.get("empty"))}
        for key, check in ACTION_CHECKS.items():
            if (is_list or not check.lists) and not has[key]:
                d["missing"][key].append(aid)
    return out


def test_every_check_is_known_here() -> None:
    # a new check needs its expected count computed above
    assert set(ACTION_CHECKS) == {"usage", "aliases", "next_steps", "columns", "empty"}
    assert DOMAIN_KEYS == ("title", "description")


@pytest.fixture(scope="module")
def report():
    """`audit --rules` of the real catalog and rules: read only, so the tests of it share one."""
    return rules_coverage()


def test_counts_match_the_overlays_and_the_document(report) -> None:
    want = expected()
    assert [d.domain for d in report.domains] == sorted(want)
    for d in report.domains:
        w = want[d.domain]
        assert list(d.actions) == w["actions"], d.domain
        assert list(d.lists) == w["lists"], d.domain
        assert {k: list(v) for k, v in d.missing.items()} == w["missing"], d.domain
        assert d.declared == {k: w[k] for k in DOMAIN_KEYS}, d.domain
    t = report.totals()
    assert t["domains"] == len(want) == 49
    assert t["actions"] == sum(len(w["actions"]) for w in want.values())
    assert t["list_actions"] == sum(len(w["lists"]) for w in want.values()) > 0
    for key, check in ACTION_CHECKS.items():
        applicable = sum(len(w["lists"] if check.lists else w["actions"]) for w in want.values())
        missing = sum(len(w["missing"][key]) for w in want.values())
        assert (t["applicable"][key], t["missing"][key]) == (applicable, missing), key
        assert t["percent_covered"][key] == round(100 * (applicable - missing) / applicable, 1)
    # every list chooses its columns (tests/test_overlay_columns.py allows no debt now)
    assert t["missing"]["columns"] == 0


def test_structure_of_the_json_and_the_text(report) -> None:
    d = report.as_dict()
    assert set(d) == {"checks", "domains", "totals", "unreadable", "notes"}
    assert set(d["checks"]) == set(ACTION_CHECKS) and d["unreadable"] == [] and d["notes"] == []
    assert all(set(x) == {"domain", "actions", "list_actions", "title", "description", "missing"} for x in d["domains"])
    assert set(d["totals"]) >= {"domains", "actions", "list_actions", "applicable", "missing", "percent_covered",
                                "domains_without_title", "domains_without_description"}
    json.dumps(d)
    lines = report.lines()
    table = lines[1: 2 + len(report.domains) + 1]
    assert table[0].split()[:3] == ["domain", "actions", "lists"]
    assert [row.split()[0] for row in table[1:]] == [x.domain for x in report.domains] + ["total"]
    total = table[-1].split()
    t = report.totals()
    assert total[1:3] == [str(t["actions"]), str(t["list_actions"])]
    assert total[3:8] == [str(t["missing"][k]) for k in ACTION_CHECKS]
    assert lines[2 + len(report.domains) + 1].startswith("covered: usage note ")
    # every gap is named by its action ID
    for x in report.domains:
        for ids in x.missing.values():
            for aid in ids:
                assert any(line.startswith(f"{x.domain}: ") and aid in line for line in lines), aid


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(CATALOG_DIR, tmp_path / "catalog")
    shutil.copytree(RULES_DIR, tmp_path / "rules")
    return tmp_path


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([INTERP, "audit", "--rules", *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "ARCANE_MCP_AUDIT_LOG": "off"})


def test_a_removed_usage_note_and_title_are_counted_not_failed(copy: Path) -> None:
    before = rules_coverage(copy / "catalog", copy / "rules").totals()
    path = copy / "rules" / "overlays" / "container.yaml"
    text = path.read_text(encoding="utf-8")
    stop_usage = "    usage: Stops gracefully (SIGTERM, then SIGKILL after the timeout); kill stops at once.\n"
    assert text.count(stop_usage) == 1 and text.count("title: Containers\n") == 1
    path.write_text(text.replace(stop_usage, "").replace("title: Containers\n", ""), encoding="utf-8")
    report = rules_coverage(copy / "catalog", copy / "rules")
    after = report.totals()
    assert after["missing"]["usage"] == before["missing"]["usage"] + 1
    assert after["domains_without_title"] == before["domains_without_title"] + 1
    container = next(d for d in report.domains if d.domain == "container")
    assert "container.stop" in container.missing["usage"] and container.declared["title"] is False
    assert expected(copy / "catalog", copy / "rules")["container"]["missing"]["usage"] == list(container.missing["usage"])
    assert report.lines()[-1].startswith("audit --rules: a report")


def test_the_command_reports_and_exits_0(report) -> None:
    p = _run()
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[1].split()[:3] == ["domain", "actions", "lists"]
    p = _run("--json")
    assert p.returncode == 0
    assert json.loads(p.stdout) == json.loads(json.dumps(report.as_dict()))
