"""The identity layer: which credential a request to Arcane carries, and keeping a user
session alive (docs/catalog.md, the session convention).

    ApiKeyCredentials     ARCANE_API_KEY: in the API-key header on every operation that
                          takes a key (the OpenAPI document's apiKey security scheme
                          names it: catalog.Catalog.api_key_header)
    SessionCredentials    ARCANE_USERNAME/ARCANE_PASSWORD: log in, send `Authorization:
                          Bearer`, refresh (rotating refresh tokens) or log in again
    CombinedCredentials   both: the key where it is accepted, the session for the
                          Bearer-only operations (passkeys, MFA, personal API keys)

An operation's security class (catalog.Action.security) picks the header:

    security   key only            session only        both
    public     {}                  {}                  {}
    either     the key header      Bearer              the key header
    apikey     the key header      ApiKeyRequired      the key header
    bearer     SessionRequired     Bearer              Bearer

The executor sends through `send_with_auth`: headers from the credential, one request,
and on a 401 `refresh_after_401` decides whether one retry can help. Login and refresh
go through the executor's own httpx client (base URL ending in /api), inside
transport.mapped, so a transport failure arrives here as ArcaneTimeout/ArcaneUnreachable.
Which routes log in, refresh and log out, the fields they are sent and answer, the status
that asks for a second factor and the error shapes are catalog/conventions.yaml's
(`session`, `envelope`, `error_shapes`), given as a SessionProtocol (`protocol_for`);
Arcane's refusals (LoginRefused, LoginUnavailable inside this module) become ConfigError at
startup and AuthFailed (a CallError) during a call. The classes are in errors.py.

Secrets (password, access and refresh tokens, API key) are held in `_Secret` boxes and
never appear in reprs, log records or exception messages; only events are logged, at
DEBUG, on logger `arcane_mcp.auth`.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ..build.lazy_dataclass import dataclass
from ..build.model import ErrorShape, SessionConvention
from ..errors import ApiKeyRequired, ArcaneTimeout, ArcaneUnreachable, AuthFailed, ConfigError, LoginRefused, LoginUnavailable, SessionRequired
from .response import message_of, retry_after, wait_text
from .transport import mapped

log = logging.getLogger("arcane_mcp.auth")

# The setting to blame for a refused login at start, by the refusal's kind (the code is
# `login_<kind>`); a refusal of the credentials themselves blames ARCANE_PASSWORD.
LOGIN_SETTING = {"not_found": "ARCANE_URL", "redirect": "ARCANE_URL", "protocol": "ARCANE_URL", "mfa": "ARCANE_USERNAME"}
REFRESH_MARGIN = 60.0  # refresh proactively when the access token expires within this many seconds
RETRY_PROACTIVE_AFTER = 5.0  # after a failed proactive refresh, keep the token this long before trying again
HIDDEN = "[hidden]"

__all__ = [
    "Credentials", "ApiKeyCredentials", "SessionCredentials", "CombinedCredentials", "SessionProtocol", "make_credentials",
    "protocol_for", "send_with_auth",
]


@dataclass(frozen=True)
class SessionProtocol:
    """The session protocol as this module speaks it: the routes (below /api) of the
    conventions' login, refresh and logout actions, the request and answer members
    (`names`: catalog/conventions.yaml `session`, as compiled), and where an answer keeps
    its value and its error text."""

    login_path: str
    refresh_path: str
    logout_path: str
    names: SessionConvention
    data: str  # the envelope's value member
    error_shapes: tuple[ErrorShape, ...]


def protocol_for(catalog) -> SessionProtocol:
    """The session protocol of a built catalog: catalog/conventions.yaml `session`, its
    actions' routes taken from the unfiltered catalog (read-only mode withdraws the login
    action from the tools, not from the credential)."""
    conv = catalog.conventions
    s = conv.session
    route = {aid: catalog.all_actions[aid].path for aid in (s.login, s.refresh, s.logout)}
    return SessionProtocol(route[s.login], route[s.refresh], route[s.logout], s, conv.envelope.data, conv.error_shapes)


class _Secret:
    """A secret string whose repr/str never shows it (also in tracebacks with locals)."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return HIDDEN

    __str__ = __repr__


