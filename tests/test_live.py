"""The live channel end to end: a real MCP client session over stdio (`interp serve`)
against the simulator's GET /stream (heartbeats every 15 s × time_scale), in both
protocol eras: stream.watch's bounded capture and summary per channel, and the resource
subscriptions built on the channel (catalog/conventions.yaml `live`, rules/resources.yaml
`updates`).
"""

from __future__ import annotations

import pytest

from interpreter.front.names import EXECUTE_TOOL
from tests.helpers import fresh_simulator
from tests.test_e2e import ERAS, session, text

pytestmark = pytest.mark.anyio
FAST = {"time_scale": 0.01}  # a heartbeat per 0.15 s, a dashboard poll per 0.15 s


@pytest.fixture(scope="module")
def sim():
    from simulator import start_simulator

    with start_simulator(knobs=FAST) as s:
        yield s
        assert s.violations == [], s.violations


@pytest.fixture(autouse=True)
def fresh(sim):
    fresh_simulator(sim, FAST)


async def watch(client, **params):
    return await client.call_tool(EXECUTE_TOOL, {"action": "stream.watch", "params": params})


@pytest.mark.parametrize("framing", ["ndjson", "sse"])
@pytest.mark.parametrize("era", ERAS)
async def test_stream_watch_captures_for_a_bounded_time(sim, era, framing):
    sim.set_knobs({**FAST, "live_framing": framing})  # /stream as JSON lines or as server-sent events
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


# ---------------------------------------------------------------- resource subscriptions

RUNNING = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"  # blog web-1, running
CONTAINERS = "arcane://environment/0/containers"
WAIT = 20.0  # seconds an update that must come may take (a bound on waiting, not an assertion on time)


def stream_requests(sim) -> int:
    return len([r for r in sim.requests() if r.path == "/api/stream"])


async def stop_through_another_session(sim) -> None:
    async with session(sim.url, sim.api_key, "dynamic", "legacy") as other:
        res = await other.call_tool(EXECUTE_TOOL, {"action": "container.stop", "params": {"containerId": RUNNING}})
        assert not res.is_error, text(res)


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")  # the legacy protocol's own methods
async def test_legacy_subscription_gets_an_update_after_a_stop_elsewhere(sim):
    import anyio
    import mcp.types as types
    from mcp import Client, StdioServerParameters

    from tests.test_e2e import INTERP

    updates: list[str] = []
    got = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            got.set()

    import os

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off"}
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.resources.subscribe is True
        await client.subscribe_resource(CONTAINERS)
        await client.subscribe_resource("arcane://environment/7c9e6679-7425-40de-944b-e07fc1f90ae7/containers")  # another host
        with anyio.fail_after(WAIT):
            while stream_requests(sim) < 1:  # the hub's one upstream connection is open
                await anyio.sleep(0.05)
        await stop_through_another_session(sim)
        with anyio.fail_after(WAIT):
            await got.wait()
        assert updates[0] == CONTAINERS and all(u == CONTAINERS for u in updates)
        assert stream_requests(sim) == 1  # two subscriptions, one connection
        bad = None
        try:
            await client.subscribe_resource("arcane://nothing/here")
        except Exception as exc:  # MCPError
            bad = exc
        assert bad is not None and getattr(bad, "code", None) == -32602
        await client.unsubscribe_resource(CONTAINERS)
        await client.unsubscribe_resource("arcane://environment/7c9e6679-7425-40de-944b-e07fc1f90ae7/containers")


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_change_behind_arcanes_back_updates_through_the_dashboard_poll(sim):
    """No activity is published for a `docker stop` on the host: the dashboard line whose
    container counts moved is what updates the subscription (rules/resources.yaml
    `updates`, `changed`); the snapshots repeated every poll do not."""
    import os

    import anyio
    import mcp.types as types
    from mcp import Client, StdioServerParameters

    from tests.test_e2e import INTERP

    updates: list[str] = []

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off"}
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode="legacy", message_handler=on_message) as client:
        await client.subscribe_resource(CONTAINERS)
        with anyio.fail_after(WAIT):
            while stream_requests(sim) < 1:
                await anyio.sleep(0.05)
        await anyio.sleep(1.0)  # several polls (one per 0.15 s): the first snapshot sets the baseline
        settled = len(updates)
        assert settled <= 1  # at most the baseline; the repeats change nothing
        sim.change_behind_arcane("containers", RUNNING, {"state": "exited", "status": "Exited (0) 1 second ago"})
        with anyio.fail_after(WAIT):
            while len(updates) == settled:
                await anyio.sleep(0.05)
        assert updates[settled] == CONTAINERS
        await anyio.sleep(1.0)  # more polls of the same counts
        assert len(updates) == settled + 1
        assert RUNNING[:12] not in str(sim.items("activities", "0"))  # no activity (a stop through Arcane records one): the dashboard did it
        await client.unsubscribe_resource(CONTAINERS)


