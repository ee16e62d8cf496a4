"""`interp reference`: the generated tool reference matches the catalog and the files on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from interpreter.build.catalog import BuildOptions, build
from interpreter.commands.reference import check, generate, type_label, write

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def catalog():
    return build(BuildOptions())


@pytest.fixture(scope="module")
def pages(catalog):
    return generate(catalog)


def test_reference_on_disk_is_up_to_date() -> None:
    # fails when the catalog changed and `interp reference` was not run
    assert check(ROOT) == []


def test_one_page_per_domain_plus_index(catalog, pages) -> None:
    assert set(pages) == {"docs/reference/README.md"} | {f"docs/reference/{d}.md" for d in catalog.domains}
    index = pages["docs/reference/README.md"]
    for domain in catalog.domains:
        assert f"| [`{domain}`]({domain}.md) | `arcane_{domain}` | {len(catalog.domains[domain].action_ids)} |" in index
    for name in ("arcane_find_action", "arcane_execute_action", "arcane_<domain>", "arcane_<domain>_<action>"):
        assert name in index
    assert f"{len(catalog.all_actions)} actions in {len(catalog.domains)} domains" in index


def test_every_action_is_documented(catalog, pages) -> None:
    for a in catalog.all_actions.values():
        page = pages[f"docs/reference/{a.domain}.md"]
        assert f"### `{a.id}`" in page
        assert f"`arcane_{a.domain}_{a.name}`" in page
        assert f"`{a.method} {a.path}`" in page


def test_action_section_content(pages) -> None:
    page = pages["docs/reference/container.md"]
    section = page.split("### `container.download_logs`", 1)[1].split("\n### ", 1)[0]
    assert "**Download container logs**" in section
    assert "- individual tool: `arcane_container_download_logs`; meta tool: `arcane_container` with `\"action\": \"download_logs\"`" in section
    assert "- route: `GET /environments/{id}/containers/{containerId}/logs/download` (operation `download-container-logs`)" in section
    assert "- flags: read-only, idempotent" in section
    assert "- response: text_download" in section
    assert "| `containerId` | string | yes | path | Container ID |" in section
    assert "| `environmentId` | string | no (default `0`) | path `id` |" in section


def test_flags_and_pending_extra_route(pages) -> None:
    page = pages["docs/reference/container.md"]
    section = page.split("### `container.logs`", 1)[1].split("\n### ", 1)[0]
    assert "(extra route outside OpenAPI, handler `websocket_capture`)" in section
    assert "handler pending" not in section  # served
    assert "| `tail` | integer | no | query |" in section
    assert "| `maxLines` | integer | no (default `200`) | handler (not sent) |" in section  # a capture bound
    trace = pages["docs/reference/diagnostics.md"].split("### `diagnostics.trace`", 1)[1].split("\n### ", 1)[0]
    assert "handler pending" not in trace  # every handler kind is served today
    # an action a later catalog declares before its kind is served says so
    from dataclasses import replace

    from interpreter.build.catalog import build
    from interpreter.commands.reference import _flags
    action = build().all_actions["diagnostics.trace"]
    assert "handler pending (binary_download)" in _flags(replace(action, pending=True))
    delete = page.split("### `container.delete`", 1)[1].split("\n### ", 1)[0]
    assert "destructive (needs `confirm: true`)" in delete


def test_parameter_locations(pages) -> None:
    assert "| multipart part |" in pages["docs/reference/auth.md"]  # upload_avatar's file part
    assert "| body |" in pages["docs/reference/container.md"]
    assert "| form field |" in pages["docs/reference/auth.md"]  # token exchange
    assert "No parameters." in pages["docs/reference/health.md"] or "No parameters." in pages["docs/reference/version.md"]


def test_generated_from_the_unfiltered_catalog(pages) -> None:
    filtered = build(BuildOptions(read_only=True, exclude=("container.get",)))
    assert "container.restart" not in filtered.actions and "container.get" not in filtered.actions
    assert generate(filtered) == pages


def test_deterministic(catalog, pages) -> None:
    assert generate(build(BuildOptions())) == pages
    for text in pages.values():
        assert text.endswith("\n") and not text.endswith("\n\n")


def test_write_then_check(tmp_path: Path, catalog, pages) -> None:
    assert check(tmp_path, catalog) == [f"{p} (missing)" for p in sorted(pages)]
    written = write(tmp_path, catalog)
    assert written == sorted(pages)
    assert check(tmp_path, catalog) == []
    assert write(tmp_path, catalog) == []  # nothing to change the second time
    ref = tmp_path / "docs" / "reference"
    (ref / "container.md").write_text("edited by hand\n", encoding="utf-8")
    (ref / "image.md").unlink()
    (ref / "containers.md").write_text("a stale page\n", encoding="utf-8")
    assert check(tmp_path, catalog) == [
        "docs/reference/container.md (differs)",
        "docs/reference/containers.md (extra)",
        "docs/reference/image.md (missing)",
    ]
    assert write(tmp_path, catalog) == ["docs/reference/container.md", "docs/reference/containers.md", "docs/reference/image.md"]
    assert check(tmp_path, catalog) == []


@pytest.mark.parametrize(
    "schema, label",
    [
        ({"type": "string"}, "string"),
        ({"type": ["array", "null"], "items": {"type": "string"}}, "array of string or null"),
        ({"type": "integer", "format": "int64"}, "integer (int64)"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "map of string"),
        ({"$ref": "#/$defs/ContainerHostConfigCreate"}, "ContainerHostConfigCreate"),
        ({"$ref": "#/$defs/Blob", "description": "File part"}, "file (text or base64)"),
        ({"type": "string", "enum": ["heap", "goroutine"]}, "string: heap, goroutine"),
        ({"description": "anything"}, "any"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "string or integer"),
    ],
)
def test_type_label(schema, label) -> None:
    assert type_label(schema) == label


def test_the_command_works_on_a_checkout_only(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    from interpreter import CATALOG_DIR, RULES_DIR

    interp = str(Path(sys.executable).parent / "interp")
    env = {"PATH": os.environ["PATH"], "ARCANE_MCP_AUDIT_LOG": "off"}
    clone = tmp_path / "clone"
    shutil.copytree(CATALOG_DIR, clone / "catalog")
    shutil.copytree(RULES_DIR, clone / "rules")
    run = lambda *args, cwd: subprocess.run([interp, "reference", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)  # noqa: E731
    p = run("--check", cwd=clone)
    assert p.returncode == 2 and p.stderr.rstrip().endswith("[checkout_required]")  # no pyproject.toml naming arcane-mcp
    (clone / "pyproject.toml").write_text('[project]\nname = "arcane-mcp"\n', encoding="utf-8")
    assert run("--check", cwd=clone).returncode == 1  # docs/reference missing there
    assert run("--root", str(clone), cwd=tmp_path).returncode == 0
    assert run("--check", "--root", str(clone), cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in (clone / "docs" / "reference").iterdir()) == sorted(p.name for p in (ROOT / "docs" / "reference").iterdir())