# ---------------------------------------------------------------- helpers


_FRACTION = re.compile(r"(\.\d{6})\d+")


def _parse_time(text: Any) -> datetime | None:
    """RFC 3339 (Go writes up to 9 fractional digits and `Z`) -> aware datetime, or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        dt = datetime.fromisoformat(_FRACTION.sub(r"\1", text.strip()).replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _server_now(response: httpx.Response, wall: Callable[[], float]) -> float:
    """The server's clock when it answered (its Date header), else ours: expiresAt is then
    read against the clock that wrote it, so a skewed clock on either side does no harm."""
    date = response.headers.get("date")
    if date:
        try:
            return parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            pass
    return wall()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _data(body: Any, protocol: SessionProtocol) -> dict:
    """Arcane wraps answers in its envelope; accept the bare object too."""
    if isinstance(body, dict) and isinstance(body.get(protocol.data), dict):
        return body[protocol.data]
    return body if isinstance(body, dict) else {}


def _detail(response: httpx.Response, protocol: SessionProtocol) -> str:
    """Arcane's short reason, where the declared error shapes keep it, or the status."""
    text = message_of(_json(response), protocol.error_shapes)
    if not text:
        text = response.reason_phrase or "no reason given"
    text = " ".join(text.split())
    return text[:200] + ("…" if len(text) > 200 else "")


def _bearer_of(headers: dict[str, str]) -> str | None:
    for k, v in headers.items():
        if k.lower() == "authorization" and v[:7].lower() == "bearer ":
            return v[7:]
    return None


def _has_key(headers: dict[str, str], header: str | None) -> bool:
    return header is not None and any(k.lower() == header.lower() for k in headers)


# ---------------------------------------------------------------- credentials


class Credentials(abc.ABC):
    """What the executor asks of a credential. Call `start` once before serving."""

    async def start(self, http: httpx.AsyncClient) -> None:
        """Prepare before serving (a session logs in here). Raises ConfigError when Arcane
        refuses the configuration; never fails because Arcane is unreachable."""
        return None  # a key or no credential needs no preparation; subclasses override

    @abc.abstractmethod
    async def headers(self, security: str) -> dict[str, str]:
        """The auth headers for an operation of that security class (either | public |
        bearer | apikey); raises SessionRequired / ApiKeyRequired / AuthFailed."""

    async def refresh_after_401(self, used: dict[str, str]) -> bool:
        """Arcane answered 401 to a request sent with headers `used`: True when a retry
        with fresh `headers()` may succeed (retry once), False when nothing can help."""
        return False

    async def aclose(self) -> None:
        """Best effort at shutdown (a session logs out); call before closing the client."""
        return None  # only a session holds anything to release; subclasses override


class ApiKeyCredentials(Credentials):
    """ARCANE_API_KEY: sent in the key `header` wherever the operation takes a key. The
    header is the catalog's (its document's apiKey scheme); the client sets it when the
    dispatcher is built, before anything is sent (ArcaneClient.use)."""

    def __init__(self, api_key: str, *, header: str | None = None):
        if not api_key:
            raise ConfigError("ARCANE_API_KEY is empty: set the key Arcane showed when it was created (arc_…)",
                              setting="ARCANE_API_KEY", code="empty_setting")
        self._key = _Secret(api_key)
        self.key_header = header

    async def headers(self, security: str) -> dict[str, str]:
        if security == "public":
            return {}
        if security == "bearer":
            raise SessionRequired(
                "this action needs a user session (ARCANE_USERNAME/ARCANE_PASSWORD), not an API key: "
                "Arcane accepts only a logged-in user's Bearer token for it (passkeys, MFA, personal API keys)",
                "Set ARCANE_USERNAME and ARCANE_PASSWORD (keep ARCANE_API_KEY for everything else) and restart the server.")
        if not self.key_header:
            raise RuntimeError("ApiKeyCredentials needs the catalog's API-key header (ArcaneClient.use) before a call")
        return {self.key_header: self._key.value}

    def secrets(self) -> list[str]:
        return [self._key.value]

    def __repr__(self) -> str:
        return f"ApiKeyCredentials(api_key={HIDDEN})"


