"""interpreter/call/wsclient.py without a socket: frames to lines, samples to a summary, terminal
output to a command's output and status, the WebSocket URL."""

from __future__ import annotations

import json

import pytest

from interpreter.call.request import ArcaneClient, PreparedRequest
from interpreter.call.wsclient import Terminal, frame_lines, summarise, terminal_text, ws_url
from interpreter.config import Settings

pytestmark = pytest.mark.anyio


def _capture(catalog, name: str):
    return next(r.capture for r in catalog.inventory.extra_routes if r.capture is not None and r.capture.name == name)


def test_json_frames_become_lines_with_the_marks(catalog):
    logs = _capture(catalog, "logs")
    frame = json.dumps({"seq": 1, "level": "stderr", "message": "panic: boom", "timestamp": "2026-01-01T00:00:01Z", "service": "web-1"})
    assert frame_lines(logs, frame, {}) == (["[STDERR] web-1 | panic: boom"], None)
    assert frame_lines(logs, frame, {"timestamps": True}) == (["[STDERR] 2026-01-01T00:00:01Z web-1 | panic: boom"], None)
    batch = json.dumps([{"seq": 1, "level": "stdout", "message": "a"}, {"seq": 2, "level": "stdout", "message": "b"}])
    assert frame_lines(logs, batch, {}) == (["a", "b"], None)
    error = json.dumps({"seq": 1, "level": "error", "message": "Failed to stream project logs: project not found", "service": "arcane"})
    assert frame_lines(logs, error, {}) == ([], "Failed to stream project logs: project not found")
    assert frame_lines(logs, "Failed to stream container logs: x", {}) == ([], "Failed to stream container logs: x")
    assert frame_lines(logs, "{not json", {}) == (["{not json"], None)


def test_the_summary_figures(catalog):
    stats = _capture(catalog, "container_stats")

    def frame(total, pretotal, system, presystem, rx, read):
        return {"cpu_stats": {"cpu_usage": {"total_usage": total}, "system_cpu_usage": system},
                "precpu_stats": {"cpu_usage": {"total_usage": pretotal}, "system_cpu_usage": presystem},
                "memory_stats": {"usage": 300, "limit": 1000, "stats": {"inactive_file": 100}},
                "networks": {"eth0": {"rx_bytes": rx, "tx_bytes": 0}, "eth1": {"rx_bytes": rx, "tx_bytes": 0}},
                "blkio_stats": {"io_service_bytes_recursive": [{"op": "read", "value": read}, {"op": "write", "value": 0}]}}

    figures, lines = summarise(stats, [frame(10, 0, 100, 0, 1000, 5), frame(30, 10, 300, 100, 1500, 9)])
    assert figures["CPU"] == pytest.approx(10.0)
    assert figures["Memory used"] == {"value": 200, "of": 1000}
    assert figures["Network received"] == 1000 and figures["Block read"] == 4
    assert figures["Processes"] is None  # not in the frames: no line for it
    assert len(lines) == len(stats.summary) - 1


def test_terminal_output_between_the_markers():
    class Cap:
        begin, end = "{nonce}:begin", "{nonce}:"

    term = Terminal(Cap, "m1", 1000)
    echo = "printf '%s:begin\\n' m1; ls ; printf '\\n%s:%d\\n' m1 $?\r\n"
    term.feed(b"\x1b[?2004hroot@web:/# " + echo.encode())
    assert not term.done
    term.feed(b"\x1b[?2004l\rm1:begin\r\n\x1b[01;34mbin\x1b[0m  etc\r\n10%\r50%\r100%\r\n\r\nm1:2\r\nroot@web:/# ")
    assert term.done
    assert term.result() == (2, "bin  etc\n100%\n", False)
    assert terminal_text("a\r\nb\x1b]0;title\x07c\r\n") == "a\nbc\n"


def test_a_terminal_without_the_end_marker_has_no_status():
    class Cap:
        begin, end = "{nonce}:begin", "{nonce}:"

    term = Terminal(Cap, "m2", 4)
    term.feed(b"m2:begin\r\nstarted\r\n")
    assert term.result() == (None, "star", True)


