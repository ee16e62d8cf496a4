"""arcane-mcp: a generic interpreter that serves Arcane's REST API as MCP tools.

The engine in stages, one package each, in the order a request meets them; each package's
own docstring maps its modules (tests/test_docs.py checks both maps against the folders).

    build       catalog/ and rules/ read, checked and compiled into the models (once, at start)
    call        one call: dispatch, confirmation, the request, the handler kinds, the answer
    text        the text a model reads: render, escape, redact, hints, the find ranker
    front       the MCP front: surfaces, the server (stdio, HTTP), resources, prompts, tasks
    commands    the operator tools: the `interp` command and its subcommands

Shared by all:

    config      every setting, one row each (variable, flag, parser, default)
    errors      the one exception hierarchy
    memo        one bounded table for the per-process memos
    paths       where catalog/ and rules/ are read (a checkout or the wheel) and written

The MCP Apps views' static assets (HTML, CSS, JS) are in views/ (front/apps.py serves them).

Beside the engine: simulator, the Arcane simulator used by the tests and `make run`.

Nothing here knows a domain: everything domain-specific is in catalog/ and rules/.
"""

__version__ = "0.1.0"

# Where catalog/ and rules/ are read from, a checkout's or the installed wheel's: one
# resolver (paths.py); these names are its answer, kept here for every stage to import.
from .paths import CATALOG_DIR, RULES_DIR  # noqa: E402

__all__ = ["CATALOG_DIR", "RULES_DIR", "__version__"]
