"""The MCP Apps views in a real browser: headless Chromium (Debian's package; `make test`
installs it where missing) driven over the DevTools protocol (tests/browser/cdp.py), a test
host (tests/browser/host.py) holding each view in a sandboxed iframe and answering its
bridge through a real MCP client session to `interp serve --http` against the simulator,
with the default settings. Every test fails on a JavaScript exception, a console error, a
Content-Security-Policy violation or a dialog, in the host page or the view."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.browser.cdp import BrowserMissing, find_chromium, wait_until
from tests.browser.fixture import fixture_document
from tests.browser.harness import browser_thread
from tests.browser.host import VIEW_META_KEY, Elicitations, ViewHost, mcp_client
from tests.helpers import free_port, start_http_server
from tests.test_e2e import INTERP, http_server  # noqa: F401  (a module fixture)

pytestmark = pytest.mark.timeout(600)

SAMPLES = Path(__file__).resolve().parent / "data" / "views"
HOSTILE = '"><img src=x onerror=alert(1)><svg onload=alert(2)><script>alert(3)</script>' + "W" * 300


@pytest.fixture(scope="module")
def browser():
    with browser_thread() as runner:
        yield runner


@pytest.fixture(scope="module")
def server(http_server):  # noqa: F811  (test_e2e's module fixture, imported above)
    """`interp serve --http` with its defaults (dynamic surface) against the simulator (test_e2e's)."""
    return http_server


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


# what data inserted as markup would leave: elements of these kinds, an attribute naming an
# event handler, a javascript: URL (the views draw charts as SVG: counted, compared with
# the charts of the model)
INJECTED = ("(() => { const all = [...document.querySelectorAll('*')]; const n = s => document.querySelectorAll(s).length; "
            "return {img: n('img'), svg: n('svg'), script: n('script'), iframe: n('iframe'), object: n('object, embed'), "
            "handlers: all.filter(e => [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).length, "
            "urls: all.filter(e => [...e.attributes].some(a => /^\\s*javascript:/i.test(a.value))).length}; })()")


def _sample_names() -> list[str]:
    return sorted(p.stem for p in SAMPLES.glob("*.json")) if SAMPLES.is_dir() else ["(none)"]


@pytest.mark.parametrize("name", _sample_names())
def test_every_sample_model_renders_safely_in_both_themes(browser, server, name):
    path = SAMPLES / f"{name}.json"
    assert path.is_file(), f"no sample view models under {SAMPLES} (tests/data/views/*.json)"
    model = json.loads(path.read_text(encoding="utf-8"))
    uri = f"ui://arcane-mcp/view/{model.get('view')}.html"

    async def body(host, _):
        out = {}
        try:
            html, _content = await host.read_view(uri)
        except Exception:  # a sample of a view the server has no document for: the router shows it
            html, _content = await host.read_view("ui://arcane-mcp/view/router.html")
        for theme in ("light", "dark"):
            await host.show(html, theme=theme, result=sample_result(model))
            await host.settle("the view's first render", "document.body && document.body.innerText.length > 0")
            out[theme] = {"injected": await host.in_view(INJECTED), "width": await host.in_view(WIDTH),
                          "background": await host.in_view(BACKGROUND)}
        return out

    out = scenario(browser, server, body)
    for theme, seen in out.items():
        charts = len(model.get("charts") or []) if model.get("widget") == "chart" else 0
        assert seen["injected"] == {**NOTHING_INJECTED, "svg": charts}, theme
        assert seen["width"]["scroll"] <= seen["width"]["client"] + 1, (theme, seen["width"])
    assert out["light"]["background"] != out["dark"]["background"]


NOTHING_INJECTED = {"img": 0, "svg": 0, "script": 2, "iframe": 0, "object": 0, "handlers": 0, "urls": 0}  # 2: the view's own
WIDTH = "({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth})"
BACKGROUND = "getComputedStyle(document.body).backgroundColor + '|' + getComputedStyle(document.documentElement).backgroundColor"


# -- the real views, through the real server ------------------------------------------------

EXECUTE = "arcane_execute_action"  # the default (dynamic) surface's tool: it names the routing view
ROWS = "[...document.querySelectorAll('table tbody tr')].map(r => r.querySelector('td').textContent)"
STATUS = "(() => { const s = document.querySelector('.status'); return s && s.className.includes('%s') && s.textContent; })()"


def listed_names(result: dict) -> list[str]:
    items = result["structuredContent"]["items"]
    return [item["name"] if "name" in item else item["names"][0] for item in items]


async def _containers(host, theme: str = "light") -> dict:
    result = await host.call_and_show(EXECUTE, {"action": "container.list", "params": {}}, theme=theme)
    await host.settle("the container table", "document.querySelectorAll('table tbody tr').length > 0")
    return result


def _click(verb: str, name: str) -> str:
    """Open the row's action menu and press the action (as a person does); buttons are found
    by their accessible labels."""
    return ("(() => { const b = [...document.querySelectorAll('button')]; "
            f"b.find(x => x.getAttribute('aria-label') === {json.dumps('Actions for ' + name)}).click(); "
            f"b.find(x => (x.getAttribute('aria-label') || '').startsWith({json.dumps(verb + ' ' + name)})).click(); "
            "return true; })()")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_container_table_renders_the_simulators_containers(browser, server, theme):
    async def body(host, _):
        result = await _containers(host, theme)
        return result, await host.in_view(ROWS), await host.in_view(BACKGROUND)

    result, shown, background = scenario(browser, server, body)
    assert not result.get("isError")
    assert result["_meta"][VIEW_META_KEY]["widget"] == "table"
    assert sorted(shown) == sorted(listed_names(result))
    assert len(shown) == len(result["structuredContent"]["items"])
    dark = background.startswith("rgb(") and sum(map(int, background[4:].split(")")[0].split(","))) < 3 * 96
    assert dark == (theme == "dark"), background


def test_a_state_filter_narrows_the_table(browser, server, sim):
    async def body(host, _):
        result = await _containers(host)
        before = await host.in_view(ROWS)
        await host.in_view("(() => { const s = [...document.querySelectorAll('label')].find(l => "
                           "l.textContent.startsWith('State')).querySelector('select'); s.value = 'running'; "
                           "s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()")
        after = await host.settle("the filtered table", f"(() => {{ const r = {ROWS}; return r.length < {len(before)} && r; }})()")
        return result, before, after

    result, before, after = scenario(browser, server, body)
    running = {n for n, item in zip(listed_names(result), result["structuredContent"]["items"], strict=True)
               if item.get("state") == "running"}
    assert running and set(after) == running and len(after) < len(before)


def test_a_restart_from_a_row_reaches_the_simulator(browser, server, sim):
    target = next(c for c in sim.items("containers") if c["state"] == "exited")
    name = target["names"][0]

    async def body(host, _):
        await _containers(host)
        sim.clear_requests()
        await host.in_view(_click("Restart", name))
        done = await host.settle("the restart's outcome", STATUS % "ok")
        # then the view re-runs its refresh (the contract): the table again, from the server
        await wait_until(lambda: [c for c in host.view_calls if c["params"]["arguments"].get("action") == "container.list"
                                  and "result" in c], "the view's refresh after the action")
        await host.settle("the refreshed table", "document.getElementById('app').dataset.widget === 'table'")
        # read back through the server, as the host's own call
        after = await host.client.call_tool(EXECUTE, {"action": "container.get", "params": {"containerId": target["id"]}})
        return host, done, after.structured_content

    host, done, after = scenario(browser, server, body)
    calls = [c for c in host.view_calls if c["params"]["arguments"].get("action") == "container.restart"]
    assert len(calls) == 1 and not calls[0]["result"].get("isError") and done
    assert calls[0]["params"]["arguments"]["params"] == {"containerId": target["id"]}
    assert [r.path for r in sim.requests() if r.method == "POST"] == [f"/api/environments/0/containers/{target['id']}/restart"]
    state = after["state"]
    assert (state["status"] if isinstance(state, dict) else state) == "running"


@pytest.mark.parametrize("answer", ["decline", "accept"])
def test_a_delete_from_a_row_asks_and_a_decline_is_shown_as_a_refusal(browser, server, sim, answer):
    target = next(c for c in sim.items("containers") if c["state"] == "exited")
    name = target["names"][0]

    async def body(host, elicit):
        await _containers(host)
        shown = await host.in_view(ROWS)
        assert name in shown, (name, shown)
        await host.in_view(_click("Delete", name))
        outcome = await host.settle("the delete's outcome", f"{STATUS % 'err'} || {STATUS % 'ok'}")
        return host, elicit, outcome, await host.in_view("document.querySelector('.status').className")

    host, elicit, outcome, status_class = scenario(browser, server, body, answer=answer)
    assert len(elicit.asked) == 1  # the person was asked, once
    deletes = [c for c in host.view_calls if c["params"]["arguments"].get("action") == "container.delete"]
    assert len(deletes) == 1
    still_there = any(c["id"] == target["id"] for c in sim.items("containers"))
    if answer == "decline":
        assert deletes[0].get("error") or deletes[0]["result"].get("isError")
        assert still_there and "err" in status_class.split()
    else:
        assert not deletes[0].get("error") and not deletes[0]["result"].get("isError")
        assert not still_there and "ok" in status_class.split()


def test_the_log_view_marks_stderr_lines(browser, server, sim):
    sim.append_log("blog-web-1", "only on stderr: disk full", stream="stderr")
    sim.append_log("blog-web-1", "only on stdout: all good", stream="stdout")

    async def body(host, _):
        result = await host.call_and_show(EXECUTE, {"action": "container.logs",
                                                    "params": {"containerId": "blog-web-1", "tail": 50}})
        await host.settle("the log lines", "document.querySelectorAll('.log .ln').length > 0")
        lines = await host.in_view("[...document.querySelectorAll('.log .ln')].map(l => ({text: "
                                   "l.querySelector('.tx').textContent, err: l.classList.contains('err'), "
                                   "mark: l.querySelector('.mk').textContent}))")
        region = await host.in_view("(() => { const r = document.querySelector('[role=region]'); "
                                    "return r && r.getAttribute('aria-label'); })()")
        return result, lines, region

    result, lines, region = scenario(browser, server, body)
    model = result["_meta"][VIEW_META_KEY]
    assert model["widget"] == "logs" and region
    assert [line["text"] for line in lines] == [line["text"] for line in model["lines"]]
    for shown, line in zip(lines, model["lines"], strict=True):
        assert shown["err"] == (line["stream"] == "stderr"), shown
    err_marks = {line["mark"] for line in lines if line["err"]}
    out_marks = {line["mark"] for line in lines if not line["err"]}
    assert err_marks and out_marks and err_marks.isdisjoint(out_marks)  # marked by text, not colour alone
    assert next(x for x in lines if x["text"].endswith("disk full"))["err"]
    assert not next(x for x in lines if x["text"].endswith("all good"))["err"]


def test_a_hostile_container_name_renders_as_text(browser, server, sim):
    target = next(c for c in sim.items("containers") if c["state"] == "running")
    sim.change_behind_arcane("containers", target["id"], {"names": ["/" + HOSTILE]})

    async def body(host, _):
        await _containers(host)
        shown = await host.in_view(ROWS)
        return shown, await host.in_view(INJECTED), await host.in_view(WIDTH), await host.in_view(
            "document.querySelector('.tw') ? document.querySelector('.tw').getBoundingClientRect().width : -1")

    shown, injected, width, table_box = scenario(browser, server, body)
    # the value as text (a long one clipped by the view, its markup shown as characters)
    assert any(row.startswith("/" + HOSTILE[:HOSTILE.index("W")]) for row in shown), shown
    assert injected == NOTHING_INJECTED
    assert width["scroll"] <= width["client"] + 1, width
    assert 0 < table_box <= 760




def test_a_dialog_is_caught(browser):
    """The negative control of "no dialog": the host's sandbox has no allow-modals, so a
    view's alert() is refused; the refusal is reported, and a test would fail on it."""
    async def body():
        host = await ViewHost(browser.page, browser.pages_url).attach()
        await host.show(fixture_document({"alert": True}), result={"content": [{"type": "text", "text": "-"}]})
        await host.in_view("document.getElementById('act').click()")
        await wait_until(lambda: browser.page.problems(), "the refused dialog's report")

    browser.run(body())
    problems = browser.page.problems()
    browser.page.clear_problems()
    assert problems["dialogs"], problems


def test_a_resource_read_goes_through_the_host_to_the_server(browser, server):
    async def body(host, _):
        await host.show(fixture_document({"read": "ui://arcane-mcp/view/router.html"}),
                        result={"content": [{"type": "text", "text": "-"}]})
        await host.in_view("document.getElementById('act').click()")
        await host.settle("the read's answer", "document.body.dataset.rendered === '2'")
        return await host.in_view("document.getElementById('out').textContent")

    assert scenario(browser, server, body) == "text/html;profile=mcp-app"


def test_the_view_follows_the_hosts_theme_change(browser, server):
    async def body(host, _):
        await _containers(host, "light")
        before = await host.in_view(BACKGROUND)
        await host.set_theme("dark")
        after = await wait_until(lambda: _changed(host, before), "the view's dark background")
        init = host.init_params
        pong = await host.request("ping", {})
        teardown = await host.request("ui/resource-teardown", {"reason": "the test ends"})
        return before, after, init, host.sizes, pong, teardown

    before, after, init, sizes, pong, teardown = scenario(browser, server, body)
    assert before != after
    assert pong["result"] == {} and teardown["result"] == {}
    # the view's side of the handshake, as the specification names it
    assert init["protocolVersion"] and init["appInfo"]["name"] and "appCapabilities" in init
    assert sizes and all(s["width"] > 0 and s["height"] > 0 for s in sizes)


async def _changed(host, before: str):
    now = await host.in_view(BACKGROUND)
    return now if now != before else None


@pytest.mark.parametrize("value", ["", "/nonexistent/chromium", "chromium\x01\n--evil", "x" * 5000])
def test_a_chromium_that_is_not_there_fails_clearly(monkeypatch, value):
    monkeypatch.setenv("CHROMIUM", value)
    if value == "":  # empty is unset: chromium is looked up on PATH
        monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BrowserMissing) as err:
        find_chromium()
    assert "CHROMIUM" in str(err.value) or "make browser" in str(err.value)


