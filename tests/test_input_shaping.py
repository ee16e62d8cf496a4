"""Inputs shaped for a model (issue 23): JSON-text parts offered as plain arguments
(overlay `json_parts`), prompts that pass on every argument, the inventory's corrections of
over-declared `required` lists, environment names resolved, and declared client-side
filters of list actions."""

from __future__ import annotations

import json

import pytest

from interpreter.build.catalog import build
from interpreter.build.schema import JSON_PART, MULTIPART
from interpreter.call.dispatch import Call
from tests.helpers import dispatch_to, make_dispatcher, ok_json

pytestmark = pytest.mark.anyio

COMPOSE = "services:\n  web:\n    image: nginx:alpine\n  cache:\n    image: redis:7\n"


send = dispatch_to  # one call through the dispatcher to the simulator: (result, the requests it received)


def parts_of(req) -> dict[str, str]:
    """The text parts of a recorded multipart request, by name."""
    ctype = req.header("content-type")
    assert ctype.startswith("multipart/form-data; boundary="), ctype
    boundary = ctype.split("boundary=", 1)[1].encode()
    out = {}
    for chunk in req.body.split(b"--" + boundary)[1:-1]:
        head, _, value = chunk.strip(b"\r\n").partition(b"\r\n\r\n")
        if b"filename=" in head:
            continue
        name = head.split(b'name="', 1)[1].split(b'"', 1)[0].decode()
        out[name] = value.decode("utf-8")
    return out


async def mocked(catalog, action, args, answer=None):
    d, rec = make_dispatcher(catalog, lambda r: ok_json(answer if answer is not None else {"id": "p1"}))
    res = await d.dispatch(Call(action, args, confirm=True))
    return res, rec.requests


# ---------------------------------------------------------------- json_parts


SHAPED = {  # every operation of the document with a member holding JSON text, and its members
    "project.create": {"project": {"name", "composeContent", "envContent", "tags"}, "manifest": {"fileChanges"}},
    "project.update_workspace": {"manifest": {"fileTreeRevision", "fileChanges"}},
    "volume.update_workspace": {"manifest": {"fileTreeRevision", "fileChanges"}},
}


def test_every_json_text_member_of_the_document_is_shaped(catalog):
    """Every multipart part or string the document describes as JSON-encoded is no argument
    any more: its members are, bound to the part."""
    doc = catalog.document
    found = set()
    for item in doc["paths"].values():
        for op in item.values():
            content = (op.get("requestBody") or {}).get("content", {}) if isinstance(op, dict) else {}
            for media in content.values():
                for name, prop in (media.get("schema", {}).get("properties") or {}).items():
                    if prop.get("type") == "string" and "JSON" in (prop.get("description") or ""):
                        found.add((op["operationId"], name))
    shaped = {(a.operation_id, part) for aid, parts in SHAPED.items() for a in [catalog.all_actions[aid]] for part in parts}
    assert found == shaped
    for aid, parts in SHAPED.items():
        a = catalog.all_actions[aid]
        props = a.input_schema["properties"]
        for part, members in parts.items():
            assert part not in props
            got = {b.arg for b in a.bindings if b.location == JSON_PART and b.wire == part}
            assert got == members and members <= set(props)
            assert all(b.via == MULTIPART for b in a.bindings if b.wire == part)


def test_create_requires_name_and_compose_text_only(catalog):
    a = catalog.all_actions["project.create"]
    assert set(a.required) == {"name", "composeContent"}
    assert a.input_schema["properties"]["composeContent"]["type"] == "string"
    assert a.input_schema["properties"]["composeContent"]["description"]
    assert set(catalog.all_actions["volume.update_workspace"].required) == {"volumeName", "fileTreeRevision", "fileChanges"}


