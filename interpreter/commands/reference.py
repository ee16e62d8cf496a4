"""`interp reference`: the tool reference under docs/reference/, generated from the catalog.

One index page (domains, counts, how each surface names its tools) and one page per domain
(each action: ID, tool names, route, flags, usage notes, parameters with where they go).
Generated from the unfiltered catalog (`all_actions`) built with default options, so the
reference documents everything the server can serve; output is deterministic, so
`interp reference --check` can fail CI when the files on disk fall behind the catalog.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..build.catalog import Action, BuildOptions, Catalog, build
from ..front.names import tool_name_individual, tool_name_meta

REFERENCE_DIR = Path("docs") / "reference"
INDEX = "README.md"
CELL_LIMIT = 160

# Where a flat argument goes, as a reader would say it (Binding.location -> words).
LOCATION_WORDS = {
    "path": "path",
    "query": "query",
    "header": "header",
    "cookie": "cookie",
    "body_field": "body",
    "body_whole": "body (whole)",
    "multipart": "multipart part",
    "json_part": "member of a JSON part",
    "client_filter": "filtered here (not sent)",
    "octet": "body (octet-stream)",
    "form": "form field",
    "body_text": "body (text)",
    "handler": "handler (not sent)",
}


def _one_line(text: Any, limit: int = CELL_LIMIT) -> str:
    """One table-safe line: whitespace collapsed, `|` and `<` escaped, cut at `limit`."""
    s = re.sub(r"\s+", " ", str(text or "")).strip()
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def _paragraph(text: str) -> str:
    return re.sub(r"[ \t]+", " ", text.strip()).replace("<", "&lt;")


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def type_label(schema: dict) -> str:
    """A short human type for a property schema: `string`, `array of string`, `Blob`…"""
    if not isinstance(schema, dict):
        return "any"
    if "$ref" in schema:
        base = schema["$ref"].rsplit("/", 1)[-1]
        return "file (text or base64)" if base == "Blob" else base
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(dict.fromkeys(type_label(s) for s in schema[key]))
    t = schema.get("type")
    types = [x for x in (t if isinstance(t, list) else [t]) if x]
    nullable = "null" in types
    types = [x for x in types if x != "null"]
    if not types:
        label = "object" if "properties" in schema else "any"
    else:
        parts = []
        for x in types:
            if x == "array":
                parts.append(f"array of {type_label(schema.get('items') or {})}")
            elif x == "object" and isinstance(schema.get("additionalProperties"), dict) and not schema.get("properties"):
                parts.append(f"map of {type_label(schema['additionalProperties'])}")
            elif schema.get("format"):
                parts.append(f"{x} ({schema['format']})")
            else:
                parts.append(x)
        label = " or ".join(parts)
    if "enum" in schema:
        label += ": " + ", ".join(str(v) for v in schema["enum"])
    if nullable:
        label += " or null"
    return label


def _flags(a: Action) -> str:
    words = ["read-only" if a.read_only else "mutating"]
    if a.destructive:
        words.append("destructive (needs `confirm: true`)")
    if a.idempotent:
        words.append("idempotent")
    if a.pending:
        words.append(f"handler pending ({a.handler})")
    return ", ".join(words)


def _params_table(a: Action) -> list[str]:
    props: dict = a.input_schema.get("properties") or {}
    if not props:
        return ["No parameters."]
    required = set(a.input_schema.get("required") or ())
    where = {b.arg: b for b in a.bindings}
    rows = ["| parameter | type | required | in | description |", "|---|---|---|---|---|"]
    for name, schema in props.items():
        b = where.get(name)
        if b is None:
            loc = "—"
        else:
            loc = LOCATION_WORDS.get(b.location, b.location)
            if b.wire != name:
                loc += f" `{b.wire}`"
        if name in required:
            req = "yes"
        elif isinstance(schema, dict) and "default" in schema:
            req = f"no (default {_code(_one_line(schema['default'] if isinstance(schema['default'], str) else json.dumps(schema['default']), 40))})"
        else:
            req = "no"
        desc = schema.get("description", "") if isinstance(schema, dict) else ""
        rows.append(f"| `{name}` | {_one_line(type_label(schema), 80)} | {req} | {loc} | {_one_line(desc)} |")
    return rows


def _action_section(a: Action) -> list[str]:
    out = [f"### `{a.id}`", "", f"**{_one_line(a.title, 200)}**", ""]
    if a.description and a.description.strip() != a.title.strip():
        out += [_paragraph(a.description), ""]
    if a.operation_id:
        route = f"`{a.method} {a.path}` (operation `{a.operation_id}`)"
    else:
        route = f"`{a.method} {a.path}` (extra route outside OpenAPI, handler `{a.handler}`)"
    out += [
        f"- individual tool: `{tool_name_individual(a.id)}`; meta tool: `{tool_name_meta(a.domain)}` with `\"action\": \"{a.name}\"`",
        f"- route: {route}",
        f"- flags: {_flags(a)}",
    ]
    if a.operation_id and a.response_kind != "json":
        out.append(f"- response: {a.response_kind}")
    if a.security != "either":
        out.append(f"- credentials: {a.security}")
    if a.usage:
        out.append(f"- usage: {_one_line(a.usage, 1000)}")
    if a.aliases:
        out.append("- aliases: " + ", ".join(_code(x) for x in a.aliases))
    if a.related:
        out.append("- related: " + ", ".join(f"`{x}`" for x in a.related))
    if a.follow_ups:
        out.append("- follow-ups: " + ", ".join(f"`{x}`" for x in a.follow_ups))
    if a.states is not None and a.states.read is not None:
        by_state = "; ".join(f"{k}: " + ", ".join(f"`{x}`" for x in v) for k, v in a.states.steps.items())
        out.append(f"- next steps by state (`{a.states.read.text}`): {by_state}")
    out.append("")
    out += _params_table(a)
    out.append("")
    return out


def _domain_actions(catalog: Catalog) -> dict[str, list[Action]]:
    grouped: dict[str, list[Action]] = {}
    for aid in sorted(catalog.all_actions):
        a = catalog.all_actions[aid]
        grouped.setdefault(a.domain, []).append(a)
    return dict(sorted(grouped.items()))


def _domain_page(catalog: Catalog, domain: str, actions: list[Action]) -> str:
    d = catalog.domains.get(domain)
    title = d.title if d else domain.replace("_", " ").capitalize()
    out = [f"# `{domain}`: {_one_line(title, 200)}", "",
           "Generated by `interp reference` from the catalog; do not edit by hand.", ""]
    if d and d.description:
        out += [_paragraph(d.description), ""]
    out += [f"{len(actions)} action(s). Meta tool: `{tool_name_meta(domain)}`.", "",
            "| action | individual tool | route | flags |", "|---|---|---|---|"]
    for a in actions:
        anchor = a.id.replace(".", "")
        out.append(f"| [`{a.id}`](#{anchor}) | `{tool_name_individual(a.id)}` | `{a.method} {_one_line(a.path, 200)}` | {_flags(a)} |")
    out.append("")
    out.append("## Actions")
    out.append("")
    for a in actions:
        out += _action_section(a)
    return "\n".join(out).rstrip("\n") + "\n"


def _index_page(catalog: Catalog, grouped: dict[str, list[Action]]) -> str:
    acts = list(catalog.all_actions.values())
    info = catalog.document.get("info") or {}
    version = info.get("version", "unknown")
    out = [
        "# Tool reference",
        "",
        "Generated by `interp reference` from the catalog; do not edit by hand. "
        "`interp reference --check` fails when these pages no longer match the catalog.",
        "",
        f"Arcane API {_one_line(version, 40)} (`catalog/arcane.openapi.json`): "
        f"{len(acts)} actions in {len(grouped)} domains; "
        f"{sum(a.read_only for a in acts)} read-only, {sum(not a.read_only for a in acts)} mutating "
        f"({sum(a.destructive for a in acts)} destructive); "
        f"{sum(a.operation_id is None for a in acts)} served outside OpenAPI; "
        f"{sum(a.pending for a in acts)} with a pending handler.",
        "",
        "## Tool names on each surface",
        "",
        "The same action is reachable on every surface (`ARCANE_MCP_SURFACE`); only the tool name and call shape change.",
        "",
        "| surface | tools | call shape (e.g. `container.restart`) |",
        "|---|---|---|",
        '| `dynamic` (default) | `arcane_find_action`, `arcane_execute_action` | `{"action": "container.restart", "params": {…}, "confirm": false}` |',
        '| `meta` | `arcane_<domain>`, one per domain | `arcane_container` with `{"action": "restart", "params": {…}, "confirm": false}` |',
        '| `individual` | `arcane_<domain>_<action>`, one per action | `arcane_container_restart` with `{…params, "confirm": false}` |',
        "",
        "`confirm: true` is needed only by destructive actions. Read-only mode "
        "(`ARCANE_MCP_READ_ONLY`) and `ARCANE_MCP_EXCLUDE_TOOLS` withdraw actions from every surface; "
        "this reference lists them all.",
        "",
        "## Domains",
        "",
        "| domain | meta tool | actions | read-only | mutating | destructive | pending |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for domain, actions in grouped.items():
        out.append(
            f"| [`{domain}`]({domain}.md) | `{tool_name_meta(domain)}` | {len(actions)} | "
            f"{sum(a.read_only for a in actions)} | {sum(not a.read_only for a in actions)} | "
            f"{sum(a.destructive for a in actions)} | {sum(a.pending for a in actions)} |"
        )
    return "\n".join(out) + "\n"


def generate(catalog: Catalog) -> dict[str, str]:
    """generate(catalog: Catalog) -> dict[str, str]

    The reference pages for `catalog.all_actions`: relative path (POSIX, from the project
    root, e.g. `docs/reference/container.md`) -> Markdown text. Deterministic. Pass the
    catalog built with default options: a filter that withdraws a whole domain also drops
    that domain's overlay title and description from `catalog.domains`.
    """
    grouped = _domain_actions(catalog)
    base = REFERENCE_DIR.as_posix()
    pages = {f"{base}/{INDEX}": _index_page(catalog, grouped)}
    for domain, actions in grouped.items():
        pages[f"{base}/{domain}.md"] = _domain_page(catalog, domain, actions)
    return dict(sorted(pages.items()))


def _default_catalog(root: Path) -> Catalog:
    """The checkout's own catalog and rules, with default options (not the installed copy)."""
    return build(BuildOptions(rules_dir=root / "rules", catalog_dir=root / "catalog"))


