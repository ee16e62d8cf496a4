"""The resources' rules, compiled (rules/resources.yaml and rules/guides/*.yaml), and the
checks `interp validate` runs on them; interpreter/front/resources.py serves them.

A Docker-state resource (``DataResource``) is a URI or URI template, the catalog action a
read runs and its arguments (``"{variable}"`` is the URI's variable); ``link`` makes the
action's successful results end with a resource_link to it (``links_for``, called by the
dispatcher on every surface). A guide (``Guide``) is static Markdown naming actions by
canonical ID. Everything is compiled once per loaded file into frozen dataclasses.

This module imports no other pipeline stage (the dispatcher and validate import it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from ..errors import Problem
from .lazy_dataclass import dataclass
from .model import Expr

MIME_JSON = "application/json"
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# what a variable's value may be: no `/` (it would name another resource), not empty
_SEGMENT = "[^/?#]+"


# --------------------------------------------------------------------------------------
# Compiled rules
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataResource:
    """One Docker-state resource (rules/resources.yaml ``data``)."""

    uri: str  # the URI, or the URI template
    name: str
    title: str
    description: str
    action: str
    arguments: tuple[tuple[str, Any], ...]  # the action's arguments; "{var}" strings are variables
    link: bool
    variables: tuple[str, ...]
    matcher: re.Pattern  # matches a concrete URI, one group per variable

    @property
    def templated(self) -> bool:
        return bool(self.variables)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of a concrete URI this resource answers, or None."""
        m = self.matcher.fullmatch(uri)
        return None if m is None else {k: unquote(v) for k, v in m.groupdict().items()}

    def call_arguments(self, values: dict[str, str]) -> dict[str, Any]:
        """The action's arguments for these variable values."""
        out = {}
        for name, value in self.arguments:
            var = _whole_variable(value)
            out[name] = values[var] if var else value
        return out

    def uri_for(self, call_args: dict[str, Any]) -> str | None:
        """This template filled from an action call's arguments (the inverse of
        call_arguments), or None when an argument it needs is missing."""
        values = {}
        for name, value in self.arguments:
            var = _whole_variable(value)
            if var is not None:
                if call_args.get(name) in (None, ""):
                    return None
                values[var] = quote(str(call_args[name]), safe="")
        if set(values) != set(self.variables):
            return None
        return _VARIABLE.sub(lambda m: values[m.group(1)], self.uri)


def _whole_variable(value: Any) -> str | None:
    m = _VARIABLE.fullmatch(value) if isinstance(value, str) else None
    return m.group(1) if m else None


def _matcher(uri: str) -> re.Pattern:
    parts, pos = [], 0
    for m in _VARIABLE.finditer(uri):
        parts += [re.escape(uri[pos:m.start()]), f"(?P<{m.group(1)}>{_SEGMENT})"]
        pos = m.end()
    parts.append(re.escape(uri[pos:]))
    return re.compile("".join(parts))


@dataclass(frozen=True)
class StaticResource:
    """A resource the server answers itself (the action catalog): rules/resources.yaml
    ``catalog.list`` and ``catalog.item``."""

    uri: str
    name: str
    title: str
    description: str
    matcher: re.Pattern

    @classmethod
    def compile(cls, data: dict) -> StaticResource:
        return cls(data["uri"], data["name"], data["title"], data["description"], _matcher(data["uri"]))

    def match(self, uri: str) -> dict[str, str] | None:
        m = self.matcher.fullmatch(uri)
        return None if m is None else {k: unquote(v) for k, v in m.groupdict().items()}


@dataclass(frozen=True)
class UpdateRule:
    """rules/resources.yaml ``updates``: a kind of live-channel line and the resources it
    changes (interpreter/front/subscriptions.py applies it). JMESPath is compiled here, once."""

    channel: str
    when: Any  # model.Expr
    bind: tuple[tuple[str, Any], ...]  # URI variable -> model.Expr over the line
    changed: Any  # model.Expr | None
    uris: tuple[str, ...]

    @classmethod
    def compile(cls, data: dict) -> UpdateRule:
        return cls(data["channel"], Expr.of(data["when"]), tuple((k, Expr.of(v)) for k, v in (data.get("bind") or {}).items()),
                   Expr.of(data["changed"]) if data.get("changed") else None, tuple(data["uris"]))


