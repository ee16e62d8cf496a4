"""The shape of the engine's code, read with ast: functions stay short enough to read.

A function is measured from its `def` line to its last line (docstring and comments
included, decorators not), and named `path:Qualified.name` (a nested function under the
one that holds it, a method under its class).

* The build and audit functions that were split into named steps (STEPPED) stay at most
  LIMIT lines: a new check or stage is one more step, not more lines in them.
* A ratchet for the rest: every function of interpreter/ over LIMIT lines is named in
  LONG_FUNCTIONS with its length when it was listed as a ceiling. None may grow past its
  ceiling, no new one may pass LIMIT, and one that no longer does leaves the list, so the
  list only shrinks.
* The call path and the MCP server (dispatch, build_server, confirmation.py) are short
  sequences of named steps, each at most LIMIT lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTERPRETER = ROOT / "interpreter"
LIMIT = 60


def function_lengths(root: Path = INTERPRETER, base: Path = ROOT) -> dict[str, int]:
    """Every function and method under `root`: `path:Qualified.name` (path relative to
    `base`) -> its length in lines (the longest, when a module defines one name twice)."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    key = f"{where}:{name}"
                    out[key] = max(out.get(key, 0), child.end_lineno - child.lineno + 1)
                visit(child, name + ".", where)
            else:
                visit(child, prefix, where)

    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(base).as_posix()
        visit(ast.parse(path.read_text(encoding="utf-8"), rel), "", rel)
    return out


# ---------------------------------------------------------------- the functions split into steps

#: The build and audit functions made a table of checks or a sequence of named steps.
STEPPED = (
    "interpreter/commands/audit.py:audit",
    "interpreter/build/catalog.py:_build",
    "interpreter/build/schema.py:derive",
    "interpreter/build/resource_rules.py:rule_problems",
    "interpreter/build/load.py:load_sources",
    "interpreter/commands/update_spec.py:update_spec",
)


def test_stepped_functions_stay_short() -> None:
    lengths = function_lengths()
    for key in STEPPED:
        assert key in lengths, f"{key} is gone: update STEPPED"
        assert lengths[key] <= LIMIT, f"{key} has {lengths[key]} lines (at most {LIMIT}): add a step instead"


def test_the_steps_are_named_functions() -> None:
    """The sequences the split functions run are module-level tables of named functions."""
    from interpreter.build import resource_rules, schema
    from interpreter.commands import audit

    lengths = function_lengths()
    steps = [*audit.AUDIT_STEPS, *resource_rules.RESOURCE_CHECKS, *(step for _, step in schema.BODY_STEPS)]
    assert len(steps) == len(set(steps)) >= 15
    for step in steps:
        module = step.__module__.replace(".", "/") + ".py"
        key = f"{module}:{step.__qualname__}"
        assert key in lengths and lengths[key] <= LIMIT, key


# ---------------------------------------------------------------- the ratchet on long functions

#: Every function of interpreter/ over LIMIT lines, with its length when listed as its ceiling.
LONG_FUNCTIONS = {
    "interpreter/text/render.py:Renderer._list": 64,
}


def test_no_long_function_grows_and_the_list_only_shrinks() -> None:
    lengths = function_lengths()
    over = {key: n for key, n in lengths.items() if n > LIMIT}
    new = sorted(set(over) - set(LONG_FUNCTIONS))
    assert new == [], f"over {LIMIT} lines and not in LONG_FUNCTIONS (split them): {[(k, over[k]) for k in new]}"
    for key, ceiling in LONG_FUNCTIONS.items():
        assert key in over, f"{key} is no longer over {LIMIT} lines (or is gone): remove it from LONG_FUNCTIONS"
        assert over[key] <= ceiling, f"{key} grew to {over[key]} lines (ceiling {ceiling})"


def test_function_lengths_measures_nested_functions_and_methods(tmp_path: Path) -> None:
    pkg = tmp_path / "interpreter"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "def outer():\n    def inner():\n        return 1\n    return inner\n\n\n"
        "class K:\n    @property\n    def p(self):\n        '''doc'''\n        return 2\n",
        encoding="utf-8",
    )
    rel = "interpreter/m.py"
    assert function_lengths(pkg, tmp_path) == {f"{rel}:outer": 4, f"{rel}:outer.inner": 2, f"{rel}:K.p": 3}


# ---------------------------------------------------------------- the call path and the MCP front

PACKAGE = INTERPRETER
FUNCTION_MAX_LINES = LIMIT


def _functions(relative: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of a module by its qualified name (Class.method, outer.inner)."""
    tree = ast.parse((PACKAGE / relative).read_text(encoding="utf-8"))
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
    for path in sorted((PACKAGE / "front").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "confirmation.py":
            assert "elicit_form" not in text and "InputRequiredResult(" not in text, path.name
