"""Outcomes as data: an answer that reports its own failure (catalog/conventions.yaml
`outcome`) is shown as one — an error when the operation failed, a first line that says
so when part of it failed, an error when a create's answer lacks the identity its schema
requires — with structuredContent kept as Arcane's value. Through the simulator (its
`answer` fault) and through an in-memory Arcane for the adversarial values."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import httpx
import pytest

from interpreter.build.model import Expr
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.outcome import judge
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from interpreter.front.names import Namer
from interpreter.text.render import PARTLY
from simulator.faults import FaultError, parse_faults
from tests.helpers import fresh_simulator, make_dispatcher, ok_json

pytestmark = pytest.mark.anyio



async def _sim_call(sim, catalog, action: str, args: dict, faults: dict):
    fresh_simulator(sim, {})
    sim.set_faults(faults)
    settings = Settings(arcane_url=sim.url, api_key=sim.api_key, audit_log="off")
    client = ArcaneClient(settings)
    try:
        return await Dispatcher(catalog, settings, client, AuditLog("off")).dispatch(Call(action, args, True))
    finally:
        await client.aclose()
        sim.set_faults({})


async def _mock_call(catalog, action: str, body, args: dict | None = None):
    dispatcher, _ = make_dispatcher(catalog, lambda r: httpx.Response(200, json=body))
    return await dispatcher.dispatch(Call(action, args or {}, True))


def _named_destructive(catalog, text: str, but: str | None = None) -> list[str]:
    namer = Namer("dynamic")
    return [aid for aid, a in catalog.actions.items() if a.destructive and aid != but
            and re.search(rf"(?<![\w.]){re.escape(namer(aid))}(?!\w|\.\w)", text)]


# ---------------------------------------------------------------- through the simulator


async def test_a_result_whose_success_is_false_is_an_error(sim, catalog):
    errors = ["Failed to start container c0ffee: no space left on device"]
    res = await _sim_call(sim, catalog, "system.start_stopped", {},
                          {"answer": {"match": "start-all-stopped-containers", "set": {"success": False, "errors": errors}}})
    assert res.is_error and res.error_code == "result_failed"
    assert errors[0] in res.text.splitlines()[0]
    # structuredContent is Arcane's value, unchanged
    assert res.structured["success"] is False and res.structured["errors"] == errors
    assert _named_destructive(catalog, res.text) == []
    assert sim.violations == []


async def test_some_errors_beside_success_say_so_first(sim, catalog):
    res = await _sim_call(sim, catalog, "system.start_stopped", {},
                          {"answer": {"match": "start-all-stopped-containers",
                                      "set": {"success": True, "failed": ["c0ffee"], "errors": ["Failed to start container c0ffee: boom"]}}})
    assert not res.is_error
    first = res.text.splitlines()[0]
    assert first.startswith(PARTLY) and "c0ffee" in first and "boom" in first
    assert res.structured["failed"] == ["c0ffee"]
    assert _named_destructive(catalog, res.text) == []


async def test_a_create_answer_without_its_identity_says_so(sim, catalog):
    res = await _sim_call(sim, catalog, "network.create", {"name": "outcome-net", "options": {"driver": "bridge"}},
                          {"answer": {"match": "create-network", "remove": ["id"]}})
    assert res.is_error and res.error_code == "answer_incomplete"
    assert "network.list" in res.text  # where to check before creating it again
    assert "id" not in res.structured
    assert sim.violations == []  # changed after the simulator's own check: a fault, not a violation


async def test_a_clean_answer_is_a_success(sim, catalog):
    res = await _sim_call(sim, catalog, "volume.create", {"name": "outcome-clean"}, {})
    assert not res.is_error and res.structured.get("id")
    assert not res.text.startswith(PARTLY)
    res = await _sim_call(sim, catalog, "volume.create", {"name": "outcome-no-id"}, {"answer": {"match": "create-volume", "remove": ["id"]}})
    assert res.is_error and res.error_code == "answer_incomplete" and "volume.list" in res.text


def test_the_answer_fault_is_checked():
    rules, _, _ = parse_faults({"answer": {"set": {"success": False}, "remove": ["id"], "match": "prune-all", "count": 1}})
    assert rules[0].as_dict() == {"match": ["prune-all"], "count": 1, "set": {"success": False}, "remove": ["id"]}
    for bad in ({"answer": True}, {"answer": {"set": [1]}}, {"answer": {"remove": "id"}}, {"answer": {"set": {}, "bogus": 1}}):
        with pytest.raises(FaultError):
            parse_faults(bad)


# ---------------------------------------------------------------- in-memory Arcane


async def test_a_failed_count_without_success_is_a_partial_failure(catalog):
    # UpdaterResult: `success` is omitempty (absent when false), `failed` counts
    body = ok_json({"checked": 3, "updated": 1, "skipped": 0, "failed": 2, "duration": "1s",
                    "items": [{"resourceId": "r1", "resourceName": "web", "resourceType": "container", "status": "failed"}]})
    res = await _mock_call(catalog, "updater.run", json.loads(body.content))
    assert not res.is_error
    first = res.text.splitlines()[0]
    assert first.startswith(PARTLY) and "2 item(s) failed" in first and "web" in first


async def test_listed_errors_are_escaped_and_bounded(catalog):
    rules = catalog.conventions.outcome
    hostile = ["x" * 1_000_000, "a\x1b[31mred\u202eevil\nnext line", "", "`code` | pipe ## heading"] + [f"e{i}" for i in range(500)]
    body = {"success": True, "data": {"success": True, "started": [], "errors": hostile}}
    res = await _mock_call(catalog, "system.start_all", body)
    first = res.text.splitlines()[0]
    assert first.startswith(PARTLY)
    assert "\x1b" not in res.text and "\u202e" not in res.text
    assert len(first) < (rules.text_max + 10) * (rules.list_max + 2)
    assert f"and {len(hostile) - 1 - rules.list_max} more" in first  # the empty message is no error
    assert res.structured["errors"] == hostile


async def test_an_empty_value_or_odd_types_are_no_outcome(catalog):
    for data in ({"success": "false"}, {"success": None}, {"errors": "   "}, {"errors": [None, 1, {"a": 1}]},
                 {"failed": 0}, {"failed": True}, {"failed": -3}):
        res = await _mock_call(catalog, "system.start_all", {"success": True, "data": data})
        assert not res.is_error and not res.text.startswith(PARTLY), data


async def test_deeply_nested_answers_do_not_break_the_reading(catalog):
    deep: list | str = "bottom"
    for _ in range(10_000):
        deep = [deep]
    verdict = judge(catalog.conventions.outcome, {"success": True, "errors": deep, "failed": deep})
    assert verdict.clean or verdict.partial  # read without recursion errors
    assert verdict.errors == ()  # a list of lists is no list of messages


async def test_read_only_answers_are_not_outcomes(catalog):
    # a read reports the state of things, not the outcome of an operation
    res = await _mock_call(catalog, "container.counts", {"success": True, "data": {"success": False, "errors": ["x"]}})
    assert not res.is_error


async def test_the_engine_reads_the_declared_outcome_members(catalog):
    conv = catalog.conventions
    outcome = replace(conv.outcome, success=(Expr.of("ok"),), errors=(Expr.of("problems"),), failed=(Expr.of("broken"),))
    renamed = replace(catalog, conventions=replace(conv, outcome=outcome))
    res = await _mock_call(renamed, "system.start_all", {"success": True, "data": {"ok": False, "problems": ["boom"]}})
    assert res.is_error and res.error_code == "result_failed" and "boom" in res.text
    res = await _mock_call(renamed, "system.start_all", {"success": True, "data": {"success": False, "errors": ["boom"]}})
    assert not res.is_error  # the packaged names mean nothing once other ones are declared
    res = await _mock_call(renamed, "system.start_all", {"success": True, "data": {"broken": ["c1"]}})
    assert res.text.startswith(PARTLY) and "c1" in res.text.splitlines()[0]


async def test_identity_is_required_only_where_the_schema_requires_it(catalog):
    # container.restart answers a message: its schema requires no id
    res = await _mock_call(catalog, "container.restart", {"success": True, "data": {"message": "ok"}}, {"containerId": "abc"})
    assert not res.is_error
    res = await _mock_call(catalog, "volume.create", {"success": True, "data": {"id": ""}}, {"name": "v"})
    assert res.is_error and res.error_code == "answer_incomplete"
