"""The Arcane simulator as a piece of software: every operation answers something valid,
state changes stick, faults are observable, requests are recorded, bad data is refused,
the control API works, and nothing in it imports the engine.

What Arcane does (texts, statuses, frames, paging, headers) is asserted by the contract
suite (tests/test_simulator_contract.py); this module tests the machinery. One simulator
serves the module; an autouse fixture resets its state, faults and records before each
test and fails the test if an answer broke the document.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest

from simulator import FaultError, Simulator, check_data, start_simulator
from simulator.errors import DataError
from simulator.model import BEHAVIOUR_PATH, DEMO_STATE_PATH

LOCAL = "0"
BLOG_WEB = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"  # running, has logs
BLOG_DB = "3bfb7be8accb681967c4bf56af9848f886cbc68e993fd299940bb072137ec2b7"  # running
GRAFANA = "cace491b69555e8d0f77747d47ae54e31ce4cc322fe51a7bdcf64402f3676ebf"  # exited
MONITORING = "4a1e8b77-6c2d-4f90-b3e5-8d7c6b5a4f32"  # a stopped project
REMOTE = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "interpreter"
SIM_PACKAGE = ROOT / "simulator"

# Operations whose sample call is refused on purpose, and why (the answer is still a
# valid problem+json): the guard or check the behaviour data declares.
EXPECTED_REFUSALS = {
    "login": 401,  # synthesised credentials are not a user's
    "refresh-token": 401,  # a synthesised refresh token was never issued
    "delete-container": 500,  # the first container is running (Docker refuses without force)
    "unpause-container": 500,  # the first container is not paused
    "deleteEnvironment": 400,  # the local environment cannot be deleted
    "remove-image": 500,  # the first image is in use
    "delete-network": 500,  # "bridge" is a pre-defined network
    "remove-volume": 500,  # the first volume is in use
    "delete-api-key": 403,  # the first key is the static bootstrap key
    "update-api-key": 403,  # the same static key cannot be updated (apikey/handler.go:248)
    # the sample upload kind "sample" is none of image / volume-backup / build-workspace
    "create-upload-session": 403, "upload-chunk": 403, "get-upload-session": 403, "delete-upload-session": 403,
    # a synthesised uploadId names no upload session
    "upload-image": 404, "upload-volume-backup": 404, "builds-browse-upload": 404,
    "cancel-activity": 409,  # the first activity has ended (success)
    "create-project": 500,  # the sample `project` part `{}` has no Compose services (invalid compose file)
    # Swarm: a synthesised spec has no name / image / services; the first node is the only manager
    "create-swarm-config": 400, "create-swarm-secret": 400, "create-swarm-service": 400, "update-swarm-spec": 400,
    "deploy-swarm-stack": 400, "render-swarm-stack-config": 400,
    "demote-swarm-node": 500, "delete-swarm-node": 500,  # the last manager; a manager must be demoted first
    "rollback-swarm-service": 500,  # the demo service has no previous spec
    "get-swarm-stack-source": 404,  # the demo stack was deployed outside Arcane: no stored source
    "discover-system-backups": 400,  # the synthesised S3 destination ID names none
    "builds-browse-mkdir": 500, "builds-browse-delete": 500,  # no `path`: the workspace root
    "get-project-workspace-file": 404,  # the sample relativePath "x" is not a file the project holds
    # the Docker-side writes (simulator/data/behaviour: volumes-networks, images, webhooks, volume-backups)
    "connect-network-container": 500, "disconnect-network-container": 500,  # the synthesised container names none
    "tag-image": 400,  # the synthesised repository is empty
    "create-webhook": 400,  # the synthesised action does not fit the synthesised target type
    "restore-volume-backup-files": 400,  # the synthesised body names no paths
    # Arcane's own records: the synthesised bodies are empty where Arcane needs values
    "change-password": 400,  # no current password given
    "createContainerRegistry": 400, "createVariable": 400, "createUser": 400,  # an empty username / key, a weak password
    "create-or-update-notification-settings": 400, "search-settings": 400, "search-customize": 400,  # an empty provider / query
    "create-oidc-role-mapping": 400,  # role "x" does not exist
    "dispatch-notification": 401,  # the simulator holds no agent access token
    # the outside world a test contacts is unreachable from the simulator
    "testContainerRegistry": 400, "testGitRepository": 400, "test-notification": 500,
    "create-s3-destination": 400, "test-s3-destination-configuration": 400, "test-s3-destination": 400, "update-s3-destination": 400,
    # the first item is protected
    "delete-s3-destination": 409,  # a retained remote system backup uses it
    "deleteGitRepository": 500,  # a GitOps sync uses it
    "update-role": 403, "delete-role": 403,  # a built-in role
    "updateTemplate": 500, "deleteTemplate": 500,  # a remote template
    "deleteUser": 409,  # the built-in admin
    "pairEnvironment": 401,  # the bootstrap key is no environment's pairing key
    "createGitOpsSync": 500,  # repository "x" does not exist
    "performGitOpsSync": 500,  # the repository is unreachable
    "resolveGitOpsBackupConflict": 409,  # the first sync has no pending backup conflict
    "restart-job-worker": 400,  # the first job is not a continuous worker
    "cancel-job-run": 409,  # the first job run has ended
}
# Streams that fail inside the stream (HTTP 200, activity line, then {"error": …}).
EXPECTED_STREAM_FAILURES = {
    "pull-image",  # the synthesised image name "x" is in no registry
}


@pytest.fixture(scope="module")
def sim():
    with start_simulator() as s:
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
    s.set_knobs({})
    s.serve_document(None)
    s.rate_limits_enabled = True
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


# ---------------------------------------------------------------- independence


def _imports(path: Path, package: str) -> set[str]:
    """Every module one source file imports, at module level or inside a function, as an
    absolute dotted name (relative imports resolved against `package`), plus `mod.name`
    for each `from mod import name` (a submodule may be imported that way)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def _module_of(path: Path) -> tuple[str, str]:
    """(module, package) of a source file under the checkout."""
    rel = path.relative_to(ROOT).with_suffix("")
    module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
    return module, module if rel.name == "__init__" else module.rsplit(".", 1)[0]


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_simulator_imports_nothing_of_the_engine():
    """simulator/ is its own package: no file of it imports `interpreter` (at module level
    or inside a function), and what it does import is itself, the standard library or a
    declared dependency."""
    files = sorted(SIM_PACKAGE.rglob("*.py"))
    assert len(files) > 15
    reached: dict[str, set[str]] = {}
    for path in files:
        module, package = _module_of(path)
        for mod in _imports(path, package):
            reached.setdefault(_top(mod), set()).add(str(path.relative_to(ROOT)))
    assert "interpreter" not in reached, f"the simulator imports the engine in {sorted(reached['interpreter'])}"
    assert "simulator" in reached  # its relative imports were resolved, so an engine one would be seen
    allowed = set(sys.stdlib_module_names) | {"simulator", "ruamel", "jsonschema", "referencing", "starlette", "uvicorn"}
    assert set(reached) <= allowed, sorted(set(reached) - allowed)


