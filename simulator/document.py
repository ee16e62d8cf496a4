"""The OpenAPI document seen as a list of operations to serve.

Everything the simulator routes on comes from the document it was started with (Arcane's
own `catalog/arcane.openapi.json` by default, or another version): method, path,
operationId, summary, declared security and response. Nothing here reads the engine's
catalog: the few things the document gets wrong (NDJSON streams declared as a bare 200,
downloads declared with no content) are corrected by the simulator's own behaviour data,
keyed by operationId (`operations.<id>.response`).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import DataError, Problem

ROOT = Path(__file__).resolve().parent.parent
# Arcane's own document is the engine's catalog file, read where it lies, never imported
# through the engine: in a checkout, catalog/ beside simulator/; in an installed wheel,
# the copy the engine's package carries (interpreter/_data/catalog, docs/packaging.md),
# installed beside simulator/ by the same wheel.
DOCUMENT_CANDIDATES = (ROOT / "catalog" / "arcane.openapi.json", ROOT / "interpreter" / "_data" / "catalog" / "arcane.openapi.json")
DOCUMENT_PATH = next((p for p in DOCUMENT_CANDIDATES if p.is_file()), DOCUMENT_CANDIDATES[-1])
METHODS = ("get", "head", "post", "put", "patch", "delete")
PATH_PARAM = re.compile(r"\{([^{}]+)\}")


@dataclass(frozen=True)
class Operation:
    """One operation of the document, as the simulator serves it."""

    operation_id: str
    method: str  # upper case
    path: str  # the document's path template, without the /api prefix
    summary: str
    security: str  # public | either | bearer | apikey (from the document's security requirements)
    env_param: str | None  # the path parameter naming the environment, when under the environment prefix
    params: tuple[str, ...]  # path parameter names, in order
    declared_kind: str  # json | empty | binary: what the document's success response says

    @property
    def env_scoped(self) -> bool:
        return self.env_param is not None

    def key_param(self) -> str | None:
        """The last path parameter that is not the environment (the item a get/update names)."""
        rest = [p for p in self.params if p != self.env_param]
        return rest[-1] if rest else None


def load_document(path: str | Path | None = None) -> dict:
    """The OpenAPI document at `path` (Arcane's own by default); one that cannot be read or
    is not a JSON object is a DataError naming it."""
    path = Path(path or DOCUMENT_PATH)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise DataError([Problem(str(path), 1, 1, "", f"cannot read the OpenAPI document ({message}): give one with --document FILE",
                                 "sim_no_document")]) from None
    if not isinstance(document, dict):
        raise DataError([Problem(str(path), 1, 1, "", "the OpenAPI document is not a JSON object", "sim_no_document")])
    return document


def security_of(op: dict, document: dict) -> str:
    """public | either | bearer | apikey, from the operation's (or the document's) requirements."""
    requirements = op.get("security", document.get("security", []))
    if requirements == [] or requirements == [{}]:
        return "public"
    schemes = {name for req in requirements for name in req}
    types = document.get("components", {}).get("securitySchemes", {})
    has_key = any(types.get(s, {}).get("type") == "apiKey" for s in schemes)
    has_bearer = any(types.get(s, {}).get("scheme") == "bearer" for s in schemes)
    if has_key and has_bearer:
        return "either"
    return "bearer" if has_bearer else "apikey" if has_key else "either"


def declared_kind(op: dict) -> str:
    for status in sorted(op.get("responses", {})):
        if status.startswith("2"):
            content = (op["responses"][status] or {}).get("content") or {}
            if not content:
                return "empty"
            return "json" if any("json" in ct for ct in content) else "binary"
    return "empty"


def operations(document: dict, env_prefix: str, env_param: str) -> list[Operation]:
    """Every operation of the document. Paths under `env_prefix` (`/environments/{id}/`)
    name their environment with `env_param`."""
    out = []
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict) or not op.get("operationId"):
                continue
            out.append(Operation(
                operation_id=op["operationId"], method=method.upper(), path=path,
                summary=(op.get("summary") or op["operationId"]).strip(), security=security_of(op, document),
                env_param=env_param if path.startswith(env_prefix) else None,
                params=tuple(PATH_PARAM.findall(path)), declared_kind=declared_kind(op),
            ))
    return out


# ---------------------------------------------------------------- routing


@dataclass(frozen=True)
class CompiledRoute:
    operation: Operation
    segments: tuple[str | None, ...]  # None = a parameter
    names: tuple[str, ...]
    rank: tuple[int, ...]  # literal segments first: lower sorts first


def compile_route(op: Operation) -> CompiledRoute:
    segs: list[str | None] = []
    names: list[str] = []
    for seg in op.path.strip("/").split("/"):
        if seg.startswith("{") and seg.endswith("}"):
            segs.append(None)
            names.append(seg[1:-1])
        else:
            segs.append(seg)
    return CompiledRoute(op, tuple(segs), tuple(names), tuple(1 if s is None else 0 for s in segs))


class Router:
    """Method + path template matching; a literal segment beats a parameter at the same place
    (Huma registers `/containers/counts` beside `/containers/{containerId}`)."""

    def __init__(self, ops: list[Operation]):
        self.routes: dict[str, list[CompiledRoute]] = {}
        for op in ops:
            self.routes.setdefault(op.method, []).append(compile_route(op))
        for routes in self.routes.values():
            routes.sort(key=lambda r: r.rank)

    def match(self, method: str, segments: list[str]) -> tuple[Operation, dict[str, str]] | None:
        for r in self.routes.get(method, []):
            if len(r.segments) != len(segments):
                continue
            params: dict[str, str] = {}
            it = iter(r.names)
            for want, got in zip(r.segments, segments, strict=True):
                if want is None:
                    if got == "":
                        break
                    params[next(it)] = got
                elif want != got:
                    break
            else:
                return r.operation, params
        return None


def split_raw_path(raw: str) -> list[str]:
    """Split on "/" before percent-decoding, so an encoded "/" stays inside its segment
    (Arcane ≥ 2.9 percent-decodes path parameters, so `sha256%3A…` works)."""
    return [urllib.parse.unquote(s) for s in raw.strip("/").split("/")] if raw.strip("/") else []


def path_params(path: str) -> list[str]:
    return PATH_PARAM.findall(path)


def fill_path(template: str, params: dict[str, Any]) -> str:
    out = template
    for name, value in params.items():
        out = out.replace("{" + name + "}", str(value))
    return out
