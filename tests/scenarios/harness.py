"""The scenario harness: targets, drivers and the registry (see the package docstring)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from interpreter.build.catalog import Catalog
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from interpreter.text.render import Namer

# What a scenario may need beyond a credential; a target without it says why.
FAULTS = "faults"  # make Arcane fail, stall or lose its daemon on purpose
RECORDS = "records"  # see the requests Arcane received
LOGIN_LIMIT = "login_limit"  # a login whose rate limit a scenario may exhaust
WRITES = "writes"  # create (and remove) the scenario's own resources
PRUNE = "prune"  # run a prune, which also removes unused resources that are not the scenario's


@dataclass
class Outcome:
    """One call's result as a scenario sees it, whatever the driver."""

    is_error: bool
    text: str
    structured: dict | None
    code: str | None = None  # the dispatcher's error code (not on the wire: None over MCP)
    status: int | None = None  # Arcane's HTTP status (None over MCP)

    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""

    def next_step(self) -> str:
        return self.text.split("Next step:", 1)[1] if "Next step:" in self.text else ""


@dataclass
class Target:
    """Where the scenarios run: its address, a credential, and what it cannot do."""

    name: str  # simulator | real
    url: str
    api_key: str
    catalog: Catalog
    environment: str = "0"
    image: str = "busybox:1.36.1"  # small, pulled and removed by the image scenario
    lacks: dict[str, str] = field(default_factory=dict)  # need -> why this target cannot
    sim: Any = None  # the simulator handle (faults, request records) on the simulator
    login: tuple[str, str] | None = None  # a user whose login limit may be exhausted

    def missing(self, needs: frozenset[str]) -> str | None:
        """Why this target cannot run a scenario with these needs (None: it can)."""
        reasons = [self.lacks[n] for n in sorted(needs) if n in self.lacks]
        return "; ".join(reasons) or None

    def prefix(self) -> str:
        """A name prefix no other run or person uses: a scenario touches only its own."""
        return f"arcane-mcp-e2e-{uuid.uuid4().hex[:10]}"


def real_target(catalog: Catalog) -> Target:
    """The Arcane of ARCANE_URL/ARCANE_API_KEY (make e2e)."""
    lacks = {
        FAULTS: "a real Arcane cannot be made to fail, stall or lose its Docker daemon on purpose",
        RECORDS: "a real Arcane does not show the requests it received",
        LOGIN_LIMIT: "exhausting a real Arcane's login rate limit would lock its users out for a minute",
    }
    if not os.environ.get("ARCANE_E2E_PRUNE"):
        lacks[PRUNE] = "a prune removes every unused resource of the host, not only the scenario's (ARCANE_E2E_PRUNE=1 allows it)"
    if os.environ.get("ARCANE_E2E_READ_ONLY"):
        lacks[WRITES] = "ARCANE_E2E_READ_ONLY is set: nothing is created on this Arcane"
    return Target("real", os.environ.get("ARCANE_URL", ""), os.environ.get("ARCANE_API_KEY", ""), catalog,
                  environment=os.environ.get("ARCANE_ENVIRONMENT_ID", "0"),
                  image=os.environ.get("ARCANE_E2E_IMAGE", "busybox:1.36.1"), lacks=lacks)


def simulator_target(sim, catalog: Catalog, image: str) -> Target:
    """The simulator: it can do everything a scenario needs (it lacks nothing)."""
    return Target("simulator", sim.url, sim.api_key, catalog, image=image, sim=sim, login=("arcane", "arcane-admin"))


# ---------------------------------------------------------------- drivers


class DispatchDriver:
    """Calls through the real dispatcher, executor and renderer, in process."""

    def __init__(self, target: Target, surface: str = "dynamic", **settings: Any):
        self.target, self.surface = target, surface
        kw = {"api_key": target.api_key, "audit_log": "off", "environment_id": target.environment, **settings}
        self.settings = Settings(arcane_url=target.url, **kw)
        self.client = ArcaneClient(self.settings)
        self.audit = AuditLog("off")
        self.dispatcher = Dispatcher(target.catalog, self.settings, self.client, self.audit)
        self.progress: list[tuple[float, float | None, str]] = []

    async def start(self) -> None:
        await self.client.start()

    async def aclose(self) -> None:
        await self.client.aclose()

    def name(self, action_id: str) -> str:
        return Namer(self.surface)(action_id)

    async def call(self, action_id: str, params: dict | None = None, confirm: bool = False) -> Outcome:
        async def progress(value, total, message):
            self.progress.append((value, total, message))

        res = await self.dispatcher.dispatch(Call(action_id, dict(params or {}), confirm, self.surface, "scenario", progress))
        return Outcome(res.is_error, res.text, res.structured, res.error_code if res.is_error else None, res.http_status)


class McpDriver:
    """Calls through a real MCP client session over stdio (`interp serve`), one surface."""

    def __init__(self, client, surface: str):
        from tests.test_e2e import Caller

        self.surface = surface
        self._caller = Caller(client, surface)

    def name(self, action_id: str) -> str:
        return self._caller.name(action_id)

    async def call(self, action_id: str, params: dict | None = None, confirm: bool = False) -> Outcome:
        res = await self._caller(action_id, params or {}, confirm)
        text = res.content[0].text if res.content else ""
        return Outcome(bool(res.is_error), text, res.structured_content)


@asynccontextmanager
async def dispatch_driver(target: Target, surface: str = "dynamic", **settings: Any):
    driver = DispatchDriver(target, surface, **settings)
    await driver.start()
    try:
        yield driver
    finally:
        await driver.aclose()


@asynccontextmanager
async def mcp_driver(target: Target, surface: str, era: str = "auto"):
    from tests.test_e2e import session

    async with session(target.url, target.api_key, surface, era, ARCANE_ENVIRONMENT_ID=target.environment) as client:
        yield McpDriver(client, surface)


# ---------------------------------------------------------------- registry


Scenario = Callable[[Target, Any], Awaitable[None]]


@dataclass(frozen=True)
class Entry:
    name: str
    run: Scenario
    needs: frozenset[str]
    mcp: bool  # also run through a real MCP session on every surface


SCENARIOS: dict[str, Entry] = {}


def scenario(*needs: str, mcp: bool = False):
    """Register a scenario under its function name; `needs` are what the target must give."""

    def register(fn: Scenario) -> Scenario:
        assert fn.__name__ not in SCENARIOS, f"two scenarios named {fn.__name__}"
        SCENARIOS[fn.__name__] = Entry(fn.__name__, fn, frozenset(needs), mcp)
        return fn

    return register


def load_all() -> dict[str, Entry]:
    """Import every scenario module (registering its scenarios) and return the registry."""
    import importlib
    import pkgutil

    import tests.scenarios as package

    for module in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
        if module != "harness":
            importlib.import_module(f"tests.scenarios.{module}")
    return SCENARIOS
