"""Readings beside raw values (bytes, durations, Unix times: rules/rendering.yaml), the order
note of lists Arcane does not sort (overlay `order`), and the engine's notes written without
stray escapes. Structure and fields, checked with markdown-it-py; never the wording."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from interpreter.call.response import Shaped
from interpreter.front.names import Namer
from interpreter.text import escape
from interpreter.text.render import (
    BYTES,
    EPOCH_SECONDS,
    MILLISECONDS,
    MINUTES,
    NANOSECONDS,
    SECONDS,
    Renderer,
    reading,
)

MD = MarkdownIt("commonmark").enable("table")
SI = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15, "EB": 10**18}
NS = {"ns": 1, "µs": 10**3, "ms": 10**6, "s": 10**9, "min": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9}
READING = re.compile(r"^(?P<raw>\S+) \((?P<reading>[^()]+)\)$")


def _amount(text: str, units: dict[str, int]) -> float:
    """A reading read back: the sum of its `<number> <unit>` pairs, in the base unit."""
    tokens = text.split()
    assert len(tokens) % 2 == 0 and tokens, text
    pairs = list(zip(tokens[::2], tokens[1::2], strict=True))
    assert all(u in units for _, u in pairs), text
    return sum(float(n) * units[u] for n, u in pairs)


def _lines(text: str) -> dict[str, str]:
    """An object answer's `- name: value` lines."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^- ([^:]+): (.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


@pytest.fixture(scope="module")
def renderer(catalog):
    return Renderer(catalog)


# ---------------------------------------------------------------- readings


