"""Derive one flat input schema and its bindings from an OpenAPI operation.

Path, query, header and cookie parameters and the JSON body's properties become one
`type: object` schema with `additionalProperties: false`; referenced components are
copied under `$defs`. Each flat argument has a Binding that says where it goes back to.
Nothing here knows a domain: the environment parameter's name and default come from the
inventory (catalog/actions.yaml `environment`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any

from .lazy_dataclass import dataclass

# Where a flat argument goes back to in the HTTP request.
PATH, QUERY, HEADER, COOKIE = "path", "query", "header", "cookie"
BODY_FIELD = "body_field"  # one property of a JSON object body
BODY_WHOLE = "body_whole"  # the whole JSON body (not an object with properties)
MULTIPART = "multipart"  # one part of a multipart/form-data body
OCTET = "octet"  # the raw application/octet-stream body
FORM = "form"  # an extra route's form field (application/x-www-form-urlencoded)
BODY_TEXT = "body_text"  # an extra route's whole body, as text
CLIENT_FILTER = "client_filter"  # not sent: applied here to the items fetched (overlay `client_filters`)
JSON_PART = "json_part"  # one member of the JSON text sent as a multipart part or body string (overlay `json_parts`)

# the longest header or cookie value an argument may be where Arcane's document sets none
# (common servers accept 8 KiB per header line; Go's net/http, Arcane's, 1 MiB for all)
HEADER_VALUE_MAX = 8192
BLOB_DEF = "Blob"
BLOB_SCHEMA = {
    "type": "object",
    "description": "File content: `text` (UTF-8) or `base64` (any bytes), optional filename and contentType.",
    "properties": {
        "filename": {"type": "string", "description": "File name sent with the part"},
        "text": {"type": "string", "description": "The content as UTF-8 text"},
        "base64": {"type": "string", "contentEncoding": "base64", "description": "The content, base64-encoded"},
        "contentType": {"type": "string", "description": "Media type of the content (default application/octet-stream)"},
    },
    "oneOf": [{"required": ["text"]}, {"required": ["base64"]}],
    "additionalProperties": False,
}


# JSON Schema 2020-12's formats (§7.3) and OpenAPI's `password`, which marks a secret (the
# redaction rules hide it: redact.schema_secret_paths; a client may mask it). Any other
# format (OpenAPI's int64, double…, Go's `ip`) is not one a JSON Schema client knows.
STANDARD_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer",
    "regex", "password",
})
# What a non-standard format says, in standard words: int32's range as bounds, Go's net.IP
# as either address family. Every other non-standard format says nothing a type does not.
INT32 = (-(2**31), 2**31 - 1)
DEFS_REF = "#/$defs/"
DATA_KEYWORDS = frozenset({"default", "enum", "const", "examples", "example"})


@dataclass(frozen=True)
class Binding:
    """Where one flat argument goes: `location` and the `wire` name (parameter, property or part)."""

    arg: str
    location: str
    wire: str
    is_array: bool = False
    is_blob: bool = False
    json_encoded: bool = False  # a multipart part sent as a JSON string
    renamed_from: str | None = None  # set when a clash forced a rename
    member: str | None = None  # JSON_PART: the member of the part's JSON object
    fill: str | None = None  # JSON_PART: the JSON object text the given members are laid over
    via: str | None = None  # JSON_PART: where the part itself goes (MULTIPART or BODY_FIELD)

    def as_dict(self) -> dict:
        d = {"arg": self.arg, "in": self.location, "wire": self.wire}
        if self.is_array:
            d["array"] = True
        if self.is_blob:
            d["blob"] = True
        if self.renamed_from:
            d["renamed_from"] = self.renamed_from
        if self.member:
            d["member"] = self.member
        return d


@dataclass
class Derived:
    schema: dict
    bindings: tuple[Binding, ...]
    body_media_type: str | None
    body_required: bool
    env_param: str | None  # the path parameter turned into environmentId, if any


def header_arg_name(header: str) -> str:
    """`X-Step-Up-Token` -> `xStepUpToken`: a header parameter as an argument name."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", header) if w]
    if not words:
        return header
    return words[0].lower() + "".join(w[:1].upper() + w[1:].lower() for w in words[1:])


