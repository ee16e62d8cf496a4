"""Building the catalog: catalog/ and rules/ read, checked and compiled into the models every
call reads (once, at start).

Every module, one line each (tests/test_docs.py checks this map against the folder):

    load              rule and inventory files with line numbers kept, layered, each against its JSON Schema
    compile           every loaded file into frozen, typed models (regexes, JMESPath, templates compiled once)
    model             the compiled models themselves, each value with the origin it was written at
    schema            OpenAPI operation -> one flat input schema + bindings
    catalog           the action catalog: names, classification, overlays, filters (the stages meet here)
    validate          cross-reference checks, reported as file:line:col: /pointer: message [code]
    resource_rules    rules/resources.yaml and rules/guides/, compiled, and their checks
    formats           the rule format this release reads and the format changes (rules/schemas/format.yaml)
    warm              the built catalog kept on disk for the next start, keyed by a hash of its inputs
    lazy_dataclass    the dataclass decorator with its methods generated when first used (start time)
    access            what the credential may do: actions its Arcane permissions lack are withdrawn
"""
