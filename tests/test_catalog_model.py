"""Compile once: the catalog and every rule it carries are frozen, typed models built when the
rules load, with every embedded mini-language compiled; filters make a new catalog from a
declared field list."""

from __future__ import annotations

import dataclasses
import json
import re
from types import MappingProxyType

import pytest

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build.artefact import LazyPattern
from interpreter.build.catalog import CARRIED_FIELDS, FILTERED_FIELDS, BuildOptions, Catalog, build
from interpreter.build.compile import Reader, compile_actions, compile_extra_routes, compile_overlay, compile_server
from interpreter.build.load import load_file
from interpreter.build.model import ActionOverlay, Conventions, Expr, FindRules, Inventory, PointerPattern, Rendering, ServerText, Template, UriTemplate
from interpreter.call import kinds
from interpreter.call.handlers import HANDLERS, handlers
from interpreter.call.response import SHAPERS
from interpreter.text.hints import Hints
from interpreter.text.redact import Rules

# JSON Schema fragments served on the wire as they are (not rules): an action's input
# schema and an extra route parameter's schema values (an `enum` list)
WIRE_SCHEMAS = ("input_schema", "schema")


def _raw_containers(value, path: str, seen: set, found: list) -> None:
    """Every dict, list or set reachable from a model, outside the wire schemas."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, (dict, list, set)):
        found.append(path)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name == "document" or f.name in WIRE_SCHEMAS:
                continue
            _raw_containers(getattr(value, f.name), f"{path}.{f.name}", seen, found)
    elif isinstance(value, MappingProxyType):
        for k, v in value.items():
            _raw_containers(v, f"{path}[{k}]", seen, found)
    elif isinstance(value, (tuple, frozenset)):
        for i, v in enumerate(value):
            _raw_containers(v, f"{path}[{i}]", seen, found)


def test_the_catalog_holds_no_raw_rule_data(catalog):
    found: list[str] = []
    _raw_containers(catalog, "catalog", set(), found)
    assert found == []


def test_the_catalog_and_its_models_are_frozen(catalog):
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.rendering = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.rendering.max_rows = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        catalog.actions["x.y"] = catalog.actions["container.list"]  # type: ignore[index]
    with pytest.raises(TypeError):
        catalog.conventions.domains["x"] = None  # type: ignore[index]
    assert isinstance(catalog.overlays["container"].actions["list"], ActionOverlay)


def test_every_rule_file_is_a_typed_model(catalog):
    assert isinstance(catalog.rendering, Rendering) and isinstance(catalog.find, FindRules)
    assert isinstance(catalog.server, ServerText) and isinstance(catalog.hints, Hints)
    assert isinstance(catalog.redaction, Rules) and isinstance(catalog.conventions, Conventions)
    assert isinstance(catalog.inventory, Inventory)


def _pattern(p) -> bool:
    """A compiled regular expression: re's own, or the artefact's, compiled on first use."""
    return isinstance(p, re.Pattern) or (isinstance(p, LazyPattern) and isinstance(p.compiled(), re.Pattern))


def test_every_mini_language_is_compiled_at_load(catalog):
    exprs = [c.expr for a in catalog.all_actions.values() for c in a.columns if c.expr is not None]
    assert exprs and all(isinstance(e, Expr) and e.compiled is not None for e in exprs)
    assert all(isinstance(a.empty_hint, Template) for a in catalog.all_actions.values() if a.empty_hint is not None)
    assert catalog.hints.messages and all(_pattern(e.regex) for e in catalog.hints.messages)
    assert all(isinstance(e.hint, Template) for e in (*catalog.hints.messages, *catalog.hints.http.values()))
    assert all(isinstance(p, PointerPattern) and _pattern(p.regex)
               for pos in catalog.redaction.positions for p in pos.patterns)
    assert all(_pattern(t.regex) for t in catalog.redaction.text)
    assert all(_pattern(rule.id_pattern) for rule in catalog.arguments.values())
    assert all(isinstance(r.path, UriTemplate) for r in catalog.inventory.extra_routes)
    assert all(isinstance(e, Expr) for s in catalog.conventions.error_shapes for e in s.message)
    assert all(_pattern(p.match) and isinstance(p.message, Template) for p in catalog.conventions.streams.lines)
    assert isinstance(catalog.server.meta_tool.intro, Template) and isinstance(catalog.server.find_answer.line, Template)


def test_a_compiled_value_knows_where_it_was_written(catalog):
    action = catalog.actions["container.list"]
    origin = action.origins["columns"]
    assert origin.file.endswith("rules/overlays/container.yaml") and origin.line > 0
    assert catalog.rendering.origins["max_rows"].file.endswith("rules/rendering.yaml")
    assert catalog.conventions.pagination.origins["total_items"].file.endswith("catalog/conventions.yaml")


# ---------------------------------------------------------------- filters


def test_the_filter_field_lists_cover_the_catalog_exactly():
    names = [f.name for f in dataclasses.fields(Catalog)]
    assert sorted(FILTERED_FIELDS + CARRIED_FIELDS) == sorted(names)
    assert not set(FILTERED_FIELDS) & set(CARRIED_FIELDS)


def test_a_filter_makes_a_new_catalog_and_carries_every_other_field(catalog):
    read_only = build(BuildOptions(read_only=True, exclude=("volume",)))
    assert read_only is not catalog
    assert all(a.read_only for a in read_only.actions.values()) and "volume" not in read_only.domains
    assert read_only.withdrawn and set(read_only.withdrawn) | set(read_only.actions) == set(read_only.all_actions)
    for name in CARRIED_FIELDS:
        assert getattr(read_only, name) == getattr(catalog, name), name


# ---------------------------------------------------------------- kinds and placeholders


def test_the_served_kinds_are_the_shapers():
    # a served response kind is a shaper of the rest handler, or carried out by its own handler kind
    handled = kinds.handled_response_kinds()
    assert {k for k, served in kinds.response_kinds().items() if served} == set(SHAPERS) | handled
    assert set(HANDLERS) >= handled and not handled & set(SHAPERS)
    assert set(SHAPERS) == {k.name for k in kinds.KINDS if k.shaper}


def test_the_schemas_leave_the_kinds_to_the_registry():
    """No schema lists the kinds by hand: the words are the registry's, checked by compile."""
    actions_schema = json.loads((CATALOG_DIR / "schemas" / "actions.schema.json").read_text(encoding="utf-8"))
    routes_schema = json.loads((CATALOG_DIR / "schemas" / "extra-routes.schema.json").read_text(encoding="utf-8"))
    assert _property(actions_schema, "response_kind") == {"type": "string", "minLength": 1}
    assert _property(routes_schema, "handler") == {"type": "string", "minLength": 1}


