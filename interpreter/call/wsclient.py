"""The WebSocket handler kinds (handlers.HANDLERS): `websocket_capture` reads a log,
stats or diagnostics socket of Arcane, `exec` types one command into a container's
terminal. How a route's frames are read, rendered and bounded is its capture profile
(catalog/extra-routes.yaml `captures`, compiled into model.Capture); nothing here knows a
route.

Every capture ends on its own bounds: Arcane's log and stats sockets never close by
themselves, so a log capture also ends after `quiet_seconds` without a frame; before the
first frame it waits ARCANE_MCP_LOG_FIRST_FRAME, and when none came it says so (`ended:
no_frame`), never "(no lines)" as if all were read. Every capture ends within its `seconds` bound (kept under the action deadline, so what was
read is always returned). A socket that drops mid-stream returns what was captured, with
a note. The terminal sends no exit status: the typed line prints a begin marker, runs the
command and prints an end marker carrying `$?`, each holding a fresh nonce; the output is
what lies between them, with the terminal's escape sequences and carriage returns taken
out.

The socket carries the credential exactly as REST does (the same credential object and
headers, never the query string), at ws:// or wss:// of ARCANE_URL, with the same TLS
settings. Every value read is untrusted text: the Markdown goes through escape.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from ..build.model import Template
from ..errors import ArcaneHTTPError, ArcaneTimeout, ArcaneUnreachable, ArgumentError, StreamFailed
from ..text import escape
from ..text.render import Text, ToolResult
from .context import require_client
from .request import USER_AGENT, PreparedRequest, prepare
from .response import parse_error
from .transport import API_PREFIX

if TYPE_CHECKING:
    from ..build.catalog import Action
    from ..build.model import Capture, LineFormat, Metric
    from ..front.names import Namer
    from .context import Context
    from .request import ArcaneClient
    from .response import Reading

DEADLINE_MARGIN = 3.0  # seconds of the action deadline kept for connecting and rendering
OPEN_TIMEOUT = 10.0  # seconds the upgrade may take
MAX_FRAME = 4 * 1024 * 1024  # a frame larger than this is a protocol error (Arcane's are ≤ 1 MiB lines)
INTERRUPT_WAIT = 0.5  # seconds to read after typing the interrupt, before closing
# a terminal's escape sequences: CSI, OSC (ended by BEL or ST), charset selection, other ESC pairs
_TERMINAL_SEQ = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()*+][0-9A-Za-z]|\x1b[@-Z\\-_=>]")


# ---------------------------------------------------------------- the socket


def ws_url(client: ArcaneClient, req: PreparedRequest) -> str:
    """ws:// or wss:// of ARCANE_URL, the route's path and its query (never a credential)."""
    base = client.settings.arcane_url.rstrip("/")
    scheme, sep, rest = base.partition("://")
    url = {"https": "wss", "http": "ws"}.get(scheme.lower(), scheme) + sep + rest + API_PREFIX + req.path
    return url + ("?" + urlencode(req.query) if req.query else "")


def _tls(client: ArcaneClient, url: str) -> ssl.SSLContext | None:
    """The TLS settings REST uses (ARCANE_MCP_INSECURE_SKIP_VERIFY, ARCANE_MCP_CA_FILE)."""
    if not url.startswith("wss://"):
        return None
    settings = client.settings
    if settings.insecure_skip_verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=str(settings.ca_file) if settings.ca_file else None)


async def _open(client: ArcaneClient, url: str, auth: dict[str, str]) -> ClientConnection:
    kwargs: dict[str, Any] = {"additional_headers": dict(auth), "user_agent_header": USER_AGENT, "open_timeout": OPEN_TIMEOUT,
                              "max_size": MAX_FRAME, "proxy": None}
    context = _tls(client, url)
    if context is not None:
        kwargs["ssl"] = context
    return await connect(url, **kwargs)


def _refusal(exc: InvalidStatus, ctx: Context) -> ArcaneHTTPError:
    resp = exc.response
    content_type = resp.headers.get("Content-Type", "") if resp.headers else ""
    message, detail = parse_error(resp.status_code, resp.body or b"", content_type, ctx.catalog.conventions.error_shapes)
    return ArcaneHTTPError(message, None, status=resp.status_code, detail=detail)


