"""Log, stats and exec scenarios: a container of the scenario's own writes known lines to
stdout and stderr; the logs are read with a tail, a since and a bounded follow, its stats
sampled, a command run in it with its exit status; a project of its own has its logs
read with stderr marked. Everything is created under the scenario's prefix and removed
in `finally`.

On a real Arcane the container's command writes the lines. The simulator runs no program:
there the scenario writes the same lines through the simulator's handle, as the program
would have (each line once, on the stream the command writes it to)."""

from __future__ import annotations

import asyncio
import json
import re

from tests.scenarios.harness import WRITES, Target, scenario
from tests.scenarios.writes import _has_image, ok, remove

# what the container's program writes, in order: (stream, text)
PROGRAM = (("stdout", "out-1"), ("stderr", "err-1"), ("stdout", "out-2"))
SCRIPT = "echo out-1; echo err-1 >&2; echo out-2; exec sleep 3600"
MARK = "[STDERR] "
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


async def program_writes(target: Target, driver, container_id: str) -> None:
    """The program's lines are in the container's log: written through the simulator's
    handle there, waited for (a few short reads) on a real Arcane."""
    if target.sim is not None:
        for stream, line in PROGRAM:
            target.sim.append_log(container_id, line, stream=stream, environment=target.environment)
        return
    for _ in range(10):
        out = await driver.call("container.logs", {"containerId": container_id, "tail": 10, "maxSeconds": 5})
        if not out.is_error and len(out.structured.get("lines") or []) >= len(PROGRAM):
            return
        await asyncio.sleep(1)


class OwnContainer:
    """A running container of the scenario, from the target's small image (pulled if it was
    missing, and then removed again)."""

    def __init__(self, target: Target, driver, suffix: str):
        self.target, self.driver = target, driver
        self.name = target.prefix() + suffix
        self.id: str | None = None
        self.pulled = False

    async def __aenter__(self) -> OwnContainer:
        repo, _, tag = self.target.image.rpartition(":")
        before = ok(await self.driver.call("image.list", {"search": repo, "limit": -1}), "image.list")
        if not _has_image(before.structured["items"], self.target.image):
            ok(await self.driver.call("image.pull", {"imageName": repo, "tag": tag}), "image.pull")
            self.pulled = True
        out = ok(await self.driver.call("container.create", {"name": self.name, "image": self.target.image,
                                                             "cmd": ["sh", "-c", SCRIPT]}), "container.create")
        self.id = out.structured["id"]
        ok(await self.driver.call("container.start", {"containerId": self.id}), "container.start")
        return self

    async def __aexit__(self, *exc) -> None:
        cleanup: list[str] = []
        if self.id:
            await remove(self.driver, "container.delete", {"containerId": self.id, "force": True}, cleanup)
        if self.pulled:
            await remove(self.driver, "image.remove", {"imageId": self.target.image}, cleanup)
        assert not cleanup or exc[0] is not None, cleanup


@scenario(WRITES, mcp=True)
async def container_logs(target: Target, driver) -> None:
    """tail (the last entries; Arcane reads stdout, then stderr, the mark on stderr), since
    (from the newest line's own timestamp on), timestamps, and a bounded follow that ends on
    its time bound with what was there."""
    async with OwnContainer(target, driver, "-logs") as ctr:
        await program_writes(target, driver, ctr.id)
        out = ok(await driver.call("container.logs", {"containerId": ctr.id, "tail": 2}), "container.logs tail")
        got = out.structured
        assert (got["count"], got["truncated"], got["ended"]) == (2, False, "quiet"), got
        assert sorted(got["lines"]) == sorted(["out-2", MARK + "err-1"]), got["lines"]
        assert got["frames"] >= 1

        out = ok(await driver.call("container.logs", {"containerId": ctr.id, "tail": 10, "timestamps": True}), "timestamps")
        stamped = [ln.removeprefix(MARK).split(" ", 1) for ln in out.structured["lines"]]
        assert [t for _, t in stamped if t in ("out-1", "err-1", "out-2")] and all(STAMP.fullmatch(s) for s, _ in stamped), stamped
        newest = max(s for s, t in stamped if t == "out-2")

        out = ok(await driver.call("container.logs", {"containerId": ctr.id, "tail": 10, "since": newest}), "container.logs since")
        lines = out.structured["lines"]
        assert "out-2" in lines and "out-1" not in lines, lines

        out = ok(await driver.call("container.logs", {"containerId": ctr.id, "tail": 1, "follow": True, "maxSeconds": 2}),
                 "container.logs follow")
        assert (out.structured["lines"], out.structured["ended"]) == (["out-2"], "seconds"), out.structured

        gone = await driver.call("container.logs", {"containerId": target.prefix() + "-none"})
        assert gone.is_error, gone.text


