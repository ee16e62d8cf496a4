"""Error hints (rules/errors.yaml, interpreter/text/hints.py): every hint names actions that
exist and suit what went wrong, and Arcane's own texts get the right next step."""

from __future__ import annotations

import functools

import httpx
import pytest
from ruamel.yaml import YAML

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.call.dispatch import Call
from interpreter.text.hints import FAILING, OTHERS
from interpreter.text.render import Namer
from tests.helpers import make_dispatcher

pytestmark = pytest.mark.anyio

SURFACES = ("dynamic", "meta", "individual")


@functools.cache
def _declared_domains() -> dict:
    return YAML(typ="safe").load((CATALOG_DIR / "conventions.yaml").read_text(encoding="utf-8"))["domains"]


def _declared_role(catalog, domain: str, role: str) -> str | None:
    """A domain's list/get action read straight from catalog/conventions.yaml (apart from
    the engine): the declared one, else `<domain>.<role>` when it exists."""
    spec = _declared_domains().get(domain) or {}
    if role in spec:
        return None if spec[role] == "none" else spec[role]
    return f"{domain}.{role}" if f"{domain}.{role}" in catalog.all_actions else None


def _suits(rule, named, failing, error_domain, catalog) -> bool:
    """The purposes' `may_name` read straight from the YAML (apart from hints.py)."""
    if rule == FAILING:
        return named.id == failing.id
    domain = error_domain if rule.get("domain", "error") == "error" else rule["domain"]
    return (named.domain == domain and ("verbs" not in rule or named.name in rule["verbs"])
            and ("declared" not in rule or named.id in {_declared_role(catalog, domain, r) for r in rule["declared"]})
            and ("read_only" not in rule or named.read_only == rule["read_only"]))


def test_every_hint_names_actions_that_exist_and_suit_the_error(catalog):
    data = YAML(typ="safe").load((RULES_DIR / "errors.yaml").read_text(encoding="utf-8"))
    purposes = data["purposes"]
    hints = catalog.hints
    assert hints.problems(catalog) == []
    entries = list(hints.entries())
    # every hint of the file, and no other
    n_file = (len(data.get("messages") or []) + len(data["http"])
              + sum(1 for k in OTHERS if k in data))
    assert len(entries) == n_file
    report = []
    for e in entries:
        assert e.purpose in purposes, e.where
        failing = [a for a in catalog.all_actions.values() if e.applies_to(a.id)]
        assert failing, f"{e.where} applies to no action"
        named_ids: set[str] = set()
        for a in failing:
            for template in (e.hint, e.fallback):
                names = hints.named(template, a, catalog.all_actions, catalog.domains, e.domain) if template else None
                if names is None:
                    continue
                for ph, aid in names.items():
                    if ph == "status":
                        continue
                    assert aid in catalog.all_actions, (e.where, aid)
                    target = catalog.all_actions[aid]
                    error_domain = e.domain or a.domain
                    assert any(_suits(r, target, a, error_domain, catalog) for r in purposes[e.purpose]["may_name"]), \
                        f"{'/'.join(map(str, e.where))} ({e.purpose}) names {aid} when {a.id} fails"
                    named_ids.add(aid if aid != a.id else "{action}")
                break
        for p in e.params:
            assert all(p in a.input_schema.get("properties", {}) for a in failing), (e.where, p)
        report.append(f"{'/'.join(map(str, e.where))}: {e.purpose}, {len(failing)} action(s), names {sorted(named_ids)[:6]}")
    print("\n" + "\n".join(report))


def _json_error(status: int, body: dict):
    return lambda request: httpx.Response(status, json=body)


def _problem(status: int, detail: str):
    return lambda request: httpx.Response(status, json={"title": httpx.codes.get_reason_phrase(status), "status": status,
                                                        "detail": detail}, headers={"content-type": "application/problem+json"})


@pytest.mark.parametrize("surface", SURFACES)
async def test_environment_not_found_names_the_environment_list(catalog, surface):
    """The environment proxy's 404 for any environment-scoped route."""
    d, rec = make_dispatcher(catalog, _json_error(404, {"success": False, "data": {"error": "Environment not found"}}))
    res = await d.dispatch(Call("container.list", {"environmentId": "99"}, surface=surface))
    namer = Namer(surface)
    assert res.is_error and res.http_status == 404 and len(rec.requests) == 1
    assert namer("environment.list") in res.text and namer("container.list") not in res.text
    # environment.get's own 404 says the same
    d, _ = make_dispatcher(catalog, _problem(404, "Environment not found"))
    res = await d.dispatch(Call("environment.get", {"id": "99"}, surface=surface))
    assert namer("environment.list") in res.text


