"""A small Chrome DevTools Protocol driver over `websockets` (already a dependency): one
headless Chromium, pages attached in flat mode, their frames' sessions (out-of-process
iframes included), bounded waits, and everything a test must see go wrong collected:
JavaScript exceptions, console errors, Content-Security-Policy violations and dialogs."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import websockets

START_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0
WAIT_TIMEOUT = 20.0
# what every document of a page reports to the driver: a CSP violation, as a console error
# carrying this marker (added to every frame before its own scripts run, in its main world:
# the page's CSP does not apply to a script the driver adds)
CSP_MARKER = "__cdp_csp_violation__"
_CSP_LISTENER = (
    "addEventListener('securitypolicyviolation', e => console.error('" + CSP_MARKER + "' + JSON.stringify("
    "{directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample, line: e.lineNumber})), true);"
)


class BrowserMissing(AssertionError):
    pass


def find_chromium() -> str:
    """CHROMIUM, else chromium (Debian's package) on PATH; missing is a failure that says how
    to install it, never a skip."""
    named = os.environ.get("CHROMIUM")
    if named:
        if shutil.which(named):
            return shutil.which(named)
        raise BrowserMissing(f"CHROMIUM={named!r} is not an executable")
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserMissing("Chromium is not installed: `make browser` installs Debian's package "
                         "(apt-get install chromium), or set CHROMIUM to a Chromium executable")


async def wait_until(check: Callable[[], Any], what: str, timeout: float = WAIT_TIMEOUT, every: float = 0.05):
    """Poll `check` (sync or async) until it returns something truthy; fail naming `what`
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(every)


class CDPError(RuntimeError):
    pass


class Browser:
    """One headless Chromium and its browser-level DevTools connection."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.profile: str | None = None
        self.ws = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._sessions: dict[str, Page] = {}  # session id -> the page it belongs to
        self._reader: asyncio.Task | None = None
        self.stderr_tail: list[str] = []

    async def start(self) -> Browser:
        exe = find_chromium()
        self.profile = tempfile.mkdtemp(prefix="arcane-mcp-chromium-")
        # --no-sandbox: Chromium's own sandbox refuses to start as root (CI containers, this
        # suite's usual machine); the pages it loads are this repository's own
        args = [exe, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "--no-sandbox",
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--hide-scrollbars", "--mute-audio",
                "--force-color-profile=srgb", "--font-render-hinting=none",
                # a sandboxed srcdoc frame stays in its page's process: the driver's listener
                # (securitypolicyviolation) is then added before the view's own scripts run
                # (an out-of-process frame attaches too late for it); scripts, CSP and the
                # sandbox behave the same in either process model
                "--disable-features=IsolateSandboxedIframes", "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = await asyncio.get_running_loop().run_in_executor(None, self._devtools_url)
        self.ws = await websockets.connect(url, max_size=64 * 1024 * 1024, ping_interval=None, open_timeout=START_TIMEOUT)
        self._reader = asyncio.create_task(self._read())
        return self

    def _devtools_url(self) -> str:
        """The ws:// address Chromium prints on stderr ("DevTools listening on ..."); the rest
        of stderr is drained on a thread (kept short, for a failure's message)."""
        deadline = time.monotonic() + START_TIMEOUT
        stream = self.proc.stderr
        while time.monotonic() < deadline:
            line = stream.readline().decode(errors="replace")
            if not line:
                break
            self.stderr_tail = (self.stderr_tail + [line])[-20:]
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                threading.Thread(target=self._drain, daemon=True).start()
                return found.group(1)
        raise AssertionError("Chromium did not start: " + "".join(self.stderr_tail)[-2000:])

    def _drain(self) -> None:
        for raw in iter(self.proc.stderr.readline, b""):
            self.stderr_tail = (self.stderr_tail + [raw.decode(errors="replace")])[-20:]

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in self.ws:
                msg = json.loads(raw)
                if "id" in msg:
                    fut = self._pending.pop(msg["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                    continue
                page = self._sessions.get(msg.get("sessionId", ""))
                if page is not None:
                    page._event(msg["method"], msg.get("params", {}), msg.get("sessionId"))
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(CDPError("the browser's DevTools connection closed"))

    async def send(self, method: str, params: dict | None = None, session: str | None = None,
                   timeout: float = CALL_TIMEOUT) -> dict:
        ident = next(self._ids)
        msg = {"id": ident, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = asyncio.get_running_loop().create_future()
        self._pending[ident] = fut
        await self.ws.send(json.dumps(msg))
        try:
            answer = await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(ident, None)
        if "error" in answer:
            raise CDPError(f"{method}: {answer['error'].get('message')} {answer['error'].get('data', '')}".strip())
        return answer.get("result", {})

    async def new_page(self, width: int = 760, height: int = 600) -> Page:
        target = (await self.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await self.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        page = Page(self, target, session)
        self._sessions[session] = page
        await page._setup(width, height)
        return page

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.ws is not None:
                await asyncio.wait_for(self.send("Browser.close", timeout=5), 5)
        with contextlib.suppress(Exception):
            if self.ws is not None:
                await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab: its session, the sessions of its out-of-process frames, their execution
    contexts, and what went wrong in any of them."""

    def __init__(self, browser: Browser, target: str, session: str):
        self.browser, self.target, self.session = browser, target, session
        self.main_frame: str | None = None
        self.contexts: dict[tuple[str, int], dict] = {}  # (session, context id) -> auxData + origin
        self.exceptions: list[dict] = []
        self.console_errors: list[str] = []
        self.csp_violations: list[dict] = []
        self.dialogs: list[dict] = []
        self.console: list[tuple[str, str]] = []
        self.bindings: dict[str, Callable[[str], Awaitable[None] | None]] = {}
        self._loaded = asyncio.Event()

    async def _enable(self, session: str) -> None:
        for domain in ("Page", "Runtime", "Log"):
            await self.browser.send(f"{domain}.enable", session=session)
        await self.browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": _CSP_LISTENER}, session=session)
        await self.browser.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True,
                                                         "flatten": True}, session=session)

    async def _setup(self, width: int, height: int) -> None:
        await self._enable(self.session)
        tree = await self.browser.send("Page.getFrameTree", session=self.session)
        self.main_frame = tree["frameTree"]["frame"]["id"]
        await self.set_viewport(width, height)

    def _event(self, method: str, params: dict, session: str) -> None:
        if method == "Target.attachedToTarget":
            child = params["sessionId"]
            self.browser._sessions[child] = self
            asyncio.get_running_loop().create_task(self._attach_child(child))
        elif method == "Runtime.executionContextCreated":
            ctx = params["context"]
            self.contexts[(session, ctx["id"])] = {**ctx.get("auxData", {}), "origin": ctx.get("origin"),
                                                   "name": ctx.get("name")}
        elif method == "Runtime.executionContextDestroyed":
            self.contexts.pop((session, params["executionContextId"]), None)
        elif method == "Runtime.executionContextsCleared":
            for key in [k for k in self.contexts if k[0] == session]:
                self.contexts.pop(key)
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(params["exceptionDetails"])
        elif method == "Runtime.consoleAPICalled":
            self._console(params)
        elif method == "Log.entryAdded":
            entry = params["entry"]
            if re.match(r"Ignored call to '(alert|confirm|prompt|print)\(\)'", entry.get("text", "")):
                self.dialogs.append({"refused": entry.get("text"), "url": entry.get("url")})  # the sandbox's refusal
            elif entry.get("level") == "error" and entry.get("source") == "security":
                self.csp_violations.append({"log": entry.get("text"), "url": entry.get("url")})
            elif entry.get("level") == "error":
                self.console_errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}")
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(params)
            asyncio.get_running_loop().create_task(
                self.browser.send("Page.handleJavaScriptDialog", {"accept": False}, session=session))
        elif method == "Page.loadEventFired" and session == self.session:
            self._loaded.set()
        elif method == "Runtime.bindingCalled":
            handler = self.bindings.get(params["name"])
            if handler is not None:
                outcome = handler(params["payload"])
                if asyncio.iscoroutine(outcome):
                    asyncio.get_running_loop().create_task(outcome)

    def _console(self, params: dict) -> None:
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        self.console.append((params.get("type", ""), text))
        if text.startswith(CSP_MARKER):
            self.csp_violations.append(json.loads(text[len(CSP_MARKER):]))
        elif params.get("type") == "error":
            self.console_errors.append("console: " + text)

    async def _attach_child(self, child: str) -> None:
        with contextlib.suppress(CDPError):  # a frame gone before it was set up
            await self._enable(child)
        with contextlib.suppress(CDPError):
            await self.browser.send("Runtime.runIfWaitingForDebugger", session=child)

    def problems(self) -> dict:
        """Everything that went wrong so far: a test asserts it is empty."""
        return {k: v for k, v in {"exceptions": [_exception_text(e) for e in self.exceptions],
                                  "csp_violations": list(self.csp_violations),
                                  "console_errors": list(self.console_errors), "dialogs": list(self.dialogs)}.items() if v}

    def clear_problems(self) -> None:
        self.exceptions.clear()
        self.csp_violations.clear()
        self.console_errors.clear()
        self.dialogs.clear()

    async def set_viewport(self, width: int, height: int) -> None:
        await self.browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                                        "deviceScaleFactor": 1, "mobile": False},
                                session=self.session)

    async def set_color_scheme(self, scheme: str) -> None:
        await self.browser.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme",
                                                                             "value": scheme}]}, session=self.session)

    async def navigate(self, url: str) -> None:
        self._loaded.clear()
        answer = await self.browser.send("Page.navigate", {"url": url}, session=self.session)
        if answer.get("errorText"):
            raise CDPError(f"navigating to {url}: {answer['errorText']}")
        await asyncio.wait_for(self._loaded.wait(), WAIT_TIMEOUT)

    async def add_binding(self, name: str, handler: Callable[[str], Any]) -> None:
        """`window[name](string)` in the page's main frame calls `handler(string)` here."""
        self.bindings[name] = handler
        await self.browser.send("Runtime.addBinding", {"name": name}, session=self.session)

    async def evaluate(self, expression: str, *, frame: str | None = None) -> Any:
        """The value (JSON) of `expression` in the main world of the top document, or of the
        frame whose id is `frame` (the view's iframe: see child_frame)."""
        session, params = self.session, {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if frame is not None:
            session, context = await self._context_of(frame)
            params["contextId"] = context
        answer = await self.browser.send("Runtime.evaluate", params, session=session)
        if "exceptionDetails" in answer:
            raise CDPError("evaluate: " + _exception_text(answer["exceptionDetails"]))
        return answer["result"].get("value")

    async def _context_of(self, frame: str) -> tuple[str, int]:
        def found():
            for (session, ident), aux in self.contexts.items():
                if aux.get("frameId") == frame and aux.get("isDefault"):
                    return session, ident
            return None

        return await wait_until(found, f"the main world of frame {frame}")

    async def child_frame(self) -> str:
        """The id of the (only) frame that is not the top document's."""
        def found():
            frames = {aux.get("frameId") for aux in self.contexts.values() if aux.get("isDefault")}
            return next(iter(sorted(f for f in frames if f and f != self.main_frame)), None)

        return await wait_until(found, "the view's frame")

    async def press(self, key: str) -> None:
        """A key pressed and released (Enter, Tab, Escape, ArrowDown, a letter) in the focused
        element of the focused frame, as a person's keyboard sends it."""
        codes = {"Enter": 13, "Tab": 9, "Escape": 27, "ArrowDown": 40, "ArrowUp": 38, " ": 32}
        code = codes.get(key, ord(key.upper()) if len(key) == 1 else 0)
        text = {"Enter": "\r", " ": " "}.get(key, key if len(key) == 1 else "")
        base = {"key": key, "code": key if len(key) > 1 else f"Key{key.upper()}", "windowsVirtualKeyCode": code}
        await self.browser.send("Input.dispatchKeyEvent", {"type": "keyDown", **base, **({"text": text} if text else {})},
                                session=self.session)
        await self.browser.send("Input.dispatchKeyEvent", {"type": "keyUp", **base}, session=self.session)

    async def type_text(self, text: str) -> None:
        """Text typed into the focused element (Input.insertText: one input event)."""
        await self.browser.send("Input.insertText", {"text": text}, session=self.session)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                                       session=self.session)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


def _exception_text(details: dict) -> str:
    exc = details.get("exception") or {}
    return f"{details.get('text', '')} {exc.get('description', '')} at {details.get('url', '')}:{details.get('lineNumber')}"
