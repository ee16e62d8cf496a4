"""Issue 10: the resources' redaction (spec/resources.es.txt, "Ocultación de secretos"),
applied by the one redaction module (interpreter/text/redact.py, Rules.for_resource) with the
compiled rules and URL scrubber the safe-mode previews use.

* every string field Arcane's response schemas declare for the resources' actions is pinned
  hidden or kept (tests/golden/resource_fields.json; a new field fails until someone decides),
  and the pins are the spec page's table;
* hypothesis over those schemas: no secret planted in a hidden field appears anywhere in
  the resource, and ``_redacted.paths`` with ``*`` expanded cover exactly what was hidden;
* the URL cases of notes/security.md that the spec page covers.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interpreter.text.redact import _deref
from tests.helpers import examples
from tests.resource_fields import PINS, decisions, resource_actions, response_schema, structured_schema


def marker(action: str) -> str:
    return f"[redacted: use {action}]"


@pytest.fixture(scope="module")
def rules(catalog):
    return catalog.redaction


@pytest.fixture(scope="module")
def pins() -> dict:
    return json.loads(PINS.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- schema positions


def test_every_declared_string_field_is_pinned(catalog, pins):
    """A field Arcane adds (or removes), or a rule that changes a decision, fails here:
    review it, then rerun `python -m tests.resource_fields` and commit the diff."""
    got = decisions(catalog, resource_actions(catalog))
    assert sorted(got) == sorted(pins)
    for aid in got:
        added = sorted(set(got[aid]) - set(pins[aid]))
        removed = sorted(set(pins[aid]) - set(got[aid]))
        changed = sorted(p for p in set(got[aid]) & set(pins[aid]) if got[aid][p] != pins[aid][p])
        assert (added, removed, changed) == ([], [], []), aid
    total = sum(len(f) for f in got.values())
    hidden = sum(1 for f in got.values() for d in f.values() if d == "hidden")
    print(f"\nresource string fields pinned: {total} ({hidden} hidden) over {len(got)} actions")


# The spec page's table, position by position (a service config's positions apply under
# services/* and runtimeServices/*/serviceConfig; a list's under items/*, and containers'
# groups/*/items/* too).
CONTAINER_LIST = ["command", "labels/*"]
CONTAINER = ["config/env/*", "config/cmd/*", "config/entrypoint/*", "config/healthcheck/test/*",
             "state/health/log/*/output", "labels/*"]
SERVICE = ["environment/*", "build/args/*", "command/*", "entrypoint/*", "healthcheck/test/*",
           *[f"{hook}/*/{what}/*" for hook in ("pre_start", "post_start", "pre_stop") for what in ("command", "environment")],
           "develop/watch/*/exec/command/*", "develop/watch/*/exec/environment/*", "build/dockerfile_inline",
           "labels/*", "build/labels/*", "deploy/labels/*", "volumes/*/volume/labels/*", "annotations/*",
           "logging/options/*", "log_opt/*", "provider/options/*/*"]
PROJECT = ["composeContent", "envContent", "overrideContent", "includeFiles/*/content",
           *[f"{where}/{p}" for where in ("services/*", "runtimeServices/*/serviceConfig") for p in SERVICE]]
SPEC_TABLE = {
    "environment.list": [f"items/*/{p}" for p in ("apiKey", "edgeSessionId")],
    "environment.get": ["apiKey", "edgeSessionId"],
    "version.app": [],
    "container.list": [f"{where}/{p}" for where in ("items/*", "groups/*/items/*") for p in CONTAINER_LIST],
    "container.get": CONTAINER,
    "project.list": [f"items/*/{p}" for p in PROJECT],
    "project.get": PROJECT,
    # image label values are hidden too, but Arcane's schema types them loosely (no string
    # field to pin): test_image_label_values covers them
    "image.list": [],
}


def test_the_pins_are_the_spec_table(pins):
    for aid, fields in pins.items():
        hidden = {p for p, d in fields.items() if d == "hidden"}
        expected = {"/" + p for p in SPEC_TABLE[aid]} & set(fields)
        assert hidden == expected, (aid, sorted(hidden ^ expected))
    # the table is not vacuous: every position it names is a declared field
    missing = {aid: sorted({"/" + p for p in SPEC_TABLE[aid]} - set(pins[aid])) for aid in pins}
    assert all(not m or aid.endswith(".list") for aid, m in missing.items()), missing


# ---------------------------------------------------------------- hypothesis over the schemas

SECRET = re.compile(r"S3CR[0-9]+T")
KEEP_KEYS = ["com.docker.compose.project", "com.docker.compose.service", "org.opencontainers.image.source"]
OTHER_KEYS = ["traefik.http.middlewares.auth.basicauth.users", "com.docker.compose.hand-made", "app", "a/b~c key",
              "k" * 70, "GH_PAT"]


class Planter:
    """Draws an instance of a schema: optional members, 0–2 items, map keys from
    Compose's own labels, other labels and odd keys; strings are plain words, secrets,
    NAME=secret entries or URLs with a secret in their userinfo. Records every string with
    its pattern pointer (``*`` for items and map values) and concrete pointer."""

    def __init__(self, draw, document):
        self.draw, self.document, self.n = draw, document, 0
        self.leaves: list[tuple[str, tuple, str]] = []  # (pattern, concrete path, value)

    def secret(self) -> str:
        self.n += 1
        return f"S3CR{self.n}T"

    def string(self, pattern: str, path: tuple, keep: bool) -> str:
        kind = self.draw(st.sampled_from(["word", "secret", "entry", "url", "relurl"]))
        if keep or kind == "word":
            value = self.draw(st.sampled_from(["web", "nginx:1.27", "running", "0", "/data", "git@github.com:o/r.git",
                                               "mailto:ops@example.com", "user:pw@tcp(db:3306)/x"]))
        elif kind == "secret":
            value = self.secret()
        elif kind == "entry":
            value = f"TOKEN={self.secret()}"
        elif kind == "url":
            value = f"see https://bob:{self.secret()}@git.example.com/r.git now"
        else:
            value = f"//{self.secret()}@cache:6379/0"
        self.leaves.append((pattern, path, value))
        return value

    def value(self, schema, pattern: tuple = (), path: tuple = (), depth: int = 0, keep: bool = False):
        s = _deref(schema, self.document)
        if not isinstance(s, dict) or depth > 12:
            return None
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in s.get(key) or ():
                sub = _deref(sub, self.document)
                if isinstance(sub, dict) and (sub.get("properties") or sub.get("type") not in (None, "null", ["null"])):
                    return self.value(sub, pattern, path, depth + 1, keep)
        types = s.get("type") if isinstance(s.get("type"), list) else [s.get("type")]
        if "object" in types or s.get("properties"):
            obj = {}
            for name, sub in (s.get("properties") or {}).items():
                if depth == 0 or self.draw(st.booleans()):
                    obj[name] = self.value(sub, pattern + (name,), path + (name,), depth + 1)
            if isinstance(s.get("additionalProperties"), dict):
                for key in self.draw(st.lists(st.sampled_from(KEEP_KEYS + OTHER_KEYS), max_size=2, unique=True)):
                    obj[key] = self.value(s["additionalProperties"], pattern + ("*",), path + (key,), depth + 1,
                                          keep=key in KEEP_KEYS)
            return obj
        if "array" in types:
            n = self.draw(st.integers(0, 2))
            return [self.value(s.get("items") or {}, pattern + ("*",), path + (i,), depth + 1) for i in range(n)]
        if "string" in types:
            if s.get("enum"):
                return s["enum"][0]
            return self.string("/" + "/".join(map(str, pattern)), path, keep)
        if "integer" in types or "number" in types:
            return 7
        if "boolean" in types:
            return False
        return None


def _pointer(path: tuple) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _changed(before, after, path: tuple = ()) -> set[str]:
    """The concrete pointers where the redaction replaced something."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = set()
        for k, v in before.items():
            out |= _changed(v, after.get(k), path + (k,))
        return out
    if isinstance(before, list) and isinstance(after, list):
        return set().union(*[_changed(b, a, path + (i,)) for i, (b, a) in enumerate(zip(before, after, strict=True))]) if before else set()
    return set() if before == after else {_pointer(path)}


