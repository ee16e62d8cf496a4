"""`make screenshots`: docs/views/<view>-light.png and <view>-dark.png.

Starts the simulator (its demo data) and `interp serve --http` with its defaults against
it, then drives headless Chromium through the browser tests' host (tests/browser/): for each
view, the host's own tools/call of the action the view serves, the view's document read
from the server, shown in the host's sandboxed iframe at a fixed width, and captured once
the view has rendered and stopped resizing. Fails (exit 1) on any JavaScript exception,
console error, CSP violation or dialog, as the browser tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator import start_simulator  # noqa: E402
from tests.browser.cdp import wait_until  # noqa: E402
from tests.browser.harness import browser_thread  # noqa: E402
from tests.browser.host import WIDTH, Elicitations, ViewHost, mcp_client  # noqa: E402
from tests.helpers import free_port, start_http_server  # noqa: E402

EXECUTE = "arcane_execute_action"
MAX_HEIGHT = 1400  # px: a longer view is cut here (the table's 20 rows fit)


# The simulator runs no Trivy (a scan is "not simulated"): for the images view to show what
# a scanned image looks like, three images get a last scan's summary set behind Arcane, in
# the shape of Arcane's VulnerabilityScanSummary; the rest show none, as unscanned ones do.
SCANS = {"nginx:1.27": (0, 2, 9, 14), "postgres:16": (1, 4, 12, 30), "redis:7": (0, 0, 3, 5)}


def demo_scans(sim) -> None:
    for image in sim.items("images"):
        found = next((SCANS[t] for t in image.get("repoTags") or [] if t in SCANS), None)
        if found is None:
            continue
        critical, high, medium, low = found
        summary = {"critical": critical, "high": high, "medium": medium, "low": low, "unknown": 0,
                   "total": critical + high + medium + low}
        sim.change_behind_arcane("images", image["id"], {"vulnerabilityScan": {
            "imageId": image["id"], "scanTime": "2026-01-01T02:00:00Z", "status": "completed", "summary": summary}})


def shots(sim) -> list[tuple[str, str, dict, str]]:
    """(view, action, params, a JavaScript condition met once the view has drawn its data)."""
    project = next(p for p in sim.items("projects") if p.get("status") == "running")
    return [
        ("containers", "container.list", {}, "document.querySelectorAll('table tbody tr').length > 0"),
        ("images", "image.list", {}, "document.querySelectorAll('table tbody tr').length > 0"),
        ("container-logs", "container.logs", {"containerId": "blog-web-1", "tail": 40, "timestamps": True},
         "document.querySelectorAll('.log .ln').length > 0"),
        ("project-logs", "project.logs", {"projectId": project["id"], "tail": 40},
         "document.querySelectorAll('.log .ln').length > 0"),
        ("container-stats", "container.stats", {"containerId": "blog-web-1", "samples": 5},
         "document.querySelectorAll('svg').length > 0"),
        ("project", "project.get", {"projectId": project["id"]}, "document.querySelectorAll('table tbody tr').length > 0"),
    ]


async def settled(host: ViewHost, ready: str) -> None:
    """The view drew its data and its size stayed the same for half a second."""
    await host.settle("the view's data", ready, timeout=60)
    last, since = None, time.monotonic()
    while time.monotonic() - since < 0.5:
        now = host.sizes[-1] if host.sizes else None
        if now != last:
            last, since = now, time.monotonic()
        await asyncio.sleep(0.05)


async def capture(host: ViewHost, path: Path) -> None:
    height = await host.page.evaluate("Math.ceil(document.documentElement.getBoundingClientRect().height)")
    await host.page.set_viewport(WIDTH, min(MAX_HEIGHT, max(200, int(height))))
    await asyncio.sleep(0.2)
    await host.page.screenshot(path)


async def run(browser, server: str, sim, out: Path, only: set[str]) -> list[Path]:
    written = []
    async with mcp_client(server, Elicitations()) as client:
        host = await ViewHost(browser.page, browser.pages_url, client).attach()
        for view, action, params, ready in shots(sim):
            if only and view not in only:
                continue
            for theme in ("light", "dark"):
                await host.page.set_viewport(WIDTH, 600)
                result = await host.call_and_show(EXECUTE, {"action": action, "params": params}, theme=theme)
                model = (result.get("_meta") or {}).get("arcane-mcp/view") or {}
                if model.get("view") != view:
                    raise SystemExit(f"{action}: the server's view is {model.get('view')!r}, expected {view!r}")
                await settled(host, ready)
                await wait_until(lambda: host.sizes, "the view's size")
                path = out / f"{view}-{theme}.png"
                await capture(host, path)
                problems = browser.page.problems()
                if problems:
                    raise SystemExit(f"{view} ({theme}): {problems}")
                written.append(path)
                print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes", flush=True)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "views"), help="the directory to write (docs/views)")
    parser.add_argument("views", nargs="*", help="only these views (default: all)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    interp = shutil.which("interp", path=str(Path(sys.executable).parent)) or "interp"
    cache = tempfile.mkdtemp(prefix="arcane-mcp-screenshots-cache-")
    with start_simulator() as sim:
        demo_scans(sim)
        port = free_port()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
               "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_CACHE_DIR": cache}
        proc = start_http_server([interp, "serve", "--http", "--port", str(port)], env, port)
        try:
            with browser_thread() as browser:
                browser.run(run(browser, f"http://127.0.0.1:{port}", sim, out, set(args.views)), timeout=600)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
