"""The handler kinds: how one action is carried out once the dispatcher has validated,
confirmed and resolved it (SPEC §4 step 8). Each kind is one small function registered
under the word the catalog uses (`handler:` in catalog/extra-routes.yaml; "rest" for every
operation of Arcane's OpenAPI document), so a new route of a known kind is data only.

A handler gets the dispatch context (client, catalog, renderer, settings), the action, the
validated arguments, the namer of the calling surface and the Reading (caps, progress and
stream state); it answers the ToolResult the model sees. Errors are CallErrors: the
dispatcher renders them, audits them and applies the action deadline around the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import transfer
from .errors import ArcaneUnreachable, StreamFailed
from .request import prepare
from .response import shape

if TYPE_CHECKING:
    from .catalog import Action, Catalog
    from .config import Settings
    from .names import Namer
    from .render import Renderer, ToolResult
    from .request import ArcaneClient
    from .response import Reading


@dataclass(frozen=True)
class Context:
    """What every handler may use; one per dispatcher (catalog + credential)."""

    catalog: Catalog
    settings: Settings
    client: ArcaneClient | None
    renderer: Renderer


Handler = Callable[[Context, "Action", dict[str, Any], "Namer", "Reading"], Awaitable["ToolResult"]]


def require_client(ctx: Context) -> ArcaneClient:
    """The Arcane client, or the error that says how to configure one."""
    if ctx.client is None:
        raise ArcaneUnreachable("no Arcane is configured (ARCANE_URL is not set)",
                                "Set ARCANE_URL (and ARCANE_API_KEY) and restart the server.")
    return ctx.client


async def rest(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """One HTTP request; the response is shaped by the action's response kind."""
    client = require_client(ctx)
    resp = await client.send(action, prepare(action, args))
    shaped = await shape(resp, action, reading)
    if shaped.failed:
        activity = reading.state.activity
        msg = f"{namer(action.id)} failed: {shaped.failed}"
        if activity:
            msg += f" (activity {activity})"
        raise StreamFailed(msg, "Read the error above; fix its cause and retry.", status=shaped.http_status, activity=activity)
    return ctx.renderer.success(action, shaped, namer, args, safe_mode=ctx.settings.safe_mode)


#: Every handler kind the engine serves, keyed by the catalog's word. A kind the catalog
#: names that is missing here is "pending" (compile.HANDLER_KINDS lists all the words).
HANDLERS: dict[str, Handler] = {
    "rest": rest,
    "binary_download": transfer.download,
    "text_download": transfer.download,
    "webhook_trigger": transfer.webhook_trigger,
    "token_exchange": transfer.token_exchange,
    "chunked_upload": transfer.chunked_upload,  # set by an overlay's `chunked_upload` on a REST action
}


__all__ = ["HANDLERS", "Context", "Handler", "require_client", "rest"]
