"""Where the data lives: catalog/ and rules/, for reading and for writing.

Reading (every command, the server, the simulator): run from a checkout of arcane-mcp (an
editable install, or `python -m interpreter.commands.cli` inside the checkout), the checkout's own
catalog/, rules/ and compiled/ (the compiled artefact); run from an installed wheel, the copies
the wheel carries inside this package (`interpreter/_data/catalog`, `interpreter/_data/rules`,
`interpreter/_data/compiled`), found through importlib.resources. The wheel never installs top-level `catalog`/`rules` packages: those
generic names would clash in site-packages (docs/packaging.md).

Writing (`interp update-spec`, `interp reference`): only into a checkout, named with
`--root DIR` or found from the working directory upwards. An installed package is never
changed: its files belong to pip, and the next upgrade would silently undo the edit.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ConfigError

PROJECT_NAME = "arcane-mcp"
PACKAGE_DIR = Path(__file__).resolve().parent
DATA_SUBDIR = "_data"  # inside the installed package; setuptools maps catalog/ and rules/ here
DATA_NAMES = ("catalog", "rules")


def is_checkout(path: Path) -> bool:
    """True when `path` is the root of an arcane-mcp checkout: its pyproject.toml names
    arcane-mcp and catalog/ and rules/ sit beside it."""
    try:
        text = (path / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return project_name(text) == PROJECT_NAME and all((path / n).is_dir() for n in DATA_NAMES)


def project_name(text: str) -> str | None:
    """The `name = "..."` of a pyproject.toml's [project] table, found line by line: every
    start in a checkout asks, and a TOML parser (tomllib's import and regular expressions)
    would cost it ~8 ms of CPU for this one key. None when the table or the key is not
    written that way."""
    table = None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("["):
            table = line.replace(" ", "")
        elif table == "[project]":
            key, sep, value = line.partition("=")
            if sep and key.strip() == "name":
                value = value.strip()
                return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else None
    return None


def source_checkout() -> Path | None:
    """The checkout this package is imported from, or None for an installed wheel."""
    root = PACKAGE_DIR.parent
    return root if is_checkout(root) else None


def data_root() -> Path:
    """The directory holding catalog/ and rules/ for reading."""
    checkout = source_checkout()
    if checkout is not None:
        return checkout
    from importlib import resources  # an installed wheel's data; a checkout never needs it

    packaged = resources.files(__package__).joinpath(DATA_SUBDIR)
    # pip installs wheels as plain files, so this is a real directory; a zip import would
    # need extraction, which no supported install does
    if not isinstance(packaged, Path) or not packaged.is_dir():
        raise ConfigError(f"the packaged catalog and rules are missing from {packaged}; reinstall arcane-mcp",
                          code="data_missing")
    return packaged


IN_CHECKOUT = source_checkout() is not None  # once: in a checkout it reads pyproject.toml
_DATA_ROOT = PACKAGE_DIR.parent if IN_CHECKOUT else data_root()
CATALOG_DIR = _DATA_ROOT / "catalog"
RULES_DIR = _DATA_ROOT / "rules"
# the compiled artefact of catalog/ and rules/ (build/artefact.py; `interp compile` writes it):
# compiled/ in a checkout, interpreter/_data/compiled in the wheel
COMPILED_FILE = _DATA_ROOT / "compiled" / "catalog.json"


def checkout_for_writing(command: str, root: Path | None = None, cwd: Path | None = None) -> Path:
    """The checkout a writing command changes: `root` when given (it must be a checkout),
    else the nearest checkout at or above `cwd`. Raises ConfigError (code
    `checkout_required`, setting `--root`) instead of writing into an installed package."""
    if root is not None:
        root = Path(root).expanduser().resolve()
        if not is_checkout(root):
            raise ConfigError(f"--root {str(root)!r} is not an arcane-mcp checkout (no pyproject.toml naming {PROJECT_NAME} "
                              f"beside catalog/ and rules/); `interp {command}` works only on a checkout",
                              setting="--root", code="checkout_required")
        return root
    start = Path(cwd or Path.cwd()).resolve()
    for candidate in (start, *start.parents):
        if is_checkout(candidate):
            return candidate
    raise ConfigError(f"`interp {command}` works on an arcane-mcp checkout and none was found at or above {str(start)!r}: "
                      f"run it inside a clone, or pass --root DIR (an installed package is never written to)",
                      setting="--root", code="checkout_required")
