"""docs/clients.md's configurations work: every fenced block marked `client=…` is parsed
the way its client reads it (JSON, TOML, or the `claude mcp add` command line), exactly
the command it names is started (stdio) or the URL it names is reached on the server the
`server=http` block starts, and the MCP SDK's client talks to it. The simulator's URL and a
key take the place of the page's two placeholders; nothing else is changed."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.helpers import free_port, start_http_server

pytestmark = pytest.mark.anyio
DOC = Path(__file__).parents[1] / "docs" / "clients.md"
BIN = str(Path(sys.executable).parent)
URL_PLACEHOLDER, KEY_PLACEHOLDER, HTTP_BASE = "https://arcane.example.com", "arc_your_key", "http://127.0.0.1:8765"
CLIENTS = {"claude-desktop", "claude-code", "claude-code-project", "vscode", "cursor", "codex"}


@dataclass
class Config:
    client: str
    transport: str
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def fences() -> list[tuple[str, dict, str]]:
    """(language, attributes, content) of every fenced block with key=value attributes."""
    out = []
    for tok in MarkdownIt("commonmark").parse(DOC.read_text(encoding="utf-8")):
        if tok.type != "fence":
            continue
        lang, *rest = tok.info.split()
        attrs = dict(part.split("=", 1) for part in rest if "=" in part)
        if attrs:
            out.append((lang, attrs, tok.content))
    return out


def _entry(server: dict, client: str, transport: str) -> Config:
    if "command" in server:
        return Config(client, transport, [server["command"], *server.get("args", [])], dict(server.get("env", {})))
    return Config(client, transport, url=server["url"], headers=dict(server.get("headers") or server.get("http_headers") or {}))


def _claude_mcp_add(line: str, client: str, transport: str) -> Config:
    argv = shlex.split(line)
    assert argv[:3] == ["claude", "mcp", "add"], line
    rest, tail = argv[3:], []
    if "--" in rest:
        at = rest.index("--")
        rest, tail = rest[:at], rest[at + 1:]
    env, headers, positional, i = {}, {}, [], 0
    while i < len(rest):
        word = rest[i]
        if word in ("--env", "-e"):
            k, v = rest[i + 1].split("=", 1)
            env[k] = v
            i += 2
        elif word in ("--header", "-H"):
            k, v = rest[i + 1].split(":", 1)
            headers[k.strip()] = v.strip()
            i += 2
        elif word in ("--transport", "-t", "--scope", "-s"):
            i += 2
        else:
            positional.append(word)
            i += 1
    if tail:
        return Config(client, transport, tail, env)
    return Config(client, transport, url=positional[1], headers=headers)


def configs() -> list[Config]:
    out = []
    for lang, attrs, text in fences():
        if "client" not in attrs:
            continue
        client, transport = attrs["client"], attrs["transport"]
        if lang == "json":
            data = json.loads(text)
            out.append(_entry((data.get("mcpServers") or data["servers"])["arcane"], client, transport))
        elif lang == "toml":
            out.append(_entry(tomllib.loads(text)["mcp_servers"]["arcane"], client, transport))
        else:
            lines = [ln for ln in text.splitlines() if ln.strip()]
            assert len(lines) == 1, text
            out.append(_claude_mcp_add(lines[0], client, transport))
    return out


def http_server_command() -> tuple[dict, list[str]]:
    text = next(t for _, attrs, t in fences() if attrs.get("server") == "http").strip()
    words = shlex.split(text)
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    return env, words


def fill(text: str, sim_url: str, key: str, base: str = HTTP_BASE) -> str:
    return text.replace(URL_PLACEHOLDER, sim_url).replace(KEY_PLACEHOLDER, key).replace(HTTP_BASE, base)


def test_the_page_configures_every_client_both_ways():
    got = configs()
    assert {c.client for c in got} == CLIENTS
    for client in CLIENTS - {"claude-desktop", "claude-code-project"}:
        assert {c.transport for c in got if c.client == client} == {"stdio", "http"}, client
    for c in got:
        if c.transport == "stdio":
            assert c.command[:2] == ["interp", "serve"] and c.env == {"ARCANE_URL": URL_PLACEHOLDER, "ARCANE_API_KEY": KEY_PLACEHOLDER}
        else:
            assert c.url == HTTP_BASE + "/mcp" and c.headers == {"X-Arcane-API-Key": KEY_PLACEHOLDER}, c


STDIO = [c for c in configs() if c.transport == "stdio"]
HTTP = [c for c in configs() if c.transport == "http"]


@pytest.mark.parametrize("config", STDIO, ids=[c.client for c in STDIO])
async def test_a_stdio_configuration_runs(sim, config):
    env = {"PATH": BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_MCP_AUDIT_LOG": "off",
           **{k: fill(v, sim.url, sim.api_key) for k, v in config.env.items()}}
    params = StdioServerParameters(command=config.command[0], args=config.command[1:], env=env)
    async with Client(params, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"arcane_find_action", "arcane_execute_action"}
        res = await client.call_tool("arcane_execute_action", {"action": "container.list", "params": {"limit": 2}})
        assert not res.is_error, res.content[0].text
        assert res.structured_content["items"]


@pytest.fixture(scope="module")
def http_base(sim):
    env_words, argv = http_server_command()
    port = free_port()
    env = {"PATH": BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"), "ARCANE_MCP_AUDIT_LOG": "off",
           "ARCANE_MCP_LISTEN": f"127.0.0.1:{port}", **{k: fill(v, sim.url, sim.api_key) for k, v in env_words.items()}}
    assert argv[:3] == ["interp", "serve", "--http"]
    proc = start_http_server([str(Path(BIN) / argv[0]), *argv[1:]], env, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("config", HTTP, ids=[c.client for c in HTTP])
async def test_an_http_configuration_connects(sim, http_base, config):
    url = fill(config.url, sim.url, sim.api_key, http_base)
    headers = {k: fill(v, sim.url, sim.api_key) for k, v in config.headers.items()}
    async with Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"arcane_find_action", "arcane_execute_action"}
        listed = json.loads((await client.read_resource("arcane://tools")).contents[0].text)
        assert listed["surface"] == "dynamic" and listed["actions"]
