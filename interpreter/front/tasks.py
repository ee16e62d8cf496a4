"""Long operations as MCP tasks: the `io.modelcontextprotocol/tasks` extension (protocol
2026-07-28, github:modelcontextprotocol/ext-tasks). For a request that declares it, a
task-capable action (catalog/conventions.yaml `activity.tasks.actions`) answers a task
handle as soon as its operation stream names Arcane's activity; the stream goes on being
read in this process, so the final result is the one the blocking call returns.

**Arcane's activity is the durable record.** A task ID is the activity, its environment,
the action and surface of the call, and a digest of the credential, sealed with the same
codec as the 2026-07-28 confirmations' request state (AES-256-GCM under
ARCANE_MCP_STATE_SECRET, else a per-process key): a restarted server, or another replica
with the same secret, answers `tasks/get` from Arcane's activity (`activity.tasks`'s
members), renders the result from the activity's persisted lines, and `tasks/cancel`
cancels the activity. Another credential's task ID is "not found".

    TaskRules   the declared actions, members and status map (model.py, compiled once by compile.py)
    Tasks       the handle, tasks/get and tasks/cancel of one server

Progress of a task travels in statusMessage only: the call's progress notifications stop
when it becomes a task (the extension forbids them for a task).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from mcp import MCPError
from mcp.types import RequestParams
from pydantic import Field

from ..build.lazy_dataclass import dataclass
from ..build.model import TaskRules
from ..call.dispatch import Call
from ..call.response import Shaped
from ..call.stream import StreamState
from ..text.render import render_error
from .names import Namer
from .wire import result_wire

EXTENSION = "io.modelcontextprotocol/tasks"
MISSING_CAPABILITY = -32021  # the extension's "Missing required client capability"
NOT_FOUND = -32602
MAX_JOBS = 256  # finished in-process results kept for tasks/get (older ones are read from Arcane)
SEAL_VERSION = 1


def declared(ctx) -> bool:
    """Whether this request's client declares the extension (per request on 2026-07-28)."""
    caps = getattr(ctx.session, "client_capabilities", None)
    ext = getattr(caps, "extensions", None) if caps is not None else None
    return isinstance(ext, dict) and EXTENSION in ext


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Job:
    task: asyncio.Task
    created: float


