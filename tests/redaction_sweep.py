"""The preview sweep: a planted secret in every string argument of every state-changing
action, through the real dispatcher in safe mode, and where each one shows up.

For each action, one set of arguments is built from its input schema: every property
filled (nested objects, arrays with one item, ``additionalProperties`` maps with one
member, ``$defs`` followed), every string a unique planted value; a ``oneOf`` of
alternatives (a Blob's ``text`` or ``base64``) gets one set of arguments per alternative.
Strings constrained by ``enum`` cannot carry a secret and get their first value. The
multipart parts Arcane reads as JSON strings are filled with their JSON content (Arcane's
Go types, ``JSON_PARTS``), each inner string planted too.

A field is **masked** when its planted value appears nowhere in the preview (text or
structuredContent), **kept** when it appears and an entry of ``kept:`` in
rules/redaction.yaml covers it, and a **leak** otherwise.

Run ``python -m tests.redaction_sweep`` for the figures and the per-field table.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from interpreter.build.catalog import Catalog
from interpreter.build.schema import PATH
from interpreter.call.dispatch import Call
from interpreter.call.request import path_value_problem
from interpreter.text.redact import path_key
from tests.helpers import make_dispatcher

# The multipart parts sent as JSON strings, with the members Arcane reads from them; none
# is an argument any more (the overlays' json_parts offer their members as arguments, typed
# there, and the engine encodes them), so the table is empty but kept for a part a later
# document adds. Provenance of the members: getarcaneapp/arcane types/project/project.go
# (CreateProject), types/project/workspace.go (CreateProjectWorkspaceManifest,
# WorkspaceUpdateManifest), types/volume/workspace.go (WorkspaceFileChange,
# WorkspaceUpdateManifest).
_FILE_CHANGE = {"operation": "create_file", "relativePath": str, "newName": str, "newParentPath": str}
JSON_PARTS: dict[tuple[str, str], Any] = {}

# Arguments the document leaves untyped (`{}`), filled with the members Docker reads.
# Provenance: moby/moby api/types/swarm (SecretSpec, ConfigSpec, Spec, CAConfig,
# ExternalCA, Driver, Annotations). swarm_service.create's spec is typed by
# swarm_service.update's schema (the same Docker ServiceSpec).
_DRIVER = {"Name": str, "Options": {"x-opt": str}}
UNTYPED: dict[tuple[str, str], Any] = {
    # the workspace manifests' fileChanges, whose items the overlays leave as objects
    ("project.create", "fileChanges"): [_FILE_CHANGE],
    ("project.update_workspace", "fileChanges"): [_FILE_CHANGE],
    ("volume.update_workspace", "fileChanges"): [{**_FILE_CHANGE, "backupId": str}],
    ("swarm_secret.create", "spec"): {"Name": str, "Labels": {"x-label": str}, "Data": str, "Driver": _DRIVER,
                                      "Templating": _DRIVER},
    ("swarm_config.create", "spec"): {"Name": str, "Labels": {"x-label": str}, "Data": str, "Templating": _DRIVER},
    ("swarm.init", "spec"): {"Name": str, "Labels": {"x-label": str},
                             "CAConfig": {"ExternalCAs": [{"Protocol": "cfssl", "URL": str, "Options": {"x-opt": str},
                                                           "CACert": str}],
                                          "SigningCACert": str, "SigningCAKey": str},
                             "TaskDefaults": {"LogDriver": _DRIVER}},
}
UNTYPED[("swarm.update_spec", "spec")] = UNTYPED[("swarm.init", "spec")]
TYPED_BY = {("swarm_service.create", "spec"): ("swarm_service.update", "spec")}

#: Gives the string for a field: (action ID, argument path, the field's schema) -> the
#: string, or None for the default planted value.
Provider = Callable[[str, tuple, dict], "str | None"]


@dataclass
class Field:
    action: str
    path: tuple[str, ...]  # argument path; list items and map values as "*"
    secret: str
    outcome: str = ""  # masked | kept | leak
    reason: str = ""
    shaped: bool = True  # planted in the sweep's shape (False: the field's pattern or length forbids it)
    # a path argument, where the shape is not one path segment: the engine refuses such a
    # value before any preview (invalid_path_value), so the shape cannot reach it at all
    unshapeable: bool = False

    @property
    def pointer(self) -> str:
        return "/" + "/".join(self.path)


@dataclass
class Sweep:
    fields: list[Field] = field(default_factory=list)
    constrained: list[tuple[str, str]] = field(default_factory=list)  # enum strings
    actions: int = 0
    unused_kept: list[tuple[int, str]] = field(default_factory=list)  # (entry, pattern) no field needed
    errors: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for f in self.fields if f.outcome == outcome)


class _Planter:
    def __init__(self, action_id: str, root: dict, fields: list[Field], constrained: list, branch: int,
                 catalog: Catalog, shape: str = "{}", provider: Provider | None = None):
        self.action_id, self.root, self.fields, self.constrained, self.branch = action_id, root, fields, constrained, branch
        self.catalog, self.shape, self.provider = catalog, shape, provider

    def secret(self, path: tuple[str, ...], s: dict | None = None) -> str:
        value = None if self.provider is None else self.provider(self.action_id, path, s or {})
        if value is None:
            value = f"Pl4nt{len(self.fields):04d}Zx"  # fixed width: no planted value holds another
        rule = self.catalog.arguments.get(path[0]) if len(path) == 1 else None
        if rule is not None and not rule.is_id(self.shape.format(value)):
            # a path argument the rules say takes an ID: a name would be looked up through
            # the list action (a request, even in safe mode), so plant an ID-shaped value
            value = f"00000000-0000-4000-8000-{len(self.fields):012d}"
            if rule.is_id(value):
                # it carries no shape, and cannot (a shaped value is a name: a lookup)
                self.fields.append(Field(self.action_id, path, value, shaped=False, unshapeable=True))
                return value
        self.fields.append(Field(self.action_id, path, value))
        return self.shape.format(value)

    def value(self, s: Any, path: tuple[str, ...], refs: frozenset = frozenset()) -> Any:
        ref = s.get("$ref") if isinstance(s, dict) else None
        if ref is not None:
            if ref in refs:  # a recursive type: filled once along each path
                target = self.root["$defs"][ref.rsplit("/", 1)[-1]]
                return {} if "object" in str(target.get("type")) or "properties" in target else None
            return self.value(self.root["$defs"][ref.rsplit("/", 1)[-1]], path, refs | {ref})
        if not isinstance(s, dict):
            return None
        if "oneOf" in s and all(set(b) <= {"required"} for b in s["oneOf"]):
            chosen = s["oneOf"][self.branch % len(s["oneOf"])]["required"]
            others = {r for b in s["oneOf"] for r in b["required"]} - set(chosen)
            s = {**s, "properties": {k: v for k, v in s.get("properties", {}).items() if k not in others}}
        for key in ("anyOf", "oneOf"):
            if key in s and "type" not in s and "properties" not in s:
                return self.value(s[key][0], path, refs)
        t = s.get("type")
        types = t if isinstance(t, list) else [t]
        if "enum" in s:
            if "string" in types or isinstance(s["enum"][0], str):
                self.constrained.append((self.action_id, "/" + "/".join(path)))
            return s["enum"][0]
        if "object" in types or "properties" in s:
            out = {}
            for name, sub in (s.get("properties") or {}).items():
                if isinstance(sub, dict) and sub.get("$ref") in refs and name not in s.get("required", ()):
                    continue  # an optional member of a recursive type: left out
                key = (self.action_id, name) if not path else None
                if key in JSON_PARTS:
                    out[name] = json.dumps(self.json_part(JSON_PARTS[key], (name,)))
                elif key in UNTYPED:
                    out[name] = self.json_part(UNTYPED[key], (name,))
                elif key in TYPED_BY:
                    other = self.catalog.all_actions[TYPED_BY[key][0]].input_schema
                    sub_planter = _Planter(self.action_id, other, self.fields, self.constrained, self.branch, self.catalog,
                                           self.shape, self.provider)
                    out[name] = sub_planter.value(other["properties"][TYPED_BY[key][1]], (name,))
                else:
                    out[name] = self.value(sub, path + (name,), refs)
            extra = s.get("additionalProperties")
            if isinstance(extra, dict) and extra.get("$ref") not in refs:
                out[f"x.key{len(self.fields)}"] = self.value(extra, path + ("*",), refs)
            return out
        if "array" in types:
            items = s.get("items") or {"type": "string"}
            return [] if items.get("$ref") in refs else [self.value(items, path + ("*",), refs)]
        if "string" in types:
            planted = self.secret(path, s)
            refused = self.in_path(path) and path_value_problem(planted) is not None
            if refused or not self.fits(planted, s):  # e.g. a username that may not hold `@`
                planted = self.fields[-1].secret
                self.fields[-1].shaped = False
                self.fields[-1].unshapeable = refused
            planted += "z" * max(0, int(s.get("minLength", 0)) - len(planted))
            if s.get("contentEncoding") == "base64":
                return base64.b64encode(planted.encode()).decode()
            return planted
        if "integer" in types or "number" in types:
            return max(1, int(s.get("minimum", 1)))
        if "boolean" in types:
            return True
        return self.secret(path)

    def in_path(self, path: tuple[str, ...]) -> bool:
        """Whether the argument at `path` is bound into the request path."""
        return len(path) == 1 and any(b.arg == path[0] and b.location == PATH for b in self.catalog.all_actions[self.action_id].bindings)

    @staticmethod
    def fits(value: str, s: dict) -> bool:
        if "maxLength" in s and len(value) > s["maxLength"]:
            return False
        return "pattern" not in s or re.search(s["pattern"], value) is not None

    def json_part(self, model: Any, path: tuple[str, ...]) -> Any:
        if model is str:
            return self.secret(path)
        if isinstance(model, dict):
            return {k: self.json_part(v, path + (k,)) for k, v in model.items()}
        if isinstance(model, list):
            return [self.json_part(model[0], path + ("*",))]
        return model


def arguments(catalog: Catalog, action_id: str, provider: Provider | None = None,
              branch: int = 0) -> tuple[dict, list[Field]]:
    """One set of arguments for an action, every string from ``provider`` (or planted)."""
    a = catalog.all_actions[action_id]
    fields: list[Field] = []
    args = _Planter(a.id, a.input_schema, fields, [], branch, catalog, "{}", provider).value(a.input_schema, ())
    return args, fields


def _branches(schema: Any, root: dict, seen: frozenset = frozenset()) -> int:
    """How many argument sets an action needs: the largest oneOf of alternatives."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if ref:
            if ref in seen:
                return 1
            return _branches(root["$defs"][ref.rsplit("/", 1)[-1]], root, seen | {ref})
        n = len(schema["oneOf"]) if "oneOf" in schema else 1
        return max([n] + [_branches(v, root, seen) for v in schema.values()])
    if isinstance(schema, list):
        return max([1] + [_branches(v, root, seen) for v in schema])
    return 1


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _kept_entry(kept, f: Field) -> tuple[int, int] | None:
    """(entry, pattern) of the first kept entry (redact.Kept) that covers the field."""
    key = path_key(f.path)
    for i, entry in enumerate(kept):
        if entry.actions and not any(fnmatch.fnmatchcase(f.action, a) for a in entry.actions):
            continue
        for j, p in enumerate(entry.patterns):
            if p.regex.fullmatch(key):
                return i, j
    return None