class RefCollector:
    """Copies referenced components into `$defs`, rewriting refs, transitively."""

    def __init__(self, document: dict):
        self.document = document
        self.defs: dict[str, Any] = {}

    def _resolve_pointer(self, ref: str) -> Any:
        node: Any = self.document
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def rewrite(self, schema: Any) -> Any:
        if isinstance(schema, dict):
            out = {}
            for k, v in schema.items():
                if k == "$ref" and isinstance(v, str) and v.startswith("#/components/schemas/"):
                    name = v.rsplit("/", 1)[1]
                    self._copy(name, v)
                    out[k] = "#/$defs/" + name
                else:
                    out[k] = self.rewrite(v)
            return out
        if isinstance(schema, list):
            return [self.rewrite(v) for v in schema]
        return schema

    def _copy(self, name: str, ref: str) -> None:
        if name in self.defs:
            return
        self.defs[name] = {}  # placeholder breaks cycles
        self.defs[name] = self.rewrite(strip_read_only(copy.deepcopy(self._resolve_pointer(ref))))

    def deref(self, schema: dict) -> dict:
        """The schema a top-level $ref points to (components only), else the schema."""
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 16:
            schema = self._resolve_pointer(schema["$ref"])
            seen += 1
        return schema


def strip_read_only(schema: Any) -> Any:
    """Drop readOnly properties (Huma's `$schema`): a request must not send them."""
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        props = {k: v for k, v in schema["properties"].items() if not (isinstance(v, dict) and v.get("readOnly"))}
        dropped = set(schema["properties"]) - set(props)
        schema = dict(schema)
        schema["properties"] = props
        if dropped and isinstance(schema.get("required"), list):
            schema["required"] = [r for r in schema["required"] if r not in dropped]
    return schema


def _header_capped(schema: dict, location: str) -> dict:
    """A header or cookie string without a maxLength of its own gets HEADER_VALUE_MAX: a
    longer one is an invalid argument, not a request the connection drops. (Path and query
    values are bounded where the request is built; body strings only by the body cap.)"""
    if location in (HEADER, COOKIE) and schema.get("type") == "string" and "maxLength" not in schema:
        return {**schema, "maxLength": HEADER_VALUE_MAX}
    return schema


def _is_binary(schema: dict) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "string" and (
        schema.get("format") == "binary" or schema.get("contentMediaType") == "application/octet-stream"
    )


@dataclass(frozen=True)
class _Environment:
    """The inventory's environment rule: a path parameter under `path_prefix` named
    `path_param` becomes the argument `argument`, with its default and description."""

    path_prefix: str
    path_param: str
    argument: str
    default: str
    description: str


@dataclass
class _Flat:
    """The flat schema as `derive` builds it: its properties, required arguments and
    bindings, and the components copied under `$defs` (refs)."""

    refs: RefCollector
    props: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)

    def add(self, arg: str, schema: Any, binding: Binding, required: bool = False) -> None:
        self.props[arg] = schema
        if required:
            self.required.append(arg)
        self.bindings.append(binding)

    def blob_ref(self) -> dict:
        """A reference to the Blob schema, copied under `$defs` on first use."""
        self.refs.defs.setdefault(BLOB_DEF, BLOB_SCHEMA)
        return {"$ref": f"{DEFS_REF}{BLOB_DEF}"}

    def schema(self) -> dict:
        schema: dict[str, Any] = {"type": "object", "properties": self.props, "additionalProperties": False}
        if self.required:
            schema["required"] = sorted(set(self.required), key=self.required.index)
        if self.refs.defs:
            schema["$defs"] = dict(sorted(self.refs.defs.items()))
        return schema


def derive(
    document: dict,
    path: str,
    operation: dict,
    path_item: dict,
    *,
    env_path_prefix: str,
    env_path_param: str,
    env_arg: str,
    env_default: str,
    env_description: str,
    withheld_headers: frozenset[str],
) -> Derived:
    """Build the flat schema and bindings of one operation: its parameters (the path
    item's, then its own), then its request body."""
    flat = _Flat(RefCollector(document))
    env = _Environment(env_path_prefix, env_path_param, env_arg, env_default, env_description)
    params = list(path_item.get("parameters", [])) + list(operation.get("parameters", []))
    env_param = _add_parameters(flat, path, params, env, withheld_headers)
    body_media, body_required = _add_body(flat, operation)
    return Derived(compact(flat.schema()), tuple(flat.bindings), body_media, body_required, env_param)


