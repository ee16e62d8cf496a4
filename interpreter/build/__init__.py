"""Building the catalog: catalog/ and rules/ read, checked and compiled into the models every
call reads; a start reads them from the compiled artefact (compiled/catalog.json).

Every module, one line each (tests/test_docs.py checks this map against the folder):

    load              rule and inventory files with line numbers kept, layered, each against its JSON Schema
    formats           the rule format this release reads and the format changes (rules/schemas/format.yaml)
    compile           every loaded file into frozen, typed models
    model             the compiled models themselves, each value with the origin it was written at
    schema            OpenAPI operation -> one flat input schema + bindings
    catalog           the action catalog: assemble, build, filter (read-only, exclusions)
    validate          cross-reference checks, reported as file:line:col: /pointer: message [code]
    resource_rules    rules/resources.yaml and rules/guides/, compiled, and their checks
    view_rules        rules/views/ (MCP Apps views), compiled, and their checks
    artefact          the compiled artefact's JSON format: write it, read it back into the models
    prebuilt          which built catalog a start takes: the artefact, or the operator layer's cache
    lazy_dataclass    the dataclass decorator with its methods generated when first used (start time)
    access            what the credential may do: actions its Arcane permissions lack are withdrawn
"""
