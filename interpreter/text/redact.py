"""What is secret, decided in one place: the compiled rules of rules/redaction.yaml.

Two users share one compiled rule set and one URL scrubber:

* safe-mode previews (preview.py) mask the fields of the request they show;
* resources (issue 10) redact the fields of Arcane's answers, with the marker
  ``[redacted: use <action>]`` and a ``_redacted`` member listing the hidden positions.

A value is walked once. At each node, in this order:

1. a **position** rule whose pointer pattern matches the node's path hides it by its kind
   (``POSITION_KINDS``: ``whole`` — a command line or file content, replaced entirely;
   ``values`` — a map's values or a ``NAME=value`` list's values, names kept, some keys
   kept by ``keep``; ``json`` — a string that holds JSON, redacted inside);
2. a member whose **name** is secret by its words (``names``) has its scalars masked,
   at any depth below it (booleans and nulls stay: ``hasToken: true`` is not a secret);
3. a **schema** position (``format: password`` or ``writeOnly: true`` in the JSON Schema
   of the value, when one is given) is masked like a secret name;
4. every other string, and every object key, is **scrubbed**: URL userinfo
   (``https://bob:pw@host`` → ``https://[secret]@host``) always, and the secret-shaped
   pieces of ``secret_text`` (``--password=…``, ``Bearer …``, ``password=…``, private
   keys, token shapes) on the sides (request, response) their rules name; the rest stays.

Every hidden position is recorded as a JSON pointer in which list indexes, names covered by
a ``values`` rule and keys outside ``[A-Za-z0-9_.-]{1,64}`` are written ``*`` — the form of
the resources' ``_redacted.paths``.

Pointer patterns (``at``) are JSON-pointer-like: ``/config/env``, ``**`` for any number of
segments, ``*`` for one (any key or index), and ``*`` inside a name for any characters
(``/**/*Id``). Names compare case-insensitively and ignoring ``_`` and ``-``
(``driver_opts`` = ``driverOpts`` = ``DriverOpts``).
"""

from __future__ import annotations

import bisect
import fnmatch
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from ..build.lazy_dataclass import dataclass
from ..build.model import Origin, PointerPattern, origins_field

REQUEST, RESPONSE = "request", "response"
SIDES = (REQUEST, RESPONSE)
_POINTER_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_WORD_SPLIT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


# --------------------------------------------------------------------------------------
# Names: secret by their words
# --------------------------------------------------------------------------------------


def name_words(name: str) -> list[str]:
    """The words of a field name, lower-cased: camelCase, PascalCase, snake_case and
    kebab-case split (``SigningCAKey`` → signing, ca, key; ``X-API-Key`` → x, api, key)."""
    return [w.lower() for w in _WORD_SPLIT.findall(str(name))]


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def normalise(segment: Any) -> str:
    """How a path segment is compared with a pattern: lower case, no ``_`` or ``-``."""
    return str(segment).lower().replace("_", "").replace("-", "")


@dataclass(frozen=True)
class NameRules:
    """Field names that hold secrets (rules/redaction.yaml ``names``)."""

    last_words: frozenset[str]
    qualified: Mapping[str, tuple[str, frozenset[str]]]  # word -> ("only_after"|"except_after", words)
    carriers: frozenset[str]
    endings: tuple[str, ...]
    not_secret: frozenset[str]  # whole names (normalised)
    origins: Mapping[str, Origin] = origins_field()

    def _word_is_secret(self, words: list[str], i: int) -> bool:
        word = words[i]
        if word in self.last_words:
            return True
        rule = self.qualified.get(word)
        if rule is None:
            return len(words) == 1 and any(word.endswith(e) and word != e for e in self.endings)
        how, others = rule
        before = words[i - 1] if i > 0 else None
        if how == "only_after":
            return before in others
        return before is not None and before not in others

    def is_secret(self, name: Any) -> bool:
        """Whether a member with this name holds a secret."""
        if not isinstance(name, str) or normalise(name) in self.not_secret:
            return False
        words = [_singular(w) for w in name_words(name)]
        if not words:
            return False
        if self._word_is_secret(words, len(words) - 1):
            return True
        # a secret followed by what carries it: passwordHash, tokenValue, apiKeyText
        return len(words) > 1 and words[-1] in self.carriers and self._word_is_secret(words, len(words) - 2)


