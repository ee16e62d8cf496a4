"""Compile: every loaded rule and inventory file into frozen, typed models, once.

load.py reads the files (layered, schema-checked); this stage turns each into the models
of model.py (and hints.Hints, redact.Rules, stream.StreamRules, owned by the stages that
run them). Every embedded mini-language is compiled here: regular expressions,
JMESPath expressions, redaction pointer patterns, route paths (URI templates) and
`{placeholder}` texts, whose names are checked against the placeholders their place
allows. A compile failure is a Problem at the value's file:line (in the layer that wrote
it); an unknown kind (a response kind, a handler kind) is one that names the known ones.

One function per file kind, registered in COMPILERS under the file's name; each takes a
Reader (the file's plain data, its origins, the problems found) and returns the model, or
None when the file is absent. `compile_sources` runs them all and returns a Compiled
bundle; catalog.py builds the actions from it and validate.py cross-checks it.

A Reader also works on plain data without a file (`Reader.of(data)`): tests compile a
rule set from a dict and get (pointer, message, code) problems back.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import jmespath.exceptions

from ..call import kinds
from ..call.framing import Framings
from ..call.stream import LinePattern, StreamRules
from ..errors import Problem
from ..text.hints import FAILING, OTHERS, Entry, Hints, PurposeRule
from ..text.redact import SIDES, Kept, NameRules, Position, Rules, TextRule, keep_regex, normalise, pattern_source
from ..text.suggest import words
from .lazy_dataclass import dataclass
from .load import Loaded, Sources, problem_from
from .model import (
    ActionOverlay,
    Activity,
    AllowEntry,
    ArgumentRule,
    BlastRead,
    Capture,
    CaptureBound,
    ChunkedUpload,
    Classification,
    ClientFilter,
    ClientFilters,
    Column,
    ConfidenceRules,
    Conventions,
    Diagnostics,
    DidYouMean,
    DomainOverlay,
    DomainRoles,
    Envelope,
    Environment,
    ErrorShape,
    Expr,
    ExtraRoute,
    FindAnswerText,
    FindRules,
    HttpText,
    Identity,
    IndividualText,
    Intent,
    Inventory,
    JsonPart,
    LineFormat,
    LiveBound,
    LiveRules,
    MaxLength,
    MetaText,
    Metric,
    OperationName,
    Origin,
    OutcomeRules,
    Pagination,
    ParamEnum,
    PermissionEntry,
    Permissions,
    Plurals,
    PointerPattern,
    Probe,
    Question,
    RankWeights,
    Rendering,
    RouteParam,
    ServerText,
    SessionConvention,
    StateSteps,
    TaskRules,
    Template,
    ToolText,
    TransportProbe,
    UploadSessions,
    UriTemplate,
    frozen_map,
)
from .resource_rules import Guide, ResourceRules, compile_guides
from .view_rules import ViewRule, compile_views

NONE = "none"  # conventions.yaml `domains`: the domain has no such action


# ---------------------------------------------------------------- the reader


class Reader:
    """One file's plain data with the means to compile it: origins of its values, the
    mini-language compilers, and the problems found (as Problems at the file's lines, or
    as (pointer parts, message, code) without a file)."""

    def __init__(self, data: Any, loaded: Loaded | None = None):
        self.data = data
        self.loaded = loaded
        self.problems: list[Problem] = []
        self.found: list[tuple[tuple, str, str]] = []

    @classmethod
    def of(cls, data: Any) -> Reader:
        return cls(data)

    def origin(self, *parts: Any) -> Origin | None:
        if self.loaded is None:
            return None
        return self.loaded.origin(parts)

    def origins(self, base: tuple, spec: Any, items: Iterable[str] = ()) -> Any:
        """The origins of a mapping's present keys ('' is the mapping itself), and of each
        item of the list keys named in `items`."""
        if self.loaded is None:
            return frozen_map()
        out = {"": self.loaded.origin(base)}
        items = set(items)
        for key, value in (spec.items() if isinstance(spec, dict) else ()):
            out[key] = self.loaded.origin((*base, key))
            if key in items and isinstance(value, list):
                for i in range(len(value)):
                    out[f"{key}/{i}"] = self.loaded.origin((*base, key, i))
        return frozen_map(out)

    def problem(self, parts: Iterable[Any], message: str, code: str) -> None:
        parts = tuple(parts)
        self.found.append((parts, message, code))
        if self.loaded is not None:
            origin = self.loaded.origin(parts)
            self.problems.append(problem_from(origin, message, code))

    # ------------------------------------------------------------ mini-languages

    def regex(self, parts: tuple, text: str) -> re.Pattern | None:
        try:
            return re.compile(text)
        except re.error as exc:
            self.problem(parts, f"not a valid regular expression: {exc}", "bad_regex")
            return None

    def expr(self, parts: tuple, text: str) -> Expr | None:
        try:
            return Expr.of(text)
        except jmespath.exceptions.JMESPathError as exc:
            self.problem(parts, f"not a valid JMESPath expression: {str(exc).splitlines()[0]}", "bad_jmespath")
            return None

    def exprs(self, parts: tuple, value: Any) -> tuple[Expr, ...]:
        """One expression or a list of them (the first non-empty result wins where used)."""
        if isinstance(value, str):
            e = self.expr(parts, value)
            return (e,) if e is not None else ()
        return tuple(e for i, text in enumerate(value or ()) if (e := self.expr((*parts, i), text)) is not None)

    def pattern(self, parts: tuple, text: str) -> PointerPattern | None:
        try:
            return PointerPattern(text=text, regex=re.compile(pattern_source(text)), last=text.rsplit("/", 1)[-1])
        except ValueError as exc:
            self.problem(parts, f"not a pointer pattern: {exc}", "bad_pattern")
            return None

    def template(self, parts: tuple, text: str, allowed: Iterable[str] = (), actions: bool = False) -> Template:
        """A `{placeholder}` text whose names must be in `allowed` (or action IDs, when
        `actions`); an unknown name is a problem naming the known ones."""
        template = Template.of(text)
        allowed = set(allowed)
        for name in template.names:
            if name in allowed or (actions and _ACTION_ID.match(name)):
                continue
            known = sorted(allowed) + (["an action ID such as {environment.list}"] if actions else [])
            self.problem(parts, f"unknown placeholder {{{name}}}; known: {', '.join(known) or 'none'}", "unknown_placeholder")
        return template


_ACTION_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _fields_read(node: Any) -> set[str]:
    """The item fields a JMESPath expression reads at its top level (for the note that
    names the fields a table leaves out)."""
    out: set[str] = set()
    if isinstance(node, dict):
        if node.get("type") == "field":
            out.add(node.get("value"))
        children = node.get("children", [])
        if node.get("type") in ("projection", "subexpression", "index_expression"):
            # only the left side reads the item; the right side reads what the left returned
            children = children[:1]
        for child in children:
            out |= _fields_read(child)
    return out


# ---------------------------------------------------------------- rules/overlays


def _chunked(r: Reader, base: tuple, spec: dict | None) -> ChunkedUpload | None:
    if not isinstance(spec, dict):
        return None
    return ChunkedUpload(kind=str(spec["kind"]), chunk_size=int(spec["chunk_size"]), upload_argument=str(spec["upload_argument"]),
                         content_argument=str(spec["content_argument"]),
                         file_argument=str(spec["file_argument"]), origins=r.origins((*base, "chunked_upload"), spec))


def _client_filters(r: Reader, base: tuple, spec: dict | None) -> ClientFilters | None:
    """An action's `client_filters`: per parameter, the JMESPath that reads an item's value."""
    if not isinstance(spec, dict):
        return None
    params = tuple(
        ClientFilter(name=str(name), value=r.expr((*base, "client_filters", "params", name, "value"), p["value"]),
                     values=tuple(str(v) for v in p["values"]), description=str(p.get("description") or ""),
                     origins=r.origins((*base, "client_filters", "params", name), p))
        for name, p in (spec.get("params") or {}).items())
    return ClientFilters(fetch_limit=int(spec["fetch_limit"]), params=params, origins=r.origins((*base, "client_filters"), spec))


def _json_parts(r: Reader, base: tuple, spec: dict | None) -> tuple[JsonPart, ...] | None:
    """An action's `json_parts`: per JSON-text argument, the members offered as arguments."""
    if not isinstance(spec, dict):
        return None
    return tuple(
        JsonPart(part=str(part), properties=frozen_map((str(k), json.loads(json.dumps(v))) for k, v in (p.get("properties") or {}).items()),
                 required=tuple(p.get("required") or ()),
                 fill=json.dumps(p["fill"], sort_keys=True) if "fill" in p else None,
                 origins=r.origins((*base, "json_parts", part), p))
        for part, p in spec.items())


