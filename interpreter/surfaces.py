"""The three tool surfaces, each a projection of the catalog (never a parallel registry):

    dynamic     arcane_find_action + arcane_execute_action
    meta        arcane_<domain>          {action, params, confirm}
    individual  arcane_<domain>_<action> {...the action's own schema, confirm}

A surface only lists tools and turns a tools/call into a dispatcher Call; the dispatcher
applies every rule. A multi-action tool advertises the most dangerous action it reaches.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from .catalog import Action, Catalog
from .dispatch import Call, Dispatcher, envelope_error, param_summary
from .errors import ArgumentError, UnknownActionError
from .names import EXECUTE_TOOL, FIND_TOOL, Namer, tool_name_individual, tool_name_meta
from .rank import Ranker
from .render import ToolResult, render_error
from .schema import fit, output_schema
from jsonschema import Draft202012Validator

CONFIRM_SCHEMA = {
    "type": "boolean",
    "default": False,
    "description": "Set true only after the user confirmed this exact destructive change.",
}
DESCRIPTION_CAP = 1024


@dataclass(frozen=True)
class ToolSpec:
    """A tool as listed: wire-shaped fields, no SDK types (serve.py converts)."""

    name: str
    title: str
    description: str
    input_schema: dict
    read_only: bool
    destructive: bool
    idempotent: bool
    output_schema: dict | None = None

    def as_wire(self) -> dict:
        wire = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                "openWorldHint": True,
            },
        }
        if self.output_schema is not None:
            wire["outputSchema"] = self.output_schema
        return wire


def _flags(actions: list[Action]) -> tuple[bool, bool, bool]:
    return (all(a.read_only for a in actions), any(a.destructive for a in actions), all(a.idempotent for a in actions))


def _cap(text: str, limit: int = DESCRIPTION_CAP) -> str:
    text = " ".join(text.split()) if "\n" not in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def action_description(a: Action) -> str:
    parts = [a.title.rstrip(".") + "."]
    if a.description and a.description.lower().rstrip(".") != a.title.lower().rstrip("."):
        parts.append(_cap(a.description, 300))
    if a.usage:
        parts.append(a.usage)
    if a.destructive:
        parts.append("Destructive: needs confirm: true after the user agrees.")
    if a.pending:
        parts.append("Not served yet by this server version (handler pending).")
    return _cap(" ".join(parts))


def find_line(a: Action) -> str:
    """One action as a find answer lists it, marks included (destructive, read-only, not
    served yet): arcane_find_action and `interp find` both print this line."""
    marks = " [destructive: needs confirm]" if a.destructive else (" [read-only]" if a.read_only else "")
    if a.pending:
        marks += " [not served yet]"
    return f"{a.id} — {a.title}{marks}; required: {', '.join(a.required) or 'none'}"


def action_card(a: Action, namer: Namer, with_schema: bool = True) -> dict:
    card = {
        "id": a.id,
        "call": namer(a.id),
        "title": a.title,
        "required": list(a.required),
        "readOnly": a.read_only,
        "destructive": a.destructive,
    }
    if a.usage:
        card["usage"] = a.usage
    if a.pending:
        card["served"] = False
    if with_schema:
        card["inputSchema"] = a.input_schema
    return card


class Surface:
    name = ""

    def __init__(self, catalog: Catalog, dispatcher: Dispatcher):
        self.catalog = catalog
        self.dispatcher = dispatcher
        self.namer = Namer(self.name)
        self._tools: list[ToolSpec] | None = None
        self._by_name: dict[str, ToolSpec] = {}

    def tools(self) -> list[ToolSpec]:
        if self._tools is None:
            self._tools = self.build_tools()
            self._by_name = {t.name: t for t in self._tools}
        return self._tools

    def tool(self, name: str) -> ToolSpec | None:
        self.tools()
        return self._by_name.get(name)

    def build_tools(self) -> list[ToolSpec]:
        raise NotImplementedError

    async def call(self, name: str, arguments: dict | None, progress=None, **extra) -> ToolResult:
        """Run a tools/call. The caller has checked that `name` is one of tools().
        `extra` carries the transport's ways to ask the user (see dispatch.Call)."""
        raise NotImplementedError

    def _envelope(self, tool: str, arguments: dict, schema: dict) -> tuple[dict | None, ToolResult | None]:
        """Check a multi-action tool's own envelope (action, params, confirm)."""
        errs = list(Draft202012Validator(schema).iter_errors(arguments))
        if not errs:
            return arguments, None
        err = envelope_error(tool, schema, errs)
        res = render_error(err.message, err.next_step, code=err.code, fields=err.fields)
        self.dispatcher.audit.write(_refusal_record(self.name, tool, None, arguments))
        return None, res