@asynccontextmanager
async def open_socket(ctx: Context, action: Action, req: PreparedRequest) -> AsyncIterator[ClientConnection]:
    """The upgraded socket, authenticated like a REST call of the action (one retry after a
    401 the credential can cure, as send_with_auth does). A refused upgrade is an
    ArcaneHTTPError with Arcane's message; a transport failure ArcaneUnreachable or
    ArcaneTimeout."""
    client = require_client(ctx)
    creds = client.credentials
    url = ws_url(client, req)
    used = await creds.headers(action.security) if creds is not None else {}
    try:
        try:
            conn = await _open(client, url, used)
        except InvalidStatus as exc:
            if exc.response.status_code != 401 or creds is None or not used or not await creds.refresh_after_401(used):
                raise
            conn = await _open(client, url, await creds.headers(action.security))
    except InvalidStatus as exc:
        raise _refusal(exc, ctx) from None
    except TimeoutError:
        raise ArcaneTimeout(f"Arcane did not accept the WebSocket within {OPEN_TIMEOUT:g}s", None, sent=True) from None
    except (OSError, InvalidHandshake) as exc:
        raise ArcaneUnreachable(f"the WebSocket to Arcane at {client.settings.arcane_url} could not be opened ({type(exc).__name__})",
                                "Check that Arcane is running and ARCANE_URL is right, then retry.", sent=False) from None
    try:
        yield conn
    finally:
        await conn.close()


# ---------------------------------------------------------------- bounds


def capture_of(ctx: Context, action: Action) -> Capture:
    """The action's capture profile (compile checks every WebSocket route has one)."""
    for route in ctx.catalog.inventory.extra_routes:
        if route.action_id == action.id and route.capture is not None:
            return route.capture
    raise StreamFailed(f"{action.id} has no capture profile", None)


def limits(ctx: Context, capture: Capture, args: dict[str, Any]) -> tuple[dict[str, int | float], list[str]]:
    """Each bound's value for this call, the seconds kept under the action deadline."""
    out: dict[str, int | float] = {b.name: int(args.get(b.argument, b.default)) for b in capture.bounds.values()}
    notes = []
    room = max(ctx.settings.action_timeout - DEADLINE_MARGIN, 1.0)
    if out.get("seconds", 0) > room:
        notes.append(f"read for {room:g}s, not {out['seconds']}s: ARCANE_MCP_ACTION_TIMEOUT is {ctx.settings.action_timeout:g}s")
        out["seconds"] = room
    return out, notes


def request_for(action: Action, capture: Capture, args: dict[str, Any]) -> PreparedRequest:
    """The upgrade request: the call's path and query, and the profile's query values for
    what the call did not pass (a log capture sends follow=false unless asked)."""
    req = prepare(action, args)
    sent = {k for k, _ in req.query}
    req.query += [(k, v) for k, v in capture.send.items() if k not in sent]
    return req


def _closed_note(exc: ConnectionClosed) -> str:
    rcvd = exc.rcvd
    if rcvd is None:
        return "Arcane cut the connection (no close frame) before the capture's bounds were reached; this is what arrived"
    return f"Arcane closed the connection (code {rcvd.code}{', ' + rcvd.reason if rcvd.reason else ''}) before the bounds were reached"


def _text(frame: str | bytes) -> str:
    return frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame


# ---------------------------------------------------------------- log lines


def _json_line(spec: LineFormat, obj: dict, args: dict) -> tuple[str, bool]:
    """One JSON frame as a line: (line, is Arcane's error frame)."""
    level = obj.get(spec.level) if spec.level else None
    level = str(level) if level is not None else ""
    message = obj.get(spec.message)
    message = "" if message is None else message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)
    if level and level in spec.error_levels:
        return message, True
    parts = [spec.marks.get(level, "")]
    stamp = obj.get(spec.timestamp) if spec.timestamp else None
    if stamp and (spec.timestamps == "always" or (spec.timestamps == "asked" and spec.asked_by and args.get(spec.asked_by) is True)):
        parts.append(f"{stamp} ")
    if spec.show_level and level:
        parts.append(f"{level} ")
    source = obj.get(spec.source) if spec.source else None
    if source:
        parts.append(f"{source} | ")
    parts.append(message)
    attrs = obj.get(spec.attrs) if spec.attrs else None
    if attrs:
        parts.append(" " + json.dumps(attrs, ensure_ascii=False, separators=(",", ":"), default=str))
    return "".join(parts), False


