"""The simulator's live side against Arcane's source: the WebSocket routes (logs, stats,
terminal, diagnostics), the live channel GET /stream, pprof, the webhook trigger, the
token exchange, chunked uploads, their faults and records.

Like tests/test_simulator_contract.py, each test names the Arcane file its values come
from; the cases over routes, profiles and sources are generated from the cited data
(simulator/data/behaviour/live.yaml, uploads.yaml), so a new route or
profile gets its test. Real protocols on loopback: `websockets` clients, httpx. Nothing
here imports the engine; no assertion is on time (a receive timeout only bounds how long
a test waits for a frame that must, or must not, come).
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import re
import threading
import time
import urllib.parse
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus
from websockets.sync.client import connect

from simulator import check_data, start_simulator

LOCAL = "0"
REMOTE = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
EDGE = "9b2f4d1a-3c5e-4f6a-8b7c-9d0e1f2a3b4c"
BLOG_WEB = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"  # nginx: stdout and stderr lines, files
BLOG_DB = "3bfb7be8accb681967c4bf56af9848f886cbc68e993fd299940bb072137ec2b7"
GRAFANA = "cace491b69555e8d0f77747d47ae54e31ce4cc322fe51a7bdcf64402f3676ebf"  # exited
JELLYFIN = "28d81f2e7f99e2f862924d4748a4b71c4fd94e3ec26e0c6da17ce1252992af68"  # paused
TRICKY = "a5a077f15ad0506be85cc4839083067e2fed8a73aef080e6b0ce31d133400315"  # busybox, a TTY
ADMINER = "081a841fcde041bd743ce57dbc5780506b7888cc141e389f141141f74849c00d"  # exited
BLOG = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"
TRAEFIK = "9x8c7v6b5n4m3l2k1j0h9g8f7"
READONLY_KEY = "arc_sim_readonly_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"
NO_GRANTS_KEY = "arc_sim_live_no_grants_key"
HOOK_REDEPLOY = "arc_wh_9f3c2a1b7d4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081"
HOOK_DISABLED = "arc_wh_1b7e3c5d9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d"
HOOK_START = "arc_wh_4d2a8e6f0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f"
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
FAST = {"time_scale": 0.01}
WAIT = 3.0  # seconds a frame that must come may take

BEHAVIOUR, _ = check_data()
ROUTES = {r["name"]: r for r in BEHAVIOUR.websockets["routes"]}
SAMPLE = {"containerId": BLOG_WEB, "projectId": BLOG, "serviceId": TRAEFIK}


@pytest.fixture(scope="module")
def sim():
    with start_simulator(knobs=FAST) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh(sim):
    sim.reset()
    sim.set_faults({})
    sim.set_knobs(FAST)
    sim.rate_limits_enabled = True
    sim.add_api_key(NO_GRANTS_KEY, [])
    sim.clear_requests()
    sim.clear_violations()
    yield
    assert sim.violations == [], [v.as_dict() for v in sim.violations]


def route_path(name: str, env: str = LOCAL, **params) -> str:
    path = ROUTES[name]["path"].replace("{id}", env)
    for key, value in {**SAMPLE, **params}.items():
        path = path.replace("{" + key + "}", urllib.parse.quote(value, safe=""))
    return "/api" + path


def ws(sim, path: str, key: str | None = "default", query: dict | None = None, headers: dict | None = None, **kwargs):
    """A websockets client on the simulator (no proxy, no compression offered unless asked)."""
    h = dict(headers or {})
    if key is not None:
        h["X-API-Key"] = sim.api_key if key == "default" else key
    url = sim.ws_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
    kwargs.setdefault("compression", None)
    return connect(url, additional_headers=h, proxy=None, open_timeout=5, **kwargs)


def refused(sim, path: str, **kwargs) -> tuple[int, bytes, dict]:
    with pytest.raises(InvalidStatus) as err, ws(sim, path, **kwargs):
        pass
    r = err.value.response
    return r.status_code, r.body, {k.lower(): v for k, v in r.headers.raw_items()}


def frames(conn, n: int, timeout: float = WAIT) -> list:
    return [conn.recv(timeout=timeout) for _ in range(n)]


def quiet(conn, timeout: float = 0.3) -> bool:
    """No frame comes within `timeout` and the socket is still open."""
    try:
        conn.recv(timeout=timeout)
    except TimeoutError:
        return True
    return False


def closed_with(conn, timeout: float = WAIT) -> tuple[int | None, str]:
    """How the server ended the connection: (code, reason), or (None, "") without a close frame."""
    with pytest.raises(ConnectionClosed) as err:
        while True:
            conn.recv(timeout=timeout)
    rcvd = err.value.rcvd
    return (rcvd.code, rcvd.reason) if rcvd is not None else (None, "")


def until(conn, needle: bytes, timeout: float = WAIT) -> bytes:
    """Terminal output until `needle` has appeared."""
    out = b""
    deadline = time.monotonic() + timeout
    while needle not in out:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{needle!r} never came; got {out!r}")
        chunk = conn.recv(timeout=left)
        out += chunk if isinstance(chunk, bytes) else chunk.encode()
    return out


def ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ================================================================ before the upgrade (every route)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_route_auth_refusals(sim, name):
    """internal/auth/middleware.go:151 managerAuth: {message, code, statusCode:0} before any upgrade."""
    path = route_path(name)
    status, body, _ = refused(sim, path, key=None)
    assert (status, json.loads(body)) == (401, {"message": "Authentication required", "code": "UNAUTHORIZED", "statusCode": 0})
    status, body, _ = refused(sim, path, key="arc_nope")
    assert (status, json.loads(body)["message"]) == (401, "Invalid or expired API key")
    status, body, _ = refused(sim, path, key=None, headers={"Authorization": "Bearer garbage"})
    assert (status, json.loads(body)["message"]) == (401, "Invalid or expired token")


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_route_permission(sim, name):
    """middleware/role.go:39 RequireEchoPermission: each route's own permission (proxy_permissions.go)."""
    perm = ROUTES[name]["permission"]
    status, body, _ = refused(sim, route_path(name), key=NO_GRANTS_KEY)
    assert (status, json.loads(body)) == (403, {"message": f"permission denied: {perm}", "code": "FORBIDDEN", "statusCode": 0}), ROUTES[name]["src"]
    scope = BEHAVIOUR.permissions.catalog[perm]
    sim.add_api_key("arc_sim_live_holder", [{"permission": perm, **({"environmentId": LOCAL} if scope == "env" else {})}])
    with ws(sim, route_path(name), key="arc_sim_live_holder") as conn:
        assert conn.response.status_code == 101


def test_a_credential_in_the_query_is_no_credential(sim):
    """internal/auth/middleware.go:151 managerAuth: the agent token, X-API-Key, Bearer, then the cookies — never the query."""
    path = route_path("ws-container-logs")
    for name in ("token", "api_key", "apiKey", "X-API-Key", "access_token"):
        status, body, _ = refused(sim, path, key=None, query={name: sim.api_key, "follow": "false"})
        assert (status, json.loads(body)["message"]) == (401, "Authentication required"), name
    assert not any(r.credential for r in sim.requests())


def test_the_session_cookie_authenticates_a_socket(sim):
    """pkg/utils/cookie/cookie_util.go:41 GetTokenCookie: __Host-token, else token (what a browser's WebSocket sends)."""
    token = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]["token"]
    for cookie in (f"__Host-token={token}", f"token={token}", f"__Host-token={token}; token=garbage"):
        with ws(sim, route_path("ws-container-logs"), key=None, query={"follow": "false", "tail": "1"}, headers={"Cookie": cookie}) as conn:
            assert conn.response.status_code == 101 and frames(conn, 1)
    status, body, _ = refused(sim, route_path("ws-container-logs"), key=None, headers={"Cookie": f"__Host-token=garbage; token={token}"})
    assert (status, json.loads(body)["message"]) == (401, "Invalid or expired token")


def test_an_environment_grant_counts_only_for_its_environment(sim):
    """pkg/authz/permission_set.go Allows + authz.EnvIDFromPath: a logs grant on another environment is not enough."""
    sim.add_api_key("arc_sim_live_other_env", [{"permission": "containers:logs", "environmentId": REMOTE}])
    status, body, _ = refused(sim, route_path("ws-container-logs"), key="arc_sim_live_other_env")
    assert (status, json.loads(body)["message"]) == (403, "permission denied: containers:logs")


def test_origin_check(sim):
    """pkg/libarcane/ws/accept.go:14 + httpx/request.go:32: a foreign Origin is refused with text/plain 403; none, the same host or loopback pass."""
    status, body, headers = refused(sim, route_path("ws-container-logs"), origin="https://evil.example")
    assert (status, body, headers["content-type"].split(";")[0]) == (403, b"websocket origin not allowed\n", "text/plain")
    for origin in (None, f"http://127.0.0.1:{sim.port}", "http://localhost:9999"):
        with ws(sim, route_path("ws-container-logs"), query={"follow": "false"}, origin=origin) as conn:
            assert conn.response.status_code == 101


