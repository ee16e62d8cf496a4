"""Fault knobs: what can go wrong on purpose, set from the state file's `faults:` section
or at runtime through `PUT /_sim/faults` / `Simulator.set_faults`.

Every knob accepts a shorthand or a full rule (or a list of rules):

    latency:      0.5            | {seconds: 0.5, match: "container.*", count: 2}
    error_5xx:    503            | {status: 502, match: "/environments/*/images*", count: 1, detail: "…"}
    drop:         true           | {match: "image.pull", count: 1}
    malformed:    true           | {match: "container.list"}
    ndjson_error: true | "text"  | {message: "pull access denied", match: "image.pull"}
    daemon_down:  "0"            | ["0", "<environment id>"]

`match` is one glob or a list: a glob starting with "/" is matched against the request
path (after /api, and the full path), any other against the action ID. No `match` means
every request. `count` limits a rule to the next N matching requests; the rule goes away
once used up. Rules are plain frozen values; `Faults` holds them behind a lock because
tests change them from another thread while the server runs.
"""

from __future__ import annotations

import fnmatch
import threading
from dataclasses import dataclass, field, replace
from typing import Any

KNOBS = ("latency", "error_5xx", "drop", "malformed", "ndjson_error", "daemon_down")


class FaultError(ValueError):
    """A fault specification is malformed (the message says which knob and why)."""


@dataclass(frozen=True)
class FaultRule:
    knob: str
    match: tuple[str, ...] = ()
    count: int | None = None  # remaining uses; None = unlimited
    seconds: float = 0.0  # latency
    status: int = 500  # error_5xx
    message: str = ""  # error_5xx detail, ndjson_error line

    def matches(self, action_id: str | None, api_path: str, full_path: str) -> bool:
        if not self.match:
            return True
        for glob in self.match:
            if glob.startswith("/"):
                if fnmatch.fnmatchcase(api_path, glob) or fnmatch.fnmatchcase(full_path, glob):
                    return True
            elif action_id is not None and fnmatch.fnmatchcase(action_id, glob):
                return True
        return False

    def as_dict(self) -> dict:
        d: dict[str, Any] = {}
        if self.match:
            d["match"] = list(self.match)
        if self.count is not None:
            d["count"] = self.count
        if self.knob == "latency":
            d["seconds"] = self.seconds
        elif self.knob == "error_5xx":
            d["status"] = self.status
            if self.message:
                d["detail"] = self.message
        elif self.knob == "ndjson_error" and self.message:
            d["message"] = self.message
        return d


@dataclass(frozen=True)
class Decision:
    """What the faults say about one request (consumed rules already counted down)."""

    latency: float = 0.0
    error_status: int | None = None
    error_detail: str = ""
    drop: bool = False
    malformed: bool = False
    ndjson_error: str | None = None