def _states(r: Reader, base: tuple, spec: Any) -> StateSteps | None:
    """An action's `states`: the JMESPath that reads its answer's state, and per state the
    next steps it allows."""
    if not isinstance(spec, dict):
        return None
    read = r.expr((*base, "states", "read"), spec["read"])
    steps = frozen_map((str(k), tuple(v)) for k, v in (spec.get("steps") or {}).items())
    return StateSteps(read=read, steps=steps, origins=r.origins((*base, "states"), spec))


def _blast_radius(r: Reader, base: tuple, spec: list | None) -> tuple[BlastRead, ...] | None:
    """An action's `blast_radius`: its reads, their JMESPath compiled (`bad_jmespath`);
    which actions and arguments they name is validate.py's to check."""
    if spec is None:
        return None
    out = []
    for i, read in enumerate(spec):
        where = (*base, "blast_radius", i)
        exprs = {k: r.expr((*where, k), read[k]) if k in read else None for k in ("items", "when", "name", "size", "count", "target_match")}
        arguments = tuple(sorted((k, Template.of(v) if isinstance(v, str) else v) for k, v in (read.get("arguments") or {}).items()))
        out.append(BlastRead(label=str(read["label"]), action=str(read["action"]), arguments=arguments, names_max=int(read.get("names_max", 5)),
                             origins=r.origins(where, read), **exprs))
    return tuple(out)


def _param_enums(r: Reader, base: tuple, spec: dict | None) -> Mapping[str, ParamEnum] | None:
    """An action's `param_enums`: per parameter path, the closed set Arcane accepts (which
    parameters exist is validate.py's to check)."""
    if spec is None:
        return None
    return frozen_map((path, ParamEnum(values=tuple(map(str, e["values"])), why=str(e["why"]), origins=r.origins((*base, "param_enums", path), e)))
                      for path, e in spec.items())


def compile_overlay(r: Reader) -> DomainOverlay:
    """rules/overlays/<domain>.yaml (schema-checked)."""
    data = r.data
    domain = data["domain"]
    actions = {}
    for name, spec in (data.get("actions") or {}).items():
        base = ("actions", name)
        columns = None
        if "columns" in spec:
            columns = tuple(_column(r, (*base, "columns", i), c) for i, c in enumerate(spec["columns"]))
        empty = r.template((*base, "empty"), spec["empty"], actions=True) if "empty" in spec else None
        tup = lambda key, spec=spec: tuple(spec[key]) if key in spec else None  # noqa: E731
        actions[name] = ActionOverlay(
            name=name, title=spec.get("title"), description=spec.get("description"), usage=spec.get("usage"),
            aliases=tup("aliases"), related=tup("related"), follow_ups=tup("follow_ups"), columns=columns, empty=empty,
            item_action=spec.get("item_action"), list_member=spec.get("list_member"), order=spec.get("order"),
            chunked_upload=_chunked(r, base, spec.get("chunked_upload")), states=_states(r, base, spec.get("states")),
            blast_radius=_blast_radius(r, base, spec.get("blast_radius")), find_params=tup("find_params"),
            param_enums=_param_enums(r, base, spec.get("param_enums")),
            json_parts=_json_parts(r, base, spec.get("json_parts")),
            client_filters=_client_filters(r, base, spec.get("client_filters")),
            origins=r.origins(base, spec, items=("aliases", "related", "follow_ups", "columns", "find_params")))
    arguments = {}
    for arg, spec in (data.get("arguments") or {}).items():
        base = ("arguments", arg)
        rx = r.regex((*base, "id_pattern"), spec["id_pattern"])  # None only with its problem reported
        params = tuple(sorted(
            (k, r.template((*base, "list_params", k), v, ("value",)) if isinstance(v, str) else v)
            for k, v in (spec.get("list_params") or {}).items()))
        arguments[arg] = ArgumentRule(name=arg, id_pattern=rx, list_action=spec["list"], id_field=spec["id_field"], name_fields=tuple(spec["name_fields"]),
                                      list_params=params,
                                      resolve=bool(spec["resolve"]), origins=r.origins(base, spec))
    return DomainOverlay(domain=domain, file=r.loaded.name if r.loaded else "", title=data.get("title"), description=data.get("description"),
                         actions=frozen_map(actions), arguments=frozen_map(arguments), origins=r.origins((), data))


def _column(r: Reader, where: tuple, spec: Any) -> Column:
    if isinstance(spec, str):
        return Column(label=spec, field=spec, expr=None, whole=None, reads=frozenset({spec}),
                      origins=frozen_map({"": r.origin(*where)}) if r.loaded else frozen_map())
    expr = r.expr((*where, "expr"), spec["expr"])
    reads = frozenset(_fields_read(expr.parsed)) if expr is not None else frozenset()
    return Column(label=spec["label"], field=None, expr=expr, whole=bool(spec.get("whole", False)), reads=reads, origins=r.origins(where, spec))


# ---------------------------------------------------------------- rules/rendering, find, server


