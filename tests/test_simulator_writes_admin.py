"""The simulator's writes of Arcane's own records: each modelled operation changes the
state as Arcane's handler does (the values asserted are Arcane's, cited in the data):
creates appear in their lists and gets with what the response schema promises, updates
show, deletes remove, secrets never come back, and accounts, roles and passwords change
who may do what. Nothing here imports the engine.
"""

from __future__ import annotations

import httpx
import pytest

from tests import simulator_fixtures

sim, fresh = simulator_fixtures.sim, simulator_fixtures.fresh  # one simulator per module, reset before each test

LOCAL = "0"
ADMIN_KEY_HEADER = "X-API-Key"
STRONG = "Str0ng!Passw0rd"


@pytest.fixture(autouse=True)
def many_logins(fresh, sim):
    """These cases log in as many users as they create, past Arcane's five logins a minute
    per client (the simulator's limit, not the engine's): test_simulator_contract tests the limit."""
    sim.rate_limits_enabled = False
    yield
    sim.rate_limits_enabled = True


def call(sim, method: str, path: str, body=None, *, key: str | None = None, token: str | None = None) -> httpx.Response:
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    else:
        headers[ADMIN_KEY_HEADER] = key or sim.api_key
    return httpx.request(method, sim.url + "/api" + path, json=body, headers=headers, timeout=10)


def data(r: httpx.Response):
    assert r.status_code < 300, (r.status_code, r.text)
    return r.json()["data"]


def login(sim, username: str, password: str) -> httpx.Response:
    return httpx.post(sim.url + "/api/auth/login", json={"username": username, "password": password}, timeout=10)


REGISTRY = {"url": "registry.wadmin.invalid", "username": "bot", "token": "s3cret-token", "description": "test", "insecure": False,
            "enabled": True, "registryType": "generic", "repositoryNames": [], "awsAccessKeyId": "", "awsSecretAccessKey": "", "awsRegion": ""}


# ---------------------------------------------------------------- container registries


def test_a_registry_created_is_listed_and_read_without_its_token(sim):
    created = data(call(sim, "POST", "/container-registries", REGISTRY))
    assert created["id"] and created["url"] == REGISTRY["url"] and created["enabled"] is True
    assert "token" not in created
    got = data(call(sim, "GET", f"/container-registries/{created['id']}"))
    assert got["username"] == "bot" and "token" not in got
    listed = data(call(sim, "GET", "/container-registries?limit=-1"))
    assert created["id"] in [r["id"] for r in listed]


def test_a_registry_without_username_or_token_is_refused(sim):
    for member in ("username", "token"):
        r = call(sim, "POST", "/container-registries", dict(REGISTRY, **{member: " "}))
        assert r.status_code == 400
        assert member.capitalize() in r.json()["detail"]


def test_a_registry_update_shows_and_delete_removes(sim):
    rid = data(call(sim, "POST", "/container-registries", REGISTRY))["id"]
    body = {k: None for k in REGISTRY}
    body["description"] = "changed"
    body["enabled"] = False
    updated = data(call(sim, "PUT", f"/container-registries/{rid}", body))
    assert updated["description"] == "changed" and updated["enabled"] is False and updated["url"] == REGISTRY["url"]
    assert data(call(sim, "DELETE", f"/container-registries/{rid}"))["message"]
    assert call(sim, "GET", f"/container-registries/{rid}").status_code >= 400
    # Arcane's delete is a WHERE id = ?: deleting it again still succeeds
    assert call(sim, "DELETE", f"/container-registries/{rid}").status_code == 200


def test_a_registry_test_with_credentials_cannot_reach_it(sim):
    rid = data(call(sim, "POST", "/container-registries", REGISTRY))["id"]
    r = call(sim, "POST", f"/container-registries/{rid}/test")
    assert r.status_code == 400
    assert REGISTRY["url"] in r.json()["detail"]


