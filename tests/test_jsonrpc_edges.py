"""Every request gets an answer (interpreter/front/frames.py): each malformed JSON-RPC frame, on
stdio (raw JSON lines to a real `interp serve`) and over streamable HTTP (raw POSTs to a
real `interp serve --http`), in both protocol eras, gets the error JSON-RPC names, with the
request's id when it can be read; arguments nested 10,000 levels deep get one; a request
before initialize gets one; and after all of them the server still answers a normal call.
Codes, ids and fields are asserted, never wording."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading

import httpx
import pytest

from interpreter.front.frames import MAX_DEPTH, check
from interpreter.front.names import EXECUTE_TOOL
from tests.helpers import free_port, start_http_server
from tests.test_e2e import INTERP

pytestmark = [pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.timeout(600)]

PARSE, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
FIND = "arcane_find_action"
ANSWER_WAIT = 120  # seconds a missing answer may take before the test fails (a guard, not a measure)
DEFAULT_BODY_CAP = 4 * 1024 * 1024  # ARCANE_MCP_MAX_BODY_BYTES's default: also the cap of one stdio line


def nested(depth: int) -> str:
    """A JSON value of `depth` nested arrays around a string."""
    return "[" * depth + '"x"' + "]" * depth


def deep_query(depth: int) -> str:
    """find's arguments with the query nested `depth` arrays deep (arguments: depth + 1)."""
    return '{"query": ' + nested(depth) + "}"


def call_frame(rid, arguments_json: str, era: str, name: str = FIND) -> str:
    """A tools/call frame with its arguments as raw JSON text (they may be too deep to build)."""
    meta = ', "_meta": ' + json.dumps(ENVELOPE) if era == MODERN else ""
    return (f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "method": "tools/call", '
            f'"params": {{"name": "{name}", "arguments": {arguments_json}{meta}}}}}')


def request(rid, method: str, params: dict | None, era: str) -> str:
    params = dict(params or {})
    if era == MODERN:
        params["_meta"] = {**params.get("_meta", {}), **ENVELOPE}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def malformed(era: str) -> list[tuple[str, str, int, object]]:
    """(what, frame, expected code, expected id) for every malformed frame: None is `id: null`."""
    return [
        ("truncated frame", '{"jsonrpc": "2.0", "id": 30, "method": "tools/list", "par', PARSE, None),
        ("not JSON", "hello there", PARSE, None),
        ("NaN literal", '{"jsonrpc": "2.0", "id": 31, "method": "ping", "params": {"x": NaN}}', PARSE, None),
        ("batch", json.dumps([{"jsonrpc": "2.0", "id": 40, "method": "ping"}]), INVALID_REQUEST, None),
        ("empty batch", "[]", INVALID_REQUEST, None),
        ("a bare string", '"ping"', INVALID_REQUEST, None),
        ("jsonrpc 1.0", json.dumps({"jsonrpc": "1.0", "id": 50, "method": "ping"}), INVALID_REQUEST, 50),
        ("jsonrpc missing", json.dumps({"id": "fifty-one", "method": "ping"}), INVALID_REQUEST, "fifty-one"),
        ("method not a string", json.dumps({"jsonrpc": "2.0", "id": 52, "method": 7}), INVALID_REQUEST, 52),
        ("id a boolean", json.dumps({"jsonrpc": "2.0", "id": True, "method": "ping"}), INVALID_REQUEST, None),
        ("id a fraction", json.dumps({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}), INVALID_REQUEST, None),
        ("params a string", json.dumps({"jsonrpc": "2.0", "id": 60, "method": "tools/list", "params": "all"}), INVALID_PARAMS, 60),
        ("params an array", json.dumps({"jsonrpc": "2.0", "id": 61, "method": "tools/list", "params": [1]}), INVALID_PARAMS, 61),
        ("arguments a string", call_frame(70, '"list containers"', era), INVALID_PARAMS, 70),
        ("arguments an array", call_frame(71, '["list containers"]', era), INVALID_PARAMS, 71),
        ("a number not finite", call_frame(72, '{"query": 1e999}', era), INVALID_PARAMS, 72),
        (f"nested {MAX_DEPTH + 10} deep", call_frame(80, deep_query(MAX_DEPTH + 10), era), INVALID_PARAMS, 80),
        ("nested 1,000 deep", call_frame(81, deep_query(1_000), era), INVALID_PARAMS, 81),
        ("nested 10,000 deep", call_frame("deep-10k", deep_query(10_000), era), INVALID_PARAMS, "deep-10k"),
        ("nested 100,000 deep", call_frame(83, deep_query(100_000), era), INVALID_PARAMS, 83),
    ]


