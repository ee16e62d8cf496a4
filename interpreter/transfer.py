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
  ``grant_type``, no credential. The answer's ``secret_members`` (the access token) are what
  the caller asked for, so the result shows them — and only the result: the audit record
  and the log carry names, never values, and the text says the value is a credential.

Each kind is one function, registered in handlers.HANDLERS under its catalog word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import handlers
from .errors import ArcaneHTTPError, UpstreamError
from .request import prepare
from .response import SHAPERS, Shaped, raise_for_status

if TYPE_CHECKING:
    from .catalog import Action
    from .handlers import Context
    from .names import Namer
    from .render import ToolResult
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
    client = handlers.require_client(ctx)
    req = prepare(action, args)
    req.read_timeout = ctx.settings.request_timeout + _wait_seconds(action, args)
    resp = await client.send(action, req)
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
    client = handlers.require_client(ctx)
    shaped = await _answer(await client.send(action, prepare(action, args)), action, reading, "empty")
    want = action.options.get("accepted_status")
    accepted = shaped.http_status == want
    structured = {**(shaped.structured or {}), "httpStatus": shaped.http_status, "accepted": accepted,
                  "message": "Arcane accepted the trigger; the webhook's action runs in the background and its outcome lands "
                             "in Arcane's event log" if accepted
                             else f"Arcane answered HTTP {shaped.http_status}, not the {want} that means accepted; check the webhook in Arcane"}
    return ctx.renderer.success(action, Shaped("object", structured, shaped.http_status), namer, args, safe_mode=ctx.settings.safe_mode)


async def token_exchange(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """RFC 8693: the form fields plus the declared grant_type, no credential."""
    client = handlers.require_client(ctx)
    req = prepare(action, args)
    req.form_fields.insert(0, ("grant_type", str(action.options["grant_type"])))
    shaped = await _answer(await client.send(action, req), action, reading, "json")
    secrets = [m for m in action.options.get("secret_members", ()) if m in (shaped.structured or {})]
    result = ctx.renderer.success(action, shaped, namer, args, safe_mode=ctx.settings.safe_mode)
    if secrets:
        result.text += (f"\n{', '.join(secrets)}: a credential issued for this request; pass it only where it is needed "
                        "(this server never logs or audits it).\n")
    return result


async def _answer(resp, action: Action, reading: Reading, kind: str) -> Shaped:
    """Arcane's error raised, or the answer shaped by `kind`; the answer is closed either way."""
    try:
        await raise_for_status(resp, reading.conventions.error_shapes)
        return await SHAPERS[kind](resp, action, reading)
    finally:
        await resp.aclose()


__all__ = ["download", "token_exchange", "webhook_trigger"]
