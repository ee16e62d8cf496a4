"""Each response kind, through the dispatcher, against an in-memory Arcane."""

from __future__ import annotations

import json

import httpx
import pytest

from interpreter.call.dispatch import Call
from tests.helpers import make_dispatcher, ok_json

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


async def test_a_flag_among_the_fields_is_the_envelopes(catalog):
    """Docker info carries `success` beside its own fields (types/dockerinfo/docker_info.go):
    neither structuredContent, its output schema nor the text shows the flag; a flag alone
    is an empty answer; `success: false` is still an error."""
    from interpreter import CATALOG_DIR
    from interpreter.build.schema import output_schema

    info = {"success": True, "ID": "ac72368a586a", "Containers": 3, "Name": "host-1"}
    res, _ = await run(catalog, lambda r: httpx.Response(200, json=info), "system.docker_info")
    assert res.structured == {"ID": "ac72368a586a", "Containers": 3, "Name": "host-1"} and not res.is_error
    assert "success" not in res.text and "host-1" in res.text
    res, _ = await run(catalog, lambda r: httpx.Response(200, json={"success": True}), "system.docker_info")
    assert res.structured == {"status": 200} and not res.is_error
    res, _ = await run(catalog, lambda r: httpx.Response(200, json={"success": False, "error": "daemon down"}), "system.docker_info")
    assert res.is_error
    doc = json.loads((CATALOG_DIR / "arcane.openapi.json").read_text(encoding="utf-8"))
    op = doc["paths"]["/environments/{id}/system/docker/info"]["get"]
    schema = output_schema(doc, op, catalog.conventions)
    assert "success" not in schema["properties"] and "Containers" in schema["properties"]


async def test_bare_values(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(200, json=[{"name": "a"}]), "customize.list_categories")
    assert res.structured == {"items": [{"name": "a"}]}
    res, _ = await run(catalog, lambda r: httpx.Response(200, json={"currentVersion": "2.12.0"}), "version.get")
    assert res.structured == {"currentVersion": "2.12.0"}


async def test_empty_answer(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(200), "health.head")
    assert res.structured == {"status": 200} and not res.is_error


PROJECT_ID = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"  # project arguments take IDs (UUIDs)


def ndjson(*lines):
    return httpx.Response(200, headers={"content-type": "application/x-json-stream"},
                          content=b"".join(json.dumps(line).encode() + b"\n" for line in lines))


async def test_ndjson_log_frames(catalog):
    """Arcane's frames (pkg/dockerutil/progress.go): activity, {"log":…} lines, done."""
    res, rec = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "act-1"},
                                                   {"log": "1.27: Pulling from library/nginx"},
                                                   {"log": "a2318d6c47ec: Pull complete"},
                                                   {"log": "Status: Downloaded newer image for nginx:1.27"}, {"done": True}),
                         "image.pull", {"imageName": "nginx:1.27"})
    assert not res.is_error, res.text
    s = res.structured
    assert s["status"] == "done" and s["activityId"] == "act-1" and s["lines"] == 5 and s["errors"] == []
    assert s["lastLines"] == ["1.27: Pulling from library/nginx", "a2318d6c47ec: Pull complete",
                              "Status: Downloaded newer image for nginx:1.27"]
    assert "a2318d6c47ec: Pull complete" in res.text
    assert json.loads(rec.requests[0].content) == {"imageName": "nginx:1.27"}


async def test_ndjson_legacy_docker_messages_still_read(catalog):
    """Arcane before 2.6 relayed Docker's JSON messages: their members make the line."""
    res, _ = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "act-1"},
                                                 {"status": "Pulling fs layer", "id": "abc"},
                                                 {"status": "Download complete", "id": "abc"}, {"done": True}),
                       "image.pull", {"imageName": "nginx:latest"})
    assert not res.is_error, res.text
    assert res.structured["lastLines"][-1] == "abc Download complete"


async def test_ndjson_error_line_is_a_failure_even_with_200(catalog):
    res, _ = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "act-2"},
                                                 {"log": "Pulling nosuch"},
                                                 {"error": "pull access denied for nosuch"}),
                       "image.pull", {"imageName": "nosuch"})
    assert res.is_error and res.structured is None and res.error_code == "stream_failed"
    assert "pull access denied for nosuch" in res.text and "act-2" in res.text


async def test_ndjson_without_done_is_incomplete(catalog):
    res, _ = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "a"}, {"log": "x"}),
                       "project.up", {"projectId": PROJECT_ID})
    assert res.is_error and res.error_code == "stream_failed" and "without a done line" in res.text