def _refusal_record(surface: str, tool: str, action: str | None, arguments: Any):
    from .auditlog import AuditRecord

    return AuditRecord(surface=surface, tool=tool, action=action, environment=None, outcome="failed",
                       arguments=sorted(arguments) if isinstance(arguments, dict) else [], error_class="ArgumentError")


class DynamicSurface(Surface):
    name = "dynamic"

    def build_tools(self) -> list[ToolSpec]:
        acts = list(self.catalog.actions.values())
        ro, de, idem = _flags(acts)
        self.ranker = Ranker(self.catalog)
        words = self.catalog.server_rules or {}
        find, run = words.get("find_tool") or {}, words.get("execute_tool") or {}
        find_schema = {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": find.get("query_hint", "What you want to do, in plain words")},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5, "description": "How many actions to return"},
                "domain": {"type": "string", "enum": sorted(self.catalog.domains), "description": "Only actions of this domain"},
            },
            "required": ["query"],
            "additionalProperties": False,
        }
        exec_schema = {
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": run.get("action_hint", "The action ID from arcane_find_action")},
                "params": {"type": "object", "description": "The action's parameters, as its inputSchema describes", "default": {}},
                "confirm": CONFIRM_SCHEMA,
            },
            "required": ["action"],
            "additionalProperties": False,
        }
        self._find_schema, self._exec_schema = find_schema, exec_schema
        n = len(acts)
        return [
            ToolSpec(FIND_TOOL, find.get("title", "Find an action"),
                     find.get("description", "Find the action for a task among {count}.").replace("{count}", str(n)),
                     find_schema, True, False, True),
            ToolSpec(EXECUTE_TOOL, run.get("title", "Run an action"),
                     run.get("description", "Run one action by ID with its params; destructive actions need confirm: true."),
                     exec_schema, ro, de, idem),
        ]

    async def call(self, name: str, arguments: dict | None, progress=None, **extra) -> ToolResult:
        self.tools()
        arguments = arguments or {}
        if name == FIND_TOOL:
            ok, err = self._envelope(name, arguments, self._find_schema)
            if err:
                return err
            hits = self.ranker.rank(arguments["query"], int(arguments.get("limit", 5)), arguments.get("domain"))
            cards = [action_card(h.action, self.namer) for h in hits]
            lines = [f"{len(cards)} action(s) for {arguments['query']!r}:"]
            lines += [f"- {find_line(h.action)}" for h in hits]
            if not cards:
                lines.append("No action matches; try other words (a verb and a noun, e.g. 'list images').")
            return ToolResult("\n".join(lines), {"actions": cards})
        ok, err = self._envelope(name, arguments, self._exec_schema)
        if err:
            return err
        params = arguments.get("params") or {}
        return await self.dispatcher.dispatch(Call(str(arguments["action"]), params, bool(arguments.get("confirm", False)), self.name, name, progress, **extra))


