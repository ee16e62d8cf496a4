"""The Markdown a model reads: golden files for representative results, and structural
checks with a real parser (markdown-it-py) that no Arcane value forms Markdown."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from interpreter.build.catalog import BuildOptions, build
from interpreter.call.dispatch import Call, Dispatcher
from interpreter.call.request import ArcaneClient
from interpreter.config import Settings
from interpreter.front.call_records import AuditLog
from interpreter.front.names import Namer
from interpreter.text.render import Renderer
from tests.helpers import examples

pytestmark = pytest.mark.anyio
MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")
# what the renderer itself never writes: if a parser finds one, a value formed it
FOREIGN = {"em_open", "strong_open", "link_open", "image", "html_inline", "html_block", "s_open", "blockquote_open", "hr", "ordered_list_open"}


def tricky_id(sim) -> str:
    return next(c["id"] for c in sim.items("containers") if "tricky" in str(c.get("names")))


async def call(sim, action, params=None, *, surface="dynamic", confirm=False, catalog=None, **settings_kw):
    cat = catalog or build(BuildOptions(read_only=settings_kw.get("read_only", False), exclude=settings_kw.get("exclude_tools", ())))
    s = Settings(arcane_url=sim.url, api_key=sim.api_key, audit_log="off", **settings_kw)
    client = ArcaneClient(s)
    try:
        d = Dispatcher(cat, s, client, AuditLog("off"))
        return await d.dispatch(Call(action, params or {}, confirm, surface, "test"))
    finally:
        await client.aclose()


def structure(text: str) -> list[str]:
    return [t.type for t in MD.parse(text)]


def assert_no_foreign_structure(text: str) -> None:
    tokens = MD.parse(text)
    found = {t.type for t in tokens} | {c.type for t in tokens for c in (t.children or [])}
    assert not (found & FOREIGN), sorted(found & FOREIGN)


GOLDEN_CASES = [
    ("container_list_more_than_50_rows", "container.list", {"limit": -1}),
    ("container_list_page", "container.list", {"limit": 5}),
    ("container_list_empty", "container.list", {"search": "no-such-thing"}),
    ("image_list_empty", "image.list", {"search": "no-such-thing"}),
    ("project_list_empty", "project.list", {"search": "no-such-thing"}),
    ("volume_list_empty", "volume.list", {"search": "no-such-thing"}),
    ("network_list_empty", "network.list", {"search": "no-such-thing"}),
    ("environment_list_empty", "environment.list", {"search": "no-such-thing"}),
    ("image_list", "image.list", {"limit": 5}),
    ("error_unknown_container", "container.get", {"containerId": "no-such-container"}),
    ("error_bad_argument", "container.list", {"limit": "many"}),
]


@pytest.mark.parametrize("name,action,params", GOLDEN_CASES, ids=[c[0] for c in GOLDEN_CASES])
async def test_golden(sim, golden, name, action, params):
    res = await call(sim, action, params)
    golden(name, res.text)
    if res.is_error:
        assert structure(res.text) == ["paragraph_open", "inline", "paragraph_close"]
        assert res.structured is None
    else:
        assert_no_foreign_structure(res.text)


async def test_golden_object_with_nested_data_and_multiline_text(sim, golden):
    project = next(p for p in sim.items("projects") if "\n" in str(p.get("composeContent", "")))
    res = await call(sim, "project.get", {"projectId": project["id"]})
    golden("project_get_nested_multiline", res.text)
    assert "### composeContent" in res.text
    assert_no_foreign_structure(res.text)


async def test_golden_hostile_container_renders_literally(sim, golden):
    cid = tricky_id(sim)
    res = await call(sim, "container.get", {"containerId": cid})
    golden("container_get_hostile", res.text)
    assert_no_foreign_structure(res.text)
    for bad in ("\x1b", "\u202e", "\u200b", "\u2028"):
        assert bad not in res.text
    # the name comes back whole and literal (a code span) for the next call
    name = next(c for c in sim.items("containers") if c["id"] == cid)["names"][0].lstrip("/")
    code = [c.content for t in MD.parse(res.text) for c in (t.children or []) if c.type == "code_inline"]
    from interpreter.text.escape import clean

    assert clean(name) in code
    # and structuredContent keeps Arcane's value byte for byte
    assert res.structured["name"] == name or res.structured.get("names", [None])[0] == "/" + name


async def test_golden_text_download(sim, golden):
    res = await call(sim, "container.download_logs", {"containerId": sim.items("containers")[0]["id"]})
    golden("container_download_logs", res.text)
    assert "### Next steps" not in res.text


async def test_hostile_logs_are_fenced_after_the_control_filter(sim, golden):
    res = await call(sim, "container.download_logs", {"containerId": tricky_id(sim)})
    golden("container_download_logs_hostile", res.text)
    tokens = MD.parse(res.text)
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and "\x1b" not in fences[0].content
    assert_no_foreign_structure(res.text)


async def test_log_output_handler_rendering(golden):
    cat = build()
    text = "line one\n```\n# not a heading\n\x1b[31mred\x1b[0m and \u202ebidi\nlast ````` line\n"
    res = Renderer(cat).output(cat.all_actions["container.logs"], text)
    golden("log_output", res.text)
    tokens = MD.parse(res.text)
    assert [t.type for t in tokens] == ["heading_open", "inline", "heading_close", "fence"]
    assert tokens[3].content == "line one\n```\n# not a heading\nred and bidi\nlast ````` line\n"


@pytest.mark.parametrize("surface", ["dynamic", "meta", "individual"])
async def test_golden_next_steps_follow_the_surface(sim, golden, surface):
    res = await call(sim, "container.get", {"containerId": sim.items("containers")[0]["id"]}, surface=surface)
    golden(f"next_steps_{surface}", res.text[res.text.index("### Next steps"):])
    expect = {"dynamic": "- container.stop —", "meta": "- arcane_container (action `stop`) —", "individual": "- arcane_container_stop —"}[surface]
    assert expect in res.text


async def test_next_steps_under_read_only_and_exclusions(sim, golden):
    # under read-only container.get offers only its read-only neighbours (the stats capture)
    res = await call(sim, "container.get", {"containerId": sim.items("containers")[0]["id"]}, read_only=True)
    steps = res.text.split("### Next steps")[-1]
    assert "container.stats" in steps and "container.restart" not in steps and "container.stop" not in steps
    res = await call(sim, "volume.get", {"volumeName": sim.items("volumes")[0]["name"]}, read_only=True)
    golden("next_steps_read_only", res.text[res.text.index("### Next steps"):])
    assert "volume_backup.list" in res.text and "remove" not in res.text.split("### Next steps")[-1]
    res = await call(sim, "container.get", {"containerId": sim.items("containers")[0]["id"]}, exclude_tools=("container.stats", "container.restart"))
    golden("next_steps_excluded", res.text[res.text.index("### Next steps"):])
    steps = res.text.split("### Next steps")[-1]
    assert "container.restart" not in steps and "container.stats" not in steps


async def test_byte_sizes_are_also_human(sim):
    res = await call(sim, "image.list", {"limit": 5})
    size = res.structured["items"][0]["size"]
    from interpreter.text.escape import human_bytes

    assert f"{size} ({human_bytes(size)})" in res.text


async def test_same_result_on_all_three_surfaces_but_the_names(sim):
    texts = {}
    for surface in ("dynamic", "meta", "individual"):
        res = await call(sim, "container.list", {"limit": 3}, surface=surface)
        texts[surface] = res.text
    norm = lambda t: t.replace("arcane_container (action `get`)", "container.get").replace("arcane_container_get", "container.get") \
        .replace("arcane_container (action `counts`)", "container.counts").replace("arcane_container_counts", "container.counts") \
        .replace("arcane_container (action `logs`)", "container.logs").replace("arcane_container_logs", "container.logs")
    assert norm(texts["meta"]) == norm(texts["individual"]) == texts["dynamic"]


async def test_values_that_look_like_action_names_are_not_rewritten(sim):
    res = await call(sim, "container.list", {"limit": 60}, surface="individual")
    assert res.structured["items"][0]["id"] in res.text
    # rewriting is only of the server's own words: a value "container.get" would stay
    r = Renderer(build())
    from interpreter.call.response import Shaped

    shaped = Shaped("object", {"id": "container.get", "name": "arcane_container_get"}, 200)
    out = r.success(build().actions["container.get"], shaped, Namer("meta")).text
    assert "- id: container.get" in out and "- name: arcane_container_get" in out


# ---------------------------------------------------------------- lean text (issue 12)

EMPTY_KINDS = {"nothing": None, "blank": "", "none": [], "bare": {}, "hollow": {"a": "", "b": [], "c": {"d": None}}}


def _object_lines(text: str) -> dict[str, str]:
    """{field: value} of the `- field: value` items of the first list (the object's lines;
    the next steps are another list), read from the parsed Markdown."""
    tokens = MD.parse(text)
    lines, depth = {}, 0
    for i, t in enumerate(tokens):
        depth += t.nesting if t.type in ("bullet_list_open", "bullet_list_close") else 0
        if t.type == "bullet_list_close" and depth == 0:
            break
        if t.type == "inline" and depth == 1 and tokens[i - 2].type == "list_item_open":
            key, _, value = t.content.partition(": ")
            lines[key.rstrip(":")] = value
    return lines


def _json_blocks(text: str) -> dict[str, object]:
    """{heading: parsed JSON} of each `### heading` followed by a json fence."""
    import json

    tokens, out = MD.parse(text), {}
    for i, t in enumerate(tokens):
        if t.type == "fence" and t.info == "json" and tokens[i - 3].type == "heading_open":
            out[tokens[i - 2].content] = json.loads(t.content)
    return out


def test_empty_fields_are_never_rendered(catalog):
    value = {"id": "c1", "name": "web", "zero": 0, "off": False, **EMPTY_KINDS,
             "nested": {"keep": 1, "drop": "", "deeper": {"gone": [], "also": None}, "flag": False},
             "items": [{"x": ""}, 2]}
    from interpreter.call.response import Shaped

    text = Renderer(catalog).success(catalog.actions["container.get"], Shaped("object", value, 200), Namer("dynamic")).text
    assert_no_foreign_structure(text)
    lines = _object_lines(text)
    assert set(lines) == {"id", "name", "zero", "off"}  # 0 and false are values, not empties
    assert lines["zero"] == "0" and lines["off"] == "false"
    blocks = _json_blocks(text)
    assert blocks["nested"] == {"keep": 1, "flag": False}  # members empty after pruning are left out too
    assert blocks["items"] == [{}, 2]  # list items keep their places
    assert set(blocks) == {"nested", "items"}


def test_an_answer_of_only_empty_members_names_them(catalog):
    """{"nodes": [], "edges": []} is not an answer without fields: the text names what is empty."""
    from interpreter.call.response import Shaped

    text = Renderer(catalog).success(catalog.actions["network.topology"], Shaped("object", {"nodes": [], "edges": None, "*x*": ""}, 200),
                                     Namer("dynamic")).text
    assert_no_foreign_structure(text)
    body = text.split("\n", 1)[1].split("\n\n", 1)[0]
    assert "nodes" in body and "edges" in body and "`*x*`" in body  # a name from Arcane is a code span, not emphasis
    text = Renderer(catalog).success(catalog.actions["network.topology"], Shaped("object", {}, 200), Namer("dynamic")).text
    assert "nodes" not in text


def test_a_list_leaves_empty_members_beside_its_items_out(catalog):
    from interpreter.call.response import Shaped

    value = {"items": [{"id": "a", "name": "x"}], "warnings": "", "counts": {"running": 1, "stopped": None}, "groups": {"a": []}}
    text = Renderer(catalog).success(catalog.actions["container.list"], Shaped("list", value, 200), Namer("dynamic")).text
    lines = _object_lines(text)
    assert "warnings" not in lines and "groups" not in lines
    assert lines["counts"] == "running 1"


def _table(text: str) -> list[dict[str, str]]:
    head, rows, row, part = [], [], [], None
    for t in MD.parse(text):
        if t.type in ("thead_open", "tbody_open"):
            part = t.type
        elif t.type in ("thead_close", "tbody_close"):
            part = None
        elif t.type == "tr_close" and part == "tbody_open":
            rows.append(dict(zip(head, row, strict=True)))
            row = []
        elif t.type == "inline" and part is not None:
            (head if part == "thead_open" else row).append(t.content)
    return rows


@pytest.mark.parametrize("seconds", [1, 1760000000, 2**31 + 7, 253402300799])
def test_epoch_seconds_show_an_iso_date_beside_the_value(catalog, seconds):
    from datetime import UTC, datetime

    from interpreter.call.response import Shaped

    r = Renderer(catalog)
    value = {"items": [{"id": "sha256:a", "repoTags": ["a:1"], "size": 1, "inUse": True, "created": seconds}]}
    text = r.success(catalog.actions["image.list"], Shaped("list", value, 200), Namer("dynamic")).text
    cell = _table(text)[0]["created"]
    raw, _, when = cell.partition(" ")
    assert raw == str(seconds)  # the value Arcane sent, whole, first
    assert datetime.strptime(when, "(%Y-%m-%dT%H:%M:%SZ)").replace(tzinfo=UTC).timestamp() == seconds
    obj = r.success(catalog.actions["image.get"], Shaped("object", {"id": "sha256:a", "created": seconds}, 200), Namer("dynamic")).text
    assert _object_lines(obj)["created"] == cell


@pytest.mark.parametrize("value", [0, -5, 10**30, True, "1760000000", 1.5])
def test_what_is_not_an_epoch_time_is_shown_as_sent(catalog, value):
    from interpreter.call.response import Shaped
    from interpreter.text.render import _scalar_text

    text = Renderer(catalog).success(catalog.actions["image.get"], Shaped("object", {"id": "x", "created": value}, 200),
                                     Namer("dynamic")).text
    assert _object_lines(text)["created"] == _scalar_text(value)


def test_epoch_milliseconds_are_declared_apart(catalog):
    from dataclasses import replace

    from interpreter.call.response import Shaped

    cat = replace(catalog, rendering=replace(catalog.rendering, epoch_millisecond_fields=frozenset({"seenMs"})))
    text = Renderer(cat).success(catalog.actions["image.get"], Shaped("object", {"id": "x", "seenMs": 1760000000123}, 200),
                                 Namer("dynamic")).text
    assert _object_lines(text)["seenMs"] == "1760000000123 (2025-10-09T08:53:20.123Z)"


# ---------------------------------------------------------------- the table's fast path (issue 12)

_CELL_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                         st.text(st.sampled_from(list("ab |*`\n\r\x1b…é")), max_size=12),
                         st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
                         st.dictionaries(st.sampled_from(["k", "v"]), st.integers(), max_size=2))
_ITEMS = st.lists(st.one_of(st.dictionaries(st.sampled_from(["id", "names", "name", "image", "state", "status", "created", "size"]),
                                            _CELL_VALUES, max_size=8),
                            st.integers()), min_size=1, max_size=6)


@given(_ITEMS, st.sampled_from(["container.list", "image.list", "job.list"]))
@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_table_built_by_columns_is_the_table_built_cell_by_cell(catalog, items, action_id):
    # the renderer fills a table column by column; each row must be what `cell` of each
    # column's value gives, joined the way a row is
    from interpreter.call.response import Shaped

    r, action = Renderer(catalog), catalog.actions[action_id]
    lines = r._list(action, {"items": items}, {}, Namer("dynamic"))
    rows = items[: r.max_rows]
    cols = r.columns_for(action, rows)
    expected = ["| " + " | ".join(r.cell(key or label, column.value(item), whole) for label, column, whole, key, _ in cols) + " |"
                for item in rows]
    start = lines.index("|" + "---|" * len(cols)) + 1
    assert lines[start:start + len(rows)] == expected
    assert r.success(action, Shaped("list", {"items": items}, 200), Namer("dynamic")).text.count("\n| ") >= len(rows)


@given(st.lists(st.text(st.sampled_from(list("ab_*`[<&|é\n")), min_size=1, max_size=6), max_size=20))
@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_remembered_omitted_names_are_the_names_written_again(catalog, names):
    from interpreter.text import escape

    r = Renderer(catalog)
    most = r.rules.omitted_names_max
    fresh = ", ".join(escape.inline(k, strict=True) for k in names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
    assert r._omitted_names(names) == fresh == r._omitted_names(list(names))


def test_remembered_omitted_names_are_bounded(catalog):
    from interpreter.text.render import OMITTED_MEMO_CHARS, OMITTED_MEMO_SIZE

    r = Renderer(catalog)
    for i in range(OMITTED_MEMO_SIZE + 2):
        r._omitted_names([f"f{i}"])
    assert len(r._omitted) == OMITTED_MEMO_SIZE and ("f0",) not in r._omitted
    r._omitted_names(["x" * (OMITTED_MEMO_CHARS + 1)])
    assert ("x" * (OMITTED_MEMO_CHARS + 1),) not in r._omitted


def test_an_object_holding_its_list_in_a_member_renders_that_list_as_the_table(catalog):
    """An overlay's `list_member` (job.list: `{"jobs": [...], "observedAt": ...}`): the member's
    items are the table with the overlay's columns, the other members its lines;
    structuredContent stays Arcane's object. Without that list it is an object."""
    from interpreter.call.response import Shaped

    action = catalog.actions["job.list"]
    assert action.list_member == "jobs" and action.columns
    jobs = [{"id": "image-polling", "name": "Image update polling", "schedule": "0 */6 * * *", "enabled": True, "category": "updates"},
            {"id": "auto-update", "name": "Auto update", "schedule": "0 3 * * *", "enabled": False}]
    value = {"jobs": jobs, "observedAt": "2026-01-01T00:00:00Z", "isAgent": False}
    result = Renderer(catalog).success(action, Shaped("object", value, 200), Namer("dynamic"))
    assert result.structured == value
    rows = _table(result.text)
    assert [r["id"] for r in rows] == ["image-polling", "auto-update"]
    assert list(rows[0]) == [c.label for c in action.columns] and rows[1]["enabled"] == "false"
    lines = _object_lines(result.text)
    assert lines["observedAt"].startswith("2026-01-01") and lines["isAgent"] == "false" and "jobs" not in lines
    assert result.text.splitlines()[1].startswith("2 item(s)")
    empty = Renderer(catalog).success(action, Shaped("object", {"jobs": [], "isAgent": True}, 200), Namer("dynamic")).text
    assert empty.splitlines()[1].startswith("0 item(s)") and _table(empty) == []
    plain = Renderer(catalog).success(action, Shaped("object", {"observedAt": "x", "offline": True}, 200), Namer("dynamic")).text
    assert _object_lines(plain) == {"observedAt": "x", "offline": "true"} and _table(plain) == []


