"""`interp update-spec FILE|URL`: import a new Arcane OpenAPI document into the catalog.

Reads the document from a file or from a live Arcane (`<ARCANE_URL>/api/openapi.json`; a
base URL is completed), checks that it is an OpenAPI 3.x JSON object with paths, writes it
to catalog/arcane.openapi.json in the embedded file's byte-stable form (sorted keys,
two-space indent, UTF-8, final newline) through a temporary file and a rename, then
validates the catalog against it. The report lists every operation that has no name yet
(with a line to paste into actions.yaml) and every name whose operation vanished; it is
not `ok` until each is resolved, i.e. until `interp validate` passes.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from dataclasses import field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..build.catalog import ACTION_ID, HTTP_METHODS, problems
from ..build.lazy_dataclass import dataclass
from ..call.transport import MAX_DOCUMENT_BYTES, fetch
from ..errors import SpecSourceError

DOCUMENT_NAME = "arcane.openapi.json"
FETCH_TIMEOUT = 30.0


@dataclass(frozen=True)
class NewOperation:
    operation_id: str
    method: str
    path: str
    summary: str
    suggestion: str  # a `domain.action` to start from

    def yaml_line(self) -> str:
        """A line to paste under `operations:` in catalog/actions.yaml."""
        return f"  {self.operation_id}: {self.suggestion}  # {self.method} {self.path}" + (f" — {self.summary}" if self.summary else "")


@dataclass(frozen=True)
class VanishedName:
    operation_id: str
    action_id: str


@dataclass
class UpdateReport:
    """What `update_spec` did and what is left to resolve."""

    source: str
    error: str | None = None  # set when nothing was written
    error_code: str | None = None  # the stable word of `error` (SpecSourceError.code)
    written: bool = False
    old_version: str | None = None
    new_version: str | None = None
    operations: int = 0
    new_operations: list[str] = field(default_factory=list)  # in the new document, not the old
    removed_operations: list[str] = field(default_factory=list)  # in the old document, not the new
    changed_operations: list[str] = field(default_factory=list)  # in both, with a different definition
    unnamed: list[NewOperation] = field(default_factory=list)
    vanished: list[VanishedName] = field(default_factory=list)
    other_problems: list[str] = field(default_factory=list)  # the rest of `interp validate`

    @property
    def ok(self) -> bool:
        return self.error is None and not self.unnamed and not self.vanished and not self.other_problems

    def lines(self) -> list[str]:
        """The report as text lines, as `interp update-spec` prints it."""
        if self.error:
            return [f"update-spec: {self.error}", "update-spec: nothing written"]
        out = [
            f"source: {self.source}",
            f"document: Arcane {self.old_version or '?'} -> {self.new_version or '?'}, {self.operations} operations"
            + ("" if self.written else " (unchanged)"),
            f"operations: {len(self.new_operations)} new, {len(self.removed_operations)} removed, {len(self.changed_operations)} changed",
        ]
        if self.unnamed:
            out.append(f"{len(self.unnamed)} operation(s) without a name; add to catalog/actions.yaml under `operations:` (check each suggested name):")
            out += [op.yaml_line() for op in self.unnamed]
        if self.vanished:
            out.append(f"{len(self.vanished)} name(s) whose operation vanished; remove or rename them in catalog/actions.yaml:")
            out += [f"  {v.operation_id}: {v.action_id}" for v in self.vanished]
        if self.other_problems:
            out.append(f"{len(self.other_problems)} other validation problem(s):")
            out += [f"  {p}" for p in self.other_problems]
        if self.ok:
            out.append("update-spec: OK; next: interp audit, then interp reference")
        else:
            out.append("update-spec: refused until the operations above are resolved; then run interp validate, interp audit, interp reference")
        return out

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "source": self.source,
            "error": self.error,
            "error_code": self.error_code,
            "written": self.written,
            "old_version": self.old_version,
            "new_version": self.new_version,
            "operations": self.operations,
            "new_operations": list(self.new_operations),
            "removed_operations": list(self.removed_operations),
            "changed_operations": list(self.changed_operations),
            "unnamed": [op.__dict__ | {"line": op.yaml_line()} for op in self.unnamed],
            "vanished": [v.__dict__ for v in self.vanished],
            "other_problems": list(self.other_problems),
        }


# ---------------------------------------------------------------- reading


def document_url(source: str) -> str:
    """The document URL for `source`: a URL ending in `.json` is kept, one ending in `/api`
    gets `/openapi.json`, any other (a base ARCANE_URL) gets `/api/openapi.json`."""
    parts = urlsplit(source)
    path = parts.path.rstrip("/")
    if not path.endswith(".json"):
        path += "/openapi.json" if path.endswith("/api") else "/api/openapi.json"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def read_document(source: str, timeout: float = FETCH_TIMEOUT) -> tuple[dict, str]:
    """read_document(source: str, timeout: float = FETCH_TIMEOUT) -> tuple[dict, str]

    The parsed document and where it came from (the file path or the document URL).
    Raises SpecSourceError when it cannot be read or is not OpenAPI 3.x JSON with paths.
    """
    if re.match(r"^https?://", source, re.I):
        where = document_url(source)
        raw = fetch(where, timeout, MAX_DOCUMENT_BYTES)
    else:
        where = source
        try:
            raw = Path(source).read_bytes()
        except OSError as exc:
            raise SpecSourceError(f"cannot read {source}: {exc.strerror or exc}", code="unreadable") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SpecSourceError(f"{where} is not UTF-8 text", code="not_utf8") from None
    except json.JSONDecodeError as exc:
        raise SpecSourceError(f"{where} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", code="not_json") from None
    if not isinstance(doc, dict):
        raise SpecSourceError(f"{where} is JSON but not an object", code="not_object")
    version = doc.get("openapi")
    if not isinstance(version, str) or not version.startswith("3."):
        raise SpecSourceError(f"{where} is not an OpenAPI 3.x document (openapi: {version!r})", code="not_openapi")
    if not isinstance(doc.get("paths"), dict) or not doc["paths"]:
        raise SpecSourceError(f"{where} has no paths", code="no_paths")
    return doc, where


def serialize(doc: dict) -> str:
    """The embedded document's byte-stable form: sorted keys, two-space indent, UTF-8, final newline."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------- comparing


