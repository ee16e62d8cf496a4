"""Bounded work for any input: one client's free text never costs more than a bound, so it
cannot stall the others. The work is counted (interpreter/text/suggest.py WORK: the find ranker's
probes, "did you mean"'s string comparisons), never timed; the times are `make bench`'s
(tests/bench_bounded.py).

- every free-text argument of the engine's own tools has a maxLength (rules/server.yaml
  `max_length`), and a longer value is an invalid argument naming the field, before any work;
- the ranker reads at most `max_words` words, tries at most `fuzzy.words` of them fuzzily, and
  a word longer than any it knows costs no fuzzy probe nor split point (it can match nothing);
- "did you mean" compares nothing for a name over `did_you_mean.max_length`, and below it
  each pair of tokens at most once.
"""

from __future__ import annotations

import random
import string

import pytest
from mcp import MCPError

from interpreter.front.names import EXECUTE_TOOL, FIND_TOOL
from interpreter.front.surfaces import make_surface
from interpreter.text.rank import Ranker
from interpreter.text.suggest import WORK, _id_tokens, id_tokens
from tests.helpers import make_dispatcher, ok_json
from tests.test_resources import memory_session

pytestmark = pytest.mark.anyio
RND = random.Random(20)


def _word(n: int) -> str:
    return "".join(RND.choice(string.ascii_lowercase) for _ in range(n))


@pytest.fixture(scope="module")
def ranker(catalog):
    return Ranker(catalog)  # its own lookup caches: a word is never found there by another test


def _per_word_bound(r: Ranker) -> int:
    """The most probes one word tried fuzzily can cost: the single and double deletions of
    the longest word still within an edit budget of an action word, and every split point
    (any word may be split; only `fuzzy.words` of a query are tried fuzzily)."""
    edits = max(n for _, n in r.w.fuzzy_edits)
    longest = r.longest_action_word + edits
    return 1 + longest + longest * longest + r.part_max


