"""The three tool surfaces, each a projection of the catalog (never a parallel registry):

    dynamic     arcane_find_action + arcane_execute_action
    meta        arcane_<domain>          {action, params, confirm}
    individual  arcane_<domain>_<action> {...the action's own schema, confirm}

`confirm` is listed only on a tool that can reach a destructive action (it means nothing
to the others, which still accept it).

A surface only lists tools and turns a tools/call into a dispatcher Call; the dispatcher
applies every rule. A multi-action tool advertises the most dangerous action it reaches.
Every word a surface says about itself (titles, descriptions, parameter hints, the meta
tools' action lines, the find answer) is rules/server.yaml's (catalog.server).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from ..build.catalog import Action, Catalog
from ..build.lazy_dataclass import dataclass
from ..build.schema import fit, output_schema
from ..call.dispatch import Call, Dispatcher, envelope_error, param_entries
from ..text import escape
from ..text.rank import ranker_for
from ..text.render import ToolResult, render_error
from .call_records import AuditRecord
from .names import EXECUTE_TOOL, FIND_TOOL, Namer, tool_name_individual, tool_name_meta

if TYPE_CHECKING:  # jsonschema is imported by the first call that checks an envelope, not by a start
    from jsonschema import Draft202012Validator

    from ..text.rank import Ranker


def confirm_schema(catalog: Catalog) -> dict:
    """The `confirm` parameter of every tool that can reach a destructive action."""
    return {"type": "boolean", "default": False, "description": catalog.server.confirm_hint}


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
        # The annotations say only what differs from MCP's defaults (readOnlyHint false,
        # idempotentHint false, openWorldHint true; the title is the tool's own), except
        # destructiveHint, always explicit: its default (true) is the one a client warns on.
        annotations: dict[str, bool] = {}
        if self.read_only:
            annotations["readOnlyHint"] = True
        annotations["destructiveHint"] = self.destructive
        if self.idempotent:
            annotations["idempotentHint"] = True
        wire = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": annotations,
        }
        if self.output_schema is not None:
            wire["outputSchema"] = self.output_schema
        return wire


def _flags(actions: list[Action]) -> tuple[bool, bool, bool]:
    return (all(a.read_only for a in actions), any(a.destructive for a in actions), all(a.idempotent for a in actions))


def _cap(text: str, limit: int) -> str:
    text = " ".join(text.split()) if "\n" not in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def action_description(a: Action, catalog: Catalog) -> str:
    """An individual tool's description: title, the document's description, the usage
    note and the marks (rules/server.yaml individual_tool)."""
    text = catalog.server.individual_tool
    parts = [a.title.rstrip(".") + "."]
    described = ""
    if text.source_description_max and a.description and a.description.lower().rstrip(".") != a.title.lower().rstrip("."):
        described = _cap(a.description, text.source_description_max).rstrip()
    if described:
        # the document's descriptions often lack a full stop; the usage note is a new sentence
        parts.append(described if described.endswith((".", "!", "?", "…", ":")) else described + ".")
        if not text.title_before_source:
            parts.pop(0)
    if a.usage:
        parts.append(a.usage)
    if a.destructive:
        parts.append(text.destructive_note)
    if a.pending:
        parts.append(text.pending_note)
    return _cap(" ".join(parts), text.description_max)


def _marks(a: Action, catalog: Catalog) -> str:
    text = catalog.server.find_answer
    marks = text.destructive_mark if a.destructive else (text.read_only_mark if a.read_only else "")
    return marks + (text.pending_mark if a.pending else "")


def find_line(a: Action, catalog: Catalog, confidence: str | None = None) -> str:
    """One action's first line in a find answer, marks included (destructive, read-only,
    not served yet) and the ranker's confidence when it gives one: arcane_find_action and
    `interp find` both print this line."""
    text = catalog.server.find_answer
    conf = text.confidence.format(confidence=confidence) if confidence else ""
    return text.line.format(id=a.id, title=escape.inline(a.title, strict=True), marks=_marks(a, catalog), confidence=conf)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut_to(text: str, limit: int) -> str:
    """`text` cut to at most `limit` bytes, ending with … when cut."""
    if _size(text) <= limit:
        return text
    raw = text.encode("utf-8")[: max(limit - 3, 0)].decode("utf-8", "ignore")
    return raw.rstrip(" \\") + escape.CUT


def _params_text(a: Action, catalog: Catalog, budget: int) -> str:
    """The action's parameters as find's text lists them, escaped, at most `budget` bytes:
    the required ones and the overlay's find_params whole, then the others while they fit,
    then how many were left out."""
    text = catalog.server.find_answer
    entries = param_entries(a, a.find_params, skip=() if catalog.env_arg in a.required else (catalog.env_arg,))
    if not entries:
        return text.params.format(params=text.none_required)
    must = [e for n, e, req in entries if req or n in a.find_params]
    rest = [e for n, e, req in entries if not (req or n in a.find_params)]

    def render(shown: list[str], left: int) -> str:
        parts = shown + ([text.more_params.format(count=left)] if left else [])
        return text.params.format(params=escape.inline("; ".join(parts)))

    shown = list(must)
    line = render(shown, len(rest))
    for i, extra in enumerate(rest):
        candidate = render([*shown, extra], len(rest) - i - 1)
        if _size(candidate) > budget:
            break
        shown.append(extra)
        line = candidate
    return _cut_to(line, budget)


def find_block(a: Action, catalog: Catalog, confidence: str | None = None) -> list[str]:
    """One action as arcane_find_action's text lists it: its line, its usage note and its
    parameters with types, enums and defaults (enough to call it without the
    structuredContent), at most result_max bytes in all (the usage note is cut first)."""
    text = catalog.server.find_answer
    head = f"- {find_line(a, catalog, confidence)}"
    room = text.result_max - _size(head) - 1
    params = _params_text(a, catalog, room)
    lines = [head]
    if a.usage:
        usage_room = room - _size(params) - 1
        usage = text.usage.format(usage=escape.list_item(a.usage))
        if usage_room >= len(text.usage.format(usage="")) + 40:
            lines.append(_cut_to(usage, usage_room))
        elif _size(params) > room // 2:  # parameters that take the whole room share it with the usage
            params = _params_text(a, catalog, room // 2)
            lines.append(_cut_to(usage, room - _size(params) - 1))
    lines.append(params)
    return lines


def action_card(a: Action, namer: Namer, with_schema: bool = True, confidence: str | None = None) -> dict:
    card = {
        "id": a.id,
        "call": namer(a.id),
        "title": a.title,
        "required": list(a.required),
        "readOnly": a.read_only,
        "destructive": a.destructive,
    }
    if confidence:
        card["confidence"] = confidence
    if a.usage:
        card["usage"] = a.usage
    if a.find_params:
        card["keyParams"] = list(a.find_params)
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
        self._envelopes: dict[str, tuple[dict, Draft202012Validator]] = {}  # tool -> (schema, its validator)

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

    async def dispatch(self, call: Call) -> ToolResult:
        """The dispatcher's result, stamped with the action and the arguments it ran with
        (an MCP Apps view model names them: interpreter/front/viewmodel.py)."""
        result = await self.dispatcher.dispatch(call)
        result.action = call.action_id
        result.arguments = call.args if isinstance(call.args, dict) else None
        return result

    def _envelope(self, tool: str, arguments: dict, schema: dict) -> tuple[dict | None, ToolResult | None]:
        """Check a multi-action tool's own envelope (action, params, confirm)."""
        known = self._envelopes.get(tool)
        if known is None or known[0] is not schema:  # built once per tool schema, not per call
            from jsonschema import Draft202012Validator  # on the first call, not at start

            known = self._envelopes[tool] = (schema, Draft202012Validator(schema))
        errs = list(known[1].iter_errors(arguments))
        if not errs:
            return arguments, None
        err = envelope_error(tool, schema, errs)
        res = render_error(err.message, err.next_step, code=err.code, fields=err.fields)
        self.dispatcher.audit.write(_refusal_record(self.name, tool, None, arguments))
        return None, res


