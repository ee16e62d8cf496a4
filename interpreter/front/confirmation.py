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

A 2026-07-28 round is single-use. The state this module mints (`state_for`) names the
tool, a random nonce, its own expiry (ARCANE_MCP_CONFIRM_EXPIRY, also the seal's) and a
digest of the call's arguments; the boundary seals it. The retry that answers it is
refused, with a stable code (REFUSALS, JSON-RPC -32602 with `data.reason`), when the round
expired, when its arguments differ from those the user was asked about, or when the same
state was answered before (accepted, declined or cancelled: a decline is final). Answered
nonces are kept in a bounded store per process (UsedSeals): a replica that did not see the
first answer does not know it (docs/http.md says what that allows and how to close it).
`early_refusals`, a middleware outside the boundary, gives those codes before the
boundary's own checks (whose refusal of a changed request is one frozen code); the
handler's `call_extras` checks again and uses the nonce, with no await in between.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server import ServerRequestContext

from ..build.lazy_dataclass import dataclass
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


STATE_PREFIX = "arcane-mcp/confirm/v2/"
STATE_WIRE_MAX = 8192  # a sealed state longer than this is none of ours: left to the boundary to refuse
SEALS_MAX = 4096  # answered rounds remembered per process (each entry: a nonce and its expiry)

# The refusals of an answered round: code -> (message, next step). Sent as JSON-RPC -32602
# with data {"reason": code, "tool", "next"}. A seal the boundary cannot open (forged,
# garbled, another key's or another secret's) is the SDK's own refusal, -32602 with
# data.reason "invalid_request_state".
REFUSALS: dict[str, tuple[str, str]] = {
    "confirmation_replayed": (
        "this confirmation was already answered; a confirmation round is answered once",
        "Call the tool again without requestState: the user is asked anew."),
    "confirmation_arguments_changed": (
        "the arguments differ from those the user was asked to confirm",
        "Call the tool again without requestState, with the arguments to confirm: the user is asked about them."),
    "confirmation_expired": (
        "this confirmation round expired (ARCANE_MCP_CONFIRM_EXPIRY)",
        "Call the tool again without requestState: the user is asked anew."),
    "confirmation_invalid": (
        "the request state is not a confirmation round of this tool",
        "Call the tool again without requestState: the user is asked anew."),
}


log = logging.getLogger("arcane_mcp")


def refused(code: str, tool: str) -> MCPError:
    """The JSON-RPC error of a refused answer (REFUSALS), said in the server's log too (a
    replay can be someone else's)."""
    message, next_step = REFUSALS[code]
    log.warning("confirmation answer refused on %r: %s", tool[:80], code)
    return MCPError(code=types.INVALID_PARAMS, message=f"{message}. {next_step}",
                    data={"reason": code, "tool": tool, "next": next_step})


def arguments_digest(arguments: Mapping[str, Any] | None) -> str:
    """A digest of a call's arguments (canonical JSON: key order does not matter)."""
    text = json.dumps(dict(arguments or {}), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:18]).decode()


def state_for(tool: str, arguments: Mapping[str, Any] | None, expiry: float, now: float | None = None) -> str:
    """The request state of a new round (the SDK's RequestStateBoundary seals it, and also
    binds the seal to the tool, its arguments and in HTTP mode the key): the tool, a fresh
    nonce, when the round expires, and the digest of the arguments the user is asked about."""
    expires = (time.time() if now is None else now) + expiry
    inner = {"t": tool, "n": secrets.token_urlsafe(16), "e": round(expires, 3), "a": arguments_digest(arguments)}
    return STATE_PREFIX + json.dumps(inner, separators=(",", ":"))


@dataclass(frozen=True)
class Round:
    """A round's state as minted (state_for)."""

    tool: str
    nonce: str
    expires: float
    digest: str


def opened(state: Any) -> Round | None:
    """The round a (boundary-opened) state names, or None when it is not one of ours."""
    if not isinstance(state, str) or not state.startswith(STATE_PREFIX) or len(state) > 2048:
        return None
    try:
        inner = json.loads(state[len(STATE_PREFIX):])
        tool, nonce, expires, digest = inner["t"], inner["n"], inner["e"], inner["a"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(tool, str) and isinstance(nonce, str) and isinstance(digest, str)
            and isinstance(expires, (int, float)) and not isinstance(expires, bool) and expires == expires):
        return None
    return Round(tool, nonce, float(expires), digest)


