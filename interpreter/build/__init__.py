"""The build: catalog/ and rules/ read, checked and compiled into the models, once at start.

Every module, one line each (tests/test_docs.py checks this map against the folder):

    load            read every file (round-trip YAML with line numbers) and check its schema
    compile         turn each loaded file into frozen, typed models
    model           the models: Origin, Expr, Template and every rule's dataclass
    schema          one flat input schema and its bindings per OpenAPI operation
    resource_rules  the resources' and guides' rules, compiled
    validate        the cross-checks over the compiled sources and the built catalog
    catalog         the catalog: assemble, build, filter (read-only, exclusions)
    artefact        the compiled artefact's JSON format: write it, read it back into the models
    prebuilt        which built catalog a start takes: the artefact, or the operator layer's cache
    access          what a credential may do decides what it sees
    lazy_dataclass  dataclass with its generated methods compiled on first use
"""
