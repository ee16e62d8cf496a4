"""Confirmations that show the blast radius: the question names the environment (name
and ID), the arguments that change what happens and what the call would affect, read
from Arcane through the overlays' `blast_radius` reads, on every surface and both
protocol eras, in the refusal a client that cannot be asked receives and in the safe-mode
preview; a read that fails says it could not tell. Assertions are on the items, counts
and names present, derived from the simulator's state, not on the wording."""

from __future__ import annotations

import re

import pytest

from interpreter.build.catalog import build
from interpreter.build.model import BlastRead, Expr
from interpreter.call import confirm as blast
from interpreter.text.escape import human_bytes
from tests.test_e2e import ERAS, SURFACES, Caller, text
from tests.test_safety import answering, base_env, serve

pytestmark = pytest.mark.anyio

STOPPED = ("exited", "created", "dead")  # what Docker's container prune removes (not running, not paused)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def line_of(question: str, starts: str) -> str:
    [line] = [x for x in question.splitlines() if x.startswith("- " + starts)]
    return line


def count_in(line: str) -> int:
    m = re.search(r": (\d+)\b", line)
    assert m, line
    return int(m.group(1))


def names_in(line: str) -> list[str]:
    return [m.group(2).strip() for m in CODE_SPAN.finditer(line)]


def environment(sim) -> dict:
    return next(e for e in sim.items("environments", None) if e["id"] == "0")


def project(sim, name: str) -> dict:
    return next(p for p in sim.items("projects") if p["name"] == name)


def check_prune(question: str, sim) -> None:
    env = environment(sim)
    head = question.splitlines()[0]
    assert env["name"] in head and "environmentId 0" in head
    assert "containers" in line_of(question, "with ") and "stopped" in line_of(question, "with ")
    stopped = [c for c in sim.items("containers") if c["state"] in STOPPED]
    line = line_of(question, "stopped containers")
    assert count_in(line) == len(stopped) > 5
    shown = names_in(line)
    assert len(shown) == 5 and set(shown) <= {c["names"][0] for c in stopped}
    assert f"and {len(stopped) - 5} more" in line


def check_destroy(question: str, sim) -> None:
    blog = project(sim, "blog")
    head = question.splitlines()[0]
    assert "`blog`" in head and blog["id"][:12] in head and environment(sim)["name"] in head
    assert "removeVolumes" in line_of(question, "with ")
    volumes = [v for v in sim.items("volumes") if (v.get("labels") or {}).get("com.docker.compose.project") == "blog"]
    line = line_of(question, "volumes it removes")
    assert count_in(line) == len(volumes) >= 1 and set(names_in(line)) == {v["name"] for v in volumes}
    assert human_bytes(sum(v["size"] for v in volumes)) in line
    line = line_of(question, "containers it removes")
    assert set(names_in(line)) == {s["containerName"] for s in blog["runtimeServices"]}


def check_network(question: str, sim) -> None:
    head = question.splitlines()[0]
    assert "blog_default" in head and environment(sim)["name"] in head
    attached = [c["names"][0].lstrip("/") for c in sim.items("containers")
                if "blog_default" in ((c.get("networkSettings") or {}).get("networks") or {})]
    line = line_of(question, "containers attached")
    assert count_in(line) == len(attached) >= 1 and set(names_in(line)) == set(attached)


def manager(sim) -> dict:
    return next(n for n in sim.items("swarm_nodes") if n["role"] == "manager")


def check_drain(question: str, sim) -> None:
    node = manager(sim)
    assert node["hostname"] in question.splitlines()[0]
    assert "drain" in line_of(question, "with ")
    running = {t["serviceName"] for t in sim.items("swarm_tasks") if t["nodeId"] == node["id"] and t["desiredState"] == "running"}
    line = line_of(question, "tasks a drain stops")
    assert count_in(line) >= len(running) >= 1 and running <= set(names_in(line))


