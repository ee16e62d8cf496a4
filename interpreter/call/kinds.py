"""The registry of kinds: every handler kind and response kind the engine knows, declared once.

A kind is the word the catalog uses for how an action is carried out: `response:` in
catalog/actions.yaml (how an operation of Arcane's document answers) and `handler:` in
catalog/extra-routes.yaml (what serves a route the document lacks). Each entry says which
function carries the kind out, which shaper reads a REST answer of it, whether it is
public, and which capture frames a route of it reads. Everything else reads this table:
handlers.HANDLERS and response.SHAPERS are built from it, the build stage (compile.py,
catalog.py) checks the catalog's words against it, and a new kind is one entry here.

The module imports nothing of the engine: functions are named as text ("module:function",
a module of this package) and imported by handlers.py and response.py, so the build stage
can read the table without importing a handler.
"""

from __future__ import annotations


class Kind:
    """One kind, by the word the catalog uses. A plain class with its own __init__: the table
    is made at every start, and a dataclass's generated __init__ (compiled on first use) would
    cost about a millisecond of it."""

    __slots__ = ("name", "handler", "shaper", "response", "route", "public", "frames", "lazy", "streaming", "reads")

    def __init__(self, name: str, *, handler: str | None = None, shaper: str | None = None, response: bool = False,
                 route: bool = False, public: bool = False, frames: frozenset[str] = frozenset(), lazy: bool = False,
                 streaming: bool = False, reads: bool = False) -> None:
        self.name = name
        self.handler = handler  # "module:function" carrying out an action of the kind; None for a pure response kind
        self.shaper = shaper  # response.py's function that shapes a REST answer of this response kind
        self.response = response  # an operation of the document may answer so (actions.yaml `response`)
        self.route = route  # an extra route may name it (extra-routes.yaml `handler`)
        self.public = public  # the request sends no credential of the server's (it carries its own)
        self.frames = frames  # the capture frames a route of the kind reads; empty: it takes no capture
        self.lazy = lazy  # the handler's module is imported on the first call, never at a server start
        self.streaming = streaming  # an answer without end: no read timeout (the action deadline or the capture's bound ends it)
        self.reads = reads  # a route of the kind is read-only unless it says otherwise (`read_only`)

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"


#: Every kind, once. "rest" carries out every operation of the document (by its response
#: kind's shaper); "chunked_upload" is set by an overlay's `chunked_upload` on a REST action.
KINDS: tuple[Kind, ...] = (
    Kind("rest", handler="context:rest"),
    Kind("json", shaper="shape_json", response=True),
    Kind("empty", shaper="shape_empty", response=True),
    Kind("ndjson", shaper="shape_ndjson", response=True, streaming=True),
    Kind("download", shaper="shape_download", response=True),
    Kind("text_download", handler="transfer:download", shaper="shape_text_download", response=True, route=True),
    Kind("binary_download", handler="transfer:download", shaper="shape_binary_download", response=True, route=True),
    Kind("live_channel", handler="live:live_channel", response=True, route=True, streaming=True, reads=True),
    Kind("webhook_trigger", handler="transfer:webhook_trigger", route=True, public=True),
    Kind("token_exchange", handler="transfer:token_exchange", route=True, public=True),
    Kind("chunked_upload", handler="transfer:chunked_upload"),
    Kind("websocket_capture", handler="wsclient:websocket_capture", route=True, frames=frozenset({"lines", "samples"}), lazy=True,
         reads=True),
    Kind("exec", handler="wsclient:exec_command", route=True, frames=frozenset({"terminal"}), lazy=True),
)


def by_name() -> dict[str, Kind]:
    """Every kind by its word (read at each call: a test may put a kind in the table)."""
    return {k.name: k for k in KINDS}


def kind(name: str) -> Kind | None:
    return by_name().get(name)


def served(k: Kind) -> bool:
    """Whether the engine carries the kind out: a kind with neither handler nor shaper is known
    (the catalog may name it: a route of it is `pending`) but not served by this version."""
    return k.handler is not None or k.shaper is not None


def response_kinds() -> dict[str, bool]:
    """Every response kind actions.yaml may name, and whether the engine serves it."""
    return {k.name: served(k) for k in KINDS if k.response}


def route_kinds() -> dict[str, bool]:
    """Every handler kind an extra route may name, and whether the engine serves it."""
    return {k.name: served(k) for k in KINDS if k.route}


def handled_response_kinds() -> frozenset[str]:
    """Response kinds carried out by the handler of the same name, not by a shaper of `rest`."""
    return frozenset(k.name for k in KINDS if k.response and k.shaper is None and k.handler is not None)


def public_kinds() -> frozenset[str]:
    """Handler kinds whose routes must send no credential at all (security: public)."""
    return frozenset(k.name for k in KINDS if k.public)


def streaming_kinds() -> frozenset[str]:
    """Response kinds read without a read timeout."""
    return frozenset(k.name for k in KINDS if k.streaming)


def reading_kinds() -> frozenset[str]:
    """Handler kinds whose routes are read-only unless they say otherwise."""
    return frozenset(k.name for k in KINDS if k.reads)


def capture_frames(name: str) -> frozenset[str] | None:
    """The capture frames a route of the kind reads; None when it takes no capture profile."""
    k = kind(name)
    return k.frames if k is not None and k.frames else None


__all__ = ["KINDS", "Kind", "by_name", "capture_frames", "handled_response_kinds", "kind", "public_kinds", "response_kinds",
           "reading_kinds", "route_kinds", "served", "streaming_kinds"]
