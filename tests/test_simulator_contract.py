"""The simulator's contract with Arcane: what Arcane's Go source says it answers.

Two parts, both meant to be revisited when a new Arcane changes:

* explicit cases — a status, a text, a header, a frame, a paging rule, each written
  here with the Arcane file it comes from (the values are Arcane's, not the simulator's);
* cases generated from the simulator's cited data — one per cited behaviour of a kind
  a test can drive (the permission of every operation, every not-found text, every
  guard, every download, every stream, every list's paging kind, every daemon text),
  so a new cited behaviour gets its test.

Nothing here imports the engine.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import httpx
import pytest
from markdown_it import MarkdownIt

from simulator import check_data
from simulator.document import load_document, operations
from simulator.schemas import DocSchemas
from simulator.template import TemplateError, matches_where, render
from tests import simulator_fixtures

LOCAL = "0"
REMOTE = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
BLOG_WEB = "704083d3b29b41e67645c4a2f5077741f35429cc164d1c213745cc4927314ab9"
JELLYFIN = "28d81f2e7f99e2f862924d4748a4b71c4fd94e3ec26e0c6da17ce1252992af68"  # paused
BLOG = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"
READONLY_KEY = "arc_sim_readonly_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"  # scoped: containers:list/read, environments:read on "0"
AGENT_KEY = "arc_sim_agentonly_5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b"  # scoped to the remote agent
EXPIRED_KEY = "arc_sim_expired_1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c"
NO_GRANTS_KEY = "arc_sim_contract_no_grants_key"
DOCKER_ERROR = ("failed to connect to the docker API at unix:///var/run/docker.sock; check if the path is correct "
                "and if the daemon is running: dial unix /var/run/docker.sock: connect: no such file or directory")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "simulator.md"

BEHAVIOUR, STATE = check_data()
DOCUMENT = load_document()
OPS = {o.operation_id: o for o in operations(DOCUMENT, BEHAVIOUR.environments["path_prefix"], BEHAVIOUR.environments["param"])}
DOC_SCHEMAS = DocSchemas(DOCUMENT)


def minimal_body(op) -> dict:
    """The smallest JSON body the operation's request schema accepts: Huma validates a
    body before the handler runs, so a case about the handler sends a valid one."""
    spec = DOCUMENT["paths"][op.path][op.method.lower()].get("requestBody") or {}
    schema = ((spec.get("content") or {}).get("application/json") or {}).get("schema")
    return DOC_SCHEMAS.synthesize(schema) if schema else {}


sim = simulator_fixtures.sim  # one simulator per module; this module's reset adds its keys and limits


@pytest.fixture(autouse=True)
def fresh(sim):
    sim.reset()
    sim.set_faults({})
    sim.rate_limits_enabled = True
    sim.add_api_key(NO_GRANTS_KEY, [])
    sim.clear_violations()
    yield
    assert sim.violations == [], [v.as_dict() for v in sim.violations]


@pytest.fixture
def api(sim):
    with httpx.Client(base_url=sim.url + "/api", headers={"X-API-Key": sim.api_key}, timeout=10) as c:
        yield c


def lines(r: httpx.Response) -> list[dict]:
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


# ================================================================ explicit cases


# ---------------------------------------------------------------- lookups and not-found texts

NOT_FOUND = [
    # (why / Arcane source, method, path, status, detail)
    ("project get by name: GetProjectFromDatabaseByID, project/handler.go:793", "GET", "/environments/0/projects/blog", 404,
     "Failed to get project details: project not found"),
    ("project down by name: project/handler.go:666", "POST", "/environments/0/projects/blog/down", 500,
     "Failed to bring down project: project not found"),
    ("project restart by name: project/handler.go:1048", "POST", "/environments/0/projects/blog/restart", 400,
     "Failed to restart project: project not found"),
    ("project destroy by name: project/handler.go:900", "DELETE", "/environments/0/projects/blog/destroy", 500,
     "Failed to destroy project: project not found"),
    ("container get: container/handler.go:653, service.go:1199", "GET", "/environments/0/containers/nope", 404,
     "Failed to retrieve container: container not found: Error response from daemon: No such container: nope"),
    ("container start: container/handler.go:675", "POST", "/environments/0/containers/nope/start", 500,
     "Failed to start container: Error response from daemon: No such container: nope"),
    ("container delete: container/handler.go:943, service.go:1268", "DELETE", "/environments/0/containers/nope", 500,
     "Failed to delete container: failed to delete container: Error response from daemon: No such container: nope"),
    ("image get: image/handler.go:397, image.go:87", "GET", "/environments/0/images/nope", 404,
     "Image not found: inspect not found: Error response from daemon: No such image: nope"),
    ("volume get: volume/handler.go:644, service.go:124", "GET", "/environments/0/volumes/nope", 404,
     "Volume not found: volume not found: Error response from daemon: get nope: no such volume"),
    ("network get: network/handler.go:307, service.go:50", "GET", "/environments/0/networks/nope", 404,
     "Network not found: network not found: Error response from daemon: network nope not found"),
    ("environment get: environment/handler.go:680", "GET", "/environments/nope", 404, "Environment not found"),
    ("delete the local environment: environment/handler.go:809", "DELETE", "/environments/0", 400, "Cannot delete local environment"),
    ("unknown API key: apikey/handler.go:225", "GET", "/api-keys/nope", 404, "API key not found"),
]


@pytest.mark.parametrize("why,method,path,status,detail", NOT_FOUND, ids=[c[0].split(":")[0] for c in NOT_FOUND])
def test_not_found_texts(api, why, method, path, status, detail):
    r = api.request(method, path, json={} if method == "POST" else None)
    assert (r.status_code, r.headers["content-type"], r.json()["detail"]) == (status, "application/problem+json", detail)


def test_project_up_on_a_name_fails_inside_a_200_stream(api):
    """deploy-project: project_lifecycle.go:256 (WrapIf "failed to get project"), handler.go:612."""
    r = api.post("/environments/0/projects/blog/up", json={})
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-json-stream"
    first, last = lines(r)
    assert first["type"] == "activity" and first["activityId"]
    assert last == {"error": "failed to get project: project not found"}


def test_projects_are_found_by_id(api):
    assert api.get(f"/environments/0/projects/{BLOG}").json()["data"]["name"] == "blog"


def test_containers_resolve_unique_id_prefixes(api, sim):
    """Docker resolves a unique ID prefix; an ambiguous one is refused (container get: 404)."""
    assert api.get(f"/environments/0/containers/{BLOG_WEB[:6]}").json()["data"]["id"] == BLOG_WEB
    assert api.get("/environments/0/containers/blog-web-1").json()["data"]["id"] == BLOG_WEB  # a name
    ids = [c["id"] for c in sim.items("containers")]
    prefix = next(p for p in (i[:1] for i in ids) if sum(x.startswith(p) for x in ids) > 1)
    r = api.get(f"/environments/0/containers/{prefix}")
    assert r.status_code == 404
    assert r.json()["detail"] == ("Failed to retrieve container: container not found: "
                                  f"Error response from daemon: multiple IDs found with provided prefix: {prefix}")


def test_a_paused_container_is_running_as_docker_says(api):
    state = api.get(f"/environments/0/containers/{JELLYFIN}").json()["data"]["state"]
    assert state["status"] == "paused" and state["running"] is True


# ---------------------------------------------------------------- daemon unreachable


DAEMON = [
    ("cold", "GET", "/environments/0/containers", 500,
     f"Failed to list containers: failed to connect to Docker: failed to create Docker client: failed to negotiate Docker API version: {DOCKER_ERROR}"),
    ("cached", "GET", "/environments/0/containers", 500, f"Failed to list containers: failed to list Docker containers: {DOCKER_ERROR}"),
    ("cold", "GET", f"/environments/0/containers/{BLOG_WEB}", 404,
     f"Failed to retrieve container: failed to connect to Docker: failed to create Docker client: failed to negotiate Docker API version: {DOCKER_ERROR}"),
    ("cached", "GET", f"/environments/0/containers/{BLOG_WEB}", 404, f"Failed to retrieve container: container not found: {DOCKER_ERROR}"),
    ("cached", "POST", f"/environments/0/containers/{BLOG_WEB}/stop", 500, f"Failed to stop container: {DOCKER_ERROR}"),
]


@pytest.mark.parametrize("mode,method,path,status,detail", DAEMON)
def test_daemon_unreachable_texts(api, sim, mode, method, path, status, detail):
    """docker/service.go:141 GetClient (cold: WrapIf chain), the cached client's moby text (moby client v0.5.1)."""
    sim.set_faults({"daemon_down": {LOCAL: mode}})
    r = api.request(method, path)
    assert (r.status_code, r.json()["detail"]) == (status, detail)
    assert api.get(f"/environments/{REMOTE}/containers").status_code == 200  # another host's daemon
    assert api.get("/environments/0").status_code == 200  # Arcane's own data


