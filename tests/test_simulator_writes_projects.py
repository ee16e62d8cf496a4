"""The simulator's writes for projects, Swarm, system backups, build workspaces and the
goroutine-leak scan change its state as Arcane's handlers do: a create shows in the list
and the get with the members its answer promises, an update shows, a delete removes, a
project's Compose text reads back what was written, a secret's data is never returned.

Statuses, fields and structure are asserted, not wording. One simulator serves the
module; each test starts from the demo state and must leave no schema violation behind.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from tests import simulator_fixtures

sim, fresh = simulator_fixtures.sim, simulator_fixtures.fresh  # one simulator per module, reset before each test

LOCAL = "0"
BLOG = "0d6c3a52-1f4b-4e8e-9a57-3f2b8c1d7e01"  # a running demo project
EDGE_WHOAMI = "1q2w3e4r5t6y7u8i9o0p1a2s3"  # a replicated demo Swarm service of stack "edge"
WORKER_NODE = "7r5t3y1u9i7o5p3a1s9d7f5g3"
COMPOSE = "services:\n  app:\n    image: busybox:1.36\n    environment:\n      MODE: demo\n  cache:\n    image: redis:7\n"
ENV = "MODE=demo\nTOKEN=abc\n"


@pytest.fixture
def client(sim):
    with httpx.Client(base_url=sim.url, headers={"X-API-Key": sim.api_key}, timeout=10) as c:
        yield c


def env(path: str) -> str:
    return f"/api/environments/{LOCAL}{path}"


def create_project(client, name: str, compose: str = COMPOSE, env_text: str | None = ENV) -> dict:
    project = {"name": name, "composeContent": compose}
    if env_text is not None:
        project["envContent"] = env_text
    files = {"project": (None, json.dumps(project)), "manifest": (None, json.dumps({"fileChanges": []}))}
    r = client.post(env("/projects"), files=files)
    assert r.status_code == 200, r.text
    return r.json()["data"]


# ---------------------------------------------------------------- projects


def test_a_created_project_reads_back_its_compose_env_and_services(client):
    created = create_project(client, "shop")
    pid = created["id"]
    assert created["name"] == "shop" and created["status"] == "stopped"
    listed = client.get(env("/projects"), params={"search": "shop"}).json()["data"]
    assert [p["id"] for p in listed] == [pid]
    compose = client.get(env(f"/projects/{pid}/compose")).json()["data"]
    assert compose["composeContent"] == COMPOSE and compose["envContent"] == ENV
    assert [s["image"] for s in compose["services"]] == ["busybox:1.36", "redis:7"]
    assert compose["serviceCount"] == 2
    runtime = client.get(env(f"/projects/{pid}/runtime")).json()["data"]["runtimeServices"]
    assert {s["name"]: s["status"] for s in runtime} == {"app": "stopped", "cache": "stopped"}


def test_a_project_without_services_is_refused(client):
    files = {"project": (None, json.dumps({"name": "empty", "composeContent": "version: '3'\n"})),
             "manifest": (None, json.dumps({"fileChanges": []}))}
    r = client.post(env("/projects"), files=files)
    assert r.status_code == 500 and r.json()["detail"].startswith("Failed to create project")
    assert not [p for p in client.get(env("/projects"), params={"search": "empty"}).json()["data"]]


def test_deploy_creates_the_services_containers_and_destroy_removes_them(client):
    pid = create_project(client, "shop")["id"]
    r = client.post(env(f"/projects/{pid}/up"), json={})
    assert r.status_code == 200
    lines = [json.loads(x) for x in r.text.splitlines() if x.strip()]
    assert lines[-1].get("type") == "complete" or "error" not in lines[-1], lines[-1]
    containers = client.get(env("/containers"), params={"search": "shop-", "limit": -1}).json()["data"]
    assert sorted(c["names"][0] for c in containers) == ["/shop-app-1", "/shop-cache-1"]
    assert {c["state"] for c in containers} == {"running"}
    assert {c["labels"]["com.docker.compose.project"] for c in containers} == {"shop"}
    runtime = client.get(env(f"/projects/{pid}/runtime")).json()["data"]
    assert runtime["status"] == "running" and {s["status"] for s in runtime["runtimeServices"]} == {"running"}
    assert {s["containerId"] for s in runtime["runtimeServices"]} == {c["id"] for c in containers}
    # a second deploy does not duplicate them
    client.post(env(f"/projects/{pid}/up"), json={})
    again = client.get(env("/containers"), params={"search": "shop-", "limit": -1}).json()["data"]
    assert len(again) == 2
    r = client.request("DELETE", env(f"/projects/{pid}/destroy"), json={"removeFiles": True})
    assert r.status_code == 200, r.text
    assert client.get(env(f"/projects/{pid}")).status_code == 404
    assert client.get(env("/containers"), params={"search": "shop-"}).json()["data"] == []


def test_update_project_changes_compose_env_and_services(client):
    pid = create_project(client, "shop")["id"]
    new_compose = "services:\n  web:\n    image: nginx:1.27\n"
    r = client.put(env(f"/projects/{pid}"), json={"composeContent": new_compose, "envContent": "A=1\n"})
    assert r.status_code == 200, r.text
    body = r.json()["data"]
    assert body["composeContent"] == new_compose and body["envContent"] == "A=1\n" and body["activityId"]
    compose = client.get(env(f"/projects/{pid}/compose")).json()["data"]
    assert compose["composeContent"] == new_compose and [s["image"] for s in compose["services"]] == ["nginx:1.27"]
    assert compose["serviceCount"] == 1
    # only what the body names changes
    client.put(env(f"/projects/{pid}"), json={"envContent": "B=2\n"})
    compose = client.get(env(f"/projects/{pid}/compose")).json()["data"]
    assert compose["composeContent"] == new_compose and compose["envContent"] == "B=2\n"
    bad = client.put(env(f"/projects/{pid}"), json={"composeContent": "::: not yaml"})
    assert bad.status_code == 400
    assert client.put(env("/projects/no-such-project"), json={"name": "x"}).status_code == 400


def test_project_tags_attach_and_detach(client):
    r = client.patch(env(f"/projects/{BLOG}/tags"), json={"name": "prod", "color": "red", "attached": True})
    assert r.status_code == 200, r.text
    tags = {t["name"]: t for t in r.json()["data"]["tags"]}
    assert tags["prod"]["color"] == "red" and "web" in tags
    assert "prod" in [t["name"] for t in client.get(env(f"/projects/{BLOG}")).json()["data"]["tags"]]
    assert "prod" in [t["name"] for t in client.get(env("/projects/tags")).json()["data"]]
    r = client.patch(env(f"/projects/{BLOG}/tags"), json={"name": "prod", "attached": False})
    assert [t["name"] for t in r.json()["data"]["tags"]] == ["web"]
    missing = client.patch(env("/projects/nope/tags"), json={"name": "x", "attached": True})
    assert missing.status_code == 404


def test_update_project_services_recreates_and_reports_an_activity(client):
    r = client.post(env("/projects/4a1e8b77-6c2d-4f90-b3e5-8d7c6b5a4f32/update-services"), json={"services": ["grafana"]})
    assert r.status_code == 200, r.text
    activity_id = r.json()["data"]["activityId"]
    activity = client.get(env(f"/activities/{activity_id}")).json()["data"]["activity"]
    assert activity["type"] == "auto_update" and activity["status"] == "success"
    grafana = client.get(env("/containers"), params={"search": "monitoring-grafana"}).json()["data"][0]
    assert grafana["state"] == "running"


# ---------------------------------------------------------------- swarm


def test_a_swarm_config_is_created_listed_read_and_deleted(client):
    data = base64.b64encode(b"log_level: debug\n").decode()
    r = client.post(env("/swarm/configs"), json={"spec": {"Name": "app_cfg", "Labels": {"team": "a"}, "Data": data}})
    assert r.status_code == 200, r.text
    cfg = r.json()["data"]
    assert cfg["spec"]["Name"] == "app_cfg" and cfg["spec"]["Data"] == data and cfg["id"] and cfg["version"]["Index"] > 0
    assert "app_cfg" in [c["spec"]["Name"] for c in client.get(env("/swarm/configs")).json()["data"]]
    assert client.get(env(f"/swarm/configs/{cfg['id']}")).json()["data"]["spec"]["Labels"] == {"team": "a"}
    again = client.post(env("/swarm/configs"), json={"spec": {"Name": "app_cfg"}})
    assert again.status_code == 409
    assert client.post(env("/swarm/configs"), json={"spec": {"Labels": {}}}).status_code == 400
    assert client.delete(env(f"/swarm/configs/{cfg['id']}")).status_code == 200
    assert client.get(env(f"/swarm/configs/{cfg['id']}")).status_code == 404
    assert client.delete(env(f"/swarm/configs/{cfg['id']}")).status_code == 404


def test_a_swarm_secret_never_returns_its_data(client, sim):
    data = base64.b64encode(b"hunter2").decode()
    r = client.post(env("/swarm/secrets"), json={"spec": {"Name": "db_pass", "Labels": {}, "Data": data}})
    assert r.status_code == 200, r.text
    secret = r.json()["data"]
    assert secret["spec"]["Name"] == "db_pass" and "Data" not in secret["spec"]
    listed = [s for s in client.get(env("/swarm/secrets")).json()["data"] if s["spec"]["Name"] == "db_pass"]
    assert len(listed) == 1 and "Data" not in listed[0]["spec"]
    got = client.get(env(f"/swarm/secrets/{secret['id']}")).json()["data"]
    assert "Data" not in got["spec"]
    assert data not in json.dumps(sim.items("swarm_secrets"))  # not even kept
    assert client.delete(env(f"/swarm/secrets/{secret['id']}")).status_code == 200
    assert "db_pass" not in [s["spec"]["Name"] for s in client.get(env("/swarm/secrets")).json()["data"]]


def test_a_swarm_service_is_created_scaled_updated_rolled_back_and_deleted(client):
    spec = {"Name": "api", "Labels": {}, "TaskTemplate": {"ContainerSpec": {"Image": "nginx:1.27"}, "ForceUpdate": 0},
            "Mode": {"Replicated": {"Replicas": 2}}, "EndpointSpec": {"Ports": [{"Protocol": "tcp", "TargetPort": 80, "PublishedPort": 8088}]}}
    r = client.post(env("/swarm/services"), json={"spec": spec})
    assert r.status_code == 200, r.text
    sid = r.json()["data"]["id"]
    listed = client.get(env("/swarm/services"), params={"search": "api"}).json()["data"]
    assert [(s["id"], s["replicas"], s["image"]) for s in listed] == [(sid, 2, "nginx:1.27")]
    assert listed[0]["ports"][0]["publishedPort"] == 8088
    assert client.post(env("/swarm/services"), json={"spec": spec}).status_code == 409
    tasks = client.get(env(f"/swarm/services/{sid}/tasks")).json()["data"]
    assert sorted(t["slot"] for t in tasks) == [1, 2] and {t["currentState"] for t in tasks} == {"running"}
    assert client.post(env(f"/swarm/services/{sid}/scale"), json={"replicas": 5}).status_code == 200
    assert len(client.get(env(f"/swarm/services/{sid}/tasks")).json()["data"]) == 5
    got = client.get(env(f"/swarm/services/{sid}")).json()["data"]
    assert got["spec"]["Mode"]["Replicated"]["Replicas"] == 5 and got["spec"]["TaskTemplate"]["ContainerSpec"]["Image"] == "nginx:1.27"
    new_spec = dict(spec, TaskTemplate={"ContainerSpec": {"Image": "nginx:1.28"}, "ForceUpdate": 0})
    assert client.put(env(f"/swarm/services/{sid}"), json={"version": got["version"]["Index"], "spec": new_spec}).status_code == 200
    assert client.get(env(f"/swarm/services/{sid}")).json()["data"]["spec"]["TaskTemplate"]["ContainerSpec"]["Image"] == "nginx:1.28"
    assert client.post(env(f"/swarm/services/{sid}/rollback")).status_code == 200
    back = client.get(env("/swarm/services"), params={"search": "api"}).json()["data"][0]
    assert (back["image"], back["replicas"]) == ("nginx:1.27", 5)
    assert client.delete(env(f"/swarm/services/{sid}")).status_code == 200
    assert client.get(env(f"/swarm/services/{sid}")).status_code == 404
    assert sid not in [t["serviceId"] for t in client.get(env("/swarm/tasks"), params={"limit": -1}).json()["data"]]
    assert client.post(env("/swarm/services/nope/scale"), json={"replicas": 1}).status_code == 404


def test_deleting_a_stack_service_updates_the_stack(client):
    assert client.delete(env(f"/swarm/services/{EDGE_WHOAMI}")).status_code == 200
    assert client.get(env("/swarm/stacks/edge")).json()["data"]["services"] == 1
    assert EDGE_WHOAMI not in [t["serviceId"] for t in client.get(env("/swarm/tasks")).json()["data"]]


def test_a_stack_is_deployed_its_source_read_and_removed(client):
    compose = "services:\n  web:\n    image: nginx:1.27\n    deploy:\n      replicas: 3\n  worker:\n    image: busybox:1.36\n"
    r = client.post(env("/swarm/stacks"), json={"name": "shop", "composeContent": compose, "envContent": "A=1\n"})
    assert r.status_code == 200 and r.json()["data"]["name"] == "shop", r.text
    services = client.get(env("/swarm/stacks/shop/services")).json()["data"]
    assert sorted((s["name"], s["replicas"]) for s in services) == [("shop_web", 3), ("shop_worker", 1)]
    assert client.get(env("/swarm/stacks/shop")).json()["data"]["services"] == 2
    source = client.get(env("/swarm/stacks/shop/source")).json()["data"]
    assert source["composeContent"] == compose and source["envContent"] == "A=1\n"
    assert client.get(env("/swarm/stacks/edge/source")).status_code == 404  # deployed outside Arcane: no source
    changed = client.put(env("/swarm/stacks/shop/source"), json={"composeContent": "services:\n  web:\n    image: nginx:1.28\n"})
    assert changed.status_code == 200
    assert client.get(env("/swarm/stacks/shop/source")).json()["data"]["composeContent"].endswith("nginx:1.28\n")
    rendered = client.post(env("/swarm/stacks/config/render"), json={"name": "x", "composeContent": compose}).json()["data"]
    assert rendered["services"] == ["web", "worker"] and rendered["renderedCompose"] == compose
    assert "x" not in [s["name"] for s in client.get(env("/swarm/stacks")).json()["data"]]  # rendering deploys nothing
    assert client.delete(env("/swarm/stacks/shop")).status_code == 200
    assert client.get(env("/swarm/stacks/shop")).status_code == 404
    assert client.get(env("/swarm/services"), params={"search": "shop_"}).json()["data"] == []


def test_swarm_nodes_are_promoted_demoted_updated_and_removed(client):
    assert client.post(env(f"/swarm/nodes/{WORKER_NODE}/promote")).status_code == 200
    assert client.get(env(f"/swarm/nodes/{WORKER_NODE}")).json()["data"]["role"] == "manager"
    assert client.post(env(f"/swarm/nodes/{WORKER_NODE}/demote")).status_code == 200
    assert client.get(env(f"/swarm/nodes/{WORKER_NODE}")).json()["data"]["role"] == "worker"
    leader = "4p2k9x7m1n3b5v8c6z0q2w4e6"
    assert client.post(env(f"/swarm/nodes/{leader}/demote")).status_code == 500  # the last manager
    r = client.patch(env(f"/swarm/nodes/{WORKER_NODE}"), json={"availability": "active", "labels": {"zone": "b"}})
    assert r.status_code == 200, r.text
    node = client.get(env(f"/swarm/nodes/{WORKER_NODE}")).json()["data"]
    assert node["availability"] == "active" and node["labels"] == {"zone": "b"}
    assert client.delete(env(f"/swarm/nodes/{WORKER_NODE}")).status_code == 500  # not down, no force
    assert client.delete(env(f"/swarm/nodes/{WORKER_NODE}"), params={"force": "true"}).status_code == 200
    assert client.get(env(f"/swarm/nodes/{WORKER_NODE}")).status_code == 404


def test_join_tokens_rotate_and_the_spec_updates(client):
    before = client.get(env("/swarm/join-tokens")).json()["data"]
    assert client.post(env("/swarm/join-tokens/rotate"), json={"rotateWorkerToken": True}).status_code == 200
    after = client.get(env("/swarm/join-tokens")).json()["data"]
    assert after["worker"] != before["worker"] and after["manager"] == before["manager"]
    client.post(env("/swarm/join-tokens/rotate"), json={})
    both = client.get(env("/swarm/join-tokens")).json()["data"]
    assert both["worker"] != after["worker"] and both["manager"] != after["manager"]
    spec = {"Name": "default", "Labels": {"env": "prod"}, "Orchestration": {"TaskHistoryRetentionLimit": 10}}
    assert client.put(env("/swarm/spec"), json={"spec": spec}).status_code == 200
    info = client.get(env("/swarm/info")).json()["data"]
    assert info["spec"]["Labels"] == {"env": "prod"} and info["spec"]["Orchestration"]["TaskHistoryRetentionLimit"] == 10


# ---------------------------------------------------------------- system backups


def test_a_system_backup_is_created_listed_and_deleted(client):
    r = client.post("/api/backups", json={"destination": "local"})
    assert r.status_code == 202, r.text
    run = r.json()
    assert run["id"].startswith("system-") and run["status"] == "running" and run["trigger"] == "manual" and run["activityId"]
    listed = {b["id"]: b for b in client.get("/api/backups").json()["data"]}
    assert listed[run["id"]]["status"] == "succeeded" and listed[run["id"]]["destination"] == "local"
    assert run["id"] in [h["id"] for h in client.get("/api/backups/history").json()["data"]]
    files = client.post(f"/api/backups/{run['id']}/files/browse", json={"recoveryKey": "k"}).json()
    assert {f["name"] for f in files["data"]} == {"blog", "monitoring"} and files["pagination"]["totalItems"] == 2
    inside = client.post(f"/api/backups/{run['id']}/files/browse", params={"path": "blog"}, json={"recoveryKey": "k"}).json()["data"]
    assert {f["name"] for f in inside} == {"compose.yaml", ".env"} and not any(f["isDirectory"] for f in inside)
    r = client.request("DELETE", f"/api/backups/{run['id']}", json={})
    assert r.status_code == 200, r.text
    assert run["id"] not in [b["id"] for b in client.get("/api/backups").json()["data"]]
    assert run["id"] not in [h["id"] for h in client.get("/api/backups/history").json()["data"]]
    assert client.request("DELETE", f"/api/backups/{run['id']}", json={}).status_code == 500
    assert client.post(f"/api/backups/{run['id']}/files/browse", json={"recoveryKey": "k"}).status_code == 400


def test_a_system_backup_to_s3_needs_a_destination(client):
    assert client.post("/api/backups", json={"destination": "s3"}).status_code == 500
    assert client.post("/api/backups", json={"destination": "tape"}).status_code == 500
    r = client.post("/api/backups", json={"destination": "s3", "s3DestinationId": "5a7c9e1b-3d5f-4a7c-9e1b-3d5f7a9c1e21"})
    assert r.status_code == 202 and r.json()["destination"] == "s3"


def test_system_backup_policies_are_replaced_as_a_set(client):
    before = client.get("/api/backups/policies").json()
    assert len(before["policies"]) == 1
    kept = dict(before["policies"][0], schedule="0 3 * * *")
    kept.pop("lastRun", None)
    kept.pop("s3DestinationName", None)
    new = {"enabled": False, "schedule": "0 4 * * 0", "retentionCount": 4, "localEnabled": True, "s3Enabled": False}
    r = client.put("/api/backups/policies", json={"policies": [kept, new]})
    assert r.status_code == 200, r.text
    after = {p["schedule"]: p for p in client.get("/api/backups/policies").json()["policies"]}
    assert set(after) == {"0 3 * * *", "0 4 * * 0"} and after["0 3 * * *"]["id"] == kept["id"] and after["0 4 * * 0"]["id"]
    client.put("/api/backups/policies", json={"policies": []})
    assert client.get("/api/backups/policies").json()["policies"] == []


def test_discover_counts_new_snapshots_of_a_known_destination(client):
    r = client.post("/api/backups/discover", json={"s3DestinationId": "5a7c9e1b-3d5f-4a7c-9e1b-3d5f7a9c1e21", "recoveryKey": "k"})
    assert r.status_code == 200 and r.json()["data"] == 0
    assert client.post("/api/backups/discover", json={"s3DestinationId": "nope", "recoveryKey": "k"}).status_code == 400


# ---------------------------------------------------------------- build workspace, diagnostics


def test_build_folders_are_made_listed_and_deleted(client):
    assert client.post(env("/builds/browse/mkdir"), params={"path": "/app"}).status_code == 204
    assert client.post(env("/builds/browse/mkdir"), params={"path": "/app/src"}).status_code == 204
    assert client.post(env("/builds/browse/mkdir"), params={"path": "/app"}).status_code == 204  # MkdirAll: fine again
    root = {e["name"]: e for e in client.get(env("/builds/browse")).json()["data"]}
    assert set(root) == {"app", "blog-theme"} and (root["app"]["isDirectory"], root["app"]["path"]) == (True, "/app")
    inside = client.get(env("/builds/browse"), params={"path": "/app"}).json()["data"]
    assert [e["name"] for e in inside] == ["src"]
    assert client.delete(env("/builds/browse"), params={"path": "/"}).status_code == 500
    assert client.delete(env("/builds/browse"), params={"path": "/app"}).status_code == 204
    assert [e["name"] for e in client.get(env("/builds/browse")).json()["data"]] == ["blog-theme"]
    assert client.get(env("/builds/browse"), params={"path": "/app"}).json()["data"] == []


def test_a_goroutine_leak_scan_reports_none(client):
    r = client.post("/api/diagnostics/goroutineleak")
    assert r.status_code == 200, r.text
    assert r.json()["count"] == 0 and r.json()["scannedAt"] and "goroutineleak" in r.json()["profile"]


def test_down_removes_the_containers_and_up_brings_them_back(client):
    pid = create_project(client, "shop")["id"]
    client.post(env(f"/projects/{pid}/up"), json={})
    assert client.post(env(f"/projects/{pid}/down")).status_code == 200
    assert client.get(env("/containers"), params={"search": "shop-"}).json()["data"] == []
    runtime = client.get(env(f"/projects/{pid}/runtime")).json()["data"]
    assert runtime["status"] == "stopped" and {s["status"] for s in runtime["runtimeServices"]} == {"stopped"}
    client.post(env(f"/projects/{pid}/up"), json={})
    assert len(client.get(env("/containers"), params={"search": "shop-"}).json()["data"]) == 2


def test_the_workspace_lists_and_reads_the_files_written(client):
    pid = create_project(client, "shop")["id"]
    files = client.get(env(f"/projects/{pid}/workspace")).json()["data"]["files"]
    assert {f["relativePath"]: f["size"] for f in files} == {"compose.yaml": len(COMPOSE), ".env": len(ENV)}
    got = client.get(env(f"/projects/{pid}/workspace/file"), params={"relativePath": "compose.yaml"}).json()["data"]
    assert got["content"] == COMPOSE and got["editable"] is True and got["size"] == len(COMPOSE)
    assert client.get(env(f"/projects/{pid}/workspace/file"), params={"relativePath": ".env"}).json()["data"]["content"] == ENV
    client.put(env(f"/projects/{pid}"), json={"envContent": "X=2\n"})
    assert client.get(env(f"/projects/{pid}/workspace/file"), params={"relativePath": ".env"}).json()["data"]["content"] == "X=2\n"
    assert client.get(env(f"/projects/{pid}/workspace/file"), params={"relativePath": "nope.txt"}).status_code == 404
    no_env = create_project(client, "bare", env_text=None)["id"]
    assert [f["relativePath"] for f in client.get(env(f"/projects/{no_env}/workspace")).json()["data"]["files"]] == ["compose.yaml"]
    assert client.get(env(f"/projects/{no_env}/workspace/file"), params={"relativePath": ".env"}).status_code == 404