class SessionCredentials(Credentials):
    """ARCANE_USERNAME/ARCANE_PASSWORD: a user session with Bearer tokens.

    * `start` logs in. A wrong password, a user with a second factor (passkey MFA:
      `status: mfa_required`) or an ARCANE_URL that serves no Arcane login stop startup
      with a ConfigError. If Arcane is unreachable (or answers 5xx/429), startup goes on
      and the login happens lazily on the first call that needs the session.
    * `headers` refreshes proactively when the access token expires within ~60 s
      (expiresAt, read against the answer's Date header).
    * `refresh_after_401` refreshes with the refresh token (Arcane rotates it: the new one
      is kept), or logs in again when the refresh is refused. Concurrent callers share one
      refresh: under an asyncio.Lock, a caller whose token is no longer the current one
      (the generation moved on) just retries with the current token.
    * Arcane rate-limits login and refresh per path (5 per minute, then 429 with
      Retry-After: 60). After a 429 that path is not tried again before the time Arcane
      gave: calls fail at once with AuthFailed saying when to retry, so the server never
      locks itself out by logging in again and again.
    """

    def __init__(self, username: str, password: str, *, protocol: SessionProtocol | None = None, with_api_key: bool = False,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 margin: float = REFRESH_MARGIN):
        if not username or password is None:
            raise ConfigError("ARCANE_USERNAME and ARCANE_PASSWORD go together: set both, or neither and use ARCANE_API_KEY",
                              setting="ARCANE_PASSWORD" if username else "ARCANE_USERNAME", code="incomplete_credentials")
        # the protocol comes from the catalog (protocol_for); the client sets it when the
        # dispatcher is built, before anything is sent
        self.protocol = protocol
        self.username = username
        self._password = _Secret(password)
        self._with_api_key = with_api_key  # only changes the advice in messages
        self._clock, self._wall, self._margin = clock, wall, margin
        self._http: httpx.AsyncClient | None = None
        self._token: _Secret | None = None
        self._refresh_token: _Secret | None = None
        self._refresh_at: float | None = None  # clock() value from which to refresh proactively
        self._lock = asyncio.Lock()
        self._blocked: dict[str, tuple[float, str]] = {}  # path -> (clock() before which a 429 forbids it, its text)
        self.generation = 0  # +1 per access token obtained (login or refresh)

    def __repr__(self) -> str:
        state = "active" if self._token is not None else "none"
        return f"SessionCredentials(username={self.username!r}, password={HIDDEN}, session={state}, generation={self.generation})"

    def secrets(self) -> list[str]:
        return [s.value for s in (self._password, self._token, self._refresh_token) if s is not None and s.value]

    def _scrub(self, text: str) -> str:
        for s in self.secrets():
            if len(s) >= 4:
                text = text.replace(s, HIDDEN)
        return text

    # ------------------------------------------------------------ the interface

    async def start(self, http: httpx.AsyncClient) -> None:
        """Log in now; a refusal is a ConfigError. Unreachable Arcane: log in lazily later."""
        if self.protocol is None:
            raise RuntimeError("SessionCredentials needs the catalog's session protocol (auth.protocol_for) before start")
        self._http = http
        try:
            async with self._lock:
                await self._login()
        except LoginRefused as r:
            raise ConfigError(self._refusal_text(r), setting=LOGIN_SETTING.get(r.kind, "ARCANE_PASSWORD"),
                              code=f"login_{r.kind}") from None
        except LoginUnavailable as t:
            log.warning("Arcane answered HTTP %d to the login at startup (%s); logging in on the first call instead%s",
                        t.status, self._scrub(t.detail),
                        f", not before {wait_text(t.retry_after, self._wall)}" if t.retry_after else "")
        except (ArcaneTimeout, ArcaneUnreachable) as exc:
            log.warning("Arcane could not be reached at startup (%s); logging in on the first call instead", type(exc).__name__)

    async def headers(self, security: str) -> dict[str, str]:
        if security == "public":
            return {}
        if security == "apikey":
            raise ApiKeyRequired(
                "this action needs an API key (ARCANE_API_KEY): Arcane does not accept a user session for it",
                "Create an API key in Arcane, set ARCANE_API_KEY and restart the server.")
        return {"Authorization": "Bearer " + await self._current_token()}

    async def refresh_after_401(self, used: dict[str, str]) -> bool:
        used_token = _bearer_of(used)
        if used_token is None:
            return False
        async with self._lock:
            if self._token is not None and self._token.value != used_token:
                return True  # another caller already renewed it: retry with the current token
            try:
                await self._call_time(self._renew(after_401=True))
            except AuthFailed as exc:
                # the token was refused and so is the login: forget the session, so the next
                # call tries one login before sending anything (one request, not three); a
                # refresh token that only met a 429 or a 5xx is kept for that next call
                self._token, self._refresh_at = None, None
                if not (exc.status == 429 or (exc.status or 0) >= 500):
                    self._refresh_token = None
                raise
            return True

    async def aclose(self) -> None:
        """Log out (revokes this session's refresh token in Arcane); errors are ignored."""
        if self._http is None or self._token is None:
            return
        token, self._token, self._refresh_token, self._refresh_at = self._token, None, None, None
        try:
            await self._post(self.protocol.logout_path, headers={"Authorization": "Bearer " + token.value}, timeout=5.0)
            log.debug("session logged out")
        except (ArcaneTimeout, ArcaneUnreachable):
            pass

    # ------------------------------------------------------------ internals


    async def _current_token(self) -> str:
        if self._http is None:
            raise RuntimeError("SessionCredentials.start(http) must be called before use")
        if self._token is not None and not self._due():
            return self._token.value
        async with self._lock:
            if self._token is None:
                if self._refresh_token is not None:
                    log.debug("no access token (the last renewal failed): refreshing")
                    await self._call_time(self._renew(after_401=False))
                else:
                    log.debug("no session yet (Arcane was unreachable at startup): logging in")
                    await self._call_time(self._login())
            elif self._due():
                log.debug("access token expires within %.0fs: refreshing before the call", self._margin)
                try:
                    await self._renew(after_401=False)
                except (LoginRefused, LoginUnavailable, ArcaneTimeout, ArcaneUnreachable) as exc:
                    # opportunistic: the token still works for a while, so use it and try again
                    # a little later (after a 429, not before Arcane allows); a 401 on it goes
                    # through refresh_after_401 as usual
                    log.debug("proactive refresh failed (%s); keeping the current token", type(exc).__name__)
                    wait = getattr(exc, "retry_after", None) or 0.0
                    self._refresh_at = self._clock() + max(RETRY_PROACTIVE_AFTER, wait)
            assert self._token is not None
            return self._token.value

    def _due(self) -> bool:
        return self._refresh_at is not None and self._clock() >= self._refresh_at

    async def _call_time(self, coro) -> None:
        try:
            await coro
        except LoginRefused as r:
            raise self._call_time_error(r) from None
        except LoginUnavailable as t:
            if t.retry_after is not None:
                when = wait_text(t.retry_after, self._wall)
                raise AuthFailed(f"Arcane is rate-limiting this server's session login/refresh (HTTP {t.status}: "
                                 f"{self._scrub(t.detail)}); none is sent for {when}, and the action was not sent",
                                 f"Retry in {when}; or set ARCANE_API_KEY, which needs no login.", status=t.status) from None
            raise AuthFailed(f"Arcane answered HTTP {t.status} to the session login/refresh: {self._scrub(t.detail)}",
                             "Retry in a moment.", status=t.status) from None

    async def _post(self, path: str, **kwargs) -> httpx.Response:
        """POST to a login/refresh/logout path on the executor's client, unless a 429 forbids
        that path for now; a 429 answer blocks the path for the time Arcane gives
        (Retry-After, else a minute). A transport failure is ArcaneTimeout or
        ArcaneUnreachable (transport.py), like any other request."""
        assert self._http is not None
        until, detail = self._blocked.get(path, (None, ""))
        now = self._clock()
        if until is not None and now < until:
            log.debug("%s is rate-limited for %.0fs more: not sent", path, until - now)
            raise LoginUnavailable(429, detail, until - now)
        with mapped(self._http):
            resp = await self._http.post(path, **kwargs)
        if resp.status_code == 429:
            wait = retry_after(resp, self._wall)
            wait = self.protocol.names.rate_limit_seconds if wait is None else wait
            self._blocked[path] = (self._clock() + wait, _detail(resp, self.protocol))
            raise LoginUnavailable(429, _detail(resp, self.protocol), wait)
        self._blocked.pop(path, None)
        return resp

    async def _renew(self, *, after_401: bool) -> None:
        """Refresh with the refresh token; if Arcane refuses it, log in again."""
        assert self._http is not None
        p = self.protocol
        if self._refresh_token is not None:
            resp = await self._post(p.refresh_path, json={p.names.refresh_request: self._refresh_token.value})
            if resp.status_code == 200 and self._take(resp, refresh=True):
                log.debug("session refreshed (generation %d)%s", self.generation, " after a 401" if after_401 else "")
                return
            if resp.status_code >= 500:
                raise LoginUnavailable(resp.status_code, _detail(resp, p))
            log.debug("refresh refused (HTTP %d); logging in again", resp.status_code)
            self._refresh_token = None  # used up or revoked either way
        await self._login(again=True)

    async def _login(self, again: bool = False) -> None:
        assert self._http is not None
        p = self.protocol
        resp = await self._post(p.login_path, json={p.names.username: self.username, p.names.password: self._password.value})
        if resp.status_code >= 500:
            raise LoginUnavailable(resp.status_code, _detail(resp, p))
        if resp.status_code == 404:
            raise LoginRefused("not_found", 404, _detail(resp, p))
        if 300 <= resp.status_code < 400:
            raise LoginRefused("redirect", resp.status_code, resp.headers.get("location") or "no Location")
        if resp.status_code != 200:
            raise LoginRefused("credentials", resp.status_code, _detail(resp, p))
        data = _data(_json(resp), p)
        if data.get(p.names.status) == p.names.mfa_required:
            raise LoginRefused("mfa", 200, p.names.mfa_required)
        if not self._take(resp, refresh=False):
            raise LoginRefused("protocol", 200, "the login answer holds no access token")
        log.debug("%s to Arcane as %r (generation %d)", "logged in again" if again else "logged in", self.username, self.generation)

    def _take(self, resp: httpx.Response, *, refresh: bool) -> bool:
        """Keep the tokens of a login/refresh answer; False if it holds no access token."""
        p = self.protocol
        data = _data(_json(resp), p)
        token = data.get(p.names.token)
        if not isinstance(token, str) or not token:
            return False
        self._token = _Secret(token)
        new_refresh = data.get(p.names.refresh_token)
        if isinstance(new_refresh, str) and new_refresh:
            self._refresh_token = _Secret(new_refresh)  # rotated: the old one is spent
        elif not refresh:
            self._refresh_token = None
        self.generation += 1
        expires = _parse_time(data.get(p.names.expires_at))
        self._refresh_at = None
        if expires is not None:
            lifetime = expires.timestamp() - _server_now(resp, self._wall)
            if lifetime > 0:
                self._refresh_at = self._clock() + lifetime - min(self._margin, lifetime / 2)
        return True

    def _refusal_text(self, r: LoginRefused) -> str:
        """One line naming the variables, for startup (ConfigError) and calls (AuthFailed)."""
        user = f"ARCANE_USERNAME {self.username!r}"
        if r.kind == "mfa":
            if self._with_api_key:
                return (f"{user} needs a second factor (passkey MFA); a headless server cannot answer it: "
                        "unset ARCANE_USERNAME/ARCANE_PASSWORD and use ARCANE_API_KEY alone (Bearer-only actions such as "
                        "passkeys and personal API keys are then unavailable), or use a user without MFA")
            return (f"{user} needs a second factor (passkey MFA); a headless server cannot answer it: "
                    "create an API key in Arcane and set ARCANE_API_KEY instead")
        if r.kind == "not_found":
            return (f"Arcane has no login at {self.protocol.login_path} under ARCANE_URL (HTTP 404: {self._scrub(r.detail)}): "
                    "check that ARCANE_URL is Arcane's base URL")
        if r.kind == "redirect":
            return (f"the login at ARCANE_URL is redirected (HTTP {r.status} to {r.detail}); redirects are not followed "
                    "(they must not carry credentials elsewhere): set ARCANE_URL to the final URL, e.g. https://…")
        if r.kind == "protocol":
            return f"the login of {user} answered no access token: check that ARCANE_URL points at Arcane"
        return (f"Arcane refused the login of {user} with ARCANE_PASSWORD (HTTP {r.status}: {self._scrub(r.detail)}): "
                "check ARCANE_USERNAME/ARCANE_PASSWORD, or use ARCANE_API_KEY")

    def _call_time_error(self, r: LoginRefused) -> AuthFailed:
        return AuthFailed(self._refusal_text(r),
                          "Fix the credentials (ARCANE_USERNAME/ARCANE_PASSWORD, or ARCANE_API_KEY) and restart the server.",
                          status=r.status if r.status != 200 else None)


