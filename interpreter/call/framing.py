"""Stream framings: how the body of an operation stream or of the live channel is cut into
frames, chosen by the answer's Content-Type, as catalog/conventions.yaml `framings`
declares it (media type -> framing, and what a server-sent event's fields mean).

    Framings        the compiled section: the media types and their framing, the events
                    whose name says what their data is (compile.py)
    LineDecoder     JSON lines (`ndjson`): one frame per line, CR LF or LF
    EventDecoder    server-sent events (`sse`, the WHATWG event-stream format): `data:`
                    lines joined by LF make one event's data, a blank line dispatches it;
                    `event:` names it, `id:` and `retry:` are read and kept, `:` lines are
                    comments; CR LF, LF and a lone CR all end a line
    frames          the frames of a streaming answer, whatever its framing: raw JSON bytes
                    (parsed by the caller, which counts what is not an object) or a frame
                    an event's name made
    framing_of      the declared framing of a Content-Type, or an ArcaneProtocolError that
                    names the type (an answer nobody declared is never read as "done")

Every bound is the caller's `cap`: a line, or the data of one event, larger than the cap
is a protocol error; an empty event costs nothing and is not a frame. A stream cut in the
middle of an event drops that event (as a browser's EventSource does) and counts it in
`incomplete`. Nothing here knows a member or an event name: they are all data.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..build.lazy_dataclass import dataclass
from ..build.model import Origin, origins_field
from ..errors import ArcaneProtocolError
from .transport import body_chunks

if TYPE_CHECKING:
    import httpx

NDJSON, SSE = "ndjson", "sse"
FRAMINGS = (NDJSON, SSE)
DATA_PLACEHOLDER = "{data}"


@dataclass(frozen=True)
class Framings:
    """conventions.yaml `framings`: media type -> framing, and the named events."""

    types: Mapping[str, str]  # media type (lower case, no parameters) -> ndjson | sse
    events: Mapping[str, Mapping[str, Any]]  # event name -> the frame it makes ({data}: the event's data)
    origins: Mapping[str, Origin] = origins_field()

    def framing_of(self, content_type: str | None) -> str | None:
        media = (content_type or "").split(";", 1)[0].strip().lower()
        return self.types.get(media)

    def require(self, content_type: str | None, what: str, status: int | None = None) -> str:
        """The framing of an answer's Content-Type; an undeclared type is an error that names it."""
        framing = self.framing_of(content_type)
        if framing is None:
            shown = " ".join((content_type or "").split())[:80] or "no Content-Type"
            declared = ", ".join(sorted(self.types))
            raise ArcaneProtocolError(
                f"Arcane answered {what} as {shown!r}, which is not a stream framing this server reads ({declared}): "
                "nothing of it was read as progress or as the end",
                "Arcane may be newer than this server: run `interp doctor` (transport check), and check the operation's "
                "activity before retrying.", status=status)
        return framing

    def event_frame(self, name: str, data: str) -> dict | None:
        """The frame a named event makes of its data (None: the name is not declared)."""
        spec = self.events.get(name)
        if spec is None:
            return None
        return {k: (data if v == DATA_PLACEHOLDER else v) for k, v in spec.items()}


class LineDecoder:
    """JSON lines, fed in chunks: every complete line (LF ends it, a CR before it is
    dropped); at most `cap` bytes of a line are held."""

    def __init__(self, cap: int):
        self.cap = cap
        self.buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self.buf + chunk
        out, start = [], 0
        while (end := data.find(b"\n", start)) >= 0:
            out.append(data[start:end].rstrip(b"\r"))
            start = end + 1
        self.buf = data[start:]
        if len(self.buf) > self.cap:
            raise ArcaneProtocolError(f"a line of Arcane's stream is larger than {self.cap} bytes", None)
        return [line for line in out if line.strip()]

    def end(self) -> list[bytes]:
        rest, self.buf = self.buf, b""
        return [rest.rstrip(b"\r")] if rest.strip() else []

    @property
    def incomplete(self) -> int:
        return 0


@dataclass
class Event:
    """One dispatched server-sent event."""

    data: str
    name: str = "message"
    id: str | None = None


