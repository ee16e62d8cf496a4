"""The text block of a result: Markdown sized for a model (docs/escaping.md for its values).

structuredContent keeps Arcane's value unchanged; the text never repeats the JSON but says
what it leaves out (columns, rows, fields) and where to find it. Every value from Arcane
goes through escape.py for the context it lands in, and the finished text through the
control filter once more. Which fields matter and every size limit are data
(rules/rendering.yaml and the overlays' columns/empty/item_action, compiled); the member
names of the envelope and of pagination are catalog/conventions.yaml's. This module only
knows the shapes.

A result's text has parts (`Text`: title, outcome, notes, body, next steps, closing lines;
an error's message and next step) and one writer, `write`: the dispatcher's notes, a
handler's closing line and the parts a surface sent as null are added to the parts
(`ToolResult.note`, `ToolResult.close`) and the text is written again, never spliced.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import field
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from ..build.lazy_dataclass import dataclass
from ..build.model import Column, Template
from ..build.schema import CLIENT_FILTER
from ..call.outcome import Required, Verdict, judge
from ..call.response import Blob, Shaped
from ..errors import ResultFailed
from ..front.names import Namer
from ..memo import keep
from ..memo import table as memo_table
from . import escape


@dataclass(frozen=True)
class Named:
    """An action as the calling surface names it (`Namer`): the server's own Markdown (the
    meta surface's name holds a code span), placed as written, never escaped."""

    text: str


@dataclass(frozen=True)
class Note:
    """A note the engine adds to a result, in pieces: raw text (escaped where the note
    lands) and the actions it names (`Named`, placed as written), so a name's Markdown is
    never escaped into backslashes and no raw text forms Markdown."""

    pieces: tuple[str | Named, ...]

    @classmethod
    def of(cls, *pieces: str | Named) -> Note:
        return cls(tuple(pieces))

    def plain(self) -> str:
        """The note as plain text (an error's): the pieces joined, whitespace runs made one space."""
        return " ".join("".join(p if isinstance(p, str) else p.text for p in self.pieces).split())

    def markdown(self) -> str:
        """The note as one line of Markdown: each raw piece escaped (strict: the next piece
        follows it on the line), its surrounding spaces kept; each name as written."""
        out = []
        for p in self.pieces:
            if isinstance(p, Named):
                out.append(" ".join(p.text.split()))
                continue
            text = " ".join(p.split())
            if not text:
                out.append(" " if p else "")
                continue
            lead = " " if p[:1].isspace() else ""
            trail = " " if p[-1:].isspace() else ""
            out.append(lead + escape.inline(text, strict=True) + trail)
        return "".join(out)


def note_markdown(note: str | Note) -> str:
    """A note (raw text, or a Note in pieces) as one line of Markdown."""
    return note.markdown() if isinstance(note, Note) else escape.inline(note, strict=True)


def note_plain(note: str | Note) -> str:
    """A note as plain text (an error's)."""
    return note.plain() if isinstance(note, Note) else " ".join(note.split())


@dataclass
class Text:
    """What a result's text says, part by part: `write` makes from it the one text a client
    reads, so a part added later (the dispatcher's notes, a handler's closing line, the parts
    sent as null) is a field here, never spliced into written Markdown.

    Values from Arcane or the caller are kept raw where the writer escapes them (title,
    outcome, notes, error, hint); the lines are written already, by the renderer that made
    them from escape.py's functions, and the writer passes them once more through the
    control filter."""

    title: str | None = None  # a Markdown result's title: its first line "## <title>" (raw)
    outcome: str | None = None  # a success that partly failed: what failed (raw; the first line says it)
    notes: list[str | Note] = field(default_factory=list)  # the dispatcher's notes (a name resolved to an ID...), after the first line (raw, or a Note)
    body: list[str] = field(default_factory=list)  # the lines after the title, or the whole text of a result without one (written)
    next_steps: list[str] = field(default_factory=list)  # a success's next steps (written)
    closing: list[list[str]] = field(default_factory=list)  # blocks after everything (a handler's closing line, parts sent as null; written)
    error: str | None = None  # an error's message (raw): the text is "Error: <error>", plain, no Markdown
    hint: str | None = None  # an error's next step (raw)
    end: bool = True  # the text ends with a newline (an error's without notes does not)


