"""Every string field Arcane's response schemas declare for the resources' actions, and
whether the resources' redaction hides or keeps it (issue 10: "rules follow schema
positions, not key names").

The structuredContent of an action is its 200 answer's envelope unwrapped (``data`` as
the value, a list under ``items``, the members beside ``data`` kept: interpreter/call/response.py
``unwrap``); ``structured_schema`` is the JSON Schema of that value. ``plant`` fills every
position of it (objects with every property, arrays and maps with one member) with a
unique planted string per string field; a field is **hidden** when its planted string
appears nowhere in the redacted resource, **kept** otherwise.

``python -m tests.resource_fields`` rewrites tests/golden/resource_fields.json (the pins
tests/test_resource_redaction.py compares with): review its diff field by field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interpreter.text.redact import _deref

PINS = Path(__file__).resolve().parent / "golden" / "resource_fields.json"
# a map key no rule names and no name rule finds secret (a label a user wrote)
MAP_KEY = "app.tier"
MAX_DEPTH = 14


def response_schema(document: dict, action) -> dict:
    op = document["paths"][action.path][action.method.lower()]
    return op["responses"]["200"]["content"]["application/json"]["schema"]


def structured_schema(document: dict, schema: dict, envelope) -> dict:
    """The schema of the structuredContent the envelope rule makes of an answer."""
    s = _deref(schema, document)
    props = dict(s.get("properties") or {})
    keys = (envelope.success, envelope.data)  # catalog/conventions.yaml envelope
    if not all(k in props for k in keys):
        return s
    data = _deref(props.pop(envelope.data), document)
    for k in keys:
        props.pop(k, None)
    types = data.get("type") if isinstance(data.get("type"), list) else [data.get("type")]
    if "array" in types:
        return {"type": "object", "properties": {envelope.items: data, **props}}
    merged = dict(data.get("properties") or {})
    for k, v in props.items():
        merged[k if k not in merged else f"{envelope.clash_prefix}{k}"] = v
    return {"type": "object", "properties": merged}


def _types(s: dict) -> list:
    t = s.get("type")
    return t if isinstance(t, list) else [t]


def plant(document: dict, schema: Any, path: tuple = (), out: dict | None = None, depth: int = 0,
          value_of=None) -> Any:
    """An instance with every position of the schema filled; ``out`` gets pointer → planted
    string for each string field (``*`` for array items and map values). ``value_of(ptr)``
    gives a string field's value (default: a unique ``PLANT<n>X``)."""
    out = {} if out is None else out
    s = _deref(schema, document)
    if not isinstance(s, dict) or depth > MAX_DEPTH:
        return None
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in s.get(key) or ():
            sub = _deref(sub, document)
            if isinstance(sub, dict) and (sub.get("properties") or _types(sub) not in ([None], ["null"])):
                return plant(document, sub, path, out, depth + 1, value_of)
    types = _types(s)
    if "object" in types or s.get("properties"):
        obj = {name: plant(document, sub, path + (name,), out, depth + 1, value_of)
               for name, sub in (s.get("properties") or {}).items()}
        if isinstance(s.get("additionalProperties"), dict):
            obj[MAP_KEY] = plant(document, s["additionalProperties"], path + ("*",), out, depth + 1, value_of)
        return obj
    if "array" in types:
        return [plant(document, s.get("items") or {}, path + ("*",), out, depth + 1, value_of)]
    if "string" in types:
        if s.get("enum"):
            return s["enum"][0]
        ptr = "/" + "/".join(map(str, path))
        value = value_of(ptr) if value_of else f"PLANT{len(out):05d}X"
        out[ptr] = value
        return value
    if "integer" in types or "number" in types:
        return 1
    if "boolean" in types:
        return True
    return None


def decisions(catalog, actions: list[str]) -> dict[str, dict[str, str]]:
    """action → {pointer of a string field: "hidden" | "kept"}, through the resources'
    redaction (redact.Rules.for_resource)."""
    rules = catalog.redaction
    out: dict[str, dict[str, str]] = {}
    for aid in actions:
        action = catalog.all_actions[aid]
        planted: dict[str, str] = {}
        schema = structured_schema(catalog.document, response_schema(catalog.document, action), catalog.conventions.envelope)
        value = plant(catalog.document, schema, out=planted)
        text = json.dumps(rules.for_resource(value, aid))
        out[aid] = {ptr: ("kept" if v in text else "hidden") for ptr, v in sorted(planted.items())}
    return out


def resource_actions(catalog) -> list[str]:
    return list(dict.fromkeys(r.action for r in catalog.resources.data))


if __name__ == "__main__":
    from interpreter.build.catalog import build

    cat = build()
    table = decisions(cat, resource_actions(cat))
    PINS.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for aid, fields in table.items():
        hidden = [p for p, d in fields.items() if d == "hidden"]
        print(f"{aid}: {len(fields)} string fields, {len(hidden)} hidden")
        for p in hidden:
            print("   hidden", p)
