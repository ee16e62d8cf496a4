"""The shape of the engine's longest paths: the call path and the MCP server are short
sequences of named steps, none longer than FUNCTION_MAX_LINES (ast: end_lineno - lineno + 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import interpreter

ROOT = Path(interpreter.__file__).resolve().parent
FUNCTION_MAX_LINES = 60


def _functions(relative: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of a module by its qualified name (Class.method, outer.inner)."""
    tree = ast.parse((ROOT / relative).read_text(encoding="utf-8"))
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + child.name] = child
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")

    walk(tree, "")
    return found


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def test_call_path_dispatch_is_short():
    dispatch = _functions("call/dispatch.py")["Dispatcher.dispatch"]
    assert _lines(dispatch) <= FUNCTION_MAX_LINES, _lines(dispatch)


def test_call_path_dispatch_steps_are_each_short():
    """dispatch's steps (the methods it calls on self) are each at most FUNCTION_MAX_LINES."""
    functions = _functions("call/dispatch.py")
    called = {c.func.attr for c in ast.walk(functions["Dispatcher.dispatch"])
              if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
              and isinstance(c.func.value, ast.Name) and c.func.value.id == "self"}
    steps = {name: _lines(functions[f"Dispatcher.{name}"]) for name in called if f"Dispatcher.{name}" in functions}
    assert {"_validate", "_confirm", "_resolve", "_run"} <= set(steps)
    assert all(n <= FUNCTION_MAX_LINES for n in steps.values()), steps


def test_front_build_server_is_short():
    build_server = _functions("front/serve.py")["build_server"]
    assert _lines(build_server) <= FUNCTION_MAX_LINES, _lines(build_server)


def test_front_server_steps_are_each_short():
    """Every function of serve.py, build_server's steps with them."""
    long = {name: _lines(f) for name, f in _functions("front/serve.py").items() if _lines(f) > FUNCTION_MAX_LINES}
    assert long == {}


def test_front_confirmation_functions_are_each_short():
    functions = _functions("front/confirmation.py")
    assert {"answer_of", "call_extras", "input_required"} <= set(functions)
    long = {name: _lines(f) for name, f in functions.items() if _lines(f) > FUNCTION_MAX_LINES}
    assert long == {}


def test_front_the_confirmation_protocol_is_in_its_own_module():
    """The back-channel question and the input request are built in confirmation.py only."""
    for path in sorted((ROOT / "front").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "confirmation.py":
            assert "elicit_form" not in text and "InputRequiredResult(" not in text, path.name
