"""Inputs shaped for a model (issue 23), end to end: a project made from Compose text
passed as plain string arguments, deployed, and its services found, also by state."""

from __future__ import annotations

from tests.scenarios.harness import WRITES, Target, scenario
from tests.scenarios.writes import ok, remove


def _compose(image: str) -> str:
    return (f"services:\n  web:\n    image: {image}\n    command: [\"sleep\", \"3600\"]\n"
            f"  worker:\n    image: {image}\n    command: [\"sleep\", \"3600\"]\n")


@scenario(WRITES, mcp=True)
async def project_from_plain_compose_text(target: Target, driver) -> None:
    """project.create takes name, composeContent and envContent as plain strings (no JSON
    inside a string); the project has both services, deploys, its services run and
    container.list finds their containers by state, the filter said in the text."""
    name = target.prefix() + "-txt"
    project_id, cleanup = None, []
    try:
        out = ok(await driver.call("project.create", {"name": name, "composeContent": _compose(target.image),
                                                       "envContent": "MODE=plain\n"}), "project.create")
        project_id = out.structured["id"]
        assert out.structured["serviceCount"] == 2, out.structured
        ok(await driver.call("project.up", {"projectId": project_id}), "project.up")
        runtime = ok(await driver.call("project.runtime", {"projectId": project_id}), "project.runtime")
        services = runtime.structured.get("runtimeServices") or []  # ProjectDetails.runtimeServices
        assert {s.get("name") for s in services} == {"web", "worker"}, runtime.structured
        assert all(s.get("status") == "running" for s in services), services
        running = ok(await driver.call("container.list", {"search": name, "state": "running", "limit": -1}), "container.list by state")
        found = [c for c in running.structured["items"] if any(name in n for n in c.get("names") or [])]
        assert len(found) == 2 and all(c["state"] == "running" for c in found), running.structured["items"]
        assert "filtered here" in running.text and "state=running" in running.text
        ok(await driver.call("project.down", {"projectId": project_id}, confirm=True), "project.down")
        ok(await driver.call("project.destroy", {"projectId": project_id, "removeFiles": True}, confirm=True), "project.destroy")
        project_id = None
    finally:
        if project_id:
            await remove(driver, "project.destroy", {"projectId": project_id, "removeFiles": True}, cleanup)
    assert not cleanup, cleanup
