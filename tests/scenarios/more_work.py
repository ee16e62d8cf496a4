"""Everyday operator work (issue 22): a container's state changed and read back, a project
brought down and up, a Swarm stack, git repositories and GitOps syncs, roles and
federated credentials, settings and notification settings, activities, events, the
dashboard, image tags and container prunes. Each write creates only what is named with
its own `target.prefix()` (or restores what it changed) and undoes it in `finally`."""

from __future__ import annotations

import asyncio

from tests.scenarios.harness import PRUNE, SWARM, WRITES, Outcome, Target, scenario
from tests.scenarios.writes import ok, remove


def items(out: Outcome) -> list[dict]:
    data = out.structured or {}
    for member in ("items", "data"):
        if isinstance(data.get(member), list):
            return data[member]
    return []


def _compose(image: str) -> str:
    return f"services:\n  app:\n    image: {image}\n    command: [\"sleep\", \"3600\"]\n"


async def _state(driver, container: str) -> dict:
    got = ok(await driver.call("container.get", {"containerId": container}), "container.get")
    return got.structured.get("state") or {}


async def _until(check, tries: int = 50, pause: float = 0.1):
    """Poll `check()` until it returns something true (Arcane works some writes in the background)."""
    value = None
    for _ in range(tries):
        value = await check()
        if value:
            return value
        await asyncio.sleep(pause)
    return value


# ---------------------------------------------------------------- containers


@scenario(WRITES, mcp=True)
async def container_stop_start_restart(target: Target, driver) -> None:
    """A container of the scenario's own is started, stopped, started again and restarted;
    its state is read back after each step."""
    name = target.prefix() + "-ctr"
    created, cleanup = False, []
    try:
        ok(await driver.call("container.create", {"name": name, "image": target.image, "cmd": ["sleep", "3600"]}), "container.create")
        created = True
        assert (await _state(driver, name)).get("running") is False
        ok(await driver.call("container.start", {"containerId": name}), "container.start")
        assert (await _state(driver, name)).get("running") is True
        ok(await driver.call("container.stop", {"containerId": name}), "container.stop")
        stopped = await _state(driver, name)
        assert stopped.get("running") is False and stopped.get("status") == "exited", stopped
        ok(await driver.call("container.start", {"containerId": name}), "container.start again")
        before = await _state(driver, name)
        assert before.get("running") is True, before
        ok(await driver.call("container.restart", {"containerId": name}), "container.restart")
        after = await _state(driver, name)
        assert after.get("running") is True and after.get("status") == "running", after
        ok(await driver.call("container.delete", {"containerId": name, "force": True}, confirm=True), "container.delete")
        created = False
        gone = await driver.call("container.get", {"containerId": name})
        assert gone.is_error, gone.text
    finally:
        if created:
            await remove(driver, "container.delete", {"containerId": name, "force": True}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, mcp=True)
async def container_inspected_by_name(target: Target, driver) -> None:
    """A container is found by its name in the list, inspected by that name (the same
    container as by its ID) and its configuration is what it was created with."""
    name = target.prefix() + "-ctr"
    container_id, cleanup = None, []
    try:
        out = ok(await driver.call("container.create", {"name": name, "image": target.image, "cmd": ["sleep", "3600"],
                                                        "labels": {"arcane-mcp-e2e": "yes"}}), "container.create")
        container_id = out.structured["id"]
        listed = ok(await driver.call("container.list", {"search": name, "includeInternal": True}), "container.list")
        mine = [c for c in items(listed) if c.get("id") == container_id]
        assert len(mine) == 1, listed.structured
        got = ok(await driver.call("container.get", {"containerId": name}), "container.get by name")
        assert got.structured["id"] == container_id and got.structured["name"].lstrip("/") == name, got.structured
        # types/container Details: image, labels and config.cmd as created
        assert got.structured["image"] == target.image, got.structured
        assert (got.structured.get("labels") or {}).get("arcane-mcp-e2e") == "yes", got.structured
        assert (got.structured.get("config") or {}).get("cmd") == ["sleep", "3600"], got.structured
    finally:
        if container_id:
            await remove(driver, "container.delete", {"containerId": container_id, "force": True}, cleanup)
    assert not cleanup, cleanup


