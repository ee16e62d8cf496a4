"""One call: from a tool's arguments to Arcane's answer, whatever the handler kind.

Every module, one line each (tests/test_docs.py checks this map against the folder):

    dispatch     the one dispatcher every surface calls: validate, confirm, resolve, run
    confirm      the confirmation question of a destructive call, with its blast radius
    preview      safe-mode previews of state-changing requests (secrets masked)
    kinds        the registry of kinds: each handler and response kind once, with its handler and shaper
    handlers     the handler kinds by the name the catalog uses (rest, downloads, captures, …)
    context      what a handler kind gets: the dispatch context and the REST kind
    request      the generic REST executor (bindings -> HTTP request)
    reader       the one place a request is sent, and the one internal read (deadline, errors)
    transport    the httpx boundary: every httpx error becomes an UpstreamError here
    auth         which credential a request carries, and keeping a user session alive
    response     response shaping by kind (envelope, bare, ndjson, downloads, errors)
    outcome      what an answer says about its own outcome (a 200 that reports a failure)
    stream       operation streams (progress frames) read to their end
    framing      stream framings by Content-Type: JSON lines, server-sent events (bounded decoders)
    transfer     the plain-HTTP handler kinds of the extra routes (webhook, token exchange, …)
    wsclient     the WebSocket handler kinds (log, stats and diagnostics captures; exec)
    live         the live channel (GET /stream) as a bounded capture
"""

import sys as _sys

# httpx is first imported here, without its command-line module: httpx/__init__ tries
# `from ._main import main`, which imports pygments' lexer tables (~2 ms of every start)
# before failing without rich. The engine never runs httpx's command line; with the module
# withheld, httpx defines its stand-in `main` at once. Only while httpx itself is imported.
if "httpx" not in _sys.modules and "httpx._main" not in _sys.modules:
    _sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx  # noqa: F401
    finally:
        if _sys.modules.get("httpx._main", False) is None:
            del _sys.modules["httpx._main"]