def _imports_by_function(path: Path, package: str | None = None) -> list[tuple[str, str]]:
    """(imported module, the innermost function holding the import, or "<module>")."""
    package = package or _module_of(path)[1]
    out: list[tuple[str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            out.extend((name, inner) for name in _imports_of_node(child, package))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return out


def _imports_of_node(node: ast.AST, package: str) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        if node.level:
            parts = package.split(".")
            return {".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))}
        return {node.module or ""}
    return set()


def test_the_engine_imports_the_simulator_only_for_interp_simulate():
    """interpreter/ never imports simulator, but inside the CLI's `simulate` command (lazily)."""
    hits = {(str(path.relative_to(ROOT)), where) for path in sorted(PACKAGE.rglob("*.py"))
            for name, where in _imports_by_function(path) if _top(name) == "simulator"}
    assert hits == {("interpreter/commands/cli.py", "simulate")}


def test_the_import_scans_catch_what_they_look_for(tmp_path):
    """The scans themselves: an engine import (absolute, from-import, or inside a function)
    is seen, and the function holding it named, so the two tests above can fail."""
    bad = tmp_path / "bad.py"
    bad.write_text("import interpreter.rules_x\nfrom interpreter.build import load\n"
                   "def f():\n    from interpreter.build.catalog import build\n", encoding="utf-8")
    assert _imports(bad, "simulator") >= {"interpreter.rules_x", "interpreter.build.load", "interpreter.build.catalog"}
    engine = PACKAGE / "commands" / "cli.py"
    assert ("simulator", "simulate") in _imports_by_function(engine)
    assert ("simulator.errors", "simulate") in _imports_by_function(engine)
    nested = tmp_path / "nested.py"
    nested.write_text("class A:\n    def m(self):\n        import simulator.model\n", encoding="utf-8")
    assert _imports_by_function(nested, "interpreter") == [("simulator.model", "m")]
    # the running simulator holds no engine module either
    code = "import sys, simulator; simulator.check_data(); print(sorted(m for m in sys.modules if m.split('.')[0] == 'interpreter'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_the_data_check_runs_and_counts_citations():
    behaviour, state = check_data()
    assert len(behaviour.citations) > 400  # every operation's permission, plus the behaviours
    assert all(c.src for c in behaviour.citations)
    assert state.api_key and len(state.api_keys) > 1


def test_interp_validate_no_longer_reads_the_simulator_data():
    import inspect

    from interpreter.build import load, validate

    assert "SIMULATOR_FILES" not in vars(validate) and "SIMULATOR_FILES" not in vars(load)
    known = [*load.CATALOG_FILES, *load.RULE_FILES, *load.RULE_FOLDERS]
    assert known and not any("simulator" in name for name in known)
    assert "simulator" not in inspect.getsource(load.load_sources).split('"""')[-1]


# ---------------------------------------------------------------- every operation


def _sample_request(sim, op) -> dict:
    """A minimal valid request for one operation: path parameters naming existing items,
    required query/header parameters and a synthesised body."""
    doc = sim.simulator.doc
    path = op.path
    for name, value in sim.sample_path_params(op.operation_id).items():
        path = path.replace("{" + name + "}", quoted(value))
    query, headers, kwargs = {}, {}, {}
    for p in doc.parameters(op.path, op.method):
        if p.get("required") and p["in"] in ("query", "header"):
            v = doc.synthesize(p.get("schema", {}))
            v = "x" if v in ("", None) else (str(v).lower() if isinstance(v, bool) else str(v))
            (query if p["in"] == "query" else headers)[p["name"]] = v
    body = doc.request_spec(op.path, op.method)
    if body.schema_pointer:
        kwargs["json"] = doc.synthesize(doc.resolve(body.schema_pointer))
    elif body.media_type and body.media_type.startswith("multipart/"):
        schema = doc.deref(doc.document["paths"][op.path][op.method.lower()]["requestBody"]["content"][body.media_type]["schema"])
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
    return {"method": op.method, "url": "/api" + path, "params": query, "headers": headers, **kwargs}


def test_every_operation_answers_valid(sim):
    operations = list(sim.operations.values())
    assert len(operations) >= 400
    sim.rate_limits_enabled = False  # one login per operation, far above Arcane's 5 a minute
    sim.set_knobs({"time_scale": 0.01, "live_max_seconds": 0.1})  # the live channel ends, so a plain GET reads it whole
    kinds = {op.operation_id: sim.simulator.app.response_kind(op) for op in operations}
    refused = {}
    with httpx.Client(base_url=sim.url, timeout=10) as c:
        for op in operations:
            sim.reset()  # each operation sees the demo state, whatever the previous one changed
            token = c.post("/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]["token"]
            req = _sample_request(sim, op)
            # both credentials: Bearer-only operations (passkeys, MFA) need the session
            req["headers"].update({"X-API-Key": sim.api_key, "Authorization": f"Bearer {token}"})
            r = c.request(**req)
            kind = kinds[op.operation_id]
            if r.status_code == 501:
                # not simulated: marked so in the data, or a write with no behaviour at all
                b = sim.behaviour.operations.get(op.operation_id)
                assert (b is not None and b.get("not_simulated")) or (b is None and op.method not in ("GET", "HEAD")), op.operation_id
                assert r.headers["content-type"] == "application/problem+json", op.operation_id
                refused[op.operation_id] = 501
                continue
            if r.status_code >= 300:
                assert r.headers["content-type"] == "application/problem+json", (op.operation_id, r.status_code, r.text)
                refused[op.operation_id] = r.status_code
                continue
            if kind == "json":
                assert r.headers["content-type"].startswith("application/json"), op.operation_id
                r.json()
            elif kind == "empty":
                assert r.content == b"", op.operation_id
            elif kind in ("ndjson", "live"):
                assert r.headers["content-type"] == "application/x-json-stream", op.operation_id
                lines = ndjson(r.text)
                if kind == "ndjson":
                    end = {"done": True} if op.operation_id not in EXPECTED_STREAM_FAILURES else {"error": lines[-1].get("error")}
                    assert lines[0]["type"] == "activity" and lines[-1] == end and end != {"error": None}, (op.operation_id, lines)
                    assert all(set(line) == {"log"} for line in lines[1:-1]), (op.operation_id, lines)
            elif kind == "download":
                assert r.headers["content-disposition"].startswith("attachment; filename="), op.operation_id
            else:  # raw bytes (app images)
                assert "content-disposition" not in r.headers and r.content, op.operation_id
    behaviour = sim.simulator.app.behaviour.operations
    unmodelled = {op.operation_id for op in operations
                  if (op.operation_id not in behaviour and op.method not in ("GET", "HEAD"))
                  or (op.operation_id in behaviour and behaviour[op.operation_id].get("not_simulated"))}
    assert {o for o, status in refused.items() if status == 501} == unmodelled  # a write not modelled: 501, never a fake 2xx
    assert {o: status for o, status in refused.items() if status != 501} == EXPECTED_REFUSALS
    assert sim.violations == []


def test_unlisted_operations_answer_their_minimal_schema(client):
    r = client.get("/api/version")
    assert r.status_code == 200
    assert set(r.json()) == {"$schema", "currentVersion", "updateAvailable"}  # VersionCheck: required members only


def test_every_list_operation_has_demo_items(sim, client):
    """Every domain renders something: each list (paginated or a bare array) answers items."""
    token = client.post("/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]["token"]
    client.headers["Authorization"] = f"Bearer {token}"  # the Bearer-only lists (passkeys) need a session
    empty = []
    for op in sim.operations.values():
        b = sim.behaviour.operations.get(op.operation_id)
        data = json.dumps(b.get("data") or {}) if b is not None else ""
        if op.method != "GET" or b is None or not (b.kind == "list" or "$select" in data) or '"one": true' in data:
            continue
        if "{" in op.path.replace("{id}", ""):
            continue  # lists under another item (a service's tasks, an image's scan…) are covered below
        r = client.get("/api" + op.path.replace("{id}", LOCAL))
        assert r.status_code == 200, (op.operation_id, r.text)
        body = r.json()
        data = body["data"] if isinstance(body, dict) and "data" in body else body  # a bare array (settings categories…)
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            if not lists:
                continue  # an object read from the state (the job schedules), not a list
            data = lists[0]
        if not data:
            empty.append(op.operation_id)
    assert empty == []


def test_the_remote_agent_has_its_own_data(client):
    remote = client.get(f"/api/environments/{REMOTE}/containers").json()
    assert [c["names"][0] for c in remote["data"]] == ["/build-cache", "/ci-runner", "/registry-mirror"]
    assert client.get(f"/api/environments/{REMOTE}/projects").json()["data"][0]["name"] == "ci"


def test_container_inspect_carries_what_docker_shows(client):
    data = client.get(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}").json()["data"]
    assert any(e.startswith("GH_PAT=ghp_") for e in data["config"]["env"])
    assert any(re.match(r"\w+_URL=postgres://[^:]+:[^@]+@", e) for e in data["config"]["env"])
    assert data["config"]["entrypoint"] and data["config"]["cmd"] and data["config"]["healthcheck"]["test"]
    assert data["state"]["health"]["log"][-1]["exitCode"] == 0  # oldest first: the newest check passed
    assert "traefik.http.middlewares.blog-auth.basicauth.users" in data["labels"]
    assert data["labels"]["com.docker.compose.project"] == "blog"
    assert data["mounts"] and data["networkSettings"]["networks"]


# ---------------------------------------------------------------- state changes


def test_stop_changes_state(sim, client):
    r = client.post(f"/api/environments/{LOCAL}/containers/blog-web-1/stop")
    assert r.status_code == 200 and r.json()["data"]["message"] == "Container stopped successfully"
    stored = next(c for c in sim.items("containers") if c["id"] == BLOG_WEB)
    assert stored["state"] == "exited"
    details = client.get(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}").json()["data"]
    assert details["state"]["status"] == "exited" and details["state"]["running"] is False and details["name"] == "blog-web-1"
    assert client.get(f"/api/environments/{LOCAL}/containers/counts").json()["data"]["runningContainers"] == 32


def test_restart_moves_started_at_and_status(sim, client):
    before = client.get(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}").json()["data"]["state"]["startedAt"]
    client.post(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}/restart")
    after = client.get(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}").json()["data"]["state"]
    assert after["startedAt"] > before and after["running"] is True
    assert next(c for c in sim.items("containers") if c["id"] == BLOG_WEB)["status"] == "Up Less than a second"


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
    r = client.post(f"/api/environments/{LOCAL}/projects/{MONITORING}/up", json={})
    assert ndjson(r.text)[-1] == {"done": True}
    project = next(p for p in sim.items("projects") if p["id"] == MONITORING)
    assert project["status"] == "running" and project["runningCount"] == 2
    states = {c["names"][0]: c["state"] for c in sim.items("containers") if c["labels"].get("com.docker.compose.project") == "monitoring"}
    assert states == {"/monitoring-grafana-1": "running", "/monitoring-prometheus-1": "running"}


def test_docker_info_counts_what_the_state_holds(sim, client):
    info = client.get(f"/api/environments/{LOCAL}/system/docker/info").json()
    containers = sim.items("containers")
    assert info["Containers"] == len(containers) and info["Images"] == len(sim.items("images"))
    assert info["ContainersRunning"] == sum(c["state"] == "running" for c in containers)
    assert info["ContainersPaused"] == sum(c["state"] == "paused" for c in containers) == 1
    client.post(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}/stop")
    after = client.get(f"/api/environments/{LOCAL}/system/docker/info").json()
    assert (after["ContainersRunning"], after["ContainersStopped"]) == (info["ContainersRunning"] - 1, info["ContainersStopped"] + 1)


def test_reset_restores_the_demo_state(sim, client):
    client.post(f"/api/environments/{LOCAL}/containers/blog-web-1/stop")
    assert httpx.post(sim.url + "/_sim/reset").status_code == 204
    assert next(c for c in sim.items("containers") if c["id"] == BLOG_WEB)["state"] == "running"


# ---------------------------------------------------------------- streams and downloads


def test_ndjson_success_and_a_failure_fault(sim, client):
    ok = client.post(f"/api/environments/{LOCAL}/images/pull", json={"imageName": "traefik", "tag": "v3"})
    lines = ndjson(ok.text)
    assert lines[0]["type"] == "activity" and lines[-1] == {"done": True}
    assert {"log": "Status: Downloaded newer image for traefik:v3"} in lines
    assert any(i["repoTags"] == ["traefik:v3"] for i in sim.items("images"))

    sim.set_faults({"ndjson_error": {"message": "toomanyrequests: rate limit", "match": "pull-image"}})
    failed = client.post(f"/api/environments/{LOCAL}/images/pull", json={"imageName": "caddy"})
    assert failed.status_code == 200
    lines = ndjson(failed.text)
    assert lines[0]["type"] == "activity" and lines[-1] == {"error": "toomanyrequests: rate limit"}
    assert not any("caddy" in str(i["repoTags"]) for i in sim.items("images"))  # a failed pull adds nothing


def test_stall_fault_goes_quiet_mid_stream(sim):
    """After the frames it names, the stream says nothing for longer than a reader's
    timeout: a reader with a short per-read timeout gets those frames, then times out."""
    sim.set_faults({"stall": {"seconds": 2, "after": 2, "match": "pull-image", "count": 1}})
    got = []
    timeout = httpx.Timeout(10, read=0.5)
    with (
        httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=timeout) as c, pytest.raises(httpx.ReadTimeout),
        c.stream("POST", f"/api/environments/{LOCAL}/images/pull", json={"imageName": "redis", "tag": "8"}) as r,
    ):
        for line in r.iter_lines():
            if line:
                got.append(json.loads(line))
    assert got[0]["type"] == "activity" and got[1] == {"log": "8: Pulling from library/redis"} and len(got) == 2
    # used up: the next pull streams to the end
    with httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=timeout) as c:
        assert ndjson(c.post(f"/api/environments/{LOCAL}/images/pull", json={"imageName": "redis", "tag": "8"}).text)[-1] == {"done": True}


def test_hostile_values_are_served_unchanged(client):
    data = client.get(f"/api/environments/{LOCAL}/containers", params={"search": "tricky"}).json()["data"]
    assert len(data) == 1
    name, labels = data[0]["names"][0], data[0]["labels"]
    assert "*bold*" in name and "|" in name and "`tick`" in name and "\x1b[31m" in name and "\u202e" in name
    assert "\u200b" in labels["zero-width"] and "\u2028" in labels["newline"]


def test_live_channel_ends_only_when_a_knob_bounds_it(sim, client):
    """Arcane's /stream never ends; the live_max_seconds knob ends the simulator's (demos)."""
    sim.set_knobs({"time_scale": 0.01, "live_max_seconds": 0.3})
    lines = ndjson(client.get("/api/stream", params={"channels": "environments,dashboard"}).text)
    assert [line.get("channel") for line in lines[:2]] == ["environments", "dashboard"]
    assert any(line.get("type") == "heartbeat" for line in lines)
    sim.set_knobs({"time_scale": 0.01})  # unbounded: it goes on past any number of heartbeats
    with httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=5) as c, c.stream("GET", "/api/stream") as r:
        beats = []
        for line in r.iter_lines():
            beats.append(json.loads(line))
            if len(beats) == 12:
                break
    assert [b["type"] for b in beats] == ["heartbeat"] * 12  # no channels: heartbeats only


# ---------------------------------------------------------------- auth, keys, sessions


def test_sessions_refresh_and_expire(sim):
    login = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]
    assert login["status"] == "authenticated" and login["user"]["username"] == "arcane"
    bearer = {"Authorization": f"Bearer {login['token']}"}
    assert httpx.get(sim.url + "/api/auth/me", headers=bearer).json()["data"]["username"] == "arcane"
    assert sim.expire_sessions() == 1
    assert httpx.get(sim.url + "/api/auth/me", headers=bearer).status_code == 401
    renewed = httpx.post(sim.url + "/api/auth/refresh", json={"refreshToken": login["refreshToken"]}).json()["data"]
    assert renewed["refreshToken"] != login["refreshToken"]  # rotated
    assert httpx.post(sim.url + "/api/auth/refresh", json={"refreshToken": login["refreshToken"]}).status_code == 401
    assert httpx.get(sim.url + "/api/auth/me", headers={"Authorization": f"Bearer {renewed['token']}"}).status_code == 200


def test_sessions_mfa_revocation_users_and_date(sim):
    mfa = httpx.post(sim.url + "/api/auth/login", json={"username": "mfa-user", "password": "mfa-user-password"})
    data = mfa.json()["data"]
    assert mfa.status_code == 200 and data["status"] == "mfa_required" and data["mfa"]["method"] == "passkey"
    assert "token" not in data and "refreshToken" not in data
    login = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"})
    expires = datetime.fromisoformat(login.json()["data"]["expiresAt"].replace("Z", "+00:00"))
    assert (expires - parsedate_to_datetime(login.headers["date"])).total_seconds() == 86400
    assert login.headers.get_list("date") == [login.headers["date"]]  # uvicorn's own is off
    rt = login.json()["data"]["refreshToken"]
    assert httpx.delete(sim.url + "/_sim/sessions", params={"refresh": "true"}).json() == {"expired": 1}
    assert httpx.post(sim.url + "/api/auth/refresh", json={"refreshToken": rt}).status_code == 401
    assert httpx.put(sim.url + "/_sim/users", json=[{"username": "arcane", "password": "new"}]).status_code == 204
    assert httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "new"}).status_code == 200
    assert httpx.put(sim.url + "/_sim/users", json=[{"username": "x"}]).status_code == 400
    assert httpx.put(sim.url + "/_sim/users", json=[{"username": "x", "password": "y", "roles": [{"role": "role_nope"}]}]).status_code == 400
    sim.set_users([])
    assert sim.users == []
    sim.reset()
    assert [u["username"] for u in sim.users] == ["arcane", "mfa-user", "ops-viewer", "ci-deployer"]


