"""Safe-mode previews: the request a state-changing action would send, shown instead of
sent. Credentials are never part of it (the executor adds them later); fields that
rules/redaction.yaml calls secret are masked wherever they sit (query, headers, body,
multipart parts); file contents are described, not shown.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from . import escape
from .request import API_PREFIX, PreparedRequest

DEFAULT_MASK = "[secret]"


class SecretMatcher:
    """Field names that hold secrets (rules/redaction.yaml `secret_fields`)."""

    def __init__(self, rules: dict):
        patterns = rules.get("secret_fields") or []
        self.mask = rules.get("mask") or DEFAULT_MASK
        self._re = re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) if patterns else None

    def is_secret(self, name: str) -> bool:
        return bool(self._re is not None and self._re.fullmatch(str(name)))

    def mask_value(self, value: Any) -> Any:
        """Mask secret members at any depth."""
        if isinstance(value, dict):
            return {k: (self.mask if self.is_secret(k) and v not in (None, "", [], {}) else self.mask_value(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.mask_value(v) for v in value]
        return value


@lru_cache(maxsize=8)
def _matcher(key: str) -> SecretMatcher:
    return SecretMatcher(json.loads(key))


def matcher_for(catalog) -> SecretMatcher:
    return _matcher(json.dumps(catalog.redaction_rules or {}, sort_keys=True))


def describe(req: PreparedRequest, m: SecretMatcher) -> dict:
    """The request as data, secrets masked, file contents described."""
    out: dict[str, Any] = {"preview": True, "method": req.method, "path": API_PREFIX + req.path}
    if req.query:
        out["query"] = [[k, m.mask if m.is_secret(k) else v] for k, v in req.query]
    if req.headers:
        out["headers"] = {k: (m.mask if m.is_secret(k) or m.is_secret(k.replace("-", "")) else v) for k, v in req.headers.items()}
    if req.cookies:
        out["cookies"] = {k: m.mask for k in req.cookies}
    if req.has_json_body:
        out["body"] = m.mask_value(req.json_body)
    if req.form_fields or req.files:
        parts = [{"name": k, "value": m.mask if m.is_secret(k) else v} for k, v in req.form_fields]
        parts += [{"name": k, "filename": f, "contentType": ct, "bytes": len(data)} for k, (f, data, ct) in req.files]
        out["multipart"] = parts
    if req.content is not None:
        out["content"] = {"contentType": req.content_type or "application/octet-stream", "bytes": len(req.content)}
    return out


def preview(action, req: PreparedRequest, namer, catalog):
    from .render import ToolResult

    m = matcher_for(catalog)
    data = describe(req, m)
    lines = [f"## Preview (safe mode): {escape.heading(action.title)}",
             f"Nothing was sent to Arcane. With safe mode off, {namer(action.id)} would send:",
             "",
             f"- method: {req.method}",
             escape.object_line("path", data["path"])]
    for k, v in data.get("query", []):
        lines.append(escape.object_line(f"query {k}", str(v)))
    for k, v in (data.get("headers") or {}).items():
        lines.append(escape.object_line(f"header {k}", str(v)))
    if "body" in data:
        lines += ["", "### body", escape.fence(json.dumps(data["body"], indent=2, ensure_ascii=False, default=str), "json").rstrip("\n")]
    if "multipart" in data:
        lines += ["", "### multipart parts", escape.fence(json.dumps(data["multipart"], indent=2, ensure_ascii=False), "json").rstrip("\n")]
    if "content" in data:
        lines.append(escape.object_line("body", f"{data['content']['bytes']} bytes of {data['content']['contentType']}"))
    lines += ["", "Credentials are added when the request is really sent; they are never shown."]
    return ToolResult(escape.clean("\n".join(lines) + "\n"), data)