@scenario(WRITES, mcp=True)
async def container_stats_and_exec(target: Target, driver) -> None:
    """Stats samples of the scenario's container with their summary; a command run in it
    with its exit status and output; without confirm nothing is run."""
    async with OwnContainer(target, driver, "-exec") as ctr:
        out = ok(await driver.call("container.stats", {"containerId": ctr.id, "samples": 2}), "container.stats")
        got = out.structured
        assert got["count"] == 2 and got["ended"] == "samples" and len(got["samples"]) == 2, got
        assert "CPU" in got["summary"] and "Memory used" in got["summary"]

        refused = await driver.call("container.exec", {"containerId": ctr.id, "command": "echo hi"})
        assert refused.is_error and "confirm: true" in refused.text

        out = ok(await driver.call("container.exec", {"containerId": ctr.id, "command": "echo ran; exit 3", "timeoutSeconds": 10},
                                   confirm=True), "container.exec")
        assert (out.structured["exitCode"], out.structured["output"], out.structured["timedOut"]) == (3, "ran\n", False), out.structured
        out = ok(await driver.call("container.exec", {"containerId": ctr.id, "command": "true", "timeoutSeconds": 10}, confirm=True),
                 "container.exec true")
        assert (out.structured["exitCode"], out.structured["output"]) == (0, "")


def compose(image: str) -> str:
    return f"services:\n  app:\n    image: {image}\n    command: [\"sh\", \"-c\", {json.dumps(SCRIPT)}]\n"


@scenario(WRITES, mcp=True)
async def project_logs(target: Target, driver) -> None:
    """A project of the scenario's own, up: its logs name each line's service and mark its
    stderr lines (Arcane 2.10+); text frames carry the message only. Where the target made
    no container for the service (the simulator does not run compose), nothing comes, and
    the capture says that no frame arrived instead of reporting an empty log as read."""
    name = target.prefix() + "-logs"
    project_id, cleanup = None, []
    try:
        out = ok(await driver.call("project.create", {
            "name": name, "composeContent": compose(target.image)}), "project.create")
        project_id = out.structured["id"]
        ok(await driver.call("project.up", {"projectId": project_id}), "project.up")
        listed = ok(await driver.call("container.list", {"search": name, "limit": -1}), "container.list")
        containers = [c["id"] for c in listed.structured["items"] if any(name in n for n in c.get("names") or [])]
        for cid in containers:
            await program_writes(target, driver, cid)
        out = ok(await driver.call("project.logs", {"projectId": project_id, "tail": 20, "maxSeconds": 6}), "project.logs")
        got = out.structured
        if not containers:
            assert (got["count"], got["frames"], got["ended"]) == (0, 0, "no_frame"), got
            assert "no frame arrived" in out.text
            return
        lines = got["lines"]
        assert any(ln.startswith(MARK) and ln.endswith(" | err-1") for ln in lines), lines
        assert any(not ln.startswith(MARK) and ln.endswith(" | out-1") for ln in lines), lines
        text = ok(await driver.call("project.logs", {"projectId": project_id, "tail": 20, "format": "text"}), "project.logs text")
        assert "err-1" in text.structured["lines"] and not any(" | " in ln for ln in text.structured["lines"]), text.structured
    finally:
        if project_id:
            await remove(driver, "project.destroy", {"projectId": project_id, "removeFiles": True, "removeVolumes": True}, cleanup)
    assert not cleanup, cleanup