class UsedSeals:
    """The rounds answered in this process: nonce -> expiry, at most `limit` of them. An
    entry is dropped once its round expired (no later answer can pass the expiry check);
    beyond `limit`, the entry that expires first is dropped and `floor` rises to its
    expiry: every round expiring by then counts as answered (refused, never replayable),
    so many answered rounds cost bounded memory and open no gap."""

    def __init__(self, limit: int = SEALS_MAX, clock: Callable[[], float] = time.time) -> None:
        self.limit, self.clock = limit, clock
        self.floor = 0.0
        self._expiry: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._lock = threading.Lock()  # HTTP mode may serve from more than one thread

    def __len__(self) -> int:
        return len(self._expiry)

    def _purge(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            _, nonce = heapq.heappop(self._heap)
            self._expiry.pop(nonce, None)

    def _seen(self, r: Round) -> bool:
        return r.nonce in self._expiry or r.expires <= self.floor

    def seen(self, r: Round) -> bool:
        with self._lock:
            self._purge(self.clock())
            return self._seen(r)

    def use(self, r: Round) -> bool:
        """Record the round as answered; False when it was answered before."""
        with self._lock:
            self._purge(self.clock())
            if self._seen(r):
                return False
            self._expiry[r.nonce] = r.expires
            heapq.heappush(self._heap, (r.expires, r.nonce))
            while len(self._expiry) > self.limit:
                expires, nonce = heapq.heappop(self._heap)
                self._expiry.pop(nonce, None)
                self.floor = max(self.floor, expires)
            return True


SEALS = UsedSeals()  # per process: every server of this process (HTTP mode: every key's) shares it


def refusal(state: Any, tool: str, arguments: Mapping[str, Any] | None, seals: UsedSeals | None = None,
            now: float | None = None) -> str | None:
    """Why an answer carrying this (opened) state is refused (a REFUSALS code), or None."""
    r = opened(state)
    if r is None or r.tool != tool:
        return "confirmation_invalid"
    if not (time.time() if now is None else now) < r.expires:
        return "confirmation_expired"
    if (SEALS if seals is None else seals).seen(r):
        return "confirmation_replayed"
    if r.digest != arguments_digest(arguments):
        return "confirmation_arguments_changed"
    return None


def consume(state: Any, tool: str, arguments: Mapping[str, Any] | None, seals: UsedSeals | None = None) -> str | None:
    """Check an answer's state (`refusal`) and record its round as answered: None when
    this is its first answer, else the refusal's code."""
    seals = SEALS if seals is None else seals
    code = refusal(state, tool, arguments, seals)
    if code is not None:
        return code
    r = opened(state)
    assert r is not None
    return None if seals.use(r) else "confirmation_replayed"


def early_refusals(codec: Any, seals: UsedSeals | None = None) -> Callable[..., Awaitable[Any]]:
    """A server middleware outside the SDK's RequestStateBoundary: a tools/call whose seal
    opens (`codec`, the boundary's) but names an expired, answered or differently argued
    round is refused with its own code; everything else (a seal that does not open,
    another key's) goes on to the boundary, which refuses it with its frozen code."""
    async def middleware(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        params = ctx.params if ctx.method == "tools/call" else None
        wire = params.get("requestState") if isinstance(params, Mapping) else None
        if isinstance(wire, str) and len(wire) <= STATE_WIRE_MAX and isinstance(params.get("name"), str):
            try:
                inner = json.loads(codec.unseal(wire)).get("s")
            except Exception:  # noqa: BLE001 - not openable: the boundary refuses it
                inner = None
            arguments = params.get("arguments")
            if inner is not None and (arguments is None or isinstance(arguments, Mapping)):
                code = refusal(inner, params["name"], arguments, seals)
                if code is not None and code != "confirmation_invalid":
                    raise refused(code, params["name"])
        return await call_next(ctx)

    return middleware


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
        # the boundary has verified the seal; it must also name a round of this tool, of
        # these arguments, unexpired and not answered before (the round is now answered)
        code = consume(params.request_state, params.name, params.arguments)
        if code is not None:
            raise refused(code, params.name)
        return {"answer": answer_of(responses[CONFIRM_KEY])}
    if modern:
        return {"can_request_input": can_elicit(ctx)}
    if can_elicit(ctx) and ctx.session.can_send_request:
        return {"elicit": legacy_asker(ctx)}
    return {}


def input_required(result: ToolResult, tool: str, arguments: Mapping[str, Any] | None,
                   expiry: float) -> types.InputRequiredResult | None:
    """The 2026-07-28 input request of a result that asks (ToolResult.ask), else None: a
    new round of `tool` with these `arguments`, answerable once within `expiry` seconds."""
    if result.ask is None:
        return None
    return types.InputRequiredResult(
        input_requests={CONFIRM_KEY: types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=result.ask, requested_schema=CONFIRM_SCHEMA))},
        request_state=state_for(tool, arguments, expiry))


__all__ = ["CONFIRM_KEY", "CONFIRM_SCHEMA", "REFUSALS", "SEALS", "SEALS_MAX", "Round", "UsedSeals", "answer_of",
           "arguments_digest", "call_extras", "can_elicit", "consume", "early_refusals", "input_required", "legacy_asker",
           "opened", "refusal", "refused", "state_for"]
