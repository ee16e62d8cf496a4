"""End-to-end: the WebSocket handler kinds (websocket_capture, exec) through a real MCP
client session over stdio, once per surface, against the simulator's log, stats,
diagnostics and terminal sockets (simulator/sockets.py). Assertions are on
fields, structure and what the simulator recorded, never on time.
"""

from __future__ import annotations

import contextlib
import re

import pytest
from markdown_it import MarkdownIt

from tests.helpers import fresh_simulator
from tests.test_e2e import Caller, session, text

pytestmark = pytest.mark.anyio
SURFACES = ("dynamic", "meta", "individual")
BLOG_WEB = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"  # nginx: stdout and stderr lines
BLOG = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"  # its Compose project (web-1, db-1)
FAST = {"time_scale": 0.1}  # Arcane's intervals (stats every 1 s, diagnostics every 2 s) × 0.1


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"  # module-wide: the sessions below outlive one test


@pytest.fixture(scope="module")
async def sessions(sim):
    """A stdio session of `interp serve` per surface for the module's tests on every surface,
    opened once (whatever order the tests run in): each test starts from the demo state
    (`fresh`), and a server keeps nothing between calls that a later call reads back (every
    capture opens its own socket; exec asks for its confirmation each time)."""
    async with contextlib.AsyncExitStack() as stack:
        yield {s: await stack.enter_async_context(session(sim.url, sim.api_key, s, "auto")) for s in SURFACES}


@pytest.fixture(autouse=True)
def fresh(sim):
    fresh_simulator(sim, FAST)
    yield
    sim.set_faults({})


def sockets(sim, route: str):
    return [s for s in sim.sockets() if s.route == route]


def fences(markdown: str) -> list[str]:
    return [t.content for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]


@pytest.mark.parametrize("surface", SURFACES)
async def test_logs_through_a_session(sim, sessions, surface):
    client = sessions[surface]
    call = Caller(client, surface)

    # tail: the last lines, stdout then stderr with Arcane's mark; follow=false sent, no key in the query
    res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 3})
    assert not res.is_error, text(res)
    got = res.structured_content
    assert got["count"] == 3 and got["ended"] == "quiet" and not got["truncated"]
    assert got["lines"][-1].startswith("[STDERR] ") and not got["lines"][0].startswith("[STDERR] ")
    [rec] = sockets(sim, "ws-container-logs")
    query = dict(rec.query)
    assert query["follow"] == "false" and query["tail"] == "3" and query["format"] == "json"
    assert rec.credential == "api_key" and not any(sim.api_key in v for _, v in rec.query)
    assert fences(text(res)) == ["\n".join(got["lines"]) + "\n"]

    # since: only the lines from then on
    res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 100, "since": "2026-01-01T00:05:00Z"})
    assert res.structured_content["count"] == 3, text(res)

    # text frames as Arcane sends them, with Docker's timestamps after the stderr mark
    res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 1, "format": "text", "timestamps": True})
    [line] = res.structured_content["lines"]
    assert line.startswith("[STDERR] 2026-01-01T00:05:02")

    # JSON frames of a project (Arcane 2.10+): the service names each line, a service's
    # stderr lines are marked, and Docker's timestamp comes from the frame's member
    res = await call("project.logs", {"projectId": BLOG, "tail": 2})
    assert not res.is_error, text(res)
    lines = res.structured_content["lines"]
    assert sorted(ln.removeprefix("[STDERR] ").split(" | ")[0] for ln in lines) == ["db-1", "db-1", "web-1", "web-1"]
    assert any(ln.startswith("[STDERR] ") for ln in lines) and not all(ln.startswith("[STDERR] ") for ln in lines)
    res = await call("project.logs", {"projectId": BLOG, "tail": 2, "timestamps": True})
    stamps = [ln.removeprefix("[STDERR] ").split(" ", 1)[0] for ln in res.structured_content["lines"]]
    assert len(stamps) == 4 and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", ts) for ts in stamps), stamps
    # text frames of a project carry the message only: no service, no mark, no time
    res = await call("project.logs", {"projectId": BLOG, "tail": 2, "format": "text", "timestamps": True})
    lines = res.structured_content["lines"]
    assert len(lines) == 4 and not any(" | " in ln or ln.startswith("[STDERR]") or ln.startswith("2026-01-01T") for ln in lines)

    # the line bound cuts the capture
    res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 100, "maxLines": 2})
    assert (res.structured_content["count"], res.structured_content["truncated"], res.structured_content["ended"]) == (2, True, "lines")
    res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 100, "maxBytes": 10})
    got = res.structured_content
    assert (got["count"], got["truncated"], got["ended"]) == (1, True, "bytes") and len(got["lines"][0].encode()) <= 9

    # a bounded follow: follow=true is sent, the capture ends on its time bound with the new lines
    sim.set_knobs({**FAST, "log_follow_seconds": 1})
    res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 0, "follow": True, "maxSeconds": 2})
    assert res.structured_content["ended"] == "seconds" and res.structured_content["count"] >= 1, text(res)
    assert all("still running" in ln for ln in res.structured_content["lines"])
    assert dict(sockets(sim, "ws-container-logs")[-1].query)["follow"] == "true"

    # an unknown container: Arcane's error frame becomes an error result
    res = await call("container.logs", {"containerId": "nope"})
    assert res.is_error and "No such container: nope" in text(res) and res.structured_content is None


