"""JSON-RPC frames as they arrive, checked before the SDK reads them: every malformed one
gets the error JSON-RPC names, with the request's id when it can be read, instead of the
silence of a frame the SDK drops.

    -32700 parse error      not JSON (a truncated frame), or NaN/Infinity (not JSON either)
    -32600 invalid request  not one object (a batch, a string...), `jsonrpc` not "2.0", an id
                            that is not a string or an integer, `method` not a string, a
                            frame above the size cap, anything the SDK's envelope refuses
    -32602 invalid params   `params` not an object; nested deeper than MAX_DEPTH levels; a
                            number too large to be finite (1e999)

Batches: MCP 2025-06-18 removed them and 2026-07-28 has none; the SDK reads no batch in any
version, so one is refused in every era (a 2025-03-26 client, whose revision allowed them,
gets the same one-line refusal and sends its messages one by one).

stdio: `StdioFrames` reads the lines (each at most `max_bytes`) and hands the SDK's stdio
transport only good frames; a bad request is answered on the transport's write stream, a
bad notification (no id, no answer due) is dropped with a log line. HTTP: `FrameCheck`
wraps an ASGI app: a POST body that fails is answered 400 with the error as its body (the
status the SDK's own table gives these codes), never reaching the app.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
from mcp import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError as EnvelopeError
from pydantic import ValidationError as ParamsError

from ..build.lazy_dataclass import dataclass

log = logging.getLogger("arcane_mcp")

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
# levels of arrays and objects in one frame, the envelope's own included (tools/call's
# arguments sit at the third): far beyond any action's arguments, and well inside what the
# engine's own walks over a value (validation, redaction, rendering) can recurse through
MAX_DEPTH = 64
SHALLOW_TOKENS_MAX = 200_000  # a frame too deep to parse: tokens read to find its id at most
MESSAGE_CHARS = 160  # of a parser's own words in a message


@dataclass
class Problem:
    """Why a frame is refused: the JSON-RPC error, and the id of the request when it could
    be read (None: `id: null`). `notification`: the frame had no id (on stdio, no answer)."""

    code: int
    message: str
    id: Any = None
    data: dict | None = None
    notification: bool = False

    def reply(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": self.id, "error": error}


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether a parsed value nests more than `limit` arrays/objects (iterative: any depth)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


# a string, or a run of opening or of closing brackets (a run is one step however deep it goes)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{][\[{\s]*|[\]}][\]}\s]*', re.S)


def _nth_bracket(text: str, start: int, n: int) -> int:
    """The index of the n-th bracket from `start` (a run holds brackets and blanks)."""
    i = start
    while True:
        if text[i] in "[]{}":
            n -= 1
            if n == 0:
                return i
        i += 1


def _shallow(text: str) -> Any:
    """A frame too deep for the parser, with every value below its top level replaced by
    null: its id, method and jsonrpc members read. None when that cannot be done within
    SHALLOW_TOKENS_MAX steps (or the result is not JSON)."""
    pieces, depth, cut, last = [], 0, None, 0
    for n, m in enumerate(_TOKEN.finditer(text)):
        if n >= SHALLOW_TOKENS_MAX:
            return None
        tok = m.group()
        if tok[0] == '"':
            continue
        brackets = len(tok) - sum(tok.count(c) for c in " \t\r\n")
        if tok[0] in "[{":
            if depth < 2 <= depth + brackets and cut is None:
                cut = _nth_bracket(text, m.start(), 2 - depth)
                pieces.append(text[last:cut])
            depth += brackets
        else:
            if cut is not None and depth - brackets <= 1:
                last = _nth_bracket(text, m.start(), depth - 1) + 1
                pieces.append("null")
                cut = None
            depth -= brackets
    pieces.append(text[last:])
    try:
        return json.loads("".join(pieces), parse_constant=_constant)
    except (ValueError, RecursionError):
        return None


def _too_deep(frame: Any) -> Problem:
    rid = frame.get("id") if isinstance(frame, dict) else None
    rid = rid if _is_id(rid) else None
    if rid is None or not isinstance(frame.get("method"), str):
        return Problem(INVALID_REQUEST, f"the message is nested more than {MAX_DEPTH} levels deep", rid,
                       {"maxDepth": MAX_DEPTH}, notification=isinstance(frame, dict) and "id" not in frame)
    return Problem(INVALID_PARAMS, f"params are nested more than {MAX_DEPTH} levels deep; send flatter arguments", rid,
                   {"field": "params", "maxDepth": MAX_DEPTH})


_seen = threading.local()  # the non-finite numbers the decoder met in the frame being read


def _float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):  # 1e999: JSON, but beyond a float's range
        _seen.infinite = True
    return number


# NaN and Infinity are not JSON (RFC 8259): the default decoder would read them; a float
# literal goes through _float (a frame holds few: the hook costs nothing measurable)
_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float)


def check(text: str | bytes) -> Any:
    """The frame parsed (one JSON-RPC message the SDK's envelope accepts), or the Problem
    to answer it with."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    _seen.infinite = False
    try:
        frame = _DECODER.decode(text)
    except RecursionError:
        return _too_deep(_shallow(text))
    except ValueError as exc:
        words = " ".join(str(exc).split())[:MESSAGE_CHARS]
        return Problem(PARSE_ERROR, f"the message is not valid JSON ({words})")
    if isinstance(frame, list):
        return Problem(INVALID_REQUEST, "a JSON-RPC batch (an array) is not accepted: send each message on its own",
                       data={"field": "(batch)"})
    if not isinstance(frame, dict):
        return Problem(INVALID_REQUEST, f"a JSON-RPC message is an object, not {_kind(frame)}")
    rid = frame.get("id")
    readable = rid if _is_id(rid) else None
    notification = "id" not in frame
    if frame.get("jsonrpc") != "2.0":
        return Problem(INVALID_REQUEST, 'jsonrpc must be "2.0"', readable, {"field": "jsonrpc"}, notification)
    is_call = "method" in frame
    if is_call and not notification and readable is None:
        return Problem(INVALID_REQUEST, f"id must be a string or an integer, not {_kind(rid)}", None, {"field": "id"})
    if is_call:
        if not isinstance(frame["method"], str):
            return Problem(INVALID_REQUEST, "method must be a string", readable, {"field": "method"}, notification)
        params = frame.get("params")
        if params is not None and not isinstance(params, dict):
            return Problem(INVALID_PARAMS, f"params must be an object, not {_kind(params)}", readable,
                           {"field": "params"}, notification)
    elif notification or not ("result" in frame or "error" in frame):
        return Problem(INVALID_REQUEST, "not a JSON-RPC request, notification or response", readable, None, notification)
    if _is_deep(text) and _deeper_than(frame, MAX_DEPTH):
        return _too_deep(frame)
    if _seen.infinite:
        return Problem(INVALID_PARAMS, "numbers must be finite: one is beyond a float's range", readable,
                       {"field": "params"}, notification)
    if not is_call:
        # a client's answer (to an elicitation...): the SDK's envelope decides; a request or
        # a notification that passed the checks above is one it accepts
        try:
            jsonrpc_message_adapter.validate_python(frame, by_name=False)
        except EnvelopeError:
            return Problem(INVALID_REQUEST, "a JSON-RPC response needs an id and a result object or an error object",
                           readable, None, notification)
    return frame


def _is_deep(text: str) -> bool:
    """Whether a frame may nest more than MAX_DEPTH levels: it has more brackets than that
    (a count at C speed; only such frames are walked)."""
    return text.count("[") + text.count("{") > MAX_DEPTH


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", int: "a number", float: "a number", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


# ---------------------------------------------------------------- after the envelope

# the SDK's words for a request refused before its handler (params that fail the method's
# model, or a request before initialize): no field, no next step
_SDK_VAGUE = "Invalid request parameters"


async def explain_invalid(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """A server middleware: a request the SDK refuses before its handler keeps its code
    (-32602) but says what is wrong in one line: the field of params that fails the
    method's model (tools/call's `arguments` not an object...), or that the connection has
    not been initialized yet."""
    try:
        return await call_next(ctx)
    except ParamsError as exc:
        first = exc.errors()[0] if exc.error_count() else {}
        loc = [str(part) for part in first.get("loc", ())]
        where = ".".join(loc[1:] if loc[:1] == ["params"] else loc) or "params"
        what = " ".join(str(first.get("msg", "invalid")).split())[:MESSAGE_CHARS]
        raise MCPError(code=INVALID_PARAMS, message=f"invalid params of {ctx.method}: {where}: {what}",
                       data={"field": where}) from None
    except MCPError as exc:
        error = exc.error
        if error.code == INVALID_PARAMS and error.message == _SDK_VAGUE and error.data == "" \
                and ctx.method != "initialize" and ctx.session.client_params is None:
            raise MCPError(code=INVALID_PARAMS, message=f"{ctx.method} before initialize: send initialize first "
                           "(or the 2026-07-28 per-request _meta envelope)", data={"method": ctx.method}) from None
        raise


# ---------------------------------------------------------------- stdio


class StdioFrames:
    """The server's stdin as the SDK's stdio transport reads it (`async for line in ...`):
    only good frames come out; a bad one is answered through `answer` (set to a function
    that writes a JSON-RPC error to the client once the transport is up). The process's
    fd 0 is moved to a private descriptor while serving (handlers and children read EOF, as
    with the SDK's own reader) and put back by `close`."""

    def __init__(self, max_bytes: int, stream: Any = None):
        self.max_bytes = max_bytes
        self.answer: Callable[[Problem], Awaitable[None]] | None = None
        self.answered = 0
        self._restore: Callable[[], None] | None = None
        if stream is None:
            stream, self._restore = _claim_stdin()

        self.file = io.TextIOWrapper(stream, encoding="utf-8", errors="replace")
        self._read = anyio.to_thread.run_sync

    def close(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            line = await self._read(self.file.readline, self.max_bytes + 1)
            if not line:
                return
            if len(line) > self.max_bytes and not line.endswith("\n"):
                while True:  # the rest of the over-long line is read and dropped, never kept
                    rest = await self._read(self.file.readline, 1 << 16)
                    if not rest or rest.endswith("\n"):
                        break
                await self._refuse(Problem(INVALID_REQUEST, f"the message is larger than {self.max_bytes} bytes",
                                           data={"limit": self.max_bytes}))
                continue
            if not line.strip():
                continue
            verdict = check(line)
            if isinstance(verdict, Problem):
                await self._refuse(verdict)
                continue
            yield line

    async def _refuse(self, problem: Problem) -> None:
        if problem.notification:
            log.info("a notification was dropped: %s", problem.message)
            return
        if self.answer is not None:
            self.answered += 1
            await self.answer(problem)


def _claim_stdin() -> tuple[Any, Callable[[], None] | None]:
    """fd 0 moved to a private descriptor (fd 0 then reads the null device), and how to
    put it back; stdin's own buffer in place when that cannot be done."""
    try:
        private = os.dup(0)
    except OSError:
        return sys.stdin.buffer, None
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
    except OSError:
        os.close(private)
        return sys.stdin.buffer, None

    def restore() -> None:
        try:
            os.dup2(private, 0)
        except OSError:
            log.debug("stdin could not be put back", exc_info=True)

    return os.fdopen(private, "rb", closefd=False), restore


async def write_problem(write_stream: Any, problem: Problem) -> None:
    """A Problem as a JSON-RPC error on the SDK transport's write stream."""
    await write_stream.send(SessionMessage(jsonrpc_message_adapter.validate_python(problem.reply(), by_name=False)))


# ---------------------------------------------------------------- HTTP


class FrameCheck:
    """An ASGI app in front of the SDK's streamable HTTP app: a POST body is read (up to
    `max_bytes`; a larger one goes on untouched, for the app's own size limit) and checked;
    a bad one is answered 400 with its JSON-RPC error.

    `gate`, when given, serves a good body that is a request (a method and an id), or one
    too large to check, as `gate(run, send)`: it decides when `run()` may go (httpmode's
    turns of a key). A client's response (its answer to the server's question) and a
    notification are served at once: a response is what a waiting call needs to finish,
    so queueing it behind the calls that wait for it could stall them all."""

    def __init__(self, app: Any, max_bytes: int,
                 gate: Callable[[Callable[[], Awaitable[None]], Any], Awaitable[None]] | None = None):
        self.app, self.max_bytes, self.gate = app, max_bytes, gate

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more and size <= self.max_bytes:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: the app sees it too
                chunks.append(message)
                more = False
                break
            body = message.get("body", b"")
            chunks.append({"type": "http.request", "body": body, "more_body": message.get("more_body", False)})
            size += len(body)
            more = message.get("more_body", False)
        is_request = True  # unless the body shows otherwise
        if not more and size <= self.max_bytes and chunks and chunks[-1]["type"] == "http.request":
            verdict = check(b"".join(c["body"] for c in chunks))
            if isinstance(verdict, Problem):
                await _http_problem(verdict, send)
                return
            is_request = isinstance(verdict, dict) and "method" in verdict and "id" in verdict
        pending = list(chunks)

        async def replay() -> dict:
            if pending:
                return pending.pop(0)
            return await receive()

        if self.gate is None or not is_request:
            await self.app(scope, replay, send)
        else:
            await self.gate(lambda: self.app(scope, replay, send), send)


async def _http_problem(problem: Problem, send) -> None:
    body = json.dumps(problem.reply(), separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


__all__ = ["MAX_DEPTH", "FrameCheck", "Problem", "StdioFrames", "check", "explain_invalid", "write_problem"]
