"""Audit records: one JSON line per tool call or resource read, to stderr or a file,
never stdout (stdout is the protocol in stdio mode). Argument names only, never values."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import IO, Any


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
    time: str = ""


class AuditLog:
    def __init__(self, destination: str = "stderr"):
        self._lock = threading.Lock()
        self._stream: IO[str] | None
        if destination == "off":
            self._stream = None
        elif destination == "stderr":
            self._stream = sys.stderr
        else:
            self._stream = open(destination, "a", encoding="utf-8", buffering=1)
        self.records: list[dict] = []  # the last records, for tests and the catalog resource
        self._keep = 200

    def write(self, record: AuditRecord) -> None:
        now = time.time()
        record.time = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        data = {k: v for k, v in asdict(record).items() if v is not None}
        data = {"time": data.pop("time"), **data, "kind": "audit"}
        line = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
        with self._lock:
            self.records.append(data)
            del self.records[: -self._keep]
            if self._stream is not None:
                try:
                    self._stream.write(line + "\n")
                    self._stream.flush()
                except (OSError, ValueError):
                    pass