def test_no_compression_is_offered(sim):
    """CHANGELOG 2.10.2 #3814: permessage-deflate is off, even when the client offers it."""
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false"}, compression="deflate") as conn:
        assert "sec-websocket-extensions" not in {k.lower() for k, _ in conn.response.headers.raw_items()}


def test_the_environment_proxy_in_front_of_a_remote_socket(sim):
    """internal/middleware/environment_middleware.go:115 Handle: its own auth, permission and shapes; proxy.go:20 ProxyHTTP."""
    path = route_path("ws-container-logs", env=REMOTE, containerId="ci-runner")
    status, body, _ = refused(sim, path, key=None)
    assert (status, json.loads(body)) == (401, {"success": False, "data": {"error": "Authentication required to access remote environments"}})
    status, body, _ = refused(sim, path, key=READONLY_KEY)
    assert (status, json.loads(body)) == (403, {"success": False, "data": {"error": "You don't have permission to perform this action on this environment"}})
    status, body, _ = refused(sim, route_path("ws-container-logs", env="no-such-env"))
    assert (status, json.loads(body)) == (404, {"success": False, "data": {"error": "Environment not found"}})
    with ws(sim, path, query={"follow": "false"}) as conn:  # the agent answers for its own host
        assert frames(conn, 1)[0]
    sim.set_faults({"agent_down": REMOTE})
    with ws(sim, path) as conn:  # upgraded first, then closed: the dial to the agent failed
        assert conn.response.status_code == 101
        assert closed_with(conn) == (1014, "")


# ================================================================ log WebSockets


def test_container_logs_text_frames(sim):
    """dockerutil/log_stream.go:105 ReadAllLogs: follow=false gives every stdout line, then every stderr line with "[STDERR] "."""
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false"}) as conn:
        got = frames(conn, 6)
        assert quiet(conn)  # log_streams.go:96: the source ended, the socket stays open
    assert not any(f.startswith("[STDERR] ") for f in got[:4]) and all(f.startswith("[STDERR] ") for f in got[4:])
    assert got[0] == "2026/01/01 00:00:01 [notice] 1#1: nginx/1.27.3"
    assert got[4] == '[STDERR] 2026/01/01 00:00:01 [warn] 1#1: the "listen ... http2" directive is deprecated'
    assert all(isinstance(f, str) for f in got)  # pkg/libarcane/ws/client.go:115: text frames


def test_follow_is_the_default_and_reads_in_arrival_order(sim):
    """log_streams.go:114 (follow absent -> true); log_stream.go:29 StreamMultiplexedLogs (both pipes as they come)."""
    with ws(sim, route_path("ws-container-logs"), query={"tail": "all"}) as conn:
        got = frames(conn, 6)
        assert got[2] == '[STDERR] 2026/01/01 00:00:01 [warn] 1#1: the "listen ... http2" directive is deprecated'  # by time
        sim.append_log(BLOG_WEB, "GET /health 200")
        sim.append_log(BLOG_WEB, "upstream timed out", stream="stderr")
        assert frames(conn, 2) == ["GET /health 200", "[STDERR] upstream timed out"]


def test_timestamps_and_json_frames(sim):
    """bridge.go:9 LogMessage; parse.go:12 NormalizeContainerLine (Docker's timestamp out of the text, RFC 3339 nano without trailing zeros)."""
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "timestamps": "true"}) as conn:
        assert conn.recv(timeout=WAIT) == "2026-01-01T00:00:01.000000000Z 2026/01/01 00:00:01 [notice] 1#1: nginx/1.27.3"
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "timestamps": "true", "format": "json"}) as conn:
        got = [json.loads(f) for f in frames(conn, 6)]
    assert list(got[0]) == ["seq", "level", "message", "timestamp"]  # omitempty: no service for a container
    assert got[0] == {"seq": 1, "level": "stdout", "message": "2026/01/01 00:00:01 [notice] 1#1: nginx/1.27.3", "timestamp": "2026-01-01T00:00:01Z"}
    assert got[1]["timestamp"] == "2026-01-01T00:00:01.0001Z"
    assert [g["seq"] for g in got] == [1, 2, 3, 4, 5, 6]
    assert got[4]["level"] == "stderr" and not got[4]["message"].startswith("[STDERR]")


def test_json_frames_without_docker_timestamps_carry_the_server_time(sim):
    """log_streams.go:352: a line without Docker's timestamp gets now."""
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "format": "json"}) as conn:
        first = json.loads(conn.recv(timeout=WAIT))
    assert first["timestamp"].startswith("2026-01-01T00:00:") and first["timestamp"] != "2026-01-01T00:00:01Z"


def test_batched_json_frames(sim):
    """log_streams.go:358 ForwardLogJSONBatched(…, 50, 400 ms): arrays of at most 50, flushed when the source ends."""
    for n in range(60):
        sim.append_log(BLOG_WEB, f"line {n}")
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "format": "json", "batched": "true", "tail": "all"}) as conn:
        first, second = (json.loads(f) for f in frames(conn, 2))
    assert isinstance(first, list) and len(first) == 50 and len(second) == 66 - 50
    assert [m["seq"] for m in first + second] == list(range(1, 67))


def test_tail_and_since(sim):
    """container/service.go:1443 (Tail and Since passed to Docker): the last N entries, then those since a time."""
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "tail": "2"}) as conn:
        got = frames(conn, 2)
        assert quiet(conn)
    assert got == ['172.20.0.1 - - [01/Jan/2026:00:05:02 +0000] "GET /admin?token=ghp_R8fK2mQ7xV1zL9cN4pT6wY3bH5jD0sA8eG2u HTTP/1.1" 404 153 "-" "curl/8.5.0"',
                   '[STDERR] 2026/01/01 00:05:02 [error] 29#29: *3 open() "/usr/share/nginx/html/admin" failed (2: No such file or directory)']
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "tail": "all", "since": "2026-01-01T00:05:00Z"}) as conn:
        assert len(frames(conn, 3)) == 3 and quiet(conn)
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "tail": "0"}) as conn:
        assert quiet(conn)


def test_the_default_tail_is_100(sim):
    """log_streams.go:114: tail absent -> "100"."""
    for n in range(110):
        sim.append_log(BLOG_WEB, f"line {n}")
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false"}) as conn:
        got = frames(conn, 100)
        assert quiet(conn)
    assert got[0] == "line 10" and got[-1] == "line 109"  # 116 lines: the last 100


def test_a_tty_container_has_no_stderr_mark(sim):
    """log_stream.go:19 StreamContainerLogs: a TTY is one raw stream."""
    sim.append_log(TRICKY, "written to stderr", stream="stderr")
    with ws(sim, route_path("ws-container-logs", containerId=TRICKY), query={"follow": "false", "tail": "all"}) as conn:
        got = frames(conn, 4)
    assert not any("[STDERR]" in f for f in got) and got[-1] == "written to stderr"


def test_an_unknown_container_is_one_error_frame(sim):
    """log_streams.go:300 startLogSourceInternal, :171 broadcastLogStreamErrorInternal; container/service.go:1434."""
    with ws(sim, route_path("ws-container-logs", containerId="nope")) as conn:
        assert conn.recv(timeout=WAIT) == ("Failed to stream container logs: failed to inspect container for logs: "
                                           "Error response from daemon: No such container: nope")
        assert quiet(conn)  # then silence: the socket stays open
    with ws(sim, route_path("ws-container-logs", containerId="nope"), query={"format": "json"}) as conn:
        frame = json.loads(conn.recv(timeout=WAIT))
    assert frame["level"] == "error" and frame["service"] == "arcane" and frame["seq"] == 1
    assert frame["message"].startswith("Failed to stream container logs: ")


@pytest.mark.parametrize("mode,text", [
    ("cold", "Failed to stream container logs: failed to connect to Docker: failed to create Docker client: failed to negotiate Docker API version: "),
    ("cached", "Failed to stream container logs: failed to inspect container for logs: failed to connect to the docker API at "),
])
def test_a_down_daemon_is_an_error_frame(sim, mode, text):
    """container/service.go:1426 StreamLogs (GetClient, then inspect)."""
    sim.set_faults({"daemon_down": {LOCAL: mode}})
    with ws(sim, route_path("ws-container-logs")) as conn:
        assert conn.recv(timeout=WAIT).startswith(text)


def test_project_logs(sim):
    """project_details.go:552 StreamProjectLogs; "<container> | <msg>"; log_streams.go:277 (text: the message only);
    CHANGELOG v2.10.0 #3770 (a service's stderr kept apart: JSON level stderr)."""
    with ws(sim, route_path("ws-project-logs"), query={"follow": "false", "tail": "all"}) as conn:
        text = frames(conn, 9)
    assert "PostgreSQL Database directory appears to contain a database; Skipping initialization" in text
    assert not any(" | " in f.split(" ")[0] or f.startswith("web-1") or "[STDERR]" in f for f in text)
    with ws(sim, route_path("ws-project-logs"), query={"follow": "false", "tail": "all", "format": "json"}) as conn:
        msgs = [json.loads(f) for f in frames(conn, 9)]
    assert {m["service"] for m in msgs} == {"web-1", "db-1"} and {m["level"] for m in msgs} == {"stdout", "stderr"}
    assert not any(m["message"].startswith("[STDERR]") or " | " in m["message"][:12] for m in msgs)
    with ws(sim, route_path("ws-project-logs", projectId="blog")) as conn:  # by ID only
        assert conn.recv(timeout=WAIT) == "Failed to stream project logs: project not found"