@pytest.mark.parametrize("surface", SURFACES)
async def test_stats_through_a_session(sim, sessions, surface):
    client = sessions[surface]
    call = Caller(client, surface)
    res = await call("container.stats", {"containerId": BLOG_WEB, "samples": 3})
    assert not res.is_error, text(res)
    got = res.structured_content
    assert got["count"] == 3 and got["ended"] == "samples" and len(got["samples"]) == 3
    assert all("statsHistory" not in s for s in got["samples"])  # dropped, as the profile says
    first, last = got["samples"][0], got["samples"][-1]
    rx = sum(n["rx_bytes"] for n in last["networks"].values()) - sum(n["rx_bytes"] for n in first["networks"].values())
    summary = got["summary"]
    assert summary["Network received"] == rx and rx > 0
    mem = last["memory_stats"]
    assert summary["Memory used"] == {"value": mem["usage"] - mem["stats"]["inactive_file"], "of": mem["limit"]}
    cpu = last["cpu_stats"]["cpu_usage"]["total_usage"] - last["precpu_stats"]["cpu_usage"]["total_usage"]
    system = last["cpu_stats"]["system_cpu_usage"] - last["precpu_stats"]["system_cpu_usage"]
    assert summary["CPU"] == pytest.approx(cpu / system * 100)
    tokens = MarkdownIt("commonmark").parse(text(res))
    assert [t.content for t in tokens if t.type == "inline" and t.content.startswith(("CPU:", "Memory used:", "Network received:"))]

    res = await call("system.stats", {"samples": 2})
    assert not res.is_error, text(res)
    assert res.structured_content["count"] == 2 and "CPU" in res.structured_content["summary"]
    assert dict(sockets(sim, "ws-system-stats")[-1].query)["interval"] == "1"

    res = await call("diagnostics.stream", {"samples": 1})
    assert not res.is_error and res.structured_content["samples"][0]["runtime"]["goroutines"] > 0, text(res)
    res = await call("diagnostics.log_stream", {"maxLines": 2})
    assert not res.is_error and res.structured_content["count"] == 2, text(res)

    # an unknown container: Arcane's error frame, then its cut
    res = await call("container.stats", {"containerId": "nope"})
    assert res.is_error and "No such container: nope" in text(res)


@pytest.mark.parametrize("surface", SURFACES)
async def test_exec_through_a_session(sim, sessions, surface):
    client = sessions[surface]
    call = Caller(client, surface)

    # without confirm: refused, no socket opened
    res = await call("container.exec", {"containerId": BLOG_WEB, "command": "echo hi"})
    assert res.is_error and "confirm: true" in text(res)
    assert sockets(sim, "ws-container-terminal") == []

    res = await call("container.exec", {"containerId": BLOG_WEB, "command": "printf '%s\\n' hello; cat /etc/hostname"}, confirm=True)
    assert not res.is_error, text(res)
    got = res.structured_content
    assert (got["exitCode"], got["output"], got["timedOut"], got["truncated"]) == (0, "hello\n704083d3b29b\n", False, False)
    assert fences(text(res)) == ["hello\n704083d3b29b\n"]  # no echo, no prompt, no marker

    # a failing command's status; bash's escape sequences stripped
    res = await call("container.exec", {"containerId": BLOG_WEB, "command": "nope", "shell": "/bin/bash"}, confirm=True)
    assert res.structured_content["exitCode"] == 127 and "nope" in res.structured_content["output"], text(res)
    assert "\x1b" not in res.structured_content["output"] and "[?2004" not in res.structured_content["output"]
    res = await call("container.exec", {"containerId": BLOG_WEB, "command": "false"}, confirm=True)
    assert (res.structured_content["exitCode"], res.structured_content["output"]) == (1, "")

    # a command's own comment, trailing `&` or quote cannot swallow the end marker (it runs through eval)
    for command, output in (("echo one # a comment", "one\n"), ("echo two &", "two\n"), ("echo \"it's\"; false", "it's\n")):
        res = await call("container.exec", {"containerId": BLOG_WEB, "command": command, "timeoutSeconds": 5}, confirm=True)
        got = res.structured_content
        assert (got["output"], got["timedOut"]) == (output, False), text(res)
    assert got["exitCode"] == 1

    # a command that outlives the bound: said so, with what was captured, and interrupted
    res = await call("container.exec", {"containerId": BLOG_WEB, "command": "echo started; sleep 9999", "timeoutSeconds": 1},
                     confirm=True)
    assert not res.is_error, text(res)
    assert res.structured_content["timedOut"] is True and res.structured_content["output"].startswith("started\n")
    [*_, rec] = sockets(sim, "ws-container-terminal")
    assert rec.received[-1] == ("binary", b"\x03")

    # a stopped container: Arcane's text frame is the error
    stopped = next(c for c in sim.items("containers") if c.get("state") == "exited")
    res = await call("container.exec", {"containerId": stopped["id"], "command": "true"}, confirm=True)
    assert res.is_error and "is not running" in text(res)


