"""The compiled rules and inventory: frozen, typed models, built once when the rules load.

compile.py turns every rule and inventory file into these; nothing downstream reads a raw
dict. Containers are tuples, frozensets and MappingProxyType; every embedded mini-language
is compiled already (regular expressions as re.Pattern, JMESPath as Expr, `{placeholder}`
texts as Template, redaction pointer patterns as PointerPattern, route paths as
UriTemplate).

Every model keeps the origin of each field it was given (file, line, col, JSON pointer,
layer) in `origins`, keyed by field name, `""` for the model itself and `field/i` for the
i-th item of a list field. `origin_of(model, "columns")` says where a choice comes from
(what `interp explain` prints); a field the engine derived or defaulted has no origin.

    Origin            where a value was written
    Expr              a compiled JMESPath expression and its text
    Template          a text with {placeholder}s, parsed
    PointerPattern    a redaction pointer pattern (/a/**/b, *Id) and its regex
    UriTemplate       a route path (/environments/{id}/…) and its variables

    rules/overlays    DomainOverlay, ActionOverlay, Column, ArgumentRule, StateSteps
    rules/rendering   Rendering
    rules/find        FindRules, RankWeights, DidYouMean, Question, Plurals
    rules/server      ServerText, ToolText, MetaText, IndividualText, FindAnswerText, HttpText
    catalog/conventions  Conventions, Environment, Envelope, Pagination, SessionConvention,
                      ErrorShape, Activity, DomainRoles, Diagnostics, Probe, OutcomeRules (the streams
                      model is stream.StreamRules)
    catalog/actions, extra-routes, coverage-allowlist
                      Inventory, Classification, OperationName, ExtraRoute, RouteParam, AllowEntry

errors.yaml compiles into hints.Hints and redaction.yaml into redact.Rules, in the same step.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from ..errors import layer_note
from .lazy_dataclass import dataclass

EMPTY: Mapping = MappingProxyType({})


def frozen_map(items: Any = ()) -> Mapping:
    """A read-only mapping (MappingProxyType over a private dict)."""
    return MappingProxyType(dict(items))


def lazy_field():
    """A mapping field a start does not read (the compiled artefact, artefact.py, decodes it
    on first use): the OpenAPI document, the tables only `explain`, `audit` or a
    credential's permission read use."""
    return field(metadata={"lazy": True})


def origins_field():
    """The `origins` field every model ends with: not compared, not in its repr; `lazy`:
    the compiled artefact (artefact.py) reads it on first use (a start rarely does)."""
    return field(default_factory=lambda: EMPTY, compare=False, repr=False, metadata={"lazy": True})


# ---------------------------------------------------------------- origins


@dataclass(frozen=True)
class Origin:
    """Where a value was written: a file position, the JSON pointer of the value, and the
    rules layer (``packaged`` or ``operator`` when an operator's directory is laid over
    the packaged rules; empty with one layer)."""

    file: str
    line: int
    col: int
    pointer: str
    layer: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}{layer_note(self.layer)}"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def origin_of(model: Any, name: str = "", index: int | None = None) -> Origin | None:
    """Where field `name` of a compiled model was written (`""`: the model itself); for a
    list field, `index` asks for one item (the list's own origin when items have none).
    None when the engine derived or defaulted the value (an action title taken from the
    OpenAPI document has the document's origin; one made from the name has none)."""
    origins = getattr(model, "origins", None) or EMPTY
    if index is not None:
        hit = origins.get(f"{name}/{index}")
        if hit is not None:
            return hit
    return origins.get(name)


# ---------------------------------------------------------------- mini-languages


@dataclass(frozen=True)
class Expr:
    """A JMESPath expression compiled once (``compiled`` is jmespath's ParsedResult)."""

    text: str
    compiled: Any = field(compare=False, repr=False)

    @classmethod
    def of(cls, text: str) -> Expr:
        """Compile; raises jmespath.exceptions.JMESPathError."""
        import jmespath  # a start reads compiled expressions (artefact.LazyJMESPath): jmespath loads at first use

        return cls(text, jmespath.compile(text))

    @property
    def parsed(self) -> dict:
        return self.compiled.parsed

    def search(self, value: Any) -> Any:
        """The expression over `value`; None where JMESPath cannot evaluate it (a type
        error on untrusted data is no result, not a failure)."""
        return self.runner()(value)

    def runner(self) -> Callable[[Any], Any]:
        """What `search` calls: one function of the value, made once per expression text."""
        run = _EVALUATORS.get(self.text)
        if run is None:
            run = _EVALUATORS[self.text] = evaluator(self.compiled)
        return run


# What evaluates an Expr is kept here, by text, not in the model (the model is written to the
# compiled artefact, which holds data, not closures). Only rule files write expressions: a bounded set.
_EVALUATORS: dict[str, Callable[[Any], Any]] = {}