def test_a_project_tail_is_per_container(sim):
    """pkg/projects/cmds.go:154 ComposeLogs: compose reads every container with the same Tail, then interleaves them."""
    with ws(sim, route_path("ws-project-logs"), query={"follow": "false", "tail": "1", "format": "json"}) as conn:
        got = [json.loads(f) for f in frames(conn, 2)]
        assert quiet(conn)
    assert sorted(g["service"] for g in got) == ["db-1", "web-1"]


def test_project_logs_follow_and_timestamps(sim):
    """CHANGELOG v2.10.0 #3770 (stderr and Docker's timestamps kept in project logs); parse.go:63 NormalizeProjectLine
    (JSON: level from the mark, Docker's time in `timestamp`); log_streams.go:277 (text: the message only, no time)."""
    with ws(sim, route_path("ws-project-logs"), query={"tail": "0", "format": "json"}) as conn:
        assert quiet(conn)
        sim.append_log(BLOG_WEB, "GET /health 200")
        sim.append_log(BLOG_WEB, "upstream timed out", stream="stderr")
        got = [json.loads(f) for f in frames(conn, 2)]
    assert [(g["service"], g["level"], g["message"]) for g in got] == [("web-1", "stdout", "GET /health 200"), ("web-1", "stderr", "upstream timed out")]
    with ws(sim, route_path("ws-project-logs"), query={"follow": "false", "tail": "all", "timestamps": "true", "format": "json"}) as conn:
        stamped = [json.loads(f) for f in frames(conn, 11)]
        assert quiet(conn)
    assert [m["message"] for m in stamped][-2:] == ["GET /health 200", "upstream timed out"]
    assert all(datetime.datetime.fromisoformat(m["timestamp"]) for m in stamped)
    # Docker's time (RFC 3339 with a nine-digit fraction) is in the member, not the message
    assert not any(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ", m["message"]) for m in stamped)
    with ws(sim, route_path("ws-project-logs"), query={"follow": "false", "tail": "all", "timestamps": "true"}) as conn:
        text = frames(conn, 11)
        assert quiet(conn)
    assert text[-2:] == ["GET /health 200", "upstream timed out"]  # text frames: neither time nor mark


def test_service_logs_json_frames(sim):
    """swarm.go:457 (the container normaliser: level from the mark, Docker's timestamp taken out)."""
    with ws(sim, route_path("ws-service-logs"), query={"follow": "false", "format": "json", "timestamps": "true"}) as conn:
        got = [json.loads(f) for f in frames(conn, 3)]
    assert [g["seq"] for g in got] == [1, 2, 3] and got[2]["level"] == "stderr" and "service" not in got[0]
    assert all(g["message"].startswith("com.docker.swarm.node.id=") for g in got)
    assert all(datetime.datetime.fromisoformat(g["timestamp"]) for g in got)


def test_service_logs(sim):
    """swarm/swarm.go:457 StreamServiceLogs (Details: true)."""
    with ws(sim, route_path("ws-service-logs"), query={"follow": "false"}) as conn:
        got = frames(conn, 3)
    details = ("com.docker.swarm.node.id=4p2k9x7m1n3b5v8c6z0q2w4e6,com.docker.swarm.service.id=9x8c7v6b5n4m3l2k1j0h9g8f7,"
               "com.docker.swarm.task.id=t1a2b3c4d5e6f7a8b9c0d1e2f")
    assert got[0].startswith(details + " time=") and got[2].startswith("[STDERR] " + details)
    with ws(sim, route_path("ws-service-logs", serviceId="nope")) as conn:
        assert conn.recv(timeout=WAIT).startswith("Failed to stream service logs: failed to get service logs: ")


def test_identical_requests_share_one_stream(sim):
    """log_streams.go:51 getOrCreateLogStreamInternal: a second client of a running stream gets only later lines; seq is the hub's."""
    query = {"format": "json", "tail": "1"}
    with ws(sim, route_path("ws-container-logs"), query=query) as first:
        assert json.loads(first.recv(timeout=WAIT))["seq"] == 1
        with ws(sim, route_path("ws-container-logs"), query=query) as second:
            assert quiet(second)  # no tail replay for a late joiner
            sim.append_log(BLOG_WEB, "shared line")
            a, b = json.loads(first.recv(timeout=WAIT)), json.loads(second.recv(timeout=WAIT))
    assert a == b and a["seq"] == 2 and a["message"] == "shared line"


def test_a_follow_ends_when_the_container_stops(sim):
    """Docker's follow stops with the container; the socket stays open (log_streams.go:96)."""
    with ws(sim, route_path("ws-container-logs"), query={"tail": "0"}) as conn:
        httpx.post(sim.url + f"/api/environments/0/containers/{BLOG_WEB}/stop", headers={"X-API-Key": sim.api_key})
        assert quiet(conn)
        sim.append_log(BLOG_WEB, "after the stop")
        assert quiet(conn)


def test_the_follow_cadence_knob(sim):
    """knob log_follow_seconds: a followed running container writes lines on its own."""
    sim.set_knobs({**FAST, "log_follow_seconds": 1})
    with ws(sim, route_path("ws-container-logs"), query={"tail": "0"}) as conn:
        assert frames(conn, 2) == ["blog-web-1: still running (1)", "blog-web-1: still running (2)"]


# ================================================================ container and system stats


def test_container_stats_frames(sim):
    """container/service.go:1370 StreamStats; streams stats/history.go (currentHistorySample; statsHistory on a producer's first frame)."""
    with ws(sim, route_path("ws-container-stats")) as conn:
        one, two, three = (json.loads(f) for f in frames(conn, 3))
    for key in ("read", "preread", "pids_stats", "blkio_stats", "num_procs", "storage_stats", "cpu_stats", "precpu_stats", "memory_stats",
                "name", "id", "networks"):
        assert key in one
    assert one["preread"] == "0001-01-01T00:00:00Z" and one["precpu_stats"]["cpu_usage"]["total_usage"] == 0
    assert "statsHistory" in one and "statsHistory" not in two and "currentHistorySample" in two
    assert two["precpu_stats"] == one["cpu_stats"] and three["preread"] == two["read"]
    cpu = lambda f: f["cpu_stats"]["cpu_usage"]["total_usage"] - f["precpu_stats"]["cpu_usage"]["total_usage"]
    system = lambda f: f["cpu_stats"]["system_cpu_usage"] - f["precpu_stats"]["system_cpu_usage"]
    assert cpu(three) > 0 and system(three) > 0
    assert three["currentHistorySample"]["cpuTenths"] == round(cpu(three) / system(three) * 1000)
    mem = three["memory_stats"]
    assert three["currentHistorySample"]["memoryUsageBytes"] == mem["usage"] - mem["stats"]["inactive_file"]
    assert three["networks"]["eth0"]["rx_bytes"] > one["networks"]["eth0"]["rx_bytes"]
    reads = lambda f: next(e["value"] for e in f["blkio_stats"]["io_service_bytes_recursive"] if e["op"] == "read")
    assert reads(three) >= reads(one)


def test_a_stopped_container_streams_zeros(sim):
    with ws(sim, route_path("ws-container-stats", containerId=GRAFANA)) as conn:
        frame = json.loads(frames(conn, 2)[1])
    assert frame["cpu_stats"]["cpu_usage"]["total_usage"] == 0 and frame["memory_stats"] == {} and "networks" not in frame


def test_an_unknown_container_is_an_error_frame_then_a_cut(sim):
    """container_stats.go:131: {error, timestamp}, then the hub is cancelled after a 2 s grace (no close frame)."""
    with ws(sim, route_path("ws-container-stats", containerId="nope")) as conn:
        frame = json.loads(conn.recv(timeout=WAIT))
        assert set(frame) == {"error", "timestamp"}
        assert frame["error"] == "Failed to stream container stats: failed to start stats stream: Error response from daemon: No such container: nope"
        assert closed_with(conn) == (None, "")


def test_system_stats(sim):
    """system_stats.go:429 SystemStats (a frame at once, then one per interval); :371 initializeCPUCacheCtx
    (the sampler reads the CPU over one second before its first frame); types/system/stats.go."""
    with ws(sim, route_path("ws-system-stats"), query={"interval": "1"}) as conn:
        one, two = (json.loads(f) for f in frames(conn, 2))
    for key in ("cpuUsage", "memoryUsage", "memoryTotal", "cpuCount", "architecture", "platform", "gpuCount"):
        assert key in one
    assert 0 < one["cpuUsage"] <= 100 and 0 < two["cpuUsage"] <= 100 and 0 < one["memoryUsage"] <= one["memoryTotal"]
    assert (one["cpuCount"], one["architecture"], one["platform"]) == (8, "amd64", "linux")


def test_system_stats_allow_five_sockets_per_ip(sim):
    """system_stats.go:41 checkRateLimitInternal: the sixth gets 429 before the upgrade."""
    conns = [ws(sim, route_path("ws-system-stats")) for _ in range(5)]
    try:
        status, body, _ = refused(sim, route_path("ws-system-stats"))
        assert (status, json.loads(body)) == (429, {"success": False, "error": "Too many concurrent stats connections from this IP"})
    finally:
        for c in conns:
            c.close()


# ================================================================ the terminal


def test_terminal_echo_prompt_and_exit_status(sim):
    """api/ws/exec.go (≥ 2.10.2): binary frames of TTY output (echo, prompt), stdin bytes in; no exit status — an in-band marker carries $?."""
    with ws(sim, route_path("ws-container-terminal")) as conn:
        assert until(conn, b"# ") == b"# "  # dash's prompt
        conn.send(b"printf '%s\\n' hello; false; echo __END_x1__$?\r")
        out = until(conn, b"__END_x1__1\r\n")
        assert out.startswith(b"printf '%s\\n' hello; false; echo __END_x1__$?\r\n")  # the TTY's echo, marker unexpanded
        assert b"hello\r\n" in out
        conn.send("cat /etc/hostname; hostname; id -u && echo __END_x2__$?\r")  # a text frame's bytes work too
        out = until(conn, b"__END_x2__0")
        assert b"704083d3b29b\r\n704083d3b29b\r\n0\r\n" in out
        conn.send(b"nope; echo __END_x3__$?\r")
        assert b"sh: 3: nope: not found\r\n__END_x3__127" in until(conn, b"__END_x3__127")
        frame = conn.recv(timeout=WAIT)
        assert isinstance(frame, bytes)
        conn.send(b"exit 3\r")
        assert closed_with(conn) == (1000, "shell exited")  # closeExecInternal: the status is not sent


def test_terminal_eval_and_a_list_ended_by_ampersand(sim):
    """POSIX shell grammar as dash reads it: `eval` runs its joined words in the same shell;
    `a & ; b` is a syntax error (status 2) while a line may end with `&`; `#` comments out the rest."""
    with ws(sim, route_path("ws-container-terminal")) as conn:
        conn.send(b"eval 'cd /etc; echo \"it'\\''s\" # hidden'; pwd; echo __E1__$?\r")
        out = until(conn, b"__E1__0")
        assert b"\r\nit's\r\n/etc\r\n" in out and b"hidden\r\n" not in out
        conn.send(b"echo a & ; echo __E2__$?\r")
        conn.send(b"echo __E3__$?\r")
        out = until(conn, b"__E3__2")
        assert b"Syntax error" in out and b"__E2__" not in out.split(b"\r\n", 1)[1]
        conn.send(b"echo a & echo __E4__$? # ; echo never\r")
        out = until(conn, b"__E4__0")
        assert out.split(b"\r\n", 1)[1] == b"a\r\n__E4__0\r\n"  # after the echo: nothing of the comment ran


def test_terminal_subshells_and_command_substitution(sim):
    """POSIX 2.9.4: `( list )` runs in a copy of the shell's environment, its `exit` ends only
    the subshell (its status is `$?`); 2.6.3: `$(list)` is the list's output, trailing newlines
    removed. A lone `)` or an unclosed `(` is dash's syntax error (status 2), the shell lives on."""
    with ws(sim, route_path("ws-container-terminal")) as conn:
        conn.send(b"( echo in; exit 3 ); echo __S1__$?\r")
        out = until(conn, b"__S1__3")
        assert b"\r\nin\r\n__S1__3" in out
        conn.send(b"(cd /etc; X=inner; export X); pwd; echo \"[$X]\" __S2__$?\r")
        assert b"\r\n/\r\n[] __S2__0" in until(conn, b"__S2__0")
        conn.send(b"echo \"$(hostname; echo two)\" x$(printf '%s' 'a b')y; v=$(exit 4); echo __S3__$?\r")
        assert b"\r\n704083d3b29b\r\ntwo xa by\r\n__S3__4" in until(conn, b"__S3__4")
        conn.send(b"echo a ); echo __S4__$?\r")
        conn.send(b"( echo b; echo __S5__$?\r")
        conn.send(b"echo __S6__$?\r")
        out = until(conn, b"__S6__2")
        assert out.count(b"Syntax error") == 2 and b"__S4__" not in out.replace(b"echo __S4__", b"")
        conn.send(b"(exit 1) || ( (exit 2) && echo no ) || echo __S7__$?\r")
        assert b"__S7__2" in until(conn, b"__S7__2")


def test_terminal_environment_and_files(sim):
    with ws(sim, route_path("ws-container-terminal")) as conn:
        conn.send(b"echo $NGINX_VERSION; cat /usr/share/nginx/html/index.html | grep -c nginx; ls /etc/nginx/conf.d; echo __E__$?\r")
        out = until(conn, b"__E__0")
    assert b"1.27.3\r\n1\r\ndefault.conf\r\n" in out


def test_bash_writes_bracketed_paste_sequences(sim):
    """The TTY passes the shell's escape sequences through (bash 5.2's bracketed-paste mode around the prompt)."""
    with ws(sim, route_path("ws-container-terminal"), query={"shell": "/bin/bash"}) as conn:
        prompt = until(conn, b"# ")
        assert prompt == b"\x1b[?2004hroot@704083d3b29b:/# "
        conn.send(b"echo hi\r")
        assert until(conn, b"\rhi\r\n").startswith(b"echo hi\r\n\x1b[?2004l\rhi\r\n")  # the echo, then readline leaves paste mode
        conn.send(b"exit\r")
        assert b"exit\r\n" in until(conn, b"exit\r\n")
        assert closed_with(conn) == (1000, "shell exited")


def test_a_command_that_runs_until_interrupted(sim):
    with ws(sim, route_path("ws-container-terminal")) as conn:
        conn.send(b"sleep 9999; echo __DONE__$?\r")
        until(conn, b"__DONE__$?\r\n")
        assert quiet(conn, 0.5)
        conn.send(b"\x03")
        out = until(conn, b"__DONE__130")
    assert out.startswith(b"^C")


def test_a_stopped_container_refuses_the_exec(sim):
    """exec.go (≥ 2.10.2): "Error creating exec: …\\r\\n" as a text frame, then close 1011 with the cause."""
    with ws(sim, route_path("ws-container-terminal", containerId=GRAFANA)) as conn:
        frame = conn.recv(timeout=WAIT)
        assert frame == f"Error creating exec: failed to create exec: Error response from daemon: container {GRAFANA} is not running\r\n"
        code, reason = closed_with(conn)
    assert code == 1011 and reason == f"create exec: failed to create exec: Error response from daemon: container {GRAFANA} is not running"[:123]
    with ws(sim, route_path("ws-container-terminal", containerId=JELLYFIN)) as conn:
        assert "is paused, unpause the container before exec" in conn.recv(timeout=WAIT)


def test_the_2_8_close_knob(sim):
    """exec.go:46 at HEAD/2.8: the handler returns and CloseNow drops the connection (1006 for the client)."""
    sim.set_knobs({**FAST, "exec_close": "2.8"})
    with ws(sim, route_path("ws-container-terminal")) as conn:
        conn.send(b"exit\r")
        assert closed_with(conn) == (None, "")


def test_a_shell_the_image_lacks(sim):
    """exec.go: the whole `shell` value is argv[0]; runc's error comes through the TTY, then EOF."""
    with ws(sim, route_path("ws-container-terminal"), query={"shell": "/bin/zsh"}) as conn:
        out = until(conn, b"unknown\r\n")
        assert out.startswith(b'OCI runtime exec failed: exec failed: unable to start container process: exec: "/bin/zsh"')
        assert closed_with(conn) == (1000, "shell exited")


def test_typed_bytes_are_recorded(sim):
    with ws(sim, route_path("ws-container-terminal")) as conn:
        conn.send(b"echo one\r")
        until(conn, b"one\r\n")
        conn.send("exit\r")
        closed_with(conn)
    [rec] = [s for s in sim.sockets() if s.route == "ws-container-terminal"]
    assert rec.received == (("binary", b"echo one\r"), ("text", "exit\r"))
    assert (rec.status, rec.closed_by, rec.close_code, rec.close_reason) == (101, "server", 1000, "shell exited")


# ================================================================ diagnostics


def test_diagnostics_stream_lists_the_open_sockets(sim):
    """diagnostics.go:80 DiagnosticsStream, :31 BuildDiagnostics (the WebSocket section); types/system/diagnostics.go."""
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false"}), ws(sim, route_path("ws-diagnostics")) as conn:
        snap = json.loads(conn.recv(timeout=WAIT))
        again = json.loads(conn.recv(timeout=WAIT))  # every 2 s (scaled)
    assert set(snap) == {"timestamp", "runtime", "memory", "gc", "websocket"} and again["timestamp"] != snap["timestamp"]
    assert snap["websocket"]["snapshot"]["containerLogsActive"] == 1
    [info] = snap["websocket"]["connections"]
    assert (info["kind"], info["envId"], info["resourceId"]) == ("container_logs", LOCAL, BLOG_WEB)


def test_server_log_stream_backlog_then_live(sim):
    """diagnostics.go:127 ServerLogsStream: the ring's backlog, then live entries (here: exec.go's "Container exec session ended")."""
    with ws(sim, route_path("ws-diagnostics-logs")) as conn:
        backlog = [json.loads(f) for f in frames(conn, 3)]
        assert backlog[0]["message"] == "Arcane started" and {"time", "level", "message"} <= set(backlog[0])
        with ws(sim, route_path("ws-container-terminal")) as term:
            term.send(b"exit\r")
            closed_with(term)
        entry = json.loads(conn.recv(timeout=WAIT))
    assert (entry["level"], entry["message"]) == ("INFO", "Container exec session ended")


# ================================================================ the live channel


def live(sim, channels: str | None = None, *, key: str | None = None, count: int, headers: dict | None = None,
         until_line=None) -> tuple[list[dict], dict]:
    """Read the live channel until `count` lines (or one `until_line` accepts) came."""
    params = {"channels": channels} if channels is not None else {}
    got = []
    with (
        httpx.Client(base_url=sim.url, headers={"X-API-Key": key or sim.api_key, **(headers or {})}, timeout=WAIT) as c,
        c.stream("GET", "/api/stream", params=params) as r,
    ):
        resp_headers = dict(r.headers)
        for line in r.iter_lines():
            if not line:
                continue
            got.append(json.loads(line))
            if (until_line is not None and until_line(got[-1])) or (until_line is None and len(got) >= count):
                break
    return got, resp_headers


def test_without_channels_only_heartbeats(sim):
    """handlers/stream.go:183: nothing is subscribed by default; agg.go Run: a heartbeat per 15 s tick (scaled)."""
    got, headers = live(sim, count=3)
    assert [set(g) for g in got] == [{"type", "timestamp"}] * 3 and all(g["type"] == "heartbeat" for g in got)
    stamps = [datetime.datetime.fromisoformat(g["timestamp"]) for g in got]  # Go's RFC 3339 nano: trailing zeros dropped
    assert stamps[0] < stamps[1] < stamps[2]
    assert (headers["content-type"], headers["cache-control"], headers["x-accel-buffering"]) == (
        "application/x-json-stream", "no-store, no-cache, must-revalidate", "no")


def test_channel_snapshots(sim):
    """environment/handler.go:500, dashboard/handler.go:114/:160, activity/handler.go:283/:332: a snapshot per producer first."""
    got, _ = live(sim, "Environments, dashboard,activities,nonsense", count=8)
    first = {(g.get("channel"), (g.get("environment") or g.get("dashboard") or g.get("activity") or {}).get("type"),
              (g.get("dashboard") or g.get("activity") or {}).get("environmentId")) for g in got}
    assert ("environments", "snapshot", None) in first
    assert ("dashboard", "snapshot", LOCAL) in first and ("dashboard", "pending", REMOTE) in first
    assert ("activities", "snapshot", LOCAL) in first and ("activities", "snapshot", REMOTE) in first
    env_line = next(g for g in got if g.get("channel") == "environments")
    assert list(env_line) == ["channel", "environment", "timestamp"] and env_line["timestamp"] == env_line["environment"]["timestamp"]
    assert {e["id"] for e in env_line["environment"]["environments"]} == {LOCAL, REMOTE, EDGE}


def test_a_scoped_caller_sees_its_channels_only(sim):
    """stream.go:118 producersForInternal: dashboard and activities need their read permission; environments are filtered."""
    got, _ = live(sim, "environments,dashboard,activities", key=READONLY_KEY, count=2)
    assert [g.get("channel") for g in got] == ["environments", None]  # then a heartbeat: nothing else is allowed
    assert [e["id"] for e in got[0]["environment"]["environments"]] == [LOCAL]


def test_a_container_stopped_through_rest_reaches_the_channels(sim):
    """container/handler.go:771 runContainerActionInternal (activity container_stop: running, its final message,
    success); dashboard/handler.go:114 (the next poll's snapshot counts the container as stopped)."""
    def counts(g):
        d = g.get("dashboard") or {}
        return d.get("environmentId") == LOCAL and d.get("type") == "snapshot" and d["snapshot"]["containers"]["counts"]

    before, _ = live(sim, "dashboard", count=1)
    stopped_before = before[0]["dashboard"]["snapshot"]["containers"]["counts"]["stoppedContainers"]
    seen = []

    # the stop is sent once the subscription has delivered its first frame: a fixed delay lost
    # the race under load (the activity frames went out before the stream was open)
    stop = threading.Thread(target=httpx.post, args=(sim.url + f"/api/environments/0/containers/{BLOG_WEB}/stop",),
                            kwargs={"headers": {"X-API-Key": sim.api_key}})

    def watch(g):
        seen.append(g)
        if not stop.is_alive() and stop.ident is None:
            stop.start()
        c = counts(g)
        return bool(c) and c["stoppedContainers"] == stopped_before + 1

    live(sim, "dashboard,activities", count=0, until_line=watch)
    stop.join()
    acts = [g["activity"] for g in seen if g.get("channel") == "activities" and g["activity"]["type"] != "snapshot"]
    kinds = [(a["type"], (a.get("activity") or {}).get("status") or (a.get("message") or {}).get("level")) for a in acts]
    assert kinds == [("activity", "running"), ("message", "success"), ("activity", "success")]
    assert acts[0]["activity"]["type"] == "container_stop" and acts[0]["activity"]["resourceId"] == BLOG_WEB
    assert acts[1]["message"]["message"] == "Container stopped"
    assert all(a["environmentId"] == LOCAL for a in acts)


def test_a_pull_reaches_the_activities_channel(sim):
    """image/handler.go:572 PullImage: every line an activity message; service.go:1298 publishActivityInternal."""
    threading.Timer(0.3, lambda: httpx.post(sim.url + "/api/environments/0/images/pull", json={"imageName": "redis", "tag": "8"},
                                            headers={"X-API-Key": sim.api_key})).start()
    got, _ = live(sim, "activities", count=0, until_line=lambda g: (g.get("activity") or {}).get("activity", {}).get("status") == "success")
    events = [g["activity"] for g in got if g.get("channel") == "activities" and g["activity"]["type"] in ("activity", "message")]
    assert events[0]["activity"]["type"] == "image_pull" and events[0]["activity"]["status"] == "running"
    messages = [e["message"]["message"] for e in events if e["type"] == "message"]
    assert messages[0] == "8: Pulling from library/redis" and messages[-1] == "Image pull completed"


def test_an_unreachable_agent_is_one_dashboard_error(sim):
    """dashboard/handler.go:213: an error once per distinct message, then the polls go on."""
    sim.set_faults({"agent_down": REMOTE})
    got, _ = live(sim, "dashboard", count=0, until_line=lambda g: (g.get("dashboard") or {}).get("type") == "error")
    err = got[-1]["dashboard"]
    assert err["environmentId"] == REMOTE and err["error"].startswith("Proxy request failed: Get ")


def test_the_live_channel_can_be_cut_and_silenced(sim):
    """Faults: drop after N lines, stall after N lines."""
    sim.set_faults({"drop": {"match": "/stream", "after": 2}})
    got = []
    with (
        pytest.raises(httpx.HTTPError), httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=WAIT) as c,
        c.stream("GET", "/api/stream") as r,
    ):
        for line in r.iter_lines():
            if line:
                got.append(json.loads(line))
    assert len(got) == 2
    sim.set_faults({"stall": {"match": "/stream", "after": 1, "seconds": 30}})
    with (
        pytest.raises(httpx.ReadTimeout), httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=httpx.Timeout(5, read=1.0)) as c,
        c.stream("GET", "/api/stream") as r,
    ):
        for _ in r.iter_lines():
            pass


