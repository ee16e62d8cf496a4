"""The create/get/list/update/delete families, derived from the catalog and walked through
the engine against the simulator: what a model creates appears in the family's list (and
its get), an update of it succeeds, a delete removes it. The families are every domain whose
inventory has a `create` verb and a removing verb (`delete` or `remove`); the arguments are
derived from each action's input schema (the required members, filled by type), with the
few values a schema cannot say (a reference to something that must exist) given below.

A family the simulator does not model must answer its create with an error (501, "not
simulated"), never a fake success; LEFT_OUT says why each such family is left out, and
docs/simulator.md lists the same families."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.scenarios.harness import dispatch_driver, simulator_target

pytestmark = pytest.mark.anyio

DOCS = Path(__file__).resolve().parent.parent / "docs" / "simulator.md"
CREATE, REMOVE = "create", ("delete", "remove")

# Values a schema cannot derive: a reference to a demo item, or a shape the server checks.
SAMPLES: dict[str, dict] = {
    "webhook": {"targetType": "container", "targetId": "blog-web-1", "actionType": "restart"},
    # a Swarm spec is free JSON to the schema; Docker wants a name (and a service an image)
    "swarm_config": {"spec": {"Name": "families-config", "Labels": {}, "Data": "YQ=="}},
    "swarm_secret": {"spec": {"Name": "families-secret", "Labels": {}, "Data": "YQ=="}},
    "swarm_service": {"spec": {"Name": "families-service", "Labels": {}, "TaskTemplate": {"ContainerSpec": {"Image": "busybox:1.36.1"}, "ForceUpdate": 0}}},
    "volume_backup": {"volumeName": "grafana-data"},  # a backup is of a volume that exists (and is listed by it)
    # Arcane's default password policy ("strong"), an env-variable key, a repository that exists
    "user": {"password": "Fam!ly-Walk-Passw0rd"},
    "variable": {"key": "FAMILY_WALK_VARIABLE", "allEnvironments": True},
    "gitops_sync": {"repositoryId": "2d4f6a8c-0e2b-4d6f-8a0c-2e4b6d8f0a21"},
}

# Families the simulator does not walk, and why (docs/simulator.md's list is checked against it).
LEFT_OUT: dict[str, str] = {
    "s3_destination": "its create tests the endpoint first, which the simulator cannot reach (answers 400)",
}


def families(catalog) -> dict[str, dict[str, str]]:
    """domain -> {verb: action ID} for every domain with a create and a removing verb."""
    verbs: dict[str, dict[str, str]] = {}
    for aid in catalog.actions:
        domain, _, verb = aid.partition(".")
        verbs.setdefault(domain, {})[verb] = aid
    return {d: v for d, v in sorted(verbs.items()) if CREATE in v and any(r in v for r in REMOVE)}


def fill(schema: dict, name: str, prefix: str, root: dict, depth: int = 0) -> object:
    """A value for a required member, by its schema: a unique text for names, the first enum
    value, a small number, false, objects with their own required members, arrays with as
    many items as they must hold."""
    if depth > 8:
        return None
    while isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        target = root
        for part in schema["$ref"][2:].split("/"):
            target = target.get(part) or {}
        schema = target
    for combined in ("allOf", "anyOf", "oneOf"):
        if schema.get(combined):
            return fill(schema[combined][0], name, prefix, root, depth + 1)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: fill(props.get(k) or {}, k, prefix, root, depth + 1) for k in schema.get("required") or []}
    if kind == "array":
        return [fill(schema.get("items") or {}, name, prefix, root, depth + 1) for _ in range(int(schema.get("minItems") or 0))]
    if kind == "integer" or kind == "number":
        return max(1, int(schema.get("minimum") or 1))
    if kind == "boolean":
        return False
    if schema.get("format") == "uri" or re.search(r"(?i)url$", name):
        return "https://registry.example.com"
    return f"{prefix}-{name.lower()}"[: int(schema.get("maxLength") or 200)]


def arguments(catalog, action_id: str, prefix: str, given: dict) -> dict:
    schema = catalog.actions[action_id].input_schema
    props = schema.get("properties") or {}
    out = {k: fill(props.get(k) or {}, k, prefix, schema) for k in schema.get("required") or [] if k not in given}
    return {**out, **given}


def key_param(catalog, action_id: str) -> str | None:
    """The parameter naming one item (the removing action's required ID-like member)."""
    required = catalog.actions[action_id].input_schema.get("required") or []
    ids = [r for r in required if r != "environmentId"]
    return ids[0] if len(ids) == 1 else None


def item_key(structured: dict | None) -> str | None:
    if not isinstance(structured, dict):
        return None
    item = structured.get("item") if isinstance(structured.get("item"), dict) else structured
    for member in ("id", "ID", "name", "Name"):
        if isinstance(item.get(member), str | int) and str(item.get(member)):
            return str(item[member])
    # a mutation answer that wraps its record beside other members (a variable: {variable, syncResults})
    wrapped = [v for v in item.values() if isinstance(v, dict) and any(v.get(m) for m in ("id", "name"))]
    return item_key(wrapped[0]) if len(wrapped) == 1 else None


def listed_keys(structured: dict | None) -> set[str]:
    items = (structured or {}).get("items") or []
    return {str(i.get(m)) for i in items if isinstance(i, dict) for m in ("id", "name") if i.get(m) is not None}


async def list_all(driver, catalog, action_id: str, sample: dict) -> set[str]:
    """The keys of one list, asked for a page large enough to hold the demo data and the new
    item (with the sample's values of the list's required members: a volume's backups)."""
    schema = catalog.actions[action_id].input_schema
    paged = "limit" in (schema.get("properties") or {})
    given = {k: v for k, v in sample.items() if k in (schema.get("required") or [])}
    listed = await driver.call(action_id, {**given, **({"limit": 100} if paged else {})})
    assert not listed.is_error, f"{action_id}: {listed.text}"
    return listed_keys(listed.structured)


@pytest.fixture(scope="module")
def target(sim, catalog):
    return simulator_target(sim, catalog, image="busybox:1.36.1")


def test_the_families_are_derived_from_the_catalog(catalog):
    found = families(catalog)
    assert len(found) >= 15, sorted(found)
    assert set(LEFT_OUT) <= set(found), "LEFT_OUT names a family the catalog does not have"


@pytest.mark.parametrize("domain", sorted(families(__import__("interpreter.build.catalog", fromlist=["build"]).build())))
async def test_family_walk(target, catalog, domain):
    fam = families(catalog)[domain]
    remove = next(fam[r] for r in REMOVE if r in fam)
    prefix = target.prefix()
    async with dispatch_driver(target) as driver:
        created = await driver.call(fam[CREATE], arguments(catalog, fam[CREATE], prefix, SAMPLES.get(domain, {})), confirm=True)
        if domain in LEFT_OUT:
            assert created.is_error, f"{domain}: left out, but its create answered a success: {created.text}"
            return
        assert not created.is_error, f"{domain}.create: {created.text}"
        key = item_key(created.structured)
        assert key, f"{domain}.create answered no id or name: {created.structured}"
        param = key_param(catalog, remove)
        assert param, f"{remove} has no single key parameter"
        try:
            if "list" in fam:
                assert key in await list_all(driver, catalog, fam["list"], SAMPLES.get(domain, {})), f"{domain}: {key} not in its list"
            if "get" in fam and key_param(catalog, fam["get"]):
                got = await driver.call(fam["get"], {key_param(catalog, fam["get"]): key})
                assert not got.is_error and item_key(got.structured) in (key, None) or key in got.text, f"{domain}.get: {got.text}"
            if "update" in fam:  # keyed like the removing action (the same item's ID parameter)
                required = catalog.actions[fam["update"]].input_schema.get("required") or []
                upd_key = param if param in required else key_param(catalog, fam["update"])
                assert upd_key, f"{fam['update']} has no key parameter"
                changed = await driver.call(fam["update"], arguments(catalog, fam["update"], prefix + "-changed", {upd_key: key}),
                                            confirm=True)
                assert not changed.is_error, f"{fam['update']}: {changed.text}"
        finally:
            gone = await driver.call(remove, {param: key}, confirm=True)
        assert not gone.is_error, f"{remove}: {gone.text}"
        if "list" in fam:
            assert key not in await list_all(driver, catalog, fam["list"], SAMPLES.get(domain, {})), f"{domain}: {key} still listed after {remove}"


def test_docs_list_the_families_left_out():
    tokens = MarkdownIt().parse(DOCS.read_text(encoding="utf-8"))
    inside, listed = False, set()
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            inside = tokens[i + 1].content.startswith("Families left out")
        elif inside and t.type == "inline" and tokens[i - 2].type == "list_item_open":
            m = re.match(r"`([a-z0-9_]+)`", t.content)
            if m:
                listed.add(m.group(1))
    assert listed == set(LEFT_OUT)


def _state_changing_section() -> list:
    tokens = MarkdownIt().enable("table").parse(DOCS.read_text(encoding="utf-8"))
    start = next(i for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2"
                 and tokens[i + 1].content == "State-changing operations")
    end = next(i for i, t in enumerate(tokens) if i > start and t.type == "heading_open" and t.tag == "h2")
    return tokens[start:end]


def _writes() -> dict[str, str]:
    """operationId -> simulated | not_simulated for every operation whose method is not GET, read for the others."""
    import json

    from simulator import check_data

    behaviour, _ = check_data()
    doc = json.loads((Path(__file__).resolve().parent.parent / "catalog" / "arcane.openapi.json").read_text(encoding="utf-8"))
    out = {}
    for item in doc["paths"].values():
        for method, op in item.items():
            b = behaviour.operations.get(op["operationId"])
            if method in ("post", "put", "patch", "delete"):
                out[op["operationId"]] = "simulated" if b is not None and not b.get("not_simulated") else "not_simulated"
            elif method == "get":
                out[op["operationId"]] = "read"
    return out


def test_docs_count_the_state_changing_operations():
    writes = {k: v for k, v in _writes().items() if v != "read"}
    simulated = sum(1 for v in writes.values() if v == "simulated")
    strong = [c.content for t in _state_changing_section() for i, c in enumerate(t.children or [])
              if c.type == "text" and i and t.children[i - 1].type == "strong_open"]
    assert f"{simulated} are simulated and {len(writes) - simulated} answer 501" in strong, strong


def test_docs_tables_agree_with_the_data():
    """A row whose text starts "simulated" names a modelled write, one that starts "not
    simulated" a write that answers 501; every row names a write of the document."""
    writes = _writes()
    tokens = _state_changing_section()
    rows, cells = [], []
    for t in tokens:
        if t.type == "tr_open":
            cells = []
        elif t.type == "inline" and cells is not None:
            cells.append(t.content)
        elif t.type == "tr_close" and len(cells) >= 2 and cells[0].startswith("`"):
            rows.append((cells[0], cells[1]))
    assert len(rows) >= 60
    for first, text in rows:
        for op_id in re.findall(r"`([A-Za-z0-9-]+)`", first):
            assert op_id in writes, f"docs/simulator.md names {op_id}, not an operation of the document"
            if text.startswith("not simulated"):
                assert writes[op_id] == "not_simulated", f"{op_id}: the docs say not simulated"
            elif text.startswith("simulated"):
                assert writes[op_id] == "simulated", f"{op_id}: the docs say simulated"
