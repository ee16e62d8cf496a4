"""Write scenarios: each creates resources under its own unique prefix, checks them
through the actions a model would use, and removes them in `finally` (whatever failed)."""

from __future__ import annotations

from tests.scenarios.harness import WRITES, Outcome, Target, scenario


def ok(out: Outcome, what: str) -> Outcome:
    assert not out.is_error, f"{what}: {out.text}"
    return out


async def remove(driver, action_id: str, params: dict, errors: list[str]) -> None:
    """Best-effort cleanup that still reports what it could not remove."""
    out = await driver.call(action_id, params, confirm=True)
    if out.is_error:
        errors.append(f"{action_id} {params}: {out.first_line()}")


@scenario(WRITES, mcp=True)
async def network_lifecycle(target: Target, driver) -> None:
    name = target.prefix() + "-net"
    created, cleanup = False, []
    try:
        out = ok(await driver.call("network.create", {"name": name, "options": {"driver": "bridge"}}), "network.create")
        created = True
        assert out.structured.get("id"), out.structured
        got = ok(await driver.call("network.get", {"networkId": name}), "network.get by name")
        assert got.structured.get("name") == name
        listed = ok(await driver.call("network.list", {"search": name}), "network.list")
        assert [n.get("name") for n in listed.structured["items"]] == [name]
        refused = await driver.call("network.delete", {"networkId": name})
        assert refused.is_error and "confirm: true" in refused.text  # destructive: nothing sent
        ok(await driver.call("network.delete", {"networkId": name}, confirm=True), "network.delete")
        created = False
        gone = await driver.call("network.get", {"networkId": name})
        assert gone.is_error and driver.name("network.list") in gone.next_step(), gone.text
    finally:
        if created:
            await remove(driver, "network.delete", {"networkId": name}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES)
async def volume_lifecycle(target: Target, driver) -> None:
    name = target.prefix() + "-vol"
    created, cleanup = False, []
    try:
        ok(await driver.call("volume.create", {"name": name}), "volume.create")
        created = True
        got = ok(await driver.call("volume.get", {"volumeName": name}), "volume.get")
        assert got.structured.get("name") == name
        ok(await driver.call("volume.remove", {"volumeName": name}, confirm=True), "volume.remove")
        created = False
        gone = await driver.call("volume.get", {"volumeName": name})
        assert gone.is_error
    finally:
        if created:
            await remove(driver, "volume.remove", {"volumeName": name}, cleanup)
    assert not cleanup, cleanup


def compose(image: str) -> str:
    return f"services:\n  app:\n    image: {image}\n    command: [\"sleep\", \"3600\"]\n"


@scenario(WRITES)
async def project_lifecycle(target: Target, driver) -> None:
    """Create a project from a tiny Compose file, find it by its name (resolved to its ID
    through project.list, and the text says so), bring it up over the operation stream,
    down, and destroy it with its files."""
    name = target.prefix() + "-proj"
    project_id, cleanup = None, []
    try:
        out = ok(await driver.call("project.create", {
            "name": name, "composeContent": compose(target.image)}), "project.create")
        project_id = out.structured["id"]
        got = ok(await driver.call("project.get", {"projectId": project_id}), "project.get by ID")
        assert got.structured["name"] == name and "Note:" not in got.text
        by_name = ok(await driver.call("project.get", {"projectId": name}), "project.get by name")
        assert by_name.structured["id"] == project_id
        assert "Note:" in by_name.text and project_id in by_name.text and driver.name("project.list") in by_name.text
        up = ok(await driver.call("project.up", {"projectId": project_id}), "project.up")
        assert up.structured["status"] == "done" and up.structured["activityId"], up.structured
        assert up.structured["lastLines"], "the stream's log lines are kept"
        if hasattr(driver, "progress"):
            assert driver.progress, "an operation stream sends progress notifications"
        activity = ok(await driver.call("activity.get", {"activityId": up.structured["activityId"]}), "activity.get")
        assert activity.structured["activity"]["id"] == up.structured["activityId"]  # ActivityDetail {activity, messages}
        ok(await driver.call("project.down", {"projectId": project_id}, confirm=True), "project.down")
        ok(await driver.call("project.destroy", {"projectId": project_id, "removeFiles": True, "removeVolumes": True}, confirm=True),
           "project.destroy")
        project_id = None
        gone = await driver.call("project.get", {"projectId": name})
        assert gone.is_error and driver.name("project.list") in gone.text, gone.text
    finally:
        if project_id:
            await remove(driver, "project.destroy", {"projectId": project_id, "removeFiles": True, "removeVolumes": True}, cleanup)
    assert not cleanup, cleanup


def _has_image(items: list, image: str) -> bool:
    ref = image if ":" in image.rsplit("/", 1)[-1] else image + ":latest"
    return any(ref in (i.get("repoTags") or []) or f"docker.io/library/{ref}" in (i.get("repoTags") or []) for i in items)


@scenario(WRITES)
async def image_and_container_lifecycle(target: Target, driver) -> None:
    """Pull a small image over the operation stream, create a container from it, start,
    stop and remove it; remove the image only if this scenario is what pulled it."""
    name = target.prefix() + "-ctr"
    repo, _, tag = target.image.rpartition(":")
    container_id, pulled, cleanup = None, False, []
    try:
        before = ok(await driver.call("image.list", {"search": repo, "limit": -1}), "image.list")
        had = _has_image(before.structured["items"], target.image)
        pull = ok(await driver.call("image.pull", {"imageName": repo, "tag": tag}), "image.pull")
        pulled = not had
        assert pull.structured["status"] == "done" and pull.structured["activityId"] and pull.structured["lastLines"]
        out = ok(await driver.call("container.create", {"name": name, "image": target.image, "cmd": ["sleep", "3600"]}),
                 "container.create")
        container_id = out.structured["id"]
        ok(await driver.call("container.start", {"containerId": container_id}), "container.start")
        running = ok(await driver.call("container.get", {"containerId": name}), "container.get by name")
        assert running.structured["id"] == container_id and running.structured["state"]["running"] is True
        short = ok(await driver.call("container.get", {"containerId": container_id[:12]}), "container.get by a short ID")
        assert short.structured["id"] == container_id
        ok(await driver.call("container.stop", {"containerId": container_id}), "container.stop")
        stopped = ok(await driver.call("container.get", {"containerId": container_id}), "container.get")
        assert stopped.structured["state"]["running"] is False
        ok(await driver.call("container.delete", {"containerId": container_id}, confirm=True), "container.delete")
        container_id = None
    finally:
        if container_id:
            await remove(driver, "container.delete", {"containerId": container_id, "force": True}, cleanup)
        if pulled:
            await remove(driver, "image.remove", {"imageId": target.image}, cleanup)
    assert not cleanup, cleanup