class CombinedCredentials(Credentials):
    """Key and session: the key for `either`/`apikey` operations, the session for the
    Bearer-only ones. The session logs in at start too, so a wrong password shows at once."""

    def __init__(self, api_key: str, username: str, password: str, *, header: str | None = None, **session_options: Any):
        self.key = ApiKeyCredentials(api_key, header=header)
        self.session = SessionCredentials(username, password, with_api_key=True, **session_options)

    @property
    def key_header(self) -> str | None:
        return self.key.key_header

    @key_header.setter
    def key_header(self, value: str) -> None:
        self.key.key_header = value

    @property
    def protocol(self) -> SessionProtocol | None:
        return self.session.protocol

    @protocol.setter
    def protocol(self, value: SessionProtocol) -> None:
        self.session.protocol = value

    def __repr__(self) -> str:
        return f"CombinedCredentials(api_key={HIDDEN}, session={self.session!r})"

    def secrets(self) -> list[str]:
        return self.key.secrets() + self.session.secrets()

    async def start(self, http: httpx.AsyncClient) -> None:
        await self.session.start(http)

    async def headers(self, security: str) -> dict[str, str]:
        if security == "bearer":
            return await self.session.headers("bearer")
        return await self.key.headers(security)

    async def refresh_after_401(self, used: dict[str, str]) -> bool:
        if _has_key(used, self.key_header):
            return False  # the key itself was refused: a session would hide a real misconfiguration
        return await self.session.refresh_after_401(used)

    async def aclose(self) -> None:
        await self.session.aclose()


