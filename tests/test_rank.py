"""The find ranker: natural queries find the right action first."""

from __future__ import annotations

import pytest

from interpreter.rank import Ranker


@pytest.fixture(scope="module")
def ranker(catalog):
    return Ranker(catalog)


@pytest.mark.parametrize("query,expected", [
    ("restart a container", "container.restart"),
    ("docker ps", "container.list"),
    ("list containers", "container.list"),
    ("contianer restart", "container.restart"),  # typo
    ("stop container", "container.stop"),
    ("pull image", "image.pull"),
    ("docker pull nginx", "image.pull"),
    ("list images", "image.list"),
    ("volumes", "volume.list"),
    ("environments", "environment.list"),
    ("delete volume", "volume.remove"),
    ("take the stack down", "project.down"),
    ("show logs of a container", "container.download_logs"),
    ("container.get", "container.get"),  # an exact ID
    ("prune images", "image.prune"),
])
def test_top_result(ranker, query, expected):
    hits = ranker.rank(query, 5)
    assert hits and hits[0].action.id == expected, [(h.action.id, h.score) for h in hits]


@pytest.mark.parametrize("query", ["containers", "images", "volume", "projects", "networks", "nginx container", "web container", "disk usage of volumes"])
def test_a_destructive_action_is_never_top_unless_asked(ranker, query):
    hits = ranker.rank(query, 5)
    assert hits and not hits[0].action.destructive, [(h.action.id, h.score) for h in hits]


def test_domain_filter_and_limit(ranker):
    hits = ranker.rank("list", 3, domain="image")
    assert len(hits) == 3 and all(h.action.domain == "image" for h in hits)


def test_no_match_is_empty(ranker):
    assert ranker.rank("zzqx vbnm", 5) == []


# ------------------------------------------------------------------ "did you mean"


@pytest.mark.parametrize("typed", ["restart_container", "container_restart", "containers.restart", "restart-container",
                                   "container.rstart", "container.restrat", "restartContainer", "Container.Restart",
                                   "restart container"])
def test_closest_finds_the_action_however_it_is_spelt(catalog, typed):
    assert catalog.closest(typed)[0] == "container.restart"


@pytest.mark.parametrize("typed, meant", [
    ("scale_swarm_service", "swarm_service.scale"), ("pull_image", "image.pull"), ("images.pull", "image.pull"),
    ("volumes.remove", "volume.remove"), ("git_repository.craete", "git_repository.create"),
    ("app_image.get_favicn", "app_image.get_favicon"), ("list_containers", "container.list"),
])
def test_closest_tokens_swaps_plurals_and_typos(catalog, typed, meant):
    assert catalog.closest(typed)[0] == meant


def test_closest_suggests_nothing_for_nonsense(catalog):
    assert catalog.closest("xyzzy") == [] and catalog.closest("") == []


def test_closest_tokens():
    from interpreter.suggest import id_tokens

    assert id_tokens("containers.restart") == ["container", "restart"]
    assert id_tokens("restart-Container") == ["restart", "container"]
    assert id_tokens("swarm_service.scale") == ["swarm", "service", "scale"]


@pytest.mark.anyio
async def test_unknown_action_suggests_the_swapped_name(catalog):
    from interpreter.dispatch import Call
    from tests.helpers import make_dispatcher, ok_json

    d, rec = make_dispatcher(catalog, lambda r: ok_json({}))
    res = await d.dispatch(Call("restart_container", {"containerId": "web"}))
    assert res.is_error and res.error_code == "unknown_action" and not rec.requests
    assert res.text.split("Did you mean ", 1)[1].startswith("container.restart")
