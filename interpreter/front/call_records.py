"""Call records (the audit log): one JSON line per tool call or resource read, to stderr
or a file, never stdout (stdout is the protocol in stdio mode). Argument names only, never
values.

Where they go is ARCANE_MCP_AUDIT_LOG: `stderr`, `off`, or a file path, exactly as the
operator says. Unset (`auto`), they go to stderr when stderr is not a terminal (an MCP
client, a service manager or a container runtime collects it), and to a per-user file
when it is one, so a person at a terminal (`interp call`) is not handed a JSON line per
call: `$XDG_STATE_HOME/arcane-mcp/audit.jsonl` (default `~/.local/state/…`). The process
that creates that file says so once (`notice`); later runs append silently.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import field, fields
from pathlib import Path
from typing import IO

from ..build.lazy_dataclass import dataclass
from ..errors import ConfigError
from .observe import Observer

AUTO = "auto"
SETTING = "ARCANE_MCP_AUDIT_LOG"


def default_file(env: Mapping[str, str] | None = None) -> Path:
    """The per-user audit file of `auto` at a terminal (XDG base directory: state)."""
    env = os.environ if env is None else env
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / "arcane-mcp" / "audit.jsonl"


def _open_append(path: Path) -> IO[str]:
    # owner-only: the records name the tools and actions a user ran
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)


@dataclass
class AuditRecord:
    surface: str
    tool: str
    action: str | None
    environment: str | None
    outcome: str  # executed | previewed | refused | declined | failed
    arguments: list[str] = field(default_factory=list)  # names only
    confirmation: str | None = None  # argument | elicitation | None
    http_status: int | None = None
    duration_ms: float = 0.0
    error_class: str | None = None
    activity: str | None = None  # the Arcane activity an operation stream started
    message: str | None = None  # what the record is, when not a tool call: "resource read"
    key: str | None = None  # HTTP mode: a short fingerprint of the client's Arcane key (never the key)
    time: str = ""


_FIELDS = fields(AuditRecord)


class AuditLog:
    """The audit destination of one process. `where` says where records go (`stderr`, `off`
    or a path); `notice` is the one line to show when `auto` just created the per-user file
    (or could not), else None. A path the operator named that cannot be opened is a
    ConfigError naming ARCANE_MCP_AUDIT_LOG."""

    def __init__(self, destination: str = AUTO, *, interactive: bool | None = None, env: Mapping[str, str] | None = None):
        self._lock = threading.Lock()
        self._stream: IO[str] | None = None
        self.notice: str | None = None
        auto = destination == AUTO
        if auto:
            interactive = sys.stderr.isatty() if interactive is None else interactive
            destination = str(default_file(env)) if interactive else "stderr"
        self.where = destination
        if destination == "stderr":
            self._stream = sys.stderr
        elif destination != "off":
            path = Path(destination).expanduser()
            created = not path.exists()
            try:
                if auto:
                    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._stream = _open_append(path)
            except OSError as exc:
                if not auto:
                    raise ConfigError(f"{SETTING}={destination!r} is invalid: cannot append to it ({exc.strerror or exc}); "
                                      "expected stderr, off or a writable file path", setting=SETTING) from None
                self.where = "off"
                self.notice = (f"audit records are off: {str(path)!r} cannot be written ({exc.strerror or exc}); "
                               f"set {SETTING} to stderr or a file path")
            else:
                if auto and created:
                    self.notice = f"audit records go to {str(path)!r} (set {SETTING} to stderr, off or a file path to change it)"
        self.records: list[dict] = []  # the last records, for tests and the catalog resource
        self._keep = 200
        self.observer = Observer()  # traces and metrics (observe.py): none unless a setting asks

    def for_key(self, fingerprint: str) -> KeyAudit:
        """This log as one key's server writes it: every record carries the key's fingerprint."""
        return KeyAudit(self, fingerprint)

    def write(self, record: AuditRecord) -> None:
        now = time.time()
        record.time = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        # a shallow copy: every field is a string, a number or the list of argument names
        # (copied), and asdict's deep walk costs more than the rest of the write
        data = {f.name: getattr(record, f.name) for f in _FIELDS if getattr(record, f.name) is not None}
        if "arguments" in data:
            data["arguments"] = list(data["arguments"])
        data = {"time": data.pop("time"), **data, "kind": "audit"}
        # with records off the line is never written: no JSON is made for it (the record is still kept)
        line = json.dumps(data, separators=(",", ":"), ensure_ascii=True) if self._stream is not None else None
        with self._lock:
            self.records.append(data)
            del self.records[: -self._keep]
            if self._stream is not None and line is not None:
                try:
                    self._stream.write(line + "\n")
                    self._stream.flush()
                except (OSError, ValueError):
                    pass
        if self.observer.on:  # the call's span and metrics take its outcome from here
            self.observer.observe(record)


class KeyAudit:
    """One HTTP client key's view of the process's audit log (AuditLog.for_key)."""

    def __init__(self, log: AuditLog, fingerprint: str):
        self.log = log
        self.fingerprint = fingerprint
        self.notice = None
        self.where = log.where
        self.observer = log.observer

    @property
    def records(self) -> list[dict]:
        return self.log.records

    def write(self, record: AuditRecord) -> None:
        record.key = self.fingerprint
        self.log.write(record)