def test_the_socket_url_follows_arcane_url_and_carries_no_credential():
    req = PreparedRequest("GET", "/environments/0/ws/containers/x/logs", query=[("follow", "false")])
    for base, want in (("https://arcane.example/", "wss://arcane.example/api"), ("http://127.0.0.1:3552", "ws://127.0.0.1:3552/api")):
        client = ArcaneClient(Settings(arcane_url=base.rstrip("/"), api_key="arc_secret_key", audit_log="off"))
        url = ws_url(client, req)
        assert url == want + "/environments/0/ws/containers/x/logs?follow=false" and "arc_secret_key" not in url


async def test_the_confirmation_names_the_command(catalog):
    from interpreter.call.dispatch import Dispatcher
    from interpreter.front.call_records import AuditLog

    d = Dispatcher(catalog, Settings(audit_log="off"), None, AuditLog("off"))
    question = await d.question(catalog.actions["container.exec"], {"environmentId": "0", "containerId": "web", "command": "rm -rf /tmp/x"})
    assert "rm -rf /tmp/x" in question and "web" in question


class _SlowSocket:
    """Frames that come after a delay each (a remote agent, a large tail), then silence."""

    def __init__(self, delays_and_frames):
        self.queue = list(delays_and_frames)

    async def recv(self):
        import asyncio

        if not self.queue:
            await asyncio.sleep(3600)
        delay, frame = self.queue.pop(0)
        await asyncio.sleep(delay)
        return frame


def _frame(n: int, message: str) -> str:
    return json.dumps({"seq": n, "level": "stdout", "message": message, "timestamp": "2026-01-01T00:00:01Z"})


async def test_a_slow_first_frame_within_the_bound_is_captured(catalog):
    from interpreter.call.wsclient import capture_lines

    logs = _capture(catalog, "logs")
    conn = _SlowSocket([(0.6, _frame(1, "first")), (0.0, _frame(2, "second"))])
    got = await capture_lines(conn, logs, {"lines": 10, "bytes": 4096, "seconds": 10}, {}, first_frame=2.0)
    assert (got["lines"], got["frames"], got["ended"]) == (["first", "second"], 2, "quiet")
    assert "firstFrameSeconds" not in got


async def test_no_first_frame_is_reported_as_such_not_as_an_empty_log(catalog):
    from interpreter.call.wsclient import _ended, capture_lines

    logs = _capture(catalog, "logs")
    conn = _SlowSocket([(0.6, _frame(1, "too late"))])
    bounds = {"lines": 10, "bytes": 4096, "seconds": 10}
    got = await capture_lines(conn, logs, bounds, {}, first_frame=0.2)
    assert (got["lines"], got["count"], got["frames"], got["ended"], got["firstFrameSeconds"]) == ([], 0, 0, "no_frame", 0.2)
    said = _ended(got["ended"], logs, bounds, got["firstFrameSeconds"])
    assert "0.2s" in said and "all were read" not in said
    # the seconds bound still holds: a first-frame wait longer than it ends with it
    got = await capture_lines(_SlowSocket([]), logs, {**bounds, "seconds": 0.3}, {}, first_frame=5.0)
    assert (got["ended"], got["frames"], got["firstFrameSeconds"]) == ("no_frame", 0, 0.3)
    # a follow reads until its time bound: silence there is no missing frame
    got = await capture_lines(_SlowSocket([]), logs, {**bounds, "seconds": 0.3}, {"follow": True}, first_frame=0.1)
    assert (got["ended"], got["frames"]) == ("seconds", 0) and "firstFrameSeconds" not in got


def test_the_first_frame_wait_is_a_setting():
    from interpreter.config import SETTINGS, load_settings

    row = next(s for s in SETTINGS if s.attr == "log_first_frame")
    assert row.env == "ARCANE_MCP_LOG_FIRST_FRAME" and row.default == Settings().log_first_frame == 10.0
    assert load_settings({"ARCANE_MCP_LOG_FIRST_FRAME": "30s"}).log_first_frame == 30.0