def test_scoped_keys_added_at_runtime_and_through_the_control_api(sim):
    sim.add_api_key("arc_sim_test_only_list", ["containers:list"])
    url = sim.url + f"/api/environments/{LOCAL}/containers"
    assert httpx.get(url, headers={"X-API-Key": "arc_sim_test_only_list"}).status_code == 200
    assert httpx.get(url + f"/{BLOG_WEB}", headers={"X-API-Key": "arc_sim_test_only_list"}).status_code == 403
    assert httpx.post(sim.url + "/_sim/api-keys", json={"key": "arc_sim_via_http_key", "permissions": ["containers:read"],
                                                       "environment": LOCAL}).status_code == 204
    assert httpx.get(url + f"/{BLOG_WEB}", headers={"X-API-Key": "arc_sim_via_http_key"}).status_code == 200
    listed = {k["name"]: k for k in httpx.get(sim.url + "/_sim/api-keys").json()}
    assert listed["arc_sim_via_"]["permissions"] == [{"permission": "containers:read", "environmentId": None}]
    assert sim.api_key not in json.dumps(listed)  # the control API lists keys without their secret
    assert httpx.post(sim.url + "/_sim/api-keys", json={"key": "arc_sim_bad_perm_key", "permissions": ["nope:nope"]}).status_code == 400
    sim.reset()
    assert httpx.get(url, headers={"X-API-Key": "arc_sim_test_only_list"}).status_code == 401


