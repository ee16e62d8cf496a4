"""The confirmation protocol of a destructive call on the MCP wire, in both protocol eras.

What is asked is the dispatcher's (call/dispatch.py `question`, call/confirm.py): this
module carries the question to the person and the answer back.

    legacy       the server asks over the session's back-channel (elicitation/create) while
                 the call waits, when the client declared elicitation and the session can
                 send requests (stdio, stateful HTTP); otherwise nobody can be asked and the
                 dispatcher refuses with the question in the text
    2026-07-28   the call answers an input-required result (the question as one form
                 request under CONFIRM_KEY) with a request state the SDK's
                 RequestStateBoundary seals and binds to the tool (and in HTTP mode to the
                 key); the client's retry carries the answer in inputResponses and that
                 state, which must be the one minted for this tool

Either way the answer is "accept" (the form's confirm: true), "decline" (accepted with
confirm false, or declined) or "cancel" (cancelled, or the back-channel failed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server import ServerRequestContext

from ..text.render import ToolResult

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm", "description": "Yes, do it"}},
    "required": ["confirm"],
}
CONFIRM_KEY = "confirm"


def answer_of(result: Any) -> str:
    """accept (with confirm: true) -> "accept"; accept with confirm false -> "decline"."""
    action = getattr(result, "action", None) or (result.get("action") if isinstance(result, dict) else None)
    content = getattr(result, "content", None) if not isinstance(result, dict) else result.get("content")
    if action == "accept":
        return "accept" if (content or {}).get("confirm") is True else "decline"
    return str(action or "cancel")


def state_for(tool: str) -> str:
    """The request state of a round (the SDK's RequestStateBoundary seals it and binds it
    to the tool and its arguments)."""
    return f"arcane-mcp/confirm/v1/{tool}"


def can_elicit(ctx: ServerRequestContext) -> bool:
    """Whether the client declared the elicitation capability."""
    caps = ctx.session.client_capabilities
    return caps is not None and getattr(caps, "elicitation", None) is not None


def legacy_asker(ctx: ServerRequestContext) -> Callable[[str], Awaitable[str]]:
    """Ask over the back-channel and wait for the answer (legacy era)."""
    async def elicit(question: str) -> str:
        try:
            result = await ctx.session.elicit_form(question, CONFIRM_SCHEMA, related_request_id=ctx.request_id)
        except MCPError:
            return "cancel"
        return answer_of(result)

    return elicit


def call_extras(ctx: ServerRequestContext, params: types.CallToolRequestParams, modern: bool) -> dict[str, Any]:
    """What the dispatcher's Call gets for this request: the answer a 2026-07-28 retry
    carries (its state checked), whether the client can be sent an input request, or the
    legacy back-channel asker; nothing when nobody can be asked."""
    responses = params.input_responses or {}
    if modern and CONFIRM_KEY in responses:
        # the boundary has verified the seal; it must also be the state we minted
        if params.request_state != state_for(params.name):
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid or missing requestState for this confirmation",
                           data={"tool": params.name})
        return {"answer": answer_of(responses[CONFIRM_KEY])}
    if modern:
        return {"can_request_input": can_elicit(ctx)}
    if can_elicit(ctx) and ctx.session.can_send_request:
        return {"elicit": legacy_asker(ctx)}
    return {}


def input_required(result: ToolResult, tool: str) -> types.InputRequiredResult | None:
    """The 2026-07-28 input request of a result that asks (ToolResult.ask), else None."""
    if result.ask is None:
        return None
    return types.InputRequiredResult(
        input_requests={CONFIRM_KEY: types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=result.ask, requested_schema=CONFIRM_SCHEMA))},
        request_state=state_for(tool))


__all__ = ["CONFIRM_KEY", "CONFIRM_SCHEMA", "answer_of", "call_extras", "can_elicit", "input_required", "legacy_asker", "state_for"]
