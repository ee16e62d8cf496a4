"""Operation streams: reading a progress stream to its end, as the `streams` and
`activity` sections of catalog/conventions.yaml declare its frames (whatever the framing
that carried them: JSON lines or server-sent events, framing.py).

    StreamRules     the declared frames (which member carries the activity ID, a log line,
                    an error, the end), the follow-up action, and how log text becomes a
                    progress message; compiled once when the rules load (compile.py)
    Reporter        turns log lines into progress notifications: one message per line,
                    at most one notification per `min_interval_seconds` (the newest line
                    wins; the last one is sent when the stream ends), increasing values
    StreamState     what has been read so far; the dispatcher reads it when the action
                    deadline ends a stream that is still running

Nothing here knows a member name or a line format: they are all data. Every value read
from the stream is untrusted text: messages go through the control filter before they
leave, and are cut to `message_max` characters.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field
from typing import Any

from ..build.lazy_dataclass import dataclass
from ..build.model import Expr, Origin, Template, origins_field
from ..text import escape

BYTE_UNITS = {"": 1, "b": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
BINARY_UNITS = {"k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30, "t": 2 ** 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?)[bB]?\s*$")

ProgressFn = Callable[[float, float | None, str], Awaitable[None]]


@dataclass(frozen=True)
class LinePattern:
    """A log line format: a regex with named groups and the message written from them
    (every placeholder of the message is a group of the regex: compile.py checks it)."""

    match: re.Pattern
    message: Template
    origins: Mapping[str, Origin] = origins_field()

    def render(self, line: str) -> str | None:
        m = self.match.search(line)
        if m is None:
            return None
        groups = {k: (v or "").strip() for k, v in m.groupdict().items()}
        return self.message.render(lambda name: groups.get(name, ""))


@dataclass(frozen=True)
class StreamRules:
    """The frames of an operation stream and how its lines become progress messages."""

    activity: tuple[Expr, ...]  # where the first line carries the activity ID; the first non-empty wins
    log: tuple[Expr, ...]
    error: tuple[Expr, ...]
    done: tuple[Expr, ...]
    legacy_text: tuple[str, ...]  # members joined into a line when no log member is there
    follow_action: str  # the action that shows a running operation
    follow_argument: str  # its argument that takes the activity ID (and the result's member)
    keep_lines: int
    min_interval: float
    message_max: int  # characters of one progress message
    lines: tuple[LinePattern, ...]
    percent: tuple[re.Pattern, ...]
    origins: Mapping[str, Origin] = origins_field()

    # ------------------------------------------------------------ frames

    @staticmethod
    def _first(exprs: tuple, frame: dict) -> Any:
        for e in exprs:
            v = e.search(frame)
            if v not in (None, "", False, [], {}):
                return v
        return None

    def activity_of(self, frame: dict) -> str | None:
        v = self._first(self.activity, frame)
        return str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else None

    def error_of(self, frame: dict) -> str | None:
        v = self._first(self.error, frame)
        if v is None:
            return None
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)

    def is_done(self, frame: dict) -> bool:
        return self._first(self.done, frame) is True

    def text_of(self, frame: dict) -> str | None:
        """The frame's line of output: the log member, else the legacy members joined."""
        v = self._first(self.log, frame)
        if isinstance(v, str):
            return v.rstrip("\r\n") if v.strip() else None
        parts = [str(frame[k]).strip() for k in self.legacy_text if frame.get(k) not in (None, "")]
        text = " ".join(p for p in parts if p)
        return text or None

    # ------------------------------------------------------------ messages

    def percent_of(self, line: str) -> float | None:
        """The percentage a line shows: written out (41%) or as done/total sizes (12MB/29MB)."""
        for pat in self.percent:
            m = pat.search(line)
            if m is None:
                continue
            g = m.groupdict()
            if g.get("percent"):
                return min(float(g["percent"]), 100.0)
            cur, tot = _size(g.get("current")), _size(g.get("total"))
            if cur is not None and tot:
                return min(cur / tot * 100.0, 100.0)
        return None

    def message(self, line: str) -> str:
        """The progress message of one log line: the first declared format that matches
        (layer, service, step…), else the line; its percentage appended when only sizes show it."""
        text = " ".join(line.split())
        for pat in self.lines:
            rendered = pat.render(text)
            if rendered is not None:
                text = " ".join(rendered.split())
                break
        pct = self.percent_of(line)
        if pct is not None and "%" not in text:
            text += f" ({pct:.0f}%)"
        text = escape.clean(text)
        return text if len(text) <= self.message_max else text[: self.message_max - 1] + "…"

    def structured(self, state: StreamState) -> dict:
        """What a stream answers as structuredContent; the activity ID under the follow
        argument's name, so a caller passes it on as it is."""
        status = "failed" if state.errors else ("done" if state.done else "incomplete")
        out = {"status": status, self.follow_argument: state.activity, "lines": state.lines, "errors": list(state.errors),
               "lastLines": list(state.last)}
        if state.malformed:
            out["malformedLines"] = state.malformed
        return out