def _expand(pattern: str) -> re.Pattern:
    """A `_redacted.paths` entry as a regex over concrete pointers (`*`: one segment)."""
    return re.compile("".join("/" + ("[^/]*" if seg == "*" else re.escape(seg)) for seg in pattern[1:].split("/")))


@pytest.mark.parametrize("action", ["environment.list", "environment.get", "container.list", "container.get",
                                    "project.get", "image.list"])
@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                            HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_hidden_secret_survives_and_paths_cover_exactly_what_was_hidden(catalog, rules, pins, action, data):
    doc = catalog.document
    schema = structured_schema(doc, response_schema(doc, catalog.all_actions[action]), catalog.conventions.envelope)
    planter = Planter(data.draw, doc)
    value = planter.value(schema)
    out = rules.for_resource(value, action)
    text = json.dumps(out, ensure_ascii=False)
    # (a) a secret planted in a field pinned hidden appears nowhere; nor in a URL's userinfo
    for pattern, path, planted in planter.leaves:
        if pins[action].get(pattern) == "hidden" or "@" in planted:
            for secret in SECRET.findall(planted):
                assert secret not in text, (pattern, path, planted)
    # (b) the paths, with `*` expanded, cover exactly the positions that changed; the
    # listed segments are written as they are only when made of [A-Za-z0-9_.-]{1,64}
    listed = (out.get("_redacted") or {}).get("paths", [])
    assert listed == sorted(set(listed))
    body = {k: v for k, v in out.items() if k != "_redacted"}
    changed = _changed(value, body)
    assert bool(listed) == bool(changed)
    if listed:
        assert out["_redacted"]["fullValue"] == action
    for ptr in changed:
        assert any(_expand(p).fullmatch(ptr) for p in listed), (ptr, listed)
    for p in listed:
        assert any(_expand(p).fullmatch(c) for c in changed), (p, sorted(changed))
        assert all(seg == "*" or re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", seg) for seg in p[1:].split("/")), p
    # a marker in the output is only where something was hidden
    assert text.count("[redacted: use ") >= len(changed)


# ---------------------------------------------------------------- the table's cases


def test_container_with_secrets_shows_none_and_lists_each_pointer(rules):
    m = marker("container.get")
    container = {"id": "c1", "name": "web", "image": "nginx:1.27",
                 "config": {"env": ["GH_PAT=ghp_abcdefghijklmnopqrstuvwxyz012345", "TZ=UTC", "BARE_TOKEN_NO_EQUALS"],
                            "cmd": ["--password", "hunter2"], "entrypoint": ["/run.sh", "--token=t0k"],
                            "healthcheck": {"test": ["CMD", "curl", "-u", "admin:s3cret", "http://localhost/"]}},
                 "labels": {"com.docker.compose.project": "shop", "com.docker.compose.service": "web",
                            "com.docker.compose.hand-made": "secret-ish", "org.opencontainers.image.source": "https://github.com/o/r",
                            "traefik.http.middlewares.a.basicauth.users": "bob:$apr1$x$y"},
                 "state": {"status": "running", "health": {"status": "unhealthy", "log": [{"output": "auth token=abc failed", "exitCode": 1}]}},
                 "mounts": [{"source": "/data", "destination": "/var/lib"}], "ports": [{"ip": "0.0.0.0", "type": "tcp"}]}
    out = rules.for_resource(container, "container.get")
    text = json.dumps(out)
    for secret in ("ghp_abcdef", "hunter2", "t0k", "s3cret", "secret-ish", "apr1", "token=abc", "BARE_TOKEN"):
        assert secret not in text, secret
    assert out["config"]["env"] == [f"GH_PAT={m}", f"TZ={m}", m]
    assert out["config"]["cmd"] == out["config"]["entrypoint"] == out["config"]["healthcheck"]["test"] == m
    assert out["labels"]["com.docker.compose.project"] == "shop"
    assert out["labels"]["org.opencontainers.image.source"] == "https://github.com/o/r"
    assert out["labels"]["com.docker.compose.hand-made"] == m
    assert out["state"]["health"]["log"][0] == {"output": m, "exitCode": 1}
    assert (out["id"], out["name"], out["image"], out["mounts"], out["ports"], out["state"]["status"]) == \
        ("c1", "web", "nginx:1.27", container["mounts"], container["ports"], "running")
    assert out["_redacted"] == {"fullValue": "container.get", "paths": [
        "/config/cmd", "/config/entrypoint", "/config/env/*", "/config/healthcheck/test", "/labels/*",
        "/state/health/log/*/output"]}


def test_environment_secrets_and_failed_environments_stay_identifiers(rules):
    env = {"items": [{"id": "e1", "name": "edge", "apiKey": "arc_" + "a" * 32, "edgeSessionId": "sess-123",
                      "apiUrl": "https://agent:pw0rd@10.0.0.5:3553"}], "failedEnvironments": ["e2"]}
    out = rules.for_resource(env, "environment.list")
    item = out["items"][0]
    assert item["apiKey"] == item["edgeSessionId"] == marker("environment.list")
    assert item["apiUrl"] == f"https://{marker('environment.list')}@10.0.0.5:3553"
    assert out["failedEnvironments"] == ["e2"] and item["id"] == "e1" and item["name"] == "edge"
    assert out["_redacted"]["paths"] == ["/items/*/apiKey", "/items/*/apiUrl", "/items/*/edgeSessionId"]


def test_image_label_values(rules):
    images = {"items": [{"id": "sha256:1", "repoTags": ["app:1"], "labels": {
        "org.opencontainers.image.version": "1.0", "maintainer.token": "tok-9", "build.args": "PASS=x"}}]}
    out = rules.for_resource(images, "image.list")
    labels = out["items"][0]["labels"]
    assert labels == {"org.opencontainers.image.version": "1.0", "maintainer.token": marker("image.list"),
                      "build.args": marker("image.list")}
    assert out["_redacted"]["paths"] == ["/items/*/labels/*"]


def test_a_top_level_redacted_member_from_arcane_is_withheld(rules):
    out = rules.for_resource({"id": "x", "_redacted": {"fullValue": "fake", "paths": []}}, "environment.get")
    assert out == {"id": "x", "_redacted": {"fullValue": "environment.get", "paths": ["/_redacted"]}}
    # deeper members of that name are Arcane's data like any other
    assert rules.for_resource({"a": {"_redacted": 1}}, "environment.get") == {"a": {"_redacted": 1}}


def test_nothing_hidden_means_no_member_and_tool_calls_redact_nothing(rules):
    value = {"currentVersion": "2.12.0", "releaseUrl": "https://github.com/getarcaneapp/arcane/releases"}
    assert rules.for_resource(value, "version.app") == value


def test_odd_keys_are_written_as_stars(rules):
    out = rules.for_resource({"networks": {"net/with slash": {"x": "https://u:p@h/"}, "ok-name": {"x": "https://u:p@h/"}}},
                             "container.get")
    assert out["_redacted"]["paths"] == ["/networks/*/x", "/networks/ok-name/x"]


# The URL cases of notes/security.md §3.2 that the spec page covers (userinfo of a URL in
# any string, also scheme-relative; a password with unencoded / ? # @ removed whole; a
# token used as the user masked; git@host:repo, mailto: and scheme-less DSNs left alone).
URL_CASES = [
    ("postgres://user:p@ss@db:5432/app", "p@ss", "@db:5432/app"),
    ("redis://:pa#ss@cache:6379/0", "pa#ss", "@cache:6379/0"),
    ("redis://:pa/ss@cache:6379/0", "pa/ss", "@cache:6379/0"),
    ("amqp://guest:gu?est@rabbit/", "gu?est", "@rabbit/"),
    ("https://ghp_abcdefTOKEN@github.com/org/repo.git", "ghp_abcdefTOKEN", "@github.com/org/repo.git"),
    ("mysql://u:p%40ss@h/db", "p%40ss", "@h/db"),
    ("mongodb+srv://u:pw@c1.example.net,c2.example.net/db", "u:pw", "@c1.example.net,c2.example.net/db"),
    ("clone failed: fatal: //bob:hunter2@git.example.com/r not found", "hunter2", "@git.example.com/r not found"),
]
UNCHANGED = ["git@github.com:org/repo.git", "mailto:ops@example.com", "user:pass@tcp(localhost:3306)/dbname",
             "https://medium.com/@someone/post"]


@pytest.mark.parametrize("raw,secret,tail", URL_CASES)
def test_url_userinfo_is_removed_from_any_string(rules, raw, secret, tail):
    value = {"gitRepositoryURL": raw, "configurationError": {"message": raw}}
    out = rules.for_resource(value, "project.get")
    for got in (out["gitRepositoryURL"], out["configurationError"]["message"]):
        assert secret not in got and got.endswith(tail) and marker("project.get") in got
    assert out["_redacted"]["paths"] == ["/configurationError/message", "/gitRepositoryURL"]


@pytest.mark.parametrize("raw", UNCHANGED)
def test_strings_without_url_userinfo_stay(rules, raw):
    assert rules.for_resource({"gitRepositoryURL": raw}, "project.get") == {"gitRepositoryURL": raw}
