"""Operation streams (interpreter/call/stream.py) with the catalog's declared frames: how log
lines become progress messages, and the rate-limited reporter."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreter.call.stream import Reporter, StreamState, read_line
from tests.helpers import examples

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def rules(catalog):
    return catalog.conventions.streams


# What Arcane's streams really carry (docker CLI text through NewLogLineWriter) and the
# message each becomes.
LINES = [
    ("a2318d6c47ec: Pulling fs layer", "layer a2318d6c47ec: Pulling fs layer"),
    ("a2318d6c47ec: Pull complete", "layer a2318d6c47ec: Pull complete"),
    ("Container blog-web-1 Started", "Container blog-web-1: Started"),
    ("Network blog_default  Created", "Network blog_default: Created"),
    ("web Pulled", "service web: Pulled"),
    ("#5 [web 2/3] RUN npm ci", "build step web 2/3: RUN npm ci"),
    ("a2318d6c47ec: Downloading [=====>      ]  12.5MB/50MB", "layer a2318d6c47ec: Downloading [=====> ] 12.5MB/50MB (25%)"),
    ("#7 sha256:9f2a 41% done", "#7 sha256:9f2a 41% done"),
    ("Status: Downloaded newer image for nginx:1.27", "Status: Downloaded newer image for nginx:1.27"),
]


@pytest.mark.parametrize("line,message", LINES)
def test_messages_come_from_the_log_text(rules, line, message):
    assert rules.message(line) == message


def test_percentages(rules):
    assert rules.percent_of("Downloading 3.1MiB/12.4MiB") == pytest.approx(25.0, abs=0.1)
    assert rules.percent_of("extracting 1.5 GB / 3 GB") == pytest.approx(50.0)
    assert rules.percent_of("42% done") == 42.0
    assert rules.percent_of("Pull complete") is None


def test_messages_are_clean_and_short(rules):
    message = rules.message("a2318d6c47ec: \x1b[31mevil\x07 " + "x" * 500)
    assert "\x1b" not in message and "\x07" not in message
    assert len(message) <= rules.message_max


def test_frames_as_declared(rules):
    assert rules.activity_of({"type": "activity", "activityId": "a-1"}) == "a-1"
    assert rules.activity_of({"activityId": "a-2"}) == "a-2"  # the fallback WriteStartedLine writes
    assert rules.text_of({"log": "Container x Started"}) == "Container x Started"
    assert rules.text_of({"log": "   "}) is None  # Arcane's writer skips blank lines too
    assert rules.error_of({"error": "boom"}) == "boom"
    assert rules.error_of({"errorDetail": {"message": "unauthorized"}}) == "unauthorized"
    assert rules.is_done({"done": True}) and not rules.is_done({"done": "yes"})
    assert rules.follow_action == "activity.get" and rules.follow_argument == "activityId"


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


async def never(delay: float) -> None:
    """A sleep that does not end: the held line waits for the next line or the end."""
    await asyncio.Event().wait()


async def test_reporter_rate_limits_and_sends_the_last_line(rules):
    sent = []

    async def send(value, total, message):
        sent.append((value, message))

    clock = Clock()
    rep = Reporter(send, rules, clock, never)
    for number, (t, line) in enumerate([(0.0, "a: one"), (0.05, "a: two"), (0.1, "a: three"),
                                        (rules.min_interval + 0.01, "a: four"), (rules.min_interval + 0.02, "a: five")], 1):
        clock.t = t
        await rep.line(number, line)
    assert [v for v, _ in sent] == [1.0, 4.0]  # two and three were held, then replaced
    await rep.finish()
    assert sent[-1] == (5.0, "a: five")  # the stream's last state always reaches the client
    assert [v for v, _ in sent] == sorted({v for v, _ in sent})


async def test_a_held_line_goes_out_while_the_stream_is_silent(rules):
    """A long layer: the line held back by the rate limit is sent once the interval has
    passed, without waiting for the next line (which may take minutes)."""
    sent, clock = [], Clock()
    released = asyncio.Event()

    async def send(value, total, message):
        sent.append((value, message))

    async def sleep(delay):
        clock.t += delay  # the interval passes, and nothing else arrives
        released.set()

    rep = Reporter(send, rules, clock, sleep)
    await rep.line(1, "a2318d6c47ec: Pulling fs layer")
    await rep.line(2, "a2318d6c47ec: Downloading 1MB/90MB")
    assert sent == [(1.0, "layer a2318d6c47ec: Pulling fs layer")]
    await asyncio.wait_for(released.wait(), 5)
    await asyncio.sleep(0)
    assert sent[-1] == (2.0, "layer a2318d6c47ec: Downloading 1MB/90MB (1%)")
    await rep.finish()  # nothing held any more: nothing sent twice
    assert len(sent) == 2


async def test_close_cancels_a_pending_release(rules):
    sent = []

    async def send(value, total, message):
        sent.append(value)

    rep = Reporter(send, rules, Clock(), never)
    await rep.line(1, "x")
    await rep.line(2, "y")
    rep.close()  # the deadline stopped the reading
    await asyncio.sleep(0)
    assert sent == [1.0] and rep._timer is None


@settings(max_examples=examples(150))
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=2), st.text(min_size=1, max_size=40).filter(str.strip)),
                min_size=1, max_size=40))
def test_reporter_properties(rules, events):
    """Whatever the timing: values strictly grow, at most one notification per interval
    until the end, and the last line is the last message."""
    sent = []

    async def send(value, total, message):
        sent.append((value, clock.t, message))

    clock = Clock()
    rep = Reporter(send, rules, clock, never)

    async def run():
        t = 0.0
        for number, (gap, line) in enumerate(events, 1):
            t += gap
            clock.t = t
            await rep.line(number, line)
        await rep.finish()

    asyncio.run(run())
    values = [v for v, _, _ in sent]
    assert values == sorted(set(values))
    before_end = sent[:-1]
    assert all(b[1] - a[1] >= rules.min_interval for a, b in zip(before_end, before_end[1:], strict=False))  # consecutive pairs: one shorter
    assert sent[-1][0] == float(len(events)) and sent[-1][2] == rules.message(events[-1][1])


async def test_read_line_keeps_the_last_lines_and_counts_what_it_cannot_read(rules):
    state, rep = StreamState(), Reporter(None, rules)
    await read_line(json.dumps({"type": "activity", "activityId": "x"}).encode(), state, rules, rep)
    for i in range(rules.keep_lines + 5):
        await read_line(json.dumps({"log": f"line {i}"}).encode(), state, rules, rep)
    await read_line(b"{not json", state, rules, rep)
    await read_line(b"[1, 2]", state, rules, rep)
    await read_line(b"   ", state, rules, rep)
    assert state.activity == "x" and state.malformed == 2
    assert state.lines == rules.keep_lines + 8
    assert state.last == [f"line {i}" for i in range(5, rules.keep_lines + 5)]
    assert rules.structured(state)["status"] == "incomplete"


# ---------------------------------------------------------------- framings (framing.py)
# The same operation stream in each framing catalog/conventions.yaml `framings` declares,
# through the dispatcher; and the event-stream decoder's bounds, one adversary each.

from interpreter.call.framing import EventDecoder, LineDecoder, event_as_frame  # noqa: E402
from interpreter.errors import ArcaneProtocolError  # noqa: E402
from tests.helpers import make_dispatcher  # noqa: E402

PULL = [{"type": "activity", "activityId": "act-7"}, {"log": "a2318d6c47ec: Pull complete"},
        {"log": "Status: Downloaded newer image for nginx:1.27"}, {"done": True}]
SSE_TYPE = "text/event-stream; charset=utf-8"


def as_sse(frames, eol="\n", event=None) -> bytes:
    head = f"event: {event}{eol}" if event else ""
    return "".join(f"{head}data: {json.dumps(f)}{eol}{eol}" for f in frames).encode()


async def pull(catalog, body: bytes, ctype: str, cap: int | None = None):
    import httpx

    from interpreter.call.dispatch import Call

    kw = {"max_download_bytes": cap} if cap else {}
    d, rec = make_dispatcher(catalog, lambda r: httpx.Response(200, headers={"content-type": ctype}, content=body), **kw)
    try:
        return await d.dispatch(Call("image.pull", {"imageName": "nginx:1.27"}, False))
    finally:
        await d.client.aclose()


@pytest.mark.parametrize("ctype,body", [
    ("application/x-json-stream", b"".join(json.dumps(f).encode() + b"\n" for f in PULL)),
    ("application/x-json-stream", b"".join(json.dumps(f).encode() + b"\r\n" for f in PULL)),
    (SSE_TYPE, as_sse(PULL)),
    (SSE_TYPE, as_sse(PULL, "\r\n")),
    (SSE_TYPE, as_sse(PULL, "\r")),
    ("TEXT/Event-Stream", b": opened\n\nretry: 3000\nid: 1\n" + as_sse(PULL[:1]) + b": ping\n\n" + as_sse(PULL[1:])),
])
async def test_every_framing_reads_the_same_pull(catalog, ctype, body):
    res = await pull(catalog, body, ctype)
    assert not res.is_error, res.text
    s = res.structured
    assert (s["status"], s["activityId"], s["lines"], s["errors"]) == ("done", "act-7", 4, [])
    assert s["lastLines"][-1] == "Status: Downloaded newer image for nginx:1.27" and "malformedLines" not in s


async def test_named_events_without_json_make_their_declared_frames(catalog):
    body = (b"event: activity\ndata: act-8\n\nevent: log\ndata: web Pulled\n\n"
            b"event: log\ndata: two\ndata: lines\n\nevent: done\n\n")
    res = await pull(catalog, body, SSE_TYPE)
    assert not res.is_error, res.text
    assert (res.structured["activityId"], res.structured["lastLines"]) == ("act-8", ["web Pulled", "two\nlines"])
    failed = await pull(catalog, b"event: activity\ndata: act-9\n\nevent: error\ndata: pull access denied\n\n", SSE_TYPE)
    assert failed.is_error and failed.error_code == "stream_failed" and "pull access denied" in failed.text


@pytest.mark.parametrize("ctype", ["application/json", "text/html; charset=utf-8", "", "application/octet-stream"])
async def test_an_undeclared_content_type_is_an_error_that_names_it(catalog, ctype):
    """Never "done", never read: a proxy's page or a JSON answer to a stream is a protocol error."""
    res = await pull(catalog, b'{"done": true}\n', ctype)
    assert res.is_error and res.error_code == "arcane_protocol"
    assert (ctype.split(";")[0] or "no Content-Type") in res.text