# ================================================================ pprof


@pytest.mark.parametrize("name", BEHAVIOUR.pprof["profiles"])
def test_named_profiles(sim, name):
    """diagnostics.go:74 pprof.Handler(name): binary (gzip) by default, text with debug=1."""
    h = {"X-API-Key": sim.api_key}
    r = httpx.get(sim.url + f"/api/debug/pprof/{name}", headers=h)
    assert (r.status_code, r.headers["content-type"], r.headers["content-disposition"]) == (200, "application/octet-stream", f'attachment; filename="{name}"')
    assert gzip.decompress(r.content)
    r = httpx.get(sim.url + f"/api/debug/pprof/{name}", params={"debug": 1}, headers=h)
    assert r.headers["content-type"] == "text/plain; charset=utf-8" and "content-disposition" not in r.headers


def test_pprof_routes(sim):
    """diagnostics.go:63 (WithAdminRequired); Go's net/http/pprof Index, Cmdline, Profile, Trace, Symbol."""
    h = {"X-API-Key": sim.api_key}
    assert httpx.get(sim.url + "/api/debug/pprof/", headers=h).headers["content-type"] == "text/html; charset=utf-8"
    assert httpx.get(sim.url + "/api/debug/pprof", headers=h).status_code == 200
    assert b"\x00" in httpx.get(sim.url + "/api/debug/pprof/cmdline", headers=h).content
    r = httpx.get(sim.url + "/api/debug/pprof/profile", params={"seconds": 2}, headers=h)
    assert (r.headers["content-type"], r.headers["content-disposition"]) == ("application/octet-stream", 'attachment; filename="profile"')
    assert r.content[:2] == b"\x1f\x8b"
    assert httpx.get(sim.url + "/api/debug/pprof/trace", headers=h).headers["content-disposition"] == 'attachment; filename="trace"'
    assert httpx.post(sim.url + "/api/debug/pprof/symbol", content=b"0x4011a0+0x4011c0", headers=h).text.startswith("num_symbols: 1\n0x4011a0 ")
    r = httpx.get(sim.url + "/api/debug/pprof/nonsense", headers=h)
    assert (r.status_code, r.text) == (404, "Unknown profile\n")
    r = httpx.get(sim.url + "/api/debug/pprof/heap", headers={"X-API-Key": READONLY_KEY})
    assert (r.status_code, r.json()) == (403, {"message": "You don't have permission to access this resource", "code": "FORBIDDEN", "statusCode": 0})


