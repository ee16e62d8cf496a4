"""A built wheel works from anywhere: built with `pip wheel --no-deps`, installed into a
fresh virtual environment (dependencies pinned by constraints.txt, from pip's cache or the
index), and run from an empty temporary directory: `interp validate`, `interp audit`,
`interp simulate` on 127.0.0.1 and a stdio `tools/list` through the MCP SDK client.

This is what `pip install .`, `pipx install .` and `uv tool install .` do: build the
wheel, install it into an environment of its own, put `interp` on PATH (docs/packaging.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from interpreter import CATALOG_DIR, RULES_DIR
from interpreter.build.catalog import build
from interpreter.front.names import tool_name_individual

ROOT = Path(__file__).resolve().parents[1]
BUILD_INPUTS = ("pyproject.toml", "README.md", "interpreter", "simulator", "catalog", "rules", "compiled")
SIM_DIR = ROOT / "simulator"
# the wheel is ~1.05 MB, ~0.4 MB of it the compiled artefact (~3 MB of JSON); far more means something unintended ships
WHEEL_SIZE_CAP = 1536 * 1024
# a bounded wait for each step; a cold pip cache downloads ~30 packages
BUILD_TIMEOUT, INSTALL_TIMEOUT, RUN_TIMEOUT = 300, 600, 120

pytestmark = [pytest.mark.timeout(INSTALL_TIMEOUT + BUILD_TIMEOUT + 120)]


@dataclass(frozen=True)
class Installed:
    wheel: Path
    bin: Path
    cwd: Path  # empty: no checkout at or above it

    def env(self, **extra: str) -> dict[str, str]:
        # nothing of the test's own environment leaks in: no PYTHONPATH, no VIRTUAL_ENV
        return {"PATH": f"{self.bin}{os.pathsep}/usr/bin:/bin", "HOME": str(self.cwd), "ARCANE_MCP_AUDIT_LOG": "off", **extra}

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / "interp"), *args], cwd=self.cwd, env=self.env(**env),
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    # build from a copy of the sources: an in-tree build/ from an earlier run could ship stale files
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                   check=True, timeout=BUILD_TIMEOUT, env=_pip_env(), capture_output=True)
    (wheel,) = dist.glob("arcane_mcp-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=RUN_TIMEOUT)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)],
                   check=True, timeout=INSTALL_TIMEOUT, env=_pip_env(), capture_output=True)
    cwd = work / "elsewhere"
    cwd.mkdir()
    return Installed(wheel, venv / "bin", cwd)


def test_the_wheel_carries_catalog_and_rules_under_the_package(installed) -> None:
    with zipfile.ZipFile(installed.wheel) as zf:
        names = set(zf.namelist())
        top_level = zf.read(next(n for n in names if n.endswith(".dist-info/top_level.txt"))).decode().split()
    # the engine and the simulator; no `catalog` or `rules` package (they ship inside the engine)
    assert sorted(top_level) == ["interpreter", "simulator"]
    assert {n.split("/", 1)[0] for n in names} == {"interpreter", "simulator", next(n for n in names if ".dist-info/" in n).split("/", 1)[0]}
    sim_data = {p.relative_to(SIM_DIR).as_posix() for p in SIM_DIR.rglob("*") if p.is_file() and p.suffix in (".json", ".yaml", ".py")
                and "__pycache__" not in p.parts}
    assert len(sim_data) > 30 and {f"simulator/{rel}" for rel in sim_data | {"README.md"}} <= names
    for source, packaged in ((CATALOG_DIR, "interpreter/_data/catalog"), (RULES_DIR, "interpreter/_data/rules")):
        data = {p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file() and p.suffix in (".json", ".yaml", ".yml")}
        assert data and {f"{packaged}/{rel}" for rel in data} <= names
    # the compiled artefact, byte for byte the checkout's (a start reads it, not the YAML)
    with zipfile.ZipFile(installed.wheel) as zf:
        assert zf.read("interpreter/_data/compiled/catalog.json") == (ROOT / "compiled" / "catalog.json").read_bytes()
    assert installed.wheel.stat().st_size < WHEEL_SIZE_CAP


def test_the_installed_wheel_serves_without_a_yaml_parser(installed) -> None:
    # a serve start (stdin closed: it builds, starts and ends) lists every module it imports
    p = installed.run("serve", "--arcane-url", "http://127.0.0.1:9", PYTHONPROFILEIMPORTTIME="1")
    imported = {line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert p.returncode == 0 and "interpreter.build.artefact" in imported, p.stderr[-2000:]
    assert not {m for m in imported if m.split(".")[0] in ("ruamel", "jsonschema")}
    assert [line for line in p.stderr.splitlines() if not line.startswith("import time:")] == []


def test_validate_and_audit_from_an_empty_directory(installed) -> None:
    p = installed.run("validate", "--json")
    assert p.returncode == 0 and json.loads(p.stdout) == {"ok": True, "problems": []}, p.stderr
    installed_audit = installed.run("audit")
    checkout_audit = subprocess.run([str(Path(sys.executable).parent / "interp"), "audit"], capture_output=True, text=True,
                                    timeout=RUN_TIMEOUT, cwd=ROOT, env={"PATH": os.environ["PATH"]})
    # the packaged catalog is the checkout's: the same report, line for line
    assert installed_audit.returncode == 0 and installed_audit.stdout == checkout_audit.stdout


def test_writing_commands_refuse_outside_a_checkout(installed) -> None:
    for args in (("update-spec", "x.json"), ("reference",), ("reference", "--check")):
        p = installed.run(*args)
        assert p.returncode == 2 and p.stdout == ""
        assert len(p.stderr.splitlines()) == 1 and p.stderr.rstrip().endswith("[checkout_required]"), p.stderr
    site = next(installed.bin.parent.glob("lib/python*/site-packages/interpreter"))
    p = installed.run("update-spec", "x.json", "--root", str(site / "_data"))
    assert p.returncode == 2 and p.stderr.rstrip().endswith("[checkout_required]")


@pytest.mark.anyio
async def test_simulate_and_serve_stdio_from_the_installed_package(installed) -> None:
    sim = subprocess.Popen([str(installed.bin / "interp"), "simulate", "--host", "127.0.0.1", "--port", "0"],
                           cwd=installed.cwd, env=installed.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = sim.stdout.readline()
        url, key = line.split()[2], line.rsplit("api key: ", 1)[1].rstrip(")\n")
        assert url.startswith("http://127.0.0.1:")
        env = installed.env(ARCANE_URL=url, ARCANE_API_KEY=key, ARCANE_MCP_SURFACE="individual")
        params = StdioServerParameters(command=str(installed.bin / "interp"), args=["serve"], env=env, cwd=str(installed.cwd))
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            result = await client.call_tool("arcane_container_list", {"limit": 1})
        expected = {tool_name_individual(a) for a in build().actions}
        assert {t.name for t in tools} == expected
        assert result.is_error is False and len(result.structured_content["items"]) == 1
    finally:
        sim.terminate()
        sim.wait(timeout=RUN_TIMEOUT)
