"""The operator tools: the `interp` command and each of its subcommands.

Every module, one line each (tests/test_docs.py checks this map against the folder):

    cli            the `interp` command, a thin shell over each stage
    audit          `interp audit`: the catalog covers Arcane one to one
    reference      `interp reference`: docs/reference/, generated from the catalog
    rulesdoc       `interp rules-doc`: docs/rules.md, from the rule schemas
    update_spec    `interp update-spec`: import a new Arcane OpenAPI document
    drift          how a live Arcane's OpenAPI document differs from the embedded one
    doctor         `interp doctor`: checks against a live Arcane
    explain        `interp explain`: every decision for one action and where it comes from
    manifest       `interp manifest`: server.json and the server card
    compiled       `interp compile`: compiled/catalog.json, the artefact a start reads
"""
