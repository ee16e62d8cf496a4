"""How a live Arcane differs from what this server was built for.

Document drift: its OpenAPI document against the embedded one — operations added (served
there, unnamed here), removed (named here, missing there) and changed (the same
operationId on another route, or the operation itself rewritten). `interp doctor` reports
it in full; the server logs one warning line at start (`startup_warning`), never failing
for it.

Transport drift (`transport`): a stream served in a Content-Type that catalog/conventions.yaml
`framings` does not declare (a newer Arcane's framing): such a stream is refused, so
`interp doctor` opens one harmless stream and says which framing it found.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging

from ..build.lazy_dataclass import dataclass

log = logging.getLogger("arcane_mcp")

#: at most this many seconds at startup for the document (the server does not wait longer)
STARTUP_SECONDS = 5.0
#: operations named per kind in a one-line summary
NAMED = 3


def _digest(op: dict) -> str:
    return hashlib.sha256(json.dumps(op, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Drift:
    """The differences, each sorted: (operationId, "METHOD /path")."""

    live_version: str
    embedded_version: str
    added: tuple[tuple[str, str], ...]
    removed: tuple[tuple[str, str], ...]
    changed: tuple[tuple[str, str], ...]
    operations: int  # in the live document

    @property
    def differs(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def summary(self) -> str:
        """One line: the counts, and the first few operations of each kind."""
        parts = []
        for word, items in (("added", self.added), ("removed", self.removed), ("changed", self.changed)):
            if items:
                named = ", ".join(f"{oid} ({route})" for oid, route in items[:NAMED])
                more = f" and {len(items) - NAMED} more" if len(items) > NAMED else ""
                parts.append(f"{len(items)} {word}: {named}{more}")
        versions = f"live {self.live_version or '?'} vs embedded {self.embedded_version or '?'}"
        return f"{versions}; " + ("; ".join(parts) if parts else f"the same {self.operations} operations")

    def as_dict(self) -> dict:
        def rows(items):
            return [{"operationId": oid, "route": route} for oid, route in items]

        return {"live_version": self.live_version, "embedded_version": self.embedded_version, "operations": self.operations,
                "added": rows(self.added), "removed": rows(self.removed), "changed": rows(self.changed)}


@dataclass(frozen=True)
class TransportDrift:
    """What one stream's Content-Type says: its media type and the declared framing (None:
    not declared, a drift)."""

    what: str
    media_type: str
    framing: str | None
    declared: tuple[str, ...]

    @property
    def differs(self) -> bool:
        return self.framing is None

    def summary(self) -> str:
        if self.differs:
            return (f"transport drift: {self.what} is served as {self.media_type or 'no Content-Type'!r}, not a declared framing "
                    f"({', '.join(self.declared)}); streams in it are refused")
        return f"{self.what} is served as {self.media_type} ({self.framing})"

    def as_dict(self) -> dict:
        return {"stream": self.what, "content_type": self.media_type, "framing": self.framing, "declared": list(self.declared)}


def transport(framings, what: str, content_type: str | None) -> TransportDrift:
    """The transport drift of one stream's Content-Type (catalog/conventions.yaml `framings`)."""
    media = " ".join((content_type or "").split(";", 1)[0].split())[:80].lower()
    return TransportDrift(what, media, framings.framing_of(content_type), tuple(sorted(framings.types)))


def _version(doc: dict) -> str:
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    return str(info.get("version") or "")


def compare(embedded: dict, live: dict) -> Drift:
    """The drift of `live` from `embedded` (both OpenAPI documents)."""
    from .update_spec import operations_of  # here: a server start that finds no live document never needs it

    ours, theirs = operations_of(embedded), operations_of(live)
    added = sorted((oid, f"{m} {p}") for oid, (m, p, _) in theirs.items() if oid not in ours)
    removed = sorted((oid, f"{m} {p}") for oid, (m, p, _) in ours.items() if oid not in theirs)
    changed = sorted((oid, f"{theirs[oid][0]} {theirs[oid][1]}") for oid in ours.keys() & theirs.keys()
                     if ours[oid][:2] != theirs[oid][:2] or _digest(ours[oid][2]) != _digest(theirs[oid][2]))
    return Drift(_version(live), _version(embedded), tuple(added), tuple(removed), tuple(changed), len(theirs))


async def startup_warning(client, catalog, seconds: float = STARTUP_SECONDS) -> Drift | None:
    """Fetch the live document once (bounded by `seconds`) and log one warning line when it
    differs from the embedded one. Any failure (unreachable, not JSON, too slow) is one
    debug line: the server starts regardless. Returns the drift found, if any."""
    try:
        live = await asyncio.wait_for(client.document(catalog.conventions.diagnostics.document), seconds)
    except Exception as exc:  # a warning must never stop the server
        log.debug("the live OpenAPI document was not compared: %s", exc)
        return None
    if not isinstance(live, dict):
        log.debug("the live OpenAPI document was not compared: it is not a JSON object")
        return None
    drift = compare(catalog.document, live)
    if drift.differs:
        log.warning("Arcane's live OpenAPI document differs from the embedded one (%s); run `interp doctor` for the whole report",
                    drift.summary())
    return drift
