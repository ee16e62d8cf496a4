"""What a credential may do decides what it sees (issue 13): the actions whose Arcane
permission the credential does not hold are withdrawn, with the reason, exactly as
read-only mode withdraws them (catalog.withdrawn, shown in arcane://tools/{id}).

    grants_of(catalog, me, my_keys, api_key)  what the credential holds (None: unknown)
    visibility(catalog, me, my_keys, api_key) action id -> why it is withdrawn
    read(client, catalog, known)              the who-am-I read and the my-keys read, as answered
                                              (or as already read: `known`)
    Access                                    one credential's view over the shared
                                              catalog, re-read after a 403

(The who-am-I and my-keys reads are permissions.yaml `identity`: GET me and GET my API keys.)
Which permission each action needs, its scope, which reads tell the credential's grants and
the members of their answers are catalog/permissions.yaml's. The who-am-I read reports the owner's
role permissions; a scoped API key holds only its own grants, listed by the my-keys read
for the key whose prefix matches. Where Arcane reports nothing (no who-am-I answer, no
permission map in it), nothing is withdrawn: Arcane still refuses what it refuses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..call.request import prepare
from ..call.response import Reading, shape, unwrap
from ..errors import CallError
from .catalog import Action, Catalog, withdraw
from .lazy_dataclass import dataclass
from .model import Identity, PermissionEntry, Permissions

if TYPE_CHECKING:
    from ..call.request import ArcaneClient

log = logging.getLogger("arcane_mcp.access")

KEY, USER = "key", "user"
IDENTITY_CAP = 4 * 1024 * 1024  # an identity answer larger than this reports nothing


@dataclass(frozen=True)
class Grants:
    """A PermissionSet as Arcane builds it: global permissions, per-environment ones,
    whether the caller is sudo (holds everything) or a global admin, and whose grants
    they are (`key`: the key's own; `user`: the user's roles)."""

    global_perms: frozenset[str]
    env_perms: Mapping[str, frozenset[str]]
    sudo: bool
    global_admin: bool
    source: str

    def holds(self, perm: str, scope: str | None, env_scoped: bool) -> bool:
        """Whether some call of an action needing `perm` can pass: a global grant, or for an
        env-scoped permission on an /environments/{id}/… route a grant in any environment
        (pkg/authz/permission_set.go:20-39: a per-environment grant never satisfies a
        global permission)."""
        if self.sudo or perm in self.global_perms:
            return True
        return scope == "env" and env_scoped and any(perm in p for p in self.env_perms.values())

    def environments(self, perm: str) -> list[str]:
        return sorted(e for e, p in self.env_perms.items() if perm in p)


def _value(payload: Any, catalog: Catalog) -> Any:
    """Arcane's value inside its envelope (a list comes back under the items member)."""
    if payload is None:
        return None
    shaped = unwrap(payload, 200, catalog.conventions)
    if shaped.kind == "list":
        return shaped.structured.get(catalog.conventions.envelope.items)
    return shaped.structured


def _perms(value: Any) -> frozenset[str]:
    return frozenset(str(p) for p in value) if isinstance(value, list) else frozenset()


def grants_of(catalog: Catalog, me: Any, my_keys: Any = None, api_key: str | None = None) -> Grants | None:
    """What the credential holds: the key's own grants when the my-keys read lists exactly
    one key of this key's prefix and it is of the kind holding its own grants, else the
    user's permissionsByEnv from the who-am-I read; None when Arcane reported no permission map."""
    perms: Permissions | None = catalog.inventory.permissions
    if perms is None or perms.identity is None:
        return None
    ident: Identity = perms.identity
    user = _value(me, catalog)
    by_env = user.get(ident.permissions) if isinstance(user, dict) else None
    if not isinstance(by_env, dict):
        return None  # Arcane reports nothing: nothing is withdrawn
    everything = set(perms.scopes)
    own = _own_key(ident, _value(my_keys, catalog), api_key)
    if own is not None:
        glob: set[str] = set()
        per_env: dict[str, set[str]] = {}
        for g in own.get(ident.grants) or ():
            if not isinstance(g, dict) or not g.get(ident.grant_permission):
                continue
            env = g.get(ident.grant_environment)
            (per_env.setdefault(str(env), set()) if env else glob).add(str(g[ident.grant_permission]))
        sudo = ident.everything in glob
        return Grants(frozenset(glob), {e: frozenset(p) for e, p in per_env.items()}, sudo,
                      sudo or everything <= glob, KEY)
    glob = _perms(by_env.get(ident.global_key))
    per_env = {str(e): _perms(p) for e, p in by_env.items() if e != ident.global_key}
    sudo = ident.everything in glob
    admin = user.get(ident.global_admin)
    return Grants(glob, per_env, sudo, bool(admin) if isinstance(admin, bool) else (sudo or everything <= glob), USER)


