"""interpreter.text.escape: the control filter and every Markdown context, proven by oracles.

* structure oracle (tests/escape_oracle.py): every CommonMark 0.31.2 and GFM extension
  example used as a hostile value in every rendering context, parsed by markdown-it-py and
  cmark-gfm: no structure of its own, the text comes back; pairs of values on one line;
  Hypothesis over arbitrary and Markdown-heavy text;
* character oracle: all 1,114,112 code points through ``clean``;
* terminal oracle: pyte shows exactly the visible characters after ``clean``;
* plain values stay byte-identical; performance and linearity.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pyte
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interpreter.text import escape as E
from tests import escape_oracle as O
from tests.helpers import examples

# --------------------------------------------------------------------------------------
# Figures (pinned so a change of corpus or contexts is visible in review)
# --------------------------------------------------------------------------------------

EXAMPLES = O.spec_examples()
N_COMMONMARK, N_GFM_SPEC, N_GFM_EXT = 652, 24, 28
N_EXAMPLES = N_COMMONMARK + N_GFM_SPEC + N_GFM_EXT  # 704
N_CONTEXTS = len(O.CONTEXTS)  # 7: table cell, object line, bold key, title, list item, next step, fenced block
N_PARSERS = len(O.PARSERS)  # 2
#: 704 examples × 7 contexts = 4,928 example×context placements (each example whole);
#: with each example's lines and its text without the final newline as further values,
#: 2,156 distinct values × 7 contexts × 2 parsers = 30,184 parsed documents.
SPEC_PLACEMENTS = N_EXAMPLES * N_CONTEXTS
N_SPEC_VALUES = 2156
#: pairs: every example (whole) × 6 of the 30 partners, both orders, four pair contexts per
#: document; example i meets partners i, i+5, …, i+25 (mod 30), so every partner meets
#: a fifth of the examples. `make bench` runs the full 704 × 30 (O.pair_sweep).
PARTNERS_PER_EXAMPLE = 6
N_PAIRS = N_EXAMPLES * PARTNERS_PER_EXAMPLE  # 4,224 documents per parser

HYPOTHESIS = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def spec_values() -> list[str]:
    seen, out = set(), []
    for ex in EXAMPLES:
        for v in O.example_values(ex):
            if v not in seen:
                seen.add(v)
                out.append(v)
    return out


def _report(problems: list[str], limit: int = 5) -> str:
    return f"{len(problems)} problem(s); first ones:\n\n" + "\n\n".join(problems[:limit])


# --------------------------------------------------------------------------------------
# Structure oracle over the spec examples
# --------------------------------------------------------------------------------------


def test_corpus_size():
    counts = {}
    for ex in EXAMPLES:
        counts[ex["source"]] = counts.get(ex["source"], 0) + 1
    assert counts == {"commonmark": N_COMMONMARK, "gfm-spec": N_GFM_SPEC,
                      "gfm-extensions.txt": N_GFM_EXT}
    assert len(spec_values()) == N_SPEC_VALUES


def test_spec_examples_form_no_structure_in_any_context():
    values = spec_values()
    problems: list[str] = []
    for v in values:
        problems += O.check_value(v)
    checked = len(values) * N_CONTEXTS * N_PARSERS
    figure = (f"{N_EXAMPLES} examples × {N_CONTEXTS} contexts = {SPEC_PLACEMENTS} placements; "
              f"{len(values)} values × {N_CONTEXTS} contexts × {N_PARSERS} parsers = {checked} documents")
    print("\n" + figure)
    assert not problems, figure + "\n" + _report(problems)


def test_spec_examples_next_to_nasty_partners():
    # a fixed sample of the full sweep (704 × 30, 145 s on a busy machine): make bench runs it whole
    partners = O.NASTY_PARTNERS
    assert len(partners) == 30
    pairs = O.sample_pairs([ex["markdown"] for ex in EXAMPLES], PARTNERS_PER_EXAMPLE)
    assert len(pairs) == N_PAIRS
    assert {b for _, b in pairs} == set(partners)  # every partner is met
    problems: list[str] = []
    for a, b in pairs:
        problems += O.check_pair(a, b)
    assert not problems, f"{N_PAIRS} pair documents × {N_PARSERS} parsers\n" + _report(problems)


@pytest.mark.parametrize(
    "a, b",
    [
        ("x *y", "z* w"),  # emphasis across two values
        ("a`b", "c`d"),  # a code span across two values
        ("foo\\", "bar"),  # a trailing backslash escaping the next delimiter
        ("a\\*b*", "c"),
        ("abc&#x202E;gnp.exe", "x"),
        ("[x]: http://evil/", "click [x]"),
        ("x <a href=", "y>"),
        ("/_data", "foo_"),
        ("~a", "b~"),
        ("![a", "](http://evil.example/?d=SECRET)"),
        ("<!--", "-->"),
        ("[redacted: use X]", "[redacted: use X]: http://evil"),
    ],
)
def test_known_cross_value_traps(a, b):
    problems = O.check_pair(a, b) + O.check_pair(b, a)
    assert not problems, _report(problems)


# --------------------------------------------------------------------------------------
# Hypothesis: any text, every context, both parsers
# --------------------------------------------------------------------------------------

_ANY_CHAR = st.one_of(st.characters(exclude_categories=[]), st.characters(categories=["Cs"]))
_MD_PIECES = list("*_[]()<>!`~|#\\&-+=:;.\"'/ \n\t\r") + [
    "\u00a0", "\u3000", "\u2028", "a", "b", "1", "é", "€", "。", "😀", "\u0301", "↵", "…",
    "www.", "http://", "@", "x.com", "&#x202E;", "&amp;", "\x1b[1m", "\u200b", "\x85",
    "1.", "2)", "    ", "---", "===", "```", "~~~", "<!--", "-->", "<a>", "[^1]", "]:", "](",
]
markdownish = st.lists(st.sampled_from(_MD_PIECES), max_size=30).map("".join)
any_text = st.text(_ANY_CHAR, max_size=60)


@HYPOTHESIS
@given(any_text)
def test_any_text_forms_no_structure(value):
    problems = O.check_value(value)
    assert not problems, _report(problems, 2)


@HYPOTHESIS
@given(markdownish)
def test_markdownish_text_forms_no_structure(value):
    problems = O.check_value(value)
    assert not problems, _report(problems, 2)


@HYPOTHESIS
@given(markdownish, markdownish)
def test_markdownish_pairs_form_no_structure(a, b):
    problems = O.check_pair(a, b)
    assert not problems, _report(problems, 2)


@HYPOTHESIS
@given(st.one_of(any_text, markdownish), st.integers(min_value=1, max_value=12))
def test_cells_cut_and_whole(value, max_len):
    for out, text in ((E.cell(value, max_len=max_len), O.cell_text(value, max_len)),
                      (E.cell(value, whole=True), O.cell_text(value, whole=True))):
        md = f"| a | b |\n| --- | --- |\n| {out} | x |\n"
        tree = [O.el("table", O.el("thead", O.el("tr", O.el("th", "a"), O.el("th", "b"))),
                     O.el("tbody", O.el("tr", O.el("td", text), O.el("td", "x"))))]
        problems = O.check_document(md, tree, O.is_code(out))
        assert not problems, _report(problems, 2)
        assert "\n" not in out and "\r" not in out


# --------------------------------------------------------------------------------------
# The control filter
# --------------------------------------------------------------------------------------

_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def _default_ignorable() -> set[int]:
    return {cp for lo, hi in E.DEFAULT_IGNORABLE for cp in range(lo, hi + 1)}


def test_default_ignorable_table_is_pinned():
    di = _default_ignorable()
    assert len(di) == 4174  # Default_Ignorable_Code_Point, Unicode 14.0–17.0
    for cp in (0x00AD, 0x034F, 0x061C, 0x115F, 0x17B4, 0x180E, 0x180F, 0x200B, 0x200D,
               0x202E, 0x2060, 0x2064, 0x2065, 0x206F, 0x3164, 0xFE0F, 0xFEFF, 0xFFA0,
               0xFFF0, 0x1BCA3, 0x1D173, 0xE0001, 0xE0041, 0xE007F, 0xE0100, 0xE01EF, 0xE0FFF):
        assert cp in di, hex(cp)
    assert di >= _BIDI
    # every format character of this Python's Unicode data is either removed or one of the
    # visible prepended marks (Arabic number signs, Syriac abbreviation mark, Kaithi…)
    visible_cf = {*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD, 0x110CD}
    removed = di | {cp for lo, hi in E.EXTRA_INVISIBLE for cp in range(lo, hi + 1)}
    for cp in range(0x110000):
        if unicodedata.category(chr(cp)) == "Cf":
            assert cp in removed or cp in visible_cf, hex(cp)


def test_every_code_point_through_clean():
    """All 1,114,112 code points, each followed by LF, in one call; then per-char checks."""
    di = _default_ignorable()
    extra = {cp for lo, hi in E.EXTRA_INVISIBLE + E.NOT_TEXT for cp in range(lo, hi + 1)}
    big = "".join(chr(cp) + "\n" for cp in range(0x110000))
    out = E.clean(big)
    for i, ch in enumerate(out):
        cp = ord(ch)
        cat = unicodedata.category(ch)
        if cat == "Cc":
            assert ch in "\t\n" or (ch == "\r" and out[i + 1 : i + 2] == "\n"), hex(cp)
        assert cat != "Cs", hex(cp)
        assert cp not in di and cp not in _BIDI and cp not in extra, hex(cp)
        assert ch not in "\u2028\u2029", hex(cp)
    # exactly the documented set is removed: every other code point survives, in order
    kept = [cp for cp in range(0x110000)
            if not (unicodedata.category(chr(cp)) == "Cc" and cp not in (0x09, 0x0A, 0x0D))
            and cp not in di and cp not in extra and cp not in (0x2028, 0x2029, 0x0D)]
    assert out.replace("\n", "").replace("\r", "") == "".join(map(chr, kept)).replace("\n", "")
    assert E.clean(out) == out  # idempotent
    # and each code point alone
    assert E.clean("\r") == "\n" and E.clean("\u2028") == "\n" and E.clean("\u2029") == "\n"
    assert E.clean("\ud800") == "" and E.clean("\udfff") == ""


@pytest.mark.parametrize(
    "raw, cleaned",
    [
        ("plain text", "plain text"),
        ("crlf\r\nstays\r\n", "crlf\r\nstays\r\n"),
        ("lone\rcr", "lone\ncr"),
        ("line\u2028sep\u2029para", "line\nsep\npara"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b]0;title\x07after", "after"),
        ("\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "click"),
        ("\x1bP1;2|payload\x1b\\x", "x"),
        ("\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\y", "y"),
        ("\x1b(0\x1b7\x1bc\x1b=ok", "ok"),
        ("\x9b2Jcsi\x9d0;t\x9cosc", "csiosc"),
        ("\x1b]52;c;ZXZpbA==\x07clip", "clip"),
        ("unterminated \x1b]8;;http://evil\nnext", "unterminated \nnext"),
        ("bell\x07del\x7fnul\x00nel\x85", "belldelnulnel"),
        ("zw\u200bsp\u200c\u200d\u2060\ufeff", "zwsp"),
        ("bidi\u202egnp.exe\u2066\u2069\u061c", "bidignp.exe"),
        ("tag\U000e0041\U000e0042s", "tags"),
        ("vs\ufe0f\U000e0100", "vs"),
        ("shy\u00adhy", "shyhy"),
        ("nonchar\ufffe\uffff\ufdd0\U0010ffff", "nonchar"),
        ("surrogate\ud800x", "surrogatex"),
        ("keep é 日本 😀 \u00a0 tabs\there", "keep é 日本 😀 \u00a0 tabs\there"),
    ],
)
def test_clean_cases(raw, cleaned):
    assert E.clean(raw) == cleaned
    assert E.clean(cleaned) == cleaned


@given(any_text)
def test_clean_properties(text):
    out = E.clean(text)
    assert E.clean(out) == out
    for i, ch in enumerate(out):
        if unicodedata.category(ch) in ("Cc", "Cs"):
            assert ch in "\t\n" or (ch == "\r" and out[i + 1 : i + 2] == "\n")
        assert not any(lo <= ord(ch) <= hi for lo, hi in E.DEFAULT_IGNORABLE)


def test_clean_handles_large_and_repetitive_input():
    """Totality on 1 MB and on the repetitive shapes that break backtracking regexes; the
    speed of these lives in `make bench` (no timed assertion here)."""
    log = ("2024-01-01T00:00:00Z \x1b[32mINFO\x1b[0m container started ✓ id=abc123\r\n" * 14000)[:1_000_000]
    out = E.clean(log)
    assert "\x1b" not in out and "container started" in out
    for unit in ("\x1b[" * 7, "\x1b]" + "a" * 5, "\x9b1;" * 3, "\u200b\x00" * 4, "\r" * 8):
        out = E.clean(unit * 100_000)
        assert "\x1b" not in out and "\x00" not in out and "\u200b" not in out and "\x9b" not in out


# --------------------------------------------------------------------------------------
# Terminal oracle (pyte)
# --------------------------------------------------------------------------------------


def _screen(text: str, cols: int = 80, rows: int = 12) -> tuple[list[str], str]:
    screen = pyte.Screen(cols, rows)
    screen.set_mode(pyte.modes.LNM)  # LF also returns the carriage, like a log viewer
    pyte.Stream(screen).feed(text)
    return [line.rstrip() for line in screen.display], screen.title


def _naive(text: str, rows: int = 12) -> list[str]:
    lines = [line.rstrip("\r").expandtabs(8).rstrip() for line in text.split("\n")]
    return (lines + [""] * rows)[:rows]


TERMINAL_CASES = [
    # (raw value, the characters a reader should see, pyte shows the raw value misleading)
    ("safe\x1b[2K\rEVIL", "safe\nEVIL", True),
    ("visible\x1b]0;pwned title\x07 after", "visible after", True),  # sets the title
    ("visible\x1b]2;pwned\x1b\\ after", "visible after", True),
    ("a \x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ b", "a click b", False),
    ("abc\x08\x08XY", "abcXY", True),
    ("line1\nline2\x1b[1A\x1b[2Kgone", "line1\nline2gone", True),
    ("top\x1b[Hhome\x1b[5;5Hmoved", "tophomemoved", True),
    ("hidden\x1b[8mconceal\x1b[28m", "hiddenconceal", False),  # conceal: pyte draws it
    ("x\x9b2Jy\x9d0;title\x9cz", "xyz", True),
    ("erase\x1b[2Jall", "eraseall", True),
    ("progress 10%\rprogress 99%\r\n", "progress 10%\nprogress 99%\r\n", True),
    ("dcs\x1bP+q544e\x1b\\ end", "dcs end", True),
    ("clip\x1b]52;c;ZXZpbA==\x07board", "clipboard", False),  # clipboard write
    ("tab\tstop\x1b[3g", "tab\tstop", False),
    ("charset\x1b(0lqk\x1b(B", "charsetlqk", False),
    ("save\x1b7xx\x1b8yy", "savexxyy", True),
]


@pytest.mark.parametrize("raw, visible, misleads", TERMINAL_CASES)
def test_terminal_sees_exactly_the_visible_characters(raw, visible, misleads):
    raw_lines, raw_title = _screen(raw)
    if misleads:
        assert raw_lines != _naive(visible) or raw_title, "the raw value should mislead pyte"
    out = E.clean(raw)
    assert out == visible
    lines, title = _screen(out)
    assert title == ""
    assert lines == _naive(out)
    assert "evil" not in out and "pwned" not in out


def test_terminal_every_byte_value():
    for b in range(256):
        value = f"A{chr(b)}B{chr(b)}[2J{chr(b)}]0;t\x07C"
        out = E.clean(value)
        lines, title = _screen(out)
        assert title == "" and lines == _naive(out), (b, out)


# --------------------------------------------------------------------------------------
# Contexts: plain values, code spans, rules
# --------------------------------------------------------------------------------------

PLAIN = [
    "my_container",
    "/var/lib/docker/volumes/x/_data",
    "app_",
    "*/5 * * * *",
    "nginx@sha256:4c0fdaa8b6341bfdeca5f18f7837462c80cff90527ee35ef185571e1c327beac",
    "C:\\data",
    "10.0.0.1:8080",
    "https://example.com/x",
    "running",
    "Up 3 hours (healthy)",
    "0.0.0.0:443->443/tcp",
    "ghcr.io/getarcaneapp/arcane:latest",
    "sha256:abc123",
    "2024-01-01T00:00:00Z",
    "a - b + c = d",
    "50%",
    "user@example.com",
    "It's 5 o'clock",
    "snake_case_name",
    "x < y",
    "é日本😀",
]


@pytest.mark.parametrize("value", PLAIN)
def test_plain_values_stay_byte_identical(value):
    assert E.inline(value) == value
    assert E.cell(value) == value
    assert E.cell(value, whole=True) == value
    assert E.heading(value) == value
    assert E.list_item(value) == value
    assert E.clean(value) is value or E.clean(value) == value


@settings(max_examples=examples(300))  # a narrow alphabet: 300 cover it
@given(st.from_regex(E.PLAIN, fullmatch=True))
def test_the_plain_fast_path_agrees_with_the_full_escape_pass(value):
    # `_render` returns PLAIN text without escaping it; the full pass must leave it alone too,
    # in every context, and the parsers must see it as that one text
    for ctx in ({}, {"strict": True}, {"line_start": True}, {"cell": True}, {"heading": True},
                {"strict": True, "line_start": True}):
        escaped, marks = E._escape_text(value, **ctx)
        assert (escaped, marks) == (value, set()), ctx
    assert E.clean(value) == value
    problems = O.check_value(value)  # both parsers, every context
    assert not problems, _report(problems, 2)


@settings(max_examples=examples(400))
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(lambda c: not E._MAY_MARK.match(c)), max_size=60))
def test_text_without_a_markable_character_is_what_the_full_pass_leaves_alone(value):
    # `_render` returns such text unescaped (outside a line start or a heading); the full
    # pass must mark nothing in it either, in each of those contexts
    for ctx in ({}, {"strict": True}, {"cell": True}, {"strict": True, "cell": True}):
        assert E._escape_text(value, **ctx)[1] == set(), ctx


@pytest.mark.parametrize("value", ["my_container", "10.0.0.1:8080", "C:\\data", "running",
                                   "https://example.com/x", "nginx@sha256:abc", "created_at"])
def test_plain_names_stay_plain_when_strict(value):
    assert E.inline(value, strict=True) == value
    assert E.bold_key(value) == f"**{value}**"


@pytest.mark.parametrize(
    "value, out",
    [
        ("<none>:<none>", "`<none>:<none>`"),
        ("**bold**", "`**bold**`"),
        ("[x](y)", "`[x](y)`"),
        ("a`b`c", "``a`b`c``"),
        ("`x`", "`` `x` ``"),
        ("foo\\", "`foo\\`"),
        ("&copy;", "`&copy;`"),
        (" leading", "` leading`"),
        ("trailing ", "`trailing `"),
        (" both ", "`  both  `"),
        ("   ", "`   `"),
        ("", ""),
    ],
)
def test_single_tokens_become_code_spans(value, out):
    assert E.inline(value) == out


@pytest.mark.parametrize(
    "value, out",
    [
        ("a *b* c", "a \\*b\\* c"),
        ("a * b * c", "a * b * c"),
        ("see [docs](http://x) now", "see \\[docs](http://x) now"),
        ("x <b>bold</b> y", "x \\<b>bold\\</b> y"),
        ("a `b` c", "a \\`b\\` c"),
        ("x ~~y~~ z", "x \\~\\~y\\~\\~ z"),
        ("R&D &amp; more", "R&D \\&amp; more"),
        ("back\\*slash x", "back\\\\*slash x"),
        ("two\nlines", "two↵lines"),
        ("see http://a.com/*x* y", "`see http://a.com/*x* y`"),
    ],
)
def test_text_gets_backslashes_only_where_needed(value, out):
    assert E.inline(value) == out


@pytest.mark.parametrize(
    "value",
    ["# h", "## h", "> q", "- x", "+ x", "* x", "1. x", "1) x", "***", "---", "- -", "--",
     "___", "* * *", "```", "```js", "~~~", "    code", "\tcode", "<div>", "<!-- c", "[ ] task",
     "[x] done", "[a]: http://evil", "[^1]: note", "-", "+", "1.", "#", ">", "=== x"],
)
def test_list_item_never_opens_a_block(value):
    problems = O.check_value(value, {"list item": O.ctx_list_item})
    assert not problems, _report(problems)
    assert E.list_item(value) != value or value == "=== x"


def test_heading_trailing_hashes():
    assert E.heading("C#") == "C#"
    assert E.heading("issue #") == "issue \\#"
    assert E.heading("tag ##") == "tag \\##"
    assert E.heading("#") == "`#`"


def test_cells():
    assert E.cell("a|b c") == "a\\|b c"
    assert E.cell("a|b") == "`a\\|b`"  # single token: a code span, the pipe still escaped
    assert E.cell("`x|y` z") == "\\`x\\|y\\` z"
    assert E.cell("first\nsecond") == "first…"
    assert E.cell("\n\nfirst\n\n") == "first"
    assert E.cell("first\nsecond", whole=True) == "first↵second"
    assert E.cell("abcdefghij", max_len=5) == "abcd…"
    assert E.cell("abcdefghij", max_len=5, whole=True) == "abcdefghij"
    assert E.cell("abc", max_len=3) == "abc"
    assert "\n" not in E.cell("x\r\ny") and "\r" not in E.cell("x\r\ny")


def test_cell_cut_keeps_combining_marks():
    assert E.cell("abce\u0301fgh", max_len=5) == "abc…"


def test_fence():
    assert E.fence("x") == "```\nx\n```\n"
    assert E.fence("") == "```\n```\n"
    assert E.fence("a\n````\nb", "json") == "`````json\na\n````\nb\n`````\n"
    assert E.fence("~~~\n", "text") == "```text\n~~~\n```\n"
    assert E.fence("x", "js`on evil\nmore") == "```json\nx\n```\n"
    assert E.fence("a\x1b[31mb\r\nc") == "```\nab\r\nc\n```\n"


# --------------------------------------------------------------------------------------
# The parsers' limits: fences and code spans
# --------------------------------------------------------------------------------------


def _fence_closes_early(render, char: str, fence_len: int, run: int) -> bool:
    md = char * fence_len + "\n" + char * run + "\n# live\n" + char * fence_len + "\n"
    return "<h1>" in render(md)


def _code_span_forms(render, delimiter: int) -> bool:
    md = "a " + "`" * delimiter + "x" + "`" * delimiter + " b\n"
    return "<code>" in render(md)


def test_parser_limits_are_the_documented_constants():
    """Measured, not assumed. cmark-gfm clamps a fence's length at 255 (a content line of
    255 or more fence characters closes any longer fence) and matches code span delimiters
    of at most 80 backticks; markdown-it-py has neither limit."""
    gfm, mdit = O.PARSERS["cmark-gfm"], O.PARSERS["markdown-it-py"]
    for char in "`~":
        assert not _fence_closes_early(gfm, char, E.FENCE_MAX, E.FENCE_MAX - 1)
        assert _fence_closes_early(gfm, char, E.FENCE_MAX + 1, E.FENCE_MAX)  # the bug
        assert _fence_closes_early(gfm, char, 1000, E.FENCE_MAX)
        for fence_len in (E.FENCE_MAX + 1, 1000, 2000):
            assert not _fence_closes_early(mdit, char, fence_len, fence_len - 1)
    assert _code_span_forms(gfm, E.CODE_SPAN_FENCE_MAX) and not _code_span_forms(gfm, E.CODE_SPAN_FENCE_MAX + 1)
    for delimiter in (E.CODE_SPAN_FENCE_MAX + 1, 255, 1000):
        assert _code_span_forms(mdit, delimiter)


_LIMIT_RUNS = [3, 4, 79, 80, 81, 253, 254, 255, 256, 300, 1000]


@pytest.mark.parametrize("run", _LIMIT_RUNS)
@pytest.mark.parametrize("shape", ["backticks", "tildes", "both", "indented", "last line", "crlf", "blank edges"])
def test_fences_hold_at_the_parsers_limits(run, shape):
    hostile = "\n# heading\n[link](http://evil.example) ![i](http://evil.example/i.png)\n<b>html</b>\n"
    bt, td = "`" * run, "~" * run
    value = {
        "backticks": bt + hostile + bt + " tail\n" + bt,
        "tildes": td + hostile + td,
        "both": bt + hostile + td + hostile + "   " + bt + "\n" + "  " + td,
        "indented": "   " + bt + hostile + "   " + td + "\n    " + bt + "x",
        "last line": "first" + hostile + bt + "~" * (run // 2),
        "crlf": ("line\r\n" + bt + "\r\n" + td + "\r\n") * 2,
        "blank edges": "\n  \n" + bt + hostile + td + "\n\n \n",
    }[shape]
    problems = O.check_value(value, {"fenced block": O.ctx_fence})
    assert not problems, _report(problems, 2)
    md = E.fence(value)
    if md.startswith("`") or md.startswith("~"):
        assert len(md.split("\n", 1)[0]) <= E.FENCE_MAX


@pytest.mark.parametrize("run", _LIMIT_RUNS)
@pytest.mark.parametrize("shape", ["{r}x*y*", "x{r}", " {r} ", "a {r} `b` *c*", "{r}", "<b>{r}</b>", "www.x.example{r}_y_"])
def test_code_spans_hold_at_the_parsers_limits(run, shape):
    value = shape.format(r="`" * run)
    problems = O.check_value(value, {k: v for k, v in O.CONTEXTS.items() if k != "fenced block"})
    assert not problems, _report(problems, 2)
    for out in (E.inline(value), E.cell(value), E.code_span(value)):
        assert O._line_start_run(out, "`") <= E.CODE_SPAN_FENCE_MAX or not out.startswith("`")


# --------------------------------------------------------------------------------------
# JSON blocks: always valid JSON, in both parsers
# --------------------------------------------------------------------------------------

_JSON_TEXT = st.text(st.one_of(st.characters(exclude_categories=[]), st.characters(categories=["Cs"]),
                               st.sampled_from(["\U000e0041", "\u2028", "\x7f", "\x85", "\u202e", "`", "~", "\n"])),
                     max_size=20)
_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), _JSON_TEXT),
    lambda kids: st.one_of(st.lists(kids, max_size=5), st.dictionaries(_JSON_TEXT, kids, max_size=5)),
    max_leaves=20)


@HYPOTHESIS
@given(_JSON_VALUES)
def test_json_blocks_are_json(value):
    problems = O.check_json_block(value)
    assert not problems, _report(problems, 2)


@pytest.mark.parametrize("value", [
    {"tag": "\U000e0041\U000e0042", "astral": "😀\U0001d173\U0010ffff", "lone": "\ud800x\udfff"},
    ["\u2028\u2029\r\x00\x1b[31m\x7f\x85\u200b\ufeff"],
    {"`" * 300: "~" * 300, "k": "```\n~~~"},
    {"items": [{"id": i, "name": "x" * 50, "tags": ["a\U000e0041"] * 20} for i in range(400)]},  # cut to fit
    {"deep": [[[[[[[[[["\U000e0041" * 2000]]]]]]]]]]},
    "x" * 20000,
])
def test_json_blocks_are_json_edge_cases(value):
    problems = O.check_json_block(value)
    assert not problems, _report(problems, 2)


def test_json_blocks_of_every_spec_example():
    value = {f"{ex['source']}:{i}": ex["markdown"] for i, ex in enumerate(EXAMPLES)}
    chunks = [dict(list(value.items())[i:i + 20]) for i in range(0, len(value), 20)]
    problems = [p for chunk in chunks for p in O.check_json_block(chunk)]
    assert not problems, _report(problems, 2)


def test_code_span():
    assert E.code_span("x") == "`x`"
    assert E.code_span("a``b") == "```a``b```"
    assert E.code_span("`") == "`` ` ``"
    assert E.code_span("a\nb") == "`a↵b`"
    assert E.code_span("") == ""


def test_bold_key_and_object_line():
    assert E.bold_key("name") == "**name**"
    assert E.bold_key("a*b") == "**`a*b`**"
    assert E.bold_key("") == ""
    assert E.object_line("name", "web") == "- name: web"
    assert E.object_line("# x", "y") == "- \\# x: y"
    assert E.object_line("k", "") == "- k:"


@pytest.mark.parametrize(
    "n, text",
    [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (1500, "1.5 kB"), (999_949, "999.9 kB"),
     (999_950, "1.0 MB"), (1_500_000_000, "1.5 GB"), (2_000_000_000_000, "2.0 TB"),
     (3_400_000_000_000_000, "3.4 PB"), (5 * 10**18, "5.0 EB"), (10**400, "1" + "0" * 382 + " EB"), (-1_500_000, "-1.5 MB")],
)
def test_human_bytes(n, text):
    assert E.human_bytes(n) == text


# --------------------------------------------------------------------------------------
# Performance / ReDoS
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    ["*_", "[", "[](", "`", "``x", "<", "<a", "&#", "&amp;", "~", "\\", "user:pass@", "a *b* ", "# "],
)
def test_inline_on_repetitive_input(unit):
    """Totality on the shapes that make backtracking escapers explode (a hang would hit
    the test timeout); their speed is measured by `make bench`, not asserted here."""
    for fn in (E.inline, E.cell, E.list_item, lambda v: E.inline(v, strict=True)):
        out = fn(unit * 20_000)
        assert "\n" not in out


def test_one_megabyte_value():
    value = ("word *emph* `code` [link](x) <b> &amp; ~~s~~ | " * 25_000)[:1_000_000]
    assert "\n" not in E.inline(value) and "\n" not in E.cell(value)
    assert E.fence(value).startswith("```")


DOC = (Path(__file__).resolve().parents[1] / "docs" / "escaping.md")


def _doc_figures(pattern: str) -> list[tuple[int, ...]]:
    """Every match of ``pattern`` in docs/escaping.md (whitespace collapsed), its groups
    read as numbers ("4,928" → 4928); the doc must state the figure at least once."""
    text = re.sub(r"\s+", " ", DOC.read_text(encoding="utf-8"))
    found = [tuple(int(g.replace(",", "")) for g in m.groups()) for m in re.finditer(pattern, text)]
    assert found, f"docs/escaping.md no longer states {pattern!r}"
    return found


def test_figures_in_the_doc_are_true():
    """Every count docs/escaping.md states is the count the suite runs or the engine uses."""
    counts = {}
    for ex in EXAMPLES:
        counts[ex["source"]] = counts.get(ex["source"], 0) + 1
    n_values = len(spec_values())
    n_partners = len(O.NASTY_PARTNERS)
    (cm, gs, ge, total), = _doc_figures(r"all ([\d,]+) CommonMark 0\.31\.2 examples, ([\d,]+) GFM spec extension examples "
                                        r"and ([\d,]+) `extensions\.txt` examples = ([\d,]+)")
    assert (cm, gs, ge, total) == (counts["commonmark"], counts["gfm-spec"], counts["gfm-extensions.txt"], len(EXAMPLES))
    assert _doc_figures(r"([\d,]+) × ([\d,]+) contexts = \*\*([\d,]+) placements\*\*") == [
        (len(EXAMPLES), len(O.CONTEXTS), len(EXAMPLES) * len(O.CONTEXTS))]
    assert _doc_figures(r"\*\*([\d,]+) distinct values × ([\d,]+) contexts × ([\d,]+) parsers = ([\d,]+) parsed documents\*\*") == [
        (n_values, len(O.CONTEXTS), len(O.PARSERS), n_values * len(O.CONTEXTS) * len(O.PARSERS))]
    assert _doc_figures(r"every example × ([\d,]+) of ([\d,]+) hostile partners") == [(PARTNERS_PER_EXAMPLE, n_partners)]
    assert _doc_figures(r"= \*\*([\d,]+) documents per parser\*\*") == [(len(EXAMPLES) * PARTNERS_PER_EXAMPLE,)]
    assert _doc_figures(r"the full ([\d,]+) × ([\d,]+) = ([\d,]+) documents per parser") == [
        (len(EXAMPLES), n_partners, len(EXAMPLES) * n_partners)]
    assert _doc_figures(r"all ([\d,]+) values × ([\d,]+) partners, ([\d,]+) documents per parser") == [
        (n_values, n_partners, n_values * n_partners)]
    # the full profile's count (tests/conftest.py: under CI); a local run is shorter, as the page says
    assert _doc_figures(r"\*\*Hypothesis\*\*, ([\d,]+) examples each") == [(settings.get_profile("ci").max_examples,)]
    assert _doc_figures(r"([\d,]+) in a local run") == [(settings.get_profile("dev").max_examples,)]
    assert _doc_figures(r"all ([\d,]+) through `clean`") == [(0x110000,)]
    assert set(_doc_figures(r"([\d,]+) code points")) == {(len(_default_ignorable()),)}
    nonchars = sum(hi - lo + 1 for lo, hi in E.NOT_TEXT if lo >= 0xFDD0)
    assert _doc_figures(r"the ([\d,]+) noncharacters") == [(nonchars,)]
    assert _doc_figures(r"Unicode (\d+)\.(\d+)\.(\d+)") == [tuple(map(int, E.UNICODE_VERSION.split(".")))]
    assert _doc_figures(r"clamped at ([\d,]+)") == [(E.FENCE_MAX,)]
    assert set(_doc_figures(r"longer than ([\d,]+) \(`FENCE_MAX`\)")) == {(E.FENCE_MAX,)}
    assert _doc_figures(r"delimiter runs of at most ([\d,]+) backticks") == [(E.CODE_SPAN_FENCE_MAX,)]
    assert _doc_figures(r"longer than ([\d,]+) \(`CODE_SPAN_FENCE_MAX`\)") == [(E.CODE_SPAN_FENCE_MAX,)]
    assert _doc_figures(r"longer than ([\d,]+) characters\*\* \(`json_block_max`") == [(O.JSON_BLOCK_MAX,)]


# ---------------------------------------------------------------- the fast paths (issue 12)

# the characters the control filter acts on, and some it leaves, mixed with plain text
_FILTERED = st.text(alphabet=st.sampled_from(list("ab \t\n\r|*`é…—\x1b[0m\x07\x9b\x90\x9c\u200b\u2028\u2029\ufeff\x00\x7f")), max_size=40)


def _clean_by_the_alternation(text: str) -> str:
    """The control filter without its shortcut: the whole alternation, then line ends."""
    return E._EOL.sub("\n", E._STRIP.sub("", text))


@given(_FILTERED)
@settings(max_examples=examples(400))
def test_the_control_filter_shortcut_changes_nothing(text):
    assert E.clean(text) == _clean_by_the_alternation(text)


@given(st.lists(st.sampled_from(["\x1b[32m", "\x1b[0m", "\x1b]0;t\x07", "\x9b1m", "\x1b", "\r\n", "\r", "\n", "INFO ", "ok", "✓",
                                 "\u2028", "\x00", "\x90x\x9c", "\u200b", " "]), min_size=20, max_size=200).map("".join))
@settings(max_examples=examples(300))
def test_the_control_filter_on_a_coloured_log_is_the_alternation(text):
    # long text with colour codes and line ends: the scan for where a match can start and
    # the CRLF shortcut give what the whole alternation and the line-end rewrite give
    assert E.clean(text) == _clean_by_the_alternation(text)


@given(_FILTERED, st.sampled_from([None, 1, 5, 20]), st.booleans())
@settings(max_examples=examples(300))
def test_a_remembered_cell_is_the_cell(text, max_len, whole):
    first = E.cell(text, max_len=max_len, whole=whole)
    assert first == E._cell(text, max_len, whole) == E.cell(text, max_len=max_len, whole=whole)


def test_a_long_cell_value_is_not_remembered():
    long = "x|" * E.CELL_MEMO_MAX_LEN
    assert E.cell(long, max_len=10) == E._cell(long, 10, False)
    assert E.cells([long], max_len=10) == [E._cell(long, 10, False)]
    assert long not in E._memo(10, False)
    assert E.cell("x|y", max_len=10) == E._cell("x|y", 10, False) and "x|y" in E._memo(10, False)


def test_the_cell_memo_is_bounded_and_forgets_the_oldest_first():
    memo = E._memo(7, True)
    memo.clear()
    for i in range(E.CELL_MEMO_SIZE + 3):
        E.cell(f"v{i}", max_len=7, whole=True)
    assert len(memo) == E.CELL_MEMO_SIZE
    assert "v0" not in memo and f"v{E.CELL_MEMO_SIZE + 2}" in memo
    assert E.cell("v0", max_len=7, whole=True) == E._cell("v0", 7, True)


@given(st.text(_ANY_CHAR, max_size=200))
@settings(max_examples=examples(400))
def test_the_unusual_characters_by_bytes_are_the_regex_ones(text):
    # clean's long-text path finds the characters outside printable ASCII by deleting
    # bytes; it must find exactly what the regex finds, in order (surrogates included)
    assert E._unusual(text) == "".join(E._NEEDS_CLEAN.findall(text))


@given(st.text(_ANY_CHAR, min_size=E._SHORT, max_size=200))
@settings(max_examples=examples(300))
def test_the_control_filter_on_long_text_is_the_alternation(text):
    assert E.clean(text) == _clean_by_the_alternation(text)


@given(st.lists(st.one_of(_FILTERED, st.just("x|" * E.CELL_MEMO_MAX_LEN)), max_size=8),
       st.sampled_from([None, 1, 5, 20]), st.booleans())
@settings(max_examples=examples(200))
def test_a_column_of_cells_is_each_cell(values, max_len, whole):
    assert E.cells(values, max_len=max_len, whole=whole) == [E.cell(v, max_len=max_len, whole=whole) for v in values]
