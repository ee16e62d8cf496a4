"""The generic REST executor: an action's arguments, mapped back through its bindings,
become one HTTP request to Arcane, sent through transport.py (where httpx errors become
UpstreamErrors).

No redirect is followed (a redirect must not carry the API key elsewhere); one pooled
client serves every call; each request has its own timeout. An operation stream has no
read timeout: it is queued and silent for as long as a layer takes, so only the
dispatcher's action deadline bounds it (connecting and sending are still bounded).
"""

from __future__ import annotations

import base64
import json
import math
import ssl
import unicodedata
from dataclasses import field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus, unquote

import httpx

from ..build.lazy_dataclass import dataclass
from ..build.schema import BODY_FIELD, BODY_TEXT, BODY_WHOLE, COOKIE, FORM, HEADER, JSON_PART, MULTIPART, OCTET, PATH, QUERY
from ..config import Settings
from ..errors import ArgumentError, CallError, ConfigError
from ..memo import keep
from ..memo import table as memo_table
from .auth import make_credentials, protocol_for, send_with_auth
from .response import STREAMING_KINDS, read_capped
from .transport import API_PREFIX, MAX_DOCUMENT_BYTES, mapped

if TYPE_CHECKING:
    from ..build.catalog import Action
    from ..build.schema import Binding

USER_AGENT = "arcane-mcp/0.1"
URL_CACHE_MAX = 512  # absolute URLs kept by path (ArcaneClient.url)
PATH_VALUE_MAX_BYTES = 1024  # one path value (UTF-8), before percent-encoding
QUERY_MAX_BYTES = 8 * 1024  # the whole query string, percent-encoded
HEADER_MAX_BYTES = 8 * 1024  # one header or cookie value taken from an argument
INVALID_PATH_VALUE = "invalid_path_value"  # the code of a value that cannot be one path segment
_SEPARATORS = ("/", "\\")


@dataclass
class PreparedRequest:
    """What would be sent: used by the executor and (later) by safe-mode previews."""

    method: str
    path: str  # below /api, with path parameters filled in
    query: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    has_json_body: bool = False
    form_fields: list[tuple[str, str]] = field(default_factory=list)
    files: list[tuple[str, tuple[str, bytes, str]]] = field(default_factory=list)
    content: bytes | None = None
    content_type: str | None = None
    read_timeout: float | None = None  # a handler's own read timeout (Arcane records before it answers)


def blob_bytes(blob: dict, arg: str) -> tuple[str, bytes, str]:
    """A Blob argument's (filename, bytes, content type); bad base64 is an ArgumentError naming `arg`."""
    if "base64" in blob:
        try:
            data = base64.b64decode(blob["base64"], validate=True)
        except (ValueError, TypeError):
            raise ArgumentError(f"{arg}.base64 is not valid base64", "Encode the bytes with standard base64 (A-Z a-z 0-9 + /, = padding).",
                                fields=[arg]) from None
    else:
        data = str(blob.get("text", "")).encode("utf-8")
    return blob.get("filename") or "file", data, blob.get("contentType") or "application/octet-stream"


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def path_value_problem(text: str) -> str | None:
    """Why `text` cannot be sent as one path segment, or None. A path value must stay one
    segment below its template for every reader of the URL: not empty, not `.` or `..`, no
    `/` or `\\`, no control character, and none of these after percent-decoding it once or
    more (a proxy or a framework may decode again) nor after Unicode normalisation (NFKC:
    `．．` is `..` to a proxy that normalises); at most PATH_VALUE_MAX_BYTES."""
    if not text:
        return "is empty"
    if len(text.encode("utf-8", "surrogatepass")) > PATH_VALUE_MAX_BYTES:
        return f"is longer than {PATH_VALUE_MAX_BYTES} bytes"
    form = text
    while True:  # each round that changes the text shortens it: at most len(text) / 2 rounds
        if form.split(";", 1)[0] in (".", ".."):  # `..;x`: a dot segment to servers that strip `;` parameters
            return "is a dot segment" if form is text else "decodes to a dot segment"
        if any(sep in form for sep in _SEPARATORS):
            return "contains a path separator" if form is text else "decodes to a path separator"
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in form):
            return "contains a control character" if form is text else "decodes to a control character"
        decoded = unquote(form, errors="surrogateescape") if "%" in form else form
        if decoded == form:
            break
        form = decoded
    if not form.isascii():  # a look-alike (full-width `．`, `／`, `∕`) that a proxy normalising Unicode (NFKC) turns into one
        folded = unicodedata.normalize("NFKC", form)
        if folded != form and (folded.split(";", 1)[0] in (".", "..") or any(sep in folded for sep in _SEPARATORS)):
            return "becomes a dot segment or a path separator once Unicode is normalised"
    return None


