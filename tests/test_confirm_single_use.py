"""Single-use confirmations of the 2026-07-28 era (interpreter/front/confirmation.py): a
sealed round is answered once on the replica that sees it (a replay, or an accept after a
decline, is refused with a stable code and Arcane sees one DELETE at most), bound to the
call's arguments, with a short expiry (ARCANE_MCP_CONFIRM_EXPIRY); a forged or garbled
seal is the boundary's refusal; the store of answered rounds stays bounded. In process
(in-memory transport), over a real stdio process and over HTTP."""

from __future__ import annotations

import asyncio
import contextlib

import mcp.types as types
import pytest
from mcp import MCPError

from interpreter.config import load_settings
from interpreter.front import confirmation
from interpreter.front.confirmation import UsedSeals, consume, opened, refusal, state_for
from interpreter.front.names import EXECUTE_TOOL
from tests import simulator_fixtures
from tests.test_safety import answering, base_env, exited_container, serve, serve_in_process

sim, fresh = simulator_fixtures.sim, simulator_fixtures.fresh

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

ACCEPT = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
DECLINE = {"confirm": types.ElicitResult(action="decline")}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def delete_args(target: dict) -> dict:
    return {"action": "container.delete", "params": {"containerId": target["id"]}}


def deletes(sim) -> list:
    return [r for r in sim.requests() if r.method == "DELETE"]


async def ask(client, args: dict) -> types.InputRequiredResult:
    first = await client.session.call_tool(EXECUTE_TOOL, args, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult) and first.request_state
    return first


async def answer(client, args: dict, state: str, responses: dict):
    return await client.session.call_tool(EXECUTE_TOOL, args, input_responses=responses, request_state=state,
                                          allow_input_required=True)


async def refused_with(client, args: dict, state: str, responses: dict) -> dict:
    """The answer is refused: JSON-RPC -32602 whose data names the reason; its data."""
    with pytest.raises(MCPError) as ei:
        await answer(client, args, state, responses)
    assert ei.value.code == -32602
    return ei.value.error.data


async def accept_then_replay(client, sim) -> None:
    """One round accepted (the DELETE runs), then the same answer again: refused, no second DELETE."""
    target = exited_container(sim)
    args = delete_args(target)
    first = await ask(client, args)
    sim.clear_requests()
    done = await answer(client, args, first.request_state, ACCEPT)
    assert isinstance(done, types.CallToolResult) and not done.is_error
    data = await refused_with(client, args, first.request_state, ACCEPT)
    assert data["reason"] == "confirmation_replayed" and data["tool"] == EXECUTE_TOOL and data["next"]
    assert [(r.method, r.path) for r in deletes(sim)] == [("DELETE", f"/api/environments/0/containers/{target['id']}")]


# ------------------------------------------------------------------ in process


@contextlib.asynccontextmanager
async def in_process(sim, **settings):
    async with serve_in_process(sim, "dynamic", "auto", settings=settings, elicitation_callback=answering("accept", [])) as client:
        yield client


async def test_an_accepted_round_runs_once_and_its_replay_is_refused(sim):
    async with in_process(sim) as client:
        await accept_then_replay(client, sim)


async def test_a_decline_is_final(sim):
    target = exited_container(sim)
    args = delete_args(target)
    async with in_process(sim) as client:
        first = await ask(client, args)
        sim.clear_requests()
        declined = await answer(client, args, first.request_state, DECLINE)
        assert isinstance(declined, types.CallToolResult) and declined.is_error
        data = await refused_with(client, args, first.request_state, ACCEPT)
        assert data["reason"] == "confirmation_replayed"
        # a new round asks anew and can be accepted
        again = await ask(client, args)
        assert again.request_state != first.request_state
        assert not (await answer(client, args, again.request_state, ACCEPT)).is_error
    assert len(deletes(sim)) == 1


async def test_an_answer_with_other_arguments_is_refused(sim):
    exited = [c for c in sim.items("containers") if c["state"] == "exited"]
    target = exited[0]
    args = delete_args(target)
    async with in_process(sim) as client:
        first = await ask(client, args)
        sim.clear_requests()
        for other in ({"action": "container.delete", "params": {"containerId": "another-one"}},
                      {"action": "container.delete", "params": {"containerId": target["id"], "force": True}},
                      {"action": "container.delete", "params": {"containerId": target["id"]}, "confirm": False}):
            data = await refused_with(client, other, first.request_state, ACCEPT)
            assert data["reason"] == "confirmation_arguments_changed"
        assert deletes(sim) == []
        # the refusals did not use the round up: answered with its own arguments, it runs
        assert not (await answer(client, args, first.request_state, ACCEPT)).is_error
    assert len(deletes(sim)) == 1


async def test_an_expired_round_is_refused(sim):
    target = exited_container(sim)
    args = delete_args(target)
    async with in_process(sim, confirm_expiry=0.3) as client:
        first = await ask(client, args)
        sim.clear_requests()
        await asyncio.sleep(0.5)
        data = await refused_with(client, args, first.request_state, ACCEPT)
        assert data["reason"] == "confirmation_expired"
    assert deletes(sim) == []


