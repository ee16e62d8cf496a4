"""Make untrusted text (values from Arcane) safe to place in Markdown.

Pure and stdlib-only. Two layers:

* ``clean`` — the control filter, applied to every value and once more to the finished
  text: terminal escape sequences, control characters, bidi controls, zero-width and every
  other Default_Ignorable_Code_Point are removed; line endings are normalised.
* One function per rendering context (``inline``, ``cell``, ``heading``, ``list_item``,
  ``bold_key``, ``object_line``, ``fence``, ``code_span``). Each calls ``clean`` itself, never
  emits a raw line break where one would end the context, and leaves a value that Markdown
  reads as plain text byte-identical.

Rules, in short (docs/escaping.md has the why):

* A value with no whitespace that would form Markdown becomes a code span whose fence is
  longer than any backtick run inside; so does any value with leading or trailing
  whitespace (parsers trim it; a code span keeps it), and a value whose backslashes would
  land inside a GFM autolink literal.
* Other text gets a backslash only before a character that would form something: a
  backslash before ASCII punctuation or at the end, backtick runs that could pair, ``*``
  ``_`` ``~`` runs with a partner, a ``[`` with a later ``]``, a ``<`` that could open a
  tag/comment/autolink, an ``&`` that would form a character reference, and (line starts)
  whatever would open a block.
* ``strict=True`` assumes the neighbours are unknown (another value may follow on the same
  line), so it escapes every delimiter that *could* open or close, every backtick,
  bracket and ``<`` and an ``&`` before a word.
* In one-line contexts a line break is shown as ``↵`` (``LINE_BREAK``); a cut cell ends
  with ``…`` (``CUT``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from ..build.artefact import LazyPattern
from ..memo import keep
from ..memo import table as memo_table

__all__ = [
    "CODE_SPAN_FENCE_MAX",
    "CUT",
    "FENCE_MAX",
    "LINE_BREAK",
    "UNICODE_VERSION",
    "bold_key",
    "cell",
    "cells",
    "clean",
    "code_span",
    "fence",
    "heading",
    "human_bytes",
    "human_duration",
    "inline",
    "list_item",
    "object_line",
]

LINE_BREAK = "\u21b5"  # ↵ — how a line break inside a one-line context is shown
CUT = "\u2026"  # … — marks a cut cell (cut to max_len, or lines after the first dropped)

#: cmark-gfm (GitHub's parser) keeps a fence's length in one byte, clamped at 255
#: (blocks.c: ``fence_length = matched > 255 ? 255 : matched``): a content line starting
#: with 255 or more of the fence character closes ANY longer fence there. markdown-it-py
#: has no limit. So a fence is never longer than this.
FENCE_MAX = 255
#: cmark-gfm matches code span delimiters of at most 80 backticks (inlines.c,
#: ``MAXBACKTICKS``); a longer run is literal text there and the span never forms.
#: markdown-it-py has no limit. So a code span's fence is never longer than this.
CODE_SPAN_FENCE_MAX = 80

# --------------------------------------------------------------------------------------
# The control filter
# --------------------------------------------------------------------------------------

#: Unicode version of the Default_Ignorable_Code_Point table below. Taken from
#: DerivedCoreProperties.txt of Unicode 16.0.0; the set (4,174 code points) is unchanged
#: since Unicode 14.0 (U+180F was the last addition) and is the same in 15.x/16.0/17.0.
UNICODE_VERSION = "16.0.0"

#: Default_Ignorable_Code_Point (UAX #44 derived property), inclusive ranges.
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK (bidi)
    (0x115F, 0x1160),  # HANGUL CHOSEONG/JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ..AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZWSP, ZWNJ, ZWJ, LRM, RLM
    (0x202A, 0x202E),  # LRE, RLE, PDF, LRO, RLO
    (0x2060, 0x206F),  # WORD JOINER, invisible operators, LRI..PDI, deprecated format chars
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1..16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE (BOM)
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # reserved
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT controls
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM..END PHRASE
    (0xE0000, 0xE0FFF),  # LANGUAGE TAG, TAG characters (ASCII smuggling), VS17..VS256, reserved
)

#: Also removed although not Default_Ignorable: format characters that hide or reorder
#: text (interlinear annotation U+FFF9–FFFB, Egyptian hieroglyph format controls).
EXTRA_INVISIBLE: tuple[tuple[int, int], ...] = (
    (0xFFF9, 0xFFFB),
    (0x13430, 0x1343F),
)

#: Removed because they are not text: surrogates (a Python str can hold them; UTF-8
#: encoding and strict JSON parsers reject them) and the 66 noncharacters.
NOT_TEXT: tuple[tuple[int, int], ...] = (
    (0xD800, 0xDFFF),
    (0xFDD0, 0xFDEF),
    *((p * 0x10000 + 0xFFFE, p * 0x10000 + 0xFFFF) for p in range(17)),
)

#: C0 controls except TAB and LF (CR is handled with line endings), DEL, C1 controls.
CONTROLS: tuple[tuple[int, int], ...] = (
    (0x00, 0x08),
    (0x0B, 0x0C),
    (0x0E, 0x1F),
    (0x7F, 0x9F),
)


def _split_ranges(lo: int, hi: int, holes: frozenset[int]) -> list[tuple[int, int]]:
    out, start = [], lo
    for cp in range(lo, hi + 1):
        if cp in holes:
            if start < cp:
                out.append((start, cp - 1))
            start = cp + 1
    if start <= hi:
        out.append((start, hi))
    return out


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    def esc(cp: int) -> str:
        return f"\\U{cp:08x}"

    return "".join(esc(lo) if lo == hi else f"{esc(lo)}-{esc(hi)}" for lo, hi in ranges)


# ESC and the 8-bit introducers (DCS, SOS, CSI, OSC, PM, APC) are left out of the
# single-character class so that a run of other junk cannot swallow them and leave the
# sequence's payload behind; the sequence alternatives below always match them.
_INTRODUCERS = frozenset((0x1B, 0x90, 0x98, 0x9B, 0x9D, 0x9E, 0x9F))
_SINGLES = tuple(
    (lo, hi)
    for a, b in CONTROLS
    for lo, hi in _split_ranges(a, b, _INTRODUCERS)
)

# Terminal sequences first (ECMA-48, 7-bit ESC forms and 8-bit C1 forms), then single
# characters. Every repetition is over a class disjoint from what follows it, so the
# regex is linear. An unterminated string sequence (OSC/DCS/SOS/PM/APC) is dropped up to
# the end of its line: a terminal would hide that payload too, and one stray byte cannot
# swallow a whole log.
# The two regular expressions of the control filter are compiled at their first use (a
# character class of hundreds of ranges each, ~1.5 ms; a start renders no text).
_STRIP = LazyPattern(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI: params, intermediates, final
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC DCS SOS PM APC
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # nF (ESC ( 0), Fp/Fe/Fs (ESC 7, ESC c), a lone ESC
    r"|[" + _char_class(_SINGLES + DEFAULT_IGNORABLE + EXTRA_INVISIBLE + NOT_TEXT) + "]+", 0
)
# A CR directly before LF stays (CRLF stays CRLF); any other CR, and U+2028/U+2029, is LF.
_EOL = re.compile("\r(?!\n)|[\u2028\u2029]")
_NEEDS_CLEAN = re.compile("[^\t\n\x20-\x7e]")
# Every match of _STRIP starts with one of these characters: a text without any (most
# non-ASCII text: accents, "…", "—") is left as it is without running the alternation
# over every position, which costs milliseconds on a whole rendered answer.
_STRIP_START = LazyPattern(
    "[\x1b\x9b\x90\x98\x9d\x9e\x9f" + _char_class(_SINGLES + DEFAULT_IGNORABLE + EXTRA_INVISIBLE + NOT_TEXT) + "]", 0)


# printable ASCII, TAB and LF as UTF-8 bytes: what _NEEDS_CLEAN does not match
_PLAIN_BYTES = bytes([0x09, 0x0A, *range(0x20, 0x7F)])
_SHORT = 64  # below this many characters the regex search is the cheaper test


def _unusual(text: str) -> str:
    """``"".join(_NEEDS_CLEAN.findall(text))``, in C: a character outside printable ASCII
    is encoded as bytes of 0x80 and above only, so deleting the plain ASCII bytes of the
    UTF-8 form leaves exactly the other characters' encodings (lone surrogates included,
    through surrogatepass). A regex walks a whole rendered answer at ~10 ns a character;
    this is several times faster (tests/test_escape.py checks both agree)."""
    return text.encode("utf-8", "surrogatepass").translate(None, _PLAIN_BYTES).decode("utf-8", "surrogatepass")


def clean(text: str) -> str:
    """The control filter. Idempotent; a plain value comes back unchanged (same object)."""
    if len(text) < _SHORT:
        if not _NEEDS_CLEAN.search(text):  # printable ASCII, TAB, LF: the common case
            return text
        odd = "".join(_NEEDS_CLEAN.findall(text))
    else:
        odd = _unusual(text)
        if not odd:
            return text
    # _STRIP_START is one character class of many ranges, slow to try at every position of
    # a whole rendered answer; the few distinct characters outside printable ASCII decide
    # the same question (a match exists iff one of them is in the class)
    starts = "".join(sorted(c for c in set(odd) if _STRIP_START.match(c)))
    if starts:
        text = _strip(text, starts)
    # a CR stays before LF: nothing to rewrite when every CR is one (a CRLF log)
    if "\u2028" in odd or "\u2029" in odd or ("\r" in odd and text.count("\r") != text.count("\r\n")):
        text = _EOL.sub("\n", text)
    return text


def _strip(text: str, starts: str) -> str:
    """``_STRIP.sub("", text)``, trying the alternation only where a match can start: at the
    characters of `starts` (those of the text in _STRIP_START), found by a scan for a few
    characters, instead of at every position (several times faster over a log whose lines
    carry colour codes; tests/test_escape.py checks it against the plain substitution)."""
    out: list[str] = []
    pos = 0
    match = _STRIP.match
    for candidate in re.finditer("[" + re.escape(starts) + "]", text):
        i = candidate.start()
        if i < pos:  # inside what the previous match removed
            continue
        found = match(text, i)
        if found is not None:  # never empty: each alternative takes a character
            out.append(text[pos:i])
            pos = found.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------

_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_LINE_BREAKS = re.compile(r"\r?\n")
_BACKTICK_RUN = re.compile(r"`+")
_DELIM_RUN = re.compile(r"\*+|_+|~+")
_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~]|\Z)")
# Any length: cmark-gfm decodes `&#87654321;` (to U+FFFD) although CommonMark allows 7 digits.
_ENTITY = re.compile(r"&(?=#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)")
_ENTITY_STRICT = re.compile(r"&(?=[#A-Za-z])")
_AUTOLINKISH = re.compile(r"www\.|:|@", re.IGNORECASE)
# Text that no context can read as Markdown: ASCII letters and digits at both ends, only
# letters, digits, spaces, commas and hyphens between (no punctuation that opens emphasis,
# code, links, autolinks, entities, lists or headings). `_render` returns it untouched
# without the full escape pass: most table cells (names, states, IDs, counts) look like
# this. tests/test_escape.py proves the full pass leaves such text alone in every context.
PLAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 ,-]*[A-Za-z0-9])?")
# every character _escape_text can mark outside a line start or a heading: without one of
# them a value passes through unchanged (tests/test_escape.py checks it against the full pass)
_MAY_MARK = re.compile(r"[\\`*_~\[\]<&|]")
_LT = re.compile(r"<(?!\s)")
_BRACKET = re.compile(r"[\[\]]")
_OPEN_BRACKET = re.compile(r"\[")
_PIPE = re.compile(r"\|")
_ASCII_WORD = re.compile(r"[^ \t\n\v\f\r]+")
_LINK_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+._-")
_WS = "wpo"  # class letters: whitespace, punctuation, other

# A line that starts a block (what comes after "- " in a list item, or at a paragraph start).
_ATX = re.compile(r"#{1,6}(?=[ \t]|\Z)")
_BULLET = re.compile(r"[-+*](?=[ \t]|\Z)")
_ORDERED = re.compile(r"[0-9]{1,9}[.)](?=[ \t]|\Z)")
_FENCE_START = re.compile(r"`{3,}|~{3,}")


def _classes(ch: str | None, outside: str) -> str:
    """The classes (w/p/o) a neighbour may have for the flanking rules.

    Outside the value the neighbour is given by the caller. Non-ASCII characters count as
    either punctuation or other: parsers disagree (markdown-it-py follows CommonMark 0.31
    with P and S categories, cmark-gfm only P, and their Unicode versions differ), so
    both readings are checked; the same for ``~``, which cmark-gfm's strikethrough
    extension takes out of the punctuation class (``*a~*b`` is emphasis there).
    """
    if ch is None:
        return outside
    if ch.isascii():
        if ch in " \t\n\r\f\v":
            return "w"
        if ch == "~":  # cmark-gfm with strikethrough does not count `~` as punctuation
            return "po"
        return "p" if ch in _ASCII_PUNCT else "o"
    return "w" if ch.isspace() else "po"


def _open_close(marker: str, prevs: str, nexts: str) -> tuple[bool, bool]:
    """Whether a delimiter run can open / close under any reading of its neighbours."""
    can_open = can_close = False
    for p in prevs:
        for n in nexts:
            left = n != "w" and (n != "p" or p in "wp")
            right = p != "w" and (p != "p" or n in "wp")
            if marker == "_":
                can_open |= left and (not right or p == "p")
                can_close |= right and (not left or n == "p")
            else:  # "*" and "~" may split words
                can_open |= left
                can_close |= right
    return can_open, can_close


def _mark_delimiters(s: str, marks: set[int], strict: bool) -> None:
    """Emphasis (``*`` ``_``) and GFM strikethrough (``~``, one or two) runs."""
    outside = _WS if strict else "w"
    runs: dict[str, list[tuple[int, int, bool, bool]]] = {"*": [], "_": [], "~": []}
    for m in _DELIM_RUN.finditer(s):
        a, b = m.span()
        prev = _classes(s[a - 1] if a else None, outside)
        nxt = _classes(s[b] if b < len(s) else None, outside)
        o, c = _open_close(s[a], prev, nxt)
        if o or c:
            runs[s[a]].append((a, b, o, c))
    for group in runs.values():
        if strict:
            chosen = group
        else:
            # A run forms something only with a partner of the same character: an opener
            # needs a later closer, a closer an earlier opener. Escaping a whole run changes
            # no other run's flanking (its neighbours still see ASCII punctuation).
            chosen = []
            later_closer = [False] * (len(group) + 1)
            for i in range(len(group) - 1, -1, -1):
                later_closer[i] = later_closer[i + 1] or group[i][3]
            earlier_opener = False
            for i, (a, b, o, c) in enumerate(group):
                if (o and later_closer[i + 1]) or (c and earlier_opener):
                    chosen.append((a, b, o, c))
                earlier_opener |= o
        for a, b, _o, _c in chosen:
            marks.update(range(a, b))


def _mark_line_start(s: str, marks: set[int]) -> None:
    """Escape what would open a block when ``s`` starts a line (list item content)."""
    if not s:
        return
    first = s[0]
    if first in "><":  # block quote; HTML block (all seven kinds start with `<`)
        marks.add(0)
    elif first in "#+-*" and (_ATX.match(s) or _BULLET.match(s)):
        marks.add(0)  # ATX heading, bullet list (a `*` marker is a run of one)
    elif first.isdigit() and (m := _ORDERED.match(s)):
        marks.add(m.end() - 1)  # `1.` / `1)`: escape the delimiter
    compact = s.replace(" ", "").replace("\t", "")
    # a thematic break; after "- " two dashes are enough ("- --" is "---")
    thematic = (len(compact) >= (2 if compact[:1] == "-" else 3) and compact[0] in "-*_"
                and compact == compact[0] * len(compact))
    if thematic or _FENCE_START.match(s):
        # escape the whole leading run, never part of it: a partly escaped run of `*`,
        # `_`, `~` or backticks is a shorter run with different flanking
        marks.update(range(len(s) - len(s.lstrip(first))))


def _escape_text(s: str, *, strict: bool = False, line_start: bool = False,
                 cell: bool = False, heading: bool = False) -> tuple[str, set[int]]:
    """Backslash-escape ``s`` (one line, no leading/trailing whitespace) for its context.

    Returns the escaped text and the positions (in ``s``) that got a backslash.
    """
    marks: set[int] = set()
    n = len(s)
    marks.update(m.start() for m in _BACKSLASH.finditer(s))

    # Code spans: a backtick run opens one if a later run has the same length. A backslash
    # does not stop a run from *closing* a span, so once any backtick is escaped, all are.
    runs = [m.span() for m in _BACKTICK_RUN.finditer(s)]
    lengths = [b - a for a, b in runs]
    if runs and (strict or len(set(lengths)) < len(lengths)):
        for a, b in runs:
            marks.update(range(a, b))
    elif runs and runs[0][0] == 0:
        # never start with a bare backtick: "starts with ` ⇔ is a code span" holds for output
        marks.update(range(runs[0][1]))

    _mark_delimiters(s, marks, strict)

    # Links, images, footnotes, reference links and shortcut references all need a `[`
    # with a later `]`; strict escapes every bracket (the partner may be in the next value).
    if strict:
        marks.update(m.start() for m in _BRACKET.finditer(s))
    else:
        last_close = s.rfind("]")
        if last_close > 0:
            marks.update(m.start() for m in _OPEN_BRACKET.finditer(s, 0, last_close))

    # Raw HTML, comments, processing instructions, declarations, autolinks: a `<` directly
    # followed by a non-space character and, later, a `>` (strict: no `>` needed).
    last_gt = n if strict else s.rfind(">")
    for m in _LT.finditer(s, 0, max(last_gt, 0)):
        marks.add(m.start())

    marks.update(m.start() for m in (_ENTITY_STRICT if strict else _ENTITY).finditer(s))

    if line_start:
        _mark_line_start(s, marks)
    if cell:
        marks.update(m.start() for m in _PIPE.finditer(s))
    if heading:
        body = s.rstrip("#")
        if len(body) < n and (not body or body[-1] in " \t"):
            marks.add(len(body))  # a trailing `#` run would be the closing sequence

    if not marks:
        return s, marks
    out = []
    prev = 0
    for i in sorted(marks):
        out.append(s[prev:i])
        out.append("\\")
        prev = i
    out.append(s[prev:])
    return "".join(out), marks


def _autolink_hazard(s: str, marks: set[int]) -> bool:
    """True when a backslash would land inside a word part GFM may turn into a link.

    cmark-gfm's autolink extension (``www.``, ``scheme:``/``scheme://``, ``a@b.c``) keeps
    backslashes in the link text, so such values go in a code span instead. A link can
    start no earlier than ``www.`` or the run of ``[A-Za-z0-9+._-]`` before the first
    ``:`` or ``@`` of a word, and a word ends only at ASCII whitespace (not at NBSP).
    """
    if not marks or not _AUTOLINKISH.search(s):
        return False
    for word in _ASCII_WORD.finditer(s):
        a, b = word.span()
        m = _AUTOLINKISH.search(s, a, b)
        if not m:
            continue
        start = m.start()
        if s[start] in ":@":
            while start > a and s[start - 1] in _LINK_CHARS:
                start -= 1
        if any(start <= i < b for i in marks):
            return True
    return False


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(LINE_BREAK, text)


def _longest_run(text: str, pattern: re.Pattern = _BACKTICK_RUN) -> int:
    return max((b - a for a, b in (m.span() for m in pattern.finditer(text))), default=0)


def _literal(text: str) -> str:
    """Every ASCII punctuation character backslash-escaped, leading and trailing
    whitespace as numeric character references: nothing can form, nothing is trimmed.
    Used where a code span cannot be (a backtick run of CODE_SPAN_FENCE_MAX or more)."""
    body = text.strip()
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(lead) + len(body):] if body else ""
    if not body:
        lead, trail = text, ""
    ref = "".join(f"&#{ord(c)};" for c in lead)
    esc = "".join("\\" + c if c in _ASCII_PUNCT else c for c in body)
    return ref + esc + "".join(f"&#{ord(c)};" for c in trail)


def _code_span(text: str, *, cell: bool = False) -> str:
    if not text:
        return ""
    longest = _longest_run(text)
    if longest + 1 > CODE_SPAN_FENCE_MAX:
        return _literal(text)
    fence_ = "`" * (longest + 1)
    # CommonMark strips one space from each side when both ends are spaces (and the
    # content is not all spaces); pad so the content survives, and so that a backtick at
    # either end cannot join the fence.
    pad = text[0] == "`" or text[-1] == "`" or (
        text[0] == " " and text[-1] == " " and text.strip(" ") != ""
    )
    if cell:
        text = text.replace("|", "\\|")  # GFM splits cells before code spans are seen
    if pad:
        text = f" {text} "
    return f"{fence_}{text}{fence_}"


def _render(text: str, *, strict: bool = False, line_start: bool = False,
            cell: bool = False, heading: bool = False) -> str:
    """One line of text for a context: untouched, backslash-escaped, or a code span."""
    if not text:
        return ""
    if PLAIN.fullmatch(text):
        return text
    if text[0].isspace() or text[-1].isspace():
        return _code_span(text, cell=cell)
    if not (line_start or heading) and not _MAY_MARK.search(text):
        return text  # "/svc-1", "Up 3 minutes (healthy)", "nginx:1.27": nothing to mark
    escaped, marks = _escape_text(text, strict=strict, line_start=line_start, cell=cell,
                                  heading=heading)
    if not marks:
        return text
    single_token = not any(ch.isspace() for ch in text)
    if single_token or _autolink_hazard(text, marks):
        return _code_span(text, cell=cell)
    return escaped


# --------------------------------------------------------------------------------------
# Contexts
# --------------------------------------------------------------------------------------


def code_span(text: str, *, cell: bool = False) -> str:
    """``text`` as one code span (line breaks shown as ``↵``); empty text gives ``""``.

    Text with a backtick run of CODE_SPAN_FENCE_MAX or more cannot be a code span in
    cmark-gfm; it comes back backslash-escaped instead (the same characters show).
    ``cell=True`` for a span inside a GFM table cell: its ``|`` become ``\\|``."""
    return _code_span(_one_line(clean(text)), cell=cell)


def inline(value: str, *, strict: bool = False) -> str:
    """One value in running text: after ``field: `` on an object line, in a sentence.

    Non-strict output is safe when the value ends its line (or table cell) and what
    precedes it on the line is the server's own balanced text, or strict values — as in
    ``- field: value`` and ``- Call `x` with value``. Use ``strict=True`` for anything
    that other text may follow on the same line (values of a short list joined by ", ",
    field names, bold keys).
    """
    return _render(_one_line(clean(value)), strict=strict)


def list_item(text: str, *, strict: bool = False) -> str:
    """Text after ``- ``: stays literal even where it would open a block."""
    return _render(_one_line(clean(text)), strict=strict, line_start=True)


def heading(text: str, *, strict: bool = False) -> str:
    """Text after ``#``/``##``: inline rules plus a trailing ``#`` run.

    ``strict=True`` when the server writes more after the value on the heading line.
    """
    return _render(_one_line(clean(text)), strict=strict, heading=True)


def bold_key(name: str) -> str:
    """``**name**`` safe for any name (strict rules); an empty name gives ``""``."""
    inner = _render(_one_line(clean(name)), strict=True)
    return f"**{inner}**" if inner else ""


def object_line(name: str, value: str) -> str:
    """An object line ``- name: value``: name strict and literal at the line start."""
    return f"- {list_item(name, strict=True)}: {inline(value)}".rstrip(" ")


def _cut(text: str, max_len: int) -> str:
    keep = max(max_len, 1) - 1
    # do not separate a base character from its combining marks
    while 0 < keep < len(text) and unicodedata.category(text[keep])[0] == "M":
        keep -= 1
    return text[:keep]


# A list repeats its values (states, images, statuses), and a model asks for the same list
# again: a cell is a pure function of its arguments, so short values are remembered, in
# one plain dict per (max_len, whole) (a dict lookup is several times cheaper than an
# lru_cache call, and a table makes hundreds); each holds at most CELL_MEMO_SIZE values,
# the oldest forgotten first. Long values, rare and costly to keep, are not remembered.
CELL_MEMO_SIZE = 8192
CELL_MEMO_MAX_LEN = 256
_cell_memos: dict[tuple[int | None, bool], dict[str, str]] = {}


def _memo(max_len: int | None, whole: bool) -> dict[str, str]:
    memo = _cell_memos.get((max_len, whole))
    if memo is None:
        memo = _cell_memos[(max_len, whole)] = memo_table()
    return memo


def _remember(memo: dict[str, str], value: str, max_len: int | None, whole: bool) -> str:
    text = _cell(value, max_len, whole)
    return keep(memo, value, text, CELL_MEMO_SIZE) if len(value) <= CELL_MEMO_MAX_LEN else text


def cell(value: str, *, max_len: int | None = None, whole: bool = False) -> str:
    """A GFM table cell: one line, ``|`` escaped (also inside code spans).

    Multi-line text shows its first non-blank line and ``…`` when more non-blank lines
    follow; text longer than ``max_len`` characters is cut to ``max_len`` with ``…``.
    ``whole=True`` (IDs, names) never cuts: line breaks are shown as ``↵`` instead.
    """
    if type(value) is not str:  # a str subclass could hash and compare as something else
        return _cell(value, max_len, whole)
    memo = _memo(max_len, whole)
    hit = memo.get(value)
    return hit if hit is not None else _remember(memo, value, max_len, whole)


def cells(values: list[str], *, max_len: int | None = None, whole: bool = False) -> list[str]:
    """``[cell(v, max_len=max_len, whole=whole) for v in values]``: a table column's
    strings in one call (the same memo, without a call per value it already holds)."""
    memo = _memo(max_len, whole)
    return [memo[v] if type(v) is str and v in memo else cell(v, max_len=max_len, whole=whole) for v in values]


def _cell(value: str, max_len: int | None, whole: bool) -> str:
    text = clean(value)
    if whole:
        return _render(_one_line(text), cell=True)
    lines = [line.rstrip("\r") for line in text.split("\n")]
    content = [i for i, line in enumerate(lines) if line.strip()]
    first = lines[content[0]] if content else ""
    more = len(content) > 1
    if max_len is not None and len(first) + (1 if more else 0) > max_len:
        first, more = _cut(first, max_len), True
    return _render(first + (CUT if more else ""), cell=True)


_LINE_START_RUN = re.compile(r"^ {0,3}(`+|~+)", re.MULTILINE)


def fence(text: str, info: str = "") -> str:
    """A code block holding ``text`` as is (after ``clean``); ends with a newline.

    Only a line that starts (after at most three spaces) with a run of the fence character
    at least as long as the fence can close it. The fence is backticks, one longer than the
    longest such run of backticks in the content and at least three; tildes when that
    would pass FENCE_MAX (cmark-gfm's limit); it is always closed. When both would pass it,
    the block is an indented code block instead (a blank line, then every line indented by
    four spaces): nothing in the content can end it, but the info string is lost and, as
    CommonMark says, blank lines at its start and end are not shown. ``info`` keeps only
    ``[A-Za-z0-9_.+#-]`` characters of its first word. Emit it at the top level (not
    inside a list or quote), where no indentation can end it early.
    """
    body = clean(text)
    if body and not body.endswith("\n"):
        body += "\n"
    longest = {"`": 0, "~": 0}
    for m in _LINE_START_RUN.finditer(body):
        run = m.group(1)
        longest[run[0]] = max(longest[run[0]], len(run))
    words = clean(info).split()
    safe_info = re.sub(r"[^A-Za-z0-9_.+#-]", "", words[0]) if words else ""
    for char in "`~":
        length = max(3, longest[char] + 1)
        if length <= FENCE_MAX:
            marker = char * length
            return f"{marker}{safe_info}\n{body}{marker}\n"
    lines = body.split("\n")[:-1]
    return "\n" + "".join(f"    {line}\n" for line in lines)


_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB")


def one_line(value: Any, limit: int) -> str:
    """An untrusted value as one short line (not yet escaped): a string as it is, anything
    else as compact JSON (a value nested too deep to write is `…`), whitespace runs made one
    space, cut at `limit` characters with CUT."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"), sort_keys=True)
        except (RecursionError, ValueError):
            text = CUT
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + CUT


