"""interpreter.text.redact and safe-mode previews: never a secret in a preview (SPEC §4 step 3).

* the sweep (tests/redaction_sweep.py): a planted secret in every string argument of
  every state-changing action, through the real dispatcher in safe mode — each field is
  masked or listed in rules/redaction.yaml `kept:` with a reason; the same with the secret
  inside a URL's userinfo, a flag, a Bearer header or an option string in every field;
* the known leaks of issue 7, one by one;
* names by their words, the URL scrubber (table and Hypothesis), the rule kinds, the
  pointers recorded, and one rule set expressing the resources' redaction table.
"""

from __future__ import annotations

import asyncio
import json
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from interpreter import RULES_DIR
from interpreter.build.compile import Reader, compile_redaction
from interpreter.call.dispatch import Call
from interpreter.text import redact as R
from interpreter.text.redact import scrub_urls
from tests import redaction_sweep as S
from tests.helpers import examples, make_dispatcher

MARK = "[secret]"


@pytest.fixture(scope="module")
def rules(catalog):
    return catalog.redaction


@pytest.fixture(scope="module")
def baseline(catalog):
    return S.sweep(catalog)


def preview(catalog, action_id: str, args: dict, confirm: bool = True):
    """The preview of one call through the dispatcher in safe mode: (text, structured)."""
    d, rec = make_dispatcher(catalog, lambda r: (_ for _ in ()).throw(AssertionError("sent")), safe_mode=True)
    res = asyncio.run(d.dispatch(Call(action_id, args, confirm=confirm)))
    assert not res.is_error, res.text
    assert res.structured["preview"] is True and rec.requests == []
    return res.text, res.structured


def shown_anywhere(secret: str, text: str, structured) -> bool:
    blob = json.dumps(structured, ensure_ascii=False)
    return secret in text or secret in blob or json.dumps(secret)[1:-1] in text


# --------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------


def test_sweep_every_string_argument_is_masked_or_kept_with_a_reason(baseline):
    s = baseline
    print("\n" + S.report(s).splitlines()[0])
    assert not s.errors, "\n".join(s.errors[:5])
    assert s.actions > 0 and s.fields
    leaks = [f"{f.action} {f.pointer}" for f in s.fields if f.outcome == "leak"]
    assert not leaks, f"{len(leaks)} field(s) show a planted secret and are not in `kept:`:\n" + "\n".join(leaks[:40])
    assert s.count("masked") + s.count("kept") == len(s.fields)
    # every kept pattern is needed by some field: the list says exactly what is shown
    assert not s.unused_kept, f"kept patterns no field needs: {s.unused_kept}"


@pytest.mark.parametrize("shape", [
    "https://bob:{}@git.example/r.git",  # a password in a URL's userinfo
    "https://{}@github.com/org/repo.git",  # a bare token used as the user
    "//bob:{}@host/x",  # scheme-relative
    "redis://:p/a?s#s{}@cache:6379/0",  # a password with unencoded / ? #
    "--password={}",
    "run --token {} --verbose",
    "Authorization: Bearer {}",
    "o=addr=10.0.0.1,username=bob,password={}",
    "DB_PASSWORD: {}",
    "bob:$apr1${}",
])
def test_sweep_secrets_inside_values_never_show(catalog, shape):
    """Every string argument, kept ones included, with the secret inside a value."""
    s = S.sweep(catalog, shape)
    assert not s.errors, "\n".join(s.errors[:5])
    checked = [f for f in s.fields if f.shaped]
    # a shape that is not one path segment cannot be a path value (refused before any preview)
    assert len(checked) > len([f for f in s.fields if not f.unshapeable]) * 0.95
    shown = [f"{f.action} {f.pointer}" for f in checked if f.outcome != "masked"]
    assert not shown, f"{shape!r} shows the secret in:\n" + "\n".join(shown[:20])


# --------------------------------------------------------------------------------------
# The known leaks of issue 7
# --------------------------------------------------------------------------------------


