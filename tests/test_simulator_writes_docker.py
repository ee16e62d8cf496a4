"""The simulator's Docker-side writes (issue 22): each state-changing operation changes the
state as the Arcane handler cited in its data does, and the reads show it — creates appear
in lists and gets with the members the answer promises, updates show, deletes remove,
prunes remove what Docker's prune removes and report it. Statuses, fields and structure;
nothing here imports the engine."""

from __future__ import annotations

import time
import urllib.parse

import httpx
import pytest

from simulator.template import render
from tests import simulator_fixtures

sim, fresh = simulator_fixtures.sim, simulator_fixtures.fresh  # one simulator per module, reset before each test

NGINX = "sha256:cd4495bb73de9b01bf009710b80ecf4be2d298db47492f4e9e7d0b04981c4614"  # in use
ANONYMOUS = "9a4f1c7e2b5d8a3f6c9e1b4d7a2f5c8e1b3d6f9a2c5e8b1d4f7a3c6e9b2d5f8a"  # the demo's anonymous, unused volume
ADMINER = "081a841fcde041bd743ce57dbc5780506b7888cc141e389f141141f74849c00d"


@pytest.fixture
def api(sim):
    with httpx.Client(base_url=sim.url + "/api/environments/0", headers={"X-API-Key": sim.api_key}, timeout=10) as c:
        yield c


def data(r: httpx.Response, status: int = 200):
    assert r.status_code == status, r.text
    return r.json()["data"]