def _path_steps(node: dict) -> tuple[tuple[bool, Any], ...] | None:
    """A chain of member names and list indexes (``names[0]``, ``a.b[-1].c``, ``@``) as
    (is_member, key) steps; None for anything else (functions, projections, filters…)."""
    kind = node.get("type")
    if kind in ("subexpression", "index_expression"):
        steps: list[tuple[bool, Any]] = []
        for child in node["children"]:
            part = _path_steps(child)
            if part is None:
                return None
            steps += part
        return tuple(steps)
    if kind == "field":
        return ((True, node["value"]),)
    if kind == "index" and type(node["value"]) is int:
        return ((False, node["value"]),)
    if kind in ("current", "identity"):
        return ()
    return None


def evaluator(compiled: Any) -> Callable[[Any], Any]:
    """What evaluates a compiled expression: a plain member/index path (most table columns
    and frame fields) walks the value directly, as jmespath's interpreter would (a member
    of a non-object, an index of a non-list or past its end is None, and None stays None);
    anything else runs through jmespath, a JMESPathError on untrusted data giving None.
    tests/test_model_expr.py checks both agree on generated paths and values."""
    steps = _path_steps(compiled.parsed)
    if steps is None:
        import jmespath.exceptions  # loaded by then: `compiled` is jmespath's

        def run_jmespath(value: Any) -> Any:
            try:
                return compiled.search(value)
            except jmespath.exceptions.JMESPathError:
                return None
        return run_jmespath
    if len(steps) == 1 and steps[0][0]:
        key = steps[0][1]

        def member(value: Any) -> Any:
            try:
                return value.get(key)
            except AttributeError:
                return None
        return member

    def walk(value: Any) -> Any:
        for is_member, key in steps:
            if value is None:
                return None
            if is_member:
                try:
                    value = value.get(key)
                except AttributeError:
                    return None
            elif isinstance(value, list):
                try:
                    value = value[key]
                except IndexError:
                    return None
            else:
                return None
        return value
    return walk


PLACEHOLDER = re.compile(r"{([\w.]+)}")
ACTION_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Template:
    """A text with ``{name}`` placeholders (``name``: letters, digits, ``_`` and ``.``, so
    an action ID such as ``{environment.list}`` is one), split once into literal pieces and
    names. Which names a template may use depends on where it is; compile.py checks them."""

    text: str
    parts: tuple[tuple[str, str | None], ...]  # (literal text, placeholder name or None)

    @classmethod
    def of(cls, text: str) -> Template:
        parts, pos = [], 0
        for m in PLACEHOLDER.finditer(text):
            parts.append((text[pos:m.start()], m.group(1)))
            pos = m.end()
        parts.append((text[pos:], None))
        return cls(text, tuple(parts))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for _, n in self.parts if n is not None))

    def render(self, fill: Callable[[str], str | None]) -> str:
        """The text with each placeholder replaced by ``fill(name)``; a placeholder whose
        fill is None stays as written."""
        out = []
        for literal, name in self.parts:
            out.append(literal)
            if name is not None:
                value = fill(name)
                out.append("{" + name + "}" if value is None else value)
        return "".join(out)

    def format(self, **values: Any) -> str:
        """The text with the given placeholders filled (str() of each value)."""
        return self.render(lambda n: str(values[n]) if n in values else None)


@dataclass(frozen=True)
class PointerPattern:
    """A redaction pointer pattern (``/config/env``, ``/**/labels``, ``/**/*Id``) and the
    regex it compiles to over a normalised path (see redact.pattern_source)."""

    text: str
    regex: re.Pattern
    last: str  # its last segment as written (the index key of redact's matcher)


@dataclass(frozen=True)
class UriTemplate:
    """A route path relative to /api, with its ``{variables}`` in order."""

    text: str
    variables: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> UriTemplate:
        return cls(text, tuple(re.findall(r"{([^{}/]+)}", text)))


# ---------------------------------------------------------------- rules/overlays


@dataclass(frozen=True)
class Column:
    """One table column of a list: an item member (`field`) or a JMESPath expression
    (`expr`) under `label`; `reads` are the item members it shows (for the note that names
    the fields a table leaves out)."""

    label: str
    field: str | None
    expr: Expr | None
    whole: bool | None  # never cut; None: as rendering.yaml whole_fields says
    reads: frozenset[str]
    origins: Mapping[str, Origin] = origins_field()

    def value(self, item: Any) -> Any:
        return self.getter()(item)

    def getter(self) -> Callable[[Any], Any]:
        """A function of an item giving this column's value (what `value` calls); a
        table takes it once and calls it per row."""
        if self.expr is not None:
            return self.expr.runner()
        name = self.field

        def member(item: Any) -> Any:
            return item.get(name) if isinstance(item, dict) else None
        return member