async def test_plain_arguments_become_the_json_parts_arcane_reads(sim):
    res, reqs = await send(sim, "project.create", {"name": "shaped", "composeContent": COMPOSE, "envContent": "A=1\n"})
    assert not res.is_error, res.text
    (req,) = reqs
    parts = parts_of(req)
    assert json.loads(parts["project"]) == {"name": "shaped", "composeContent": COMPOSE, "envContent": "A=1\n"}
    assert json.loads(parts["manifest"]) == {"fileChanges": []}  # the fill: Arcane requires the part
    assert res.structured["serviceCount"] == 2
    res, _ = await send(sim, "project.get_compose", {"projectId": res.structured["id"]})
    assert not res.is_error and res.structured["composeContent"] == COMPOSE


async def test_text_parts_alone_are_still_multipart(catalog):
    res, reqs = await mocked(catalog, "project.create", {"name": "n", "composeContent": COMPOSE})
    assert not res.is_error, res.text
    assert reqs[0].headers["content-type"].startswith("multipart/form-data")
    assert b'name="project"' in reqs[0].content and b"filename" not in reqs[0].content


async def test_members_of_a_workspace_manifest(catalog):
    changes = [{"operation": "create_file", "relativePath": "conf/app.ini", "uploadIndex": 0}]
    res, reqs = await mocked(catalog, "volume.update_workspace", {
        "volumeName": "data", "fileTreeRevision": "rev-1", "fileChanges": changes,
        "files": [{"filename": "app.ini", "text": "x=1\n"}]})
    assert not res.is_error, res.text
    body = reqs[0].content
    start = body.index(b'name="manifest"')
    manifest = json.loads(body[start:].split(b"\r\n\r\n", 1)[1].split(b"\r\n--", 1)[0])
    assert manifest == {"fileTreeRevision": "rev-1", "fileChanges": changes}


@pytest.mark.parametrize("args, field", [
    ({"name": "", "composeContent": COMPOSE}, "name"),
    ({"name": "x", "composeContent": ""}, "composeContent"),
    ({"name": "x"}, "composeContent"),
    ({"name": "x", "composeContent": COMPOSE, "project": json.dumps({"name": "x"})}, "project"),
    ({"name": "x", "composeContent": COMPOSE, "fileChanges": "create_file compose.yaml"}, "fileChanges"),
    ({"name": "x", "composeContent": {"services": {}}}, "composeContent"),
])
async def test_bad_members_are_one_line_errors_naming_the_field(catalog, args, field):
    res, reqs = await mocked(catalog, "project.create", args)
    assert res.is_error and reqs == []
    assert res.error_code == "invalid_arguments", res.error_code
    assert field in res.text and "Traceback" not in res.text


@pytest.mark.parametrize("value", [
    "x" * (1024 * 1024),  # 1 MB
    "name\x00with\x07controls\x1b[31m",
    "../../etc",
    '{"name": "evil", "composeContent": "services: {}"}',  # a JSON-looking string stays a string
    "名前\u202e",
])
async def test_odd_member_values_travel_as_json_strings(catalog, value):
    res, reqs = await mocked(catalog, "project.create", {"name": value, "composeContent": value, "envContent": value})
    assert not res.is_error, res.text[:300]
    body = reqs[0].content
    start = body.index(b'name="project"')
    sent = json.loads(body[start:].split(b"\r\n\r\n", 1)[1].split(b"\r\n--", 1)[0])
    assert sent == {"name": value, "composeContent": value, "envContent": value}


# ---------------------------------------------------------------- inventory `optional`


def test_a_plain_registry_needs_no_aws_fields(catalog):
    create = catalog.all_actions["registry.create"]
    assert set(create.required) == {"url", "username", "token"}
    assert catalog.all_actions["registry.update"].required == ("id",)  # the registry's ID only: an update names what changes
    assert any(c.startswith("optional=") for c in create.corrections)