@pytest.mark.parametrize("mode,text", [
    ("cold", f"failed to connect to Docker: failed to create Docker client: failed to negotiate Docker API version: {DOCKER_ERROR}"),
    ("cached", f"failed to initiate image pull for redis:8: {DOCKER_ERROR}"),
])
def test_a_pull_with_the_daemon_down_fails_in_stream(api, sim, mode, text):
    """image.go:181 PullImage: the stream has started (activity line), the error ends it, HTTP 200."""
    sim.set_faults({"daemon_down": {LOCAL: mode}})
    r = api.post("/environments/0/images/pull", json={"imageName": "redis", "tag": "8"})
    assert r.status_code == 200
    first, last = lines(r)
    assert first["type"] == "activity" and last == {"error": text}


# ---------------------------------------------------------------- streams


def test_pull_frames_are_cli_text_lines(api, sim):
    """handler.go:606 WriteStartedLine; progress.go emitLine {"log": line}; WriteDoneLine; no progress bars."""
    r = api.post("/environments/0/images/pull", json={"imageName": "redis", "tag": "8"})
    frames = lines(r)
    assert frames[0] == {"type": "activity", "activityId": frames[0]["activityId"]}
    assert frames[-1] == {"done": True}
    logs = frames[1:-1]
    assert logs and all(set(f) == {"log"} and isinstance(f["log"], str) and "\n" not in f["log"] for f in logs)
    assert logs[0] == {"log": "8: Pulling from library/redis"}
    assert not any("[=" in f["log"] for f in logs)  # jsonmessage drops progress bars when not a terminal
    assert any(i["repoTags"] == ["redis:8"] for i in sim.items("images"))