# ---------------------------------------------------------------- projects and stacks


@scenario(WRITES, mcp=True)
async def project_redeployed_down_and_up(target: Target, driver) -> None:
    """A project created from Compose text is brought up, redeployed, brought down (its
    status says so) and up again, then destroyed with its files."""
    name = target.prefix() + "-proj"
    project_id, cleanup = None, []
    try:
        out = ok(await driver.call("project.create", {
            "name": name, "composeContent": _compose(target.image)}), "project.create")
        project_id = out.structured["id"]

        async def status() -> str:
            got = ok(await driver.call("project.get", {"projectId": project_id}), "project.get")
            return got.structured.get("status")

        ok(await driver.call("project.up", {"projectId": project_id}), "project.up")
        assert await status() == "running"
        ok(await driver.call("project.redeploy", {"projectId": project_id}), "project.redeploy")
        assert await status() == "running"
        ok(await driver.call("project.down", {"projectId": project_id}, confirm=True), "project.down")
        assert await status() != "running"
        ok(await driver.call("project.up", {"projectId": project_id}), "project.up again")
        assert await status() == "running"
        ok(await driver.call("project.destroy", {"projectId": project_id, "removeFiles": True, "removeVolumes": True}, confirm=True),
           "project.destroy")
        project_id = None
        gone = await driver.call("project.get", {"projectId": out.structured["id"]})
        assert gone.is_error, gone.text
    finally:
        if project_id:
            await remove(driver, "project.destroy", {"projectId": project_id, "removeFiles": True, "removeVolumes": True}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, SWARM, mcp=True)
async def swarm_stack_deployed_and_deleted(target: Target, driver) -> None:
    """A one-service stack is deployed from Compose text, listed with its service, and
    deleted with it."""
    name = target.prefix() + "-stk"
    deployed, cleanup = False, []
    try:
        ok(await driver.call("swarm_stack.deploy", {"name": name, "composeContent": _compose(target.image)}), "swarm_stack.deploy")
        deployed = True
        listed = ok(await driver.call("swarm_stack.list", {"search": name}), "swarm_stack.list")
        assert [s.get("name") for s in items(listed)] == [name], listed.structured
        services = await _until(lambda: _stack_services(driver, name))
        assert services == [f"{name}_app"], services
        ok(await driver.call("swarm_stack.delete", {"name": name}, confirm=True), "swarm_stack.delete")
        deployed = False
        after = ok(await driver.call("swarm_stack.list", {"search": name}), "swarm_stack.list after delete")
        assert items(after) == [], after.structured
    finally:
        if deployed:
            await remove(driver, "swarm_stack.delete", {"name": name}, cleanup)
    assert not cleanup, cleanup


async def _stack_services(driver, name: str) -> list[str]:
    out = ok(await driver.call("swarm_stack.list_services", {"name": name}), "swarm_stack.list_services")
    return sorted(s.get("name") for s in items(out))


# ---------------------------------------------------------------- git and GitOps


def _git_repository(name: str) -> dict:
    # a host under .invalid: nothing is ever contacted by a create
    return {"name": name, "url": f"https://{name}.invalid/e2e.git", "authType": "none", "description": "arcane-mcp e2e"}


