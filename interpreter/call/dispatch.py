"""The one dispatcher. Every surface turns its call into a Call and hands it here; the
same rules run in the same order for all of them, as `Dispatcher.dispatch` does:

    1. resolve the action: unknown -> isError with the closest IDs; withdrawn (read-only,
       exclusions) -> isError saying why
    2. fill the default environmentId, then validate the arguments against the action's
       input schema (compiled once) and what a schema cannot say (request.check_arguments:
       no NaN, each path value one segment, a query that fits a URL) -> isError naming
       each bad field
    3. a handler kind that is not served yet -> isError
    4. a destructive action without confirm: true that nobody can be asked about (or in
       safe mode) is refused here, before anything is sent
    5. a path argument the rules say takes an ID but got a name: resolved through the
       declared list action (the text says so), or refused naming that action
    6. a destructive action without confirm: true -> ask the user (an input-required
       result on 2026-07-28, elicitation/create on the legacy protocol), showing the
       resolved target; declined -> isError
    7. safe mode: a state-changing action answers a preview of the request, sends nothing
    8. execute within the per-action deadline (ARCANE_MCP_ACTION_TIMEOUT) and render; an
       operation stream reads for as long as the deadline allows, and a deadline reached
       mid-stream names the activity to follow
    9. write an audit record, whatever the outcome (not for an input-required round,
       which is not final: the retry that carries the answer is recorded)

Each rule is one named step of `Dispatcher.dispatch` (_validate, _refuse_in_safe_mode,
_resolve, _confirm, _preview, _run, _failed, _finish). Every read the dispatcher makes for
itself (5, and the question's reads in 6) is `Dispatcher.read`: the one internal read of
reader.py, within ARCANE_MCP_READ_TIMEOUT.

Errors are results with isError, a plain message and a next step; no traceback escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..build.catalog import Action, Catalog
from ..build.lazy_dataclass import dataclass
from ..build.model import ArgumentRule
from ..build.resource_rules import links_for
from ..build.schema import PATH
from ..config import Settings
from ..errors import (
    ArcaneTimeout,
    ArgumentError,
    CallError,
    ConfirmationRequired,
    NotServedError,
    StreamFailed,
    UnknownActionError,
    UpstreamError,
)
from ..front.call_records import AuditLog, AuditRecord
from ..front.names import FIND_TOOL, Namer
from ..memo import keep
from ..memo import table as memo_table
from ..text.escape import code_span
from ..text.redact import REQUEST
from ..text.render import Named, Note, Renderer, ToolResult, render_error, with_notes
from . import confirm as blast
from . import reader
from .handlers import HANDLERS, Context
from .preview import preview
from .request import ArcaneClient, check_arguments, prepare
from .response import STREAMING_KINDS, ProgressFn, Reading
from .stream import StreamState

if TYPE_CHECKING:  # jsonschema is imported by the first call that checks arguments, not by a start
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

log = logging.getLogger("arcane_mcp.dispatch")
# the reads of a confirmation (its target, environment and blast radius) run at once, each
# an internal read (reader.read: ARCANE_MCP_READ_TIMEOUT, reader.READ_MAX_BYTES); an
# environment's name is kept this long, for this many environments
ENV_NAME_TTL = 60.0
ENV_NAMES_MAX = 256
# flat arguments found valid are remembered (Dispatcher._remember_valid): this many calls'
# worth, of at most this many arguments, strings up to this length
VALID_MEMO_SIZE = 1024
VALID_ARGS_MAX_LEN = 8
VALID_VALUE_MAX_LEN = 256
SUGGESTED_MAX = 10  # unknown parameters given a "did you mean" in one error (each costs a comparison with every parameter)
_FLAT = frozenset({str, int, bool, type(None)})


# Asks the user over the legacy back-channel; answers "accept", "decline" or "cancel".
Elicit = Callable[[str], Awaitable[str]]


@dataclass
class Call:
    action_id: str
    args: dict[str, Any]
    confirm: bool = False
    surface: str = "dynamic"
    tool: str = ""
    progress: ProgressFn | None = None
    elicit: Elicit | None = None  # legacy protocol with a back-channel and the capability
    can_request_input: bool = False  # 2026-07-28 with the elicitation capability
    answer: str | None = None  # the user's answer carried by a 2026-07-28 retry
    audit_message: str | None = None  # the audit record's message ("resource read" for a resource)
    template: str | None = None  # a resource read: the resource's URI template (its span names it)
    # an MCP task waits for this: called with (action, arguments, activity ID) when a
    # task-capable action's stream names its activity (catalog/conventions.yaml activity.tasks)
    on_started: Callable[[Action, dict, str], None] | None = None


ENUM_SHOWN = 8  # the values of an enum a parameter's description lists before "|…"
MEMBERS_SHOWN = 8  # the members of an object parameter expanded before "…"
DEFAULT_SHOWN = 24  # a default longer than this (as JSON) is not shown


def _resolve(schema: dict, root: dict | None) -> tuple[dict, str]:
    """A `$ref` into the root schema's `$defs` resolved (one step), and the name it had."""
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema, ""
    name = ref.rsplit("/", 1)[-1]
    target = ((root or {}).get("$defs") or {}).get(name) if ref.startswith("#/$defs/") else None
    return (target, name) if isinstance(target, dict) else (schema, name)