def test_registry_aws_secret_access_key(catalog):
    text, data = preview(catalog, "registry.create", {
        "url": "https://123456789012.dkr.ecr.eu-west-1.amazonaws.com", "registryType": "ecr",
        "awsAccessKeyId": "AKIAIOSFODNN7EXAMPLE", "awsSecretAccessKey": "AKIAwJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
        "awsRegion": "eu-west-1", "description": "", "enabled": True, "insecure": False, "repositoryNames": [],
        "token": "", "username": ""})
    assert data["body"]["awsSecretAccessKey"] == MARK and "wJalrXUtnFEMI" not in text + json.dumps(data)
    assert "/body/awsSecretAccessKey" in data["masked"]


def _document_positions(document: dict, names: set[str]):
    """(schema name, path) of every member named in `names`, in every component schema."""
    schemas = document["components"]["schemas"]
    for sname, schema in schemas.items():
        root = {"$defs": schemas, **schema}
        for path, _ in R.schema_leaves({**schema, "$defs": schemas}, root):
            if path and path[-1] in names:
                yield sname, path


def _instance(path: tuple, leaf):
    value = leaf
    for seg in reversed(path):
        value = [value] if seg == "*" else {seg: value}
    return value


@pytest.mark.parametrize("name", ["signingKey", "signingKeyPassphrase", "SigningCAKey", "unlockKey"])
def test_credential_names_anywhere_in_the_document(catalog, rules, name):
    found = sorted(set(_document_positions(catalog.document, {name})))
    assert found, f"{name} is not in the embedded document any more"
    for sname, path in found:
        for side in R.SIDES:
            r = rules.redact(_instance(path, "S3cr3tV4lue"), side=side)
            assert "S3cr3tV4lue" not in json.dumps(r.value), (sname, path, side)
            assert r.paths, (sname, path)


def test_git_repository_url_with_a_token(catalog):
    text, data = preview(catalog, "git_repository.create", {
        "name": "infra", "url": "https://bob:ghp_16C7e42F292c6912E7710c838347Ae178B4a@git.example/r.git", "authType": "http"})
    assert data["body"]["url"] == "https://[secret]@git.example/r.git"
    assert "ghp_" not in text and "bob" not in text


def test_environment_api_url_with_userinfo(catalog):
    text, data = preview(catalog, "environment.create", {"name": "edge", "apiUrl": "http://admin:hunter2pw@10.0.0.5:3553"})
    assert data["body"]["apiUrl"] == "http://[secret]@10.0.0.5:3553" and "hunter2pw" not in text


def test_container_command_lines_are_masked_whole(catalog):
    text, data = preview(catalog, "container.create", {
        "name": "web", "image": "nginx",
        "command": ["sh", "-c", "curl -H 'Authorization: Bearer eyJhbGciOi.payload.sig' http://api"],
        "entrypoint": ["/app", "--password=hunter2pw"], "cmd": ["--token", "tok3nvalue"],
        "healthcheck": {"test": ["CMD", "curl", "-u", "bob:hunter2pw", "http://localhost"], "interval": 10}})
    body = data["body"]
    assert body["command"] == body["entrypoint"] == body["cmd"] == body["healthcheck"]["test"] == MARK
    assert body["healthcheck"]["interval"] == 10
    for s in ("eyJhbGciOi", "hunter2pw", "tok3nvalue"):
        assert s not in text and s not in json.dumps(data)
    assert {"/body/command", "/body/entrypoint", "/body/cmd", "/body/healthcheck/test"} <= set(data["masked"])