def _jmespath_problem(loaded, where: list, text: Any) -> Problem | None:
    from .load import problem_at  # ruamel, jsonschema: only when checking the rules

    try:
        import jmespath  # the checks of a build from the sources only

        jmespath.compile(text if isinstance(text, str) else "")
    except Exception as exc:  # jmespath raises several error classes
        return problem_at(loaded, where, f"not a valid JMESPath expression: {exc}", "bad_jmespath")
    return None


@dataclass(frozen=True)
class ErrorCodes:
    """rules/resources.yaml ``errors``: the JSON-RPC code of a failed read."""

    not_found: int
    not_found_statuses: frozenset[int]
    status_factor: int
    internal: int


@dataclass(frozen=True)
class ResourceRules:
    """rules/resources.yaml, compiled."""

    data: tuple[DataResource, ...]
    errors: ErrorCodes
    tools: StaticResource | None = None  # catalog.list
    tool: StaticResource | None = None  # catalog.item (variable `id`)
    prompts: tuple[Prompt, ...] = ()
    completions: Completions | None = None
    surface_notes: tuple[tuple[str, str], ...] = ()  # guides.surface_note: surface -> how it names an action
    reminder: str = ""  # guides.reminder
    updates: tuple[UpdateRule, ...] = ()  # which live-channel lines change which resources

    def surface_note(self, surface: str) -> str:
        return dict(self.surface_notes).get(surface, "")

    @classmethod
    def compile(cls, data: dict) -> ResourceRules:
        resources = []
        for e in data.get("data") or ():
            uri = e["uri"]
            resources.append(DataResource(
                uri=uri, name=e["name"], title=e["title"], description=e["description"], action=e["action"],
                arguments=tuple((e.get("arguments") or {}).items()), link=bool(e.get("link", False)),
                variables=tuple(_VARIABLE.findall(uri)), matcher=_matcher(uri)))
        err = data.get("errors") or {}
        nf = err.get("not_found") or {}
        codes = ErrorCodes(int(nf.get("code", -32602)), frozenset(nf.get("statuses") or (404,)),
                           int(err.get("status_factor", -100)), int((err.get("internal") or {}).get("code", -32603)))
        cat = data.get("catalog") or {}
        comp = data.get("completions") or {}
        completions = Completions(float(comp.get("ttl_seconds", 5)), int(comp.get("max_values", 100)),
                                  tuple((k, CompletionSource(v["action"], v["values"], v.get("strip", "")))
                                        for k, v in (comp.get("sources") or {}).items()))
        ending = data.get("guides") or {}
        return cls(tuple(resources), codes, StaticResource.compile(cat["list"]) if cat.get("list") else None,
                   StaticResource.compile(cat["item"]) if cat.get("item") else None,
                   prompts=tuple(Prompt.compile(e) for e in data.get("prompts") or ()), completions=completions,
                   surface_notes=tuple((ending.get("surface_note") or {}).items()), reminder=ending.get("reminder", ""),
                   updates=_updates(data.get("updates") or ()))


def _updates(entries) -> tuple[UpdateRule, ...]:
    """The update rules; one whose JMESPath does not compile is left out (rule_problems
    reports it, so `interp validate` and the build refuse the file)."""
    out = []
    for e in entries:
        try:
            out.append(UpdateRule.compile(e))
        except Exception:  # jmespath raises several error classes; reported by rule_problems
            continue
    return tuple(out)


ACTION_REF = re.compile(r"\{([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\}")
MIME_MARKDOWN = "text/markdown"
GUIDE_URI = "arcane://guides/{name}"