def frame_lines(capture: Capture, frame: str, args: dict) -> tuple[list[str], str | None]:
    """A log frame's lines and Arcane's error text, if the frame is its error frame. JSON
    frames (an object, or a batch array) are rendered as lines; a frame that is not JSON
    is a text line."""
    spec = capture.json
    if spec is not None and frame[:1] in "{[":
        try:
            value = json.loads(frame)
        except ValueError:
            value = None
        items = value if isinstance(value, list) else [value] if isinstance(value, dict) else None
        if items is not None:
            lines, error = [], None
            for obj in items:
                if isinstance(obj, dict):
                    line, failed = _json_line(spec, obj, args)
                    if failed:
                        error = line
                        break
                    lines.append(line)
            return lines, error
    if capture.error_prefix and frame.startswith(capture.error_prefix):
        return [], frame
    return frame.split("\n"), None


class _Kept:
    """The lines a capture keeps within its line and byte bounds (`keep_last`: the newest)."""

    def __init__(self, max_lines: int, max_bytes: int, keep_last: bool):
        self.max_lines, self.max_bytes, self.keep_last = max_lines, max_bytes, keep_last
        self.lines: deque[str] = deque()
        self.size = self.read = 0
        self.truncated = False

    def add(self, lines: list[str]) -> bool:
        """Keep these lines; True when a bound stopped a capture that keeps the first lines."""
        for line in lines:
            if not line:
                continue
            self.read += 1
            cost = len(line.encode("utf-8")) + 1
            if not self.keep_last and (len(self.lines) >= self.max_lines or self.size + cost > self.max_bytes):
                if not self.lines and len(self.lines) < self.max_lines:  # one line longer than the whole byte bound: its start
                    start = line.encode("utf-8")[: self.max_bytes - 1].decode("utf-8", "ignore")
                    self.lines.append(start)
                    self.size += len(start.encode("utf-8")) + 1
                self.truncated = True
                return True
            self.lines.append(line)
            self.size += cost
            while self.keep_last and (len(self.lines) > self.max_lines or self.size > self.max_bytes):
                self.size -= len(self.lines.popleft().encode("utf-8")) + 1
                self.truncated = True
        return False


async def capture_lines(conn: ClientConnection, capture: Capture, bounds: dict, args: dict, clock=time.monotonic,
                        first_frame: float = 10.0) -> dict:
    """Read log lines until a bound: lines, bytes, seconds, or (unless following) the quiet
    period after a frame. Before the first frame it waits `first_frame` seconds (within
    the seconds bound): a remote agent or a large tail can be slow to start, and when none
    comes it ends `no_frame`, which says nothing was read, not that the log is empty.
    `keep: last` reads until quiet or seconds and keeps the last lines."""
    follow = capture.follow is not None and args.get(capture.follow) is True
    deadline = clock() + float(bounds["seconds"])
    quiet = None if follow or capture.quiet_seconds is None else capture.quiet_seconds
    kept = _Kept(int(bounds.get("lines", 1000)), int(bounds.get("bytes", 1 << 20)), capture.keep == "last")
    ended, error, note = "seconds", None, None
    frames, waited = 0, 0.0
    while True:
        left = deadline - clock()
        if left <= 0:
            ended = "seconds"
            break
        wait = left if quiet is None else min(left, first_frame if not frames else quiet)
        try:
            frame = await asyncio.wait_for(conn.recv(), wait)
        except TimeoutError:
            if quiet is not None and not frames:
                ended, waited = "no_frame", wait
            else:
                ended = "seconds" if quiet is None or wait >= left else "quiet"
            break
        except ConnectionClosed as exc:
            ended, note = "closed", _closed_note(exc)
            break
        frames += 1
        lines, error = frame_lines(capture, _text(frame), args)
        stopped = kept.add(lines)
        if error is not None:
            ended = "error"
            break
        if stopped:
            ended = "lines" if len(kept.lines) >= kept.max_lines else "bytes"
            break
    out = {"lines": list(kept.lines), "count": len(kept.lines), "bytes": kept.size, "read": kept.read, "frames": frames,
           "truncated": kept.truncated, "ended": ended, "error": error, "note": note}
    if ended == "no_frame":
        out["firstFrameSeconds"] = round(waited, 2)
    return out


