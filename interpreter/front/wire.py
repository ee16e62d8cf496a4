"""A ToolResult on the MCP wire: the text for the assistant, downloads as embedded blobs for
the user, resource links; the same for a blocking call, a task's result and `interp call`."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import mcp.types as types

from ..text.render import ToolResult


def _attachments(result: ToolResult) -> list[Any]:
    """The content after the text: downloads as embedded blobs for the user, resource links."""
    content: list[Any] = []
    for blob in result.blobs:
        digest = hashlib.sha256(blob.data).hexdigest()[:16]
        content.append(types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri=f"arcane://download/{digest}/{blob.filename}", mime_type=blob.mime_type,
                                                blob=base64.b64encode(blob.data).decode("ascii")),
            annotations=types.Annotations(audience=["user"]),
        ))
    content += [types.ResourceLink(type="resource_link", uri=link.uri, name=link.name, title=link.title, mime_type=link.mime_type)
                for link in result.links]
    return content


def to_call_result(result: ToolResult) -> types.CallToolResult:
    content: list[Any] = [types.TextContent(type="text", text=result.text, annotations=types.Annotations(audience=["assistant"]))]
    content += _attachments(result)
    return types.CallToolResult(content=content, structured_content=result.structured, is_error=result.is_error)


def call_result(result: ToolResult) -> dict[str, Any]:
    """What a tools/call handler returns: the wire form of `to_call_result` as a mapping.
    The SDK validates and dumps a handler's answer itself; handing it a model would cost
    one more whole pass over structuredContent (a 50-item list: about half a millisecond),
    so the text part and the envelope are written here and only attachments go through
    the models. tests/test_surfaces.py checks it equals `result_wire`."""
    content: list[Any] = [{"type": "text", "text": result.text, "annotations": {"audience": ["assistant"]}}]
    content += [part.model_dump(by_alias=True, exclude_none=True, mode="json") for part in _attachments(result)]
    wire: dict[str, Any] = {"content": content, **_RESULT_DEFAULTS, "isError": result.is_error}
    if result.structured is not None:
        wire["structuredContent"] = result.structured
    return wire


# the members the SDK's model writes by default (e.g. resultType, which 2026-07-28 requires)
_RESULT_DEFAULTS = {k: v for k, v in types.CallToolResult(content=[]).model_dump(by_alias=True, exclude_none=True, mode="json").items()
                    if k != "content"}


def list_result(tools: list[dict[str, Any]], next_cursor: str | None = None) -> dict[str, Any]:
    """What a tools/list handler returns: `ListToolsResult(tools=...)`'s wire form as a
    mapping, for tools already in their wire form (surfaces.ToolSpec.as_wire). The SDK
    validates and dumps the answer against the negotiated version's schema either way;
    425 Tool models made first (the individual surface) cost about 7 ms of a start.
    tests/test_surfaces.py checks the SDK sends the same as for the model, in every version.
    `next_cursor`: the next page's (pages.py), on every page but the last."""
    answer = {**_LIST_DEFAULTS, "tools": tools}
    if next_cursor is not None:
        answer["nextCursor"] = next_cursor
    return answer


# the members the SDK's model writes by default (resultType, ttlMs, cacheScope: 2026-07-28 requires them)
_LIST_DEFAULTS = {k: v for k, v in types.ListToolsResult(tools=[]).model_dump(by_alias=True, exclude_none=True, mode="json").items()
                  if k != "tools"}


def result_wire(result: ToolResult) -> dict:
    return to_call_result(result).model_dump(by_alias=True, exclude_none=True, mode="json")


__all__ = ["call_result", "list_result", "result_wire", "to_call_result"]