def make_credentials(settings, protocol: SessionProtocol | None = None) -> Credentials | None:
    """The credential the settings describe; None when none is configured. A session
    needs the catalog's `protocol` before it starts (it may be set later, see ArcaneClient.use)."""
    key = settings.api_key or None
    has_login = bool(settings.username) or settings.password is not None
    if has_login and not (settings.username and settings.password is not None):
        raise ConfigError("ARCANE_USERNAME and ARCANE_PASSWORD go together: set both, or neither and use ARCANE_API_KEY",
                          setting="ARCANE_PASSWORD" if settings.username else "ARCANE_USERNAME", code="incomplete_credentials")
    if key and has_login:
        return CombinedCredentials(key, settings.username, settings.password, protocol=protocol)
    if key:
        return ApiKeyCredentials(key)
    if has_login:
        return SessionCredentials(settings.username, settings.password, protocol=protocol)
    return None


# ---------------------------------------------------------------- the executor's helper


async def send_with_auth(http: httpx.AsyncClient, creds: Credentials | None, security: str,
                         build: Callable[[dict[str, str]], httpx.Request]) -> httpx.Response:
    """Send `build(auth_headers)` streaming; after a 401 that `creds.refresh_after_401`
    says a retry can cure, close that answer and send a freshly built request once more.

    The caller reads and closes the returned response (a final 401 is returned as it is).
    httpx exceptions propagate; credential problems raise SessionRequired, ApiKeyRequired
    or AuthFailed (any answer already open is closed first).
    """
    used = await creds.headers(security) if creds is not None else {}
    response = await http.send(build(dict(used)), stream=True)
    if response.status_code != 401 or creds is None or not used:
        return response
    try:
        retry = await creds.refresh_after_401(used)
        if not retry:
            return response
        await response.aclose()
        fresh = await creds.headers(security)
    except BaseException:
        await response.aclose()
        raise
    return await http.send(build(dict(fresh)), stream=True)