def test_pull_of_an_image_no_registry_has_fails_in_stream(api, sim):
    """image.go:207 (WrapIff "failed to initiate image pull for %s"): 200 + activity + error; nothing added."""
    r = api.post("/environments/0/images/pull", json={"imageName": "nosuch-image"})
    first, last = lines(r)
    assert r.status_code == 200 and first["type"] == "activity"
    assert last["error"].startswith("failed to initiate image pull for nosuch-image: Error response from daemon: pull access denied for nosuch-image")
    assert not any("nosuch" in str(i["repoTags"]) for i in sim.items("images"))


def test_a_streams_activity_is_persisted(api):
    """StartHandlerActivity (types/activity/activity.go:19 TypeImagePull "image_pull"): the first
    line's activity exists; every log line is a message; CompleteHandlerActivity ends it success
    with "Image pull completed" (a success message) or failed with the error (an error message)."""
    ok = lines(api.post("/environments/0/images/pull", json={"imageName": "redis", "tag": "8"}))[0]["activityId"]
    bad = lines(api.post("/environments/0/images/pull", json={"imageName": "nosuch-image"}))[0]["activityId"]
    done = api.get(f"/environments/0/activities/{ok}").json()["data"]
    assert done["activity"]["status"] == "success" and done["activity"]["type"] == "image_pull"
    assert [(m["level"], m["message"]) for m in done["messages"]][-2:] == [
        ("info", "Status: Downloaded newer image for redis:8"), ("success", "Image pull completed")]
    assert done["activity"]["latestMessage"] == "Image pull completed"
    failed = api.get(f"/environments/0/activities/{bad}").json()["data"]
    assert failed["activity"]["status"] == "failed" and failed["activity"]["error"].startswith("failed to initiate image pull")
    assert failed["messages"][-1]["level"] == "error" and failed["messages"][-1]["message"] == failed["activity"]["error"]


# ---------------------------------------------------------------- paging


def test_docker_list_paging(api):
    """handlerutil.PaginationParams, pagination.go paginateItemsFunction, types.go BuildResponse, sort.go sortFunction."""
    page = api.get("/environments/0/containers").json()
    names = [c["names"][0] for c in page["data"]]
    assert names == sorted(names)  # no sort: the first binding (name)
    assert page["pagination"] == {"totalPages": 3, "totalItems": 56, "currentPage": 1, "itemsPerPage": 20, "grandTotalItems": 56}
    everything = api.get("/environments/0/containers", params={"limit": 0}).json()
    assert len(everything["data"]) == 56 and everything["pagination"]["itemsPerPage"] == 56
    big = api.get("/environments/0/containers", params={"limit": 500}).json()
    assert len(big["data"]) == 56 and big["pagination"]["itemsPerPage"] == 500  # no cap at 100
    minus_one = api.get("/environments/0/containers", params={"limit": -1, "start": 50}).json()
    assert len(minus_one["data"]) == 56  # -1 ignores start
    unknown = api.get("/environments/0/containers", params={"sort": "nonsense"}).json()
    assert [c["names"][0] for c in unknown["data"]] == names  # an unknown sort falls back to the first binding
    found = api.get("/environments/0/containers", params={"search": "BLOG"}).json()
    assert found["pagination"]["totalItems"] == 2 and found["pagination"]["grandTotalItems"] == 56
    offset = api.get("/environments/0/containers", params={"start": 25, "limit": 20}).json()
    assert offset["pagination"]["currentPage"] == 2 and offset["data"][0]["names"] == everything["data"][25]["names"]


