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


# ------------------------------------------------------------------ intent, shorthands, languages, confidence


@pytest.mark.parametrize("query,expected", [
    ("ls ctr", "container.list"), ("lst img", "image.list"), ("del vol cache-old", "volume.remove"),
    ("ctr stats", "container.stats"), ("svc ls", "swarm_service.list"), ("envs", "environment.list"),
    ("Container web neu starten", "container.restart"), ("Image nginx löschen", "image.remove"),
    ("redémarrer le conteneur web", "container.restart"), ("supprimer l'image nginx", "image.remove"),
    ("excluir a imagem nginx", "image.remove"), ("criar uma rede", "network.create"),
    ("riavvia il container web", "container.restart"), ("elenca i volumi", "volume.list"),
])
def test_shorthands_and_other_languages_read_as_their_words(ranker, query, expected):
    hits = ranker.rank(query, 5)
    assert hits and hits[0].action.id == expected, [(h.action.id, h.score) for h in hits]


def test_a_stop_word_is_a_shorthand_only_where_the_rules_say(ranker):
    """`del` leads a command ("del vol x" deletes) but inside Spanish it is "of the"."""
    assert ranker.words("del vol x")[:2] == ["delete", "volume"]
    assert "delete" not in ranker.words("ver los logs del contenedor")
    hits = ranker.rank("ver los logs del contenedor", 3)
    assert hits and hits[0].action.read_only


@pytest.mark.parametrize("query", [
    "which networks is the web container on?", "what notification channels exist?", "expired api keys",
    "old volume backups", "notification channels", "which images can be patched?",
    "I want to change the restart policy of the web container, but first show me its current configuration",
])
def test_a_request_to_see_gets_a_read_first(ranker, query):
    """A question or a noun phrase asks to see: no action that changes state leads, destructive or not."""
    reading = ranker.read(query)
    hits = ranker.rank(query, 5)
    assert reading.see and hits and hits[0].action.read_only, [(h.action.id, h.score) for h in hits]


def test_a_verb_asks_to_do_and_a_noun_phrase_to_see(ranker):
    assert not ranker.read("create a volume").see and not ranker.read("back up a volume").see
    assert ranker.read("old volume backups").see and ranker.read("dangling images").see
    # a request that leads with "see" asks to see, whatever verb it names later
    assert ranker.read("I would like to see which containers are attached to the backend network").see


@pytest.mark.parametrize("query,not_first", [
    ("there is one volume called old-cache that I want to get rid of", "volume.prune"),
    ("remove the volume named cache-old", "volume.prune"),
    ("bob left the company, please remove that user account", "project.destroy"),
])
def test_one_named_thing_is_not_a_prune_of_everything(ranker, query, not_first):
    hits = ranker.rank(query, 5)
    assert hits and hits[0].action.id != not_first and hits[0].action.name != "prune", [(h.action.id, h.score) for h in hits]


def test_everything_at_once_still_prunes(ranker):
    assert ranker.rank("remove all unused volumes", 1)[0].action.id == "volume.prune"


def test_the_request_outweighs_its_context(ranker):
    """Words before the last request marker ("can you…") or outside the "first" clause are context."""
    reading = ranker.read("logging in keeps failing, can you show the registry list")
    assert "logging" in reading.context and "registry" not in reading.context
    hits = ranker.rank("the database backup job ran last night; can you restore the volume backup from it", 3)
    assert hits and hits[0].action.id == "volume_backup.restore", [(h.action.id, h.score) for h in hits]


def test_ties_go_to_reads_then_main_actions_not_the_alphabet(ranker):
    for query in ("logs", "history", "stacks", "tokens", "backups", "settings", "mostrar as configurações"):
        hits = ranker.rank(query, 10)
        for a, b in zip(hits, hits[1:], strict=False):
            if a.score == b.score:
                assert not (a.action.mutating and b.action.read_only), (query, a.action.id, b.action.id)


def test_every_hit_carries_a_confidence(ranker):
    from interpreter.text.rank import CONFIDENCES

    for query in ("restart the nginx container", "logs", "scan", "the", "restart container 4f2a9c"):
        for h in ranker.rank(query, 5):
            assert h.confidence in CONFIDENCES
    assert ranker.rank("container.get", 1)[0].confidence == "high"
    assert ranker.rank("restart the nginx container", 1)[0].confidence == "high"
    assert ranker.rank("logs", 1)[0].confidence == "low"  # several actions equally right: no margin
    hits = ranker.rank("restart the nginx container", 5)
    assert all(h.confidence != "high" for h in hits[1:])


def test_nothing_meaningful_matched_gives_no_hits(ranker):
    """So the find answer's no-match line can fire."""
    for query in ("xyzzy frobnicate", "the of and", "", "¿?"):
        assert ranker.rank(query, 5) == [], query


def test_shorthands_and_languages_are_data(catalog):
    """A word the rules add is read as its words; without the table the word means nothing."""
    rules = catalog.find
    added = Ranker(replace(catalog, find=replace(rules, rewrites=MappingProxyType({**rules.rewrites, "kntnrs": ("containers",)}))))
    assert added.rank("kntnrs", 1)[0].action.id == "container.list"
    assert Ranker(catalog).rank("kntnrs", 1) == []


@pytest.mark.parametrize("query, expected", [
    ("shwo imgaes", "image.list"),       # both misspelt: "shwo" means what "show" means (list, get)
    ("shwo images", "image.list"),
    ("show imgaes", "image.list"),
])
def test_a_misspelt_word_means_what_its_closest_word_means(ranker, query, expected):
    hits = ranker.rank(query, 3)
    assert hits and hits[0].action.id == expected, [h.action.id for h in hits]
    assert hits[0].action.read_only
