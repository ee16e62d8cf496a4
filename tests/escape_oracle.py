"""Structure oracle for interpreter.text.escape: two real parsers decide, not string checks.

A value is escaped for a rendering context, placed in a small document, and the document
is parsed by markdown-it-py (commonmark + table + strikethrough) and by cmark-gfm (table,
strikethrough, autolink, tasklist; raw HTML passed through; footnotes on). Each HTML
result is read into a tree and compared with the tree the context itself makes, where the
value's place holds exactly the expected text:

* code spans outside ``<pre>`` are counted (the context's own plus one for each value the
  escaper chose to write as a code span) and then replaced by their text;
* a GFM autolink literal (cmark-gfm only) is accepted when its text is a plain string and
  its href is that text (or ``http://``/``mailto:`` + text), then replaced by its text —
  a link whose text equals the value hides nothing;
* whitespace-only text between block elements is dropped (renderer layout, not content).

Anything else — emphasis, strike, links, images, HTML, a second paragraph, a nested list,
a heading, a lost or extra character — makes the trees differ. JSON blocks are checked
apart (``check_json_block``): one code block whose text ``json.loads`` reads back.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from html import unescape
from urllib.parse import unquote

from cmarkgfm import cmark
from markdown_it import MarkdownIt

from interpreter.text import escape as E

from .helpers import data_file

# --------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------

_MDIT = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_GFM_OPTS = cmark.Options.CMARK_OPT_UNSAFE | cmark.Options.CMARK_OPT_FOOTNOTES
_GFM_EXT = ["table", "strikethrough", "autolink", "tasklist"]



def _rendering_limit(key: str) -> int:
    """A size limit of the packaged rules/rendering.yaml (the only place it is set)."""
    from ruamel.yaml import YAML

    from interpreter import RULES_DIR

    return YAML(typ="safe").load((RULES_DIR / "rendering.yaml").read_text(encoding="utf-8"))[key]


JSON_BLOCK_MAX = _rendering_limit("json_block_max")  # what render.json_block is given

def mdit_html(text: str) -> str:
    return _MDIT.render(text)


def gfm_html(text: str) -> str:
    return cmark.markdown_to_html_with_extensions(text, _GFM_OPTS, _GFM_EXT)


PARSERS: dict[str, Callable[[str], str]] = {"markdown-it-py": mdit_html, "cmark-gfm": gfm_html}

# --------------------------------------------------------------------------------------
# HTML → tree
# --------------------------------------------------------------------------------------

_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed",
         "source", "track", "wbr", "param"}
_BLOCK_PARENTS = {"#root", "ul", "ol", "table", "thead", "tbody", "tr", "blockquote"}


@dataclass
class El:
    tag: str
    attrs: dict = field(default_factory=dict)
    children: list = field(default_factory=list)

    def __eq__(self, other):  # attributes are not compared (except hrefs, checked apart)
        return isinstance(other, El) and self.tag == other.tag and self.children == other.children

    def __repr__(self):
        return f"{self.tag}{self.children!r}"


_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*?)(/?)>|<[^>]*>?")
_ATTR = re.compile(r'([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*"([^"]*)")?')


def html_tree(html: str) -> El:
    """Read a renderer's HTML into a tree.

    Both renderers escape ``<`` ``>`` ``&`` ``"`` in text, so every ``<`` is markup; raw
    HTML passed through from a value (always a failure) becomes elements or ``#raw`` nodes.
    """
    root = El("#root")
    stack = [root]
    pos = 0
    for m in _TAG.finditer(html):
        if m.start() > pos:
            stack[-1].children.append(unescape(html[pos:m.start()]))
        pos = m.end()
        closing, tag, attrs, selfclose = m.group(1), m.group(2), m.group(3), m.group(4)
        if tag is None:  # comment, declaration, processing instruction, stray `<`
            stack[-1].children.append(El("#raw"))
            continue
        tag = tag.lower()
        if closing:
            for i in range(len(stack) - 1, 0, -1):
                if stack[i].tag == tag:
                    del stack[i:]
                    break
            else:
                stack[-1].children.append(El("/" + tag))
            continue
        node = El(tag, {k: unescape(v or "") for k, v in _ATTR.findall(attrs or "")})
        stack[-1].children.append(node)
        if not selfclose and tag not in _VOID:
            stack.append(node)
    if pos < len(html):
        stack[-1].children.append(unescape(html[pos:]))
    return root


def text_of(node) -> str:
    if isinstance(node, str):
        return node
    return "".join(text_of(c) for c in node.children)


class Mismatch(Exception):
    pass


def normalise(node: El, counts: dict, *, in_pre: bool = False) -> El:
    """Drop layout whitespace, count and flatten code spans and autolink literals."""
    out: list = []
    for child in node.children:
        if isinstance(child, str):
            if node.tag in _BLOCK_PARENTS and not child.strip():
                continue
            out.append(child)
            continue
        if child.tag == "code" and not in_pre:
            if any(not isinstance(c, str) for c in child.children):
                raise Mismatch(f"markup inside a code span: {child!r}")
            counts["code"] += 1
            out.append(text_of(child))
            continue
        if child.tag == "a" and all(isinstance(c, str) for c in child.children):
            text = text_of(child)
            href = unquote(child.attrs.get("href") or "")
            if text and href in {unquote(p + text) for p in ("", "http://", "mailto:")}:
                counts["autolink"] += 1
                out.append(text)
                continue
        out.append(normalise(child, counts, in_pre=in_pre or child.tag == "pre"))
    merged: list = []
    for c in out:
        if isinstance(c, str) and merged and isinstance(merged[-1], str):
            merged[-1] += c
        else:
            merged.append(c)
    return El(node.tag, node.attrs, [c for c in merged if c != ""])


def el(tag: str, *children) -> El:
    kids = [c for c in children if c != ""]
    return El(tag, {}, kids)


# --------------------------------------------------------------------------------------
# Expected texts
# --------------------------------------------------------------------------------------


def one_line_text(value: str) -> str:
    """What an inline context must show: the filtered value, line breaks as ↵."""
    return re.sub(r"\r?\n", E.LINE_BREAK, E.clean(value))


def cell_text(value: str, max_len: int | None = None, whole: bool = False) -> str:
    """Reference for the documented cell rule (written apart from escape.cell)."""
    text = E.clean(value)
    if whole:
        return re.sub(r"\r?\n", E.LINE_BREAK, text)
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    nonblank = [ln for ln in lines if ln.strip()]
    first = nonblank[0] if nonblank else ""
    more = len(nonblank) > 1
    if max_len is not None and len(first) + more > max_len:
        keep = max(max_len, 1) - 1
        while 0 < keep < len(first) and unicodedata.category(first[keep])[0] == "M":
            keep -= 1  # never between a base character and its marks
        first, more = first[:keep], True
    return first + (E.CUT if more else "")


def _line_start_run(body: str, char: str) -> int:
    """The longest run of ``char`` that starts a line after at most three spaces."""
    runs = [len(m.group(1)) for m in re.finditer(r"^ {0,3}(" + re.escape(char) + "+)", body, re.M)]
    return max(runs, default=0)


def fence_text(value: str) -> str:
    """What a fenced block must hold: the filtered value, ending with a newline. When no
    fence within E.FENCE_MAX can hold it (line-start runs of both ` and ~ that long),
    the documented indented block: leading and trailing blank lines are not shown."""
    body = E.clean(value).replace("\r\n", "\n")
    body += "\n" if body and not body.endswith("\n") else ""
    if min(_line_start_run(body, "`"), _line_start_run(body, "~")) + 1 > E.FENCE_MAX:
        lines = body.split("\n")[:-1]
        while lines and not lines[0].strip(" \t"):
            lines.pop(0)
        while lines and not lines[-1].strip(" \t"):
            lines.pop()
        body = "".join(line + "\n" for line in lines)
    return body


def is_code(out: str, *, bold: bool = False) -> bool:
    """The escaper writes a value as a code span iff its output starts with a backtick."""
    return out.startswith("**`" if bold else "`")


def _line(prefix: str, out: str, text: str) -> str:
    # the parser drops the trailing space of a line whose value is empty
    return (prefix + text).rstrip(" ") if out == "" else prefix + text


# --------------------------------------------------------------------------------------
# Contexts: value → (markdown, expected tree children, expected code span count)
# --------------------------------------------------------------------------------------

Context = Callable[[str], tuple[str, list, int]]


def ctx_cell(v: str):
    c = E.cell(v)
    t = cell_text(v)
    md = f"| Name | Value |\n| --- | --- |\n| {c} | {c} |\n"
    tree = [el("table", el("thead", el("tr", el("th", "Name"), el("th", "Value"))),
               el("tbody", el("tr", el("td", t), el("td", t))))]
    return md, tree, 2 * is_code(c)


def ctx_object_line(v: str):
    out = E.inline(v)
    t = one_line_text(v)
    return f"- key: {out}\n", [el("ul", el("li", _line("key: ", out, t)))], is_code(out)


def ctx_bold_key(v: str):
    out = E.bold_key(v)
    t = one_line_text(v)
    md = f"- {out}: x\n"
    if out == "":
        return md, [el("ul", el("li", ": x"))], 0
    return md, [el("ul", el("li", el("strong", t), ": x"))], is_code(out, bold=True)


def ctx_title(v: str):
    out = E.heading(v)
    return f"## {out}\n", [el("h2", one_line_text(v))], is_code(out)


def ctx_list_item(v: str):
    out = E.list_item(v)
    return f"- {out}\n", [el("ul", el("li", one_line_text(v)))], is_code(out)


def ctx_next_step(v: str):
    out = E.inline(v)
    t = one_line_text(v)
    md = f"- Call `container.get` with {out}\n"
    return md, [el("ul", el("li", _line("Call container.get with ", out, t)))], 1 + is_code(out)


def ctx_fence(v: str):
    md = E.fence(v, info="text")
    return md, [el("pre", el("code", fence_text(v)))], 0


CONTEXTS: dict[str, Context] = {
    "table cell": ctx_cell,
    "object line": ctx_object_line,
    "bold key": ctx_bold_key,
    "title": ctx_title,
    "list item": ctx_list_item,
    "next step": ctx_next_step,
    "fenced block": ctx_fence,
}


# Two values on one line: a short list (strict, strict), an object line (strict key, value),
# a bold key and its value, a heading with two values, a table row. Both orders.
def ctx_pairs(a: str, b: str):
    ia, ib = E.inline(a, strict=True), E.inline(b, strict=True)
    ta, tb = one_line_text(a), one_line_text(b)
    la, lb = E.list_item(a, strict=True), E.list_item(b, strict=True)
    na, nb = E.inline(a), E.inline(b)
    ka, kb = E.bold_key(a), E.bold_key(b)
    ca, cb = E.cell(a), E.cell(b)
    cta, ctb = cell_text(a), cell_text(b)
    items, lis, code = [], [], 0

    def add(md_line: str, expected: El, n_code: int):
        nonlocal code
        items.append(md_line)
        lis.append(expected)
        code += n_code

    for (i1, t1), (i2, t2) in (((ia, ta), (ib, tb)), ((ib, tb), (ia, ta))):
        add(f"- tags: {i1}, {i2}", el("li", _line("tags: " + t1 + ", ", i2, t2)),
            is_code(i1) + is_code(i2))
    for (l1, t1), (n2, t2) in (((la, ta), (nb, tb)), ((lb, tb), (na, ta))):
        add(f"- {l1}: {n2}", el("li", _line(t1 + ": ", n2, t2)), is_code(l1) + is_code(n2))
    for (k1, t1), (n2, t2) in (((ka, ta), (nb, tb)), ((kb, tb), (na, ta))):
        if k1:
            add(f"- {k1}: {n2}", el("li", el("strong", t1), _line(": ", n2, t2)),
                is_code(k1, bold=True) + is_code(n2))
        else:
            add(f"- : {n2}", el("li", _line(": ", n2, t2)), is_code(n2))
    md = "\n".join(items) + "\n\n"
    heads = []
    for (x, tx), (y, ty) in (((a, ta), (b, tb)), ((b, tb), (a, ta))):
        hx, hy = E.heading(x, strict=True), E.heading(y)
        md += f"## {hx}, {hy}\n\n"
        heads.append(el("h2", _line(tx + ", ", hy, ty)))
        code += is_code(hx) + is_code(hy)
    md += f"| H1 | H2 |\n| --- | --- |\n| {ca} | {cb} |\n| {cb} | {ca} |\n"
    code += 2 * (is_code(ca) + is_code(cb))
    tree = [el("ul", *lis), *heads,
            el("table", el("thead", el("tr", el("th", "H1"), el("th", "H2"))),
               el("tbody", el("tr", el("td", cta), el("td", ctb)),
                  el("tr", el("td", ctb), el("td", cta))))]
    return md, tree, code


# --------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------


def check_document(md: str, expected: list, n_code: int) -> list[str]:
    """Parse ``md`` with both parsers; return a description of every difference."""
    problems = []
    for name, render in PARSERS.items():
        html = render(md)
        counts = {"code": 0, "autolink": 0}
        try:
            got = normalise(html_tree(html), counts)
        except Mismatch as exc:
            problems.append(f"{name}: {exc}\n  markdown: {md!r}\n  html: {html!r}")
            continue
        want = El("#root", {}, expected)
        if got != want or counts["code"] != n_code:
            problems.append(
                f"{name}: structure/text differs (code spans {counts['code']}, expected {n_code})"
                f"\n  markdown: {md!r}\n  html:     {html!r}\n  got:      {got.children!r}"
                f"\n  expected: {expected!r}"
            )
        if name == "markdown-it-py" and counts["autolink"]:
            problems.append(f"{name}: unexpected link\n  markdown: {md!r}\n  html: {html!r}")
    return problems


def check_json_block(value) -> list[str]:
    """A JSON block (render.json_block) parsed by both parsers: one code block (after the
    note a cut block carries) whose text is valid JSON — the value itself when it fits."""
    from interpreter.text.render import json_block, json_text

    md = json_block(value, JSON_BLOCK_MAX)
    fits = len(json_text(value, indent=2)) <= JSON_BLOCK_MAX
    problems = []
    for name, render in PARSERS.items():
        html = render(md)
        counts = {"code": 0, "autolink": 0}
        try:
            tree = normalise(html_tree(html), counts)
        except Mismatch as exc:
            problems.append(f"{name}: {exc}\n  markdown: {md[:300]!r}")
            continue
        blocks = [c for c in tree.children if isinstance(c, El) and c.tag == "pre"]
        others = [c for c in tree.children if not (isinstance(c, El) and c.tag in ("pre", "p"))]
        if len(blocks) != 1 or others or (fits and len(tree.children) != 1):
            problems.append(f"{name}: not one code block\n  markdown: {md[:300]!r}\n  got: {tree.children!r:.300}")
            continue
        code = blocks[0].children[0] if blocks[0].children else El("code")
        text = text_of(code)
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            problems.append(f"{name}: the block is not JSON ({exc})\n  text: {text[:300]!r}")
            continue
        if fits and parsed != value:
            problems.append(f"{name}: the block does not read back as the value\n  text: {text[:300]!r}")
    return problems


def check_value(value: str, contexts: dict[str, Context] = CONTEXTS) -> list[str]:
    problems = []
    for cname, ctx in contexts.items():
        md, expected, n_code = ctx(value)
        for p in check_document(md, expected, n_code):
            problems.append(f"[{cname}] value {value!r}\n  {p}")
    return problems


def check_pair(a: str, b: str) -> list[str]:
    md, expected, n_code = ctx_pairs(a, b)
    return [f"[pair] {a!r} + {b!r}\n  {p}" for p in check_document(md, expected, n_code)]


# --------------------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------------------


def spec_examples() -> list[dict]:
    """All 652 CommonMark 0.31.2 examples, then the GFM extension examples."""
    cm = json.loads(data_file("commonmark-0.31.2-spec.json").read_text(encoding="utf-8"))
    gfm = json.loads(data_file("gfm-extension-examples.json").read_text(encoding="utf-8"))
    out = [dict(e, source="commonmark") for e in cm]
    out += [dict(e, source="gfm-spec") for e in gfm["gfm_spec_extension_examples"]]
    out += [dict(e, source="gfm-extensions.txt") for e in gfm["extensions_txt_examples"]]
    return out


def example_values(example: dict) -> list[str]:
    """The example's Markdown as one value, without its final newline, and each line."""
    md = example["markdown"]
    values = [md, md.rstrip("\n")]
    values += md.split("\n")
    seen, out = set(), []
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


#: Partners for the pair test: fragments whose delimiters would pair with a neighbour.
NASTY_PARTNERS = [
    "*", "**", "_", "__", "~", "~~", "`", "``", "[", "]", "](http://evil)", "![x",
    "<", ">", "<a", "b>", "&amp", ";", "\\", "x*", "*x", "x_", "_x", "a`b", "[x]: /evil",
    "<!--", "-->", "www.evil.example", "| x |", "# x",
]


def sample_pairs(values: list[str], per_value: int) -> list[tuple[str, str]]:
    """A fixed sample of values × NASTY_PARTNERS: value i meets `per_value` partners spread
    evenly from partner i on (i, i+k, i+2k, … with k = partners // per_value), so every
    partner is met when there are at least k values."""
    n = len(NASTY_PARTNERS)
    step = n // per_value
    return [(v, NASTY_PARTNERS[(i + j * step) % n]) for i, v in enumerate(values) for j in range(per_value)]


def pair_sweep(values: list[str]) -> tuple[int, list[str]]:
    """Every value × every partner through check_pair: (documents per parser, problems)."""
    problems: list[str] = []
    for a in values:
        for b in NASTY_PARTNERS:
            problems += check_pair(a, b)
    return len(values) * len(NASTY_PARTNERS), problems