def compile_rendering(r: Reader) -> Rendering:
    d = r.data
    return Rendering(
        max_rows=d["max_rows"], cell_max=d["cell_max"], max_columns=d["max_columns"], next_steps_max=d["next_steps_max"],
        json_block_max=d["json_block_max"], short_list_max=d["short_list_max"], short_list_chars=d["short_list_chars"],
        omitted_names_max=d["omitted_names_max"], identity_fields=tuple(d["identity_fields"]),
        state_fields=tuple(d["state_fields"]), describe_fields=tuple(d["describe_fields"]),
        whole_fields=frozenset(d["whole_fields"]), byte_fields=frozenset(d["byte_fields"]),
        duration_nanosecond_fields=frozenset(d["duration_nanosecond_fields"]),
        duration_millisecond_fields=frozenset(d["duration_millisecond_fields"]),
        duration_second_fields=frozenset(d["duration_second_fields"]), duration_minute_fields=frozenset(d["duration_minute_fields"]),
        readings_max=d["readings_max"],
        epoch_second_fields=frozenset(d["epoch_second_fields"]), epoch_millisecond_fields=frozenset(d["epoch_millisecond_fields"]),
        hidden_fields=frozenset(d["hidden_fields"]), display_name_fields=tuple(d["display_name_fields"]),
        origins=r.origins((), d))


def compile_find(r: Reader) -> FindRules:
    d = r.data
    w, f = d["weights"], d["weights"]["fields"]
    weights = RankWeights(
        verb=f["verb"], name_rest=f["name_rest"], domain=f["domain"], domain_other=f["domain_other"], alias=f["alias"],
        title=f["title"], usage=f["usage"], description=f["description"], alias_phrase=w["alias_phrase"],
        alias_unordered=w["alias_unordered"], synonym=w["synonym"],
        fuzzy=w["fuzzy"]["factor"], fuzzy_second_edit=w["fuzzy"]["second_edit"], fuzzy_candidates=w["fuzzy"]["candidates"],
        fuzzy_edits=tuple(sorted((e["min_length"], e["edits"]) for e in w["fuzzy"]["edits"])),
        fuzzy_split_min=w["fuzzy"]["split_min"], fuzzy_words=w["fuzzy"]["words"],
        fuzzy_keep_first_below=w["fuzzy"]["keep_first_below"], rarity=w["rarity"], coverage_floor=w["coverage_floor"],
        destructive=w["penalties"]["destructive"], pending=w["penalties"]["pending"], noun_only_bonus=w["noun_only_bonus"],
        exact_id=w["exact_id"],
        origins=frozen_map({**r.origins(("weights",), w), **r.origins(("weights", "fields"), f)}))
    dym, q, pl, i, c = d["did_you_mean"], d["question"], d["plurals"], d["intent"], d["confidence"]
    question = Question(words=frozenset(q["words"]), requests=tuple(tuple(words(r)) for r in q["requests"]), mutating=q["mutating"],
                        origins=r.origins(("question",), q))
    endings = sorted(((e["strip"], e.get("add", "")) for e in pl["endings"]), key=lambda e: -len(e[0]))
    plurals = Plurals(endings=tuple(endings), min_stem=pl["min_stem"], origins=r.origins(("plurals",), pl))
    return FindRules(
        change_words=tuple(d["change_words"]), stop_words=frozenset(d["stop_words"]),
        synonyms=frozen_map((k, tuple(v)) for k, v in d["synonyms"].items()), noun_only_prefers=tuple(d["noun_only_prefers"]),
        weights=weights, did_you_mean=DidYouMean(token_match=dym["token_match"], cutoff=dym["cutoff"], whole_factor=dym["whole_factor"],
                                                 max_length=dym["max_length"],
                                                 origins=r.origins(("did_you_mean",), dym)),
        question=question, plurals=plurals, max_words=d["max_words"],
        rewrites=_rewrites([d["shorthands"], *d["languages"].values()]), leading=_rewrites([d["leading_shorthands"]]),
        intent=Intent(see_words=frozenset(i["see_words"]), first_words=frozenset(i["first_words"]),
                      all_words=frozenset(i["all_words"]), one_words=frozenset(i["one_words"]),
                      collective_verbs=frozenset(i["collective_verbs"]), see_mutating=i["see_mutating"],
                      one_thing=i["one_thing"], ask_verb=i["ask_verb"], many_list=i["many_list"], context=i["context"], markers=tuple(i["markers"]),
                      origins=r.origins(("intent",), i)),
        confidence=ConfidenceRules(high_score=c["high"]["score"], high_margin=c["high"]["margin"], high_matched=c["high"]["matched"],
                                   low_score=c["low"]["score"], low_margin=c["low"]["margin"], low_matched=c["low"]["matched"],
                                   min_matched=c["min_matched"], origins=r.origins(("confidence",), c)),
        origins=r.origins((), d))


def _rewrites(tables: list) -> Mapping[str, tuple[str, ...]]:
    """Word tables (rules/find.yaml `shorthands`, `languages`): each key's words (folded and
    joined by one space; a key may be a few words: "neu starten") -> the words it is read as.
    The first table that has a key decides it."""
    out: dict[str, tuple[str, ...]] = {}
    for table in tables:
        for key, value in table.items():
            out.setdefault(" ".join(words(key)), tuple(x for v in value for x in words(v)))
    return frozen_map(out)


def compile_server(r: Reader) -> ServerText:
    d = r.data
    find, run, meta, ind, ans = d["find_tool"], d["execute_tool"], d["meta_tool"], d["individual_tool"], d["find_answer"]
    return ServerText(
        instructions=d["instructions"],
        find_tool=ToolText(title=find["title"], description=r.template(("find_tool", "description"), find["description"], ("count",)),
                           hints=frozen_map({"query": find["query_hint"], "limit": find["limit_hint"], "domain": find["domain_hint"]}),
                           origins=r.origins(("find_tool",), find)),
        execute_tool=ToolText(title=run["title"], description=r.template(("execute_tool", "description"), run["description"], ("count",)),
                              hints=frozen_map({"action": run["action_hint"], "params": run["params_hint"]}),
                              origins=r.origins(("execute_tool",), run)),
        find_limit_default=find["limit"]["default"], find_limit_max=find["limit"]["max"],
        max_length=MaxLength(**d["max_length"], origins=r.origins(("max_length",), d["max_length"])),
        confirm_hint=d["confirm_hint"],
        meta_tool=MetaText(
            intro=r.template(("meta_tool", "intro"), meta["intro"], ("title", "title_lower", "domain", "environment_argument")),
            action_line=r.template(("meta_tool", "action_line"), meta["action_line"], ("name", "required", "title", "marks")),
            destructive_mark=meta["destructive_mark"], pending_mark=meta["pending_mark"], action_hint=meta["action_hint"],
            params_hint=meta["params_hint"], origins=r.origins(("meta_tool",), meta)),
        individual_tool=IndividualText(destructive_note=ind["destructive_note"], pending_note=ind["pending_note"], description_max=ind["description_max"],
                                       source_description_max=ind["source_description_max"], title_before_source=ind.get("title_before_source", True),
                                       origins=r.origins(("individual_tool",), ind)),
        find_answer=FindAnswerText(
            heading=r.template(("find_answer", "heading"), ans["heading"], ("count", "query")),
            line=r.template(("find_answer", "line"), ans["line"], ("id", "title", "marks", "confidence")),
            confidence=r.template(("find_answer", "confidence"), ans["confidence"], ("confidence",)),
            usage=r.template(("find_answer", "usage"), ans["usage"], ("usage",)),
            params=r.template(("find_answer", "params"), ans["params"], ("params",)),
            more_params=r.template(("find_answer", "more_params"), ans["more_params"], ("count",)),
            result_max=ans["result_max"],
            destructive_mark=ans["destructive_mark"], read_only_mark=ans["read_only_mark"], pending_mark=ans["pending_mark"],
            none_required=ans["none_required"],
            low_confidence=r.template(("find_answer", "low_confidence"), ans["low_confidence"], ("domain",)),
            no_match=ans["no_match"],
            browse_heading=r.template(("find_answer", "browse_heading"), ans["browse_heading"], ("count", "domain")),
            browse_line=r.template(("find_answer", "browse_line"), ans["browse_line"], ("id", "title", "marks")),
            needs_query=ans["needs_query"], origins=r.origins(("find_answer",), ans)),
        http=HttpText(key_header=d["http"]["key_header"],
                      refusals=frozen_map({reason: r.template(("http", "refusals", reason), text, REFUSAL_PLACEHOLDERS.get(reason, ()))
                                  for reason, text in d["http"]["refusals"].items()}),
                      origins=r.origins(("http",), d["http"])),
        origins=r.origins((), d))


