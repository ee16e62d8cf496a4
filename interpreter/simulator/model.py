"""The simulator's two data files, loaded and checked.

* the behaviour file (catalog/simulator/behaviour.yaml): which collections exist, which
  operation reads or changes which collection and how, error texts, stream lines;
* a state file (catalog/simulator/demo-state.yaml by default): the API key, login users,
  faults, and the items of every collection, globally and per environment.

Both are checked against their JSON Schemas (catalog/schemas/simulator-*.schema.json)
and then against the catalog and the OpenAPI document: an unknown action, collection or
path parameter, a template member the answer's schema does not have, or a state item
that breaks its schema is a RuleError naming file:line and JSON pointer, like every other
rule file of the project.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from .. import CATALOG_DIR
from ..errors import Problem, RuleError
from ..load import Loaded, load_file, problem_at, schema_problems
from .faults import FaultError, parse_faults
from .schemas import DocSchemas
from .template import TemplateError, render

SIM_DIR = CATALOG_DIR / "simulator"
BEHAVIOUR_PATH = SIM_DIR / "behaviour.yaml"
DEMO_STATE_PATH = SIM_DIR / "demo-state.yaml"
SCHEMA_DIR = CATALOG_DIR / "schemas"
PRIVATE = "_sim"  # per-item simulator-only data (log text…); never served
KINDS = ("list", "get", "create", "update", "delete", "aggregate", "session")
PATH_PARAM = re.compile(r"\{([^{}]+)\}")


# ---------------------------------------------------------------- behaviour


@dataclass(frozen=True)
class CollectionDef:
    name: str
    scope: str  # "global" or "environment"
    schema: str  # component schema of one item
    key: str  # primary key member (unique within its scope)
    lookup: tuple[str, ...]  # members a path key may equal (a list member: any element)
    trim: str  # characters stripped from both sides before comparing a lookup
    search: tuple[str, ...]  # members `search` looks into
    sort: dict  # `sort` query value -> member path
    not_found: dict  # {status, detail} for an unknown key


@dataclass(frozen=True)
class OpBehaviour:
    action_id: str
    kind: str | None  # one of KINDS, or None for "answer only" behaviour
    collection: str | None
    key: str | None  # path parameter holding the item key
    spec: dict  # the whole YAML entry (templates are rendered per request)

    def get(self, name: str, default: Any = None) -> Any:
        return self.spec.get(name, default)


@dataclass(frozen=True)
class Behaviour:
    source: str
    environments: dict
    pagination: dict
    envelope: dict
    schema_links: bool
    auth: dict
    validation: dict
    catch_all: dict
    daemon_down: dict
    streams: dict
    live: dict
    downloads: dict
    clock: dict
    collections: dict[str, CollectionDef]
    operations: dict[str, OpBehaviour]


def _file_validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def path_params(path: str) -> list[str]:
    return PATH_PARAM.findall(path)


def env_param(action, env_arg: str = "environmentId") -> str | None:
    """The path parameter of an environment-scoped action that names the environment."""
    for b in action.bindings:
        if b.arg == env_arg and b.location == "path":
            return b.wire
    return None


def default_key_param(action, env_arg: str = "environmentId") -> str | None:
    env = env_param(action, env_arg)
    params = [p for p in path_params(action.path) if p != env]
    return params[-1] if params else None


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
        if k not in props:
            out.append(problem_at(loaded, where + [k], f"{what}: the schema has no member {k!r}; it has {', '.join(sorted(p for p in props if p != '$schema'))}", "sim_unknown_member"))
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


def _load_checked(path: Path, schema: str):
    """A simulator data file, parsed and checked against its schema (RuleError if not)."""
    loaded, problems = load_file(path)
    if loaded is None:
        raise RuleError(problems)
    problems = schema_problems(loaded, _file_validator(schema))
    if problems:
        raise RuleError(problems)
    return loaded


def load_behaviour(catalog, doc: DocSchemas, path: Path = BEHAVIOUR_PATH) -> Behaviour:
    loaded = _load_checked(path, "simulator-behaviour.schema.json")
    problems: list = []  # cross-checks against the document, collected before failing
    data = loaded.data
    components = doc.components

    collections: dict[str, CollectionDef] = {}
    for name, c in data["collections"].items():
        if c["schema"] not in components:
            problems.append(problem_at(loaded, ["collections", name, "schema"], f"no component schema {c['schema']!r} in the OpenAPI document", "sim_unknown_schema"))
            continue
        nf = c.get("not_found") or {}
        collections[name] = CollectionDef(
            name=name, scope=c.get("scope", "environment"), schema=c["schema"], key=c.get("key", "id"),
            lookup=tuple(c.get("lookup") or [c.get("key", "id")]), trim=c.get("trim", ""),
            search=tuple(c.get("search") or ()), sort=dict(c.get("sort") or {}),
            not_found={"status": nf.get("status", 404), "detail": nf.get("detail", f"{name} item not found: {{key}}")},
        )

    env_cfg = data["environments"]
    if env_cfg["collection"] not in data["collections"]:
        problems.append(problem_at(loaded, ["environments", "collection"], f"unknown collection {env_cfg['collection']!r}", "sim_unknown_collection"))

    operations: dict[str, OpBehaviour] = {}
    for aid, spec in (data.get("operations") or {}).items():
        where = ["operations", aid]
        action = catalog.all_actions.get(aid)
        if action is None or action.operation_id is None:
            near = catalog.closest(aid, pool=[a for a, x in catalog.all_actions.items() if x.operation_id])
            problems.append(problem_at(loaded, where, f"unknown action {aid!r} (or not an OpenAPI operation)" + (f"; did you mean {', '.join(near)}?" if near else ""), "sim_unknown_action"))
            continue
        kinds = [k for k in KINDS if k in spec]
        if len(kinds) > 1:
            problems.append(problem_at(loaded, where, f"one behaviour kind per operation, not {', '.join(kinds)}", "sim_kinds"))
            continue
        kind = kinds[0] if kinds else None
        coll_name = spec.get(kind) if kind not in (None, "session") else None
        coll = collections.get(coll_name) if coll_name else None
        if coll_name and coll is None:
            problems.append(problem_at(loaded, where + [kind], f"unknown collection {coll_name!r}; known: {', '.join(sorted(data['collections']))}", "sim_unknown_collection"))
            continue
        key = spec.get("key")
        if kind in ("get", "update", "delete") and key is None:
            key = default_key_param(action, catalog.env_arg)
        if key is not None and key not in path_params(action.path):
            problems.append(problem_at(loaded, where + ["key"], f"{key!r} is not a path parameter of {action.method} {action.path}", "sim_unknown_param"))
            continue
        if coll is not None and coll.scope == "environment" and not action.env_scoped:
            problems.append(problem_at(loaded, where + [kind], f"collection {coll_name!r} is per environment but {aid} is not under /environments/{{id}}/", "sim_scope"))
        rs = doc.response_spec(action.path, action.method)
        item_schema = doc.component_pointer(coll.schema) if coll else None
        dschema = data_schema(doc, rs.schema_pointer) if action.response_kind == "json" else None
        if kind == "list":
            resp = doc.deref(doc.resolve(rs.schema_pointer)) if rs.schema_pointer else {}
            items = (resp.get("properties", {}).get("data") or {}).get("items") or {}
            if "pagination" not in resp.get("properties", {}):
                problems.append(problem_at(loaded, where, f"{aid} does not answer a paginated list", "sim_not_a_list"))
            elif items.get("$ref") and coll and items["$ref"].rsplit("/", 1)[-1] != coll.schema:
                problems.append(problem_at(loaded, where + ["list"], f"{aid} lists {items['$ref'].rsplit('/', 1)[-1]} but collection {coll_name!r} holds {coll.schema}", "sim_schema_mismatch"))
            if "envelope" in spec and rs.schema_pointer:
                problems += _top_keys_problems(loaded, where + ["envelope"], spec["envelope"], doc.resolve(rs.schema_pointer), doc, "envelope")
        for member in ("set", "item"):
            if member in spec and item_schema:
                problems += _top_keys_problems(loaded, where + [member], spec[member], doc.resolve(item_schema), doc, member)
        for member in ("view", "data"):
            if member in spec and dschema is not None:
                problems += _top_keys_problems(loaded, where + [member], spec[member], dschema, doc, member)
        if kind == "session" and "mfa" in spec["session"] and dschema is not None:
            problems += _top_keys_problems(loaded, where + ["session", "mfa"], spec["session"]["mfa"], dschema, doc, "mfa")
        for i, eff in enumerate(spec.get("effects") or []):
            target = next((eff[k] for k in ("create", "update", "delete") if k in eff), None)
            if target not in collections:
                problems.append(problem_at(loaded, where + ["effects", i], f"unknown collection {target!r}", "sim_unknown_collection"))
        operations[aid] = OpBehaviour(aid, kind, coll_name, key, spec)

    if problems:
        raise RuleError(problems)
    return Behaviour(
        source=loaded.name,
        environments=env_cfg, pagination=data.get("pagination", {}), envelope=data.get("envelope", {}),
        schema_links=bool(data.get("schema_links", False)), auth=data["auth"], validation=data.get("validation", {}),
        catch_all=data["catch_all"], daemon_down=data["daemon_down"], streams=data["streams"], live=data["live"],
        downloads=data["downloads"], clock=data.get("clock", {}), collections=collections, operations=operations,
    )


# ---------------------------------------------------------------- state


@dataclass(frozen=True)
class StateData:
    """A loaded state file, `$repeat` entries expanded; the Store keeps a working copy."""

    source: str
    api_key: str
    users: tuple[dict, ...]
    faults: dict
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


def load_state(behaviour: Behaviour, doc: DocSchemas, path: Path | None = None) -> StateData:
    path = Path(path) if path is not None else DEMO_STATE_PATH
    loaded = _load_checked(path, "simulator-state.schema.json")
    problems: list = []
    data = loaded.data
    try:
        parse_faults(data.get("faults"))
    except FaultError as exc:
        problems.append(problem_at(loaded, ["faults"], str(exc), "sim_fault"))

    def check(where: list, coll_name: str, entries: list, scope: str) -> list[dict]:
        coll = behaviour.collections.get(coll_name)
        if coll is None:
            problems.append(problem_at(loaded, where, f"unknown collection {coll_name!r}; known: {', '.join(sorted(behaviour.collections))}", "sim_unknown_collection"))
            return []
        if coll.scope != scope:
            problems.append(problem_at(loaded, where, f"collection {coll_name!r} is {coll.scope}, not {scope}", "sim_scope"))
            return []
        ptr = doc.component_pointer(coll.schema)
        items, seen = [], set()
        for item_where, item in _expand(loaded, where, entries, problems):
            for err in doc.errors(strip_private(item), ptr, limit=3):
                problems.append(problem_at(loaded, item_where, f"not a valid {coll.schema}: {err}", "sim_invalid_item"))
            key = item.get(coll.key) if isinstance(item, dict) else None
            if key in seen:
                problems.append(problem_at(loaded, item_where, f"duplicate {coll.key} {key!r} in {coll_name}", "sim_duplicate_key"))
            seen.add(key)
            items.append(item)
        return items

    global_items = {name: check(["global", name], name, entries, "global") for name, entries in (data.get("global") or {}).items()}
    env_coll = behaviour.environments["collection"]
    known_envs = {str(e.get(behaviour.collections[env_coll].key)) for e in global_items.get(env_coll, [])} if env_coll in behaviour.collections else set()
    known_envs.add(str(behaviour.environments.get("local", "0")))
    env_items = {}
    for env_id, colls in (data.get("environments") or {}).items():
        if env_id not in known_envs:
            problems.append(problem_at(loaded, ["environments", env_id], f"environment {env_id!r} is not in global.{env_coll}", "sim_unknown_environment"))
        env_items[env_id] = {name: check(["environments", env_id, name], name, entries, "environment") for name, entries in (colls or {}).items()}
    if problems:
        raise RuleError(problems)
    return StateData(
        source=loaded.name, api_key=data["api_key"], users=tuple(data.get("auth", {}).get("users") or ()),
        faults=data.get("faults") or {}, global_items=global_items, env_items=env_items,
    )
