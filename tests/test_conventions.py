"""Arcane's conventions are declared once, in catalog/conventions.yaml: the engine reads the
declared names and never spells them."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import httpx
import pytest

import interpreter
from interpreter import CATALOG_DIR
from interpreter.build.load import load_file
from interpreter.call.auth import protocol_for
from interpreter.front.names import EXECUTE_TOOL
from interpreter.front.surfaces import make_surface
from tests.helpers import make_dispatcher

pytestmark = pytest.mark.anyio

PACKAGE = Path(interpreter.__file__).resolve().parent
# the grep: `grep -rn -E "refreshToken|pagination|totalItems|activityId|/auth/" interpreter/`
SPELLED = re.compile(r"refreshToken|pagination|totalItems|activityId|/auth/")
# and the other names conventions.yaml declares
DECLARED = re.compile(r"^(expiresAt|mfa_required|totalPages|currentPage|itemsPerPage|grandTotalItems|activity\.get|auth\.login|"
                      r"failedCount|errorCount|errorMessage|auth\.refresh|auth\.logout|environmentId|/environments/\{id\}/?)$")


@cache
def _sections() -> frozenset[str]:
    """conventions.yaml's own keys, at every depth (compile.py reads the file by them:
    `pagination` is a section's key there, not Arcane's member; the values are Arcane's)."""
    keys: set[str] = set()
    stack = [load_file(CATALOG_DIR / "conventions.yaml")[0].data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys |= set(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(keys)


def _engine_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))  # the simulator is its own package (simulator/), outside the engine


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are code, not documentation (docstrings left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_engine_spells_no_convention():
    spelled = [f"{p.relative_to(PACKAGE)}:{line}: {text!r}" for p in _engine_files() for line, text in _code_strings(p)
               if (SPELLED.search(text) or DECLARED.match(text)) and text not in _sections()]
    assert spelled == []


def test_the_engine_spells_no_outcome_member(catalog):
    """The members an answer reports its outcome in (conventions.yaml `outcome`) are read
    through the declared expressions: the modules that read and show an outcome spell none
    of them (common words such as `error` are other things elsewhere, so those modules are
    scanned without the section-key exemption)."""
    rules = catalog.conventions.outcome
    declared = {e.text for e in (*rules.success, *rules.errors, *rules.failed)} | {rules.identity, *rules.identity_domains.values()}
    assert {"success", "errors", "failed", "id"} <= declared
    readers = [PACKAGE / name for name in ("call/outcome.py", "text/render.py", "call/response.py")]
    spelled = [f"{p.name}:{line}: {text!r}" for p in readers for line, text in _code_strings(p) if text in declared]
    assert spelled == []


def test_the_grep_finds_only_generic_code_reading_declared_names():
    """Every line the issue's grep finds, outside docstrings and comments, reads a declared
    name (an attribute of the conventions) and spells none."""
    hits = []
    for path in _engine_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            quoted = [q for q in re.findall(r"[\"']([^\"']*)[\"']", code) if q not in _sections()]
            if any(SPELLED.search(q) for q in quoted):
                hits.append(f"{path.name}:{n}: {line.strip()}")
    assert hits == []


def test_the_engine_spells_no_api_key_header(catalog):
    """The header an API key travels in is the OpenAPI document's apiKey security scheme
    (catalog.api_key_header): no string of the engine's code spells it, in any case."""
    header = catalog.api_key_header.lower()
    assert header
    spelled = [f"{p.relative_to(PACKAGE)}:{line}: {text!r}" for p in _engine_files() for line, text in _code_strings(p)
               if header in text.lower()]
    assert spelled == []


def test_the_scan_sees_a_spelled_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""Reads the pagination."""\nTOTAL = "totalItems"\n', encoding="utf-8")
    assert _code_strings(bad) == [(2, "totalItems")]


def test_the_session_protocol_comes_from_the_declared_actions(catalog):
    session = catalog.conventions.session
    protocol = protocol_for(catalog)
    for role in ("login", "refresh", "logout"):
        action = catalog.all_actions[getattr(session, role)]
        assert getattr(protocol, f"{role}_path") == action.path, role


def test_each_domain_has_its_declared_or_conventional_list_and_get(catalog):
    roles = catalog.conventions.domains
    for name, domain in catalog.domains.items():
        for role, found in (("list", domain.list_action), ("get", domain.get_action)):
            declared = roles.get(name)
            if declared is not None and role in declared.declared:
                assert found == getattr(declared, role), (name, role)
            else:
                assert found == f"{name}.{role}" and found in catalog.all_actions, (name, role)
            assert found is None or found.startswith(name + "."), (name, role)
    assert catalog.domains["build"].list_action == "build.browse" and catalog.domains["system"].list_action is None
    assert sum(d.list_action is None for d in catalog.domains.values()) > 0


def _renamed(catalog):
    """The catalog with Arcane's envelope and pagination declared under other names."""
    conv = catalog.conventions
    envelope = replace(conv.envelope, success="ok", data="payload")
    paging = replace(conv.pagination, member="paging", total_items="count", total_pages="pages", current_page="page")
    return replace(catalog, conventions=replace(conv, envelope=envelope, pagination=paging))


async def _list_text(catalog, body: dict) -> tuple[bool, str, dict | None]:
    dispatcher, _ = make_dispatcher(catalog, lambda r: httpx.Response(200, json=body))
    result = await make_surface("dynamic", catalog, dispatcher).call(EXECUTE_TOOL, {"action": "container.list", "params": {}})
    return result.is_error, result.text, result.structured


async def test_the_engine_reads_the_declared_envelope_and_pagination(catalog):
    items = [{"id": "c1", "names": ["/web"], "state": "running"}]
    other = {"ok": True, "payload": items, "paging": {"count": 7, "pages": 3, "page": 1}}
    error, text, structured = await _list_text(_renamed(catalog), other)
    assert not error and "7 total, page 1 of 3" in text
    assert structured["items"] == items and structured["paging"]["count"] == 7
    # the packaged conventions do not know these names: the same answer is no paginated list
    error, text, _ = await _list_text(catalog, other)
    assert "7 total" not in text
