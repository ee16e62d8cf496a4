"""The Arcane simulator: every operation answers something valid, lists page like Arcane,
state changes stick, streams and downloads have their shapes, the API key is enforced,
every fault knob is observable, requests are recorded, bad data files are refused.

One simulator serves the module; an autouse fixture resets its state, faults and records
before each test and fails the test if an answer broke the document.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.parse
from datetime import datetime
from email.utils import parsedate_to_datetime

import httpx
import pytest

from interpreter.catalog import build
from interpreter.errors import RuleError
from interpreter.simulator import FaultError, Simulator, start_simulator
from interpreter.simulator.model import BEHAVIOUR_PATH, DEMO_STATE_PATH

LOCAL = "0"
BLOG_WEB = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"  # running, has logs
BLOG_DB = "3bfb7be8accb681967c4bf56af9848f886cbc68e993fd299940bb072137ec2b7"  # running
GRAFANA = "cace491b69555e8d0f77747d47ae54e31ce4cc322fe51a7bdcf64402f3676ebf"  # exited
REMOTE = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

# Operations whose sample call is refused on purpose, and why (the answer is still a
# valid problem+json): the guard or check the behaviour file declares.
EXPECTED_REFUSALS = {
    "auth.login": 401,  # synthesised credentials are not a user's
    "auth.refresh": 401,  # a synthesised refresh token was never issued
    "container.delete": 500,  # the first container is running (Docker refuses without force)
    "container.unpause": 500,  # the first container is not paused
    "environment.delete": 400,  # the local environment cannot be deleted
    "image.remove": 500,  # the first image is in use
    "network.delete": 500,  # "bridge" is a pre-defined network
    "volume.remove": 500,  # the first volume is in use
}


@pytest.fixture(scope="module")
def catalog():
    return build()


@pytest.fixture(scope="module")
def sim(catalog):
    with start_simulator(catalog=catalog) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh(request):
    """Each test starts from the demo state with no faults and no records, and must leave
    no violation behind."""
    if "sim" not in request.fixturenames:
        yield
        return
    s = request.getfixturevalue("sim")
    s.reset()
    s.set_faults({})
    s.clear_requests()
    s.clear_violations()
    yield
    assert s.violations == [], [v.as_dict() for v in s.violations]


@pytest.fixture
def client(sim):
    with httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=10) as c:
        yield c


def ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")


# ---------------------------------------------------------------- every operation


def _sample_request(sim, action) -> dict:
    """A minimal valid request for one operation: path parameters naming existing items,
    required query/header parameters and a synthesised body."""
    doc = sim.simulator.doc
    path = action.path
    for name, value in sim.sample_path_params(action.id).items():
        path = path.replace("{" + name + "}", quoted(value))
    query, headers, kwargs = {}, {}, {}
    for p in doc.parameters(action.path, action.method):
        if p.get("required") and p["in"] in ("query", "header"):
            v = doc.synthesize(p.get("schema", {}))
            v = "x" if v in ("", None) else (str(v).lower() if isinstance(v, bool) else str(v))
            (query if p["in"] == "query" else headers)[p["name"]] = v
    body = doc.request_spec(action.path, action.method)
    if body.schema_pointer:
        kwargs["json"] = doc.synthesize(doc.resolve(body.schema_pointer))
    elif body.media_type and body.media_type.startswith("multipart/"):
        schema = doc.deref(doc.document["paths"][action.path][action.method.lower()]["requestBody"]["content"][body.media_type]["schema"])
        data, files = {}, {}
        for name, ps in (schema.get("properties") or {}).items():
            ps = doc.deref(ps)
            if ps.get("type") == "array" or ps.get("format") == "binary" or ps.get("contentMediaType"):
                files[name] = ("sample.txt", b"hello", "text/plain")
            else:
                data[name] = "{}"
        kwargs["data"], kwargs["files"] = data, files or {"file": ("sample.txt", b"", "text/plain")}
    elif body.media_type:
        kwargs["content"] = b"\x00\x01chunk"
        headers["Content-Type"] = body.media_type
    return {"method": action.method, "url": "/api" + path, "params": query, "headers": headers, **kwargs}


def test_every_operation_answers_valid(sim, catalog):
    operations = [a for a in catalog.all_actions.values() if a.operation_id]
    assert len(operations) >= 400
    refused = {}
    with httpx.Client(base_url=sim.url, timeout=10) as c:
        for action in operations:
            sim.reset()  # each operation sees the demo state, whatever the previous one changed
            login = c.post("/api/auth/login", json={"username": "arcane", "password": "arcane-admin"})
            token = login.json()["data"]["token"]
            req = _sample_request(sim, action)
            # both credentials: Bearer-only operations (passkeys, MFA) need the session
            req["headers"].update({"X-API-Key": sim.api_key, "Authorization": f"Bearer {token}"})
            r = c.request(**req)
            kind = action.response_kind
            if r.status_code >= 300:
                assert r.headers["content-type"] == "application/problem+json", (action.id, r.status_code, r.text)
                refused[action.id] = r.status_code
                continue
            if kind == "json":
                assert r.headers["content-type"].startswith("application/json"), action.id
                r.json()
            elif kind == "empty":
                assert r.content == b"", action.id
            elif kind in ("ndjson", "live_channel"):
                assert r.headers["content-type"] == "application/x-json-stream", action.id
                lines = ndjson(r.text)
                assert lines, action.id
                if kind == "ndjson":
                    assert lines[0]["type"] == "activity" and lines[-1] == {"done": True}, (action.id, lines)
            else:
                assert r.headers["content-disposition"].startswith("attachment; filename="), action.id
    assert refused == EXPECTED_REFUSALS
    assert sim.violations == []


def test_unlisted_operations_answer_their_minimal_schema(client):
    r = client.get("/api/version")
    assert r.status_code == 200
    assert set(r.json()) == {"$schema", "currentVersion", "updateAvailable"}  # VersionCheck: required members only
    # a paginated list without behaviour answers an empty page
    page = client.get("/api/users").json()
    assert page["data"] == [] and page["pagination"] == {"totalPages": 1, "totalItems": 0, "currentPage": 1, "itemsPerPage": 20}


# ---------------------------------------------------------------- lists


def test_paging_containers(client):
    first = client.get(f"/api/environments/{LOCAL}/containers").json()
    assert len(first["data"]) == 20
    assert first["pagination"] == {"totalPages": 3, "totalItems": 56, "currentPage": 1, "itemsPerPage": 20, "grandTotalItems": 56}
    assert first["counts"] == {"runningContainers": 33, "stoppedContainers": 23, "totalContainers": 56}

    last = client.get(f"/api/environments/{LOCAL}/containers", params={"start": 40, "limit": 20}).json()
    assert len(last["data"]) == 16 and last["pagination"]["currentPage"] == 3

    everything = client.get(f"/api/environments/{LOCAL}/containers", params={"limit": -1}).json()
    assert len(everything["data"]) == 56
    assert everything["pagination"]["totalPages"] == 1 and everything["pagination"]["itemsPerPage"] == 56
    ids = [c["id"] for c in everything["data"]]
    paged = [c["id"] for start in (0, 20, 40) for c in client.get(f"/api/environments/{LOCAL}/containers", params={"start": start}).json()["data"]]
    assert paged == ids

    capped = client.get(f"/api/environments/{LOCAL}/containers", params={"limit": 500}).json()
    assert capped["pagination"]["itemsPerPage"] == 100

    found = client.get(f"/api/environments/{LOCAL}/containers", params={"search": "BLOG", "sort": "name", "order": "desc"}).json()
    assert [c["names"] for c in found["data"]] == [["/blog-web-1"], ["/blog-db-1"]]
    assert found["pagination"]["totalItems"] == 2 and found["pagination"]["grandTotalItems"] == 56

    grouped = client.get(f"/api/environments/{LOCAL}/containers", params={"groupBy": "project", "limit": -1}).json()
    assert [g["groupName"] for g in grouped["groups"]] == ["blog", "monitoring", "No Project"]
    assert "groups" not in first


def test_list_is_per_environment(client):
    remote = client.get(f"/api/environments/{REMOTE}/containers").json()
    assert [c["names"][0] for c in remote["data"]] == ["/ci-runner", "/build-cache"]


def test_bad_query_parameter_is_a_422(client):
    r = client.get(f"/api/environments/{LOCAL}/containers", params={"limit": "many"})
    assert r.status_code == 422
    assert r.json()["errors"] == [{"location": "query.limit", "message": "invalid integer", "value": "many"}]


# ---------------------------------------------------------------- state changes


def test_stop_changes_state(sim, client):
    r = client.post(f"/api/environments/{LOCAL}/containers/blog-web-1/stop")
    assert r.status_code == 200 and r.json()["data"]["message"] == "Container stopped successfully"
    stored = next(c for c in sim.items("containers") if c["id"] == BLOG_WEB)
    assert stored["state"] == "exited"
    details = client.get(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}").json()["data"]
    assert details["state"] == {"status": "exited", "running": False} and details["name"] == "blog-web-1"
    assert client.get(f"/api/environments/{LOCAL}/containers/counts").json()["data"]["runningContainers"] == 32


def test_remove_refused_while_running_then_gone(sim, client):
    refused = client.delete(f"/api/environments/{LOCAL}/containers/{BLOG_DB}")
    assert refused.status_code == 500 and "container is running" in refused.json()["detail"]
    assert client.delete(f"/api/environments/{LOCAL}/containers/{GRAFANA}").status_code == 200
    assert client.delete(f"/api/environments/{LOCAL}/containers/{BLOG_DB}", params={"force": "true"}).status_code == 200
    assert {GRAFANA, BLOG_DB}.isdisjoint(c["id"] for c in sim.items("containers"))
    gone = client.get(f"/api/environments/{LOCAL}/containers/{GRAFANA}")
    assert gone.status_code == 404 and gone.headers["content-type"] == "application/problem+json"
    assert gone.json()["detail"] == f"Failed to retrieve container: Error response from daemon: No such container: {GRAFANA}"


def test_create_then_conflict(sim, client):
    r = client.post(f"/api/environments/{LOCAL}/containers", json={"name": "cache", "image": "redis:7"})
    assert r.status_code == 200
    created = r.json()["data"]
    assert created["name"] == "cache" and created["status"] == "created"
    assert any(c["names"] == ["/cache"] for c in sim.items("containers"))
    again = client.post(f"/api/environments/{LOCAL}/containers", json={"name": "cache", "image": "redis:7"})
    assert again.status_code == 500 and "is already in use" in again.json()["detail"]
    invalid = client.post(f"/api/environments/{LOCAL}/containers", json={"name": "x", "image": "y", "bogus": 1})
    assert invalid.status_code == 422 and invalid.json()["errors"][0]["location"] == "body"


def test_project_up_starts_its_containers(sim, client):
    r = client.post(f"/api/environments/{LOCAL}/projects/monitoring/up", json={})
    assert ndjson(r.text)[-1] == {"done": True}
    project = next(p for p in sim.items("projects") if p["name"] == "monitoring")
    assert project["status"] == "running" and project["runningCount"] == 2
    states = {c["names"][0]: c["state"] for c in sim.items("containers") if c["labels"].get("com.docker.compose.project") == "monitoring"}
    assert states == {"/monitoring-grafana-1": "running", "/monitoring-prometheus-1": "running"}


def test_reset_restores_the_demo_state(sim, client):
    client.post(f"/api/environments/{LOCAL}/containers/blog-web-1/stop")
    assert httpx.post(sim.url + "/_sim/reset").status_code == 204
    assert next(c for c in sim.items("containers") if c["id"] == BLOG_WEB)["state"] == "running"


# ---------------------------------------------------------------- streams and downloads


def test_ndjson_success_and_error_line(sim, client):
    ok = client.post(f"/api/environments/{LOCAL}/images/pull", json={"imageName": "traefik", "tag": "v3"})
    assert ok.status_code == 200 and ok.headers["content-type"] == "application/x-json-stream"
    lines = ndjson(ok.text)
    assert lines[0]["type"] == "activity" and lines[0]["activityId"]
    assert {"status": "Pull complete", "id": "a1b2c3d4e5f6", "progressDetail": {}} in lines
    assert lines[-1] == {"done": True}
    assert any(i["repoTags"] == ["traefik:v3"] for i in sim.items("images"))

    sim.set_faults({"ndjson_error": {"message": "pull access denied for nosuch", "match": "image.pull"}})
    failed = client.post(f"/api/environments/{LOCAL}/images/pull", json={"imageName": "nosuch"})
    assert failed.status_code == 200  # Arcane reports the failure in the stream, not the status
    lines = ndjson(failed.text)
    assert lines[0]["type"] == "activity" and lines[-1] == {"error": "pull access denied for nosuch"}
    assert {"done": True} not in lines
    assert not any("nosuch" in str(i["repoTags"]) for i in sim.items("images"))  # a failed pull adds nothing


def test_text_download_returns_the_logs_from_state(client):
    r = client.get(f"/api/environments/{LOCAL}/containers/blog-web-1/logs/download")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert r.headers["content-disposition"] == 'attachment; filename="blog-web-1.log"'
    assert "nginx/1.27.3" in r.text and r.text.endswith("\n")


def test_download_of_hostile_name_keeps_a_safe_header(sim, client):
    tricky = next(c for c in sim.items("containers") if c["names"][0].startswith("/tricky"))
    r = client.get(f"/api/environments/{LOCAL}/containers/{quoted(tricky['names'][0].lstrip('/'))}/logs/download")
    assert r.status_code == 200 and "\x1b[31mERROR" in r.text
    disposition = r.headers["content-disposition"]
    assert disposition.isascii() and "filename*=UTF-8''" in disposition


def test_hostile_values_are_served_unchanged(client):
    data = client.get(f"/api/environments/{LOCAL}/containers", params={"search": "tricky"}).json()["data"]
    assert len(data) == 1
    name, labels = data[0]["names"][0], data[0]["labels"]
    assert "*bold*" in name and "|" in name and "`tick`" in name and "\x1b[31m" in name and "\u202e" in name
    assert "\u200b" in labels["zero-width"] and "\u2028" in labels["newline"]


def test_binary_download(client):
    r = client.get(f"/api/environments/{LOCAL}/images/{quoted('nginx:1.27')}/export")
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-tar"
    assert r.headers["content-disposition"] == 'attachment; filename="nginx.tar"' and len(r.content) == 1024


def test_live_channel_is_bounded(client):
    start = time.monotonic()
    r = client.get("/api/stream", params={"channels": "environments,dashboard"})
    assert time.monotonic() - start < 2
    lines = ndjson(r.text)
    assert [l.get("channel") for l in lines[:2]] == ["environments", "dashboard"]
    assert lines[-1]["type"] == "heartbeat"


# ---------------------------------------------------------------- auth


def test_api_key_enforced(sim):
    url = sim.url + f"/api/environments/{LOCAL}/containers"
    missing = httpx.get(url)
    assert missing.status_code == 401 and missing.headers["content-type"] == "application/problem+json"
    assert missing.json()["detail"] == "Unauthorized: valid authentication required"
    wrong = httpx.get(url, headers={"X-API-Key": "arc_wrong"})
    assert wrong.status_code == 401 and wrong.json()["detail"] == "Unauthorized: invalid API key"
    assert httpx.get(url, headers={"x-api-key": sim.api_key}).status_code == 200  # any case
    assert httpx.get(url, headers={"X-API-KEY": sim.api_key}).status_code == 200
    assert httpx.get(sim.url + "/api/health").status_code == 200  # a public operation
    # a Bearer-only operation does not take the key
    assert httpx.get(sim.url + "/api/auth/me/passkeys", headers={"X-API-Key": sim.api_key}).status_code == 401


def test_sessions_refresh_and_expire(sim):
    login = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]
    assert login["status"] == "authenticated" and login["user"]["username"] == "arcane"
    bearer = {"Authorization": f"Bearer {login['token']}"}
    assert httpx.get(sim.url + "/api/auth/me", headers=bearer).json()["data"]["username"] == "arcane"
    assert sim.expire_sessions() == 1
    expired = httpx.get(sim.url + "/api/auth/me", headers=bearer)
    assert expired.status_code == 401 and expired.json()["detail"] == "Session expired. Please log in again."
    renewed = httpx.post(sim.url + "/api/auth/refresh", json={"refreshToken": login["refreshToken"]}).json()["data"]
    assert renewed["refreshToken"] != login["refreshToken"]  # rotated
    assert httpx.post(sim.url + "/api/auth/refresh", json={"refreshToken": login["refreshToken"]}).status_code == 401
    assert httpx.get(sim.url + "/api/auth/me", headers={"Authorization": f"Bearer {renewed['token']}"}).status_code == 200
    bad = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "nope"})
    assert bad.status_code == 401


def test_sessions_mfa_revocation_users_and_date(sim):
    # a user with passkey MFA: the password is right, a challenge is pending, no tokens
    mfa = httpx.post(sim.url + "/api/auth/login", json={"username": "mfa-user", "password": "mfa-user-password"})
    data = mfa.json()["data"]
    assert mfa.status_code == 200 and data["status"] == "mfa_required" and data["mfa"]["method"] == "passkey"
    assert "token" not in data and "refreshToken" not in data
    assert httpx.post(sim.url + "/api/auth/login", json={"username": "mfa-user", "password": "nope"}).status_code == 401
    # every answer's Date is the simulated clock: expiresAt is read against it
    login = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"})
    expires = datetime.fromisoformat(login.json()["data"]["expiresAt"].replace("Z", "+00:00"))
    assert (expires - parsedate_to_datetime(login.headers["date"])).total_seconds() == 86400
    assert login.headers.get_list("date") == [login.headers["date"]]  # uvicorn's own is off
    # revoking refresh tokens too: only a new login helps
    rt = login.json()["data"]["refreshToken"]
    assert httpx.delete(sim.url + "/_sim/sessions", params={"refresh": "true"}).json() == {"expired": 1}
    assert httpx.post(sim.url + "/api/auth/refresh", json={"refreshToken": rt}).status_code == 401
    # login users can change at runtime (until reset)
    assert httpx.put(sim.url + "/_sim/users", json=[{"username": "arcane", "password": "new"}]).status_code == 204
    assert httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).status_code == 401
    assert httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "new"}).status_code == 200
    assert httpx.put(sim.url + "/_sim/users", json=[{"username": "x"}]).status_code == 400
    sim.set_users([])
    assert sim.users == []
    sim.reset()
    assert [u["username"] for u in sim.users] == ["arcane", "mfa-user"]


# ---------------------------------------------------------------- environments and routes


def test_environment_proxy_answers(client):
    unknown = client.get("/api/environments/no-such-env/containers")
    assert unknown.status_code == 404 and unknown.json() == {"success": False, "data": {"error": "Environment not found"}}
    assert client.put(f"/api/environments/{REMOTE}", json={"enabled": False}).status_code == 200
    disabled = client.get(f"/api/environments/{REMOTE}/containers")
    assert disabled.status_code == 400 and disabled.json()["data"]["error"] == "Environment is disabled"
    assert client.get(f"/api/environments/{REMOTE}").json()["data"]["name"] == "build-agent"  # the rest kept


def test_unserved_routes_hit_the_catch_all(client):
    r = client.get("/api/no/such/route")
    assert r.status_code == 404 and r.json() == {"success": False, "error": "API endpoint not found: /api/no/such/route"}
    # a route Arcane serves outside OpenAPI (a WebSocket) is not simulated
    assert client.get(f"/api/environments/{LOCAL}/ws/containers/{BLOG_WEB}/logs").status_code == 404


# ---------------------------------------------------------------- faults


def test_fault_latency(sim, client):
    sim.set_faults({"latency": {"seconds": 0.3, "match": "container.list", "count": 1}})
    start = time.monotonic()
    client.get(f"/api/environments/{LOCAL}/containers")
    assert time.monotonic() - start >= 0.3
    start = time.monotonic()
    client.get(f"/api/environments/{LOCAL}/containers")
    assert time.monotonic() - start < 0.3  # the rule was used up


def test_fault_error_5xx_for_next_requests(sim, client):
    sim.set_faults({"error_5xx": {"status": 503, "match": "/environments/*/images*", "count": 2}})
    statuses = [client.get(f"/api/environments/{LOCAL}/images").status_code for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert client.get(f"/api/environments/{LOCAL}/containers").status_code == 200


def test_fault_drop(sim, client):
    sim.set_faults({"drop": {"match": "version.get", "count": 1}})
    with pytest.raises(httpx.RemoteProtocolError):
        client.get("/api/version")
    assert client.get("/api/version").status_code == 200


def test_fault_malformed(sim, client):
    sim.set_faults({"malformed": {"match": "container.list"}})
    r = client.get(f"/api/environments/{LOCAL}/containers")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        r.json()


def test_fault_daemon_down(sim, client):
    sim.set_faults({"daemon_down": LOCAL})
    get = client.get(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}")
    assert get.status_code == 404 and get.headers["content-type"] == "application/problem+json"
    assert get.json()["detail"].startswith("Failed to retrieve container: failed to connect to Docker")
    assert "Cannot connect to the Docker daemon" in get.json()["detail"]
    assert client.get(f"/api/environments/{LOCAL}/containers").status_code == 500
    assert client.get(f"/api/environments/{REMOTE}/containers").status_code == 200  # another host
    assert client.get(f"/api/environments/{LOCAL}").status_code == 200  # Arcane's own data


def test_faults_through_the_control_api(sim, client):
    assert httpx.put(sim.url + "/_sim/faults", json={"error_5xx": 502}).json() == {"error_5xx": [{"status": 502}]}
    assert client.get("/api/version").status_code == 502
    bad = httpx.put(sim.url + "/_sim/faults", json={"latency": "slow"})
    assert bad.status_code == 400 and "latency" in bad.json()["error"]
    assert httpx.get(sim.url + "/_sim/faults").json() == {"error_5xx": [{"status": 502}]}  # kept
    httpx.put(sim.url + "/_sim/faults", json={})
    assert client.get("/api/version").status_code == 200
    with pytest.raises(FaultError):
        sim.set_faults({"explode": True})


def test_faults_from_the_state_file_and_overrides(tmp_path, catalog):
    state = tmp_path / "state.yaml"
    text = DEMO_STATE_PATH.read_text(encoding="utf-8").replace("faults: {}", "faults: {error_5xx: {status: 504, match: version.get}}")
    state.write_text(text, encoding="utf-8")
    with start_simulator(state, catalog=catalog, api_key="arc_sim_override_key") as s:
        assert s.api_key == "arc_sim_override_key"
        assert httpx.get(s.url + "/api/version").status_code == 504
        assert httpx.get(s.url + "/api/health").status_code == 200
    with start_simulator(state, faults={}, catalog=catalog) as s:
        assert httpx.get(s.url + "/api/version").status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(s.url + "/api/health")  # stopped cleanly: nothing listens any more


# ---------------------------------------------------------------- records and control API


def test_requests_are_recorded_without_the_key(sim, client):
    client.post(f"/api/environments/{LOCAL}/containers", params={"dry": "1"}, json={"name": "rec", "image": "alpine:3.20"})
    httpx.get(sim.url + "/api/version", headers={"X-API-Key": "arc_wrong", "Authorization": "Bearer secret-token"})
    first, second = sim.requests()
    assert (first.method, first.path, first.query, first.action) == ("POST", "/api/environments/0/containers", (("dry", "1"),), "container.create")
    assert first.json() == {"name": "rec", "image": "alpine:3.20"}
    assert first.header("x-api-key") == "[redacted]" and first.credential == "api_key"
    assert second.credential == "invalid_api_key" and second.header("authorization") == "[redacted]"
    everything = json.dumps([r.as_dict() for r in sim.requests()])
    assert sim.api_key not in everything and "secret-token" not in everything
    over_http = httpx.get(sim.url + "/_sim/requests").json()
    assert [r["action"] for r in over_http] == ["container.create", "version.get"]
    assert httpx.delete(sim.url + "/_sim/requests").status_code == 204
    assert sim.requests() == []


def test_control_state_and_violations(sim, client):
    client.post(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}/stop")
    state = httpx.get(sim.url + "/_sim/state").json()
    stored = next(c for c in state["environments"][LOCAL]["containers"] if c["id"] == BLOG_WEB)
    assert stored["state"] == "exited"
    assert httpx.get(sim.url + "/_sim/violations").json() == []


def test_a_broken_behaviour_is_reported_as_a_violation(tmp_path, catalog):
    behaviour = tmp_path / "behaviour.yaml"
    text = BEHAVIOUR_PATH.read_text(encoding="utf-8").replace("totalContainers: {$count: {}}", "totalContainers: many", 1)
    behaviour.write_text(text, encoding="utf-8")
    with start_simulator(catalog=catalog, behaviour=behaviour) as s:
        r = httpx.get(s.url + f"/api/environments/{LOCAL}/containers", headers={"X-API-Key": s.api_key})
        assert r.status_code == 200
        [v] = s.violations
        assert v.action == "container.list" and any("totalContainers" in p for p in v.problems)
        assert httpx.get(s.url + "/_sim/violations").json()[0]["action"] == "container.list"


# ---------------------------------------------------------------- data files


def test_an_invalid_state_item_is_refused_with_its_line(tmp_path, catalog):
    state = tmp_path / "state.yaml"
    state.write_text(DEMO_STATE_PATH.read_text(encoding="utf-8").replace("status: Up 3 days (healthy)", "status: 3", 1), encoding="utf-8")
    with pytest.raises(RuleError) as err:
        Simulator(state, catalog=catalog)
    [problem] = err.value.problems
    assert problem.code == "sim_invalid_item" and problem.pointer == "/environments/0/containers/1"
    assert "status" in problem.message and problem.line > 1


def test_a_behaviour_naming_unknown_things_is_refused(tmp_path, catalog):
    behaviour = tmp_path / "behaviour.yaml"
    text = BEHAVIOUR_PATH.read_text(encoding="utf-8")
    text = text.replace("  container.get:\n", "  container.gett: {get: containers}\n  container.get:\n", 1)
    text = text.replace("data: {message: Container stopped successfully}", "data: {mesage: Container stopped successfully}", 1)
    behaviour.write_text(text, encoding="utf-8")
    with pytest.raises(RuleError) as err:
        Simulator(catalog=catalog, behaviour=behaviour)
    codes = sorted(p.code for p in err.value.problems)
    assert codes == ["sim_unknown_action", "sim_unknown_member"]
    assert any("did you mean container.get" in p.message for p in err.value.problems)


def test_demo_state_shape():
    s = Simulator()
    envs = [e["id"] for e in s.items("environments")]
    assert envs[0] == LOCAL and len(envs) == 3
    assert len(s.items("containers", LOCAL)) > 50
    for name in ("images", "projects", "volumes", "networks"):
        assert s.items(name, LOCAL), name
    assert {c["state"] for c in s.items("containers", LOCAL)} >= {"running", "exited", "paused", "created"}


# ---------------------------------------------------------------- the foreground entry point


def test_main_prints_its_url_and_key():
    proc = subprocess.Popen([sys.executable, "-c", "from interpreter.simulator import main; main()"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.fullmatch(r"arcane simulator: (http://127\.0\.0\.1:\d+) \(api key: (arc_sim_\w+)\)\n", line)
        assert m, line
        for _ in range(100):
            try:
                r = httpx.get(m.group(1) + "/api/environments/0/containers/counts", headers={"X-API-Key": m.group(2)})
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        assert r.json()["data"]["totalContainers"] == 56
    finally:
        proc.terminate()
        proc.wait(10)


# ---------------------------------------------------------------- the template language and fault rules


def test_templates():
    from interpreter.simulator.template import TemplateError, render

    ctx = {"item": {"created": 1767225600, "names": ["/web"], "labels": {"a.b": "x"}}, "body": {"name": "", "tag": "7"},
           "collection": [{"state": "running", "size": 2}, {"state": "exited", "size": 3}, {"state": "running", "size": 5}]}
    assert render("{item.created}", ctx) == 1767225600  # a lone placeholder keeps its type
    assert render("at {item.created|iso} {{literal}}", ctx) == "at 2026-01-01T00:00:00Z {literal}"
    assert render('{item.labels["a.b"]}-{item.names.0|lstrip:/}', ctx) == "x-web"
    assert render("{body.name ?? item.names.0}", ctx) == "/web"  # empty falls back
    assert render("{body.missing|default:latest}:{body.tag|int|add:1}", ctx) == "latest:8"
    assert render("{'redis:7'|before::}/{'redis:7'|after::}/{'redis'|after::|default:latest}", ctx) == "redis/7/latest"
    assert render({"n": {"$count": {"where": {"state": "running"}}}, "total": {"$sum": {"field": "size"}}}, ctx) == {"n": 2, "total": 10}
    groups = render({"$group": {"by": "state", "of": "collection"}}, ctx)
    assert [(g["groupName"], len(g["items"])) for g in groups] == [("running", 2), ("exited", 1)]
    for bad in ("{nope}", "{item.created|frobnicate}", {"$nope": 1}):
        with pytest.raises(TemplateError):
            render(bad, ctx)


def test_fault_rules_normalise_and_count_down():
    from interpreter.simulator.faults import Faults

    faults = Faults.from_spec({"latency": [0.1, {"seconds": 0.2, "match": "container.*"}], "error_5xx": {"status": 502, "count": 1},
                               "ndjson_error": "boom", "daemon_down": ["0", 7]})
    assert faults.as_dict() == {"latency": [{"seconds": 0.1}, {"match": ["container.*"], "seconds": 0.2}],
                                "error_5xx": [{"count": 1, "status": 502}], "ndjson_error": [{"message": "boom"}], "daemon_down": ["0", "7"]}
    first = faults.decide("container.list", "/environments/0/containers", "/api/environments/0/containers", streaming=False)
    assert (first.latency, first.error_status, first.ndjson_error) == (pytest.approx(0.3), 502, None)
    second = faults.decide("image.pull", "/environments/0/images/pull", "/api/environments/0/images/pull", streaming=True)
    assert (second.latency, second.error_status, second.ndjson_error) == (pytest.approx(0.1), None, "boom")
    for bad in ({"error_5xx": 404}, {"latency": -1}, {"drop": {"cout": 1}}, {"daemon_down": {"env": "0"}}):
        with pytest.raises(FaultError):
            Faults.from_spec(bad)