def _add_parameters(flat: _Flat, path: str, params: list, env: _Environment, withheld_headers: frozenset[str]) -> str | None:
    """Each parameter (the first of a name and place) as an argument, but a withheld header;
    the environment's path parameter becomes the environment argument. Its wire name, if any."""
    env_param = None
    seen_params = set()
    for param in params:
        param = flat.refs.deref(param)
        key = (param["in"], param["name"])
        if key in seen_params:
            continue
        seen_params.add(key)
        location, wire = key
        pschema = flat.refs.rewrite(copy.deepcopy(param.get("schema", {})))
        if param.get("description") and "description" not in pschema:
            pschema["description"] = param["description"]
        if location == HEADER and wire.lower() in withheld_headers:
            continue
        if location == PATH and wire == env.path_param and path.startswith(env.path_prefix):
            # the value itself is the schema's default
            flat.add(env.argument, {**pschema, "description": env.description, "default": env.default}, Binding(env.argument, PATH, wire))
            env_param = wire
            continue
        arg = header_arg_name(wire) if location in (HEADER, COOKIE) else wire
        flat.add(arg, _header_capped(pschema, location), Binding(arg, location, wire, is_array=pschema.get("type") == "array"),
                 required=bool(param.get("required")) or location == PATH)
    return env_param


@dataclass(frozen=True)
class _Body:
    """A request body: its (first) media type, its schema (dereferenced, and as written), and
    whether the operation requires it."""

    media: str
    schema: Any
    raw: Any
    required: bool

    def requires(self, name: str) -> bool:
        """Whether the body's property `name` is a required argument."""
        return name in (self.schema.get("required") or []) and self.required


def _add_body(flat: _Flat, operation: dict) -> tuple[str | None, bool]:
    """The request body's arguments, added the way the first matching BODY_STEPS entry says:
    (its media type, whether it is required)."""
    body = operation.get("requestBody")
    if not body:
        return None, False
    body = flat.refs.deref(body)
    required = bool(body.get("required"))
    content = body.get("content", {})
    media = next(iter(content), None)
    if media:
        raw = content.get(media, {}).get("schema", {})
        found = _Body(media, flat.refs.deref(raw), raw, required)
        next(step for matches, step in BODY_STEPS if matches(found))(flat, found)
    return media, required


def _is_raw(body: _Body) -> bool:
    return body.media == "application/octet-stream" or (_is_binary(body.schema) and "json" not in body.media)


def _is_form(body: _Body) -> bool:
    return body.media.startswith("multipart/") or body.media == "application/x-www-form-urlencoded"


def _is_object(body: _Body) -> bool:
    s = body.schema
    return isinstance(s, dict) and isinstance(s.get("properties"), dict) and s.get("additionalProperties") in (None, False)


def _raw_body(flat: _Flat, body: _Body) -> None:
    """The raw body: one Blob argument."""
    arg = _unique("body", flat.props)
    flat.add(arg, {**flat.blob_ref(), "description": "The raw request body"}, Binding(arg, OCTET, "body", is_blob=True), body.required)


def _form_body(flat: _Flat, body: _Body) -> None:
    """A multipart or form body: an argument per part, a file part (or a list of them) as Blobs."""
    for name, ps in (body.schema.get("properties") or {}).items():
        ps = flat.refs.deref(ps)
        arg = _unique(name, flat.props)
        is_array = isinstance(ps, dict) and ps.get("type") == "array"
        item = ps.get("items", {}) if is_array else ps
        is_blob = _is_binary(flat.refs.deref(item) if isinstance(item, dict) else {})
        if is_blob:
            blob_ref = flat.blob_ref()
            s = {"type": "array", "items": blob_ref} if is_array else dict(blob_ref)
            s["description"] = (ps.get("description") or f"File part{'s' if is_array else ''} `{name}`")
        else:
            s = flat.refs.rewrite(copy.deepcopy(ps))
        binding = Binding(arg, MULTIPART, name, is_array=is_array, is_blob=is_blob, renamed_from=name if arg != name else None)
        flat.add(arg, s, binding, body.requires(name))


def _object_body(flat: _Flat, body: _Body) -> None:
    """A JSON object body with declared properties: an argument per property (readOnly ones dropped)."""
    body = replace(body, schema=strip_read_only(body.schema))
    for name, ps in body.schema["properties"].items():
        arg = _unique(name, flat.props, prefix="body_")
        flat.add(arg, flat.refs.rewrite(copy.deepcopy(ps)), Binding(arg, BODY_FIELD, name, renamed_from=name if arg != name else None),
                 body.requires(name))


