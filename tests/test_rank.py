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
