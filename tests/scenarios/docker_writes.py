"""Docker-side write scenarios (issue 22): what a model does to volumes' backups,
webhooks, network attachments and prunes, checked through the reads that must show it.
Each creates its own resources under `target.prefix()` and removes them in `finally`."""

from __future__ import annotations

import asyncio

from tests.scenarios.harness import PRUNE, WRITES, Outcome, Target, scenario
from tests.scenarios.writes import ok, remove


def items(out: Outcome) -> list[dict]:
    data = out.structured or {}
    return data.get("items") if isinstance(data.get("items"), list) else data.get("data") or []


@scenario(WRITES, mcp=True)
async def volume_backup_lifecycle(target: Target, driver) -> None:
    """Back a volume up, find the backup in the volume's list, download it, delete it."""
    name = target.prefix() + "-vol"
    created, backup_id, cleanup = False, None, []
    try:
        ok(await driver.call("volume.create", {"name": name}), "volume.create")
        created = True
        out = ok(await driver.call("volume_backup.create", {"volumeName": name}), "volume_backup.create")
        backup_id = out.structured.get("id")
        assert backup_id and out.structured.get("volumeName") == name, out.structured
        assert out.structured.get("status") and out.structured.get("createdAt"), out.structured
        listed = ok(await driver.call("volume_backup.list", {"volumeName": name}), "volume_backup.list")
        assert [b.get("id") for b in items(listed)] == [backup_id], listed.structured
        got = ok(await driver.call("volume_backup.download", {"backupId": backup_id}), "volume_backup.download")
        assert backup_id in got.text, got.text  # the file is named after the backup
        ok(await driver.call("volume_backup.delete", {"backupId": backup_id}, confirm=True), "volume_backup.delete")
        backup_id = None
        listed = ok(await driver.call("volume_backup.list", {"volumeName": name}), "volume_backup.list after delete")
        assert items(listed) == [], listed.structured
    finally:
        if backup_id:
            await remove(driver, "volume_backup.delete", {"backupId": backup_id}, cleanup)
        if created:
            await remove(driver, "volume.remove", {"volumeName": name}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, mcp=True)
async def webhook_lifecycle(target: Target, driver) -> None:
    """Create a webhook on a container of the scenario's own, fire it by its token (the
    container starts), disable it (refused), delete it (unknown)."""
    name = target.prefix()
    container, hook_id, cleanup = None, None, []
    try:
        out = ok(await driver.call("container.create", {"name": name + "-c", "image": target.image, "cmd": ["sleep", "3600"]}),
                 "container.create")
        container = name + "-c"
        out = ok(await driver.call("webhook.create", {"name": name + "-hook", "targetType": "container", "targetId": container,
                                                      "actionType": "start"}), "webhook.create")
        hook_id, token = out.structured.get("id"), out.structured.get("token")
        assert hook_id and token and out.structured.get("actionType") == "start", out.structured
        listed = ok(await driver.call("webhook.list", {}), "webhook.list")
        mine = [h for h in items(listed) if h.get("id") == hook_id]
        assert len(mine) == 1 and mine[0].get("enabled") is True and token.startswith(mine[0].get("tokenPrefix") or "-"), mine
        ok(await driver.call("webhook.trigger", {"token": token}), "webhook.trigger")
        # Arcane answers 202 and starts the container in the background
        state = None
        for _ in range(50):
            got = ok(await driver.call("container.get", {"containerId": container}), "container.get")
            state = (got.structured.get("state") or {}).get("status")
            if state == "running":
                break
            await asyncio.sleep(0.1)
        assert state == "running", got.structured
        ok(await driver.call("webhook.update", {"webhookId": hook_id, "enabled": False}), "webhook.update")
        refused = await driver.call("webhook.trigger", {"token": token})
        assert refused.is_error, refused.text
        ok(await driver.call("webhook.delete", {"webhookId": hook_id}, confirm=True), "webhook.delete")
        hook_id = None
        gone = await driver.call("webhook.trigger", {"token": token})
        assert gone.is_error, gone.text
    finally:
        if hook_id:
            await remove(driver, "webhook.delete", {"webhookId": hook_id}, cleanup)
        if container:
            await remove(driver, "container.delete", {"containerId": container, "force": True}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, mcp=True)
async def network_attach_detach(target: Target, driver) -> None:
    """Attach a container of the scenario's own to a network of its own: the network's
    inspect lists it; detach it: the list is empty again."""
    name = target.prefix()
    network, container, cleanup = None, None, []
    try:
        ok(await driver.call("network.create", {"name": name + "-net", "options": {"driver": "bridge"}}), "network.create")
        network = name + "-net"
        ok(await driver.call("container.create", {"name": name + "-c", "image": target.image, "cmd": ["sleep", "3600"]}),
           "container.create")
        container = name + "-c"
        ok(await driver.call("network.connect_container", {"networkId": network, "containerId": container}), "network.connect_container")
        got = ok(await driver.call("network.get", {"networkId": network}), "network.get")
        assert [c.get("name") for c in got.structured.get("containersList") or []] == [container], got.structured
        again = await driver.call("network.connect_container", {"networkId": network, "containerId": container})
        assert again.is_error, again.text  # already attached: Docker refuses
        ok(await driver.call("network.disconnect_container", {"networkId": network, "containerId": container}),
           "network.disconnect_container")
        got = ok(await driver.call("network.get", {"networkId": network}), "network.get after disconnect")
        assert not got.structured.get("containersList"), got.structured
    finally:
        if container:
            await remove(driver, "container.delete", {"containerId": container, "force": True}, cleanup)
        if network:
            await remove(driver, "network.delete", {"networkId": network}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, PRUNE, mcp=True)
async def network_prune_reports(target: Target, driver) -> None:
    """An unused network of the scenario's own goes in a network prune, which names it."""
    name = target.prefix() + "-net"
    created, cleanup = False, []
    try:
        ok(await driver.call("network.create", {"name": name, "options": {"driver": "bridge"}}), "network.create")
        created = True
        out = ok(await driver.call("network.prune", {}, confirm=True), "network.prune")
        assert name in (out.structured.get("networksDeleted") or []), out.structured
        assert isinstance(out.structured.get("spaceReclaimed"), int), out.structured
        created = False
        gone = await driver.call("network.get", {"networkId": name})
        assert gone.is_error, gone.text
    finally:
        if created:
            await remove(driver, "network.delete", {"networkId": name}, cleanup)
    assert not cleanup, cleanup