@dataclass(frozen=True)
class Guide:
    """One workflow guide (rules/guides/<name>.yaml), served as Markdown."""

    name: str
    title: str
    description: str
    intro: str
    steps: tuple[tuple[str, str], ...]  # (title, text)

    @property
    def uri(self) -> str:
        return GUIDE_URI.replace("{name}", self.name)

    @classmethod
    def compile(cls, data: dict) -> Guide:
        return cls(data["name"], data["title"], data["description"], data["intro"],
                   tuple((s["title"], s["text"]) for s in data.get("steps") or ()))

    def markdown(self, surface_note: str, reminder: str) -> str:
        """The guide as CommonMark: a heading, the introduction, one numbered section per
        step, and the ending (how this surface names an action; the reminder). Actions are
        named by canonical ID, in code spans."""
        def text(t: str) -> str:
            return ACTION_REF.sub(lambda m: f"`{m.group(1)}`", " ".join(t.split()))

        parts = [f"# {text(self.title)}", text(self.intro)]
        for i, (title, body) in enumerate(self.steps, 1):
            parts += [f"## {i}. {text(title)}", text(body)]
        parts += ["## Calling these actions", text(surface_note), text(reminder)]
        return "\n\n".join(parts) + "\n"

    def actions(self) -> list[tuple[list, str]]:
        """Every action the guide names: (pointer parts of the text, action ID)."""
        out = [(["intro"], m) for m in ACTION_REF.findall(self.intro)]
        for i, (title, body) in enumerate(self.steps):
            out += [(["steps", i, "title"], m) for m in ACTION_REF.findall(title)]
            out += [(["steps", i, "text"], m) for m in ACTION_REF.findall(body)]
        return out


def compile_guides(guides) -> tuple[Guide, ...]:
    """The guides of the loaded rules/guides files, compiled, by name."""
    return tuple(sorted((Guide.compile(g) for g in guides), key=lambda g: g.name))


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: str
    required: bool


@dataclass(frozen=True)
class Prompt:
    """One prompt (rules/resources.yaml ``prompts``)."""

    name: str
    title: str
    description: str
    guide: str
    arguments: tuple[PromptArgument, ...]
    steps: tuple[str, ...]

    @classmethod
    def compile(cls, data: dict) -> Prompt:
        return cls(data["name"], data["title"], data["description"], data["guide"],
                   tuple(PromptArgument(a["name"], a["description"], bool(a["required"])) for a in data.get("arguments") or ()),
                   tuple(data.get("steps") or ()))


@dataclass(frozen=True)
class CompletionSource:
    """Where an argument's or a template variable's values come from (``completions``)."""

    action: str
    values: str  # JMESPath over the action's structuredContent
    strip: str = ""


@dataclass(frozen=True)
class Completions:
    ttl_seconds: float
    max_values: int
    sources: tuple[tuple[str, CompletionSource], ...]

    def source(self, name: str) -> CompletionSource | None:
        return dict(self.sources).get(name)


# --------------------------------------------------------------------------------------
# Checks (interp validate)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Checked:
    """What the resource checks read: rules/resources.yaml (`loaded`, its `data`), the loaded
    guides, the catalog, and whether its actions could all be built (`complete`)."""

    loaded: Any
    data: dict
    guides: tuple
    catalog: Any
    complete: bool

    def at(self, where: list, message: str, code: str, loaded: Any = None) -> Problem:
        from .load import problem_at  # ruamel, jsonschema: only when checking the rules

        return problem_at(self.loaded if loaded is None else loaded, where, message, code)

    def unknown(self, aid: Any) -> bool:
        """Whether `aid` names no action (never, when the actions are not all built)."""
        return self.complete and aid not in self.catalog.all_actions

    def did_you_mean(self, aid: str) -> str:
        near = self.catalog.closest(aid, pool=list(self.catalog.all_actions))
        return f"; did you mean {', '.join(near)}?" if near else ""


