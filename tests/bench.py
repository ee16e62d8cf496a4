"""`make bench`: cold start (spawn -> tools/list) per surface next to a bare SDK server,
tools/list bytes, and find/dispatch throughput, as ratios against a baseline measured in
the same run; and the memory held while a 1 GiB download streams past the cap. Medians;
machines are shared and noisy. Prints a table, writes JSON.

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "7"))


async def cold_start(command: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    params = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, "ARCANE_MCP_AUDIT_LOG": "off"})
    async with Client(params, mode="legacy") as c:
        tools = (await c.list_tools()).tools
        elapsed = time.perf_counter() - t0
    size = len(json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools], separators=(",", ":")))
    return elapsed, size


async def main() -> None:
    py = sys.executable
    interp = str(Path(py).parent / "interp")
    cases = {"bare SDK server (1 tool)": [py, str(ROOT / "tests" / "bare_server.py")]}
    for surface in ("dynamic", "meta", "individual"):
        cases[f"arcane-mcp {surface}"] = [interp, "serve", "--surface", surface, "--arcane-url", "http://127.0.0.1:9"]
    results = {}
    for name, cmd in cases.items():
        times, size = [], 0
        for _ in range(RUNS):
            t, size = await cold_start(cmd)
            times.append(t)
        results[name] = {"median_s": statistics.median(times), "min_s": min(times), "tools_list_bytes": size, "runs": RUNS}
    base = results["bare SDK server (1 tool)"]["median_s"]
    for r in results.values():
        r["ratio_to_bare"] = r["median_s"] / base

    # in-process: catalog build and ranking, against a baseline of json-parsing the document
    from interpreter.catalog import build
    from interpreter.rank import Ranker

    def med(fn, n=5):
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    doc = (ROOT / "catalog" / "arcane.openapi.json").read_text()
    parse = med(lambda: json.loads(doc))
    build_t = med(build)
    ranker = Ranker(build())
    queries = ["restart a container", "docker ps", "delete volume", "pull image", "show logs of a container"] * 20
    rank_t = med(lambda: [ranker.rank(q, 5) for q in queries]) / len(queries)
    # rendering: a 5,000-item list and a 1 MB log, against json.dumps of the same value
    from interpreter import escape
    from interpreter.names import Namer
    from interpreter.render import Renderer
    from interpreter.response import Shaped

    cat = build()
    renderer = Renderer(cat)
    items = [{"id": f"{i:064x}", "names": [f"/svc-{i}"], "image": "nginx:1.27", "state": "running" if i % 3 else "exited",
              "status": "Up 3 days", "created": 1764583200 + i, "labels": {"com.docker.compose.project": f"p{i % 40}", "note": "*x* | `y`"},
              "command": "nginx -g 'daemon off;'"} for i in range(5000)]
    value = {"items": items, "pagination": {"totalPages": 1, "totalItems": 5000, "currentPage": 1, "itemsPerPage": 5000}}
    shaped = Shaped("list", value, 200)
    list_action = cat.actions["container.list"]
    dump_list = med(lambda: json.dumps(value))
    render_list = med(lambda: renderer.success(list_action, shaped, Namer("dynamic"), {"limit": -1}))
    log = ("2026-01-01T00:00:00Z \x1b[32mINFO\x1b[0m request handled path=/api/x status=200 ✓ *a* `b` | c\r\n" * 12000)[:1_000_000]
    log_shaped = Shaped("text", {"filename": "x.log", "contentType": "text/plain", "size": len(log), "truncated": False, "text": log}, 200, text=log)
    log_action = cat.actions["container.download_logs"]
    dump_log = med(lambda: json.dumps(log))
    render_log = med(lambda: renderer.success(log_action, log_shaped, Namer("dynamic")))
    clean_log = med(lambda: escape.clean(log))
    # redaction: the same list through the compiled rules, and the worst shape found for the
    # URL scrubber (200 kB of `//a@`), against json.dumps
    rules = cat.redaction
    redact_list = med(lambda: rules.redact(value, side="response"))
    hostile = "//a@" * 50_000
    scrub_hostile = med(lambda: rules.scrub(hostile))
    inproc = {"json_parse_document_s": parse, "catalog_build_s": build_t, "catalog_build_ratio_to_parse": build_t / parse,
              "find_query_ms": rank_t * 1000,
              "render_list_5000_s": render_list, "json_dumps_list_5000_s": dump_list, "render_list_ratio_to_json_dumps": render_list / dump_list,
              "render_log_1mb_s": render_log, "json_dumps_log_1mb_s": dump_log, "render_log_ratio_to_json_dumps": render_log / dump_log,
              "clean_log_1mb_s": clean_log,
              "redact_list_5000_s": redact_list, "redact_list_ratio_to_json_dumps": redact_list / dump_list,
              "scrub_200kb_hostile_s": scrub_hostile}

    print(f"{'case':32} {'median s':>9} {'min s':>7} {'x bare':>7} {'tools/list B':>13}")
    for name, r in results.items():
        print(f"{name:32} {r['median_s']:9.3f} {r['min_s']:7.3f} {r['ratio_to_bare']:7.2f} {r['tools_list_bytes']:13,}")
    print(f"catalog build {build_t*1000:.0f} ms median ({build_t/parse:.1f}x parsing the OpenAPI JSON); find: {rank_t*1000:.2f} ms/query")
    print(f"render 5,000-item list: {render_list*1000:.1f} ms ({render_list/dump_list:.1f}x json.dumps of it); "
          f"render 1 MB log: {render_log*1000:.1f} ms ({render_log/dump_log:.1f}x json.dumps); clean 1 MB log: {clean_log*1000:.1f} ms")
    print(f"redact 5,000-item list: {redact_list*1000:.1f} ms ({redact_list/dump_list:.1f}x json.dumps); "
          f"scrub 200 kB of //a@: {scrub_hostile*1000:.1f} ms")
    # per call through a real in-memory MCP session, against hand-written servers (tests/bench_overhead.py)
    from tests.bench_overhead import measure as call_overhead

    per_call = await call_overhead()
    print(f"{'one tools/call (50-container list)':50} {'median ms':>9} {'overhead ms':>11}")
    for name, r in per_call.items():
        print(f"{name:50} {r['median_ms']:9.2f} {r['overhead_ms']:11.2f}")
    # the escaping oracle's full pair sweep (make test runs a fixed sample of it: tests/test_escape.py)
    from tests import escape_oracle

    t = time.perf_counter()
    n_docs, problems = escape_oracle.pair_sweep([ex["markdown"] for ex in escape_oracle.spec_examples()])
    sweep = {"documents_per_parser": n_docs, "parsers": len(escape_oracle.PARSERS), "problems": len(problems),
             "seconds": time.perf_counter() - t}
    print(f"escaping pair sweep: {n_docs:,} documents per parser x {sweep['parsers']} parsers, "
          f"{len(problems)} problem(s), {sweep['seconds']:.0f} s")
    for p in problems[:5]:
        print(p)
    # memory while a 1 GiB body streams past ARCANE_MCP_MAX_DOWNLOAD_BYTES (tests/big_body.py; sizes, not times)
    from tests import big_body

    downloads = {}
    for m in await asyncio.to_thread(big_body.run_all):
        downloads[m.action] = {"cap_bytes": m.cap, "body_bytes": big_body.SIZE, "sent_before_hangup_bytes": m.sent,
                               "tracemalloc_peak_bytes": m.traced_peak, "peak_rss_growth_bytes": m.rss_growth, "refused": m.result.is_error}
        print(f"1 GiB download, {m.action} (cap {m.cap / 2**20:.0f} MiB): read stopped after {m.sent / 2**20:.1f} MiB sent; "
              f"tracemalloc peak {m.traced_peak / 2**20:.1f} MiB; peak RSS growth {m.rss_growth / 2**20:.1f} MiB"
              + ("; refused (binary over the cap)" if m.result.is_error else "; text cut at the cap"))
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"cold_start": results, "in_process": inproc, "per_call": per_call, "escaping_pair_sweep": sweep,
                                                "downloads_1gib": downloads}, indent=2))
    print(f"wrote {out / 'bench.json'}")


if __name__ == "__main__":
    asyncio.run(main())