def test_label_values_env_values_and_names(catalog):
    text, data = preview(catalog, "container.create", {
        "name": "web", "image": "nginx", "env": ["GH_PAT=ghp_x9secret", "DEBUG=1", "BARE_TOKEN_NO_EQUALS"],
        "labels": {"traefik.http.middlewares.auth.basicauth.users": "bob:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/",
                   "com.docker.compose.project": "shop", "com.docker.compose.evil": "hand-made",
                   "org.opencontainers.image.source": "https://github.com/o/r"}})
    body = data["body"]
    assert body["env"] == ["GH_PAT=[secret]", "DEBUG=[secret]", MARK]
    labels = body["labels"]
    assert labels["traefik.http.middlewares.auth.basicauth.users"] == MARK
    assert labels["com.docker.compose.project"] == "shop"  # Compose's own
    assert labels["com.docker.compose.evil"] == MARK  # a hand-made com.docker.compose.* label
    assert labels["org.opencontainers.image.source"] == "https://github.com/o/r"
    assert "$apr1$" not in text and "ghp_x9secret" not in text and "BARE_TOKEN" not in text
    assert {"/body/env/*", "/body/labels/*"} <= set(data["masked"])


def test_project_compose_content(catalog):
    text, data = preview(catalog, "project.update", {
        "projectId": "0b9e2c4a-1d3f-4e5a-9b7c-2f4e6a8c0d1e", "composeContent": "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: s3cr3tpw\n",
        "envContent": "API_TOKEN=t0kenvalue\n"})
    assert data["body"]["composeContent"] == data["body"]["envContent"] == MARK
    assert "s3cr3tpw" not in text and "t0kenvalue" not in text


def test_volume_driver_options(catalog):
    text, data = preview(catalog, "volume.create", {
        "name": "share", "driver": "local",
        "driverOpts": {"type": "cifs", "device": "//nas/share", "o": "addr=10.0.0.9,username=bob,password=hunter2pw"}})
    assert set(data["body"]["driverOpts"].values()) == {MARK} and data["body"]["driver"] == "local"
    assert "hunter2pw" not in text


def test_json_encoded_multipart_parts(catalog):
    project = {"name": "shop", "composeContent": "services: {db: {environment: [PW=s3cr3tpw]}}",
               "envContent": "TOKEN=t0kenvalue"}
    text, data = preview(catalog, "project.create", project)
    part = next(p for p in data["multipart"] if p["name"] == "project")
    assert part["value"] == {"name": "shop", "composeContent": MARK, "envContent": MARK}
    assert "s3cr3tpw" not in text and "t0kenvalue" not in text


def test_secret_path_parameter(catalog, rules):
    """webhook.trigger (not served yet: its handler kind comes later) carries its token in
    the path; the preview's description masks it there."""
    from interpreter.call.preview import describe
    from interpreter.call.request import prepare

    action = catalog.all_actions["webhook.trigger"]
    data = describe(action, prepare(action, {"token": "wh-s3cr3t-token"}), rules)
    assert data["path"] == "/api/webhooks/trigger/[secret]" and data["masked"] == ["/path/token"]
    assert "wh-s3cr3t" not in json.dumps(data)


def test_header_and_query_secrets(catalog):
    text, data = preview(catalog, "passkey.delete", {"id": "pk1", "xStepUpToken": "st3p-up-secret"})
    assert data["headers"] == {"X-Step-Up-Token": MARK}
    assert "st3p-up-secret" not in text and "st3p-up-secret" not in json.dumps(data)


# --------------------------------------------------------------------------------------
# Property: nothing planted in a masked position survives
# --------------------------------------------------------------------------------------

_CORE = "Q7sEcr3tQ"
# no `=`: a NAME=value list keeps the name before `=` by design
_SECRET_CHARS = string.ascii_letters + string.digits + "@:/#?%&+~!$^*()[]{}<>|;,.'\"\\ é€😀\t"
_FILLER = st.text(st.characters(exclude_categories=["Cs"]), max_size=24)


