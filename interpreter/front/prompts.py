"""MCP prompts and completions (docs/resources.md), from rules/resources.yaml.

A prompt gives the ordered steps for one target, naming actions the way the active surface
calls them, and embeds its guide (the text arcane://guides/<name> serves). Completions
(completion/complete) of prompt arguments and URI template variables run a declared list
action through the one dispatcher with the caller's credential (an ``environmentId``
already given scopes the list), filter the values by the typed prefix and keep them a few
seconds: this server belongs to one credential, so its cache does too.
"""

from __future__ import annotations

import re
import time
from typing import Any

import mcp.types as types
from mcp import MCPError

from ..build.resource_rules import GUIDE_URI, MIME_MARKDOWN, Prompt
from ..call.dispatch import Call
from ..text import escape
from .names import Namer

COMPLETION_SURFACE = "completion"
COMPLETE_TOOL = "completion/complete"
_REF = re.compile(r"\{([^{}]+)\}")
NOT_GIVEN = "(not given)"
INLINE_MAX = 200  # characters of a value written inside a step; a longer one follows the steps


class Prompts:
    """The prompts and completion sources one server serves."""

    def __init__(self, catalog, dispatcher, resources, clock=time.monotonic):
        self.catalog, self.dispatcher, self.resources, self.clock = catalog, dispatcher, resources, clock
        prompts, self.completions = catalog.resources.prompts, catalog.resources.completions
        self.prompts = {p.name: p for p in prompts}
        self.namer = Namer(dispatcher.settings.surface)
        self._cache: dict[tuple, tuple[float, list[str]]] = {}

    # ---------------------------------------------------------------- prompts

    def render(self, prompt: Prompt, args: dict[str, str]) -> str:
        """The steps, numbered: actions as this surface names them (in code spans),
        arguments as the values given (in code spans; the default environment when
        environmentId was omitted). Every argument given reaches the text: one no step
        names, or one of several lines or longer than INLINE_MAX (Compose text), follows
        the steps under its name as a code block (a step naming it says "below")."""
        values = dict(args)
        values.setdefault(self.catalog.env_arg, self.dispatcher.settings.environment_id)
        inline: set[str] = set()

        def fill(m: re.Match) -> str:
            ref = m.group(1)
            if "." in ref:
                # the meta surface's name is Markdown already: `arcane_x (action `y`)`
                head, sep, rest = self.namer(ref).partition(" ")
                return escape.code_span(head) + sep + rest
            value = values.get(ref)
            if value in (None, ""):
                return NOT_GIVEN
            text = str(value)
            if "\n" in text or len(text) > INLINE_MAX:
                return escape.code_span(ref) + " (below)"
            inline.add(ref)
            return escape.code_span(escape.clean(text))

        lines = [f"# {prompt.title}", ""]
        lines += [f"{i}. {_REF.sub(fill, step)}" for i, step in enumerate(prompt.steps, 1)]
        declared = [a.name for a in prompt.arguments]
        order = [n for n in declared if n in args] + sorted(n for n in args if n not in declared)
        for name in order:
            value = args[name]
            if name in inline or value in (None, ""):
                continue
            lines += ["", f"## {escape.code_span(escape.clean(name))}", "", escape.fence(str(value)).rstrip("\n")]
        return "\n".join(lines) + "\n"

    def too_long(self, values: dict[str, str], limit: int) -> list[str]:
        """The names of the values longer than `limit` characters (rules/server.yaml
        `max_length`): such a value is refused before anything reads it."""
        return [name for name, value in values.items() if len(value) > limit]

    def missing(self, prompt: Prompt, args: dict[str, str]) -> list[str]:
        return [a.name for a in prompt.arguments if a.required and args.get(a.name) in (None, "")]

    def guide_text(self, prompt: Prompt) -> tuple[str, str]:
        uri = GUIDE_URI.replace("{name}", prompt.guide)
        return uri, self.resources.guide_text(uri)

    # ---------------------------------------------------------------- completions

    async def complete(self, name: str, prefix: str, given: dict[str, str]) -> tuple[list[str], int]:
        """(values starting with ``prefix``, how many there are) for an argument or
        template variable called ``name``; nothing for a name without a source."""
        source = self.completions.source(name)
        if source is None or source.action not in self.catalog.actions:
            return [], 0
        action = self.catalog.actions[source.action]
        args: dict[str, Any] = {}
        props = action.input_schema.get("properties", {})
        if "limit" in props:
            args["limit"] = -1
        env = given.get(self.catalog.env_arg)
        if env and self.catalog.env_arg in props:
            args[self.catalog.env_arg] = env
        key = (source.action, tuple(sorted(args.items())))
        hit = self._cache.get(key)
        now = self.clock()
        if hit is None or now - hit[0] > self.completions.ttl_seconds:
            result = await self.dispatcher.dispatch(Call(source.action, args, surface=COMPLETION_SURFACE, tool=COMPLETE_TOOL,
                                                         audit_message="completion"))
            if result.is_error:
                return [], 0  # nothing cached: the next keystroke asks again
            import jmespath  # at a completion's first read, not at start

            found = jmespath.search(source.values, result.structured or {})
            values = []
            for v in found if isinstance(found, list) else []:
                if isinstance(v, (str, int)) and not isinstance(v, bool):
                    text = str(v)
                    if escape.clean(text) != text:
                        # Arcane's text with control or invisible characters: shown cleaned it
                        # would name nothing, shown raw it could hide text; it is left out
                        continue
                    if source.strip and text.startswith(source.strip):
                        text = text[len(source.strip):]
                    values.append(text)
            values = sorted(dict.fromkeys(values))
            self._cache[key] = hit = (now, values)
        matching = [v for v in hit[1] if v.startswith(prefix)]
        return matching[: self.completions.max_values], len(matching)


