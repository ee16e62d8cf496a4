"""The simulator's own data, loaded and checked when a simulator starts.

* the behaviour directory (simulator/data/behaviour/*.yaml, read as one
  document): what every operation does, keyed by Arcane's operationId, the collections
  of the state, the permission each operation checks, error texts, stream frames — each
  non-obvious behaviour with `src:` (the Arcane file it follows) and, where it could not
  be checked, `unverified:`;
* a state (simulator/data/state/*.yaml by default, or one file): API keys,
  login users, faults, and the items of every collection, globally and per environment.

Both are checked against their JSON Schemas (data/schemas/*.schema.json) and then against
the OpenAPI document the simulator serves: an unknown operation, collection or path
parameter, a template member the answer's schema does not have, a permission outside the
catalog, or a state item that breaks its schema is a DataError naming file:line and JSON
pointer. Nothing here reads the engine's catalog or rules.
"""

from __future__ import annotations

import copy
import difflib
import json
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from .document import Operation, path_params
from .errors import DataError, Problem
from .faults import FaultError, parse_faults
from .knobs import KnobError, parse_knobs
from .schemas import DocSchemas
from .template import TemplateError, render
from .yamlfile import Loaded, load_file, problem_at

DATA_DIR = Path(__file__).resolve().parent / "data"
BEHAVIOUR_PATH = DATA_DIR / "behaviour"
DEMO_STATE_PATH = DATA_DIR / "state"
SCHEMA_DIR = DATA_DIR / "schemas"
PRIVATE = "_sim"  # per-item simulator-only data (log text, inspect fields…); never served
KINDS = ("list", "get", "create", "update", "delete", "aggregate", "session", "upload")
NO_COLLECTION = ("session", "upload")  # kinds whose value is not a collection
MERGED_SECTIONS = ("collections", "operations", "data")  # spread over several files (by key); the rest appear once
# the sections of the live side (data/behaviour/live.yaml): WebSockets, pprof, webhook trigger, token exchange
LIVE_SECTIONS = ("websockets", "logs", "container_stats", "system_stats", "terminal", "diagnostics_stream", "pprof",
                 "webhook_trigger", "token_exchange", "uploads")
PAGING = ("docker", "db")


# ---------------------------------------------------------------- behaviour


@dataclass(frozen=True)
class CollectionDef:
    name: str
    scope: str  # "global" or "environment"
    schema: str  # component schema of one item
    key: str  # primary key member (unique within its scope)
    lookup: tuple[str, ...]  # members a path key may equal (a list member: any element)
    prefix: tuple[str, ...]  # members a path key may be a unique prefix of (Docker IDs)
    prefix_strip: str  # stripped from a member before the prefix test ("sha256:")
    trim: str  # characters stripped from both sides before comparing a lookup ("/" of names)
    search: tuple[str, ...]  # members `search` looks into
    sort: dict  # `sort` query value -> member path; the first is the default order
    paging: str  # docker | db
    default_order: str  # asc | desc: the direction of the first binding when a request names no sort
    not_found: str  # the reason text of an unknown key (template: {key})
    ambiguous: str  # the reason text of a prefix that names several items


@dataclass(frozen=True)
class OpBehaviour:
    operation_id: str
    kind: str | None  # one of KINDS, or None for "answer only" behaviour
    collection: str | None
    key: str | None  # path parameter holding the item key
    spec: dict  # the whole YAML entry (templates are rendered per request)

    def get(self, name: str, default: Any = None) -> Any:
        return self.spec.get(name, default)


@dataclass(frozen=True)
class Citation:
    """One cited behaviour of the data: where it is, what it follows, whether it was checked."""

    file: str
    line: int
    pointer: str
    src: str
    unverified: str | None


@dataclass(frozen=True)
class Permissions:
    denied: dict
    admin_required: dict
    catalog: dict[str, str]  # permission -> global | env
    roles: dict[str, frozenset[str]]
    operations: dict[str, dict]  # operationId -> {permission?, admin?, from_param?}
    upload_kinds: dict[str, str]  # upload session kind -> permission
    custom_roles: dict = field(default_factory=dict)  # {collection, permissions}: roles beyond the built-in ones


