"""Instructions of whole server starts under callgrind: spawn, initialize, tools/list, end of
input, for the one-tool bare SDK server (tests/bare_server.py), the bare server carrying the
individual surface's 425 tools and `interp serve` on each surface (as `make bench` runs it:
`--arcane-url http://127.0.0.1:9`, a used cache directory). Instruction counts do not depend
on the machine's load, unlike CPU times (docs/performance.md, the start section).

    .venv/bin/python -m compileall -q interpreter tests/bare_server.py   # as make bench does
    .venv/bin/python bench/start_instructions.py [case ...]              # needs valgrind
    .venv/bin/python bench/start_instructions.py --dump DIR              # tools/list lines, no valgrind

Each case prints its instructions, their ratio to the one-tool bare server's, and the same
with the software SHA-256 set aside (valgrind offers no SHA instructions: the checkout's
inputs hash costs ~53 M instructions there and ~1 ms natively). `--dump DIR` writes the raw
tools/list answer line of each surface in both protocol eras (2025-11-25 after initialize,
2026-07-28 enveloped) to DIR, to compare byte for byte before and after a change.

Not a test: nothing here asserts a count.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LEGACY, MODERN = "2025-11-25", "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
SURFACES = ("dynamic", "meta", "individual")


def cases() -> dict[str, list[str]]:
    interp = [PY, str(Path(PY).parent / "interp"), "serve", "--arcane-url", "http://127.0.0.1:9", "--surface"]
    bare = [PY, str(ROOT / "tests" / "bare_server.py")]
    return {"bare": bare, "bare425": [*bare, str(ROOT / "tests" / "golden" / "tools_list_individual.json")],
            **{s: [*interp, s] for s in SURFACES}}


def _line(proc: subprocess.Popen, rid: str) -> bytes:
    while True:
        raw = proc.stdout.readline()
        if not raw:
            raise SystemExit(f"the server ended before answering {rid}: {proc.stderr.read().decode(errors='replace')[-2000:]}")
        if json.loads(raw).get("id") == rid:
            return raw


def _send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def session(command: list[str], env: dict[str, str], era: str = LEGACY) -> bytes:
    """One start: the era's opening, tools/list, end of input; the raw tools/list answer line."""
    proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if era == LEGACY:
        _send(proc, {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                     "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "count", "version": "1"}}})
        _line(proc, "init")
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {}})
    else:
        _send(proc, {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": ENVELOPE}})
    listed = _line(proc, "list")
    proc.stdin.close()
    proc.wait(timeout=600)
    proc.stdout.close()
    proc.stderr.close()
    return listed


def count(name: str, command: list[str], env: dict[str, str], keep: Path | None) -> tuple[int, int]:
    with tempfile.TemporaryDirectory(prefix="arcane-mcp-count-") as tmp:
        out = Path(tmp) / "callgrind.out"
        session(["valgrind", "--tool=callgrind", "--quiet", f"--callgrind-out-file={out}", *command], env)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"callgrind.{name}").write_bytes(out.read_bytes())
        return _sha256(out), int(re.search(r"^(?:summary|totals): (\d+)", out.read_text(errors="replace"), re.M).group(1))


def _sha256(out: Path) -> int:
    """The inclusive instructions of OpenSSL's SHA256_Update and SHA256_Final (hashlib's
    SHA-256, in software under valgrind), read with callgrind_annotate."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)], capture_output=True, text=True).stdout
    found = re.findall(r"^\s*([\d,]+) .*:SHA256_(?:Update|Final) ", text, re.M)
    return sum(int(n.replace(",", "")) for n in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help=f"of {', '.join(cases())} (default: all)")
    parser.add_argument("--dump", type=Path, help="write each surface's raw tools/list line (both eras) here; no valgrind")
    parser.add_argument("--keep", type=Path, help="keep the callgrind output files here")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="arcane-mcp-count-cache-"))
    env = {**os.environ, "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_CACHE_DIR": str(cache)}
    env.pop("ARCANE_API_KEY", None)
    env.pop("ARCANE_URL", None)
    table = cases()
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for surface in SURFACES:
            for era in (LEGACY, MODERN):
                (args.dump / f"tools_list.{surface}.{era}.json").write_bytes(session(table[surface], env, era))
        print(f"wrote {len(SURFACES) * 2} tools/list lines to {args.dump}")
        return
    session(table["dynamic"], env)  # the cache directory used once, as make bench's "normal" start
    base = None
    for name in args.cases or list(table):
        sha, total = count(name, table[name], env, args.keep)
        if name == "bare":
            base = total
        ratio = f"{total / base:.3f}x, {(total - sha) / base:.3f}x without SHA-256" if base else ""
        print(f"{name:10} {total / 1e9:.3f} G instructions (SHA-256 {sha / 1e6:.0f} M) {ratio}", flush=True)


if __name__ == "__main__":
    main()
