"""arcane-mcp: a generic interpreter that serves Arcane's REST API as MCP tools.

The pipeline, one module per stage:

    load      YAML rule and inventory files, with line numbers kept
    validate  JSON Schema + cross-reference checks, reported as file:line:col: /pointer: message [code]
    schema    OpenAPI operation -> one flat input schema + bindings
    catalog   the action catalog: names, classification, overlays, filters
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

Nothing here knows a domain: everything domain-specific is in catalog/ and rules/.
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT_DIR = PACKAGE_DIR.parent
CATALOG_DIR = ROOT_DIR / "catalog"
RULES_DIR = ROOT_DIR / "rules"

__version__ = "0.1.0"
