"""Safe-mode previews: the request a state-changing action would send, shown instead of
sent (the dispatcher's safe-mode step). Never a secret: credentials are not part of it (the executor adds
them later), and every part of the request — path parameters, query, headers, JSON body,
multipart fields (JSON-encoded parts parsed and redacted inside) — goes through the one
redaction module (redact.py); file contents are described, not shown.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from ..build.schema import PATH
from ..text import escape
from ..text.redact import REQUEST, Rules
from ..text.render import Text, ToolResult, json_block
from .request import API_PREFIX, PreparedRequest


def _masked_path(action, req: PreparedRequest, rules: Rules, hidden: list[str]) -> str:
    """The request path with secret path parameters (a webhook token) masked."""
    template = action.path.split("/")
    filled = req.path.split("/")
    if len(template) != len(filled):
        return req.path
    args = {b.wire: b.arg for b in action.bindings if b.location == PATH}
    out = []
    for t, f in zip(template, filled, strict=True):
        if t.startswith("{") and t.endswith("}") and t[1:-1] in args:
            arg = args[t[1:-1]]
            r = rules.redact(unquote(f), at=(arg,), action_id=action.id, side=REQUEST, schema=action.input_schema)
            if r.paths:
                hidden += ["/path" + p for p in r.paths]
                f = quote(r.value, safe="[]:")
        out.append(f)
    return "/".join(out)


def describe(action, req: PreparedRequest, rules: Rules) -> dict:
    """The request as data: secrets masked, file contents described, and `masked` listing
    the pointers of what was hidden (list indexes and covered names as `*`)."""
    hidden: list[str] = []

    def red(value: Any, part: str, at: tuple = ()) -> Any:
        r = rules.redact(value, at=at, action_id=action.id, side=REQUEST, schema=action.input_schema)
        hidden.extend(f"/{part}{p}" for p in r.paths)
        return r.value

    out: dict[str, Any] = {"preview": True, "method": req.method,
                           "path": API_PREFIX + _masked_path(action, req, rules, hidden)}
    if req.query:
        out["query"] = [[k, red(v, "query", (k,))] for k, v in req.query]
    if req.headers:
        out["headers"] = {k: red(v, "headers", (k,)) for k, v in req.headers.items()}
    if req.cookies:
        out["cookies"] = {k: rules.marker for k in req.cookies}
        hidden += [f"/cookies/{k}" for k in req.cookies]
    if req.has_json_body:
        out["body"] = red(req.json_body, "body")
    if req.form_fields or req.files:
        parts: list[dict] = [{"name": k, "value": red(v, "multipart", (k,))} for k, v in req.form_fields]
        parts += [{"name": k, "filename": red(f, "multipart", (k, "filename")),
                   "contentType": red(ct, "multipart", (k, "contentType")), "bytes": len(data)}
                  for k, (f, data, ct) in req.files]
        out["multipart"] = parts
    if req.content is not None:
        out["content"] = {"contentType": red(req.content_type or "application/octet-stream", "content", ("contentType",)),
                          "bytes": len(req.content)}
    if hidden:
        out["masked"] = sorted(dict.fromkeys(hidden))
    return out


def preview(action, req: PreparedRequest, namer, catalog, confirmation=None):
    """The preview result: Markdown for the model, the masked request as structuredContent;
    for a destructive change, what the person would be asked and what it would affect
    (`confirmation`, interpreter/call/confirm.py) as a section and as `confirmation`."""
    data = describe(action, req, catalog.redaction)
    if confirmation is not None:
        data["confirmation"] = confirmation.as_dict()
    lines = [f"## Preview (safe mode): {escape.heading(action.title)}",
             (f"Nothing was changed in Arcane (only the question's reads were sent). With safe mode off, {namer(action.id)} would send:"
              if confirmation is not None else f"Nothing was sent to Arcane. With safe mode off, {namer(action.id)} would send:"),
             "",
             f"- method: {req.method}",
             escape.object_line("path", data["path"])]
    for k, v in data.get("query", []):
        lines.append(escape.object_line(f"query {k}", str(v)))
    for k, v in (data.get("headers") or {}).items():
        lines.append(escape.object_line(f"header {k}", str(v)))
    if "content" in data:
        lines.append(escape.object_line("body", f"{data['content']['bytes']} bytes of {data['content']['contentType']}"))
    if data.get("masked"):
        lines.append(escape.object_line("masked", ", ".join(data["masked"])))
    if "body" in data:
        lines += ["", "### body", json_block(data["body"], catalog.rendering.json_block_max).rstrip("\n")]
    if "multipart" in data:
        lines += ["", "### multipart parts", json_block(data["multipart"], catalog.rendering.json_block_max).rstrip("\n")]
    if confirmation is not None:
        lines += ["", "### What it would affect (read from Arcane just now; only reads were sent)",
                  confirmation.text()]
    lines += ["", "Credentials are added when the request is really sent; they are never shown."]
    return ToolResult.of(Text(body=lines), data)