# --------------------------------------------------------------------------------------
# Pointer patterns
# --------------------------------------------------------------------------------------


def compile_pattern(pattern: str) -> re.Pattern:
    """``/a/**/b/*`` → a regex over a normalised path joined with ``/`` (indexes as ``#``)."""
    return re.compile(pattern_source(pattern))


def pattern_source(pattern: str) -> str:
    """The regex source of a pointer pattern (see compile_pattern); raises ValueError."""
    if not pattern.startswith("/"):
        raise ValueError(f"{pattern!r} does not start with '/'")
    parts = []
    for seg in pattern[1:].split("/"):
        if seg == "**":
            parts.append("(?:[^/]*/)*")
        elif seg == "*":
            parts.append("[^/]*/")
        elif seg == "" or "**" in seg:
            raise ValueError(f"{pattern!r}: a segment is empty or mixes '**' with a name")
        else:  # a name, where `*` stands for any characters (`*Id`)
            parts.append("[^/]*".join(re.escape(normalise(x)) for x in seg.split("*")) + "/")
    return "".join(parts)


def path_key(path: tuple) -> str:
    """The string a compiled pattern is matched against (every segment ends with ``/``)."""
    return "".join(_segment(p) for p in path)


def pointer_of(path: tuple, covered: int | None = None) -> str:
    """The recorded pointer: indexes, the covered segment and unusual keys as ``*``."""
    out = []
    for i, p in enumerate(path):
        if isinstance(p, int) or i == covered or not _POINTER_KEY.fullmatch(str(p)):
            out.append("*")
        else:
            out.append(str(p))
    return "/" + "/".join(out) if out else ""


# --------------------------------------------------------------------------------------
# Strings: URL userinfo and secret-shaped text
# --------------------------------------------------------------------------------------

# `scheme://` or a scheme-relative `//` at the start or after a character no path or word
# ends with; the authority runs to whitespace, `<`, `>` or a backtick (characters a URL
# cannot hold). Not to a quote: userinfo may hold `'`, and stopping there would leak the
# rest of a password.
_URL_START = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://|(?<![A-Za-z0-9_.~/:%+-])//")
_URL_STOP = re.compile(r"[\s<>`]")


_URL_CUT = re.compile(r"[/?#]")


def scrub_urls(text: str, replacement: str) -> str:
    """Replace the userinfo of every URL in ``text`` (also ``//user:pass@host``).

    The userinfo runs from ``//`` to the last ``@`` before whitespace, ``<``, ``>`` or a
    backtick: a password may hold unencoded
    ``@ / ? #``, and cutting a little more than the userinfo is the accepted price. Unless
    a ``:`` comes before the first ``/ ? #``, an ``@`` after that ``/ ? #`` is in the path
    or query (``https://medium.com/@user``) and only an earlier ``@`` counts.
    ``git@host:repo``, ``mailto:a@b`` and scheme-less DSNs (``user:pass@tcp(db)/x``) have
    no ``//`` and stay as they are. Linear in the length of ``text``.
    """
    if "//" not in text or "@" not in text:
        return text
    ats = [i for i, c in enumerate(text) if c == "@"]
    out, pos, stop = [], 0, -1
    for m in _URL_START.finditer(text):
        start = m.end()
        if m.start() < pos:
            continue
        if stop < start:
            found = _URL_STOP.search(text, start)
            stop = found.start() if found else len(text)
        found = _URL_CUT.search(text, start, stop)
        cut = found.start() if found else stop
        colon = text.find(":", start, cut)
        limit = stop if colon >= 0 else cut
        i = bisect.bisect_left(ats, limit) - 1  # the last `@` before the limit
        at = ats[i] if i >= 0 else -1
        if at > start and text[start:at] != replacement:
            out += [text[pos:start], replacement]
            pos = at
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


