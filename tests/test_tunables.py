"""What an operator may tune is data: the ranker's weights (rules/find.yaml `weights`,
`did_you_mean`) and the render limits (rules/rendering.yaml: rows, cell width, next steps),
each checked by its schema. A changed value changes the answer; no Python default stands in."""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType

import httpx
import pytest
from jsonschema import Draft202012Validator
from markdown_it import MarkdownIt

from interpreter import RULES_DIR
from interpreter.build.load import load_file
from interpreter.front.names import EXECUTE_TOOL
from interpreter.front.surfaces import make_surface
from interpreter.text.rank import Ranker
from interpreter.text.suggest import closest_ids
from tests.helpers import make_dispatcher

pytestmark = pytest.mark.anyio


def _schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((RULES_DIR / "schemas" / name).read_text(encoding="utf-8")))


def _packaged(name: str) -> dict:
    return load_file(RULES_DIR / name)[0].data


@pytest.mark.parametrize("file,schema,pointer,bad", [
    ("find.yaml", "find.schema.json", ("weights", "fields", "verb"), "high"),
    ("find.yaml", "find.schema.json", ("weights", "penalties", "destructive"), -1),
    ("find.yaml", "find.schema.json", ("did_you_mean", "cutoff"), 2),
    ("find.yaml", "find.schema.json", ("weights", "rarity"), 2),
    ("find.yaml", "find.schema.json", ("weights", "fuzzy", "second_edit"), -0.5),
    ("find.yaml", "find.schema.json", ("weights", "fuzzy", "split_min"), 0),
    ("find.yaml", "find.schema.json", ("question", "mutating"), 1.5),
    ("find.yaml", "find.schema.json", ("plurals", "min_stem"), 0),
    ("rendering.yaml", "rendering.schema.json", ("max_rows",), 0),
    ("rendering.yaml", "rendering.schema.json", ("cell_max",), "wide"),
    ("rendering.yaml", "rendering.schema.json", ("next_steps_max",), -1),
])
def test_the_schemas_check_the_tunables(file, schema, pointer, bad):
    data = _packaged(file)
    assert list(_schema(schema).iter_errors(data)) == []
    node = data
    for part in pointer[:-1]:
        node = node[part]
    node[pointer[-1]] = bad
    errors = list(_schema(schema).iter_errors(data))
    assert [tuple(e.absolute_path) for e in errors] == [pointer]


def _with_weights(catalog, **changes):
    return replace(catalog, find=replace(catalog.find, weights=replace(catalog.find.weights, **changes)))


def test_the_ranker_scores_with_the_declared_weights(catalog):
    hit = Ranker(catalog).rank("docker ps", 1)[0]
    assert hit.action.id == "container.list"
    flat = Ranker(_with_weights(catalog, alias=0.0, alias_phrase=0.0)).rank("docker ps", 5)
    assert all(h.action.id != "container.list" or h.score < hit.score for h in flat)
    doubled = Ranker(_with_weights(catalog, verb=catalog.find.weights.verb * 2)).rank("restart a container", 1)[0]
    assert doubled.action.id == "container.restart"
    assert doubled.score > Ranker(catalog).rank("restart a container", 1)[0].score


def test_the_destructive_penalty_is_data(catalog):
    query = "volumes"
    top = Ranker(catalog).rank(query, 1)[0]
    assert not top.action.destructive
    everything = len(catalog.actions)
    unpenalised = Ranker(_with_weights(catalog, destructive=1.0)).rank(query, everything)
    penalised = {h.action.id: h.score for h in Ranker(catalog).rank(query, everything)}
    raised = [h for h in unpenalised if h.action.destructive and h.action.id in penalised]
    assert raised and all(h.score > penalised[h.action.id] for h in raised)


def _with_find(catalog, **changes):
    return replace(catalog, find=replace(catalog.find, **changes))


def test_the_pending_penalty_is_data(catalog):
    # every handler kind is served today: one action is made pending as a later catalog may have it
    catalog = replace(catalog, actions=MappingProxyType(
        {**catalog.actions, "container.logs": replace(catalog.actions["container.logs"], pending=True)}))
    query = "container logs"
    everything = len(catalog.actions)
    penalised = {h.action.id: h.score for h in Ranker(catalog).rank(query, everything)}
    unpenalised = {h.action.id: h.score for h in Ranker(_with_weights(catalog, pending=1.0)).rank(query, everything)}
    assert catalog.actions["container.logs"].pending
    assert unpenalised["container.logs"] > penalised["container.logs"]
    assert all(unpenalised[a] == score for a, score in penalised.items() if not catalog.actions[a].pending)


