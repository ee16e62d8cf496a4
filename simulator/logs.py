"""Container, project and Swarm-service log lines, as Docker hands them to Arcane and as
Arcane frames them on its log WebSockets (behaviour data `logs:`, live.yaml).

A container's log lives in its state item: `_sim.logs` (stdout) and `_sim.stderr`, each
"<RFC 3339 nano time> <text>" lines, like `docker logs --timestamps`; `_sim.tty`
makes it one raw stream. A Swarm service keeps the same members. Here they become
LogLines, are cut as Docker cuts them (`since`, `tail`), ordered as Arcane reads them
(follow=false: every stdout line, then every stderr line; follow: in arrival order),
written as the raw line on Arcane's channel (the `[STDERR] ` mark, Docker's timestamp; a
project's lines too since Arcane 2.10)
and normalised the way Arcane's own NormalizeContainerLine / NormalizeProjectLine do,
so text and JSON frames come out of the same line Arcane would have read.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .store import rfc3339nano

_LEADING_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z)\s")
_DOCKER_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z\s+")
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|m|s|ms|us|ns))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|ns|m|s)")


@dataclass(frozen=True)
class LogLine:
    ns: int  # Docker's timestamp, nanoseconds since the epoch
    stream: str  # stdout | stderr
    text: str
    source: str = ""  # the container (project logs: compose's name for it)


def parse_ts(text: str) -> int | None:
    """An RFC 3339 (nano) UTC timestamp -> epoch nanoseconds; None if it is not one."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})", text.strip())
    if not m:
        return None
    base = _dt.datetime.fromisoformat(m.group(1) + (m.group(3) if m.group(3) != "Z" else "+00:00"))
    frac = int((m.group(2) or "0").ljust(9, "0"))
    return int(base.timestamp()) * 1_000_000_000 + frac


def docker_ts(ns: int) -> str:
    """Docker's log timestamp: RFC 3339 with a fixed nine-digit fraction (jsonmessage.RFC3339NanoFixed)."""
    seconds, frac = divmod(int(ns), 1_000_000_000)
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def parse_stream(text: Any, stream: str, source: str = "") -> list[LogLine]:
    """'<ts> <text>' lines (a line without a timestamp gets the previous one's)."""
    out: list[LogLine] = []
    last = 0
    for raw in str(text or "").splitlines():
        m = _LEADING_TS.match(raw)
        ns = parse_ts(m.group(1)) if m else None
        if ns is None:
            out.append(LogLine(last, stream, raw, source))
            continue
        last = ns
        out.append(LogLine(ns, stream, raw[m.end():], source))
    return out


def item_lines(item: dict, source: str = "") -> list[LogLine]:
    """Every line an item's log holds, oldest first (a TTY has only one stream)."""
    private = item.get("_sim") or {}
    lines = parse_stream(private.get("logs"), "stdout", source)
    if not is_tty(item):
        lines += parse_stream(private.get("stderr"), "stderr", source)
    return sorted(lines, key=lambda line: line.ns)  # stable: equal times keep their file order


def is_tty(item: dict) -> bool:
    return bool((item.get("_sim") or {}).get("tty"))


def parse_since(value: str, now_ns: int) -> tuple[int | None, str | None]:
    """Docker's `since`: RFC 3339, Unix seconds (with a fraction), or a Go duration before
    now. (nanoseconds or None, an error text)."""
    value = (value or "").strip()
    if not value:
        return None, None
    ns = parse_ts(value)
    if ns is not None:
        return ns, None
    if re.fullmatch(r"\d+(\.\d{1,9})?", value):
        whole, _, frac = value.partition(".")
        return int(whole) * 1_000_000_000 + int(frac.ljust(9, "0") or 0), None
    if _DURATION.match(value):
        units = {"h": 3600e9, "m": 60e9, "s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1}
        span = sum(float(n) * units[u] for n, u in _DURATION_PART.findall(value))
        return now_ns - int(span), None
    return None, f'invalid value for "since": failed to parse value as time or duration: "{value}"'


def cut(lines: list[LogLine], tail: str, since_ns: int | None) -> list[LogLine]:
    """Docker's tail (the last N entries; a non-number is all), then since."""
    try:
        n = int(tail)
    except (TypeError, ValueError):
        n = -1
    if n >= 0:
        lines = lines[-n:] if n else []
    if since_ns is not None:
        lines = [line for line in lines if line.ns >= since_ns]
    return lines


def arrival_order(lines: list[LogLine], follow: bool, tty: bool) -> list[LogLine]:
    """The order Arcane reads them in: follow=false demultiplexes the whole body first
    (stdout, then stderr); a follow reads both pipes as they come; a TTY is one stream."""
    if follow or tty:
        return lines
    return [line for line in lines if line.stream == "stdout"] + [line for line in lines if line.stream == "stderr"]


def channel_line(line: LogLine, *, timestamps: bool, tty: bool, mark: str, prefix: str = "") -> str:
    """The line on Arcane's channel: the stderr mark (never on a TTY), then Docker's
    timestamp, then `prefix` (a project service's "<name> | ", a Swarm service's details,
    which Docker writes after its timestamp), then the text."""
    body = prefix + line.text
    if timestamps:
        body = docker_ts(line.ns) + " " + body
    if line.stream == "stderr" and not tty:
        body = mark + body
    return body


def normalize_container_line(raw: str, mark: str) -> tuple[str, str, str]:
    """Arcane's NormalizeContainerLine: (level, message, timestamp or "")."""
    line = raw.rstrip("\r\n")
    level = "stdout"
    if line.startswith(mark):
        level, line = "stderr", line[len(mark):]
    elif line.startswith("stderr:"):
        level, line = "stderr", line[7:]
    elif line.startswith("stdout:"):
        line = line[7:]
    timestamp = ""
    if len(line) > 20 and line[0].isdigit():
        m = _DOCKER_TS.match(line)
        if m:
            ns = parse_ts(m.group(0).strip())
            if ns is not None:
                timestamp = rfc3339nano(ns)
            line = line[m.end():]
    return level, line.strip(), timestamp


def normalize_project_line(raw: str, mark: str) -> tuple[str, str, str, str]:
    """Arcane's NormalizeProjectLine: (level, service, message, timestamp)."""
    level, base, timestamp = normalize_container_line(raw, mark)
    service = ""
    if " | " in base:
        service, base = base.split(" | ", 1)
        service = service.strip()
    return level, service, base, timestamp


def message(seq: int, level: str, text: str, timestamp: str, service: str = "") -> dict:
    """A LogMessage as Go marshals it: field order, omitempty on level and service."""
    out: dict[str, Any] = {"seq": seq}
    if level:
        out["level"] = level
    out["message"] = text
    out["timestamp"] = timestamp
    if service:
        out["service"] = service
    return out


def compose_name(item: dict, project: str) -> str:
    """Compose's name for a service container: its name without "/" and "<project>-"."""
    name = str((item.get("names") or [item.get("id", "")])[0]).lstrip("/")
    return name[len(project) + 1:] if name.startswith(project + "-") else name


def merge(groups: Iterable[list[LogLine]]) -> list[LogLine]:
    return sorted((line for group in groups for line in group), key=lambda line: line.ns)
