"""Bindings round trip: arguments -> the request the executor sends -> what the Arcane
simulator recorded, for every place an argument can go (path, query, header, JSON body,
multipart parts from text and base64, octet-stream)."""

from __future__ import annotations

import base64
import json

import pytest

from interpreter.auditlog import AuditLog
from interpreter.catalog import build
from interpreter.config import Settings
from interpreter.dispatch import Call, Dispatcher
from interpreter.request import ArcaneClient

pytestmark = pytest.mark.anyio


async def send(sim, action, args, confirm=False):
    s = Settings(arcane_url=sim.url, api_key=sim.api_key, audit_log="off")
    client = ArcaneClient(s)
    try:
        sim.clear_requests()
        res = await Dispatcher(build(), s, client, AuditLog("off")).dispatch(Call(action, args, confirm))
    finally:
        await client.aclose()
    reqs = sim.requests()
    assert len(reqs) == 1, [(r.method, r.path) for r in reqs]
    return res, reqs[0]


async def test_path_and_query(sim):
    res, req = await send(sim, "container.list", {"environmentId": "0", "limit": 3, "start": 6, "search": "worker", "includeInternal": True})
    assert (req.method, req.path) == ("GET", "/api/environments/0/containers")
    assert dict(req.query) == {"limit": "3", "start": "6", "search": "worker", "includeInternal": "true"}
    assert req.credential == "api_key"


async def test_json_body_fields(sim):
    res, req = await send(sim, "upload.create_session", {"kind": "image", "filename": "img.tar", "size": 2048, "chunkSize": 1024})
    assert req.path == "/api/environments/0/uploads/image"
    assert req.json() == {"filename": "img.tar", "size": 2048, "chunkSize": 1024}
    assert req.header("content-type") == "application/json"


async def test_header_parameter(sim):
    res, req = await send(sim, "job.run", {"jobId": "prune", "idempotencyKey": "run-42"})
    assert req.header("Idempotency-Key") == "run-42"


async def test_multipart_parts_from_text_and_base64(sim):
    payload = bytes(range(256))
    res, req = await send(sim, "project.create", {
        "project": json.dumps({"name": "bindings-demo"}), "manifest": json.dumps({"files": []}),
        "files": [{"filename": "compose.yaml", "text": "services:\n  web:\n    image: nginx\n"},
                  {"filename": "blob.bin", "base64": base64.b64encode(payload).decode(), "contentType": "application/x-demo"}]})
    assert req.method == "POST" and req.path == "/api/environments/0/projects"
    assert req.header("content-type").startswith("multipart/form-data; boundary=")
    body = req.body
    assert b'name="project"' in body and b'{"name": "bindings-demo"}' in body
    assert b'filename="compose.yaml"' in body and b"image: nginx" in body
    assert b'filename="blob.bin"' in body and payload in body and b"application/x-demo" in body


async def test_octet_stream_body(sim):
    payload = b"\x00\xffchunk\x01"
    res, req = await send(sim, "upload.put_chunk", {"kind": "image", "uploadId": "u-1", "index": 2,
                                                    "body": {"base64": base64.b64encode(payload).decode()}})
    assert (req.method, req.path) == ("PUT", "/api/environments/0/uploads/image/u-1/chunks/2")
    assert req.body == payload and req.header("content-type") == "application/octet-stream"


async def test_bad_base64_is_an_argument_error_and_nothing_is_sent(sim):
    s = Settings(arcane_url=sim.url, api_key=sim.api_key, audit_log="off")
    client = ArcaneClient(s)
    try:
        sim.clear_requests()
        res = await Dispatcher(build(), s, client, AuditLog("off")).dispatch(
            Call("upload.put_chunk", {"kind": "image", "uploadId": "u", "index": 0, "body": {"base64": "%%%"}}))
    finally:
        await client.aclose()
    assert res.is_error and "base64" in res.text and sim.requests() == []
