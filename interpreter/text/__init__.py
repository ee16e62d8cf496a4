"""The text a model reads: rendering, escaping, redaction, hints and the find ranker.

Every module, one line each (tests/test_docs.py checks this map against the folder):

    render     the text block of a result: its parts (Text) and the one writer of its text
    escape     untrusted text made safe to place in Markdown
    redact     what is secret: previews mask request fields, resources redact answers
    hints      the next step an error offers (rules/errors.yaml)
    rank       the find ranker: a free-text query -> actions, best first
    suggest    words and "did you mean" for mistyped action IDs
"""
