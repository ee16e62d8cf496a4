"""The scenario suite (tests/scenarios/) against the simulator: every scenario runs here,
through the real dispatcher and renderer, and the MCP ones also through a real MCP
client session over stdio on every surface. `make e2e` runs the same scenarios against a
real Arcane (tests/real_arcane_e2e.py).

Nothing is left behind: when the module's scenarios have run (whichever ran, in whatever
order: the check is the teardown of the module's `target`, not a test that must come
last), every domain a scenario creates in is listed and nothing may carry the
scenarios' prefix (tests/scenarios/leftovers.py)."""

from __future__ import annotations

import asyncio

import pytest

from tests.scenarios.harness import WRITES, dispatch_driver, load_all, mcp_driver, simulator_target
from tests.scenarios.leftovers import PREFIX, leftovers, lists_for

pytestmark = pytest.mark.anyio
SCENARIOS = load_all()
SURFACES = ("dynamic", "meta", "individual")


@pytest.fixture(scope="module")
def target(sim, catalog):
    target = simulator_target(sim, catalog, image="busybox:1.36.1")
    yield target
    left = asyncio.run(leftovers(target))
    assert not left, f"the scenarios left behind: {left}"


def test_the_simulator_can_run_every_scenario(target):
    """Nothing is skipped on the simulator: it lacks nothing any scenario needs."""
    assert not target.lacks
    assert all(target.missing(e.needs) is None for e in SCENARIOS.values())
    assert len(SCENARIOS) >= 40  # issue 22: at least 40 scenarios of every kind of work


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario(target, name):
    async with dispatch_driver(target) as driver:
        await SCENARIOS[name].run(target, driver)


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("name", sorted(n for n, e in SCENARIOS.items() if e.mcp))
async def test_scenario_over_mcp(target, name, surface):
    async with mcp_driver(target, surface) as driver:
        await SCENARIOS[name].run(target, driver)


async def test_the_leftover_check_names_what_is_left(target):
    """The end-of-run check is not vacuous: it reads every list, and a network and a git
    repository of the prefix, left on purpose, are named until they are removed."""
    assert {a.split(".")[0] for a, _ in lists_for(target)} >= {
        "container", "image", "volume", "network", "project", "webhook", "gitops_sync", "registry", "variable",
        "template", "user", "api_key", "git_repository", "role", "federated_credential", "swarm_stack", "swarm_service"}
    name = f"{PREFIX}leftover-check"
    async with dispatch_driver(target) as driver:
        net = await driver.call("network.create", {"name": name, "options": {"driver": "bridge"}})
        repo = await driver.call("git_repository.create", {"name": name, "url": f"https://{name}.invalid/x.git", "authType": "none"})
        try:
            assert not net.is_error and not repo.is_error, (net.text, repo.text)
            left = await leftovers(target)
            assert sorted(line.split(":")[0] for line in left) == ["git_repository.list", "network.list"], left
            assert all(name in line for line in left), left
        finally:
            await driver.call("network.delete", {"networkId": name}, confirm=True)
            await driver.call("git_repository.delete", {"id": repo.structured["id"]}, confirm=True)
    assert await leftovers(target) == []
    assert WRITES not in target.lacks
