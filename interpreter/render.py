"""The text block of a result, and the names the server writes for actions.

Until the output-format work lands, a success's text is a one-line summary plus the
value as compact JSON (README says so); errors are plain text with a next step.
Action names follow the calling surface through a Namer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .response import Blob, Shaped

TEXT_JSON_CAP = 60_000


@dataclass(frozen=True)
class Namer:
    """Writes an action ID the way the calling surface accepts it."""

    surface: str

    def __call__(self, action_id: str) -> str:
        domain, name = action_id.split(".", 1)
        if self.surface == "meta":
            return f"arcane_{domain} (action `{name}`)"
        if self.surface == "individual":
            return f"arcane_{domain}_{name}"
        return action_id


@dataclass
class ToolResult:
    """A rendered result: what a tool call returns, whatever the transport."""

    text: str
    structured: dict | None = None
    is_error: bool = False
    blobs: list[Blob] = field(default_factory=list)
    error_code: str | None = None
    http_status: int | None = None


def _count_line(structured: dict) -> str:
    items = structured.get("items") or []
    p = structured.get("pagination") or {}
    line = f"{len(items)} item(s)"
    if isinstance(p, dict) and "totalItems" in p:
        line += f" — {p.get('totalItems')} total, page {p.get('currentPage', 1)} of {p.get('totalPages', 1)}"
    return line


def render_success(action_id: str, title: str, shaped: Shaped, namer: Namer) -> ToolResult:
    head = f"{title} ({namer(action_id)})"
    if shaped.kind == "list":
        head += f": {_count_line(shaped.structured or {})}"
    if shaped.kind == "text":
        meta = shaped.structured or {}
        body = f"{head}\nfile: {meta.get('filename')}, {meta.get('size')} bytes, {meta.get('contentType')}"
        for note in shaped.notes:
            body += f"\nnote: {note}"
        fence = "```"
        while fence in (shaped.text or ""):
            fence += "`"
        body += f"\n{fence}\n{shaped.text or ''}\n{fence}"
        return ToolResult(body, shaped.structured, http_status=shaped.http_status)
    if shaped.kind == "binary":
        meta = shaped.structured or {}
        body = f"{head}\nfile: {meta.get('filename')}, {meta.get('size')} bytes, {meta.get('contentType')} (attached as a resource for the user)"
        return ToolResult(body, shaped.structured, blobs=[shaped.blob] if shaped.blob else [], http_status=shaped.http_status)
    data = json.dumps(shaped.structured, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(data) > TEXT_JSON_CAP:
        data = data[:TEXT_JSON_CAP] + f"… (cut at {TEXT_JSON_CAP} characters; structuredContent has the whole value)"
    return ToolResult(f"{head}\n{data}", shaped.structured, http_status=shaped.http_status)


def render_error(message: str, next_step: str | None, *, code: str, status: int | None = None) -> ToolResult:
    text = f"Error: {message.strip()}"
    if next_step:
        text += f"\nNext step: {next_step.strip()}"
    return ToolResult(text, None, is_error=True, error_code=code, http_status=status)


def render_plain(text: str, structured: dict | None = None) -> ToolResult:
    return ToolResult(text, structured)
