"""`interp doctor`: one run of checks against the configured, live Arcane.

    reachable    Arcane answers at ARCANE_URL (its OpenAPI document's route)
    tls          https verified and the certificate's expiry; plain http off loopback warns
    credential   the configured key or login is accepted (catalog/conventions.yaml
                 `diagnostics.credential`, /auth/me)
    permissions  what that answer says the credential may do
    version      the version Arcane reports vs the embedded document's
    drift        the live document vs the embedded one (drift.py)
    transport    the Content-Type a harmless stream is served in vs the declared framings
                 (`diagnostics.transport`, `framings`): an undeclared one is a transport drift
    environment  the default environment exists and is online
    daemon       its Docker daemon answers

Each check is ok, warn or fail with one line and, unless ok, the next step; a check that
needs an earlier one which failed is `skip`. The exit code is the worst severity (0 ok,
1 warn, 2 fail). What is asked, and where the answers keep what is read, is
catalog/conventions.yaml `diagnostics`; no Arcane route is spelled here.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import field
from typing import Any
from urllib.parse import urlsplit

from ..build import access
from ..build.catalog import Catalog
from ..build.lazy_dataclass import dataclass
from ..build.model import Probe
from ..call import reader
from ..call.reader import Answer
from ..call.request import ArcaneClient
from ..call.transport import MAX_DOCUMENT_BYTES
from ..config import Settings
from ..errors import CallError, ConfigError
from .drift import compare, transport

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
EXIT = {OK: 0, SKIP: 0, WARN: 1, FAIL: 2}
#: a certificate that expires within this many days warns
CERT_WARN_DAYS = 14
LOOPBACK = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Check:
    """One check's outcome: `summary` says what was found, `next_step` what to do."""

    name: str
    severity: str
    summary: str
    next_step: str = ""
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = {"check": self.name, "severity": self.severity, "summary": self.summary}
        if self.next_step:
            out["next_step"] = self.next_step
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True)
class Report:
    arcane_url: str
    checks: tuple[Check, ...]

    @property
    def worst(self) -> str:
        return max((c.severity for c in self.checks), key=lambda s: EXIT[s], default=OK)

    @property
    def exit_code(self) -> int:
        return EXIT[self.worst]

    def as_dict(self) -> dict:
        return {"arcane_url": self.arcane_url, "worst": self.worst, "checks": [c.as_dict() for c in self.checks]}

    def lines(self) -> list[str]:
        """A table: check, severity, what was found; the next step indented below."""
        width = max((len(c.name) for c in self.checks), default=0)
        out = [f"interp doctor: {self.arcane_url or '(no ARCANE_URL)'}"]
        for c in self.checks:
            out.append(f"{c.name.ljust(width)}  {c.severity.upper():4}  {c.summary}")
            if c.next_step:
                out.append(f"{' ' * width}        -> {c.next_step}")
        out.append(f"worst: {self.worst}")
        return out


async def _ask(client: ArcaneClient, catalog: Catalog, probe: Probe, args: dict) -> Answer:
    """Call a probe's action (an internal read, every status an answer): its status, its
    JSON body (or None) and Arcane's message when not 2xx."""
    return await reader.read(client, catalog.all_actions[probe.action], args, catalog.conventions, statuses=reader.ANY)


