"""Read scenarios: every domain the credential can see, and the refusals that send nothing."""

from __future__ import annotations

import dataclasses
import re

from tests.scenarios.harness import WRITES, Target, dispatch_driver, scenario

# What a real Arcane may answer a list with that says "not here", not "broken": the
# credential lacks the permission (internal/middleware/role.go "permission denied: …"),
# the Arcane is older than the catalog (the /api catch-all 404 "API endpoint not found"),
# or the host is not in Swarm mode. The simulator may answer none of them. On both, the
# Bearer-only lists (passkeys) are not visible to an API key.
NOT_VISIBLE = 403
NOT_SERVED = re.compile(r"(?i)API endpoint not found")
NOT_SWARM = re.compile(r"(?i)not a swarm manager|swarm is not|not part of a swarm|This node is not")


def list_actions(target: Target) -> list[str]:
    """Every served list action that needs no argument but the environment."""
    env = target.catalog.env_arg
    return sorted(a.id for a in target.catalog.actions.values()
                  if a.read_only and not a.pending and a.response_kind == "json"
                  and (a.name == "list" or a.name.startswith("list_")) and set(a.required) <= {env})


async def read_lists(target: Target, driver, *, restricted: bool = False) -> tuple[dict, list, list]:
    """Call every list; (seen -> item count, not visible, not served). A 403 is 'not
    visible to this credential' on a real Arcane, and for a `restricted` key anywhere."""
    seen, hidden, unserved, failed = {}, [], [], []
    env = target.catalog.env_arg
    for aid in list_actions(target):
        props = target.catalog.actions[aid].input_schema.get("properties", {})
        out = await driver.call(aid, {env: target.environment} if env in props else {})
        if not out.is_error:
            assert isinstance(out.structured, dict) and out.text.startswith("## "), (aid, out.text)
            items = out.structured.get("items")
            if isinstance(items, list):  # a list (some "lists" are objects, e.g. job.list's {jobs, …})
                assert "item(s)" in out.text and (("| " in out.text) if items else True), (aid, out.text)
            seen[aid] = len(items) if isinstance(items, list) else None
        elif out.code == "session_required" or ((target.name == "real" or restricted) and out.status == NOT_VISIBLE):
            hidden.append(aid)  # Bearer-only (a user session, not a key), or no permission
        elif target.name == "real" and (NOT_SERVED.search(out.text) or (aid.startswith("swarm") and NOT_SWARM.search(out.text))):
            unserved.append(aid)
        else:
            failed.append(f"{aid}: {out.first_line()}")
    print(f"\n{target.name}: {len(seen)} list actions visible, {len(hidden)} not visible to this credential "
          f"({', '.join(hidden) or 'none'}), {len(unserved)} not served here ({', '.join(unserved) or 'none'})")
    assert not failed, "\n".join(failed)
    return seen, hidden, unserved


@scenario()
async def read_every_domain(target: Target, driver) -> None:
    """Each list action answers a list that renders; on a real Arcane a 403 counts as
    'not visible to this credential', a route older Arcanes lack as 'not served'."""
    seen, hidden, unserved = await read_lists(target, driver)
    assert seen, "the credential sees no list at all"
    if target.name == "simulator":
        # the simulator holds demo data for every domain: no list is empty there
        empty = [aid for aid, n in seen.items() if n == 0]
        assert not empty, f"lists without demo items: {', '.join(empty)}"


@scenario(mcp=True)
async def refusals_send_nothing(target: Target, driver) -> None:
    """A bad argument, an unknown container and an unconfirmed delete are errors with a
    next step in the surface's own names; the delete changes nothing."""
    out = await driver.call("container.list", {"limit": "many"})
    assert out.is_error and "'limit'" in out.first_line()
    out = await driver.call("container.get", {"containerId": target.prefix() + "-no-such-container"})
    assert out.is_error and driver.name("container.list") in out.next_step(), out.text
    listed = await driver.call("container.list", {"limit": 1})
    assert not listed.is_error, listed.text
    for item in listed.structured["items"][:1]:
        out = await driver.call("container.delete", {"containerId": item["id"]})
        assert out.is_error and "confirm: true" in out.text
        again = await driver.call("container.get", {"containerId": item["id"]})
        assert not again.is_error and again.structured["id"] == item["id"]
    out = await driver.call("version.get")
    assert not out.is_error, out.text


@scenario(WRITES)
async def a_scoped_key_sees_only_its_lists(target: Target, driver) -> None:
    """A key created with one permission (containers:list, internal/apikey/model.go
    `scoped`) sees that list; every other list answers 403 "permission denied: <perm>"
    (internal/middleware/role.go:74), which the read counts as not visible."""
    out = await driver.call("api_key.create", {"name": target.prefix() + "-key",
                                                "permissions": [{"permission": "containers:list", "environmentId": target.environment}]})
    assert not out.is_error, out.text
    key_id, key = out.structured["id"], out.structured["key"]
    try:
        async with dispatch_driver(dataclasses.replace(target, api_key=key)) as scoped:
            seen, hidden, _ = await read_lists(target, scoped, restricted=True)
            assert "container.list" in seen and "image.list" in hidden and "user.list" in hidden, (seen, hidden)
            denied = await scoped.call("image.list")
            assert denied.status == 403 and "permission denied" in denied.first_line(), denied.text
            assert scoped.name("image.list") in denied.next_step()
    finally:
        gone = await driver.call("api_key.delete", {"id": key_id}, confirm=True)
        assert not gone.is_error, gone.text
