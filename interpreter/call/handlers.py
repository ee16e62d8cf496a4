"""The handler kinds: how one action is carried out once the dispatcher has validated,
confirmed and resolved it (its last step). Each kind is one small function registered
under the word the catalog uses (`handler:` in catalog/extra-routes.yaml; "rest" for every
operation of Arcane's OpenAPI document), so a new route of a known kind is data only.

A handler gets the dispatch context (client, catalog, renderer, settings), the action, the
validated arguments, the namer of the calling surface and the Reading (caps, progress and
stream state); it answers the ToolResult the model sees. Errors are CallErrors: the
dispatcher renders them, audits them and applies the action deadline around the handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import transfer
from .context import Context, Handler, require_client, rest
from .live import live_channel

if TYPE_CHECKING:
    from ..build.catalog import Action
    from ..front.names import Namer
    from ..text.render import ToolResult
    from .response import Reading


# The WebSocket kinds import wsclient (and the websockets library) on their first call:
# a server start, and every call of another kind, never needs them.
async def websocket_capture(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """wsclient.websocket_capture: a log, stats or diagnostics socket within its bounds."""
    from . import wsclient

    return await wsclient.websocket_capture(ctx, action, args, namer, reading)


async def exec_command(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """wsclient.exec_command: one command through the terminal WebSocket."""
    from . import wsclient

    return await wsclient.exec_command(ctx, action, args, namer, reading)


#: Every handler kind the engine serves, keyed by the catalog's word. compile.HANDLER_KINDS
#: lists every word an extra route may name and marks served exactly these (a test checks);
#: a route of a kind missing here is "pending".
HANDLERS: dict[str, Handler] = {
    "rest": rest,
    "binary_download": transfer.download,
    "text_download": transfer.download,
    "webhook_trigger": transfer.webhook_trigger,
    "token_exchange": transfer.token_exchange,
    "chunked_upload": transfer.chunked_upload,  # set by an overlay's `chunked_upload` on a REST action
    "live_channel": live_channel,
    "websocket_capture": websocket_capture,
    "exec": exec_command,
}


__all__ = ["HANDLERS", "Context", "Handler", "require_client", "rest"]
