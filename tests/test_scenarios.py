"""The scenario suite (tests/scenarios/) against the simulator: every scenario runs here,
through the real dispatcher and renderer, and the MCP ones also through a real MCP
client session over stdio on every surface. `make e2e` runs the same scenarios against a
real Arcane (tests/real_arcane_e2e.py)."""

from __future__ import annotations

import pytest

from tests.scenarios.harness import dispatch_driver, load_all, mcp_driver, simulator_target

pytestmark = pytest.mark.anyio
SCENARIOS = load_all()
SURFACES = ("dynamic", "meta", "individual")


@pytest.fixture(scope="module")
def target(sim, catalog):
    return simulator_target(sim, catalog, image="busybox:1.36.1")


def test_the_simulator_can_run_every_scenario(target):
    """Nothing is skipped on the simulator: it lacks nothing any scenario needs."""
    assert not target.lacks
    assert all(target.missing(e.needs) is None for e in SCENARIOS.values())
    assert len(SCENARIOS) >= 10


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario(target, name):
    async with dispatch_driver(target) as driver:
        await SCENARIOS[name].run(target, driver)


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("name", sorted(n for n, e in SCENARIOS.items() if e.mcp))
async def test_scenario_over_mcp(target, name, surface):
    async with mcp_driver(target, surface) as driver:
        await SCENARIOS[name].run(target, driver)