# ------------------------------------------------------------------ the checks themselves


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_every_malformed_frame_is_a_problem_with_its_code_and_id(era):
    for what, frame, code, rid in malformed(era):
        if what.startswith("arguments"):
            continue  # a well-formed envelope: the SDK's model of tools/call refuses it (below, end to end)
        problem = check(frame)
        assert not isinstance(problem, dict), what
        assert (problem.code, problem.id) == (code, rid), what
        reply = problem.reply()
        assert reply["jsonrpc"] == "2.0" and "\n" not in reply["error"]["message"], what


def test_good_frames_pass_and_depth_up_to_the_limit_is_read():
    assert check(request(1, "tools/list", {}, LEGACY))["method"] == "tools/list"
    assert check(json.dumps({"jsonrpc": "2.0", "id": 2, "result": {}}))["id"] == 2  # a client's answer (elicitation)
    # the envelope and tools/call's params take 3 levels; arguments may nest to the limit
    at_limit = call_frame(3, deep_query(MAX_DEPTH - 3), LEGACY)
    assert isinstance(check(at_limit), dict)
    assert check(call_frame(4, deep_query(MAX_DEPTH - 2), LEGACY)).code == INVALID_PARAMS


def test_a_bad_notification_is_a_problem_without_an_id_and_marked_unanswered():
    problem = check(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized", "params": "x"}))
    assert problem.code == INVALID_PARAMS and problem.notification and problem.id is None


def test_the_walk_of_a_frame_too_deep_to_parse_is_bounded():
    from interpreter.front import frames

    # a frame of brackets only, far more than the token bound: answered, id not read
    problem = check("[" * (frames.SHALLOW_TOKENS_MAX + 10))
    assert problem.code == INVALID_REQUEST and problem.id is None


# ------------------------------------------------------------------ stdio


class RawStdio:
    """`interp serve` as a subprocess spoken to in raw JSON lines; a thread reads its answers."""

    def __init__(self, sim):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
               "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_CACHE_DIR": os.environ["ARCANE_MCP_CACHE_DIR"]}
        self.proc = subprocess.Popen([INTERP, "serve"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.answers: queue.Queue = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))
        self.answers.put(None)

    def send(self, text: str) -> None:
        self.proc.stdin.write(text.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def next(self) -> dict:
        try:
            answer = self.answers.get(timeout=ANSWER_WAIT)
        except queue.Empty:
            raise AssertionError("the server sent no answer") from None
        assert answer is not None, "the server stopped: " + b"".join(self.stderr).decode(errors="replace")[-3000:]
        return answer

    def answer_to(self, text: str) -> dict:
        """Send one frame and read the one answer it gets (frames are answered in order here:
        the ones this file sends are answered by the frame check or at once by the SDK)."""
        self.send(text)
        while True:
            answer = self.next()
            if "method" not in answer:  # a notification of the server's (list changed, log) is not an answer
                return answer

    def close(self) -> str:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return b"".join(self.stderr).decode(errors="replace")


def open_session(raw: RawStdio, era: str) -> None:
    """The era's opening: initialize and initialized (2025), or a first enveloped request (2026)."""
    if era == LEGACY:
        init = raw.answer_to(request("init", "initialize", {"protocolVersion": LEGACY, "capabilities": {},
                                                            "clientInfo": {"name": "edges", "version": "1"}}, era))
        assert init["result"]["protocolVersion"] == LEGACY
        raw.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    else:
        listed = raw.answer_to(request("open", "tools/list", {}, era))
        assert FIND in [t["name"] for t in listed["result"]["tools"]]


def assert_error(answer: dict, code: int, rid, what: str) -> None:
    assert "error" in answer, (what, answer)
    assert answer["error"]["code"] == code and answer["id"] == rid, (what, answer)
    message = answer["error"]["message"]
    assert message and "\n" not in message and "Traceback" not in message, (what, answer)


def assert_normal_calls_work(answer_to, era: str) -> None:
    if era == LEGACY:  # 2026-07-28 has no ping
        pong = answer_to(request("after-ping", "ping", None, era))
        assert pong["id"] == "after-ping" and "result" in pong
    found = answer_to(request("after-find", "tools/call", {"name": FIND, "arguments": {"query": "list containers"}}, era))
    assert found["id"] == "after-find" and found["result"]["isError"] is False
    listed = answer_to(request("after-list", "tools/call", {"name": EXECUTE_TOOL, "arguments": {
        "action": "container.list", "params": {"limit": 2}}}, era))
    assert listed["result"]["isError"] is False and len(listed["result"]["structuredContent"]["items"]) == 2


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_stdio_answers_every_malformed_frame_and_keeps_serving(sim, era):
    raw = RawStdio(sim)
    try:
        if era == LEGACY:
            # before initialize: an error naming the method, never silence; ping is allowed
            early = raw.answer_to(request("early", "tools/call", {"name": FIND, "arguments": {"query": "x"}}, era))
            assert_error(early, INVALID_PARAMS, "early", "call before initialize")
            assert early["error"]["data"]["method"] == "tools/call"
            assert_error(raw.answer_to(request("early-list", "tools/list", {}, era)), INVALID_PARAMS, "early-list", "list before initialize")
            assert "result" in raw.answer_to(request("early-ping", "ping", None, era))
        open_session(raw, era)
        for what, frame, code, rid in malformed(era):
            assert_error(raw.answer_to(frame), code, rid, what)
        # a frame above the cap of one line: answered, and the rest of its line is not read as frames
        assert_error(raw.answer_to('{"jsonrpc": "2.0", "id": 90, "method": "ping", "params": {"x": "'
                                   + "a" * (DEFAULT_BODY_CAP + 10) + '"}}'), INVALID_REQUEST, None, "frame too large")
        # a malformed notification gets no answer: the next answer is the next request's
        raw.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x"}))
        raw.send(json.dumps({"jsonrpc": "1.0", "method": "notifications/initialized"}))
        assert_normal_calls_work(raw.answer_to, era)
        if era == MODERN:
            # a request without the envelope on a 2026-07-28 connection: answered, not dropped
            bare = raw.answer_to(json.dumps({"jsonrpc": "2.0", "id": "bare", "method": "tools/list"}))
            assert bare["id"] == "bare" and bare["error"]["code"] in (INVALID_PARAMS, INVALID_REQUEST)
    finally:
        stderr = raw.close()
    assert raw.proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "RecursionError" not in stderr, stderr[-3000:]


# ------------------------------------------------------------------ streamable HTTP


@pytest.fixture(scope="module")
def http_base(sim):
    """`interp serve --http` with the defaults a user gets (loopback: the server's own key)."""
    port = free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_CACHE_DIR": os.environ["ARCANE_MCP_CACHE_DIR"]}
    proc = start_http_server([INTERP, "serve", "--http", "--port", str(port)], env, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        stderr = proc.stderr.read().decode(errors="replace")
        assert "Traceback" not in stderr and "RecursionError" not in stderr, stderr[-3000:]


def http_headers(era: str, frame: str) -> dict:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": era}
    if era == MODERN:
        # the routing headers a 2026-07-28 client sends, read from the frame when it can be read
        try:
            body = json.loads(frame)
        except (ValueError, RecursionError):
            body = None
        if isinstance(body, dict) and isinstance(body.get("method"), str):
            headers["Mcp-Method"] = body["method"]
            name = body.get("params", {}).get("name") if isinstance(body.get("params"), dict) else None
            if isinstance(name, str):
                headers["Mcp-Name"] = name
        elif '"method": "tools/call"' in frame:
            headers.update({"Mcp-Method": "tools/call", "Mcp-Name": FIND})
    return headers


def http_answer(base: str, frame: str, era: str) -> tuple[int, dict]:
    """POST one frame; the HTTP status and the JSON-RPC answer (a JSON body or an SSE event)."""
    resp = httpx.post(base + "/mcp", content=frame.encode("utf-8"), headers=http_headers(era, frame), timeout=ANSWER_WAIT)
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:]) for line in resp.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        answers = [e for e in events if "method" not in e]
        assert len(answers) == 1, resp.text[:2000]
        return resp.status_code, answers[0]
    return resp.status_code, resp.json()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_http_answers_every_malformed_frame_and_keeps_serving(sim, http_base, era):
    for what, frame, code, rid in malformed(era):
        status, answer = http_answer(http_base, frame, era)
        assert_error(answer, code, rid, what)
        if not what.startswith("arguments"):
            assert status == 400, (what, status)  # the transport refuses the body; tools/call's model is the method's
    # a malformed notification: refused, with no id (the transport has no other way to say it)
    status, answer = http_answer(http_base, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized", "params": "x"}), era)
    assert status == 400 and answer["id"] is None and answer["error"]["code"] == INVALID_PARAMS
    assert_normal_calls_work(lambda frame: http_answer(http_base, frame, era)[1], era)