async def test_a_stream_cut_mid_event_is_incomplete(catalog):
    res = await pull(catalog, as_sse(PULL[:2]) + b'data: {"done": tr', SSE_TYPE)
    assert res.is_error and res.error_code == "stream_failed"
    assert res.structured is None or res.structured.get("status") != "done"


async def test_a_megabyte_event_within_the_cap_is_read_and_one_over_it_refused(catalog):
    big = {"log": "x" * 1_000_000}
    res = await pull(catalog, as_sse([PULL[0], big, PULL[-1]]), SSE_TYPE, cap=2_000_000)
    assert not res.is_error, res.text[:200]
    over = await pull(catalog, as_sse([PULL[0], big, PULL[-1]]), SSE_TYPE, cap=500_000)
    assert over.is_error and over.error_code == "arcane_protocol"
    lines = await pull(catalog, json.dumps(PULL[0]).encode() + b"\n" + b"y" * 600_000, "application/x-json-stream", cap=500_000)
    assert lines.is_error and lines.error_code == "arcane_protocol"


def test_ten_thousand_empty_events_cost_nothing():
    dec = EventDecoder(cap=1024)
    out = dec.feed(b"\n\n" * 10_000 + b"data:\n\n" * 10_000 + b":\n" * 10_000)
    assert out == [] and dec.buf == b"" and dec.comments == 10_000
    assert dec.end() == [] and dec.incomplete == 0


