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
    given = _filters_given(action, args)
    sent = args
    limit = ctx.catalog.conventions.pagination.limit if ctx.catalog.conventions.pagination else None
    if given and limit and limit in action.input_schema.get("properties", {}) and limit not in args:
        sent = {**args, limit: action.client_filters.fetch_limit}  # the filter sees this many items
    resp = await send(ctx.client, action, prepare(action, sent))
    shaped = await shape(resp, action, reading)
    if shaped.failed:
        activity = reading.state.activity
        msg = f"{namer(action.id)} failed: {shaped.failed}"
        if activity:
            msg += f" (activity {activity})"
        raise StreamFailed(msg, "Read the error above; fix its cause and retry.", status=shaped.http_status, activity=activity)
    note = _apply_filters(ctx, action, given, shaped, sent.get(limit) if limit else None) if given else None
    result = ctx.renderer.success(action, shaped, namer, args, safe_mode=ctx.settings.safe_mode)
    if note:
        result.note([note])
    return result


def _filters_given(action: Action, args: dict[str, Any]) -> dict[str, Any]:
    """The overlay's client filters the call gave a value for."""
    filters = action.client_filters
    return {f.name: args[f.name] for f in filters.params if args.get(f.name) not in (None, "")} if filters else {}


def _apply_filters(ctx: Context, action: Action, given: dict[str, Any], shaped, limit: Any) -> str | None:
    """Keep the fetched items each given filter matches (its JMESPath over the item equals
    the value); the note says what was filtered here and out of how many fetched."""
    key = ctx.catalog.conventions.envelope.items
    items = shaped.structured.get(key) if shaped.kind == "list" and isinstance(shaped.structured, dict) else None
    if not isinstance(items, list):
        return None
    specs = {f.name: f for f in action.client_filters.params}
    kept = [it for it in items if isinstance(it, dict)
            and all(specs[n].value is not None and _matches(specs[n].value, it, v) for n, v in given.items())]
    shaped.structured[key] = kept
    by = ", ".join(f"{n}={v}" for n, v in given.items())
    page = "all items Arcane holds" if str(limit) == "-1" else f"the {len(items)} fetched (a page of at most {limit}; start pages on)"
    return f"filtered here by {by} (Arcane cannot filter by it): {len(kept)} of {page}."


def _matches(expr, item: Any, value: Any) -> bool:
    try:
        return expr.compiled.search(item) == value
    except Exception:  # noqa: BLE001 - an item of another shape (Arcane's data is untrusted) does not match
        return False


# the kinds in their own modules, which use Context and require_client above

__all__ = ["Context", "Handler", "require_client", "rest"]
