"""The MCP Apps views in a real browser: headless Chromium (Debian's package; `make test`
installs it where missing) driven over the DevTools protocol (tests/browser/cdp.py), a test
host (tests/browser/host.py) holding each view in a sandboxed iframe and answering its
bridge through a real MCP client session to `interp serve --http` against the simulator,
with the default settings. Every test fails on a JavaScript exception, a console error, a
Content-Security-Policy violation or a dialog, in the host page or the view."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.cdp import wait_until
from tests.browser.fixture import fixture_document
from tests.browser.harness import browser_thread
from tests.browser.host import VIEW_META_KEY, Elicitations, ViewHost, mcp_client
from tests.helpers import free_port, start_http_server
from tests.test_e2e import INTERP

pytestmark = pytest.mark.timeout(600)

SAMPLES = Path(__file__).resolve().parent / "data" / "views"
HOSTILE = '"><img src=x onerror=alert(1)><svg onload=alert(2)><script>alert(3)</script>' + "W" * 300


@pytest.fixture(scope="module")
def browser():
    with browser_thread() as runner:
        yield runner


@pytest.fixture(scope="module")
def server(sim):
    """`interp serve --http` with its defaults (dynamic surface) against the simulator."""
    port = free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off"}
    proc = start_http_server([INTERP, "serve", "--http", "--port", str(port)], env, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(autouse=True)
def clean(browser, sim):
    """The demo state for each test; after it, nothing went wrong in the browser."""
    sim.reset()
    browser.page.clear_problems()
    yield
    assert browser.page.problems() == {}


def scenario(browser, server, body, *, answer: str = "decline", apps: bool = True):
    """Run `body(host, elicitations)` on the browser's loop with a fresh client session."""
    elicit = Elicitations()
    elicit.answer = answer

    async def run():
        async with mcp_client(server, elicit, apps=apps) as client:
            host = await ViewHost(browser.page, browser.pages_url, client).attach()
            return await body(host, elicit)

    return browser.run(run())


def sample_result(model: dict) -> dict:
    """A CallToolResult carrying a sample view model, as the server would send it."""
    text = model.get("message") or model.get("title") or ""
    return {"content": [{"type": "text", "text": str(text)}], "isError": bool(model.get("isError")),
            "_meta": {VIEW_META_KEY: model}}


# -- the test host itself, against a fixture view of its own --------------------------------

def test_the_host_completes_the_handshake_and_delivers_the_result(browser):
    result = {"content": [{"type": "text", "text": "two containers"}],
              "_meta": {VIEW_META_KEY: {"rows": [{"name": "web"}, {"name": HOSTILE}]}}}

    async def body():
        host = await ViewHost(browser.page, browser.pages_url).attach()
        await host.show(fixture_document(), theme="dark", arguments={"a": 1}, result=result)
        await host.settle("the fixture's render", "document.body.dataset.rendered === '1'")
        names = await host.in_view("[...document.querySelectorAll('li')].map(e => e.textContent)")
        dark = await host.in_view("document.body.classList.contains('dark')")
        teardown = await host.request("ui/resource-teardown", {"reason": "test"})
        return host, names, dark, teardown

    host, names, dark, teardown = browser.run(body())
    assert names == ["web", HOSTILE]
    assert dark is True
    assert teardown["result"] == {}
    assert host.init_params["protocolVersion"] == "2026-01-26"
    assert host.sizes and host.sizes[-1]["width"] > 0


def test_the_safety_checks_catch_a_view_that_inserts_data_as_html(browser):
    """The negative control: a view that uses innerHTML is caught by the same checks the
    real views pass (an injected element, a CSP violation for its inline handler)."""
    result = {"content": [{"type": "text", "text": "x"}], "_meta": {VIEW_META_KEY: {"rows": [{"name": HOSTILE}]}}}

    async def body():
        host = await ViewHost(browser.page, browser.pages_url).attach()
        await host.show(fixture_document({"unsafe": True}), result=result)
        await host.settle("the fixture's render", "document.body.dataset.rendered === '1'")
        await wait_until(lambda: len(browser.page.csp_violations) >= 2, "the CSP violation reports")
        return await host.in_view(INJECTED)

    injected = browser.run(body())
    problems = browser.page.problems()
    browser.page.clear_problems()
    assert injected["img"] == 1 and injected["svg"] == 1
    assert problems["csp_violations"]


def test_a_view_call_goes_through_the_host_to_the_server_and_the_simulator(browser, server, sim):
    target = next(c for c in sim.items("containers") if c["state"] == "running")
    call = {"name": "arcane_execute_action", "arguments": {"action": "container.restart",
                                                           "params": {"containerId": target["id"]}}}

    async def body(host, _):
        await host.show(fixture_document({"call": call}), result={"content": [{"type": "text", "text": "-"}]})
        sim.clear_requests()
        await host.in_view("document.getElementById('act').click()")
        await host.settle("the call's result", "document.body.dataset.rendered === '2'")
        return host

    host = scenario(browser, server, body)
    assert host.view_calls[0]["params"] == call
    assert host.view_calls[0]["result"].get("isError") is not True
    assert any(r.method == "POST" and target["id"] in r.path and r.path.endswith("/restart") for r in sim.requests())


INJECTED = ("({img: document.querySelectorAll('img').length, svg: document.querySelectorAll('svg').length, "
            "script: document.querySelectorAll('script').length, iframe: document.querySelectorAll('iframe').length})")
