"""Fault knobs: what can go wrong on purpose, set from the state file's `faults:` section
or at runtime through `PUT /_sim/faults` / `Simulator.set_faults`.

Every knob accepts a shorthand or a full rule (or a list of rules):

    latency:      0.5            | {seconds: 0.5, match: "container.*", count: 2}
    error_5xx:    503            | {status: 502, match: "/environments/*/images*", count: 1, detail: "…"}
    drop:         true           | {match: "image.pull", count: 1, after: 3}
    malformed:    true           | {match: "container.list"}
    ndjson_error: true | "text"  | {message: "pull access denied", match: "pull-image"}
    stall:        40             | {seconds: 40, after: 2, match: "pull-image", count: 1}
    ws_refuse:    401            | {status: 403, match: "ws-container-logs", count: 1}
    daemon_down:  "0"            | ["0", "<environment id>"] | {"0": cached, "<env>": cold}
    agent_down:   "<env id>"     | ["<env id>", …]
    answer:       {set: {success: false, errors: ["…"]}, remove: [id], match: "system-prune", count: 1}

`match` is one glob or a list: a glob starting with "/" is matched against the request
path (after /api, and the full path), any other against the operationId (or a label the
caller gave the operation, such as the engine's action ID). No `match` means every
request. `count` limits a rule to the next N matching requests; the rule goes away
once used up. `drop` with `after: N` lets a stream (NDJSON lines, the live channel, a
WebSocket's frames) send N frames first, then cuts the connection (no close frame); `stall`
applies to those streams too; `ws_refuse` refuses a WebSocket upgrade with the answer
Arcane gives for that status (401 no credential, 403 permission denied, 429 too many
system-stats sockets). `answer` lets the operation run as usual, then changes its JSON
answer after the simulator checked it against the document: `set` lays members over the
answer's value (the envelope's data object, or the body) and `remove` takes members out —
an answer that reports its own failure, or one that breaks Arcane's contract on purpose
(how the engine reads an outcome is tested with it). WebSocket routes are matched by their route name (`ws-…`), a
label the caller gave it, or a /path glob. Rules are plain frozen values; `Faults` holds them behind a lock because
tests change them from another thread while the server runs.
"""

from __future__ import annotations

import copy
import fnmatch
import threading
from dataclasses import dataclass, field, replace
from typing import Any

KNOBS = ("latency", "error_5xx", "drop", "malformed", "ndjson_error", "stall", "ws_refuse", "answer", "daemon_down", "agent_down")
WS_REFUSALS = (401, 403, 429)
STREAM_ONLY = ("ndjson_error", "stall", "ws_refuse")  # used up by streams (or sockets) only
DAEMON_MODES = ("cold", "cached")


class FaultError(ValueError):
    """A fault specification is malformed (the message says which knob and why)."""


@dataclass(frozen=True)
class FaultRule:
    knob: str
    match: tuple[str, ...] = ()
    count: int | None = None  # remaining uses; None = unlimited
    seconds: float = 0.0  # latency
    status: int = 500  # error_5xx, ws_refuse
    message: str = ""  # error_5xx detail, ndjson_error line
    after: int = 1  # stall: frames written before the silence; drop: frames before the cut (0: none)
    set_members: tuple[tuple[str, Any], ...] = ()  # answer: members laid over the answer's value
    remove: tuple[str, ...] = ()  # answer: members taken out of it

    def matches(self, names: tuple[str, ...], api_path: str, full_path: str) -> bool:
        if not self.match:
            return True
        for glob in self.match:
            if glob.startswith("/"):
                if fnmatch.fnmatchcase(api_path, glob) or fnmatch.fnmatchcase(full_path, glob):
                    return True
            elif any(fnmatch.fnmatchcase(n, glob) for n in names):
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
        elif self.knob == "stall":
            d["seconds"] = self.seconds
            d["after"] = self.after
        elif self.knob == "drop" and self.after:
            d["after"] = self.after
        elif self.knob == "ws_refuse":
            d["status"] = self.status
        elif self.knob == "answer":
            if self.set_members:
                d["set"] = dict(self.set_members)
            if self.remove:
                d["remove"] = list(self.remove)
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
    stall: tuple[float, int] | None = None  # (seconds of silence, frames before it)
    drop_after: int = 0  # with drop: frames a stream sends before the cut
    ws_refuse: int | None = None  # the status a WebSocket upgrade is refused with
    answer: FaultRule | None = None  # the `answer` rule that changes a JSON answer

    def change_answer(self, body: Any, data_member: str) -> Any:
        """The JSON answer with the `answer` rule applied to its value (`data_member` of an
        envelope, else the body); unchanged without one or when the value is no object."""
        rule = self.answer
        if rule is None or not isinstance(body, dict):
            return body
        holder = body.get(data_member) if isinstance(body.get(data_member), dict) else body
        value = {k: v for k, v in holder.items() if k not in rule.remove}
        value.update(copy.deepcopy(dict(rule.set_members)))
        if holder is body:
            return value
        return {**body, data_member: value}


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
    "drop": {"match", "count", "after"},
    "malformed": {"match", "count"},
    "ndjson_error": {"message", "match", "count"},
    "stall": {"seconds", "after", "match", "count"},
    "ws_refuse": {"status", "match", "count"},
    "answer": {"set", "remove", "match", "count"},
}