def _refusal_record(surface: str, tool: str, action: str | None, arguments: Any):
    return AuditRecord(surface=surface, tool=tool, action=action, environment=None, outcome="failed",
                       arguments=sorted(arguments) if isinstance(arguments, dict) else [], error_class="ArgumentError")


class DynamicSurface(Surface):
    name = "dynamic"

    @functools.cached_property
    def ranker(self) -> Ranker:
        """The find index, built by the first find: a start that only lists the tools
        (spawn, initialize, tools/list) does not pay for it."""
        return ranker_for(self.catalog)

    def build_tools(self) -> list[ToolSpec]:
        acts = list(self.catalog.actions.values())
        ro, de, idem = _flags(acts)
        words = self.catalog.server
        find, run = words.find_tool, words.execute_tool
        find_schema = {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": words.max_length.query, "description": find.hints["query"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": words.find_limit_max, "default": words.find_limit_default,
                          "description": find.hints["limit"]},
                "domain": {"type": "string", "enum": sorted(self.catalog.domains), "description": find.hints["domain"]},
            },
            "additionalProperties": False,
        }
        exec_schema = {
            "type": "object",
            "properties": {
                "action": {"type": "string", "maxLength": words.max_length.action, "description": run.hints["action"]},
                "params": {"type": "object", "description": run.hints["params"], "default": {}},
                "confirm": confirm_schema(self.catalog),
            },
            "required": ["action"],
            "additionalProperties": False,
        }
        self._find_schema, self._exec_schema = find_schema, exec_schema
        n = len(acts)
        return [
            ToolSpec(FIND_TOOL, find.title, find.description.format(count=n), find_schema, True, False, True),
            ToolSpec(EXECUTE_TOOL, run.title, run.description.format(count=n), exec_schema, ro, de, idem),
        ]

    async def call(self, name: str, arguments: dict | None, progress=None, **extra) -> ToolResult:
        self.tools()
        arguments = arguments or {}
        if name == FIND_TOOL:
            ok, err = self._envelope(name, arguments, self._find_schema)
            return err or self.find(arguments)
        ok, err = self._envelope(name, arguments, self._exec_schema)
        if err:
            return err
        params = arguments.get("params") or {}
        return await self.dispatch(Call(str(arguments["action"]), params, bool(arguments.get("confirm", False)), self.name, name, progress, **extra))

    def find(self, arguments: dict) -> ToolResult:
        """arcane_find_action with arguments its schema accepted: ranked actions for a
        query (within a domain when one is given), every action of a domain without one."""
        text = self.catalog.server.find_answer
        query, domain = arguments.get("query"), arguments.get("domain")
        if query is not None and not query.strip():
            query = None  # a blank query asks for nothing: with a domain, list the domain
        if query is None and domain is None:
            self.dispatcher.audit.write(_refusal_record(self.name, FIND_TOOL, None, arguments))
            return render_error(f"invalid arguments for {FIND_TOOL}: {text.needs_query}",
                                f'Call {FIND_TOOL} with "query" (what to do, in a few words) or "domain" '
                                f'(one of {", ".join(sorted(self.catalog.domains)[:4])}, …).',
                                code="invalid_arguments", fields=["query", "domain"])
        if query is None:
            acts = [self.catalog.actions[i] for i in self.catalog.domains[domain].action_ids]
            if "limit" in arguments:
                acts = acts[: int(arguments["limit"])]
            lines = [text.browse_heading.format(count=len(acts), domain=domain)]
            lines += ["- " + text.browse_line.format(id=a.id, title=escape.inline(a.title, strict=True), marks=_marks(a, self.catalog))
                      for a in acts]
            return ToolResult("\n".join(lines), {"domain": domain, "actions": [action_card(a, self.namer, with_schema=False) for a in acts]})
        hits = self.ranker.rank(query, int(arguments.get("limit", self.catalog.server.find_limit_default)), domain)
        confidences = [getattr(h, "confidence", None) for h in hits]
        cards = [action_card(h.action, self.namer, confidence=c) for h, c in zip(hits, confidences, strict=True)]
        lines = [text.heading.format(count=len(cards), query=escape.inline(repr(query)))]
        if hits and confidences[0] == "low":
            lines.append(text.low_confidence.format(domain=hits[0].action.domain))
        for h, c in zip(hits, confidences, strict=True):
            lines += find_block(h.action, self.catalog, c)
        if not cards:
            lines.append(text.no_match)
        return ToolResult("\n".join(lines), {"actions": cards})


