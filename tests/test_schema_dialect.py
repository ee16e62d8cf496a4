"""ARCANE_MCP_SCHEMA_DIALECT=portable: every listed schema without type arrays, $ref/$defs or
keys a single-type dialect refuses; arguments valid before stay valid; the server still
validates against the original schema; `_meta` and annotations unchanged. `standard` is
today's output (tests/test_surfaces.py's golden files)."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator, validators

from interpreter.config import Settings, load_settings
from interpreter.errors import ConfigError
from interpreter.front.dialect import ALLOWED, portable, portable_tool
from interpreter.front.surfaces import make_surface
from tests.helpers import make_dispatcher, ok_json

SURFACES = ("dynamic", "meta", "individual")
pytestmark = pytest.mark.anyio


async def _listed(catalog, surface: str, dialect: str, handler=None) -> tuple[list[dict], object]:
    """The tools/list answer through the MCP server in memory, with output schemas on (every
    page: the individual surface's list is paged)."""
    from mcp import Client

    from interpreter.front.serve import Runtime, build_server

    dispatcher, rec = make_dispatcher(catalog, handler or (lambda r: ok_json({})), surface=surface,
                                      output_schemas=True, schema_dialect=dialect)
    server = build_server(Runtime(dispatcher.settings, catalog, dispatcher, make_surface(surface, catalog, dispatcher)))
    tools, cursor = [], None
    async with Client(server) as client:
        while True:
            listed = await client.list_tools(cursor=cursor)
            tools += listed.tools
            cursor = listed.next_cursor
            if cursor is None:
                break
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools], rec


def _nodes(schema: dict):
    """Every schema node of a portable schema, iteratively."""
    stack = [schema]
    while stack:
        node = stack.pop()
        yield node
        stack.extend((node.get("properties") or {}).values())
        stack.extend(node.get("anyOf") or [])
        if "items" in node:
            stack.append(node["items"])


# the kept keys that constrain a value: a node with none of them (`{}`, only a description)
# accepts anything, which a single-type dialect cannot say (the Inspector's "untyped-schema")
CONSTRAINING = ALLOWED - {"description", "nullable", "default", "propertyOrdering"}


def _check_portable(schema: dict) -> int:
    n = 0
    for node in _nodes(schema):
        n += 1
        assert isinstance(node, dict)
        assert set(node) <= ALLOWED, set(node) - ALLOWED
        assert set(node) & CONSTRAINING, node
        assert not isinstance(node.get("type"), list) and node.get("type") != "null"
        assert None not in (node.get("enum") or [])
        if "format" in node:
            assert (node.get("type"), node["format"]) in {("string", "date-time"), ("string", "enum"), ("integer", "int32"),
                                                           ("integer", "int64"), ("number", "float"), ("number", "double")}
        if "properties" in node:
            assert all(isinstance(v, dict) for v in node["properties"].values())
    return n


@pytest.mark.parametrize("surface", SURFACES)
async def test_every_listed_schema_is_portable(catalog, surface):
    portable_tools, _ = await _listed(catalog, surface, "portable")
    standard_tools, _ = await _listed(catalog, surface, "standard")
    assert [t["name"] for t in portable_tools] == [t["name"] for t in standard_tools]
    outputs = 0
    for p, s in zip(portable_tools, standard_tools, strict=True):
        assert _check_portable(p["inputSchema"]) >= 1 and p["inputSchema"]["type"] == "object"
        if "outputSchema" in s:
            outputs += 1
            _check_portable(p["outputSchema"])
        # everything but the schemas is what standard lists
        strip = ("inputSchema", "outputSchema")
        assert {k: v for k, v in p.items() if k not in strip} == {k: v for k, v in s.items() if k not in strip}
        assert set(p) == set(s)
    if surface == "individual":
        assert outputs > 100  # output schemas were on, and rewritten too


