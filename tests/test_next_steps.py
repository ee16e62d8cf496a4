"""Next steps that cannot hurt: none is destructive after a failed call or after a
destructive one (the catalog's destructive flag), and where the answer tells the item's
state the overlays' `states` decide which follow-ups it allows. Swept over every
destructive action, in-process (an in-memory Arcane)."""

from __future__ import annotations

import re

import httpx
import pytest

from interpreter.call.dispatch import Call
from interpreter.front.names import Namer
from interpreter.text.render import Renderer
from tests.helpers import make_dispatcher

pytestmark = pytest.mark.anyio

NAMER = Namer("dynamic")
FAILURES = (
    (400, {"title": "Bad Request", "status": 400, "detail": "bad"}),
    (404, {"title": "Not Found", "status": 404, "detail": "not found"}),
    (409, {"title": "Conflict", "status": 409, "detail": "conflict"}),
    (500, {"title": "Internal Server Error", "status": 500, "detail": "container is running: stop the container before removing or force remove"}),
    (200, {"success": True, "data": {"success": False, "errors": ["it failed"], "failed": ["x"]}}),
    (200, {"success": True, "data": {"errors": ["part of it failed"], "failed": ["x"]}}),
)


def _destructive_named(catalog, text: str, but: str) -> list[str]:
    """The destructive actions other than `but` that the text offers: in its "Next step"
    line or its "Next steps" section."""
    offered = "\n".join(line for line in text.splitlines() if line.startswith(("Next step:", "- ")))
    return [aid for aid, a in catalog.actions.items() if a.destructive and aid != but
            and re.search(rf"(?<![\w.]){re.escape(NAMER(aid))}(?!\w|\.\w)", offered)]


UUID = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"


def _args(catalog, action) -> dict:
    """Arguments that pass the action's schema: a value of the right type for each required
    one (an ID where the overlays say the argument takes one, so no name is looked up)."""
    props = action.input_schema.get("properties", {})
    out = {}
    for name in action.required:
        rule = catalog.arguments.get(name)
        if rule is not None and not rule.is_id("x"):
            assert rule.is_id(UUID), name
            out[name] = UUID
            continue
        schema = props.get(name, {})
        kind = schema.get("type")
        kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
        if "enum" in schema:
            out[name] = schema["enum"][0]
        elif kind == "integer" or kind == "number":
            out[name] = max(1, schema.get("minimum", 1))
        elif kind == "boolean":
            out[name] = True
        elif kind == "array":
            out[name] = []
        elif kind == "object":
            out[name] = {}
        else:
            out[name] = "x" * max(1, schema.get("minLength", 1))
    return out


def test_no_destructive_step_follows_a_destructive_action_or_a_partial_failure(catalog):
    renderer = Renderer(catalog)
    destructive = [a for a in catalog.actions.values() if a.destructive]
    assert len(destructive) > 50
    for action in catalog.actions.values():
        states = list(action.states.steps) if action.states is not None else []
        for state in [None, *states]:
            for cautious in (False, True):
                steps = renderer.step_ids(action, state, cautious)
                if action.destructive or cautious:
                    assert not [s for s in steps if catalog.actions[s].destructive], (action.id, state, cautious, steps)


async def test_every_destructive_actions_failure_offers_no_destructive_step(catalog):
    """Every destructive action, every kind of failure: the text's next steps name no
    other destructive action."""
    checked = 0
    for action in [a for a in catalog.actions.values() if a.destructive and a.handler == "rest"]:
        args = _args(catalog, action)
        for status, body in FAILURES:
            dispatcher, _ = make_dispatcher(catalog, lambda r, s=status, b=body: httpx.Response(s, json=b))
            res = await dispatcher.dispatch(Call(action.id, dict(args), True))
            assert res.error_code != "invalid_arguments", (action.id, res.text)
            assert _destructive_named(catalog, res.text, action.id) == [], (action.id, status, res.text)
            checked += 1
    assert checked >= 50 * len(FAILURES)


async def _get(catalog, action_id: str, data: dict, args: dict):
    dispatcher, _ = make_dispatcher(catalog, lambda r: httpx.Response(200, json={"success": True, "data": data}))
    return await dispatcher.dispatch(Call(action_id, args, False))


def _steps(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("### Next steps") + 1 if "### Next steps" in lines else len(lines)
    return [line[2:].split(" — ")[0] for line in lines[start:] if line.startswith("- ")]


async def test_an_exited_containers_get_offers_start_not_stop(catalog):
    item = {"id": "c1", "name": "web", "state": {"status": "exited", "running": False, "exitCode": 3}}
    steps = _steps((await _get(catalog, "container.get", item, {"containerId": "c1"})).text)
    assert "container.start" in steps and "container.stop" not in steps and "container.restart" not in steps
    item["state"] = {"status": "running", "running": True}
    steps = _steps((await _get(catalog, "container.get", item, {"containerId": "c1"})).text)
    assert "container.stop" in steps and "container.start" not in steps
    item["state"] = {"status": "paused", "running": True}
    steps = _steps((await _get(catalog, "container.get", item, {"containerId": "c1"})).text)
    assert "container.unpause" in steps and "container.stop" not in steps and "container.start" not in steps


async def test_an_unknown_or_hostile_state_offers_no_state_step(catalog):
    gated = catalog.actions["container.get"].states.gated
    for state in (None, "", "removing", "EXITED", "x" * 100_000, "exited\u202e", {"status": ["exited"]}, 7):
        item = {"id": "c1", "name": "web", "state": {"status": state} if not isinstance(state, dict) else state}
        steps = _steps((await _get(catalog, "container.get", item, {"containerId": "c1"})).text)
        assert not set(steps) & gated, (state, steps)
        assert "container.logs" in steps  # the ungated steps stay


async def test_a_project_state_decides_up_or_restart(catalog):
    project = {"id": "p1", "name": "blog", "status": "stopped"}
    steps = _steps((await _get(catalog, "project.get", project, {"projectId": "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"})).text)
    assert "project.up" in steps and "project.restart" not in steps


async def test_an_empty_list_offers_no_destructive_step(catalog):
    """Every list action whose next steps include a destructive one: answered with no
    items, it offers none of them (there is nothing to act on); answered with an item, the
    declared steps stand."""
    renderer = Renderer(catalog)
    checked = 0
    for action in catalog.actions.values():
        if action.handler != "rest" or not action.read_only:
            continue
        if not any(catalog.actions[i].destructive for i in renderer.step_ids(action) if i in catalog.actions):
            continue
        args = _args(catalog, action)
        empty = await _get(catalog, action.id, [], dict(args))
        if empty.is_error or (empty.structured or {}).get(catalog.conventions.envelope.items) != []:
            continue  # not an action whose answer is a list
        assert _destructive_named(catalog, empty.text, action.id) == [], (action.id, empty.text)
        one = await _get(catalog, action.id, [{"id": "a1", "name": "one"}], dict(args))
        assert _destructive_named(catalog, one.text, action.id) != [], (action.id, one.text)
        checked += 1
    assert checked >= 3