@dataclass(frozen=True)
class StateSteps:
    """An overlay's `states` of one action: where its answer says the item's state (`read`,
    JMESPath over structuredContent) and, per state, the next steps that state allows.
    Every action some state names is `gated`: offered only when the state read allows it."""

    read: Expr | None  # None only when it did not compile (its problem is reported)
    steps: Mapping[str, tuple[str, ...]]
    origins: Mapping[str, Origin] = origins_field()

    @property
    def gated(self) -> frozenset[str]:
        return frozenset(a for ids in self.steps.values() for a in ids)

    def state_of(self, value: Any) -> str | None:
        """The declared state the answer names, or None when it names none of them."""
        if self.read is None or not isinstance(value, dict):
            return None
        state = self.read.search(value)
        return state if isinstance(state, str) and state in self.steps else None

    def steps_for(self, state: str | None, ordinary: tuple[str, ...]) -> tuple[str, ...]:
        """The next steps for an answer in `state` (state_of): the steps that state allows
        first, then the ordinary ones (follow-ups, related) that no state gates. An answer
        whose state is not read, or is none of the declared ones, gets only the ungated ones."""
        gated = self.gated
        allowed = self.steps.get(state, ()) if state is not None else ()
        return tuple(dict.fromkeys([*allowed, *(a for a in ordinary if a not in gated)]))


@dataclass(frozen=True)
class BlastRead:
    """One read of an overlay's `blast_radius`: what a destructive action would affect,
    read from Arcane before the user is asked. `when` (over the call's arguments) says
    whether it applies; `action` is called with `arguments` (a string value is a Template
    of the call's arguments; a value that is one placeholder passes the argument as it
    is); `items` (over its answer) gives the affected items, `name`, `size` and
    `target_match` are over one item, `count` over the answer."""

    label: str
    action: str
    items: Expr | None  # None only when it did not compile (its problem is reported)
    when: Expr | None = None
    arguments: tuple[tuple[str, Any], ...] = ()
    name: Expr | None = None
    size: Expr | None = None
    count: Expr | None = None
    target_match: Expr | None = None
    names_max: int = 5
    origins: Mapping[str, Origin] = origins_field()

    def read_arguments(self, call_args: Mapping[str, Any]) -> dict[str, Any] | None:
        """The read's arguments from the call's; None when a placeholder names an argument
        the call does not have (the read does not apply)."""
        out: dict[str, Any] = {}
        for key, value in self.arguments:
            if isinstance(value, Template):
                names = value.names
                if any(n not in call_args for n in names):
                    return None
                whole = len(names) == 1 and value.text == "{" + names[0] + "}"
                out[key] = call_args[names[0]] if whole else value.format(**{n: call_args[n] for n in names})
            else:
                out[key] = value
        return out


@dataclass(frozen=True)
class ActionOverlay:
    """What an overlay says about one action; None: not said (the document or the engine
    decides)."""

    name: str
    title: str | None = None
    description: str | None = None
    usage: str | None = None
    aliases: tuple[str, ...] | None = None
    related: tuple[str, ...] | None = None
    follow_ups: tuple[str, ...] | None = None
    columns: tuple[Column, ...] | None = None
    empty: Template | None = None
    item_action: str | None = None
    list_member: str | None = None
    order: str | None = None
    chunked_upload: ChunkedUpload | None = None
    states: StateSteps | None = None
    blast_radius: tuple[BlastRead, ...] | None = None
    find_params: tuple[str, ...] | None = None  # the optional parameters find's text lists first
    param_enums: Mapping[str, ParamEnum] | None = None  # parameter (or `object.member`) -> its closed set
    json_parts: tuple[JsonPart, ...] | None = None
    client_filters: ClientFilters | None = None
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ParamEnum:
    """An overlay's `param_enums` entry: the values Arcane accepts for a parameter its
    document leaves open, and where Arcane's source says so."""

    values: tuple[str, ...]
    why: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ClientFilter:
    """One parameter of an overlay's `client_filters`: a list item is kept when `value`
    (JMESPath over the item) equals the value given, one of `values`."""

    name: str
    value: Expr | None  # None only when it did not compile (its problem is reported)
    values: tuple[str, ...]
    description: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ClientFilters:
    """An overlay's `client_filters`: parameters Arcane's list cannot filter by, applied
    here to the items fetched; with one given and no page size, `fetch_limit` items are
    asked for, so that the filter sees that many (the answer says how many it kept)."""

    fetch_limit: int
    params: tuple[ClientFilter, ...]
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class JsonPart:
    """An overlay's `json_parts` entry: an argument whose value Arcane reads as JSON text
    (a multipart part or a string member of the body, `part`) offered as one plain argument
    per member instead; the engine encodes the members given (over `fill`, the JSON object
    sent for members left out) into the part's text."""

    part: str
    properties: Mapping[str, Any]  # member -> its JSON Schema (as the argument's schema)
    required: tuple[str, ...]
    fill: str | None  # the JSON text of the object the given members are laid over; None: {}
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ArgumentRule:
    """An overlay's `arguments` entry: what an ID of this path argument looks like, and
    how a name is found (the list action, its arguments, the item members to compare)."""

    name: str
    id_pattern: re.Pattern | None  # None only when it did not compile (its problem is reported; never served)
    list_action: str
    id_field: str
    name_fields: tuple[str, ...]
    list_params: tuple[tuple[str, Any], ...]  # (argument, value); a string value is a Template ({value})
    resolve: bool
    origins: Mapping[str, Origin] = origins_field()

    def is_id(self, value: Any) -> bool:
        return bool(self.id_pattern.search(str(value)))

    def list_arguments(self, name: str) -> dict[str, Any]:
        """The list call's arguments for a name (`{value}` filled with it)."""
        return {k: (v.format(value=name) if isinstance(v, Template) else v) for k, v in self.list_params}