@pytest.fixture(scope="module")
def masked_fields(baseline):
    out: dict[str, set] = {}
    for f in baseline.fields:
        if f.outcome == "masked":
            out.setdefault(f.action, set()).add(f.path)
    return out


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_planted_secret_in_a_masked_position_survives(catalog, masked_fields, data):
    action_id = data.draw(st.sampled_from(sorted(masked_fields)))
    tail = data.draw(st.text(st.sampled_from(_SECRET_CHARS), max_size=20))
    head = data.draw(st.text(st.sampled_from(_SECRET_CHARS), max_size=8))
    secret = head + _CORE + data.draw(st.text(st.sampled_from(string.ascii_letters + string.digits), min_size=4, max_size=8)) + tail
    fillers: list[str] = []

    def provider(aid, path, schema):
        if path in masked_fields[aid]:
            return secret
        if "pattern" in schema or "maxLength" in schema or "minLength" in schema:
            return None  # the planted default fits the field's constraints
        v = data.draw(_FILLER)
        fillers.append(v)
        return v

    args, _ = S.arguments(catalog, action_id, provider)
    assume(not any(_CORE in v for v in fillers))
    d, rec = make_dispatcher(catalog, lambda r: (_ for _ in ()).throw(AssertionError("sent")), safe_mode=True)
    res = asyncio.run(d.dispatch(Call(action_id, args, confirm=True)))
    assume(not res.is_error)  # a filler that the schema refuses
    assert _CORE not in res.text and _CORE not in json.dumps(res.structured, ensure_ascii=False)
    assert rec.requests == []


# --------------------------------------------------------------------------------------
# Names by their words
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "password", "currentPassword", "newPassword", "signingKeyPassphrase", "oidcClientSecret", "clientSecret",
    "token", "accessToken", "refreshToken", "joinToken", "depotToken", "subject_token", "X-Step-Up-Token",
    "xStepUpToken", "apiKey", "api_key", "X-API-Key", "xApiKey", "signingKey", "SigningCAKey", "unlockKey", "privateKey",
    "private-key", "sshKey", "recoveryKey", "awsSecretAccessKey", "secretAccessKey", "encodedRegistryAuth", "auth",
    "Authorization", "deviceCode", "recoveryCodes", "codeVerifier", "edgeSessionId", "passwordHash", "tokenValue",
    "apiKeys", "dbpassword", "githubtoken", "credential", "credentials", "Cookie",
])
def test_secret_names(rules, name):
    assert rules.names.is_secret(name)


@pytest.mark.parametrize("name", [
    "key", "keyId", "keyPrefix", "idempotencyKey", "settingKey", "settingsKey", "CertIssuerPublicKey", "publicKey",
    "requestedWithKey", "accessKeyId", "awsAccessKeyId", "sshHostKeyVerification", "authType", "authMethod",
    "authUsername", "authPasswordPolicy", "tokenEndpoint", "tokenPrefix", "subject_token_type", "secretConfigured",
    "Secrets", "SecretName", "SecretID", "exitCode", "code", "statusCode", "id", "sessionTimeout", "username",
    "environmentId", "name", "monkey", "Labels", "SigningCACert",
])
def test_not_secret_names(rules, name):
    assert not rules.names.is_secret(name)


def test_booleans_under_secret_names_stay(rules):
    r = rules.redact({"hasToken": True, "isSecret": False, "token": "x", "apiKeys": ["a", "b"],
                      "auth": {"token": "t", "enabled": False}})
    assert r.value == {"hasToken": True, "isSecret": False, "token": MARK, "apiKeys": [MARK, MARK], "auth": {"token": MARK, "enabled": False}}
    assert r.paths == ("/apiKeys/*", "/auth/token", "/token")


def test_name_words():
    assert R.name_words("SigningCAKey") == ["signing", "ca", "key"]
    assert R.name_words("X-API-Key") == ["x", "api", "key"]
    assert R.name_words("awsSecretAccessKey") == ["aws", "secret", "access", "key"]
    assert R.name_words("subject_token_type") == ["subject", "token", "type"]
    assert R.name_words("HTTPSProxy") == ["https", "proxy"]


