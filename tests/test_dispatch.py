"""The dispatcher's rules, in order, on every surface."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from interpreter.build.catalog import BuildOptions, build
from interpreter.call.dispatch import Call
from interpreter.front.surfaces import make_surface
from tests.helpers import make_dispatcher, ok_json

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


async def test_destructive_without_confirm_is_refused_and_nothing_changed(catalog):
    d, rec = make_dispatcher(catalog, lambda r: ok_json({"message": "removed"}))
    res = await d.dispatch(Call("container.delete", {"containerId": "web"}))
    assert res.is_error and "not confirmed" in res.text and "confirm: true" in res.text
    # the refusal carries the question: only the reads that name its target and environment
    assert rec.requests and all(r.method == "GET" for r in rec.requests)
    assert d.audit.records[-1]["outcome"] == "refused"
    rec.requests.clear()
    res = await d.dispatch(Call("container.delete", {"containerId": "web"}, confirm=True))
    assert not res.is_error and [r.method for r in rec.requests] == ["DELETE"]
    assert d.audit.records[-1]["outcome"] == "executed" and d.audit.records[-1]["confirmation"] == "argument"


async def test_pending_handler_is_not_served(catalog):
    # every handler kind is served today: the action is made pending as a later catalog may declare one
    from dataclasses import replace
    from types import MappingProxyType

    trace = replace(catalog.actions["diagnostics.trace"], pending=True)
    catalog = replace(catalog, actions=MappingProxyType({**catalog.actions, trace.id: trace}),
                      all_actions=MappingProxyType({**catalog.all_actions, trace.id: trace}))
    d, rec = make_dispatcher(catalog, lambda r: ok_json({}))
    res = await d.dispatch(Call("diagnostics.trace", {}))
    assert res.is_error and "not served yet" in res.text and not rec.requests


async def test_action_deadline_for_a_read_and_a_write(catalog):
    async def slow(request):
        await asyncio.sleep(2)
        return ok_json([])

    for aid, args, expect in [("container.list", {}, "did not finish"), ("container.restart", {"containerId": "w"}, "the change may have happened")]:
        settings_kw = {"action_timeout": 0.2}
        from interpreter.call.dispatch import Dispatcher
        from interpreter.call.request import ArcaneClient
        from interpreter.config import Settings
        from interpreter.front.call_records import AuditLog

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
    from interpreter.call.dispatch import Dispatcher
    from interpreter.call.request import ArcaneClient
    from interpreter.config import Settings
    from interpreter.front.call_records import AuditLog

    cat = build()
    s = Settings(arcane_url="http://127.0.0.1:9", audit_log="off")
    d = Dispatcher(cat, s, ArcaneClient(s), AuditLog("off"))
    res = await d.dispatch(Call("container.list", {}))
    assert res.is_error and res.error_code == "arcane_unreachable" and res.http_status is None
    assert "ARCANE_URL" in res.text.split("Next step:", 1)[1]  # the setting to check is named


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


# ---------------------------------------------------------------- operation streams

PROJECT_ID = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"
OTHER_ID = "4a1e8b77-6c2d-4f90-b3e5-8d7c6b5a4f32"


def _frames(*frames) -> bytes:
    import json

    return b"".join(json.dumps(f).encode() + b"\n" for f in frames)


def _stream(*frames) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "application/x-json-stream"}, content=_frames(*frames))


async def _chunked_server(frames_before: list, pause: float, frames_after: list):
    """A real HTTP server whose stream goes silent for `pause` seconds after the first
    frames, as Arcane's does while a layer downloads (no heartbeat)."""

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(h.split(b":", 1)[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0)
        if length:
            await reader.readexactly(length)
        chunk = lambda b: f"{len(b):x}\r\n".encode() + b + b"\r\n"  # noqa: E731
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-json-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(chunk(_frames(*frames_before)))
        await writer.drain()
        try:
            await asyncio.sleep(pause)
            writer.write(chunk(_frames(*frames_after)) + b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _real_dispatcher(catalog, url, **kw):
    from interpreter.call.dispatch import Dispatcher
    from interpreter.call.request import ArcaneClient
    from interpreter.config import Settings
    from interpreter.front.call_records import AuditLog

    s = Settings(arcane_url=url, api_key="arc_k", audit_log="off", **kw)
    return Dispatcher(catalog, s, ArcaneClient(s), AuditLog("off"))


async def test_a_silent_stream_outlives_the_read_timeout(catalog):
    """Silence longer than ARCANE_MCP_REQUEST_TIMEOUT is normal: only the deadline bounds it."""
    server, url = await _chunked_server([{"type": "activity", "activityId": "act-s"}], 0.8,
                                        [{"log": "a2318d6c47ec: Pull complete"}, {"done": True}])
    d = _real_dispatcher(catalog, url, request_timeout=0.2, action_timeout=10)
    try:
        res = await d.dispatch(Call("image.pull", {"imageName": "nginx:1.27"}))
        assert not res.is_error, res.text
        assert res.structured["status"] == "done" and res.structured["activityId"] == "act-s"
        # a JSON read keeps its read timeout
        res = await d.dispatch(Call("container.list", {}))
        assert res.is_error and res.error_code == "arcane_timeout"
    finally:
        await d.client.aclose()
        server.close()


async def test_the_deadline_mid_stream_names_the_activity_to_follow(catalog):
    server, url = await _chunked_server([{"type": "activity", "activityId": "act-long"}, {"log": "a2318d6c47ec: Pulling fs layer"}],
                                        30, [{"done": True}])
    d = _real_dispatcher(catalog, url, request_timeout=0.1, action_timeout=0.6)
    try:
        res = await d.dispatch(Call("image.pull", {"imageName": "nginx:1.27"}))
    finally:
        await d.client.aclose()
        server.close()
    assert res.is_error and res.error_code == "arcane_timeout"
    first = res.text.split("Next step:", 1)[0]
    assert "act-long" in first and "a2318d6c47ec" in first  # the activity, and the last line it said
    step = res.text.split("Next step:", 1)[1]
    assert "activity.get" in step and "activityId" in step and "act-long" in step
    rec = d.audit.records[-1]
    assert rec["outcome"] == "failed" and rec["activity"] == "act-long" and rec["error_class"] == "ArcaneTimeout"


async def test_the_follow_action_is_named_as_the_surface_calls_it(catalog):
    d, _ = make_dispatcher(catalog, lambda r: _stream({"type": "activity", "activityId": "act-3"}, {"error": "boom"}))
    res = await d.dispatch(Call("image.pull", {"imageName": "x"}, surface="meta"))
    assert res.is_error and "arcane_activity (action `get`)" in res.text and "act-3" in res.text


def test_stream_requests_have_no_read_timeout(catalog):
    from interpreter.call.request import ArcaneClient, prepare
    from interpreter.config import Settings

    s = Settings(arcane_url="http://arcane.test", api_key="arc_k", audit_log="off", request_timeout=7)
    client = ArcaneClient(s)
    pull = catalog.actions["image.pull"]
    listing = catalog.actions["container.list"]
    assert client.build(pull, prepare(pull, {"imageName": "x", "environmentId": "0"})).extensions["timeout"]["read"] is None
    assert client.build(pull, prepare(pull, {"imageName": "x", "environmentId": "0"})).extensions["timeout"]["connect"] == 7
    assert client.build(listing, prepare(listing, {"environmentId": "0"})).extensions["timeout"]["read"] == 7


async def test_in_stream_failure_error_hint_and_audit(catalog):
    d, rec = make_dispatcher(catalog, lambda r: _stream({"type": "activity", "activityId": "act-f"},
                                                        {"log": "Pulling nosuch"},
                                                        {"error": "pull access denied for nosuch, repository does not exist"}))
    res = await d.dispatch(Call("image.pull", {"imageName": "nosuch"}))
    assert res.is_error and res.error_code == "stream_failed" and res.structured is None
    first, step = res.text.splitlines()[0], res.text.split("Next step:", 1)[1]
    assert "image.pull" in first and "nosuch" in first and "act-f" in first  # the action, Arcane's error, the activity
    assert "activity.get" in step and "act-f" in step
    audit = d.audit.records[-1]
    assert audit["outcome"] == "failed" and audit["activity"] == "act-f" and audit["http_status"] == 200
    assert audit["error_class"] == "StreamFailed"


async def test_a_project_not_found_in_a_stream_names_the_list(catalog):
    d, _ = make_dispatcher(catalog, lambda r: _stream({"type": "activity", "activityId": "act-p"}, {"error": "project not found"}))
    res = await d.dispatch(Call("project.up", {"projectId": PROJECT_ID}))
    assert res.is_error and res.error_code == "stream_failed" and "project.list" in res.text.split("Next step:", 1)[1]


async def test_progress_notifications_from_log_frames(catalog):
    sent = []

    async def progress(value, total, message):
        sent.append((value, total, message))

    frames = [{"type": "activity", "activityId": "act-n"}, {"log": "1.27: Pulling from library/nginx"},
              {"log": "a2318d6c47ec: Pulling fs layer"}, {"log": "a2318d6c47ec: Downloading 10MB/40MB"},
              {"log": "a2318d6c47ec: Pull complete"}, {"done": True}]
    d, _ = make_dispatcher(catalog, lambda r: _stream(*frames))
    res = await d.dispatch(Call("image.pull", {"imageName": "nginx:1.27"}, progress=progress))
    assert not res.is_error, res.text
    assert sent, "no progress notification"
    assert [v for v, _, _ in sent] == sorted({v for v, _, _ in sent})  # increasing
    assert sent[-1][2] == "layer a2318d6c47ec: Pull complete"  # the last line always goes out
    # this stream arrives at once: the rate limit holds back everything between first and last
    assert len(sent) == 2 and sent[0][2] == "1.27: Pulling from library/nginx"


# ---------------------------------------------------------------- IDs from names


def _projects(*items):
    return ok_json(list(items), pagination={"totalPages": 1, "totalItems": len(items), "currentPage": 1, "itemsPerPage": 20})


def _arcane_with_projects(*items):
    def handler(request):
        if request.url.path == "/api/environments/0/projects":
            # Arcane's list leaves archived projects out unless archived is true (only them) or all
            archived = request.url.params.get("archived", "")
            return _projects(*[p for p in items if archived == "all" or (archived == "true") == bool(p.get("isArchived"))])
        return ok_json({"id": request.url.path.rsplit("/", 1)[-1], "name": "blog"})
    return handler


async def test_a_project_name_is_resolved_through_the_list(catalog):
    d, rec = make_dispatcher(catalog, _arcane_with_projects({"id": PROJECT_ID, "name": "blog"}, {"id": OTHER_ID, "name": "blog-staging"}))
    res = await d.dispatch(Call("project.get", {"projectId": "blog"}))
    assert not res.is_error, res.text
    lookup, get = rec.requests
    assert lookup.url.path == "/api/environments/0/projects" and dict(lookup.url.params) == {"search": "blog", "limit": "-1", "archived": "all"}
    assert get.url.path == f"/api/environments/0/projects/{PROJECT_ID}"
    assert res.structured == {"id": PROJECT_ID, "name": "blog"}  # Arcane's value, untouched
    note = res.text.splitlines()[2]
    assert note.startswith("Note: ") and "blog" in note and PROJECT_ID in note and "project.list" in note


async def test_an_archived_project_is_found_by_its_name(catalog):
    d, rec = make_dispatcher(catalog, _arcane_with_projects({"id": PROJECT_ID, "name": "legacy", "isArchived": True}))
    res = await d.dispatch(Call("project.get", {"projectId": "legacy"}))
    assert not res.is_error, res.text
    assert [r.url.path for r in rec.requests] == ["/api/environments/0/projects", f"/api/environments/0/projects/{PROJECT_ID}"]
    assert rec.requests[0].url.params.get("archived") == "all"


async def test_an_id_is_passed_as_it_is(catalog):
    d, rec = make_dispatcher(catalog, _arcane_with_projects())
    res = await d.dispatch(Call("project.get", {"projectId": PROJECT_ID}))
    assert not res.is_error and len(rec.requests) == 1 and "Note:" not in res.text


async def test_an_unknown_or_ambiguous_name_sends_nothing_else(catalog):
    d, rec = make_dispatcher(catalog, _arcane_with_projects({"id": PROJECT_ID, "name": "blog"}, {"id": OTHER_ID, "name": "Blog"}))
    res = await d.dispatch(Call("project.up", {"projectId": "shop"}))
    assert res.is_error and res.error_code == "invalid_arguments" and "project.list" in res.text
    assert [r.url.path for r in rec.requests] == ["/api/environments/0/projects"]
    res = await d.dispatch(Call("project.up", {"projectId": "BLOG"}))  # no exact match; two fold to it
    assert res.is_error and PROJECT_ID in res.text and OTHER_ID in res.text
    assert len(rec.requests) == 2


async def test_a_resolved_name_shows_in_the_question_and_a_preview_sends_no_change(catalog):
    d, rec = make_dispatcher(catalog, _arcane_with_projects({"id": PROJECT_ID, "name": "blog"}), safe_mode=True)
    res = await d.dispatch(Call("project.destroy", {"projectId": "blog"}, confirm=True))
    assert not res.is_error, res.text
    assert (res.structured or {}).get("preview") and "Note: " in res.text and "project.list" in res.text
    # safe mode: the change is not sent; a destructive change's name is looked up (a read), so
    # the preview shows the path that would be sent and the question reads the real target
    assert all(r.method == "GET" for r in rec.requests) and any(r.url.path.endswith("/projects") for r in rec.requests)
    assert PROJECT_ID in res.structured["path"] and "confirmation" in res.structured

    asked = []

    async def elicit(question):
        asked.append(question)
        return "decline"

    d, rec = make_dispatcher(catalog, _arcane_with_projects({"id": PROJECT_ID, "name": "blog"}))
    res = await d.dispatch(Call("project.destroy", {"projectId": "blog"}, elicit=elicit))
    assert res.is_error and res.error_code == "confirmation_required"
    assert "`blog`" in asked[0] and PROJECT_ID[:12] in asked[0]  # the user sees the name and the ID it stands for
    assert all(r.method == "GET" for r in rec.requests)


async def test_without_a_declared_resolution_the_error_names_the_list(catalog):
    import dataclasses
    from types import MappingProxyType

    rules = {k: dataclasses.replace(v, resolve=False) for k, v in catalog.arguments.items()}
    cat = dataclasses.replace(catalog, arguments=MappingProxyType(rules))
    d, rec = make_dispatcher(cat, _arcane_with_projects({"id": PROJECT_ID, "name": "blog"}))
    for surface, name in (("dynamic", "project.list"), ("individual", "arcane_project_list")):
        res = await d.dispatch(Call("updater.check_project", {"projectId": "blog"}, surface=surface))
        assert res.is_error and res.error_code == "invalid_arguments" and name in res.text
    assert rec.requests == []


async def test_an_unconfirmed_destructive_call_changes_nothing(catalog):
    # safe mode refuses before anything is sent
    d, rec = make_dispatcher(catalog, _arcane_with_projects({"id": PROJECT_ID, "name": "blog"}), safe_mode=True)
    res = await d.dispatch(Call("project.destroy", {"projectId": "blog"}))
    assert res.is_error and res.error_code == "confirmation_required" and rec.requests == []
    # nobody to ask: the refusal carries the question, the name resolved; only reads were sent
    d, rec = make_dispatcher(catalog, _arcane_with_projects({"id": PROJECT_ID, "name": "blog"}))
    res = await d.dispatch(Call("project.destroy", {"projectId": "blog"}))
    assert res.is_error and res.error_code == "confirmation_required"
    assert "`blog`" in res.text and PROJECT_ID[:12] in res.text
    assert rec.requests and all(r.method == "GET" for r in rec.requests)


# ---------------------------------------------------------------- arguments found valid (issue 12)

async def test_flat_arguments_found_valid_are_not_validated_again(catalog):
    d, rec = make_dispatcher(catalog, lambda r: ok_json([]))
    seen = []
    real = d.validator

    def counting(action):
        seen.append(action.id)
        return real(action)

    d.validator = counting
    for _ in range(3):
        assert not (await d.dispatch(Call("container.list", {"limit": 5, "search": "web"}))).is_error
    assert seen == ["container.list"] and len(rec.requests) == 3
    # equal in Python, not in JSON Schema: true is no integer, and is validated (and refused)
    res = await d.dispatch(Call("container.list", {"limit": True, "search": "web"}))
    assert res.is_error and res.error_fields == ["limit"] and len(rec.requests) == 3
    # invalid arguments are never remembered: refused every time
    for _ in range(2):
        assert (await d.dispatch(Call("container.list", {"limit": "ten"}))).is_error
    assert seen.count("container.list") == 4


async def test_arguments_named_as_secrets_or_nested_are_never_remembered(catalog):
    d, _ = make_dispatcher(catalog, lambda r: ok_json({}))
    action = catalog.actions["system_backup.browse_files"]
    secret = next(k for k in action.input_schema["properties"] if catalog.redaction.is_secret_name(k))
    assert d._valid_key(action, {secret: "x"}) is None
    assert d._valid_key(catalog.actions["container.list"], {"filters": {"a": 1}}) is None
    assert d._valid_key(catalog.actions["container.list"], {"limit": 1}) != d._valid_key(catalog.actions["container.list"], {"limit": True})


async def test_the_remembered_arguments_are_bounded(catalog):
    from interpreter.call.dispatch import VALID_MEMO_SIZE

    d, _ = make_dispatcher(catalog, lambda r: ok_json([]))
    action = catalog.actions["container.list"]
    for i in range(VALID_MEMO_SIZE + 3):
        d._remember_valid(action, {"search": f"s{i}"})
    assert len(d._valid) == VALID_MEMO_SIZE and not d._known_valid(action, {"search": "s0"})
    assert d._known_valid(action, {"search": f"s{VALID_MEMO_SIZE + 2}"})