@dataclass
class EventDecoder:
    """Server-sent events, fed in chunks (the WHATWG event-stream parsing rules)."""

    cap: int
    buf: bytes = b""
    data: list[str] = field(default_factory=list)
    data_size: int = 0
    name: str = ""
    has_fields: bool = False  # a field line was read since the last blank line
    last_id: str | None = None
    retry_ms: int | None = None
    comments: int = 0
    incomplete: int = 0  # events cut by the end of the stream

    def feed(self, chunk: bytes) -> list[Event]:
        data = self.buf + chunk
        out: list[Event] = []
        start, n = 0, len(data)
        lf, cr = data.find(b"\n"), data.find(b"\r")  # the next of each; -1: none left in `data`
        while start < n:
            if 0 <= lf < start:
                lf = data.find(b"\n", start)
            if 0 <= cr < start:
                cr = data.find(b"\r", start)
            if cr >= 0 and (lf < 0 or cr < lf):
                if cr == n - 1:
                    break  # a CR at the end: the LF of a CR LF may follow in the next chunk
                end, nxt = cr, cr + (2 if data[cr + 1:cr + 2] == b"\n" else 1)
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                break
            self._line(data[start:end], out)
            start = nxt
        self.buf = data[start:]
        if len(self.buf) > self.cap:
            raise ArcaneProtocolError(f"a line of Arcane's event stream is larger than {self.cap} bytes", None)
        return out

    def end(self) -> list[Event]:
        """The stream ended: a last line without its end is read, an event without its
        blank line is dropped (and counted)."""
        out: list[Event] = []
        if self.buf:
            rest, self.buf = self.buf, b""
            self._line(rest.rstrip(b"\r"), out)
        if self.has_fields:
            self.incomplete += 1
        self._reset()
        return out

    def _reset(self) -> None:
        self.data, self.data_size, self.name, self.has_fields = [], 0, "", False

    def _line(self, raw: bytes, out: list[Event]) -> None:
        if not raw:
            data = "\n".join(self.data)
            if data or self.name:  # an empty data buffer dispatches nothing, unless the event is named
                out.append(Event(data, self.name or "message", self.last_id))
            self._reset()
            return
        line = raw.decode("utf-8", "replace")
        if line.startswith(":"):
            self.comments += 1
            return
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        self.has_fields = True
        if name == "data":
            self.data_size += len(value) + 1
            if self.data_size > self.cap:
                raise ArcaneProtocolError(f"an event of Arcane's event stream is larger than {self.cap} bytes", None)
            self.data.append(value)
        elif name == "event":
            self.name = value
        elif name == "id" and "\0" not in value:
            self.last_id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        # any other field is ignored, as the format says


def event_as_frame(event: Event, rules: Framings) -> bytes | dict | None:
    """What an event carries: its data when that is a JSON object (with the members a
    declared event name adds where absent), else the frame its declared name makes of the
    data; None for an event with neither (counted malformed by the reader)."""
    named = rules.event_frame(event.name, event.data)
    text = event.data.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            if named:
                for k, v in named.items():
                    if v != event.data:  # a member that holds the data itself is not added to a JSON frame
                        value.setdefault(k, v)
            return value
    if named is not None:
        return named
    return event.data.encode("utf-8") if text else None


async def frames(resp: httpx.Response, rules: Framings, framing: str, cap: int,
                 decoder: list | None = None) -> AsyncIterator[bytes | dict | None]:
    """The frames of a streaming answer, as they arrive: a JSON line's bytes, or an event's
    frame (bytes to parse, a dict made by its name, or None when it carries nothing
    usable). `decoder`, when given, receives the decoder (its counters outlive the loop)."""
    dec: Any = EventDecoder(cap) if framing == SSE else LineDecoder(cap)
    if decoder is not None:
        decoder.append(dec)
    try:
        async for chunk in body_chunks(resp):
            for item in dec.feed(chunk):
                yield event_as_frame(item, rules) if framing == SSE else item
    except ArcaneProtocolError as exc:
        raise ArcaneProtocolError(exc.message, exc.next_step, status=resp.status_code) from None
    for item in dec.end():
        yield event_as_frame(item, rules) if framing == SSE else item


__all__ = ["FRAMINGS", "NDJSON", "SSE", "Event", "EventDecoder", "Framings", "LineDecoder", "event_as_frame", "frames"]