def test_standard_is_the_default():
    assert Settings().schema_dialect == "standard"
    assert load_settings(env={}).schema_dialect == "standard"
    assert load_settings(env={"ARCANE_MCP_SCHEMA_DIALECT": "Portable"}).schema_dialect == "portable"
    assert load_settings(env={}, flags={"schema_dialect": "portable"}).schema_dialect == "portable"


@pytest.mark.parametrize("value", ["gemini", "", "portable,standard", "x" * 500])
def test_a_bad_dialect_is_one_line_naming_the_setting(value):
    env = {"ARCANE_MCP_SCHEMA_DIALECT": value} if value else {}
    if not value:  # an empty variable is unset: the default
        assert load_settings(env=env).schema_dialect == "standard"
        return
    with pytest.raises(ConfigError) as err:
        load_settings(env=env)
    assert err.value.setting == "ARCANE_MCP_SCHEMA_DIALECT"
    assert "\n" not in str(err.value) and len(str(err.value)) < 200
    with pytest.raises(ConfigError) as err:
        load_settings(env={}, flags={"schema_dialect": value})
    assert err.value.setting == "--schema-dialect"


def _nullable_validator(schema: dict):
    """A validator reading `nullable: true` as OpenAPI 3.0 does (null is also accepted)."""
    base = Draft202012Validator
    type_check = base.VALIDATORS["type"]
    enum_check = base.VALIDATORS["enum"]

    def typed(validator, types, instance, schema):
        if instance is None and schema.get("nullable") is True:
            return
        yield from type_check(validator, types, instance, schema)

    def enumed(validator, enums, instance, schema):
        if instance is None and schema.get("nullable") is True:
            return
        yield from enum_check(validator, enums, instance, schema)

    cls = validators.extend(base, {"type": typed, "enum": enumed})
    return cls(schema)


def _sample(schema: dict, defs: dict, depth: int = 0, null: bool = False):
    """A value for a schema node of the standard dialect: null where it allows it (when
    `null`), else its default, first enum value, or a value of its first type."""
    if depth > 6:
        return None
    if "$ref" in schema:
        return _sample(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, depth + 1, null)
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if null and "null" in types:
        return None
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return next((v for v in schema["enum"] if v is not None), None)
    if "const" in schema:
        return schema["const"]
    if "anyOf" in schema:
        return _sample(schema["anyOf"][0], defs, depth + 1, null)
    # a free node (no type: any value) is listed as an object: an object is its sample
    kind = next((t for t in types if t != "null"), None) or "object"
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _sample(v, defs, depth + 1, null) for k, v in props.items() if isinstance(v, dict)}
    if kind == "array":
        items = schema.get("items")
        return [_sample(items, defs, depth + 1, null)] * max(1, schema.get("minItems", 1)) if isinstance(items, dict) else []
    return {"string": "a" * max(1, schema.get("minLength", 1)), "integer": max(1, schema.get("minimum", 1)),
            "number": 1.5, "boolean": True}.get(kind)


@pytest.mark.parametrize("null", [False, True])
def test_arguments_valid_under_the_original_stay_valid(catalog, null):
    dispatcher, _ = make_dispatcher(catalog, lambda r: ok_json({}))
    checked = 0
    for tool in make_surface("individual", catalog, dispatcher).tools():
        original = tool.input_schema
        args = _sample(original, original.get("$defs", {}), null=null)
        if not Draft202012Validator(original).is_valid(args):
            continue  # a pattern or format the sampler does not meet: not a sample of this test
        checked += 1
        errors = list(_nullable_validator(portable(original)).iter_errors(args))
        assert not errors, (tool.name, args, errors[0].message)
    assert checked >= 300


