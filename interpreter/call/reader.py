"""The one place a request goes to Arcane, and the one internal read.

`send` is the only caller of ArcaneClient.send (the credential a route takes and the one
retry after a 401 a session refresh can cure, auth.send_with_auth): a handler kind sends
the action it was dispatched for through it and reads the answer itself, within the
dispatcher's action deadline.

`read` is every request the engine makes for itself, for another action than the one
called: a name resolved to its ID and a confirmation's target and blast radius (dispatch),
the credential's permissions (build/access.py), HTTP mode's key check, `interp doctor`'s
checks, the steps of an upload session (transfer.py). (`head_of` is doctor's one look at a
stream: its status and Content-Type, the body never read.) One deadline for the whole read,
answer included (ARCANE_MCP_READ_TIMEOUT), at most READ_MAX_BYTES of answer, JSON only,
and one error mapping: every failure is an UpstreamError the caller branches on by its
code (arcane_timeout, arcane_unreachable, arcane_http with `status`, arcane_protocol);
without a client, arcane_unreachable. With `statuses=ANY` an HTTP error status is an
answer, not an error (its `status` and Arcane's `message`), and a body that is not JSON
is None: doctor judges the status itself.

tests/test_reader.py checks that no other module calls ArcaneClient.send.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from ..build.lazy_dataclass import dataclass
from ..errors import ArcaneHTTPError, ArcaneProtocolError, ArcaneTimeout, ArcaneUnreachable
from .request import PreparedRequest, prepare
from .response import parse_error, raise_for_status, read_capped, unwrap

if TYPE_CHECKING:
    import httpx

    from ..build.catalog import Action
    from ..build.model import Conventions
    from .request import ArcaneClient

READ_MAX_BYTES = 4 * 1024 * 1024  # an internal read's answer larger than this is an arcane_protocol error
OK, ANY = "ok", "any"  # `statuses`: only a 2xx is an answer (an error status raises), or every status is


def client_or_error(client: ArcaneClient | None) -> ArcaneClient:
    """The Arcane client, or the arcane_unreachable error that says how to configure one."""
    if client is None:
        raise ArcaneUnreachable("no Arcane is configured (ARCANE_URL is not set)",
                                "Set ARCANE_URL (and ARCANE_API_KEY) and restart the server.")
    return client


async def send(client: ArcaneClient | None, action: Action, req: PreparedRequest) -> httpx.Response:
    """Send `req` for `action`; the streaming answer is the caller's to read and close.
    Transport failures are ArcaneTimeout/ArcaneUnreachable (transport.mapped)."""
    return await client_or_error(client).send(action, req)


@dataclass(frozen=True)
class Answer:
    """One internal read's answer."""

    status: int
    body: Any  # the JSON Arcane sent (None: an empty body, or with statuses=ANY one that is not JSON)
    structured: Any  # the value inside Arcane's envelope, as a tool result's structuredContent (None: empty)
    kind: str  # the envelope's kind (response.unwrap): list, object, value or empty
    message: str = ""  # Arcane's error message (statuses=ANY, a status that is not 2xx)


async def read(client: ArcaneClient | None, action: Action, args: dict[str, Any] | PreparedRequest,
               conventions: Conventions, *, statuses: str = OK, seconds: float | None = None) -> Answer:
    """Send `action` with `args` (or a request already prepared, a body set on it) and read
    its JSON answer within `seconds` (default: the client's ARCANE_MCP_READ_TIMEOUT; a step
    that carries a body, like an upload chunk, passes the per-request deadline); see the
    module docstring for what it raises."""
    client = client_or_error(client)
    req = args if isinstance(args, PreparedRequest) else prepare(action, args)
    seconds = client.settings.read_timeout if seconds is None else seconds
    try:
        async with asyncio.timeout(seconds):
            status, raw, message = await _exchange(client, action, req, conventions, statuses)
    except TimeoutError:
        raise ArcaneTimeout(f"Arcane did not answer {action.id} within {seconds:g}s",
                            "Retry; if Arcane is slow, raise ARCANE_MCP_READ_TIMEOUT (ARCANE_MCP_REQUEST_TIMEOUT for an upload chunk).", sent=True) from None
    try:
        body = json.loads(raw.decode("utf-8")) if raw.strip() else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        if statuses == ANY:
            return Answer(status, None, None, "empty", message)
        raise ArcaneProtocolError(f"Arcane's answer to {action.id} is not JSON", None, status=status) from None
    if body is None or (statuses == ANY and status >= 300):
        return Answer(status, body, None, "empty", message)
    try:
        shaped = unwrap(body, status, conventions)
    except ArcaneHTTPError as err:  # a 2xx whose envelope reports a failure
        if statuses != ANY:
            raise
        return Answer(status, body, None, "empty", err.message)
    return Answer(status, body, shaped.structured, shaped.kind, message)


async def head_of(client: ArcaneClient | None, action: Action, args: dict[str, Any], *, seconds: float | None = None) -> tuple[int, str]:
    """Open `action` (a stream), take its status and Content-Type, and close it without
    reading its body: `interp doctor`'s transport check. One deadline for the headers
    (default ARCANE_MCP_READ_TIMEOUT); the same errors as `read`."""
    client = client_or_error(client)
    seconds = client.settings.read_timeout if seconds is None else seconds
    try:
        async with asyncio.timeout(seconds):
            resp = await client.send(action, prepare(action, args))
    except TimeoutError:
        raise ArcaneTimeout(f"Arcane did not answer {action.id} within {seconds:g}s", "Retry; check Arcane's log.", sent=True) from None
    try:
        return resp.status_code, resp.headers.get("content-type", "")
    finally:
        await resp.aclose()


async def _exchange(client: ArcaneClient, action: Action, req: PreparedRequest, conventions: Conventions,
                    statuses: str) -> tuple[int, bytes, str]:
    """(status, at most READ_MAX_BYTES of the body, Arcane's error message or "")."""
    resp = await client.send(action, req)
    try:
        if statuses != ANY:
            await raise_for_status(resp, conventions.error_shapes)
        raw, truncated = await read_capped(resp, READ_MAX_BYTES)
    finally:
        await resp.aclose()
    if truncated:
        raise ArcaneProtocolError(f"Arcane's answer to {action.id} is larger than {READ_MAX_BYTES // (1024 * 1024)} MiB", None,
                                  status=resp.status_code)
    message = "" if resp.is_success else parse_error(resp.status_code, raw, resp.headers.get("content-type", ""),
                                                     conventions.error_shapes)[0]
    return resp.status_code, raw, message


__all__ = ["ANY", "OK", "READ_MAX_BYTES", "Answer", "client_or_error", "head_of", "read", "send"]
