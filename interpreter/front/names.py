"""Tool names, for every surface, from one place.

    dynamic     arcane_find_action, arcane_execute_action (an action is named by its ID)
    meta        arcane_<domain>            (an action is `arcane_<domain> (action `<name>`)`)
    individual  arcane_<domain>_<action>

Surfaces list tools with these names, the reference documents them, validate checks them
(length, characters, clashes, the reserved names) and the Namer writes an action the way
the calling surface accepts it in hints, next steps and errors.
"""

from __future__ import annotations

from ..build.lazy_dataclass import dataclass

TOOL_PREFIX = "arcane_"
FIND_TOOL = f"{TOOL_PREFIX}find_action"
EXECUTE_TOOL = f"{TOOL_PREFIX}execute_action"
RESERVED_TOOLS = (FIND_TOOL, EXECUTE_TOOL)


def tool_name_meta(domain: str) -> str:
    """The meta surface's tool for a domain: `arcane_<domain>`."""
    return f"{TOOL_PREFIX}{domain}"


def tool_name_individual(action_id: str) -> str:
    """The individual surface's tool for an action: `arcane_<domain>_<action>`."""
    domain, name = action_id.split(".", 1)
    return f"{TOOL_PREFIX}{domain}_{name}"


@dataclass(frozen=True)
class Namer:
    """Writes an action ID the way the calling surface accepts it."""

    surface: str

    def __call__(self, action_id: str) -> str:
        domain, name = action_id.split(".", 1)
        if self.surface == "meta":
            return f"{tool_name_meta(domain)} (action `{name}`)"
        if self.surface == "individual":
            return tool_name_individual(action_id)
        return action_id
