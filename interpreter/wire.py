"""A ToolResult on the MCP wire: the text for the assistant, downloads as embedded blobs for
the user, resource links; the same for a blocking call, a task's result and `interp call`."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import mcp.types as types

from .render import ToolResult


def to_call_result(result: ToolResult) -> types.CallToolResult:
    content: list[Any] = [types.TextContent(type="text", text=result.text, annotations=types.Annotations(audience=["assistant"]))]
    for _, blob in enumerate(result.blobs):
        digest = hashlib.sha256(blob.data).hexdigest()[:16]
        content.append(types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri=f"arcane://download/{digest}/{blob.filename}", mime_type=blob.mime_type,
                                                blob=base64.b64encode(blob.data).decode("ascii")),
            annotations=types.Annotations(audience=["user"]),
        ))
    content += [types.ResourceLink(type="resource_link", uri=link.uri, name=link.name, title=link.title, mime_type=link.mime_type)
                for link in result.links]
    return types.CallToolResult(content=content, structured_content=result.structured, is_error=result.is_error)


def result_wire(result: ToolResult) -> dict:
    return to_call_result(result).model_dump(by_alias=True, exclude_none=True, mode="json")


__all__ = ["result_wire", "to_call_result"]