@scenario(WRITES, mcp=True)
async def git_repository_created_listed_deleted(target: Target, driver) -> None:
    """A git repository is created (no credentials), found in the list by its name, read,
    and deleted: the list no longer has it."""
    name = target.prefix() + "-git"
    repo_id, cleanup = None, []
    try:
        out = ok(await driver.call("git_repository.create", _git_repository(name)), "git_repository.create")
        repo_id = out.structured["id"]
        assert out.structured["name"] == name and out.structured["authType"] == "none", out.structured
        listed = ok(await driver.call("git_repository.list", {"search": name}), "git_repository.list")
        assert [r["id"] for r in items(listed)] == [repo_id], listed.structured
        got = ok(await driver.call("git_repository.get", {"id": repo_id}), "git_repository.get")
        assert got.structured["url"] == _git_repository(name)["url"], got.structured
        ok(await driver.call("git_repository.delete", {"id": repo_id}, confirm=True), "git_repository.delete")
        repo_id = None
        after = ok(await driver.call("git_repository.list", {"search": name}), "git_repository.list after delete")
        assert items(after) == [], after.structured
    finally:
        if repo_id:
            await remove(driver, "git_repository.delete", {"id": repo_id}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, mcp=True)
async def gitops_sync_created_and_deleted(target: Target, driver) -> None:
    """A GitOps sync on a repository of the scenario's own: created (its first clone of an
    unreachable host fails, the sync stays), listed by repository, the repository may not
    be deleted while the sync uses it, then the sync and the repository are deleted."""
    name = target.prefix() + "-ops"
    repo_id, sync_id, cleanup = None, None, []
    try:
        repo = ok(await driver.call("git_repository.create", _git_repository(name)), "git_repository.create")
        repo_id = repo.structured["id"]
        out = ok(await driver.call("gitops_sync.create", {"name": name, "repositoryId": repo_id, "branch": "main",
                                                          "composePath": "compose.yaml", "projectName": name, "autoSync": False}),
                 "gitops_sync.create")
        sync_id = out.structured["id"]
        assert out.structured["repositoryId"] == repo_id and out.structured["name"] == name, out.structured
        listed = ok(await driver.call("gitops_sync.list", {"repositoryId": repo_id}), "gitops_sync.list")
        assert [s["id"] for s in items(listed)] == [sync_id], listed.structured
        in_use = await driver.call("git_repository.delete", {"id": repo_id}, confirm=True)
        assert in_use.is_error, in_use.text
        ok(await driver.call("gitops_sync.delete", {"syncId": sync_id}, confirm=True), "gitops_sync.delete")
        sync_id = None
        after = ok(await driver.call("gitops_sync.list", {"repositoryId": repo_id}), "gitops_sync.list after delete")
        assert items(after) == [], after.structured
        ok(await driver.call("git_repository.delete", {"id": repo_id}, confirm=True), "git_repository.delete")
        repo_id = None
    finally:
        if sync_id:
            await remove(driver, "gitops_sync.delete", {"syncId": sync_id}, cleanup)
        if repo_id:
            await remove(driver, "git_repository.delete", {"id": repo_id}, cleanup)
    assert not cleanup, cleanup


# ---------------------------------------------------------------- roles and federation


@scenario(WRITES, mcp=True)
async def role_created_assigned_deleted(target: Target, driver) -> None:
    """A role is created, assigned to a user of the scenario's own (the user's assignments
    show it), and deleted: its assignment goes with it."""
    prefix = target.prefix()
    role_id, user_id, cleanup = None, None, []
    try:
        role = ok(await driver.call("role.create", {"name": prefix + "-role", "description": "arcane-mcp e2e",
                                                    "permissions": ["containers:list"]}), "role.create")
        role_id = role.structured["id"]
        assert role.structured["permissions"] == ["containers:list"], role.structured
        user = ok(await driver.call("user.create", {"username": prefix + "-user", "password": "E2e!" + prefix[-10:] + "Aa9",
                                                    "displayName": "arcane-mcp e2e"}), "user.create")
        user_id = user.structured["id"]
        ok(await driver.call("user.set_roles", {"userId": user_id, "assignments": [{"roleId": role_id, "environmentId": target.environment}]}),
           "user.set_roles")
        held = ok(await driver.call("user.list_roles", {"userId": user_id}), "user.list_roles")
        assert role_id in [a.get("roleId") for a in _assignments(held)], held.structured
        ok(await driver.call("role.delete", {"id": role_id}, confirm=True), "role.delete")
        role_id = None
        gone = await driver.call("role.get", {"id": role.structured["id"]})
        assert gone.is_error, gone.text
        held = ok(await driver.call("user.list_roles", {"userId": user_id}), "user.list_roles after delete")
        assert role.structured["id"] not in [a.get("roleId") for a in _assignments(held)], held.structured
    finally:
        if user_id:
            await remove(driver, "user.delete", {"userId": user_id}, cleanup)
        if role_id:
            await remove(driver, "role.delete", {"id": role_id}, cleanup)
    assert not cleanup, cleanup


