"""The find ranker: natural queries find the right action first."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from interpreter.text.rank import Ranker, edit_distance
from interpreter.text.suggest import fold, words


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


@pytest.mark.parametrize("query,expected", [
    ("contenedores en ejecución", "container.list"),  # accents folded
    ("reiniciar contenedor", "container.restart"),
    ("volúmenes", "volume.list"),  # a Spanish "es" plural, accented
    ("redes", "network.list"),
    ("lsit containers", "container.list"),  # one swap
    ("swarm tsks", "swarm_task.list"),  # a short word, one edit
    ("apikey list", "api_key.list"),  # two words run together
    ("how do I restart a container", "container.restart"),  # a request phrased as a question
    ("back up a volume", "volume_backup.create"),
    ("network topology", "network.topology"),
    ("who am I?", "auth.me"),
    ("rollback the swarm service", "swarm_service.rollback"),
])
def test_everyday_requests(ranker, query, expected):
    hits = ranker.rank(query, 5)
    assert hits and hits[0].action.id == expected, [(h.action.id, h.score) for h in hits]


@pytest.mark.parametrize("query", [
    "why does my container keep restarting",
    "which containers are running?",
    "how many images are unused",
    "the nginx container keeps restarting, show me why",  # a long request: the key words lead
    "my api container exited with code 137 an hour ago, can you find out what happened before it died",
])
def test_a_question_or_a_long_report_finds_a_read_only_action(ranker, query):
    hits = ranker.rank(query, 5)
    assert hits and hits[0].action.read_only, [(h.action.id, h.score) for h in hits]


@pytest.mark.parametrize("query,question", [
    ("why is the container down", True), ("which images are unused", True), ("¿cuántos contenedores hay?", True),
    ("list containers?", True), ("how do I prune images", False), ("can you restart web", False),
    ("restart web", False), ("", False),
])
def test_question_detection(ranker, query, question):
    assert ranker.is_question(query) is question


def test_a_question_never_lets_a_change_word_unlock_a_destructive_top(ranker):
    hits = ranker.rank("why did the volume get deleted?", 5)
    assert hits and not hits[0].action.destructive


def test_plural_forms(ranker):
    assert "red" in ranker.forms("redes") and "volumen" in ranker.forms("volumenes")
    assert "image" in ranker.forms("images") and "policy" in ranker.forms("policies")
    assert ranker.forms("us") == ("us",)  # too short a stem is not tried


def test_folding():
    assert fold("Ejecución VOLÚMENES ñandú") == "ejecucion volumenes nandu"
    assert words("contenedores_en ejecución") == ["contenedores", "en", "ejecucion"]


@pytest.mark.parametrize("a,b,limit,expected", [
    ("list", "list", 2, 0), ("lsit", "list", 2, 1), ("pul", "pull", 1, 1), ("sytem", "system", 2, 1),
    ("prnue", "prune", 2, 1), ("abc", "xyz", 2, 3), ("a", "abcdef", 2, 3), ("vulnerabilty", "vulnerability", 2, 1),
])
def test_edit_distance(a, b, limit, expected):
    assert edit_distance(a, b, limit) == expected


def test_numbers_and_names_do_not_dilute_a_query(ranker):
    plain = ranker.rank("restart container", 1)[0]
    noisy = ranker.rank("restart container 4f2a9c 137 nginx-prod", 1)[0]
    assert noisy.action.id == plain.action.id == "container.restart"


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
    from interpreter.text.suggest import id_tokens

    assert id_tokens("containers.restart") == ["container", "restart"]
    assert id_tokens("restart-Container") == ["restart", "container"]
    assert id_tokens("swarm_service.scale") == ["swarm", "service", "scale"]


@pytest.mark.anyio
async def test_unknown_action_suggests_the_swapped_name(catalog):
    from interpreter.call.dispatch import Call
    from tests.helpers import make_dispatcher, ok_json

    d, rec = make_dispatcher(catalog, lambda r: ok_json({}))
    res = await d.dispatch(Call("restart_container", {"containerId": "web"}))
    assert res.is_error and res.error_code == "unknown_action" and not rec.requests
    assert res.text.split("Did you mean ", 1)[1].startswith("container.restart")


@pytest.mark.parametrize("query,expected", [
    ("log out all my other sessions", "auth.logout_other_sessions"),  # "log out" read as logout
    ("update arcane on all environments", "system.update_all"),  # leads with the action's verb
    ("change my password", "auth.change_password"),
    ("docker sytem prnue", "system.prune"),  # a typo of a change word still asks to change
    ("tag the project as production", "project.update_tags"),  # "tag project", not "project tags"
    ("upload the system backup to s3", "system_backup.upload"),  # backup's synonym volume adds nothing
    ("bakcup volume", "volume_backup.create"),  # an alias matched through a typo
    ("which permissions can a role have?", "role.list_permissions"),  # names an action: no list bonus
])
def test_query_reading(ranker, query, expected):
    hits = ranker.rank(query, 5)
    assert hits and hits[0].action.id == expected, [(h.action.id, h.score) for h in hits]


def test_a_lead_verb_unlocks_only_its_own_action(ranker):
    """Leading with "update" asks for an update; it does not let another destructive action lead."""
    reading = ranker.read("update the volume")
    assert not reading.change and "update" in reading.lead
    hits = ranker.rank("update the volume", 5)
    assert hits and (not hits[0].action.destructive or hits[0].action.name.startswith("update"))


def test_short_names_and_known_words_are_not_typos(ranker):
    assert ranker._closest("blog") == ()  # would be "log" without keeping the first letter
    assert ranker._closest("lsit") == ("list",)
    assert ranker._closest("top") == ()  # a synonym-table word (docker top), not a typo of stop
    assert not ranker.asks_to_change("docker top web")
    assert ranker.asks_to_change("prnue images")


def test_joined_words_and_clause_questions(ranker):
    assert "logout" in [t.word for t in ranker.read("log out").terms]
    assert ranker.is_question("my container exited with code 1, what happened")
    assert not ranker.is_question("the web container is down, can you restart it")


def test_a_word_and_its_synonym_count_once(catalog, ranker):
    """A synonym adds nothing to an action the word itself already found ("update" and its
    synonym "updates" are one word of the query), and helps where the word is weaker."""
    syns = dict(catalog.find.synonyms)
    assert "updates" in syns["update"]
    syns.pop("update")
    bare = Ranker(replace(catalog, find=replace(catalog.find, synonyms=MappingProxyType(syns))))
    query = "update the container image"
    with_syn = {h.action.id: h.score for h in ranker.rank(query, 400)}
    without = {h.action.id: h.score for h in bare.rank(query, 400)}
    assert with_syn["container.update_image"] == without["container.update_image"]
    assert with_syn["project.updates"] >= without["project.updates"]