# --------------------------------------------------------------------------------------
# The URL scrubber
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, scrubbed", [
    ("https://bob:ghp_x@host/r", "https://[secret]@host/r"),
    ("//user:pass@host/x", "//[secret]@host/x"),
    ("clone https://ghp_abcdef@github.com/org/repo.git now", "clone https://[secret]@github.com/org/repo.git now"),
    # security.md §3.2: what a urlsplit-based redactor leaks
    ("postgres://user:p@ss@db:5432/app", "postgres://[secret]@db:5432/app"),
    ("redis://:pa#ss@cache:6379/0", "redis://[secret]@cache:6379/0"),
    ("redis://:pa/ss@cache:6379/0", "redis://[secret]@cache:6379/0"),
    ("amqp://guest:gu?est@rabbit/", "amqp://[secret]@rabbit/"),
    ("mysql://u:p%40ss@h/db", "mysql://[secret]@h/db"),
    ("mongodb+srv://u:pw@c1.example.net,c2.example.net/db", "mongodb+srv://[secret]@c1.example.net,c2.example.net/db"),
    ("http://u:p@[::1]:80/", "http://[secret]@[::1]:80/"),
    ("error: dial https://x:y@a.example/v2/: timeout", "error: dial https://[secret]@a.example/v2/: timeout"),
    ("next=https://u:p@z/ and http://a.com/r?u=https://x:y@z/", "next=https://[secret]@z/ and http://a.com/r?u=https://[secret]@z/"),
    ("https://ghp_tok@github.com/@x", "https://[secret]@github.com/@x"),
    ('{"url": "https://u:p@h"}', '{"url": "https://[secret]@h"}'),
    # left as they are
    ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
    ("mailto:bob@example.com", "mailto:bob@example.com"),
    ("user:pass@tcp(localhost:3306)/dbname", "user:pass@tcp(localhost:3306)/dbname"),
    ("https://medium.com/@user/post", "https://medium.com/@user/post"),
    ("http://[::1]:80/x", "http://[::1]:80/x"),
    ("file:///a@b", "file:///a@b"),
    ("/var/lib//x@y", "/var/lib//x@y"),
    ("https://example.com/x", "https://example.com/x"),
])
def test_url_scrubber_cases(raw, scrubbed):
    assert scrub_urls(raw, MARK) == scrubbed
    assert scrub_urls(scrubbed, MARK) == scrubbed


_USER = st.text(st.sampled_from(string.ascii_letters + string.digits + "-._~!$&'()*+,;="), min_size=1, max_size=12)
_PASS = st.text(st.sampled_from(string.ascii_letters + string.digits + "-._~%!$&'()*+,;=:/?#@"), min_size=1, max_size=16)
_HOST = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z]{2,5}){0,2}(:[0-9]{2,5})?", fullmatch=True)
_PATH = st.from_regex(r"(/[a-z0-9._-]{0,8}){0,3}(\?[a-z]=[a-z0-9]{0,4})?", fullmatch=True)
_SCHEME = st.sampled_from(["http", "https", "ssh", "git+https", "redis", "postgres", "mongodb+srv", "amqp", ""])
_WORDS = st.lists(st.text(st.sampled_from(string.ascii_letters + string.digits + ".,:;()-"), min_size=1, max_size=8),
                  max_size=3).map(" ".join)


@settings(max_examples=examples(600))
@given(_SCHEME, _USER, st.one_of(st.none(), _PASS), _HOST, _PATH, _WORDS, _WORDS)
def test_url_scrubber_removes_userinfo(scheme, user, password, host, path, before, after):
    # the user and the password carry distinct marks that must vanish
    userinfo = "Zq9u" + user + ("" if password is None else ":" + "Pq8" + password)
    url = f"{scheme}:{'//'}{userinfo}@{host}{path}" if scheme else f"//{userinfo}@{host}{path}"
    text = " ".join(x for x in (before, url, after) if x)
    out = scrub_urls(text, MARK)
    assert "Zq9u" not in out and "Pq8" not in out
    assert out.count(MARK) == 1
    if password is None or not any(c in password for c in "/?#@"):
        assert out == text.replace(userinfo, MARK)
    assert scrub_urls(out, MARK) == out


@given(st.text(st.characters(exclude_categories=["Cs"])))
def test_url_scrubber_leaves_text_without_double_slash(text):
    assume("//" not in text)
    assert scrub_urls(text, MARK) == text