# ---------------------------------------------------------------- rules/errors


# what each HTTP refusal's text may name (httpmode.py fills them)
REFUSAL_PLACEHOLDERS = {"missing_key": ("header",), "rejected_key": ("header",), "key_checks_busy": ("seconds",),
                        "rate_limited": ("seconds",), "anonymous_rate_limited": ("seconds", "header"),
                        "key_busy": ("seconds", "limit"), "arcane_unreachable": ("error",), "arcane_failed": ("status",),
                        "body_too_large": ("limit",), "not_found": ("path",),
                        "method_not_allowed": ("method", "allow"), "unsupported_version": ("requested", "supported"),
                        "version_mismatch": ("sent", "agreed", "where"), "body_timeout": ("seconds",)}
HINT_PLACEHOLDERS = ("list", "get", "action", "status")
FOLLOW_PLACEHOLDERS = ("follow_action", "follow_argument", "activity")


def compile_errors(r: Reader) -> Hints:
    """errors.yaml: templates parsed, message regexes compiled. Which actions a hint may
    name is checked later, over the built catalog (Hints.problems)."""
    d = r.data
    purposes = {}
    for name, spec in d["purposes"].items():
        rules = []
        for rule in spec["may_name"]:
            if rule == FAILING:
                rules.append(FAILING)
                continue
            rules.append(PurposeRule(domain=rule.get("domain", "error"),
                                     verbs=frozenset(rule["verbs"]) if "verbs" in rule else None,
                                     declared=frozenset(rule["declared"]) if "declared" in rule else None,
                                     read_only=rule.get("read_only")))
        purposes[name] = tuple(rules)

    def entry(where: tuple, spec: dict, follow: bool = False, **kw) -> Entry:
        allowed = HINT_PLACEHOLDERS + (FOLLOW_PLACEHOLDERS if follow else ())
        hint = r.template((*where, "hint"), spec["hint"], allowed, actions=True)
        fallback = r.template((*where, "fallback"), spec["fallback"], allowed, actions=True) if "fallback" in spec else None
        return Entry(where=where, hint=hint, fallback=fallback, purpose=spec["purpose"], origins=r.origins(where, spec, items=("actions",)), **kw)

    messages = []
    for i, m in enumerate(d.get("messages") or ()):
        rx = r.regex(("messages", i, "match"), m["match"])
        if rx is None:
            continue
        messages.append(entry(("messages", i), m, regex=rx, domain=m.get("domain"), actions=tuple(m.get("actions") or ()),
                              statuses=tuple(m.get("status") or ()), params=tuple(m.get("params") or ())))
    http = {k: entry(("http", k), v) for k, v in d["http"].items()}
    others = {k: entry((k,), d[k], follow=k.startswith("stream_")) for k in OTHERS if isinstance(d.get(k), dict)}
    return Hints(purposes=frozen_map(purposes), messages=tuple(messages), http=frozen_map(http), others=frozen_map(others), origins=r.origins((), d))


# ---------------------------------------------------------------- rules/redaction


def compile_redaction(r: Reader) -> Rules:
    """redaction.yaml: regexes (each with its `secret` group) and pointer patterns
    compiled, key sets resolved. That every `actions` glob names an action is checked over
    the built catalog (validate.py)."""
    d = r.data
    names = d.get("names") or {}
    qualified = {}
    for word, spec in (names.get("qualified") or {}).items():
        if "only_after" in spec:
            qualified[word] = ("only_after", frozenset(spec["only_after"]))
        else:
            qualified[word] = ("except_after", frozenset(spec.get("except_after") or ()))
    name_rules = NameRules(last_words=frozenset(names.get("last_words") or ()), qualified=frozen_map(qualified),
                           carriers=frozenset(names.get("carriers") or ()),
                           endings=tuple(names.get("endings") or ()),
                           not_secret=frozenset(normalise(e["name"]) for e in names.get("not_secret") or ()),
                           origins=r.origins(("names",), names))
    sets = d.get("key_sets") or {}

    def patterns(where: tuple, at: Any) -> tuple[PointerPattern, ...]:
        out = []
        for j, p in enumerate(_as_list(at)):
            pp = r.pattern((*where, j) if isinstance(at, list) else where, str(p))
            if pp is not None:
                out.append(pp)
        return tuple(out)

    positions = []
    for i, e in enumerate(d.get("positions") or ()):
        keep = []
        for j, s in enumerate(e.get("keep_sets") or ()):
            if s not in sets:
                r.problem(("positions", i, "keep_sets", j), f"unknown key set {s!r}; known: {', '.join(sorted(sets))}", "unknown_key_set")
            else:
                keep += sets[s]["keys"]
        keep = tuple(keep) + tuple(e.get("keep") or ())
        positions.append(Position(patterns=patterns(("positions", i, "at"), e.get("at")), hide=e["hide"], keep=keep, actions=tuple(e.get("actions") or ()),
                                  sides=tuple(e.get("in") or SIDES), reason=e.get("reason", ""), keep_regex=keep_regex(keep),
                                  origins=r.origins(("positions", i), e, items=("actions",))))
    text = []
    for i, e in enumerate(d.get("secret_text") or ()):
        rx = r.regex(("secret_text", i, "pattern"), e.get("pattern", ""))
        if rx is None:
            continue
        if "secret" not in rx.groupindex:
            r.problem(("secret_text", i, "pattern"), "has no group named 'secret' (the part to replace)", "bad_regex")
            continue
        text.append(TextRule(regex=rx, sides=tuple(e.get("in") or SIDES), reason=e.get("reason", ""), origins=r.origins(("secret_text", i), e)))
    kept = tuple(Kept(patterns=patterns(("kept", i, "at"), e.get("at")), actions=tuple(e.get("actions") or ()), reason=e.get("reason", ""),
                      origins=r.origins(("kept", i), e, items=("actions",)))
                 for i, e in enumerate(d.get("kept") or ()))
    res = d.get("resources") or {}
    defaults = {f.name: f.default for f in dataclasses.fields(Rules)}
    return Rules(marker=d["marker"], names=name_rules, positions=tuple(positions), text=tuple(text), kept=kept,
                 resource_marker=res.get("marker") or defaults["resource_marker"],
                 resource_member=res.get("member") or defaults["resource_member"], origins=r.origins((), d))