def _property(schema, key: str) -> dict:
    """The first property named `key` anywhere in a schema, without its prose."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get(key), dict) and "description" in node[key]:
                return {k: v for k, v in node[key].items() if k not in ("description", "examples", "title")}
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    raise AssertionError(f"no property {key}")


#: every kind is served today; a kind a later version of the catalog names, not served yet
#: (no handler), is put in the registry for the tests that need one
FUTURE_KIND = "future_kind"


@pytest.fixture
def unserved(monkeypatch) -> str:
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, kinds.Kind(FUTURE_KIND, route=True)))
    return FUTURE_KIND


def test_the_served_handler_kinds_are_the_handlers(catalog):
    """The registry's kinds with a handler are handlers.HANDLERS, and an extra route is
    pending exactly when its kind is not served."""
    assert set(HANDLERS) == {k.name for k in kinds.KINDS if k.handler}
    served = kinds.route_kinds()
    for route in catalog.inventory.extra_routes:
        assert route.pending is not served[route.handler], route.action_id
        assert catalog.all_actions[route.action_id].pending is route.pending


def test_an_unknown_kind_is_a_problem_at_its_place_with_the_closest_known_ones():
    r = Reader.of({"routes": [{"id": "x.y", "method": "POST", "path": "/things", "handler": "webhook_trigger", "security": "public",
                               "options": {"accepted_status": 202}, "params": {}},
                              {"id": "x.z", "method": "POST", "path": "/things", "handler": "webhok_trigger", "params": {}}]})
    compile_extra_routes(r)
    assert [(parts, code) for parts, _, code in r.found] == [(("routes", 1, "handler"), "unknown_kind")]
    assert "webhook_trigger" in r.found[0][1].partition("(known")[0].partition("webhok_trigger")[2]  # the did-you-mean, before every kind
    r = Reader.of({"operations": {"getThing": {"id": "thing.get", "response": "jsn"}, "listThings": {"id": "thing.list", "response": "ndjson"}}})
    compile_actions(r)
    assert [(parts, code) for parts, _, code in r.found] == [(("operations", "getThing", "response"), "unknown_kind")]
    assert "json" in r.found[0][1].partition("(known")[0].partition("jsn")[2]


def test_a_kind_added_to_the_registry_is_known_to_compile_and_served_by_its_handler(monkeypatch):
    """A new kind is one entry: compile accepts routes of it, and handlers.py carries it out."""
    r = Reader.of({"routes": [{"id": "x.y", "method": "GET", "path": "/things", "handler": "new_kind", "params": {}}]})
    compile_extra_routes(r)
    assert [code for _, _, code in r.found] == ["unknown_kind"]
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, kinds.Kind("new_kind", handler="transfer:download", route=True, public=True)))
    r = Reader.of({"routes": [{"id": "x.y", "method": "GET", "path": "/things", "handler": "new_kind", "params": {}}]})
    routes = compile_extra_routes(r)
    # known and served: the only problem is the registry's public flag, which the route does not declare
    assert [(parts, code) for parts, _, code in r.found] == [(("routes", 0, "security"), "public_kind")]
    assert routes[0].pending is False
    assert handlers()["new_kind"] is HANDLERS["binary_download"]


def test_a_response_kind_added_to_the_registry_is_known_to_compile(monkeypatch):
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, kinds.Kind("new_response", response=True)))
    r = Reader.of({"operations": {"getThing": {"id": "thing.get", "response": "new_response"}}})
    _, _, ops, _ = compile_actions(r)
    assert r.found == [] and ops["getThing"].response == "new_response"
    assert kinds.response_kinds()["new_response"] is False  # no shaper, no handler: known, not served


def test_no_module_but_the_registry_lists_kinds():
    """The registry is the only place that names the kinds: no other module of the engine
    defines a set, dict, list or tuple holding two or more kind words."""
    import ast

    from interpreter import paths

    words = {k.name for k in kinds.KINDS} - {"json", "empty", "rest", "exec"}  # too common to tell a kind table from other data
    root = paths.PACKAGE_DIR
    found = []
    for path in root.rglob("*.py"):
        if path.name == "kinds.py" and path.parent.name == "call":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exports = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"]}
        for node in ast.walk(tree):
            if id(node) in exports:
                continue  # __all__ names functions, some of them after their kind
            if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
                items = node.elts
            elif isinstance(node, ast.Dict):
                items = node.keys
            else:
                continue
            named = {e.value for e in items if isinstance(e, ast.Constant) and e.value in words}
            if len(named) >= 2:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {sorted(named)}")
    assert found == []


def test_an_unserved_handler_kind_is_a_problem_naming_the_served_ones(unserved):
    r = Reader.of({"routes": [{"id": "container.exec2", "method": "GET", "path": "/containers/{id}/exec", "handler": unserved,
                               "params": {"containerId": {"in": "path", "wire": "id", "required": True, "type": "string"}}}]})
    compile_extra_routes(r)
    assert [(parts, code) for parts, _, code in r.found] == [(("routes", 0, "handler"), "unknown_kind")]
    assert "websocket_capture" in r.found[0][1]


def test_a_served_kind_marked_pending_is_a_mismatch():
    r = Reader.of({"captures": {"c": {"frames": "samples", "bounds": {"seconds": {"argument": "maxSeconds", "default": 1, "max": 2}}}},
                   "routes": [{"id": "x.y", "method": "GET", "path": "/ws/x", "handler": "websocket_capture", "status": "pending",
                               "capture": "c", "params": {}}]})
    compile_extra_routes(r)
    assert [(parts, code) for parts, _, code in r.found] == [(("routes", 0, "status"), "pending_mismatch")]


def _capture_problems(capture: dict, handler: str = "websocket_capture", params: dict | None = None, name="c") -> list:
    r = Reader.of({"captures": {"c": capture}, "routes": [{"id": "x.y", "method": "GET", "path": "/ws/x", "handler": handler,
                                                           "capture": name, "params": params or {}}]})
    compile_extra_routes(r)
    return sorted((parts, code) for parts, _, code in r.found)


def test_capture_profiles_are_checked():
    seconds = {"seconds": {"argument": "maxSeconds", "default": 5, "max": 10}}
    assert _capture_problems({"frames": "lines", "bounds": seconds}) == []
    assert _capture_problems({"frames": "lines", "bounds": seconds}, name="other") == [(("routes", 0, "capture"), "bad_capture")]
    assert _capture_problems({"frames": "terminal", "bounds": seconds}) == [(("routes", 0, "capture"), "bad_capture")]
    assert _capture_problems({"frames": "lines", "bounds": seconds, "send": {"follow": "false"}}) == [(("routes", 0, "capture"), "bad_capture")]
    assert _capture_problems({"frames": "lines", "bounds": seconds}, params={"maxSeconds": {"in": "query", "type": "integer"}}) == [
        (("routes", 0, "params", "maxSeconds"), "bad_capture")]
    # the arguments a lines profile reads (follow, the time asked for) are parameters of the route
    follows = {"frames": "lines", "bounds": seconds, "follow": "follow", "json": {"message": "message", "asked_by": "timestamps"}}
    flags = {"follow": {"in": "query", "type": "boolean"}, "timestamps": {"in": "query", "type": "boolean"}}
    assert _capture_problems(follows, params=flags) == []
    assert _capture_problems(follows, params={"follow": flags["follow"]}) == [(("routes", 0, "capture"), "bad_capture")]
    assert _capture_problems(follows) == [(("routes", 0, "capture"), "bad_capture")] * 2
    assert _capture_problems({"frames": "lines", "bounds": {"seconds": {"argument": "s", "default": 11, "max": 10}}}) == [
        (("captures", "c", "bounds", "seconds", "default"), "bad_bound")]
    assert _capture_problems({"frames": "samples", "bounds": seconds, "summary": [{"label": "x", "value": "a[0", "over": "last", "unit": "number"}]}) == [
        (("captures", "c", "summary", 0, "value"), "bad_jmespath")]
    terminal = {"frames": "terminal", "bounds": seconds, "command": "command", "line": "{command}; echo {nonce}:$?", "begin": "{nonce}:b",
                "end": "{nonce}:"}
    assert _capture_problems(terminal, "exec", {"command": {"in": "handler", "type": "string"}}) == []
    assert _capture_problems(terminal, "exec", {"command": {"in": "query", "type": "string"}}) == [(("routes", 0, "capture"), "bad_capture")]


def test_a_capture_bound_is_an_argument_with_its_ceiling(catalog):
    props = catalog.actions["container.logs"].input_schema["properties"]
    assert props["maxLines"] == {"type": "integer", "minimum": 1, "maximum": 5000, "default": 200, "description": "Stop after this many log lines"}
    assert {"maxBytes", "maxSeconds", "follow", "format"} <= set(props)
    assert "timeoutSeconds" in catalog.actions["container.exec"].input_schema["properties"]


def test_a_path_variable_without_its_parameter_is_a_bad_uri_template(unserved):
    r = Reader.of({"routes": [{"id": "x.y", "method": "GET", "path": "/things/{thingId}", "handler": unserved, "status": "pending"}]})
    compile_extra_routes(r)
    assert [code for _, _, code in r.found] == ["bad_uri_template"]


def test_an_unknown_placeholder_is_a_problem_naming_the_known_ones():
    server = load_file(RULES_DIR / "server.yaml")[0].data
    server["meta_tool"]["intro"] = "Tools for {title} and {colour}"
    r = Reader.of(server)
    compile_server(r)
    assert [(parts, code) for parts, _, code in r.found] == [(("meta_tool", "intro"), "unknown_placeholder")]
    assert "{colour}" in r.found[0][1] and "title_lower" in r.found[0][1]


def test_an_http_refusal_text_names_only_what_it_is_given():
    server = load_file(RULES_DIR / "server.yaml")[0].data
    server["http"]["refusals"]["rate_limited"] = "slow down, {header}"  # rate_limited is given {seconds}
    r = Reader.of(server)
    compile_server(r)
    assert [(parts, code) for parts, _, code in r.found] == [(("http", "refusals", "rate_limited"), "unknown_placeholder")]
    assert "seconds" in r.found[0][1]


def test_a_bad_expression_or_regex_in_an_overlay_is_found_at_its_pointer():
    r = Reader.of({"domain": "thing", "actions": {"list": {"columns": ["id", {"label": "x", "expr": "a[0"}]}},
                   "arguments": {"thingId": {"id_pattern": "([", "list": "thing.list", "id_field": "id", "name_fields": ["name"],
                                             "resolve": True}}})
    overlay = compile_overlay(r)
    assert sorted((parts, code) for parts, _, code in r.found) == [
        (("actions", "list", "columns", 1, "expr"), "bad_jmespath"), (("arguments", "thingId", "id_pattern"), "bad_regex")]
    assert overlay.arguments["thingId"].id_pattern is None  # never served: its problem refuses the build


# ---------------------------------------------------------------- keyword construction


def test_compile_builds_every_model_by_keyword():
    """A model of compile.py is built with keywords only: a field reordered in model.py cannot
    swap two values silently (a positional call would)."""
    import ast
    import inspect

    import interpreter.build.compile as compile_module

    tree = ast.parse(inspect.getsource(compile_module))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and dataclasses.is_dataclass(getattr(compile_module, node.func.id, None))]
    assert len(calls) > 40  # the check sees the models (a rename of the module's imports would hide them)
    positional = [(node.func.id, node.lineno) for node in calls if node.args]
    assert positional == []