def write(root: Path, catalog: Catalog | None = None) -> list[str]:
    """write(root: Path, catalog: Catalog | None = None) -> list[str]

    Write the reference under `root`, a checkout (default catalog: the checkout's, built
    with default options),
    removing stale `*.md` pages in docs/reference/. Returns the relative paths changed.
    """
    root = Path(root)
    pages = generate(catalog or _default_catalog(root))
    changed = []
    for rel, text in pages.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")
            changed.append(rel)
    for rel in _on_disk(root):
        if rel not in pages:
            (root / rel).unlink()
            changed.append(rel)
    return sorted(changed)


def _on_disk(root: Path) -> list[str]:
    folder = root / REFERENCE_DIR
    if not folder.is_dir():
        return []
    return sorted(p.relative_to(root).as_posix() for p in folder.glob("*.md"))


def check(root: Path, catalog: Catalog | None = None) -> list[str]:
    """check(root: Path, catalog: Catalog | None = None) -> list[str]

    The reference files under `root` that do not match the catalog, each as
    `<relative path> (differs|missing|extra)`; empty when up to date.
    """
    root = Path(root)
    pages = generate(catalog or _default_catalog(root))
    out = []
    for rel, text in pages.items():
        path = root / rel
        if not path.exists():
            out.append(f"{rel} (missing)")
        elif path.read_text(encoding="utf-8") != text:
            out.append(f"{rel} (differs)")
    for rel in _on_disk(root):
        if rel not in pages:
            out.append(f"{rel} (extra)")
    return sorted(out)