HOSTILE = {
    "one 1,000-character word": lambda r: _word(1_000),
    "one 100,000-character word": lambda r: _word(100_000),
    "10,000 six-letter words": lambda r: " ".join(_word(6) for _ in range(10_000)),
    # the longest word still tried fuzzily, 10,000 times
    "10,000 words at the fuzzy limit": lambda r: " ".join(_word(r.longest_action_word + 2) for _ in range(10_000)),
    "control and invisible characters": lambda r: "\x00\x1b[31m\u202e\u200b\r\n\t" * 2_000 + _word(5_000),
    "1 MB of one letter": lambda r: "a" * 1_000_000,
    "1 MB of separators": lambda r: ".-_ " * 250_000,
    "accents and wide characters": lambda r: ("é" * 3000) + ("ｗ" * 3000) + ("😀" * 3000),
    "known words run together": lambda r: "container" * 2_000,
    "10,000 two-word splits": lambda r: " ".join(["apikey", "logout", "webhook"] * 3_400),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_worst_case_find_queries_do_bounded_work(ranker, name):
    query = HOSTILE[name](ranker)
    before = WORK["probe"]
    hits = ranker.rank(query, 5)
    probes = WORK["probe"] - before
    assert isinstance(hits, list)
    assert probes <= ranker.w.fuzzy_words * _per_word_bound(ranker) + ranker.max_words * ranker.part_max, probes
    if name.startswith("one "):
        assert probes == 0  # longer than any word the ranker knows: neither tried fuzzily nor split


def test_an_over_long_word_matches_nothing_and_leaves_the_rest_of_the_query_read(ranker):
    # the ranker keeps an over-long word only `inert` + 1 letters: such a word cannot be a known
    # word, a plural of one, a typo of one nor two run together (here: a run of known words)
    for long_word in (_word(ranker.inert + 1), "container" * 50, "restart" * 1_000):
        cut = long_word[: ranker.inert + 1]
        assert not ranker._known(cut) and ranker._fuzzy(cut) == [] and ranker._split(cut) is None
        before = WORK["probe"]
        top = ranker.rank(f"restart a container {long_word}", 3)
        assert top[0].action.id == "container.restart"
        assert WORK["probe"] - before == 0


def test_only_max_words_are_read(ranker):
    words = ranker.words(" ".join(["restart"] * 10_000))
    assert len(words) == ranker.max_words
    # a typo past the first max_words words is not looked up: no probe for it
    query = " ".join(["container"] * ranker.max_words) + " " + _word(8)
    before = WORK["probe"]
    ranker.rank(query, 3)
    assert WORK["probe"] - before == 0


def test_fuzzy_matching_still_finds_typos(ranker):
    before = WORK["probe"]
    assert ranker.rank("rsetart a contianer", 3)[0].action.id == "container.restart"
    assert 0 < WORK["probe"] - before <= 2 * _per_word_bound(ranker)


# ---------------------------------------------------------------- "did you mean"


def _comparisons_bound(catalog, text: str) -> int:
    """Each distinct pair of tokens compared once, and each action's whole name once."""
    pool_tokens = {t for aid in catalog.actions for t in _id_tokens(aid)[0]}
    return len(set(id_tokens(text))) * len(pool_tokens) + len(catalog.actions)


@pytest.mark.parametrize("size", [10_000, 1_000_000])
def test_a_huge_unknown_action_name_costs_no_comparison(catalog, size):
    for text in (_word(size), ".".join(_word(3) for _ in range(size // 4)), "container.restart" * (size // 17)):
        before = WORK["similarity"]
        assert catalog.closest(text) == []
        assert WORK["similarity"] == before


def test_names_up_to_the_limit_cost_bounded_comparisons(catalog):
    limit = catalog.find.did_you_mean.max_length
    assert limit >= max(map(len, catalog.actions))  # every action ID can still be suggested
    shapes = [_word(limit), ".".join(_word(3) for _ in range(limit))[:limit], ".".join(_word(1) for _ in range(limit))[:limit],
              ".".join(["contaner", "restrt", "volme", "imge", "netwrk", "projet"] * 20)[:limit],
              "_".join(["container", "restart"] * 20)[:limit], "x" * limit]
    for text in shapes:
        before = WORK["similarity"]
        catalog.closest(text)
        assert WORK["similarity"] - before <= _comparisons_bound(catalog, text), text
    assert catalog.closest("container.rstart")[0] == "container.restart"
    assert catalog.closest("restart-container")[0] == "container.restart"


# ---------------------------------------------------------------- the engine's own tools


def _surfaces(catalog):
    d, rec = make_dispatcher(catalog, lambda r: ok_json({"id": "c1", "name": "web"}))
    return {name: make_surface(name, catalog, d) for name in ("dynamic", "meta", "individual")}, rec


def test_every_free_text_argument_of_the_engines_tools_has_a_max_length(catalog):
    s, _ = _surfaces(catalog)
    limits = catalog.server.max_length
    dyn = {t.name: t.input_schema["properties"] for t in s["dynamic"].tools()}
    assert dyn[FIND_TOOL]["query"]["maxLength"] == limits.query
    assert dyn[EXECUTE_TOOL]["action"]["maxLength"] == limits.action
    for tool in s["meta"].tools():
        assert tool.input_schema["properties"]["action"]["maxLength"] == limits.action, tool.name
    # every string the engine's own tools take is bounded (enum, maxLength) or is an action's params
    for surface in ("dynamic", "meta"):
        for tool in s[surface].tools():
            for name, prop in tool.input_schema["properties"].items():
                if prop.get("type") == "string":
                    assert "maxLength" in prop or "enum" in prop, (tool.name, name)
    assert limits.action >= max(map(len, catalog.actions))


@pytest.mark.parametrize("surface,tool,field,size", [
    ("dynamic", FIND_TOOL, "query", 1_001), ("dynamic", FIND_TOOL, "query", 1_000_000),
    ("dynamic", EXECUTE_TOOL, "action", 10_000), ("dynamic", EXECUTE_TOOL, "action", 1_000_000),
    ("meta", "arcane_container", "action", 10_000), ("meta", "arcane_container", "action", 1_000_000),
])
async def test_an_over_long_argument_is_an_invalid_argument_naming_it(catalog, surface, tool, field, size):
    s, rec = _surfaces(catalog)
    limit = getattr(catalog.server.max_length, field)
    value = _word(limit + 1) if size <= limit else "x" * size
    args = {"action": "list", "params": {}} if surface == "meta" else ({"params": {}} if tool == EXECUTE_TOOL else {})
    args[field] = value
    before = dict(WORK)
    res = await s[surface].call(tool, args)
    assert res.is_error and res.error_code == "invalid_arguments" and res.error_fields == [field]
    assert len(res.text) < 2_000  # the value is not echoed back
    assert dict(WORK) == before and rec.requests == []


async def test_a_query_at_the_limit_is_answered(catalog):
    s, _ = _surfaces(catalog)
    limit = catalog.server.max_length.query
    query = ("restart a container " + " ".join(_word(18) for _ in range(limit)))[:limit]
    res = await s["dynamic"].call(FIND_TOOL, {"query": query})
    assert not res.is_error and res.structured["actions"][0]["id"] == "container.restart"


async def test_many_unknown_parameters_are_refused_naming_them(catalog):
    s, rec = _surfaces(catalog)
    extras = {f"{_word(12)}{i}": 1 for i in range(10_000)} | {"x" * 100_000: 1}
    res = await s["individual"].call("arcane_container_get", {"containerId": "c1", **extras})
    assert res.is_error and res.error_code == "invalid_arguments"
    assert set(res.error_fields) == set(extras) and rec.requests == []


# ---------------------------------------------------------------- prompts and completions


async def test_over_long_prompt_arguments_and_completion_values_are_invalid_params(sim, catalog):
    limits = catalog.server.max_length
    async with memory_session(sim.url, sim.api_key) as client:
        with pytest.raises(MCPError) as err:
            await client.get_prompt("diagnose_container", {"containerId": "x" * (limits.prompt_argument + 1)})
        assert err.value.code == -32602 and err.value.data["too_long"] == ["containerId"]
        with pytest.raises(MCPError) as err:
            await client.get_prompt("diagnose_container", {"containerId": "web", "environmentId": "0" * 1_000_000})
        assert err.value.code == -32602 and err.value.data["too_long"] == ["environmentId"]
        # at the limit: answered
        got = await client.get_prompt("diagnose_container", {"containerId": "w" * limits.prompt_argument})
        assert got.messages
        from mcp.types import PromptReference

        ref = PromptReference(type="ref/prompt", name="diagnose_container")
        with pytest.raises(MCPError) as err:
            await client.complete(ref, {"name": "containerId", "value": "x" * (limits.completion + 1)})
        assert err.value.code == -32602 and err.value.data["too_long"] == ["argument.value"]
        with pytest.raises(MCPError) as err:
            await client.complete(ref, {"name": "containerId", "value": ""}, context_arguments={"environmentId": "0" * 100_000})
        assert err.value.code == -32602 and err.value.data["too_long"] == ["context.arguments.environmentId"]
        got = await client.complete(ref, {"name": "containerId", "value": "x" * limits.completion})
        assert got.completion.values == []


# ---------------------------------------------------------------- Arcane's own string arguments


def test_header_and_cookie_strings_have_a_max_length(catalog):
    from interpreter.build.schema import COOKIE, HEADER

    capped = 0
    for action in catalog.actions.values():
        props = action.input_schema.get("properties", {})
        for b in action.bindings:
            if b.location in (HEADER, COOKIE) and props[b.arg].get("type") == "string":
                assert isinstance(props[b.arg].get("maxLength"), int), (action.id, b.arg)
                capped += 1
    assert capped  # the document has such arguments (Idempotency-Key, X-Step-Up-Token, …)


@pytest.mark.parametrize("size", [8_193, 1_000_000])
async def test_an_over_long_header_value_is_an_invalid_argument_and_nothing_is_sent(catalog, size):
    s, rec = _surfaces(catalog)
    res = await s["individual"].call("arcane_job_run", {"jobId": "j1", "idempotencyKey": "k" * size})
    assert res.is_error and res.error_code == "invalid_arguments" and res.error_fields == ["idempotencyKey"]
    assert len(res.text) < 2_000 and rec.requests == []