# ================================================================ the webhook trigger


def trigger(sim, token: str, **kwargs) -> httpx.Response:
    return httpx.post(sim.url + f"/api/webhooks/trigger/{token}", **kwargs)


def test_a_webhook_trigger_runs_its_action(sim):
    """webhooks_trigger.go:18 (no credential read, 202 at once); webhook.go:429 TriggerByToken, :516 (project redeploy), :744 the event."""
    r = trigger(sim, HOOK_REDEPLOY)
    assert (r.status_code, r.json()) == (202, {"success": True, "data": {"status": "accepted"}})
    for _ in range(100):
        acts = [a for a in sim.items("activities") if a["type"] == "project_redeploy" and a.get("status") == "success"]
        events = [e for e in sim.items("events", None) if e["type"] == "webhook.trigger"]
        if acts and events:
            break
        time.sleep(0.05)
    assert acts[0]["resourceId"] == BLOG and acts[0]["startedBy"]["username"] == "System"
    assert (events[0]["severity"], events[0]["title"], events[0]["resourceName"]) == ("success", "Webhook triggered: redeploy-blog", "redeploy-blog")
    [req] = [q for q in sim.requests() if q.path.startswith("/api/webhooks/")]
    assert req.credential is None and req.header("x-api-key") is None and req.header("authorization") is None


