"""`interp explain ACTION`: every decision for one action, each with where it comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from interpreter.build.catalog import BuildOptions, build
from interpreter.commands.cli import main
from interpreter.commands.explain import UnknownAction, explain

ROOT = Path(__file__).resolve().parent.parent


def _by(decisions, topic, what):
    hits = [d for d in decisions if d.topic == topic and d.what == what]
    assert hits, f"no decision {topic}/{what}: {[(d.topic, d.what) for d in decisions]}"
    return hits[0]


def test_list_action_columns_come_from_its_overlay(catalog):
    decisions = explain(catalog, "container.list", "meta")
    columns = [d for d in decisions if d.topic == "rendering" and d.what.startswith("column ")]
    assert [d.what[len("column "):] for d in columns] == [c.label for c in catalog.actions["container.list"].columns]
    assert all(d.origin is not None and d.origin.file == "rules/overlays/container.yaml" for d in columns)
    assert _by(decisions, "classification", "read-only").value is True
    assert _by(decisions, "route", "method").value == "GET"
    meta = _by(decisions, "exposure", "surface meta")
    assert "arcane_container" in meta.value and meta.why  # the configured surface is marked
    assert _by(decisions, "exposure", "surface individual").value == "arcane_container_list"
    assert _by(decisions, "route", "operation").value == "list-containers"


def test_destructive_action_says_why_and_which_argument_resolves_names(catalog):
    decisions = explain(catalog, "project.destroy")
    destructive = _by(decisions, "classification", "destructive")
    assert destructive.value is True and "DELETE" in destructive.why
    assert _by(decisions, "classification", "needs confirm").value is True
    resolution = _by(decisions, "inputs", "name resolution projectId")
    assert resolution.origin.file == "rules/overlays/project.yaml"
    assert "project.list" in resolution.value


def test_a_correction_is_named_with_its_reason(catalog):
    corrected = next(e for e in catalog.inventory.operations.values() if e.read_only is not None and e.why)
    decisions = explain(catalog, corrected.action_id)
    ro = _by(decisions, "classification", "read-only")
    assert ro.value is corrected.read_only and corrected.why in ro.why
    assert ro.origin.file == "catalog/actions.yaml"


def test_withdrawn_action_is_explained_with_the_reason():
    catalog = build(BuildOptions(read_only=True))
    decisions = explain(catalog, "container.delete")
    served = _by(decisions, "exposure", "served")
    assert served.value is False and "read-only" in served.why
    assert not [d for d in decisions if d.what.startswith("surface ")]


def test_secret_arguments_are_listed(catalog):
    # an action with a password argument (by its name words)
    aid = next(a.id for a in catalog.actions.values()
               if any(catalog.redaction.is_secret_name(k) for k in a.input_schema.get("properties", {})))
    secret = _by(explain(catalog, aid), "redaction", "secret arguments")
    assert secret.value and all(catalog.redaction.is_secret_name(k) or "/" in k for k in secret.value)


def test_unknown_action_suggests(catalog):
    with pytest.raises(UnknownAction) as err:
        explain(catalog, "contianer.lst")
    assert err.value.code == "unknown_action" and "container.list" in err.value.message


def test_cli_json_and_text_and_unknown():
    runner = CliRunner()
    result = runner.invoke(main, ["explain", "container.list", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["action"] == "container.list"
    assert {"route", "classification", "exposure", "inputs", "rendering", "guidance", "redaction", "hints"} <= {d["topic"] for d in data["decisions"]}
    for d in data["decisions"]:
        if d["origin"] is not None:  # every origin names a real file of the checkout
            assert (ROOT / d["origin"]["file"]).is_file(), d
    text = runner.invoke(main, ["explain", "project.destroy"])
    assert text.exit_code == 0 and text.output.splitlines()[0] == "# project.destroy"
    bad = runner.invoke(main, ["explain", "restart_container"])
    assert bad.exit_code == 2
    assert len(bad.output.strip().splitlines()) == 1 and "container.restart" in bad.output and "Traceback" not in bad.output


def test_the_permission_arcane_checks_is_shown_with_its_entry(catalog):
    """The permission decides whether a credential sees the action (catalog/permissions.yaml)."""
    from interpreter.build.access import entry_for

    for aid in ("container.delete", "health.head"):
        entry = entry_for(catalog, catalog.actions[aid])
        perm = _by(explain(catalog, aid), "route", "permission")
        assert perm.origin is not None and perm.origin.file == "catalog/permissions.yaml"
        assert perm.value == (entry.permission or entry.check)
        assert entry.src in perm.why
    assert _by(explain(catalog, "container.delete"), "route", "path").value.startswith("/api/")
