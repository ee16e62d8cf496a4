"""Response shaping by kind: one small async function per response kind, registered in
SHAPERS under the word catalog/actions.yaml uses (named in the registry, kinds.py). Each reads the (streaming) httpx
response within the download cap, through transport.body_chunks, and returns a Shaped
value; error statuses become ArcaneHTTPError before any shaper runs, their message found
where catalog/conventions.yaml `error_shapes` say Arcane keeps it. The envelope and
pagination member names are the conventions' too: nothing here spells one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import httpx

from ..build.lazy_dataclass import dataclass
from ..build.model import Conventions, ErrorShape
from ..errors import ArcaneHTTPError, ArcaneProtocolError, ArcaneTimeout, ArcaneUnreachable, UpstreamError
from . import kinds
from .framing import frames
from .stream import ProgressFn, Reporter, StreamState, read_line
from .transport import body_chunks

if TYPE_CHECKING:
    from ..build.catalog import Action

ERROR_BODY_CAP = 64 * 1024
STREAMING_KINDS = kinds.streaming_kinds()  # no read timeout: the action deadline (or the capture's bound) ends them


@dataclass
class Blob:
    filename: str
    mime_type: str
    data: bytes


@dataclass
class Shaped:
    """What an action returned, before rendering."""

    kind: str  # object | list | value | empty | stream | text | binary
    structured: dict | None
    http_status: int
    text: str | None = None  # text downloads
    blob: Blob | None = None  # binary downloads
    failed: str | None = None  # a stream that ended in an error line
    notes: list[str] = field(default_factory=list)


@dataclass
class Reading:
    """What a shaper needs besides the response: the cap and Arcane's conventions (the
    envelope, the error shapes, the stream frames)."""

    cap: int
    conventions: Conventions
    progress: ProgressFn | None = None
    state: StreamState = field(default_factory=StreamState)  # an operation stream, as far as read
    clock: Callable[[], float] = time.monotonic


async def read_capped(resp: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """Read at most `cap` bytes; returns (bytes, truncated). The response must have been
    sent streaming (auth.send_with_auth sends with stream=True): reading stops at the
    first chunk past the cap and the caller closes the answer, so no more than the cap
    and one chunk is ever held, whatever the body's size (tests/big_body.py measures it)."""
    chunks, size = [], 0
    async with aclosing(body_chunks(resp)) as body:
        async for chunk in body:
            if size + len(chunk) > cap:
                chunks.append(chunk[: cap - size])
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks), False


def _filename(resp: httpx.Response, action: Action) -> str:
    cd = resp.headers.get("content-disposition", "")
    m = re.search(r"filename\*=UTF-8''([^;]+)", cd, re.I) or re.search(r'filename="?([^";]+)"?', cd, re.I)
    if m:
        return unquote(m.group(1)).strip().replace("/", "_").replace("\\", "_") or action.name
    return action.name


def _search(expr: Any, payload: Any) -> Any:
    return expr.search(payload) if expr is not None else None


def message_of(payload: Any, shapes: tuple[ErrorShape, ...]) -> str:
    """The message of an error body: the first declared shape that holds a non-empty text."""
    if not isinstance(payload, dict):
        return ""
    for shape_ in shapes:
        message = next((v for v in (_search(e, payload) for e in shape_.message) if isinstance(v, str) and v.strip()), "")
        if not message:
            continue
        parts = []
        items = _search(shape_.items, payload)
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            loc = str(_search(shape_.location, item) or "").removeprefix(shape_.drop_prefix)
            text = _search(shape_.text, item)
            if text is not None:
                parts.append(f"{loc}: {text}" if loc else str(text))
        if parts:
            message += " — " + "; ".join(parts)
        return message
    return ""


def parse_error(status: int, body: bytes, content_type: str, shapes: tuple[ErrorShape, ...] = ()) -> tuple[str, dict]:
    """Arcane's error message, found through the declared error shapes (problem+json,
    `{success:false,error}`, the environment proxy's `{data:{error}}`, `{message,…}`,
    the rate limiter's `{error}`); a body that is not JSON is its own (cut) message."""
    detail: dict = {}
    message = ""
    try:
        payload = json.loads(body.decode("utf-8", "replace")) if body else None
    except json.JSONDecodeError:
        payload = None
    if isinstance(payload, dict):
        detail = payload
        message = message_of(payload, shapes)
    elif body:
        message = body.decode("utf-8", "replace").strip()[:300]
    return " ".join(message.split()) or httpx.codes.get_reason_phrase(status) or f"HTTP {status}", detail