class Tasks:
    """The tasks of one server (its dispatcher's credential)."""

    def __init__(self, runtime, codec):
        self.runtime = runtime
        self.dispatcher = runtime.dispatcher
        self.catalog = runtime.catalog
        self.rules: TaskRules | None = self.catalog.conventions.activity.tasks
        self.codec = codec
        s = runtime.settings
        # the credential the IDs are bound to (sealed: the digest never leaves encrypted)
        self.key = hashlib.sha256(f"{s.arcane_url}|{s.api_key or ''}|{s.username or ''}".encode()).hexdigest()[:24]
        self.jobs: dict[str, Job] = {}

    @property
    def enabled(self) -> bool:
        return self.rules is not None and bool(self.rules.actions & set(self.catalog.actions))

    # ------------------------------------------------------------ creating one

    async def run_call(self, call: Callable[[Callable], Awaitable[Any]], surface: str, mute: Callable[[], None]) -> Any:
        """Run a tool call; answers the task handle (a dict) if a task-capable action's
        stream named its activity first, else the call's own ToolResult."""
        loop = asyncio.get_running_loop()
        started: asyncio.Future = loop.create_future()

        def on_started(action, args, activity: str) -> None:
            if not started.done():
                mute()
                started.set_result((action, args, activity))

        job = asyncio.ensure_future(call(on_started))
        await asyncio.wait({job, started}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            return job.result()
        action, args, activity = started.result()
        env = args.get(self.catalog.env_arg)
        created = _now()
        payload = {"v": SEAL_VERSION, "a": activity, "e": None if env is None else str(env), "x": action.id, "s": surface,
                   "k": self.key, "c": created}
        task_id = self.codec.seal(json.dumps(payload, separators=(",", ":")).encode())
        self.jobs[activity] = Job(job, time.monotonic())
        self._prune()
        return {"resultType": "task", **self._task(task_id, "working", created, f"{action.title}: started (activity {activity})")}

    def _prune(self) -> None:
        done = [k for k, j in self.jobs.items() if j.task.done()]
        for k in done[: max(len(self.jobs) - MAX_JOBS, 0)]:
            del self.jobs[k]

    def _task(self, task_id: str, status: str, created: str, message: str | None = None) -> dict:
        out: dict[str, Any] = {"taskId": task_id, "status": status, "createdAt": created, "lastUpdatedAt": _now(),
                               "ttlMs": self.rules.ttl_ms, "pollIntervalMs": self.rules.poll_interval_ms}
        if message:
            out["statusMessage"] = message
        return out

    # ------------------------------------------------------------ reading one

    def unseal(self, task_id: str) -> dict:
        try:
            payload = json.loads(self.codec.unseal(str(task_id)))
        except Exception:  # any bad token (malformed, another key, tampered) is not found
            payload = None
        if not isinstance(payload, dict) or payload.get("v") != SEAL_VERSION or payload.get("k") != self.key \
                or payload.get("x") not in self.catalog.actions:
            raise MCPError(code=NOT_FOUND, message="Failed to retrieve task: Task not found", data={"taskId": str(task_id)[:80]})
        return payload

    async def get(self, task_id: str) -> dict:
        p = self.unseal(task_id)
        job = self.jobs.get(p["a"])
        finished = None
        if job is not None and job.task.done() and not job.task.cancelled():
            finished = job.task.result()
            if not finished.is_error:
                return self._detailed(task_id, p, "completed", result=result_wire(finished))
            if finished.error_code == "arcane_timeout":
                finished = None  # the deadline ended our reading, not the operation: Arcane tells
        value = await self._activity(p)
        arcane = self.rules.status.search(value)
        status = self.rules.statuses.get(str(arcane), "working")
        message = self.rules.message_of(value)
        if finished is not None and status != "cancelled":
            # the blocking call's own error (a cancelled activity is the task's cancelled status)
            return self._detailed(task_id, p, "completed", message, result=result_wire(finished))
        if status == "completed" and job is not None and not job.task.done():
            status = "working"  # our reader is about to end: its result is the blocking call's
        if status == "completed":
            return self._detailed(task_id, p, "completed", message, result=result_wire(self._from_activity(p, value, str(arcane))))
        return self._detailed(task_id, p, status, message)

    def _detailed(self, task_id: str, p: dict, status: str, message: str | None = None, result: dict | None = None) -> dict:
        out = {"resultType": "complete", **self._task(task_id, status, p["c"], message)}
        if result is not None:
            out["result"] = result
        return out

    def _args(self, p: dict) -> dict:
        args = {self.catalog.conventions.activity.argument: p["a"]}
        if p.get("e") is not None:
            args[self.catalog.env_arg] = p["e"]
        return args

    async def _activity(self, p: dict) -> Any:
        result = await self.dispatcher.dispatch(Call(self.catalog.conventions.activity.action, self._args(p), surface=p["s"],
                                                     tool="tasks/get", audit_message="task status"))
        if result.is_error:
            if result.http_status == 404:
                raise MCPError(code=NOT_FOUND, message="Failed to retrieve task: Task not found (Arcane has no such activity any more)",
                               data={"activity": p["a"]})
            raise MCPError(code=-32603, message=result.text.strip()[:500], data={"activity": p["a"]})
        return result.structured

    def _from_activity(self, p: dict, value: Any, arcane: str):
        """The blocking call's result, rebuilt from the activity's persisted lines (a
        restarted server, or an in-process result that is gone)."""
        rules, streams = self.rules, self.catalog.conventions.streams
        action = self.catalog.actions[p["x"]]
        namer = Namer(p["s"])
        messages = rules.messages.search(value)
        state = StreamState(activity=p["a"])
        for m in messages if isinstance(messages, list) else []:
            text = m.get(rules.message_text) if isinstance(m, dict) else None
            if not isinstance(text, str) or not text.strip():
                continue
            state.lines += 1
            if m.get(rules.message_level) in rules.error_levels:
                state.errors.append(" ".join(text.split())[:1000])
            else:
                state.last.append(text)
                del state.last[: -streams.keep_lines]
        state.done = arcane not in rules.failed
        if not state.done:
            msg = f"{namer(action.id)} failed: {state.errors[-1] if state.errors else arcane} (activity {p['a']})"
            return render_error(msg, "Read the error above; fix its cause and retry.", code="stream_failed", status=200)
        return self.dispatcher.renderer.success(action, Shaped("stream", streams.structured(state), 200), namer, {},
                                                safe_mode=self.dispatcher.settings.safe_mode)

    # ------------------------------------------------------------ cancelling one

    async def cancel(self, task_id: str) -> dict:
        """Cancel the activity (cooperative in Arcane too); an ended one is acknowledged as well."""
        p = self.unseal(task_id)
        # tasks/cancel is the client's explicit request: the confirmation is the request itself
        await self.dispatcher.dispatch(Call(self.rules.cancel_action, self._args(p), confirm=True, surface=p["s"], tool="tasks/cancel"))
        return {"resultType": "complete"}


def register(server, tasks: Tasks) -> None:
    """Declare the extension and serve tasks/get, tasks/update and tasks/cancel on the
    SDK's low-level Server (2026-07-28 only: legacy clients keep the blocking call)."""
    class TaskIdParams(RequestParams):
        task_id: str = Field(alias="taskId")

    class TaskUpdateParams(TaskIdParams):
        input_responses: dict[str, Any] | None = Field(default=None, alias="inputResponses")

    def check(ctx, params) -> None:
        if not declared(ctx):
            raise MCPError(code=MISSING_CAPABILITY, message="Missing required client capability",
                           data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        name = headers.get("mcp-name") if headers is not None else None
        if name is not None and name != params.task_id:
            raise MCPError(code=-32020, message="Mcp-Name header does not match the request's taskId")

    async def on_get(ctx, params: TaskIdParams) -> dict:
        check(ctx, params)
        return await tasks.get(params.task_id)

    async def on_update(ctx, params: TaskUpdateParams) -> dict:
        check(ctx, params)
        tasks.unseal(params.task_id)  # no task of this server asks for input: nothing to apply
        return {"resultType": "complete"}

    async def on_cancel(ctx, params: TaskIdParams) -> dict:
        check(ctx, params)
        return await tasks.cancel(params.task_id)

    server.extensions[EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskIdParams, on_get)
    server.add_request_handler("tasks/update", TaskUpdateParams, on_update)
    server.add_request_handler("tasks/cancel", TaskIdParams, on_cancel)


__all__ = ["EXTENSION", "TaskRules", "Tasks", "declared", "register"]
