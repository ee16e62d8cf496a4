"""The plain-HTTP handler kinds of catalog/extra-routes.yaml: Arcane's routes outside its
OpenAPI document that are one request and one answer, like REST, but with a rule of their
own each route's `options` declare (compile checks their shape and what they name):

* ``binary_download`` / ``text_download`` — a file read within ARCANE_MCP_MAX_DOWNLOAD_BYTES
  (response.read_capped stops at the cap; nothing past it is buffered). ``admin_only``:
  Arcane serves the route to global admins only, so its 401 and 403 become one error naming
  that; ``wait_argument``/``wait_default``: Arcane records for that many seconds before it
  answers (a CPU profile), so the read timeout grows by them.
* ``webhook_trigger`` — the anonymous trigger: the route is ``security: public`` (compile
  insists), so no credential header is sent, and the session cookie jar is dropped too (the
  token in the path is the only credential). ``accepted_status`` (202) is answered as
  "accepted, runs in the background". The token is a secret by its name (rules/
  redaction.yaml): a preview masks it in the path, the audit record holds argument names
  only, and httpx's request log, which prints URLs, is kept below INFO (cli._logging).
* ``token_exchange`` — RFC 8693: a form-encoded POST of the route's `in: form` params plus
  ``fixed_form`` fields (RFC 8693's grant_type), no credential. The answer's ``secret_members`` (the access token) are what
  the caller asked for, so the result shows them — and only the result: the audit record
  and the log carry names, never values, and the text says the value is a credential.
* ``chunked_upload`` — not an extra route's kind: an overlay's ``chunked_upload`` puts a
  REST action that consumes an upload session under it. The call takes the content (or,
  over stdio only, a local file under ARCANE_MCP_UPLOAD_DIRS) and does the session
  protocol of catalog/conventions.yaml ``uploads``: create, chunks, consume.

Each kind is one function, registered in handlers.HANDLERS under its catalog word.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..build.lazy_dataclass import dataclass
from ..errors import ArcaneHTTPError, ArgumentError, UpstreamError
from ..text import escape
from . import reader
from .context import rest
from .request import blob_bytes, prepare
from .response import SHAPERS, Shaped, raise_for_status

if TYPE_CHECKING:
    from ..build.catalog import Action
    from ..front.names import Namer
    from ..text.render import ToolResult
    from .context import Context
    from .response import Reading

ADMIN_STATUSES = (401, 403)  # what Arcane answers a caller who is not a global admin


def _admin_error(action: Action, err: ArcaneHTTPError, namer: Namer) -> UpstreamError:
    """Arcane refused a global-admin route: say so, and what to do about it."""
    who = "no valid credential was accepted" if err.status == 401 else "the configured credential is not a global admin"
    return UpstreamError(
        f"{namer(action.id)} is served by Arcane to global admins only, and {who} (HTTP {err.status}: {err.message})",
        "Use the API key or login of a global admin of Arcane (ARCANE_API_KEY, or ARCANE_USERNAME/ARCANE_PASSWORD), then retry.",
        code="admin_required", status=err.status)


def _wait_seconds(action: Action, args: dict[str, Any]) -> float:
    """How long Arcane records before it answers (0 for a route that answers at once)."""
    name = action.options.get("wait_argument")
    if not name:
        return 0.0
    value = args.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return float(action.options.get("wait_default") or 0)


async def download(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """A file (a pprof profile, its text form, a command line) within the download cap."""
    req = prepare(action, args)
    req.read_timeout = ctx.settings.request_timeout + _wait_seconds(action, args)
    resp = await reader.send(ctx.client, action, req)
    try:
        await raise_for_status(resp, reading.conventions.error_shapes)
    except ArcaneHTTPError as err:
        if action.options.get("admin_only") and err.status in ADMIN_STATUSES:
            raise _admin_error(action, err, namer) from None
        raise
    try:
        # a profile asked for as text (debug=1) is text whatever the route's kind
        ctype = resp.headers.get("content-type", "").lower()
        kind = "text_download" if ctype.startswith("text/") else action.handler
        shaped = await SHAPERS[kind](resp, action, reading)
    finally:
        await resp.aclose()
    return ctx.renderer.success(action, shaped, namer, args, safe_mode=ctx.settings.safe_mode)


async def webhook_trigger(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """Fire a webhook by its token; no credential is sent (the route is public)."""
    shaped = await _answer(await reader.send(ctx.client, action, prepare(action, args)), action, reading, "empty")
    want = action.options.get("accepted_status")
    accepted = shaped.http_status == want
    structured = {**(shaped.structured or {}), "httpStatus": shaped.http_status, "accepted": accepted,
                  "message": "Arcane accepted the trigger; the webhook's action runs in the background and its outcome lands "
                             "in Arcane's event log" if accepted
                             else f"Arcane answered HTTP {shaped.http_status}, not the {want} that means accepted; check the webhook in Arcane"}
    return ctx.renderer.success(action, Shaped("object", structured, shaped.http_status), namer, args, safe_mode=ctx.settings.safe_mode)


async def token_exchange(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """RFC 8693: the declared fixed form fields (grant_type), then the call's, no credential."""
    req = prepare(action, args)
    req.form_fields[:0] = [(str(k), str(v)) for k, v in action.options["fixed_form"].items()]
    shaped = await _answer(await reader.send(ctx.client, action, req), action, reading, "json")
    secrets = [m for m in action.options.get("secret_members", ()) if m in (shaped.structured or {})]
    result = ctx.renderer.success(action, shaped, namer, args, safe_mode=ctx.settings.safe_mode)
    if secrets:
        result.close([f"{', '.join(secrets)}: a credential issued for this request; pass it only where it is needed "
                      "(this server never logs or audits it)."])
    return result