# ---------------------------------------------------------------- catalog/conventions


def compile_tasks(r: Reader, d: dict) -> TaskRules:
    """The `activity.tasks` section (compile.compile_conventions)."""
    where = ("activity", "tasks")
    status = r.expr((*where, "status"), d["status"])
    messages = r.expr((*where, "messages"), d["messages"])
    return TaskRules(actions=frozenset(d["actions"]), cancel_action=d["cancel_action"], status=status or Expr.of("@"),
                     message=r.exprs((*where, "message"), d["message"]),
                     messages=messages or Expr.of("@"), message_text=d["message_text"], message_level=d["message_level"],
                     error_levels=frozenset(d["error_levels"]),
                     statuses=MappingProxyType(dict(d["statuses"])), failed=frozenset(d["failed"]), ttl_ms=d["ttl_ms"],
                     poll_interval_ms=int(d["poll_interval_ms"]),
                     origins=r.origins(where, d))


def compile_live(r: Reader, d: dict) -> LiveRules:
    """The `live` section of catalog/conventions.yaml (compile.compile_conventions)."""
    frames, bounds, subs = d["frames"], d["bounds"], d["subscriptions"]

    def bound(name: str) -> LiveBound:
        b = bounds[name]
        if b["default"] > b["max"]:
            r.problem(("live", "bounds", name, "default"), f"default {b['default']} is above max {b['max']}", "invalid_bound")
        return LiveBound(argument=b["argument"], default=float(b["default"]), max=float(b["max"]))

    def exprs(key: str) -> tuple[Expr, ...]:
        return r.exprs(("live", "frames", key), frames[key])

    describe = {}
    for channel, text in d["describe"].items():
        e = r.expr(("live", "describe", channel), text)
        if e is not None:
            describe[channel] = e
    rec = subs["reconnect"]
    if rec["first_seconds"] > rec["max_seconds"]:
        r.problem(("live", "subscriptions", "reconnect", "first_seconds"), "first_seconds is above max_seconds", "invalid_bound")
    if bounds["seconds"]["argument"] == bounds["lines"]["argument"]:
        r.problem(("live", "bounds", "lines", "argument"), "the two bounds need two arguments", "invalid_bound")

    return LiveRules(channel=exprs("channel"), heartbeat=exprs("heartbeat"), type=exprs("type"), environment=exprs("environment"), timestamp=exprs("timestamp"),
                     channels=tuple(d["channels"]), channels_argument=d["channels_argument"], seconds=bound("seconds"), lines=bound("lines"),
                     keep=int(d["keep"]),
                     describe=MappingProxyType(describe), max_listeners=int(subs["max_listeners"]), reconnect_first=float(rec["first_seconds"]),
                     reconnect_max=float(rec["max_seconds"]), origins=r.origins(("live",), d))


def compile_outcome(r: Reader, spec: Any) -> OutcomeRules | None:
    """conventions.yaml `outcome`: where an answer reports its own outcome (JMESPath)."""
    if not isinstance(spec, dict):
        return None
    ident = spec["identity"]
    return OutcomeRules(success=r.exprs(("outcome", "success"), spec["success"]), errors=r.exprs(("outcome", "errors"), spec["errors"]),
                        failed=r.exprs(("outcome", "failed"), spec["failed"]), identity=str(ident["member"]),
                        identity_domains=frozen_map((str(k), str(v)) for k, v in (ident.get("domains") or {}).items()),
                        list_max=int(spec["list_max"]), text_max=int(spec["text_max"]), origins=r.origins(("outcome",), spec))


def _compile_streams(r: Reader, st: dict, activity: Activity) -> StreamRules:
    """conventions.yaml `streams`: the frames of an operation stream and its progress lines."""
    frames, progress = st["frames"], st["progress"]
    lines = []
    for i, spec in enumerate(progress["lines"]):
        where = ("streams", "progress", "lines", i)
        rx = r.regex((*where, "match"), spec["match"])
        if rx is None:
            continue
        lines.append(LinePattern(match=rx, message=r.template((*where, "message"), spec["message"], tuple(rx.groupindex)),
                                 origins=r.origins(where, spec)))
    percent = tuple(rx for i, p in enumerate(progress["percent"])
                    if (rx := r.regex(("streams", "progress", "percent", i), p)) is not None)
    return StreamRules(
        activity=activity.frame, log=r.exprs(("streams", "frames", "log"), frames["log"]),
        error=r.exprs(("streams", "frames", "error"), frames["error"]), done=r.exprs(("streams", "frames", "done"), frames["done"]),
        legacy_text=tuple(frames["legacy_text"]), follow_action=activity.action, follow_argument=activity.argument,
        keep_lines=st["keep_lines"], min_interval=float(progress["min_interval_seconds"]), message_max=progress["message_max"],
        lines=tuple(lines), percent=percent, origins=r.origins(("streams",), st))


def compile_framings(r: Reader, spec: dict) -> Framings:
    """conventions.yaml `framings`: media type -> framing, and the named events."""
    return Framings(types=frozen_map((str(k).lower(), str(v)) for k, v in spec["types"].items()),
                    events=frozen_map((str(k), frozen_map((str(m), v) for m, v in frame.items())) for k, frame in spec["events"].items()),
                    origins=r.origins(("framings",), spec))