@dataclass(frozen=True)
class TextRule:
    """A secret-shaped piece of text: the regex group ``secret`` is replaced."""

    regex: re.Pattern
    sides: tuple[str, ...]
    reason: str = ""
    origins: Mapping[str, Origin] = origins_field()


# --------------------------------------------------------------------------------------
# Positions
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """Where a value is hidden whatever its name (rules/redaction.yaml ``positions``)."""

    patterns: tuple[PointerPattern, ...]  # `at`, compiled
    hide: str  # a key of POSITION_KINDS
    keep: tuple[str, ...] = ()  # keys whose values stay (exact, or globs with `*`), key sets resolved
    actions: tuple[str, ...] = ()  # action ID globs; empty: every action
    sides: tuple[str, ...] = SIDES
    reason: str = ""
    keep_regex: re.Pattern | None = field(default=None, compare=False, repr=False)
    origins: Mapping[str, Origin] = origins_field()

    def applies(self, action_id: str | None, side: str) -> bool:
        if side not in self.sides:
            return False
        if not self.actions:
            return True
        return action_id is not None and any(fnmatch.fnmatchcase(action_id, a) for a in self.actions)

    def keeps(self, key: Any) -> bool:
        return self.keep_regex is not None and self.keep_regex.fullmatch(str(key)) is not None


def keep_regex(keep: tuple[str, ...]) -> re.Pattern | None:
    """One regex for a position's kept keys (globs)."""
    return re.compile("|".join(fnmatch.translate(k) for k in keep)) if keep else None


@dataclass(frozen=True)
class Kept:
    """A request field shown on purpose (rules/redaction.yaml ``kept``): read by the
    preview sweep test, never used to mask or unmask."""

    patterns: tuple[PointerPattern, ...]
    actions: tuple[str, ...]
    reason: str
    origins: Mapping[str, Origin] = origins_field()


@dataclass(frozen=True)
class _Context:
    """The positions that apply to one (action, side), indexed by the last segment of
    their patterns: a path is matched only against the patterns that end like it (and
    those ending in a wildcard), in rule order, so the first rule wins."""

    by_last: dict[str, tuple[tuple[int, re.Pattern], ...]]
    wild: tuple[tuple[int, re.Pattern], ...]
    positions: tuple[Position, ...]

    @classmethod
    def of(cls, positions: tuple[Position, ...]) -> _Context:
        by_last: dict[str, list] = {}
        wild: list = []
        for i, pos in enumerate(positions):
            for p in pos.patterns:
                entry = (i, p.regex)
                if "*" in p.last:
                    wild.append(entry)
                else:
                    by_last.setdefault(normalise(p.last), []).append(entry)
        return cls({k: tuple(v) for k, v in by_last.items()}, tuple(wild), positions)

    def match(self, key: str, last: str) -> Position | None:
        """``key``: path_key of the path; ``last``: its last segment as path_key writes it."""
        candidates = self.by_last.get(last, ())
        if self.wild:
            candidates = sorted(candidates + self.wild)
        for i, rx in candidates:
            if rx.fullmatch(key):
                return self.positions[i]
        return None


@dataclass
class _Walk:
    """The state of one redaction: what to use and what was hidden."""

    rules: Rules
    context: _Context
    schema_paths: re.Pattern | None
    side: str
    marker: str
    hidden: set[str] = field(default_factory=set)

    def hide(self, path: tuple, covered: int | None = None) -> str:
        self.hidden.add(pointer_of(path, covered))
        return self.marker


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _hide_whole(w: _Walk, value: Any, path: tuple, pos: Position) -> Any:
    """A command line or a file's content: replaced entirely (it cannot be cut safely)."""
    return value if _empty(value) else w.hide(path)