async def _answer(resp, action: Action, reading: Reading, kind: str) -> Shaped:
    """Arcane's error raised, or the answer shaped by `kind`; the answer is closed either way."""
    try:
        await raise_for_status(resp, reading.conventions.error_shapes)
        return await SHAPERS[kind](resp, action, reading)
    finally:
        await resp.aclose()


# ---------------------------------------------------------------- chunked uploads


@dataclass(frozen=True)
class Source:
    """The content of a chunked upload: its name, size, and a reader of one chunk by offset."""

    filename: str
    size: int
    read: Callable[[int, int], bytes]  # (offset, length) -> bytes
    close: Callable[[], None] = lambda: None


def _from_blob(blob: dict, arg: str) -> Source:
    filename, data, _ = blob_bytes(blob, arg)
    return Source(filename, len(data), lambda off, n: data[off:off + n])


def _from_file(ctx: Context, value: str, arg: str) -> Source:
    """A local file, only over stdio and only under a directory the operator allowed
    (symlinks resolved first, so a link cannot lead out); read one chunk at a time."""
    if ctx.settings.transport != "stdio":
        raise ArgumentError(f"'{arg}': local files are never read when this server is not on stdio",
                            "Pass the content itself (text or base64) instead.", fields=[arg])
    allowed = [d.resolve() for d in ctx.settings.upload_dirs]
    if not allowed:
        raise ArgumentError(f"'{arg}': no directory is allowed for uploads (ARCANE_MCP_UPLOAD_DIRS is not set)",
                            "Ask the operator to set ARCANE_MCP_UPLOAD_DIRS, or pass the content itself.", fields=[arg])
    path = Path(value).expanduser()
    real = path.resolve() if path.is_absolute() else None
    if real is None or not any(real.is_relative_to(d) for d in allowed):
        raise ArgumentError(f"'{arg}' must be an absolute path under ARCANE_MCP_UPLOAD_DIRS ({', '.join(map(str, allowed))})",
                            "Pass a file under one of those directories.", fields=[arg])
    if not real.is_file():
        raise ArgumentError(f"'{arg}': {real} is not a readable file", "Check the path.", fields=[arg])
    handle = real.open("rb")

    def read(offset: int, length: int) -> bytes:
        handle.seek(offset)
        return handle.read(length)

    return Source(real.name, real.stat().st_size, read, handle.close)


