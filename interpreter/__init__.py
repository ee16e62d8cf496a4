"""arcane-mcp: a generic interpreter that serves Arcane's REST API as MCP tools.

The pipeline, one module per stage:

    load      rule and inventory files with line numbers kept, each against its JSON Schema
    validate  cross-reference checks, reported as file:line:col: /pointer: message [code]
    schema    OpenAPI operation -> one flat input schema + bindings
    catalog   the action catalog: names, classification, overlays, filters (load + validate meet here)
    request   the generic REST executor (bindings -> HTTP request)
    response  response shaping by kind (envelope, bare, ndjson, downloads, errors)
    redact    what is secret: previews mask request fields (resources will redact answers)
    preview   safe-mode previews of state-changing requests
    render    the text block of a result
    hints     the next step an error offers
    rank      the find ranker and "did you mean"
    dispatch  the one dispatcher every surface calls
    surfaces  dynamic / meta / individual projections of the catalog
    serve     the MCP server (stdio and streamable HTTP)
    simulator the Arcane simulator used by the tests and `make run`
    cli       the `interp` command

Beside the stages: paths (where catalog/ and rules/ are read and written), names (tool
names on every surface), errors (the exception hierarchy), config (settings), transport
(the httpx boundary), listen (listening sockets), auth (credentials), call_records (the
audit log: one record per call).

Nothing here knows a domain: everything domain-specific is in catalog/ and rules/.
"""

__version__ = "0.1.0"

# Where catalog/ and rules/ are read from, a checkout's or the installed wheel's: one
# resolver (paths.py); these names are its answer, kept here for every stage to import.
from .paths import CATALOG_DIR, RULES_DIR  # noqa: E402

__all__ = ["CATALOG_DIR", "RULES_DIR", "__version__"]