def describe_type(schema: Any, root: dict | None = None, depth: int = 1) -> str:
    """A parameter's type as a model reads it: `string`, `a|b|c` for an enum (null left
    out), `string[]`, and an object parameter's own members one level deep
    (`{mode: none|stopped, until?: string}`) instead of the name of its schema type."""
    if not isinstance(schema, dict):
        return "any"
    schema, ref_name = _resolve(schema, root)
    values = schema.get("enum")
    if isinstance(values, list):
        shown = [json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v for v in values if v is not None]
        return "|".join(shown[:ENUM_SHOWN]) + ("|…" if len(shown) > ENUM_SHOWN else "")
    t = schema.get("type")
    if isinstance(t, list):
        t = "|".join(str(x) for x in t if x != "null") or "null"
    props = schema.get("properties")
    if (t == "object" or t is None) and isinstance(props, dict) and props:
        if depth <= 0:
            return ref_name or "object"
        req = set(schema.get("required") or ())
        names = sorted(props, key=lambda n: n not in req)
        inner = [describe_param(n, props[n], n in req, root, depth - 1) for n in names[:MEMBERS_SHOWN]]
        return "{" + ", ".join(inner) + (", …" if len(names) > MEMBERS_SHOWN else "") + "}"
    if t == "array" and isinstance(schema.get("items"), dict) and depth > 0:
        return "array of " + describe_type(schema["items"], root, 0)
    if t is None and ref_name:
        return ref_name
    if t is None:
        for key in ("oneOf", "anyOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return "|".join(dict.fromkeys(describe_type(o, root, 0) for o in options[:4]))
    return str(t) if t else "any"


def describe_param(name: str, schema: Any, required: bool, root: dict | None = None, depth: int = 1) -> str:
    """`name: type`, `name?: type` when optional, `=default` when the schema has a short one."""
    text = f"{name}{'' if required else '?'}: {describe_type(schema, root, depth)}"
    if isinstance(schema, dict) and "default" in schema and schema["default"] not in ({}, [], None):
        shown = json.dumps(schema["default"], ensure_ascii=False, default=str)
        if len(shown) <= DEFAULT_SHOWN:
            text += f"={shown}"
    return text


def param_entries(action: Action, first: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[tuple[str, str, bool]]:
    """(name, description, required) of each parameter: the required ones, then `first`
    (the overlay's find_params), then the others in the schema's order."""
    schema = action.input_schema
    props = schema.get("properties", {})
    req = set(action.required)
    order = list(props)
    ordered = sorted((n for n in props if n not in skip),
                     key=lambda n: (n not in req, first.index(n) if n in first else len(first), order.index(n)))
    return [(n, describe_param(n, props[n], n in req, schema), n in req) for n in ordered]


def param_summary(action: Action, limit: int = 40) -> str:
    entries = param_entries(action, action.find_params)
    parts = [text for _, text, _ in entries[:limit]]
    if len(entries) > limit:
        parts.append(f"… {len(entries) - limit} more")
    return ", ".join(parts) if parts else "(none)"


def _field(err: ValidationError) -> str:
    path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in err.absolute_path).replace(".[", "[")
    return path


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _too_long(where: str, err: ValidationError) -> str:
    """A string over its schema's maxLength, said without echoing it."""
    return f"'{where or '(arguments)'}' is {len(err.instance):,} characters long; at most {err.validator_value:,} are accepted"


def explain_errors(action: Action, errors: list[ValidationError], namer: Namer) -> ArgumentError:
    import difflib  # only a wrong argument gets here: a start does not import it

    props = action.input_schema.get("properties", {})
    lines, fields = [], []
    for err in sorted(errors, key=lambda e: (list(e.absolute_path), e.validator)):
        where = _field(err)
        kw = err.validator
        if kw == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            name = f"{where}.{missing}" if where else missing
            if not where:
                spec = props.get(missing, {})
            else:  # a member of an object parameter: its own schema, through the object's $ref
                parent, _ = _resolve(err.schema if isinstance(err.schema, dict) else {}, action.input_schema)
                spec = (parent.get("properties") or {}).get(missing, {})
            lines.append(f"missing required parameter '{name}'"
                         + (f" ({describe_type(spec, action.input_schema)}{': ' + spec['description'] if spec.get('description') else ''})"
                            if spec else ""))
            fields.append(name)
        elif kw == "additionalProperties":
            allowed = list((err.schema.get("properties") or {}).keys())
            extras = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
            longest = max(map(len, allowed), default=0)
            for i, extra in enumerate(extras):
                # bounded: suggested for the first few only, and never for a name so long that
                # no parameter can reach the cutoff (the similarity is at most 2 x the shorter / both)
                near = difflib.get_close_matches(extra, allowed, n=1, cutoff=0.6) if i < SUGGESTED_MAX and len(extra) <= 4 * longest else []
                name = f"{where}.{extra}" if where else extra
                lines.append(f"unknown parameter '{name}'" + (f"; did you mean '{near[0]}'?" if near else ""))
                fields.append(name)
            if where and extras:  # an object parameter's own members, so the next call can be right
                lines.append(f"'{where}' takes {describe_type(err.schema, action.input_schema)}")
        elif kw == "type":
            expected = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
            shape = describe_type(err.schema, action.input_schema) if expected == "object" else ""
            lines.append(f"'{where}' must be {expected}{' ' + shape if shape.startswith('{') else ''}, got {_short(err.instance)}")
            fields.append(where)
        elif kw == "maxLength":
            lines.append(_too_long(where, err))
            fields.append(where)
        elif kw == "enum":
            lines.append(f"'{where}' must be one of {', '.join(map(str, err.validator_value))}; got {_short(err.instance)}")
            fields.append(where)
        elif kw in ("oneOf", "anyOf") and where and props.get(where.split(".")[0], {}).get("$ref", "").endswith("/Blob"):
            lines.append(f"'{where}' must have exactly one of 'text' or 'base64'")
            fields.append(where)
        else:
            label = where or "(arguments)"
            lines.append(f"'{label}': {err.message if len(err.message) < 160 else err.message[:159] + '…'}")
            fields.append(where)
    unique = list(dict.fromkeys(lines))
    message = f"invalid arguments for {namer(action.id)}: " + "; ".join(unique)
    step = f"Call again with the fields fixed. Parameters (? = optional): {param_summary(action)}."
    return ArgumentError(message, step, fields=list(dict.fromkeys(fields)))


def envelope_error(tool: str, schema: dict, errors: list[ValidationError]) -> ArgumentError:
    """A multi-action tool's own arguments (action, params, confirm) that break its schema."""
    lines, fields = [], []
    for e in errors:
        where = _field(e)
        if e.validator == "required":
            missing = e.message.split("'")[1] if "'" in e.message else where
            lines.append(e.message.replace("is a required property", "is required"))
            fields.append(missing)
        elif e.validator == "additionalProperties":
            lines.append(f"{e.message}; {tool} takes only {', '.join(schema['properties'])}")
            fields += sorted(set(e.instance) - set(schema["properties"])) if isinstance(e.instance, dict) else []
        elif e.validator == "maxLength":
            lines.append(_too_long(where, e))
            fields.append(where)
        elif e.validator == "enum" and isinstance(e.validator_value, list):
            import difflib  # only a wrong argument gets here

            values = [str(v) for v in e.validator_value]
            near = difflib.get_close_matches(str(e.instance)[:100], values, n=3, cutoff=0.5) if isinstance(e.instance, str) else []
            lines.append(f"'{where}' is not one of its {len(values)} values, got {_short(e.instance)}"
                         + (f"; did you mean {', '.join(near)}?" if near else f"; it takes {', '.join(values[:12])}{', …' if len(values) > 12 else ''}"))
            fields.append(where)
        else:
            lines.append(f"'{where or '(arguments)'}': {e.message[:160]}")
            fields.append(where)
    step = f"Call {tool} with {{" + ", ".join(f'"{k}": …' for k in schema["properties"]) + "}."
    return ArgumentError(f"invalid arguments for {tool}: " + "; ".join(lines), step, fields=list(dict.fromkeys(fields)))


class Dispatcher:
    """Applies the dispatch rules to a Call. One per catalog + credential."""

    def __init__(self, catalog: Catalog, settings: Settings, client: ArcaneClient | None, audit: AuditLog | None = None):
        self.catalog = catalog
        self.settings = settings
        self.client = client
        self.audit = audit or AuditLog(settings.audit_log)
        self._validators: dict[str, Draft202012Validator] = {}
        self._valid: dict[tuple, None] = memo_table()  # flat arguments already found valid (_remember_valid)
        self._env_names: dict[str, tuple[float, str]] = memo_table()  # environment ID -> (when read, its name)
        # every rule was compiled when the catalog was built: nothing compiles at call time
        self.hints = catalog.hints
        self.renderer = Renderer(catalog)
        self.conventions = catalog.conventions
        self.streams = catalog.conventions.streams
        self.arguments = catalog.arguments
        if client is not None:
            client.use(catalog)
        self.context = Context(catalog, settings, client, self.renderer)

    def _valid_key(self, action: Action, args: dict) -> tuple | None:
        """What identifies flat arguments exactly (each value's type beside it: 1 and True
        are equal in Python, not in JSON Schema); None for anything else, and for any
        argument whose name says it holds a secret (never kept)."""
        if len(args) > VALID_ARGS_MAX_LEN:
            return None
        key: list = [action.id]
        for k, v in args.items():
            t = type(v)
            if t not in _FLAT or (t is str and len(v) > VALID_VALUE_MAX_LEN) or self.catalog.redaction.is_secret_name(k):
                return None
            key += (k, t, v)
        return tuple(key)

    def _known_valid(self, action: Action, args: dict) -> bool:
        key = self._valid_key(action, args)
        return key is not None and key in self._valid

    def _remember_valid(self, action: Action, args: dict) -> None:
        """Validation is a pure function of the schema and the arguments: flat arguments
        found valid once are not validated again (jsonschema costs ~30 µs a call)."""
        key = self._valid_key(action, args)
        if key is not None:
            keep(self._valid, key, None, VALID_MEMO_SIZE)

    def validator(self, action: Action) -> Draft202012Validator:
        v = self._validators.get(action.id)
        if v is None:
            from jsonschema import Draft202012Validator  # at an action's first call: a start does not import jsonschema

            v = self._validators[action.id] = Draft202012Validator(action.input_schema)
        return v

    # ------------------------------------------------------------ hints

    def _follow(self, activity: str | None, namer: Namer) -> dict[str, str]:
        """Placeholders naming the action that shows a running operation, when it is served."""
        rules = self.streams
        if not activity or not rules.follow_action or rules.follow_action not in self.catalog.actions:
            return {}
        return {"follow_action": namer(rules.follow_action), "follow_argument": rules.follow_argument or "", "activity": activity}

    def hint_for(self, err: CallError, action: Action | None, namer: Namer) -> str | None:
        """The next step an error result offers (rules/errors.yaml, interpreter/text/hints.py)."""
        extra = self._follow(err.activity, namer) if isinstance(err, StreamFailed) else None
        return self.hints.for_error(err, action, self.catalog, namer, extra)

    # ------------------------------------------------------------ dispatch

    async def dispatch(self, call: Call) -> ToolResult:
        """The rules of the module docstring, in order, one named step each; a step stops
        the call by raising CallError (an isError result) or returning its result. With
        traces on, the call is one span (front/observe.py), ended by its audit record."""
        started = time.monotonic()
        namer = Namer(call.surface)
        action = self.catalog.actions.get(call.action_id)
        record = self._record(call)
        state = StreamState()
        notes: list[str | Note] = []
        with self._span(call):
            try:
                if action is None:
                    raise self._unknown(call.action_id, namer)
                args = self._validate(action, call, namer, record)
                self._refuse_in_safe_mode(action, call, namer, record)
                notes += await self._resolve(action, args, namer)
                asked = await self._confirm(action, args, call, namer, record)
                if asked is not None:
                    return asked
                if self.settings.safe_mode and action.mutating:
                    return with_notes(await self._preview(action, args, namer, record), notes)
                return with_notes(await self._run(action, args, call, namer, record, state), notes)
            except TimeoutError:
                return with_notes(self._deadline(action, call.action_id, state, namer, record), notes)
            except CallError as err:
                return with_notes(self._failed(err, action, call, namer, record), notes)
            except Exception as exc:  # a bug of ours: the model gets a plain message, the log the details
                return self._internal(exc, call, namer, record)
            finally:
                self._finish(record, state, started)

    def _span(self, call: Call) -> contextlib.AbstractContextManager:
        """The call's span when traces are on (its attributes come from the audit record)."""
        observer = self.audit.observer
        return observer.span(call.surface, call.action_id, call.template) if observer.tracing else contextlib.nullcontext()

    # ------------------------------------------------------------ the steps of dispatch

    def _record(self, call: Call) -> AuditRecord:
        """The call's audit record, failed until a step says otherwise (names only, no values)."""
        return AuditRecord(surface=call.surface, tool=call.tool, action=call.action_id, environment=None,
                           outcome="failed", arguments=sorted(call.args) if isinstance(call.args, dict) else [],
                           message=call.audit_message)

    def _validate(self, action: Action, call: Call, namer: Namer, record: AuditRecord) -> dict:
        """Rules 2 and 3: the arguments with the default environmentId filled in, checked
        against the input schema and what a schema cannot say; an action not served yet."""
        args = dict(call.args or {})
        if action.env_scoped and self.catalog.env_arg in action.input_schema.get("properties", {}):
            args.setdefault(self.catalog.env_arg, self.settings.environment_id)
            record.environment = str(args.get(self.catalog.env_arg))
        if not self._known_valid(action, args):
            errors = list(self.validator(action).iter_errors(args))
            if errors:
                raise explain_errors(action, errors, namer)
            check_arguments(action, args)  # NaN, a path value that is not one segment, a query too long
            self._remember_valid(action, args)
        if action.pending:
            raise NotServedError(
                f"{namer(action.id)} is declared but not served yet: its handler kind ({action.handler}) comes in a later version of this server",
                "Use a related action, or Arcane's UI, for now.")
        return args

    def _refuse_in_safe_mode(self, action: Action, call: Call, namer: Namer, record: AuditRecord) -> None:
        """Rule 4, in safe mode: a destructive action without confirm: true is refused before anything is read."""
        if action.destructive and not call.confirm and self.settings.safe_mode:
            record.outcome = "refused"
            raise ConfirmationRequired(
                f"{namer(action.id)} is destructive ({action.title}) and was not confirmed; nothing was sent to Arcane",
                "Safe mode is on: ask the user, then call again with confirm: true to see a preview of the request.")

    async def _resolve(self, action: Action, args: dict, namer: Namer) -> list[str | Note]:
        """Rule 5: names become IDs before the user is asked, so the question shows what will
        be changed. A safe-mode preview of a change sends nothing, this read neither, except
        for a destructive change: its preview shows the question, whose reads need the target."""
        lookup = not (self.settings.safe_mode and action.mutating and not action.destructive)
        return await self.resolve_arguments(action, args, namer, lookup=lookup)

    async def _confirm(self, action: Action, args: dict, call: Call, namer: Namer, record: AuditRecord) -> ToolResult | None:
        """Rule 6: a destructive action without confirm: true asks the user: the refusal that
        carries the question when nobody can be asked, the input request (2026-07-28), or the
        elicitation (legacy). None: go on (confirmed, or not destructive)."""
        if not action.destructive:
            return None
        if call.confirm:
            record.confirmation = "argument"
            return None
        if call.answer is None and not call.can_request_input and call.elicit is None:
            # nobody can be asked here: the refusal carries the question for the model to put
            # to the user (its reads only read; nothing is changed)
            question = await self.question(action, args)
            record.outcome = "refused"
            raise ConfirmationRequired(
                f"{namer(action.id)} is destructive ({action.title}) and was not confirmed; nothing was changed in Arcane.\n"
                f"The question to ask the user:\n{question}",
                "Ask the user to confirm this exact change, then call again with confirm: true.")
        if call.answer is None and call.can_request_input:
            record.outcome = None  # not final: the client asks the user and retries
            return ToolResult("", ask=await self.question(action, args))
        answer = call.answer
        if answer is None and call.elicit is not None:
            answer = await call.elicit(await self.question(action, args))
        record.confirmation = "elicitation"
        if answer != "accept":
            record.outcome = "declined"
            raise ConfirmationRequired(f"declined: the user did not confirm {namer(action.id)} ({answer}); nothing was changed in Arcane",
                                       "Do not retry unless the user asks for it again.")
        return None

    async def _preview(self, action: Action, args: dict, namer: Namer, record: AuditRecord) -> ToolResult:
        """Rule 7: safe mode answers a preview of the request and sends nothing; a destructive
        change's preview shows what it would affect (reads only)."""
        record.outcome = "previewed"
        shown = await self.confirmation(action, args) if action.destructive else None
        return preview(action, prepare(action, args), namer, self.catalog,
                       confirmation=shown.masked() if shown is not None else None)

    async def _run(self, action: Action, args: dict, call: Call, namer: Namer, record: AuditRecord,
                   state: StreamState) -> ToolResult:
        """Rule 8: the handler of the action's kind, within the action deadline."""
        tasks = self.conventions.activity.tasks
        if call.on_started is not None and tasks is not None and action.id in tasks.actions:
            state.on_activity = lambda activity, a=action, g=args: call.on_started(a, g, activity)
        reading = Reading(self.settings.max_download_bytes, self.conventions, call.progress, state)
        # a deadline on this task, not wait_for's: no second task per call to schedule
        async with asyncio.timeout(self.settings.action_timeout):
            result = await self._execute(action, args, namer, reading)
        record.outcome = "executed"
        record.http_status = result.http_status
        result.links = links_for(self.catalog, action.id, args)  # the object's resource, on every surface
        return result

    def _failed(self, err: CallError, action: Action | None, call: Call, namer: Namer, record: AuditRecord) -> ToolResult:
        """A step's CallError as the isError result, with its next step."""
        record.error_class = type(err).__name__
        if isinstance(err, UpstreamError):
            record.http_status = err.status
            if err.status is None or err.status >= 500:
                # Arcane down or failing is the operator's concern too (HTTP mode sends it to the
                # client as an MCP log message, scrubbed): the status and the error class, no values
                log.warning("Arcane failed on %s: %s (HTTP %s)", call.action_id, type(err).__name__, err.status or "none")
            if isinstance(err, ArcaneTimeout) and action is not None and action.mutating and err.sent:
                err.message += "; the change may have happened"
        return render_error(err.message, self.hint_for(err, action, namer), code=err.code,
                            status=getattr(err, "status", None), fields=getattr(err, "fields", None),
                            structured=getattr(err, "structured", None))

    def _internal(self, exc: Exception, call: Call, namer: Namer, record: AuditRecord) -> ToolResult:
        log.exception("internal error while dispatching %s", call.action_id)
        record.error_class = type(exc).__name__
        return render_error(f"internal error in arcane-mcp while running {namer(call.action_id)} ({type(exc).__name__})",
                            "Retry once; if it repeats, report it with the server's log.", code="internal")

    def _finish(self, record: AuditRecord, state: StreamState, started: float) -> None:
        """Rule 9: the audit record, whatever the outcome (not for an input-required round)."""
        record.activity = state.activity
        record.duration_ms = round((time.monotonic() - started) * 1000, 1)
        if record.outcome is not None:
            self.audit.write(record)
        # names only, like the audit record: argument values and answers never reach the log
        log.debug("dispatch %s via %s: %s (HTTP %s, %.1f ms, args %s)", record.action, record.tool, record.outcome,
                  record.http_status, record.duration_ms, ",".join(record.arguments))

    def _unknown(self, action_id: str, namer: Namer) -> UnknownActionError:
        closest = self.catalog.closest(str(action_id))
        withdrawn = self.catalog.withdrawn.get(str(action_id))
        if withdrawn:
            return UnknownActionError(f"{namer(action_id)} is not served: {withdrawn}", None, closest=closest)
        step = ("Did you mean " + ", ".join(namer(c) for c in closest) + "?") if closest else f"Search for the action with {FIND_TOOL}."
        return UnknownActionError(f"unknown action {action_id!r}", step, closest=closest)

    def _deadline(self, action: Action | None, action_id: str, state: StreamState, namer: Namer, record: AuditRecord) -> ToolResult:
        """The action deadline passed. Mid-stream, the operation goes on in Arcane: say so
        and name the activity to follow; otherwise the change may or may not have happened."""
        err = ArcaneTimeout(f"{namer(action_id)} did not finish within ARCANE_MCP_ACTION_TIMEOUT ({self.settings.action_timeout:g}s)", None, sent=True)
        record.error_class = type(err).__name__
        hint = None
        if action is not None and action.response_kind in STREAMING_KINDS and state.activity:
            err.message += (f"; the operation may still be running in Arcane (activity {state.activity}, "
                            f"{state.lines} progress line(s) read)")
            if state.last:
                err.message += f"; last line: {state.last[-1][:200]}"
            hint = self.hints.for_stream_deadline(action, self.catalog, namer, self._follow(state.activity, namer))
        elif action is not None and action.mutating:
            err.message += "; the change may have happened"
        return render_error(err.message, hint or self.hint_for(err, action, namer), code=err.code)

    async def _execute(self, action: Action, args: dict, namer: Namer, reading: Reading) -> ToolResult:
        """Carry the action out with the handler of its kind (interpreter/call/handlers.py)."""
        handler = HANDLERS.get(action.handler)
        if handler is None:  # compile marks such an action pending, so this is a bug of ours
            raise NotServedError(f"{namer(action.id)}: no handler serves the kind {action.handler!r}", None)
        return await handler(self.context, action, args, namer, reading)

    # ------------------------------------------------------------ IDs from names

    async def resolve_arguments(self, action: Action, args: dict, namer: Namer, *, lookup: bool = True) -> list[str | Note]:
        """Path arguments the rules say take an ID but were given something else: find the
        ID through the declared list action (args is updated; the returned notes say what
        was resolved), or refuse naming that action. Nothing is sent when it fails. Without
        `lookup` (a safe-mode preview) the name stays and a note says it would be resolved."""
        notes: list[str | Note] = []
        for b in action.bindings:
            rule = self.arguments.get(b.arg)
            if b.location != PATH or rule is None or b.arg not in args or rule.is_id(args[b.arg]):
                continue
            value = str(args[b.arg])
            listing = self.catalog.actions.get(rule.list_action)
            if not rule.resolve or listing is None:
                step = f"Find the ID with {namer(rule.list_action)}, then call again." if listing is not None else "Pass the item's ID."
                raise ArgumentError(f"'{b.arg}' takes an ID and {_short(value)} is not one (Arcane looks these up by ID only)", step, fields=[b.arg])
            if not lookup:
                # the value is not repeated: a preview shows arguments only through redaction
                notes.append(Note.of(f"{b.arg} is a name, not an ID: with safe mode off it is first resolved to its ID through ",
                                     Named(namer(listing.id)), " (nothing is looked up for a preview)."))
                continue
            found, near = await self._find_ids(rule, listing, value, args, namer)
            if len(found) != 1:
                how = f"Find the ID with {namer(listing.id)}, then call again."
                if not found:
                    # names that hold the value ("local" for "Local Docker"): the likely meaning, said, never taken
                    close = f"; names that contain it: {', '.join(near)}" if near else ""
                    raise ArgumentError(f"'{b.arg}' takes an ID, and {namer(listing.id)} lists nothing named {_short(value)}{close}",
                                        "Pass the ID (or the exact name) of the one you mean." if near else how, fields=[b.arg])
                raise ArgumentError(f"'{b.arg}' takes an ID, and {len(found)} items of {namer(listing.id)} are named {_short(value)}: "
                                    + ", ".join(found[:10]), "Pass the ID of the one you mean.", fields=[b.arg])
            args[b.arg] = found[0]
            notes.append(Note.of(f"{b.arg} {_short(value)} is a name; resolved to the ID {found[0]} through ", Named(namer(listing.id)), "."))
        return notes

    async def _find_ids(self, rule: ArgumentRule, listing: Action, value: str, args: dict, namer: Namer) -> tuple[list[str], list[str]]:
        """The IDs of the listed items named `value` (exactly, else ignoring case), and up to
        five "name (ID)" of items whose name merely contains it."""
        props = listing.input_schema.get("properties", {})
        sub = {k: v for k, v in args.items() if k == self.catalog.env_arg and k in props}
        sub.update((k, v) for k, v in rule.list_arguments(value).items() if k in props)
        try:
            answer = await self.read(listing, sub)
        except CallError as err:
            err.message = f"looking up the name {_short(value)} through {namer(listing.id)} failed: {err.message}"
            raise
        items = (answer.structured or {}).get(self.conventions.envelope.items) if answer.kind == "list" else None
        exact, folded, near = [], [], []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get(rule.id_field), (str, int)):
                continue
            names = [str(item[f]) for f in rule.name_fields if isinstance(item.get(f), (str, int))]
            if value in names:
                exact.append(str(item[rule.id_field]))
            elif value.casefold() in (n.casefold() for n in names):
                folded.append(str(item[rule.id_field]))
            elif value.strip() and len(near) < 5 and any(value.casefold() in n.casefold() for n in names):
                near.append(f"{_short(names[0])} ({_short(str(item[rule.id_field]))})")
        return list(dict.fromkeys(exact or folded)), near

    def _lookup_action(self, action: Action, args: dict) -> Action | None:
        """The read that shows the target (the overlay's item_action, else the domain's
        get action, catalog/conventions.yaml), when the call's arguments are all it needs."""
        domain = self.catalog.domains.get(action.domain)
        for aid in (action.item_action, domain.get_action if domain is not None else None):
            look = self.catalog.actions.get(aid) if aid else None
            if look is not None and look.read_only and not look.pending and look.id != action.id \
                    and look.response_kind == "json" and set(look.required) <= set(args):
                return look
        return None

    async def read(self, action: Action, args: dict, *, statuses: str = reader.OK) -> reader.Answer:
        """The one internal read, through this dispatcher's client (reader.read: one
        deadline, ARCANE_MCP_READ_TIMEOUT; one error mapping, UpstreamError by code)."""
        return await reader.read(self.client, action, args, self.conventions, statuses=statuses)

    def _reader(self) -> Callable[[Action, dict], Awaitable[Any]]:
        """Reads for one question, each (action, arguments) sent once however many of its
        parts use it; a failure is the exception, returned, not raised."""
        tasks: dict[str, asyncio.Task] = {}

        async def safe(look: Action, args: dict) -> Any:
            try:
                return (await self.read(look, args)).structured
            except (CallError, ValueError, RecursionError) as exc:
                return exc

        def read(look: Action, args: dict) -> Awaitable[Any]:
            key = look.id + json.dumps(args, sort_keys=True, default=str)
            if key not in tasks:
                tasks[key] = asyncio.ensure_future(safe(look, args))
            return tasks[key]
        return read

    def _name_in(self, value: Any) -> str | None:
        for f in self.catalog.rendering.display_name_fields if isinstance(value, dict) else ():
            v = value.get(f)
            if isinstance(v, list) and v and isinstance(v[0], str):
                v = v[0]
            if isinstance(v, str) and v.strip():
                return v
        return None

    async def _display_name(self, action: Action, args: dict, read=None) -> str | None:
        """The target's name, read from Arcane for the question; None when unknown."""
        look = self._lookup_action(action, args)
        if look is None or self.client is None or not self.catalog.rendering.display_name_fields:
            return None
        sub = {k: v for k, v in args.items() if k in look.input_schema.get("properties", {})}
        value = await (read or self._reader())(look, sub)
        return None if isinstance(value, BaseException) else self._name_in(value)

    async def _environment_name(self, env: str, read) -> str | None:
        """The environment's name, through the action catalog/conventions.yaml names for
        the environment (diagnostics.environment), kept ENV_NAME_TTL seconds."""
        now = time.monotonic()
        kept = self._env_names.get(env)
        if kept is not None and now - kept[0] < ENV_NAME_TTL:
            return kept[1]
        look = self.catalog.actions.get(self.conventions.diagnostics.environment.action)
        if look is None or self.client is None or len(look.required) != 1:
            return None
        value = await read(look, {look.required[0]: env})
        name = None if isinstance(value, BaseException) else self._name_in(value)
        if name is not None:
            keep(self._env_names, env, (now, name), ENV_NAMES_MAX)
        return name

    async def _blast(self, read_spec, action: Action, args: dict, read, target: Awaitable[str | None]) -> blast.Affected:
        look = self.catalog.actions.get(read_spec.action)
        if look is None or self.client is None:
            return blast.failed(read_spec, "its read is not served here")
        sub = {k: v for k, v in args.items() if k == self.catalog.env_arg and k in look.input_schema.get("properties", {})}
        sub.update(read_spec.read_arguments(args) or {})
        answer = await read(look, sub)
        if isinstance(answer, ArcaneTimeout):
            return blast.failed(read_spec, f"Arcane did not answer within {self.settings.read_timeout:g}s")
        if isinstance(answer, BaseException):
            status = getattr(answer, "status", None)
            return blast.failed(read_spec, "the read failed" + (f": HTTP {status}" if status else ""))
        name = await target if read_spec.target_match is not None else None
        return blast.affected(read_spec, answer, target=name, name_fields=self.catalog.rendering.display_name_fields)

    async def confirmation(self, action: Action, args: dict) -> blast.Confirmation:
        """What the user is asked: the action and its target, named when Arcane can tell,
        the environment by name and ID, the arguments that change what happens, and what
        the overlay's `blast_radius` reads say it affects. The reads run at once, each
        bounded (ARCANE_MCP_READ_TIMEOUT, reader.READ_MAX_BYTES); one that fails says it could not tell.
        e.g. "Delete container: `/web-1` (containerId 3f2a8c1e9b7d…) on environment `local` (environmentId 0)?"."""
        def short(v) -> str:
            text = str(v)
            return text if len(text) <= 16 else text[:12] + "…"

        env_arg = self.catalog.env_arg
        params = [(b.arg, args[b.arg]) for b in action.bindings
                  if b.location == PATH and b.arg != env_arg and b.arg in args]
        read = self._reader()
        target = asyncio.ensure_future(self._display_name(action, args, read) if params else _none())
        env_id = args.get(env_arg) if action.env_scoped else None
        env_name = asyncio.ensure_future(self._environment_name(str(env_id), read) if env_id is not None else _none())
        reads = [r for r in action.blast_radius if blast.applies(r, args) and r.read_arguments(args) is not None]
        affected = await asyncio.gather(*(self._blast(r, action, args, read, target) for r in reads))
        name, env_name = await target, await env_name

        def red(k: str, v: Any) -> str:  # a value as a safe-mode preview shows it
            return str(self.catalog.redaction.redact(str(v), at=(k,), action_id=action.id, side=REQUEST,
                                                     schema=action.input_schema).value)

        def located(show) -> tuple[str, str]:
            """The target and the environment, each value through `show`."""
            if name is not None and not any(str(v) == name for _, v in params):
                where = f"{blast.shown(name)} (" + ", ".join(f"{k} {short(show(k, v))}" for k, v in params) + ")"
            else:
                where = ", ".join(f"{k} {code_span(show(k, v))}" for k, v in params)
            env = ""
            if env_id is not None:
                shown_id = show(env_arg, env_id)
                env = f" on environment {blast.shown(env_name)} ({env_arg} {shown_id})" if env_name else f" on environment {shown_id}"
            return where, env

        where, env = located(lambda k, v: str(v))
        masked_where, masked_env = located(red)
        # what a handler acts with (the command exec types) is part of what is confirmed
        handled = [b.arg for b in action.bindings if b.location == "handler" and isinstance(args.get(b.arg), str)]
        typed = "".join(f" ({k}: {args[k]})" for k in handled)
        masked = "".join(f" ({k}: {red(k, args[k])})" for k in handled)
        head = action.title + (f": {where}" if where else "") + env + typed + "?"
        # every other argument given changes what happens: named, secrets masked as in a preview
        shown_args = []
        skip = {env_arg, *(k for k, _ in params), *(b.arg for b in action.bindings if b.location == "handler")}
        for k, v in args.items():
            if k in skip:
                continue
            r = self.catalog.redaction.redact(v, at=(k,), action_id=action.id, side=REQUEST, schema=action.input_schema)
            shown_args.append((k, blast.shown(r.value, blast.VALUE_MAX)))
        environment = {"id": str(env_id), "name": env_name} if env_id is not None else None
        masked_head = action.title + (f": {masked_where}" if masked_where else "") + masked_env + masked + "?"
        masked_environment = {"id": red(env_arg, env_id), "name": env_name} if env_id is not None else None
        return blast.Confirmation(head, environment, tuple(shown_args), tuple(affected), masked_head=masked_head,
                                  masked_environment=masked_environment)

    async def question(self, action: Action, args: dict) -> str:
        """The confirmation as the one text a client shows (see `confirmation`)."""
        return (await self.confirmation(action, args)).text()


async def _none() -> None:
    return None