# ---------------------------------------------------------------- samples


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _figure(exprs, sample: dict) -> float | None:
    """The first expression's number minus the others' (None when one is missing)."""
    total = None
    for i, e in enumerate(exprs):
        n = _number(e.search(sample))
        if n is None:
            return None
        total = n if i == 0 else total - n
    return total


def metric_value(metric: Metric, samples: list[dict]) -> tuple[float | None, float | None]:
    """The metric's figure over the samples, and its total (`of`) at the last sample."""
    values = []
    for s in samples:
        v = _figure(metric.value, s)
        if v is not None and metric.per:
            per = _figure(metric.per, s)
            v = v / per * 100 if per else None
        values.append(v)
    known = [v for v in values if v is not None]
    total = _figure(metric.of, samples[-1]) if metric.of and samples else None
    if not known:
        return None, total
    if metric.over == "delta":
        return (values[-1] - values[0]) if values[0] is not None and values[-1] is not None else None, total
    if metric.over == "mean":
        return sum(known) / len(known), total
    if metric.over == "max":
        return max(known), total
    return values[-1], total


def _write(value: float, unit: str, signed: bool = False) -> str:
    sign = "+" if signed and value > 0 else ""
    if unit == "percent":
        return f"{sign}{value:.1f} %"
    if unit == "bytes":
        return sign + escape.human_bytes(int(round(value)))
    return f"{sign}{value:g}" if value != int(value) else f"{sign}{int(value)}"


def summarise(capture: Capture, samples: list[dict]) -> tuple[dict[str, Any], list[str]]:
    """(figures by label, Markdown lines) of the profile's summary."""
    figures: dict[str, Any] = {}
    lines = []
    for m in capture.summary:
        value, total = metric_value(m, samples)
        figures[m.label] = value if total is None else {"value": value, "of": total}
        if value is None:
            continue
        text = _write(value, m.unit, signed=m.over == "delta")
        if total:
            text += f" of {_write(total, m.unit)} ({value / total * 100:.1f} %)"
        if m.over == "delta":
            text += f" over {len(samples)} samples"
        elif m.over == "mean":
            text += " (mean)"
        lines.append(f"- {escape.list_item(m.label, strict=True)}: {escape.inline(text)}")
    return figures, lines


async def capture_samples(conn: ClientConnection, capture: Capture, bounds: dict, clock=time.monotonic) -> dict:
    """Read JSON frames until `samples` of them or `seconds`; Arcane's error frame ends it."""
    want = int(bounds.get("samples", 1))
    deadline = clock() + float(bounds["seconds"])
    samples: list[dict] = []
    ended, error, note, started = "seconds", None, None, clock()
    while len(samples) < want:
        left = deadline - clock()
        if left <= 0:
            break
        try:
            frame = await asyncio.wait_for(conn.recv(), left)
        except TimeoutError:
            break
        except ConnectionClosed as exc:
            ended, note = "closed", _closed_note(exc)
            break
        try:
            value = json.loads(_text(frame))
        except ValueError:
            continue  # not a sample: nothing to summarise from it
        if not isinstance(value, dict):
            continue
        if capture.error and isinstance(value.get(capture.error), str):
            ended, error = "error", value[capture.error]
            break
        samples.append({k: v for k, v in value.items() if k not in capture.drop})
    else:
        ended = "samples"
    return {"samples": samples, "count": len(samples), "ended": ended, "error": error, "note": note,
            "seconds": round(clock() - started, 2)}


# ---------------------------------------------------------------- the handler kinds

_ENDED = {
    "quiet": "no new frame for {quiet:g}s (the existing lines were all read)",
    "no_frame": "no frame arrived within {first:g}s: nothing was read (the log may be empty, or Arcane slow to send it: "
                "call once more; nothing again means the log is most likely empty; the operator's "
                "ARCANE_MCP_LOG_FIRST_FRAME sets this wait)",
    "seconds": "the time bound ({seconds:g}s) was reached",
    "lines": "the line bound ({lines}) was reached",
    "bytes": "the byte bound ({bytes}) was reached",
    "samples": "{samples} samples were read",
    "closed": "the connection ended",
    "error": "Arcane reported an error",
}