def _whole_body(flat: _Flat, body: _Body) -> None:
    """Any other body: one argument holding it whole."""
    arg = _unique("body", flat.props)
    s = flat.refs.rewrite(copy.deepcopy(body.raw))
    s.setdefault("description", "The request body")
    flat.add(arg, s, Binding(arg, BODY_WHOLE, "body"), body.required)


#: How a request body becomes arguments: the first entry whose test matches it.
BODY_STEPS = (
    (_is_raw, _raw_body),
    (_is_form, _form_body),
    (_is_object, _object_body),
    (lambda body: True, _whole_body),
)


def compact(schema: dict) -> dict:
    """The schema as tools/list serves it, without bytes that tell a caller nothing: no
    empty description, no `$schema` (keyword or Huma's `$schema` property), formats only from
    STANDARD_FORMATS (int32 kept as its bounds, `ip` as ipv4 or ipv6), and only the `$defs`
    the schema reaches. Descriptions, enums and constraints are never dropped."""
    out = _compact(schema)
    defs = out.get("$defs")
    if isinstance(defs, dict):
        reached: set[str] = set()
        todo = list(_refs({k: v for k, v in out.items() if k != "$defs"}))
        while todo:
            name = todo.pop()
            if name in reached or name not in defs:
                continue
            reached.add(name)
            todo.extend(_refs(defs[name]))
        kept = {k: v for k, v in defs.items() if k in reached}
        if kept:
            out["$defs"] = kept
        else:
            out.pop("$defs")
    return out