class MetaSurface(Surface):
    name = "meta"

    def build_tools(self) -> list[ToolSpec]:
        tools = []
        self._schemas: dict[str, dict] = {}
        self._domain_of: dict[str, str] = {}
        text = self.catalog.server.meta_tool
        for dom in self.catalog.domains.values():
            acts = [self.catalog.actions[i] for i in dom.action_ids]
            ro, de, idem = _flags(acts)
            lines = []
            if dom.description:
                lines.append(dom.description)
            lines.append(text.intro.format(title=dom.title, title_lower=dom.title.lower(), domain=dom.name,
                                           environment_argument=self.catalog.env_arg))
            for a in acts:
                marks = (text.destructive_mark if a.destructive else "") + (text.pending_mark if a.pending else "")
                lines.append(text.action_line.format(name=a.name, required=", ".join(a.required), title=a.title, marks=marks))
            schema = {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "maxLength": self.catalog.server.max_length.action, "enum": [a.name for a in acts],
                               "description": text.action_hint},
                    "params": {"type": "object", "default": {}, "description": text.params_hint},
                    "confirm": confirm_schema(self.catalog),
                },
                "required": ["action"],
                "additionalProperties": False,
            }
            name = tool_name_meta(dom.name)
            self._schemas[name] = schema  # a call may pass confirm to any domain
            self._domain_of[name] = dom.name
            listed = schema if de else {**schema, "properties": {k: v for k, v in schema["properties"].items() if k != "confirm"}}
            tools.append(ToolSpec(name, dom.title, "\n".join(lines), listed, ro, de, idem))
        return tools

    async def call(self, name: str, arguments: dict | None, progress=None, **extra) -> ToolResult:
        self.tools()
        arguments = arguments or {}
        ok, err = self._envelope(name, arguments, self._schemas[name])
        if err:
            return err
        aid = f"{self._domain_of[name]}.{arguments['action']}"
        return await self.dispatch(Call(aid, arguments.get("params") or {}, bool(arguments.get("confirm", False)), self.name, name, progress,
                                                   **extra))