def _assignments(out: Outcome) -> list[dict]:
    data = out.structured or {}
    return data if isinstance(data, list) else items(out) or data.get("assignments") or []


@scenario(WRITES, mcp=True)
async def federated_credential_lifecycle(target: Target, driver) -> None:
    """A federated credential mapped to a role of the scenario's own: created, read,
    disabled (the read shows it), deleted (unknown), then its role deleted."""
    prefix = target.prefix()
    role_id, cred_id, cleanup = None, None, []
    try:
        role = ok(await driver.call("role.create", {"name": prefix + "-role", "permissions": ["containers:list"]}), "role.create")
        role_id = role.structured["id"]
        out = ok(await driver.call("federated_credential.create", {
            "name": prefix + "-fed", "issuerUrl": f"https://{prefix}.invalid", "audiences": ["arcane-mcp-e2e"],
            "subjectMatch": "repo:arcane-mcp-e2e/*", "matchType": "glob", "enabled": True, "roleId": role_id}),
            "federated_credential.create")
        cred_id = out.structured["id"]
        got = ok(await driver.call("federated_credential.get", {"id": cred_id}), "federated_credential.get")
        assert got.structured["roleId"] == role_id and got.structured["enabled"] is True, got.structured
        ok(await driver.call("federated_credential.update", {"id": cred_id, "enabled": False}), "federated_credential.update")
        got = ok(await driver.call("federated_credential.get", {"id": cred_id}), "federated_credential.get after update")
        assert got.structured["enabled"] is False and got.structured["name"] == prefix + "-fed", got.structured
        ok(await driver.call("federated_credential.delete", {"id": cred_id}, confirm=True), "federated_credential.delete")
        cred_id = None
        gone = await driver.call("federated_credential.get", {"id": out.structured["id"]})
        assert gone.is_error, gone.text
        ok(await driver.call("role.delete", {"id": role_id}, confirm=True), "role.delete")
        role_id = None
    finally:
        if cred_id:
            await remove(driver, "federated_credential.delete", {"id": cred_id}, cleanup)
        if role_id:
            await remove(driver, "role.delete", {"id": role_id}, cleanup)
    assert not cleanup, cleanup


# ---------------------------------------------------------------- settings and notifications


def _setting(out: Outcome, key: str):
    data = out.structured or {}
    rows = data if isinstance(data, list) else items(out)
    found = [s.get("value") for s in rows if s.get("key") == key]
    return found[0] if found else None


@scenario(WRITES, mcp=True)
async def setting_changed_and_restored(target: Target, driver) -> None:
    """A setting (the session timeout, in minutes) is changed, read back changed, and put
    back as it was in `finally`, whatever failed; the last read shows the old value."""
    key = "authSessionTimeout"
    before = _setting(ok(await driver.call("settings.get"), "settings.get"), key)
    assert before is not None, f"{key} is not among the settings"
    changed = "1439" if before != "1439" else "1438"
    try:
        ok(await driver.call("settings.update", {key: changed}), "settings.update")
        now = _setting(ok(await driver.call("settings.get"), "settings.get after update"), key)
        assert now == changed, now
    finally:
        restored = await driver.call("settings.update", {key: before})
    assert not restored.is_error, restored.text
    assert _setting(ok(await driver.call("settings.get"), "settings.get after restore"), key) == before