def write(t: Text) -> str:
    """The text a client reads, from the model: one writer for every result."""
    if t.error is not None:
        # errors are plain text: the control filter is all they need
        lines = [escape.clean(f"Error: {t.error.strip()}")]
        lines += [escape.clean("Note: " + note_plain(n)) for n in t.notes]
        if t.hint:
            lines.append(escape.clean(f"Next step: {t.hint.strip()}"))
        return "\n".join(lines) + ("\n" if t.notes and not t.hint else "")
    lines = ([f"## {escape.heading(t.title)}"] if t.title is not None else []) + t.body
    if t.next_steps:
        lines += ["", "### Next steps", *t.next_steps]
    for block in t.closing:
        lines += ["", *block]
    text = "\n".join(lines)
    text = escape.clean(text.rstrip("\n") + "\n") if t.end else escape.clean(text)
    if t.notes:
        head, sep, rest = text.partition("\n")
        if head.startswith("## "):
            notes = ["Note: " + note_markdown(n) for n in t.notes]
            text = head + "\n\n" + "\n".join(notes) + "\n" + (sep + rest if rest else "")
        else:  # a text without a heading is plain, as an error's
            notes = [escape.clean("Note: " + note_plain(n)) for n in t.notes]
            text = head + "\n" + "\n".join(notes) + (sep + rest if rest else "\n")
    if t.outcome is not None:
        text = PARTLY + escape.inline(t.outcome, strict=True) + "\n\n" + text
    return text


@dataclass
class ToolResult:
    """A rendered result: what a tool call returns, whatever the transport. `text` is
    `write(parts)` whenever the result has its parts (every result the renderer, the error
    path and the handlers make); `note`, `close` keep the two equal."""

    text: str
    structured: dict | None = None
    is_error: bool = False
    blobs: list[Blob] = field(default_factory=list)
    error_code: str | None = None
    error_fields: list[str] = field(default_factory=list)  # the arguments an ArgumentError names
    http_status: int | None = None
    ask: str | None = None  # set when the user must be asked first (an input-required round)
    misfits: list = field(default_factory=list)
    links: list = field(default_factory=list)  # resource links to end the result with (resources.Link)
    parts: Text | None = None  # what the text says, part by part (None: a text made whole, e.g. by a test)
    action: str | None = None  # the action a surface's call ran (surfaces.Surface.dispatch)
    arguments: dict | None = None  # and the arguments it was called with (an MCP Apps view's refresh)

    @classmethod
    def of(cls, parts: Text, structured: dict | None = None, **kw) -> ToolResult:
        """A result whose text is written from its parts."""
        return cls(write(parts), structured, parts=parts, **kw)

    def _parts(self) -> Text:
        if self.parts is None:
            # a text made whole: its lines are the body (the writer keeps it as it is)
            self.parts = Text(body=self.text.split("\n"), end=self.text.endswith("\n"))
            if self.parts.end:
                self.parts.body.pop()
        return self.parts

    def note(self, notes: list[str | Note]) -> None:
        """Add the dispatcher's notes (raw): after the heading of a success, after the error line of an error."""
        parts = self._parts()
        parts.notes = [*parts.notes, *notes]
        self.text = write(parts)

    def close(self, lines: list[str]) -> None:
        """End the text with a block of written lines, after a blank line."""
        parts = self._parts()
        parts.closing = [*parts.closing, list(lines)]
        self.text = write(parts)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _is_empty(v: Any) -> bool:
    """A field with nothing in it: null, "", [] or {} (never rendered; structuredContent keeps it)."""
    return v is None or v == "" or v == [] or v == {}