def operations_of(doc: dict) -> dict[str, tuple[str, str, dict]]:
    """operationId (or `METHOD path` when it has none) -> (METHOD, path, operation)."""
    out: dict[str, tuple[str, str, dict]] = {}
    for path, item in (doc.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        for method in HTTP_METHODS:
            op = item.get(method)
            if isinstance(op, dict):
                out[op.get("operationId") or f"{method.upper()} {path}"] = (method.upper(), path, op)
    return out


def _words(text: str) -> list[str]:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", text)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", text) if w]


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _nouns(path: str) -> list[str]:
    """A path's segments that are not parameters."""
    return [s for s in path.split("/") if s and not s.startswith("{")]


def suggest_name(oid: str, method: str, path: str, op: dict, named: dict[str, str],
                 doc_ops: dict[str, tuple[str, str, dict]], taken: set[str], env_prefix: str = "") -> str:
    """A starting `domain.action` for an unnamed operation: the domain most used by named
    operations with the same tag (else the path's first noun after the environment's
    `env_prefix`, catalog/conventions.yaml `environment.path_prefix`), the action from the
    operationId without the domain's words."""
    tags = op.get("tags") or []
    votes: Counter = Counter()
    for other, aid in named.items():
        if other in doc_ops and tags and set(doc_ops[other][2].get("tags") or []) & set(tags):
            votes[aid.split(".", 1)[0]] += 1
    if votes:
        domain = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    else:
        segs, scope = _nouns(path), _nouns(env_prefix)
        if scope and segs[:len(scope)] == scope and len(segs) > len(scope):
            segs = segs[len(scope):]
        domain = "_".join(_singular(w) for w in _words(segs[0])) if segs else "misc"
    domain_words = set(domain.split("_"))
    domain_words |= {w + "s" for w in domain_words} | {w[:-1] + "ies" for w in domain_words if w.endswith("y")}
    words, rest, i = _words(oid), [], 0
    while i < len(words):
        # drop the domain's words, also when split across words (`GitOps` -> git, ops)
        span = next((j for j in range(min(len(words), i + 3), i, -1) if "".join(words[i:j]) in domain_words), None)
        if span is None:
            rest.append(words[i])
            i += 1
        else:
            i = span
    action = "_".join(rest) or {"GET": "get", "DELETE": "delete", "PUT": "update", "PATCH": "update"}.get(method, "run")
    if not action[0].isalpha():
        action = "op_" + action
    aid = f"{domain}.{action}"
    if not ACTION_ID.match(aid):
        aid = f"{domain}.{'_'.join(_words(oid)) or 'run'}"
    base, n = aid, 2
    while aid in taken:
        aid, n = f"{base}_{n}", n + 1
    return aid