@pytest.mark.parametrize("framing", ["ndjson", "sse"])
async def test_listen_gets_an_update_after_a_stop_elsewhere(sim, framing):
    import anyio

    sim.set_knobs({**FAST, "live_framing": framing})
    async with session(sim.url, sim.api_key, "dynamic", "auto") as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[CONTAINERS]) as sub:
            assert list(sub.honored.resource_subscriptions or []) == [CONTAINERS]
            with anyio.fail_after(WAIT):
                while stream_requests(sim) < 1:
                    await anyio.sleep(0.05)
            await stop_through_another_session(sim)
            with anyio.fail_after(WAIT):
                event = await sub.__anext__()
            assert event.uri == CONTAINERS
            assert client.server_capabilities.resources.subscribe is True
        assert stream_requests(sim) == 1


async def test_the_hub_opens_one_connection_and_closes_it_with_the_last_listener(sim, catalog):
    """Bounded: a subscription past live.subscriptions.max_listeners is refused; the
    upstream connection lives exactly as long as some listener does."""
    import dataclasses

    import anyio

    from interpreter.call.dispatch import Dispatcher
    from interpreter.call.request import ArcaneClient
    from interpreter.config import Settings
    from interpreter.front.call_records import AuditLog
    from interpreter.front.resources import for_runtime
    from interpreter.front.subscriptions import SubscriptionRefused, for_resources

    settings = Settings(arcane_url=sim.url, api_key=sim.api_key, audit_log="off")
    client = ArcaneClient(settings)
    hub = for_resources(for_runtime(catalog, Dispatcher(catalog, settings, client, AuditLog("off"))))
    hub.live = dataclasses.replace(hub.live, max_listeners=2)

    async def notify(uri):
        pass

    try:
        first = hub.add(CONTAINERS, notify)
        second = hub.add("arcane://environment/0/images", notify)
        with pytest.raises(SubscriptionRefused) as refused:
            hub.add("arcane://environment/0/projects", notify)
        assert refused.value.code == "too_many"
        with pytest.raises(SubscriptionRefused) as unknown:
            hub.add("arcane://guides/nothing", notify)
        assert unknown.value.code == "unknown_uri"
        with anyio.fail_after(WAIT):
            while hub.connections < 1:
                await anyio.sleep(0.05)
        hub.remove(first)
        assert hub.open
        hub.remove(second)
        assert not hub.open and hub.connections == 1 == stream_requests(sim)
    finally:
        hub.close()
        await client.aclose()


def test_update_rules_name_their_mistakes(catalog):
    from interpreter.build.load import Loaded
    from interpreter.build.resource_rules import rule_problems

    data = {"data": [{"uri": "arcane://e/{environmentId}/c", "name": "c", "title": "C", "description": "d", "action": "container.list",
                      "arguments": {"environmentId": "{environmentId}"}}],
            "errors": {},
            "updates": [{"channel": "dashboard", "when": "a ==", "bind": {"environmentId": "x", "nope": "y"}, "changed": "[",
                         "uris": ["arcane://e/{environmentId}/c", "arcane://missing"]}]}
    codes = sorted(p.code for p in rule_problems(Loaded("rules/resources.yaml", data, data), [], catalog))
    assert codes == ["bad_jmespath", "bad_jmespath", "unknown_uri", "unknown_variable"]


@pytest.mark.parametrize("framing", ["ndjson", "sse"])
async def test_the_version_channel_is_captured_when_named(sim, framing):
    """2.14's `version` channel: asked for by name only; its newest lines described."""
    sim.set_knobs({**FAST, "live_framing": framing})
    async with session(sim.url, sim.api_key, "dynamic", "auto") as client:
        res = await watch(client, channels="version", seconds=1)
    assert not res.is_error, text(res)
    s = res.structured_content
    version = s["channels"]["version"]
    assert list(s["channels"]) == ["version"] and version["lines"] == 1 and version["types"] == {"snapshot": 1}
    assert version["newest"] == [{"type": "snapshot", "currentVersion": "2.12.0", "updateAvailable": False}]
    assert [dict(r.query) for r in sim.requests() if r.path == "/api/stream"] == [{"channels": "version"}]


def test_a_channel_nobody_declared_still_counts_its_types(catalog):
    from interpreter.call.live import Capture

    cap = Capture(catalog.conventions.live)
    cap.take(b'{"channel": "operations", "operations": {"type": "update", "environmentId": "0"}, "timestamp": "t1"}')
    cap.take({"channel": "operations", "operations": {"type": "error"}, "timestamp": "t2"})
    cap.take(None)
    got = cap.structured(["operations"], 1, 10)["channels"]["operations"]
    assert got["lines"] == 2 and got["types"] == {"error": 1, "update": 1} and got["newest"] == [{"type": "update"}, {"type": "error"}]
