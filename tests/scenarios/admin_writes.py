"""Write scenarios over Arcane's own records: registries, scoped API keys, variables,
templates and users. Each creates only records named with its own prefix, checks them
through the actions a model would use, and removes them in `finally`."""

from __future__ import annotations

import dataclasses

from interpreter.errors import ConfigError
from tests.scenarios.harness import WRITES, Outcome, Target, dispatch_driver, scenario
from tests.scenarios.writes import ok, remove


def items(out: Outcome) -> list:
    return (out.structured or {}).get("items") or []


@scenario(WRITES, mcp=True)
async def registry_created_tested_deleted(target: Target, driver) -> None:
    """A container registry with credentials: created (its token never comes back),
    listed, tested — the registry is unreachable (a name under .invalid), so Arcane's
    docker login fails: 400 "Registry test failed: …" (internal/registry/handler.go:349)
    — then deleted and gone from the list."""
    host = target.prefix() + ".invalid"
    registry_id, cleanup = None, []
    try:
        out = ok(await driver.call("registry.create", {
            "url": host, "username": "e2e-bot", "token": "e2e-token-not-a-secret", "description": "arcane-mcp e2e",
            "insecure": False, "enabled": True, "registryType": "generic", "repositoryNames": [],
            "awsAccessKeyId": "", "awsSecretAccessKey": "", "awsRegion": ""}), "registry.create")
        registry_id = out.structured["id"]
        assert out.structured["url"] == host and "token" not in out.structured, out.structured
        got = ok(await driver.call("registry.get", {"id": registry_id}), "registry.get")
        assert got.structured["username"] == "e2e-bot" and "token" not in got.structured
        listed = ok(await driver.call("registry.list", {"search": host}), "registry.list")
        assert [r["id"] for r in items(listed)] == [registry_id]
        tested = await driver.call("registry.test", {"id": registry_id})
        assert tested.is_error and tested.status in (None, 400), tested.text
        assert "Registry test failed" in tested.text, tested.text
        ok(await driver.call("registry.delete", {"id": registry_id}, confirm=True), "registry.delete")
        registry_id = None
        after = ok(await driver.call("registry.list", {"search": host}), "registry.list after delete")
        assert items(after) == []
    finally:
        if registry_id:
            await remove(driver, "registry.delete", {"id": registry_id}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES)
async def scoped_key_used_then_deleted(target: Target, driver) -> None:
    """A key scoped to listing containers on one environment: it lists them, it may not
    read users (403 "permission denied: users:list", internal/middleware/role.go:74), and
    once deleted it is refused as an unknown key (401)."""
    out = ok(await driver.call("api_key.create", {
        "name": target.prefix() + "-key", "description": "arcane-mcp e2e",
        "permissions": [{"permission": "containers:list", "environmentId": target.environment}]}), "api_key.create")
    key_id, key = out.structured["id"], out.structured["key"]
    deleted, cleanup = False, []
    try:
        async with dispatch_driver(dataclasses.replace(target, api_key=key)) as scoped:
            allowed = ok(await scoped.call("container.list", {"limit": 1}), "container.list with the scoped key")
            assert isinstance(allowed.structured.get("items"), list)
            denied = await scoped.call("user.list")
            assert denied.is_error and denied.status == 403 and "permission denied" in denied.first_line(), denied.text
            ok(await driver.call("api_key.delete", {"id": key_id}, confirm=True), "api_key.delete")
            deleted = True
            refused = await scoped.call("container.list", {"limit": 1})
            assert refused.is_error and refused.status == 401, refused.text
        gone = await driver.call("api_key.get", {"id": key_id})
        assert gone.is_error and gone.status == 404, gone.text
    finally:
        if not deleted:
            await remove(driver, "api_key.delete", {"id": key_id}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, mcp=True)
async def variable_and_template_created_read_deleted(target: Target, driver) -> None:
    """A global variable (its key upper-cased to a valid env name) and a Compose template:
    each created, read back with what was sent, and deleted."""
    key = target.prefix().upper().replace("-", "_")
    name = target.prefix() + "-tpl"
    content = "services:\n  app:\n    image: busybox:1.36.1\n"
    variable_id, template_id, cleanup = None, None, []
    try:
        out = ok(await driver.call("variable.create", {"key": key, "value": "e2e-value", "allEnvironments": True}), "variable.create")
        variable_id = out.structured["variable"]["id"]
        assert out.structured["variable"]["key"] == key
        listed = ok(await driver.call("variable.list"), "variable.list")
        assert [v["value"] for v in items(listed) if v["key"] == key] == ["e2e-value"]
        tpl = ok(await driver.call("template.create", {"name": name, "description": "arcane-mcp e2e", "content": content,
                                                       "envContent": ""}), "template.create")
        template_id = tpl.structured["id"]
        assert tpl.structured["isCustom"] is True and tpl.structured["isRemote"] is False
        got = ok(await driver.call("template.get", {"id": template_id}), "template.get")
        assert got.structured["name"] == name and got.structured["content"] == content
        ok(await driver.call("template.delete", {"id": template_id}, confirm=True), "template.delete")
        template_id = None
        assert (await driver.call("template.get", {"id": tpl.structured["id"]})).is_error
        ok(await driver.call("variable.delete", {"id": variable_id}, confirm=True), "variable.delete")
        variable_id = None
        after = ok(await driver.call("variable.list"), "variable.list after delete")
        assert key not in [v["key"] for v in items(after)]
    finally:
        if template_id:
            await remove(driver, "template.delete", {"id": template_id}, cleanup)
        if variable_id:
            await remove(driver, "variable.delete", {"id": variable_id}, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES)
async def user_created_logs_in_then_deleted(target: Target, driver) -> None:
    """A local user (a password of Arcane's default "strong" policy): created with no
    role, it logs in and reads itself (auth.me), may not list users (403), and once
    deleted it can no longer log in."""
    username = target.prefix() + "-user"
    password = "E2e!" + target.prefix()[-10:] + "Aa9"
    user_id, cleanup = None, []
    try:
        out = ok(await driver.call("user.create", {"username": username, "password": password, "displayName": "arcane-mcp e2e"}),
                 "user.create")
        user_id = out.structured["id"]
        assert out.structured["username"] == username and out.structured["isGlobalAdmin"] is False
        async with dispatch_driver(target, api_key="", username=username, password=password) as session:
            me = ok(await session.call("auth.me"), "auth.me as the new user")
            assert me.structured["username"] == username
            denied = await session.call("user.list")
            assert denied.is_error and denied.status == 403, denied.text
        ok(await driver.call("user.delete", {"userId": user_id}, confirm=True), "user.delete")
        user_id = None
        try:  # the engine logs in when it starts: Arcane refuses the deleted user (401)
            async with dispatch_driver(target, api_key="", username=username, password=password) as gone:
                refused = await gone.call("auth.me")
            raise AssertionError(f"a deleted user logged in: {refused.text}")
        except ConfigError as exc:
            assert "401" in str(exc), exc
    finally:
        if user_id:
            await remove(driver, "user.delete", {"userId": user_id}, cleanup)
    assert not cleanup, cleanup