async def test_text_download_capped(catalog):
    text = "line\n" * 1000
    handler = lambda r: httpx.Response(200, headers={"content-type": "text/plain", "content-disposition": 'attachment; filename="web.log"'},
                                       content=text.encode())
    res, _ = await run(catalog, handler, "container.download_logs", {"containerId": "web"}, max_download_bytes=100)
    assert res.structured["filename"] == "web.log" and res.structured["truncated"] is True
    assert res.structured["text"] == text[:100]
    assert not res.is_error and "ARCANE_MCP_MAX_DOWNLOAD_BYTES" in res.text  # the cut names the setting that made it


async def test_binary_download_is_a_blob(catalog):
    data = bytes(range(256)) * 4
    handler = lambda r: httpx.Response(200, headers={"content-type": "application/x-tar", "content-disposition": "attachment; filename=nginx.tar"},
                                       content=data)
    res, _ = await run(catalog, handler, "image.export", {"name": "nginx"})
    assert not res.is_error and res.blobs[0].data == data and res.blobs[0].filename == "nginx.tar"
    assert res.structured == {"filename": "nginx.tar", "contentType": "application/x-tar", "size": len(data), "truncated": False}
    res, _ = await run(catalog, handler, "image.export", {"name": "nginx"}, max_download_bytes=10)
    assert res.is_error and "ARCANE_MCP_MAX_DOWNLOAD_BYTES" in res.text


async def test_auto_download_picks_text_or_binary(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(200, content=b"services:\n  web: {}\n"), "project.download_workspace_file",
                       {"projectId": PROJECT_ID, "relativePath": "compose.yaml"})
    assert res.structured["text"].startswith("services:")
    res, _ = await run(catalog, lambda r: httpx.Response(200, content=b"\x00\x01\x02"), "project.download_workspace_file",
                       {"projectId": PROJECT_ID, "relativePath": "x.bin"})
    assert res.blobs and res.blobs[0].data == b"\x00\x01\x02"


async def test_problem_json_error(catalog):
    problem = {"title": "Not Found", "status": 404, "detail": "container not found: nope"}
    res, _ = await run(catalog, lambda r: httpx.Response(404, json=problem, headers={"content-type": "application/problem+json"}),
                       "container.get", {"containerId": "nope"})
    assert res.is_error and res.structured is None and (res.error_code, res.http_status) == ("arcane_http", 404)
    error, step = res.text.split("\nNext step:", 1)
    assert problem["detail"] in error and "container.list" in step  # Arcane's detail; the list action that gives IDs


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


DAEMON_TEXTS = [
    # the legacy client (before moby client 0.5)
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    # moby client 0.5.1, first connection (backend/go.mod:46)
    "Failed to connect to Docker: failed to connect to the docker API at unix:///var/run/docker.sock; check if the path is "
    "correct and if the daemon is running: dial unix /var/run/docker.sock: connect: no such file or directory",
    # the cached client after the daemon went away (internal/docker/service.go:141-170): no "failed to connect to Docker"
    "Failed to list containers: failed to list Docker containers: failed to connect to the docker API at "
    "unix:///var/run/docker.sock; check if the path is correct and if the daemon is running: dial unix "
    "/var/run/docker.sock: connect: connection refused",
]


@pytest.mark.parametrize("text", DAEMON_TEXTS, ids=["legacy", "moby-0.5", "moby-0.5-cached"])
async def test_daemon_unreachable_hint(catalog, text):
    problem = {"title": "Internal Server Error", "status": 500, "detail": text}
    res, _ = await run(catalog, lambda r: httpx.Response(500, json=problem, headers={"content-type": "application/problem+json"}), "container.list")
    assert res.is_error and res.error_code == "arcane_http"
    assert "environment.test" in res.text and "environment.list" in res.text  # the daemon hint, not the 5xx one


@pytest.mark.parametrize("text", DAEMON_TEXTS[1:], ids=["moby-0.5", "moby-0.5-cached"])
async def test_daemon_unreachable_inside_a_stream(catalog, text):
    res, _ = await run(catalog, lambda r: ndjson({"type": "activity", "activityId": "act-9"}, {"error": text}),
                       "project.up", {"projectId": PROJECT_ID})
    assert res.is_error and res.error_code == "stream_failed" and "act-9" in res.text
    assert "environment.test" in res.text


