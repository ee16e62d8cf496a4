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
SWARM = "swarm"  # an environment that is a Swarm manager
SYSTEM_BACKUPS = "system_backups"  # a global admin key and a stored recovery key: Arcane's own backups
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
    if not os.environ.get("ARCANE_E2E_SWARM"):
        lacks[SWARM] = "ARCANE_E2E_SWARM is not set: the environment is not known to be a Swarm manager"
    if not os.environ.get("ARCANE_E2E_SYSTEM_BACKUPS"):
        lacks[SYSTEM_BACKUPS] = "ARCANE_E2E_SYSTEM_BACKUPS is not set: a system backup snapshots this Arcane's data (it needs a stored recovery key)"
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
        self.dispatcher = Dispatcher(_catalog_for(target, self.settings), self.settings, self.client, self.audit)
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

    # the MCP side (resources, prompts, subscriptions, tasks): the same server the MCP
    # driver runs as a process, built over these settings and reached in memory

    async def read_resource(self, uri: str) -> Resource:
        async with memory_client(self.settings) as client:
            return await mcp_read_resource(client, uri)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> Prompt:
        async with memory_client(self.settings) as client:
            return await mcp_get_prompt(client, name, arguments)

    def watch(self, uri: str):
        return _watching(memory_client(self.settings), uri)

    async def call_as_task(self, action_id: str, params: dict | None = None) -> TaskRun:
        tasks = TasksClient()
        async with memory_client(self.settings, extensions=[tasks]) as client:
            return await mcp_call_as_task(client, tasks, self.surface, action_id, params)

    def variant(self, **settings: Any):
        """The same driver with these settings as well (safe_mode=True, read_only=True…)."""
        target, surface, base = self.target, self.surface, self.settings

        @asynccontextmanager
        async def opened():
            kw = {k: getattr(base, k) for k in ("api_key", "audit_log", "environment_id")}
            async with dispatch_driver(target, surface, **{**kw, **settings}) as driver:
                yield driver

        return opened()


class McpDriver:
    """Calls through a real MCP client session over stdio (`interp serve`), one surface."""

    def __init__(self, client, surface: str, target: Target | None = None, env: dict[str, str] | None = None):
        from tests.test_e2e import Caller

        self.surface = surface
        self.client, self.target, self.env = client, target, dict(env or {})
        self._caller = Caller(client, surface)

    def name(self, action_id: str) -> str:
        return self._caller.name(action_id)

    async def call(self, action_id: str, params: dict | None = None, confirm: bool = False) -> Outcome:
        res = await self._caller(action_id, params or {}, confirm)
        text = res.content[0].text if res.content else ""
        return Outcome(bool(res.is_error), text, res.structured_content)

    async def read_resource(self, uri: str) -> Resource:
        return await mcp_read_resource(self.client, uri)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> Prompt:
        return await mcp_get_prompt(self.client, name, arguments)

    def watch(self, uri: str):
        """A subscription on its own session of the same server (subscriptions/listen)."""
        return _watching(self._session(), uri)

    async def call_as_task(self, action_id: str, params: dict | None = None) -> TaskRun:
        tasks = TasksClient()
        async with self._session(extensions=[tasks]) as client:
            return await mcp_call_as_task(client, tasks, self.surface, action_id, params)

    def variant(self, **settings: Any):
        """A new `interp serve` with these settings as well, as ARCANE_MCP_* variables."""
        env = {**self.env, **{f"ARCANE_MCP_{k.upper()}": _env_value(v) for k, v in settings.items()}}
        return mcp_driver(self.target, self.surface, **env)

    def _session(self, extensions=()):
        return stdio_client(self.target, self.surface, extensions, **self.env)


@asynccontextmanager
async def dispatch_driver(target: Target, surface: str = "dynamic", **settings: Any):
    driver = DispatchDriver(target, surface, **settings)
    await driver.start()
    try:
        yield driver
    finally:
        await driver.aclose()


@asynccontextmanager
async def mcp_driver(target: Target, surface: str, era: str = "auto", **env: str):
    from tests.test_e2e import session

    async with session(target.url, target.api_key, surface, era, ARCANE_ENVIRONMENT_ID=target.environment, **env) as client:
        yield McpDriver(client, surface, target, env)


# ---------------------------------------------------------------- the MCP side
#
# What a model's client does besides tool calls, the same on both drivers: read a
# resource, get a prompt, watch a resource for changes, run a long call as an MCP task.