class MetaSurface(Surface):
    name = "meta"

    def build_tools(self) -> list[ToolSpec]:
        tools = []
        self._schemas: dict[str, dict] = {}
        self._domain_of: dict[str, str] = {}
        for dom in self.catalog.domains.values():
            acts = [self.catalog.actions[i] for i in dom.action_ids]
            ro, de, idem = _flags(acts)
            lines = []
            if dom.description:
                lines.append(dom.description)
            lines.append(f"Arcane {dom.title.lower()}: pick `action`, pass its parameters in `params`"
                         " (? = optional; environmentId defaults to the configured environment).")
            for a in acts:
                req = [p for p in a.required]
                mark = " [destructive: confirm]" if a.destructive else ""
                mark += " [not served yet]" if a.pending else ""
                lines.append(f"- {a.name}({', '.join(req)}): {a.title}{mark}")
            schema = {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": [a.name for a in acts], "description": "The action to run"},
                    "params": {"type": "object", "default": {}, "description": "The action's parameters; an invalid call answers with the action's full parameter list"},
                    "confirm": CONFIRM_SCHEMA,
                },
                "required": ["action"],
                "additionalProperties": False,
            }
            name = tool_name_meta(dom.name)
            self._schemas[name] = schema
            self._domain_of[name] = dom.name
            tools.append(ToolSpec(name, dom.title, "\n".join(lines), schema, ro, de, idem))
        return tools

    async def call(self, name: str, arguments: dict | None, progress=None, **extra) -> ToolResult:
        self.tools()
        arguments = arguments or {}
        ok, err = self._envelope(name, arguments, self._schemas[name])
        if err:
            return err
        aid = f"{self._domain_of[name]}.{arguments['action']}"
        return await self.dispatcher.dispatch(Call(aid, arguments.get("params") or {}, bool(arguments.get("confirm", False)), self.name, name, progress, **extra))


class IndividualSurface(Surface):
    name = "individual"

    def build_tools(self) -> list[ToolSpec]:
        tools = []
        self._action_of: dict[str, str] = {}
        self._out_validators: dict[str, Draft202012Validator] = {}
        settings = self.dispatcher.settings
        for a in self.catalog.actions.values():
            schema = copy.deepcopy(a.input_schema)
            schema["properties"]["confirm"] = CONFIRM_SCHEMA
            name = tool_name_individual(a.id)
            self._action_of[name] = a.id
            out = None
            # experimental: JSON results only; never in safe mode for a state-changing tool
            # (its answer is a preview), never for pending handlers
            if settings.output_schemas and a.response_kind == "json" and a.operation_id and not a.pending \
                    and not (settings.safe_mode and a.mutating):
                op = self.catalog.document["paths"][a.path][a.method.lower()]
                out = output_schema(self.catalog.document, op)
                if out is not None:
                    self._out_validators[name] = Draft202012Validator(out)
            tools.append(ToolSpec(name, a.title, action_description(a), schema, a.read_only, a.destructive, a.idempotent, out))
        return tools

    async def call(self, name: str, arguments: dict | None, progress=None, **extra) -> ToolResult:
        self.tools()
        args = dict(arguments or {})
        confirm = args.pop("confirm", False)
        if not isinstance(confirm, bool):
            return render_error(f"invalid arguments for {name}: 'confirm' must be boolean, got {json.dumps(confirm)[:40]}",
                                "Pass confirm: true or false.", code="invalid_arguments", fields=["confirm"])
        result = await self.dispatcher.dispatch(Call(self._action_of[name], args, confirm, self.name, name, progress, **extra))
        validator = self._out_validators.get(name)
        if validator is not None and result.structured is not None and not result.is_error:
            result = fit_result(result, validator)
        return result


def fit_result(result: ToolResult, validator) -> ToolResult:
    """Send the parts of Arcane's value that break the declared output schema as null, and
    list each with its original value in the text, so a strict client never rejects it."""
    from . import escape

    fitted, misfits = fit(result.structured, validator)
    if not misfits:
        return result
    lines = ["", "### Parts sent as null (they do not fit this tool's output schema)"]
    for ptr, original in misfits:
        lines.append(escape.object_line(ptr or "/", json.dumps(original, ensure_ascii=False, default=str)[:500]))
    result.structured = fitted
    result.misfits = misfits
    result.text = result.text.rstrip("\n") + "\n" + escape.clean("\n".join(lines)) + "\n"
    return result


SURFACES = {"dynamic": DynamicSurface, "meta": MetaSurface, "individual": IndividualSurface}


def make_surface(name: str, catalog: Catalog, dispatcher: Dispatcher) -> Surface:
    return SURFACES[name](catalog, dispatcher)
