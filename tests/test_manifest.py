"""server.json (MCP Registry) and server-card.json (SEP-2127) are generated from the
catalog and the settings table by `interp manifest`; `--check` fails on any drift."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from interpreter import __version__
from interpreter.commands import manifest
from interpreter.config import SETTINGS

ROOT = Path(__file__).parents[1]
INTERP = str(Path(sys.executable).parent / "interp")


def test_the_checked_in_files_are_what_the_catalog_generates():
    r = subprocess.run([INTERP, "manifest", "--check", "--root", str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_reports_a_drift(tmp_path):
    for name in ("pyproject.toml", *manifest.FILES):
        shutil.copyfile(ROOT / name, tmp_path / name)
    assert manifest.check(tmp_path) == []
    card = json.loads((tmp_path / "server-card.json").read_text(encoding="utf-8"))
    card["tools"] = card["tools"][:1]
    (tmp_path / "server-card.json").write_text(json.dumps(card), encoding="utf-8")
    (tmp_path / "server.json").unlink()
    assert sorted(manifest.check(tmp_path)) == ["server-card.json", "server.json"]
    assert sorted(manifest.write(tmp_path)) == ["server-card.json", "server.json"] and manifest.check(tmp_path) == []


def test_the_registry_entry():
    entry = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    # the registry's limits (schema 2025-12-11): name with one slash, description up to 100 characters
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", entry["name"])
    assert 1 <= len(entry["description"]) <= 100 and entry["version"] == __version__
    (pkg,) = entry["packages"]
    assert pkg["registryType"] == "pypi" and pkg["identifier"] == "arcane-mcp" and pkg["transport"] == {"type": "stdio"}
    env = {v["name"]: v for v in pkg["environmentVariables"]}
    assert set(env) == {s.env for s in SETTINGS}
    assert env["ARCANE_API_KEY"]["isSecret"] and env["ARCANE_PASSWORD"]["isSecret"] and env["ARCANE_URL"]["isRequired"]
    assert all("default" not in v for v in env.values() if v["isSecret"])


def test_the_server_card(catalog):
    card = json.loads((ROOT / "server-card.json").read_text(encoding="utf-8"))
    entry = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    # a strict superset of server.json's identity fields (SEP-2127)
    assert {k: card[k] for k in ("name", "version", "description", "title")} == {k: entry[k] for k in ("name", "version", "description", "title")}
    assert {"tools", "resources", "prompts"} <= set(card["capabilities"])
    assert [t["name"] for t in card["tools"]] == ["arcane_find_action", "arcane_execute_action"]
    assert {r["uri"] for r in card["resources"]} >= {"arcane://tools"}
    assert [p["name"] for p in card["prompts"]] == [p.name for p in catalog.resources.prompts]
    (remote,) = card["remotes"]
    assert remote["type"] == "streamable-http" and remote["url"].endswith("/mcp")
    assert remote["headers"] == [{"name": "X-Arcane-API-Key", "description": "The Arcane API key this client acts with",
                                  "isRequired": True, "isSecret": True}]