async def test_left_out_members_are_sent_as_their_neutral_values(sim):
    res, reqs = await send(sim, "registry.create", {"url": "registry.example.test", "username": "bob", "token": "tkn-1"})
    assert not res.is_error, res.text
    body = reqs[0].json()
    assert body["url"] == "registry.example.test" and body["registryType"] == ""
    assert (body["awsAccessKeyId"], body["awsSecretAccessKey"], body["awsRegion"]) == ("", "", "")
    assert body["description"] is None and body["enabled"] is None
    reg_id = res.structured["id"]
    assert res.structured["enabled"] is True  # nil enabled is true (service.go CreateRegistry)
    id_arg = next(b.arg for b in build().all_actions["registry.update"].bindings if b.location == "path" and b.arg != "environmentId")
    res, reqs = await send(sim, "registry.update", {id_arg: reg_id, "description": "mirror"})
    assert not res.is_error, res.text
    body = reqs[0].json()
    assert body["description"] == "mirror" and body["url"] is None and body["awsRegion"] is None
    assert res.structured["url"] == "registry.example.test" and res.structured["description"] == "mirror"


async def test_a_given_member_overrides_its_neutral_value(catalog):
    res, reqs = await mocked(catalog, "registry.create", {"url": "r.test", "username": "u", "token": "t", "registryType": "ecr",
                                                          "awsRegion": "eu-west-1"})
    assert not res.is_error, res.text
    body = json.loads(reqs[0].content)
    assert body["registryType"] == "ecr" and body["awsRegion"] == "eu-west-1" and body["awsAccessKeyId"] == ""


# ---------------------------------------------------------------- environment names


async def test_an_environment_name_is_resolved_and_said(sim):
    res, reqs = await send(sim, "container.list", {"environmentId": "build-agent"})
    assert not res.is_error, res.text
    assert [r.path for r in reqs][-1] == "/api/environments/7c9e6679-7425-40de-944b-e07fc1f90ae7/containers"
    note = next(line for line in res.text.splitlines() if "resolved" in line)  # the answer says so
    assert "build-agent" in note and "7c9e6679-7425-40de-944b-e07fc1f90ae7" in note
    # case folded when no exact match
    res, reqs = await send(sim, "container.list", {"environmentId": "BUILD-AGENT"})
    assert not res.is_error and reqs[-1].path.startswith("/api/environments/7c9e6679-")


@pytest.mark.parametrize("value", ["0", "7c9e6679-7425-40de-944b-e07fc1f90ae7"])
async def test_an_environment_id_is_sent_as_it_is(sim, value):
    res, reqs = await send(sim, "container.list", {"environmentId": value})
    assert not res.is_error, res.text
    assert len(reqs) == 1 and reqs[0].path == f"/api/environments/{value}/containers"
    assert "resolved" not in res.text


async def test_the_default_environment_is_kept(sim):
    res, reqs = await send(sim, "container.list", {})
    assert not res.is_error and len(reqs) == 1 and reqs[0].path == "/api/environments/0/containers"


def _environments(*names):
    items = [{"id": f"{i:08x}-0000-4000-8000-000000000000", "name": n, "apiUrl": f"http://h{i}:3553"} for i, n in enumerate(names, 1)]
    return {"success": True, "data": items, "pagination": {"totalPages": 1, "totalItems": len(items), "currentPage": 1, "itemsPerPage": 100}}


@pytest.mark.parametrize("value, code", [
    ("twin", "invalid_arguments"),       # two environments share the name
    ("nowhere", "invalid_arguments"),    # none has it
    ("", "invalid_path_value"),          # empty
    ("..", "invalid_path_value"),         # a path segment that would change the route
    ("a\x00b\x1b[2J", None),             # control characters: looked up, matches nothing
    ('{"id": "0"}', None),               # a JSON-looking name is a name
    ("x" * (1024 * 1024), None),         # 1 MB
])
async def test_bad_environment_names_are_one_line_errors(catalog, value, code):
    import httpx

    def answer(r):
        if r.url.path.endswith("/environments"):
            return httpx.Response(200, json=_environments("twin", "twin", "solo"))
        return ok_json([])

    d, rec = make_dispatcher(catalog, answer)
    res = await d.dispatch(Call("container.list", {"environmentId": value}))
    assert res.is_error, res.text[:200]
    if code:
        assert res.error_code == code, (res.error_code, res.text[:300])
    assert "environmentId" in res.text and "Traceback" not in res.text
    assert not any("/containers" in r.url.path for r in rec.requests)  # nothing but the lookup was sent
    if value == "twin":
        assert "00000001-0000-4000-8000-000000000000" in res.text and "00000002-0000-4000-8000-000000000000" in res.text


