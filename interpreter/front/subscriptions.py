"""Resource subscriptions over Arcane's live channel: a client that subscribes to a
Docker-state resource (`resources/subscribe` on the legacy protocol, `subscriptions/listen`
on 2026-07-28) gets `notifications/resources/updated` when a line of GET /stream changes
it, as rules/resources.yaml `updates` says.

    Hub         one upstream connection per credential (one per dispatcher: its client is
                one credential), opened when the first listener comes and closed when the
                last one leaves; shared by every listener of that credential; bounded
                (catalog/conventions.yaml `live.subscriptions`: listeners at most, a
                doubling wait between reconnects)
    mcp_handlers the SDK's handlers of both eras (serve.build_server passes them)

The hub reads the channels the update rules name and applies each rule to each line:
`when` selects it, `bind` gives the URI variables it is about, `changed` keeps a line that
only repeats the previous state from counting. A subscribed URI is updated when its
resource's template is one of the rule's `uris` and each bound variable has the line's
value. No per-channel or per-resource Python: those are all data. Nothing of a line
reaches the client but the subscribed URI itself (the client reads it again).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated

from ..build.lazy_dataclass import dataclass
from ..build.resource_rules import DataResource, UpdateRule
from ..call.live import asked_channels, channel_request, lines_of
from ..call.reader import send
from ..errors import CallError, SubscriptionRefused

log = logging.getLogger("arcane_mcp.subscriptions")

Notify = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Listener:
    uri: str
    resource: DataResource
    values: dict
    notify: Notify


class Hub:
    """The live channel of one credential, shared by the subscriptions of its clients."""

    def __init__(self, dispatcher, data: tuple[DataResource, ...], rules: tuple[UpdateRule, ...]):
        self.dispatcher = dispatcher
        self.live = dispatcher.catalog.conventions.live
        self.data = data
        self.rules = rules
        self.action = next((a for a in dispatcher.catalog.actions.values() if a.response_kind == "live_channel" and not a.pending), None)
        self.listeners: dict[int, Listener] = {}
        self._next = 0
        self._task: asyncio.Task | None = None
        self._seen: dict[tuple, str] = {}  # (rule, bindings) -> fingerprint of `changed`
        self.connections = 0  # upstream connections opened (tests and the log read it)

    @property
    def available(self) -> bool:
        return bool(self.rules) and self.action is not None and self.live is not None and self.dispatcher.client is not None

    def resource_of(self, uri: str) -> tuple[DataResource, dict] | None:
        for r in self.data:
            values = r.match(uri)
            if values is not None:
                return r, values
        return None

    def add(self, uri: str, notify: Notify) -> int:
        """Hold a subscription; answers its token. Opens the upstream connection when it
        is the first one. Raises SubscriptionRefused."""
        if not self.available:
            raise SubscriptionRefused("unavailable", "this server cannot follow Arcane's changes (no live channel or no Arcane configured)")
        hit = self.resource_of(uri)
        if hit is None:
            raise SubscriptionRefused("unknown_uri", f"no Docker-state resource has the URI {uri!r}")
        if len(self.listeners) >= self.live.max_listeners:
            raise SubscriptionRefused("too_many", f"this server holds at most {self.live.max_listeners} subscriptions; unsubscribe from one first")
        self._next += 1
        self.listeners[self._next] = Listener(uri, hit[0], hit[1], notify)
        if self._task is None or self._task.done():
            self._seen.clear()
            self._task = asyncio.ensure_future(self._run())
        return self._next

    def remove(self, token: int) -> None:
        """Drop a subscription; the upstream connection closes with the last one."""
        self.listeners.pop(token, None)
        if not self.listeners and self._task is not None:
            self._task.cancel()
            self._task = None

    def close(self) -> None:
        self.listeners.clear()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    @property
    def open(self) -> bool:
        return self._task is not None and not self._task.done()

    # ------------------------------------------------------------ the upstream connection

    async def _run(self) -> None:
        wait = self.live.reconnect_first
        channels = list(dict.fromkeys(r.channel for r in self.rules))
        args = {self.live.channels_argument: ",".join(channels)}
        client = self.dispatcher.client
        while self.listeners:
            got_line = False
            try:
                resp = await send(client, self.action, channel_request(self.action, self.live, args, asked_channels(self.live, args)))
                self.connections += 1
                try:
                    if resp.status_code >= 400:
                        raise CallError(f"Arcane answered HTTP {resp.status_code} to the live channel", None)
                    async for raw in lines_of(resp, self.dispatcher.catalog.conventions.framings):
                        got_line = True
                        await self._line(raw)
                finally:
                    await resp.aclose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: wait, then reconnect (bounded below)
                log.info("live channel for subscriptions broke (%s); reconnecting in %.1fs", type(exc).__name__, wait)
            if got_line:
                wait = self.live.reconnect_first  # it worked for a while: start over
            await asyncio.sleep(wait)
            wait = min(wait * 2, self.live.reconnect_max)

    async def _line(self, raw: bytes | dict | None) -> None:
        if raw is None or (isinstance(raw, bytes) and not raw.strip()):
            return
        try:
            frame = raw if isinstance(raw, dict) else json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return
        if not isinstance(frame, dict) or self.live.is_heartbeat(frame):
            return
        channel = self.live.channel_of(frame)
        targets: dict[tuple[int, str], Listener] = {}
        for i, rule in enumerate(self.rules):
            if rule.channel != channel or rule.when.search(frame) is not True:
                continue
            bound = {name: expr.search(frame) for name, expr in rule.bind}
            if rule.changed is not None:
                key = (i, tuple(sorted((k, str(v)) for k, v in bound.items())))
                mark = hashlib.sha256(json.dumps(rule.changed.search(frame), sort_keys=True, default=str).encode()).hexdigest()
                previous = self._seen.get(key)
                self._seen[key] = mark
                if previous is None or previous == mark:
                    continue  # the baseline, or the same state again
            for listener in self.listeners.values():
                if listener.resource.uri in rule.uris and all(
                        name not in listener.values or str(value) == listener.values[name] for name, value in bound.items()):
                    targets[(id(listener.notify), listener.uri)] = listener
        for listener in targets.values():  # one notification per client and URI, whatever matched
            try:
                await listener.notify(listener.uri)
            except Exception:  # a client that went away: drop its subscription
                log.debug("resource update could not be sent; dropping the subscription", exc_info=True)
                for token in [t for t, lst in self.listeners.items() if lst.notify is listener.notify]:
                    self.remove(token)


def for_resources(served) -> Hub:
    """The hub of a server's resources (resources.Resources): its dispatcher's credential."""
    return Hub(served.dispatcher, served.data, served.rules.updates)


def mcp_handlers(hub: Hub) -> dict[str, Any]:
    """`on_subscribe_resource` / `on_unsubscribe_resource` (legacy; passing them declares
    `resources.subscribe`) and `on_subscriptions_listen` (2026-07-28: the SDK's listen
    handler, with the stream's resource URIs held on the hub while it is open). None when
    the rules declare no updates."""
    if not hub.rules:
        return {}
    bus = InMemorySubscriptionBus()
    inner = ListenHandler(bus, max_subscriptions=hub.live.max_listeners if hub.live is not None else 64)
    legacy: dict[tuple[int, str], int] = {}  # (session, uri) -> token

    async def publish(uri: str) -> None:
        await bus.publish(ResourceUpdated(uri=uri))

    def refused(exc: SubscriptionRefused, uri: str) -> MCPError:
        code = types.INVALID_PARAMS if exc.code == "unknown_uri" else types.INTERNAL_ERROR
        return MCPError(code=code, message=f"Error: {exc.message}", data={"uri": uri, "reason": exc.code})

    async def on_subscribe(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        key = (id(ctx.session), uri)
        if key not in legacy:
            session = ctx.session

            async def notify(u: str) -> None:
                await session.send_resource_updated(u)

            try:
                legacy[key] = hub.add(uri, notify)
            except SubscriptionRefused as exc:
                raise refused(exc, uri) from None
        return types.EmptyResult()

    async def on_unsubscribe(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        token = legacy.pop((id(ctx.session), str(params.uri)), None)
        if token is not None:
            hub.remove(token)
        return types.EmptyResult()

    async def on_listen(ctx, params):
        tokens = []
        try:
            for uri in (params.notifications.resource_subscriptions or ()):
                try:
                    tokens.append(hub.add(str(uri), publish))
                except SubscriptionRefused as exc:
                    raise refused(exc, str(uri)) from None
            return await inner(ctx, params)
        finally:
            for token in tokens:
                hub.remove(token)

    return {"on_subscribe_resource": on_subscribe, "on_unsubscribe_resource": on_unsubscribe, "on_subscriptions_listen": on_listen}


__all__ = ["Hub", "Listener", "SubscriptionRefused", "for_resources", "mcp_handlers"]