async def test_a_null_for_a_nullable_member_is_still_accepted(catalog):
    """The listed schema says `nullable`; the server validates against the original, whose
    type list allows null: the call reaches Arcane. A wrong type is still refused there."""
    from mcp import Client

    from interpreter.front.names import tool_name_individual
    from interpreter.front.serve import Runtime, build_server

    name = tool_name_individual("container.commit")
    dispatcher, rec = make_dispatcher(catalog, lambda r: ok_json({"id": "sha256:1"}), surface="individual",
                                      schema_dialect="portable")
    server = build_server(Runtime(dispatcher.settings, catalog, dispatcher, make_surface("individual", catalog, dispatcher)))
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        member = listed[name].input_schema["properties"]["changes"]
        assert member["type"] == "array" and member["nullable"] is True
        required = listed[name].input_schema.get("required", [])
        base = {k: "abc" for k in required if k != "changes"}
        await client.call_tool(name, {**base, "changes": None})
        assert rec.requests, "a null for a nullable member was refused"
        rec.requests.clear()
        refused = await client.call_tool(name, {**base, "changes": 5})
        assert refused.is_error and not rec.requests


def test_type_lists_enums_const_and_refs():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "$comment": "c",
        "type": "object", "additionalProperties": False, "title": "T",
        "properties": {
            "a": {"type": ["string", "null"], "maxLength": 5, "examples": ["x"]},
            "b": {"type": ["integer", "string"]},
            "c": {"enum": ["x", None]},
            "d": {"const": "only"},
            "e": {"$ref": "#/$defs/E", "description": "an E"},
            "f": {"anyOf": [{"$ref": "#/$defs/E"}, {"type": "null"}]},
            "g": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "h": {"type": "object", "additionalProperties": {"type": "string"}},
            "i": {"type": "string", "format": "uuid"},
            "j": {"type": ["string", "null"], "format": "date-time"},
            "k": {"required": ["x"]},
            "l": {"items": {"type": "integer", "format": "int64"}},
        },
        "$defs": {"E": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}},
    }
    out = portable(schema)
    assert set(out) == {"type", "properties"}
    p = out["properties"]
    assert p["a"] == {"type": "string", "nullable": True, "maxLength": 5}
    assert p["b"] == {"type": "integer"}
    assert p["c"] == {"enum": ["x"], "nullable": True}
    assert p["d"] == {"enum": ["only"]}
    assert p["e"] == {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"], "description": "an E"}
    assert p["f"]["nullable"] is True and p["f"]["properties"] == {"x": {"type": "boolean"}}
    assert p["g"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert p["h"] == {"type": "object"}
    assert p["i"] == {"type": "string"}
    assert p["j"] == {"type": "string", "nullable": True, "format": "date-time"}
    assert p["k"] == {"type": "object", "required": ["x"]}
    assert p["l"] == {"type": "array", "items": {"type": "integer", "format": "int64"}}
    assert "$defs" in schema and schema["properties"]["a"]["type"] == ["string", "null"]  # the input is not changed


def test_a_self_referencing_ref_is_cut_after_one_level():
    schema = {"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
              "$defs": {"Node": {"type": "object", "properties": {
                  "child": {"$ref": "#/$defs/Node"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                  "loop": {"$ref": "#/$defs/Loop"}}},
                  "Loop": {"$ref": "#/$defs/Loop"},
                  "Missing": {"$ref": "#/$defs/Nope"}}}
    root = portable(schema)["properties"]["root"]
    assert root["properties"]["child"] == {"type": "object"}
    assert root["properties"]["kids"]["items"] == {"type": "object"}
    assert root["properties"]["loop"] == {"type": "object"}
    assert portable({"$ref": "#/$defs/Loop", "$defs": {"Loop": {"$ref": "#/$defs/Loop"}}}) == {"type": "object"}
    assert portable({"$ref": "https://elsewhere.example/x"}) == {"type": "object"}
    _check_portable(portable(schema))


def test_a_very_deep_schema_is_rewritten_without_recursion():
    depth = 10_000
    leaf = {"type": ["string", "null"]}
    node = leaf
    for i in range(depth):
        node = {"type": "object", "properties": {"n": node}} if i % 2 else {"type": ["array", "null"], "items": node}
    out = portable(node)
    seen = 0
    cur = out
    while True:
        seen += 1
        assert not isinstance(cur.get("type"), list)
        if "items" in cur:
            cur = cur["items"]
        elif "properties" in cur:
            cur = cur["properties"]["n"]
        else:
            break
    assert seen == depth + 1 and cur == {"type": "string", "nullable": True}
    # a deep anyOf chain of one branch and null: unwrapping is bounded too
    chain: dict = {"type": "string"}
    for _ in range(depth):
        chain = {"anyOf": [chain, {"type": "null"}]}
    _check_portable(portable(chain))


def test_portable_tool_keeps_meta_and_annotations():
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": {"x": {"type": ["string", "null"]}}},
            "annotations": {"readOnlyHint": True}, "_meta": {"ui": {"view": "x"}}, "execution": {"taskSupport": "optional"}}
    out = portable_tool(tool)
    assert out["_meta"] is tool["_meta"] and out["annotations"] is tool["annotations"] and out["execution"] is tool["execution"]
    assert out["inputSchema"]["properties"]["x"] == {"type": "string", "nullable": True}
    assert tool["inputSchema"]["properties"]["x"]["type"] == ["string", "null"]


def test_free_nodes_and_untyped_branches_get_a_type():
    """A node that constrains nothing (any value) is listed with its default's type or as an
    object; an anyOf branch naming no type takes its node's type and nullable."""
    schema = {"type": "object", "properties": {
        "empty": {}, "described": {"description": "a spec"}, "yes": True, "no": False,
        "count": {"default": 3}, "name": {"default": "x"}, "flag": {"default": False}, "ratio": {"default": 0.5},
        "only_null": {"type": "null"},
        "ip": {"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
        "ip_or_null": {"type": ["string", "null"], "anyOf": [{"format": "ipv4"}, {"maxLength": 3}, {"type": "integer"}]},
        "free_branches": {"anyOf": [{}, {"description": "d"}]},
        "items_free": {"type": "array", "items": {}},
    }}
    p = portable(schema)["properties"]
    assert p["empty"] == {"type": "object"} and p["yes"] == {"type": "object"} and p["no"] == {"type": "object"}
    assert p["described"] == {"type": "object", "description": "a spec"}
    assert p["count"]["type"] == "integer" and p["name"]["type"] == "string"
    assert p["flag"]["type"] == "boolean" and p["ratio"]["type"] == "number"
    assert p["only_null"] == {"type": "object", "nullable": True}
    assert p["ip"] == {"type": "string", "anyOf": [{"type": "string"}, {"type": "string"}]}
    assert p["ip_or_null"]["anyOf"] == [{"type": "string", "nullable": True},
                                        {"type": "string", "nullable": True, "maxLength": 3}, {"type": "integer"}]
    assert p["free_branches"]["anyOf"] == [{"type": "object"}, {"type": "object", "description": "d"}]
    assert p["items_free"] == {"type": "array", "items": {"type": "object"}}
    assert portable({}) == {"type": "object"}
    _check_portable(portable(schema))
    # a null sample of a nullable parent still fits the branches it gave its nullable
    assert _nullable_validator(p["ip_or_null"]).is_valid(None)


def test_a_deep_chain_of_untyped_branches_is_typed_without_recursion():
    depth = 10_000
    node: dict = {"description": "leaf"}
    for _ in range(depth):
        node = {"anyOf": [node, {"format": "ipv4"}]}
    out = portable({"type": "string", "anyOf": [node, {}]})
    _check_portable(out)
    cur, seen = out, 0
    while "anyOf" in cur:
        assert cur["type"] == "string"
        cur, seen = cur["anyOf"][0], seen + 1
    assert seen == depth + 1 and cur == {"type": "string", "description": "leaf"}