@scenario(WRITES, mcp=True)
async def notification_settings_saved_and_deleted(target: Target, driver) -> None:
    """Notification settings of a provider are saved (disabled, pointing at an unreachable
    host) and read back, then deleted. Where that provider was already set up, its
    settings are saved back as they were instead of deleted."""
    provider = "gotify"
    listed = ok(await driver.call("notification.list_settings"), "notification.list_settings")
    existing = [s for s in _rows(listed) if s.get("provider") == provider]
    saved, cleanup = False, []
    config = {"url": f"https://{target.prefix()}.invalid", "token": "e2e-token-not-a-secret", "priority": 5}
    try:
        out = ok(await driver.call("notification.save_settings", {"provider": provider, "enabled": False, "config": config}),
                 "notification.save_settings")
        saved = True
        assert out.structured["provider"] == provider and out.structured["enabled"] is False, out.structured
        mine = [s for s in _rows(ok(await driver.call("notification.list_settings"), "notification.list_settings")) if s.get("provider") == provider]
        assert len(mine) == 1 and mine[0]["config"].get("url") == config["url"], mine
        if not existing:
            ok(await driver.call("notification.delete_settings", {"provider": provider}, confirm=True), "notification.delete_settings")
            saved = False
            after = ok(await driver.call("notification.list_settings"), "notification.list_settings after delete")
            assert provider not in [s.get("provider") for s in _rows(after)], after.structured
    finally:
        if saved and existing:
            old = existing[0]
            out = await driver.call("notification.save_settings", {"provider": provider, "enabled": old.get("enabled", False),
                                                                   "config": old.get("config") or {}})
            if out.is_error:
                cleanup.append(f"notification settings of {provider} not restored: {out.first_line()}")
        elif saved:
            await remove(driver, "notification.delete_settings", {"provider": provider}, cleanup)
    assert not cleanup, cleanup


def _rows(out: Outcome) -> list[dict]:
    data = out.structured
    return data if isinstance(data, list) else items(out)


# ---------------------------------------------------------------- history and overview


@scenario(WRITES, mcp=True)
async def activity_of_an_action_found(target: Target, driver) -> None:
    """After a project is brought up, the activity list holds the operation's activity
    (the ID its answer gave) and its detail reads back."""
    name = target.prefix() + "-act"
    project_id, cleanup = None, []
    try:
        out = ok(await driver.call("project.create", {
            "name": name, "composeContent": _compose(target.image)}), "project.create")
        project_id = out.structured["id"]
        up = ok(await driver.call("project.up", {"projectId": project_id}), "project.up")
        activity_id = up.structured["activityId"]
        listed = ok(await driver.call("activity.list", {"limit": 100}), "activity.list")
        assert activity_id in [a.get("id") for a in items(listed)], listed.structured
        got = ok(await driver.call("activity.get", {"activityId": activity_id}), "activity.get")
        assert got.structured["activity"]["id"] == activity_id and got.structured["activity"].get("status"), got.structured
    finally:
        if project_id:
            await remove(driver, "project.destroy", {"projectId": project_id, "removeFiles": True, "removeVolumes": True}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, mcp=True)
async def events_listed_after_an_action(target: Target, driver) -> None:
    """Creating a git repository records an event: the event list, searched by the
    repository's name, has it, with its type and severity."""
    name = target.prefix() + "-evt"
    repo_id, cleanup = None, []
    try:
        repo = ok(await driver.call("git_repository.create", _git_repository(name)), "git_repository.create")
        repo_id = repo.structured["id"]
        listed = ok(await driver.call("event.list", {"search": name, "order": "desc"}), "event.list")
        mine = [e for e in items(listed) if e.get("resourceName") == name]
        assert mine and mine[0].get("type") == "git_repository.create" and mine[0].get("severity"), listed.structured
        assert all(e.get("id") and e.get("timestamp") for e in items(listed)), listed.structured
    finally:
        if repo_id:
            await remove(driver, "git_repository.delete", {"id": repo_id}, cleanup)
    assert not cleanup, cleanup