def _text(value: Any, limit: int = 80) -> str:
    """Untrusted text from Arcane as one short line."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------- TLS


def certificate_days(not_after: str, now: float) -> float:
    """Days until a certificate's notAfter (ssl's text form); negative once expired."""
    return (ssl.cert_time_to_seconds(not_after) - now) / 86400


def tls_verdict(days: float) -> tuple[str, str, str]:
    """(severity, summary, next step) for a verified certificate that expires in `days`."""
    if days < 0:
        return FAIL, f"the certificate expired {-days:.0f} day(s) ago", "Renew Arcane's TLS certificate."
    if days < CERT_WARN_DAYS:
        return WARN, f"verified; the certificate expires in {days:.0f} day(s)", "Renew Arcane's TLS certificate soon."
    return OK, f"verified; the certificate expires in {days:.0f} day(s)", ""


def _peer_certificate(host: str, port: int, settings: Settings) -> dict:
    context = ssl.create_default_context(cafile=str(settings.ca_file) if settings.ca_file else None)
    with socket.create_connection((host, port), timeout=settings.request_timeout) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        return tls.getpeercert() or {}


async def check_tls(settings: Settings, now: Callable[[], float]) -> Check:
    url = urlsplit(settings.arcane_url)
    host = url.hostname or ""
    if url.scheme == "http":
        if host in LOOPBACK:
            return Check("tls", OK, "plain http on loopback")
        return Check("tls", WARN, f"plain http to {host}: the credential crosses the network unencrypted",
                     "Serve Arcane over https and set ARCANE_URL to the https address.")
    if settings.insecure_skip_verify:
        return Check("tls", WARN, "https, but the certificate is not verified (ARCANE_MCP_INSECURE_SKIP_VERIFY)",
                     "Set ARCANE_MCP_CA_FILE to the CA that signed Arcane's certificate and turn skip-verify off.")
    try:
        cert = await asyncio.to_thread(_peer_certificate, host, url.port or 443, settings)
    except ssl.SSLCertVerificationError as exc:
        return Check("tls", FAIL, f"the certificate is not trusted: {_text(exc.verify_message or exc)}",
                     "Set ARCANE_MCP_CA_FILE to the CA bundle that signed it, or fix the certificate.")
    except (OSError, ssl.SSLError) as exc:
        return Check("tls", FAIL, f"no TLS handshake with {host}: {_text(exc)}", "Check that ARCANE_URL's port serves https.")
    if not cert.get("notAfter"):
        return Check("tls", WARN, "verified; the certificate's expiry is unknown", "Check the certificate's expiry yourself.")
    severity, summary, step = tls_verdict(certificate_days(cert["notAfter"], now()))
    return Check("tls", severity, summary, step, {"not_after": cert["notAfter"]})


# ---------------------------------------------------------------- the run


async def diagnose(settings: Settings, catalog: Catalog, *, client: ArcaneClient | None = None,
                   now: Callable[[], float] = time.time) -> Report:
    """Run every check once, in order; a check whose prerequisite failed is skipped."""
    if not settings.arcane_url:
        return Report("", (Check("reachable", FAIL, "ARCANE_URL is not set", "Set ARCANE_URL to your Arcane's base URL."),))
    diag = catalog.conventions.diagnostics
    checks: list[Check] = []
    try:
        client = client or ArcaneClient(settings)
        client.use(catalog)
    except ConfigError as exc:
        return Report(settings.arcane_url, (Check("credential", FAIL, exc.message, "Fix the credential settings."),))
    try:
        # reachable (and the live document, for the drift check)
        try:
            status, raw, _ = await client.get_public(diag.document, MAX_DOCUMENT_BYTES)
        except CallError as exc:
            checks.append(Check("reachable", FAIL, exc.message, exc.next_step or "Check ARCANE_URL and that Arcane runs."))
            checks.append(await check_tls(settings, now))
            checks += [Check(n, SKIP, "Arcane is not reachable") for n in
                       ("credential", "permissions", "version", "drift", "transport", "environment", "daemon")]
            return Report(settings.arcane_url, tuple(checks))
        checks.append(Check("reachable", OK, f"Arcane answered HTTP {status} at {settings.arcane_url}"))
        checks.append(await check_tls(settings, now))
        credential = await _credential_checks(client, catalog, settings)
        checks += credential
        authed = credential[0].severity != FAIL
        checks.append(await _version_check(client, catalog, diag.version) if authed else Check("version", SKIP, "no valid credential"))
        checks.append(_drift_check(catalog, status, raw, settings))
        checks.append(await _transport_check(client, catalog) if authed else Check("transport", SKIP, "no valid credential"))
        if authed:
            checks += await _environment_checks(client, catalog, settings)
        else:
            checks += [Check(n, SKIP, "no valid credential") for n in ("environment", "daemon")]
    finally:
        await client.aclose()
    return Report(settings.arcane_url, tuple(checks))


def _failed(name: str, summary: str, step: str, skipped: str, why: str) -> list[Check]:
    """A failed check and the one after it that needed it."""
    return [Check(name, FAIL, summary, step), Check(skipped, SKIP, why)]


async def _credential_checks(client: ArcaneClient, catalog: Catalog, settings: Settings) -> list[Check]:
    probe = catalog.conventions.diagnostics.credential
    if client.credentials is None:
        return [Check("credential", FAIL, "no credential is configured",
                      "Set ARCANE_API_KEY, or ARCANE_USERNAME and ARCANE_PASSWORD."),
                Check("permissions", SKIP, "no credential")]
    kind = type(client.credentials).__name__.removesuffix("Credentials").lower() or "credential"
    try:
        await client.start()
        answer = await _ask(client, catalog, probe, {})
    except (CallError, ConfigError) as exc:
        step = getattr(exc, "next_step", None) or "Check the credential settings."
        return _failed("credential", f"{kind}: {exc.message}", step, "permissions", "no valid credential")
    if answer.status in (401, 403):
        return _failed("credential", f"{kind} refused (HTTP {answer.status}): {_text(answer.message)}",
                       "Create a new API key in Arcane (or fix the login) and set it.", "permissions", "no valid credential")
    if answer.status >= 300:
        return _failed("credential", f"{probe.action} answered HTTP {answer.status}: {_text(answer.message)}", "Retry; check Arcane's log.",
                       "permissions", "no answer to read")
    user = probe.value(answer.body, "user")
    checks = [Check("credential", OK, f"{kind} valid" + (f" for user {_text(user, 40)}" if user else ""))]
    own = await _key_grants(client, catalog, settings)
    if own is not None:  # a scoped key: its own grants, not its owner's roles, are what it may do
        by_env = {"global": sorted(own.global_perms), **{e: sorted(p) for e, p in own.env_perms.items()}}
        return checks + [permissions_check(own.global_admin, by_env, settings.environment_id, whose="the key's own grants")]
    return checks + [permissions_check(probe.value(answer.body, "admin"), probe.value(answer.body, "permissions"), settings.environment_id)]


async def _key_grants(client: ArcaneClient, catalog: Catalog, settings: Settings) -> access.Grants | None:
    """The API key's own grants when Arcane lists it (by its prefix) as a key holding its
    own (a scoped key), as the server's tool withdrawal reads them (build/access.py); None
    for a personal or static key, a login, or when the reads fail."""
    if not settings.api_key:
        return None
    me, keys = await access.read(client, catalog)
    grants = access.grants_of(catalog, me, keys, settings.api_key)
    return grants if grants is not None and grants.source == access.KEY else None


def permissions_check(admin: Any, perms: Any, env: str, whose: str | None = None) -> Check:
    """What the credential may do: a global admin, or its permissions by environment
    (`global` and environment IDs); none usable on `env` warns. `whose` names grants that
    are not the user's roles (a scoped key's own), and the details then carry `source: key`."""
    head = f"{whose}: " if whose else ""
    if admin is True:
        return Check("permissions", OK, f"{head}global administrator", details={"source": access.KEY} if whose else {})
    if not isinstance(perms, dict):
        return Check("permissions", OK, "Arcane does not report this credential's permissions")
    scoped = {str(k): len(v) for k, v in perms.items() if isinstance(v, list)}
    details: dict[str, Any] = {"by_environment": scoped}
    if whose:
        details["source"] = access.KEY
    if scoped.get("global", 0) + scoped.get(env, 0):
        return Check("permissions", OK, f"{head}{scoped.get('global', 0)} global permission(s), {scoped.get(env, 0)} on environment {env}",
                     details=details)
    step = "Give the key grants on the default environment (or use another key)." if whose else \
        "Give the credential's user a role that covers the default environment."
    return Check("permissions", WARN, f"{head}no permission globally or on environment {env}", step, details)


async def _version_check(client: ArcaneClient, catalog: Catalog, probe: Probe) -> Check:
    embedded = str((catalog.document.get("info") or {}).get("version") or "")
    try:
        answer = await _ask(client, catalog, probe, {})
    except CallError as exc:
        return Check("version", WARN, f"{probe.action}: {exc.message}", "Retry; check Arcane's log.")
    live = probe.value(answer.body, "version") if answer.status < 300 else None
    if not live:
        return Check("version", WARN, f"Arcane did not report its version (HTTP {answer.status}); embedded document {embedded}",
                     "Compare Arcane's version with the embedded document by hand.")
    live = _text(live, 40).removeprefix("v")
    if live == embedded:
        return Check("version", OK, f"Arcane {live}, the embedded document's version")
    return Check("version", WARN, f"Arcane {live}; the embedded document is {embedded}",
                 f"Take Arcane's document with `interp update-spec {client.settings.arcane_url}` (or run the arcane-mcp that matches it).",
                 {"live": live, "embedded": embedded})


def _drift_check(catalog: Catalog, status: int, raw: bytes, settings: Settings) -> Check:
    try:
        live = json.loads(raw) if status == 200 else None
    except ValueError:
        live = None
    if not isinstance(live, dict) or not isinstance(live.get("paths"), dict):
        return Check("drift", WARN, f"the live OpenAPI document could not be read (HTTP {status})",
                     "Check that Arcane serves /api/openapi.json; the drift is not known.")
    drift = compare(catalog.document, live)
    if not drift.differs:
        return Check("drift", OK, f"the live document matches the embedded one ({drift.operations} operations)")
    return Check("drift", WARN, drift.summary(),
                 f"Run `interp update-spec {settings.arcane_url}` to take the live document, then name its new operations.",
                 drift.as_dict())


async def _transport_check(client: ArcaneClient, catalog: Catalog) -> Check:
    """Open the declared harmless stream, read its Content-Type, close it at once."""
    probe = catalog.conventions.diagnostics.transport
    if probe is None:
        return Check("transport", SKIP, "no stream to probe is declared (catalog/conventions.yaml diagnostics.transport)")
    action = catalog.all_actions[probe.action]
    try:
        status, ctype = await reader.head_of(client, action, dict(probe.arguments))
    except CallError as exc:
        return Check("transport", WARN, f"{probe.action}: {exc.message}", exc.next_step or "Retry; check Arcane's log.")
    if status >= 300:
        return Check("transport", WARN, f"{probe.action} answered HTTP {status}; the stream framing is not known",
                     "Check the credential's access; operation streams are read by their own Content-Type.")
    found = transport(catalog.conventions.framings, probe.action, ctype)
    if found.differs:
        return Check("transport", WARN, found.summary(),
                     "Run the arcane-mcp that matches this Arcane, or declare the type in catalog/conventions.yaml `framings`.",
                     found.as_dict())
    return Check("transport", OK, found.summary() + "; operation streams are read in whichever declared framing they come",
                 details=found.as_dict())


async def _environment_checks(client: ArcaneClient, catalog: Catalog, settings: Settings) -> list[Check]:
    diag, env = catalog.conventions.diagnostics, settings.environment_id
    probe = diag.environment
    action = catalog.all_actions[probe.action]
    # the environment action takes the environment's ID as its one required argument
    args = {action.required[0]: env} if len(action.required) == 1 else {catalog.env_arg: env}
    try:
        answer = await _ask(client, catalog, probe, args)
    except CallError as exc:
        return _failed("environment", exc.message, exc.next_step or "Retry.", "daemon", "the environment did not answer")
    if answer.status == 404:
        return _failed("environment", f"environment {env} does not exist: {_text(answer.message)}",
                       "Set ARCANE_ENVIRONMENT_ID to an ID that environment.list shows.", "daemon", "no such environment")
    if answer.status >= 300:
        return _failed("environment", f"environment {env}: HTTP {answer.status}: {_text(answer.message)}", "Check the credential's access to it.",
                       "daemon", "the environment did not answer")
    name, state, enabled = (probe.value(answer.body, k) for k in ("name", "status", "enabled"))
    label = f"environment {env}" + (f" ({_text(name, 40)})" if name else "")
    if enabled is False:
        checks = [Check("environment", WARN, f"{label} is disabled", "Enable it in Arcane, or set ARCANE_ENVIRONMENT_ID to another.")]
    elif state is not None and state != "online":
        checks = [Check("environment", WARN, f"{label} is {_text(state, 20)}", "Check the host's agent or connection in Arcane.")]
    else:
        checks = [Check("environment", OK, f"{label} is {_text(state, 20) if state else 'present'}")]
    daemon = diag.daemon
    try:
        answer = await _ask(client, catalog, daemon, {catalog.env_arg: env})
    except CallError as exc:
        return checks + [Check("daemon", FAIL, exc.message, exc.next_step or "Retry.")]
    if answer.status >= 300 or answer.body is None:
        return checks + [Check("daemon", FAIL, f"Docker on environment {env} does not answer (HTTP {answer.status}): {_text(answer.message)}",
                               "Start the Docker daemon on that host, or check the environment's connection.")]
    version = daemon.value(answer.body, "version")
    return checks + [Check("daemon", OK, f"Docker {_text(version, 20)} answers" if version else "Docker answers")]