def problem(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    return r.json()["detail"]


def names(sim, collection: str, member: str = "name") -> set:
    return {i[member] for i in sim.items(collection)}


def activity(sim, activity_id: str) -> dict:
    return next(a for a in sim.items("activities") if a["id"] == activity_id)


# ---------------------------------------------------------------- the template machinery


def test_let_find_map_when_and_rendered_keys():
    ctx = {"state": lambda name: [{"id": "a1", "n": 1}, {"id": "b2", "n": 2}],
           "find": lambda name, key: {"id": key, "_sim": {"secret": 1}} if key == "a1" else None,
           "body": {"kind": "x", "flag": True}, "let": {"k": "net"}}
    assert render({"$find": {"from": "c", "key": "{body.missing ?? 'a1'}"}}, ctx) == {"id": "a1"}  # private members left out
    assert render({"$find": {"from": "c", "key": "zz"}}, ctx) is None
    assert render({"$find": {"from": "c", "key": "a1", "when": "{body.flag|not}"}}, ctx) is None
    assert render("{body.kind|map:x=one,y=two}", ctx) == "one"
    assert render("{body.kind|map:y=two ?? 'none'}", ctx) == "none"
    assert render({"$select": {"from": "c", "field": "id", "when": "{body.flag}"}}, ctx) == ["a1", "b2"]
    assert render({"$select": {"from": "c", "field": "id", "when": "{body.flag|not}"}}, ctx) == []
    assert render({"$sum": {"from": "c", "field": "n", "when": "{body.flag|not}"}}, ctx) == 0
    assert render({"{let.k}": {"id": 1}, "plain": 2}, ctx) == {"net": {"id": 1}, "plain": 2}


# ---------------------------------------------------------------- volumes and networks


def test_volume_sizes_agree_with_the_volume_list(api, sim):
    sizes = data(api.get("/volumes/sizes"))
    listed = data(api.get("/volumes", params={"limit": -1}))
    assert {s["name"]: s["size"] for s in sizes} == {v["name"]: v["size"] for v in listed}
    assert {s["name"]: s["refCount"] for s in sizes} == {v["name"]: len(v["containers"]) for v in listed}


def test_volume_prune_removes_anonymous_unused_volumes_and_reports_them(api, sim):
    before = {v["name"]: v for v in sim.items("volumes")}
    report = data(api.post("/volumes/prune"))
    assert report["volumesDeleted"] == [ANONYMOUS]
    assert report["spaceReclaimed"] == before[ANONYMOUS]["size"] > 0
    assert names(sim, "volumes") == set(before) - {ANONYMOUS}  # named unused volumes stay (no `all`)
    assert activity(sim, report["activityId"])["status"] == "success"
    again = data(api.post("/volumes/prune"))
    assert again["spaceReclaimed"] == 0 and not again.get("volumesDeleted")


def test_network_prune_removes_unused_custom_networks(api, sim):
    report = data(api.post("/networks/prune"))
    assert report["networksDeleted"] == ["monitoring_default"] and report["spaceReclaimed"] == 0
    assert names(sim, "networks") == {"bridge", "host", "none", "blog_default"}
    assert activity(sim, report["activityId"])["status"] == "success"


def test_connect_and_disconnect_a_container(api, sim):
    net = data(api.post("/networks", json={"name": "wd-net", "options": {}}))["id"]
    for ref in ("adminer", ADMINER[:12]):  # a name or an ID prefix, as Docker resolves it
        out = data(api.post(f"/networks/{net}/connect", json={"containerId": ref, "aliases": ["db-admin"]}))
        assert out["message"] and activity(sim, out["activityId"])["status"] == "success"
        got = data(api.get(f"/networks/{net}"))
        assert [(c["id"], c["name"]) for c in got["containersList"]] == [(ADMINER, "adminer")]
        container = data(api.get("/containers/adminer"))
        endpoint = next(c for c in sim.items("containers") if c["id"] == ADMINER)["networkSettings"]["networks"]["wd-net"]
        assert endpoint["networkId"] == net and endpoint["aliases"] == ["db-admin"] and container["name"] == "adminer"
        assert problem(api.post(f"/networks/{net}/connect", json={"containerId": ref}), 500)  # already attached
        data(api.post(f"/networks/{net}/disconnect", json={"containerId": ref}))
        assert data(api.get(f"/networks/{net}"))["containersList"] == []
        assert "wd-net" not in next(c for c in sim.items("containers") if c["id"] == ADMINER)["networkSettings"]["networks"]
        assert problem(api.post(f"/networks/{net}/disconnect", json={"containerId": ref}), 500)  # not attached
    assert data(api.get("/networks", params={"search": "wd-net"}))[0]["inUse"] is False  # detached: unused again
    data(api.post(f"/networks/{net}/connect", json={"containerId": "adminer"}))
    assert "wd-net" not in data(api.post("/networks/prune"))["networksDeleted"]  # in use: a prune keeps it
    data(api.post(f"/networks/{net}/disconnect", json={"containerId": "adminer"}))
    assert "wd-net" in data(api.post("/networks/prune"))["networksDeleted"]
    net = data(api.post("/networks", json={"name": "wd-net", "options": {}}))["id"]
    assert problem(api.post(f"/networks/{net}/connect", json={"containerId": "nosuch"}), 500)
    assert problem(api.post("/networks/nosuch/connect", json={"containerId": "adminer"}), 500)
    failed = [a for a in sim.items("activities") if a.get("status") == "failed"]
    assert failed  # a refused connect ends its activity failed


# ---------------------------------------------------------------- images


def test_image_prune_default_removes_every_unused_image(api, sim):
    before = {i["id"]: i for i in sim.items("images")}
    unused = {k for k, i in before.items() if not i.get("inUse")}
    report = data(api.post("/images/prune"))
    assert set(report["imagesDeleted"]) == unused and unused
    assert report["spaceReclaimed"] == sum(before[k]["size"] for k in unused)
    assert set(names(sim, "images", "id")) == set(before) - unused


DANGLING = "sha256:0f2e4d6c8b0a1f3e5d7c9b1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e"  # the demo's untagged image


def test_image_prune_dangling_takes_only_untagged_images_and_their_findings(api, sim):
    sim.change_behind_arcane("images", NGINX, {"inUse": False, "repoTags": []})  # `docker rmi` of its tag, the container gone
    for body, params in (({"mode": "dangling"}, {}), ({"dangling": True}, {}), ({"filters": {"dangling": ["true"]}}, {}), (None, {"dangling": "true"})):
        sim.reset()
        sim.change_behind_arcane("images", NGINX, {"inUse": False, "repoTags": []})
        report = data(api.post("/images/prune", json=body, params=params) if body is not None else api.post("/images/prune", params=params))
        # the demo's own dangling image (a rebuild's leftover) and the one made dangling here
        assert sorted(report["imagesDeleted"]) == sorted([NGINX, DANGLING]), (body, params)
        assert NGINX not in names(sim, "images", "id") and DANGLING not in names(sim, "images", "id")
        assert "sha256:5e7c1f0a9b3d2c4e6f8a0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e" in names(sim, "images", "id")  # tagged, unused: kept
        assert not [v for v in sim.items("vulnerabilities") if v["imageId"] == NGINX]


def test_image_prune_refuses_what_it_cannot_model(api, sim):
    before = len(sim.items("images"))
    assert problem(api.post("/images/prune", json={"mode": "olderThan", "until": "24h"}), 501)
    assert problem(api.post("/images/prune", json={"mode": "sometimes"}), 500)
    assert len(sim.items("images")) == before


def test_tag_image_adds_a_reference(api, sim):
    out = data(api.post("/images/nginx:1.27/tag", json={"repository": "registry.local/nginx", "tag": "stable"}))
    assert out["message"]
    data(api.post("/images/nginx:1.27/tag", json={"repository": "registry.local/nginx", "tag": "stable"}))  # idempotent
    data(api.post("/images/nginx:1.27/tag", json={"repository": "mirror/nginx"}))
    assert next(i for i in sim.items("images") if i["id"] == NGINX)["repoTags"] == ["nginx:1.27", "registry.local/nginx:stable", "mirror/nginx:latest"]
    assert data(api.get("/images/" + urllib.parse.quote("registry.local/nginx:stable", safe="")))["id"] == NGINX
    assert problem(api.post("/images/nginx:1.27/tag", json={"repository": " "}), 400)
    assert problem(api.post("/images/nosuch:1/tag", json={"repository": "x"}), 500)


# ---------------------------------------------------------------- system


def test_start_all_and_stop_all(api, sim):
    paused = {c["id"] for c in sim.items("containers") if c["state"] == "paused"}
    idle = {c["id"] for c in sim.items("containers") if c["state"] not in ("running", "paused")}
    out = data(api.post("/system/containers/start-all"))
    assert set(out["started"]) == idle and set(out["failed"]) == paused and len(out["errors"]) == len(paused)
    assert out["success"] is (not paused)
    assert {c["state"] for c in sim.items("containers")} == {"running", "paused"} if paused else {"running"}
    out = data(api.post("/system/containers/stop-all"))
    assert out["success"] is True and set(out["stopped"]) == names(sim, "containers", "id")
    assert {c["state"] for c in sim.items("containers")} == {"exited"}
    assert data(api.get("/containers/counts"))["runningContainers"] == 0


def test_prune_all_answers_the_activity_and_prunes_by_mode(api, sim):
    stopped = {c["id"] for c in sim.items("containers") if c["state"] in ("exited", "created")}
    unused_images = {i["id"] for i in sim.items("images") if not i.get("inUse")}
    out = data(api.post("/system/prune", json={"containers": {"mode": "stopped"}, "images": {"mode": "all"},
                                               "volumes": {"mode": "all"}, "networks": {"mode": "unused"}}))
    assert out["success"] is True and out["activityId"] and out["spaceReclaimed"] == 0  # the report is the activity's
    assert activity(sim, out["activityId"])["type"] == "system_prune"
    assert not stopped & names(sim, "containers", "id") and stopped
    assert not unused_images & names(sim, "images", "id")
    assert all(v.get("inUse") for v in sim.items("volumes"))
    assert "monitoring_default" not in names(sim, "networks")
    sim.reset()
    out = data(api.post("/system/prune", json={"volumes": {"mode": "anonymous"}}))
    assert names(sim, "volumes") == {v["name"] for v in sim.state["environments"]["0"]["volumes"]} - {ANONYMOUS}
    assert len(sim.items("containers")) == 56  # containers: no mode, nothing pruned
    assert problem(api.post("/system/prune", json={"buildCache": {"mode": "all"}}), 501)
    assert problem(api.post("/system/prune", json={"images": {"mode": "olderThan", "until": "24h"}}), 501)


def test_commit_makes_an_image(api, sim):
    out = data(api.post("/containers/adminer/commit", json={"repository": "snap/adminer", "tag": "v1", "author": "ops"}))
    image = data(api.get(f"/images/{out['id']}"))
    assert image["repoTags"] == ["snap/adminer:v1"] and image["author"] == "ops"
    assert out["id"] in {i["id"] for i in data(api.get("/images", params={"limit": -1}))}
    untagged = data(api.post("/containers/adminer/commit", json={}))["id"]
    assert data(api.get(f"/images/{untagged}"))["repoTags"] == []  # dangling: what an image prune takes
    assert untagged in data(api.post("/images/prune", json={"mode": "dangling"}))["imagesDeleted"]
    assert problem(api.post("/containers/nosuch/commit", json={}), 500)


def test_auto_update_exclusion(api, sim):
    assert data(api.put("/containers/adminer/auto-update", json={"enabled": False}))["message"]
    assert next(c for c in sim.state["environments"]["0"]["containers"] if c["id"] == ADMINER)["_sim"]["autoUpdateExcluded"] is True
    assert problem(api.put("/containers/nosuch/auto-update", json={"enabled": True}), 404)


# ---------------------------------------------------------------- volume backups


def test_volume_backup_create_list_download_delete(api, sim):
    volume = next(v for v in sim.items("volumes") if v["name"] == "grafana-data")
    r = api.post("/volumes/grafana-data/backups", json={})
    backup = data(r, 202)
    for member in ("id", "volumeName", "size", "createdAt", "status", "trigger", "destination", "format", "type", "activityId"):
        assert backup.get(member) not in (None, ""), member
    assert backup["id"].startswith("grafana-data-") and backup["volumeName"] == "grafana-data"
    assert (backup["size"], backup["status"], backup["trigger"], backup["destination"]) == (volume["size"], "succeeded", "manual", "local")
    listed = data(api.get("/volumes/grafana-data/backups"))
    assert backup["id"] in [b["id"] for b in listed]
    dl = api.get(f"/volumes/backups/{backup['id']}/download")
    assert dl.status_code == 200 and dl.content
    assert dl.headers["content-disposition"] == f"attachment; filename={backup['id']}.tar.gz"
    out = data(api.delete(f"/volumes/backups/{backup['id']}"))
    assert out["message"] and activity(sim, out["activityId"])["status"] == "success"
    assert backup["id"] not in [b["id"] for b in data(api.get("/volumes/grafana-data/backups"))]
    assert problem(api.get(f"/volumes/backups/{backup['id']}/download"), 500)
    assert problem(api.delete(f"/volumes/backups/{backup['id']}"), 500)


def test_volume_backup_destination_checks(api, sim):
    before = len(sim.items("volume_backups"))
    assert problem(api.post("/volumes/grafana-data/backups", json={"destination": "tape"}), 500)
    assert problem(api.post("/volumes/grafana-data/backups", json={"destination": "s3"}), 500)  # no S3 destination named
    assert problem(api.post("/volumes/grafana-data/backups", json={"destination": "s3", "s3DestinationId": "nosuch"}), 500)
    assert problem(api.post("/volumes/grafana-data/backups", json={"policyId": "p1"}), 501)
    assert problem(api.post("/volumes/nosuch/backups", json={}), 500)
    assert len(sim.items("volume_backups")) == before
    s3 = sim.items("s3_destinations", None)[0]
    backup = data(api.post("/volumes/grafana-data/backups", json={"destination": "local_s3", "s3DestinationId": s3["id"]}), 202)
    assert (backup["destination"], backup["s3DestinationId"], backup["s3DestinationName"]) == ("local_s3", s3["id"], s3["name"])


def test_restore_takes_a_safety_backup_first(api, sim):
    backups = {b["id"] for b in sim.items("volume_backups")}
    out = data(api.post("/volumes/blog_db-data/backups/bkp_20251230_blog_db_data/restore"))
    assert out["message"] and activity(sim, out["activityId"])["status"] == "success"
    safety = [b for b in sim.items("volume_backups") if b["id"] not in backups]
    assert [(b["volumeName"], b["trigger"]) for b in safety] == [("blog_db-data", "safety")]
    assert next(v for v in sim.items("volumes") if v["name"] == "blog_db-data")["size"] == 41100000  # the backup's contents
    assert problem(api.post("/volumes/grafana-data/backups/bkp_20251230_blog_db_data/restore"), 500)  # not that volume's
    assert problem(api.post("/volumes/blog_db-data/backups/nosuch/restore"), 500)
    mine = data(api.post("/volumes/grafana-data/backups", json={}), 202)
    sim.change_behind_arcane("volume_backups", mine["id"], {"localSnapshotId": ""})  # a Rustic row without its snapshot
    assert problem(api.post(f"/volumes/grafana-data/backups/{mine['id']}/restore"), 500)
    assert data(api.post("/volumes/blog_db-data/backups/bkp_20251231_blog_db_data/restore-files", json={"paths": ["/pg_hba.conf"]}))["message"]
    assert problem(api.post("/volumes/blog_db-data/backups/bkp_20251231_blog_db_data/restore-files", json={"paths": []}), 400)


# ---------------------------------------------------------------- webhooks


def wait_for(predicate, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_webhook_create_trigger_disable_delete(api, sim):
    sim.change_behind_arcane("containers", "adminer", {"state": "exited"})
    created = data(api.post("/webhooks", json={"name": "wd-hook", "targetType": "container", "targetId": "adminer", "actionType": "start"}))
    for member in ("id", "name", "token", "targetType", "actionType", "targetId", "createdAt"):
        assert created.get(member), member
    token = created["token"]
    listed = {h["id"]: h for h in data(api.get("/webhooks"))}[created["id"]]
    assert listed["enabled"] is True and listed["targetName"] == "adminer" and token.startswith(listed["tokenPrefix"])
    assert "token" not in listed  # shown once, at creation
    trigger = httpx.post(sim.url + "/api/webhooks/trigger/" + token)
    assert trigger.status_code == 202
    assert wait_for(lambda: next(c for c in sim.items("containers") if c["id"] == ADMINER)["state"] == "running")
    assert data(api.patch(f"/webhooks/{created['id']}", json={"enabled": False})) is not None
    assert {h["id"]: h for h in data(api.get("/webhooks"))}[created["id"]]["enabled"] is False
    assert httpx.post(sim.url + "/api/webhooks/trigger/" + token).status_code == 403
    data(api.delete(f"/webhooks/{created['id']}"))
    assert created["id"] not in {h["id"] for h in data(api.get("/webhooks"))}
    assert httpx.post(sim.url + "/api/webhooks/trigger/" + token).status_code == 404
    assert problem(api.delete(f"/webhooks/{created['id']}"), 404)
    assert problem(api.patch(f"/webhooks/{created['id']}", json={"enabled": True}), 404)
    kinds = [e["type"] for e in sim.items("events", None) if e.get("resourceId") == created["id"]]
    assert kinds == ["webhook.create", "webhook.trigger", "webhook.update", "webhook.delete"]


def test_webhook_create_checks(api, sim):
    before = len(sim.items("webhooks"))
    assert problem(api.post("/webhooks", json={"name": "x", "targetType": "project", "targetId": "p", "actionType": "start"}), 400)
    assert problem(api.post("/webhooks", json={"name": "x", "targetType": "project", "targetId": " ", "actionType": "up"}), 400)
    assert problem(api.post("/webhooks", json={"name": "x", "targetType": "container", "targetId": "nosuch", "actionType": "start"}), 500)
    assert len(sim.items("webhooks")) == before
    updater = data(api.post("/webhooks", json={"name": "u", "targetType": "updater", "targetId": "ignored", "actionType": "run"}))
    assert updater["actionType"] == "run"
    assert {h["id"]: h for h in data(api.get("/webhooks"))}[updater["id"]]["targetId"] == ""  # the updater has no target


# ---------------------------------------------------------------- events, activities, vulnerabilities


def test_delete_an_event(sim):
    with httpx.Client(base_url=sim.url + "/api", headers={"X-API-Key": sim.api_key}) as c:
        event = sim.items("events", None)[0]["id"]
        assert data(c.delete(f"/events/{event}"))["message"]
        assert event not in {e["id"] for e in sim.items("events", None)}
        assert problem(c.delete(f"/events/{event}"), 500)


def test_clear_activity_history_keeps_running_ones(api, sim):
    finished = [a for a in sim.items("activities") if a["status"] in ("success", "failed", "cancelled")]
    running = [a for a in sim.items("activities") if a["status"] not in ("success", "failed", "cancelled")]
    assert data(api.delete("/activities/history"))["deleted"] == len(finished) > 0
    assert [a["id"] for a in sim.items("activities")] == [a["id"] for a in running]
    assert data(api.delete("/activities/history"))["deleted"] == 0


def test_ignore_and_unignore_a_vulnerability(api, sim):
    finding = next(v for v in sim.items("vulnerabilities") if not v.get("ignored"))
    body = {k: finding[k] for k in ("imageId", "vulnerabilityId", "pkgName", "installedVersion")}
    ignored = data(api.post("/vulnerabilities/ignore", json={**body, "reason": "not reachable"}))
    assert ignored["id"] and ignored["environmentId"] == "0" and ignored["createdBy"] and ignored["reason"] == "not reachable"
    assert ignored["id"] in {i["id"] for i in data(api.get("/vulnerabilities/ignored"))}
    after = next(v for v in sim.items("vulnerabilities") if v["vulnerabilityId"] == finding["vulnerabilityId"])
    assert after["ignored"] is True and after["ignoreId"] == ignored["id"]
    assert problem(api.post("/vulnerabilities/ignore", json=body), 409)
    data(api.delete(f"/vulnerabilities/ignore/{ignored['id']}"))
    after = next(v for v in sim.items("vulnerabilities") if v["vulnerabilityId"] == finding["vulnerabilityId"])
    assert after["ignored"] is False and "ignoreId" not in after
    assert problem(api.delete(f"/vulnerabilities/ignore/{ignored['id']}"), 404)