def test_db_list_paging(api, sim):
    """pagination/reflect.go PaginateAndSortDB: -1 all, <= 0 -> 20, > 100 -> 100, never grandTotalItems."""
    # the api_keys collection is what list-api-keys pages: 5 demo rows, 25 more created
    for n in range(25):
        httpx.post(sim.url + "/api/api-keys", headers={"X-API-Key": sim.api_key},
                   json={"name": f"k{n:02d}", "permissions": [{"permission": "containers:list"}]})
    total = len(sim.items("api_keys"))
    assert total == 30
    default = api.get("/api-keys").json()["pagination"]
    assert default == {"totalPages": 2, "totalItems": 30, "currentPage": 1, "itemsPerPage": 20}
    assert api.get("/api-keys", params={"limit": 0}).json()["pagination"]["itemsPerPage"] == 20
    assert api.get("/api-keys", params={"limit": 500}).json()["pagination"]["itemsPerPage"] == 100
    everything = api.get("/api-keys", params={"limit": -1, "start": 5}).json()
    assert len(everything["data"]) == 30 and everything["pagination"]["itemsPerPage"] == 30
    ids = [k["id"] for k in everything["data"]]
    assert ids == sorted(ids)  # no sort: the primary key
    assert api.get("/api-keys", params={"limit": -5}).json()["pagination"]["itemsPerPage"] == 20  # < -1 -> 20


def test_group_by_project_pages_whole_groups(api):
    """container/service.go:1527 paginateContainerProjectGroupsInternal: a group is never split."""
    # groups come in the order of the sorted items (by name: /adminer has no project)
    first = api.get("/environments/0/containers", params={"groupBy": "project", "limit": 2}).json()
    assert [g["groupName"] for g in first["groups"]] == ["No Project"] and len(first["data"]) == 52  # whole, past the limit
    second = api.get("/environments/0/containers", params={"groupBy": "project", "limit": 2, "start": 2}).json()
    assert [g["groupName"] for g in second["groups"]] == ["blog"]
    assert [c["names"][0] for c in second["data"]] == ["/blog-db-1", "/blog-web-1"]
    third = api.get("/environments/0/containers", params={"groupBy": "project", "limit": 2, "start": 4}).json()
    assert [g["groupName"] for g in third["groups"]] == ["monitoring"]
    assert third["pagination"] == {"totalPages": 3, "totalItems": 56, "currentPage": 3, "itemsPerPage": 2, "grandTotalItems": 56}
    beyond = api.get("/environments/0/containers", params={"groupBy": "project", "limit": 2, "start": 40}).json()
    assert beyond["pagination"]["currentPage"] == 3  # a page past the end is the last one
    assert "groups" not in api.get("/environments/0/containers").json()


# ---------------------------------------------------------------- auth and permissions


def test_auth_texts(sim):
    """huma_middleware.go:224/290/312."""
    url = sim.url + "/api/environments/0/containers"
    assert httpx.get(url).json()["detail"] == "Unauthorized: valid authentication required"
    assert httpx.get(url, headers={"X-API-Key": "arc_nope"}).json()["detail"] == "Unauthorized: invalid API key"
    assert httpx.get(url, headers={"X-API-Key": EXPIRED_KEY}).json()["detail"] == "Unauthorized: invalid API key"
    assert httpx.get(url, headers={"Authorization": "Bearer garbage"}).json()["detail"] == "Unauthorized: valid authentication required"
    token = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]["token"]
    httpx.post(sim.url + "/api/auth/logout", headers={"Authorization": f"Bearer {token}"})
    assert httpx.get(url, headers={"Authorization": f"Bearer {token}"}).json()["detail"] == "Session expired. Please log in again."
    assert httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "x"}).json()["detail"] == "Invalid username or password"


def test_a_scoped_key_gets_permission_denied(sim):
    """middleware/role.go:74 RequirePermission: 403 problem "permission denied: <perm>"."""
    h = {"X-API-Key": READONLY_KEY}
    assert httpx.get(sim.url + "/api/environments/0/containers", headers=h).status_code == 200
    r = httpx.post(sim.url + f"/api/environments/0/containers/{BLOG_WEB}/stop", headers=h)
    assert (r.status_code, r.json()["detail"]) == (403, "permission denied: containers:stop")
    r = httpx.get(sim.url + "/api/environments/0/images", headers=h)
    assert (r.status_code, r.json()["detail"]) == (403, "permission denied: images:list")


def test_the_environment_proxy_answers(sim):
    """environment_middleware.go Handle: its own auth (401), unknown (404), permission (403), agent unreachable (502)."""
    base = sim.url + f"/api/environments/{REMOTE}/containers"
    r = httpx.get(base)
    assert (r.status_code, r.json()) == (401, {"success": False, "data": {"error": "Authentication required to access remote environments"}})
    r = httpx.get(sim.url + "/api/environments/no-such-env/containers", headers={"X-API-Key": sim.api_key})
    assert (r.status_code, r.json()) == (404, {"success": False, "data": {"error": "Environment not found"}})
    r = httpx.get(base, headers={"X-API-Key": READONLY_KEY})  # bound to "0"
    assert (r.status_code, r.json()) == (403, {"success": False, "data": {"error": "You don't have permission to perform this action on this environment"}})
    assert httpx.get(base, headers={"X-API-Key": AGENT_KEY}).status_code == 200  # bound to the agent
    assert httpx.get(sim.url + "/api/environments/0/containers", headers={"X-API-Key": AGENT_KEY}).json()["detail"] == "permission denied: containers:list"
    sim.set_faults({"agent_down": REMOTE})
    r = httpx.get(base, headers={"X-API-Key": sim.api_key}, params={"limit": 5})
    assert r.status_code == 502 and r.json()["success"] is False
    assert r.json()["data"]["error"] == ('Proxy request failed: Get "http://10.0.0.21:3553/api/environments/0/containers?limit=5": '
                                         "dial tcp 10.0.0.21:3553: connect: connection refused")