def test_a_webhook_trigger_changes_the_state(sim):
    trigger(sim, HOOK_START)
    for _ in range(100):
        if next(c for c in sim.items("containers") if c["id"] == ADMINER)["state"] == "running":
            break
        time.sleep(0.05)
    assert next(c for c in sim.items("containers") if c["id"] == ADMINER)["state"] == "running"


def test_webhook_trigger_refusals(sim):
    """webhooks_trigger.go:27: 404 for a bad format or an unknown token, 403 for a disabled webhook."""
    assert (trigger(sim, "not-a-token").status_code, trigger(sim, "not-a-token").json()) == (404, {"success": False, "error": "invalid webhook token"})
    r = trigger(sim, "arc_wh_00000000deadbeef")
    assert (r.status_code, r.json()) == (404, {"success": False, "error": "webhook not found"})
    r = trigger(sim, HOOK_DISABLED)
    assert (r.status_code, r.json()) == (403, {"success": False, "error": "webhook is disabled"})


def test_webhook_trigger_rate_limit_per_token(sim):
    """router_bootstrap.go:240 (60/min, burst 10); CHANGELOG 2.10.2 #3742 (per token)."""
    statuses = [trigger(sim, "arc_wh_0000000000000001").status_code for _ in range(11)]
    assert statuses == [404] * 10 + [429]
    r = trigger(sim, "arc_wh_0000000000000001")
    assert (r.json(), r.headers["retry-after"]) == ({"error": "rate limit exceeded"}, "60")
    assert trigger(sim, HOOK_DISABLED).status_code == 403  # another token's bucket


# ================================================================ the token exchange


def exchange(sim, **fields) -> httpx.Response:
    body = {"grant_type": GRANT, "subject_token_type": JWT_TYPE, **fields}
    return httpx.post(sim.url + "/api/auth/federated/token", data={k: v for k, v in body.items() if v is not None})


def test_token_exchange(sim):
    """federated/handler.go:77 (form-encoded), service.go:86 ExchangeToken; the token is a Bearer session of the credential's service user."""
    r = exchange(sim, subject_token=sim.federated_token())
    body = r.json()
    assert r.status_code == 200 and set(body) == {"access_token", "token_type", "expires_in", "issued_token_type"}
    assert (body["token_type"], body["expires_in"], body["issued_token_type"]) == ("Bearer", 900, "urn:ietf:params:oauth:token-type:access_token")
    bearer = {"Authorization": f"Bearer {body['access_token']}"}
    assert httpx.get(sim.url + "/api/environments/0/containers", headers=bearer).status_code == 200  # role_deployer on "0"
    assert httpx.get(sim.url + f"/api/environments/{REMOTE}/containers", headers=bearer).status_code == 403
    me = httpx.get(sim.url + "/api/auth/me", headers=bearer).json()["data"]
    assert me["username"] == "federated-github-actions-deploy"


@pytest.mark.parametrize("why,fields,error", [
    ("no grant_type", {"grant_type": ""}, "invalid_request"),
    ("another grant", {"grant_type": "client_credentials"}, "invalid_request"),
    ("no subject token", {"subject_token": ""}, "invalid_request"),
    ("no subject token type", {"subject_token_type": None}, "invalid_request"),
    ("an empty subject token type", {"subject_token_type": ""}, "invalid_request"),
    ("a subject token type it does not take", {"subject_token_type": "urn:ietf:params:oauth:token-type:saml2"}, "invalid_request"),
    ("a requested type it does not issue", {"requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token"}, "invalid_request"),
    ("not a JWT", {"subject_token": "garbage"}, "invalid_grant"),
])
def test_token_exchange_request_errors(sim, why, fields, error):
    """federated/service.go:352 validateTokenExchangeRequestInternal; handler.go:252 (every error 400 {error, error_description})."""
    fields = {"subject_token": sim.federated_token(), **fields}
    r = exchange(sim, **fields)
    descriptions = {"invalid_request": "invalid token exchange request", "invalid_grant": "token exchange rejected"}
    assert (r.status_code, r.json()) == (400, {"error": error, "error_description": descriptions[error]}), why


@pytest.mark.parametrize("why,kwargs", [
    ("a wrong signature", {"key": "not-the-issuer-key"}),
    ("an expired token", {"expires_in": -10}),
    ("another audience", {"audience": "https://elsewhere.example"}),
    ("another subject", {"subject": "repo:example/blog:ref:refs/heads/feature"}),
    ("an issuer with no enabled credential", {"credential": "fc_disabled_gitlab"}),
])
def test_token_exchange_grant_errors(sim, why, kwargs):
    """service.go:86 ExchangeToken: issuer, signature, expiry, audience, subject -> invalid_grant."""
    r = exchange(sim, subject_token=sim.federated_token(**kwargs))
    assert (r.status_code, r.json()["error"]) == (400, "invalid_grant"), why


def test_token_exchange_refuses_json_and_replays(sim):
    """handler.go:84 ParseForm (a JSON body has no fields); service.go:411 recordTokenReplayGuardInternal."""
    token = sim.federated_token()
    r = httpx.post(sim.url + "/api/auth/federated/token", json={"grant_type": GRANT, "subject_token": token, "subject_token_type": JWT_TYPE})
    assert (r.status_code, r.json()["error"]) == (400, "invalid_request")
    assert exchange(sim, subject_token=token).status_code == 200
    assert exchange(sim, subject_token=token).json()["error"] == "invalid_grant"


def test_token_exchange_reads_the_query_too_body_first(sim):
    """handler.go:84 ParseForm: Request.Form holds the URL query and the body, body values first."""
    token = sim.federated_token()
    r = httpx.post(sim.url + "/api/auth/federated/token", params={"grant_type": GRANT, "subject_token_type": JWT_TYPE},
                   data={"subject_token": token})
    assert r.status_code == 200 and r.json()["token_type"] == "Bearer"
    r = httpx.post(sim.url + "/api/auth/federated/token", params={"grant_type": GRANT},
                   data={"grant_type": "client_credentials", "subject_token": sim.federated_token(), "subject_token_type": JWT_TYPE})
    assert (r.status_code, r.json()["error"]) == (400, "invalid_request")


def test_token_exchange_rate_limit(sim):
    """router_bootstrap.go:237 PerIPRateLimitForPaths([/api/auth/federated/token], 10, 10)."""
    statuses = [exchange(sim, subject_token="x").status_code for _ in range(11)]
    assert statuses == [400] * 10 + [429]


# ================================================================ chunked upload sessions


def upload(sim, kind: str, data: bytes, filename: str, chunk: int = 1048576, env: str = LOCAL, order=None) -> str:
    h = {"X-API-Key": sim.api_key}
    base = sim.url + f"/api/environments/{env}/uploads/{kind}"
    session = httpx.post(base, json={"filename": filename, "size": len(data), "chunkSize": chunk}, headers=h).json()["data"]
    indexes = order if order is not None else range(session["totalChunks"])
    for i in indexes:
        r = httpx.put(f"{base}/{session['id']}/chunks/{i}", content=data[i * chunk : (i + 1) * chunk],
                      headers={**h, "Content-Type": "application/octet-stream"})
        assert r.status_code == 200, r.text
    return session["id"]


