"""MCP-side scenarios: what a model's client does besides tool calls (resources, prompts,
a subscription, a long call as an MCP task) and the two modes an operator switches on
(ARCANE_MCP_SAFE_MODE, ARCANE_MCP_READ_ONLY), each through the harness drivers' MCP side
(tests/scenarios/harness.py: a real `interp serve` over stdio, or the same server in
memory). Whatever they create is named with the scenario's prefix and removed in `finally`."""

from __future__ import annotations

from mcp import MCPError
from mcp.types import INVALID_PARAMS

from interpreter.config import Settings
from tests.scenarios.harness import WRITES, Target, scenario
from tests.scenarios.writes import _has_image, compose, ok, remove

NOT_FOUND = -32602  # rules/resources.yaml errors.not_found: a URI no resource has, or an object Arcane does not have


@scenario(WRITES, mcp=True)
async def resource_read_is_redacted(target: Target, driver) -> None:
    """A project whose Compose file carries a password: its resource shows the file
    replaced by the redaction marker and lists what was hidden; the secret never appears."""
    name = target.prefix() + "-res"
    secret = "pw-" + target.prefix()[-10:] + "-s3cret"
    content = compose(target.image) + f"    environment:\n      DB_PASSWORD: {secret}\n"
    project_id, cleanup = None, []
    try:
        out = ok(await driver.call("project.create", {
            "name": name, "composeContent": content}), "project.create")
        project_id = out.structured["id"]
        uri = f"arcane://environment/{target.environment}/project/{project_id}"
        read = await driver.read_resource(uri)
        assert read.error_code is None and read.mime_type == "application/json", read.text
        assert secret not in read.text
        assert read.value["id"] == project_id and read.value["name"] == name
        hidden = read.value["_redacted"]
        assert hidden["fullValue"] == "project.get" and hidden["paths"], hidden
        # Arcane's project details carry the Compose file (types/project Details.ComposeContent)
        assert "composeContent" in read.value or target.name != "simulator"
        if "composeContent" in read.value:
            assert read.value["composeContent"] == "[redacted: use project.get]" and "/composeContent" in hidden["paths"]
        # a resource Arcane does not have is a JSON-RPC error, not a value
        gone = await driver.read_resource(f"arcane://environment/{target.environment}/project/{name}-missing")
        assert gone.error_code == NOT_FOUND, gone
        ok(await driver.call("project.destroy", {"projectId": project_id, "removeFiles": True}, confirm=True), "project.destroy")
        project_id = None
    finally:
        if project_id:
            await remove(driver, "project.destroy", {"projectId": project_id, "removeFiles": True}, cleanup)
    assert not cleanup, cleanup


@scenario(mcp=True)
async def every_prompt_names_its_steps_and_embeds_its_guide(target: Target, driver) -> None:
    """Each prompt of rules/resources.yaml, got with its required arguments: the text names
    the target and the environment, numbers its steps, and embeds the guide the guide
    resource serves."""
    prompts = target.catalog.resources.prompts
    assert prompts
    for prompt in prompts:
        args = {a.name: f"my-{a.name}" for a in prompt.arguments if a.required}
        got = await driver.get_prompt(prompt.name, args)
        for value in args.values():
            assert f"`{value}`" in got.text, (prompt.name, got.text)
        assert f"`{target.environment}`" in got.text
        numbered = [line.split(".", 1)[0] for line in got.text.splitlines() if line[:1].isdigit()]
        assert numbered == [str(i) for i in range(1, len(prompt.steps) + 1)], prompt.name
        assert got.guide_uri == f"arcane://guides/{prompt.guide}"
        guide = await driver.read_resource(got.guide_uri)
        assert guide.mime_type == "text/markdown" and guide.text == got.guide_text


async def _pull_cleanup(target: Target, driver, had: bool, cleanup: list[str]) -> None:
    if not had:
        await remove(driver, "image.remove", {"imageId": target.image}, cleanup)


async def _had_image(target: Target, driver) -> bool:
    repo = target.image.rpartition(":")[0]
    before = ok(await driver.call("image.list", {"search": repo, "limit": -1}), "image.list")
    return _has_image(before.structured["items"], target.image)