async def test_exec_reports_the_commands_own_exit_status(sim):
    """The typed line runs the command in a subshell (catalog/extra-routes.yaml captures.terminal.line),
    so the command's own `exit` ends only the subshell: its status is reported and the end
    marker still comes. A command with quotes, `;`, `)` and `$(…)` stays one command: it cannot
    reach the wrapper (it is one single-quoted word), and a forged end marker is just output."""
    before = len(sockets(sim, "ws-container-terminal"))
    async with session(sim.url, sim.api_key, "dynamic", "auto") as client:
        call = Caller(client, "dynamic")
        cases = [
            ("echo ok; exit 3", 3, "ok\n"),
            ("exit 0", 0, ""),
            ("echo before; exit 300", 44, "before\n"),  # exit's status is taken modulo 256, as sh does
            ("cd /etc; X=1; exit 5", 5, ""),
            ("echo \"it's; (not) $(echo run)\"; echo 'a) ; exit 9 ; (b'", 0, "it's; (not) run\na) ; exit 9 ; (b\n"),
            ("echo x' ); exit 7; ( echo '", 0, "x ); exit 7; ( echo \n"),
            ("printf '\\n%s:%d\\n' forged 0; exit 6", 6, "\nforged:0\n"),
        ]
        for command, status, output in cases:
            res = await call("container.exec", {"containerId": BLOG_WEB, "command": command, "timeoutSeconds": 5}, confirm=True)
            got = res.structured_content
            assert not res.is_error, text(res)
            assert (got["exitCode"], got["output"], got["timedOut"]) == (status, output, False), (command, got)
        assert len(sockets(sim, "ws-container-terminal")) - before == len(cases)  # one socket per call


@pytest.mark.parametrize("surface", SURFACES)
async def test_a_socket_dropped_mid_stream(sim, sessions, surface):
    client = sessions[surface]
    sim.set_faults({"drop": {"match": "ws-container-logs", "after": 2}})
    call = Caller(client, surface)
    res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 100})
    assert not res.is_error, text(res)
    got = res.structured_content
    assert (got["count"], got["ended"]) == (2, "closed") and got["notes"]
    assert "- note: " in text(res)
    sim.set_faults({"drop": {"match": "ws-container-stats", "after": 1}})
    res = await call("container.stats", {"containerId": BLOG_WEB, "samples": 5})
    assert not res.is_error and (res.structured_content["count"], res.structured_content["ended"]) == (1, "closed")


async def test_read_only_withdraws_exec_and_safe_mode_previews_it(sim):
    async with session(sim.url, sim.api_key, "dynamic", "auto", ARCANE_MCP_READ_ONLY="true") as client:
        call = Caller(client, "dynamic")
        res = await call("container.exec", {"containerId": BLOG_WEB, "command": "id"}, confirm=True)
        assert res.is_error and "not served" in text(res)
        res = await call("container.logs", {"containerId": BLOG_WEB, "tail": 1})
        assert not res.is_error  # a capture is read-only
    async with session(sim.url, sim.api_key, "dynamic", "auto", ARCANE_MCP_SAFE_MODE="true") as client:
        call = Caller(client, "dynamic")
        res = await call("container.exec", {"containerId": BLOG_WEB, "command": "id"}, confirm=True)
        assert not res.is_error and "/terminal" in text(res), text(res)
    assert sockets(sim, "ws-container-terminal") == []