def test_a_registry_sync_replaces_the_list(sim):
    item = {"id": "synced-1", "url": "mirror.wadmin.invalid", "username": "u", "token": "t", "enabled": True, "insecure": False,
            "registryType": "generic", "repositoryNames": [],
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"}
    r = call(sim, "POST", "/container-registries/sync", {"registries": [item]})
    assert r.status_code == 200
    assert [x["id"] for x in data(call(sim, "GET", "/container-registries"))] == ["synced-1"]


# ---------------------------------------------------------------- variables


def test_a_variable_created_is_listed_updated_and_deleted(sim):
    r = data(call(sim, "POST", "/variables", {"key": "WADMIN_VAR", "value": "one", "allEnvironments": True}))
    var = r["variable"]
    assert var["key"] == "WADMIN_VAR" and var["value"] == "one" and var["id"]
    assert {s["environmentId"]: s["status"] for s in r["syncResults"]}[LOCAL] == "success"
    assert "WADMIN_VAR" in [v["key"] for v in data(call(sim, "GET", "/variables"))]
    upd = data(call(sim, "PUT", f"/variables/{var['id']}", {"value": "two"}))["variable"]
    assert upd["value"] == "two"
    gone = data(call(sim, "DELETE", f"/variables/{var['id']}"))
    assert "variable" not in gone
    assert "WADMIN_VAR" not in [v["key"] for v in data(call(sim, "GET", "/variables"))]
    assert call(sim, "DELETE", f"/variables/{var['id']}").status_code == 404


def test_a_secret_variable_value_is_never_answered(sim):
    var = data(call(sim, "POST", "/variables", {"key": "WADMIN_SECRET", "value": "hunter2", "isSecret": True, "allEnvironments": True}))["variable"]
    assert var["isSecret"] is True and var["value"] == ""
    listed = [v for v in data(call(sim, "GET", "/variables")) if v["key"] == "WADMIN_SECRET"]
    assert listed[0]["value"] == ""


def test_a_variable_key_and_scope_are_checked(sim):
    assert call(sim, "POST", "/variables", {"key": "1BAD", "value": "x", "allEnvironments": True}).status_code == 400
    assert call(sim, "POST", "/variables", {"key": "NO_SCOPE", "value": "x"}).status_code == 400
    assert call(sim, "POST", "/variables", {"key": "DOMAIN", "value": "x", "allEnvironments": True}).status_code == 409


def test_variable_sync_reports_every_environment(sim):
    statuses = data(call(sim, "POST", "/variables/sync"))
    assert statuses[0]["environmentId"] == LOCAL and statuses[0]["status"] == "success"


# ---------------------------------------------------------------- templates


TEMPLATE = {"name": "wadmin-tpl", "description": "d", "content": "services:\n  web:\n    image: nginx\n", "envContent": ""}


def test_a_template_created_is_custom_and_local_then_updated_and_deleted(sim):
    tpl = data(call(sim, "POST", "/templates", TEMPLATE))
    assert tpl["isCustom"] is True and tpl["isRemote"] is False and tpl["id"]
    assert data(call(sim, "GET", f"/templates/{tpl['id']}"))["content"] == TEMPLATE["content"]
    upd = data(call(sim, "PUT", f"/templates/{tpl['id']}", dict(TEMPLATE, description="new")))
    assert upd["description"] == "new"
    assert data(call(sim, "DELETE", f"/templates/{tpl['id']}"))["message"]
    assert call(sim, "GET", f"/templates/{tpl['id']}").status_code == 404


def test_a_remote_template_is_not_updated_or_deleted_but_downloaded(sim):
    assert call(sim, "PUT", "/templates/tpl_nginx", TEMPLATE).status_code == 500
    assert call(sim, "DELETE", "/templates/tpl_nginx").status_code == 500
    local = data(call(sim, "POST", "/templates/tpl_nginx/download"))
    assert local["isRemote"] is False and local["isCustom"] is True and local["id"] != "tpl_nginx"
    assert call(sim, "POST", f"/templates/{local['id']}/download").status_code == 400


def test_template_registries_are_created_updated_and_deleted(sim):
    body = {"name": "wadmin", "url": "https://templates.wadmin.invalid/registry.json", "description": "d", "enabled": True}
    reg = data(call(sim, "POST", "/templates/registries", body))
    assert reg["id"] and reg["url"] == body["url"]
    assert call(sim, "PUT", f"/templates/registries/{reg['id']}", dict(body, enabled=False)).status_code == 200
    assert [r["enabled"] for r in data(call(sim, "GET", "/templates/registries")) if r["id"] == reg["id"]] == [False]
    assert call(sim, "DELETE", f"/templates/registries/{reg['id']}").status_code == 200
    assert call(sim, "DELETE", f"/templates/registries/{reg['id']}").status_code == 404


# ---------------------------------------------------------------- git repositories


def test_a_git_repository_keeps_its_token_to_itself(sim):
    body = {"name": "wadmin", "url": "https://git.wadmin.invalid/x.git", "authType": "http", "token": "tok"}
    repo = data(call(sim, "POST", "/customize/git-repositories", body))
    assert repo["hasToken"] is True and repo["hasSshKey"] is False and "token" not in repo
    assert repo["sshHostKeyVerification"] == "accept_new" and repo["enabled"] is True
    upd = data(call(sim, "PUT", f"/customize/git-repositories/{repo['id']}", {"description": "d2"}))
    assert upd["description"] == "d2" and upd["hasToken"] is True
    assert call(sim, "POST", f"/customize/git-repositories/{repo['id']}/test").status_code == 400
    assert call(sim, "DELETE", f"/customize/git-repositories/{repo['id']}").status_code == 200
    assert call(sim, "GET", f"/customize/git-repositories/{repo['id']}").status_code >= 400


def test_a_git_repository_used_by_a_sync_is_not_deleted(sim):
    used = sim.items("gitops_syncs")[0]["repositoryId"]
    assert call(sim, "DELETE", f"/customize/git-repositories/{used}").status_code == 500


# ---------------------------------------------------------------- users, roles, passwords


def create_user(sim, name="wadmin-user", password=STRONG) -> dict:
    return data(call(sim, "POST", "/users", {"username": name, "password": password, "displayName": "W"}))


def test_a_created_user_logs_in_and_holds_no_permission(sim):
    user = create_user(sim)
    assert user["id"] and user["roleAssignments"] in ([], None) and user["isGlobalAdmin"] is False
    r = login(sim, "wadmin-user", STRONG)
    assert r.status_code == 200
    token = r.json()["data"]["token"]
    assert data(call(sim, "GET", "/auth/me", token=token))["username"] == "wadmin-user"
    assert call(sim, "GET", "/users", token=token).status_code == 403


def test_a_weak_password_or_a_taken_username_is_refused(sim):
    assert call(sim, "POST", "/users", {"username": "weak", "password": "weakpassword"}).status_code == 400
    assert call(sim, "POST", "/users", {"username": "arcane", "password": STRONG}).status_code == 500


def test_a_user_renamed_and_given_a_password_logs_in_with_them(sim):
    user = create_user(sim)
    upd = data(call(sim, "PUT", f"/users/{user['id']}", {"username": "wadmin-renamed", "password": "An0ther!Passw0rd"}))
    assert upd["username"] == "wadmin-renamed"
    assert login(sim, "wadmin-user", STRONG).status_code == 401
    assert login(sim, "wadmin-renamed", "An0ther!Passw0rd").status_code == 200


def test_a_deleted_user_can_no_longer_log_in_and_its_session_ends(sim):
    user = create_user(sim)
    token = login(sim, "wadmin-user", STRONG).json()["data"]["token"]
    assert call(sim, "DELETE", f"/users/{user['id']}").status_code == 200
    assert login(sim, "wadmin-user", STRONG).status_code == 401
    assert call(sim, "GET", "/auth/me", token=token).status_code == 401
    assert call(sim, "GET", f"/users/{user['id']}").status_code == 404


def test_the_built_in_admin_is_not_deleted(sim):
    admin = data(call(sim, "GET", "/users?search=arcane"))[0]
    assert call(sim, "DELETE", f"/users/{admin['id']}").status_code == 409


def test_a_role_assignment_changes_what_the_user_may_do(sim):
    user = create_user(sim)
    token = login(sim, "wadmin-user", STRONG).json()["data"]["token"]
    assert call(sim, "GET", f"/environments/{LOCAL}/containers", token=token).status_code == 403
    rows = data(call(sim, "PUT", f"/users/{user['id']}/role-assignments", {"assignments": [{"roleId": "role_viewer"}]}))
    assert [a["roleId"] for a in rows] == ["role_viewer"] and rows[0]["source"] == "manual"
    assert call(sim, "GET", f"/environments/{LOCAL}/containers", token=token).status_code == 200
    assert [a["roleId"] for a in data(call(sim, "GET", f"/users/{user['id']}/role-assignments"))] == ["role_viewer"]
    data(call(sim, "PUT", f"/users/{user['id']}/role-assignments", {"assignments": []}))
    assert call(sim, "GET", f"/environments/{LOCAL}/containers", token=token).status_code == 403


def test_a_custom_role_grants_its_permissions_and_its_update_and_deletion_show(sim):
    role = data(call(sim, "POST", "/roles", {"name": "wadmin-role", "description": "d", "permissions": ["users:list"]}))
    assert role["builtIn"] is False and role["permissions"] == ["users:list"]
    assert call(sim, "POST", "/roles", {"name": "wadmin-role", "permissions": ["users:list"]}).status_code == 409
    user = create_user(sim)
    token = login(sim, "wadmin-user", STRONG).json()["data"]["token"]
    data(call(sim, "PUT", f"/users/{user['id']}/role-assignments", {"assignments": [{"roleId": role["id"]}]}))
    assert call(sim, "GET", "/users", token=token).status_code == 200
    data(call(sim, "PUT", f"/roles/{role['id']}", {"name": "wadmin-role", "permissions": ["roles:list"]}))
    assert call(sim, "GET", "/users", token=token).status_code == 403
    assert call(sim, "GET", "/roles", token=token).status_code == 200
    assert call(sim, "DELETE", f"/roles/{role['id']}").status_code == 200
    assert call(sim, "GET", "/roles", token=token).status_code == 403
    assert call(sim, "GET", f"/roles/{role['id']}").status_code == 404


def test_built_in_roles_are_not_changed(sim):
    assert call(sim, "PUT", "/roles/role_viewer", {"name": "x", "permissions": ["users:list"]}).status_code == 403
    assert call(sim, "DELETE", "/roles/role_viewer").status_code == 403


def test_a_changed_password_works_and_ends_the_other_sessions(sim):
    create_user(sim)
    first = login(sim, "wadmin-user", STRONG).json()["data"]["token"]
    second = login(sim, "wadmin-user", STRONG).json()["data"]["token"]
    bad = call(sim, "POST", "/auth/password", {"currentPassword": "wrong", "newPassword": "N3w!Password12"}, token=second)
    assert bad.status_code == 401
    assert call(sim, "POST", "/auth/password", {"currentPassword": STRONG, "newPassword": "weakpassword"}, token=second).status_code == 400
    ok = call(sim, "POST", "/auth/password", {"currentPassword": STRONG, "newPassword": "N3w!Password12"}, token=second)
    assert ok.status_code == 200
    assert call(sim, "GET", "/auth/me", token=second).status_code == 200
    assert call(sim, "GET", "/auth/me", token=first).status_code == 401
    assert login(sim, "wadmin-user", STRONG).status_code == 401
    assert login(sim, "wadmin-user", "N3w!Password12").status_code == 200


def test_logout_all_other_sessions_keeps_the_current_one(sim):
    first = login(sim, "arcane", "arcane-admin").json()["data"]["token"]
    second = login(sim, "arcane", "arcane-admin").json()["data"]["token"]
    assert call(sim, "POST", "/auth/sessions/logout-all", token=second).status_code == 200
    assert call(sim, "GET", "/auth/me", token=second).status_code == 200
    assert call(sim, "GET", "/auth/me", token=first).status_code == 401


def test_my_profile_update_shows_in_me_and_an_oidc_user_keeps_its_name(sim):
    token = login(sim, "arcane", "arcane-admin").json()["data"]["token"]
    me = data(call(sim, "PUT", "/auth/me/profile", {"displayName": "Renamed Admin", "locale": "de"}, token=token))
    assert me["displayName"] == "Renamed Admin" and me["locale"] == "de" and me["isGlobalAdmin"] is True
    assert data(call(sim, "GET", "/auth/me", token=token))["displayName"] == "Renamed Admin"
    viewer = login(sim, "ops-viewer", "ops-viewer-password").json()["data"]["token"]
    assert call(sim, "PUT", "/auth/me/profile", {"displayName": "x"}, token=viewer).status_code == 403
    assert call(sim, "PUT", "/auth/me/profile", {"locale": "fr"}, token=viewer).status_code == 200


# ---------------------------------------------------------------- OIDC role mappings, federated credentials


def test_an_oidc_role_mapping_is_created_updated_and_deleted(sim):
    m = data(call(sim, "POST", "/oidc/role-mappings", {"claimValue": " ops ", "roleId": "role_viewer"}))
    assert m["claimValue"] == "ops" and m["source"] == "manual" and m["id"]
    assert call(sim, "POST", "/oidc/role-mappings", {"claimValue": "x", "roleId": "no-such-role"}).status_code == 400
    upd = data(call(sim, "PUT", f"/oidc/role-mappings/{m['id']}", {"claimValue": "ops2", "roleId": "role_viewer"}))
    assert upd["claimValue"] == "ops2"
    r = call(sim, "DELETE", f"/oidc/role-mappings/{m['id']}")
    assert r.status_code == 200 and r.json()["success"] is True and "data" not in r.json()
    assert m["id"] not in [x["id"] for x in data(call(sim, "GET", "/oidc/role-mappings"))]
    assert call(sim, "DELETE", f"/oidc/role-mappings/{m['id']}").status_code == 404


def test_an_environment_managed_oidc_mapping_is_not_edited(sim):
    assert call(sim, "DELETE", "/oidc/role-mappings/orm_2").status_code == 409


FEDERATED = {"name": "wadmin-ci", "enabled": True, "issuerUrl": "https://issuer.wadmin.invalid/", "audiences": ["arcane"],
             "subjectMatch": "repo:x", "roleId": "role_viewer", "matchType": "glob"}


def test_a_federated_credential_gets_a_service_user_and_is_deleted_with_it(sim):
    fc = data(call(sim, "POST", "/federated-credentials", FEDERATED))
    assert fc["issuerUrl"] == "https://issuer.wadmin.invalid" and fc["matchType"] == "glob" and fc["subjectClaim"] == "sub"
    assert fc["identityUserId"] and fc["tokenTtlSeconds"] > 0
    user = data(call(sim, "GET", f"/users/{fc['identityUserId']}"))
    assert user["username"].startswith("svc_federated_")
    assert data(call(sim, "PUT", f"/federated-credentials/{fc['id']}", {"enabled": False}))["enabled"] is False
    assert call(sim, "DELETE", f"/federated-credentials/{fc['id']}").status_code == 200
    assert call(sim, "GET", f"/users/{fc['identityUserId']}").status_code == 404
    assert call(sim, "GET", f"/federated-credentials/{fc['id']}").status_code == 404


def test_a_federated_credential_needs_an_https_issuer_and_an_audience(sim):
    assert call(sim, "POST", "/federated-credentials", dict(FEDERATED, issuerUrl="http://issuer.invalid")).status_code == 400
    assert call(sim, "POST", "/federated-credentials", dict(FEDERATED, subjectMatch=" ")).status_code == 400
    assert call(sim, "POST", "/federated-credentials", dict(FEDERATED, audiences=[])).status_code == 422  # the document: minItems


# ---------------------------------------------------------------- S3 destinations


S3 = {"name": "wadmin", "endpoint": "https://s3.wadmin.invalid", "bucket": "b", "region": "r", "accessKeyId": "AK", "secretAccessKey": "SK",
      "useSsl": True, "forcePathStyle": True}


def test_s3_writes_that_test_the_endpoint_cannot_reach_it(sim):
    before = data(call(sim, "GET", "/backups/s3?limit=-1"))
    r = call(sim, "POST", "/backups/s3", S3)
    assert r.status_code == 400 and "S3 connection test object" in r.json()["detail"]
    assert data(call(sim, "GET", "/backups/s3?limit=-1")) == before
    dest = before[0]["id"]
    assert call(sim, "POST", f"/backups/s3/{dest}/test", S3).status_code == 400
    assert call(sim, "PUT", f"/backups/s3/{dest}", S3).status_code == 400
    assert call(sim, "POST", "/backups/s3/test", S3).status_code == 400


def test_an_s3_destination_in_use_is_kept_and_a_sync_replaces_them(sim):
    dest = data(call(sim, "GET", "/backups/s3?limit=-1"))[0]["id"]
    assert call(sim, "DELETE", f"/backups/s3/{dest}").status_code == 409
    item = dict(S3, id="synced-s3", createdAt="2026-01-01T00:00:00Z")
    assert call(sim, "POST", "/backups/s3/sync", {"destinations": [item]}).status_code == 200
    listed = data(call(sim, "GET", "/backups/s3?limit=-1"))
    assert [d["id"] for d in listed] == ["synced-s3"] and listed[0]["secretConfigured"] is True and "secretAccessKey" not in listed[0]
    assert call(sim, "DELETE", "/backups/s3/synced-s3").status_code == 200
    assert call(sim, "DELETE", "/backups/s3/synced-s3").status_code == 404


# ---------------------------------------------------------------- settings, job schedules, notifications


def test_settings_update_shows_in_settings_and_job_schedules(sim):
    rows = data(call(sim, "PUT", f"/environments/{LOCAL}/settings", {"pollingInterval": "0 0 * * * *", "baseServerUrl": "https://arcane.wadmin"}))
    assert {r["key"]: r["value"] for r in rows} == {"pollingInterval": "0 0 * * * *", "baseServerUrl": "https://arcane.wadmin"}
    settings = {s["key"]: s["value"] for s in call(sim, "GET", f"/environments/{LOCAL}/settings").json()}
    assert settings["baseServerUrl"] == "https://arcane.wadmin"
    assert call(sim, "GET", f"/environments/{LOCAL}/job-schedules").json()["pollingInterval"] == "0 0 * * * *"
    cfg = data(call(sim, "PUT", f"/environments/{LOCAL}/job-schedules", {"autoHealInterval": "0 */1 * * * *"}))
    assert cfg["autoHealInterval"] == "0 */1 * * * *" and cfg["pollingInterval"] == "0 0 * * * *"


def test_settings_and_customize_search(sim):
    found = call(sim, "POST", "/settings/search", {"query": "OIDC"}).json()
    assert found["count"] == len(found["results"]) >= 1 and found["query"] == "oidc"
    assert call(sim, "POST", "/settings/search", {"query": " "}).status_code == 400
    assert call(sim, "POST", "/customize/search", {"query": "git"}).json()["count"] >= 1


def test_notification_settings_are_upserted_redacted_and_deleted(sim):
    body = {"provider": "slack", "enabled": True, "config": {"token": "xoxb-secret", "channel": "#ops"}}
    r = call(sim, "POST", f"/environments/{LOCAL}/notifications/settings", body)
    assert r.status_code == 200
    saved = r.json()
    assert saved["config"] == {"token": "", "channel": "#ops"} and saved["provider"] == "slack"
    again = call(sim, "POST", f"/environments/{LOCAL}/notifications/settings", dict(body, enabled=False)).json()
    assert again["id"] == saved["id"] and again["enabled"] is False
    assert call(sim, "POST", f"/environments/{LOCAL}/notifications/settings", dict(body, provider="fax")).status_code == 400
    assert call(sim, "POST", f"/environments/{LOCAL}/notifications/test/slack").status_code == 500
    assert call(sim, "DELETE", f"/environments/{LOCAL}/notifications/settings/slack").status_code == 200
    r = call(sim, "POST", f"/environments/{LOCAL}/notifications/test/slack")
    assert r.status_code == 500 and "save your slack settings" in r.json()["detail"]


# ---------------------------------------------------------------- environments


def test_an_environment_created_with_a_key_pairs_with_it(sim):
    env = data(call(sim, "POST", "/environments", {"apiUrl": "http://agent.wadmin.invalid:3553", "name": "wadmin", "useApiKey": True}))
    assert env["status"] == "pending" and env["apiKey"]
    assert env["id"] in [e["id"] for e in data(call(sim, "GET", "/environments?limit=-1"))]
    pair = httpx.post(sim.url + "/api/environments/pair", headers={"X-API-Key": env["apiKey"]}, timeout=10)
    assert pair.status_code == 200
    assert data(call(sim, "GET", f"/environments/{env['id']}"))["status"] == "online"
    again = httpx.post(sim.url + "/api/environments/pair", headers={"X-API-Key": env["apiKey"]}, timeout=10)
    assert again.status_code == 400
    assert httpx.post(sim.url + "/api/environments/pair", headers={"X-API-Key": "arc_unknown"}, timeout=10).status_code == 401


def test_a_legacy_environment_answers_no_key_and_heartbeat_and_agent_token_show(sim):
    env = data(call(sim, "POST", "/environments", {"apiUrl": "http://agent2.wadmin.invalid:3553", "name": "wadmin2"}))
    assert "apiKey" not in env
    assert call(sim, "POST", f"/environments/{LOCAL}/heartbeat").status_code == 200
    assert data(call(sim, "GET", f"/environments/{LOCAL}"))["lastHeartbeat"]
    token = data(call(sim, "POST", f"/environments/{LOCAL}/agent/pair", {}))["token"]
    assert len(token) == 48 and data(call(sim, "POST", f"/environments/{LOCAL}/agent/pair", {}))["token"] == token
    assert data(call(sim, "POST", f"/environments/{LOCAL}/test", {}))["status"] == "online"
    assert data(call(sim, "POST", f"/environments/{LOCAL}/sync"))["message"]


# ---------------------------------------------------------------- jobs


def test_a_job_run_is_queued_then_cancelled_retried_and_acknowledged(sim):
    r = call(sim, "POST", f"/environments/{LOCAL}/jobs/image-polling/run", {"runId": "run-wadmin-1"})
    assert r.status_code == 202 and r.json()["runId"] == "run-wadmin-1"
    base = f"/environments/{LOCAL}/jobs/image-polling/runs/run-wadmin-1"
    assert call(sim, "POST", base + "/ack").status_code == 400  # not terminal yet
    assert call(sim, "POST", base + "/cancel").json()["status"] == "cancelled"
    assert call(sim, "POST", base + "/retry").json()["status"] == "queued"
    call(sim, "POST", base + "/cancel")
    assert call(sim, "POST", base + "/ack").json()["remoteSettled"] is True
    assert call(sim, "POST", f"/environments/{LOCAL}/jobs/image-polling/runs/nope/ack").status_code == 404
    assert call(sim, "POST", f"/environments/{LOCAL}/jobs/image-polling/restart").status_code == 400


# ---------------------------------------------------------------- GitOps syncs


def test_a_gitops_sync_is_created_failing_its_first_sync_then_updated_and_deleted(sim):
    repo = data(call(sim, "GET", "/customize/git-repositories"))[0]["id"]
    s = data(call(sim, "POST", f"/environments/{LOCAL}/gitops-syncs", {"name": "wadmin-sync", "repositoryId": repo, "branch": "main",
                                                                        "composePath": "compose.yaml"}))
    assert s["projectName"] == "wadmin-sync" and s["syncInterval"] == 60 and s["lastSyncStatus"] == "failed"
    assert call(sim, "POST", f"/environments/{LOCAL}/gitops-syncs/{s['id']}/sync").status_code == 500
    upd = data(call(sim, "PUT", f"/environments/{LOCAL}/gitops-syncs/{s['id']}", {"branch": "dev"}))
    assert upd["branch"] == "dev" and upd["name"] == "wadmin-sync"
    assert call(sim, "DELETE", f"/environments/{LOCAL}/gitops-syncs/{s['id']}").status_code == 200
    assert call(sim, "GET", f"/environments/{LOCAL}/gitops-syncs/{s['id']}").status_code >= 400
    bad = call(sim, "POST", f"/environments/{LOCAL}/gitops-syncs", {"name": "x", "repositoryId": "nope", "branch": "main"})
    assert bad.status_code == 500


def test_default_templates_saved_are_read_back(sim):
    assert data(call(sim, "POST", "/templates/default", {"composeContent": "services: {}\n", "envContent": "A=1\n"}))["message"]
    got = data(call(sim, "GET", "/templates/default"))
    assert got["composeTemplate"] == "services: {}\n" and got["envTemplate"] == "A=1\n" and got["swarmStackTemplate"]


def test_notification_reads_blank_the_credentials(sim):
    listed = call(sim, "GET", f"/environments/{LOCAL}/notifications/settings").json()
    email = next(s for s in listed if s["provider"] == "email")
    assert email["config"]["smtpPassword"] == "" and email["config"]["smtpHost"]
    one = call(sim, "GET", f"/environments/{LOCAL}/notifications/settings/email").json()
    assert one["config"]["smtpPassword"] == ""
    assert call(sim, "GET", f"/environments/{LOCAL}/notifications/settings/slack").status_code == 404


def test_a_created_federated_credential_is_exchanged_and_its_deletion_ends_the_session(sim):
    fc = data(call(sim, "POST", "/federated-credentials", dict(FEDERATED, matchType="exact")))
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": sim.federated_token(credential=fc["id"]),
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt"}
    r = httpx.post(sim.url + "/api/auth/federated/token", data=form, timeout=10)
    assert r.status_code == 200, r.text
    token = r.json()["access_token"]
    me = data(call(sim, "GET", "/auth/me", token=token))
    assert me["id"] == fc["identityUserId"]
    assert call(sim, "GET", "/environments/0/containers", token=token).status_code == 200  # role_viewer's containers:list
    assert call(sim, "DELETE", f"/federated-credentials/{fc['id']}").status_code == 200
    assert call(sim, "GET", "/auth/me", token=token).status_code == 401