def blob(size: int) -> bytes:
    return b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(size // 32 + 1))[:size]


def test_upload_session_lifecycle(sim):
    """upload/upload.go:70 CreateSession, :160 WriteChunk (exact sizes, idempotent re-send), GetSession; types/upload Session."""
    h = {"X-API-Key": sim.api_key}
    base = sim.url + "/api/environments/0/uploads/image"
    data = blob(2_500_000)
    s = httpx.post(base, json={"filename": "app.tar", "size": len(data), "chunkSize": 1048576}, headers=h).json()["data"]
    assert (len(s["id"]), s["kind"], s["totalChunks"], s["receivedChunks"], s["complete"]) == (16, "image", 3, [], False)
    put = lambda i, body: httpx.put(f"{base}/{s['id']}/chunks/{i}", content=body, headers={**h, "Content-Type": "application/octet-stream"})
    assert put(2, data[2 * 1048576:]).json()["data"]["receivedChunks"] == [2]
    r = put(0, data[:10])
    assert (r.status_code, r.json()["detail"]) == (422, "Invalid upload chunk: chunk 0 is 10 bytes, expected 1048576")
    r = put(5, data[:10])
    assert r.json()["detail"] == "Invalid upload chunk: chunk index 5 out of range [0,3)"
    assert put(0, data[:1048576]).json()["data"]["receivedChunks"] == [0, 2]
    assert put(0, data[:1048576]).json()["data"]["receivedChunks"] == [0, 2]  # re-sent: overwritten
    r = httpx.post(sim.url + "/api/environments/0/images/upload", json={"uploadId": s["id"]}, headers=h)
    assert (r.status_code, r.json()["detail"]) == (409, "Upload session is incomplete: 2 of 3 chunks received")
    got = httpx.get(f"{base}/{s['id']}", headers=h).json()["data"]
    assert got["receivedChunks"] == [0, 2] and got["complete"] is False
    r = httpx.get(sim.url + "/api/environments/0/uploads/volume-backup/" + s["id"], headers=h)
    assert (r.status_code, r.json()["detail"]) == (400, "Upload session kind does not match this endpoint: session is for image uploads")
    assert httpx.delete(f"{base}/{s['id']}", headers=h).json()["data"]["message"] == "Upload session deleted"
    assert httpx.get(f"{base}/{s['id']}", headers=h).json()["detail"] == f"Upload session not found: {s['id']}"
    assert httpx.get(f"{base}/not-hex", headers=h).json()["detail"] == "Upload session not found: invalid upload ID"


@pytest.mark.parametrize("body,detail", [
    ({"filename": "app.zip", "size": 10}, "Invalid upload session request: file type not allowed for image uploads"),
    ({"filename": "app.tar", "size": 10, "chunkSize": 10}, "Invalid upload session request: chunk size must be between 1048576 and 52428800 bytes"),
    ({"filename": "app.tar", "size": 600 * 1024 * 1024}, "Invalid upload session request: file size exceeds maximum allowed size of 500 MB"),
])
def test_upload_session_refusals(sim, body, detail):
    """upload.go:70 CreateSession (422 problems)."""
    r = httpx.post(sim.url + "/api/environments/0/uploads/image", json=body, headers={"X-API-Key": sim.api_key})
    assert (r.status_code, r.json()["detail"]) == (422, detail)


def test_an_image_upload_is_consumed_byte_for_byte_once(sim):
    """image/handler.go:836 UploadImage; upload.go:221 Consume (at most once)."""
    data = blob(2_200_000)
    upload_id = upload(sim, "image", data, "app.tar.gz", order=[2, 0, 1])
    h = {"X-API-Key": sim.api_key}
    r = httpx.post(sim.url + "/api/environments/0/images/upload", json={"uploadId": upload_id}, headers=h)
    digest = hashlib.sha256(data).hexdigest()
    assert r.status_code == 200 and r.json()["data"]["stream"] == f"Loaded image ID: sha256:{digest}\n"
    assert [(u["id"], u["sha256"], u["bytes"]) for u in sim.uploads()] == [(upload_id, digest, len(data))]
    assert any(i["id"] == f"sha256:{digest}" for i in sim.items("images"))
    r = httpx.post(sim.url + "/api/environments/0/images/upload", json={"uploadId": upload_id}, headers=h)
    assert (r.status_code, r.json()["detail"]) == (404, f"Upload session not found: {upload_id}")


def test_a_build_workspace_upload_reads_back_the_same_bytes(sim):
    """build/workspace_handler.go:175 UploadFile, :167 DownloadFile."""
    data = blob(1_300_000) + b"\x00\xff tail"
    upload_id = upload(sim, "build-workspace", data, "vendor.bin")
    h = {"X-API-Key": sim.api_key}
    assert httpx.post(sim.url + "/api/environments/0/builds/browse/upload", params={"path": "/ctx"}, json={"uploadId": upload_id}, headers=h).status_code == 204
    r = httpx.get(sim.url + "/api/environments/0/builds/browse/download", params={"path": "/ctx/vendor.bin"}, headers=h)
    assert hashlib.sha256(r.content).hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_volume_backup_upload_is_an_activity(sim):
    """volume/handler.go:1097 UploadAndRestore (RunHandlerActivity resource_action)."""
    upload_id = upload(sim, "volume-backup", blob(1000), "blog.tar.gz")
    r = httpx.post(sim.url + "/api/environments/0/volumes/blog_db-data/backups/upload", json={"uploadId": upload_id}, headers={"X-API-Key": sim.api_key})
    data = r.json()["data"]
    assert data["message"] == "Backup uploaded and restored successfully"
    act = next(a for a in sim.items("activities") if a["id"] == data["activityId"])
    assert (act["type"], act["status"], act["resourceName"]) == ("resource_action", "success", "blog_db-data")


def test_a_remote_environment_keeps_its_own_sessions(sim):
    """upload.go:38: sessions live on the node (a remote environment's agent)."""
    upload_id = upload(sim, "image", blob(100), "a.tar", env=REMOTE)
    h = {"X-API-Key": sim.api_key}
    assert httpx.get(sim.url + f"/api/environments/{REMOTE}/uploads/image/{upload_id}", headers=h).status_code == 200
    assert httpx.get(sim.url + f"/api/environments/0/uploads/image/{upload_id}", headers=h).status_code == 404


# ================================================================ activities: a cancelled stream


def test_cancelling_a_running_pull(sim):
    """activity/service.go:775 CancelActivity (the request message; the running work ends itself cancelled); handler.go:242 (409 once ended)."""
    sim.set_knobs({"time_scale": 1.0, "stream_line_seconds": 0.2})
    h = {"X-API-Key": sim.api_key}
    with (
        httpx.Client(base_url=sim.url, headers=h, timeout=10) as c,
        c.stream("POST", "/api/environments/0/images/pull", json={"imageName": "redis", "tag": "8"}) as r,
    ):
        lines = r.iter_lines()
        first = json.loads(next(lines))
        activity = first["activityId"]
        cancelled = c.post(f"/api/environments/0/activities/{activity}/cancel").json()["data"]
        rest = [json.loads(line) for line in lines if line]
    assert cancelled["status"] == "running"  # the pre-cancel snapshot
    assert rest[-1] == {"error": "context canceled"}
    detail = httpx.get(sim.url + f"/api/environments/0/activities/{activity}", headers=h).json()["data"]
    assert detail["activity"]["status"] == "cancelled"
    levels = [(m["level"], m["message"]) for m in detail["messages"]]
    assert ("warning", "Cancellation requested by arcane") in levels and levels[-1] == ("warning", "Cancelled by user")
    r = httpx.post(sim.url + f"/api/environments/0/activities/{activity}/cancel", headers=h)
    assert (r.status_code, r.json()["detail"]) == (409, "activity is not running")
    r = httpx.post(sim.url + "/api/environments/0/activities/nope/cancel", headers=h)
    assert (r.status_code, r.json()["detail"]) == (404, "activity not found")


def test_a_pull_goes_on_when_its_client_leaves(sim):
    """utils/activity_context.go:63 (the work runs on the app's context); activity/writer.go (every line still persisted)."""
    sim.set_knobs({"time_scale": 1.0, "stream_line_seconds": 0.05})
    h = {"X-API-Key": sim.api_key}
    with (
        httpx.Client(base_url=sim.url, headers=h, timeout=10) as c,
        c.stream("POST", "/api/environments/0/images/pull", json={"imageName": "redis", "tag": "8"}) as r,
    ):
        activity = json.loads(next(r.iter_lines()))["activityId"]
    for _ in range(100):
        detail = httpx.get(sim.url + f"/api/environments/0/activities/{activity}", headers=h).json()["data"]
        if detail["activity"]["status"] != "running":
            break
        time.sleep(0.05)
    assert detail["activity"]["status"] == "success" and detail["messages"][-1]["message"] == "Image pull completed"


# ================================================================ faults on sockets


def test_a_socket_cut_after_n_frames(sim):
    """drop.after: N frames, then no close frame (1006)."""
    sim.set_faults({"drop": {"match": "ws-container-logs", "after": 2}})
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false"}) as conn:
        assert len(frames(conn, 2)) == 2
        assert closed_with(conn) == (None, "")
    [rec] = sim.sockets()
    assert (rec.sent, rec.closed_by) == (2, "abrupt")


def _poke(conn, name: str) -> None:
    """What makes a socket send its next frame: a terminal answers typed input; every other route sends on its own."""
    if ROUTES[name]["kind"] == "terminal":
        conn.send(b"echo poke\r")


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_socket_can_be_cut_mid_stream(sim, name):
    """drop.after on each route: its first frame, then the connection ends without a close frame (Arcane's CloseNow)."""
    sim.set_faults({"drop": {"match": name, "after": 1}})
    with ws(sim, route_path(name), query={"follow": "false"} if ROUTES[name]["kind"] == "logs" else None) as conn:
        assert frames(conn, 1)
        _poke(conn, name)
        assert closed_with(conn) == (None, "")
    [rec] = [r for r in sim.sockets() if r.route == name]
    assert (rec.sent, rec.closed_by) == (1, "abrupt")


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_socket_can_go_silent(sim, name):
    """stall on each route: its first frame, then silence, then it goes on (open all along)."""
    sim.set_faults({"stall": {"match": name, "after": 1, "seconds": 1.0}})
    with ws(sim, route_path(name), query={"follow": "false"} if ROUTES[name]["kind"] == "logs" else None) as conn:
        assert frames(conn, 1)
        _poke(conn, name)
        assert quiet(conn, 0.4)
        assert conn.recv(timeout=WAIT)


def test_a_silent_socket(sim):
    """stall: silence after N frames, then the stream goes on."""
    sim.set_faults({"stall": {"match": "/environments/*/ws/containers/*/logs", "after": 1, "seconds": 1.0}})
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false"}) as conn:
        conn.recv(timeout=WAIT)
        assert quiet(conn, 0.4)
        assert conn.recv(timeout=WAIT)


@pytest.mark.parametrize("status", [401, 403, 429])
def test_a_refused_upgrade(sim, status):
    """ws_refuse: the answer Arcane gives for that status, before any upgrade."""
    sim.set_faults({"ws_refuse": {"status": status, "match": "ws-system-stats", "count": 1}})
    got, body, _ = refused(sim, route_path("ws-system-stats"))
    assert got == status and json.loads(body)
    with ws(sim, route_path("ws-system-stats")) as conn:  # used up
        assert conn.response.status_code == 101
    assert [s.status for s in sim.sockets()] == [status, 101]


def test_a_dropped_upgrade(sim):
    sim.set_faults({"drop": {"match": "ws-container-logs", "count": 1}})
    # no HTTP answer at all: websockets reads the cut as EOF during the handshake
    with pytest.raises(InvalidMessage), ws(sim, route_path("ws-container-logs")):
        pass
    assert sim.sockets()[0].status == 0


def test_a_stream_cut_mid_way(sim):
    """drop.after on an operation stream: the client gets N lines; the pull still ends (its activity)."""
    sim.set_faults({"drop": {"match": "pull-image", "after": 3}})
    got = []
    with (
        pytest.raises(httpx.HTTPError), httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=WAIT) as c,
        c.stream("POST", "/api/environments/0/images/pull", json={"imageName": "redis", "tag": "8"}) as r,
    ):
        for line in r.iter_lines():
            if line:
                got.append(json.loads(line))
    assert len(got) == 3 and got[0]["type"] == "activity"


