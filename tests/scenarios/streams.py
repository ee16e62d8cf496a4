"""Operation streams in every framing the target serves: a pull read to its end over JSON
lines and over server-sent events (Arcane 2.15, #4276). The simulator is asked for each
framing in turn (its `stream_framing` knob); a real Arcane is read in the one it serves,
whatever that is: the scenario asserts the same outcome either way."""

from __future__ import annotations

from tests.scenarios.harness import WRITES, Target, scenario
from tests.scenarios.writes import _has_image, ok, remove

FRAMINGS = ("ndjson", "sse")


@scenario(WRITES, mcp=True)
async def a_pull_reads_to_its_end_in_every_framing(target: Target, driver) -> None:
    repo, _, tag = target.image.rpartition(":")
    framings = FRAMINGS if target.sim is not None else (None,)
    knobs = target.sim.knobs.as_dict() if target.sim is not None else None
    pulled, cleanup = False, []
    try:
        before = ok(await driver.call("image.list", {"search": repo, "limit": -1}), "image.list")
        had = _has_image(before.structured["items"], target.image)
        for framing in framings:
            if framing is not None:
                target.sim.set_knobs({**knobs, "stream_framing": framing})
            pull = ok(await driver.call("image.pull", {"imageName": repo, "tag": tag}), f"image.pull ({framing or 'as served'})")
            pulled = pulled or not had
            s = pull.structured
            assert s["status"] == "done" and s["errors"] == [] and s["lastLines"], (framing, s)
            assert s["lines"] >= 2 and "malformedLines" not in s, (framing, s)
            follow = ok(await driver.call("activity.get", {"activityId": s["activityId"]}), "activity.get")
            assert follow.structured["activity"]["id"] == s["activityId"], (framing, follow.structured)
        after = ok(await driver.call("image.list", {"search": repo, "limit": -1}), "image.list")
        assert _has_image(after.structured["items"], target.image)
    finally:
        if target.sim is not None:
            target.sim.set_knobs(knobs)
        if pulled:
            await remove(driver, "image.remove", {"imageId": target.image}, cleanup)
    assert not cleanup, cleanup