def test_clock_knob_expires_keys(sim):
    sim.add_api_key("arc_sim_short_lived", ["containers:list"], expires_at=sim.simulator.now() + 60)
    url = sim.url + f"/api/environments/{LOCAL}/containers"
    assert httpx.get(url, headers={"X-API-Key": "arc_sim_short_lived"}).status_code == 200
    now = httpx.post(sim.url + "/_sim/clock", json={"advance": 120}).json()["now"]
    assert now == sim.simulator.now()
    assert httpx.get(url, headers={"X-API-Key": "arc_sim_short_lived"}).status_code == 401


# ---------------------------------------------------------------- served document


def test_openapi_json_is_the_served_document_and_can_drift(sim, tmp_path):
    served = httpx.get(sim.url + "/api/openapi.json").json()  # no credential needed
    assert served["info"]["version"] == sim.simulator.doc.document["info"]["version"]
    drifted = json.loads(json.dumps(served))
    drifted["info"]["version"] = "2.99.0"
    assert httpx.put(sim.url + "/_sim/openapi", json=drifted).json() == {"version": "2.99.0"}
    assert httpx.get(sim.url + "/api/openapi.json").json()["info"]["version"] == "2.99.0"
    assert httpx.delete(sim.url + "/_sim/openapi").json()["version"] == served["info"]["version"]


