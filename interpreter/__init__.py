"""arcane-mcp: a generic interpreter that serves Arcane's REST API as MCP tools.

Every module, one line each, in the order a request meets them (tests/test_docs.py checks
that this map names every module of the package and nothing else).

Building the catalog (once, at start):

    paths           where catalog/ and rules/ are read (a checkout or the wheel) and written
    load            rule and inventory files with line numbers kept, layered, each against its JSON Schema
    compile         every loaded file into frozen, typed models (regexes, JMESPath, templates compiled once)
    model           the compiled models themselves, each value with the origin it was written at
    schema          OpenAPI operation -> one flat input schema + bindings
    catalog         the action catalog: names, classification, overlays, filters (the stages meet here)
    validate        cross-reference checks, reported as file:line:col: /pointer: message [code]
    resource_rules  rules/resources.yaml and rules/guides/, compiled, and their checks
    warm            the built catalog kept on disk for the next start, keyed by a hash of its inputs
    lazy_dataclass  the dataclass decorator with its methods generated when first used (start time)
    access          what the credential may do: actions its Arcane permissions lack are withdrawn

One call:

    dispatch        the one dispatcher every surface calls: validate, confirm, resolve, run
    confirm         the confirmation question of a destructive call, with its blast radius
    preview         safe-mode previews of state-changing requests (secrets masked)
    handlers        the handler kinds by the name the catalog uses (rest, downloads, captures, …)
    context         what a handler kind gets: the dispatch context and the REST kind
    request         the generic REST executor (bindings -> HTTP request)
    transport       the httpx boundary: every httpx error becomes an UpstreamError here
    auth            which credential a request carries, and keeping a user session alive
    response        response shaping by kind (envelope, bare, ndjson, downloads, errors)
    outcome         what an answer says about its own outcome (a 200 that reports a failure)
    stream          operation streams (JSON-lines progress) read to their end
    transfer        the plain-HTTP handler kinds of the extra routes (webhook, token exchange, …)
    wsclient        the WebSocket handler kinds (log, stats and diagnostics captures; exec)
    live            the live channel (GET /stream) as a bounded capture

The text a model reads:

    render          the text block of a result
    escape          untrusted text made safe to place in Markdown
    redact          what is secret: previews mask request fields, resources redact answers
    hints           the next step an error offers (rules/errors.yaml)
    rank            the find ranker: a free-text query -> actions, best first
    suggest         words and "did you mean" for mistyped action IDs
    memo            one bounded table for the per-process memos
    wire            a result on the MCP wire: text, embedded downloads, resource links

The MCP front:

    surfaces        dynamic / meta / individual projections of the catalog
    names           tool names on every surface, from one place
    serve           the MCP server (stdio and streamable HTTP) over one runtime
    frames          JSON-RPC frames checked before the SDK reads them
    httpmode        HTTP mode for teams: one MCP server per Arcane key, limits and refusals
    listen          listening sockets for the HTTP servers
    resources       the MCP resources (Docker state, guides, the action catalog), redacted
    prompts         MCP prompts and completions
    subscriptions   resource subscriptions over Arcane's live channel
    tasks           long operations as MCP tasks (the tasks extension)
    call_records    audit records: one JSON line per tool call or resource read

The operator tools:

    cli             the `interp` command, a thin shell over each stage
    audit           `interp audit`: the catalog covers Arcane one to one
    reference       `interp reference`: docs/reference/, generated from the catalog
    rulesdoc        `interp rules-doc`: docs/rules.md, from the rule schemas
    update_spec     `interp update-spec`: import a new Arcane OpenAPI document
    drift           how a live Arcane's OpenAPI document differs from the embedded one
    doctor          `interp doctor`: checks against a live Arcane
    explain         `interp explain`: every decision for one action and where it comes from
    manifest        `interp manifest`: server.json and the server card

Shared by all:

    config          every setting, one row each (variable, flag, parser, default)
    errors          the one exception hierarchy

Beside the engine: simulator, the Arcane simulator used by the tests and `make run`.

Nothing here knows a domain: everything domain-specific is in catalog/ and rules/.
"""

__version__ = "0.1.0"

# Where catalog/ and rules/ are read from, a checkout's or the installed wheel's: one
# resolver (paths.py); these names are its answer, kept here for every stage to import.
from .paths import CATALOG_DIR, RULES_DIR  # noqa: E402

__all__ = ["CATALOG_DIR", "RULES_DIR", "__version__"]