def _hide_values(w: _Walk, value: Any, path: tuple, pos: Position) -> Any:
    """A map's values or a ``NAME=value`` list's values; the names stay, and the values of
    the keys in ``keep``. An entry without ``=`` is hidden whole (fail closed)."""
    covered = len(path)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = w.rules.scrub(k, w.marker, w.side) if isinstance(k, str) else k
            if pos.keeps(k) or isinstance(v, bool) or _empty(v):
                out[key] = w.rules._walk(v, path + (k,), w)
            else:
                out[key] = w.hide(path + (k,), covered)
        return out
    if isinstance(value, list):
        out_list = []
        for i, item in enumerate(value):
            if isinstance(item, str) and "=" in item:
                name, _, val = item.partition("=")
                if pos.keeps(name) or val == "":
                    out_list.append(w.rules.scrub(item, w.marker, w.side))
                else:
                    w.hidden.add(pointer_of(path + (i,)))
                    out_list.append(f"{w.rules.scrub(name, w.marker, w.side)}={w.marker}")
            elif isinstance(item, bool) or _empty(item):
                out_list.append(item)
            else:
                out_list.append(w.hide(path + (i,)))
        return out_list
    return _hide_whole(w, value, path, pos)


def _hide_json(w: _Walk, value: Any, path: tuple, pos: Position) -> Any:
    """A string that holds JSON (a multipart part sent as a JSON string): shown as the
    data it holds, redacted inside by the same rules; a string that does not parse is
    hidden whole."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return _hide_whole(w, value, path, pos)
        return w.rules._walk(parsed, path, w, skip_position=True)
    return w.rules._walk(value, path, w, skip_position=True)


#: How a position hides its value, by the YAML word of ``hide``.
POSITION_KINDS: dict[str, Callable[[_Walk, Any, tuple, Position], Any]] = {
    "whole": _hide_whole,
    "values": _hide_values,
    "json": _hide_json,
}


# --------------------------------------------------------------------------------------
# Schemas: format: password and writeOnly
# --------------------------------------------------------------------------------------


def _deref(schema: Any, root: Mapping, depth: int = 0) -> Any:
    while isinstance(schema, dict) and "$ref" in schema and depth < 32:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return {}
        node: Any = root
        for part in ref[2:].split("/"):
            # a Mapping: the root may be the catalog's document (read on first use, artefact.LazyMapping)
            node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, Mapping) else {}
        schema, depth = node, depth + 1
    return schema


def schema_leaves(schema: dict, root: dict | None = None) -> Iterator[tuple[tuple, dict]]:
    """Every position of a JSON Schema as (path, subschema): object members by name,
    ``additionalProperties`` and array items as ``*``; ``$ref`` (``#/...``), ``anyOf``,
    ``oneOf`` and ``allOf`` followed; a recursive reference is entered once per path."""
    root = schema if root is None else root

    def walk(s: Any, path: tuple, seen: frozenset) -> Iterator[tuple[tuple, dict]]:
        ref = s.get("$ref") if isinstance(s, dict) else None
        if ref in seen:
            return
        seen = seen | {ref} if ref else seen
        s = _deref(s, root)
        if not isinstance(s, dict):
            return
        yield path, s
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in s.get(key) or ():
                yield from walk(sub, path, seen)
        for name, sub in (s.get("properties") or {}).items():
            yield from walk(sub, path + (name,), seen)
        if isinstance(s.get("additionalProperties"), dict):
            yield from walk(s["additionalProperties"], path + ("*",), seen)
        if isinstance(s.get("items"), dict):
            yield from walk(s["items"], path + ("*",), seen)

    yield from walk(schema, (), frozenset())


def schema_secret_paths(schema: dict) -> tuple[str, ...]:
    """Pointer patterns of the positions a schema declares secret (``format: password``,
    ``writeOnly: true``), ``*`` for array items and map values."""
    out = []
    for path, s in schema_leaves(schema):
        if path and (s.get("format") == "password" or s.get("writeOnly") is True):
            out.append("/" + "/".join(str(p) for p in path))
    return tuple(dict.fromkeys(out))


# --------------------------------------------------------------------------------------
# The compiled rule set
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Redacted:
    """A redacted value and the pointers of what was hidden (sorted)."""

    value: Any
    paths: tuple[str, ...]


class _Caches:
    """What a Rules object learns while it runs (per schema, per action and side, per
    name): runtime memo tables, not rules."""

    def __init__(self) -> None:
        self.schemas: dict[int, tuple[dict, re.Pattern | None]] = {}
        self.contexts: dict[tuple[str | None, str], _Context] = {}
        self.secret_names: dict[str, bool] = {}


@dataclass(frozen=True)
class Rules:
    """rules/redaction.yaml, compiled once when the rules load (compile.py): regexes
    compiled, pointer patterns parsed, key sets resolved."""

    marker: str
    names: NameRules
    positions: tuple[Position, ...]
    text: tuple[TextRule, ...]
    kept: tuple[Kept, ...] = ()
    resource_marker: str = "[redacted: use {action}]"  # redaction.yaml resources.marker
    resource_member: str = "_redacted"  # redaction.yaml resources.member
    origins: Mapping[str, Origin] = origins_field()
    # one regex per side that finds whether any text rule of that side can match: most
    # strings hold nothing, and the rules then run one by one only on the few that do
    any_text: Mapping[str, re.Pattern | None] = field(default=None, compare=False, repr=False)
    caches: _Caches = field(default_factory=_Caches, compare=False, repr=False, metadata={"cache": True})

    def __post_init__(self) -> None:
        if self.any_text is None:
            object.__setattr__(self, "any_text", MappingProxyType(
                {side: _any_of([r.regex.pattern for r in self.text if side in r.sides]) for side in SIDES}))

    # ---------------------------------------------------------------- strings

    def scrub(self, text: str, marker: str | None = None, side: str = REQUEST) -> str:
        """One string with URL userinfo and secret-shaped pieces replaced."""
        marker = marker or self.marker
        if text == marker:
            return text
        text = scrub_urls(text, marker)
        any_text = self.any_text[side]
        if any_text is None or not any_text.search(text):
            return text
        for rule in self.text:
            if side in rule.sides:
                text = _replace_group(rule.regex, text, marker)
        return text

    def is_secret_name(self, name: Any) -> bool:
        """Whether a member with this name holds a secret (cached per name)."""
        if not isinstance(name, str):
            return False
        cache = self.caches.secret_names
        hit = cache.get(name)
        if hit is None:
            hit = cache[name] = self.names.is_secret(name)
        return hit

    # ---------------------------------------------------------------- values

    def _schema_patterns(self, schema: dict | None) -> re.Pattern | None:
        if not schema:
            return None
        cache = self.caches.schemas
        hit = cache.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = (schema, _any_of([pattern_source(p) for p in schema_secret_paths(schema)], anchored=True))
            cache[id(schema)] = hit
        return hit[1]

    def _context(self, action_id: str | None, side: str) -> _Context:
        ctx = self.caches.contexts.get((action_id, side))
        if ctx is None:
            ctx = _Context.of(tuple(p for p in self.positions if p.applies(action_id, side)))
            self.caches.contexts[(action_id, side)] = ctx
        return ctx

    def redact(self, value: Any, *, at: tuple = (), action_id: str | None = None, side: str = REQUEST,
               schema: dict | None = None, marker: str | None = None) -> Redacted:
        """Redact ``value``, which sits at path ``at`` (its key(s) in the enclosing
        document: a query parameter's name, a multipart part's name; ``()`` for a whole
        body). ``schema`` is the JSON Schema of that document, when known (its
        ``format: password`` and ``writeOnly`` positions are hidden too)."""
        w = _Walk(self, self._context(action_id, side), self._schema_patterns(schema), side, marker or self.marker)
        out = self._walk(value, tuple(at), w)
        return Redacted(out, tuple(sorted(w.hidden)))

    def for_resource(self, value: Any, action_id: str) -> Any:
        """A resource's value (an action's structuredContent): its response positions
        hidden with ``[redacted: use <action>]`` (``resources.marker``) and, when anything
        was hidden, a ``_redacted`` member (``resources.member``) with ``fullValue`` (the
        action that returns everything) and ``paths``. A top-level member of that name
        coming from Arcane is withheld and listed as hidden."""
        member = self.resource_member
        marker = self.resource_marker.replace("{action}", action_id)
        withheld = isinstance(value, dict) and member in value
        if withheld:
            value = {k: v for k, v in value.items() if k != member}
        r = self.redact(value, action_id=action_id, side=RESPONSE, marker=marker)
        paths = set(r.paths) | ({pointer_of((member,))} if withheld else set())
        if not paths:
            return r.value
        out = r.value if isinstance(r.value, dict) else {"value": r.value}
        return {**out, member: {"fullValue": action_id, "paths": sorted(paths)}}

    def _walk(self, value: Any, path: tuple, w: _Walk, *, skip_position: bool = False, key: str | None = None) -> Any:
        """``key`` is path_key(path), passed down so each level adds one segment."""
        if path:
            key = path_key(path) if key is None else key
            pos = None if skip_position else w.context.match(key, _segment(path[-1])[:-1])
            if pos is not None:
                return POSITION_KINDS[pos.hide](w, value, path, pos)
            if self.is_secret_name(path[-1]) or (w.schema_paths is not None and w.schema_paths.fullmatch(key)):
                return self._mask_scalars(value, path, w)
        else:
            key = ""
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                shown = self.scrub(k, w.marker, w.side) if isinstance(k, str) else k
                while shown in out:  # two keys scrubbed to the same text: keep both
                    shown = f"{shown} #2"
                out[shown] = self._walk(v, path + (k,), w, key=key + _segment(k))
            return out
        if isinstance(value, list):
            return [self._walk(v, path + (i,), w, key=key + "#/") for i, v in enumerate(value)]
        if isinstance(value, str):
            scrubbed = self.scrub(value, w.marker, w.side)
            if scrubbed != value:
                w.hidden.add(pointer_of(path))
            return scrubbed
        return value

    def _mask_scalars(self, value: Any, path: tuple, w: _Walk) -> Any:
        """Under a secret name: every string and number, at any depth (not booleans)."""
        if isinstance(value, dict):
            return {k: self._mask_scalars(v, path + (k,), w) for k, v in value.items()}
        if isinstance(value, list):
            return [self._mask_scalars(v, path + (i,), w) for i, v in enumerate(value)]
        if isinstance(value, bool) or _empty(value):
            return value
        if isinstance(value, (str, int, float)):
            return w.hide(path)
        return value


def _as_list(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _segment(p: Any) -> str:
    return ("#" if isinstance(p, int) else normalise(p).replace("/", "")) + "/"


_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def _any_of(patterns: list[str], anchored: bool = False) -> re.Pattern | None:
    """One regex matching where any of ``patterns`` matches (their leading inline flags
    scoped to their own alternative, their groups unnamed); None for no pattern."""
    if not patterns:
        return None
    alts = []
    for p in patterns:
        m = _FLAGS.match(p)
        body = p[m.end():] if m else p
        body = re.sub(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>", "(?:", body)
        alts.append(f"(?{m.group(1)}:{body})" if m else f"(?:{body})")
    return re.compile(("(?:" + "|".join(alts) + ")") if anchored else "|".join(alts))


def _replace_group(regex: re.Pattern, text: str, marker: str) -> str:
    out, pos = [], 0
    for m in regex.finditer(text):
        a, b = m.span("secret")
        if a < pos or a == b or text.startswith(marker, a):
            continue
        out += [text[pos:a], marker]
        pos = b
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)