@given(st.text(st.sampled_from("ab:/@?#%. \n\"'")))
def test_url_scrubber_is_idempotent_and_marks_only_after_double_slash(text):
    out = scrub_urls(text, MARK)
    assert scrub_urls(out, MARK) == out
    at = out.find(MARK)
    while at >= 0:
        assert out[at - 2:at] == "//" and out[at + len(MARK)] == "@"
        at = out.find(MARK, at + 1)


@pytest.mark.parametrize("unit", ["//a@", "https://", "a@//", "x://", "//:/", "password=", "--password ", "bearer ",
                                  "a:$apr1$", "-----BEGIN RSA PRIVATE KEY-----", "eyJaaaaaaaaa."])
def test_scrub_is_total_on_repetitive_input(rules, unit):
    """No backtracking blow-up (a hang would hit the test timeout); speed lives in make bench."""
    out = rules.scrub(unit * 20_000)
    assert isinstance(out, str)


# --------------------------------------------------------------------------------------
# Secret-shaped text
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, scrubbed", [
    ("mysqld --password=hunter2 --user=root", "mysqld --password=[secret] --user=root"),
    ("app --api-key abc123 -v", "app --api-key [secret] -v"),
    ("curl -H 'Authorization: Bearer abc.def.ghi' x", "curl -H 'Authorization: Bearer [secret]' x"),
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [secret]"),
    ("addr=10.0.0.1,username=bob,password=x1y2", "addr=10.0.0.1,username=bob,password=[secret]"),
    ("?token=abc&page=2", "?token=[secret]&page=2"),
    ("POSTGRES_PASSWORD: s3cret", "POSTGRES_PASSWORD: [secret]"),
    ('{"password": "s3cret"}', '{"password": "[secret]"}'),
    ("traefik users bob:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/", "traefik users bob:[secret]"),
    ("key -----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbg==\n-----END OPENSSH PRIVATE KEY----- end", "key [secret] end"),
    ("pushed with ghp_16C7e42F292c6912E7710c838347Ae178B4a", "pushed with [secret]"),
    ("AKIAIOSFODNN7EXAMPLE in logs", "[secret] in logs"),
    ("a plain description with a password policy", "a plain description with a password policy"),
])
def test_secret_text(rules, raw, scrubbed):
    assert rules.scrub(raw) == scrubbed
    assert rules.scrub(scrubbed) == scrubbed


# --------------------------------------------------------------------------------------
# Rule kinds, pointers, schemas, and the resources' table
# --------------------------------------------------------------------------------------


def test_pointers_use_stars_for_indexes_covered_names_and_odd_keys(rules):
    value = {"services": [{"command": "run x", "environment": {"A": "1"}, "labels": ["com.docker.compose.service=db", "x=y"]}],
             "odd key/with slash": {"password": "p"}}
    r = rules.redact(value)
    assert r.paths == ("/*/password", "/services/*/command", "/services/*/environment/*", "/services/*/labels/*")
    assert r.value["services"][0]["labels"] == ["com.docker.compose.service=db", f"x={MARK}"]


def test_position_patterns_ignore_case_and_separators():
    p = R.compile_pattern("/**/driverOpts")
    for path in (("driver_opts",), ("a", 0, "DriverOpts"), ("x", "driver-opts")):
        assert p.fullmatch(R.path_key(path)), path
    assert not R.compile_pattern("/**/driverOpts").fullmatch(R.path_key(("driverOptions",)))
    assert R.compile_pattern("/**/*Id").fullmatch(R.path_key(("a", "containerId")))
    with pytest.raises(ValueError):
        R.compile_pattern("a/b")


def test_schema_format_password_and_write_only():
    """Arcane's 2.12 document declares neither today; a document that does is honoured."""
    schema = {"type": "object", "properties": {
        "pin": {"type": "string", "format": "password"},
        "nested": {"$ref": "#/$defs/N"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"hidden": {"type": "string", "writeOnly": True}}}}},
        "$defs": {"N": {"type": "object", "properties": {"inner": {"type": "string", "writeOnly": True}}}}}
    assert R.schema_secret_paths(schema) == ("/pin", "/nested/inner", "/items/*/hidden")
    r = _compiled({"marker": MARK, "names": {"last_words": ["password"]}, "positions": []})[0].redact(
        {"pin": "1234", "nested": {"inner": "x"}, "items": [{"hidden": "y"}], "other": "z"}, schema=schema)
    assert r.value == {"pin": MARK, "nested": {"inner": MARK}, "items": [{"hidden": MARK}], "other": "z"}


