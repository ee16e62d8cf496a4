"""The served OpenAPI document seen from the simulator: what each operation answers,
how to validate a value against any schema of the document, and how to build a value
that fits a schema.

* `ResponseSpec` says what an operation declares for its success answer (status, media
  type, schema pointer); the behaviour data corrects the kind where the document is
  wrong (an NDJSON stream or a download has no JSON schema to check).
* `DocSchemas.validate` checks a value against a pointer into the document, with the
  document's own `$ref`s resolved through a `referencing` registry (compiled once).
* `synthesize` builds the minimal deterministic instance of a schema (required members
  only); `conform` fits an existing value (a stored item shown through another schema)
  into a schema, keeping what fits and filling what is required and missing; `fill` only
  adds missing required members, so a wrong value stays wrong and is reported.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

DOC_URI = "urn:arcane-mcp:openapi"


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def pointer(*parts: Any) -> str:
    return "".join("/" + escape(str(p)) for p in parts)


@dataclass(frozen=True)
class ResponseSpec:
    """The success answer an operation declares."""

    status: int
    media_type: str | None  # the declared media type, None when the document declares no content
    schema_pointer: str | None  # JSON pointer into the document, None without a JSON schema
    headers: tuple[str, ...]  # declared response header names


@dataclass(frozen=True)
class RequestSpec:
    """The request body an operation declares."""

    media_type: str | None
    required: bool
    schema_pointer: str | None  # only for JSON bodies


class DocSchemas:
    """Validation and synthesis over the OpenAPI document, compiled lazily and cached."""

    def __init__(self, document: dict):
        self.document = document
        self.components = document.get("components", {}).get("schemas", {})
        self.registry = Registry().with_resource(DOC_URI, DRAFT202012.create_resource(document))
        self._validators: dict[str, Draft202012Validator] = {}

    # ------------------------------------------------------------ lookup

    def resolve(self, ptr: str) -> Any:
        node: Any = self.document
        for part in ptr.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[part] if isinstance(node, dict) else node[int(part)]
        return node

    def deref(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
            ref = schema["$ref"]
            if not ref.startswith("#/"):
                break
            schema = self.resolve(ref[1:])
            seen += 1
        return schema

    def component_pointer(self, name: str) -> str:
        return pointer("components", "schemas", name)

    def response_spec(self, path: str, method: str) -> ResponseSpec:
        op = self.document["paths"][path][method.lower()]
        for status in sorted(op.get("responses", {})):
            if not status.startswith("2"):
                continue
            resp = self.deref(op["responses"][status])
            content = resp.get("content") or {}
            headers = tuple((resp.get("headers") or {}).keys())
            media = next(iter(content), None)
            sp = None
            if media and "json" in media and "schema" in content[media]:
                sp = pointer("paths", path, method.lower(), "responses", status, "content", media, "schema")
            return ResponseSpec(int(status), media, sp, headers)
        return ResponseSpec(200, None, None, ())

    def request_spec(self, path: str, method: str) -> RequestSpec:
        op = self.document["paths"][path][method.lower()]
        body = self.deref(op.get("requestBody")) if op.get("requestBody") else None
        if not body:
            return RequestSpec(None, False, None)
        content = body.get("content") or {}
        media = next(iter(content), None)
        sp = None
        if media and "json" in media and "schema" in content[media]:
            sp = pointer("paths", path, method.lower(), "requestBody", "content", media, "schema")
        return RequestSpec(media, bool(body.get("required")), sp)

    def parameters(self, path: str, method: str) -> list[dict]:
        item = self.document["paths"][path]
        params = [self.deref(p) for p in item.get("parameters", [])]
        params += [self.deref(p) for p in item[method.lower()].get("parameters", [])]
        seen, out = set(), []
        for p in params:
            key = (p.get("in"), p.get("name"))
            if key not in seen:
                seen.add(key)
                out.append(p)
        return out

    # ------------------------------------------------------------ validation

    def validator(self, ptr: str) -> Draft202012Validator:
        v = self._validators.get(ptr)
        if v is None:
            v = Draft202012Validator({"$ref": DOC_URI + "#" + ptr}, registry=self.registry)
            self._validators[ptr] = v
        return v

    def errors(self, value: Any, ptr: str, limit: int = 5) -> list[str]:
        """Up to `limit` readable validation errors of `value` against the schema at `ptr`."""
        out = []
        for err in self.validator(ptr).iter_errors(value):
            where = "/".join(str(p) for p in err.absolute_path)
            out.append(f"/{where}: {err.message[:300]}")
            if len(out) >= limit:
                break
        return out

    def is_valid(self, value: Any, ptr: str) -> bool:
        return self.validator(ptr).is_valid(value)

    # ------------------------------------------------------------ synthesis

    def synthesize(self, schema: Any, *, depth: int = 0) -> Any:
        """The minimal deterministic instance of `schema`: required members only."""
        return synthesize(self, schema, depth)

    def conform(self, value: Any, schema: Any) -> Any:
        return conform(self, value, schema)

    def fill(self, value: Any, schema: Any) -> Any:
        return fill(self, value, schema)


# ---------------------------------------------------------------- synthesis


_FORMAT_SAMPLES = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "uri": "https://arcane.invalid/",
    "uri-reference": "/",
    "email": "user@example.invalid",
    "ip": "127.0.0.1",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_STRING_CANDIDATES = ("", "x", "a", "0", "sample")


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return [x for x in t]
    if isinstance(t, str):
        return [t]
    if "properties" in schema or "required" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    return []


def _preferred_type(schema: dict) -> str | None:
    types = _types(schema)
    non_null = [t for t in types if t != "null"]
    if non_null:
        return non_null[0]
    return types[0] if types else None


def _string(schema: dict) -> str:
    value = _FORMAT_SAMPLES[schema["format"]] if "format" in schema and schema["format"] in _FORMAT_SAMPLES else ""
    min_len = int(schema.get("minLength", 0))
    max_len = schema.get("maxLength")
    pattern = schema.get("pattern")
    candidates = [value] + [c for c in _STRING_CANDIDATES if c != value]
    for cand in candidates:
        if len(cand) < min_len:
            cand = cand + "x" * (min_len - len(cand))
        if max_len is not None and len(cand) > int(max_len):
            cand = cand[: int(max_len)]
        if pattern is None or re.search(pattern, cand):
            return cand
    return candidates[0]


def _number(schema: dict, integer: bool) -> int | float:
    lo = schema.get("minimum")
    if lo is None and "exclusiveMinimum" in schema:
        lo = schema["exclusiveMinimum"] + (1 if integer else 0.5)
    value = lo if lo is not None else 0
    hi = schema.get("maximum")
    if hi is not None and value > hi:
        value = hi
    return int(value) if integer else float(value)


def synthesize(doc: DocSchemas, schema: Any, depth: int = 0) -> Any:
    schema = doc.deref(schema)
    if not isinstance(schema, dict) or depth > 24:
        return None
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if schema.get("enum"):
        return copy.deepcopy(schema["enum"][0])
    if "default" in schema and not isinstance(schema["default"], (dict, list)):
        # a declared default is what Arcane sends when it has nothing better
        return schema["default"]
    for combinator in ("allOf", "oneOf", "anyOf"):
        if schema.get(combinator):
            if combinator == "allOf":
                merged: dict = {}
                for sub in schema["allOf"]:
                    part = synthesize(doc, sub, depth + 1)
                    if isinstance(part, dict):
                        merged.update(part)
                return merged
            return synthesize(doc, schema[combinator][0], depth + 1)
    t = _preferred_type(schema)
    if t == "object":
        out = {}
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            sub = props.get(name)
            if sub is None:
                extra = schema.get("additionalProperties")
                sub = extra if isinstance(extra, dict) else {}
            sub_d = doc.deref(sub)
            if isinstance(sub_d, dict) and sub_d.get("readOnly") and name == "$schema":
                continue
            out[name] = synthesize(doc, sub, depth + 1)
        return out
    if t == "array":
        n = int(schema.get("minItems", 0))
        return [synthesize(doc, schema.get("items", {}), depth + 1) for _ in range(n)]
    if t == "string":
        return _string(schema)
    if t == "integer":
        return _number(schema, True)
    if t == "number":
        return _number(schema, False)
    if t == "boolean":
        return False
    return None


# ---------------------------------------------------------------- conform


class _Drop:
    """Marker: the value does not fit and nothing required asks for it."""


DROP = _Drop()


def _fits_scalar(value: Any, schema: dict) -> bool:
    types = _types(schema)
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "const" in schema and value != schema["const"]:
        return False
    if not types:
        return True
    for t in types:
        if t == "null" and value is None:
            return True
        if t == "boolean" and isinstance(value, bool):
            return True
        if t == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if t == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if t == "string" and isinstance(value, str):
            if len(value) < int(schema.get("minLength", 0)):
                return False
            if schema.get("maxLength") is not None and len(value) > int(schema["maxLength"]):
                return False
            return not schema.get("pattern") or bool(re.search(schema["pattern"], value))
    return False


def conform(doc: DocSchemas, value: Any, schema: Any, depth: int = 0) -> Any:
    """Fit `value` into `schema`: keep members that fit, drop the rest, fill required gaps.

    Used to show a stored item through another schema (a list item shown by a get that
    answers a detail schema, a created item shown through the create answer).
    """
    schema = doc.deref(schema)
    if not isinstance(schema, dict) or depth > 24:
        return value
    if not schema:  # `{}` accepts anything
        return value
    types = _types(schema)
    if isinstance(value, dict):
        if "object" not in types:
            return DROP
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties", True)
        out = synthesize(doc, schema, depth)
        if not isinstance(out, dict):
            out = {}
        for k, v in value.items():
            if k in props:
                sub = conform(doc, v, props[k], depth + 1)
            elif extra is False:
                continue
            elif isinstance(extra, dict):
                sub = conform(doc, v, extra, depth + 1)
            else:
                sub = v
            if sub is not DROP:
                out[k] = sub
        return out
    if isinstance(value, list):
        if "array" not in types:
            return DROP
        items = schema.get("items", {})
        kept = [c for c in (conform(doc, v, items, depth + 1) for v in value) if c is not DROP]
        if len(kept) < int(schema.get("minItems", 0)):
            return DROP
        return kept
    return value if _fits_scalar(value, schema) else DROP


def fill(doc: DocSchemas, value: Any, schema: Any, depth: int = 0) -> Any:
    """`value` with every required member it lacks synthesised, at every depth.

    Unlike `conform` nothing is dropped or checked: a behaviour that writes a wrong type
    still produces an invalid answer (a violation), but it need not spell out every
    required member of a nested object to be valid.
    """
    schema = doc.deref(schema)
    if not isinstance(schema, dict) or depth > 24:
        return value
    types = _types(schema)
    if isinstance(value, dict) and "object" in types:
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = dict(value)
        for name in schema.get("required") or []:
            if name not in out:
                out[name] = synthesize(doc, props.get(name, extra if isinstance(extra, dict) else {}), depth + 1)
        for k, v in out.items():
            if k in props:
                out[k] = fill(doc, v, props[k], depth + 1)
            elif isinstance(extra, dict):
                out[k] = fill(doc, v, extra, depth + 1)
        return out
    if isinstance(value, list) and "array" in types:
        return [fill(doc, v, schema.get("items", {}), depth + 1) for v in value]
    return value


def deep_merge(base: Any, over: Any) -> Any:
    """`over` laid on `base`: mappings merge member by member, anything else replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = deep_merge(base.get(k), v) if k in base else v
        return out
    return copy.deepcopy(over)