def sweep(catalog: Catalog, shape: str = "{}") -> Sweep:
    """Run the sweep over every state-changing action the catalog serves a preview for.

    ``shape`` wraps each planted value (``"https://u:{}@h/x"`` plants it as a URL's
    password); the planted value itself is what is searched for."""
    def arcane(request):
        # a confirmation question's reads (GET) are sent in safe mode too; they find nothing here
        if request.method != "GET":
            raise AssertionError("safe mode sent a change")
        return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "not found"})

    d, rec = make_dispatcher(catalog, arcane, safe_mode=True)
    kept = catalog.redaction.kept
    used: set[int] = set()
    out = Sweep()

    async def run() -> None:
        for a in catalog.all_actions.values():
            if a.read_only or a.pending:
                continue
            out.actions += 1
            for branch in range(_branches(a.input_schema, a.input_schema)):
                fields: list[Field] = []
                constrained: list = []
                args = _Planter(a.id, a.input_schema, fields, constrained, branch, catalog, shape).value(a.input_schema, ())
                res = await d.dispatch(Call(a.id, args, confirm=True))
                if res.is_error or not (res.structured or {}).get("preview"):
                    out.errors.append(f"{a.id}: {res.text.strip()[:300]}")
                    continue
                shown = res.text + "\n" + "\n".join(_strings(res.structured))
                for f in fields:
                    if f.secret not in shown:
                        f.outcome = "masked"
                    else:
                        hit = _kept_entry(kept, f)
                        f.outcome = "leak" if hit is None else "kept"
                        if hit is not None:
                            f.reason = kept[hit[0]].reason
                            used.add(hit)
                if branch == 0:
                    out.constrained += constrained
                    out.fields += fields
                else:  # later branches only add the fields the first one could not hold
                    have = {(f.action, f.path) for f in out.fields}
                    out.fields += [f for f in fields if (f.action, f.path) not in have]
        assert [r for r in rec.requests if r.method != "GET"] == [], "safe mode sent a change to Arcane"

    asyncio.run(run())
    out.unused_kept = [(i, p.text) for i, e in enumerate(kept) for j, p in enumerate(e.patterns) if (i, j) not in used]
    return out


def report(s: Sweep) -> str:
    lines = [f"actions swept: {s.actions}; string fields swept: {len(s.fields)}; masked: {s.count('masked')}; "
             f"deliberately unmasked (kept): {s.count('kept')}; leaks: {s.count('leak')}; "
             f"enum-constrained strings (cannot hold a secret): {len(s.constrained)}"]
    for f in sorted(s.fields, key=lambda f: (f.outcome != "leak", f.outcome, f.action, f.path)):
        lines.append(f"{f.outcome:7} {f.action} {f.pointer}" + (f"  ({f.reason})" if f.reason else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    from interpreter.build.catalog import build

    result = sweep(build())
    print(report(result))
    for e in result.errors:
        print("ERROR", e)