def _ended(reason: str, capture: Capture, bounds: dict, first: float = 0.0) -> str:
    return _ENDED[reason].format(quiet=capture.quiet_seconds or 0, first=first,
                                 **{k: bounds.get(k, 0) for k in ("seconds", "lines", "bytes", "samples")})


def _failed(namer: Namer, action: Action, error: str) -> StreamFailed:
    return StreamFailed(f"{namer(action.id)} failed: Arcane answered {error!r} on its WebSocket",
                        "Check the ID (and that the container or service exists), then retry.")


def _result(action: Action, head: list[str], body: list[str], structured: dict) -> ToolResult:
    return ToolResult.of(Text(title=action.title, body=["", *head, *body]), structured, http_status=101)


async def websocket_capture(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """Capture a log, stats or diagnostics socket within the profile's bounds."""
    capture = capture_of(ctx, action)
    bounds, notes = limits(ctx, capture, args)
    req = request_for(action, capture, args)
    async with open_socket(ctx, action, req) as conn:
        got = await (capture_lines(conn, capture, bounds, args, first_frame=ctx.settings.log_first_frame)
                     if capture.frames == "lines" else capture_samples(conn, capture, bounds))
    if got["error"] is not None and not got["count"]:
        raise _failed(namer, action, got["error"])
    if got["error"] is not None:
        notes.append(f"Arcane reported an error after {got['count']} item(s): {got['error']}")
    if got["note"]:
        notes.append(got["note"])
    structured: dict[str, Any] = {k: got[k] for k in got if k not in ("error", "note")}
    structured["ended"] = got["ended"]
    structured["notes"] = notes
    head = []
    if capture.frames == "lines":
        head.append(f"- lines: {got['count']} ({escape.human_bytes(got['bytes'])})" + (" — cut at a bound" if got["truncated"] else ""))
        head.append(f"- ended: {escape.inline(_ended(got['ended'], capture, bounds, got.get('firstFrameSeconds', 0.0)))}")
        head += [f"- note: {escape.inline(n)}" for n in notes]
        empty = "(no frame arrived)" if got["ended"] == "no_frame" else "(no lines)"
        body = ["", escape.fence("\n".join(got["lines"])).rstrip("\n")] if got["lines"] else ["", empty]
    else:
        figures, summary = summarise(capture, got["samples"])
        structured["summary"] = figures
        head.append(f"- samples: {got['count']} over {got['seconds']:g}s")
        head.append(f"- ended: {escape.inline(_ended(got['ended'], capture, bounds))}")
        head += [f"- note: {escape.inline(n)}" for n in notes]
        body = ["", "### Summary", *summary] if summary else []
        if got["samples"]:
            body += ["", "structuredContent has every sample (Arcane's frames as they came)."]
    return _result(action, head, body, structured)


# ---------------------------------------------------------------- exec


def terminal_text(raw: str) -> str:
    """TTY output as plain lines: escape sequences out, CRLF to LF, and a carriage return
    keeps what was written after it (a progress line's last state)."""
    text = _TERMINAL_SEQ.sub("", raw)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        lines.append(line.rsplit("\r", 1)[-1])
    return "\n".join(lines)


class Terminal:
    """The bytes a terminal sent, searched for the markers of one typed line."""

    def __init__(self, capture: Capture, nonce: str, max_bytes: int):
        self.begin = re.compile(re.escape(capture.begin.replace("{nonce}", nonce)) + r"\r*\n")
        self.end = re.compile(r"\r*\n" + re.escape(capture.end.replace("{nonce}", nonce)) + r"(\d+)\r*\n")
        self.max_bytes = max_bytes
        self.raw = ""
        self.errors: list[str] = []

    def feed(self, frame: str | bytes) -> None:
        if isinstance(frame, str):  # Arcane's text frame: "Error creating exec: …"
            self.errors.append(frame.strip())
        else:
            self.raw += frame.decode("utf-8", "replace")

    def result(self) -> tuple[int | None, str, bool]:
        """(exit status or None, output, truncated)."""
        b = self.begin.search(self.raw)
        start = b.end() if b else 0
        e = self.end.search(self.raw, start)
        chunk = self.raw[start:e.start()] if e else self.raw[start:]
        output = terminal_text(chunk)
        data = output.encode("utf-8")
        truncated = len(data) > self.max_bytes
        if truncated:
            output = data[: self.max_bytes].decode("utf-8", "ignore")
        return (int(e.group(1)) if e else None), output, truncated

    @property
    def done(self) -> bool:
        b = self.begin.search(self.raw)
        return bool(b and self.end.search(self.raw, b.end()))


async def _drain(conn: ClientConnection, term: Terminal) -> None:
    try:
        while True:
            term.feed(await asyncio.wait_for(conn.recv(), INTERRUPT_WAIT))
    except (TimeoutError, ConnectionClosed):
        return


async def exec_command(ctx: Context, action: Action, args: dict[str, Any], namer: Namer, reading: Reading) -> ToolResult:
    """Run one command through the terminal WebSocket: type it between two markers, read
    until the end marker (its exit status) or the bound, strip echo, prompt and escapes."""
    capture = capture_of(ctx, action)
    bounds, notes = limits(ctx, capture, args)
    command = str(args.get(str(capture.command), ""))
    if not command.strip() or "\n" in command or "\r" in command:
        raise ArgumentError(f"'{capture.command}' must be one non-empty line", "Pass one command line; join commands with ; or &&.",
                            fields=[str(capture.command)])
    nonce = "m" + secrets.token_hex(8)
    # {command_quoted}: the command as one POSIX single-quoted word (for `eval`), so a
    # trailing `#` comment or `&` cannot swallow the end marker typed after it
    words = {"nonce": nonce, "command": command, "command_quoted": "'" + command.replace("'", "'\\''") + "'"}
    line = Template.of(capture.line).render(words.get) + capture.enter  # one pass: the command is never re-read
    term = Terminal(capture, nonce, int(bounds.get("bytes", 1 << 20)))
    req = request_for(action, capture, args)
    timed_out, note = False, None
    async with open_socket(ctx, action, req) as conn:
        deadline = time.monotonic() + float(bounds["seconds"])
        try:
            await conn.send(line.encode("utf-8"))
            while not term.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                term.feed(await asyncio.wait_for(conn.recv(), left))
                # the raw buffer stays bounded: past four times the cap, only the end can still matter
                if len(term.raw) > 4 * term.max_bytes + 65536:
                    b = term.begin.search(term.raw)
                    keep = (b.end() if b else 0) + term.max_bytes
                    term.raw = term.raw[:keep] + term.raw[-65536:]
        except TimeoutError:
            timed_out = True
            if capture.interrupt:
                try:
                    await conn.send(capture.interrupt.encode("utf-8"))
                except ConnectionClosed:
                    pass
                await _drain(conn, term)
        except ConnectionClosed as exc:
            await _drain(conn, term)  # frames that came before the close are still queued
            note = "the shell ended before the command's end marker (the command may have ended the shell)" \
                if exc.rcvd is not None and exc.rcvd.code == 1000 else _closed_note(exc)
    status, output, truncated = term.result()
    if status is None and term.errors and not output.strip():
        raise StreamFailed(f"{namer(action.id)} failed: Arcane answered {term.errors[0]!r}",
                           "Check that the container is running and has that shell, then retry.")
    if timed_out:
        notes.append(f"the command did not finish within {bounds['seconds']:g}s; it was interrupted"
                     f"{' (Ctrl-C)' if capture.interrupt else ''} and the terminal closed; this is the output so far")
    if note:
        notes.append(note)
    notes += [f"Arcane: {e}" for e in term.errors]
    structured = {"exitCode": status, "output": output, "truncated": truncated, "timedOut": timed_out, "notes": notes}
    head = [f"- exit status: {status if status is not None else 'unknown'}",
            f"- output: {escape.human_bytes(len(output.encode('utf-8')))}" + (" — cut at the byte bound" if truncated else "")]
    head += [f"- note: {escape.inline(n)}" for n in notes]
    body = ["", escape.fence(output).rstrip("\n")] if output else ["", "(no output)"]
    return _result(action, head, body, structured)


__all__ = ["capture_lines", "capture_samples", "exec_command", "frame_lines", "open_socket", "summarise", "terminal_text",
           "websocket_capture", "ws_url"]
