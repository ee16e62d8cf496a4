"""Each response kind, through the dispatcher, against an in-memory Arcane."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from tests.helpers import make_dispatcher, ok_json
from interpreter.dispatch import Call

pytestmark = pytest.mark.anyio


async def run(catalog, handler, action, args=None, confirm=False, **kw):
    d, rec = make_dispatcher(catalog, handler, **kw)
    try:
        res = await d.dispatch(Call(action, args or {}, confirm))
    finally:
        await d.client.aclose()
    return res, rec


async def test_envelope_list_keeps_every_member_beside_data(catalog):
    body = {"success": True, "data": [{"id": "a", "names": ["/web"]}],
            "pagination": {"totalPages": 3, "totalItems": 41, "currentPage": 1, "itemsPerPage": 20},
            "counts": {"runningContainers": 1}, "groups": []}
    res, rec = await run(catalog, lambda r: httpx.Response(200, json=body), "container.list")
    assert not res.is_error
    assert res.structured == {"items": body["data"], "pagination": body["pagination"], "counts": body["counts"], "groups": []}
    assert "1 item(s) — 41 total, page 1 of 3" in res.text
    req = rec.requests[0]
    assert req.url.path == "/api/environments/0/containers"
    assert req.headers["x-api-key"] == "arc_test_key"


async def test_envelope_object_and_value(catalog):
    res, _ = await run(catalog, lambda r: ok_json({"id": "c1", "name": "web"}), "container.get", {"containerId": "c1"})
    assert res.structured == {"id": "c1", "name": "web"}
    res, _ = await run(catalog, lambda r: ok_json("done"), "container.get", {"containerId": "c1"})
    assert res.structured == {"value": "done"}


async def test_bare_values(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(200, json=[{"name": "a"}]), "customize.list_categories")
    assert res.structured == {"items": [{"name": "a"}]}
    res, _ = await run(catalog, lambda r: httpx.Response(200, json={"currentVersion": "2.12.0"}), "version.get")
    assert res.structured == {"currentVersion": "2.12.0"}


async def test_empty_answer(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(200), "health.head")
    assert res.structured == {"status": 200} and not res.is_error


def ndjson(*lines):
    return httpx.Response(200, headers={"content-type": "application/x-json-stream"},
                          content=b"".join(json.dumps(l).encode() + b"\n" for l in lines))


async def test_ndjson_success(catalog):
    res, rec = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "act-1"},
                                                   {"status": "Pulling fs layer", "id": "abc"},
                                                   {"status": "Download complete", "id": "abc"}, {"done": True}),
                         "image.pull", {"imageName": "nginx:latest"})
    assert not res.is_error, res.text
    assert res.structured["status"] == "done" and res.structured["activityId"] == "act-1"
    assert res.structured["lastLines"][-1] == "abc Download complete"
    assert json.loads(rec.requests[0].content) == {"imageName": "nginx:latest"}


async def test_ndjson_error_line_is_a_failure_even_with_200(catalog):
    res, _ = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "act-2"},
                                                 {"error": "pull access denied for nosuch"}),
                       "image.pull", {"imageName": "nosuch"})
    assert res.is_error and res.structured is None
    assert "pull access denied for nosuch" in res.text and "act-2" in res.text


async def test_ndjson_without_done_is_incomplete(catalog):
    res, _ = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "a"}, {"status": "x"}),
                       "project.up", {"projectId": "p"})
    assert res.is_error and "without a done line" in res.text


async def test_text_download_capped(catalog):
    text = "line\n" * 1000
    handler = lambda r: httpx.Response(200, headers={"content-type": "text/plain", "content-disposition": 'attachment; filename="web.log"'}, content=text.encode())
    res, _ = await run(catalog, handler, "container.download_logs", {"containerId": "web"}, max_download_bytes=100)
    assert res.structured["filename"] == "web.log" and res.structured["truncated"] is True
    assert res.structured["text"] == text[:100]
    assert "cut at ARCANE_MCP_MAX_DOWNLOAD_BYTES" in res.text


async def test_binary_download_is_a_blob(catalog):
    data = bytes(range(256)) * 4
    handler = lambda r: httpx.Response(200, headers={"content-type": "application/x-tar", "content-disposition": "attachment; filename=nginx.tar"}, content=data)
    res, _ = await run(catalog, handler, "image.export", {"name": "nginx"})
    assert not res.is_error and res.blobs[0].data == data and res.blobs[0].filename == "nginx.tar"
    assert res.structured == {"filename": "nginx.tar", "contentType": "application/x-tar", "size": len(data), "truncated": False}
    res, _ = await run(catalog, handler, "image.export", {"name": "nginx"}, max_download_bytes=10)
    assert res.is_error and "ARCANE_MCP_MAX_DOWNLOAD_BYTES" in res.text


async def test_auto_download_picks_text_or_binary(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(200, content=b"services:\n  web: {}\n"), "project.download_workspace_file", {"projectId": "p", "relativePath": "compose.yaml"})
    assert res.structured["text"].startswith("services:")
    res, _ = await run(catalog, lambda r: httpx.Response(200, content=b"\x00\x01\x02"), "project.download_workspace_file", {"projectId": "p", "relativePath": "x.bin"})
    assert res.blobs and res.blobs[0].data == b"\x00\x01\x02"


async def test_problem_json_error(catalog):
    problem = {"title": "Not Found", "status": 404, "detail": "container not found: nope"}
    res, _ = await run(catalog, lambda r: httpx.Response(404, json=problem, headers={"content-type": "application/problem+json"}), "container.get", {"containerId": "nope"})
    assert res.is_error and res.structured is None
    assert "container not found: nope" in res.text
    assert "Next step: Find valid IDs with container.list." in res.text


async def test_problem_json_field_errors(catalog):
    problem = {"title": "Unprocessable Entity", "status": 422, "detail": "validation failed",
               "errors": [{"location": "body.imageName", "message": "expected length >= 1", "value": ""}]}
    res, _ = await run(catalog, lambda r: httpx.Response(422, json=problem), "image.pull", {"imageName": "x"})
    assert "imageName: expected length >= 1" in res.text


async def test_success_false_error(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(400, json={"success": False, "error": "bad thing"}), "container.get", {"containerId": "x"})
    assert res.is_error and "bad thing" in res.text
    res, _ = await run(catalog, lambda r: httpx.Response(200, json={"success": False, "error": "soft failure"}), "container.get", {"containerId": "x"})
    assert res.is_error and "soft failure" in res.text


async def test_redirect_is_not_followed(catalog):
    res, rec = await run(catalog, lambda r: httpx.Response(302, headers={"location": "http://evil.test/steal"}), "container.list")
    assert res.is_error and "redirect" in res.text
    assert len(rec.requests) == 1 and rec.requests[0].url.host == "arcane.test"


async def test_malformed_json(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(200, content=b"{not json", headers={"content-type": "application/json"}), "container.list")
    assert res.is_error and "not valid JSON" in res.text


async def test_daemon_unreachable_hint(catalog):
    problem = {"title": "Not Found", "status": 404, "detail": "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"}
    res, _ = await run(catalog, lambda r: httpx.Response(404, json=problem), "container.list")
    assert "Docker daemon is unreachable" in res.text


async def test_multipart_and_octet_requests(catalog):
    res, rec = await run(catalog, lambda r: ok_json({"id": "p1"}), "project.create",
                         {"project": '{"name":"demo"}', "manifest": "{}", "files": [{"filename": "compose.yaml", "text": "services: {}"}, {"filename": "x.bin", "base64": "AAEC"}]})
    assert not res.is_error, res.text
    req = rec.requests[0]
    assert req.headers["content-type"].startswith("multipart/form-data")
    body = req.content
    assert b'name="project"' in body and b'{"name":"demo"}' in body
    assert b'filename="compose.yaml"' in body and b"services: {}" in body and b"\x00\x01\x02" in body
    res, rec = await run(catalog, lambda r: ok_json({"id": "u", "kind": "image"}), "upload.put_chunk",
                         {"kind": "image", "uploadId": "u1", "index": 3, "body": {"base64": "AAEC"}})
    req = rec.requests[0]
    assert req.url.path == "/api/environments/0/uploads/image/u1/chunks/3"
    assert req.content == b"\x00\x01\x02" and req.headers["content-type"] == "application/octet-stream"


async def test_path_values_cannot_escape_their_segment(catalog):
    res, rec = await run(catalog, lambda r: ok_json({}), "container.get", {"containerId": "../../users/1"})
    assert rec.requests[0].url.raw_path == b"/api/environments/0/containers/..%2F..%2Fusers%2F1"


async def test_query_and_header_bindings(catalog):
    res, rec = await run(catalog, lambda r: ok_json([], pagination={"totalPages": 0, "totalItems": 0, "currentPage": 1, "itemsPerPage": 5}),
                         "container.list", {"environmentId": "2", "limit": 5, "includeInternal": True, "search": "web"})
    url = rec.requests[0].url
    assert url.path == "/api/environments/2/containers"
    assert dict(url.params) == {"limit": "5", "includeInternal": "true", "search": "web"}


async def test_public_operation_sends_no_credential(catalog):
    res, rec = await run(catalog, lambda r: httpx.Response(200, json={"status": "UP"}), "health.get")
    assert "x-api-key" not in rec.requests[0].headers