def test_started_with_another_document(tmp_path):
    """Another version of the document: its operations are served, the data of the ones it
    lacks is skipped, and /api/openapi.json answers it."""
    document = json.loads(Path(sys.modules["simulator.document"].DOCUMENT_PATH).read_text(encoding="utf-8"))
    document["info"]["version"] = "2.13.0"
    del document["paths"]["/environments/{id}/containers/{containerId}/logs/download"]
    path = tmp_path / "arcane-2.13.0.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with start_simulator(document=path) as s:
        assert "download-container-logs" in s.behaviour.skipped
        assert httpx.get(s.url + "/api/openapi.json").json()["info"]["version"] == "2.13.0"
        headers = {"X-API-Key": s.api_key}
        assert httpx.get(s.url + f"/api/environments/0/containers/{BLOG_WEB}/logs/download", headers=headers).status_code == 404
        assert httpx.get(s.url + "/api/environments/0/containers", headers=headers).status_code == 200
        assert s.violations == []


# ---------------------------------------------------------------- faults


def test_fault_latency_delays_only_what_it_matches(sim, client):
    """Ordering, not timing: a delayed list finishes after an undelayed call started later."""
    sim.set_faults({"latency": {"seconds": 0.5, "match": "list-containers", "count": 1}})
    finished = []

    def slow():
        client.get(f"/api/environments/{LOCAL}/containers")
        finished.append("list-containers")

    worker = threading.Thread(target=slow)
    worker.start()
    while not any(r.operation == "list-containers" for r in sim.requests()):
        time.sleep(0.01)
    with httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}) as other:
        other.get("/api/version")
    finished.append("getVersion")
    worker.join()
    assert finished == ["getVersion", "list-containers"]
    assert sim.simulator.faults.as_dict() == {}  # the counted rule was used up