def _refs(node: Any):
    """The `$defs` names a schema node refers to (its own `$defs` aside)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith(DEFS_REF):
                yield v[len(DEFS_REF):]
            elif k != "$defs":
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def _compact(node: Any) -> Any:
    if isinstance(node, list):
        return [_compact(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "$schema" or (k == "description" and not (isinstance(v, str) and v.strip())):
            continue
        if k in DATA_KEYWORDS:
            out[k] = v  # values, not schemas: kept as they are
        elif k in ("properties", "$defs", "patternProperties", "dependentSchemas") and isinstance(v, dict):
            out[k] = {name: _compact(sub) for name, sub in v.items() if not (k == "properties" and name == "$schema")}
        else:
            out[k] = _compact(v)
    if isinstance(out.get("required"), list) and isinstance(out.get("properties"), dict) and "$schema" in out["required"]:
        out["required"] = [r for r in out["required"] if r != "$schema"]
    fmt = out.get("format")
    if isinstance(fmt, str) and fmt not in STANDARD_FORMATS:
        del out["format"]
        if fmt == "int32":
            out.setdefault("minimum", INT32[0])
            out.setdefault("maximum", INT32[1])
        elif fmt == "ip" and "anyOf" not in out:
            out["anyOf"] = [{"format": "ipv4"}, {"format": "ipv6"}]
    return out


def _unique(name: str, taken: dict, prefix: str = "") -> str:
    """A deterministic name that does not clash with an argument already taken."""
    if name not in taken:
        return name
    candidate = f"{prefix or 'body_'}{name}"
    n = 2
    while candidate in taken:
        candidate = f"{prefix or 'body_'}{name}_{n}"
        n += 1
    return candidate


def params_schema_from_decl(decl: dict, env_arg: str, env_default: str, env_description: str) -> tuple[dict, tuple[Binding, ...]]:
    """Schema + bindings for an extra route, whose params are declared in YAML."""
    props: dict[str, Any] = {}
    required: list[str] = []
    bindings: list[Binding] = []
    for name, spec in (decl or {}).items():
        spec = dict(spec)
        location = spec.pop("in", QUERY)
        wire = spec.pop("wire", name)
        req = spec.pop("required", False)
        if name == env_arg:
            spec.setdefault("description", env_description)
            spec["default"] = env_default
        elif req or location == PATH:
            required.append(name)
        props[name] = _header_capped(spec, location)
        bindings.append(Binding(name, location, wire, is_array=spec.get("type") == "array"))
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return compact(schema), tuple(bindings)


# ---------------------------------------------------------------- output schemas (experimental)


def _relax(schema: Any) -> Any:
    """Make every property and array item also accept null, and objects accept unknown
    members, so a part that does not fit can be sent as null and a newer Arcane's extra
    fields never break a strict client."""
    if isinstance(schema, list):
        return [_relax(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _relax(v) for k, v in schema.items()}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _nullable(v) for k, v in out["properties"].items()}
        out.pop("additionalProperties", None)
        out.pop("required", None)  # a missing member is a part that does not fit, sent as absent
    if "items" in out and isinstance(out["items"], dict):
        out["items"] = _nullable(out["items"])
    for key in ("$defs",):
        if isinstance(out.get(key), dict):
            out[key] = {k: _relax(v) for k, v in out[key].items()}
    return out


def _nullable(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def output_schema(document: dict, operation: dict, conventions) -> dict | None:
    """The schema of what an action returns as structuredContent, derived from the
    operation's 2xx JSON response the way response.unwrap shapes it (the envelope's member
    names are `conventions.envelope`'s); None when the operation has no JSON body or its
    value is not an object."""
    env = conventions.envelope
    refs = RefCollector(document)
    raw = None
    for status, resp in (operation.get("responses") or {}).items():
        if status.startswith("2"):
            content = (resp.get("content") or {}).get("application/json")
            if content and content.get("schema") is not None:
                raw = content["schema"]
            break
    if raw is None:
        return None
    top = refs.deref(raw)
    props = top.get("properties") if isinstance(top, dict) else None
    if isinstance(props, dict) and env.success in props and env.data in props:
        skip = {env.success, env.data, *env.schema_skips}
        extras = {k: refs.rewrite(copy.deepcopy(v)) for k, v in props.items() if k not in skip}
        data = refs.deref(props[env.data])
        dtype = data.get("type") if isinstance(data, dict) else None
        types_ = set(dtype if isinstance(dtype, list) else [dtype])
        if "array" in types_:
            arr = refs.rewrite(copy.deepcopy({k: v for k, v in data.items() if k != "type"}))
            arr["type"] = "array"
            schema = {"type": "object", "properties": {env.items: arr, **extras}}
        elif isinstance(data, dict) and isinstance(data.get("properties"), dict):
            inner = refs.rewrite(copy.deepcopy(strip_read_only(data)))
            merged = dict(inner.get("properties") or {})
            for k, v in extras.items():
                merged[k if k not in merged else f"{env.clash_prefix}{k}"] = v
            schema = {"type": "object", "properties": merged}
        elif isinstance(data, dict) and data.get("type") in ("string", "integer", "number", "boolean"):
            schema = {"type": "object", "properties": {env.value: refs.rewrite(copy.deepcopy(data)), **extras}}
        else:
            return None
    elif isinstance(top, dict) and (top.get("type") == "array" or (isinstance(top.get("type"), list) and "array" in top["type"])):
        arr = refs.rewrite(copy.deepcopy({k: v for k, v in top.items() if k != "type"}))
        arr["type"] = "array"
        schema = {"type": "object", "properties": {env.items: arr}}
    elif isinstance(props, dict):
        schema = refs.rewrite(copy.deepcopy(strip_read_only(top)))
        schema["type"] = "object"
        schema["properties"].pop(env.success, None)  # the envelope's flag: response.unwrap drops it
    else:
        return None
    schema = _relax(schema)
    schema["type"] = "object"
    if refs.defs:
        schema["$defs"] = {k: _relax(v) for k, v in sorted(refs.defs.items())}
    return compact(schema)


# ---------------------------------------------------------------- output schemas as listed
#
# output_schema's form (every member `anyOf: [schema, {"type": "null"}]`) is what the
# engine reads (answer_members, may_be_array). What a tool lists is the same set of values
# in fewer bytes, cheaper for a client to compile: a null added to the member's own `type`
# (and `enum`) where that says the same (a `$ref` keeps its `anyOf` with null: its
# definition may be used where null is not accepted), and no annotation a client or model
# does not validate or read in a result (descriptions, examples, titles, defaults,
# deprecated, readOnly/writeOnly: the result's text says what its members are; the
# document's descriptions stay on the inputs). Formats go too: in JSON Schema 2020-12 they
# are annotations, and fit() (which sends a part that does not fit as null) does not check
# them, so a client that asserts them (the TypeScript SDK's Ajv does) would refuse a result
# the server let through, a date Arcane writes its own way.

#: keywords that constrain every value, null included: a null is added beside them, not into them
_EVERY_VALUE = frozenset({"anyOf", "oneOf", "allOf", "not", "$ref", "$dynamicRef", "if", "const"})
#: annotations an output schema does not need: they validate nothing and a result explains itself
_OUTPUT_ANNOTATIONS = frozenset({"description", "examples", "example", "title", "default", "deprecated", "readOnly", "writeOnly",
                                 "$comment", "format", "contentEncoding", "contentMediaType"})
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames",
               "unevaluatedItems", "unevaluatedProperties")
_DROP, _MAP, _LIST, _ONE = range(4)
#: what _lean does with a keyword's value (any other keyword's value is kept as it is)
_KEYWORD = {**dict.fromkeys(_OUTPUT_ANNOTATIONS, _DROP), **dict.fromkeys(_SCHEMA_MAPS, _MAP),
            **dict.fromkeys(_SCHEMA_LISTS, _LIST), **dict.fromkeys(_SCHEMA_ONE, _ONE)}
_NULL = {"type": "null"}


def _or_null(node: dict) -> dict:
    """`node` also accepting null, in its own words where they can say it."""
    if not _EVERY_VALUE.isdisjoint(node):
        return {"anyOf": [node, _NULL]}
    t = node.get("type")
    if t is None:
        return node if "enum" not in node else {**node, "enum": [*node["enum"], None]} if None not in node["enum"] else node
    types = t if isinstance(t, list) else [t]
    out = node if "null" in types else {**node, "type": [*types, "null"]}
    if "enum" in out and None not in out["enum"]:
        out = {**out, "enum": [*out["enum"], None]}
    return out


def _lean(node: Any) -> Any:
    """One schema node as listed (lean_output), its subschemas first."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        what = _KEYWORD.get(k)
        if what is None:
            out[k] = v
        elif what == _MAP and isinstance(v, dict):
            out[k] = {name: _lean(sub) for name, sub in v.items()}
        elif what == _LIST and isinstance(v, list):
            out[k] = [_lean(sub) for sub in v]
        elif what == _ONE:
            out[k] = _lean(v)
        elif what != _DROP:
            out[k] = v
    branches = out.get("anyOf")
    if branches is None:
        return out
    if isinstance(branches, list) and branches and all(b == {} for b in branches):  # `ip`'s two formats, gone
        del out["anyOf"]
    if len(out) == 1 and isinstance(branches, list) and len(branches) == 2 and _NULL in branches:
        other = branches[1 - branches.index(_NULL)]
        if isinstance(other, dict):  # [schema, null]: the schema, accepting null
            return _or_null(other)
    return out