async def test_a_forged_or_garbled_seal_is_refused(sim):
    target = exited_container(sim)
    args = delete_args(target)
    async with in_process(sim) as client:
        first = await ask(client, args)
        sim.clear_requests()
        token = first.request_state
        # a plaintext state of ours, unsealed; a token cut short; one bit flipped; another secret's seal
        flipped = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
        for state in (state_for(EXECUTE_TOOL, args, 60), token[:-4], flipped, "v1." + "A" * 80):
            data = await refused_with(client, args, state, ACCEPT)
            assert data == {"reason": "invalid_request_state"}
        assert deletes(sim) == []
        assert not (await answer(client, args, token, ACCEPT)).is_error  # the genuine seal still answers once
    assert len(deletes(sim)) == 1


async def test_concurrent_answers_of_one_round_run_once(sim):
    target = exited_container(sim)
    args = delete_args(target)
    async with in_process(sim) as client:
        first = await ask(client, args)
        sim.clear_requests()
        outcomes = await asyncio.gather(*(answer(client, args, first.request_state, ACCEPT) for _ in range(5)),
                                        return_exceptions=True)
    ran = [o for o in outcomes if isinstance(o, types.CallToolResult) and not o.is_error]
    refused = [o for o in outcomes if isinstance(o, MCPError)]
    assert len(ran) == 1 and len(refused) == 4
    assert all(o.error.data["reason"] == "confirmation_replayed" for o in refused)
    assert len(deletes(sim)) == 1


# ------------------------------------------------------------------ over stdio and HTTP


async def test_over_stdio_a_replay_is_refused(sim):
    async with serve(base_env(sim), "auto", elicitation_callback=answering("accept", [])) as client:
        await accept_then_replay(client, sim)


async def test_over_http_a_replay_and_an_accept_after_a_decline_are_refused(sim):
    from tests.helpers import serve_http_in_thread
    from tests.test_http import client_for, env_for

    with serve_http_in_thread(env_for(sim, ARCANE_API_KEY=sim.api_key, ARCANE_MCP_AUDIT_LOG="off"), "127.0.0.1") as base:
        async with client_for(base, None, "auto", elicitation_callback=answering("accept", [])) as client:
            await accept_then_replay(client, sim)
            target = exited_container(sim)
            args = delete_args(target)
            first = await ask(client, args)
            sim.clear_requests()
            assert (await answer(client, args, first.request_state, DECLINE)).is_error
            data = await refused_with(client, args, first.request_state, ACCEPT)
            assert data["reason"] == "confirmation_replayed"
            assert deletes(sim) == []


# ------------------------------------------------------------------ the store of answered rounds


def test_ten_thousand_rounds_keep_the_store_bounded_and_none_is_replayable():
    seals = UsedSeals(limit=1000)
    states = [state_for("t", {"i": i}, 120) for i in range(10_000)]
    for i, s in enumerate(states):
        assert consume(s, "t", {"i": i}, seals) is None
        assert len(seals) <= 1000
    assert len(seals) == 1000 and len(seals._heap) == 1000
    # every one of them, the dropped included, is refused as answered
    assert {consume(s, "t", {"i": i}, seals) for i, s in enumerate(states)} == {"confirmation_replayed"}
    assert len(seals) == 1000


def test_answered_rounds_are_dropped_at_their_expiry():
    now = [1000.0]
    seals = UsedSeals(limit=100, clock=lambda: now[0])
    for _ in range(50):
        assert seals.use(opened(state_for("t", {}, 10, now=now[0])))
    assert len(seals) == 50
    now[0] += 11
    assert seals.use(opened(state_for("t", {}, 10, now=now[0])))
    assert len(seals) == 1 and seals.floor == 0.0


def test_the_refusal_codes_are_declared_once_with_a_next_step():
    r = state_for("t", {"a": 1}, 60, now=1000.0)
    assert refusal(r, "t", {"a": 1}, UsedSeals(), now=1001.0) is None
    assert refusal(r, "t", {"a": 1}, UsedSeals(), now=1061.0) == "confirmation_expired"
    assert refusal(r, "t", {"a": 2}, UsedSeals(), now=1001.0) == "confirmation_arguments_changed"
    assert refusal(r, "u", {"a": 1}, UsedSeals(), now=1001.0) == "confirmation_invalid"
    for bad in ("arcane-mcp/confirm/v1/t", confirmation.STATE_PREFIX + "{", confirmation.STATE_PREFIX + '{"t":1}', None, 7):
        assert refusal(bad, "t", {"a": 1}, UsedSeals()) == "confirmation_invalid"
    for code, (message, next_step) in confirmation.REFUSALS.items():
        assert code.startswith("confirmation_") and message and next_step and "\n" not in message + next_step
        err = confirmation.refused(code, "t").error
        assert err.code == -32602 and err.data == {"reason": code, "tool": "t", "next": next_step}


def test_the_expiry_is_a_setting_with_a_short_default():
    assert load_settings({}).confirm_expiry == 120.0
    assert load_settings({"ARCANE_MCP_CONFIRM_EXPIRY": "30s"}).confirm_expiry == 30.0  # bad values: tests/test_config.py
