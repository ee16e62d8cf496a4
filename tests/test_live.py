"""The live channel end to end: a real MCP client session over stdio (`interp serve`)
against the simulator's GET /stream (heartbeats every 15 s × time_scale), in both
protocol eras: stream.watch's bounded capture and summary per channel, and the resource
subscriptions built on the channel (catalog/conventions.yaml `live`, rules/resources.yaml
`updates`).
"""

from __future__ import annotations

import pytest

from interpreter.names import EXECUTE_TOOL
from tests.test_e2e import ERAS, session, text

pytestmark = pytest.mark.anyio
FAST = {"time_scale": 0.01}  # a heartbeat per 0.15 s, a dashboard poll per 0.15 s


@pytest.fixture(scope="module")
def sim():
    from interpreter.simulator import start_simulator

    with start_simulator(knobs=FAST) as s:
        yield s
        assert s.violations == [], s.violations


@pytest.fixture(autouse=True)
def fresh(sim):
    sim.reset()
    sim.set_faults({})
    sim.set_knobs(FAST)
    sim.clear_requests()


async def watch(client, **params):
    return await client.call_tool(EXECUTE_TOOL, {"action": "stream.watch", "params": params})


@pytest.mark.parametrize("era", ERAS)
async def test_stream_watch_captures_for_a_bounded_time(sim, era):
    async with session(sim.url, sim.api_key, "dynamic", era) as client:
        res = await watch(client, seconds=1)
    assert not res.is_error, text(res)
    s = res.structured_content
    assert s["endedBy"] == "seconds" and s["heartbeats"] >= 1
    assert set(s["channels"]) == {"environments", "dashboard", "activities"}  # the declared default
    dash = s["channels"]["dashboard"]
    assert dash["lines"] >= 1 and dash["types"].get("snapshot", 0) >= 1 and "0" in dash["environments"]
    assert dash["newest"] and all("containers" in n or n["type"] != "snapshot" for n in dash["newest"])
    assert s["lines"] == s["heartbeats"] + sum(c["lines"] for c in s["channels"].values())
    # the bounds are the call's own: only the channels reach Arcane
    reqs = [r for r in sim.requests() if r.path == "/api/stream"]
    assert len(reqs) == 1 and dict(reqs[0].query) == {"channels": "environments,dashboard,activities"}


@pytest.mark.parametrize("era", ERAS)
async def test_stream_watch_stops_at_the_line_bound(sim, era):
    async with session(sim.url, sim.api_key, "dynamic", era) as client:
        res = await watch(client, channels="Dashboard", maxLines=4, seconds=60)
    assert not res.is_error, text(res)
    s = res.structured_content
    assert s["endedBy"] == "lines" and s["lines"] == 4
    assert list(s["channels"]) == ["dashboard"] and s["channels"]["dashboard"]["lines"] + s["heartbeats"] == 4
    assert [dict(r.query) for r in sim.requests() if r.path == "/api/stream"] == [{"channels": "dashboard"}]


@pytest.mark.parametrize("era", ERAS)
async def test_stream_watch_bad_bound_names_the_field(sim, era):
    async with session(sim.url, sim.api_key, "dynamic", era) as client:
        res = await watch(client, seconds=-1)
    assert res.is_error and "seconds" in text(res)
    assert not [r for r in sim.requests() if r.path == "/api/stream"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_dropped_channel_returns_what_came_with_a_note(sim, era):
    sim.set_faults({"drop": {"match": "/stream", "after": 3}})
    async with session(sim.url, sim.api_key, "dynamic", era) as client:
        res = await watch(client, seconds=30)
    assert not res.is_error, text(res)
    s = res.structured_content
    assert s["endedBy"] in ("broken", "closed") and s["lines"] == 3
