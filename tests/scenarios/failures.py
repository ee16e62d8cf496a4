"""Failure scenarios: what Arcane answers when an operation fails, stalls, or cannot be
reached, and what the engine makes of it (error text, next step, code, audit)."""

from __future__ import annotations

import uuid

import httpx

from tests.scenarios.harness import FAULTS, LOGIN_LIMIT, RECORDS, Target, dispatch_driver, scenario


@scenario()
async def failures_inside_a_stream(target: Target, driver) -> None:
    """An unknown project and a pull of an image that does not exist answer HTTP 200 and
    an error frame after the activity line: the call is an error naming the activity."""
    out = await driver.call("project.up", {"projectId": str(uuid.uuid4())})
    assert out.is_error and out.code in (None, "stream_failed"), out.text
    assert "project not found" in out.first_line().lower() and "activity" in out.first_line()
    assert driver.name("project.list") in out.next_step()
    missing = target.prefix() + "/no-such-image"
    out = await driver.call("image.pull", {"imageName": missing, "tag": "none"})
    assert out.is_error and out.code in (None, "stream_failed"), out.text
    assert missing in out.first_line() and "activity" in out.first_line()


@scenario()
async def project_names_are_found_or_refused(target: Target, driver) -> None:
    """A name that no project has is refused before anything else is sent, naming the list."""
    out = await driver.call("project.get", {"projectId": target.prefix() + "-no-such-project"})
    assert out.is_error and out.code in (None, "invalid_arguments"), out.text
    assert driver.name("project.list") in out.text


@scenario(FAULTS)
async def a_silent_stream_is_not_a_timeout(target: Target, driver) -> None:
    """Arcane's streams send no heartbeat: silence longer than the per-read timeout is
    normal, and a pull that goes quiet for a while still ends well."""
    target.sim.set_faults({"stall": {"seconds": 1.5, "after": 2, "match": "pull-image", "count": 1}})
    try:
        async with dispatch_driver(target, request_timeout=0.5, action_timeout=30) as quick:
            repo, _, tag = target.image.rpartition(":")
            out = await quick.call("image.pull", {"imageName": repo, "tag": tag})
    finally:
        target.sim.set_faults({})
    assert not out.is_error, out.text
    assert out.structured["status"] == "done" and out.structured["activityId"]


@scenario(FAULTS)
async def the_deadline_mid_stream_names_the_activity(target: Target, driver) -> None:
    target.sim.set_faults({"stall": {"seconds": 20, "after": 2, "match": "pull-image", "count": 1}})
    try:
        async with dispatch_driver(target, request_timeout=0.5, action_timeout=1.5) as quick:
            repo, _, tag = target.image.rpartition(":")
            out = await quick.call("image.pull", {"imageName": repo, "tag": tag})
            audit = quick.audit.records[-1]
    finally:
        target.sim.set_faults({})
    assert out.is_error and out.code == "arcane_timeout" and "may still be running" in out.first_line(), out.text
    activity = audit["activity"]
    assert activity and activity in out.first_line() and audit["outcome"] == "failed"
    assert driver.name("activity.get") in out.next_step() and "activityId" in out.next_step() and activity in out.next_step()
    follow = await driver.call("activity.get", {"activityId": activity})
    assert not follow.is_error and follow.structured["activity"]["id"] == activity, follow.text  # ActivityDetail {activity, messages}


@scenario(FAULTS)
async def a_down_daemon_gets_the_daemon_hint(target: Target, driver) -> None:
    """Both texts of the current Docker client (a first connection, and the cached client
    after the daemon went away) lead to the daemon hint, over HTTP errors and in streams."""
    listed = await driver.call("project.list")
    assert not listed.is_error and listed.structured["items"], listed.text
    project_id = listed.structured["items"][0]["id"]
    for mode in ("cold", "cached"):
        target.sim.set_faults({"daemon_down": {target.environment: mode}})
        try:
            out = await driver.call("container.list")
            up = await driver.call("project.up", {"projectId": project_id})
        finally:
            target.sim.set_faults({})
        for o in (out, up):
            assert o.is_error and "docker" in o.first_line().lower(), (mode, o.text)
            assert driver.name("environment.test") in o.next_step(), (mode, o.text)
        assert up.code in (None, "stream_failed") and "activity" in up.first_line()


@scenario(LOGIN_LIMIT, RECORDS)
async def a_rate_limited_login_is_not_retried(target: Target, driver) -> None:
    """Arcane allows 5 logins a minute, then 429 with Retry-After: 60. The engine tries
    once, says when to retry, and sends no other login inside that minute."""
    user, password = target.login
    async with httpx.AsyncClient(base_url=target.url + "/api") as raw:
        for _ in range(10):  # use the minute's budget up, as other clients might have
            r = await raw.post("/auth/login", json={"username": user, "password": password})
            if r.status_code == 429:
                break
        assert r.status_code == 429 and r.headers.get("retry-after"), (r.status_code, r.text)
    target.sim.clear_requests()
    try:
        async with dispatch_driver(target, api_key="", username=user, password=password) as session:
            for _ in range(5):
                out = await session.call("container.list")
                assert out.is_error and out.code == "auth_failed" and out.status == 429, out.text
                assert "Retry in" in out.next_step() and "UTC" in out.next_step()
        logins = [r for r in target.sim.requests() if r.path == "/api/auth/login"]
        assert len(logins) == 1, [r.path for r in target.sim.requests()]  # startup's one try, then none
    finally:
        target.sim.reset()  # a fresh minute for the scenarios after this one