def test_the_echo_auth_shape_on_websocket_and_pprof_routes(sim):
    """auth/middleware.go managerAuth: {message, code, statusCode} (statusCode 0: not set by the literal)."""
    r = httpx.get(sim.url + f"/api/environments/0/ws/containers/{BLOG_WEB}/logs")
    assert (r.status_code, r.json()) == (401, {"message": "Authentication required", "code": "UNAUTHORIZED", "statusCode": 0})
    r = httpx.get(sim.url + "/api/debug/pprof/", headers={"Authorization": "Bearer garbage"})
    assert (r.status_code, r.json()["message"]) == (401, "Invalid or expired token")
    r = httpx.get(sim.url + "/api/debug/pprof/", headers={"X-API-Key": READONLY_KEY})
    assert (r.status_code, r.json()) == (403, {"message": "You don't have permission to access this resource", "code": "FORBIDDEN", "statusCode": 0})
    assert httpx.get(sim.url + "/api/debug/pprof/", headers={"X-API-Key": sim.api_key}).status_code == 200
    r = httpx.get(sim.url + "/api/no/such/route")
    assert (r.status_code, r.json()) == (404, {"success": False, "error": "API endpoint not found: /api/no/such/route"})


def test_permissions_by_env_on_auth_me(sim):
    """user/service.go:578 toUserResponseDtoInternal, permissionSetToMap."""
    def me(user, password):
        token = httpx.post(sim.url + "/api/auth/login", json={"username": user, "password": password}).json()["data"]["token"]
        return httpx.get(sim.url + "/api/auth/me", headers={"Authorization": f"Bearer {token}"}).json()["data"]

    viewer = me("ops-viewer", "ops-viewer-password")
    assert viewer["isGlobalAdmin"] is False and set(viewer["permissionsByEnv"]) == {"global"}
    assert "containers:list" in viewer["permissionsByEnv"]["global"] and "containers:stop" not in viewer["permissionsByEnv"]["global"]
    deployer = me("ci-deployer", "ci-deployer-password")
    assert set(deployer["permissionsByEnv"]) == {REMOTE} and "projects:deploy" in deployer["permissionsByEnv"][REMOTE]
    admin = me("arcane", "arcane-admin")
    assert admin["isGlobalAdmin"] is True and len(admin["permissionsByEnv"]["global"]) == len(BEHAVIOUR.permissions.catalog)


def test_env_scoped_role_applies_only_to_its_environment(sim):
    token = httpx.post(sim.url + "/api/auth/login", json={"username": "ci-deployer", "password": "ci-deployer-password"}).json()["data"]["token"]
    h = {"Authorization": f"Bearer {token}"}
    assert httpx.get(sim.url + f"/api/environments/{REMOTE}/containers", headers=h).status_code == 200
    assert httpx.get(sim.url + "/api/environments/0/containers", headers=h).json()["detail"] == "permission denied: containers:list"


def test_login_and_refresh_are_rate_limited_per_path(sim):
    """router_bootstrap.go:223 PerIPRateLimitForPaths(…, 5, 5); rate_limit_middleware.go:112 (429, Retry-After: 60)."""
    statuses = [httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "x"}).status_code for _ in range(6)]
    assert statuses == [401] * 5 + [429]
    r = httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"})
    assert (r.status_code, r.json(), r.headers["retry-after"]) == (429, {"error": "rate limit exceeded"}, "60")
    assert httpx.post(sim.url + "/api/auth/refresh", json={"refreshToken": "x"}).status_code == 401  # its own bucket
    sim.advance_clock(12)  # one token every 60/5 seconds
    assert httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).status_code == 200
    assert httpx.post(sim.url + "/api/auth/login", json={"username": "arcane", "password": "arcane-admin"}).status_code == 429


def test_openapi_json_is_public(sim):
    """api.go SetupAPI: Huma serves /api/openapi.json without auth."""
    r = httpx.get(sim.url + "/api/openapi.json")
    assert r.status_code == 200 and r.json()["openapi"].startswith("3.") and r.json()["info"]["version"] == DOCUMENT["info"]["version"]


# ---------------------------------------------------------------- downloads