@dataclass(frozen=True)
class DomainOverlay:
    """rules/overlays/<domain>.yaml: the domain's title and description, per action what
    the document cannot know, and the path arguments that name the domain's items."""

    domain: str
    file: str
    title: str | None
    description: str | None
    actions: Mapping[str, ActionOverlay]
    arguments: Mapping[str, ArgumentRule]
    origins: Mapping[str, Origin] = origins_field()


# ---------------------------------------------------------------- rules/rendering


@dataclass(frozen=True)
class Rendering:
    """rules/rendering.yaml: which fields matter in results, and the size limits."""

    max_rows: int
    cell_max: int
    max_columns: int
    next_steps_max: int
    json_block_max: int
    short_list_max: int
    short_list_chars: int
    omitted_names_max: int
    identity_fields: tuple[str, ...]
    state_fields: tuple[str, ...]
    describe_fields: tuple[str, ...]
    whole_fields: frozenset[str]
    byte_fields: frozenset[str]  # `member` or `parent.member`, as the unit fields below
    duration_nanosecond_fields: frozenset[str]
    duration_millisecond_fields: frozenset[str]
    duration_second_fields: frozenset[str]
    duration_minute_fields: frozenset[str]
    readings_max: int
    epoch_second_fields: frozenset[str]
    epoch_millisecond_fields: frozenset[str]
    hidden_fields: frozenset[str]
    display_name_fields: tuple[str, ...]
    origins: Mapping[str, Origin] = origins_field()


# ---------------------------------------------------------------- rules/find


@dataclass(frozen=True)
class RankWeights:
    """How the find ranker weighs a query word by where it is found, and its factors."""

    verb: float  # the first word of the action name (restart in container.restart)
    name_rest: float  # the other words of the action name
    domain: float  # the head (last) word of the domain
    domain_other: float  # the other words of the domain
    alias: float
    title: float
    usage: float
    description: float
    alias_phrase: float  # a whole alias found in the query, times the share of the query it covers
    alias_unordered: float  # and times this when its words are not in the alias's order
    synonym: float  # a synonym counts this much of the word itself
    fuzzy: float  # a misspelt word counts this much of the word it resembles
    fuzzy_second_edit: float  # and this much less again when it took two edits
    fuzzy_candidates: int
    fuzzy_edits: tuple[tuple[int, int], ...]  # (min_length, edits), by min_length
    fuzzy_split_min: int  # a word made of two action words counts as both, each this long
    fuzzy_keep_first_below: int  # a misspelt word shorter than this keeps its first letter (blog is not log)
    fuzzy_words: int  # only the first this many words not found as typed are tried fuzzily
    rarity: float  # a query word weighs rarity + (1 - rarity) x its rarity among the actions
    coverage_floor: float  # score x (floor + (1 - floor) x share of the query's words matched)
    destructive: float  # a destructive action's score, when the query changes nothing
    pending: float  # an action not served yet
    noun_only_bonus: float  # split over noun_only_prefers, in order
    exact_id: float  # the query is an action ID
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class DidYouMean:
    """How close a mistyped action name must be to be suggested (suggest.closest_ids)."""

    token_match: float  # a misspelt token still counts above this similarity
    cutoff: float  # the share of the tokens a suggestion must match
    whole_factor: float  # the whole-string similarity, weighed against the token score
    max_length: int  # a longer name gets no suggestion (the work grows with its length)
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Question:
    """rules/find.yaml `question`: what makes a query a question, and what that costs the
    actions that change state."""

    words: frozenset[str]  # a query starting with one of these (or ending with "?") is a question
    requests: tuple[tuple[str, ...], ...]  # ...unless it starts with one of these word sequences
    mutating: float  # an action that changes state scores this much of itself for a question
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Plurals:
    """rules/find.yaml `plurals`: the endings a word is also tried without."""

    endings: tuple[tuple[str, str], ...]  # (strip, add), longest first
    min_stem: int
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Intent:
    """rules/find.yaml `intent`: how the ranker tells what a request asks to do from what it is
    about (rank.Ranker.read)."""

    see_words: frozenset[str]  # words that ask to see (never a request to do something)
    first_words: frozenset[str]  # a clause with one of these ("but first show me...") is the request
    all_words: frozenset[str]  # words that ask for everything at once (all, every, unused...)
    one_words: frozenset[str]  # words that point at one thing (named, called, one...)
    collective_verbs: frozenset[str]  # action verbs that act on everything at once (prune)
    see_mutating: float  # an action that changes state, when the request asks to see
    one_thing: float  # an action on everything, when the request names one thing
    ask_verb: float  # the request's own verb counts this much more than a context word
    markers: tuple[str, ...]  # what follows the last of these in a request is what it asks ("can you")
    context: float  # a word outside the request's own words counts this much
    many_list: float  # added to a domain's list action when a request to see names it in the plural
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ConfidenceRules:
    """rules/find.yaml `confidence`: when the best result is "high", "medium" or "low"."""

    high_score: float  # the top score at least this...
    high_margin: float  # ...its margin over the next (a share of the top) at least this...
    high_matched: float  # ...and the share of the query's words matched at least this: "high"
    low_score: float  # below this top score: "low"
    low_margin: float  # below this margin: "low"
    low_matched: float  # below this share of the query's words matched: "low"
    min_matched: float  # below this share nothing meaningful matched: no results at all
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class FindRules:
    """rules/find.yaml: how arcane_find_action reads a query."""

    change_words: tuple[str, ...]
    stop_words: frozenset[str]
    synonyms: Mapping[str, tuple[str, ...]]
    noun_only_prefers: tuple[str, ...]
    weights: RankWeights
    did_you_mean: DidYouMean
    question: Question
    plurals: Plurals
    max_words: int  # a query is read up to this many words
    # words read as other words, whole (operator shorthands, other languages): "w1 w2" -> words
    rewrites: Mapping[str, tuple[str, ...]]
    leading: Mapping[str, tuple[str, ...]]  # the same, only as a query's first words
    intent: Intent
    confidence: ConfidenceRules
    origins: Mapping[str, Origin] = origins_field()