@dataclass
class Resource:
    """One resource read: its text, media type and (JSON) value; or the JSON-RPC error."""

    uri: str
    text: str = ""
    mime_type: str | None = None
    value: Any = None
    error_code: int | None = None


@dataclass
class Prompt:
    """One prompt got: its steps' text and the guide it embeds."""

    text: str
    guide_uri: str | None
    guide_text: str | None


@dataclass
class TaskRun:
    """A call run as an MCP task: the handles' and polls' statuses, and the final result."""

    handles: list[str]  # the first status of each task handle
    statuses: list[str]  # every tasks/get status seen
    outcome: Outcome


def _catalog_for(target: Target, settings: Settings) -> Catalog:
    """The target's catalog, or one built for the settings that filter it (read-only, exclusions)."""
    if not settings.read_only and not settings.exclude_tools:
        return target.catalog
    from interpreter.build.catalog import BuildOptions, build

    return build(BuildOptions(environment_default=settings.environment_id, read_only=settings.read_only,
                              exclude=settings.exclude_tools))


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return ",".join(value) if isinstance(value, (list, tuple)) else str(value)


@asynccontextmanager
async def stdio_client(target: Target, surface: str, extensions=(), **env: str):
    """An MCP client session (protocol 2026-07-28) with a new `interp serve` process, as
    tests/test_e2e.py's session starts it, with client extensions."""
    from mcp import Client, StdioServerParameters

    from tests.helpers import list_tools_then_drift_read
    from tests.test_e2e import INTERP

    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": target.url, "ARCANE_API_KEY": target.api_key,
            "ARCANE_MCP_SURFACE": surface, "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_ENVIRONMENT_ID": target.environment, **env}
    params = StdioServerParameters(command=INTERP, args=["serve"], env=full)
    async with Client(params, mode="auto", extensions=list(extensions)) as client:
        await list_tools_then_drift_read(client, target.url)  # as a client does after initialize
        yield client


@asynccontextmanager
async def memory_client(settings: Settings, extensions=()):
    """An MCP client session over the server `interp serve` builds, in memory (no process)."""
    from mcp import Client

    from interpreter.front.serve import build_runtime, build_server

    runtime = build_runtime(settings, audit=AuditLog("off"))
    server = build_server(runtime)
    await runtime.dispatcher.client.start()
    try:
        async with Client(server, mode="auto", extensions=list(extensions)) as client:
            yield client
    finally:
        await runtime.dispatcher.client.aclose()


async def mcp_read_resource(client, uri: str) -> Resource:
    import json

    from mcp import MCPError

    try:
        result = await client.read_resource(uri)
    except MCPError as exc:
        return Resource(uri, str(exc), error_code=exc.code)
    (content,) = result.contents
    text = getattr(content, "text", "")
    value = json.loads(text) if content.mime_type == "application/json" else None
    return Resource(str(content.uri), text, content.mime_type, value)


async def mcp_get_prompt(client, name: str, arguments: dict[str, str]) -> Prompt:
    got = await client.get_prompt(name, arguments)
    texts = [m.content.text for m in got.messages if m.content.type == "text"]
    embedded = [m.content.resource for m in got.messages if m.content.type == "resource"]
    guide = embedded[0] if embedded else None
    return Prompt("\n".join(texts), str(guide.uri) if guide else None, getattr(guide, "text", None) if guide else None)


class Watch:
    """A resource watched through subscriptions/listen: `changed()` waits for its next update."""

    def __init__(self, subscription, uri: str):
        self._sub, self.uri = subscription, uri
        self.honored = list(subscription.honored.resource_subscriptions or [])

    async def changed(self, within: float = 30.0) -> str:
        import anyio

        with anyio.fail_after(within):  # a bound on waiting, not an assertion on time
            event = await self._sub.__anext__()
        return str(event.uri)


@asynccontextmanager
async def _watching(opened_session, uri: str):
    async with opened_session as client, client.listen(resource_subscriptions=[uri]) as sub:
        yield Watch(sub, uri)


def TasksClient():
    """The tasks extension's client side (tests/test_tasks.py): records handles and polls."""
    from tests.test_tasks import Tasks

    return Tasks()


async def mcp_call_as_task(client, tasks, surface: str, action_id: str, params: dict | None) -> TaskRun:
    from tests.test_e2e import Caller

    res = await Caller(client, surface)(action_id, params or {})
    text = res.content[0].text if res.content else ""
    return TaskRun([h.status for h in tasks.handles], list(tasks.statuses), Outcome(bool(res.is_error), text, res.structured_content))


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
