"""Write scenarios for projects, Swarm and system backups: what a model writes reads back.

Each creates only resources under the target's prefix (a system backup has no name: the
scenario removes the one it created, by its ID) and removes them in `finally`."""

from __future__ import annotations

import asyncio
import base64
import json

from tests.scenarios.harness import SWARM, SYSTEM_BACKUPS, WRITES, Target, scenario
from tests.scenarios.writes import ok, remove


def _compose(image: str, service: str = "app") -> str:
    return f"services:\n  {service}:\n    image: {image}\n    command: [\"sleep\", \"3600\"]\n"


@scenario(WRITES, mcp=True)
async def project_compose_round_trip(target: Target, driver) -> None:
    """A project created from Compose text reads its Compose and .env back, an update
    shows in the next read, and destroy removes it."""
    name = target.prefix() + "-cmp"
    compose, env = _compose(target.image), "MODE=demo\n"
    project_id, cleanup = None, []
    try:
        out = ok(await driver.call("project.create", {
            "name": name, "composeContent": compose, "envContent": env}), "project.create")
        project_id = out.structured["id"]
        got = ok(await driver.call("project.get_compose", {"projectId": project_id}), "project.get_compose")
        assert got.structured["composeContent"] == compose and got.structured["envContent"] == env, got.structured
        assert [s.get("image") for s in got.structured.get("services") or []] == [target.image], got.structured.get("services")
        changed = _compose(target.image, "worker")
        ok(await driver.call("project.update", {"projectId": project_id, "composeContent": changed}), "project.update")
        again = ok(await driver.call("project.get_compose", {"projectId": project_id}), "project.get_compose after update")
        assert again.structured["composeContent"] == changed and again.structured["envContent"] == env
        ok(await driver.call("project.destroy", {"projectId": project_id, "removeFiles": True}, confirm=True), "project.destroy")
        project_id = None
        gone = await driver.call("project.get", {"projectId": out.structured["id"]})
        assert gone.is_error
    finally:
        if project_id:
            await remove(driver, "project.destroy", {"projectId": project_id, "removeFiles": True}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, SWARM, mcp=True)
async def swarm_config_and_secret_lifecycle(target: Target, driver) -> None:
    """A config and a secret are created, listed (the secret without its data) and deleted."""
    prefix = target.prefix()
    config_id, secret_id, cleanup = None, None, []
    payload = base64.b64encode(b"level: debug\n").decode()
    secret = base64.b64encode(b"not-to-be-shown").decode()
    try:
        cfg = ok(await driver.call("swarm_config.create", {"spec": {"Name": prefix + "-cfg", "Labels": {}, "Data": payload}}), "swarm_config.create")
        config_id = cfg.structured["id"]
        listed = ok(await driver.call("swarm_config.list", {}), "swarm_config.list")
        assert config_id in json.dumps(listed.structured)
        sec = ok(await driver.call("swarm_secret.create", {"spec": {"Name": prefix + "-sec", "Labels": {}, "Data": secret}}), "swarm_secret.create")
        secret_id = sec.structured["id"]
        assert secret not in sec.text and secret not in json.dumps(sec.structured)
        secrets = ok(await driver.call("swarm_secret.list", {}), "swarm_secret.list")
        assert secret_id in json.dumps(secrets.structured) and secret not in json.dumps(secrets.structured)
        ok(await driver.call("swarm_secret.delete", {"secretId": secret_id}, confirm=True), "swarm_secret.delete")
        secret_id = None
        ok(await driver.call("swarm_config.delete", {"configId": config_id}, confirm=True), "swarm_config.delete")
        config_id = None
        after = ok(await driver.call("swarm_config.list", {}), "swarm_config.list after delete")
        assert cfg.structured["id"] not in json.dumps(after.structured)
    finally:
        if secret_id:
            await remove(driver, "swarm_secret.delete", {"secretId": secret_id}, cleanup)
        if config_id:
            await remove(driver, "swarm_config.delete", {"configId": config_id}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, SWARM, mcp=True)
async def swarm_service_scaled(target: Target, driver) -> None:
    """A replicated service is created, scaled to 2 and the read shows it, then removed."""
    name = target.prefix() + "-svc"
    service_id, cleanup = None, []
    spec = {"Name": name, "Labels": {}, "TaskTemplate": {"ContainerSpec": {"Image": target.image, "Args": ["sleep", "3600"]}},
            "Mode": {"Replicated": {"Replicas": 1}}}
    try:
        out = ok(await driver.call("swarm_service.create", {"spec": spec}), "swarm_service.create")
        service_id = out.structured["id"]
        ok(await driver.call("swarm_service.scale", {"serviceId": service_id, "replicas": 2}), "swarm_service.scale")
        got = ok(await driver.call("swarm_service.get", {"serviceId": service_id}), "swarm_service.get")
        assert got.structured["spec"]["Mode"]["Replicated"]["Replicas"] == 2, got.structured["spec"]
        ok(await driver.call("swarm_service.delete", {"serviceId": service_id}, confirm=True), "swarm_service.delete")
        service_id = None
        gone = await driver.call("swarm_service.get", {"serviceId": out.structured["id"]})
        assert gone.is_error
    finally:
        if service_id:
            await remove(driver, "swarm_service.delete", {"serviceId": service_id}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, SYSTEM_BACKUPS)
async def system_backup_lifecycle(target: Target, driver) -> None:
    """A local system backup is started, listed, and the one created is deleted."""
    backup_id, cleanup = None, []
    try:
        out = ok(await driver.call("system_backup.create", {"destination": "local"}), "system_backup.create")
        backup_id = out.structured["id"]
        assert out.structured["trigger"] == "manual" and out.structured.get("activityId")
        # the run works in the background (202): wait until it has ended, as a delete
        # meanwhile is refused (the system run lease)
        for _ in range(120):
            listed = ok(await driver.call("system_backup.list", {"limit": -1}), "system_backup.list")
            mine = [b for b in listed.structured["items"] if b["id"] == backup_id]
            assert mine, f"{backup_id} is not listed"
            if mine[0]["status"] != "running":
                break
            await asyncio.sleep(1)
        assert mine[0]["status"] == "succeeded", mine[0]
        # an empty recoveryKey: the stored one is used (the body is required, its member is not)
        ok(await driver.call("system_backup.delete", {"id": backup_id, "recoveryKey": ""}, confirm=True), "system_backup.delete")
        backup_id = None
        after = ok(await driver.call("system_backup.list", {"limit": -1}), "system_backup.list after delete")
        assert out.structured["id"] not in [b["id"] for b in after.structured["items"]]
    finally:
        if backup_id:
            await remove(driver, "system_backup.delete", {"id": backup_id, "recoveryKey": ""}, cleanup)
    assert not cleanup, cleanup