@dataclass(frozen=True)
class Behaviour:
    sources: tuple[str, ...]
    clock: dict
    envelope: dict
    schema_links: bool
    validation: dict
    openapi: dict
    environments: dict
    pagination: dict
    auth: dict
    rate_limits: tuple[dict, ...]
    echo: dict
    catch_all: dict
    daemon_down: dict
    streams: dict
    live: dict
    websockets: dict
    logs: dict
    container_stats: dict
    system_stats: dict
    terminal: dict
    diagnostics_stream: dict
    pprof: dict
    webhook_trigger: dict
    token_exchange: dict
    uploads: dict
    downloads: dict
    data: dict
    permissions: Permissions
    collections: dict[str, CollectionDef]
    operations: dict[str, OpBehaviour]
    citations: tuple[Citation, ...]
    skipped: tuple[str, ...] = ()  # operations of the data that the served document lacks


@cache
def _file_validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_problems(loaded: Loaded, validator: Draft202012Validator) -> list[Problem]:
    """Every JSON Schema error of a data file, at its line (the most specific branch of a oneOf)."""
    out = []
    for err in validator.iter_errors(loaded.data):
        if err.context:
            fitting = [e for e in err.context if e.validator != "type"] or list(err.context)
            err = min(fitting, key=lambda e: -len(e.absolute_path))
        path = list(err.absolute_path)
        message = err.message if len(err.message) < 200 else err.message[:199] + "…"
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})) - {k for k in err.instance if k.startswith("x-")})
            if extra:
                path.append(extra[0])
                message = f"unknown key {', '.join(map(repr, extra))}; allowed: {', '.join(sorted(err.schema.get('properties', {})))}"
        out.append(problem_at(loaded, path, message, f"schema.{err.validator}"))
    return out


@lru_cache(maxsize=64)
def _parsed(path: str, mtime_ns: int, size: int, schema: str) -> tuple[Loaded | None, tuple[Problem, ...]]:
    """One data file parsed and schema-checked, cached by its path and modification: a
    process that starts many simulators (the tests) parses the data once. The Loaded is
    shared and never changed."""
    loaded, problems = load_file(Path(path))
    if loaded is not None:
        problems = problems + schema_problems(loaded, _file_validator(schema))
    return loaded, tuple(problems)


def data_files(path: Path) -> list[Path]:
    """One file, or every *.yaml of a directory, sorted."""
    return sorted(path.glob("*.yaml")) if path.is_dir() else [path]


def load_files(path: Path, schema: str) -> tuple[list[Loaded], list[Problem]]:
    """One file, or every *.yaml of a directory (sorted), each parsed and schema-checked."""
    files = data_files(path)
    if not files:
        return [], [Problem(str(path), 1, 1, "", "no *.yaml data file here", "sim_no_data")]
    loaded_files, problems = [], []
    for f in files:
        try:
            st = f.stat()
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = (0, 0)  # unreadable: load_file reports it
        loaded, probs = _parsed(str(f), key[0], key[1], schema)
        problems += probs
        if loaded is not None:
            loaded_files.append(loaded)
    return loaded_files, problems


def _merge(files: list[Loaded], problems: list[Problem]) -> tuple[dict, dict]:
    """The files as one document, and where each top-level member came from."""
    merged: dict = {}
    origin: dict = {}  # (section,) or (section, key) -> Loaded
    for loaded in files:
        for section, value in (loaded.data or {}).items():
            if section == "version" or section.startswith("x-"):
                continue
            if section in MERGED_SECTIONS:
                for key, entry in (value or {}).items():
                    if key in merged.setdefault(section, {}):
                        problems.append(problem_at(loaded, [section, key], f"{section}.{key} is defined in {origin[(section, key)].name} already",
                                                   "sim_duplicate"))
                        continue
                    merged[section][key] = entry
                    origin[(section, key)] = loaded
            elif section in merged:
                problems.append(problem_at(loaded, [section], f"section {section!r} is defined in {origin[(section,)].name} already", "sim_duplicate"))
            else:
                merged[section] = value
                origin[(section,)] = loaded
    return merged, origin