async def test_a_name_that_only_part_matches_names_the_candidates_and_takes_none(catalog):
    """"local" for "Local Docker": the error names the items whose name holds it, with their
    IDs, and nothing is sent but the lookup (a guess is the caller's to make)."""
    import httpx

    def answer(r):
        if r.url.path.endswith("/environments"):
            return httpx.Response(200, json=_environments("Local Docker", "build-agent", "local-edge `*x*`"))
        return ok_json([])

    d, rec = make_dispatcher(catalog, answer)
    res = await d.dispatch(Call("container.list", {"environmentId": "local"}))
    assert res.is_error and res.error_code == "invalid_arguments" and res.error_fields == ["environmentId"]
    first = res.text.splitlines()[0]
    assert "Local Docker" in first and "00000001-0000-4000-8000-000000000000" in first
    assert "build-agent" not in first and "00000003-0000-4000-8000-000000000000" in first
    assert not any("/containers" in r.url.path for r in rec.requests)


# ---------------------------------------------------------------- client-side filters


async def test_containers_by_state_filtered_here_and_said(sim):
    res, reqs = await send(sim, "container.list", {"state": "exited"})
    assert not res.is_error, res.text
    assert "state" not in dict(reqs[0].query) and dict(reqs[0].query)["limit"] == "500"  # not sent; a bounded page asked for
    items = res.structured["items"]
    assert items and all(it["state"] == "exited" for it in items)
    note = next(line for line in res.text.splitlines() if "filtered here" in line)
    assert "state=exited" in note and f"{len(items)} of " in note
    res, _ = await send(sim, "container.list", {"limit": -1})
    assert len(res.structured["items"]) > len(items) and any(it["state"] != "exited" for it in res.structured["items"])


async def test_containers_by_health(sim):
    res, _ = await send(sim, "container.list", {"health": "healthy"})
    assert not res.is_error, res.text
    assert res.structured["items"] and all("(healthy)" in it["status"] for it in res.structured["items"])
    res, _ = await send(sim, "container.list", {"health": "none", "state": "running"})
    assert all("(" not in it["status"] and it["state"] == "running" for it in res.structured["items"])


async def test_a_given_page_size_is_kept_and_said(sim):
    res, reqs = await send(sim, "container.list", {"state": "running", "limit": 2})
    assert not res.is_error and dict(reqs[0].query)["limit"] == "2"
    assert "at most 2" in res.text
    res, reqs = await send(sim, "container.list", {"state": "running", "limit": -1})
    assert "all items Arcane holds" in res.text


@pytest.mark.parametrize("args, field", [
    ({"state": "sleeping"}, "state"),
    ({"state": ""}, "state"),
    ({"health": "x" * (1024 * 1024)}, "health"),
    ({"health": "healthy\x00"}, "health"),
    ({"state": '{"$ne": null}'}, "state"),
])
async def test_bad_filter_values_are_one_line_errors(catalog, args, field):
    res, reqs = await mocked(catalog, "container.list", args)
    assert res.is_error and reqs == [] and res.error_code == "invalid_arguments"
    assert field in res.text and "Traceback" not in res.text


async def test_items_of_another_shape_do_not_match(catalog):
    answer = [{"id": "a", "state": "running", "status": None}, {"id": "b", "state": 7, "status": 7}, "junk", None,
              {"id": "c"}, {"id": "d", "status": "Up 1 minute (healthy)"}]
    res, _ = await mocked(catalog, "container.list", {"health": "none"}, answer=answer)
    assert not res.is_error, res.text
    assert [it["id"] for it in res.structured["items"]] == ["a", "c"]  # a status that is no text fails the JMESPath: no match
