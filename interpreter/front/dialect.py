"""The portable schema dialect (ARCANE_MCP_SCHEMA_DIALECT=portable): every schema a
tools/list answer carries, rewritten for clients whose function declarations take a
single-type subset of OpenAPI 3.0 rather than JSON Schema 2020-12.

The subset is the Schema object of Gemini's function declarations ("a select subset of an
OpenAPI 3.0 schema object": https://ai.google.dev/api/caching#Schema and Vertex AI's
FunctionDeclaration reference, cloud.google.com/vertex-ai/docs/reference/rest/v1beta1/
FunctionDeclaration): type (one name), format, description, nullable, enum, maxItems,
minItems, properties, required, items, minimum, maximum, minLength, maxLength, pattern,
default, anyOf, propertyOrdering. Every other key is dropped; `$ref` into `$defs` is
inlined (a recursive reference is cut to an object after one level); a type list becomes
its first non-null type with `nullable: true` when it named null; `const` becomes a one-value
enum; `oneOf` becomes `anyOf`, and an anyOf whose other branch is `{"type": "null"}` the
branch itself, nullable; a format the subset does not name for its type (uuid, ipv4, uri) is
dropped, and a node naming only members gets `type: object` (only `items`: `array`). An anyOf
branch with no type of its own takes its node's type and nullable (JSON Schema applies both
to the value); a node that still constrains nothing (`{}`, a bare `true`, only a description:
any value) is listed with the type of its default, or as an object, as a cut reference is:
the one place the listing is narrower than the original.

Only what is listed changes: a call's arguments are still validated against the original
schema (serve.ToolList keeps it), and a tool's annotations and `_meta` are left as they are.
The walk keeps its own stack: a schema of any depth is rewritten without recursion.
"""

from __future__ import annotations

from typing import Any

DIALECTS = ("standard", "portable")

ALLOWED = frozenset({
    "type", "format", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required",
    "items", "minimum", "maximum", "minLength", "maxLength", "pattern", "default", "anyOf", "propertyOrdering",
})
_SCALARS = ALLOWED - {"type", "nullable", "enum", "properties", "items", "anyOf"}
# the formats the subset names, by type (others, e.g. uuid or ipv4, are refused there: dropped)
_FORMATS = {"string": {"enum", "date-time"}, "integer": {"int32", "int64"}, "number": {"float", "double"}}
# the kept keys that constrain a value: a node with none of them accepts anything
_CONSTRAINING = ALLOWED - {"description", "nullable", "default", "propertyOrdering"}
_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array"}
_CUT = {"type": "object"}  # what a reference to a definition already being inlined becomes
_MERGE_MAX = 64  # $ref / single-branch anyOf unwrapped at one node, at most


def _ref_name(ref: Any, defs: dict) -> str | None:
    if isinstance(ref, str):
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix) and ref[len(prefix):] in defs:
                return ref[len(prefix):]
    return None


def _is_null(branch: Any) -> bool:
    return isinstance(branch, dict) and branch.get("type") == "null" and len(branch) <= 2 \
        and set(branch) <= {"type", "description"}


def _unwrap(src: dict, defs: dict, seen: frozenset) -> tuple[dict, frozenset, bool]:
    """`src` with its `$ref` inlined and a one-branch (plus null) anyOf merged in, as long as
    either applies: (the node, the definitions now being inlined, nullable)."""
    nullable = False
    for _ in range(_MERGE_MAX):
        if "$ref" in src:
            rest = {k: v for k, v in src.items() if k != "$ref"}
            name = _ref_name(src["$ref"], defs)
            if name is None or name in seen or not isinstance(defs[name], dict):
                src = {**_CUT, **{k: v for k, v in rest.items() if k == "description"}}
                continue
            seen = seen | {name}
            src = {**defs[name], **rest}
            continue
        branches = src.get("anyOf", src.get("oneOf"))
        if isinstance(branches, list):
            kept = [b for b in branches if not _is_null(b)]
            if len(kept) < len(branches):
                nullable = True
            rest = {k: v for k, v in src.items() if k not in ("anyOf", "oneOf")}
            if len(kept) == 1 and isinstance(kept[0], dict) and "type" not in rest:
                src = {**kept[0], **rest}
                continue
            if len(kept) == 0:
                src = rest
                continue
            if len(kept) < len(branches) or "oneOf" in src:
                src = {**rest, "anyOf": kept}
        break
    return src, seen, nullable


