"""Resumable SSE streams in HTTP mode (stateful, the handshake era): the SDK transport's
`EventStore`, bounded and kept in memory, one per key's server (httpmode's `Pool._start`).

Every message the transport sends on an SSE stream is stored with an event ID, which the
event carries (`id:`); a POST's stream starts with a priming event (an ID, empty data and
the `retry:` hint of ARCANE_MCP_SSE_RETRY_MS). A client whose stream broke sends a GET with
`Last-Event-ID` and gets the events it missed, then the rest of the stream as it comes.

What is kept, and for how long:

    IDs        random (`secrets.token_urlsafe`, 128 bits): unguessable, and derived from
               nothing (no key, session or counter can be read from one)
    sessions   the transport names a stream by the request's id (or its GET stream), the
               same names in every session; the store keeps each session's streams apart
               (a namespace per session, `Resumable`), so a replay never crosses sessions,
               and a store per key means it never crosses keys
    bounds     ARCANE_MCP_EVENT_STORE_EVENTS events and ARCANE_MCP_EVENT_STORE_BYTES bytes
               (an event's JSON plus OVERHEAD), the oldest evicted first; one stream holds
               at most 1/STREAM_SHARE of either, beyond which its own oldest go, so one
               long stream cannot evict the others; events older than
               ARCANE_MCP_EVENT_STORE_TTL are dropped
    too large  an event larger than a stream's share is not kept, and the stream's events
               before it are dropped with it: a replay never skips an event silently (an
               ID from before the gap is unknown; one from after it replays in full)
    finished   a stream whose response was stored is finished: a replay sends what follows
               the ID and ends, instead of waiting for more

A `Last-Event-ID` this store does not hold for the session (evicted, expired, another
session's or another key's, forged) is 404 with a JSON-RPC error, the same for each (no
answer tells an ID of another session from none); one not of the form the store issues is
400. An empty one is no ID (the SDK then opens the session's GET stream). The store is per
process: a reconnect that reaches another replica finds nothing to replay (404).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter
from mcp_types.version import is_version_at_least

from ..build.lazy_dataclass import dataclass
from ..config import Settings

log = logging.getLogger("arcane_mcp.http")

EVENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # the form of the IDs issued (22 characters), with room
OVERHEAD = 160  # bytes counted for an event besides its JSON: its ID, stream and bookkeeping
STREAM_SHARE = 4  # one stream holds at most a quarter of the store's events and of its bytes
SESSIONS_KEPT = 10_000  # sessions whose namespace is remembered (the SDK's default session limit)
RESUMABLE_SINCE = "2025-11-25"  # the first revision whose clients read a priming event (the SDK's own test)


# The namespace (one per session) of the request being served. The SDK stores a session's
# messages from a task started by the request that opened the session, which inherits it.
NAMESPACE: ContextVar[str | None] = ContextVar("arcane_mcp_event_namespace", default=None)


def new_namespace() -> str:
    return secrets.token_hex(8)


@dataclass(eq=False)
class _Event:
    id: str
    key: tuple[str, str]  # (namespace, stream)
    data: bytes | None  # the message's JSON; None for a priming event
    size: int
    at: float


@dataclass(eq=False)
class _Stream:
    ids: deque
    size: int = 0
    finished: bool = False


class BoundedEventStore(EventStore):
    """The events of one key's server (see the module's docstring)."""

    def __init__(self, max_events: int, max_bytes: int, ttl: float, clock: Callable[[], float] = time.monotonic):
        self.max_events, self.max_bytes, self.ttl, self.clock = max_events, max_bytes, ttl, clock
        self.stream_events = max(1, max_events // STREAM_SHARE)
        self.stream_bytes = max(1, max_bytes // STREAM_SHARE)
        self.events: OrderedDict[str, _Event] = OrderedDict()  # oldest first
        self.streams: dict[tuple[str, str], _Stream] = {}
        self.sessions: OrderedDict[str, str] = OrderedDict()  # session ID -> namespace
        self.size = 0
        self.stored = self.evicted = self.expired = self.dropped = self.replayed = 0

    def stats(self) -> dict:
        return {"events": len(self.events), "bytes": self.size, "max_events": self.max_events, "max_bytes": self.max_bytes,
                "streams": len(self.streams), "stored": self.stored, "evicted": self.evicted, "expired": self.expired,
                "dropped": self.dropped, "replayed": self.replayed}

    # ------------------------------------------------------------ sessions

    def namespace(self, session: str | None) -> str | None:
        """The namespace of a session (the least recently used are forgotten first)."""
        namespace = self.sessions.get(session) if session else None
        if namespace is not None:
            self.sessions.move_to_end(session)
        return namespace

    def bind(self, session: str, namespace: str) -> None:
        self.sessions[session] = namespace
        self.sessions.move_to_end(session)
        while len(self.sessions) > SESSIONS_KEPT:
            _, gone = self.sessions.popitem(last=False)
            self._drop_namespace(gone)

    def forget(self, session: str | None) -> None:
        """A session ended (DELETE): its events go with it."""
        namespace = self.sessions.pop(session or "", None)
        if namespace is not None:
            self._drop_namespace(namespace)

    def _drop_namespace(self, namespace: str) -> None:
        for key in [k for k in self.streams if k[0] == namespace]:
            self._drop_stream(key)

    # ------------------------------------------------------------ the SDK's EventStore

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        return self.put(_current(), stream_id, message)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """The events after `last_event_id` in its stream, when the request's session holds
        it; the stream's name, for the SDK to go on with it, unless it is finished (None:
        the SDK then ends the replay), or nothing was found (None as well)."""
        found = self.after(_current(), last_event_id)
        if found is None:
            return None
        stream, data, finished = found
        for event_id, raw in data:
            self.replayed += 1
            await send_callback(EventMessage(jsonrpc_message_adapter.validate_json(raw, by_name=False), event_id))
        return None if finished else stream

    # ------------------------------------------------------------ the store itself

    def put(self, namespace: str, stream_id: str, message: JSONRPCMessage | None) -> str:
        """Store one event; its new ID (issued even when the event cannot be kept)."""
        now = self.clock()
        self._expire(now)
        event_id = secrets.token_urlsafe(16)
        key = (namespace, stream_id)
        stream = self.streams.get(key)
        if stream is not None and stream.finished:  # a request id used again: a new stream
            self._drop_stream(key)
            stream = None
        if stream is None:
            stream = self.streams[key] = _Stream(deque())
        data = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        size = OVERHEAD + (len(data) if data is not None else 0)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            stream.finished = True
        if size > self.stream_bytes:
            # kept without it, the stream would replay with a gap: the events before it go
            self.dropped += 1
            self._drop_stream(key)
            return event_id
        self.events[event_id] = _Event(event_id, key, data, size, now)
        stream.ids.append(event_id)
        stream.size += size
        self.size += size
        self.stored += 1
        while len(stream.ids) > self.stream_events or stream.size > self.stream_bytes:
            self._evict(stream.ids[0])
        while len(self.events) > self.max_events or self.size > self.max_bytes:
            self._evict(next(iter(self.events)))
        return event_id

    def knows(self, namespace: str | None, event_id: str) -> bool:
        """Whether `event_id` is held, for this namespace (a session's)."""
        self._expire(self.clock())
        event = self.events.get(event_id)
        return event is not None and namespace is not None and event.key[0] == namespace

    def after(self, namespace: str | None, event_id: str) -> tuple[str, list[tuple[str, bytes]], bool] | None:
        """The stream of `event_id` (when this namespace holds it), the events after it that
        carry a message (ID, JSON), and whether the stream is finished."""
        if not self.knows(namespace, event_id):
            return None
        key = self.events[event_id].key
        stream = self.streams[key]
        ids = list(stream.ids)
        later = [self.events[i] for i in ids[ids.index(event_id) + 1:]]
        return key[1], [(e.id, e.data) for e in later if e.data is not None], stream.finished

    def _expire(self, now: float) -> None:
        while self.events:
            oldest = next(iter(self.events.values()))
            if now - oldest.at <= self.ttl:
                return
            self.expired += 1
            self._remove(oldest.id)

    def _evict(self, event_id: str) -> None:
        self.evicted += 1
        self._remove(event_id)

    def _remove(self, event_id: str) -> None:
        event = self.events.pop(event_id, None)
        if event is None:
            return
        self.size -= event.size
        stream = self.streams.get(event.key)
        if stream is None:
            return
        if stream.ids and stream.ids[0] == event_id:  # the oldest of its stream: the usual case
            stream.ids.popleft()
        else:
            stream.ids.remove(event_id)
        stream.size -= event.size
        if not stream.ids:
            del self.streams[event.key]

    def _drop_stream(self, key: tuple[str, str]) -> None:
        stream = self.streams.pop(key, None)
        for event_id in list(stream.ids) if stream is not None else ():
            event = self.events.pop(event_id, None)
            if event is not None:
                self.size -= event.size


def _current() -> str:
    """The namespace of the session being served; outside one (nothing the SDK does in
    stateful mode), a namespace of its own: the event is then never replayed."""
    return NAMESPACE.get() or new_namespace()


def store_for(settings: Settings) -> BoundedEventStore | None:
    """A key's server's store; None in stateless mode (no session: no stream to resume)."""
    if not settings.http_stateful:
        return None
    return BoundedEventStore(settings.event_store_events, settings.event_store_bytes, settings.event_store_ttl)


# ---------------------------------------------------------------- in front of the SDK's app


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers") or ():
        if k.lower() == name:
            return v.decode("latin-1")
    return None


#: answers a refused Last-Event-ID: (send, HTTP status, reason) -> the refusal's JSON-RPC body,
#: its text rules/server.yaml `http.refusals` by reason (httpmode.py's Refusals)
Refuse = Callable[[Any, int, str], Any]


class Resumable:
    """A key's server's SDK app (stateful) with its event store: each request is served in
    its session's namespace (a new one for the request that opens a session, bound to the
    session ID its answer carries); a `Last-Event-ID` the session does not hold is refused
    here (the SDK would answer an empty stream, which its own client reconnects to forever);
    the session's GET stream starts with the `retry:` hint (the SDK sends one only in a
    priming event, which a GET stream does not get); a DELETE drops the session's events."""

    def __init__(self, app: Any, store: BoundedEventStore, retry_ms: int, refuse: Refuse):
        self.app, self.store, self.retry_ms, self.refuse = app, store, retry_ms, refuse

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        method, session = scope.get("method"), _header(scope, b"mcp-session-id")
        namespace = self.store.namespace(session)
        opening = namespace is None and session is None
        namespace = namespace or new_namespace()
        last = (_header(scope, b"last-event-id") or "") if method == "GET" else ""
        if last and session is not None:
            if not EVENT_ID.fullmatch(last):
                await self.refuse(send, 400, "bad_event_id")
                return
            if not self.store.knows(namespace, last):
                await self.refuse(send, 404, "unknown_event_id")
                return
        version = _header(scope, b"mcp-protocol-version") or ""
        # a client of an older revision may not read an event without data (the SDK's own caution)
        hint = method == "GET" and not last and bool(version) and is_version_at_least(version, RESUMABLE_SINCE)
        token = NAMESPACE.set(namespace)
        try:
            await self.app(scope, receive, self._watch(send, method, session, namespace if opening else None, hint))
        finally:
            NAMESPACE.reset(token)

    def _watch(self, send, method: str, session: str | None, opening: str | None, hint: bool):
        async def watched(message: dict) -> None:
            if message["type"] != "http.response.start":
                await send(message)
                return
            status = message.get("status", 200)
            given = next((v.decode("latin-1") for k, v in message.get("headers", ()) if k.lower() == b"mcp-session-id"), None)
            if opening is not None and given and status < 400:
                self.store.bind(given, opening)
            if method == "DELETE" and status < 300:
                self.store.forget(session)
            await send(message)
            sse = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream") for k, v in message.get("headers", ()))
            if hint and status == 200 and sse:
                await send({"type": "http.response.body", "body": f"retry: {self.retry_ms}\n\n".encode(), "more_body": True})
        return watched


__all__ = ["BoundedEventStore", "Resumable", "store_for"]
