"""Issue 10: the workflow guides (rules/guides/*.yaml) as text/markdown resources, their
structure checked with markdown-it-py and cmark-gfm, and `interp validate` refusing a
guide that names an action the catalog lacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build.catalog import problems
from interpreter.build.resource_rules import ACTION_REF
from interpreter.front.names import EXECUTE_TOOL, tool_name_individual, tool_name_meta
from tests.escape_oracle import PARSERS, El, html_tree, text_of
from tests.test_resources import GUIDES, memory_session

pytestmark = pytest.mark.anyio
NAMES = [u.rsplit("/", 1)[1] for u in GUIDES]


def _elements(node, tag: str) -> list[El]:
    out = []
    for c in node.children if isinstance(node, El) else ():
        if isinstance(c, El):
            if c.tag == tag:
                out.append(c)
            out += _elements(c, tag)
    return out


def test_every_guide_names_only_catalog_actions(catalog):
    guides = catalog.guides
    assert [g.name for g in guides] == NAMES
    for g in guides:
        named = {aid for _, aid in g.actions()}
        assert named and named <= set(catalog.all_actions), g.name


@pytest.mark.parametrize("surface", ["dynamic", "meta", "individual"])
async def test_guides_are_markdown_resources_ending_with_the_surface_note(sim, catalog, surface):
    guides = {g.uri: g for g in catalog.guides}
    async with memory_session(sim.url, sim.api_key, surface=surface) as client:
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        for uri in GUIDES:
            assert listed[uri].mime_type == "text/markdown" and listed[uri].title == guides[uri].title
            (content,) = (await client.read_resource(uri)).contents
            assert content.mime_type == "text/markdown" and content.uri == uri
            guide, text = guides[uri], content.text
            for parser, render in PARSERS.items():
                tree = html_tree(render(text))
                blocks = [c.tag for c in tree.children if isinstance(c, El)]
                # a heading, the intro, a numbered section per step, the ending (two paragraphs)
                assert blocks == ["h1", "p"] + ["h2", "p"] * len(guide.steps) + ["h2", "p", "p"], (parser, uri)
                assert text_of(_elements(tree, "h1")[0]) == guide.title
                steps = [text_of(h) for h in _elements(tree, "h2")][:-1]
                assert steps == [f"{i}. {t}" for i, (t, _) in enumerate(guide.steps, 1)]
                # actions are named by canonical ID, in code spans
                codes = {text_of(c) for c in _elements(tree, "code")}
                assert {aid for _, aid in guide.actions()} <= codes
                assert not ACTION_REF.search(text)
                ending = [c for c in tree.children if isinstance(c, El)][-2]
                tool = {"dynamic": EXECUTE_TOOL, "meta": tool_name_meta("project"), "individual": tool_name_individual("project.up")}[surface]
                assert tool in text_of(ending), (surface, text_of(ending))


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    catalog_dir, rules_dir = tmp_path / "catalog", tmp_path / "rules"
    shutil.copytree(CATALOG_DIR, catalog_dir)
    shutil.copytree(RULES_DIR, rules_dir)
    return catalog_dir, rules_dir


GUIDE = """name: {name}
title: A guide
description: A guide for the test.
intro: Start with {{environment.list}}.
steps:
  - title: Do it
    text: Then call {{{action}}} with the ID.
"""


def test_a_guide_naming_an_unknown_action_fails_validate(tmp_path):
    catalog_dir, rules_dir = _copy(tmp_path)
    (rules_dir / "guides" / "broken.yaml").write_text(GUIDE.format(name="broken", action="project.upp"), encoding="utf-8")
    found = problems(rules_dir, catalog_dir)
    assert [(Path(p.file).name, p.line, p.pointer, p.code) for p in found] == [("broken.yaml", 7, "/steps/0/text", "unknown_action")]
    assert "project.up" in found[0].message  # the nearest action is offered


def test_a_guide_file_must_carry_its_name_and_follow_its_schema(tmp_path):
    catalog_dir, rules_dir = _copy(tmp_path)
    (rules_dir / "guides" / "one.yaml").write_text(GUIDE.format(name="other", action="project.up"), encoding="utf-8")
    (rules_dir / "guides" / "two.yaml").write_text(GUIDE.format(name="two", action="project.up") + "extra: 1\n", encoding="utf-8")
    codes = sorted((Path(p.file).name, p.code) for p in problems(rules_dir, catalog_dir))
    assert codes == [("one.yaml", "guide_file_name"), ("two.yaml", "schema.additionalProperties")]
