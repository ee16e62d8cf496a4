"""The one exception hierarchy of the interpreter (every class is defined here).

    InterpError                      base; never escapes to a client as a traceback
    ├── RuleError                    rule/inventory files are invalid (carries Problems)
    ├── ConfigError                  a bad setting or environment: one line, `setting`, `code`
    │   └── ListenError              an HTTP server cannot listen (port_in_use, …)
    ├── SpecSourceError              update-spec cannot use the new document (`code`)
    ├── AssetError                   the MCP Apps view assets cannot make a document (front/apps.py)
    ├── LoginRefused                 inside auth.py: Arcane refused the session login for good
    ├── LoginUnavailable             inside auth.py: the login/refresh answered 5xx or 429
    └── CallError                    a tool call failed; rendered as an isError result (`code`)
        ├── ArgumentError            arguments do not match the schema (`fields`)
        ├── UnknownActionError       no such action, or withdrawn (`closest`)
        ├── ConfirmationRequired     a destructive action without confirm: true
        ├── NotServedError           the action's handler is not served yet
        ├── SessionRequired          a Bearer-only action and only an API key is configured
        ├── ApiKeyRequired           an API-key-only action and only a session is configured
        └── UpstreamError            Arcane answered an error, or could not be reached (`status`, `sent`)
            ├── ArcaneHTTPError      an HTTP error status (problem+json or {success:false})
            ├── ArcaneUnreachable    connection refused, DNS, TLS, dropped connection
            ├── ArcaneTimeout        the request or action deadline passed
            ├── ArcaneProtocolError  a body that does not parse as what the kind expects
            ├── StreamFailed         an operation stream (200) ended in an error line (`activity`)
            ├── ResultFailed         a 200 answer reports a failure, or lacks its identity (`structured`)
            └── AuthFailed           the session login/refresh failed during a call

Problem is not an exception: one finding in a rule file (file:line:col, pointer, code).
LoginRefused and LoginUnavailable never leave auth.py: it turns them into ConfigError at
startup and AuthFailed during a call. The simulator, a test double, keeps its own errors.

Foreign errors are mapped at one boundary each:
  httpx       transport.py (request.py sends, response.py reads, auth.py logs in through it;
              update-spec fetches through it)
  ruamel      load.load_file (a parse error becomes a Problem at its line)
  jsonschema  rule files: load.schema_problems (Problems); call arguments:
              dispatch.explain_errors (ArgumentError), for an action's parameters and a
              multi-action tool's envelope alike
  OSError     listen.bind (ListenError), paths (ConfigError), call_records (ConfigError)
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import field

from .build.lazy_dataclass import dataclass


class InterpError(Exception):
    """Base class of every error the interpreter raises on purpose."""


@dataclass(frozen=True, order=True)
class Problem:
    """One problem found in a rule or inventory file. `layer` names the rules layer the
    file belongs to (``packaged`` or ``operator``) when an operator's directory is laid over
    the packaged rules; it is empty with one layer, and for the catalog's files."""

    file: str
    line: int
    col: int
    pointer: str
    message: str
    code: str
    layer: str = ""

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.pointer or '/'}: {self.message}{layer_note(self.layer)} [{self.code}]"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def layer_note(layer: str) -> str:
    """` (operator layer)` after a position, or nothing with one rules layer (a Problem's
    line and a compiled model's Origin say it the same way)."""
    return f" ({layer} layer)" if layer else ""


