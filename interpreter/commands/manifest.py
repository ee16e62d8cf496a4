"""The two descriptions of this server other programs read without connecting, generated
from the catalog and the settings table so they cannot drift (`interp manifest`, checked
with `--check` in make test):

    server.json        the MCP Registry's entry: the PyPI package run over stdio, and its
                       environment variables (interpreter/config.SETTINGS)
    server-card.json   the experimental MCP Server Card (SEP-2127, a strict superset of
                       server.json's identity fields): capabilities, the default
                       surface's tools, the resources and prompts, and the HTTP remote
                       (its URL is the operator's; the card names the path and header)

The registry name, its short description and the card's remote URL are
`[tool.arcane-mcp.registry]` of pyproject.toml; the key's header is rules/server.yaml
`http.key_header` (the one HTTP mode reads); everything else is derived here.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from mcp.types.version import SUPPORTED_PROTOCOL_VERSIONS

from .. import __version__
from ..build.resource_rules import MIME_JSON, MIME_MARKDOWN
from ..config import SETTINGS, Settings
from ..front import resources as res
from ..front.serve import build_runtime, build_server

REGISTRY_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
FILES = ("server.json", "server-card.json")
REQUIRED = frozenset({"ARCANE_URL"})


def _meta(root: Path) -> dict:
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return {"package": data["project"]["name"], **data["tool"]["arcane-mcp"]["registry"]}


def _env_vars() -> list[dict]:
    out = []
    for s in SETTINGS:
        var: dict[str, Any] = {"name": s.env, "description": s.doc, "format": "string", "isRequired": s.env in REQUIRED,
                               "isSecret": s.secret}
        if s.default not in (None, (), "") and not s.secret:
            default = s.default
            if isinstance(default, tuple):
                default = ":".join(map(str, default)) if s.attr == "listen" else ",".join(map(str, default))
            var["default"] = str(default).lower() if isinstance(default, bool) else str(default)
        out.append(var)
    return out


def server_json(root: Path) -> dict:
    """The MCP Registry entry (schema 2025-12-11): one PyPI package, run with uvx over stdio."""
    meta = _meta(root)
    entry: dict[str, Any] = {"$schema": REGISTRY_SCHEMA, "name": meta["name"], "title": meta["title"],
                             "description": meta["description"], "version": __version__}
    if meta.get("repository"):
        entry["repository"] = {"url": meta["repository"], "source": "github"}
    entry["packages"] = [{
        "registryType": "pypi", "identifier": meta["package"], "version": __version__, "runtimeHint": "uvx",
        "transport": {"type": "stdio"},
        # the console script is `interp`: uvx --from arcane-mcp interp serve
        "runtimeArguments": [{"type": "named", "name": "--from", "value": meta["package"]}],
        "packageArguments": [{"type": "positional", "value": "interp"}, {"type": "positional", "value": "serve"}],
        "environmentVariables": _env_vars(),
    }]
    return entry


def server_card(root: Path) -> dict:
    """The SEP-2127 server card: server.json's identity, plus what a client would learn at
    initialization, from a server built over the catalog with default settings."""
    meta = _meta(root)
    runtime = build_runtime(Settings())
    server = build_server(runtime)
    caps = server.create_initialization_options().capabilities.model_dump(by_alias=True, exclude_none=True, mode="json")

    served = res.for_runtime(runtime.catalog, runtime.dispatcher)
    rules = served.rules
    listed = [{"uri": r.uri, "name": r.name, "title": r.title, "description": r.description, "mimeType": MIME_JSON}
              for r in served.fixed()]
    if rules.tools is not None:
        listed.append({"uri": rules.tools.uri, "name": rules.tools.name, "title": rules.tools.title,
                       "description": rules.tools.description, "mimeType": MIME_JSON})
    listed += [{"uri": g.uri, "name": g.name, "title": g.title, "description": g.description, "mimeType": MIME_MARKDOWN}
               for g in served.guides]
    prompts = [{"name": p.name, "title": p.title, "description": p.description,
                "arguments": [{"name": a.name, "description": a.description, "required": a.required} for a in p.arguments]}
               for p in runtime.catalog.resources.prompts]
    card: dict[str, Any] = {"$schema": CARD_SCHEMA, "name": meta["name"], "version": __version__, "description": meta["description"],
                            "title": meta["title"]}
    if meta.get("repository"):
        card["repository"] = {"url": meta["repository"], "source": "github"}

    versions = list(SUPPORTED_PROTOCOL_VERSIONS)
    card["remotes"] = [{
        "type": "streamable-http", "url": meta["remote_url"], "supportedProtocolVersions": versions,
        "headers": [{"name": runtime.catalog.server.http.key_header, "description": "The Arcane API key this client acts with", "isRequired": True,
                     "isSecret": True}],
    }]
    card["capabilities"] = caps
    card["resources"] = listed
    card["tools"] = [t.as_wire() for t in runtime.surface.tools()]
    card["prompts"] = prompts
    return card


def render(root: Path) -> dict[str, str]:
    """File name -> its text (two-space JSON, one trailing newline)."""
    return {name: json.dumps(value, indent=2, ensure_ascii=False) + "\n"
            for name, value in (("server.json", server_json(root)), ("server-card.json", server_card(root)))}


def check(root: Path) -> list[str]:
    """The files that differ from what the catalog generates."""
    return [name for name, text in render(root).items()
            if not (root / name).exists() or (root / name).read_text(encoding="utf-8") != text]


def write(root: Path) -> list[str]:
    changed = check(root)
    for name, text in render(root).items():
        if name in changed:
            (root / name).write_text(text, encoding="utf-8")
    return changed


__all__ = ["FILES", "check", "render", "server_card", "server_json", "write"]
