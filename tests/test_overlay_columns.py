"""Overlay columns name what Arcane really sends: every column of a list action (a field name
or a JMESPath expression) is checked against the item schema of the action's response in the
OpenAPI document, and every action whose response is a list of objects has columns."""

from __future__ import annotations

import jmespath
import pytest

HTTP_OK = ("200", "201", "202")


def _resolve(doc: dict, schema):
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 50:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        seen += 1
    return schema if isinstance(schema, dict) else {}


def _is_array(schema: dict) -> bool:
    t = schema.get("type")
    return t == "array" or (isinstance(t, list) and "array" in t)


def item_schema(doc: dict, action) -> dict | None:
    """The schema of one item when the action's JSON answer is a list (`data` an array, or the
    body itself an array, or the array member of `data` the overlay names as its
    `list_member`), else None."""
    if not action.operation_id:
        return None
    op = doc["paths"][action.path][action.method.lower()]
    for status in HTTP_OK:
        content = (op.get("responses", {}).get(status) or {}).get("content") or {}
        for media, body in content.items():
            if "json" not in media:
                continue
            schema = _resolve(doc, body.get("schema"))
            if _is_array(schema):
                return _resolve(doc, schema.get("items"))
            data = _resolve(doc, (schema.get("properties") or {}).get("data"))
            if data and _is_array(data):
                return _resolve(doc, data.get("items"))
            holder = data or schema  # the member is in `data`, or in the body when Arcane sends no envelope
            member = _resolve(doc, (holder.get("properties") or {}).get(action.list_member)) if action.list_member else {}
            if member and _is_array(member):
                return _resolve(doc, member.get("items"))
            return None
    return None


def _walk(doc: dict, node: dict, schema: dict, where: str, problems: list[str]) -> dict:
    """Check every field an expression reads against `schema`; return the schema of its result."""
    kind = node.get("type")
    kids = node.get("children", [])
    if kind == "field":
        props = schema.get("properties")
        if props is None:  # an untyped object: nothing to check against
            return {}
        if node["value"] not in props:
            problems.append(f"{where}: no member {node['value']!r} (has {sorted(k for k in props if k != '$schema')})")
            return {}
        return _resolve(doc, props[node["value"]])
    if kind == "subexpression":
        left = _walk(doc, kids[0], schema, where, problems)
        return _walk(doc, kids[1], left, where, problems)
    if kind in ("projection", "flatten"):
        left = _walk(doc, kids[0], schema, where, problems)
        items = _resolve(doc, left.get("items")) if _is_array(left) else {}
        return _walk(doc, kids[1], items, where, problems) if len(kids) > 1 else items
    if kind == "index_expression":
        left = _walk(doc, kids[0], schema, where, problems)
        return _resolve(doc, left.get("items")) if _is_array(left) else {}
    if kind in ("index", "literal", "identity"):
        return {}
    if kind == "current":
        return schema
    if kind in ("function_expression", "or_expression", "and_expression", "not_expression", "comparator",
                "multi_select_list", "multi_select_dict", "key_val_pair", "pipe", "expref"):
        result = {}
        for child in kids:
            result = _walk(doc, child, schema, where, problems)
        return result if kind == "or_expression" else {}
    problems.append(f"{where}: JMESPath node {kind!r} not checked by this test; extend _walk")
    return {}


@pytest.fixture(scope="module")
def lists(catalog):
    doc = catalog.document
    return {a.id: item_schema(doc, a) for a in catalog.all_actions.values()}


def test_every_column_names_a_member_of_the_item_schema(catalog, lists):
    doc = catalog.document
    problems = []
    for a in catalog.all_actions.values():
        if not a.columns:
            continue
        schema = lists[a.id]
        if schema is None:
            problems.append(f"{a.id}: has columns but its answer is not a list")
            continue
        for col in a.columns:  # compiled columns: a member name, or a JMESPath expression compiled at load
            if col.expr is None:
                _walk(doc, {"type": "field", "value": col.field}, schema, f"{a.id} column {col.field!r}", problems)
            else:
                _walk(doc, col.expr.parsed, schema, f"{a.id} column {col.label!r}", problems)
    assert problems == []


# Lists that may stay without columns, and why. Each entry is a debt, not a choice (none left:
# the broken-rule fixtures that rename an action drop its overlay entry with it).
NO_COLUMNS_YET: dict[str, str] = {}


def test_every_list_of_objects_or_values_has_columns(catalog, lists):
    """A list answer without columns gets auto-picked ones (or none at all for a list of strings)."""
    missing = sorted(aid for aid, schema in lists.items() if schema is not None and not catalog.all_actions[aid].columns)
    assert missing == sorted(NO_COLUMNS_YET)


def test_the_walker_catches_a_wrong_member(catalog, lists):
    doc = catalog.document
    problems: list[str] = []
    _walk(doc, jmespath.compile("spec.Nmae").parsed, lists["swarm_config.list"], "probe", problems)
    _walk(doc, {"type": "field", "value": "nmae"}, lists["container.list"], "probe", problems)
    assert len(problems) == 2 and all("no member" in p for p in problems)
