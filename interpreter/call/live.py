"""The live channel (GET /stream): Arcane's never-ending feed of the `environments`,
`dashboard` and `activities` channels (and any channel a newer Arcane adds), as the `live`
section of catalog/conventions.yaml declares its frames; JSON lines or server-sent events,
as `framings` gives its Content-Type (framing.py).

    LiveRules       the declared frames (channel, heartbeat, type, environment, timestamp),
                    the capture bounds and their argument names, what the result keeps of
                    each channel, the subscription bounds; compiled once (compile.py)
    Capture         one bounded read: every line counted per channel, heartbeats counted
                    apart, the newest `keep` lines of each channel described
    live_channel    the handler kind (handlers.HANDLERS): stream.watch captures for a
                    bounded time or count and answers a per-channel summary
    open_channel    the request of one connection, shared by the resource subscriptions
                    (subscriptions.py)

Nothing here knows a channel or a member name: they are all data. Every value read from
the channel is untrusted text: the summary is structured data rendered by the renderer,
whose escaping applies, and a line that is not a JSON object is counted as malformed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..build.lazy_dataclass import dataclass
from ..build.model import LiveRules
from ..errors import ArcaneTimeout, ArcaneUnreachable
from ..text.render import with_notes
from .context import require_client
from .framing import NDJSON, Framings, frames
from .reader import send
from .request import prepare
from .response import Shaped, raise_for_status

if TYPE_CHECKING:
    import httpx

    from ..build.catalog import Action
    from ..front.names import Namer
    from ..text.render import ToolResult
    from .context import Context
    from .response import Reading

LINE_CAP = 4 * 1024 * 1024  # bytes of one line: a dashboard snapshot is large, never this large
MARGIN = 1.0  # seconds a capture leaves of the action deadline, for rendering the result
_LINES = Framings(types={}, events={})  # JSON lines only: no named events


# ---------------------------------------------------------------- one capture


@dataclass
class ChannelSummary:
    lines: int = 0
    types: dict[str, int] = field(default_factory=dict)
    environments: list[str] = field(default_factory=list)
    first: str | None = None
    last: str | None = None
    newest: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"lines": self.lines, "types": dict(sorted(self.types.items()))}
        if self.environments:
            out["environments"] = list(self.environments)
        if self.first:
            out["firstTimestamp"], out["lastTimestamp"] = self.first, self.last
        out["newest"] = list(self.newest)
        return out


@dataclass
class Capture:
    """What a bounded read of the live channel saw."""

    rules: LiveRules
    channels: dict[str, ChannelSummary] = field(default_factory=dict)
    lines: int = 0  # every line, heartbeats included
    heartbeats: int = 0
    malformed: int = 0
    ended: str = "seconds"  # which bound ended it: seconds | lines | closed | broken

    def take(self, raw: bytes | dict | None) -> dict | None:
        """One line (or an event's frame); answers its frame when it is a channel line (not
        a heartbeat)."""
        if raw is None or (isinstance(raw, bytes) and not raw.strip()):
            return None
        self.lines += 1
        if isinstance(raw, dict):
            frame: Any = raw
        else:
            try:
                frame = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self.malformed += 1
                return None
        if not isinstance(frame, dict):
            self.malformed += 1
            return None
        if self.rules.is_heartbeat(frame):
            self.heartbeats += 1
            return None
        name = self.rules.channel_of(frame)
        if name is None:
            self.malformed += 1
            return None
        s = self.channels.setdefault(name, ChannelSummary())
        s.lines += 1
        kind = self.rules.type_of(frame) or "unknown"
        s.types[kind] = s.types.get(kind, 0) + 1
        env = self.rules.environment_of(frame)
        if env is not None and env not in s.environments:
            s.environments.append(env)
        stamp = self.rules.timestamp_of(frame)
        if stamp:
            s.first = s.first or stamp
            s.last = stamp
        if self.rules.keep:
            s.newest.append(self.rules.described(name, frame))
            del s.newest[: -self.rules.keep]
        return frame

    def structured(self, asked: list[str], seconds: float, max_lines: int) -> dict:
        out = {"channels": {name: self.channels[name].as_dict() if name in self.channels else ChannelSummary().as_dict()
                            for name in dict.fromkeys([*asked, *self.channels])},
               "lines": self.lines, "heartbeats": self.heartbeats, "endedBy": self.ended,
               "bounds": {self.rules.seconds.argument: seconds, self.rules.lines.argument: max_lines}}
        if self.malformed:
            out["malformedLines"] = self.malformed
        return out


def asked_channels(rules: LiveRules, args: Mapping[str, Any]) -> list[str]:
    """The channels a call names (comma-separated, as Arcane parses them), else the default."""
    text = args.get(rules.channels_argument)
    names = [n.strip().lower() for n in str(text).split(",")] if isinstance(text, str) else []
    names = [n for n in dict.fromkeys(names) if n]
    return names or list(rules.channels)


async def lines_of(resp: httpx.Response, framings: Framings | None = None) -> AsyncIterator[bytes | dict | None]:
    """The frames of the live channel, in the framing its Content-Type declares
    (catalog/conventions.yaml `framings`; an undeclared type is a protocol error): a JSON
    line's bytes or an event's frame. A line or an event over LINE_CAP is a protocol error.
    Without `framings`, JSON lines (the framing every Arcane read so far serves)."""
    framing = framings.require(resp.headers.get("content-type"), "the live channel", resp.status_code) if framings else NDJSON
    async with aclosing(frames(resp, framings or _LINES, framing, LINE_CAP)) as stream:
        async for frame in stream:
            yield frame


def channel_request(action: Action, rules: LiveRules, args: Mapping[str, Any], channels: list[str]):
    """The request of one connection: the bounds' arguments left out, the channels filled in."""
    sent = {k: v for k, v in args.items() if k not in rules.bound_arguments()}
    sent[rules.channels_argument] = ",".join(channels)
    return prepare(action, sent)


async def live_channel(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """Capture the live channel for a bounded time or count; answer a per-channel summary."""
    rules: LiveRules = ctx.catalog.conventions.live
    client = require_client(ctx)
    seconds = min(rules.seconds.of(args), max(ctx.settings.action_timeout - MARGIN, MARGIN))
    max_lines = int(rules.lines.of(args))
    channels = asked_channels(rules, args)
    capture = Capture(rules)
    resp = await send(client, action, channel_request(action, rules, args, channels))
    notes: list[str] = []
    try:
        await raise_for_status(resp, ctx.catalog.conventions.error_shapes)
        deadline = time.monotonic() + seconds

        async def read() -> None:
            async with aclosing(lines_of(resp, ctx.catalog.conventions.framings)) as lines:
                async for raw in lines:
                    capture.take(raw)
                    if capture.lines >= max_lines:
                        capture.ended = "lines"
                        return
            capture.ended = "closed"

        try:
            await asyncio.wait_for(read(), timeout=max(deadline - time.monotonic(), 0))
        except TimeoutError:
            capture.ended = "seconds"
        except (ArcaneUnreachable, ArcaneTimeout):
            capture.ended = "broken"
            notes.append("the connection to Arcane broke during the capture; the summary covers what came before")
    finally:
        await resp.aclose()
    shaped = Shaped("object", capture.structured(channels, seconds, max_lines), resp.status_code, notes=notes)
    result = ctx.renderer.success(action, shaped, namer, args, safe_mode=ctx.settings.safe_mode)
    if notes:
        result = with_notes(result, notes)
    return result


__all__ = ["Capture", "LiveRules", "asked_channels", "channel_request", "lines_of", "live_channel"]