#: the `$id` of a listed output schema: this prefix and a digest of the schema itself
OUTPUT_ID_PREFIX = "urn:arcane-mcp:output:"


def lean_output(schema: dict) -> dict:
    """An output_schema as a tool lists it: the same values accepted (null wherever
    output_schema accepts one), in fewer bytes, named by an `$id` made of its own digest.
    The same schema has the same `$id` on every tool that returns it and in every listing:
    a client that keeps compiled schemas by `$id` (the TypeScript SDK's Ajv) compiles each
    once, not once per tool and per tools/list; a changed schema gets a new one."""
    out = _lean(schema)
    out.pop("$id", None)
    digest = hashlib.sha256(json.dumps(out, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:24]
    return {"$id": OUTPUT_ID_PREFIX + digest, **out}


def _deepest(err):
    """The innermost error under anyOf branches (ignoring the `null` branch we added)."""
    best = err
    for sub in err.context or ():
        if sub.validator == "type" and sub.validator_value == "null":
            continue
        cand = _deepest(sub)
        if len(cand.absolute_path) > len(best.absolute_path):
            best = cand
    return best


def fit(value: dict, validator) -> tuple[dict, list[tuple[str, Any]]]:
    """Set each part of `value` that breaks the output schema to null; returns the fitted
    copy and [(JSON pointer, original value)] of what was replaced."""
    value = copy.deepcopy(value)
    misfits: list[tuple[str, Any]] = []
    for _ in range(64):
        errors = sorted((_deepest(e) for e in validator.iter_errors(value)), key=lambda e: -len(e.absolute_path))
        if not errors:
            break
        err = errors[0]
        path = list(err.absolute_path)
        if not path:
            return {}, misfits + [("", value)]
        parent = value
        for p in path[:-1]:
            parent = parent[p]
        original = parent[path[-1]]
        # the deepest error may sit inside an anyOf; null the member the error belongs to
        parent[path[-1]] = None
        misfits.append(("".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path), original))
    return value, misfits