def compile_conventions(r: Reader) -> Conventions:
    d = r.data
    env, envl, pag, ses, act, st = (d["environment"], d["envelope"], d["pagination"], d["session"], d["activity"], d["streams"])
    shapes = []
    for i, e in enumerate(d["error_shapes"]):
        details = e.get("details") or {}
        one = lambda key, i=i, details=details: r.expr(("error_shapes", i, "details", key), details[key]) if details.get(key) else None  # noqa: E731
        shapes.append(ErrorShape(name=e["name"], message=r.exprs(("error_shapes", i, "message"), e["message"]), items=one("items"), location=one("location"),
                                 text=one("text"), drop_prefix=str(details.get("drop_prefix", "")), origins=r.origins(("error_shapes", i), e)))
    activity = Activity(action=act["action"], argument=act["argument"], frame=r.exprs(("activity", "frame"), act["frame"]),
                        tasks=compile_tasks(r, act["tasks"]) if act.get("tasks") else None, origins=r.origins(("activity",), act))
    streams = _compile_streams(r, st, activity)
    domains = {}
    for dom, spec in d["domains"].items():
        roles = {k: (None if v == NONE else v) for k, v in spec.items()}
        domains[dom] = DomainRoles(domain=dom, list=roles.get("list"), get=roles.get("get"), declared=frozenset(spec),
                                   origins=r.origins(("domains", dom), spec))
    diag = d["diagnostics"]
    probes = {name: Probe(action=spec["action"], read=frozen_map((k, r.exprs(("diagnostics", name, "read", k), v)) for k, v in spec["read"].items()),
                          origins=r.origins(("diagnostics", name), spec))
              for name, spec in diag.items() if name not in ("document", "transport")}
    if diag.get("transport"):
        probes["transport"] = TransportProbe(action=diag["transport"]["action"], arguments=frozen_map(diag["transport"]["arguments"].items()),
                                             origins=r.origins(("diagnostics", "transport"), diag["transport"]))
    up = d.get("uploads")
    uploads = UploadSessions(create=up["create"], chunk=up["chunk"], abort=up["abort"], kind=up["request"]["kind"],
                             filename=up["request"]["filename"], size=up["request"]["size"], chunk_size=up["request"]["chunk_size"],
                             upload=up["chunk_request"]["upload"], index=up["chunk_request"]["index"], answer_id=up["answer"]["id"],
                             answer_chunk_size=up["answer"]["chunk_size"], answer_total=up["answer"]["total_chunks"],
                             origins=r.origins(("uploads",), up)) if up else None
    return Conventions(
        outcome=compile_outcome(r, d.get("outcome")),
        environment=Environment(path_prefix=env["path_prefix"], path_param=env["path_param"], argument=env["argument"], description=env["description"],
                                origins=r.origins(("environment",), env)),
        envelope=Envelope(success=envl["success"], data=envl["data"], items=envl["items"], value=envl["value"], clash_prefix=envl["clash_prefix"],
                          schema_skips=frozenset(envl["schema_skips"]), origins=r.origins(("envelope",), envl)),
        pagination=Pagination(member=pag["member"], total_items=pag["total_items"], total_pages=pag["total_pages"], current_page=pag["current_page"],
                              items_per_page=pag["items_per_page"],
                              grand_total_items=pag["grand_total_items"], start=pag["start"], limit=pag["limit"], all=pag["all"],
                              ordering=tuple(pag["ordering"]),
                              origins=r.origins(("pagination",), pag)),
        session=SessionConvention(login=ses["login"], refresh=ses["refresh"], logout=ses["logout"], username=ses["request"]["username"],
                                  password=ses["request"]["password"], refresh_request=ses["request"]["refresh_token"], token=ses["answer"]["token"],
                                  refresh_token=ses["answer"]["refresh_token"], expires_at=ses["answer"]["expires_at"], status=ses["answer"]["status"],
                                  mfa_required=ses["mfa_required"], rate_limit_seconds=float(ses["rate_limit_seconds"]), whoami=ses["whoami"],
                                  origins=r.origins(("session",), ses)),
        error_shapes=tuple(shapes), activity=activity, streams=streams, framings=compile_framings(r, d["framings"]),
        domains=frozen_map(domains), uploads=uploads, live=compile_live(r, d["live"]),
        diagnostics=Diagnostics(document=diag["document"], **probes, origins=r.origins(("diagnostics",), diag)), origins=r.origins((), d))


# ---------------------------------------------------------------- catalog inventory


# The kinds (actions.yaml `response`, extra-routes.yaml `handler`) are the registry's,
# interpreter/call/kinds.py: which exist, which are served, which are public, which capture
# frames a WebSocket kind reads. The schemas take any word; these compilers check it there.


def _unknown_kind(r: Reader, parts: tuple, word: str, known: Iterable[str], what: str) -> None:
    """A kind the registry lacks: a problem at its line naming the closest known kinds."""
    known = sorted(known)
    near = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    r.problem(parts, f"unknown {what} kind {word!r}" + (f"; did you mean {', '.join(near)}?" if near else "")
              + f" (known: {', '.join(known)})", "unknown_kind")


def compile_actions(r: Reader) -> tuple[Classification, frozenset[str], dict[str, OperationName], Any]:
    """actions.yaml, read even when it broke its schema (the build then reports more): a
    malformed entry keeps its operation named, with whatever ID it gave."""
    d = r.data if isinstance(r.data, dict) else {}
    cls = d.get("classification") if isinstance(d.get("classification"), dict) else {}
    classification = Classification(destructive_verbs=frozenset(cls.get("destructive_verbs") or ()),
                                    idempotent_verbs=frozenset(cls.get("idempotent_verbs") or ()),
                                     origins=r.origins(("classification",), cls))
    withheld = frozenset(str(h).lower() for h in d.get("withheld_headers") or ())
    ops = {}
    for oid, entry in (d.get("operations") or {}).items():
        spec = entry if isinstance(entry, dict) else {"id": entry}
        if spec.get("response") is not None and str(spec["response"]) not in kinds.response_kinds():
            _unknown_kind(r, ("operations", oid, "response"), str(spec["response"]), kinds.response_kinds(), "response")
        ops[str(oid)] = OperationName(operation_id=str(oid), action_id=str(spec.get("id", "")), read_only=spec.get("read_only"),
                                      destructive=spec.get("destructive"),
                                      idempotent=spec.get("idempotent"), response=spec.get("response"), why=spec.get("why"),
                                      optional=frozen_map((str(k), json.dumps(v)) for k, v in spec["optional"].items())
                                      if isinstance(spec.get("optional"), dict) else None,
                                      origins=r.origins(("operations", oid), spec) if isinstance(entry, dict)
                                      else frozen_map({"": r.origin("operations", oid), "id": r.origin("operations", oid)})
                                      if r.loaded else frozen_map())
    return classification, withheld, ops, r.origins((), d)


def _capture_exprs(r: Reader, parts: tuple, value: Any) -> tuple[Expr, ...]:
    values = value if isinstance(value, list) else [] if value is None else [value]
    return tuple(e for i, v in enumerate(values) if (e := r.expr((*parts, i) if isinstance(value, list) else parts, str(v))) is not None)


def _line_format(j: dict) -> LineFormat:
    return LineFormat(message=str(j.get("message", "message")), level=j.get("level"), source=j.get("source"), timestamp=j.get("timestamp"),
                      timestamps=str(j.get("timestamps", "asked")), asked_by=j.get("asked_by"),
                      show_level=bool(j.get("show_level", False)), attrs=j.get("attrs"), marks=frozen_map((str(k), str(v)) for k,
                                                                                                          v in (j.get("marks") or {}).items()),
                      error_levels=tuple(str(x) for x in j.get("error_levels") or ()))


def compile_capture(r: Reader, name: str, spec: dict) -> Capture:
    """One capture profile: its bounds (default at most max), its summary's JMESPath
    expressions compiled once."""
    base = ("captures", name)
    bounds = {}
    for key, b in (spec.get("bounds") or {}).items():
        b = b if isinstance(b, dict) else {}
        default, top = int(b.get("default", 1)), int(b.get("max", 1))
        if default > top:
            r.problem((*base, "bounds", key, "default"), f"the default {default} is above the max {top}", "bad_bound")
        bounds[key] = CaptureBound(name=key, argument=str(b.get("argument", key)), default=min(default, top), max=top,
                                   description=str(b.get("description", "")))
    args = [b.argument for b in bounds.values()]
    if len(set(args)) != len(args):
        r.problem((*base, "bounds"), "two bounds are set by the same argument", "bad_bound")
    metrics = []
    for i, m in enumerate(spec.get("summary") or ()):
        if not isinstance(m, dict):
            continue
        at = (*base, "summary", i)
        metrics.append(Metric(label=str(m.get("label", "")), value=_capture_exprs(r, (*at, "value"), m.get("value")),
                              per=_capture_exprs(r, (*at, "per"), m.get("per")), of=_capture_exprs(r, (*at, "of"), m.get("of")),
                              over=str(m.get("over", "last")), unit=str(m.get("unit", "number"))))
    text = spec.get("text") if isinstance(spec.get("text"), dict) else {}
    return Capture(name=name, frames=str(spec.get("frames", "")), bounds=frozen_map(bounds), keep=str(spec.get("keep", "first")),
                   quiet_seconds=float(spec["quiet_seconds"]) if spec.get("quiet_seconds") is not None else None, follow=spec.get("follow"),
                   send=frozen_map((str(k), str(v)) for k, v in (spec.get("send") or {}).items()), error_prefix=text.get("error_prefix"),
                   json=_line_format(spec["json"]) if isinstance(spec.get("json"), dict) else None, error=spec.get("error"),
                   drop=tuple(str(x) for x in spec.get("drop") or ()), summary=tuple(metrics), command=spec.get("command"), line=str(spec.get("line", "")),
                   begin=str(spec.get("begin", "")), end=str(spec.get("end", "")),
                   enter=str(spec.get("enter", "\r")), interrupt=str(spec.get("interrupt", "")))


