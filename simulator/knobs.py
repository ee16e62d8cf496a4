"""Timing and version knobs: how fast the simulated Arcane's clocks run, which Arcane
release's WebSocket close behaviour it follows, and whether its endless streams end.

Faults (faults.py) say what goes wrong; knobs say how the simulator keeps time. Arcane's
own intervals (the live channel's 15 s heartbeat, the dashboard's 15 s poll, Docker's 1 s
stats cadence, the 2 s diagnostics snapshot, `sleep N` in a terminal, a CPU profile's
`seconds`) are multiplied by `time_scale`, so a test sees a heartbeat after 0.15 s at a
scale of 0.01 without any assertion on time itself.

    time_scale:          1.0     Arcane's intervals × this (0 < scale ≤ 10)
    log_follow_seconds:  null    a followed, running container writes one generated line this often
                                 (before `time_scale`); null: only `append_log` adds lines
    exec_close:          "2.12"  how a terminal ends when its shell exits: "2.12" (close 1000
                                 "shell exited", ≥ 2.10.2) or "2.8" (no close frame: 1006)
    live_max_seconds:    null    the live channel (/stream) ends after this many real seconds;
                                 null: never, as Arcane's (for `make run` demos and bare clients)
    stream_line_seconds: null    seconds between an operation stream's frames (pull, deploy…),
                                 before `time_scale`; null: the behaviour data's own delay
    stream_framing:      "ndjson" how the operation streams are framed: "ndjson" (JSON lines,
                                 application/x-json-stream, every release read) or "sse"
                                 (server-sent events, text/event-stream: 2.15's #4276)
    live_framing:        "ndjson" the same for the live channel (/stream); "sse" is a what-if
                                 (no release is known to serve /stream so)

Set them with `start_simulator(knobs=…)`, `sim.set_knobs(…)`, `PUT /_sim/knobs`, a state
file's `knobs:` or the `interp simulate` flags. A setting replaces every knob (unnamed
ones go back to their default).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

EXEC_CLOSE = ("2.12", "2.8")
FRAMINGS = ("ndjson", "sse")


class KnobError(ValueError):
    """A knob setting is malformed (the message names the knob and what it accepts)."""


@dataclass(frozen=True)
class Knobs:
    time_scale: float = 1.0
    log_follow_seconds: float | None = None
    exec_close: str = "2.12"
    live_max_seconds: float | None = None
    stream_line_seconds: float | None = None
    stream_framing: str = "ndjson"
    live_framing: str = "ndjson"

    def scaled(self, seconds: float) -> float:
        """One of Arcane's intervals, as the simulator waits it."""
        return max(float(seconds) * self.time_scale, 0.0)

    def as_dict(self) -> dict:
        return asdict(self)


def _number(name: str, value: Any, *, allow_none: bool, low: float, high: float, low_open: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KnobError(f"{name} must be a number{' or null' if allow_none else ''}, not {value!r}")
    if (value <= low if low_open else value < low) or value > high:
        raise KnobError(f"{name} must be {'above' if low_open else 'at least'} {low:g} and at most {high:g}, not {value!r}")
    return float(value)


def parse_knobs(spec: Any) -> Knobs:
    """Knobs from a mapping (unnamed knobs keep their default); KnobError if malformed."""
    if spec is None:
        return Knobs()
    if not isinstance(spec, dict):
        raise KnobError(f"knobs must be a mapping of knob -> value, not {type(spec).__name__}")
    known = {f.name for f in fields(Knobs)}
    unknown = set(spec) - known
    if unknown:
        raise KnobError(f"unknown knob(s) {', '.join(sorted(map(str, unknown)))}; known: {', '.join(sorted(known))}")
    k = Knobs()
    if "time_scale" in spec:
        k = replace(k, time_scale=_number("time_scale", spec["time_scale"], allow_none=False, low=0, high=10, low_open=True))
    if "log_follow_seconds" in spec:
        k = replace(k, log_follow_seconds=_number("log_follow_seconds", spec["log_follow_seconds"], allow_none=True, low=0, high=3600, low_open=True))
    if "exec_close" in spec:
        value = str(spec["exec_close"])
        if value not in EXEC_CLOSE:
            raise KnobError(f"exec_close must be one of {', '.join(EXEC_CLOSE)}, not {spec['exec_close']!r}")
        k = replace(k, exec_close=value)
    if "live_max_seconds" in spec:
        k = replace(k, live_max_seconds=_number("live_max_seconds", spec["live_max_seconds"], allow_none=True, low=0, high=86400))
    if "stream_line_seconds" in spec:
        k = replace(k, stream_line_seconds=_number("stream_line_seconds", spec["stream_line_seconds"], allow_none=True, low=0, high=600))
    for name in ("stream_framing", "live_framing"):
        if name in spec:
            value = str(spec[name])
            if value not in FRAMINGS:
                raise KnobError(f"{name} must be one of {', '.join(FRAMINGS)}, not {spec[name]!r}")
            k = replace(k, **{name: value})
    return k


class KnobHolder:
    """The live knobs of one simulator (read by the server thread, set by a test's)."""

    def __init__(self, knobs: Knobs | None = None):
        self._lock = threading.Lock()
        self._knobs = knobs or Knobs()

    @property
    def current(self) -> Knobs:
        with self._lock:
            return self._knobs

    def replace_with(self, spec: Any) -> Knobs:
        knobs = parse_knobs(spec)  # parse first: a bad setting leaves the old one in place
        with self._lock:
            self._knobs = knobs
        return knobs