def _path_segment(arg: str, value: Any) -> str:
    """`value` as one percent-encoded path segment, or an ArgumentError (invalid_path_value)."""
    text = _scalar(value)
    why = path_value_problem(text)
    if why is not None:
        raise ArgumentError(f"'{arg}' {why}, so it cannot name one item in the request path; nothing was sent",
                            f"Pass {arg} as Arcane lists it: one ID or name, without '/', '\\', '.' or '..' as a whole, "
                            f"at most {PATH_VALUE_MAX_BYTES} bytes.", fields=[arg], code=INVALID_PATH_VALUE)
    return quote(text, safe="")


def _query_pair_bytes(wire: str, text: str) -> int:
    return len(quote_plus(wire)) + len(quote_plus(text)) + 2  # name=value&


def _check_query(action: Action, query: list[tuple[str, str]]) -> None:
    """The query string fits QUERY_MAX_BYTES, or an ArgumentError naming the largest argument."""
    sizes: dict[str, int] = {}
    for wire, text in query:
        sizes[wire] = sizes.get(wire, 0) + _query_pair_bytes(wire, text)
    if sum(sizes.values()) <= QUERY_MAX_BYTES:
        return
    args = {b.wire: b.arg for b in action.bindings if b.location == QUERY}
    biggest = max(sizes, key=sizes.__getitem__)
    arg = args.get(biggest, biggest)
    raise ArgumentError(f"'{arg}' is too long for a URL: the query string would be {sum(sizes.values())} bytes "
                        f"({arg}: {sizes[biggest]}), more than {QUERY_MAX_BYTES}; nothing was sent",
                        f"Pass a shorter {arg} (or fewer values).", fields=[arg])


def _header_value(arg: str, value: Any) -> str:
    """`value` as a header (or cookie) value: printable ASCII (a tab allowed), at most
    HEADER_MAX_BYTES; anything else (a line break would start another header) is an
    ArgumentError naming the argument."""
    text = _scalar(value)
    if len(text) > HEADER_MAX_BYTES:
        why = f"is longer than {HEADER_MAX_BYTES} bytes"
    elif any(not (" " <= ch <= "~" or ch == "\t") for ch in text):
        why = "holds a character a header cannot carry (a control character, a line break or non-ASCII)"
    else:
        return text
    raise ArgumentError(f"'{arg}' {why}; nothing was sent", f"Pass {arg} as printable ASCII, at most {HEADER_MAX_BYTES} bytes.",
                        fields=[arg])


def route_problem(template: str, path: str) -> str | None:
    """Why `path` is not `template` with each placeholder replaced by exactly one segment
    that is neither empty nor a dot segment (every literal segment unchanged), or None."""
    want, got = template.split("/"), path.split("/")
    if len(want) != len(got):
        return f"{len(got)} segments where the route has {len(want)}"
    for w, g in zip(want, got, strict=True):
        if w.startswith("{") and w.endswith("}"):
            why = path_value_problem(unquote(g, errors="surrogateescape"))
            if why is not None:
                return f"the segment for {w} {why}"
        elif w != g:
            return f"{g!r} where the route has {w!r}"
    return None