def test_event_decoder_fields_across_chunk_boundaries():
    text = b'id: 41\r\nretry: 2500\r\nevent: log\r\ndata: {"log":\r\ndata: "a"}\r\n\r\n'
    dec = EventDecoder(cap=1024)
    events = [e for i in range(len(text)) for e in dec.feed(text[i:i + 1])] + dec.end()
    assert [(e.name, e.data, e.id) for e in events] == [("log", '{"log":\n"a"}', "41")]
    assert dec.retry_ms == 2500 and dec.incomplete == 0
    cut = EventDecoder(cap=1024)
    assert cut.feed(b"data: half") == [] and cut.end() == [] and cut.incomplete == 1


def test_a_line_over_the_cap_is_refused_before_it_ends():
    with pytest.raises(ArcaneProtocolError):
        EventDecoder(cap=100).feed(b"data: " + b"z" * 200)
    with pytest.raises(ArcaneProtocolError):
        EventDecoder(cap=100).feed(b"data: " + b"z" * 60 + b"\ndata: " + b"z" * 60 + b"\n")
    with pytest.raises(ArcaneProtocolError):
        LineDecoder(cap=100).feed(b"z" * 200)


def test_event_frames(catalog):
    rules = catalog.conventions.framings
    from interpreter.call.framing import Event

    assert event_as_frame(Event('{"log": "a"}'), rules) == {"log": "a"}
    assert event_as_frame(Event("{}", "done"), rules) == {"done": True}
    assert event_as_frame(Event("", "unknown-name"), rules) is None
    assert event_as_frame(Event("not json"), rules) == b"not json"
    assert rules.framing_of("application/x-json-stream") == "ndjson" and rules.framing_of("text/event-stream;x=1") == "sse"


@pytest.mark.parametrize("ctype,error", [("text/html", "arcane_protocol"), ("application/x-json-stream", None), (SSE_TYPE, None)])
async def test_the_live_channel_is_read_by_its_content_type(catalog, ctype, error):
    import httpx

    from interpreter.call.dispatch import Call

    line = {"channel": "dashboard", "dashboard": {"type": "snapshot", "environmentId": "0"}, "timestamp": "t"}
    body = as_sse([line, {"type": "heartbeat", "timestamp": "t"}]) if ctype == SSE_TYPE else \
        (json.dumps(line) + "\n" + json.dumps({"type": "heartbeat", "timestamp": "t"}) + "\n").encode()
    d, _ = make_dispatcher(catalog, lambda r: httpx.Response(200, headers={"content-type": ctype}, content=body))
    try:
        res = await d.dispatch(Call("stream.watch", {"channels": "dashboard", "seconds": 5}, False))
    finally:
        await d.client.aclose()
    if error:
        assert res.is_error and res.error_code == error and "text/html" in res.text
    else:
        s = res.structured
        assert not res.is_error and (s["endedBy"], s["heartbeats"], s["channels"]["dashboard"]["lines"]) == ("closed", 1, 1)
