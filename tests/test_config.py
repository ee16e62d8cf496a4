"""Configuration: every bad value stops startup with one line naming the variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from interpreter.config import SETTINGS, load_settings
from interpreter.errors import ConfigError


@pytest.mark.parametrize("var,value,expect", [
    ("ARCANE_MCP_ACTION_TIMEOUT", "soon", "a duration such as 30s"),
    ("ARCANE_MCP_REQUEST_TIMEOUT", "-5s", "a duration"),
    ("ARCANE_MCP_SURFACE", "everything", "one of dynamic, meta, individual"),
    ("ARCANE_MCP_READ_ONLY", "maybe", "a boolean"),
    ("ARCANE_MCP_MAX_DOWNLOAD_BYTES", "lots", "a size in bytes"),
    ("ARCANE_URL", "arcane.local", "an http(s) URL"),
    ("ARCANE_MCP_LOG_LEVEL", "loud", "one of debug"),
    ("ARCANE_MCP_RULES", "/nonexistent/rules", "a rules directory"),
])
def test_bad_values_name_the_variable(var, value, expect):
    with pytest.raises(ConfigError) as ei:
        load_settings({var: value})
    assert str(ei.value).startswith(f"{var}=") and expect in str(ei.value)


def test_secrets_are_not_echoed():
    with pytest.raises(ConfigError) as ei:
        load_settings({"ARCANE_USERNAME": "admin"})
    assert "ARCANE_PASSWORD" in str(ei.value)


def test_durations_sizes_and_defaults():
    s = load_settings({"ARCANE_MCP_ACTION_TIMEOUT": "5m", "ARCANE_MCP_REQUEST_TIMEOUT": "90s",
                       "ARCANE_MCP_MAX_DOWNLOAD_BYTES": "2MiB", "ARCANE_URL": "https://a.example/api/",
                       "ARCANE_MCP_EXCLUDE_TOOLS": "image, container.kill ,swarm_*"})
    assert s.action_timeout == 300 and s.request_timeout == 90 and s.max_download_bytes == 2 * 1024 * 1024
    assert s.arcane_url == "https://a.example"
    assert s.exclude_tools == ("image", "container.kill", "swarm_*")
    d = load_settings({})
    assert d.surface == "dynamic" and d.environment_id == "0" and not d.read_only and d.audit_log == "stderr"


def test_flags_override_environment():
    s = load_settings({"ARCANE_MCP_SURFACE": "meta"}, {"surface": "individual"})
    assert s.surface == "individual"
    with pytest.raises(ConfigError) as ei:
        load_settings({}, {"surface": "nope"})
    assert str(ei.value).startswith("--surface=")


def test_every_setting_has_a_flag_and_a_doc():
    assert len({s.env for s in SETTINGS}) == len(SETTINGS)
    assert all(s.flag.startswith("--") and s.doc for s in SETTINGS)


def test_cli_refuses_to_start_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "interpreter.cli", "serve"], env={"ARCANE_MCP_SURFACE": "bogus", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["interp: ARCANE_MCP_SURFACE='bogus' is invalid: expected one of dynamic, meta, individual"]


def test_no_dotenv_is_read(tmp_path):
    (tmp_path / ".env").write_text("ARCANE_MCP_SURFACE=bogus\n")
    proc = subprocess.run([sys.executable, "-m", "interpreter.cli", "find", "list containers", "--limit", "1"],
                          env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and "container.list" in proc.stdout