def without_empty(value: Any) -> Any:
    """A copy for the text: every object member that is empty, or holds only empty members
    (after the same pruning), left out; list items stay where they are."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v = without_empty(v)
            if not _is_empty(v):
                out[k] = v
        return out
    if isinstance(value, list):
        return [without_empty(v) for v in value]
    return value


def iso_utc(seconds: float, millis: bool = False) -> str | None:
    """``2025-10-09T08:53:20Z`` (with ``.123`` when `millis`); None when out of range."""
    try:
        when = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{when.microsecond // 1000:03d}Z" if millis else "Z")


def _scalar_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    return str(v)


def _json_escape(ch: str) -> str:
    """A character as JSON escapes: one ``\\uXXXX``, or a UTF-16 surrogate pair above U+FFFF
    (JSON has no ``\\U`` escape)."""
    cp = ord(ch)
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    cp -= 0x10000
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


def json_text(value: Any, **kw) -> str:
    """JSON text of ``value`` that the control filter leaves unchanged and that is valid
    JSON: every character the filter would remove or rewrite (controls, DEL, C1, bidi and
    other invisible characters, surrogates, noncharacters, U+2028/U+2029) is written as a
    JSON escape, so the text shows exactly what Arcane sent and ``json.loads`` reads it back."""
    text = json.dumps(value, ensure_ascii=False, default=str, **kw)
    if escape.clean(text) == text:
        return text
    return "".join(c if escape.clean(c) == c else _json_escape(c) for c in text)


# the units rendering.yaml declares for fields, and the readings written beside their values
BYTES, NANOSECONDS, MILLISECONDS, SECONDS, MINUTES = "bytes", "nanoseconds", "milliseconds", "seconds", "minutes"
EPOCH_SECONDS, EPOCH_MILLISECONDS = "epoch_seconds", "epoch_milliseconds"
_NANOS = {NANOSECONDS: 1, MILLISECONDS: 10**6, SECONDS: 10**9, MINUTES: 60 * 10**9}
# a value past these has no reading (Arcane's are int64; a larger one is not a real size or time)
BYTES_READ_MAX = 10**21
NANOSECONDS_READ_MAX = 10**20
# how deep the readings after a JSON block look into its value
READINGS_DEPTH = 64


def reading(unit: str, value: Any) -> str | None:
    """What a value of a field with `unit` reads as in human units, or None: for anything
    but a number (a string, a bool, null), a number that is not finite, a negative one (a
    size or a duration; Docker's -1 is "unlimited"), 0 as a Unix time (Docker's "never"), or
    one too large to be real. Unix times are read from integers only."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if unit in (EPOCH_SECONDS, EPOCH_MILLISECONDS):
        if not isinstance(value, int) or value <= 0:
            return None
        if unit == EPOCH_SECONDS:
            return iso_utc(value)
        return iso_utc(value / 1000, millis=True) if value < 10**18 else None  # no float of a huge integer
    if value < 0:
        return None
    if unit == BYTES:
        return escape.human_bytes(int(value)) if value < BYTES_READ_MAX else None
    factor = _NANOS.get(unit)
    if factor is None or value >= NANOSECONDS_READ_MAX / factor:
        return None
    return escape.human_duration(int(value) * factor if isinstance(value, int) else round(value * factor))


# the first line of a success whose answer reports that some of it failed (outcome.Verdict.partial)
PARTLY = "Partly failed: "

# lists of omitted member names remembered per renderer (Renderer._omitted_names), of at most this many characters
OMITTED_MEMO_SIZE = 256
OMITTED_MEMO_CHARS = 2048

#: (items kept per list/object, characters kept per string) tried in turn until a cut
#: value fits the block; then the depth is cut too.
_CUT_LEVELS = ((200, 2000), (50, 500), (20, 200), (10, 100), (5, 60), (3, 40), (1, 20))


def _cut_value(value: Any, items: int, chars: int, depth: int | None) -> Any:
    """A smaller copy: lists and objects keep their first ``items`` entries and say how
    many more there are, strings keep ``chars`` characters and end with ``…``, and below
    ``depth`` a container becomes ``"…"``. Always a JSON value."""
    if isinstance(value, dict):
        if depth is not None and depth <= 0:
            return f"{{… {len(value)} member(s)}}" if value else {}
        keys = list(value)
        out = {k: _cut_value(value[k], items, chars, None if depth is None else depth - 1) for k in keys[:items]}
        if len(keys) > items:
            note = "…" if "…" not in out else "… (cut)"
            out[note] = f"{len(keys) - items} more member(s)"
        return out
    if isinstance(value, list):
        if depth is not None and depth <= 0:
            return f"[… {len(value)} item(s)]" if value else []
        out_list = [_cut_value(v, items, chars, None if depth is None else depth - 1) for v in value[:items]]
        if len(value) > items:
            out_list.append(f"… {len(value) - items} more item(s)")
        return out_list
    if isinstance(value, str) and len(value) > chars:
        return value[:chars] + "…"
    return value


def json_block(value: Any, max_chars: int) -> str:
    """A fenced ``json`` block of ``value`` that is always valid JSON. A value whose text
    is longer than ``max_chars`` (rendering.yaml json_block_max) is shortened structurally
    — lists, objects and strings cut where ``…`` shows — and a note says so."""
    limit = max_chars
    text = json_text(value, indent=2)
    note = ""
    if len(text) > limit:
        attempts = [(i, c, None) for i, c in _CUT_LEVELS] + [(1, 20, d) for d in (4, 3, 2, 1, 0)]
        for items, chars, depth in attempts:
            text = json_text(_cut_value(value, items, chars, depth), indent=2)
            if len(text) <= limit:
                break
        note = (f"(shortened to fit {limit} characters where `…` shows; "
                "structuredContent has the whole value)\n")
    return note + escape.fence(text, "json")


