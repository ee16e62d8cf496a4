"""The next step an error offers: rules/errors.yaml, compiled once.

Each hint is a template with placeholders: ``{list}`` and ``{get}`` (the list and get
actions of the error's domain), ``{action}`` (the failing action), ``{status}`` (the HTTP
status) and ``{domain.action}`` (that action). Actions are written as the calling surface
names them. A template whose placeholder has no action to fill (the domain has no list
action, or it is withdrawn) falls back to the entry's ``fallback``.

Arcane's message decides first (``messages``, tried in order; a rule may name the
``domain`` the error is about — "Environment not found" from the environment proxy is
about environments whatever the failing action — and may apply only to some failing
``actions``); then the HTTP status (``http``); timeouts and an unreachable Arcane have
their own entries.

Every hint has a ``purpose``; ``purposes`` says which actions a hint of that purpose may
name. ``problems`` checks every hint against it for every action it can fail with, so a
hint that points at the wrong thing (a container list for a missing environment) fails
``interp validate``. A domain's list and get actions are catalog/conventions.yaml's
(catalog.Domain.list_action / get_action), never guessed from a name here.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping

from ..build.lazy_dataclass import dataclass
from ..build.model import ACTION_ID, Origin, Template, origins_field
from ..errors import ArcaneHTTPError, ArcaneTimeout, ArcaneUnreachable, CallError, ResultFailed, StreamFailed

GENERIC = frozenset({"list", "get", "action", "status"})
# filled by the caller (stream_failed, stream_deadline): the action that shows a running
# operation, its argument and the activity ID (catalog/conventions.yaml `activity`)
FOLLOW = frozenset({"follow_action", "follow_argument", "activity"})
FAILING = "failing"  # a `may_name` entry: the failing action itself
OTHERS = ("unreachable", "timeout_read", "timeout_write", "stream_failed", "stream_deadline", "result_failed", "answer_incomplete")


@dataclass(frozen=True)
class Entry:
    """One hint of errors.yaml, where it is, and what it applies to."""

    where: tuple  # its pointer in errors.yaml, as parts
    hint: Template
    fallback: Template | None
    purpose: str
    regex: re.Pattern | None = None  # message rules
    domain: str | None = None  # the domain the error is about (default: the failing action's)
    actions: tuple[str, ...] = ()  # only for these failing actions (globs); empty: any
    statuses: tuple[int, ...] = ()  # only for these HTTP statuses; empty: any
    params: tuple[str, ...] = ()  # parameters the hint tells the caller to pass
    origins: Mapping[str, Origin] = origins_field()

    def applies_to(self, action_id: str | None) -> bool:
        if not self.actions:
            return True
        return action_id is not None and any(fnmatch.fnmatchcase(action_id, a) for a in self.actions)


@dataclass(frozen=True)
class PurposeRule:
    """One `may_name` entry that is not `failing`: actions of a domain (`error`: the
    error's), by their name (`verbs`), by being the domain's declared list/get action
    (`declared`), and by read-only-ness; None: not asked."""

    domain: str
    verbs: frozenset[str] | None = None
    declared: frozenset[str] | None = None
    read_only: bool | None = None


@dataclass(frozen=True)
class Hints:
    """errors.yaml compiled (compile.py): message regexes compiled, templates parsed,
    entries laid out once."""

    purposes: Mapping[str, tuple[PurposeRule | str, ...]]  # purpose -> its may_name (FAILING or a rule)
    messages: tuple[Entry, ...]
    http: Mapping[str, Entry]
    others: Mapping[str, Entry]
    origins: Mapping[str, Origin] = origins_field()

    def entries(self) -> Iterator[Entry]:
        """Every hint of the file."""
        yield from self.messages
        yield from self.http.values()
        yield from self.others.values()

    # ---------------------------------------------------------------- filling

    def named(self, template: Template, action, actions: Mapping, domains: Mapping, domain: str | None,
              extra: Mapping[str, str] | None = None) -> dict[str, str] | None:
        """Placeholder -> action ID (or text for {status} and the ``extra`` placeholders)
        for a template, or None when one cannot be filled from ``actions``. {list} and
        {get} are the error's domain's list and get actions (``domains``: catalog.Domain)."""
        values: dict[str, str] = {"status": "", **{k: "" for k in (extra or {})}}
        dom = domain or (action.domain if action is not None else None)
        if action is not None:
            values["action"] = action.id
        roles = domains.get(dom) if dom is not None else None
        if roles is not None:
            for key, aid in (("list", roles.list_action), ("get", roles.get_action)):
                if aid is not None and aid in actions:
                    values[key] = aid
        needed = template.names
        for aid in needed:
            if ACTION_ID.match(aid) and aid in actions:
                values[aid] = aid
        return None if set(needed) - set(values) else {k: values[k] for k in needed}

    def fill(self, entry: Entry, action, catalog, namer, status: int | None = None,
             extra: Mapping[str, str] | None = None) -> str | None:
        """The entry's hint for this failure, actions written by ``namer``, ``extra``
        placeholders as given; the fallback when a placeholder cannot be filled; None when
        neither can."""
        extra = extra or {}

        def value(name: str, names: dict[str, str]) -> str:
            if name == "status":
                return str(status or "")
            if name in extra:
                return extra[name]
            return namer(names[name])

        for template in (entry.hint, entry.fallback):
            if template is None:
                continue
            names = self.named(template, action, catalog.actions, catalog.domains, entry.domain, extra)
            if names is None:
                continue
            return template.render(lambda n, names=names: value(n, names))
        return None

    # ---------------------------------------------------------------- choosing

    def entry_for(self, err: CallError, action) -> Entry | None:
        """Which entry answers this error (before filling)."""
        if isinstance(err, StreamFailed):
            for m in self.messages:
                if not m.statuses and m.applies_to(getattr(action, "id", None)) and m.regex.search(err.message):
                    return m
            return self.others.get("stream_failed")
        if isinstance(err, ResultFailed):
            return self.others.get(err.code)
        if isinstance(err, ArcaneHTTPError):
            for m in self.messages:
                if (not m.statuses or err.status in m.statuses) and m.applies_to(getattr(action, "id", None)) \
                        and m.regex.search(err.message):
                    return m
            return self.http.get(str(err.status)) or self.http.get(f"{str(err.status)[0]}xx") or self.http.get("default")
        if isinstance(err, ArcaneTimeout):
            if action is not None and action.mutating and err.sent:
                return self.others.get("timeout_write")
            return self.others.get("timeout_read")
        if isinstance(err, ArcaneUnreachable) and not err.next_step:
            return self.others.get("unreachable")
        return None

    def for_error(self, err: CallError, action, catalog, namer, extra: dict[str, str] | None = None) -> str | None:
        """The next step an error result offers; ``extra`` fills the FOLLOW placeholders."""
        entry = self.entry_for(err, action)
        if entry is None:
            return err.next_step
        filled = self.fill(entry, action, catalog, namer, getattr(err, "status", None), extra)
        return filled if filled is not None else err.next_step

    def for_stream_deadline(self, action, catalog, namer, extra: dict[str, str]) -> str | None:
        """The next step when the action deadline cut an operation stream still running."""
        entry = self.others.get("stream_deadline")
        return self.fill(entry, action, catalog, namer, extra=extra) if entry is not None else None

    # ---------------------------------------------------------------- checking

    def suits(self, purpose: str, named: str, action, domain: str | None, actions: Mapping, domains: Mapping) -> bool:
        """Whether naming ``named`` fits ``purpose`` for a failure of ``action``."""
        target = actions.get(named)
        if target is None:
            return False
        dom = domain or (action.domain if action is not None else None)
        for rule in self.purposes.get(purpose, ()):
            if rule == FAILING:
                if action is not None and named == action.id:
                    return True
                continue
            want = dom if rule.domain == "error" else rule.domain
            if want != target.domain:
                continue
            if rule.verbs is not None and target.name not in rule.verbs:
                continue
            if rule.declared is not None:
                roles = domains.get(want)
                if roles is None or named not in {roles.list_action if "list" in rule.declared else None,
                                                  roles.get_action if "get" in rule.declared else None}:
                    continue
            if rule.read_only is not None and target.read_only != rule.read_only:
                continue
            return True
        return False

    def problems(self, catalog) -> list[tuple[tuple, str, str]]:
        """(pointer parts, message, code) for every hint that names an action that does not
        exist or does not suit its purpose, or a destructive action other than the failing
        one, for any action the hint can apply to; an unknown purpose, domain, action
        filter or parameter."""
        out: list[tuple[tuple, str, str]] = []
        actions, domains = catalog.all_actions, catalog.domains
        for e in self.entries():
            if e.purpose not in self.purposes:
                out.append((e.where + ("purpose",), f"unknown purpose {e.purpose!r}; known: {', '.join(sorted(self.purposes))}",
                            "unknown_purpose"))
                continue
            if e.domain is not None and e.domain not in {a.domain for a in actions.values()}:
                out.append((e.where + ("domain",), f"unknown domain {e.domain!r}", "unknown_domain"))
                continue
            for i, glob in enumerate(e.actions):
                if not any(fnmatch.fnmatchcase(aid, glob) for aid in actions):
                    out.append((e.where + ("actions", i), f"{glob!r} names no action", "unknown_action"))
            failing = [a for a in actions.values() if e.applies_to(a.id)]
            for key in ("hint", "fallback"):
                template = getattr(e, key)
                for ph in template.names if template is not None else ():
                    if ph not in GENERIC and ph not in actions and not (ph in FOLLOW and e.where[0].startswith("stream_")):
                        out.append((e.where + (key,), f"unknown action {{{ph}}} in the hint", "unknown_action"))
            for param in e.params:
                lacking = [a.id for a in failing if param not in a.input_schema.get("properties", {})]
                if lacking:
                    out.append((e.where + ("params",), f"the hint tells to pass {param!r}, which {', '.join(lacking[:3])}"
                                f"{' …' if len(lacking) > 3 else ''} lacks", "hint_param"))
            bad: dict[str, set[str]] = {}
            risky: dict[str, set[str]] = {}
            for a in failing:
                for key, template in (("hint", e.hint), ("fallback", e.fallback)):
                    names = self.named(template, a, actions, domains, e.domain) if template is not None else None
                    if names is None:
                        continue
                    for ph, named in names.items():
                        if ph != "status" and not self.suits(e.purpose, named, a, e.domain, actions, domains):
                            bad.setdefault(key, set()).add(named)
                        elif ph != "status" and named != a.id and actions[named].destructive:
                            # after a failure, no other destructive action is a next step
                            risky.setdefault(key, set()).add(named)
                    break  # the fallback is used only when the hint cannot be filled
            for key, names in bad.items():
                out.append((e.where + (key,), f"names {', '.join(sorted(names)[:4])}, which does not suit purpose "
                            f"{e.purpose!r} ({self._describe(e.purpose)})", "hint_unsuitable"))
            for key, names in risky.items():
                out.append((e.where + (key,), f"names the destructive {', '.join(sorted(names)[:4])} as the next step after a failure; "
                            "name a read instead", "destructive_next_step"))
        return out

    def _describe(self, purpose: str) -> str:
        parts = []
        for rule in self.purposes.get(purpose, ()):
            if rule == FAILING:
                parts.append("the failing action")
            else:
                bits = [f"domain {rule.domain}"]
                if rule.verbs is not None:
                    bits.append("verbs " + "/".join(sorted(rule.verbs)))
                if rule.declared is not None:
                    bits.append("its " + "/".join(sorted(rule.declared, reverse=True)) + " action")
                if rule.read_only is not None:
                    bits.append("read-only" if rule.read_only else "state-changing")
                parts.append(", ".join(bits))
        return "; or ".join(parts) or "no action"