# ---------------------------------------------------------------- rules/server


@dataclass(frozen=True)
class ToolText:
    """A dynamic-surface tool's title, description ({count}: actions served) and the
    descriptions of its parameters."""

    title: str
    description: Template
    hints: Mapping[str, str]  # parameter -> description
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class MetaText:
    """How a meta tool (arcane_<domain>) describes itself."""

    intro: Template  # {title} {title_lower} {domain} {environment_argument}
    action_line: Template  # {name} {required} {title} {marks}
    destructive_mark: str
    pending_mark: str
    action_hint: str
    params_hint: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class IndividualText:
    """How an individual tool describes its action."""

    destructive_note: str
    pending_note: str
    description_max: int  # the whole tool description
    source_description_max: int  # the document's description inside it
    title_before_source: bool = True  # the title opens a description that has the document's
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class FindAnswerText:
    """The text of an arcane_find_action answer (and of `interp find`)."""

    heading: Template  # {count} {query}
    line: Template  # {id} {title} {marks} {confidence}
    confidence: Template  # {confidence}
    usage: Template  # {usage}
    params: Template  # {params}
    more_params: Template  # {count}
    result_max: int  # bytes of one action's lines, at most
    destructive_mark: str
    read_only_mark: str
    pending_mark: str
    none_required: str
    low_confidence: Template  # {domain}
    no_match: str
    browse_heading: Template  # {count} {domain}
    browse_line: Template  # {id} {title} {marks}
    needs_query: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class HttpText:
    """HTTP mode's interface: the request header that carries a client's Arcane key, and
    the text of each refusal in front of the MCP server, by its reason."""

    key_header: str
    refusals: Mapping[str, Template] = field(default_factory=frozen_map)
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class MaxLength:
    """rules/server.yaml `max_length`: the longest value of each free-text argument of the
    server's own tools and requests (the maxLength of its schema)."""

    query: int  # arcane_find_action's query
    action: int  # an action ID or a meta tool's action name
    prompt_argument: int  # each prompts/get argument
    completion: int  # completion/complete's value and context arguments
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ServerText:
    """rules/server.yaml: what the server says about itself."""

    instructions: str
    find_tool: ToolText
    execute_tool: ToolText
    find_limit_default: int
    find_limit_max: int
    max_length: MaxLength
    confirm_hint: str
    meta_tool: MetaText
    individual_tool: IndividualText
    find_answer: FindAnswerText
    http: HttpText
    origins: Mapping[str, Origin] = origins_field()


# ---------------------------------------------------------------- catalog/conventions