class Renderer:
    """Renders results for one catalog (its compiled rendering rules and conventions)."""

    def __init__(self, catalog):
        self.catalog = catalog
        r = self.rules = catalog.rendering
        self.envelope, self.paging = catalog.conventions.envelope, catalog.conventions.pagination
        self.max_rows, self.cell_max, self.max_columns = r.max_rows, r.cell_max, r.max_columns
        self.identity, self.state, self.describe = list(r.identity_fields), list(r.state_fields), list(r.describe_fields)
        self.whole, self.hidden = r.whole_fields, r.hidden_fields
        # the fields written with a reading beside them: by member name, and by (parent, member)
        self.unit_of: dict[str, str] = {}
        self.unit_in: dict[tuple[str, str], str] = {}
        for unit, names in ((BYTES, r.byte_fields), (NANOSECONDS, r.duration_nanosecond_fields),
                            (MILLISECONDS, r.duration_millisecond_fields), (SECONDS, r.duration_second_fields),
                            (MINUTES, r.duration_minute_fields),
                            (EPOCH_SECONDS, r.epoch_second_fields), (EPOCH_MILLISECONDS, r.epoch_millisecond_fields)):
            for name in names:
                parent, dot, member = name.rpartition(".")
                if dot:
                    self.unit_in[(parent, member)] = unit
                else:
                    self.unit_of[name] = unit
        self.counts = frozenset(self.unit_of) | {member for _, member in self.unit_in}  # the member names of those fields
        self.first = self.identity + [f for f in self.state if f not in self.identity]
        self._steps: dict[tuple, list[str]] = {}  # next_steps by (action ID, namer, safe mode, state, cautious)
        self.outcome = catalog.conventions.outcome
        self._required = Required(catalog)
        self._omitted: dict[tuple[str, ...], str] = memo_table()  # _omitted_names by the names

    # ------------------------------------------------------------ values

    def unit(self, key: str, parent: str | None = None) -> str | None:
        """The unit rendering.yaml declares for a member (inside an object held by `parent`), or None."""
        if key not in self.counts:
            return None
        return (self.unit_in.get((parent, key)) if parent is not None else None) or self.unit_of.get(key)

    def value_text(self, key: str, value: Any, parent: str | None = None) -> str:
        """A scalar as text, with its reading beside it when its field has a unit
        (`1073741824 (1.1 GB)`, `30000000000 (30 s)`); the value itself is never replaced."""
        if key in self.counts:
            unit = self.unit(key, parent)
            read = reading(unit, value) if unit is not None else None
            if read is not None:
                return f"{_scalar_text(value)} ({read})"
        return _scalar_text(value)

    def readings(self, value: Any, parent: str) -> str | None:
        """The line after a JSON block of `value` (held by the member `parent`): the readings
        of its fields that have a unit, by their path in the block (at most readings_max),
        or None when it has none."""
        most = self.rules.readings_max
        if not most or not self.counts:
            return None
        found: list[str] = []
        more = 0

        counts, hidden = self.counts, self.hidden

        def walk(node: Any, holder: str, path: tuple, depth: int) -> None:
            # the path is written only for a field that has a reading (most have none)
            nonlocal more
            if depth > READINGS_DEPTH:
                return
            if isinstance(node, dict):
                for k, v in node.items():
                    if isinstance(v, (dict, list)):
                        if v and k not in hidden:
                            walk(v, k, (*path, k), depth + 1)
                    elif k in counts and v != 0 and k not in hidden:
                        unit = self.unit(k, holder)
                        read = reading(unit, v) if unit is not None else None
                        if read is None:  # 0 reads as nothing a model needs told
                            continue
                        if len(found) < most:
                            where = "".join(p if isinstance(p, str) and not i else (f"[{p}]" if isinstance(p, int) else f".{p}")
                                            for i, p in enumerate((*path, k)))
                            found.append(f"{escape.code_span(where)} {_scalar_text(v)} ({escape.inline(read, strict=True)})")
                        else:
                            more += 1
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    if isinstance(v, (dict, list)) and v:
                        walk(v, holder, (*path, i), depth + 1)

        walk(value, parent, (), 0)
        if not found:
            return None
        return "Readings: " + ", ".join(found) + (f" and {more} more" if more else "") + "."

    def cell_text(self, key: str, value: Any) -> str:
        """A cell's value as text, before escaping: a string as it is, a scalar as
        `value_text` writes it, a list of scalars joined, anything else as compact JSON."""
        if type(value) is str:
            return value
        if _is_scalar(value):
            return self.value_text(key, value)
        if isinstance(value, list) and all(_is_scalar(v) for v in value):
            return ", ".join(_scalar_text(v) for v in value)
        return json_text(value, separators=(",", ":"))

    def cell(self, key: str, value: Any, whole: bool = False) -> str:
        return escape.cell(self.cell_text(key, value), max_len=self.cell_max, whole=whole or key in self.whole)

    def _column_cells(self, key: str, column: Column, whole: bool) -> Callable[[list], list[str]]:
        """The cells of one column for a table's rows, top to bottom: `cell` of each row's
        value. A column over one member reads it in a comprehension, not through a getter
        call per row, and the column's texts are escaped in one escape.cells call."""
        get, text = column.getter(), self.cell_text
        name = column.field if column.expr is None else None
        max_len, whole = self.cell_max, whole or key in self.whole

        def cells(rows: list) -> list[str]:
            # a member column reads what Column.getter's member function would
            values = [item.get(name) if isinstance(item, dict) else None for item in rows] if name is not None else [get(item) for item in rows]
            return escape.cells([v if type(v) is str else text(key, v) for v in values], max_len=max_len, whole=whole)
        return cells

    def columns_for(self, action, items: list) -> list[tuple[str, Any, bool, str | None, set]]:
        """(label, column, whole, field, fields shown) per column: the overlay's, else up
        to max_columns by name."""
        if action is not None and action.columns:
            return [(c.label, c, bool(c.whole) if c.whole is not None else c.field in self.whole, c.field, set(c.reads))
                    for c in action.columns]
        present: dict[str, int] = {}
        for item in items:
            if isinstance(item, dict):
                for k, v in item.items():
                    if k not in self.hidden and v is not None and (_is_scalar(v) or (isinstance(v, list) and all(_is_scalar(x) for x in v))):
                        present[k] = present.get(k, 0) + 1
        order = [f for f in self.identity + self.state + self.describe if f in present]
        if not order:  # nothing known by name: the first scalar fields as Arcane sent them
            order = list(present)
        return [(k, Column(k, k, None, None, frozenset({k})), k in self.whole, k, {k})
                for k in list(dict.fromkeys(order))[: self.max_columns]]

    # ------------------------------------------------------------ pieces

    def _heading(self, title: str) -> str:
        return "## " + escape.heading(title)

    def _line(self, key: str, value: Any) -> str:
        return escape.object_line(key, self.value_text(key, value))

    def _pagination(self, structured: dict) -> dict | None:
        p = structured.get(self.paging.member)
        return p if isinstance(p, dict) else None

    def _count_line(self, structured: dict) -> str:
        items = structured.get(self.envelope.items) or []
        p, pg = self._pagination(structured), self.paging
        line = f"{len(items)} item(s)"
        if p and pg.total_items in p:
            pages = max(int(p.get(pg.total_pages) or 1), 1)
            line += f" — {p.get(pg.total_items)} total, page {p.get(pg.current_page, 1)} of {pages}"
        return line

    def _fill_actions(self, template: Template, namer: Namer) -> Note:
        """An overlay's empty-list text, its {domain.action} placeholders as the surface names
        them: the text escaped, the names as written."""
        pieces: list[str | Named] = []
        for literal, name in template.parts:
            pieces.append(literal)
            if name is not None:
                pieces.append(Named(namer(name)) if name in self.catalog.actions else "(not served here)")
        return Note(tuple(pieces))

    def _item_action(self, action) -> str | None:
        """The action that returns one whole item: the overlay's item_action, else the
        domain's get action (catalog/conventions.yaml)."""
        if action is None:
            return None
        if action.item_action and action.item_action in self.catalog.actions:
            return action.item_action
        domain = self.catalog.domains.get(action.domain)
        get = domain.get_action if domain is not None else None
        return get if get in self.catalog.actions and get != action.id else None

    def _filters(self, action) -> list[str]:
        if action is None:
            return []
        skip = {self.paging.start, self.paging.limit, *self.paging.ordering, self.catalog.env_arg}
        # query filters Arcane applies, then the overlay's client filters (applied here to the items fetched)
        return [b.arg for b in action.bindings if b.location in ("query", CLIENT_FILTER) and b.arg not in skip]

    def next_steps(self, action, namer: Namer, safe_mode: bool = False, *, state: str | None = None,
                   cautious: bool = False) -> list[str]:
        """The lines of an action's next steps: its overlay's `states` steps for the state
        its answer reports (`state`, one the overlay declares, else None), then its
        follow-ups and related actions. No destructive step follows a destructive action
        or a `cautious` answer (one that reports a partial failure, or an empty list: there
        is nothing for it to act on). They depend only on
        the catalog, the action, the state and how the surface names them, so each is
        written once per renderer (a copy returned)."""
        if action is None:
            return []
        key = (action.id, namer, safe_mode, state, cautious)
        lines = self._steps.get(key)
        if lines is None:
            lines = self._steps[key] = self._next_steps(action, namer, safe_mode, state, cautious)
        return list(lines)

    def step_ids(self, action, state: str | None = None, cautious: bool = False) -> list[str]:
        """The action IDs `next_steps` offers, in order (at most next_steps_max)."""
        ordinary = tuple(action.follow_ups) + tuple(action.related)
        ids = action.states.steps_for(state, ordinary) if action.states is not None else ordinary
        careful = cautious or action.destructive
        acts = self.catalog.actions
        ids = [i for i in ids if i != action.id and i in acts and not acts[i].pending and not (careful and acts[i].destructive)]
        return list(dict.fromkeys(ids))[:self.rules.next_steps_max]

    def _next_steps(self, action, namer: Namer, safe_mode: bool, state: str | None, cautious: bool) -> list[str]:
        lines = []
        for aid in self.step_ids(action, state, cautious):
            a = self.catalog.actions[aid]
            line = f"- {namer(aid)} — {escape.inline(a.title, strict=True)}"
            if safe_mode and a.mutating:
                line += " (safe mode: preview only)"
            elif a.destructive:
                line += " (destructive: needs confirm: true)"
            lines.append(line)
        return lines

    # ------------------------------------------------------------ outcome

    def verdict(self, action, shaped: Shaped) -> Verdict:
        """What an object answer of a changing action says about its own outcome
        (catalog/conventions.yaml `outcome`); a clean verdict for anything else."""
        if action is None or action.read_only or shaped.kind != "object" or self.outcome is None:
            return Verdict()
        return judge(self.outcome, shaped.structured, self._required(action), self.outcome.identity_of(action.domain))

    def refuse_failure(self, action, verdict: Verdict, shaped: Shaped, namer: Namer) -> None:
        """Raise the error a failed or incomplete answer is (ResultFailed, structuredContent
        kept as Arcane's value); nothing for any other verdict."""
        if verdict.failed:
            summary = verdict.summary()
            raise ResultFailed(f"{namer(action.id)} failed: Arcane answered, but its answer says the operation did not succeed"
                               + (f" — {summary}" if summary else " (it names no error or failed item)"),
                               None, status=shaped.http_status, structured=shaped.structured)
        if verdict.missing is not None:
            raise ResultFailed(f"Arcane's answer to {namer(action.id)} has no {verdict.missing}, which every such answer holds: "
                               "the change may not have happened", None, code="answer_incomplete", status=shaped.http_status,
                               structured=shaped.structured)

    # ------------------------------------------------------------ shapes

    def _list(self, action, structured: dict, args: dict, namer: Namer) -> list[str]:
        items = structured.get(self.envelope.items) or []
        pg = self.paging
        out = [self._count_line(structured)]
        if action is not None and action.order and len(items) > 1 and not any(args.get(o) not in (None, "") for o in pg.ordering):
            out.append(escape.inline(action.order))  # the order Arcane gives them in; with an ordering argument it is the caller's
        for key, value in structured.items():
            if key in (self.envelope.items, pg.member) or key in self.hidden:
                continue
            value = without_empty(value)
            if _is_empty(value):
                continue
            if isinstance(value, dict) and all(_is_scalar(v) for v in value.values()):
                parts = ", ".join(f"{escape.inline(k, strict=True)} {escape.inline(self.value_text(k, v, key), strict=True)}"
                                  for k, v in value.items())
                out.append(f"- {escape.list_item(key, strict=True)}: {parts}")
            elif _is_scalar(value):
                out.append(self._line(key, value))
            else:
                out += ["", f"### {escape.heading(key)}", *self._block(key, value)]
        if not items:
            hint = action.empty_hint if action is not None else None
            out.append("")
            out.append(self._fill_actions(hint, namer).markdown() if hint is not None and hint.text else "No items.")
            return out
        rows = items[: self.max_rows]
        cols = self.columns_for(action, rows)
        out.append("")
        out.append("| " + " | ".join(escape.cell(c[0], whole=True) for c in cols) + " |")
        out.append("|" + "---|" * len(cols))
        # column by column (one comprehension per column), then joined row by row
        columns = [self._column_cells(key or label, column, whole)(rows) for label, column, whole, key, _ in cols]
        out += ["| " + " | ".join(row) + " |" for row in zip(*columns, strict=True)] if columns else ["|  |"] * len(rows)
        notes = []
        has_start = action is not None and pg.start in action.input_schema.get("properties", {})
        p = self._pagination(structured) or {}
        start = int(args.get(pg.start) or 0) if isinstance(args.get(pg.start), int) else 0
        if len(items) > self.max_rows:
            left = len(items) - self.max_rows
            how = f"read them with {pg.start}={start + self.max_rows} {pg.limit}={self.max_rows}" if has_start else "narrow the list"
            notes.append(f"{left} more row(s) of this page are not in the table (structuredContent has them); {how}.")
        if p and has_start:
            cur, pages = int(p.get(pg.current_page) or 1), int(p.get(pg.total_pages) or 1)
            per = int(p.get(pg.items_per_page) or len(items) or 1)
            if cur < pages:
                notes.append(f"More pages: call again with {pg.start}={start + len(items)} ({pg.limit}={per}) for page {cur + 1} of {pages}, "
                             f"or {pg.limit}={pg.all} for all.")
        filters = self._filters(action)
        if notes and filters:
            notes.append("To narrow instead, filter with " + ", ".join(filters) + ".")
        shown = set().union(*(c[4] for c in cols)) if cols else set()
        # every member of the shown rows, first seen first (one pass, not a dict per row)
        fields = dict.fromkeys(chain.from_iterable(item for item in rows if isinstance(item, dict)))
        omitted = [k for k in fields if k not in shown and k not in self.hidden]
        if omitted:
            names = self._omitted_names(omitted)
            get = self._item_action(action)
            note = f"Fields not shown: {names} (structuredContent has every field)"
            note += f"; {namer(get)} returns one whole item." if get else "."
            notes.append(note)
        if notes:
            out.append("")
            out += notes
        return out

    def _omitted_names(self, omitted: list[str]) -> str:
        """"a, b, c and 4 more": the members a table leaves out, escaped. The same list of
        an action comes back call after call, so the text is remembered by the names
        (bounded, oldest forgotten first)."""
        key = tuple(omitted)
        names = self._omitted.get(key)
        if names is None:
            most = self.rules.omitted_names_max
            names = ", ".join(escape.inline(k, strict=True) for k in omitted[:most])
            if len(omitted) > most:
                names += f" and {len(omitted) - most} more"
            if sum(map(len, key)) <= OMITTED_MEMO_CHARS:  # long names (rare, costly to keep) are not remembered
                keep(self._omitted, key, names, OMITTED_MEMO_SIZE)
        return names

    def _block(self, key: str, value: Any) -> list[str]:
        """A member's nested value: its JSON block, then the line of its readings (if any)."""
        lines = [json_block(value, self.rules.json_block_max).rstrip("\n")]
        read = self.readings(value, key)
        return [*lines, "", read] if read is not None else lines

    def _ordered_keys(self, obj: dict) -> list[str]:
        keys = [k for k in obj if k not in self.hidden and not _is_empty(obj[k])]
        first = [k for k in self.first if k in obj and k in keys]
        return first + [k for k in keys if k not in first]

    def _object(self, obj: dict) -> list[str]:
        """One line per field, identity and state first; empty fields (null, "", [], {},
        or objects of nothing but those) are left out, here and inside the JSON blocks."""
        lines, sections = [], []
        given, obj = obj, without_empty(obj)
        for key in self._ordered_keys(obj):
            value = obj[key]
            if isinstance(value, str) and ("\n" in value or "\r" in value):
                sections += ["", f"### {escape.heading(key)}", escape.fence(value).rstrip("\n")]
            elif _is_scalar(value):
                lines.append(self._line(key, value))
            elif isinstance(value, list) and len(value) <= self.rules.short_list_max and all(isinstance(v, (str, int, float, bool)) for v in value) \
                    and sum(len(str(v)) for v in value) < self.rules.short_list_chars:
                lines.append(f"- {escape.list_item(key, strict=True)}: " + ", ".join(escape.inline(_scalar_text(v), strict=True) for v in value))
            else:
                sections += ["", f"### {escape.heading(key)}", *self._block(key, value)]
        if not lines and not sections:
            # an answer of nothing but empty members says which are empty ("nodes, edges"), not that there are none
            empty = [k for k in given if k not in self.hidden]
            lines.append(f"Every field is empty: {self._omitted_names(empty)}." if empty else "(no fields)")
        return lines + sections

    # ------------------------------------------------------------ entry points

    def success(self, action, shaped: Shaped, namer: Namer, args: dict | None = None, *, safe_mode: bool = False) -> ToolResult:
        args = args or {}
        title = action.title if action is not None else "Result"
        verdict = self.verdict(action, shaped)
        if not verdict.clean:
            self.refuse_failure(action, verdict, shaped, namer)
        out: list[str] = []
        steps = True
        nothing_listed = False  # an empty list: nothing a destructive next step could act on
        s = shaped.structured or {}
        if shaped.kind == "list":
            out += self._list(action, s, args, namer)
            nothing_listed = not s.get(self.envelope.items)
        elif shaped.kind == "object":
            member = action.list_member if action is not None else ""
            if member and isinstance(s.get(member), list):
                nothing_listed = not s[member]
                # the overlay's list member is the table; the other members are the list's other lines
                view = {k: v for k, v in s.items() if k not in (member, self.envelope.items)}
                out += self._list(action, {**view, self.envelope.items: s[member]}, args, namer)
            else:
                out += self._object(s)
        elif shaped.kind == "value":
            value = self.envelope.value
            out.append(self._line(value, s.get(value)))
            extra = {k: v for k, v in s.items() if k != value}
            if extra:
                out += self._object(extra)
        elif shaped.kind == "empty":
            out.append(f"Done: Arcane answered HTTP {shaped.http_status} with no content.")
        elif shaped.kind == "stream":
            out.append(f"- status: {escape.inline(str(s.get('status')))}")
            activity = self.catalog.conventions.activity.argument
            if s.get(activity):
                out.append(f"- {activity}: {escape.inline(str(s[activity]))}")
            out.append(f"- progress lines: {s.get('lines', 0)}")
            if s.get("lastLines"):
                out += ["", "Last progress lines:", escape.fence("\n".join(s["lastLines"])).rstrip("\n")]
        elif shaped.kind == "text":
            steps = False
            out += [f"- file: {escape.inline(str(s.get('filename')))}",
                    f"- size: {s.get('size')} bytes ({escape.human_bytes(int(s.get('size') or 0))})",
                    f"- type: {escape.inline(str(s.get('contentType')))}"]
            for note in shaped.notes:
                out.append(f"- note: {escape.inline(note)}")
            out += ["", escape.fence(shaped.text or "").rstrip("\n")]
        elif shaped.kind == "binary":
            steps = False
            out += [f"- file: {escape.inline(str(s.get('filename')))}",
                    f"- size: {s.get('size')} bytes ({escape.human_bytes(int(s.get('size') or 0))})",
                    f"- type: {escape.inline(str(s.get('contentType')))}",
                    "", "The file is attached as a resource for the user; its bytes are not in this text."]
        ns: list[str] = []
        if steps:
            state = action.states.state_of(s) if action is not None and action.states is not None else None
            ns = self.next_steps(action, namer, safe_mode, state=state, cautious=verdict.partial or nothing_listed)
        # the first line says it when some of it failed although Arcane answered 200
        parts = Text(title=title, outcome=verdict.summary() if verdict.partial else None, body=out, next_steps=list(ns))
        blobs = [shaped.blob] if shaped.kind == "binary" and shaped.blob else []
        return ToolResult.of(parts, shaped.structured, blobs=blobs, http_status=shaped.http_status)

    def output(self, action, body: str, structured: dict | None = None) -> ToolResult:
        """Log or exec output: as the handler wrote it, fenced, after the control filter."""
        return ToolResult.of(Text(title=action.title, body=["", escape.fence(body)], end=False), structured)


def render_error(message: str, next_step: str | None, *, code: str, status: int | None = None,
                 fields: list[str] | None = None, structured: dict | None = None) -> ToolResult:
    """An error: plain text, a next step and no Markdown; no structuredContent unless Arcane
    answered a value that reports the failure itself (`structured`, kept unchanged). `code`
    (and the argument `fields` of an invalid call) travel beside the text for tests and the log."""
    return ToolResult.of(Text(error=message, hint=next_step), structured, is_error=True, error_code=code, http_status=status,
                         error_fields=list(fields or []))


def with_notes(result: ToolResult, notes: list[str | Note]) -> ToolResult:
    """The result with the dispatcher's notes (e.g. a name resolved to an ID) among its parts:
    the text says them after the heading of a success, after the error line of an error.
    structuredContent stays Arcane's value."""
    if not notes or result.ask is not None:
        return result
    noted = dataclasses.replace(result, parts=dataclasses.replace(result._parts()))  # the result given stays as it was
    noted.note(notes)
    return noted