def test_container_log_download(api):
    """container/handler.go DownloadContainerLogs (2.12): octet-stream, unquoted filename, timestamped lines."""
    r = api.get(f"/environments/0/containers/{BLOG_WEB}/logs/download")
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"] == f"attachment; filename=container-{BLOG_WEB[:12]}-logs.log"
    assert all(line[:4].isdigit() and line[10] == "T" and line.split(" ", 1)[0].endswith("Z") for line in r.text.splitlines())


def test_image_export_download(api):
    """image/handler.go:526, :541 imageExportFileNameInternal (%q)."""
    r = api.get(f"/environments/0/images/{q('nginx:1.27')}/export")
    assert (r.headers["content-type"], r.headers["content-disposition"]) == ("application/x-tar", 'attachment; filename="nginx_1.27.tar"')


def test_volume_backup_download(api):
    """volume/handler.go:506: application/x-gzip, filename=<backupId>.tar.gz (unquoted)."""
    r = api.get("/environments/0/volumes/backups/bkp_20251231_blog_db_data/download")
    assert (r.headers["content-type"], r.headers["content-disposition"]) == ("application/x-gzip", "attachment; filename=bkp_20251231_blog_db_data.tar.gz")


# ================================================================ cases generated from the data


def _env_path(op) -> str:
    path = op.path
    for p in op.params:
        path = path.replace("{" + p + "}", LOCAL if p == op.env_param else "sample")
    return path


PERMISSION_CASES = sorted(
    (op_id, entry) for op_id, entry in BEHAVIOUR.permissions.operations.items()
    if op_id in OPS and OPS[op_id].security in ("either", "apikey") and (entry.get("permission") or entry.get("admin"))
    and not entry.get("from_param")
)


@pytest.mark.parametrize("op_id,entry", PERMISSION_CASES, ids=[c[0] for c in PERMISSION_CASES])
def test_operation_permission(sim, op_id, entry):
    """The permission each operation's registration names (RegisterWithPermission /
    RequireGlobalAdmin): a key without it is refused before anything else runs."""
    op = OPS[op_id]
    r = httpx.request(op.method, sim.url + "/api" + _env_path(op), headers={"X-API-Key": NO_GRANTS_KEY})
    expected = "permission denied: global admin required" if entry.get("admin") else f"permission denied: {entry['permission']}"
    assert r.status_code == 403, entry["src"]
    if op.method != "HEAD":  # a HEAD answer has no body
        assert r.json()["detail"] == expected, entry["src"]
    if entry.get("permission") and not entry.get("admin"):
        # an environment grant counts only where the path names that environment (EnvIDFromPath)
        env = LOCAL if BEHAVIOUR.permissions.catalog[entry["permission"]] == "env" and op.env_scoped else None
        grant = {"permission": entry["permission"], **({"environmentId": env} if env else {})}
        sim.add_api_key("arc_sim_contract_holder", [grant])
        held = httpx.request(op.method, sim.url + "/api" + _env_path(op), headers={"X-API-Key": "arc_sim_contract_holder"})
        assert held.status_code != 403, (op_id, held.text)


NOT_FOUND_CASES = sorted(
    (op_id, b) for op_id, b in BEHAVIOUR.operations.items()
    # a key from the caller ("{caller.user.id}") names the caller's own record: no unknown key to send
    if b.kind in ("get", "update", "delete") and b.get("not_found") and op_id in OPS and "{" not in (b.key or "")
)