@dataclass(frozen=True)
class Environment:
    """The environment (Docker host) scope: `{path_param}` of paths under `path_prefix`
    becomes the optional `argument`, defaulting to the configured environment."""

    path_prefix: str
    path_param: str
    argument: str
    description: str  # the argument's description in every input schema
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Envelope:
    """Arcane's success envelope: `{<success>: true, <data>: value, …}`; every member
    beside the value is kept. A list becomes structuredContent `{<items>: [...], …}`, a
    scalar `{<value>: x, …}`, an object its own members (a kept member whose name the
    object has too is renamed `<clash_prefix><name>`)."""

    success: str
    data: str
    items: str
    value: str
    clash_prefix: str
    schema_skips: frozenset[str]  # documented envelope members left out of output schemas
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Pagination:
    """A paginated list: the member beside `data` and its fields, the request parameters
    and the value of `limit` that asks for everything."""

    member: str
    total_items: str
    total_pages: str
    current_page: str
    items_per_page: str
    grand_total_items: str
    start: str
    limit: str
    all: int
    ordering: tuple[str, ...]  # parameters that order a page, not filter it
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class SessionConvention:
    """The session protocol: login, refresh and logout by action ID, what they are sent,
    the members of their answers (inside the envelope's data) and the status value that
    asks for a second factor."""

    login: str
    refresh: str
    logout: str
    username: str
    password: str
    refresh_request: str
    token: str
    refresh_token: str
    expires_at: str
    status: str
    mfa_required: str
    rate_limit_seconds: float  # how long a 429 without Retry-After blocks a path
    whoami: str = ""  # the action HTTP mode checks a client's key with
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ErrorShape:
    """Where one shape of Arcane's error answers keeps its message (JMESPath over the body,
    the first that holds text wins) and, optionally, a list of per-field problems."""

    name: str
    message: tuple[Expr, ...]
    items: Expr | None = None
    location: Expr | None = None
    text: Expr | None = None
    drop_prefix: str = ""
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Activity:
    """The activity that follows a long operation: the action that shows it, the argument
    that takes its ID, and where the first stream line carries the ID."""

    action: str
    argument: str
    frame: tuple[Expr, ...]
    tasks: TaskRules | None = None  # the actions that may answer as MCP tasks (interpreter/front/tasks.py)
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class DomainRoles:
    """A domain's list and get actions where they are not `<domain>.list` / `<domain>.get`:
    for each role in `declared`, an action ID or None (the domain has none); a role not
    declared is the action so named, when the domain has it (catalog.Domain resolves it)."""

    domain: str
    list: str | None
    get: str | None
    declared: frozenset[str]
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Probe:
    """One question `interp doctor` asks: the action it calls and what it reads from the
    answer, by name (JMESPath over the body; the first non-empty result wins)."""

    action: str
    read: Mapping[str, tuple[Expr, ...]]
    origins: Mapping[str, Origin] = origins_field()

    def value(self, body: Any, name: str) -> Any:
        """What `read[name]` finds in `body` (None: not declared, or nothing there)."""
        for expr in self.read.get(name, ()):
            found = expr.search(body)
            if found not in (None, "", [], {}):
                return found
        return None


@dataclass(frozen=True)
class TransportProbe:
    """The stream `interp doctor` opens to read the Content-Type streams are served in."""

    action: str
    arguments: Mapping[str, Any]
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Diagnostics:
    """What `interp doctor` asks a live Arcane: its OpenAPI document's route (below /api)
    and one Probe per check."""

    document: str
    version: Probe
    credential: Probe
    environment: Probe
    daemon: Probe
    transport: TransportProbe | None = None
    origins: Mapping[str, Origin] = origins_field()

    def probes(self) -> dict[str, Probe]:
        return {"version": self.version, "credential": self.credential, "environment": self.environment, "daemon": self.daemon}


@dataclass(frozen=True)
class UploadSessions:
    """Arcane's chunked upload sessions (conventions.yaml `uploads`): the actions and the
    names of their arguments and answer members."""

    create: str
    chunk: str
    abort: str
    kind: str
    filename: str
    size: str
    chunk_size: str
    upload: str
    index: str
    answer_id: str
    answer_chunk_size: str
    answer_total: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class ChunkedUpload:
    """An overlay's `chunked_upload`: the action's content travels through an upload
    session of `kind`, in chunks of `chunk_size` bytes; the call takes the content as
    `content_argument` (text or base64) or, in stdio only, as a local file under an allowed
    directory (`file_argument`), and the session's ID goes to `upload_argument`."""

    kind: str
    chunk_size: int
    upload_argument: str
    content_argument: str
    file_argument: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class TaskRules:
    """catalog/conventions.yaml `activity.tasks`."""

    actions: frozenset[str]
    cancel_action: str
    status: Expr
    message: tuple[Expr, ...]
    messages: Expr
    message_text: str
    message_level: str
    error_levels: frozenset[str]
    statuses: Mapping[str, str]
    failed: frozenset[str]
    ttl_ms: int | None
    poll_interval_ms: int
    origins: Mapping[str, Origin] = origins_field()

    def message_of(self, value: Any) -> str | None:
        for e in self.message:
            v = e.search(value)
            if isinstance(v, str) and v.strip():
                return " ".join(v.split())[:200]
        return None


@dataclass(frozen=True)
class LiveBound:
    """One bound of a capture: the argument that sets it, its default and its maximum."""

    argument: str
    default: float
    max: float

    def of(self, args: Mapping[str, Any]) -> float:
        v = args.get(self.argument)
        return min(float(v), self.max) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else self.default

    def schema(self, what: str, kind: str) -> dict:
        return {"type": kind, "exclusiveMinimum": 0, "maximum": int(self.max) if kind == "integer" else self.max,
                "description": f"{what} to capture at most (default {self.default:g}, at most {self.max:g}); not sent to Arcane"}