# ---------------------------------------------------------------- the result model and its one writer


def test_notes_and_closing_lines_are_parts_of_the_result_not_splices():
    """A success's notes, next steps, outcome and closing lines are fields of its parts; the
    text is always what the one writer makes of them, whatever was added in which order."""
    from interpreter.text.render import Text, ToolResult, render_error, with_notes, write

    made = ToolResult.of(Text(title="Restart <b>", outcome="1 of 2 failed", body=["", "- id: `x`"], next_steps=["- Call `y`"]))
    noted = with_notes(made, ["resolved web to 1f2e"])
    noted.close(["A closing line."])
    assert made.parts.notes == [] and made.text == write(made.parts)  # the result noted is a copy
    assert noted.parts.notes == ["resolved web to 1f2e"] and noted.parts.closing == [["A closing line."]]
    assert noted.text == write(noted.parts)
    lines = noted.text.split("\n")
    # the outcome first, then the heading, the note, the body, the next steps and the closing line, in that order
    order = [next(i for i, line in enumerate(lines) if line.startswith(p))
             for p in ("Partly failed: ", "## Restart", "Note: ", "- id: ", "### Next steps", "A closing line.")]
    assert order == sorted(order)
    closed_first = ToolResult.of(Text(title="Restart <b>", outcome="1 of 2 failed", body=["", "- id: `x`"], next_steps=["- Call `y`"]))
    closed_first.close(["A closing line."])
    assert with_notes(closed_first, ["resolved web to 1f2e"]).text == noted.text

    error = with_notes(render_error("no such container\x1b[31m", "List containers.", code="not_found"), ["looked up web"])
    assert error.parts.error.startswith("no such container") and error.parts.notes == ["looked up web"]
    assert error.text.split("\n")[1].startswith("Note: ") and error.text.split("\n")[2].startswith("Next step: ")
    assert "\x1b" not in error.text  # untrusted text still goes through escape.py


def test_a_result_made_whole_takes_notes_and_closing_lines_through_the_writer():
    from interpreter.text.render import ToolResult, with_notes

    plain = with_notes(ToolResult("## Title\n\n- a: b\n"), ["x"])
    assert [line for line in plain.text.split("\n") if line] == ["## Title", "Note: x", "- a: b"] and plain.parts.notes == ["x"]
    plain.close(["- c: d"])
    assert [line for line in plain.text.split("\n") if line] == ["## Title", "Note: x", "- a: b", "- c: d"]
    assert plain.text.endswith("- a: b\n\n- c: d\n")


def test_no_module_splices_a_result_text():
    """Only render.py writes a ToolResult's text: nothing else assigns or appends to `.text`."""
    import ast
    from pathlib import Path

    from interpreter import paths

    found = []
    for path in Path(paths.PACKAGE_DIR).rglob("*.py"):
        if path.name == "render.py" and path.parent.name == "text":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
            found += [f"{path.name}:{node.lineno}" for t in targets if isinstance(t, ast.Attribute) and t.attr == "text"]
    assert found == []
