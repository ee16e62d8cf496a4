"""arcane_find_action's text is enough to call (issue 23): each result carries its usage
note and its parameters with types, allowed values and defaults, within a byte budget; the
ranker's confidence is shown; a domain without a query lists the domain; argument errors
expand an object parameter's members and the overlays' closed sets.

`python -m tests.test_find_text` prints the text bytes per result on QUERIES."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import statistics

import pytest

from interpreter.front.names import EXECUTE_TOOL, FIND_TOOL
from interpreter.front.surfaces import find_block, find_line, make_surface
from tests.helpers import make_dispatcher, ok_json

pytestmark = pytest.mark.anyio

# A fixed set of requests, one or two per common job: the find text's size is measured on them.
QUERIES = (
    "restart a container", "delete a container", "drain a swarm node", "prune unused images",
    "docker system prune", "remove a volume", "destroy a project", "list containers", "container logs",
    "pull an image", "create a project from compose", "deploy a project", "create a registry",
    "list environments", "scale a swarm service", "create an api key", "backup a volume",
    "scan image for vulnerabilities", "update settings", "create a user",
)
# Measured on QUERIES (text bytes of the whole answer / results): 85.7 before issue 23 (ID,
# title, flags and required names only), 279.8 after. The budget leaves room for a ranker
# that orders differently; RESULT_MAX (rules/server.yaml find_answer.result_max) bounds each.
MEAN_BYTES_PER_RESULT_MAX = 360


def dynamic(catalog, handler=lambda r: ok_json({})):
    d, rec = make_dispatcher(catalog, handler)
    return make_surface("dynamic", catalog, d), rec


def measure(catalog) -> tuple[int, int]:
    """(text bytes, results) of the find answers to QUERIES."""
    s, _ = dynamic(catalog)
    total = results = 0
    for q in QUERIES:
        res = asyncio.run(s.call(FIND_TOOL, {"query": q}))
        total += len(res.text.encode("utf-8"))
        results += len(res.structured["actions"])
    return total, results


def _size(lines: list[str]) -> int:
    return len("\n".join(lines).encode("utf-8"))


def _params_line(block: list[str]) -> str:
    return block[-1]


# ---------------------------------------------------------------- the text is enough to call


def test_every_result_fits_its_byte_budget(catalog):
    limit = catalog.server.find_answer.result_max
    sizes = {a.id: _size(find_block(a, catalog, "medium")) for a in catalog.actions.values()}
    assert max(sizes.values()) <= limit, max(sizes.items(), key=lambda kv: kv[1])


def test_the_fixed_queries_stay_within_their_mean_budget(catalog):
    total, results = measure(catalog)
    assert results > 0
    assert total / results <= MEAN_BYTES_PER_RESULT_MAX


def test_each_result_lists_usage_required_and_declared_params(catalog):
    for a in catalog.actions.values():
        block = find_block(a, catalog)
        text = "\n".join(block)
        assert block[0].startswith(f"- {a.id} ")
        for name in (*a.required, *a.find_params):
            assert f"{name}:" in text or f"{name}?:" in text, (a.id, name)
        if a.usage and len(a.usage) < 200:
            assert any(line.strip() and a.usage[:30].split()[0] in line for line in block[1:-1]), a.id


def test_declared_params_show_types_enums_and_defaults(catalog):
    delete = _params_line(find_block(catalog.actions["container.delete"], catalog))
    assert "containerId: string" in delete and "force?: boolean=false" in delete and "volumes?: boolean=false" in delete
    node = _params_line(find_block(catalog.actions["swarm_node.update"], catalog))
    assert "availability?: active|pause|drain" in node and "role?: worker|manager" in node
    prune = _params_line(find_block(catalog.actions["system.prune"], catalog))
    assert "containers?: {mode: none|stopped|olderThan, until?: string}" in prune
    assert prune.index("containers?") < prune.index("images?") < prune.index("buildCache?")


def test_params_beyond_the_budget_are_counted_not_dropped_silently(catalog):
    wide = max(catalog.actions.values(), key=lambda a: len(a.input_schema.get("properties", {})))
    line = _params_line(find_block(wide, catalog))
    shown = line.count(":") - 1  # "params:" and one colon per parameter
    total = len([n for n in wide.input_schema["properties"] if n != catalog.env_arg])
    assert shown < total and line.endswith(catalog.server.find_answer.more_params.format(count=total - shown))


def test_the_environment_argument_and_an_empty_list_are_said(catalog):
    prune = catalog.actions["volume.prune"]
    assert _params_line(find_block(prune, catalog)).endswith(catalog.server.find_answer.none_required)
    assert catalog.env_arg not in "\n".join(find_block(catalog.actions["container.delete"], catalog))


async def test_structured_content_keeps_the_whole_schema(catalog):
    s, _ = dynamic(catalog)
    res = await s.call(FIND_TOOL, {"query": "delete a container", "limit": 3})
    card = next(c for c in res.structured["actions"] if c["id"] == "container.delete")
    assert card["inputSchema"] == catalog.actions["container.delete"].input_schema
    assert card["keyParams"] == ["force", "volumes"]


def test_values_from_the_document_are_escaped(catalog):
    a = catalog.actions["container.delete"]
    hostile = dataclasses.replace(
        a, title="Delete *all* [x](http://e) <img src=x>", usage="# heading\n- item <b>bold</b>",
        input_schema={"type": "object", "properties": {
            "evil`name": {"type": "string", "enum": ["<script>", "a\nb", "*x*"]},
            "containerId": {"type": "string"}}, "required": ["containerId"]})
    block = find_block(hostile, catalog)
    text = "\n".join(block).replace(catalog.server.find_answer.destructive_mark, "")  # the server's own mark
    assert len(block) == 3  # no line break of the document's reaches the text
    assert not re.search(r"(?<!\\)<", text)  # every < escaped: no tag, comment or autolink opens
    assert not re.search(r"(?<!\\)\[", text) and not re.search(r"(?<!\\)\*", text)
    assert not block[1].lstrip().startswith("#")


# ---------------------------------------------------------------- confidence


@dataclasses.dataclass(frozen=True)
class StubHit:
    action: object
    score: float
    confidence: str


class StubRanker:
    def __init__(self, hits):
        self.hits = hits

    def rank(self, query, limit, domain=None):
        return self.hits[:limit]


async def test_confidence_is_shown_per_result_and_in_each_card(catalog):
    s, _ = dynamic(catalog)
    acts = [catalog.actions["container.restart"], catalog.actions["project.restart"]]
    s.ranker = StubRanker([StubHit(acts[0], 9.0, "high"), StubHit(acts[1], 3.0, "medium")])
    res = await s.call(FIND_TOOL, {"query": "restart"})
    assert [c["confidence"] for c in res.structured["actions"]] == ["high", "medium"]
    text = catalog.server.find_answer
    heads = [line for line in res.text.splitlines() if line.startswith("- ")]
    assert heads[0].endswith(text.confidence.format(confidence="high"))
    assert heads[1].endswith(text.confidence.format(confidence="medium"))
    assert text.low_confidence.format(domain="container") not in res.text


async def test_a_low_best_match_says_how_to_browse(catalog):
    s, _ = dynamic(catalog)
    a = catalog.actions["container.kill"]
    s.ranker = StubRanker([StubHit(a, 0.5, "low")])
    res = await s.call(FIND_TOOL, {"query": "send SIGHUP to the proxy"})
    lines = res.text.splitlines()
    assert lines[1] == catalog.server.find_answer.low_confidence.format(domain=a.domain)
    assert res.structured["actions"][0]["confidence"] == "low"


async def test_without_a_confidence_nothing_is_added(catalog):
    s, _ = dynamic(catalog)

    @dataclasses.dataclass(frozen=True)
    class PlainHit:
        action: object
        score: float

    s.ranker = StubRanker([PlainHit(catalog.actions["container.restart"], 1.0)])
    res = await s.call(FIND_TOOL, {"query": "restart"})
    assert "confidence" not in res.structured["actions"][0]
    assert res.text.splitlines()[1] == f"- {find_line(catalog.actions['container.restart'], catalog)}"


# ---------------------------------------------------------------- browse a domain


async def test_a_domain_without_a_query_lists_every_action_of_it(catalog):
    s, _ = dynamic(catalog)
    res = await s.call(FIND_TOOL, {"domain": "container"})
    ids = list(catalog.domains["container"].action_ids)
    assert not res.is_error
    assert [c["id"] for c in res.structured["actions"]] == ids and res.structured["domain"] == "container"
    assert all("inputSchema" not in c for c in res.structured["actions"])
    rows = res.text.splitlines()[1:]
    assert [r.split(" ", 2)[1] for r in rows] == ids  # one line each, the ID after "- "
    marks = catalog.server.find_answer
    for r, aid in zip(rows, ids, strict=True):
        a = catalog.actions[aid]
        assert (marks.destructive_mark in r) == a.destructive
        assert (marks.read_only_mark in r) == (a.read_only and not a.destructive)


async def test_browsing_lists_only_what_this_server_serves():
    from interpreter.build.catalog import BuildOptions, build

    served = build(BuildOptions(read_only=True))
    s, _ = dynamic(served)
    res = await s.call(FIND_TOOL, {"domain": "container"})
    ids = [c["id"] for c in res.structured["actions"]]
    assert ids and all(served.actions[i].read_only for i in ids) and "container.delete" not in ids
    assert "swarm_secret" in s.tool(FIND_TOOL).input_schema["properties"]["domain"]["enum"]


async def test_a_blank_query_with_a_domain_lists_it_and_limit_caps_it(catalog):
    s, _ = dynamic(catalog)
    res = await s.call(FIND_TOOL, {"domain": "volume", "query": "   ", "limit": 3})
    assert [c["id"] for c in res.structured["actions"]] == list(catalog.domains["volume"].action_ids)[:3]


async def test_query_and_domain_rank_within_the_domain(catalog):
    s, _ = dynamic(catalog)
    res = await s.call(FIND_TOOL, {"domain": "image", "query": "remove"})
    assert res.structured["actions"] and all(c["id"].startswith("image.") for c in res.structured["actions"])


@pytest.mark.parametrize("arguments, fields", [
    ({}, ["query", "domain"]),
    ({"query": " \t "}, ["query", "domain"]),
    ({"limit": 3}, ["query", "domain"]),
    ({"query": ""}, ["query"]),
    ({"domain": "contaner"}, ["domain"]),
    ({"domain": ""}, ["domain"]),
    ({"domain": "container", "limit": 0}, ["limit"]),
    ({"domain": "container", "limit": 10_000}, ["limit"]),
    ({"query": "x" * 1_001}, ["query"]),
    ({"domain": "container", "colour": "red"}, ["colour"]),
    ({"domain": ["container"]}, ["domain"]),
])
async def test_bad_find_arguments_get_a_one_line_error_naming_the_field(catalog, arguments, fields):
    s, _ = dynamic(catalog)
    res = await s.call(FIND_TOOL, arguments)
    assert res.is_error and res.error_code == "invalid_arguments"
    assert res.error_fields == fields
    error_line = res.text.splitlines()[0]
    assert len(error_line) < 600


async def test_an_unknown_domain_is_answered_with_the_closest(catalog):
    s, _ = dynamic(catalog)
    res = await s.call(FIND_TOOL, {"domain": "contaner"})
    assert res.error_fields == ["domain"] and "container" in res.text.splitlines()[0]


# ---------------------------------------------------------------- errors that teach


async def test_an_object_parameter_error_lists_its_members_not_its_type_name(catalog):
    s, rec = dynamic(catalog)
    res = await s.call(EXECUTE_TOOL, {"action": "system.prune", "params": {"containers": "all"}, "confirm": True})
    assert res.is_error and res.error_code == "invalid_arguments" and res.error_fields == ["containers"]
    first = res.text.splitlines()[0]
    assert "Options" not in first  # no schema type name (SystemPruneContainersOptions)
    for word in ("mode", "stopped", "olderThan", "until"):
        assert word in first
    assert not rec.requests


async def test_a_declared_closed_set_refuses_other_values_before_sending(catalog):
    s, rec = dynamic(catalog)
    res = await s.call(EXECUTE_TOOL, {"action": "system.prune", "params": {"images": {"mode": "everything"}}, "confirm": True})
    assert res.error_fields == ["images.mode"]
    for value in ("none", "dangling", "all", "olderThan"):
        assert value in res.text.splitlines()[0]
    res = await s.call(EXECUTE_TOOL, {"action": "swarm_node.update", "params": {"nodeId": "n1", "availability": "drained"}})
    assert res.error_fields == ["availability"] and "drain" in res.text.splitlines()[0]
    res = await s.call(EXECUTE_TOOL, {"action": "system.prune", "params": {"volumes": {}}, "confirm": True})
    assert res.error_fields == ["volumes.mode"] and "anonymous" in res.text.splitlines()[0]
    assert not rec.requests


async def test_a_declared_value_and_null_still_pass(catalog):
    s, rec = dynamic(catalog, lambda r: ok_json({"success": True}))
    res = await s.call(EXECUTE_TOOL, {"action": "swarm_node.update", "params": {"nodeId": "n1", "availability": "drain", "name": None},
                                      "confirm": True})
    assert res.error_code != "invalid_arguments"
    body = json.loads(rec.requests[-1].content)
    assert body["availability"] == "drain"


def test_each_closed_set_is_in_the_served_schema_with_its_source(catalog):
    from interpreter.build.schema import enum_target

    corrected = [(a, c.removeprefix("enum ")) for a in catalog.actions.values() for c in a.corrections if c.startswith("enum ")]
    assert len(corrected) >= 8
    for a, path in corrected:
        target = enum_target(a.input_schema, path)
        assert target is not None and target["enum"] and target["type"] in ("string", ["string", "null"])
    prune = enum_target(catalog.actions["system.prune"].input_schema, "buildCache.mode")
    assert prune["enum"] == ["none", "unused", "all", "olderThan"]
    assert any(c.startswith("enum ") for c in catalog.actions["system.prune"].corrections)


if __name__ == "__main__":
    from interpreter.build.catalog import build

    cat = build()
    total, results = measure(cat)
    sizes = [_size(find_block(a, cat)) for a in cat.actions.values()]
    print(f"{len(QUERIES)} queries: {total} text bytes, {results} results, {total / results:.1f} bytes per result")
    print(f"every action's result: mean {statistics.mean(sizes):.0f} bytes, max {max(sizes)} (budget {cat.server.find_answer.result_max})")