def mcp_handlers(prompts: Prompts) -> dict[str, Any]:
    """The ``on_*`` handlers of prompts/list, prompts/get and completion/complete."""
    listed = [types.Prompt(name=p.name, title=p.title, description=p.description,
                           arguments=[types.PromptArgument(name=a.name, description=a.description, required=a.required)
                                      for a in p.arguments]) for p in prompts.prompts.values()]

    async def on_list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=listed, ttl_ms=0, cache_scope="private")

    async def on_get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        prompt = prompts.prompts.get(params.name)
        if prompt is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}; known: {', '.join(prompts.prompts)}",
                           data={"prompt": params.name})
        args = {k: str(v) for k, v in (params.arguments or {}).items()}
        limit = prompts.catalog.server.max_length.prompt_argument
        long = prompts.too_long(args, limit)
        if long:
            raise MCPError(code=types.INVALID_PARAMS, message=f"{prompt.name}: argument {', '.join(long)} is longer than {limit:,} characters",
                           data={"prompt": prompt.name, "too_long": long, "max_length": limit})
        missing = prompts.missing(prompt, args)
        if missing:
            raise MCPError(code=types.INVALID_PARAMS, message=f"{prompt.name} needs {', '.join(missing)}",
                           data={"prompt": prompt.name, "missing": missing})
        uri, guide = prompts.guide_text(prompt)
        return types.GetPromptResult(description=prompt.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=prompts.render(prompt, args))),
            types.PromptMessage(role="user", content=types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri=uri, mime_type=MIME_MARKDOWN, text=guide))),
        ])

    async def on_completion(ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref, arg = params.ref, params.argument
        names: set[str] = set()
        if isinstance(ref, types.PromptReference) and ref.name in prompts.prompts:
            names = {a.name for a in prompts.prompts[ref.name].arguments}
        elif isinstance(ref, types.ResourceTemplateReference):
            names = set(re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", ref.uri))
        given = dict((params.context.arguments or {}) if params.context else {})
        limit = prompts.catalog.server.max_length.completion
        long = prompts.too_long({"argument.value": arg.value, **{f"context.arguments.{k}": str(v) for k, v in given.items()}}, limit)
        if long:
            raise MCPError(code=types.INVALID_PARAMS, message=f"completion/complete: {', '.join(long)} is longer than {limit:,} characters",
                           data={"too_long": long, "max_length": limit})
        values, total = await prompts.complete(arg.name, arg.value, given) if arg.name in names else ([], 0)
        return types.CompleteResult(completion=types.Completion(values=values, total=total, has_more=total > len(values)))

    return {"on_list_prompts": on_list_prompts, "on_get_prompt": on_get_prompt, "on_completion": on_completion}
