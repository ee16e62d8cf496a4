"""Fixtures shared by the simulator's write tests: one simulator per module, reset before
each test (state, faults, violations), and no answer that breaks Arcane's contract after it.
A module takes them with `sim, fresh = simulator_fixtures.sim, simulator_fixtures.fresh`."""

from __future__ import annotations

import pytest

from simulator import start_simulator


@pytest.fixture(scope="module")
def sim():
    with start_simulator() as s:
        yield s


@pytest.fixture(autouse=True)
def fresh(sim):
    sim.reset()
    sim.set_faults({})
    sim.clear_violations()
    yield
    assert sim.violations == [], [v.as_dict() for v in sim.violations]