class RuleError(InterpError):
    """Rule or inventory files are invalid; `problems` holds every problem, sorted."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(p.format() for p in self.problems))


class ConfigError(InterpError):
    """A configuration value is invalid. The message names the variable and the form;
    `setting` is that variable or flag (when one is to blame) and `code` a stable word."""

    def __init__(self, message: str, *, setting: str | None = None, code: str = "invalid_setting"):
        super().__init__(message)
        self.message = message
        self.setting = setting
        self.code = code

    def format(self) -> str:
        """The one line a user sees: the message, then the stable code in brackets."""
        return f"{self.message} [{self.code}]"


class AssetError(InterpError):
    """The MCP Apps view assets (interpreter/views/) cannot make a document: one missing, a
    marker of shell.html missing or repeated, an asset that would close its element early.
    The views are then off (front/apps.py); the server serves everything else."""


class ListenError(ConfigError):
    """An HTTP server cannot listen on its address (busy port, no permission, no such
    address). `setting` names the flag or variable that chose it."""


class CallError(InterpError):
    """A tool call failed. `message` is plain text; `next_step` says what to do."""

    def __init__(self, message: str, next_step: str | None = None, *, code: str = "call_failed"):
        super().__init__(message)
        self.message = message
        self.next_step = next_step
        self.code = code


class ArgumentError(CallError):
    """`code` is invalid_arguments, or a narrower word: invalid_path_value (a path value
    that is not one segment, interpreter/call/request.py)."""

    def __init__(self, message: str, next_step: str | None = None, *, fields: list[str] | None = None,
                 code: str = "invalid_arguments"):
        super().__init__(message, next_step, code=code)
        self.fields = fields or []


class UnknownActionError(CallError):
    def __init__(self, message: str, next_step: str | None = None, *, closest: list[str] | None = None):
        super().__init__(message, next_step, code="unknown_action")
        self.closest = closest or []


class ConfirmationRequired(CallError):
    def __init__(self, message: str, next_step: str | None = None):
        super().__init__(message, next_step, code="confirmation_required")


class NotServedError(CallError):
    def __init__(self, message: str, next_step: str | None = None):
        super().__init__(message, next_step, code="not_served")


class SessionRequired(CallError):
    """The operation accepts only a Bearer session and only an API key is configured."""

    def __init__(self, message: str, next_step: str | None = None):
        super().__init__(message, next_step, code="session_required")


class ApiKeyRequired(CallError):
    """The operation accepts only an API key and only a user session is configured."""

    def __init__(self, message: str, next_step: str | None = None):
        super().__init__(message, next_step, code="api_key_required")


class UpstreamError(CallError):
    """Arcane answered an error or could not be reached."""

    def __init__(self, message: str, next_step: str | None = None, *, code: str = "upstream", status: int | None = None, sent: bool = True):
        super().__init__(message, next_step, code=code)
        self.status = status
        self.sent = sent


class ArcaneHTTPError(UpstreamError):
    def __init__(self, message: str, next_step: str | None = None, *, status: int, detail: dict | None = None):
        super().__init__(message, next_step, code="arcane_http", status=status)
        self.detail = detail or {}


class StreamFailed(UpstreamError):
    """An operation stream ended in an error frame (or without its end frame): Arcane
    answered 200, the operation did not succeed. `activity` is the activity it started."""

    def __init__(self, message: str, next_step: str | None = None, *, status: int | None = None, activity: str | None = None):
        super().__init__(message, next_step, code="stream_failed", status=status)
        self.activity = activity


class ResultFailed(UpstreamError):
    """Arcane answered 200 and its answer reports that the operation failed (code
    `result_failed`), or lacks the member that identifies what it made (code
    `answer_incomplete`: the change may not have happened). `structured` is Arcane's value,
    kept as structuredContent of the error result."""

    def __init__(self, message: str, next_step: str | None = None, *, code: str = "result_failed", status: int | None = None,
                 structured: dict | None = None):
        super().__init__(message, next_step, code=code, status=status)
        self.structured = structured


class ArcaneUnreachable(UpstreamError):
    def __init__(self, message: str, next_step: str | None = None, *, sent: bool = False):
        super().__init__(message, next_step, code="arcane_unreachable", sent=sent)


class ArcaneTimeout(UpstreamError):
    def __init__(self, message: str, next_step: str | None = None, *, sent: bool = True):
        super().__init__(message, next_step, code="arcane_timeout", sent=sent)


class ArcaneProtocolError(UpstreamError):
    def __init__(self, message: str, next_step: str | None = None, *, status: int | None = None):
        super().__init__(message, next_step, code="arcane_protocol", status=status)


class AuthFailed(UpstreamError):
    """During a call, Arcane refused the configured login (changed password, removed user,
    a second factor), or the login/refresh failed for a reason a retry may cure (5xx, 429).
    The action itself did not run (`sent` is False)."""

    def __init__(self, message: str, next_step: str | None = None, *, status: int | None = None):
        super().__init__(message, next_step, code="auth_failed", status=status, sent=False)


class ResourceError(InterpError):
    """A failed resource read (interpreter/front/resources.py), as the JSON-RPC error it becomes:
    `code`, the message a tool call would give, and `data` (the URI, Arcane's status)."""

    def __init__(self, code: int, message: str, data: dict):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class LoginRefused(InterpError):
    """Arcane refused the login for good: `kind` is credentials | mfa | not_found | redirect | protocol."""

    def __init__(self, kind: str, status: int | None, detail: str):
        super().__init__(kind)
        self.kind, self.status, self.detail = kind, status, detail


class LoginUnavailable(InterpError):
    """A login or refresh answered 5xx or 429: another try later may work. `retry_after`
    is how many seconds Arcane asked to wait (429 with Retry-After), when it said."""

    def __init__(self, status: int, detail: str, retry_after: float | None = None):
        super().__init__(status)
        self.status, self.detail, self.retry_after = status, detail, retry_after


class SpecSourceError(InterpError):
    """`interp update-spec` cannot use the new document: unreadable, not OpenAPI 3.x JSON,
    or the fetch failed. `code` is a stable word (unreadable, not_json, redirect, timeout, …)."""

    def __init__(self, message: str, *, code: str):
        super().__init__(message)
        self.code = code


class ArtefactError(ValueError):
    """(artefact.py) A file that is not a compiled catalog this engine can read (said in one
    line): the packaged artefact is then rebuilt from the sources, a cache entry is a miss."""


class SubscriptionRefused(Exception):
    """(subscriptions.py) A subscription the server will not hold (unknown URI, too many listeners)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class UnknownAction(ConfigError):
    """(interp explain) The action is not in the catalog (served or withdrawn)."""


@dataclass
class Refusal(Exception):
    """(httpmode.py) An HTTP answer instead of MCP: status, JSON-RPC error code, one line, data."""

    status: int
    code: int
    message: str
    data: dict = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> bytes:
        error = {"code": self.code, "message": self.message, "data": self.data}
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":")).encode()