def non_finite_fields(value: Any) -> list[str]:
    """Where a number that is not finite (NaN, Infinity) sits in arguments, as field paths
    (`a.b[2]`); JSON has no such number, so nothing carrying one can be sent. Iterative:
    deep nesting costs no stack."""
    out: list[str] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                out.append(where or "(arguments)")
        elif isinstance(v, dict):
            stack += ((f"{where}.{k}" if where else str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack += ((f"{where}[{i}]", x) for i, x in enumerate(v))
    return sorted(out)


def check_arguments(action: Action, args: dict[str, Any]) -> None:
    """What the schema cannot say about arguments that are to be sent: a number that is
    not finite, a path value that is not one segment, a header value a header cannot
    carry, a query string too long for a URL.
    The dispatcher runs this right after schema validation, before anything (a name
    lookup, a confirmation's read) is sent; `prepare` checks the same again."""
    bad = non_finite_fields(args)
    if bad:
        raise ArgumentError("; ".join(f"'{f}' is not a finite number" for f in bad) + " (NaN or Infinity); nothing was sent",
                            "Pass a finite number: JSON has no NaN or Infinity.", fields=bad)
    query: list[tuple[str, str]] = []
    for b in action.bindings:
        if b.arg not in args:
            continue
        value = args[b.arg]
        if b.location == PATH:
            _path_segment(b.arg, value)
        elif b.location in (HEADER, COOKIE):
            _header_value(b.arg, value)
        elif b.location == QUERY:
            if isinstance(value, list):
                query += [(b.wire, _scalar(v)) for v in value]
            elif value is not None:
                query.append((b.wire, _scalar(value)))
    _check_query(action, query)


def _json_parts(action: Action, args: dict[str, Any]) -> dict[str, str]:
    """The JSON text of each part shaped by an overlay's `json_parts`: its `fill` object with
    the members given laid over it; a part with no member given and no fill is not sent."""
    objects: dict[str, dict[str, Any]] = {}
    for b in action.bindings:
        if b.location != JSON_PART:
            continue
        if b.wire not in objects and (b.fill is not None or b.arg in args):
            objects[b.wire] = json.loads(b.fill) if b.fill is not None else {}
        if b.arg in args:
            objects[b.wire][b.member or b.arg] = args[b.arg]
    return {part: json.dumps(obj, ensure_ascii=False, separators=(",", ":")) for part, obj in objects.items()}


def prepare(action: Action, args: dict[str, Any]) -> PreparedRequest:
    """Map validated arguments back to a request through the action's bindings."""
    path = action.path
    req = PreparedRequest(method=action.method, path=path)
    body: dict[str, Any] = {}
    parts = _json_parts(action, args)
    for b in action.bindings:
        if b.location == JSON_PART:
            _bind_json_part(req, body, b, parts.pop(b.wire, None))
            continue
        if b.arg not in args:
            if b.location == BODY_FIELD and b.fill is not None:  # the inventory's `optional`: its neutral value
                body[b.wire] = json.loads(b.fill)
                req.has_json_body = True
            continue
        _bind_value(req, body, b, args[b.arg])
    _settle_body(action, req, body)
    _check_built(action, req)
    return req


def _bind_json_part(req: PreparedRequest, body: dict[str, Any], b: Binding, text: str | None) -> None:
    """A JSON-text part given as plain arguments: a multipart form field or a body member."""
    if text is None:
        return
    if b.via == MULTIPART:
        req.form_fields.append((b.wire, text))
    else:
        body[b.wire] = text
        req.has_json_body = True


def _bind_value(req: PreparedRequest, body: dict[str, Any], b: Binding, value: Any) -> None:
    """Put one argument's value where its binding says: path, query, header, cookie or body."""
    if b.location == PATH:
        # one segment, checked: percent-encoding alone does not stop `..`, `.` or an empty
        # value, which an HTTP client or a server collapses into another route
        req.path = req.path.replace("{" + b.wire + "}", _path_segment(b.arg, value))
    elif b.location == QUERY:
        if isinstance(value, list):
            req.query += [(b.wire, _scalar(v)) for v in value]
        elif value is not None:
            req.query.append((b.wire, _scalar(value)))
    elif b.location == HEADER:
        req.headers[b.wire] = _header_value(b.arg, value)
    elif b.location == COOKIE:
        req.cookies[b.wire] = _header_value(b.arg, value)
    elif b.location == BODY_FIELD:
        body[b.wire] = value
        req.has_json_body = True
    elif b.location == BODY_WHOLE:
        req.json_body = value
        req.has_json_body = True
    elif b.location == MULTIPART:
        if b.is_blob:
            for i, blob in enumerate(value if b.is_array else [value]):
                req.files.append((b.wire, blob_bytes(blob, f"{b.arg}[{i}]" if b.is_array else b.arg)))
        else:
            for v in value if b.is_array else [value]:
                req.form_fields.append((b.wire, _scalar(v)))
    elif b.location == OCTET:
        _, data, ctype = blob_bytes(value, b.arg)
        req.content, req.content_type = data, ctype
    elif b.location == FORM:  # an extra route's form field (sent form-encoded)
        req.form_fields.append((b.wire, _scalar(value)))
    elif b.location == BODY_TEXT:  # an extra route's whole body, as text
        req.content, req.content_type = _scalar(value).encode("utf-8"), "text/plain; charset=utf-8"


def _settle_body(action: Action, req: PreparedRequest, body: dict[str, Any]) -> None:
    """The JSON body: the members gathered, else an empty object where one is declared."""
    if body:
        req.json_body = body
    if req.has_json_body and req.json_body is None and action.body_media_type:
        req.json_body = {}
    elif action.body_media_type == "application/json" and not req.has_json_body and action.method in ("POST", "PUT", "PATCH", "DELETE"):
        # Huma wants a body when one is declared required (a DELETE's too: delete-system-backup);
        # an empty object is the neutral one
        req.json_body, req.has_json_body = {}, True


def _check_built(action: Action, req: PreparedRequest) -> None:
    """Refuse a request whose path still holds a placeholder, whose query is wrong, or whose
    path is not its route's."""
    if "{" in req.path:
        missing = [seg for seg in req.path.split("/") if seg.startswith("{")]
        raise ArgumentError(f"missing path parameter(s): {', '.join(missing)}", "Pass every path parameter the action lists as required.")
    _check_query(action, req.query)
    why = route_problem(action.path, req.path)
    if why is not None:  # the checks above make this unreachable; it stays as the last guard
        raise ArgumentError(f"the request path built for {action.id} is not its route {action.method} {action.path} ({why}); nothing was sent",
                            "Check the path arguments: each must be one ID or name.",
                            fields=[b.arg for b in action.bindings if b.location == PATH], code=INVALID_PATH_VALUE)


class ArcaneClient:
    """One pooled httpx client for one Arcane instance and one credential."""

    def __init__(self, settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None, observer: Any = None):
        self.settings = settings
        if not settings.arcane_url:
            raise CallError("ARCANE_URL is not set", "Set ARCANE_URL to your Arcane's base URL, e.g. https://arcane.example.com.")
        verify: Any = True
        if settings.insecure_skip_verify:
            verify = False
        elif settings.ca_file:
            verify = ssl.create_default_context(cafile=str(settings.ca_file))
        elif settings.arcane_url.lower().startswith("http://"):
            # plain HTTP never uses TLS, so the CA bundle (tens of ms to load at every start)
            # is not read; should a TLS connection ever happen, it trusts no certificate
            verify = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._client = httpx.AsyncClient(
            base_url=settings.arcane_url + API_PREFIX,
            timeout=httpx.Timeout(settings.request_timeout),
            follow_redirects=False,
            verify=verify,
            transport=transport,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json, application/problem+json;q=0.9, */*;q=0.5"},
            limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
            # traces and metrics (front/observe.py): the call span's traceparent, Arcane's statuses counted
            event_hooks=observer.http_hooks() if observer is not None else None,
        )
        self.credentials = make_credentials(settings)
        # absolute URLs by path below /api (see `url`); actions whose path carries a secret never enter
        self._urls: dict[str, httpx.URL] = memo_table()
        self._url_catalog: Any = None  # the catalog `use` was given: its actions' URLs may be kept
        self._url_kept: dict[str, bool] = {}  # action id -> whether its URLs may be kept (decided at its first call)

    def use(self, catalog) -> None:
        """Speak the catalog's session protocol (catalog/conventions.yaml `session`) and send
        a key in its API-key header (the document's apiKey scheme); the dispatcher calls this
        when it is built, before anything is sent."""
        if self.credentials is not None and hasattr(self.credentials, "protocol"):
            self.credentials.protocol = protocol_for(catalog)
        if self.credentials is not None and hasattr(self.credentials, "key_header"):
            if not catalog.api_key_header:
                raise ConfigError("ARCANE_API_KEY is set, but Arcane's OpenAPI document declares no API-key security scheme "
                                  "(components.securitySchemes, type apiKey): use ARCANE_USERNAME/ARCANE_PASSWORD instead",
                                  setting="ARCANE_API_KEY", code="no_key_scheme")
            self.credentials.key_header = catalog.api_key_header
        # which actions' URLs may be kept is decided per action at its first call, not here:
        # a start reads no action's bindings
        self._url_catalog, self._url_kept = catalog, {}

    def _keeps_url(self, action: Action) -> bool:
        """Whether the URLs of `action`'s paths may be kept: one of the catalog's actions
        whose path takes no secret (the redaction rules' secret names)."""
        kept = self._url_kept.get(action.id)
        if kept is None:
            catalog = self._url_catalog
            if catalog is None or catalog.actions.get(action.id) is None:
                return False
            secret = catalog.redaction.is_secret_name
            kept = self._url_kept[action.id] = not any(b.location == PATH and secret(b.arg) for b in action.bindings)
        return kept

    def url(self, action: Action, path: str) -> httpx.URL:
        """The absolute URL of `path` (below /api), merged with the base URL as httpx merges
        a relative one (base path + the path without its leading `/`). Handing httpx an
        absolute URL skips its two URL parses per request; the URLs of recent paths are
        kept (httpx.URL is immutable), never those of an action whose path takes a secret."""
        url = self._urls.get(path)
        if url is None:
            base, rel = self._client.base_url, httpx.URL(path)
            url = base.copy_with(raw_path=base.raw_path + rel.raw_path.lstrip(b"/")) if rel.is_relative_url else rel
            if self._keeps_url(action):
                keep(self._urls, path, url, URL_CACHE_MAX)
        return url

    async def start(self) -> None:
        """Log in when a session is configured (ConfigError stops startup on a refused
        login; an unreachable Arcane only defers the login to the first call)."""
        if self.credentials is not None:
            await self.credentials.start(self._client)

    def build(self, action: Action, req: PreparedRequest, auth: dict[str, str] | None = None) -> httpx.Request:
        headers = dict(req.headers)
        headers.update(auth or {})
        kwargs: dict[str, Any] = {"params": req.query or None, "headers": headers, "cookies": req.cookies or None}
        if action.response_kind in STREAMING_KINDS:
            kwargs["timeout"] = httpx.Timeout(self.settings.request_timeout, read=None)
        elif req.read_timeout is not None:
            kwargs["timeout"] = httpx.Timeout(self.settings.request_timeout, read=req.read_timeout)
        if req.form_fields and not req.files and (action.body_media_type or "").startswith("multipart/"):
            # text parts only: still multipart/form-data (httpx would send `data` alone
            # form-encoded, which a multipart handler does not read); a part without a
            # filename is a form value, not a file
            kwargs["files"] = [(k, (None, v.encode("utf-8"))) for k, v in req.form_fields]
        elif req.files or req.form_fields:
            kwargs["files"] = req.files or None
            kwargs["data"] = dict(req.form_fields) if req.form_fields else None
            if req.files and len({k for k, _ in req.form_fields}) != len(req.form_fields):
                raise ArgumentError("a repeated text part cannot be sent with files", None)
        elif req.content is not None:
            kwargs["content"] = req.content
            headers["Content-Type"] = req.content_type or "application/octet-stream"
        elif req.has_json_body:
            kwargs["json"] = req.json_body
        request = self._client.build_request(req.method, self.url(action, req.path), **kwargs)
        base = self._client.base_url.raw_path
        if request.url.raw_path.split(b"?", 1)[0] != base + req.path.lstrip("/").encode("ascii"):
            # httpx normalises dot segments when it parses a URL: the path sent must be the one checked
            raise ArgumentError(f"the URL for {action.id} would not carry its checked path; nothing was sent",
                                "Check the path arguments: each must be one ID or name.",
                                fields=[b.arg for b in action.bindings if b.location == PATH], code=INVALID_PATH_VALUE)
        if action.security == "public":
            # a public route gets no credential at all: the jar's session cookie is one too
            request.headers.pop("Cookie", None)
        return request

    async def send(self, action: Action, req: PreparedRequest) -> httpx.Response:
        """Send and return a streaming response (the caller reads and closes it, through
        transport.body_chunks). Transport failures are ArcaneTimeout/ArcaneUnreachable."""
        with mapped(self._client):
            return await send_with_auth(self._client, self.credentials, action.security, lambda auth: self.build(action, req, auth))

    async def get_public(self, path: str, cap: int) -> tuple[int, bytes, str]:
        """GET a public route below /api without credentials (the OpenAPI document):
        (status, at most `cap` bytes, content type). Transport failures are
        ArcaneTimeout/ArcaneUnreachable."""
        with mapped(self._client):
            resp = await self._client.send(self._client.build_request("GET", path, headers={"Accept": "application/json"}), stream=True)
        try:
            body, _ = await read_capped(resp, cap)
        finally:
            await resp.aclose()
        return resp.status_code, body, resp.headers.get("content-type", "")

    async def document(self, path: str) -> Any:
        """The live OpenAPI document at `path` (catalog/conventions.yaml `diagnostics`), or
        None when it does not answer 200 with JSON."""
        status, body, _ = await self.get_public(path, MAX_DOCUMENT_BYTES)
        if status != 200:
            return None
        try:
            return json.loads(body)
        except ValueError:
            return None

    async def aclose(self) -> None:
        if self.credentials is not None:
            try:
                await self.credentials.aclose()
            except Exception:  # logging out is best effort
                pass
        await self._client.aclose()
