"""tools/list in pages: a list longer than ARCANE_MCP_TOOLS_PAGE_BYTES (the tools' compact
JSON) is cut into pages, each answered with the `nextCursor` of the next one.

A client's SSE reader may refuse one event above 1 MiB (the Python SDK's and fastmcp's
clients do), and the individual surface with output schemas is past it in one answer. The
pages are cut in the list's own order, always at the same places for the same list, and a
page holds at least one tool (a tool longer than the budget is a page of its own).

A cursor is `<tag>.<page>`: `tag` is a digest of the listed tools (their wire form, after
the dialect) and of the budget, so it names exactly what was listed and carries nothing
else: no secret, nothing a client could learn from it that the list did not say. A cursor
of another list (another surface, dialect, credential's view, or the list before a change)
names a tag this list does not have and is refused with -32602 (`data.field` "cursor"),
as is one that is not of that form; the client lists again from the start. The same list
served by another replica, or after a restart, has the same tag: its cursors go on there.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from mcp import MCPError
from mcp.types import INVALID_PARAMS

from ..build.lazy_dataclass import dataclass

TAG_CHARS = 24  # hex digits of the listing's digest a cursor carries
CURSOR_MAX = TAG_CHARS + 8  # a longer cursor is refused before it is looked at
_CURSOR = re.compile(rf"([0-9a-f]{{{TAG_CHARS}}})\.([1-9][0-9]{{0,5}})")


@dataclass(frozen=True)
class Pages:
    """One listing cut into pages: `starts[i]` is the index of page i's first tool."""

    tools: list[dict[str, Any]]
    starts: tuple[int, ...]
    tag: str
    sizes: tuple[int, ...]  # each page's bytes (its tools as a compact JSON array)

    def page(self, number: int) -> tuple[list[dict[str, Any]], str | None]:
        """The tools of page `number` and the cursor of the next page (None on the last)."""
        end = self.starts[number + 1] if number + 1 < len(self.starts) else len(self.tools)
        more = f"{self.tag}.{number + 1}" if number + 1 < len(self.starts) else None
        return self.tools[self.starts[number]:end], more


def _wire(tool: dict[str, Any]) -> bytes:
    """A tool as compact JSON with non-ASCII characters escaped: never fewer bytes than the
    SDK writes for it (UTF-8), and faster to make."""
    return json.dumps(tool, separators=(",", ":")).encode("ascii")


def cut(tools: list[dict[str, Any]], budget: int) -> Pages:
    """The listing in pages of at most `budget` bytes each (the tools as a JSON array)."""
    digest = hashlib.sha256(f"{budget}\n".encode())
    starts, sizes, used = [0], [], 2  # "[" and "]"
    for i, tool in enumerate(tools):
        wire = _wire(tool)
        digest.update(wire + b"\n")
        size = len(wire)
        extra = size + (1 if i > starts[-1] else 0)  # the comma before every tool but a page's first
        if i > starts[-1] and used + extra > budget:
            starts.append(i)
            sizes.append(used)
            used, extra = 2, size
        used += extra
    sizes.append(used)
    return Pages(tools, tuple(starts), digest.hexdigest()[:TAG_CHARS], tuple(sizes))


REASONS = {
    "not_a_cursor": "not a cursor this server hands out",
    "other_list": "a cursor of another tool list (the list changed since, or it is another view's)",
    "no_such_page": "no such page of this tool list",
}


def refused(reason: str) -> MCPError:
    """tools/list's -32602 for a cursor: `data.field` "cursor", `data.reason` a key of REASONS."""
    return MCPError(code=INVALID_PARAMS, message=f"invalid params of tools/list: cursor: {REASONS[reason]}; list again without a cursor",
                    data={"field": "cursor", "reason": reason})


def page_number(pages: Pages, cursor: str | None) -> int:
    """The page a request's cursor names (0 without one); MCPError -32602 for any cursor
    this listing did not hand out."""
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or len(cursor) > CURSOR_MAX:
        raise refused("not_a_cursor")
    m = _CURSOR.fullmatch(cursor)
    if m is None:
        raise refused("not_a_cursor")
    if m.group(1) != pages.tag:
        raise refused("other_list")
    number = int(m.group(2))
    if number >= len(pages.starts):
        raise refused("no_such_page")
    return number


__all__ = ["CURSOR_MAX", "REASONS", "Pages", "cut", "page_number"]
