"""The one exception hierarchy of the interpreter.

    InterpError                      base; never escapes to a client as a traceback
    ├── RuleError                    rule/inventory files are invalid (carries Problems)
    ├── ConfigError                  a bad configuration value (names the variable)
    └── CallError                    a tool call failed; rendered as an isError result
        ├── ArgumentError            arguments do not match the action's input schema
        ├── UnknownActionError       no such action (carries the closest IDs)
        ├── ConfirmationRequired     a destructive action without confirm: true
        ├── NotServedError           the action's handler is not served yet
        └── UpstreamError            Arcane answered an error, or could not be reached
            ├── ArcaneHTTPError      an HTTP error status (problem+json or {success:false})
            ├── ArcaneUnreachable    connection refused, DNS, TLS, dropped connection
            ├── ArcaneTimeout        the request or action deadline passed
            └── ArcaneProtocolError  a body that does not parse as what the kind expects

httpx errors are mapped to UpstreamError in request.py and nowhere else; jsonschema
errors to ArgumentError/RuleError where they are raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class InterpError(Exception):
    """Base class of every error the interpreter raises on purpose."""


@dataclass(frozen=True, order=True)
class Problem:
    """One problem found in a rule or inventory file."""

    file: str
    line: int
    col: int
    pointer: str
    message: str
    code: str

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.pointer or '/'}: {self.message} [{self.code}]"

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "pointer": self.pointer,
            "message": self.message,
            "code": self.code,
        }


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
    def __init__(self, message: str, next_step: str | None = None, *, fields: list[str] | None = None):
        super().__init__(message, next_step, code="invalid_arguments")
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


class ArcaneUnreachable(UpstreamError):
    def __init__(self, message: str, next_step: str | None = None, *, sent: bool = False):
        super().__init__(message, next_step, code="arcane_unreachable", sent=sent)


class ArcaneTimeout(UpstreamError):
    def __init__(self, message: str, next_step: str | None = None, *, sent: bool = True):
        super().__init__(message, next_step, code="arcane_timeout", sent=sent)


class ArcaneProtocolError(UpstreamError):
    def __init__(self, message: str, next_step: str | None = None, *, status: int | None = None):
        super().__init__(message, next_step, code="arcane_protocol", status=status)