def _check_capture(r: Reader, base: tuple, handler: str, capture: Capture | None, name: Any, params: list[RouteParam]) -> None:
    """A WebSocket route names a profile of its kind; the profile's query values and command
    are parameters of the route, and its bound arguments are not."""
    frames = kinds.capture_frames(handler)
    if frames is None:
        if name is not None:
            r.problem((*base, "capture"), f"a {handler} route takes no capture profile", "bad_capture")
        return
    if capture is None:
        r.problem((*base, "capture" if name is not None else "handler"),
                  f"a {handler} route names a capture profile of `captures`" + (f"; {name!r} is none" if name is not None else ""), "bad_capture")
        return
    if capture.frames not in frames:
        r.problem((*base, "capture"), f"capture {capture.name!r} reads {capture.frames} frames; a {handler} route takes "
                  f"{' or '.join(sorted(frames))}", "bad_capture")
        return
    by_name = {p.name: p for p in params}
    queries = {p.wire for p in params if p.location == "query"}
    for wire in capture.send:
        if wire not in queries:
            r.problem((*base, "capture"), f"capture {capture.name!r} sends {wire!r}, which is no query parameter of the route", "bad_capture")
    for arg in (capture.follow, capture.json.asked_by if capture.json is not None else None):
        if arg is not None and arg not in by_name:
            r.problem((*base, "capture"), f"capture {capture.name!r} reads the argument {arg!r}, which is no parameter of the route",
                      "bad_capture")
    for b in capture.bounds.values():
        if b.argument in by_name:
            r.problem((*base, "params", b.argument), f"{b.argument!r} is set by capture {capture.name!r} (bound {b.name}); do not declare it",
                      "bad_capture")
    if capture.frames == "terminal":
        if not (capture.line and capture.begin and capture.end):
            r.problem((*base, "capture"), f"capture {capture.name!r} needs `line`, `begin` and `end` (the typed line and its markers)",
                      "bad_capture")
        p = by_name.get(str(capture.command))
        if p is None or p.location != "handler":
            r.problem((*base, "capture"), f"capture {capture.name!r} types the argument {capture.command!r}; declare it with in: handler",
                      "bad_capture")


def compile_extra_routes(r: Reader) -> tuple[ExtraRoute, ...]:
    """extra-routes.yaml: each route's path compiled as a URI template whose variables are
    exactly its path parameters; its handler kind one the engine knows, pending exactly
    when the engine does not serve it; a WebSocket route's capture profile compiled."""
    d = r.data if isinstance(r.data, dict) else {}
    served = kinds.route_kinds()
    captures = {str(n): compile_capture(r, str(n), spec) for n, spec in (d.get("captures") or {}).items() if isinstance(spec, dict)}
    out = []
    for i, route in enumerate(d.get("routes") or ()):
        if not isinstance(route, dict):
            continue
        base = ("routes", i)
        params = []
        for name, spec in (route.get("params") or {}).items():
            spec = dict(spec) if isinstance(spec, dict) else {}
            location, wire, required = spec.pop("in", "query"), spec.pop("wire", name), bool(spec.pop("required", False))
            params.append(RouteParam(name=name, location=location, wire=wire, required=required, schema=frozen_map(spec),
                                     origins=r.origins((*base, "params", name), spec)))
        path = UriTemplate.of(str(route.get("path", "")))
        wires = {p.wire for p in params if p.location == "path"}
        for var in path.variables:
            if var not in wires:
                r.problem((*base, "path"), f"the path variable {{{var}}} is no path parameter of the route; declare it under params "
                          f"with in: path (and wire: {var} when its name differs)", "bad_uri_template")
        for p in params:
            if p.location == "path" and p.wire not in path.variables:
                r.problem((*base, "params", p.name), f"path parameter {p.name!r} (wire {p.wire!r}) is not in the path {path.text}",
                          "bad_uri_template")
        handler = str(route.get("handler", ""))
        marked = route.get("status") == "pending"
        if route.get("handler") is not None and handler not in served:  # a missing one is the schema's
            _unknown_kind(r, (*base, "handler"), handler, served, "handler")
        pending = handler in served and not served[handler]
        if pending and not marked:
            r.problem((*base, "handler"), f"handler kind {handler!r} is not served by this version; mark the route status: pending "
                      f"(served kinds: {', '.join(sorted(k for k, v in served.items() if v))})", "unknown_kind")
        elif marked and handler in served and not pending:
            r.problem((*base, "status"), f"handler kind {handler!r} is served by this version; remove status: pending", "pending_mismatch")
        capture = captures.get(str(route.get("capture"))) if route.get("capture") is not None else None
        if handler in served:  # an unknown kind is reported once, above
            _check_capture(r, base, handler, capture, route.get("capture"), params)
        options = route.get("options") if isinstance(route.get("options"), dict) else {}
        # the option's shape per kind is the schema's; what it names is checked here
        wait = options.get("wait_argument")
        if wait is not None and wait not in {p.name for p in params}:
            r.problem((*base, "options", "wait_argument"), f"wait_argument {wait!r} is no parameter of the route; name one of "
                      f"{', '.join(p.name for p in params) or '(none)'}", "unknown_param")
        if handler in kinds.public_kinds() and route.get("security") != "public":
            r.problem((*base, "security"), f"a {handler} route sends no credential: declare security: public", "public_kind")
        out.append(ExtraRoute(action_id=str(route.get("id", "")), method=str(route.get("method", "GET")).upper(), path=path, handler=handler,
                              pending=pending or marked,
                              title=str(route.get("title", "")), description=str(route.get("description", "")), params=tuple(params),
                              read_only=route.get("read_only"), destructive=route.get("destructive"), idempotent=route.get("idempotent"),
                              security=route.get("security"),
                              capture=capture,
                              options=frozen_map((k, tuple(v) if isinstance(v, list) else frozen_map(v) if isinstance(v, dict) else v)
                                                 for k, v in options.items()),
                              origins=r.origins(base, route)))
    return tuple(out)


