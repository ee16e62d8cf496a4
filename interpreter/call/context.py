"""What a handler kind gets to carry an action out (interpreter/call/handlers.py): the dispatch
context of one catalog + credential, and the REST kind other kinds build on. Apart from
the table, so the kinds' modules import this and the table imports them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..build.lazy_dataclass import dataclass
from ..errors import StreamFailed
from .reader import client_or_error, send
from .request import prepare
from .response import shape

if TYPE_CHECKING:
    from ..build.catalog import Action, Catalog
    from ..config import Settings
    from ..front.names import Namer
    from ..text.render import Renderer, ToolResult
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
    return client_or_error(ctx.client)


async def rest(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """One HTTP request; the response is shaped by the action's response kind."""
    resp = await send(ctx.client, action, prepare(action, args))
    shaped = await shape(resp, action, reading)
    if shaped.failed:
        activity = reading.state.activity
        msg = f"{namer(action.id)} failed: {shaped.failed}"
        if activity:
            msg += f" (activity {activity})"
        raise StreamFailed(msg, "Read the error above; fix its cause and retry.", status=shaped.http_status, activity=activity)
    return ctx.renderer.success(action, shaped, namer, args, safe_mode=ctx.settings.safe_mode)


# the kinds in their own modules, which use Context and require_client above

__all__ = ["Context", "Handler", "require_client", "rest"]