def portable(schema: Any) -> dict:
    """The schema in the portable dialect (a new mapping; `schema` is not changed)."""
    if not isinstance(schema, dict):
        return {}
    defs = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update(schema[key])
    out: dict = {}
    stack: list[tuple[Any, dict, frozenset, dict]] = [(schema, out, frozenset(), {})]
    while stack:
        src, dst, seen, inherited = stack.pop()
        if not isinstance(src, dict):
            src = {}  # a boolean schema: anything (true) or, rarely, nothing; listed as a free node
        src, seen, nullable = _unwrap(src, defs, seen)
        if "type" in inherited and "type" not in src:
            src, nullable = {**src, "type": inherited["type"]}, nullable or inherited.get("nullable", False)
        _node(src, dst, nullable)
        _children(src, dst, seen, stack)
        if not set(dst) & _CONSTRAINING:
            dst["type"] = _JSON_TYPES.get(type(dst.get("default")), "object")
    return out


def _single_type(src: dict) -> tuple[str | None, bool]:
    """One node's single type, and whether its type list or `null` type made it nullable."""
    kind, nullable = src.get("type"), False
    if isinstance(kind, list):
        names = [t for t in kind if isinstance(t, str)]
        nullable = "null" in names
        names = [t for t in names if t != "null"]
        kind = names[0] if names else None
    if kind == "null":
        kind, nullable = None, True
    if kind is None and ("properties" in src or "required" in src):
        kind = "object"  # a branch that only names members: the subset wants a type
    elif kind is None and "items" in src:
        kind = "array"
    return (kind if isinstance(kind, str) else None), nullable


def _node(src: dict, dst: dict, nullable: bool) -> None:
    """One node's own keys in the dialect: its type, enum (const as one value, null as
    nullable), nullable and the scalar keys the subset keeps (a format only for its type)."""
    kind, null_type = _single_type(src)
    nullable = nullable or null_type
    if kind is not None:
        dst["type"] = kind
    if "const" in src:
        if src["const"] is None:
            nullable = True
        else:
            dst["enum"] = [src["const"]]
    if isinstance(src.get("enum"), list):
        values = [v for v in src["enum"] if v is not None]
        if len(values) < len(src["enum"]):
            nullable = True
        if values:
            dst["enum"] = values
    if nullable or src.get("nullable") is True:
        dst["nullable"] = True
    for key in _SCALARS:
        if key in src:
            dst[key] = src[key]
    if "format" in dst and dst["format"] not in _FORMATS.get(kind, ()):
        del dst["format"]


def _children(src: dict, dst: dict, seen: frozenset, stack: list) -> None:
    """The node's members, items and anyOf branches: empty mappings in `dst`, filled when
    their turn on the stack comes (no recursion, whatever the depth); a branch is given the
    node's type and nullable, which it takes when it names no type."""
    props = src.get("properties")
    if isinstance(props, dict):
        dst["properties"] = {}
        for name, sub in props.items():
            dst["properties"][name] = child = {}
            stack.append((sub, child, seen, {}))
    if "items" in src:
        dst["items"] = child = {}
        stack.append((src["items"], child, seen, {}))
    if isinstance(src.get("anyOf"), list):
        dst["anyOf"] = []
        for sub in src["anyOf"]:
            dst["anyOf"].append(child := {})
            stack.append((sub, child, seen, {k: dst[k] for k in ("type", "nullable") if k in dst}))


def portable_tool(tool: dict) -> dict:
    """A tool's wire form with its input and output schemas in the portable dialect; every
    other member (annotations, `_meta`, execution) the same object."""
    out = dict(tool)
    for key in ("inputSchema", "outputSchema"):
        if isinstance(out.get(key), dict):
            out[key] = portable(out[key])
    return out


__all__ = ["ALLOWED", "DIALECTS", "portable", "portable_tool"]