def _globs(value: Any, knob: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise FaultError(f"{knob}.match must be a glob or a list of globs, not {value!r}")


def _count(value: Any, knob: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FaultError(f"{knob}.count must be a positive integer, not {value!r}")
    return value


_RULE_KEYS = {
    "latency": {"seconds", "match", "count"},
    "error_5xx": {"status", "match", "count", "detail"},
    "drop": {"match", "count"},
    "malformed": {"match", "count"},
    "ndjson_error": {"message", "match", "count"},
}


def _rule(knob: str, spec: Any) -> FaultRule | None:
    """One rule from its shorthand or mapping form; None when the knob is switched off."""
    if spec is None or spec is False:
        return None
    if knob == "latency":
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            spec = {"seconds": spec}
    elif knob == "error_5xx":
        if spec is True:
            spec = {"status": 500}
        elif isinstance(spec, int) and not isinstance(spec, bool):
            spec = {"status": spec}
    elif knob == "ndjson_error":
        if spec is True:
            spec = {}
        elif isinstance(spec, str):
            spec = {"message": spec}
    elif spec is True:
        spec = {}
    if not isinstance(spec, dict):
        raise FaultError(f"{knob}: expected a mapping or the knob's shorthand, not {spec!r}")
    unknown = set(spec) - _RULE_KEYS[knob]
    if unknown:
        raise FaultError(f"{knob}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: {', '.join(sorted(_RULE_KEYS[knob]))}")
    rule = FaultRule(knob, match=_globs(spec.get("match"), knob), count=_count(spec.get("count"), knob))
    if knob == "latency":
        seconds = spec.get("seconds", 0)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise FaultError(f"latency.seconds must be a non-negative number, not {seconds!r}")
        rule = replace(rule, seconds=float(seconds))
    elif knob == "error_5xx":
        status = spec.get("status", 500)
        if isinstance(status, bool) or not isinstance(status, int) or not 500 <= status <= 599:
            raise FaultError(f"error_5xx.status must be an integer from 500 to 599, not {status!r}")
        rule = replace(rule, status=status, message=str(spec.get("detail", "")))
    elif knob == "ndjson_error":
        rule = replace(rule, message=str(spec.get("message", "")))
    return rule


def parse_faults(spec: Any) -> tuple[tuple[FaultRule, ...], tuple[str, ...]]:
    """(rules, daemon-down environment IDs) from a `faults:` mapping; FaultError if malformed."""
    if spec is None:
        return (), ()
    if not isinstance(spec, dict):
        raise FaultError(f"faults must be a mapping of knob -> setting, not {type(spec).__name__}")
    unknown = set(spec) - set(KNOBS)
    if unknown:
        raise FaultError(f"unknown fault knob(s) {', '.join(sorted(map(str, unknown)))}; known: {', '.join(KNOBS)}")
    rules: list[FaultRule] = []
    down: tuple[str, ...] = ()
    for knob in KNOBS:
        if knob not in spec:
            continue
        value = spec[knob]
        if knob == "daemon_down":
            if value in (None, False):
                continue
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                down = (str(value),)
            elif isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
                down = tuple(str(v) for v in value)
            else:
                raise FaultError(f"daemon_down must be an environment ID or a list of them, not {value!r}")
            continue
        for item in value if isinstance(value, list) else [value]:
            r = _rule(knob, item)
            if r is not None:
                rules.append(r)
    return tuple(rules), down


@dataclass
class Faults:
    """The live fault settings of one simulator (thread-safe)."""

    rules: tuple[FaultRule, ...] = ()
    daemon_down: tuple[str, ...] = ()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def from_spec(cls, spec: Any) -> "Faults":
        rules, down = parse_faults(spec)
        return cls(rules, down)

    def replace_with(self, spec: Any) -> None:
        rules, down = parse_faults(spec)  # parse first: a bad spec leaves the old one in place
        with self._lock:
            self.rules, self.daemon_down = rules, down

    def as_dict(self) -> dict:
        with self._lock:
            out: dict[str, Any] = {}
            for r in self.rules:
                out.setdefault(r.knob, []).append(r.as_dict())
            if self.daemon_down:
                out["daemon_down"] = list(self.daemon_down)
            return out

    def is_down(self, environment: str | None) -> bool:
        with self._lock:
            return environment is not None and environment in self.daemon_down

    def decide(self, action_id: str | None, api_path: str, full_path: str, *, streaming: bool) -> Decision:
        """Apply every matching rule once (counting down limited ones) and say what to do.

        `ndjson_error` rules are only consumed by streaming operations, so a limited rule
        is not used up by the unrelated requests that come before the stream.
        """
        latency = 0.0
        error_status, error_detail = None, ""
        drop = malformed = False
        ndjson_error = None
        kept: list[FaultRule] = []
        with self._lock:
            for r in self.rules:
                applies = r.matches(action_id, api_path, full_path) and (r.knob != "ndjson_error" or streaming)
                used = False
                if applies:
                    used = True
                    if r.knob == "latency":
                        latency += r.seconds
                    elif r.knob == "error_5xx" and error_status is None:
                        error_status, error_detail = r.status, r.message
                    elif r.knob == "drop":
                        drop = True
                    elif r.knob == "malformed":
                        malformed = True
                    elif r.knob == "ndjson_error" and ndjson_error is None:
                        ndjson_error = r.message
                    else:
                        used = False  # shadowed by an earlier rule of the same knob: keep it whole
                if used:
                    if r.count is not None:
                        if r.count > 1:
                            kept.append(replace(r, count=r.count - 1))
                        continue
                kept.append(r)
            self.rules = tuple(kept)
        return Decision(latency, error_status, error_detail, drop, malformed, ndjson_error)
