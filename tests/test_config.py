"""Configuration: every bad value stops startup with one line naming the variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from interpreter.config import SETTINGS, load_settings, parse_listen
from interpreter.errors import ConfigError


@pytest.mark.parametrize("var,value", [
    ("ARCANE_MCP_ACTION_TIMEOUT", "soon"),
    ("ARCANE_MCP_REQUEST_TIMEOUT", "-5s"),
    ("ARCANE_MCP_READ_TIMEOUT", ".."),
    ("ARCANE_MCP_READ_TIMEOUT", "0"),
    ("ARCANE_MCP_READ_TIMEOUT", "\x00"),
    ("ARCANE_MCP_READ_TIMEOUT", "1" * 1_000_000),  # a number that reads as infinity: no deadline, refused
    ("ARCANE_MCP_ACTION_TIMEOUT", "9" * 400 + "h"),
    ("ARCANE_MCP_SURFACE", "everything"),
    ("ARCANE_MCP_READ_ONLY", "maybe"),
    ("ARCANE_MCP_MAX_DOWNLOAD_BYTES", "lots"),
    ("ARCANE_URL", "arcane.local"),
    ("ARCANE_MCP_LOG_LEVEL", "loud"),
    ("ARCANE_MCP_RULES", "/nonexistent/rules"),
    ("ARCANE_MCP_LISTEN", "nohost"),
    ("ARCANE_MCP_LISTEN", "127.0.0.1:abc"),
    ("ARCANE_MCP_CONFIRM_EXPIRY", "0s"),
    ("ARCANE_MCP_CONFIRM_EXPIRY", "later"),
    ("ARCANE_MCP_HEADER_TIMEOUT", "0"),
    ("ARCANE_MCP_BODY_TIMEOUT", "never"),
    ("ARCANE_MCP_CORS_ORIGINS", "*"),  # an allow-list of exact origins: never a wildcard
    ("ARCANE_MCP_CORS_ORIGINS", "https://app.example.com,*"),
    ("ARCANE_MCP_CORS_ORIGINS", "https://*.example.com"),
    ("ARCANE_MCP_CORS_ORIGINS", "https://app.example.com/path"),
    ("ARCANE_MCP_CORS_ORIGINS", "null"),
    ("ARCANE_MCP_CORS_ORIGINS", "app.example.com"),
])
def test_bad_values_name_the_variable(var, value):
    with pytest.raises(ConfigError) as ei:
        load_settings({var: value})
    assert (ei.value.setting, ei.value.code) == (var, "invalid_setting")
    assert ei.value.format().startswith(f"{var}=") and "\n" not in ei.value.format()
    assert len(ei.value.format()) < 300  # the value is shown cut, never whole


def test_secrets_are_not_echoed():
    with pytest.raises(ConfigError) as ei:
        load_settings({"ARCANE_USERNAME": "admin"})
    assert (ei.value.setting, ei.value.code) == ("ARCANE_PASSWORD", "incomplete_login")
    with pytest.raises(ConfigError) as ei:
        load_settings({"ARCANE_MCP_STATE_SECRET": "short-but-secret"})
    assert ei.value.setting == "ARCANE_MCP_STATE_SECRET" and "short-but-secret" not in ei.value.format()


@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:8765", ("127.0.0.1", 8765)),
    ("0.0.0.0:80", ("0.0.0.0", 80)),
    ("localhost:65535", ("localhost", 65535)),
    ("[::1]:8765", ("::1", 8765)),
    ("[fe80::1%eth0]:9000", ("fe80::1%eth0", 9000)),
    (":9000", ("127.0.0.1", 9000)),
    (" 127.0.0.1:1 ", ("127.0.0.1", 1)),
])
def test_listen_forms(text, expected):
    assert parse_listen(text) == expected
    assert load_settings({"ARCANE_MCP_LISTEN": text}).listen == expected


@pytest.mark.parametrize("text", ["nohost", "127.0.0.1:abc", "127.0.0.1:", "::1:8765", "[::1]8765", "[::1]", "[]:80",
                                  "[127.0.0.1]:80", "h:0", "h:65536", "h:-1", "a b:80", "h:8765x", ""])
def test_listen_rejects(text):
    with pytest.raises(ValueError):
        parse_listen(text)
    with pytest.raises(ConfigError) as ei:
        load_settings({}, {"listen": text})
    assert (ei.value.setting, ei.value.code) == ("--listen", "invalid_setting")


def test_durations_sizes_and_defaults():
    s = load_settings({"ARCANE_MCP_ACTION_TIMEOUT": "5m", "ARCANE_MCP_REQUEST_TIMEOUT": "90s",
                       "ARCANE_MCP_MAX_DOWNLOAD_BYTES": "2MiB", "ARCANE_URL": "https://a.example/api/",
                       "ARCANE_MCP_EXCLUDE_TOOLS": "image, container.kill ,swarm_*"})
    assert s.action_timeout == 300 and s.request_timeout == 90 and s.max_download_bytes == 2 * 1024 * 1024
    assert s.arcane_url == "https://a.example"
    assert s.exclude_tools == ("image", "container.kill", "swarm_*")
    d = load_settings({})
    assert d.surface == "dynamic" and d.environment_id == "0" and not d.read_only and d.audit_log == "auto"
    assert d.listen == ("127.0.0.1", 8765)


def test_flags_override_environment():
    s = load_settings({"ARCANE_MCP_SURFACE": "meta"}, {"surface": "individual"})
    assert s.surface == "individual"
    with pytest.raises(ConfigError) as ei:
        load_settings({}, {"surface": "nope"})
    assert ei.value.setting == "--surface"


def test_every_setting_has_a_flag_and_a_doc():
    assert len({s.env for s in SETTINGS}) == len(SETTINGS)
    assert all(s.flag.startswith("--") and s.doc for s in SETTINGS)


@pytest.mark.parametrize("args,env,setting", [
    (["serve"], {"ARCANE_MCP_SURFACE": "bogus"}, "ARCANE_MCP_SURFACE"),
    (["serve", "--http"], {"ARCANE_MCP_LISTEN": "nohost"}, "ARCANE_MCP_LISTEN"),
    (["serve", "--http"], {"ARCANE_MCP_LISTEN": "127.0.0.1:abc"}, "ARCANE_MCP_LISTEN"),
    (["serve", "--http", "--listen", "127.0.0.1:abc"], {}, "--listen"),
    (["serve", "--listen", "[::1]8765"], {}, "--listen"),
    (["call", "container.list"], {"ARCANE_MCP_LISTEN": "nohost"}, "ARCANE_MCP_LISTEN"),
])
def test_cli_refuses_to_start_with_one_line(tmp_path, args, env, setting):
    proc = subprocess.run([sys.executable, "-m", "interpreter.commands.cli", *args], env={**env, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"interp: {setting}=") and line.endswith("[invalid_setting]")


def test_no_dotenv_is_read(tmp_path):
    (tmp_path / ".env").write_text("ARCANE_MCP_SURFACE=bogus\n")
    proc = subprocess.run([sys.executable, "-m", "interpreter.commands.cli", "find", "list containers", "--limit", "1"],
                          env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and "container.list" in proc.stdout


def test_settings_init_is_the_dataclass_one_for_keywords():
    """Settings writes its __init__ out (the generated one is compiled at a start): each
    field named takes its value, every other its default, as dataclass's would; a name that
    is not a field is a TypeError; the instance is frozen, compared and hashed by value."""
    import dataclasses

    from interpreter.config import Settings

    fields = dataclasses.fields(Settings)
    assert all(f.default is not dataclasses.MISSING and f.default_factory is dataclasses.MISSING for f in fields)
    plain = Settings()
    assert [getattr(plain, f.name) for f in fields] == [f.default for f in fields]
    for f in fields:
        marker = object()
        one = Settings(**{f.name: marker})
        assert [getattr(one, g.name) for g in fields] == [marker if g is f else g.default for g in fields]
    assert dataclasses.replace(plain, transport="stdio").transport == "stdio"
    assert Settings(arcane_url="x") == Settings(arcane_url="x") and hash(Settings(arcane_url="x")) == hash(Settings(arcane_url="x"))
    with pytest.raises(TypeError):
        Settings(not_a_setting=1)
    with pytest.raises(TypeError):
        Settings("http://positional")  # the generated __init__ took it; no caller does
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.arcane_url = "y"  # type: ignore[misc]


def test_transport_bounds_and_cors_defaults_and_forms():
    d = load_settings({})
    assert (d.header_timeout, d.body_timeout, d.keep_alive, d.cors_origins) == (10.0, 60.0, 300.0, ())
    s = load_settings({"ARCANE_MCP_HEADER_TIMEOUT": "250ms", "ARCANE_MCP_BODY_TIMEOUT": "2m",
                       "ARCANE_MCP_CORS_ORIGINS": "https://app.example.com, http://localhost:3000,http://[::1]:5173"})
    assert (s.header_timeout, s.body_timeout) == (0.25, 120.0)
    assert s.cors_origins == ("https://app.example.com", "http://localhost:3000", "http://[::1]:5173")