# ================================================================ records


def test_sockets_are_recorded_with_credentials_redacted(sim):
    """Records: path, query, headers (X-API-Key / Authorization / Cookie redacted), frames, close."""
    with ws(sim, route_path("ws-container-logs"), query={"follow": "false", "tail": "1"}) as conn:
        conn.recv(timeout=WAIT)
        conn.send("ignored by Arcane")
    rec = sim.sockets()[0]
    assert (rec.route, rec.path, dict(rec.query), rec.environment) == ("ws-container-logs", route_path("ws-container-logs"),
                                                                      {"follow": "false", "tail": "1"}, LOCAL)
    assert rec.header("x-api-key") == "[redacted]" and rec.credential == "api_key"
    assert not any("token" in k.lower() or sim.api_key in v for k, v in rec.query)
    assert rec.received == (("text", "ignored by Arcane"),) and rec.closed_by == "client"
    handshake = [r for r in sim.requests() if r.path == rec.path]
    assert handshake and handshake[0].method == "GET" and handshake[0].header("x-api-key") == "[redacted]"
    over_http = httpx.get(sim.url + "/_sim/sockets").json()
    assert over_http[0]["route"] == "ws-container-logs" and over_http[0]["received"] == [["text", "ignored by Arcane"]]


def test_control_api_for_knobs_and_logs(sim):
    r = httpx.put(sim.url + "/_sim/knobs", json={"time_scale": 0.5, "exec_close": "2.8"})
    assert r.json()["exec_close"] == "2.8" and sim.knobs.time_scale == 0.5
    assert httpx.put(sim.url + "/_sim/knobs", json={"time_scale": 0}).status_code == 400
    assert httpx.put(sim.url + "/_sim/knobs", json={"bogus": 1}).status_code == 400
    assert httpx.post(sim.url + "/_sim/logs", json={"container": "blog-web-1", "text": "via the control API"}).status_code == 204
    download = httpx.get(sim.url + f"/api/environments/0/containers/{BLOG_WEB}/logs/download", headers={"X-API-Key": sim.api_key}).text
    assert download.splitlines()[-1].endswith(" via the control API")
    assert httpx.post(sim.url + "/_sim/logs", json={"container": "nope", "text": "x"}).status_code == 400


def test_the_log_download_holds_both_streams_in_time_order(sim):
    """2.12 DownloadLogs: stdout and stderr demultiplexed into one stream, every line timestamped, no marks."""
    text = httpx.get(sim.url + f"/api/environments/0/containers/{BLOG_WEB}/logs/download", headers={"X-API-Key": sim.api_key}).text
    stamps = [line.split(" ", 1)[0] for line in text.splitlines()]
    assert stamps == sorted(stamps) and len(stamps) == 6 and "[STDERR]" not in text


def test_the_data_names_a_source_for_every_live_behaviour():
    """The live side's citations are real ones (a file of Arcane, or a named upstream piece)."""
    live = [c for c in BEHAVIOUR.citations if Path(c.file).name in ("live.yaml", "uploads.yaml")]
    assert len(live) >= 40
    for c in live:
        assert "backend/" in c.src or "CHANGELOG" in c.src or "moby" in c.src, (c.pointer, c.src)



# ================================================================ framings and the version channel


def test_the_version_channel_says_the_running_version_once(sim):
    """2.14's version channel (live.yaml `channels.version`, unverified): a snapshot at once."""
    got, _ = live(sim, "version", count=3)
    versions = [g for g in got if g.get("channel") == "version"]
    assert len(versions) == 1 and set(versions[0]) == {"channel", "version", "timestamp"}
    assert versions[0]["version"]["type"] == "snapshot" and versions[0]["version"]["currentVersion"] == "2.12.0"


def test_live_framing_sse_frames_every_line_as_one_event(sim):
    sim.set_knobs({**FAST, "live_framing": "sse", "live_max_seconds": 0.3})
    with httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=WAIT) as c:
        r = c.get("/api/stream", params={"channels": "version"})
    assert r.headers["content-type"].split(";")[0] == "text/event-stream"
    events = [e for e in r.text.split("\n\n") if e]
    assert events and all(e.startswith("data: ") and "\n" not in e for e in events)
    assert json.loads(events[0][len("data: "):])["channel"] == "version"


def test_stream_framing_sse_names_the_activity_and_the_end(sim):
    """behaviour streams.sse (2.15 #4276, unverified): the same frames, one event each."""
    sim.set_knobs({**FAST, "stream_framing": "sse"})
    with httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=WAIT) as c:
        r = c.post(f"/api/environments/{LOCAL}/images/pull", json={"imageName": "redis", "tag": "8"})
    assert r.status_code == 200 and r.headers["content-type"].split(";")[0] == "text/event-stream"
    events = [dict(line.split(": ", 1) for line in e.split("\n")) for e in r.text.split("\n\n") if e]
    assert events[0]["event"] == "activity" and json.loads(events[0]["data"])["activityId"]
    assert events[-1] == {"event": "done", "data": '{"done":true}'}
    assert all("event" not in e and "log" in json.loads(e["data"]) for e in events[1:-1])


@pytest.mark.parametrize("knob", ["stream_framing", "live_framing"])
def test_a_framing_knob_names_what_it_accepts(sim, knob):
    from simulator import KnobError

    with pytest.raises(KnobError) as bad:
        sim.set_knobs({knob: "xml"})
    assert knob in str(bad.value) and "sse" in str(bad.value)