def test_fault_error_5xx_for_next_requests(sim, client):
    sim.set_faults({"error_5xx": {"status": 503, "match": "/environments/*/images*", "count": 2}})
    statuses = [client.get(f"/api/environments/{LOCAL}/images").status_code for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert client.get(f"/api/environments/{LOCAL}/containers").status_code == 200


def test_fault_drop(sim, client):
    sim.set_faults({"drop": {"match": "getVersion", "count": 1}})
    with pytest.raises(httpx.RemoteProtocolError):
        client.get("/api/version")
    assert client.get("/api/version").status_code == 200


def test_fault_malformed(sim, client):
    sim.set_faults({"malformed": {"match": "list-containers"}})
    r = client.get(f"/api/environments/{LOCAL}/containers")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        r.json()


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
    with pytest.raises(FaultError, match="names no operation"):
        sim.set_faults({"drop": {"match": "container.lsit"}})  # a typo would match nothing, silently


def test_labels_name_operations_for_records_and_faults():
    with start_simulator(labels={"list-containers": "container.list"}) as s:
        s.set_faults({"error_5xx": {"status": 503, "match": "container.list", "count": 1}})
        r = httpx.get(s.url + "/api/environments/0/containers", headers={"X-API-Key": s.api_key})
        assert r.status_code == 503
        [rec] = s.requests()
        assert (rec.operation, rec.action) == ("list-containers", "container.list")


def test_faults_from_the_state_file_and_overrides(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    for f in DEMO_STATE_PATH.glob("*.yaml"):
        text = f.read_text(encoding="utf-8").replace("faults: {}", "faults: {error_5xx: {status: 504, match: getVersion}}")
        (state / f.name).write_text(text, encoding="utf-8")
    with start_simulator(state, api_key="arc_sim_override_key") as s:
        assert s.api_key == "arc_sim_override_key"
        assert httpx.get(s.url + "/api/version").status_code == 504
        assert httpx.get(s.url + "/api/health").status_code == 200
        assert httpx.get(s.url + "/api/environments/0/containers", headers={"X-API-Key": "arc_sim_override_key"}).status_code == 200
    with start_simulator(state, faults={}) as s:
        assert httpx.get(s.url + "/api/version").status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(s.url + "/api/health")  # stopped cleanly: nothing listens any more


# ---------------------------------------------------------------- records and control API


def test_requests_are_recorded_without_the_key(sim, client):
    client.post(f"/api/environments/{LOCAL}/containers", params={"dry": "1"}, json={"name": "rec", "image": "alpine:3.20"})
    httpx.get(sim.url + "/api/version", headers={"X-API-Key": "arc_wrong", "Authorization": "Bearer secret-token"})
    first, second = sim.requests()
    assert (first.method, first.path, first.query, first.operation) == ("POST", "/api/environments/0/containers", (("dry", "1"),), "create-container")
    assert first.json() == {"name": "rec", "image": "alpine:3.20"}
    assert first.header("x-api-key") == "[redacted]" and first.credential == "api_key"
    assert second.credential == "invalid_api_key" and second.header("authorization") == "[redacted]"
    everything = json.dumps([r.as_dict() for r in sim.requests()])
    assert sim.api_key not in everything and "secret-token" not in everything
    over_http = httpx.get(sim.url + "/_sim/requests").json()
    assert [r["operation"] for r in over_http] == ["create-container", "getVersion"]
    assert httpx.delete(sim.url + "/_sim/requests").status_code == 204
    assert sim.requests() == []


def test_control_state_and_violations(sim, client):
    client.post(f"/api/environments/{LOCAL}/containers/{BLOG_WEB}/stop")
    state = httpx.get(sim.url + "/_sim/state").json()
    stored = next(c for c in state["environments"][LOCAL]["containers"] if c["id"] == BLOG_WEB)
    assert stored["state"] == "exited"
    assert httpx.get(sim.url + "/_sim/violations").json() == []


def _copy_behaviour(tmp_path: Path) -> Path:
    target = tmp_path / "behaviour"
    target.mkdir()
    for f in BEHAVIOUR_PATH.glob("*.yaml"):
        (target / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    return target


def test_a_broken_behaviour_is_reported_as_a_violation(tmp_path):
    behaviour = _copy_behaviour(tmp_path)
    f = behaviour / "containers.yaml"
    f.write_text(f.read_text(encoding="utf-8").replace("totalContainers: {$count: {}}", "totalContainers: many", 1), encoding="utf-8")
    with start_simulator(behaviour=behaviour) as s:
        r = httpx.get(s.url + f"/api/environments/{LOCAL}/containers", headers={"X-API-Key": s.api_key})
        assert r.status_code == 200
        [v] = s.violations
        assert v.operation == "list-containers" and any("totalContainers" in p for p in v.problems)
        assert httpx.get(s.url + "/_sim/violations").json()[0]["operation"] == "list-containers"


# ---------------------------------------------------------------- data files


def test_an_invalid_state_item_is_refused_with_its_line(tmp_path):
    state = tmp_path / "state.yaml"
    text = (DEMO_STATE_PATH / "docker.yaml").read_text(encoding="utf-8").replace("status: Up 3 days (healthy)", "status: 3", 1)
    (tmp_path / "core.yaml").write_text((DEMO_STATE_PATH / "core.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    state.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as err:
        Simulator(tmp_path)
    [problem] = err.value.problems
    assert problem.code == "sim_invalid_item" and problem.pointer == "/environments/0/containers/1"
    assert "status" in problem.message and problem.line > 1 and problem.file.endswith("state.yaml")


def test_a_behaviour_naming_unknown_things_is_refused(tmp_path):
    behaviour = _copy_behaviour(tmp_path)
    f = behaviour / "containers.yaml"
    text = f.read_text(encoding="utf-8")
    text = text.replace("  get-container:\n", "  get-containr: {get: containers, src: nowhere.go}\n  get-container:\n", 1)
    text = text.replace("data: {message: Container stopped successfully,", "data: {mesage: Container stopped successfully,", 1)
    f.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as err:
        check_data(behaviour)
    codes = sorted(p.code for p in err.value.problems)
    assert codes == ["sim_unknown_member", "sim_unknown_operation"]
    assert any("did you mean get-container" in p.message for p in err.value.problems)


def test_an_uncited_behaviour_is_refused(tmp_path):
    behaviour = _copy_behaviour(tmp_path)
    f = behaviour / "projects.yaml"
    text = f.read_text(encoding="utf-8").replace("    src: backend/internal/project/handler.go:786 GetProject\n", "", 1)
    f.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as err:
        check_data(behaviour)
    [problem] = err.value.problems
    assert problem.code == "schema.required" and problem.pointer == "/operations/get-project" and "src" in problem.message


def test_a_missing_permission_entry_is_refused(tmp_path):
    behaviour = _copy_behaviour(tmp_path)
    f = behaviour / "permissions.yaml"
    f.write_text("\n".join(line for line in f.read_text(encoding="utf-8").splitlines() if not line.startswith("    list-containers:")) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        check_data(behaviour)
    assert [p.code for p in err.value.problems] == ["sim_permission_missing"]


def test_the_reading_bounds_leave_room_above_every_shipped_file():
    """simulator/yamlfile.py's bounds are each a multiple of the biggest shipped data file."""
    from simulator import yamlfile

    files = sorted((SIM_PACKAGE / "data").rglob("*.yaml"))
    assert len(files) > 15
    most_bytes = most_nodes = deepest = 0
    for path in files:
        y = yamlfile.parser()
        levels = [0]

        def compose_node(self, parent, index, _levels=levels, _base=y.Composer.compose_node):
            _levels[0] = max(_levels[0], self.depth + 1)
            return _base(self, parent, index)

        y.Composer = type("Counting", (y.Composer,), {"compose_node": compose_node})
        y.compose(path.read_text(encoding="utf-8"))
        most_bytes, most_nodes = max(most_bytes, path.stat().st_size), max(most_nodes, y._composer.count)
        deepest = max(deepest, levels[0])
    assert 4 * most_bytes <= yamlfile.MAX_BYTES and 6 * most_nodes <= yamlfile.MAX_NODES and 4 * deepest <= yamlfile.MAX_DEPTH


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


@pytest.mark.parametrize(("text", "code"), [
    ("[" * 10_000 + "]" * 10_000, "yaml_too_deep"),  # flow nesting: refused by the scanner
    ("".join("  " * i + "k:\n" for i in range(200)), "yaml_too_deep"),  # block nesting: refused by the composer
    (LAUGHS, "yaml_alias_bomb"),  # a billion laughs
    ("a: &a [1, *a]\n", "yaml_recursive_alias"),
    ("items: [" + ", ".join("1" for _ in range(25_000)) + "]\n", "yaml_too_large"),  # nodes
    ("x: '" + "y" * (300 * 1024) + "'\n", "yaml_too_large"),  # bytes
    ("a: [1, 2\n", "parse_error"),
    ("k: \x00\n", "parse_error"),  # a control character
])
def test_a_hostile_state_file_is_one_problem_not_a_hang(tmp_path, text, code):
    state = tmp_path / "state.yaml"
    state.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as err:
        Simulator(state)
    [problem] = err.value.problems
    assert problem.code == code and problem.file == str(state) and problem.line >= 1


def test_a_state_that_is_not_a_regular_file_is_not_read(tmp_path):
    import os

    fifo = tmp_path / "state.yaml"
    os.mkfifo(fifo)
    with pytest.raises(DataError) as err:
        Simulator(fifo)  # a FIFO with no writer would block a plain open()
    assert [p.code for p in err.value.problems] == ["unreadable"]


@pytest.mark.parametrize("content", [None, "{not json", "[1, 2]", "\ud800"])
def test_an_unreadable_document_is_one_problem(tmp_path, content):
    document = tmp_path / "openapi.json"
    if content is not None:
        document.write_text(content, encoding="utf-8", errors="surrogatepass")
    with pytest.raises(DataError) as err:
        Simulator(document=document)
    assert [(p.code, p.file) for p in err.value.problems] == [("sim_no_document", str(document))]


def test_demo_state_shape():
    s = Simulator()
    envs = [e["id"] for e in s.items("environments")]
    assert envs[0] == LOCAL and len(envs) == 3
    assert len(s.items("containers", LOCAL)) > 50
    for name in ("images", "projects", "volumes", "networks"):
        assert s.items(name, LOCAL) and s.items(name, REMOTE), name
    assert {c["state"] for c in s.items("containers", LOCAL)} >= {"running", "exited", "paused", "created"}
    assert s.items("users")[0]["username"] == "arcane"


# ---------------------------------------------------------------- the foreground entry point


def test_main_prints_its_url_and_key():
    proc = subprocess.Popen([sys.executable, "-c", "from simulator import main; main()"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.fullmatch(r"arcane simulator: (http://127\.0\.0\.1:\d+) \(api key: (arc_sim_\w+)\)\n", line)
        assert m, line
        r = httpx.get(m.group(1) + "/api/environments/0/containers/counts", headers={"X-API-Key": m.group(2)})
        assert r.json()["data"]["totalContainers"] == 56
    finally:
        proc.terminate()
        proc.wait(10)


# ---------------------------------------------------------------- the template language and fault rules


def test_templates():
    from simulator.template import TemplateError, render

    ctx = {"item": {"created": 1767225600, "names": ["/web"], "labels": {"a.b": "x"}, "svcs": [{"n": "a"}, {"n": "b"}]},
           "body": {"name": "", "tag": "7"}, "data": {"registry": ["redis"]},
           "collection": [{"state": "running", "size": 2}, {"state": "exited", "size": 3}, {"state": "running", "size": 5}]}
    assert render("{item.created}", ctx) == 1767225600  # a lone placeholder keeps its type
    assert render("at {item.created|iso} {{literal}}", ctx) == "at 2026-01-01T00:00:00Z {literal}"
    assert render('{item.labels["a.b"]}-{item.names.0|lstrip:/}', ctx) == "x-web"
    assert render("{body.name ?? item.names.0}", ctx) == "/web"  # empty falls back
    assert render("{body.missing|default:latest}:{body.tag|int|add:1}", ctx) == "latest:8"
    assert render("{'redis:7'|before::}/{'redis:7'|after::}/{'redis'|after::|default:latest}", ctx) == "redis/7/latest"
    assert render("{'redis'|oneof_data:registry}/{'nosuch'|oneof_data:registry}/{'b'|oneof:a,b}", ctx) == "true/false/true"
    assert render("{'nginx:1.27'|imagefile}|{'ghcr.io/a/b@sha256:x'|imagefile}|{body.tag|prefix::}", ctx) == "nginx_1.27.tar|ghcr.io_a_b_sha256_x.tar|:7"
    assert render({"n": {"$count": {"where": {"state": "running"}}}, "total": {"$sum": {"field": "size"}}}, ctx) == {"n": 2, "total": 10}
    assert render(["first", {"$each": {"of": "item.svcs", "line": "svc {it.n}"}}], ctx) == ["first", "svc a", "svc b"]
    assert render({"$csv": {"of": "collection", "fields": ["state", "size"]}}, ctx) == "running,2\nexited,3\nrunning,5\n"
    groups = render({"$group": {"by": "state", "of": "collection"}}, ctx)
    assert [(g["groupName"], len(g["items"])) for g in groups] == [("running", 2), ("exited", 1)]
    for bad in ("{nope}", "{item.created|frobnicate}", {"$nope": 1}):
        with pytest.raises(TemplateError):
            render(bad, ctx)


def test_fault_rules_normalise_and_count_down():
    from simulator.faults import Faults

    faults = Faults.from_spec({"latency": [0.1, {"seconds": 0.2, "match": "list-*"}], "error_5xx": {"status": 502, "count": 1},
                               "ndjson_error": "boom", "stall": {"seconds": 31, "after": 3}, "daemon_down": {"0": "cached"}, "agent_down": "7"})
    assert faults.as_dict() == {"latency": [{"seconds": 0.1}, {"match": ["list-*"], "seconds": 0.2}],
                                "error_5xx": [{"count": 1, "status": 502}], "ndjson_error": [{"message": "boom"}],
                                "stall": [{"seconds": 31.0, "after": 3}], "daemon_down": {"0": "cached"}, "agent_down": ["7"]}
    first = faults.decide(("list-containers",), "/environments/0/containers", "/api/environments/0/containers", streaming=False)
    assert (first.latency, first.error_status, first.ndjson_error, first.stall) == (pytest.approx(0.3), 502, None, None)
    second = faults.decide(("pull-image",), "/environments/0/images/pull", "/api/environments/0/images/pull", streaming=True)
    assert (second.latency, second.error_status, second.ndjson_error, second.stall) == (pytest.approx(0.1), None, "boom", (31.0, 3))
    assert faults.down_mode("0") == "cached" and faults.down_mode("1") is None and faults.is_agent_down("7")
    for bad in ({"error_5xx": 404}, {"latency": -1}, {"drop": {"cout": 1}}, {"daemon_down": {"0": "lukewarm"}},
                {"stall": {"after": 0}}, {"agent_down": {"x": 1}}):
        with pytest.raises(FaultError):
            Faults.from_spec(bad)