def test_the_question_factor_is_data(catalog):
    query = "why does my container keep restarting"
    assert Ranker(catalog).is_question(query)
    everything = len(catalog.actions)
    asked = {h.action.id: h.score for h in Ranker(catalog).rank(query, everything)}
    q = catalog.find.question
    neutral = {h.action.id: h.score for h in Ranker(_with_find(catalog, question=replace(q, mutating=1.0))).rank(query, everything)}
    assert neutral["container.restart"] > asked["container.restart"]
    assert all(neutral[a] == s for a, s in asked.items() if catalog.actions[a].read_only)
    not_a_question = Ranker(_with_find(catalog, question=replace(q, words=frozenset())))
    assert not not_a_question.is_question(query)


def test_the_plural_endings_are_data(catalog):
    ranker = Ranker(catalog)
    assert "red" in ranker.forms("redes")
    bare = Ranker(_with_find(catalog, plurals=replace(catalog.find.plurals, endings=())))
    assert bare.forms("redes") == ("redes",)


def test_rarity_is_data(catalog):
    query = "the last service update broke everything, go back to how it was"
    rare = {h.action.id: h.score for h in Ranker(catalog).rank(query, 50)}
    flat = {h.action.id: h.score for h in Ranker(_with_weights(catalog, rarity=1.0)).rank(query, 50)}
    assert rare != flat


def test_the_fuzzy_budget_is_data(catalog):
    assert Ranker(catalog).rank("lsit containers", 1)[0].action.id == "container.list"
    strict = Ranker(_with_weights(catalog, fuzzy_edits=()))
    assert "container.list" not in [h.action.id for h in strict.rank("lsit contaners", 3)]


def test_did_you_mean_reads_its_thresholds(catalog):
    dym = catalog.find.did_you_mean
    assert closest_ids("container.rstart", list(catalog.actions), dym)[0] == "container.restart"
    strict = replace(dym, token_match=1.0, cutoff=1.0)
    assert closest_ids("container.rstart", list(catalog.actions), strict) == []


def _with_rendering(catalog, **changes):
    return replace(catalog, rendering=replace(catalog.rendering, **changes))


def _rows(markdown: str) -> list[list[str]]:
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    rows, row = [], None
    for i, tok in enumerate(tokens):
        if tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close":
            rows.append(row)
        elif tok.type == "inline" and tokens[i - 1].type in ("td_open", "th_open"):
            row.append(tok.content)
    return rows


def _next_steps(markdown: str) -> int:
    tokens = MarkdownIt("commonmark").parse(markdown)
    count, inside = 0, False
    for tok in tokens:
        if tok.type == "heading_open":
            inside = False
        elif tok.type == "inline" and tok.content == "Next steps":
            inside = True
        elif inside and tok.type == "list_item_open":
            count += 1
    return count


async def _list(catalog, items) -> str:
    body = {"success": True, "data": items}
    dispatcher, _ = make_dispatcher(catalog, lambda r: httpx.Response(200, json=body))
    result = await make_surface("dynamic", catalog, dispatcher).call(EXECUTE_TOOL, {"action": "container.list", "params": {}})
    assert not result.is_error, result.text
    return result.text


async def test_the_render_limits_are_the_declared_ones(catalog):
    items = [{"id": f"c{i}", "names": [f"/web{i}"], "image": "nginx", "state": "running",
              "status": "Up 3 hours " + "x" * 80} for i in range(6)]
    packaged = await _list(catalog, items)
    assert len(_rows(packaged)) == 1 + 6
    assert _next_steps(packaged) > 1
    tuned = await _list(_with_rendering(catalog, max_rows=2, cell_max=12, next_steps_max=1), items)
    rows = _rows(tuned)
    assert len(rows) == 1 + 2
    status = rows[0].index("status")  # not a whole field: cut at cell_max
    assert len(rows[1][status]) <= 12 < len(items[0]["status"])
    assert len(_rows(packaged)[1][status]) == catalog.rendering.cell_max
    assert _next_steps(tuned) == 1
