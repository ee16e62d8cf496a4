"""The one internal read (interpreter/call/reader.py): its deadline, its error mapping, the
credential's 401 policy it shares with every call, and that no other module sends a
request to Arcane by itself."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import httpx
import pytest

import interpreter
from interpreter.call import reader
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.errors import ArcaneHTTPError, ArcaneProtocolError, ArcaneTimeout, ArcaneUnreachable, UpstreamError

pytestmark = pytest.mark.anyio

ROOT = Path(interpreter.__file__).resolve().parent

# The functions that send the action they were dispatched for (a handler kind, or the live
# channel a subscription holds) through reader.send and read its answer themselves; every
# other request the engine makes is reader.read.
OWN_REQUEST_SENDERS = {
    ("call/context.py", "rest"),
    ("call/transfer.py", "download"),
    ("call/transfer.py", "webhook_trigger"),
    ("call/transfer.py", "token_exchange"),
    ("call/live.py", "live_channel"),
    ("front/subscriptions.py", "_run"),
}


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        if "_data" in path.parts:
            continue
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _functions(tree: ast.AST):
    """(enclosing function name, call node) for every call in the module."""
    def walk(node, name):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            if isinstance(child, ast.Call):
                yield name, child
            yield from walk(child, inner)
    yield from walk(tree, "<module>")


def _client_sends(tree: ast.AST):
    """ArcaneClient.send calls: `<x>.send(action, request)`, two positional arguments and no
    keyword (an httpx client's send takes one request; a stream's send one value)."""
    for name, call in _functions(tree):
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "send" and len(call.args) == 2 and not call.keywords \
                and not (isinstance(f.value, ast.Name) and f.value.id == "reader"):
            yield name, call


def _reader_sends(tree: ast.AST):
    """Calls of reader.send, spelled `reader.send(...)` or, imported from the module, `send(...)`."""
    local = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and (node.module or "").endswith("reader") for a in node.names if a.name == "send"}
    for name, call in _functions(tree):
        f = call.func
        if (isinstance(f, ast.Attribute) and f.attr == "send" and isinstance(f.value, ast.Name) and f.value.id == "reader") \
                or (isinstance(f, ast.Name) and f.id in local):
            yield name, call


def test_only_the_reader_calls_the_client_send():
    found = [(mod, fn, call.lineno) for mod, tree in _modules() for fn, call in _client_sends(tree)]
    assert found and all(mod == "call/reader.py" for mod, _, _ in found), found


def test_only_the_handler_kinds_send_their_own_request_and_every_other_request_is_an_internal_read():
    found = {(mod, fn) for mod, tree in _modules() if mod != "call/reader.py" for fn, _ in _reader_sends(tree)}
    assert found == OWN_REQUEST_SENDERS


def test_the_internal_read_sites_use_the_reader():
    """The sites that read another action for themselves (the eleven of the brief: name
    resolution, the confirmation's reads, access, doctor, HTTP mode's key check, the upload
    session's steps) call reader.read or Dispatcher.read."""
    sites = {
        "call/dispatch.py": {"read", "_find_ids", "safe"},
        "build/access.py": {"one"},
        "commands/doctor.py": {"_ask"},
        "front/httpmode.py": {"_check"},
        "call/transfer.py": {"_send_chunks"},
    }
    for mod, tree in _modules():
        if mod not in sites:
            continue
        callers = {fn for fn, call in _functions(tree) if isinstance(call.func, ast.Attribute) and call.func.attr == "read"
                   and isinstance(call.func.value, (ast.Name, ast.Attribute))
                   and (getattr(call.func.value, "id", None) == "reader" or getattr(call.func.value, "id", None) == "self")}
        assert sites[mod] <= callers, (mod, sites[mod] - callers)


# ---------------------------------------------------------------- against an in-memory Arcane


def _client(catalog, handler, **kw) -> ArcaneClient:
    settings = Settings(arcane_url="http://arcane.test", api_key="arc_test_key", audit_log="off", **kw)
    client = ArcaneClient(settings, transport=httpx.MockTransport(handler))
    client.use(catalog)
    return client


def _me(catalog):
    return catalog.all_actions[catalog.conventions.diagnostics.credential.action]


async def test_an_answer_is_unwrapped_and_its_json_kept(catalog):
    client = _client(catalog, lambda r: httpx.Response(200, json={"success": True, "data": {"username": "arcane"}}))
    answer = await reader.read(client, _me(catalog), {}, catalog.conventions)
    assert (answer.status, answer.kind, answer.structured) == (200, "object", {"username": "arcane"})
    assert answer.body == {"success": True, "data": {"username": "arcane"}} and answer.message == ""


async def test_the_deadline_is_the_read_timeout_setting(catalog):
    async def slow(request):
        await asyncio.sleep(5)
        return httpx.Response(200, json={})

    client = _client(catalog, slow, read_timeout=0.1)
    started = asyncio.get_running_loop().time()
    with pytest.raises(ArcaneTimeout) as err:
        await reader.read(client, _me(catalog), {}, catalog.conventions)
    assert asyncio.get_running_loop().time() - started < 2
    assert err.value.code == "arcane_timeout" and err.value.sent is True


async def test_a_slow_body_counts_against_the_same_deadline(catalog):
    class Trickle(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'{"success": true, '
            await asyncio.sleep(5)
            yield b'"data": {}}'

    client = _client(catalog, lambda r: httpx.Response(200, stream=Trickle()), read_timeout=0.1)
    with pytest.raises(ArcaneTimeout):
        await reader.read(client, _me(catalog), {}, catalog.conventions)


@pytest.mark.parametrize(("response", "error", "code", "status"), [
    (httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "no such user"}), ArcaneHTTPError, "arcane_http", 404),
    (httpx.Response(200, json={"success": False, "error": "it broke"}), ArcaneHTTPError, "arcane_http", 200),
    (httpx.Response(200, content=b"<html>proxy</html>"), ArcaneProtocolError, "arcane_protocol", 200),
    (httpx.Response(200, content=b"[" * (reader.READ_MAX_BYTES + 10)), ArcaneProtocolError, "arcane_protocol", 200),
    (httpx.Response(302, headers={"location": "http://elsewhere.test/"}), ArcaneProtocolError, "arcane_protocol", 302),
])
async def test_every_failure_is_an_upstream_error_with_its_code(catalog, response, error, code, status):
    client = _client(catalog, lambda r: response)
    with pytest.raises(error) as err:
        await reader.read(client, _me(catalog), {}, catalog.conventions)
    assert isinstance(err.value, UpstreamError) and err.value.code == code and err.value.status == status