@pytest.mark.parametrize("op_id,b", NOT_FOUND_CASES, ids=[c[0] for c in NOT_FOUND_CASES])
def test_cited_not_found(sim, api, op_id, b):
    """Every cited not-found: an unknown key gets the data's status and text (or, in a
    stream, 200 + activity line + the text as the error line). The body is a minimal
    valid one, so a write whose body has required members is not refused first (422)."""
    op = OPS[op_id]
    path = op.path
    key_param = b.key or op.params[-1]
    for p in op.params:  # the environment is the local one, unless it is the unknown key
        path = path.replace("{" + p + "}", LOCAL if p == op.env_param and p != key_param else "zz-no-such-key")
    body = minimal_body(op)
    for p in DOCUMENT["paths"][op.path][op.method.lower()].get("parameters", []):
        if p.get("in") == "query" and p.get("required"):
            path += ("&" if "?" in path else "?") + f"{p['name']}=x"
    headers = {}
    if op.security == "bearer":  # Bearer-only operations (the caller's own keys) need a session
        headers["Authorization"] = "Bearer " + api.post("/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]["token"]
    spec = sim.simulator.doc.request_spec(op.path, op.method)
    r = api.request(op.method, path, json=body if op.method in ("POST", "PUT") or spec.schema_pointer else None, headers=headers)
    nf = b.get("not_found")
    coll = BEHAVIOUR.collections[b.collection]
    ctx = {"key": "zz-no-such-key", "fail": b.get("fail") or ("Failed to " + op.summary[:1].lower() + op.summary[1:])}
    ctx["reason"] = render(coll.not_found, ctx)
    detail = render(nf.get("detail", "{fail}: {reason}"), ctx)
    if nf.get("stream"):
        assert r.status_code == 200 and lines(r)[-1] == {"error": detail}, nf["src"]
    else:
        assert (r.status_code, r.json()["detail"]) == (nf.get("status", 404), detail), nf["src"]


GUARD_CASES = [(op_id, i, g) for op_id, b in sorted(BEHAVIOUR.operations.items()) for i, g in enumerate(b.get("guards") or [])
               if b.kind in ("update", "delete")]


def _when_holds(guard: dict, item: dict) -> bool:
    """A guard's `when` over the item alone (one of a list); a `when` that reads more
    than the item (the state, the body) is left to the simulator: taken as holding."""
    if "when" not in guard:
        return True
    conds = guard["when"] if isinstance(guard["when"], list) else [guard["when"]]
    try:
        return any(render(c, {"item": item, "it": item}) for c in conds)
    except TemplateError:
        return True


@pytest.mark.parametrize("op_id,i,guard", GUARD_CASES, ids=[f"{c[0]}-{c[1]}" for c in GUARD_CASES])
def test_cited_guard(sim, api, op_id, i, guard):
    """Every cited precondition: an item of the demo state that matches it is refused with
    the data's status and text (the demo state must hold one)."""
    b = BEHAVIOUR.operations[op_id]
    op = OPS[op_id]
    coll = BEHAVIOUR.collections[b.collection]
    env = LOCAL if coll.scope == "environment" else None
    item = next((it for it in sim.items(b.collection, env) if matches_where(it, guard["where"], {}) and _when_holds(guard, it)), None)
    assert item is not None, f"no demo item matches {guard['where']} for {op_id}"
    key = str(item[coll.key])
    path = op.path
    key_param = b.key or op.params[-1]
    for p in op.params:
        path = path.replace("{" + p + "}", LOCAL if p == op.env_param and p != key_param else q(key))
    # huma validates a required JSON body before the handler runs: the guard needs a valid one
    spec = DOCUMENT["paths"].get(op.path, {}).get(op.method.lower(), {}).get("requestBody") or {}
    r = api.request(op.method, path, json=minimal_body(op)) if spec.get("required") else api.request(op.method, path)
    ctx = {"key": key, "item": item, "it": item, "query": {}, "body": {},
           "fail": b.get("fail") or ("Failed to " + op.summary[:1].lower() + op.summary[1:])}
    assert (r.status_code, r.json()["detail"]) == (guard.get("status", 409), render(guard["detail"], ctx)), guard["src"]


DOWNLOAD_CASES = sorted((op_id, b) for op_id, b in BEHAVIOUR.operations.items()
                        if (b.get("response") or {}).get("kind") in ("download", "raw") and op_id in OPS)


@pytest.mark.parametrize("op_id,b", DOWNLOAD_CASES, ids=[c[0] for c in DOWNLOAD_CASES])
def test_cited_download(sim, api, op_id, b):
    """Every cited download: its content type, and its Content-Disposition form (Go's %q
    quoting or plain concatenation), or none for raw bytes."""
    op = OPS[op_id]
    spec = b.get("response")
    params = sim.sample_path_params(op_id)
    path = op.path
    for name, value in params.items():
        path = path.replace("{" + name + "}", q(value))
    query = {p["name"]: "dir/file.txt" for p in DOCUMENT["paths"][op.path][op.method.lower()].get("parameters", [])
             if p.get("in") == "query" and p.get("required")}
    token = api.post("/auth/login", json={"username": "arcane", "password": "arcane-admin"}).json()["data"]["token"] if op.security == "bearer" else None
    r = api.request(op.method, path, params=query, headers={"Authorization": f"Bearer {token}"} if token else None)
    assert r.status_code == 200, (op_id, r.text)
    assert r.headers["content-type"].split(";")[0] == spec["media_type"].split(";")[0], spec["src"]
    if spec["kind"] == "raw":
        assert "content-disposition" not in r.headers and r.content
    else:
        disposition = r.headers["content-disposition"]
        assert disposition.startswith("attachment; filename=")
        assert disposition.startswith('attachment; filename="') == spec.get("quoted", True), (spec["src"], disposition)


STREAM_CASES = sorted(op_id for op_id, b in BEHAVIOUR.operations.items() if (b.get("response") or {}).get("kind") == "ndjson")


@pytest.mark.parametrize("op_id", STREAM_CASES)
def test_cited_stream(sim, api, op_id):
    """Every operation stream: HTTP 200 application/x-json-stream; the activity line, log
    frames of one text line each, then {"done": true}; the activity persisted."""
    op = OPS[op_id]
    path = op.path
    for name, value in sim.sample_path_params(op_id).items():
        path = path.replace("{" + name + "}", q(value))
    bodies = {"pull-image": {"imageName": "redis", "tag": "8"}, "build-image": {"contextDir": "/app/data/builds/blog-theme", "tags": ["blog-theme:dev"]}}
    r = api.post(path, json=bodies.get(op_id, {}))
    assert (r.status_code, r.headers["content-type"]) == (200, "application/x-json-stream")
    frames = lines(r)
    assert set(frames[0]) == {"type", "activityId"} and frames[0]["type"] == "activity"
    assert frames[-1] == {"done": True}
    assert frames[1:-1] and all(set(f) == {"log"} and "\n" not in f["log"] for f in frames[1:-1])
    activity = api.get(f"/environments/0/activities/{frames[0]['activityId']}").json()["data"]["activity"]
    assert activity["status"] == "success"


LIST_CASES = sorted((op_id, b) for op_id, b in BEHAVIOUR.operations.items()
                    if b.kind == "list" and op_id in OPS and OPS[op_id].method == "GET" and "{" not in OPS[op_id].path.replace("{id}", ""))


@pytest.mark.parametrize("op_id,b", LIST_CASES, ids=[c[0] for c in LIST_CASES])
def test_cited_paging_kind(api, op_id, b):
    """Every list pages as its collection's kind: Docker-backed (limit 0 = everything, no
    cap, grandTotalItems) or DB-backed (limit 0 -> 20, > 100 -> 100, no grandTotalItems)."""
    op = OPS[op_id]
    path = op.path.replace("{id}", LOCAL)
    kind = BEHAVIOUR.collections[b.collection].paging
    zero = api.get(path, params={"limit": 0}).json()["pagination"]
    big = api.get(path, params={"limit": 500}).json()["pagination"]
    if kind == "docker":
        assert zero["itemsPerPage"] == zero["totalItems"] and big["itemsPerPage"] == 500
    else:
        assert zero["itemsPerPage"] == 20 and big["itemsPerPage"] == 100 and "grandTotalItems" not in big


DAEMON_CASES = sorted((op_id, b) for op_id, b in BEHAVIOUR.operations.items()
                      if (b.get("daemon_down") or {}).get("cached") and not b.get("daemon_down").get("stream") and op_id in OPS)


@pytest.mark.parametrize("op_id,b", DAEMON_CASES, ids=[c[0] for c in DAEMON_CASES])
def test_cited_daemon_text(sim, api, op_id, b):
    """Every operation whose service wraps the cached client's error its own way."""
    op = OPS[op_id]
    path = op.path
    for name, value in sim.sample_path_params(op_id).items():
        path = path.replace("{" + name + "}", q(value))
    sim.set_faults({"daemon_down": {LOCAL: "cached"}})
    r = api.request(op.method, path)
    ctx = {"fail": b.get("fail") or ("Failed to " + op.summary[:1].lower() + op.summary[1:]), "docker_error": BEHAVIOUR.daemon_down["docker_error"]}
    assert r.json()["detail"] == render(b.get("daemon_down")["cached"], ctx), b.get("daemon_down")["src"]


# ---------------------------------------------------------------- the citations themselves


def test_every_citation_names_a_source():
    """A src names an Arcane file (backend/…, a 2.x-era handler) or a named upstream piece."""
    for c in BEHAVIOUR.citations:
        assert any(w in c.src for w in ("backend/", "handler", "huma", "CHANGELOG", "moby", "go.mod")), (c.file, c.line, c.src)


def _unverified_in_docs() -> list[str]:
    """The list items of docs/simulator.md's "Unverified behaviours" section (markdown-it)."""
    tokens = MarkdownIt().parse(DOCS.read_text(encoding="utf-8"))
    out, inside = [], False
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            title = tokens[i + 1].content
            if t.tag == "h2":
                inside = title.startswith("Unverified behaviours")
        elif inside and t.type == "inline" and tokens[i - 1].type == "paragraph_open" and tokens[i - 2].type == "list_item_open":
            out.append(t.content)
    return out


def test_docs_count_the_citations():
    """The figure docs/simulator.md gives is the data's (the strong text of its Citations section)."""
    tokens = MarkdownIt().parse(DOCS.read_text(encoding="utf-8"))
    strong = []
    for t in tokens:
        children = t.children or []
        for i, c in enumerate(children):
            if c.type == "strong_open" and i + 1 < len(children) and children[i + 1].type == "text":
                strong.append(children[i + 1].content)
    unverified = sum(1 for c in BEHAVIOUR.citations if c.unverified)
    assert f"{len(BEHAVIOUR.citations)} cited behaviours, {unverified} of them unverified" in strong


def test_docs_list_every_unverified_behaviour():
    listed = _unverified_in_docs()
    for c in BEHAVIOUR.citations:
        if c.unverified:
            assert any(f"`{c.pointer}`" in item for item in listed), f"docs/simulator.md does not list {c.pointer} ({c.unverified})"
    assert len(listed) == sum(1 for c in BEHAVIOUR.citations if c.unverified)