def _size(text: str | None) -> float | None:
    """12.1MB, 3 KiB, 512B, 7 -> bytes (decimal units unless the i says binary)."""
    if not text:
        return None
    m = _SIZE.match(text)
    if m is None:
        return None
    unit = m.group(2).lower()
    scale = BINARY_UNITS[unit] if m.group(3) and unit in BINARY_UNITS else BYTE_UNITS.get(unit, 1)
    return float(m.group(1)) * scale


@dataclass
class Reporter:
    """Sends progress notifications for log lines, rate-limited: a line that arrives within
    `interval` of the last notification is held, and replaced by any newer one; the held
    line goes out when the interval has passed (also while the stream is silent, so the
    client sees the latest state during a long layer) and at the end of the stream. The
    progress value is the line's number in the stream, so it grows with every notification.
    Call `close` when reading stops early (it cancels the pending release)."""

    send: ProgressFn | None
    rules: StreamRules
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    sent: int = 0
    _last_at: float | None = None
    _last_value: float = 0.0
    _held: tuple[float, str] | None = None
    _timer: asyncio.Task | None = None

    async def line(self, number: int, text: str) -> None:
        if self.send is None:
            return
        now = self.clock()
        if self._last_at is not None and now - self._last_at < self.rules.min_interval:
            self._held = (float(number), text)
            if self._timer is None:
                self._timer = asyncio.ensure_future(self._release(self.rules.min_interval - (now - self._last_at)))
            return
        self._held = None
        await self._emit(float(number), text)

    async def _release(self, delay: float) -> None:
        await self.sleep(delay)
        self._timer = None
        await self._emit_held()

    async def finish(self) -> None:
        """The stream ended: send the held line, if any (its last state reaches the client)."""
        self.close()
        await self._emit_held()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _emit_held(self) -> None:
        if self.send is not None and self._held is not None:
            value, text = self._held
            self._held = None
            await self._emit(value, text)

    async def _emit(self, value: float, text: str) -> None:
        if value <= self._last_value:
            return  # progress values must grow
        self._last_at, self._last_value = self.clock(), value
        self.sent += 1
        await self.send(value, None, self.rules.message(text))


@dataclass
class StreamState:
    """What an operation stream said so far (kept while reading, so a deadline can tell)."""

    activity: str | None = None
    lines: int = 0  # non-empty lines read
    errors: list[str] = field(default_factory=list)
    last: list[str] = field(default_factory=list)
    done: bool = False
    malformed: int = 0
    broken: bool = False  # the connection broke before the end
    # called once with the activity ID when the stream names it (an MCP task starts then)
    on_activity: Callable[[str], None] | None = field(default=None, repr=False, compare=False)


async def read_line(raw: bytes | dict | None, state: StreamState, rules: StreamRules, reporter: Reporter) -> None:
    """Take one frame of the stream into `state` (and the progress reporter): a JSON line's
    bytes, or the frame an event made (framing.py); None or a blank line is nothing."""
    if raw is None or (isinstance(raw, bytes) and not raw.strip()):
        return
    state.lines += 1
    if isinstance(raw, dict):
        frame: Any = raw
    else:
        try:
            frame = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            state.malformed += 1
            return
    if not isinstance(frame, dict):
        state.malformed += 1
        return
    if state.activity is None:
        state.activity = rules.activity_of(frame)
        if state.activity is not None and state.on_activity is not None:
            state.on_activity(state.activity)
    err = rules.error_of(frame)
    if err is not None:
        state.errors.append(" ".join(err.split())[:1000])
    if rules.is_done(frame):
        state.done = True
    text = rules.text_of(frame) if err is None else None
    if text:
        state.last.append(text)
        del state.last[: -rules.keep_lines]
        await reporter.line(state.lines, text)