def cases(sim) -> list[tuple[str, dict, object]]:
    return [("system.prune", {"containers": {"mode": "stopped"}}, check_prune),
            ("project.destroy", {"projectId": project(sim, "blog")["id"], "removeVolumes": True}, check_destroy),
            ("network.delete", {"networkId": "blog_default"}, check_network),
            ("swarm_node.update", {"nodeId": manager(sim)["id"], "availability": "drain", "version": 1}, check_drain)]


def changes(sim) -> list:
    return [(r.method, r.path) for r in sim.requests() if r.method != "GET"]


# ------------------------------------------------------------------ asked, refused


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("surface", SURFACES)
async def test_the_question_and_the_refusal_show_the_blast_radius(sim, surface, era):
    """Asked (elicitation/create on the legacy protocol, the input request on 2026-07-28)
    and refused (a client without the elicitation capability): the same question, with
    the environment's name, the arguments and what would go; nothing is changed."""
    asked: list = []
    async with serve(base_env(sim, ARCANE_MCP_SURFACE=surface), era, elicitation_callback=answering("decline", asked)) as client:
        call = Caller(client, surface)
        sim.clear_requests()
        for action_id, params, check in cases(sim):
            res = await call(action_id, params)
            assert res.is_error and text(res).startswith("Error: declined"), text(res)
            check(asked[-1].message, sim)
        assert len(asked) == len(cases(sim)) and changes(sim) == []
        # the environment's name is read once and kept (ENV_NAME_TTL)
        assert sum(1 for r in sim.requests() if r.path == "/api/environments/0") == 1
    async with serve(base_env(sim, ARCANE_MCP_SURFACE=surface), era) as client:
        call = Caller(client, surface)
        sim.clear_requests()
        for action_id, params, check in cases(sim):
            res = await call(action_id, params)
            assert res.is_error and "confirm: true" in text(res), text(res)
            question = text(res).split("The question to ask the user:\n", 1)[1].rsplit("\nNext step:", 1)[0]
            check(question, sim)
        assert changes(sim) == []


# ------------------------------------------------------------------ safe-mode preview


@pytest.mark.parametrize("surface", SURFACES)
async def test_the_safe_mode_preview_shows_the_blast_radius(sim, surface):
    async with serve(base_env(sim, ARCANE_MCP_SURFACE=surface, ARCANE_MCP_SAFE_MODE="true"), "auto") as client:
        call = Caller(client, surface)
        sim.clear_requests()
        for action_id, params, check in cases(sim):
            res = await call(action_id, params, confirm=True)
            assert not res.is_error and res.structured_content["preview"] is True, text(res)
            confirmation = res.structured_content["confirmation"]
            assert confirmation["environment"] == {"id": "0", "name": environment(sim)["name"]}
            assert all(a["count"] is not None for a in confirmation["affected"])
            section = text(res).split("### What it would affect", 1)[1].split("\n", 1)[1]
            check(section.split("\n\nCredentials", 1)[0], sim)
        assert changes(sim) == []


# ------------------------------------------------------------------ a read that fails


@pytest.mark.parametrize("era", ERAS)
async def test_a_failed_read_says_it_could_not_tell(sim, era):
    asked: list = []
    async with serve(base_env(sim), era, elicitation_callback=answering("decline", asked)) as client:
        call = Caller(client, "dynamic")
        sim.set_faults({"error_5xx": {"status": 500, "match": "list-containers"}})
        try:
            res = await call("system.prune", {"containers": {"mode": "stopped"}})
        finally:
            sim.set_faults({})
        assert res.is_error and text(res).startswith("Error: declined")
        line = line_of(asked[-1].message, "stopped containers")
        assert "could not tell" in line and "500" in line and not names_in(line)
        assert environment(sim)["name"] in asked[-1].message  # the other reads still answered
        # the target cannot be read either: every read that needs it says it could not tell, the question is still asked
        sim.set_faults({"error_5xx": {"status": 500, "match": ["list-volumes", "get-project"]}})
        try:
            res = await call("project.destroy", {"projectId": project(sim, "blog")["id"], "removeVolumes": True})
        finally:
            sim.set_faults({})
        assert "could not tell" in line_of(asked[-1].message, "volumes it removes")
        assert "could not tell" in line_of(asked[-1].message, "containers it removes")
        assert len(asked) == 2 and changes(sim) == []