async def test_environment_not_found_without_the_environment_list(catalog):
    """With environment.list withdrawn the hint falls back to text naming no action."""
    from interpreter.build.catalog import BuildOptions, build

    narrowed = build(BuildOptions(exclude=("environment.list",)))
    d, _ = make_dispatcher(narrowed, _json_error(404, {"success": False, "data": {"error": "Environment not found"}}))
    res = await d.dispatch(Call("container.list", {"environmentId": "99"}))
    assert res.is_error and "environmentId" in res.text and "container.list" not in res.text


@pytest.mark.parametrize("surface", SURFACES)
async def test_deleting_a_running_container_says_stop_it_or_force(catalog, surface):
    detail = ("Failed to delete container: Error response from daemon: cannot remove container \"/web\": "
              "container is running: stop the container before removing or force remove")
    d, _ = make_dispatcher(catalog, _problem(500, detail))
    res = await d.dispatch(Call("container.delete", {"containerId": "web"}, confirm=True, surface=surface))
    namer = Namer(surface)
    assert res.is_error and res.http_status == 500
    step = res.text.split("Next step:", 1)[1]
    assert namer("container.stop") in step and "force: true" in step and "retry shortly" not in step


@pytest.mark.parametrize("status", [500, 404])
@pytest.mark.parametrize("message", [
    # the moby client v0.5.1 Arcane uses, on first use
    "failed to connect to the docker API at unix:///var/run/docker.sock; check if the path is correct and if "
    "the daemon is running: dial unix /var/run/docker.sock: connect: no such file or directory",
    # the cached client once the daemon went away: no "failed to connect to Docker" prefix
    "Failed to list containers: failed to list Docker containers: failed to connect to the docker API at "
    "unix:///var/run/docker.sock; check if the path is correct and if the daemon is running: dial unix "
    "/var/run/docker.sock: connect: connection refused",
    # older clients
    "failed to connect to Docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
    "Is the docker daemon running?",
])
async def test_an_unreachable_docker_daemon_gets_the_daemon_hint(catalog, message, status):
    d, _ = make_dispatcher(catalog, _problem(status, message))
    res = await d.dispatch(Call("container.list", {}))
    step = res.text.split("Next step:", 1)[1]
    assert "environment.test" in step and "environment.list" in step
    assert "container.list" not in step and "retry shortly" not in step


@pytest.mark.parametrize("action, args, detail, names", [
    ("network.connect_container", {"networkId": "n1", "containerId": "ghost"},
     "Failed to connect container: Error response from daemon: No such container: ghost", "container.list"),
    ("image.get", {"imageId": "nope"}, "Image not found: nope", "image.list"),
    ("project.get", {"projectId": "shop"}, "Failed to get project details: project not found", "project.list"),
])
async def test_not_found_texts_name_the_missing_things_list(catalog, action, args, detail, names):
    d, _ = make_dispatcher(catalog, _problem(404, detail))
    res = await d.dispatch(Call(action, args))
    assert res.is_error and names in res.text.split("Next step:", 1)[1], res.text


async def test_status_hints_still_apply(catalog):
    d, _ = make_dispatcher(catalog, _problem(500, "something broke"))
    res = await d.dispatch(Call("container.restart", {"containerId": "web"}))
    assert "retry shortly" in res.text and "(500)" in res.text
    d, _ = make_dispatcher(catalog, _problem(404, "gone"))
    res = await d.dispatch(Call("volume.get", {"volumeName": "v"}))
    assert "volume.list" in res.text


@pytest.mark.parametrize("surface", SURFACES)
async def test_compose_content_arcane_cannot_load_is_an_argument_to_fix(catalog, surface):
    """Arcane answers 500 for Compose content it cannot load: the step is to fix the content and
    call the same action again, never to retry as it is."""
    uuid = "0b7e5f0e-1a1b-4c1c-8d1d-2e2f3a4b5c6d"
    d, rec = make_dispatcher(catalog, _problem(500, "Failed to update project: invalid compose file: no services in the Compose content"))
    res = await d.dispatch(Call("project.update", {"projectId": uuid, "composeContent": "web: {}"}, surface=surface))
    assert res.is_error and res.http_status == 500 and len(rec.requests) == 1
    step = res.text.split("Next step:", 1)[1]
    assert Namer(surface)("project.update") in step and "retry shortly" not in step