# ---------------------------------------------------------------- the command


def _current_document(target: Path) -> tuple[str | None, dict]:
    """The document in the checkout (its text and value); (None, {}) when there is none or it is unreadable."""
    try:
        old_text = target.read_text(encoding="utf-8")
        return old_text, json.loads(old_text)
    except (OSError, ValueError):
        return None, {}


def _compare(report: UpdateReport, doc: dict, old: dict, new_ops: dict) -> None:
    """The versions, and the operations new, removed and changed (route or operation) since `old`."""
    old_ops = operations_of(old)
    report.old_version = (old.get("info") or {}).get("version") if old else None
    report.new_version = (doc.get("info") or {}).get("version")
    report.operations = len(new_ops)
    report.new_operations = sorted(set(new_ops) - set(old_ops))
    report.removed_operations = sorted(set(old_ops) - set(new_ops))
    report.changed_operations = sorted(
        oid for oid in set(new_ops) & set(old_ops)
        if new_ops[oid][:2] != old_ops[oid][:2] or new_ops[oid][2] != old_ops[oid][2]
    )


def _name_new_operations(report: UpdateReport, catalog_dir: Path, new_ops: dict) -> None:
    """Every operation without a name, with a suggested one, and every name whose operation
    vanished. The inventory is read as it stands (plain data; schema problems come from validate)."""
    from ..build.load import load_file  # ruamel: `interp update-spec` only, not the drift check of a start

    loaded, _ = load_file(catalog_dir / "actions.yaml")
    names_raw = ((loaded.data if loaded else None) or {}).get("operations") or {}
    named = {oid: str(v.get("id") if isinstance(v, dict) else v) for oid, v in names_raw.items()}
    taken = set(named.values())
    conventions, _ = load_file(catalog_dir / "conventions.yaml")
    environment = ((conventions.data if conventions else None) or {}).get("environment")
    env_prefix = environment.get("path_prefix") if isinstance(environment, dict) else None
    env_prefix = env_prefix if isinstance(env_prefix, str) else ""  # unreadable: validate reports it
    for oid in sorted(new_ops):
        if oid in named:
            continue
        method, path, op = new_ops[oid]
        suggestion = suggest_name(oid, method, path, op, named, new_ops, taken, env_prefix)
        taken.add(suggestion)
        report.unnamed.append(NewOperation(oid, method, path, re.sub(r"\s+", " ", op.get("summary") or "").strip(), suggestion))
    report.vanished = [VanishedName(oid, named[oid]) for oid in sorted(named) if oid not in new_ops]


def update_spec(source: str, catalog_dir: Path, rules_dir: Path, timeout: float = FETCH_TIMEOUT) -> UpdateReport:
    """update_spec(source: str, catalog_dir: Path, rules_dir: Path, timeout: float = FETCH_TIMEOUT) -> UpdateReport

    Import the OpenAPI document at `source` (a file path, an Arcane base URL, or the
    document's http(s) URL) into `catalog_dir`/arcane.openapi.json, then validate. The
    report lists every operation without a name (with a suggested actions.yaml line), every
    name whose operation vanished, and the changed-operation count; `ok` is False while any
    is unresolved or `interp validate` finds another problem. When the source cannot be
    read or is not OpenAPI 3.x JSON, `error` is set and nothing is written. The directories
    are a checkout's (paths.checkout_for_writing), never the installed package's.
    """
    catalog_dir, rules_dir = Path(catalog_dir), Path(rules_dir)
    report = UpdateReport(source=source)
    try:
        doc, where = read_document(source, timeout)
    except SpecSourceError as exc:
        report.error, report.error_code = str(exc), exc.code
        return report
    report.source = where
    target = catalog_dir / DOCUMENT_NAME
    old_text, old = _current_document(target)
    new_ops = operations_of(doc)
    _compare(report, doc, old, new_ops)
    text = serialize(doc)
    if text != old_text:
        _write_atomic(target, text)
        report.written = True
    _name_new_operations(report, catalog_dir, new_ops)
    covered = {"unnamed_operation", "stale_operation"}
    report.other_problems = [p.format() for p in problems(rules_dir, catalog_dir) if p.code not in covered]
    return report
