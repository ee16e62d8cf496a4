"""`make e2e`: the scenario suite (tests/scenarios/) against a REAL Arcane, the same
scenarios `make test` runs against the simulator.

    ARCANE_URL, ARCANE_API_KEY   the Arcane and a key (required)
    ARCANE_ENVIRONMENT_ID        the environment (Docker host) to use, default 0
    ARCANE_E2E_IMAGE             the small image the pull/container scenarios use (busybox:1.36.1)
    ARCANE_E2E_READ_ONLY=1       run the read scenarios only: nothing is created

Write scenarios create only resources named arcane-mcp-e2e-<random>-… and remove them in
`finally`; an image is removed only when the scenario pulled it. A scenario that needs
what a real Arcane cannot give (faults on purpose, its request records, a login whose
rate limit it would exhaust) is skipped here with that reason, and runs on the simulator.
At the end (the teardown of the module's `target`, whatever ran and in whatever order),
every domain a scenario creates in is listed and the run fails naming anything left with
the prefix arcane-mcp-e2e- (tests/scenarios/leftovers.py); not with ARCANE_E2E_READ_ONLY.
Not collected by `make test` (file name).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from interpreter.build.catalog import build
from tests.scenarios.harness import WRITES, dispatch_driver, load_all, mcp_driver, real_target
from tests.scenarios.leftovers import leftovers

pytestmark = pytest.mark.anyio
SCENARIOS = load_all()
SURFACES = ("dynamic", "meta", "individual")


@pytest.fixture(scope="module")
def target():
    assert os.environ.get("ARCANE_URL") and os.environ.get("ARCANE_API_KEY"), \
        "make e2e needs ARCANE_URL and ARCANE_API_KEY of a real Arcane"
    target = real_target(build())
    yield target
    if WRITES not in target.lacks:  # nothing was created on a read-only run
        left = asyncio.run(leftovers(target))
        assert not left, f"the scenarios left this behind on {target.url}: {left}"


def _runnable(target, name):
    why = target.missing(SCENARIOS[name].needs)
    if why:
        pytest.skip(f"{name} cannot run on a real Arcane: {why}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario(target, name):
    _runnable(target, name)
    async with dispatch_driver(target) as driver:
        await SCENARIOS[name].run(target, driver)


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("name", sorted(n for n, e in SCENARIOS.items() if e.mcp))
async def test_scenario_over_mcp(target, name, surface):
    _runnable(target, name)
    async with mcp_driver(target, surface) as driver:
        await SCENARIOS[name].run(target, driver)