def _rule(knob: str, spec: Any) -> FaultRule | None:
    """One rule from its shorthand or mapping form; None when the knob is switched off."""
    if spec is None or spec is False:
        return None
    if knob in ("latency", "stall"):
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
    elif knob == "ws_refuse":
        if spec is True:
            spec = {"status": 401}
        elif isinstance(spec, int) and not isinstance(spec, bool):
            spec = {"status": spec}
    elif spec is True:
        spec = {}
    if not isinstance(spec, dict):
        raise FaultError(f"{knob}: expected a mapping or the knob's shorthand, not {spec!r}")
    unknown = set(spec) - _RULE_KEYS[knob]
    if unknown:
        raise FaultError(f"{knob}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: {', '.join(sorted(_RULE_KEYS[knob]))}")
    rule = FaultRule(knob, match=_globs(spec.get("match"), knob), count=_count(spec.get("count"), knob))
    if knob == "answer":
        members, remove = spec.get("set", {}), spec.get("remove", [])
        if not isinstance(members, dict) or not all(isinstance(k, str) for k in members):
            raise FaultError(f"answer.set must be a mapping of member -> value, not {members!r}")
        if not isinstance(remove, list) or not all(isinstance(k, str) for k in remove):
            raise FaultError(f"answer.remove must be a list of member names, not {remove!r}")
        if not members and not remove:
            raise FaultError("answer needs `set` or `remove` (or both)")
        return replace(rule, set_members=tuple(copy.deepcopy(members).items()), remove=tuple(remove))
    if knob in ("latency", "stall"):
        rule = replace(rule, seconds=float(_bounded(spec, knob, "seconds", 0, 0, integer=False, what="a non-negative number")))
        if knob == "stall":
            rule = replace(rule, after=_bounded(spec, knob, "after", 1, 1, what="a positive integer (frames before the silence)"))
    elif knob == "error_5xx":
        status = _bounded(spec, knob, "status", 500, 500, 599, what="an integer from 500 to 599")
        rule = replace(rule, status=status, message=str(spec.get("detail", "")))
    elif knob == "ndjson_error":
        rule = replace(rule, message=str(spec.get("message", "")))
    elif knob == "drop":
        rule = replace(rule, after=_bounded(spec, knob, "after", 0, 0, what="a non-negative integer (frames a stream sends before the cut)"))
    elif knob == "ws_refuse":
        status = spec.get("status", 401)
        if status not in WS_REFUSALS:
            raise FaultError(f"ws_refuse.status must be one of {', '.join(map(str, WS_REFUSALS))}, not {status!r}")
        rule = replace(rule, status=status)
    return rule


def _bounded(spec: dict, knob: str, key: str, default: int, low: int, high: int | None = None, *, integer: bool = True,
             what: str) -> int | float:
    """`spec[key]` (or `default`): a number (an integer when `integer`), never a bool,
    from `low` to `high`; else FaultError naming `knob.key` and `what` it must be."""
    value = spec.get(key, default)
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < low or (high is not None and value > high):
        raise FaultError(f"{knob}.{key} must be {what}, not {value!r}")
    return value


def _environments(knob: str, value: Any, modes: bool) -> dict[str, str]:
    """Environment IDs (-> daemon mode) from a knob's shorthand, list or mapping."""
    if value in (None, False):
        return {}
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return {str(value): "cold"}
    if isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return {str(v): "cold" for v in value}
    if modes and isinstance(value, dict) and all(m in DAEMON_MODES for m in value.values()):
        return {str(k): str(m) for k, m in value.items()}
    form = "an environment ID, a list of them" + (f", or a mapping of them to {' or '.join(DAEMON_MODES)}" if modes else "")
    raise FaultError(f"{knob} must be {form}, not {value!r}")