def human_bytes(n: int) -> str:
    """A byte count in SI units with one decimal: ``1500000000`` → ``1.5 GB``. Past the
    largest unit the count is written in it (no float of a huge integer is made)."""
    sign = "-" if n < 0 else ""
    n = abs(int(n))
    if n < 1000:
        return f"{sign}{n} B"
    top = 1000 ** (len(_UNITS) - 1)
    if n >= 1000 * top:
        return f"{sign}{n // top} {_UNITS[-1]}"
    value = float(n)
    unit = 0
    while unit < len(_UNITS) - 1 and round(value, 1) >= 1000:
        value /= 1000
        unit += 1
    return f"{sign}{value:.1f} {_UNITS[unit]}"


# (unit, nanoseconds) from the largest: a duration is written in its two largest units
_DURATION_UNITS = (("d", 86_400 * 10**9), ("h", 3_600 * 10**9), ("min", 60 * 10**9), ("s", 10**9))
_SUBSECOND_UNITS = (("s", 10**9), ("ms", 10**6), ("µs", 10**3))


def human_duration(ns: int) -> str:
    """A duration in nanoseconds (0 or more) in human units: below a minute one unit with
    at most two decimals, cut not rounded (``1.5 s``, ``250 ms``, ``40 ns``), from a minute
    on its two largest whole units (``1 min 30 s``, ``2 h``, ``3 d 4 h``)."""
    ns = int(ns)
    if ns < 60 * 10**9:
        for unit, size in _SUBSECOND_UNITS:
            if ns >= size:
                whole, part = divmod(ns * 100 // size, 100)
                return f"{whole}.{part:02d}".rstrip("0").rstrip(".") + f" {unit}"
        return f"{ns} ns" if ns else "0 s"
    seconds = ns // 10**9 * 10**9  # whole seconds from here on
    parts = []
    for unit, size in _DURATION_UNITS:
        count, seconds = divmod(seconds, size)
        if count or parts:
            parts.append((count, unit))
        if len(parts) == 2:
            break
    return " ".join(f"{count} {unit}" for count, unit in parts if count) or "0 s"
