"""One event loop on a thread of the test process, holding one browser for a test module:
synchronous tests run their coroutines on it (`run`), so the browser, its DevTools
connection and the MCP client sessions live on one loop across the module's tests."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from tests.browser.cdp import Browser, Page
from tests.browser.host import host_pages

RUN_TIMEOUT = 120.0


class BrowserThread:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="browser-loop", daemon=True)
        self.browser: Browser | None = None
        self.page: Page | None = None
        self.pages_url = ""

    def run(self, coro, timeout: float = RUN_TIMEOUT):
        """Run `coro` on the browser's loop and return its value (bounded)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> BrowserThread:
        self.thread.start()
        self.browser = Browser()
        self.run(self.browser.start())
        self.page = self.run(self.browser.new_page())
        return self

    def stop(self) -> None:
        if self.browser is not None:
            with contextlib.suppress(Exception):
                self.run(self.browser.close(), timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@contextlib.contextmanager
def browser_thread():
    """A started browser with one page, and the host page served; stopped in every case."""
    runner = BrowserThread()
    try:
        with host_pages() as url:
            runner.pages_url = url
            runner.start()
            yield runner
    finally:
        runner.stop()
