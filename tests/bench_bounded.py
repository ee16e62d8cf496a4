"""Worst-case free text, per call, for `make bench` (tests/test_bounded_work.py counts the work;
this times it). Through a real in-memory MCP session on the dynamic surface (the server of
tests/bench_overhead.py, Arcane in memory), each case against a normal find, interleaved the
same way as the per-call rows:

- the worst find query the tool accepts: `max_length.query` characters of words just short
  enough to be tried fuzzily (each call new words, so no lookup cache helps);
- one word of `max_length.query` characters (the shape that took seconds before the bounds);
- a 1 MB query (refused by the schema);
- the costliest unknown action name "did you mean" reads (a few tokens near action words,
  new each call; any name over `did_you_mean.max_length` costs no comparison), and a 10 KB
  and a 1 MB one (refused by the schema).

Not a test: nothing asserts a time. `python -m tests.bench_bounded` runs these rows alone
(BENCH_BOUNDED_CALLS sets the calls per case).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import os
import random
import string
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import Client

from tests import bench_overhead

NORMAL = "find: 'restart a container'"


def _word(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choice(string.ascii_lowercase) for _ in range(n))


async def measure(calls: int | None = None) -> dict:
    """Median ms (wall and CPU) per call of each case, and its ratio to the normal find."""
    from interpreter.build.catalog import build
    from interpreter.text.rank import ranker_for

    calls = calls or int(os.environ.get("BENCH_BOUNDED_CALLS", "0")) or bench_overhead.CALLS
    catalog = build()
    limits = catalog.server.max_length
    fuzzy_word = ranker_for(catalog).longest_action_word + 2  # the longest word still tried fuzzily
    rnd = random.Random(20)
    n = bench_overhead.WARMUP + calls + 1

    def fresh(make: Callable[[], str]) -> Callable[[], str]:
        return itertools.cycle([make() for _ in range(n)]).__next__

    queries = {
        NORMAL: lambda: "restart a container",
        f"find: worst query at the limit ({limits.query:,} chars of {fuzzy_word}-letter words)":
            fresh(lambda: " ".join(_word(rnd, fuzzy_word) for _ in range(limits.query))[: limits.query]),
        f"find: one {limits.query:,}-char word": fresh(lambda: _word(rnd, limits.query)),
        "find: a 1 MB query (refused)": lambda: "q" * 1_000_000,
    }
    near = ["contaner", "restrt", "volme", "imge", "netwrk", "projet", "rstart", "imgae", "contianer", "stopp"]
    actions = {
        "unknown action: a typo ('container.rstart', for scale)": lambda: "container.rstart",
        # the costliest shape found: a few tokens, each near some action's, none a match
        "unknown action: worst name (six near-words, new each call)":
            fresh(lambda: ".".join(rnd.sample(near, 3) + [_word(rnd, 6) for _ in range(3)])),
        "unknown action: 10 KB name (refused)": lambda: "x" * 10_000,
        "unknown action: 1 MB name (refused)": lambda: "x" * 1_000_000,
    }
    server = bench_overhead.arcane_server("dynamic")
    gc.freeze()
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(Client(server, mode="legacy"))

        def case(tool: str, key: str, value: Callable[[], str], extra: dict, error: bool) -> Callable[[], Awaitable[Any]]:
            async def call() -> None:
                result = await client.call_tool(tool, {key: value(), **extra})
                if result.is_error != error:
                    raise RuntimeError(f"{tool}: unexpected answer {result.content[0].text[:200]}")
            return call

        cases = {label: case("arcane_find_action", "query", q, {}, "refused" in label) for label, q in queries.items()}
        cases |= {label: case("arcane_execute_action", "action", a, {"params": {}}, True) for label, a in actions.items()}
        medians = await bench_overhead._interleaved(cases, calls)
    base_wall, base_cpu = medians[NORMAL]
    return {label: {"median_ms": wall * 1000, "cpu_ms": cpu * 1000, "ratio_to_normal_find": wall / base_wall,
                    "cpu_ratio_to_normal_find": cpu / base_cpu} for label, (wall, cpu) in medians.items()}


def report(rows: dict) -> None:
    print(f"{'worst-case free text, one tools/call':72} {'median ms':>9} {'x find':>7} {'CPU ms':>7} {'x find':>7}")
    for label, r in rows.items():
        print(f"{label:72} {r['median_ms']:9.2f} {r['ratio_to_normal_find']:7.2f} {r['cpu_ms']:7.2f} {r['cpu_ratio_to_normal_find']:7.2f}")


if __name__ == "__main__":
    report(asyncio.run(measure()))