def compile_allowlist(r: Reader) -> tuple[AllowEntry, ...]:
    d = r.data if isinstance(r.data, dict) else {}
    return tuple(AllowEntry(route=e.get("route"), operation=e.get("operation"), reason=str(e.get("reason", "")), origins=r.origins(("routes", i), e))
                 for i, e in enumerate(d.get("routes") or ()) if isinstance(e, dict))


def _permission_entry(r: Reader, base: tuple, spec: dict, scopes: dict) -> PermissionEntry:
    by = spec.get("by_param") if isinstance(spec.get("by_param"), dict) else None
    entry = PermissionEntry(permission=spec.get("permission"), global_admin=bool(spec.get("global_admin", False)), check=spec.get("check"),
                            by_param=by.get("param") if by else None, by_value=frozen_map((by or {}).get("permissions") or {}),
                            src=str(spec.get("src", "")), origins=r.origins(base, spec))
    for perm in entry.permissions():
        if perm not in scopes:
            r.problem((*base, "permission" if entry.permission else "by_param"),
                      f"permission {perm!r} has no scope; declare it under scopes (env or global)", "unknown_permission")
    return entry


def compile_permissions(r: Reader) -> Permissions:
    """permissions.yaml: each entry's permissions declared under `scopes`, the refusal
    pattern compiled (with its `permission` group)."""
    d = r.data if isinstance(r.data, dict) else {}
    scopes = {str(k): str(v) for k, v in (d.get("scopes") or {}).items()}
    ident = d.get("identity") if isinstance(d.get("identity"), dict) else None
    identity = None
    if ident is not None:
        try:
            denied = re.compile(str(ident.get("denied", "")))
        except re.error as exc:
            r.problem(("identity", "denied"), f"invalid regular expression: {exc}", "bad_regex")
            denied = re.compile("(?!)(?P<permission>)")
        if "permission" not in denied.groupindex:
            r.problem(("identity", "denied"), "the pattern needs a (?P<permission>…) group", "bad_regex")
        identity = Identity(me=ident.get("me"), my_keys=ident.get("my_keys"), permissions=ident.get("permissions"),
                            global_key=ident.get("global"), everything=ident.get("everything"), global_admin=ident.get("global_admin"),
                            key_prefix=ident.get("key_prefix"), key_prefix_length=ident.get("key_prefix_length"), key_kind=ident.get("key_kind"),
                            own_grants_kind=ident.get("own_grants_kind"), grants=ident.get("grants"),
                            grant_permission=ident.get("grant_permission"), grant_environment=ident.get("grant_environment"),
                            refresh_status=ident.get("refresh_status"), denied=denied)
    ops = {str(k): _permission_entry(r, ("operations", k), v, scopes) for k, v in (d.get("operations") or {}).items() if isinstance(v, dict)}
    routes = {str(k): _permission_entry(r, ("routes", k), v, scopes) for k, v in (d.get("routes") or {}).items() if isinstance(v, dict)}
    reasons = {str(k): str(v) for k, v in (d.get("reasons") or {}).items()}
    for key, text in reasons.items():
        try:
            text.format(source="", permission="", permissions="")
        except (KeyError, IndexError, ValueError) as exc:
            r.problem(("reasons", key), f"bad placeholder {exc}; use {{source}}, {{permission}} or {{permissions}}", "bad_template")
    return Permissions(identity=identity, scopes=frozen_map(scopes), operations=frozen_map(ops), routes=frozen_map(routes), reasons=frozen_map(reasons),
                       origins=r.origins((), d))


#: One compiler per file kind, keyed by the file's name (overlays by their folder).
COMPILERS: dict[str, Callable[[Reader], Any]] = {
    "overlays": compile_overlay,
    "rendering.yaml": compile_rendering,
    "find.yaml": compile_find,
    "server.yaml": compile_server,
    "errors.yaml": compile_errors,
    "redaction.yaml": compile_redaction,
    "conventions.yaml": compile_conventions,
    "actions.yaml": compile_actions,
    "extra-routes.yaml": compile_extra_routes,
    "coverage-allowlist.yaml": compile_allowlist,
    "permissions.yaml": compile_permissions,
}


# ---------------------------------------------------------------- the bundle


@dataclass(frozen=True)
class Compiled:
    """Every source compiled. A model is None when its file could not be used (its
    problems are reported); `incomplete` is True when the actions cannot all be built (an
    inventory or conventions file did not parse), so cross-checks that need every action
    stay quiet instead of reporting each reference as unknown."""

    document: dict
    document_name: str
    conventions: Conventions | None
    inventory: Inventory
    overlays: tuple[DomainOverlay, ...]
    rendering: Rendering | None
    find: FindRules | None
    server: ServerText | None
    hints: Hints | None
    redaction: Rules | None
    resources: ResourceRules | None
    guides: tuple[Guide, ...]
    incomplete: bool
    # as loaded, for the checks over the built catalog (resource_rules.rule_problems)
    resource_file: Loaded | None = None
    guide_files: tuple[Loaded, ...] = ()
    views: tuple[ViewRule, ...] = ()  # rules/views/*.yaml (interpreter/front/apps.py)
    view_files: tuple[Loaded, ...] = ()


def _run(name: str, loaded: Loaded | None, problems: list[Problem]) -> Any:
    if loaded is None:
        return None
    r = Reader(loaded.data, loaded)
    model = COMPILERS[name](r)
    problems.extend(r.problems)
    return model


def compile_sources(src: Sources) -> tuple[Compiled, list[Problem]]:
    """Compile every loaded file; (the bundle, the problems found compiling)."""
    problems: list[Problem] = []
    conventions = _run("conventions.yaml", src.conventions if src.conventions.checked else None, problems)
    classification, withheld, operations, origins = _run("actions.yaml", src.actions, problems)
    extra = _run("extra-routes.yaml", src.extra, problems)
    allow = _run("coverage-allowlist.yaml", src.allowlist, problems)
    permissions = _run("permissions.yaml", src.permissions, problems) if src.permissions is not None and not src.permissions.failed else None
    inventory = Inventory(classification=classification, withheld_headers=withheld, operations=frozen_map(operations), extra_routes=extra, allowlist=allow,
                          origins=origins, permissions=permissions)
    overlays = tuple(_run("overlays", ov, problems) for ov in src.overlays)
    compiled = Compiled(
        document=src.document, document_name=src.document_name, conventions=conventions, inventory=inventory, overlays=overlays,
        rendering=_run("rendering.yaml", src.rendering, problems), find=_run("find.yaml", src.find, problems),
        server=_run("server.yaml", src.server, problems), hints=_run("errors.yaml", src.errors, problems),
        redaction=_run("redaction.yaml", src.redaction, problems),
        # resources and guides: their checks need the built catalog (resource_rules.rule_problems)
        resources=ResourceRules.compile(src.resources.data or {}) if src.resources else None,
        guides=compile_guides(g.data or {} for g in src.guides),
        incomplete=src.actions.failed or src.extra.failed or conventions is None,
        resource_file=src.resources, guide_files=tuple(src.guides),
        views=compile_views(src.views), view_files=tuple(src.views))
    return compiled, problems


__all__ = ["COMPILERS", "Compiled", "Reader", "compile_sources"]