def may_be_array(node: Any) -> bool:
    """Whether a (derived) schema node may be an array: `type: array`, a type list holding
    "array" (`["array", "null"]`, as the document types a member Go may send as null), or
    an `anyOf` branch that may."""
    if not isinstance(node, dict):
        return False
    t = node.get("type")
    return t == "array" or (isinstance(t, list) and "array" in t) or any(may_be_array(b) for b in node.get("anyOf") or ())


def answer_members(catalog, action) -> dict[str, Any]:
    """The members of an action's JSON answer as structuredContent holds it (its operation's
    2xx response, shaped the way response.unwrap shapes it: output_schema); empty for an
    extra route or an answer that is not JSON."""
    if not action.operation_id or action.response_kind != "json":
        return {}
    document = catalog.document
    op = ((document.get("paths") or {}).get(action.path) or {}).get(action.method.lower())
    schema = output_schema(document, op, catalog.conventions) if isinstance(op, dict) else None
    return (schema or {}).get("properties") or {}


def answer_required(catalog, action) -> frozenset[str]:
    """The members an action's JSON answer must hold, as its operation's 2xx response
    schema requires them of the value structuredContent holds (the envelope's data object,
    or the body itself); empty for an extra route, an answer that is not JSON or not an
    object, or a schema that requires nothing."""
    if not action.operation_id or action.response_kind != "json":
        return frozenset()
    document = catalog.document
    op = ((document.get("paths") or {}).get(action.path) or {}).get(action.method.lower())
    raw = None
    for status, resp in ((op or {}).get("responses") or {}).items() if isinstance(op, dict) else ():
        if str(status).startswith("2"):
            content = ((resp or {}).get("content") or {}).get("application/json") or {}
            raw = content.get("schema")
            break
    if not isinstance(raw, dict):
        return frozenset()
    env = catalog.conventions.envelope
    refs = RefCollector(document)
    top = refs.deref(raw)
    props = top.get("properties") if isinstance(top, dict) else None
    value = refs.deref(props[env.data]) if isinstance(props, dict) and env.success in props and env.data in props else top
    if not isinstance(value, dict) or not isinstance(value.get("properties"), dict):
        return frozenset()
    return frozenset(str(m) for m in value.get("required") or () if m in value["properties"])


def list_member_problem(catalog, action) -> str | None:
    """Why the overlay's `list_member` of this action names no array member of its JSON
    answer (the members it has), or None when it does."""
    members = answer_members(catalog, action)
    if may_be_array(members.get(action.list_member)):
        return None
    arrays = sorted(k for k, v in members.items() if may_be_array(v))
    if not members:
        return f"list_member {action.list_member!r}: the action's answer is not a JSON object with members"
    return (f"list_member {action.list_member!r} is not an array member of the answer; "
            + (f"its array members: {', '.join(arrays)}" if arrays else f"it has none (members: {', '.join(sorted(members))})"))


def enum_target(schema: dict, path: str) -> dict | None:
    """The schema of a parameter (`mode`) or of a member of an object parameter
    (`containers.mode`, through its `$ref` into `$defs`), or None when there is none."""
    head, _, member = path.partition(".")
    spec = schema.get("properties", {}).get(head)
    if not isinstance(spec, dict) or not member:
        return spec if isinstance(spec, dict) else None
    ref = spec.get("$ref", "")
    if ref.startswith("#/$defs/"):
        spec = schema.get("$defs", {}).get(ref.rsplit("/", 1)[-1])
    inner = (spec or {}).get("properties", {}).get(member)
    return inner if isinstance(inner, dict) else None


def with_enums(schema: dict, enums: Mapping[str, Any]) -> tuple[dict, list[str]]:
    """A copy of `schema` with each declared closed set as its parameter's `enum` (a
    nullable string keeps null); the paths applied (one not found is validate's problem)."""
    out = copy.deepcopy(schema)
    applied = []
    for path, rule in enums.items():
        target = enum_target(out, path)
        if target is None or "enum" in target:
            continue
        t = target.get("type")
        target["enum"] = [*rule.values, *([None] if isinstance(t, list) and "null" in t else [])]
        applied.append(path)
    return out, applied