def test_the_table_is_usable_by_keyboard_and_labelled(browser, server):
    async def body(host, _):
        await _containers(host)
        page = host.page
        labels = await host.in_view(A11Y)
        await host.in_view("document.querySelector('th[aria-sort] button').focus()")
        first = await host.in_view("document.querySelector('th[aria-sort] button').closest('th').getAttribute('aria-sort')")
        await page.press("Enter")
        flipped = await host.settle("the sort to flip", "(() => { const s = document.querySelector('th[aria-sort] button')"
                                    f".closest('th').getAttribute('aria-sort'); return s !== {json.dumps(first)} && s; }})()")
        await host.in_view("document.querySelector('input[type=search]').focus()")
        await page.type_text("worker-0")
        rows = await host.settle("the search to narrow the rows",
                                 f"(() => {{ const r = {ROWS}; return r.length && r.every(n => n.includes('worker-0')) && r; }})()")
        return labels, first, flipped, rows

    labels, first, flipped, rows = scenario(browser, server, body)
    assert labels == {"caption": True, "unnamed_controls": [], "sortable_without_aria_sort": 0}
    assert {first, flipped} == {"ascending", "descending"}
    assert rows and all("worker-0" in r for r in rows)


# every control has an accessible name (its text, aria-label, or a label around it); the
# table has a caption; a sortable header (a button in a th) says how it is sorted
A11Y = ("(() => { const named = e => (e.getAttribute('aria-label') || e.textContent || '').trim() || e.closest('label'); "
        "return {caption: Boolean(document.querySelector('table caption')), "
        "unnamed_controls: [...document.querySelectorAll('button, input, select')].filter(e => !named(e)).map(e => e.outerHTML.slice(0, 80)), "
        "sortable_without_aria_sort: [...document.querySelectorAll('th button')].filter(b => !b.closest('th').hasAttribute('aria-sort')).length}; })()")