async def test_an_unreachable_arcane_and_no_arcane_are_unreachable(catalog):
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ArcaneUnreachable) as err:
        await reader.read(_client(catalog, refuse), _me(catalog), {}, catalog.conventions)
    assert err.value.code == "arcane_unreachable" and err.value.sent is False
    with pytest.raises(ArcaneUnreachable) as err:
        await reader.read(None, _me(catalog), {}, catalog.conventions)
    assert err.value.code == "arcane_unreachable"


async def test_with_any_status_an_error_status_is_an_answer(catalog):
    client = _client(catalog, lambda r: httpx.Response(403, json={"title": "Forbidden", "status": 403, "detail": "not yours"}))
    answer = await reader.read(client, _me(catalog), {}, catalog.conventions, statuses=reader.ANY)
    assert answer.status == 403 and answer.structured is None and answer.message
    client = _client(catalog, lambda r: httpx.Response(200, content=b"not json"))
    answer = await reader.read(client, _me(catalog), {}, catalog.conventions, statuses=reader.ANY)
    assert (answer.status, answer.body, answer.structured) == (200, None, None)


async def test_a_dispatchers_read_is_the_reader_with_its_client(catalog):
    from tests.helpers import make_dispatcher, ok_json

    d, rec = make_dispatcher(catalog, lambda r: ok_json([{"id": "a"}]))
    listing = catalog.actions["container.list"]
    answer = await d.read(listing, {catalog.env_arg: "0"})
    assert answer.kind == "list" and len(rec.requests) == 1
    assert rec.requests[0].headers.get(catalog.api_key_header) == "arc_test_key"


async def test_a_session_refreshed_after_a_401_is_the_readers_too(catalog):
    """The credential's one retry after a 401 (auth.send_with_auth) holds for an internal read."""
    from simulator import start_simulator

    with start_simulator(catalog=catalog) as sim:
        settings = Settings(arcane_url=sim.url, username="arcane", password="arcane-admin", audit_log="off")
        client = ArcaneClient(settings)
        client.use(catalog)
        try:
            await client.start()
            sim.expire_sessions()
            sim.clear_requests()
            me = catalog.all_actions["auth.me"]
            answer = await reader.read(client, me, {}, catalog.conventions)
            assert answer.status == 200
            assert [(r.action, r.credential) for r in sim.requests()] == [
                ("auth.me", "invalid_bearer"), ("auth.refresh", None), ("auth.me", "bearer")]
        finally:
            await client.aclose()
        assert sim.violations == []


# ---------------------------------------------------------------- the dispatcher's sites, under the one deadline

PROJECT_ID = "0f3c5d4e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"


def _slow_arcane(slow_path_end: str):
    """Answers at once except a path ending in `slow_path_end`, which takes 5 s."""
    from tests.helpers import ok_json

    async def handler(request):
        if request.url.path.endswith(slow_path_end):
            await asyncio.sleep(5)
        return ok_json({"id": PROJECT_ID, "name": "blog"})
    return handler


async def test_name_resolution_is_an_internal_read_under_the_read_deadline(catalog):
    from interpreter.call.dispatch import Call
    from tests.helpers import make_dispatcher

    d, rec = make_dispatcher(catalog, _slow_arcane("/projects"), read_timeout=0.1)
    started = asyncio.get_running_loop().time()
    res = await d.dispatch(Call("project.get", {"projectId": "blog"}))
    assert asyncio.get_running_loop().time() - started < 2
    assert res.is_error and res.error_code == "arcane_timeout" and "project.list" in res.text
    assert [r.url.path for r in rec.requests] == ["/api/environments/0/projects"]  # the get itself was never sent


async def test_a_confirmations_reads_that_pass_the_read_deadline_could_not_tell(catalog):
    from interpreter.call.dispatch import Call
    from tests.helpers import make_dispatcher

    asked: list[str] = []

    async def elicit(question: str) -> str:
        asked.append(question)
        return "decline"

    d, rec = make_dispatcher(catalog, _slow_arcane(PROJECT_ID), read_timeout=0.1)
    started = asyncio.get_running_loop().time()
    res = await d.dispatch(Call("project.destroy", {"projectId": PROJECT_ID}, elicit=elicit))
    assert asyncio.get_running_loop().time() - started < 2
    assert res.is_error and res.error_code == "confirmation_required" and len(asked) == 1
    assert PROJECT_ID[:12] in asked[0]  # the target could not be named: its ID stands
    assert all(r.method == "GET" for r in rec.requests)
    assert any(r.url.path.endswith(PROJECT_ID) for r in rec.requests)  # the slow read was sent, and cut
