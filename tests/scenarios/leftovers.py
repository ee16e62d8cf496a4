"""What the scenarios left behind: after a run, every domain a scenario creates in is
listed and anything that carries the scenarios' name prefix is named.

Every write scenario names what it creates `arcane-mcp-e2e-<random>-…` (Target.prefix)
and removes it in `finally`; this check proves it, on the simulator at the end of
tests/test_scenarios.py's module and on a real Arcane at the end of `make e2e`.

Not listed, and why: activities and events (Arcane's history of what was done, not
resources a scenario creates); volume backups (listed per volume: a backup left behind
belongs to a volume of the prefix, which volume.list names); system backups (they carry
no name: the one scenario that makes one deletes it by its ID)."""

from __future__ import annotations

from typing import Any

from tests.scenarios.harness import SWARM, Target, dispatch_driver

PREFIX = "arcane-mcp-e2e-"  # Target.prefix()'s fixed part
KEY_PREFIX = PREFIX.upper().replace("-", "_")  # a variable's key made from a prefix

# (action, arguments): every list of a domain a scenario creates in; search narrows
# where the action has it, everything is read (limit -1) and checked here
LISTS: tuple[tuple[str, dict], ...] = (
    ("container.list", {"search": PREFIX, "limit": -1, "includeInternal": True}),
    ("image.list", {"limit": -1}),  # a tag of the prefix may be any of an image's tags: all are read
    ("volume.list", {"search": PREFIX, "limit": -1, "includeInternal": True}),
    ("network.list", {"search": PREFIX, "limit": -1}),
    ("project.list", {"search": PREFIX, "limit": -1}),
    ("webhook.list", {}),
    ("gitops_sync.list", {"search": PREFIX, "limit": -1}),
    ("notification.list_settings", {}),
    ("registry.list", {"search": PREFIX, "limit": -1}),
    ("variable.list", {}),
    ("template.list", {"search": PREFIX, "limit": -1}),
    ("user.list", {"search": PREFIX, "limit": -1}),
    ("api_key.list", {"search": PREFIX, "limit": -1}),
    ("git_repository.list", {"search": PREFIX, "limit": -1}),
    ("role.list", {"search": PREFIX, "limit": -1}),
    ("federated_credential.list", {"search": PREFIX, "limit": -1}),
)
SWARM_LISTS: tuple[tuple[str, dict], ...] = (
    ("swarm_stack.list", {"search": PREFIX, "limit": -1}),
    ("swarm_service.list", {"search": PREFIX, "limit": -1}),
    ("swarm_config.list", {}),
    ("swarm_secret.list", {}),
)


def _rows(structured: Any) -> list:
    if isinstance(structured, list):
        return structured
    data = structured or {}
    for member in ("items", "data"):
        if isinstance(data.get(member), list):
            return data[member]
    return []


def _marked(value: Any) -> str | None:
    """The first text in the value that carries the prefix (a name, a tag, a URL, a key)."""
    if isinstance(value, str):
        return value if PREFIX in value or KEY_PREFIX in value else None
    members = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for member in members:
        found = _marked(member)
        if found:
            return found
    return None


def lists_for(target: Target) -> tuple[tuple[str, dict], ...]:
    """The lists to read on this target (Swarm's only where the environment is a manager)."""
    return LISTS + (() if target.missing(frozenset({SWARM})) else SWARM_LISTS)


async def leftovers(target: Target) -> list[str]:
    """`action: what` for everything the lists show with the prefix; a list that cannot
    be read is reported too (nothing could be checked there)."""
    found: list[str] = []
    async with dispatch_driver(target) as driver:
        for action, params in lists_for(target):
            out = await driver.call(action, params)
            if out.is_error:
                found.append(f"{action}: not checked: {out.first_line()}")
                continue
            found += [f"{action}: {mark}" for mark in map(_marked, _rows(out.structured)) if mark]
    return found