@dataclass(frozen=True)
class LiveRules:
    """The lines of the live channel, the bounds of a capture and of subscriptions."""

    channel: tuple[Expr, ...]
    heartbeat: tuple[Expr, ...]
    type: tuple[Expr, ...]
    environment: tuple[Expr, ...]
    timestamp: tuple[Expr, ...]
    channels: tuple[str, ...]
    channels_argument: str
    seconds: LiveBound
    lines: LiveBound
    keep: int
    describe: Mapping[str, Expr]
    max_listeners: int
    reconnect_first: float
    reconnect_max: float
    origins: Mapping[str, Origin] = origins_field()

    @staticmethod
    def _first(exprs: tuple[Expr, ...], frame: dict) -> Any:
        for e in exprs:
            v = e.search(frame)
            if v not in (None, "", False, [], {}):
                return v
        return None

    def channel_of(self, frame: dict) -> str | None:
        v = self._first(self.channel, frame)
        return v if isinstance(v, str) else None

    def is_heartbeat(self, frame: dict) -> bool:
        return self._first(self.heartbeat, frame) is True

    def type_of(self, frame: dict) -> str | None:
        v = self._first(self.type, frame)
        return v if isinstance(v, str) else None

    def environment_of(self, frame: dict) -> str | None:
        v = self._first(self.environment, frame)
        return str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else None

    def timestamp_of(self, frame: dict) -> str | None:
        v = self._first(self.timestamp, frame)
        return v if isinstance(v, str) else None

    def described(self, channel: str, frame: dict) -> dict:
        expr = self.describe.get(channel)
        value = expr.search(frame) if expr is not None else None
        if not isinstance(value, dict):
            value = {"type": self.type_of(frame)}
        return {k: v for k, v in value.items() if v is not None}

    def bound_arguments(self) -> frozenset[str]:
        """The capture's own arguments: validated with the call, never sent to Arcane."""
        return frozenset({self.seconds.argument, self.lines.argument})

    def extend_schema(self, schema: dict) -> dict:
        """The action's input schema with the bounds' arguments added (catalog.py)."""
        props = dict(schema.get("properties") or {})
        props[self.seconds.argument] = self.seconds.schema("Seconds", "number")
        props[self.lines.argument] = self.lines.schema("Lines (heartbeats included)", "integer")
        if self.channels_argument in props:
            chan = dict(props[self.channels_argument])
            chan["description"] = (str(chan.get("description") or "Comma-separated channels").rstrip(". ")
                                   + f" (default: {','.join(self.channels)})")
            props[self.channels_argument] = chan
        return {**schema, "properties": props}


@dataclass(frozen=True)
class OutcomeRules:
    """How an answer reports its own outcome besides the envelope (catalog/conventions.yaml
    `outcome`), read for the answers of actions that change something: `success` (the
    boolean false: the operation failed), `errors` (a message or a list of them), `failed`
    (the items that failed, or how many), each JMESPath over the answer's object; and the
    member that identifies an item (`identity`, per domain where it differs), which an
    answer whose schema requires it must hold. `list_max` items are listed, each cut at
    `text_max` characters."""

    success: tuple[Expr, ...]
    errors: tuple[Expr, ...]
    failed: tuple[Expr, ...]
    identity: str
    identity_domains: Mapping[str, str]
    list_max: int
    text_max: int
    origins: Mapping[str, Origin] = origins_field()

    def identity_of(self, domain: str) -> str:
        return self.identity_domains.get(domain, self.identity)


@dataclass(frozen=True)
class Conventions:
    """catalog/conventions.yaml: Arcane's own conventions, declared once."""

    environment: Environment
    envelope: Envelope
    pagination: Pagination
    session: SessionConvention
    error_shapes: tuple[ErrorShape, ...]
    activity: Activity
    streams: Any  # stream.StreamRules
    domains: Mapping[str, DomainRoles]
    diagnostics: Diagnostics
    framings: Any = None  # framing.Framings: how a stream's body is cut, by its Content-Type
    uploads: UploadSessions | None = None
    live: LiveRules | None = None  # the live channel (interpreter/call/live.py)
    outcome: OutcomeRules | None = None  # results that report their own outcome (interpreter/call/outcome.py)
    origins: Mapping[str, Origin] = origins_field()


# ---------------------------------------------------------------- catalog inventory


@dataclass(frozen=True)
class Classification:
    """How an action is classified from its method and first word."""

    destructive_verbs: frozenset[str]
    idempotent_verbs: frozenset[str]
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class OperationName:
    """One entry of actions.yaml `operations`: the action ID and its corrections."""

    operation_id: str
    action_id: str
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    response: str | None = None
    why: str | None = None
    # body members the document requires but Arcane does not need: member -> the JSON text
    # of the neutral value the engine sends when the argument is not given
    optional: Mapping[str, str] | None = None
    origins: Mapping[str, Origin] = origins_field()

    @property
    def corrected(self) -> bool:
        return any(v is not None for v in (self.read_only, self.destructive, self.idempotent, self.response, self.optional))


