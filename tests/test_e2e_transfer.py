"""End-to-end, once per surface: a real MCP client session over stdio (`interp serve`)
against the simulator, for the plain-HTTP handler kinds and downloads at the cap —
the webhook trigger sends no credential, the token exchange posts a form with its
grant_type, pprof is a binary download for a global admin and a clear error for anyone
else, a text download under the cap is whole and one over it is cut, a binary over it
is refused. What the simulator received is read from its request records.
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.parse

import httpx
import pytest

from tests.test_e2e import SURFACES, Caller, session, text

pytestmark = pytest.mark.anyio
HOOK = "arc_wh_9f3c2a1b7d4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081"
READONLY_KEY = "arc_sim_readonly_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"
BLOG_WEB = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"  # 706 bytes of logs
BLOG_DB = "3bfb7be8accb681967c4bf56af9848f886cbc68e993fd299940bb072137ec2b7"  # 349 bytes of logs
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
CAP = 600  # between the two containers' logs, over an image tar (1024), over a heap profile (541)


def blobs(res) -> list[tuple[str, bytes]]:
    """The embedded binary resources of a result: (mime type, bytes)."""
    return [(c.resource.mime_type, base64.b64decode(c.resource.blob)) for c in res.content
            if getattr(c, "type", None) == "resource" and getattr(c.resource, "blob", None) is not None]


@pytest.mark.parametrize("surface", SURFACES)
async def test_http_handler_kinds_and_the_download_cap(sim, surface):
    async with session(sim.url, sim.api_key, surface, "auto", ARCANE_MCP_MAX_DOWNLOAD_BYTES=str(CAP)) as client:
        call = Caller(client, surface)

        # the webhook trigger: no credential of any kind, 202 answered as accepted
        sim.clear_requests()
        res = await call("webhook.trigger", {"token": HOOK})
        assert not res.is_error, text(res)
        assert res.structured_content["accepted"] is True and res.structured_content["httpStatus"] == 202
        [req] = sim.requests()
        assert req.path == f"/api/webhooks/trigger/{HOOK}" and req.credential is None
        assert {k for k, _ in req.headers} & {"x-api-key", "authorization", "cookie"} == set()

        # the token exchange: a form body with the required grant_type, no credential
        sim.clear_requests()
        subject = sim.federated_token()
        res = await call("auth.exchange_token", {"subject_token": subject, "subject_token_type": JWT_TYPE})
        assert not res.is_error, text(res)
        assert res.structured_content["token_type"] == "Bearer" and res.structured_content["access_token"]
        [req] = sim.requests()
        assert req.header("content-type") == "application/x-www-form-urlencoded" and req.credential is None
        assert dict(urllib.parse.parse_qsl(req.body.decode())) == {"grant_type": GRANT, "subject_token": subject, "subject_token_type": JWT_TYPE}

        # pprof as a global admin: a binary profile, attached as an embedded resource
        res = await call("diagnostics.profile", {"name": "heap"})
        assert not res.is_error, text(res)
        [(mime, data)] = blobs(res)
        direct = httpx.get(sim.url + "/api/debug/pprof/heap", headers={"X-API-Key": sim.api_key}).content
        assert mime == "application/octet-stream" and hashlib.sha256(data).digest() == hashlib.sha256(direct).digest()
        assert res.structured_content["size"] == len(data)

        # a text download under the cap is whole, one over it is cut and says so
        res = await call("container.download_logs", {"containerId": BLOG_DB})
        assert not res.is_error and res.structured_content["truncated"] is False
        assert len(res.structured_content["text"].encode()) == res.structured_content["size"] < CAP
        res = await call("container.download_logs", {"containerId": BLOG_WEB})
        s = res.structured_content
        assert not res.is_error and (s["truncated"], s["bodyBytes"], len(s["text"].encode())) == (True, 706, CAP)
        assert "ARCANE_MCP_MAX_DOWNLOAD_BYTES" in text(res)

        # a binary download over the cap is refused, nothing attached
        image = sim.items("images")[0]["id"]
        res = await call("image.export", {"name": image})
        assert res.is_error and "ARCANE_MCP_MAX_DOWNLOAD_BYTES" in text(res) and blobs(res) == []

    # pprof for a scoped key that is not a global admin: the action is withdrawn for it (the
    # key is found by its 12-character prefix and judged by its own grants), its entry says why
    async with session(sim.url, READONLY_KEY, surface, "auto") as client:
        entry = json.loads((await client.read_resource("arcane://tools/diagnostics.cmdline")).contents[0].text)
        assert "global admin" in entry["withdrawn"]
        res = await client.read_resource("arcane://tools/container.list")
        assert "withdrawn" not in json.loads(res.contents[0].text)



def payload(size: int) -> bytes:
    """Bytes that are not text (NULs, every byte value) and not periodic."""
    return b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(size // 32 + 1))[:size]


@pytest.mark.parametrize("surface", SURFACES)
async def test_a_chunked_upload_is_byte_exact(sim, surface, tmp_path):
    """image.upload with the content itself, and with a local file over stdio: create a
    session, three 1 MiB chunks, consume it; the simulator's digest is the content's."""
    data = payload(2_500_000)
    local = tmp_path / "app.tar"
    local.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    async with session(sim.url, sim.api_key, surface, "auto", ARCANE_MCP_UPLOAD_DIRS=str(tmp_path)) as client:
        call = Caller(client, surface)
        for params in ({"content": {"base64": base64.b64encode(data).decode(), "filename": "app.tar"}}, {"localFile": str(local)}):
            sim.clear_requests()  # and the consumed uploads
            res = await call("image.upload", params)
            assert not res.is_error, text(res)
            [up] = sim.uploads()
            assert (up["sha256"], up["bytes"], up["totalChunks"], up["filename"]) == (digest, len(data), 3, "app.tar")
            assert res.structured_content["upload"]["sha256"] == digest and res.structured_content["upload"]["uploadId"] == up["id"]
            puts = [r for r in sim.requests() if r.method == "PUT"]
            assert [len(r.body) for r in puts] == [1048576, 1048576, len(data) - 2 * 1048576]
        # outside the allowed directory: refused, nothing sent
        sim.clear_requests()
        res = await call("image.upload", {"localFile": "/etc/hostname"})
        assert res.is_error and "ARCANE_MCP_UPLOAD_DIRS" in text(res) and sim.requests() == []


async def test_local_files_are_never_read_over_http(sim, tmp_path):
    from mcp import Client

    from interpreter.front.names import EXECUTE_TOOL
    from tests.helpers import free_port, start_http_server
    from tests.test_e2e import INTERP

    local = tmp_path / "app.tar"
    local.write_bytes(payload(1000))
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key, "ARCANE_MCP_AUDIT_LOG": "off",
           "ARCANE_MCP_UPLOAD_DIRS": str(tmp_path)}
    proc = start_http_server([INTERP, "serve", "--http", "--port", str(port)], env, port)
    try:
        sim.clear_requests()
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            res = await client.call_tool(EXECUTE_TOOL, {"action": "image.upload", "params": {"localFile": str(local)}})
        assert res.is_error and "localFile" in text(res) and sim.requests() == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)
