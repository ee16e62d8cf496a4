"""The MCP front: the surfaces, the server on stdio and streamable HTTP, resources, prompts,
tasks and subscriptions.

Every module, one line each (tests/test_docs.py checks this map against the folder):

    surfaces         dynamic / meta / individual projections of the catalog
    dialect          the portable schema dialect: listed schemas without type arrays, $ref or keys single-type dialects refuse
    names            tool names on every surface, from one place
    serve            the MCP server (stdio and streamable HTTP) over one runtime
    confirmation     the confirmation protocol on the wire, both eras (elicitation, input requests answered once)
    frames           JSON-RPC frames checked before the SDK reads them
    httpmode         HTTP mode for teams: one MCP server per Arcane key, limits and refusals
    listen           listening sockets for the HTTP servers
    resources        the MCP resources (Docker state, guides, the action catalog), redacted
    prompts          MCP prompts and completions
    subscriptions    resource subscriptions over Arcane's live channel
    tasks            long operations as MCP tasks (the tasks extension)
    apps             MCP Apps views (the ui extension): tools' _meta.ui, ui:// documents, results' view models
    viewmodel        a result's view model, projected from its redacted structuredContent by its view rule
    call_records     audit records: one JSON line per tool call or resource read
    wire             a result on the MCP wire: text, embedded downloads, resource links
"""