async def chunked_upload(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """Carry the content through an upload session (create, chunks, consume) in one call:
    the session protocol is the conventions' `uploads`, the kind and chunk size the
    overlay's `chunked_upload` (catalog.Action.options). A session's ID passed as it is
    goes straight to the action; a failed chunk aborts the session."""
    opt, conv = action.options, ctx.catalog.conventions.uploads
    given = [k for k in (opt["upload_argument"], opt["content_argument"], opt["file_argument"]) if args.get(k) is not None]
    if len(given) != 1:
        raise ArgumentError(f"{namer(action.id)} takes exactly one of {opt['content_argument']}, {opt['file_argument']} or "
                            f"{opt['upload_argument']}; got {', '.join(given) or 'none'}", "Pass the content once.", fields=given)
    rest_args = {k: v for k, v in args.items() if k not in (opt["content_argument"], opt["file_argument"])}
    if given[0] == opt["upload_argument"]:
        return await rest(ctx, action, rest_args, namer, reading)
    source = (_from_blob(args[given[0]], given[0]) if given[0] == opt["content_argument"]
              else _from_file(ctx, str(args[given[0]]), given[0]))
    try:
        session, digest = await _send_chunks(ctx, action, args, source, reading)
    finally:
        source.close()
    rest_args[opt["upload_argument"]] = session[conv.answer_id]
    result = await rest(ctx, action, rest_args, namer, reading)
    upload = {"uploadId": session[conv.answer_id], "filename": source.filename, "bytes": source.size,
              "chunks": session[conv.answer_total], "chunkSize": session[conv.answer_chunk_size], "sha256": digest}
    if isinstance(result.structured, dict):
        result.structured = {**result.structured, "upload": upload}
    result.close([f"Uploaded {source.size} bytes of {escape.inline(source.filename, strict=True)} in {upload['chunks']} chunk(s) through upload "
                  f"session {escape.inline(str(upload['uploadId']), strict=True)} (sha256 {digest})."])
    return result


async def _send_chunks(ctx: Context, action: Action, args: dict[str, Any], source: Source, reading: Reading) -> tuple[dict, str]:
    """Create the session and send every chunk; (the session, the content's sha256). Each
    step is an internal read (reader.read: its deadline, its errors)."""
    conv, cat = ctx.catalog.conventions.uploads, ctx.catalog
    env = {cat.env_arg: args[cat.env_arg]} if cat.env_arg in args else {}
    create, chunk, abort = (cat.actions[a] for a in (conv.create, conv.chunk, conv.abort))
    kind = action.options["kind"]
    request = {**env, conv.kind: kind, conv.filename: source.filename, conv.size: source.size, conv.chunk_size: action.options["chunk_size"]}
    created = await reader.read(ctx.client, create, request, reading.conventions)
    session = created.structured if isinstance(created.structured, dict) else {}
    ref = {**env, conv.kind: kind, conv.upload: session.get(conv.answer_id)}
    try:
        size, total = int(session[conv.answer_chunk_size]), int(session[conv.answer_total])
        digest = hashlib.sha256()
        for index in range(total):
            data = source.read(index * size, size)
            digest.update(data)
            req = prepare(chunk, {**ref, conv.index: index})
            req.content, req.content_type = data, "application/octet-stream"
            # a chunk carries up to a MiB: the per-request deadline, not the short read one
            await reader.read(ctx.client, chunk, req, reading.conventions, seconds=ctx.client.settings.request_timeout)
            if reading.progress is not None:  # one per chunk: each is a request, so they cannot flood
                await reading.progress(index + 1, total, f"uploaded chunk {index + 1} of {total} ({source.filename})")
    except BaseException:
        try:  # best effort: a half-sent session is not left behind
            await reader.read(ctx.client, abort, ref, reading.conventions, statuses=reader.ANY)
        except Exception:
            pass
        raise
    return session, digest.hexdigest()


__all__ = ["chunked_upload", "download", "token_exchange", "webhook_trigger"]
