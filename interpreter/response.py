"""Response shaping by kind: one small async function per response kind, registered in
SHAPERS under the word catalog/actions.yaml uses. Each reads the (streaming) httpx
response within the download cap, through transport.body_chunks, and returns a Shaped
value; error statuses become ArcaneHTTPError before any shaper runs.
"""

from __future__ import annotations

import json
import re
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import httpx

from .catalog import Action
from .errors import ArcaneHTTPError, ArcaneProtocolError, ArcaneTimeout, ArcaneUnreachable, UpstreamError
from .transport import body_chunks

ERROR_BODY_CAP = 64 * 1024
NDJSON_KEEP_LINES = 10
ENVELOPE_KEYS = ("success", "data")


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


ProgressFn = Callable[[float, float | None, str], Awaitable[None]]


async def read_capped(resp: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """Read at most `cap` bytes; returns (bytes, truncated)."""
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
        from urllib.parse import unquote

        return unquote(m.group(1)).strip().replace("/", "_").replace("\\", "_") or action.name
    return action.name


def parse_error(status: int, body: bytes, content_type: str) -> tuple[str, dict]:
    """Arcane's error message from problem+json, `{success:false,error}` or `{code,message}`."""
    detail: dict = {}
    message = ""
    try:
        payload = json.loads(body.decode("utf-8", "replace")) if body else None
    except json.JSONDecodeError:
        payload = None
    if isinstance(payload, dict):
        detail = payload
        if "detail" in payload or "title" in payload:
            message = str(payload.get("detail") or payload.get("title") or "")
            errs = payload.get("errors") or []
            parts = []
            for e in errs if isinstance(errs, list) else []:
                if isinstance(e, dict):
                    loc = str(e.get("location") or "").removeprefix("body.")
                    parts.append(f"{loc}: {e.get('message')}" if loc else str(e.get("message")))
            if parts:
                message = (message + " — " if message else "") + "; ".join(parts)
        elif "error" in payload:
            message = str(payload["error"])
        elif isinstance(payload.get("data"), dict) and "error" in payload["data"]:
            message = str(payload["data"]["error"])  # the environment proxy's shape
        elif "message" in payload:
            message = str(payload["message"])
    elif body:
        message = body.decode("utf-8", "replace").strip()[:300]
    return message or httpx.codes.get_reason_phrase(status) or f"HTTP {status}", detail


async def raise_for_status(resp: httpx.Response) -> None:
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
    message, detail = parse_error(resp.status_code, body, resp.headers.get("content-type", ""))
    raise ArcaneHTTPError(message, None, status=resp.status_code, detail=detail)


def _json(body: bytes, status: int) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArcaneProtocolError(f"Arcane's answer is not valid JSON ({exc.__class__.__name__})",
                                  "Retry; if it persists, Arcane or a proxy in front of it is answering something else.", status=status) from None


def unwrap(payload: Any, status: int) -> Shaped:
    """The envelope rule: `data` becomes structuredContent (lists under `items`), every
    other member Arcane sends beside `data` (pagination, counts, groups, warnings…) kept."""
    if isinstance(payload, dict) and "success" in payload and ("data" in payload or payload.get("success") is False):
        if payload.get("success") is False:
            raise ArcaneHTTPError(str(payload.get("error") or payload.get("message") or "Arcane reported a failure"), None, status=status, detail=payload)
        data = payload.get("data")
        extras = {k: v for k, v in payload.items() if k not in ENVELOPE_KEYS}
        if isinstance(data, list) or (data is None and "pagination" in extras):
            return Shaped("list", {"items": data or [], **extras}, status)
        if isinstance(data, dict):
            merged = dict(data)
            for k, v in extras.items():
                merged[k if k not in merged else f"envelope_{k}"] = v
            return Shaped("object", merged, status)
        return Shaped("value", {"value": data, **extras}, status)
    if isinstance(payload, list):
        return Shaped("list", {"items": payload}, status)
    if isinstance(payload, dict):
        return Shaped("object", payload, status)
    return Shaped("value", {"value": payload}, status)


# ---------------------------------------------------------------- shapers


async def shape_json(resp: httpx.Response, action: Action, cap: int, progress: ProgressFn | None) -> Shaped:
    body, truncated = await read_capped(resp, max(cap, 64 * 1024 * 1024))
    if truncated:
        raise ArcaneProtocolError("Arcane's answer is larger than this server reads", "Narrow the request (filters, start/limit).", status=resp.status_code)
    if not body.strip():
        return Shaped("empty", {"status": resp.status_code}, resp.status_code)
    return unwrap(_json(body, resp.status_code), resp.status_code)


async def shape_empty(resp: httpx.Response, action: Action, cap: int, progress: ProgressFn | None) -> Shaped:
    body, _ = await read_capped(resp, ERROR_BODY_CAP)
    if body.strip() and "json" in resp.headers.get("content-type", ""):
        try:
            return unwrap(json.loads(body), resp.status_code)
        except json.JSONDecodeError:
            pass
    return Shaped("empty", {"status": resp.status_code}, resp.status_code)


def _progress_line(obj: dict) -> str | None:
    parts = [str(obj[k]) for k in ("id", "status", "progress", "stream") if obj.get(k) not in (None, "")]
    return " ".join(p.strip() for p in parts if p.strip()) or None


async def shape_ndjson(resp: httpx.Response, action: Action, cap: int, progress: ProgressFn | None) -> Shaped:
    """Consume an Arcane progress stream to its end: activity ID, errors, last lines."""
    activity, errors, last, lines, done, malformed = None, [], [], 0, False, 0
    buf = b""
    try:
        async for chunk in body_chunks(resp):
            buf += chunk
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                if not raw.strip():
                    continue
                lines += 1
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError:
                    malformed += 1
                    continue
                if not isinstance(obj, dict):
                    continue
                if obj.get("type") == "activity" and obj.get("activityId"):
                    activity = str(obj["activityId"])
                if obj.get("error") or obj.get("errorDetail"):
                    err = obj.get("error") or (obj.get("errorDetail") or {}).get("message")
                    errors.append(str(err))
                if obj.get("done") is True:
                    done = True
                text = _progress_line(obj)
                if text:
                    last.append(text)
                    del last[:-NDJSON_KEEP_LINES]
                    if progress is not None:
                        await progress(float(lines), None, text[:200])
            if len(buf) > cap:
                raise ArcaneProtocolError("a progress line from Arcane is larger than the download cap", None, status=resp.status_code)
    except ArcaneTimeout:
        raise ArcaneTimeout("Arcane's progress stream went silent (read timeout)", None, sent=True) from None
    except ArcaneUnreachable:
        errors.append("the connection broke before the stream ended")
    if buf.strip():
        try:
            obj = json.loads(buf)
            if isinstance(obj, dict):
                if obj.get("error"):
                    errors.append(str(obj["error"]))
                done = done or obj.get("done") is True
        except json.JSONDecodeError:
            malformed += 1
    status = "failed" if errors else ("done" if done else "incomplete")
    structured = {"status": status, "activityId": activity, "lines": lines, "errors": errors, "lastLines": last}
    if malformed:
        structured["malformedLines"] = malformed
    failed = None
    if errors:
        failed = errors[-1]
    elif not done:
        failed = "the stream ended without a done line; the operation may still be running"
    return Shaped("stream", structured, resp.status_code, failed=failed)


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
    if as_text:
        text = data.decode("utf-8", "replace")
        notes = [f"cut at ARCANE_MCP_MAX_DOWNLOAD_BYTES ({cap} bytes) of {size if declared else 'more'}"] if truncated else []
        return Shaped("text", {**meta, "text": text}, resp.status_code, text=text, notes=notes)
    if truncated:
        raise ArcaneProtocolError(
            f"the file {filename!r} is larger than ARCANE_MCP_MAX_DOWNLOAD_BYTES ({cap} bytes)",
            "Raise ARCANE_MCP_MAX_DOWNLOAD_BYTES, or download it from Arcane's UI.", status=resp.status_code)
    return Shaped("binary", meta, resp.status_code, blob=Blob(filename, ctype, data))


async def shape_text_download(resp, action, cap, progress):
    return await _download(resp, action, cap, "text")


async def shape_binary_download(resp, action, cap, progress):
    return await _download(resp, action, cap, "binary")


async def shape_download(resp, action, cap, progress):
    return await _download(resp, action, cap, None)


SHAPERS: dict[str, Callable[..., Awaitable[Shaped]]] = {
    "json": shape_json,
    "empty": shape_empty,
    "ndjson": shape_ndjson,
    "text_download": shape_text_download,
    "binary_download": shape_binary_download,
    "download": shape_download,
}


async def shape(resp: httpx.Response, action: Action, cap: int, progress: ProgressFn | None = None) -> Shaped:
    try:
        await raise_for_status(resp)
        shaper = SHAPERS.get(action.response_kind)
        if shaper is None:
            raise UpstreamError(f"no shaper for response kind {action.response_kind!r}", None)
        return await shaper(resp, action, cap, progress)
    finally:
        await resp.aclose()