def rule_problems(loaded, guides, catalog, complete: bool = True) -> list[Problem]:
    """What the schema cannot say about rules/resources.yaml (`loaded`) and the guides
    (loaded rules/guides files): every action is in the catalog, every `{variable}` of the
    arguments is one of its URI's, URIs are unique, a `link` is on a template. Without
    `complete` (the actions could not all be built) unknown actions are not reported.
    Each section has its check (RESOURCE_CHECKS)."""
    if loaded is None:
        return []
    checked = _Checked(loaded, loaded.data or {}, tuple(guides), catalog, complete)
    return [p for check in RESOURCE_CHECKS for p in check(checked)]


def _data_problems(ck: _Checked) -> list[Problem]:
    """`data`: unique URIs, known actions, arguments filled from the URI's variables, every
    variable used, a `link` only on a template."""
    out: list[Problem] = []
    seen: set[str] = set()
    for i, e in enumerate(ck.data.get("data") or ()):
        uri = e.get("uri", "")
        if uri in seen:
            out.append(ck.at(["data", i, "uri"], f"{uri!r} is declared twice", "duplicate_uri"))
        seen.add(uri)
        aid = e.get("action", "")
        if ck.unknown(aid):
            out.append(ck.at(["data", i, "action"], f"unknown action {aid!r}" + ck.did_you_mean(aid), "unknown_action"))
        variables = set(_VARIABLE.findall(uri))
        out += _data_argument_problems(ck, i, e, aid, uri, variables)
        used = {_whole_variable(v) for v in (e.get("arguments") or {}).values()} - {None}
        for var in sorted(variables - used):
            out.append(ck.at(["data", i, "uri"], f"the variable {{{var}}} is passed to no argument", "unused_variable"))
        if e.get("link") and not variables:
            out.append(ck.at(["data", i, "link"], "a resource_link is filled from a template: this URI has no variable", "bad_link"))
    return out


def _data_argument_problems(ck: _Checked, i: int, e: dict, aid: str, uri: str, variables: set[str]) -> list[Problem]:
    """A `data` entry's arguments: each exactly one variable of its URI, or a constant, and one its action takes."""
    out: list[Problem] = []
    for name, value in (e.get("arguments") or {}).items():
        var = _whole_variable(value)
        where = ["data", i, "arguments", name]
        if isinstance(value, str) and "{" in value and var is None:
            out.append(ck.at(where, f"{value!r} must be exactly one {{variable}}", "bad_variable"))
        elif var is not None and var not in variables:
            out.append(ck.at(where, f"{{{var}}} is not a variable of {uri!r}", "unknown_variable"))
        elif ck.complete and aid in ck.catalog.all_actions and name not in ck.catalog.all_actions[aid].input_schema.get("properties", {}):
            out.append(ck.at(where, f"{aid} takes no argument {name!r}", "unknown_argument"))
    return out


def _update_problems(ck: _Checked) -> list[Problem]:
    """`updates`: valid JMESPath, URIs of `data` resources, bound names among their variables."""
    out: list[Problem] = []
    data_vars = {e.get("uri", ""): set(_VARIABLE.findall(e.get("uri", ""))) for e in ck.data.get("data") or ()}
    for i, e in enumerate(ck.data.get("updates") or ()):
        for key in ("when", "changed"):
            if key in e and (p := _jmespath_problem(ck.loaded, ["updates", i, key], e[key])) is not None:
                out.append(p)
        for name, text in (e.get("bind") or {}).items():
            if (p := _jmespath_problem(ck.loaded, ["updates", i, "bind", name], text)) is not None:
                out.append(p)
        covered: set[str] = set()
        for j, uri in enumerate(e.get("uris") or ()):
            if uri not in data_vars:
                out.append(ck.at(["updates", i, "uris", j], f"{uri!r} is not the URI of a `data` resource", "unknown_uri"))
            covered |= data_vars.get(uri, set())
        for name in e.get("bind") or {}:
            if name not in covered:
                out.append(ck.at(["updates", i, "bind", name], f"{{{name}}} is a variable of none of the rule's URIs", "unknown_variable"))
    return out