def test_the_embedded_document_declares_no_password_formats(catalog):
    """Reported, not assumed: if Arcane starts declaring them, previews use them at once
    (dispatch passes every action's input schema) and this figure changes."""
    declared = [(a.id, p) for a in catalog.all_actions.values() for p in R.schema_secret_paths(a.input_schema)]
    print(f"\nformat: password / writeOnly positions in request schemas: {len(declared)}")
    assert all(isinstance(p, str) and p.startswith("/") for _, p in declared)


def test_resources_table_is_expressible_with_the_same_rules(rules):
    """Issue 10's container resource, as a response redacted with the resources' marker:
    the same compiled positions and scrubber, plus one response-only position."""
    packaged = YAML(typ="safe").load((RULES_DIR / "redaction.yaml").read_text(encoding="utf-8"))
    data = {**packaged, "positions": [
        {"at": "/**/health/log/*/output", "hide": "whole", "in": ["response"], "reason": "healthcheck output"},
        *packaged["positions"]]}
    resource_rules, found = _compiled(data)
    assert found == []
    container = {"id": "c1", "name": "web", "image": "nginx:1.27",
                 "config": {"env": ["GH_PAT=ghp_x", "TZ=UTC"], "cmd": ["--password", "x"], "entrypoint": ["/e"],
                            "healthcheck": {"test": ["CMD", "curl", "-u", "a:b", "x"]},
                            "labels": {"com.docker.compose.project": "shop", "traefik.users": "bob:$apr1$x$y"}},
                 "state": {"health": {"log": [{"output": "token=abc", "exitCode": 0}]}},
                 "gitRepositoryURL": "https://bob:pw@git.example/r"}
    r = resource_rules.redact(container, side="response", marker="[redacted: use container.get]")
    m = "[redacted: use container.get]"
    assert r.value["config"]["env"] == [f"GH_PAT={m}", f"TZ={m}"]
    assert r.value["config"]["cmd"] == r.value["config"]["entrypoint"] == r.value["config"]["healthcheck"]["test"] == m
    assert r.value["config"]["labels"] == {"com.docker.compose.project": "shop", "traefik.users": m}
    assert r.value["state"]["health"]["log"] == [{"output": m, "exitCode": 0}]
    assert r.value["gitRepositoryURL"] == f"https://{m}@git.example/r"
    assert r.value["image"] == "nginx:1.27" and r.value["name"] == "web"
    assert r.paths == ("/config/cmd", "/config/entrypoint", "/config/env/*", "/config/healthcheck/test",
                       "/config/labels/*", "/gitRepositoryURL", "/state/health/log/*/output")
    # a response-only position is not applied to requests, and the result is stable
    assert resource_rules.redact(container, side="request").value["state"]["health"]["log"][0]["output"] == "token=[secret]"
    again = resource_rules.redact(r.value, side="response", marker=m)
    assert again.value == r.value


def _compiled(data: dict):
    """redaction.yaml data compiled as the rules load does it: (rules, problems found)."""
    reader = Reader.of(data)
    return compile_redaction(reader), reader.found


def test_rule_problems_are_collected():
    _, problems = _compiled({"marker": MARK, "positions": [{"at": ["/ok", "bad"], "hide": "values", "keep_sets": ["nope"]}],
                             "secret_text": [{"pattern": "(unclosed"}, {"pattern": "no-group"}],
                             "kept": [{"at": "/**/a**b"}]})
    assert sorted(code for _, _, code in problems) == ["bad_pattern", "bad_pattern", "bad_regex", "bad_regex", "unknown_key_set"]