def retry_after(resp: httpx.Response, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None."""
    value = resp.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(when.timestamp() - now(), 0.0)


def wait_text(seconds: float, now: Callable[[], float] = time.time) -> str:
    """"60 s (after 12:04:05 UTC)": how long to wait, and until when."""
    until = datetime.fromtimestamp(now() + seconds, tz=UTC).strftime("%H:%M:%S UTC")
    return f"{seconds:.0f} s (after {until})"


async def raise_for_status(resp: httpx.Response, shapes: tuple[ErrorShape, ...] = ()) -> None:
    if resp.status_code < 400:
        if 300 <= resp.status_code < 400:
            await resp.aclose()
            raise ArcaneProtocolError(
                f"Arcane answered a redirect ({resp.status_code}) that this server does not follow",
                "Set ARCANE_URL to the final address (https and the right host), so the API key is never sent elsewhere.",
                status=resp.status_code)
        return
    body, _ = await read_capped(resp, ERROR_BODY_CAP)
    await resp.aclose()
    message, detail = parse_error(resp.status_code, body, resp.headers.get("content-type", ""), shapes)
    wait = retry_after(resp)
    if wait is not None:
        # the server said when to come back: the message carries it, so the hint need not guess
        message += f"; Arcane asks to retry in {wait_text(wait)}"
    raise ArcaneHTTPError(message, None, status=resp.status_code, detail=detail)


def _json(body: bytes, status: int) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArcaneProtocolError(f"Arcane's answer is not valid JSON ({exc.__class__.__name__})",
                                  "Retry; if it persists, Arcane or a proxy in front of it is answering something else.", status=status) from None


def unwrap(payload: Any, status: int, conventions: Conventions) -> Shaped:
    """The envelope rule: the value becomes structuredContent (a list under the declared
    items member), every other member Arcane sends beside it (pagination, counts, groups,
    warnings…) kept; a failure flag is an error whose text the error shapes find."""
    env, paging = conventions.envelope, conventions.pagination.member
    if isinstance(payload, dict) and env.success in payload and (env.data in payload or payload.get(env.success) is False):
        if payload.get(env.success) is False:
            raise ArcaneHTTPError(message_of(payload, conventions.error_shapes) or "Arcane reported a failure", None, status=status,
                                  detail=payload)
        data = payload.get(env.data)
        extras = {k: v for k, v in payload.items() if k not in (env.success, env.data)}
        if isinstance(data, list) or (data is None and paging in extras):
            return Shaped("list", {env.items: data or [], **extras}, status)
        if isinstance(data, dict):
            merged = dict(data)
            for k, v in extras.items():
                merged[k if k not in merged else f"{env.clash_prefix}{k}"] = v
            return Shaped("object", merged, status)
        return Shaped("value", {env.value: data, **extras}, status)
    if isinstance(payload, dict) and payload.get(env.success) is True:
        # a body that carries the flag among its own fields instead of a data member (docker
        # info: types/dockerinfo/docker_info.go Info.Success; message results): the flag is the
        # envelope's, not the object's
        rest = {k: v for k, v in payload.items() if k != env.success}
        return Shaped("object", rest, status) if rest else Shaped("empty", {"status": status}, status)
    if isinstance(payload, list):
        return Shaped("list", {env.items: payload}, status)
    if isinstance(payload, dict):
        return Shaped("object", payload, status)
    return Shaped("value", {env.value: payload}, status)


# ---------------------------------------------------------------- shapers


async def shape_json(resp: httpx.Response, action: Action, reading: Reading) -> Shaped:
    body, truncated = await read_capped(resp, max(reading.cap, 64 * 1024 * 1024))
    if truncated:
        raise ArcaneProtocolError("Arcane's answer is larger than this server reads", "Narrow the request (filters, start/limit).", status=resp.status_code)
    if not body.strip():
        return Shaped("empty", {"status": resp.status_code}, resp.status_code)
    return unwrap(_json(body, resp.status_code), resp.status_code, reading.conventions)


async def shape_empty(resp: httpx.Response, action: Action, reading: Reading) -> Shaped:
    body, _ = await read_capped(resp, ERROR_BODY_CAP)
    if body.strip() and "json" in resp.headers.get("content-type", ""):
        try:
            return unwrap(json.loads(body), resp.status_code, reading.conventions)
        except json.JSONDecodeError:
            pass
    return Shaped("empty", {"status": resp.status_code}, resp.status_code)


async def shape_ndjson(resp: httpx.Response, action: Action, reading: Reading) -> Shaped:
    """Consume an operation stream to its end (frames as catalog/conventions.yaml
    `streams` and `activity` declare them, in the framing `framings` gives its Content-Type:
    JSON lines or server-sent events): activity ID, errors, last lines, progress
    notifications. Silence is not an error here: the request has no read timeout, the action
    deadline bounds it, and `reading.state` keeps what was read so far for the dispatcher to
    report. An undeclared Content-Type is an error before anything is read."""
    state, rules = reading.state, reading.conventions.streams
    framing = reading.conventions.framings.require(resp.headers.get("content-type"), f"the progress stream of {action.id}",
                                                   resp.status_code)
    reporter = Reporter(reading.progress, rules, reading.clock)
    decoder: list = []
    try:
        async with aclosing(frames(resp, reading.conventions.framings, framing, reading.cap, decoder)) as stream:
            async for frame in stream:
                await read_line(frame, state, rules, reporter)
    except ArcaneProtocolError as exc:
        raise ArcaneProtocolError(exc.message.replace("Arcane's stream", "Arcane's progress stream"), exc.next_step,
                                  status=resp.status_code) from None
    except ArcaneTimeout:
        raise ArcaneTimeout("Arcane's progress stream went silent (read timeout)", None, sent=True) from None
    except ArcaneUnreachable:
        state.broken = True
        state.errors.append("the connection broke before the stream ended")
    finally:
        reporter.close()  # the deadline or an error stops reading: no late notification
    if decoder and decoder[0].incomplete:
        state.malformed += decoder[0].incomplete  # an event cut by the end of the stream
    await reporter.finish()
    failed = None
    if state.errors:
        failed = state.errors[-1]
    elif not state.done:
        failed = "the stream ended without a done line; the operation may still be running"
    return Shaped("stream", rules.structured(state), resp.status_code, failed=failed)


def _looks_text(data: bytes, content_type: str) -> bool:
    if b"\x00" in data[:8192]:
        return False
    ct = content_type.lower()
    if ct.startswith("text/") or any(t in ct for t in ("json", "yaml", "xml", "pem", "csv", "x-sh", "javascript", "toml")):
        return True
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


async def _download(resp: httpx.Response, action: Action, cap: int, force: str | None) -> Shaped:
    data, truncated = await read_capped(resp, cap)
    ctype = resp.headers.get("content-type", "application/octet-stream").split(";")[0].strip()
    filename = _filename(resp, action)
    declared = resp.headers.get("content-length")
    size = int(declared) if declared and declared.isdigit() else len(data)
    as_text = force == "text" or (force is None and _looks_text(data, ctype))
    meta = {"filename": filename, "contentType": ctype, "size": size, "truncated": truncated}
    # how large the whole body is: its Content-Length, when Arcane sent one (nothing past the cap is read)
    whole = f"{size} bytes (Content-Length)" if declared else "a larger body (Arcane sent no Content-Length)"
    if truncated:
        meta["bodyBytes"] = size if declared else None
    if as_text:
        text = data.decode("utf-8", "replace")
        notes = [f"cut at ARCANE_MCP_MAX_DOWNLOAD_BYTES ({cap} bytes) of {whole}"] if truncated else []
        return Shaped("text", {**meta, "text": text}, resp.status_code, text=text, notes=notes)
    if truncated:
        raise ArcaneProtocolError(
            f"the file {filename!r} ({whole}) is larger than ARCANE_MCP_MAX_DOWNLOAD_BYTES ({cap} bytes); a binary file is "
            "never cut, so nothing was returned",
            "Raise ARCANE_MCP_MAX_DOWNLOAD_BYTES, or download it from Arcane's UI.", status=resp.status_code)
    return Shaped("binary", meta, resp.status_code, blob=Blob(filename, ctype, data))


async def shape_text_download(resp: httpx.Response, action: Action, reading: Reading) -> Shaped:
    return await _download(resp, action, reading.cap, "text")


async def shape_binary_download(resp: httpx.Response, action: Action, reading: Reading) -> Shaped:
    return await _download(resp, action, reading.cap, "binary")


async def shape_download(resp: httpx.Response, action: Action, reading: Reading) -> Shaped:
    return await _download(resp, action, reading.cap, None)


#: The shaper of each response kind the registry (kinds.py) gives one, by the catalog's word.
SHAPERS: dict[str, Callable[..., Awaitable[Shaped]]] = {k.name: globals()[k.shaper] for k in kinds.KINDS if k.shaper is not None}


async def shape(resp: httpx.Response, action: Action, reading: Reading) -> Shaped:
    """The action's answer by its response kind; an error status raises ArcaneHTTPError."""
    try:
        await raise_for_status(resp, reading.conventions.error_shapes)
        shaper = SHAPERS.get(action.response_kind)
        if shaper is None:
            raise UpstreamError(f"no shaper for response kind {action.response_kind!r}", None)
        return await shaper(resp, action, reading)
    finally:
        await resp.aclose()