def test_the_view_ignores_a_message_that_is_not_from_its_host(browser, server):
    """A tool-result posted by anyone but the parent (here the view's own window, as a
    nested frame or another tab could) is not drawn."""
    forged = {"jsonrpc": "2.0", "method": "ui/notifications/tool-result",
              "params": {"content": [{"type": "text", "text": "forged"}],
                         "_meta": {VIEW_META_KEY: {"version": 1, "view": "x", "widget": "detail", "title": "FORGED",
                                                   "fields": [], "sections": [], "actions": []}}}}

    async def body(host, _):
        await _containers(host)
        renders = await host.in_view("document.getElementById('app').dataset.renders")
        await host.in_view(f"window.postMessage({json.dumps(forged)}, '*')")
        await host.in_view("new Promise(r => setTimeout(r, 300))")
        return renders, await host.in_view("document.getElementById('app').dataset.renders"), await host.in_view(
            "document.body.innerText.includes('FORGED')")

    before, after, shown = scenario(browser, server, body)
    assert before == after and shown is False


SURFACE_CALLS = {"meta": ("arcane_container", {"action": "list", "params": {}}, "containers"),
                 "individual": ("arcane_container_list", {}, "containers")}


@pytest.fixture(scope="module", params=sorted(SURFACE_CALLS))
def surface_server(request, sim):
    """The same server on the other two surfaces (their tools name the views their own way)."""
    port = free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_URL": sim.url, "ARCANE_API_KEY": sim.api_key,
           "ARCANE_MCP_AUDIT_LOG": "off", "ARCANE_MCP_SURFACE": request.param}
    proc = start_http_server([INTERP, "serve", "--http", "--port", str(port)], env, port)
    try:
        yield request.param, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_container_table_and_a_row_restart_on_the_other_surfaces(browser, surface_server, sim):
    surface, server = surface_server
    tool, arguments, view = SURFACE_CALLS[surface]
    target = next(c for c in sim.items("containers") if c["state"] == "exited")

    async def body(host, _):
        uri = await host.view_uri(tool)
        result = await host.call_and_show(tool, arguments)
        await host.settle("the container table", "document.querySelectorAll('table tbody tr').length > 0")
        sim.clear_requests()
        await host.in_view(_click("Restart", target["names"][0]))
        await host.settle("the restart's outcome", STATUS % "ok")
        return uri, result, host.view_calls

    uri, result, calls = scenario(browser, server, body)
    assert uri == ("ui://arcane-mcp/view/router.html" if surface == "meta" else f"ui://arcane-mcp/view/{view}.html")
    assert result["_meta"][VIEW_META_KEY]["view"] == view
    restart = next(c for c in calls if "restart" in json.dumps(c["params"]))
    assert restart["params"]["name"] == ("arcane_container" if surface == "meta" else "arcane_container_restart")
    assert not restart["result"].get("isError")
    assert [r.path for r in sim.requests() if r.method == "POST"] == [f"/api/environments/0/containers/{target['id']}/restart"]