def _catalog_item_problems(ck: _Checked) -> list[Problem]:
    """`catalog.item`: the action template has exactly the variable {id}."""
    item = (ck.data.get("catalog") or {}).get("item") or {}
    if item and set(_VARIABLE.findall(item.get("uri", ""))) != {"id"}:
        return [ck.at(["catalog", "item", "uri"], "the action template must have exactly the variable {id}", "unknown_variable")]
    return []


def _prompt_problems(ck: _Checked) -> list[Problem]:
    """`prompts`: a known guide; each step's `{ref}` a known action or an argument of the prompt."""
    out: list[Problem] = []
    guide_names = {(g.data or {}).get("name") for g in ck.guides}
    for i, e in enumerate(ck.data.get("prompts") or ()):
        if e.get("guide") not in guide_names:
            out.append(ck.at(["prompts", i, "guide"], f"no guide is named {e.get('guide')!r}; known: {', '.join(sorted(map(str, guide_names)))}",
                             "unknown_guide"))
        names = {a.get("name") for a in e.get("arguments") or ()}
        for j, step in enumerate(e.get("steps") or ()):
            for ref in re.findall(r"\{([^{}]+)\}", step):
                if "." in ref:
                    if ck.unknown(ref):
                        out.append(ck.at(["prompts", i, "steps", j], f"unknown action {ref!r}", "unknown_action"))
                elif ref not in names:
                    out.append(ck.at(["prompts", i, "steps", j], f"{{{ref}}} is not an argument of the prompt", "unknown_variable"))
    return out


def _completion_problems(ck: _Checked) -> list[Problem]:
    """`completions.sources`: a known action, a valid JMESPath for the values."""
    import jmespath  # the checks of a build from the sources only

    out: list[Problem] = []
    for name, e in ((ck.data.get("completions") or {}).get("sources") or {}).items():
        if ck.unknown(e.get("action")):
            out.append(ck.at(["completions", "sources", name, "action"], f"unknown action {e.get('action')!r}", "unknown_action"))
        try:
            jmespath.compile(e.get("values", ""))
        except Exception as exc:  # jmespath raises several error classes
            out.append(ck.at(["completions", "sources", name, "values"], f"not a valid JMESPath expression: {exc}", "bad_jmespath"))
    return out


def _guide_problems(ck: _Checked) -> list[Problem]:
    """The guides: each file named for its guide, every `{action}` it names known."""
    out: list[Problem] = []
    for g in ck.guides:
        data = g.data or {}
        if Path(g.name).stem != data.get("name"):
            out.append(ck.at(["name"], f"file {Path(g.name).name!r} holds the guide {data.get('name')!r}; name it {data.get('name')}.yaml",
                             "guide_file_name", g))
        if not ck.complete:
            continue
        for where, aid in Guide.compile(data).actions():
            if aid not in ck.catalog.all_actions:
                out.append(ck.at(where, f"the guide names {{{aid}}}, which is not an action" + ck.did_you_mean(aid), "unknown_action", g))
    return out


#: The checks of rules/resources.yaml, a section each, and of the guides, in report order.
RESOURCE_CHECKS = (_data_problems, _update_problems, _catalog_item_problems, _prompt_problems, _completion_problems, _guide_problems)


# --------------------------------------------------------------------------------------
# Resource links (the dispatcher ends a successful call of a linked action with one)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """A resource_link to put at the end of a tool result."""

    uri: str
    name: str
    title: str
    mime_type: str = MIME_JSON


def links_for(catalog, action_id: str, args: dict[str, Any]) -> list[Link]:
    """The resource_link a successful call of this action ends with: the resource whose
    `link` names it, its template filled from the call's arguments (after the default
    environment was filled in); none for other actions or missing arguments."""
    for r in (catalog.resources.data if catalog.resources else ()):
        if r.link and r.action == action_id:
            uri = r.uri_for(args)
            return [Link(uri, r.name, r.title)] if uri else []
    return []