@dataclass(frozen=True)
class RouteParam:
    """One parameter of an extra route: where it goes, its name on the wire, and the JSON
    Schema its value has (type, description…)."""

    name: str
    location: str
    wire: str
    required: bool
    schema: Mapping[str, Any]
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class CaptureBound:
    """One bound of a capture: the argument that sets it, its default and its ceiling."""

    name: str  # lines | bytes | seconds | samples
    argument: str
    default: int
    max: int
    description: str = ""


@dataclass(frozen=True)
class Metric:
    """One line of a samples capture's summary: `value` (minus the rest of its list) per
    frame, optionally divided by `per` (a percent) or shown as part of `of`, made one
    figure `over` the samples."""

    label: str
    value: tuple[Expr, ...]
    per: tuple[Expr, ...]
    of: tuple[Expr, ...]
    over: str  # last | mean | max | delta
    unit: str  # percent | bytes | number


@dataclass(frozen=True)
class LineFormat:
    """How a capture writes a JSON log frame as a line (extra-routes.yaml `json:`)."""

    message: str
    level: str | None = None
    source: str | None = None
    timestamp: str | None = None
    timestamps: str = "asked"  # asked | always | never
    asked_by: str | None = None  # the argument whose true asks for the time (timestamps: asked)
    show_level: bool = False
    attrs: str | None = None
    marks: Mapping[str, str] = field(default_factory=frozen_map)
    error_levels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Capture:
    """A capture profile of extra-routes.yaml `captures`: how a WebSocket route is read
    (interpreter/call/wsclient.py), with every figure it needs."""

    name: str
    frames: str  # lines | samples | terminal
    bounds: Mapping[str, CaptureBound]
    keep: str = "first"
    quiet_seconds: float | None = None
    follow: str | None = None  # lines: the argument whose true asks to keep reading until a bound
    send: Mapping[str, str] = field(default_factory=frozen_map)
    error_prefix: str | None = None
    json: LineFormat | None = None
    error: str | None = None
    drop: tuple[str, ...] = ()
    summary: tuple[Metric, ...] = ()
    command: str | None = None  # terminal: the argument typed
    line: str = ""  # terminal: the typed line ({command}, {nonce})
    begin: str = ""
    end: str = ""
    enter: str = "\r"
    interrupt: str = ""


@dataclass(frozen=True)
class ExtraRoute:
    """One route of extra-routes.yaml, served by a generic handler kind."""

    action_id: str
    method: str
    path: UriTemplate
    handler: str
    pending: bool
    title: str
    description: str
    params: tuple[RouteParam, ...]
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    security: str | None = None
    options: Mapping[str, Any] = field(default_factory=frozen_map)  # the handler kind's `options` (catalog/extra-routes.yaml)
    capture: Capture | None = None
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class AllowEntry:
    """A route or operation not exposed on purpose, with the reason."""

    route: str | None
    operation: str | None
    reason: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class PermissionEntry:
    """What Arcane checks before it runs one operation or route (catalog/permissions.yaml):
    a permission (with global_admin when RequireGlobalAdmin guards it too), a permission
    chosen by a path parameter's value (`by_param`), or only a `check` (public,
    authenticated, global_admin, sudo, unknown)."""

    permission: str | None = None
    global_admin: bool = False
    check: str | None = None
    by_param: str | None = None
    by_value: Mapping[str, str] = field(default_factory=frozen_map)
    src: str = ""
    origins: Mapping[str, Origin] = origins_field()

    def permissions(self) -> tuple[str, ...]:
        """Every permission the entry names (one, or one per parameter value)."""
        if self.permission:
            return (self.permission,)
        return tuple(sorted(set(self.by_value.values())))


@dataclass(frozen=True)
class Identity:
    """How a credential learns what it holds: the actions read and the members of their
    answers (catalog/permissions.yaml `identity`)."""

    me: str
    my_keys: str
    permissions: str
    global_key: str
    everything: str
    global_admin: str
    key_prefix: str
    key_prefix_length: int
    key_kind: str
    own_grants_kind: str
    grants: str
    grant_permission: str
    grant_environment: str
    refresh_status: int
    denied: re.Pattern


@dataclass(frozen=True)
class Permissions:
    """catalog/permissions.yaml compiled: the scope of each permission, the entry of each
    operation (by operationId) and extra route (by action ID), and the identity reads."""

    identity: Identity | None
    scopes: Mapping[str, str]
    operations: Mapping[str, PermissionEntry] = lazy_field()  # read when Arcane answered who the credential is
    routes: Mapping[str, PermissionEntry] = lazy_field()
    reasons: Mapping[str, str] = field(default_factory=frozen_map)  # why an action is withdrawn: templates
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class Inventory:
    """catalog/actions.yaml, extra-routes.yaml, coverage-allowlist.yaml and permissions.yaml."""

    classification: Classification
    withheld_headers: frozenset[str]
    operations: Mapping[str, OperationName] = lazy_field()  # the build, explain and audit read it
    extra_routes: tuple[ExtraRoute, ...]
    allowlist: tuple[AllowEntry, ...]
    origins: Mapping[str, Origin] = origins_field()
    permissions: Permissions | None = None
