"""The fixture view's document, assembled the way the server assembles a view (markers
replaced, a hash-based Content-Security-Policy): for the test host's own tests."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def fixture_document(config: dict | None = None) -> str:
    script = (HERE / "fixture_view.js").read_text(encoding="utf-8")
    style = (HERE / "fixture_view.css").read_text(encoding="utf-8")
    csp = (f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; img-src data:; "
           "connect-src 'none'; base-uri 'none'; form-action 'none'")
    cfg = json.dumps(config or {}).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    html = (HERE / "fixture_view.html").read_text(encoding="utf-8")
    for marker, value in (("%%CSP%%", csp), ("%%STYLE%%", style), ("%%SCRIPT%%", script), ("%%CONFIG%%", cfg)):
        assert html.count(marker) == 1
        html = html.replace(marker, value)
    return html