def parse_faults(spec: Any) -> tuple[tuple[FaultRule, ...], dict[str, str], tuple[str, ...]]:
    """(rules, daemon-down environment -> mode, agent-down environments) from a `faults:`
    mapping; FaultError if malformed."""
    if spec is None:
        return (), {}, ()
    if not isinstance(spec, dict):
        raise FaultError(f"faults must be a mapping of knob -> setting, not {type(spec).__name__}")
    unknown = set(spec) - set(KNOBS)
    if unknown:
        raise FaultError(f"unknown fault knob(s) {', '.join(sorted(map(str, unknown)))}; known: {', '.join(KNOBS)}")
    rules: list[FaultRule] = []
    down: dict[str, str] = {}
    agents: tuple[str, ...] = ()
    for knob in KNOBS:
        if knob not in spec:
            continue
        value = spec[knob]
        if knob == "daemon_down":
            down = _environments(knob, value, modes=True)
            continue
        if knob == "agent_down":
            agents = tuple(_environments(knob, value, modes=False))
            continue
        for item in value if isinstance(value, list) else [value]:
            r = _rule(knob, item)
            if r is not None:
                rules.append(r)
    return tuple(rules), down, agents


@dataclass
class Faults:
    """The live fault settings of one simulator (thread-safe)."""

    rules: tuple[FaultRule, ...] = ()
    daemon_down: dict = field(default_factory=dict)  # environment -> cold | cached
    agent_down: tuple[str, ...] = ()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def from_spec(cls, spec: Any) -> Faults:
        rules, down, agents = parse_faults(spec)
        return cls(rules, down, agents)

    def replace_with(self, spec: Any) -> None:
        rules, down, agents = parse_faults(spec)  # parse first: a bad spec leaves the old one in place
        with self._lock:
            self.rules, self.daemon_down, self.agent_down = rules, down, agents

    def as_dict(self) -> dict:
        with self._lock:
            out: dict[str, Any] = {}
            for r in self.rules:
                out.setdefault(r.knob, []).append(r.as_dict())
            if self.daemon_down:
                modes = set(self.daemon_down.values())
                out["daemon_down"] = list(self.daemon_down) if modes == {"cold"} else dict(self.daemon_down)
            if self.agent_down:
                out["agent_down"] = list(self.agent_down)
            return out

    def down_mode(self, environment: str | None) -> str | None:
        """cold | cached when that environment's Docker daemon is down, else None."""
        with self._lock:
            return self.daemon_down.get(environment) if environment is not None else None

    def is_agent_down(self, environment: str | None) -> bool:
        with self._lock:
            return environment is not None and environment in self.agent_down

    def decide(self, names: tuple[str, ...], api_path: str, full_path: str, *, streaming: bool, websocket: bool = False) -> Decision:
        """Apply every matching rule once (counting down limited ones) and say what to do.

        `ndjson_error`, `stall` and `ws_refuse` rules are only consumed by streams (and
        `ws_refuse` by WebSocket upgrades), so a limited rule is not used up by the
        unrelated requests that come before the stream.
        """
        latency = 0.0
        error_status, error_detail = None, ""
        drop = malformed = False
        drop_after = 0
        ndjson_error = None
        stall = None
        refuse = None
        answer = None
        kept: list[FaultRule] = []
        with self._lock:
            for r in self.rules:
                applies = r.matches(names, api_path, full_path) and (r.knob not in STREAM_ONLY or streaming) \
                    and (r.knob != "ws_refuse" or websocket)
                used = False
                if applies:
                    used = True
                    if r.knob == "latency":
                        latency += r.seconds
                    elif r.knob == "error_5xx" and error_status is None:
                        error_status, error_detail = r.status, r.message
                    elif r.knob == "drop" and not drop:
                        drop, drop_after = True, r.after
                    elif r.knob == "malformed":
                        malformed = True
                    elif r.knob == "ndjson_error" and ndjson_error is None:
                        ndjson_error = r.message
                    elif r.knob == "stall" and stall is None:
                        stall = (r.seconds, r.after)
                    elif r.knob == "ws_refuse" and refuse is None:
                        refuse = r.status
                    elif r.knob == "answer" and answer is None:
                        answer = r
                    else:
                        used = False  # shadowed by an earlier rule of the same knob: keep it whole
                if used and r.count is not None:
                    if r.count > 1:
                        kept.append(replace(r, count=r.count - 1))
                    continue
                kept.append(r)
            self.rules = tuple(kept)
        return Decision(latency, error_status, error_detail, drop, malformed, ndjson_error, stall, drop_after, refuse, answer)
