"""The dispatcher's rules, in order, on every surface."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.helpers import make_dispatcher, ok_json
from interpreter.catalog import BuildOptions, build
from interpreter.dispatch import Call
from interpreter.surfaces import make_surface

pytestmark = pytest.mark.anyio


async def test_bad_argument_names_each_field_and_sends_nothing(catalog):
    d, rec = make_dispatcher(catalog, lambda r: ok_json([]))
    res = await d.dispatch(Call("container.list", {"limit": "ten", "serch": "web"}))
    assert res.is_error and not rec.requests
    assert res.error_code == "invalid_arguments" and set(res.error_fields) == {"limit", "serch"}
    assert "'search'" in res.text  # the closest parameter is proposed
    assert "limit?: integer" in res.text  # the parameter list, as describe_param writes it


async def test_missing_required_parameter(catalog):
    d, rec = make_dispatcher(catalog, lambda r: ok_json({}))
    res = await d.dispatch(Call("container.get", {}))
    assert res.is_error and not rec.requests
    assert (res.error_code, res.error_fields) == ("invalid_arguments", ["containerId"])


async def test_unknown_action_lists_the_closest(catalog):
    d, _ = make_dispatcher(catalog, lambda r: ok_json({}))
    res = await d.dispatch(Call("container.restrat", {}))
    assert res.is_error and "container.restart" in res.text


async def test_destructive_without_confirm_is_refused_and_nothing_sent(catalog):
    d, rec = make_dispatcher(catalog, lambda r: ok_json({"message": "removed"}))
    res = await d.dispatch(Call("container.delete", {"containerId": "web"}))
    assert res.is_error and "not confirmed" in res.text and "confirm: true" in res.text
    assert rec.requests == []
    assert d.audit.records[-1]["outcome"] == "refused"
    res = await d.dispatch(Call("container.delete", {"containerId": "web"}, confirm=True))
    assert not res.is_error and rec.requests[0].method == "DELETE"
    assert d.audit.records[-1]["outcome"] == "executed" and d.audit.records[-1]["confirmation"] == "argument"


async def test_pending_handler_is_not_served(catalog):
    d, rec = make_dispatcher(catalog, lambda r: ok_json({}))
    res = await d.dispatch(Call("container.logs", {"containerId": "web"}))
    assert res.is_error and "not served yet" in res.text and not rec.requests
    res = await d.dispatch(Call("stream.watch", {}))
    assert res.is_error and "not served yet" in res.text


async def test_action_deadline_for_a_read_and_a_write(catalog):
    async def slow(request):
        await asyncio.sleep(2)
        return ok_json([])

    for aid, args, expect in [("container.list", {}, "did not finish"), ("container.restart", {"containerId": "w"}, "the change may have happened")]:
        settings_kw = {"action_timeout": 0.2}
        from interpreter.config import Settings
        from interpreter.request import ArcaneClient
        from interpreter.dispatch import Dispatcher
        from interpreter.auditlog import AuditLog

        s = Settings(arcane_url="http://arcane.test", api_key="k", audit_log="off", **settings_kw)
        d = Dispatcher(catalog, s, ArcaneClient(s, transport=httpx.MockTransport(slow)), AuditLog("off"))
        res = await d.dispatch(Call(aid, args))
        assert res.is_error and expect in res.text, res.text
        if aid == "container.restart":
            assert "container.get" in res.text  # which action shows the current state


async def test_audit_records_names_only(catalog):
    d, _ = make_dispatcher(catalog, lambda r: ok_json({"token": "s3cr3t-from-arcane"}))
    await d.dispatch(Call("auth.login", {"username": "admin", "password": "hunter2-secret"}))
    rec = d.audit.records[-1]
    assert rec["arguments"] == ["password", "username"]
    assert "hunter2" not in str(rec) and "s3cr3t" not in str(rec)


async def test_unreachable_arcane_is_an_error_result():
    from interpreter.auditlog import AuditLog
    from interpreter.config import Settings
    from interpreter.dispatch import Dispatcher
    from interpreter.request import ArcaneClient

    cat = build()
    s = Settings(arcane_url="http://127.0.0.1:9", audit_log="off")
    d = Dispatcher(cat, s, ArcaneClient(s), AuditLog("off"))
    res = await d.dispatch(Call("container.list", {}))
    assert res.is_error and "could not be reached" in res.text and "ARCANE_URL" in res.text


def test_read_only_and_exclusions_withdraw_actions_everywhere():
    cat = build(BuildOptions(read_only=True, exclude=("image", "container.get", "volume.*")))
    assert all(a.read_only for a in cat.actions.values())
    assert "container.restart" not in cat.actions and "read-only" in cat.withdrawn["container.restart"]
    assert "container.get" not in cat.actions and "EXCLUDE" in cat.withdrawn["container.get"]
    assert not any(a.domain in ("image", "volume") for a in cat.actions.values())
    assert all(r in cat.actions for a in cat.actions.values() for r in a.related + a.follow_ups)
    d, _ = make_dispatcher(cat, lambda r: ok_json({}))
    meta = make_surface("meta", cat, d)
    names = {t.name for t in meta.tools()}
    assert "arcane_image" not in names and "arcane_container" in names
    container_tool = meta.tool("arcane_container")
    assert "restart" not in container_tool.input_schema["properties"]["action"]["enum"]
    assert container_tool.read_only and not container_tool.destructive
    ind = make_surface("individual", cat, d)
    assert "arcane_container_get" not in {t.name for t in ind.tools()}


async def test_withdrawn_action_says_why(catalog):
    cat = build(BuildOptions(exclude=("container.kill",)))
    d, _ = make_dispatcher(cat, lambda r: ok_json({}))
    res = await d.dispatch(Call("container.kill", {"containerId": "x"}, confirm=True))
    assert res.is_error and "ARCANE_MCP_EXCLUDE_TOOLS" in res.text


async def test_the_question_names_the_target_or_falls_back_to_its_id(catalog):
    def arcane(request):
        if request.method == "GET" and request.url.path.endswith("/containers/3f2a8c1e9b7d4f03a5e1"):
            return ok_json({"id": "3f2a8c1e9b7d4f03a5e1", "name": "web-1"})
        return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "No such container"})

    d, rec = make_dispatcher(catalog, arcane)
    q = await d.question(catalog.actions["container.delete"], {"containerId": "3f2a8c1e9b7d4f03a5e1", "environmentId": "0"})
    assert q == "Delete container: `web-1` (containerId 3f2a8c1e9b7d…) on environment 0?"
    q = await d.question(catalog.actions["container.delete"], {"containerId": "gone", "environmentId": "0"})
    assert q == "Delete container: containerId `gone` on environment 0?"  # the lookup failed: the ID it is
    assert all(r.method == "GET" for r in rec.requests)
    q = await d.question(catalog.actions["volume_backup.delete"], {"backupId": "b-1", "environmentId": "2"})
    assert q == "Delete volume backup: backupId `b-1` on environment 2?"  # no read names it
