"""Bindings round trip: arguments -> the request the executor sends -> what the Arcane
simulator recorded, for every place an argument can go (path, query, header, JSON body,
multipart parts from text and base64, octet-stream)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreter.build.catalog import build
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from tests.helpers import dispatch_to, examples

pytestmark = pytest.mark.anyio


async def send(sim, action, args, confirm=False):
    res, reqs = await dispatch_to(sim, action, args, confirm)
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
        "name": "bindings-demo", "composeContent": "services:\n  web:\n    image: nginx\n",
        "fileChanges": [{"operation": "create_file", "relativePath": "blob.bin", "uploadIndex": 1}],
        "files": [{"filename": "compose.yaml", "text": "services:\n  web:\n    image: nginx\n"},
                  {"filename": "blob.bin", "base64": base64.b64encode(payload).decode(), "contentType": "application/x-demo"}]})
    assert req.method == "POST" and req.path == "/api/environments/0/projects"
    assert req.header("content-type").startswith("multipart/form-data; boundary=")
    body = req.body
    assert b'name="project"' in body and b'"name":"bindings-demo"' in body
    assert b'name="manifest"' in body and b'"uploadIndex":1' in body
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


# ---------------------------------------------------------------- absolute URLs (issue 12)

_SEGMENT = st.text(st.sampled_from(list("aZ09-._~ /?#%:@!$&'()*+,;=[]é😀\\")), max_size=8)


@given(st.lists(_SEGMENT, min_size=1, max_size=4), st.sampled_from(["http://arcane.test", "https://a.example:8443/sub", "http://h/x/"]))
@settings(max_examples=examples(200))
def test_the_absolute_url_is_the_one_httpx_would_merge(catalog, segments, base):
    # the executor hands httpx an absolute URL; it must be the URL httpx builds from the
    # relative path and the base URL itself, whatever the (quoted) path values hold. The
    # catalog is the session's (read only); the client is new for each example (its URL
    # memo starts empty, so each URL is made, not recalled).
    from urllib.parse import quote

    client = ArcaneClient(Settings(arcane_url=base, api_key="arc_x", audit_log="off"))
    client.use(catalog)
    path = "/" + "/".join(quote(s, safe="") for s in segments)
    for raw in (path, "/environments/0" + path, path.replace("%2F", "/")):
        assert _outcome(lambda p=raw: client.url(catalog.actions["container.list"], p)) == \
            _outcome(lambda p=raw: client._client.build_request("GET", p).url)


def _outcome(make):
    """The URL made, or the class of the error making it raised (an empty first segment
    is refused the same way by both)."""
    try:
        return make()
    except Exception as exc:
        return type(exc)


def test_a_path_that_takes_a_secret_is_not_kept():
    catalog = build()
    client = ArcaneClient(Settings(arcane_url="http://arcane.test", api_key="arc_x", audit_log="off"))
    client.use(catalog)
    secret = next(a for a in catalog.actions.values()
                  if any(b.location == "path" and catalog.redaction.is_secret_name(b.arg) for b in a.bindings))
    plain = catalog.actions["container.list"]
    client.url(secret, "/webhooks/trigger/tok-1")
    client.url(plain, "/environments/0/containers")
    assert list(client._urls) == ["/environments/0/containers"]


def test_the_kept_urls_are_bounded():
    from interpreter.call.request import URL_CACHE_MAX

    catalog = build()
    client = ArcaneClient(Settings(arcane_url="http://arcane.test", api_key="arc_x", audit_log="off"))
    client.use(catalog)
    for i in range(URL_CACHE_MAX + 5):
        client.url(catalog.actions["container.get"], f"/environments/0/containers/{i}")
    assert len(client._urls) == URL_CACHE_MAX and "/environments/0/containers/0" not in client._urls
