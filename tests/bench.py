"""`make bench`: cold start (spawn -> initialize -> tools/list) per surface next to a bare SDK
server and FastMCP `from_openapi` over the same document, tools/list bytes, the memory held
after a start, per-call engine overhead (ours and FastMCP's, measured the same way), the
worst-case free text (find query, unknown action name) against a normal find, find
latency and the find corpus on both halves, rendering, and the memory held while a 1 GiB
download streams past the cap. Medians, and ratios against baselines measured in the same
run; machines are shared and noisy. Prints the tables (and the Markdown of
docs/performance.md's table), writes bench/results.json.

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "15"))
BARE_425 = "bare SDK server (the 425 individual tools)"
RESULTS = ROOT / "bench" / "results.json"
T0 = 0.0


def _child_stats() -> tuple[int, float]:
    """(resident memory in bytes, CPU seconds so far) of this process's children: the one
    server being measured (Linux /proc: VmRSS, and schedstat's time on a CPU in ns; (0, 0)
    elsewhere). Its CPU time counts the work, not the waits nor the slices other processes
    of a shared machine took, so it varies less from run to run than the wall time."""
    rss, cpu, me = 0, 0.0, str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me:
                status = (stat.parent / "status").read_text()
                rss += next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:"))
                cpu += int((stat.parent / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, IndexError, StopIteration, ValueError):
            continue
    return rss, cpu


async def cold_start(command: list[str], env: dict | None = None) -> tuple[float, int, int, float]:
    """Seconds from spawn to the tools/list answer, that answer's size (compact JSON, as
    tests/test_surfaces.py measures it), the server's RSS right after it and the CPU
    seconds the server used until then."""
    t0 = time.perf_counter()
    params = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, "ARCANE_MCP_AUDIT_LOG": "off", **(env or {})})
    async with Client(params, mode="legacy") as c:
        tools = (await c.list_tools()).tools
        elapsed = time.perf_counter() - t0
        rss, cpu = _child_stats()
    size = len(json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools], separators=(",", ":")))
    return elapsed, size, rss, cpu


async def main() -> None:
    global T0
    T0 = time.perf_counter()
    py = sys.executable
    interp = str(Path(py).parent / "interp")
    # the user's cache directory (interpreter/build/prebuilt.py): "empty cache" starts with an
    # empty one every time (only the shipped artefact and the .pyc files), "normal" with one
    # that earlier starts used
    empty_dir = Path(tempfile.mkdtemp(prefix="arcane-mcp-bench-empty-"))
    normal_dir = Path(tempfile.mkdtemp(prefix="arcane-mcp-bench-cache-"))
    from simulator import start_simulator
    from tests import bench_fastmcp

    sim = start_simulator()  # FastMCP's server gets an httpx client to it (nothing is called at start)
    fastmcp_name = f"FastMCP {bench_fastmcp.version()} from_openapi"
    cases = {"bare SDK server (1 tool)": ([py, str(ROOT / "tests" / "bare_server.py")], {}),
             # the same bare server listing the individual surface's 425 tools (its golden
             # tools/list): what the SDK and its client cost to carry them, whoever serves them
             BARE_425: ([py, str(ROOT / "tests" / "bare_server.py"), str(ROOT / "tests" / "golden" / "tools_list_individual.json")], {}),
             fastmcp_name: bench_fastmcp.serve_command(sim.url, sim.api_key)}
    for surface in ("dynamic", "meta", "individual"):
        cmd = [interp, "serve", "--surface", surface, "--arcane-url", "http://127.0.0.1:9"]
        cases[f"arcane-mcp {surface} (empty cache)"] = (cmd, {"ARCANE_MCP_CACHE_DIR": str(empty_dir)})
        cases[f"arcane-mcp {surface} (normal)"] = (cmd, {"ARCANE_MCP_CACHE_DIR": str(normal_dir)})
    # one start uses the normal cache directory first; then the cases take turns, one start
    # each per round, so a slower spell of a shared machine falls on all of them rather than
    # on whichever ran then
    await cold_start(*cases["arcane-mcp dynamic (normal)"])
    samples: dict[str, tuple[list[float], list[int], list[int], list[float]]] = {name: ([], [], [], []) for name in cases}
    for round_ in range(RUNS):
        for name, (cmd, env) in cases.items():
            if "empty cache" in name:
                shutil.rmtree(empty_dir)
                empty_dir.mkdir()
            for column, value in zip(samples[name], await cold_start(cmd, env), strict=True):
                column.append(value)
        print(f"  round {round_ + 1} of {RUNS} of starts done", flush=True)
    results = {}
    for name, (times, sizes, rss, cpus) in samples.items():
        results[name] = {"median_s": statistics.median(times), "min_s": min(times), "cpu_median_s": statistics.median(cpus),
                         "tools_list_bytes": sizes[-1], "rss_after_start_bytes": int(statistics.median(rss)), "runs": len(times)}
        print(f"  started {name}: {results[name]['median_s']:.2f} s median of {len(times)}", flush=True)
    sim.stop()
    base = results["bare SDK server (1 tool)"]["median_s"]
    fast = results[fastmcp_name]
    base_cpu = results["bare SDK server (1 tool)"]["cpu_median_s"]
    for r in results.values():
        r["cpu_ratio_to_bare"] = r["cpu_median_s"] / base_cpu if base_cpu else 0.0
        r["ratio_to_bare"] = r["median_s"] / base
        r["ratio_to_fastmcp"] = r["median_s"] / fast["median_s"]
        r["tools_list_ratio_to_fastmcp"] = r["tools_list_bytes"] / fast["tools_list_bytes"]
    carried = results[BARE_425]
    for name in ("arcane-mcp individual (normal)", "arcane-mcp individual (empty cache)"):
        results[name]["ratio_to_bare_425"] = results[name]["median_s"] / carried["median_s"]
        results[name]["cpu_ratio_to_bare_425"] = results[name]["cpu_median_s"] / carried["cpu_median_s"]

    # in-process: catalog build and ranking, against a baseline of json-parsing the document
    from interpreter.build.catalog import build
    from interpreter.text.rank import Ranker

    def med(fn, n=5):
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    from interpreter.build.catalog import BuildOptions

    doc = (ROOT / "catalog" / "arcane.openapi.json").read_text()
    parse = med(lambda: json.loads(doc))
    build_t = med(lambda: build(BuildOptions(cache_dir=None, compiled=False)), 3)
    artefact_t = med(lambda: build(BuildOptions(cache_dir=None)))  # the compiled artefact
    shutil.rmtree(empty_dir, ignore_errors=True)
    shutil.rmtree(normal_dir, ignore_errors=True)
    cat = build(BuildOptions(cache_dir=None))
    ranker = Ranker(cat)
    queries = ["restart a container", "docker ps", "delete volume", "pull image", "show logs of a container"] * 20
    rank_t = med(lambda: [ranker.rank(q, 5) for q in queries], 3) / len(queries)
    # the find corpus (tests/find_corpus.py): top-1/top-3 on each half, and each query's latency
    from tests import find_corpus

    latencies: list[float] = []

    def timed_rank(query: str) -> list[str]:
        t = time.perf_counter()
        hits = [h.action.id for h in ranker.rank(query, find_corpus.TOP)]
        latencies.append(time.perf_counter() - t)
        return hits

    figures = find_corpus.evaluate(timed_rank, lambda aid: cat.actions[aid].destructive if aid in cat.actions else False)
    corpus = {split: {"queries": sc.n, "top1": sc.top1_rate, "top3": sc.top3_rate} for split, sc in figures.by_split.items()}
    corpus["destructive_at_top_violations"] = len(figures.violations)
    corpus["find_median_ms"] = statistics.median(latencies) * 1000
    corpus["find_p95_ms"] = sorted(latencies)[int(0.95 * (len(latencies) - 1))] * 1000
    # the blind part (tests/find_blind.py): written before any tuning, a figure and never a floor
    from tests import find_blind

    corpus["blind"] = find_blind.evaluate(find_blind.catalog_rank_fn(cat)).as_dict()
    # rendering: a 5,000-item list and a 1 MB log, against json.dumps of the same value
    from interpreter.call.response import Shaped
    from interpreter.front.names import Namer
    from interpreter.text import escape
    from interpreter.text.render import Renderer

    renderer = Renderer(cat)
    items = [{"id": f"{i:064x}", "names": [f"/svc-{i}"], "image": "nginx:1.27", "state": "running" if i % 3 else "exited",
              "status": "Up 3 days", "created": 1764583200 + i, "labels": {"com.docker.compose.project": f"p{i % 40}", "note": "*x* | `y`"},
              "command": "nginx -g 'daemon off;'"} for i in range(5000)]
    value = {"items": items, "pagination": {"totalPages": 1, "totalItems": 5000, "currentPage": 1, "itemsPerPage": 5000}}
    shaped = Shaped("list", value, 200)
    list_action = cat.actions["container.list"]
    dump_list = med(lambda: json.dumps(value))
    # each run as a first sight of the list: the escaped-cell memo emptied before it
    render_list = med(lambda: (escape._cell_memos.clear(), renderer.success(list_action, shaped, Namer("dynamic"), {"limit": -1})))
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
              "catalog_artefact_load_s": artefact_t, "catalog_build_to_artefact_ratio": build_t / artefact_t,
              "find_query_ms": rank_t * 1000, "find_corpus": corpus,
              "render_list_5000_s": render_list, "render_list_rows_shown": renderer.max_rows,
              "json_dumps_list_5000_s": dump_list, "render_list_ratio_to_json_dumps": render_list / dump_list,
              "render_log_1mb_s": render_log, "json_dumps_log_1mb_s": dump_log, "render_log_ratio_to_json_dumps": render_log / dump_log,
              "clean_log_1mb_s": clean_log,
              "redact_list_5000_s": redact_list, "redact_list_ratio_to_json_dumps": redact_list / dump_list,
              "scrub_200kb_hostile_s": scrub_hostile}

    print(f"{'case (spawn -> initialize -> tools/list)':40} {'median s':>9} {'min s':>7} {'x bare':>7} {'CPU s':>6} {'x bare':>7} "
          f"{'x FastMCP':>9} {'tools/list B':>13} {'x FastMCP':>9} {'RSS MiB':>8}")
    for name, r in results.items():
        print(f"{name:40} {r['median_s']:9.3f} {r['min_s']:7.3f} {r['ratio_to_bare']:7.2f} {r['cpu_median_s']:6.3f} "
              f"{r['cpu_ratio_to_bare']:7.2f} {r['ratio_to_fastmcp']:9.2f} "
              f"{r['tools_list_bytes']:13,} {r['tools_list_ratio_to_fastmcp']:9.3f} {r['rss_after_start_bytes'] / 2**20:8.1f}")
    normal_ind = results["arcane-mcp individual (normal)"]
    print(f"individual (normal) x {BARE_425}: {normal_ind['ratio_to_bare_425']:.2f} wall, {normal_ind['cpu_ratio_to_bare_425']:.2f} CPU")
    print(f"find corpus: tune top-1 {corpus['tune']['top1']:.1%} / top-3 {corpus['tune']['top3']:.1%}, "
          f"heldout top-1 {corpus['heldout']['top1']:.1%} / top-3 {corpus['heldout']['top3']:.1%} "
          f"({corpus['all']['queries']} queries, {corpus['destructive_at_top_violations']} destructive-at-top); "
          f"find {corpus['find_median_ms']:.2f} ms median, {corpus['find_p95_ms']:.2f} ms p95")
    print(f"find corpus, blind part ({corpus['blind']['queries']} queries, never tuned against): "
          f"top-1 {corpus['blind']['top1']:.1%} / top-3 {corpus['blind']['top3']:.1%}")
    print(f"catalog build {build_t*1000:.0f} ms median ({build_t/parse:.1f}x parsing the OpenAPI JSON); "
          f"from the compiled artefact {artefact_t*1000:.0f} ms ({build_t/artefact_t:.1f}x faster); find: {rank_t*1000:.2f} ms/query")
    print(f"render 5,000-item list: {render_list*1000:.1f} ms ({render_list/dump_list:.2f}x json.dumps of it); "
          f"render 1 MB log: {render_log*1000:.1f} ms ({render_log/dump_log:.1f}x json.dumps); clean 1 MB log: {clean_log*1000:.1f} ms")
    print(f"redact 5,000-item list: {redact_list*1000:.1f} ms ({redact_list/dump_list:.1f}x json.dumps); "
          f"scrub 200 kB of //a@: {scrub_hostile*1000:.1f} ms")
    # per call through a real in-memory MCP session, against hand-written servers (tests/bench_overhead.py)
    from tests.bench_overhead import DIRECT, DIRECT_FRESH, FRESH, TRIVIAL
    from tests.bench_overhead import measure as call_overhead

    per_call = await call_overhead()
    print(f"{'one tools/call (50-container list)':50} {'median ms':>9} {'overhead ms':>11}")
    for name, r in per_call.items():
        print(f"{name:50} {r['median_ms']:9.2f} {r['overhead_ms']:11.2f}")
    # worst-case free text (a find query, an unknown action name) against a normal find (tests/bench_bounded.py)
    from tests import bench_bounded

    bounded = await bench_bounded.measure()
    bench_bounded.report(bounded)
    # engine overhead the way, for both: the call minus a bare SDK server's trivial
    # call minus the direct httpx call (ours: rows of the same interleaved run; FastMCP's:
    # tests/bench_fastmcp.py, in its own venv)
    theirs = bench_fastmcp.fastmcp_calls()
    engine = {f"{fastmcp_name}: list_containers": {"call_ms": theirs["fastmcp_call_ms"], **{k: theirs[k] for k in ("bare_trivial_call_ms", "direct_httpx_ms")},
                                                    "overhead_ms": theirs["overhead_ms"]}}
    trivial = per_call[TRIVIAL]["median_ms"]
    for name, r in per_call.items():
        if name.startswith("arcane-mcp"):
            httpx_ms = per_call[DIRECT_FRESH if name.endswith(FRESH) else DIRECT]["median_ms"]
            engine[name] = {"call_ms": r["median_ms"], "bare_trivial_call_ms": trivial, "direct_httpx_ms": httpx_ms,
                            "overhead_ms": r["median_ms"] - trivial - httpx_ms}
    print(f"{'engine overhead per call (call - trivial - httpx)':50} {'call ms':>9} {'trivial':>8} {'httpx':>7} {'overhead ms':>11}")
    for name, r in engine.items():
        print(f"{name:50} {r['call_ms']:9.2f} {r['bare_trivial_call_ms']:8.2f} {r['direct_httpx_ms']:7.2f} {r['overhead_ms']:11.2f}")
    # HTTP mode for teams: concurrent clients over several keys (tests/bench_http.py)
    from tests.bench_http import measure as http_load

    team = await http_load()
    print(f"HTTP team mode: {team['clients']} clients over {team['keys']} keys, {team['calls']:,} calls, {team['errors']} errors, "
          f"p50 {team['p50_ms']:.1f} ms, p99 {team['p99_ms']:.1f} ms, {team['calls_per_s']:.0f} calls/s; "
          f"memory per extra key server {team['rss_per_extra_key_mib']:.1f} MiB")
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
    # the path-value sweep's full product (make test runs a fixed sample of it: tests/test_path_safety.py)
    from tests import path_sweep

    paths, paths_s = await path_sweep.full_sweep()
    path_sweep_row = {"calls": paths.total, "actions": len(paths.actions), "values": len(paths.values), "refused": paths.refused,
                      "sent": paths.sent, "previews": paths.previews, "wrong": len(paths.wrong), "seconds": paths_s}
    print(f"{paths.summary()}; {paths_s:.0f} s")
    for line in paths.wrong[:5]:
        print(line)
    # memory while a 1 GiB body streams past ARCANE_MCP_MAX_DOWNLOAD_BYTES (tests/big_body.py; sizes, not times)
    from tests import big_body

    downloads = {}
    for m in await asyncio.to_thread(big_body.run_all):
        downloads[m.action] = {"cap_bytes": m.cap, "body_bytes": big_body.SIZE, "sent_before_hangup_bytes": m.sent,
                               "tracemalloc_peak_bytes": m.traced_peak, "peak_rss_growth_bytes": m.rss_growth, "refused": m.result.is_error}
        print(f"1 GiB download, {m.action} (cap {m.cap / 2**20:.0f} MiB): read stopped after {m.sent / 2**20:.1f} MiB sent; "
              f"tracemalloc peak {m.traced_peak / 2**20:.1f} MiB; peak RSS growth {m.rss_growth / 2**20:.1f} MiB"
              + ("; refused (binary over the cap)" if m.result.is_error else "; text cut at the cap"))
    machine = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "python": platform.python_version(),
               "cpus": os.cpu_count(), "cpu": _cpu_model(), "load_1min": os.getloadavg()[0], "runs": RUNS}
    data = {"machine": machine, "cold_start": results, "in_process": inproc, "per_call": per_call, "worst_case_free_text": bounded, "engine_overhead": engine,
            "http_team": team, "escaping_pair_sweep": sweep, "path_sweep": path_sweep_row, "downloads_1gib": downloads,
            "seconds": time.perf_counter() - T0}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2))
    print("\n" + markdown(data))
    print(f"wrote {RESULTS.relative_to(ROOT)} ({data['seconds'] / 60:.1f} min)")


def _cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def markdown(data: dict) -> str:
    """docs/performance.md's summary table from one run's results (paste it over the old one)."""
    from tests.bench_bounded import NORMAL as NORMAL_FIND

    m, cold, eng, inproc = data["machine"], data["cold_start"], data["engine_overhead"], data["in_process"]
    rows = ["| case | start s (median) | × bare SDK | server CPU s (median) | × bare SDK | × FastMCP (start) | tools/list bytes "
            "| × FastMCP | RSS after start MiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in cold.items():
        rows.append(f"| {name} | {r['median_s']:.3f} | {r['ratio_to_bare']:.2f} | {r['cpu_median_s']:.3f} | {r['cpu_ratio_to_bare']:.2f} | "
                    f"{r['ratio_to_fastmcp']:.2f} | {r['tools_list_bytes']:,} | {r['tools_list_ratio_to_fastmcp']:.3f} | "
                    f"{r['rss_after_start_bytes'] / 2**20:.0f} |")
    ind = cold["arcane-mcp individual (normal)"]
    if "ratio_to_bare_425" in ind:
        rows += ["", f"The normal individual start is {ind['ratio_to_bare_425']:.2f} × (CPU {ind['cpu_ratio_to_bare_425']:.2f} ×) "
                     f"the {BARE_425}: what it pays beyond that is the engine's own start."]
    rows += ["", "| engine overhead per call (50-container list) | call ms | − trivial call ms | − direct httpx ms | overhead ms |",
             "|---|---:|---:|---:|---:|"]
    for name, r in eng.items():
        rows.append(f"| {name} | {r['call_ms']:.2f} | {r['bare_trivial_call_ms']:.2f} | {r['direct_httpx_ms']:.2f} | {r['overhead_ms']:.2f} |")
    c = inproc["find_corpus"]
    rows += ["", "| in process | figure |", "|---|---|",
             f"| find corpus, tune half ({c['tune']['queries']} queries) | top-1 {c['tune']['top1']:.1%}, top-3 {c['tune']['top3']:.1%} |",
             f"| find corpus, held-out half ({c['heldout']['queries']} queries) | top-1 {c['heldout']['top1']:.1%}, top-3 {c['heldout']['top3']:.1%} |",
             f"| find corpus, blind part ({c['blind']['queries']} queries, written before tuning, never tuned against) | "
             f"top-1 {c['blind']['top1']:.1%}, top-3 {c['blind']['top3']:.1%} |",
             f"| destructive action first without a request to change | {c['destructive_at_top_violations']} |",
             f"| find latency per query (corpus) | {c['find_median_ms']:.2f} ms median, {c['find_p95_ms']:.2f} ms p95 |",
             f"| render a 5,000-item container list (table of the first {inproc['render_list_rows_shown']} rows) | "
             f"{inproc['render_list_5000_s'] * 1000:.1f} ms "
             f"({inproc['render_list_ratio_to_json_dumps']:.2f}× json.dumps of it) |",
             *(f"| {label} | {r['median_ms']:.2f} ms ({r['ratio_to_normal_find']:.2f}× a normal find; CPU {r['cpu_ratio_to_normal_find']:.2f}×) |"
               for label, r in data.get("worst_case_free_text", {}).items() if label != NORMAL_FIND),
             f"| catalog build from the sources / from the compiled artefact | {inproc['catalog_build_s'] * 1000:.0f} ms / "
             f"{inproc['catalog_artefact_load_s'] * 1000:.0f} ms |",
             "", f"Machine: {m['cpus']} × {m['cpu']}, Python {m['python']}, {m['date']}, 1-min load {m['load_1min']:.1f} at the end, "
             f"{m['runs']} starts per case; whole run {data['seconds'] / 60:.1f} min."]
    return "\n".join(rows)


if __name__ == "__main__":
    asyncio.run(main())