# ------------------------------------------------------------------ the pure parts


def read(**kw) -> BlastRead:
    exprs = {k: Expr.of(v) for k, v in kw.items() if k in ("items", "when", "name", "size", "count", "target_match")}
    rest = {k: v for k, v in kw.items() if k not in exprs}
    return BlastRead(rest.pop("label", "things"), rest.pop("action", "x.list"), **exprs, **rest)


def test_names_are_bounded_escaped_and_counted():
    hostile = ["`tick` *bold* \x1b[31mred\x1b[0m\u202e", "x" * 1_000_000, "line\nbreak", "", ".."] + [f"n{i}" for i in range(10_000)]
    answer = {"items": [{"name": n, "size": 10} for n in hostile]}
    got = blast.affected(read(items="items", name="name", size="size"), answer, target=None, name_fields=("name",))
    assert got.count == len(hostile) and got.size == 10 * len(hostile) and len(got.names) == 5
    line = got.line()
    assert f"and {len(hostile) - 5} more" in line and "\x1b" not in line and "\u202e" not in line and "\n" not in line
    assert len(line) < 1000  # a 1 MB name is cut
    # a nameless item is said to be one; JMESPath's falsy values never stand for a name
    assert "(no name)" in got.names


def test_an_answer_without_the_list_or_the_target_is_could_not_tell():
    r = read(items="items")
    assert blast.affected(r, {"other": 1}, target=None, name_fields=()).count is None
    assert blast.affected(r, None, target=None, name_fields=()).count is None
    assert blast.affected(r, {"items": []}, target=None, name_fields=()).line().endswith(": none")
    matched = read(items="items", target_match="labels.p", name="name")
    answer = {"items": [{"name": "a", "labels": {"p": "blog"}}, {"name": "b", "labels": {"p": "blogger"}}, {"name": "c"}]}
    assert blast.affected(matched, answer, target=None, name_fields=()).count is None
    got = blast.affected(matched, answer, target="blog", name_fields=())
    assert got.count == 1 and got.names == ("`a`",)
    # a list holding the target matches too (the volumes a container mounts)
    mounts = read(items="items", target_match="mounts[].name", name="name")
    got = blast.affected(mounts, {"items": [{"name": "c1", "mounts": [{"name": "v"}, {"name": "w"}]}, {"name": "c2", "mounts": []}]},
                         target="v", name_fields=())
    assert got.count == 1 and got.names == ("`c1`",)


@pytest.mark.parametrize("args,mode", [
    ({}, "all"),  # the query's dangling is false when absent: every unused image (handler.go resolvePruneImageModeInternal)
    ({"dangling": True}, "dangling"),
    ({"mode": "dangling", "dangling": False}, "dangling"),  # the body's mode wins
    ({"body_dangling": False, "dangling": True}, "all"),  # then the body's dangling
    ({"filters": {"dangling": ["true"]}}, "dangling"),  # then filters.dangling
    ({"filters": {"dangling": ["0"]}, "dangling": True}, "all"),
    ({"mode": "olderThan", "until": "24h"}, "older"),
])
def test_image_prune_reads_follow_arcanes_mode_resolution(args, mode):
    reads = build().actions["image.prune"].blast_radius
    applying = [r.label for r in reads if blast.applies(r, {"environmentId": "0", **args})]
    assert len(applying) == 1
    assert {"all": "(mode all)", "dangling": "dangling", "older": "older than"}[mode] in applying[0]


def test_the_declared_actions_have_reads():
    catalog = build()
    for aid in ("system.prune", "image.prune", "volume.prune", "network.prune", "project.destroy", "network.delete",
                "volume.remove", "container.delete", "swarm_node.update"):
        action = catalog.actions[aid]
        assert action.destructive and action.blast_radius, aid
        assert all(catalog.actions[r.action].read_only for r in action.blast_radius), aid