@given(st.integers(min_value=0, max_value=10**21 - 1))
def test_a_byte_reading_reads_back_to_the_value(n):
    back = _amount(reading(BYTES, n), SI)
    # one decimal of the unit it is written in
    assert abs(back - n) <= max(0.05 * 1000 ** max(0, (len(str(n)) - 1) // 3), 0.5) + n * 1e-9


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_a_nanosecond_reading_reads_back_to_the_value(n):
    back = _amount(reading(NANOSECONDS, n), NS)
    assert back <= n * (1 + 1e-12)  # cut, never rounded up (read back through a float: 130.77 µs is 130770.00000000001 ns)
    # below a minute: two decimals of its unit; from a minute on: its two largest whole units
    tolerance = max(n * 0.01, 1) if n < 60 * 10**9 else max(NS[u] for u in ("s", "min", "h") if NS[u] * 60 <= n * 60) * 60
    assert n - back <= tolerance


def test_durations_in_milliseconds_and_seconds_read_as_nanoseconds():
    assert _amount(reading(MILLISECONDS, 1500), NS) == 1.5 * 10**9
    assert _amount(reading(SECONDS, 5400), NS) == 5400 * 10**9
    assert _amount(reading(SECONDS, 30.0), NS) == 30 * 10**9
    assert _amount(reading(MINUTES, 90), NS) == 90 * 60 * 10**9


@pytest.mark.parametrize("unit", [BYTES, NANOSECONDS, MILLISECONDS, SECONDS, MINUTES, EPOCH_SECONDS])
@pytest.mark.parametrize("value", [-1, -(10**30), 10**30, 10**400, 1e30, float("nan"), float("inf"), float("-inf"),
                                   True, False, None, "30000000000", "NaN", [1], {"a": 1}])
def test_an_untrusted_value_has_no_reading_and_does_not_fail(unit, value):
    assert reading(unit, value) is None


def test_bytes_past_every_unit_still_write_without_a_float():
    assert escape.human_bytes(10**400).endswith(" EB")  # no OverflowError from float(10**400)


def test_an_object_answer_shows_the_reading_beside_the_raw_value(catalog, renderer):
    action = catalog.actions["image.counts"]
    answer = {"totalImageSize": 1073741824, "totalImages": 3, "uptimeSeconds": 5400, "imageSpaceReclaimed": -1,
              "containerSpaceReclaimed": 10**400, "volumeSpaceReclaimed": "12", "buildCacheSpaceReclaimed": True}
    text = renderer.success(action, Shaped("object", answer, 200), Namer("dynamic")).text
    lines = _lines(text)
    m = READING.match(lines["totalImageSize"])
    assert m and m.group("raw") == "1073741824" and _amount(m.group("reading"), SI) == pytest.approx(1073741824, rel=0.05)
    assert READING.match(lines["uptimeSeconds"]).group("raw") == "5400"
    assert lines["totalImages"] == "3"  # a count, no unit
    # an untrusted value is shown as sent, with nothing beside it
    assert lines["imageSpaceReclaimed"] == "-1" and lines["containerSpaceReclaimed"] == str(10**400)
    assert lines["volumeSpaceReclaimed"] == "12" and lines["buildCacheSpaceReclaimed"] == "true"


def test_a_table_cell_and_a_member_beside_a_list_carry_readings(catalog, renderer):
    action = catalog.actions["image.list"]
    answer = {"items": [{"id": "sha256:a", "size": 2_000_000_000, "created": 1760000000}, {"id": "sha256:b", "size": "big"}],
              "counts": {"totalImageSize": 2_000_000_000, "totalImages": 2}}
    text = renderer.success(action, Shaped("list", answer, 200), Namer("dynamic")).text
    tokens = MD.parse(text)
    cells = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "td_open"]
    sized = [c for c in cells if c.startswith("2000000000 (")]
    assert len(sized) == 1 and _amount(READING.match(sized[0]).group("reading"), SI) == 2 * 10**9
    assert "big" in cells  # a string where a size was expected: as sent
    counts = _lines(text)["counts"]
    assert re.search(r"totalImageSize 2000000000 \([^()]+\)", counts) and re.search(r"totalImages 2(,|$)", counts)


def test_a_nested_duration_is_read_by_its_parent_and_listed_after_the_json_block(catalog, renderer):
    action = catalog.actions["container.get"]
    answer = {"id": "c1", "name": "web",
              "config": {"healthcheck": {"interval": 30_000_000_000, "timeout": 5_000_000_000, "startPeriod": 0, "retries": 3},
                         "interval": 30_000_000_000},  # the same name under another parent: no unit
              "hostConfig": {"memory": 1073741824, "memorySwap": -1}}
    text = renderer.success(action, Shaped("object", answer, 200), Namer("dynamic")).text
    tokens = MD.parse(text)
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 2 and all(t.info == "json" for t in fences)
    # the JSON blocks stay Arcane's values, valid JSON, without readings inside
    import json
    assert json.loads(fences[0].content) == answer["config"] and json.loads(fences[1].content) == answer["hostConfig"]
    paragraphs = [tokens[i + 1] for i, t in enumerate(tokens) if t.type == "paragraph_open"]
    read = [p for p in paragraphs if any(c.type == "code_inline" for c in p.children)]
    paths = [[c.content for c in p.children if c.type == "code_inline"] for p in read]
    # the paths in the block: the health check's two non-zero durations, the memory limit; not the
    # other `interval`, not 0, not -1 (Docker's "unlimited")
    assert paths == [["healthcheck.interval", "healthcheck.timeout"], ["memory"]]
    # each reading line follows its own block
    blocks = [t for t in tokens if t.level == 0 and t.type in ("fence", "paragraph_open", "heading_open", "bullet_list_open")]
    for p in read:
        at = next(i for i, t in enumerate(blocks) if t.type == "paragraph_open" and tokens[tokens.index(t) + 1] is p)
        assert blocks[at - 1].type == "fence"


def test_the_readings_line_is_bounded(catalog, renderer):
    action = catalog.actions["container.get"]
    many = {"config": {"healthcheck": {"interval": 1}}, "items": [{"healthcheck": {"interval": 10**9 + i}} for i in range(40)]}
    text = renderer.success(action, Shaped("object", {"id": "c", "state": many}, 200), Namer("dynamic")).text
    line = next(line for line in text.splitlines() if line.count("`") >= 2 and "healthcheck" in line)
    spans = [c for t in MD.parse(line) if t.children for c in t.children if c.type == "code_inline"]
    assert len(spans) == catalog.rendering.readings_max
    assert re.search(r"\b29\b", line)  # 41 readings, readings_max shown: the rest counted


def test_every_unit_field_has_one_unit(catalog):
    r = catalog.rendering
    lists = [r.byte_fields, r.duration_nanosecond_fields, r.duration_millisecond_fields, r.duration_second_fields,
             r.duration_minute_fields, r.epoch_second_fields, r.epoch_millisecond_fields]
    seen: dict[str, int] = {}
    for i, names in enumerate(lists):
        for name in names:
            assert seen.setdefault(name, i) == i, name


def test_docker_health_check_durations_are_nanoseconds_and_raft_counts_are_not_durations(catalog):
    r = catalog.rendering
    assert {"healthcheck.interval", "healthcheck.timeout", "healthcheck.startPeriod", "healthcheck.startInterval",
            "Healthcheck.Interval", "Healthcheck.Timeout", "Healthcheck.StartPeriod", "Healthcheck.StartInterval"} <= r.duration_nanosecond_fields
    every = r.byte_fields | r.duration_nanosecond_fields | r.duration_millisecond_fields | r.duration_second_fields
    assert not {"SnapshotInterval", "ElectionTick", "Size", "interval", "timeout"} & every  # not time, or ambiguous alone
    assert "StopTimeout" in r.duration_second_fields


# ---------------------------------------------------------------- order


def _events(n):
    return {"items": [{"id": f"e{i}", "timestamp": f"2026-01-0{i + 1}T00:00:00Z", "severity": "info", "type": "x", "title": "t"}
                      for i in range(n)],
            "pagination": {"totalItems": n, "totalPages": 1, "currentPage": 1, "itemsPerPage": 20}}


@pytest.mark.parametrize("action_id", ["event.list", "event.list_by_environment", "activity.list"])
def test_a_list_arcane_does_not_sort_says_its_order(catalog, renderer, action_id):
    action = catalog.actions[action_id]
    assert action.order
    text = renderer.success(action, Shaped("list", _events(3), 200), Namer("dynamic"), {}).text
    body = text.split("\n\n")[0].splitlines()
    assert len(body) == 3 and body[1].startswith("3 item(s)") and body[2]  # heading, count, the order
    # with an ordering argument the order is the caller's; one item or none has no order
    for args, items in (({"sort": "timestamp"}, 3), ({"order": "desc"}, 3), ({}, 1), ({}, 0)):
        again = renderer.success(action, Shaped("list", _events(items), 200), Namer("dynamic"), args).text
        assert len(again.split("\n\n")[0].splitlines()) == 2, (args, items)


def test_order_is_declared_only_on_lists(catalog):
    ordered = [a for a in catalog.actions.values() if a.order]
    assert len(ordered) >= 15
    for a in ordered:
        assert a.read_only and (a.columns or a.list_member or a.name.startswith(("list", "get_history", "history"))), a.id


# ---------------------------------------------------------------- the engine's notes

PROJECT_ID = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"


def _arcane_with_project(name: str):
    from tests.helpers import ok_json

    def handler(request):
        if request.url.path == "/api/environments/0/projects":
            return ok_json([{"id": PROJECT_ID, "name": name}],
                           pagination={"totalPages": 1, "totalItems": 1, "currentPage": 1, "itemsPerPage": 20})
        return ok_json({"id": PROJECT_ID, "name": name})
    return handler


def _note_inline(text: str):
    """The inline token of the paragraph that holds the note (the one after the heading)."""
    tokens = MD.parse(text)
    assert [t.type for t in tokens[:3]] == ["heading_open", "inline", "heading_close"]
    assert tokens[3].type == "paragraph_open"
    return tokens[4]


@pytest.mark.anyio
@pytest.mark.parametrize("surface", ["meta", "individual", "dynamic"])
@pytest.mark.parametrize("name", ["blog", "*blog* [x](y) `z` <b> _u_"])
async def test_the_name_resolution_note_renders_the_action_name_as_written(catalog, surface, name):
    from interpreter.call.dispatch import Call
    from tests.helpers import make_dispatcher

    d, _ = make_dispatcher(catalog, _arcane_with_project(name))
    res = await d.dispatch(Call("project.get", {"projectId": name}, False, surface, "test"))
    assert not res.is_error, res.text
    note = _note_inline(res.text)
    kinds = {c.type for c in note.children}
    assert not kinds & {"em_open", "strong_open", "link_open", "html_inline"}
    rendered = "".join(c.content for c in note.children if c.type in ("text", "code_inline"))
    assert name in rendered and PROJECT_ID in rendered  # the caller's value, literally
    listing = Namer(surface)("project.list")
    if surface == "meta":
        # the meta surface's name: its action in a code span, no backslash or backtick left as text
        spans = [c.content for c in note.children if c.type == "code_inline"]
        assert spans[-1] == "list"
        assert "\\" not in "".join(c.content for c in note.children[-3:] if c.type == "text")
    else:
        assert listing in rendered
    # structuredContent is Arcane's value; the note is part of the result's parts
    assert res.structured == {"id": PROJECT_ID, "name": name} and len(res.parts.notes) == 1


def test_a_note_in_pieces_is_plain_in_an_error_and_markdown_in_a_success():
    from interpreter.text.render import Named, Note, Text, ToolResult, render_error, with_notes

    note = Note.of("x `y` *z* through ", Named("arcane_project (action `list`)"), ".")
    ok = with_notes(ToolResult.of(Text(title="T", body=["", "- a: b"])), [note])
    inline = _note_inline(ok.text)
    assert [c.content for c in inline.children if c.type == "code_inline"] == ["list"]
    assert "x `y` *z* through arcane_project (action" in "".join(c.content for c in inline.children if c.type == "text")
    error = with_notes(render_error("failed", None, code="x"), [note])
    assert error.text.splitlines()[1].endswith(note.plain()) and "\\" not in error.text


@pytest.mark.anyio
async def test_an_empty_list_hint_names_actions_as_written(catalog, sim):
    from tests.test_render import call

    res = await call(sim, "container.list", {"search": "no-such-thing"}, surface="meta", catalog=catalog)
    tokens = MD.parse(res.text)
    hint = next(tokens[i + 1] for i, t in enumerate(tokens) if t.type == "paragraph_open" and "environmentId" in tokens[i + 1].content)
    assert [c.content for c in hint.children if c.type == "code_inline"] == ["list"]
    assert "\\" not in hint.content
