"""The simulator's working state: the items of every collection, globally and per
environment, plus login sessions, API keys, rate-limit buckets and the deterministic
clock and ID counter.

One RLock guards everything: request handlers run on the server's event-loop thread,
while tests read the state, reset it or expire sessions from their own thread.
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .model import ApiKey, Behaviour, CollectionDef, StateData
from .template import FILTERS, get_path, parse_path


@dataclass(frozen=True)
class Session:
    username: str
    token: str
    refresh_token: str
    expires_at: str


@dataclass(frozen=True)
class MfaChallenge:
    """A correct password for a user with a second factor: no tokens, a pending challenge."""

    username: str
    method: str
    transaction_id: str
    challenge: str
    expires_at: str


def rfc3339nano(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC: the fraction without trailing zeros, none when zero."""
    seconds, frac = divmod(int(ns), 1_000_000_000)
    text = _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


class Ambiguous(Exception):
    """A key that is a prefix of several items' IDs (Docker refuses it)."""


def _matches_key(value: Any, key: str, trim: str) -> bool:
    if isinstance(value, list):
        return any(_matches_key(v, key, trim) for v in value)
    if value is None:
        return False
    text = str(value)
    return text == key or (trim and text.strip(trim) == key.strip(trim))


class Store:
    def __init__(self, behaviour: Behaviour, initial: StateData):
        self.behaviour = behaviour
        self.initial = initial
        self.lock = threading.RLock()
        self._listeners: list[Callable[[str, str | None, dict], None]] = []
        self.reset()

    # ------------------------------------------------------------ lifecycle

    def reset(self) -> None:
        """Back to the loaded state: items, sessions, clock and ID counter."""
        with self.lock:
            self.global_items, self.env_items = self.initial.copy_items()
            self.sessions: dict[str, Session] = {}  # access token -> session
            self.refresh_tokens: dict[str, str] = {}  # refresh token -> username
            self.users: list[dict] = [dict(u) for u in self.initial.users]  # who may log in
            self.api_keys: dict[str, ApiKey] = {k.key: k for k in self.initial.api_keys}
            self.revoked: set[str] = set()  # access tokens of logged-out sessions
            self.buckets: dict[tuple[str, str], tuple[float, float]] = {}  # (path, ip) -> (tokens, at)
            self.seq = 0
            self.tick = 0
            self.offset = 0
            self.last_ns = 0  # the newest stamp() handed out
            self.blobs: dict[tuple[str, str], bytes] = {}  # (environment, key) -> bytes (uploads, files)
            self.uploads: dict[tuple[str, str], dict] = {}  # (environment, upload ID) -> an upload session
            self.replays: set[str] = set()  # federated subject tokens already exchanged
        self.notify("reset", None)

    def snapshot(self) -> dict:
        """The state as plain data, shaped like a state file (private members kept)."""
        with self.lock:
            return {
                "global": copy.deepcopy(self.global_items),
                "environments": copy.deepcopy(self.env_items),
                "sessions": len(self.sessions),
            }

    # ------------------------------------------------------------ generated values

    def next_seq(self) -> int:
        with self.lock:
            self.seq += 1
            return self.seq

    def now(self) -> int:
        """A deterministic clock: the behaviour's start time plus one second per request
        (plus whatever `advance_clock` added)."""
        with self.lock:
            return int(self.behaviour.clock.get("start", 1767225600)) + self.tick + self.offset

    def stamp(self) -> str:
        """A frame's timestamp: the simulated clock, with a fraction that grows by a
        millisecond per call, so stamps are strictly increasing and repeatable."""
        with self.lock:
            self.last_ns = max(self.now() * 1_000_000_000, self.last_ns + 1_000_000)
            return rfc3339nano(self.last_ns)

    # ------------------------------------------------------------ change notices

    def subscribe(self, listener: Callable[[str, str | None, dict], None]) -> Callable[[], None]:
        """Call `listener(kind, environment, payload)` on every change notice (from any
        thread; a listener on an event loop must hop onto it itself); returns the
        unsubscribe function."""
        with self.lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self.lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)
        return unsubscribe

    def notify(self, kind: str, environment: str | None, **payload: Any) -> None:
        """A change notice: `state` (items changed), `activity` / `message` (an activity
        event), `log` (a container wrote a line), `server_log` (Arcane logged), `reset`."""
        with self.lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(kind, environment, payload)

    def advance(self) -> None:
        with self.lock:
            self.tick += 1

    def advance_clock(self, seconds: float) -> int:
        """Move the simulated clock forward (rate-limit windows, key expiry); the new now."""
        with self.lock:
            self.offset += int(seconds)
            return self.now()

    # ------------------------------------------------------------ rate limits

    def take_token(self, path: str, ip: str, per_minute: int, burst: int) -> bool:
        """A token bucket per (path, client IP), like golang.org/x/time/rate: `burst`
        tokens, one more every 60/per_minute seconds. Its clock moves with `advance_clock`
        only, not a second per request: a test's burst of requests arrives within
        Arcane's window, as it would in real time (at 60 a minute a tick would refill
        every request)."""
        with self.lock:
            now = float(self.offset)
            tokens, at = self.buckets.get((path, ip), (float(burst), now))
            tokens = min(float(burst), tokens + (now - at) * per_minute / 60.0)
            if tokens < 1.0:
                self.buckets[(path, ip)] = (tokens, now)
                return False
            self.buckets[(path, ip)] = (tokens - 1.0, now)
            return True

    # ------------------------------------------------------------ API keys

    def api_key(self, key: str | None) -> ApiKey | None:
        with self.lock:
            return self.api_keys.get(key or "")

    def add_api_key(self, key: ApiKey) -> None:
        with self.lock:
            self.api_keys[key.key] = key

    def remove_api_key(self, key: str) -> bool:
        with self.lock:
            return self.api_keys.pop(key, None) is not None

    def revoke_record(self, record: str) -> int:
        """Stop accepting the keys issued for one api_keys item (its deletion)."""
        with self.lock:
            gone = [k for k, v in self.api_keys.items() if v.record == record]
            for k in gone:
                del self.api_keys[k]
            return len(gone)

    def regrant_record(self, record: str, grants: tuple) -> int:
        """Replace the grants of the keys issued for one api_keys item (its update)."""
        import dataclasses

        with self.lock:
            hit = [k for k, v in self.api_keys.items() if v.record == record]
            for k in hit:
                self.api_keys[k] = dataclasses.replace(self.api_keys[k], permissions=grants)
            return len(hit)

    def user(self, username: str) -> dict | None:
        with self.lock:
            return next((u for u in self.users if u.get("username") == username), None)

    def fresh_ids(self) -> dict:
        """New, deterministic identifiers (same sequence after every reset)."""
        n = self.next_seq()
        h = hashlib.sha256(f"arcane-sim:{n}".encode()).hexdigest()
        return {
            "seq": n,
            "hex64": h,
            "hex12": h[:12],
            "uuid": f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}",
            "token": f"arc_sim_{h[:32]}",
        }

    # ------------------------------------------------------------ collections

    def environment_ids(self) -> list[str]:
        env = self.behaviour.environments
        coll = self.behaviour.collections.get(env["collection"])
        ids = [str(env.get("local", "0"))]
        if coll is not None:
            for item in self.global_items.get(coll.name, []):
                key = str(item.get(coll.key))
                if key not in ids:
                    ids.append(key)
        return ids

    def environment(self, env_id: str) -> dict | None:
        coll = self.behaviour.collections.get(self.behaviour.environments["collection"])
        if coll is None:
            return None
        with self.lock:
            for item in self.global_items.get(coll.name, []):
                if str(item.get(coll.key)) == env_id:
                    return item
        return None

    def items(self, coll: CollectionDef, env: str | None) -> list[dict]:
        """The live list of a collection in its scope (created empty on first use)."""
        with self.lock:
            if coll.scope == "global":
                return self.global_items.setdefault(coll.name, [])
            return self.env_items.setdefault(str(env), {}).setdefault(coll.name, [])

    def find(self, coll: CollectionDef, env: str | None, key: str) -> dict | None:
        """The item a path key names: an exact match of a lookup member first (in the
        order of `lookup`: Docker tries the full ID, then the name), then a unique prefix
        of a `prefix` member; None if nothing matches; Ambiguous for a shared prefix."""
        with self.lock:
            items = self.items(coll, env)
            for field in coll.lookup:
                path = parse_path(field)
                for item in items:
                    if _matches_key(get_path(item, path), key, coll.trim):
                        return item
            if not key or not coll.prefix:
                return None
            wanted = key[len(coll.prefix_strip):] if coll.prefix_strip and key.startswith(coll.prefix_strip) else key
            hits = []
            for field in coll.prefix:
                path = parse_path(field)
                for item in items:
                    value = str(get_path(item, path) or "")
                    if coll.prefix_strip and value.startswith(coll.prefix_strip):
                        value = value[len(coll.prefix_strip):]
                    if value.startswith(wanted) and item not in hits:
                        hits.append(item)
            if len(hits) > 1:
                raise Ambiguous(key)
            return hits[0] if hits else None

    def insert(self, coll: CollectionDef, env: str | None, item: dict, *, upsert: bool = False) -> bool:
        """Add an item; with `upsert`, replace the one with the same key. False on a duplicate key."""
        with self.lock:
            items = self.items(coll, env)
            for i, existing in enumerate(items):
                if existing.get(coll.key) == item.get(coll.key):
                    if not upsert:
                        return False
                    items[i] = item
                    return True
            items.append(item)
            return True

    def remove(self, coll: CollectionDef, env: str | None, item: dict) -> None:
        with self.lock:
            items = self.items(coll, env)
            for i, existing in enumerate(items):
                if existing is item:
                    del items[i]
                    return

    def update_where(self, coll: CollectionDef, env: str | None, select: Callable[[dict], bool], change: Callable[[dict], None]) -> int:
        with self.lock:
            n = 0
            for item in self.items(coll, env):
                if select(item):
                    change(item)
                    n += 1
            return n

    # ------------------------------------------------------------ sessions

    def login(self, username: str, password: str) -> Session | MfaChallenge | None:
        """A session, a pending second factor (a user with `mfa`), or None (wrong credentials)."""
        with self.lock:
            user = next((u for u in self.users if u.get("username") == username and u.get("password") == password), None)
            if user is None:
                return None
            if user.get("mfa"):
                ids = self.fresh_ids()
                return MfaChallenge(username, str(user["mfa"]), ids["uuid"], ids["hex64"], FILTERS["iso"](self.now() + 300, ""))
            return self._issue(username)

    def set_users(self, users: list[dict]) -> None:
        """Replace who may log in (until the next reset); sessions already issued are kept."""
        with self.lock:
            self.users = [dict(u) for u in users]

    def add_user(self, user: dict) -> None:
        """A login user created through the API (replacing one of that name)."""
        with self.lock:
            self.users = [u for u in self.users if u.get("username") != user.get("username")] + [dict(user)]

    def change_user(self, username: str, *, new_username: str | None = None, password: str | None = None,
                    roles: list | None = None) -> bool:
        """A login user's name, password or roles change; sessions of a renamed user follow it."""
        with self.lock:
            user = self.user(username)
            if user is None:
                return False
            if password is not None:
                user["password"] = password
            if roles is not None:
                user["roles"] = list(roles)
            if new_username and new_username != username:
                user["username"] = new_username
                for token, s in list(self.sessions.items()):
                    if s.username == username:
                        self.sessions[token] = Session(new_username, s.token, s.refresh_token, s.expires_at)
                for rt, name in list(self.refresh_tokens.items()):
                    if name == username:
                        self.refresh_tokens[rt] = new_username
            return True

    def remove_user(self, username: str) -> None:
        """A login user removed: it can no longer log in and its sessions end."""
        with self.lock:
            self.users = [u for u in self.users if u.get("username") != username]
            self.end_sessions(username)

    def end_sessions(self, username: str, keep: str | None = None) -> int:
        """Revoke every session of a user except the access token `keep`."""
        with self.lock:
            gone = [t for t, s in self.sessions.items() if s.username == username and t != keep]
            for t in gone:
                s = self.sessions.pop(t)
                self.refresh_tokens.pop(s.refresh_token, None)
                self.revoked.add(t)
            for rt, name in list(self.refresh_tokens.items()):
                kept = self.sessions.get(keep or "")
                if name == username and not (kept and kept.refresh_token == rt):
                    del self.refresh_tokens[rt]
            return len(gone)

    def _issue(self, username: str) -> Session:
        with self.lock:
            ids = self.fresh_ids()
            token = "arc_sim_at_" + ids["hex64"][:40]
            refresh = "arc_sim_rt_" + ids["hex64"][24:64]
            expires = FILTERS["iso"](self.now() + int(self.behaviour.clock.get("session_seconds", 86400)), "")
            session = Session(username, token, refresh, expires)
            self.sessions[token] = session
            self.refresh_tokens[refresh] = username
            return session

    def refresh(self, refresh_token: str) -> Session | None:
        """Rotate: the old refresh token stops working, a new pair is issued."""
        with self.lock:
            username = self.refresh_tokens.pop(refresh_token, None)
            if username is None:
                return None
            return self._issue(username)

    def session(self, token: str | None) -> Session | None:
        if not token:
            return None
        with self.lock:
            return self.sessions.get(token)

    def is_revoked(self, token: str | None) -> bool:
        with self.lock:
            return bool(token) and token in self.revoked

    def logout(self, token: str | None) -> None:
        with self.lock:
            session = self.sessions.pop(token or "", None)
            if session is not None:
                self.refresh_tokens.pop(session.refresh_token, None)
                self.revoked.add(token)

    def expire_sessions(self, *, refresh: bool = False) -> int:
        """Every access token expires: the next call gets a 401. Refresh tokens stay valid
        unless `refresh` (then a refresh is refused too and only a new login helps)."""
        with self.lock:
            n = len(self.sessions)
            self.sessions.clear()
            if refresh:
                self.refresh_tokens.clear()
            return n