def _own_key(ident: Identity, keys: Any, api_key: str | None) -> dict | None:
    """The one listed key of this key's prefix, when it holds its own grants; None when
    none matches (a static key), two do (prefixes may collide) or it is a personal key."""
    if not api_key or not isinstance(keys, list):
        return None
    prefix = api_key[:ident.key_prefix_length]
    hits = [k for k in keys if isinstance(k, dict) and k.get(ident.key_prefix) == prefix]
    if len(hits) != 1 or hits[0].get(ident.key_kind) != ident.own_grants_kind:
        return None
    return hits[0]


def entry_for(catalog: Catalog, action: Action) -> PermissionEntry | None:
    """The permission entry of an action: by its operationId, or (an extra route) by its ID."""
    perms = catalog.inventory.permissions
    if perms is None:
        return None
    return perms.operations.get(action.operation_id) if action.operation_id else perms.routes.get(action.id)


def reason(catalog: Catalog, action: Action, grants: Grants) -> str | None:
    """Why the credential cannot run this action at all, or None when some call can pass."""
    entry = entry_for(catalog, action)
    if entry is None or grants.sudo:
        return None
    perms = catalog.inventory.permissions
    text = perms.reasons
    source = text.get(grants.source, grants.source)
    if entry.check == "sudo":
        return text["sudo"]
    if (entry.check == "global_admin" or entry.global_admin) and not grants.global_admin:
        return text["global_admin"].format(source=source, permission="", permissions="")
    if entry.permission and not grants.holds(entry.permission, perms.scopes.get(entry.permission), action.env_scoped):
        return text["permission"].format(source=source, permission=entry.permission, permissions=entry.permission)
    if entry.by_param:
        wanted = entry.permissions()
        if not any(grants.holds(p, perms.scopes.get(p), action.env_scoped) for p in wanted):
            return text["any_of"].format(source=source, permission=wanted[0], permissions=", ".join(wanted))
    return None


def visibility(catalog: Catalog, me: Any, my_keys: Any = None, api_key: str | None = None) -> dict[str, str]:
    """Action id -> why this credential cannot run it, for every served action of
    `catalog`, from its who-am-I answer (and the my-keys read with the key, for a scoped
    key's own grants). Empty when Arcane reported no permissions."""
    grants = grants_of(catalog, me, my_keys, api_key)
    if grants is None:
        return {}
    out = {}
    for aid, action in catalog.actions.items():
        why = reason(catalog, action, grants)
        if why:
            out[aid] = why
    return out


def answer_reading(catalog: Catalog) -> Reading:
    """How an identity read's answer is read (its size cap, Arcane's envelope)."""
    return Reading(IDENTITY_CAP, catalog.conventions)


async def read(client: ArcaneClient, catalog: Catalog, known: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
    """(the who-am-I answer, the my-keys answer) through the client's credential;
    None for a read that failed (refused, unreachable, not JSON): it reports nothing.
    `known`: answers already read with this credential, by action ID (HTTP mode's key
    check is the who-am-I read itself), used instead of asking again."""
    perms = catalog.inventory.permissions
    if perms is None or perms.identity is None:
        return None, None
    known = known or {}

    async def one(aid: str) -> Any:
        if aid in known:
            return known[aid]
        action = catalog.all_actions.get(aid)
        if action is None:
            return None
        try:
            resp = await client.send(action, prepare(action, {}))
            shaped = await shape(resp, action, answer_reading(catalog))
        except CallError as exc:
            log.info("could not read %s (%s): nothing is withdrawn for it", aid, type(exc).__name__)
            return None
        return shaped.structured

    me, keys = await asyncio.gather(one(perms.identity.me), one(perms.identity.my_keys))
    if isinstance(keys, dict):
        keys = keys.get(catalog.conventions.envelope.items)
    return me, keys


class Access:
    """One credential's view of the shared catalog: `catalog` is the shared one with the
    actions it cannot perform withdrawn. `refresh` reads them again (after Arcane
    answered the refresh status, 403) and says whether the view changed."""

    def __init__(self, shared: Catalog, client: ArcaneClient | None, api_key: str | None):
        self.shared = shared
        self.client = client
        self.api_key = api_key
        self.reasons: dict[str, str] = {}
        self.catalog = shared
        self._lock = asyncio.Lock()

    @property
    def refresh_status(self) -> int | None:
        perms = self.shared.inventory.permissions
        return perms.identity.refresh_status if perms is not None and perms.identity is not None else None

    def apply(self, me: Any, my_keys: Any = None) -> bool:
        """Withdraw what the answers say this credential cannot do; True when that changed."""
        reasons = visibility(self.shared, me, my_keys, self.api_key)
        changed = reasons != self.reasons
        self.reasons = reasons
        self.catalog = withdraw(self.shared, reasons) if reasons else self.shared
        return changed

    async def refresh(self, known: Mapping[str, Any] | None = None) -> bool:
        """Read what the credential holds now and apply it; True when the view changed.
        `known`: answers just read with this credential, by action ID (see `read`)."""
        if self.client is None:
            return False
        async with self._lock:
            me, keys = await read(self.client, self.shared, known)
            return self.apply(me, keys)


__all__ = ["Access", "Grants", "answer_reading", "entry_for", "grants_of", "read", "reason", "visibility"]