@scenario(mcp=True)
async def dashboard_read(target: Target, driver) -> None:
    """The dashboard's counts add up: running and stopped containers make the total (a
    container is running only in state running, dashboard/service.go:178), images in use
    and unused make the images' total, whose size is a number of bytes."""
    out = ok(await driver.call("dashboard.get"), "dashboard.get")
    counts = out.structured["containers"]["counts"]
    assert counts["runningContainers"] + counts["stoppedContainers"] == counts["totalContainers"], counts
    usage = out.structured["imageUsageCounts"]
    assert usage["imagesInuse"] + usage["imagesUnused"] == usage["totalImages"], usage
    assert isinstance(usage["totalImageSize"], int) and usage["totalImageSize"] >= 0, usage
    assert isinstance(out.structured["containers"].get("data"), list), out.structured["containers"]


# ---------------------------------------------------------------- images and prunes


def _tags(out: Outcome) -> list[str]:
    return [t for i in items(out) for t in (i.get("repoTags") or [])]


@scenario(WRITES, mcp=True)
async def image_tagged_and_tag_removed(target: Target, driver) -> None:
    """The scenario's image gets a tag of the scenario's own: the image list shows it;
    removing the image by that tag removes the tag only, the image stays. The image is
    removed only if this scenario is what pulled it."""
    repo, _, tag = target.image.rpartition(":")
    mine = target.prefix() + "-img"
    pulled, tagged, cleanup = False, False, []
    try:
        before = ok(await driver.call("image.list", {"search": repo, "limit": -1}), "image.list")
        if not any(t.endswith(target.image) for t in _tags(before)):
            ok(await driver.call("image.pull", {"imageName": repo, "tag": tag}), "image.pull")
            pulled = True
        ok(await driver.call("image.tag", {"name": target.image, "repository": mine, "tag": "e2e"}), "image.tag")
        tagged = True
        got = ok(await driver.call("image.get", {"imageId": f"{mine}:e2e"}), "image.get by the new tag")
        image_id = got.structured["id"]
        assert f"{mine}:e2e" in (got.structured.get("repoTags") or []), got.structured
        ok(await driver.call("image.remove", {"imageId": f"{mine}:e2e"}, confirm=True), "image.remove of the tag")
        tagged = False
        gone = await driver.call("image.get", {"imageId": f"{mine}:e2e"})
        assert gone.is_error, gone.text
        still = ok(await driver.call("image.get", {"imageId": target.image}), "image.get of the image")
        assert still.structured["id"] == image_id and f"{mine}:e2e" not in (still.structured.get("repoTags") or []), still.structured
    finally:
        if tagged:
            await remove(driver, "image.remove", {"imageId": f"{mine}:e2e"}, cleanup)
        if pulled:
            await remove(driver, "image.remove", {"imageId": target.image}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, PRUNE, mcp=True)
async def stopped_containers_pruned(target: Target, driver) -> None:
    """A stopped container of the scenario's own goes in a prune of stopped containers
    (the prune runs in the background: its activity is named, the container goes)."""
    name = target.prefix() + "-ctr"
    created, cleanup = False, []
    try:
        ok(await driver.call("container.create", {"name": name, "image": target.image, "cmd": ["sleep", "3600"]}), "container.create")
        created = True
        out = ok(await driver.call("system.prune", {"containers": {"mode": "stopped"}}, confirm=True), "system.prune")
        assert out.structured.get("success") is True and out.structured.get("activityId"), out.structured

        async def gone() -> bool:
            return (await driver.call("container.get", {"containerId": name})).is_error

        assert await _until(gone, tries=100, pause=0.2), f"{name} was not pruned"
        created = False
    finally:
        if created:
            await remove(driver, "container.delete", {"containerId": name, "force": True}, cleanup)
    assert not cleanup, cleanup
