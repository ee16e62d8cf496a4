"""The handler kinds: how one action is carried out once the dispatcher has validated,
confirmed and resolved it (its last step). Each kind is one function named in the registry
of kinds (kinds.py) under the word the catalog uses (`handler:` in catalog/extra-routes.yaml;
"rest" for every operation of Arcane's OpenAPI document), so a new route of a known kind is
data only, and a new kind is one entry there.

A handler gets the dispatch context (client, catalog, renderer, settings), the action, the
validated arguments, the namer of the calling surface and the Reading (caps, progress and
stream state); it answers the ToolResult the model sees. Errors are CallErrors: the
dispatcher renders them, audits them and applies the action deadline around the handler.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import kinds
from .context import Context, Handler, require_client, rest

if TYPE_CHECKING:
    from ..build.catalog import Action
    from ..front.names import Namer
    from ..text.render import ToolResult
    from .response import Reading


def _function(ref: str) -> Handler:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def _on_first_call(ref: str) -> Handler:
    """A handler whose module (and its libraries: the WebSocket kinds import websockets) is
    imported on its first call: a server start, and every call of another kind, never needs it."""

    async def handler(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
        return await _function(ref)(ctx, action, args, namer, reading)

    handler.__qualname__ = handler.__name__ = ref.partition(":")[2]
    handler.__doc__ = f"{ref}, imported on its first call."
    return handler


def handlers() -> dict[str, Handler]:
    """Every kind of the registry that names a handler, keyed by the catalog's word; a route of
    a kind missing here is "pending"."""
    return {k.name: _on_first_call(k.handler) if k.lazy else _function(k.handler) for k in kinds.KINDS if k.handler is not None}


#: The handlers of the registry's kinds, made once (dispatch looks an action's kind up here).
HANDLERS: dict[str, Handler] = handlers()


__all__ = ["HANDLERS", "Context", "Handler", "handlers", "require_client", "rest"]