@scenario(WRITES, mcp=True)
async def a_subscription_sees_a_pull(target: Target, driver) -> None:
    """Watching the environment's containers: a pull made through another session ends an
    activity, and the watched URI is updated (rules/resources.yaml `updates`)."""
    uri = f"arcane://environment/{target.environment}/containers"
    repo, _, tag = target.image.rpartition(":")
    had, cleanup = True, []
    try:
        had = await _had_image(target, driver)
        async with driver.watch(uri) as watch:
            assert watch.honored == [uri]
            changed = None
            for _ in range(3):  # the watch's upstream stream may still be opening on the first pull
                ok(await driver.call("image.pull", {"imageName": repo, "tag": tag}), "image.pull")
                try:
                    changed = await watch.changed(within=15.0)
                    break
                except TimeoutError:
                    continue
            assert changed == uri
    finally:
        await _pull_cleanup(target, driver, had, cleanup)
    assert not cleanup, cleanup


@scenario(WRITES, mcp=True)
async def a_pull_runs_as_an_mcp_task(target: Target, driver) -> None:
    """With the tasks extension declared, a pull answers a task handle at once; tasks/get
    reports it until it completes with the result the blocking call gives."""
    repo, _, tag = target.image.rpartition(":")
    had, cleanup = True, []
    try:
        had = await _had_image(target, driver)
        run = await driver.call_as_task("image.pull", {"imageName": repo, "tag": tag})
        assert run.handles == ["working"], run
        assert run.statuses and run.statuses[-1] == "completed" and set(run.statuses) <= {"working", "completed"}, run.statuses
        assert not run.outcome.is_error, run.outcome.text
        assert run.outcome.structured["status"] == "done" and run.outcome.structured["activityId"]
    finally:
        await _pull_cleanup(target, driver, had, cleanup)
    assert not cleanup, cleanup


def _refused(out, code: str) -> bool:
    """Refused with this code (the dispatcher's code; over MCP only the error flag travels)."""
    return out.is_error and out.code in (None, code)


@scenario(mcp=True)
async def safe_mode_and_read_only_mode(target: Target, driver) -> None:
    """The defaults users get: both modes off, a read runs and a destructive call waits for
    confirm. Safe mode on: a change answers a preview and sends nothing, a destructive call
    without confirm is refused, a read runs. Read-only mode on: a change is not served, a
    read runs. Nothing is created on the target."""
    defaults = Settings(arcane_url="http://arcane.invalid")
    assert defaults.safe_mode is False and defaults.read_only is False
    name = target.prefix() + "-net"
    read = ("environment.get", {"id": target.environment})
    leaked, cleanup = False, []
    try:
        ok(await driver.call(*read), "a read with the defaults")
        refused = await driver.call("network.delete", {"networkId": name})
        assert _refused(refused, "confirmation_required"), refused.text
        async with driver.variant(safe_mode=True) as safe:
            preview = ok(await safe.call("network.create", {"name": name, "options": {"driver": "bridge"}}), "safe-mode create")
            assert preview.structured["preview"] is True and preview.structured["method"] == "POST", preview.structured
            assert preview.structured["path"].endswith(f"/environments/{target.environment}/networks"), preview.structured
            refused = await safe.call("network.delete", {"networkId": name})
            assert _refused(refused, "confirmation_required"), refused.text
            ok(await safe.call(*read), "a read in safe mode")
        gone = await driver.call("network.get", {"networkId": name})
        leaked = not gone.is_error
        assert not leaked, "safe mode created the network"
        async with driver.variant(read_only=True) as read_only:
            try:
                refused = await read_only.call("network.create", {"name": name, "options": {"driver": "bridge"}})
                assert _refused(refused, "unknown_action"), refused.text
            except MCPError as exc:  # the individual surface: the action's own tool is not served at all
                assert exc.code == INVALID_PARAMS and read_only.surface == "individual", exc
            ok(await read_only.call(*read), "a read in read-only mode")
            ok(await read_only.call("network.list", {"search": name}), "a list in read-only mode")
        gone = await driver.call("network.get", {"networkId": name})
        leaked = not gone.is_error
        assert not leaked, "read-only mode created the network"
    finally:
        if leaked:
            await remove(driver, "network.delete", {"networkId": name}, cleanup)
    assert not cleanup, cleanup