class IndividualSurface(Surface):
    name = "individual"

    def build_tools(self) -> list[ToolSpec]:
        tools = []
        self._action_of: dict[str, str] = {}
        self._out_validators: dict[str, Any] = {}  # tool name -> jsonschema validator
        settings = self.dispatcher.settings
        confirm = confirm_schema(self.catalog)
        for a in self.catalog.actions.values():
            schema = a.input_schema
            if a.destructive:  # confirm means nothing to any other action (the call still accepts it)
                # new top-level and properties maps with `confirm`, the rest shared (nothing
                # changes a listed schema; a deep copy of every schema cost a start ~15 ms)
                schema = {**schema, "properties": {**schema.get("properties", {}), "confirm": confirm}}
            name = tool_name_individual(a.id)
            self._action_of[name] = a.id
            out = None
            # experimental: JSON results only; never in safe mode for a state-changing tool
            # (its answer is a preview), never for pending handlers
            if settings.output_schemas and a.response_kind == "json" and a.operation_id and not a.pending \
                    and not (settings.safe_mode and a.mutating):
                op = self.catalog.document["paths"][a.path][a.method.lower()]
                out = output_schema(self.catalog.document, op, self.catalog.conventions)
                if out is not None:
                    from jsonschema import Draft202012Validator  # with output schemas on: a default start does not import it

                    self._out_validators[name] = Draft202012Validator(out)
            tools.append(ToolSpec(name, a.title, action_description(a, self.catalog), schema, a.read_only, a.destructive, a.idempotent, out))
        return tools

    async def call(self, name: str, arguments: dict | None, progress=None, **extra) -> ToolResult:
        self.tools()
        args = dict(arguments or {})
        confirm = args.pop("confirm", False)
        if not isinstance(confirm, bool):
            return render_error(f"invalid arguments for {name}: 'confirm' must be boolean, got {json.dumps(confirm)[:40]}",
                                "Pass confirm: true or false.", code="invalid_arguments", fields=["confirm"])
        result = await self.dispatch(Call(self._action_of[name], args, confirm, self.name, name, progress, **extra))
        validator = self._out_validators.get(name)
        if validator is not None and result.structured is not None and not result.is_error:
            result = fit_result(result, validator)
        return result


def fit_result(result: ToolResult, validator) -> ToolResult:
    """Send the parts of Arcane's value that break the declared output schema as null, and
    list each with its original value in the text, so a strict client never rejects it."""
    fitted, misfits = fit(result.structured, validator)
    if not misfits:
        return result
    lines = ["### Parts sent as null (they do not fit this tool's output schema)"]
    for ptr, original in misfits:
        lines.append(escape.object_line(ptr or "/", json.dumps(original, ensure_ascii=False, default=str)[:500]))
    result.structured = fitted
    result.misfits = misfits
    result.close(lines)
    return result


SURFACES = {"dynamic": DynamicSurface, "meta": MetaSurface, "individual": IndividualSurface}


def make_surface(name: str, catalog: Catalog, dispatcher: Dispatcher) -> Surface:
    return SURFACES[name](catalog, dispatcher)
