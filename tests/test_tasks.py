"""Long operations as MCP tasks (the io.modelcontextprotocol/tasks extension, 2026-07-28)
through a real MCP client session over stdio (`interp serve`) against the simulator: a
pull answers a task handle, `tasks/get` reports it until it completes with the result the
blocking call returns; a cancelled task cancels Arcane's activity; a restarted server
answers from Arcane; a client without the extension keeps the blocking call. The SDK's
client has no tasks API: the requests are sent raw through its session, as a
ClientExtension's claim resolver does.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.extension import ClientExtension, ResultClaim
from pydantic import ConfigDict, Field

from interpreter.front.names import EXECUTE_TOOL
from tests.helpers import list_tools_then_drift_read
from tests.test_e2e import INTERP, text

pytestmark = pytest.mark.anyio
EXTENSION = "io.modelcontextprotocol/tasks"
SECRET = "arcane-mcp-test-state-secret-0123456789abcdef"
WAIT = 60.0  # seconds a task may take to settle (a bound on waiting, not an assertion on time)
PULL = {"action": "image.pull", "params": {"imageName": "nginx", "tag": "1.27"}}


class TaskHandle(types.Result):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class TasksGet(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class TasksCancel(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class Detailed(types.Result):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    status: str | None = None
    result: dict[str, Any] | None = None


class Tasks(ClientExtension):
    """The test's tasks client: records each handle and every status seen; `cancel` makes
    the resolver cancel the task before polling."""

    identifier = EXTENSION

    def __init__(self, cancel: bool = False):
        self.cancel = cancel
        self.handles: list[TaskHandle] = []
        self.statuses: list[str] = []
        self.session = None

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve)]

    async def poll(self, session, task_id: str) -> Detailed:
        return await session.send_request(TasksGet(params=TaskIdParams(taskId=task_id)), Detailed)

    async def resolve(self, handle: TaskHandle, ctx) -> types.CallToolResult:
        self.handles.append(handle)
        self.session = ctx.session
        if self.cancel:
            await ctx.session.send_request(TasksCancel(params=TaskIdParams(taskId=handle.task_id)), Detailed)
        with anyio.fail_after(WAIT):
            while True:
                got = await self.poll(ctx.session, handle.task_id)
                self.statuses.append(got.status)
                if got.status == "completed":
                    return types.CallToolResult.model_validate(got.result)
                if got.status == "cancelled":
                    return types.CallToolResult(content=[types.TextContent(type="text", text="cancelled")], is_error=True)
                await anyio.sleep(0.1)


@asynccontextmanager
async def session(sim, *, extensions=(), mode="auto"):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_STATE_SECRET": SECRET}
    async with Client(StdioServerParameters(command=INTERP, args=["serve"], env=env), mode=mode, extensions=list(extensions)) as client:
        await list_tools_then_drift_read(client, sim.url)  # as a client does after initialize; the start's reads are then done
        yield client


@pytest.fixture(autouse=True)
def fresh(sim):
    sim.reset()
    sim.set_faults({})
    sim.set_knobs({})
    sim.clear_requests()


FRAMINGS = ["ndjson", "sse"]  # the operation streams as JSON lines (≤ 2.14) and as server-sent events (2.15)


def comparable(res: types.CallToolResult) -> tuple:
    """Text and structuredContent, the activity ID (a new one per pull) left out."""
    s = dict(res.structured_content or {})
    activity = s.pop("activityId", None)
    return text(res).replace(str(activity), "<activity>"), s, res.is_error


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_pull_as_a_task_ends_with_the_blocking_calls_result(sim, framing):
    sim.set_knobs({"stream_framing": framing})
    async with session(sim) as client:
        blocking = await client.call_tool(EXECUTE_TOOL, PULL)
    assert not blocking.is_error, text(blocking)
    tasks = Tasks()
    async with session(sim, extensions=[tasks]) as client:
        assert client.protocol_version == "2026-07-28"
        assert EXTENSION in (client.server_capabilities.extensions or {})
        res = await client.call_tool(EXECUTE_TOOL, PULL)
    assert [h.status for h in tasks.handles] == ["working"] and tasks.handles[0].task_id.startswith("v1.")
    assert tasks.statuses[-1] == "completed" and set(tasks.statuses) <= {"working", "completed"}
    assert comparable(res) == comparable(blocking)


async def test_a_restarted_server_answers_tasks_get_from_arcane(sim):
    tasks = Tasks()
    async with session(sim, extensions=[tasks]) as client:
        await client.call_tool(EXECUTE_TOOL, PULL)
    task_id = tasks.handles[0].task_id
    again = Tasks()
    async with session(sim, extensions=[again]) as client:  # a new process, the same secret
        with anyio.fail_after(WAIT):
            await client.list_tools()
        got = await again.poll(client.session, task_id)
        with pytest.raises(MCPError) as bad:  # a tampered ID
            await again.poll(client.session, task_id[:-6] + ("AAAAAA" if not task_id.endswith("AAAAAA") else "BBBBBB"))
    assert bad.value.code == -32602
    assert got.status == "completed"
    result = types.CallToolResult.model_validate(got.result)
    assert not result.is_error and result.structured_content["status"] == "done"
    assert result.structured_content["activityId"] in {a["id"] for a in sim.items("activities")}


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_cancelled_task_cancels_the_activity(sim, framing):
    sim.set_knobs({"stream_line_seconds": 0.5, "stream_framing": framing})  # a pull that takes a while
    tasks = Tasks(cancel=True)
    try:
        async with session(sim, extensions=[tasks]) as client:
            res = await client.call_tool(EXECUTE_TOOL, PULL)
    finally:
        sim.set_knobs({})
    assert res.is_error and tasks.statuses[-1] == "cancelled"
    cancels = [r for r in sim.requests() if r.method == "POST" and r.path.endswith("/cancel")]
    assert len(cancels) == 1 and "/activities/" in cancels[0].path


async def test_without_the_extension_the_call_blocks_and_tasks_methods_refuse(sim):
    async with session(sim) as client:
        res = await client.call_tool(EXECUTE_TOOL, PULL)
        assert not res.is_error and res.structured_content["status"] == "done"
        with pytest.raises(MCPError) as refused:
            await client.session.send_request(TasksGet(params=TaskIdParams(taskId="v1.x")), Detailed)
    assert refused.value.code == -32021
    async with session(sim, mode="legacy") as client:
        res = await client.call_tool(EXECUTE_TOOL, PULL)
    assert not res.is_error and res.structured_content["status"] == "done"