# Every shape Arcane answers an error in, and where its text is (catalog/actions.yaml error_shapes).
ERROR_SHAPES = {
    "problem+json": (404, {"title": "Not Found", "status": 404, "detail": "Image not found: nope"}, "Image not found: nope"),
    "problem+json title only": (500, {"title": "Internal Server Error", "status": 500}, "Internal Server Error"),
    "echo {success:false,error}": (404, {"success": False, "error": "API endpoint not found: /api/nope"}, "API endpoint not found: /api/nope"),
    "environment proxy {data:{error}}": (502,
                                         {"success": False, "data": {"error": "Proxy request failed: dial tcp 10.0.0.9:3553: connect: connection refused"}},
                                         "Proxy request failed: dial tcp 10.0.0.9:3553: connect: connection refused"),
    "auth middleware {message,code,statusCode}": (401, {"message": "Unauthorized: valid authentication required", "code": "UNAUTHORIZED", "statusCode": 401},
                                                  "Unauthorized: valid authentication required"),
    "rate limiter {error}": (429, {"error": "rate limit exceeded"}, "rate limit exceeded"),
}


@pytest.mark.parametrize("name", list(ERROR_SHAPES))
async def test_error_shapes_give_a_clean_message(catalog, name):
    status, body, message = ERROR_SHAPES[name]
    res, _ = await run(catalog, lambda r: httpx.Response(status, json=body), "image.get", {"imageId": "nope"})
    assert res.is_error and res.error_code == "arcane_http" and res.http_status == status
    first = res.text.splitlines()[0]
    assert first == f"Error: {message}"  # the text alone: no JSON, no member names


async def test_an_error_body_that_is_not_json_is_its_own_message(catalog):
    res, _ = await run(catalog, lambda r: httpx.Response(502, content=b"<html>Bad gateway</html>\n"), "container.list")
    assert res.is_error and res.text.splitlines()[0] == "Error: <html>Bad gateway</html>"


@pytest.mark.parametrize("header", ["60", "Wed, 21 Oct 2099 07:28:00 GMT"])
async def test_429_says_when_to_retry(catalog, header):
    res, _ = await run(catalog, lambda r: httpx.Response(429, json={"error": "rate limit exceeded"}, headers={"Retry-After": header}),
                       "webhook.list")
    assert res.is_error and res.http_status == 429
    assert res.error_code == "arcane_http" and "rate limit exceeded" in res.text and "UTC" in res.text
    if header == "60":
        assert "retry in 60 s" in res.text


async def test_multipart_and_octet_requests(catalog):
    res, rec = await run(catalog, lambda r: ok_json({"id": "p1"}), "project.create",
                         {"name": "demo", "composeContent": "services: {}",
                          "files": [{"filename": "compose.yaml", "text": "services: {}"}, {"filename": "x.bin", "base64": "AAEC"}]})
    assert not res.is_error, res.text
    req = rec.requests[0]
    assert req.headers["content-type"].startswith("multipart/form-data")
    body = req.content
    assert b'name="project"' in body and b'{"name":"demo","composeContent":"services: {}"}' in body
    assert b'filename="compose.yaml"' in body and b"services: {}" in body and b"\x00\x01\x02" in body
    res, rec = await run(catalog, lambda r: ok_json({"id": "u", "kind": "image"}), "upload.put_chunk",
                         {"kind": "image", "uploadId": "u1", "index": 3, "body": {"base64": "AAEC"}})
    req = rec.requests[0]
    assert req.url.path == "/api/environments/0/uploads/image/u1/chunks/3"
    assert req.content == b"\x00\x01\x02" and req.headers["content-type"] == "application/octet-stream"


async def test_path_values_cannot_escape_their_segment(catalog):
    res, rec = await run(catalog, lambda r: ok_json({}), "container.get", {"containerId": "../../users/1"})
    assert res.is_error and res.error_code == "invalid_path_value" and rec.requests == []
    res, rec = await run(catalog, lambda r: ok_json({}), "container.get", {"containerId": "a?b#c d"})
    assert rec.requests[0].url.raw_path == b"/api/environments/0/containers/a%3Fb%23c%20d"


async def test_query_and_header_bindings(catalog):
    res, rec = await run(catalog, lambda r: ok_json([], pagination={"totalPages": 0, "totalItems": 0, "currentPage": 1, "itemsPerPage": 5}),
                         "container.list", {"environmentId": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "limit": 5, "includeInternal": True, "search": "web"})
    url = rec.requests[0].url
    assert url.path == "/api/environments/7c9e6679-7425-40de-944b-e07fc1f90ae7/containers"
    assert dict(url.params) == {"limit": "5", "includeInternal": "true", "search": "web"}


async def test_public_operation_sends_no_credential(catalog):
    res, rec = await run(catalog, lambda r: httpx.Response(200, json={"status": "UP"}), "health.get")
    assert "x-api-key" not in rec.requests[0].headers