def _citations(files: list[Loaded]) -> list[Citation]:
    """Every mapping that carries `src:` is one cited behaviour."""
    out: list[Citation] = []

    def walk(loaded: Loaded, node: Any, where: list) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("src"), str):
                p = problem_at(loaded, where + ["src"], "", "")
                out.append(Citation(loaded.name, p.line, "".join("/" + str(w) for w in where), node["src"], node.get("unverified")))
            for k, v in node.items():
                if not str(k).startswith("x-"):
                    walk(loaded, v, where + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(loaded, v, where + [i])

    for loaded in files:
        walk(loaded, loaded.data, [])
    return out


def _top_keys_problems(loaded: Loaded, where: list, template: Any, schema: Any, doc: DocSchemas, what: str) -> list[Problem]:
    """A template mapping may only name members the target schema has (when it is closed)."""
    schema = doc.deref(schema)
    if not isinstance(template, dict) or not isinstance(schema, dict):
        return []
    if len(template) == 1 and next(iter(template)).startswith("$"):
        return []  # an operator, not a mapping of members
    props = schema.get("properties")
    if props is None or schema.get("additionalProperties") not in (False, None):
        return []
    out = []
    for k, v in template.items():
        if k == PRIVATE:
            continue
        if k not in props:
            out.append(problem_at(loaded, where + [k],
                                  f"{what}: the schema has no member {k!r}; it has {', '.join(sorted(p for p in props if p != '$schema'))}",
                                  "sim_unknown_member"))
        else:
            out += _top_keys_problems(loaded, where + [k], v, props[k], doc, what)
    return out


def data_schema(doc: DocSchemas, response_pointer: str | None) -> Any:
    """The schema of the answer's `data` member when the answer is an envelope, else the answer's."""
    if response_pointer is None:
        return None
    s = doc.deref(doc.resolve(response_pointer))
    props = s.get("properties", {}) if isinstance(s, dict) else {}
    if "success" in props and "data" in props:
        return props["data"]
    return s


def _permissions(spec: dict, loaded: Loaded | None, ops: dict[str, Operation], strict: bool, problems: list[Problem]) -> Permissions:
    catalog = dict(spec.get("catalog") or {})
    roles: dict[str, frozenset[str]] = {}
    for name, perms in (spec.get("roles") or {}).items():
        roles[name] = frozenset(catalog) if perms == "all" else frozenset(perms)
        for p in ([] if perms == "all" else perms):
            if p not in catalog and loaded is not None:
                problems.append(problem_at(loaded, ["permissions", "roles", name], f"unknown permission {p!r}", "sim_unknown_permission"))
    operations = dict(spec.get("operations") or {})
    if loaded is not None:
        for op_id, entry in operations.items():
            perm = entry.get("permission")
            if perm is not None and perm not in catalog:
                problems.append(problem_at(loaded, ["permissions", "operations", op_id, "permission"], f"unknown permission {perm!r}",
                                           "sim_unknown_permission"))
            if op_id not in ops and strict:
                problems.append(problem_at(loaded, ["permissions", "operations", op_id], f"no operation {op_id!r} in the OpenAPI document",
                                           "sim_unknown_operation"))
        if strict:
            for op_id in sorted(set(ops) - set(operations)):
                problems.append(problem_at(loaded, ["permissions", "operations"],
                                           f"operation {op_id!r} has no permission entry (give it {{src: …}} when Arcane checks none)",
                                           "sim_permission_missing"))
    upload_kinds = dict(spec.get("upload_kinds") or {})
    for kind, perm in upload_kinds.items():
        if perm not in catalog and loaded is not None:
            problems.append(problem_at(loaded, ["permissions", "upload_kinds", kind], f"unknown permission {perm!r}", "sim_unknown_permission"))
    return Permissions(spec.get("denied") or {}, spec.get("admin_required") or {}, catalog, roles, operations, upload_kinds,
                       dict(spec.get("custom_roles") or {}))


def _live_problems(data: dict, at, collections: dict, permissions: Permissions, ops: dict[str, Operation], strict: bool) -> list[Problem]:
    """The live side's cross-checks: a route's permission is in the catalog, a log
    source's collection exists, a webhook action names an operation of the document, a
    shell family names a flavour."""
    out: list[Problem] = []
    loaded = at("websockets")
    for i, route in enumerate(data["websockets"]["routes"]):
        if route["permission"] not in permissions.catalog:
            out.append(problem_at(loaded, ["websockets", "routes", i, "permission"], f"unknown permission {route['permission']!r}", "sim_unknown_permission"))
        if route["kind"] == "logs" and "source" not in route:
            out.append(problem_at(loaded, ["websockets", "routes", i], "a logs route names its source (container, project or service)", "sim_missing"))
    for name, source in data["logs"]["sources"].items():
        if source["collection"] not in collections:
            out.append(problem_at(at("logs"), ["logs", "sources", name, "collection"], f"unknown collection {source['collection']!r}",
                                  "sim_unknown_collection"))
    prefix = data["environments"]["path_prefix"].rstrip("/")
    routes = {(o.method, tuple("{}" if seg.startswith("{") else seg for seg in o.path.strip("/").split("/"))) for o in ops.values()}
    for target, actions in data["webhook_trigger"]["actions"].items():
        for action, request in actions.items():
            method, path = request.split(" ", 1)
            shape = tuple("{}" if seg.startswith("{") else seg for seg in (prefix + path).strip("/").split("/"))
            if strict and (method, shape) not in routes:
                out.append(problem_at(at("webhook_trigger"), ["webhook_trigger", "actions", target, action],
                                      f"{method} {prefix}{path} is no operation of the document", "sim_unknown_operation"))
    shells = data["terminal"]["shells"]
    for i, family in enumerate(shells["images"]):
        for path, flavour in family["shells"].items():
            if flavour not in shells["flavours"]:
                out.append(problem_at(at("terminal"), ["terminal", "shells", "images", i, "shells", path], f"unknown shell flavour {flavour!r}",
                                      "sim_unknown_flavour"))
    return out


def load_behaviour(doc: DocSchemas, ops: dict[str, Operation], path: Path = BEHAVIOUR_PATH, *, strict: bool = True) -> Behaviour:
    """The behaviour data checked against its schema and the document. With `strict` (the
    embedded document) an operation the document lacks is an error; otherwise it is
    skipped, so the simulator can serve another version of the document."""
    path = Path(path)
    files, problems = load_files(path, "behaviour.schema.json")
    if problems:
        raise DataError(problems)
    data, origin = _merge(files, problems)
    components = doc.components

    def at(section: str, key: str | None = None) -> Loaded:
        return origin.get((section, key) if key is not None else (section,)) or files[0]

    for section in ("environments", "auth", "catch_all", "daemon_down", "streams", "live", "downloads", "permissions", "pagination", "echo",
                    *LIVE_SECTIONS):
        if section not in data:
            problems.append(Problem(str(path), 1, 1, "", f"no {section!r} section in the behaviour data", "sim_missing_section"))
    if problems:
        raise DataError(problems)

    collections: dict[str, CollectionDef] = {}
    for name, c in (data.get("collections") or {}).items():
        loaded = at("collections", name)
        if c["schema"] not in components:
            if not strict:  # another document without this schema: the collection is not served
                continue
            problems.append(problem_at(loaded, ["collections", name, "schema"], f"no component schema {c['schema']!r} in the OpenAPI document",
                                       "sim_unknown_schema"))
            continue
        collections[name] = CollectionDef(
            name=name, scope=c.get("scope", "environment"), schema=c["schema"], key=c.get("key", "id"),
            lookup=tuple(c.get("lookup") or [c.get("key", "id")]), prefix=tuple(c.get("prefix") or ()),
            prefix_strip=c.get("prefix_strip", ""), trim=c.get("trim", ""), search=tuple(c.get("search") or ()),
            sort=dict(c.get("sort") or {}), paging=c.get("paging", "db"), default_order=c.get("default_order", "asc"),
            not_found=c.get("not_found", f"{name} item not found: {{key}}"), ambiguous=c.get("ambiguous", c.get("not_found", "")),
        )

    env_cfg = data["environments"]
    if env_cfg["collection"] not in data.get("collections", {}):
        problems.append(problem_at(at("environments"), ["environments", "collection"], f"unknown collection {env_cfg['collection']!r}",
                                   "sim_unknown_collection"))

    operations: dict[str, OpBehaviour] = {}
    skipped: list[str] = []
    for op_id, spec in (data.get("operations") or {}).items():
        # with another document, an operation whose data does not fit it (a member or a
        # collection that version lacks) is skipped like one the document lacks
        op_problems: list[Problem] = []
        try:
            loaded = at("operations", op_id)
            where = ["operations", op_id]
            op = ops.get(op_id)
            if op is None:
                if strict:
                    near = difflib.get_close_matches(op_id, list(ops), n=3)
                    op_problems.append(problem_at(loaded, where,
                                               f"no operation {op_id!r} in the OpenAPI document" + (f"; did you mean {', '.join(near)}?" if near else ""),
                                               "sim_unknown_operation"))
                else:
                    skipped.append(op_id)
                continue
            kinds = [k for k in KINDS if k in spec]
            if len(kinds) > 1:
                op_problems.append(problem_at(loaded, where, f"one behaviour kind per operation, not {', '.join(kinds)}", "sim_kinds"))
                continue
            kind = kinds[0] if kinds else None
            coll_name = spec.get(kind) if kind not in (None, *NO_COLLECTION) else None
            coll = collections.get(coll_name) if coll_name else None
            if coll_name and coll is None:
                op_problems.append(problem_at(loaded, where + [kind], f"unknown collection {coll_name!r}; known: {', '.join(sorted(collections))}",
                                           "sim_unknown_collection"))
                continue
            key = spec.get("key")
            if kind in ("get", "update", "delete") and key is None:
                key = op.key_param()
            if key is not None and "{" not in key and key not in path_params(op.path):
                op_problems.append(problem_at(loaded, where + ["key"], f"{key!r} is not a path parameter of {op.method} {op.path}", "sim_unknown_param"))
                continue
            if coll is not None and coll.scope == "environment" and not op.env_scoped:
                op_problems.append(problem_at(loaded, where + [kind],
                                              f"collection {coll_name!r} is per environment but {op_id} is not under {env_cfg['path_prefix']}",
                                              "sim_scope"))
            rs = doc.response_spec(op.path, op.method)
            response_kind = (spec.get("response") or {}).get("kind") or op.declared_kind
            item_schema = doc.component_pointer(coll.schema) if coll else None
            dschema = data_schema(doc, rs.schema_pointer) if response_kind == "json" else None
            if kind == "list":
                resp = doc.deref(doc.resolve(rs.schema_pointer)) if rs.schema_pointer else {}
                items = (resp.get("properties", {}).get("data") or {}).get("items") or {}
                if "pagination" not in resp.get("properties", {}):
                    op_problems.append(problem_at(loaded, where, f"{op_id} does not answer a paginated list", "sim_not_a_list"))
                elif items.get("$ref") and coll and items["$ref"].rsplit("/", 1)[-1] != coll.schema and not spec.get("fit"):
                    op_problems.append(problem_at(loaded, where + ["list"],
                                               f"{op_id} lists {items['$ref'].rsplit('/', 1)[-1]} but collection {coll_name!r} holds {coll.schema}",
                                               "sim_schema_mismatch"))
                if "envelope" in spec and rs.schema_pointer:
                    op_problems += _top_keys_problems(loaded, where + ["envelope"], spec["envelope"], doc.resolve(rs.schema_pointer), doc, "envelope")
            for member in ("set", "item"):
                if member in spec and item_schema:
                    op_problems += _top_keys_problems(loaded, where + [member], spec[member], doc.resolve(item_schema), doc, member)
            for member in ("view", "data"):
                if member in spec and dschema is not None:
                    op_problems += _top_keys_problems(loaded, where + [member], spec[member], dschema, doc, member)
            if kind == "session" and "mfa" in spec["session"] and dschema is not None:
                op_problems += _top_keys_problems(loaded, where + ["session", "mfa"], spec["session"]["mfa"], dschema, doc, "mfa")
            for i, eff in enumerate(spec.get("effects") or []):
                target = next((eff[k] for k in ("create", "update", "delete") if k in eff), None)
                if target not in collections:
                    op_problems.append(problem_at(loaded, where + ["effects", i], f"unknown collection {target!r}", "sim_unknown_collection"))
            operations[op_id] = OpBehaviour(op_id, kind, coll_name, key, spec)
        finally:
            if op_problems and not strict:
                skipped.append(op_id)
                operations.pop(op_id, None)
            else:
                problems += op_problems

    perm_loaded = origin.get(("permissions",))
    permissions = _permissions(data["permissions"], perm_loaded, ops, strict, problems)
    problems += _live_problems(data, at, collections, permissions, ops, strict)
    if problems:
        raise DataError(problems)
    return Behaviour(
        sources=tuple(f.name for f in files),
        clock=data.get("clock", {}), envelope=data.get("envelope", {}), schema_links=bool(data.get("schema_links", False)),
        validation=data.get("validation", {}), openapi=data.get("openapi", {"path": "/api/openapi.json"}),
        environments=env_cfg, pagination=data["pagination"], auth=data["auth"], rate_limits=tuple(data.get("rate_limits") or ()),
        echo=data["echo"], catch_all=data["catch_all"], daemon_down=data["daemon_down"], streams=data["streams"],
        live=data["live"], downloads=data["downloads"], data=data.get("data", {}), permissions=permissions,
        **{section: data[section] for section in LIVE_SECTIONS},
        collections=collections, operations=operations, citations=tuple(_citations(files)), skipped=tuple(skipped),
    )


# ---------------------------------------------------------------- state


@dataclass(frozen=True)
class ApiKey:
    """A key the simulator accepts: its owner, kind, grants, environment binding and expiry."""

    key: str
    name: str
    owner: str  # username
    kind: str = "personal"  # personal (the owner's roles) | scoped (its own grants)
    permissions: tuple[tuple[str, str | None], ...] = ()  # (permission, environmentId or None)
    environment: str | None = None  # a key bound to one environment
    expires_at: int | None = None  # epoch seconds on the simulated clock; None = never
    record: str | None = None  # the api_keys item it belongs to (created through the API)

    def as_dict(self) -> dict:
        return {"name": self.name, "owner": self.owner, "kind": self.kind, "environment": self.environment,
                "expiresAt": self.expires_at, "permissions": [{"permission": p, "environmentId": e} for p, e in self.permissions]}


def api_key_from_spec(spec: dict, default_owner: str) -> ApiKey:
    grants = tuple((g["permission"], g.get("environmentId")) for g in spec.get("permissions") or ())
    return ApiKey(key=spec["key"], name=spec.get("name", spec["key"][:12]), owner=spec.get("owner", default_owner),
                  kind=spec.get("kind", "scoped" if grants else "personal"), permissions=grants,
                  environment=spec.get("environmentId"), expires_at=spec.get("expiresAt"))


@dataclass(frozen=True)
class StateData:
    """A loaded state, `$repeat` entries expanded; the Store keeps a working copy."""

    sources: tuple[str, ...]
    api_key: str
    api_keys: tuple[ApiKey, ...]
    users: tuple[dict, ...]
    faults: dict
    knobs: dict
    global_items: dict  # collection -> [item]
    env_items: dict  # environment id -> collection -> [item]

    def copy_items(self) -> tuple[dict, dict]:
        return copy.deepcopy(self.global_items), copy.deepcopy(self.env_items)


def _expand(loaded: Loaded, where: list, entries: list, problems: list[Problem]) -> list[tuple[list, dict]]:
    """Items of one collection with their pointers; `$repeat` entries rendered `count` times."""
    out = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and "$repeat" in entry:
            for n in range(entry["$repeat"]):
                try:
                    out.append((where + [i, "item"], render(entry["item"], {"n": n + entry.get("start", 1)})))
                except TemplateError as exc:
                    problems.append(problem_at(loaded, where + [i, "item"], str(exc), "sim_template"))
                    break
        else:
            out.append((where + [i], entry))
    return out


def strip_private(item: Any) -> Any:
    if isinstance(item, dict) and PRIVATE in item:
        return {k: v for k, v in item.items() if k != PRIVATE}
    return item


def load_state(behaviour: Behaviour, doc: DocSchemas, path: Path | None = None, *, strict: bool = True) -> StateData:
    """A state file or directory. Items are completed with their schema's missing required
    members (deterministic minimal values), then validated: an item that breaks its schema
    is an error (with `strict`) naming its line."""
    path = Path(path) if path is not None else DEMO_STATE_PATH
    files, problems = load_files(path, "state.schema.json")
    if problems:
        raise DataError(problems)
    api_key = None
    users: list[dict] = []
    key_specs: list[tuple[Loaded, dict]] = []
    faults: dict = {}
    knobs: dict = {}
    global_items: dict = {}
    env_items: dict = {}
    env_coll = behaviour.environments["collection"]
    pending_envs: list[tuple[Loaded, str]] = []
    seen_keys: dict = {}

    def check(loaded: Loaded, where: list, coll_name: str, entries: list, scope: str, bucket: list) -> None:
        coll = behaviour.collections.get(coll_name)
        if coll is None:
            if not strict:  # another document: its behaviour skipped this collection
                return
            problems.append(problem_at(loaded, where, f"unknown collection {coll_name!r}; known: {', '.join(sorted(behaviour.collections))}",
                                       "sim_unknown_collection"))
            return
        if coll.scope != scope:
            problems.append(problem_at(loaded, where, f"collection {coll_name!r} is {coll.scope}, not {scope}", "sim_scope"))
            return
        ptr = doc.component_pointer(coll.schema)
        schema = {"$ref": "#" + ptr}
        seen = seen_keys.setdefault((tuple(where[:-1]), coll_name), set())
        for item_where, item in _expand(loaded, where, entries, problems):
            private = item.get(PRIVATE) if isinstance(item, dict) else None
            filled = doc.fill(strip_private(item), schema) if isinstance(item, dict) else item
            errors = doc.errors(filled, ptr, limit=3)
            if errors and strict:
                for err in errors:
                    problems.append(problem_at(loaded, item_where, f"not a valid {coll.schema}: {err}", "sim_invalid_item"))
            key = filled.get(coll.key) if isinstance(filled, dict) else None
            if key in seen:
                problems.append(problem_at(loaded, item_where, f"duplicate {coll.key} {key!r} in {coll_name}", "sim_duplicate_key"))
            seen.add(key)
            if private is not None:
                filled[PRIVATE] = private
            bucket.append(filled)

    for loaded in files:
        data = loaded.data or {}
        if "api_key" in data:
            if api_key is not None:
                problems.append(problem_at(loaded, ["api_key"], "api_key is set in another state file already", "sim_duplicate"))
            api_key = data["api_key"]
        auth = data.get("auth") or {}
        users += list(auth.get("users") or ())
        key_specs += [(loaded, k) for k in auth.get("api_keys") or ()]
        for key, parse, error, code, into in (("faults", parse_faults, FaultError, "sim_fault", faults),
                                              ("knobs", parse_knobs, KnobError, "sim_knob", knobs)):
            if data.get(key):
                try:
                    parse(data[key])
                except error as exc:
                    problems.append(problem_at(loaded, [key], str(exc), code))
                into.update(data[key])
        for name, entries in (data.get("global") or {}).items():
            check(loaded, ["global", name], name, entries, "global", global_items.setdefault(name, []))
        for env_id, colls in (data.get("environments") or {}).items():
            pending_envs.append((loaded, env_id))
            for name, entries in (colls or {}).items():
                check(loaded, ["environments", env_id, name], name, entries, "environment", env_items.setdefault(env_id, {}).setdefault(name, []))
    if env_coll in behaviour.collections:
        known_envs = {str(e.get(behaviour.collections[env_coll].key)) for e in global_items.get(env_coll, [])}
        known_envs.add(str(behaviour.environments.get("local", "0")))
        for loaded, env_id in pending_envs:
            if env_id not in known_envs:
                problems.append(problem_at(loaded, ["environments", env_id], f"environment {env_id!r} is not in global.{env_coll}", "sim_unknown_environment"))
    if api_key is None:
        problems.append(Problem(str(path), 1, 1, "", "no state file sets api_key", "sim_no_api_key"))
    owner = users[0]["username"] if users else "arcane"
    api_keys = [ApiKey(key=api_key or "", name="bootstrap", owner=owner)]
    for loaded, spec in key_specs:
        k = api_key_from_spec(spec, owner)
        for perm, _ in k.permissions:
            if perm not in behaviour.permissions.catalog:
                problems.append(problem_at(loaded, ["auth", "api_keys"], f"key {k.name!r}: unknown permission {perm!r}", "sim_unknown_permission"))
        api_keys.append(k)
    for u in users:
        for r in u.get("roles") or ():
            if r.get("role") not in behaviour.permissions.roles:
                problems.append(Problem(str(path), 1, 1, "", f"user {u.get('username')!r}: unknown role {r.get('role')!r}", "sim_unknown_role"))
    if problems:
        raise DataError(problems)
    return StateData(
        sources=tuple(f.name for f in files), api_key=api_key, api_keys=tuple(api_keys), users=tuple(users),
        faults=faults, knobs=knobs, global_items=global_items, env_items=env_items,
    )


@dataclass(frozen=True)
class LoadedData:
    """What `check_data` validated: the behaviour and the demo state."""

    behaviour: Behaviour
    state: StateData
    operations: dict[str, Operation] = field(default_factory=dict)
