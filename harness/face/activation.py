"""Whether the harness is on in this pytest session: only where the project opted in.

The plugin loads in every pytest session of every project where it is installed (a ``pytest11`` entry
point), so it must do nothing at all in projects that never heard of it, whatever their files are
called: a ``rubrics/essay.yaml`` or a ``tests/add.cases.yaml`` of their own must not become our items.
A project opts in with the ini setting ``harness = true`` (``[tool.pytest.ini_options]`` in
pyproject.toml, ``[pytest]`` in pytest.ini, or ``-o harness=true``). A feature plugin loaded on its own
with ``-p`` (the main plugin disabled) is named explicitly, which is opt-in enough.

Every option of ours is added through :func:`add_option`, so that one giving any of them without the
opt-in gets one clear usage error instead of a silent no-op.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ENABLE_INI = "harness"
ENABLE_HINT = 'add "harness = true" under [tool.pytest.ini_options] in pyproject.toml (or [pytest] in pytest.ini)'
MAIN_PLUGIN = "rubric"
_ENABLED = pytest.StashKey[bool]()
FORGOTTEN = pytest.StashKey[list[str]]()  # our files met while off, in a project that looks like ours

# dest -> (flag, default) of every option we add
OPTIONS: dict[str, tuple[str, Any]] = {}


def add_option(group: Any, *names: str, **kwargs: Any) -> None:
    """``group.addoption``, remembering the option as ours."""
    OPTIONS[kwargs["dest"]] = (names[0], kwargs.get("default"))
    group.addoption(*names, **kwargs)


def add_enable_ini(parser: pytest.Parser) -> None:
    parser.addini(ENABLE_INI, "enable pytest-rubric in this project: collect rubrics, cases and goals "
                              "(default: false)", type="bool", default=False)


def enabled(config: pytest.Config) -> bool:
    """The project opted in (ini ``harness = true``); computed once per session."""
    if _ENABLED not in config.stash:
        if config.pluginmanager.get_plugin(MAIN_PLUGIN) is None and not config.pluginmanager.has_plugin(
                "harness.face.plugin"):
            config.stash[_ENABLED] = True  # a feature plugin loaded alone, by name
        else:
            try:
                config.stash[_ENABLED] = bool(config.getini(ENABLE_INI))
            except (ValueError, pytest.UsageError) as exc:
                raise pytest.UsageError(f"ini {ENABLE_INI}: {exc} (fix: true or false)") from None
    return config.stash[_ENABLED]


def refuse_options_when_off(config: pytest.Config) -> None:
    """One line for someone who used our options in a project that has not opted in."""
    for dest, (flag, default) in OPTIONS.items():
        if config.getoption(dest, default) != default:
            raise pytest.UsageError(f"{flag}: pytest-rubric is not enabled in this project; {ENABLE_HINT}")


def note_forgotten(config: pytest.Config, file_path: Path) -> None:
    """Remember a file that would be ours, when its project looks like a harness project."""
    if _looks_like_ours(file_path, Path(config.rootpath)):
        config.stash.setdefault(FORGOTTEN, []).append(str(file_path))


def forgotten_hint(config: pytest.Config) -> str | None:
    files = config.stash.get(FORGOTTEN, [])
    if not files:
        return None
    first = Path(files[0])
    try:
        shown = first.relative_to(config.rootpath)
    except ValueError:
        shown = first
    return (f"pytest-rubric: {len(files)} file(s) such as {shown} were not collected: this project has not "
            f"enabled the harness ({ENABLE_HINT}; see README)")


def _looks_like_ours(file_path: Path, root: Path) -> bool:
    """A case file beside an agents.yaml in our format (``agents:`` whose entries name a ``producer``), or a
    goal.md with our sections. Another tool's agents.yaml (CrewAI's has no ``agents:`` key) is not ours."""
    if file_path.name == "goal.md":
        try:
            text = file_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return "\n## Sealed paths" in text and "\n## Benchmark" in text
    folder = file_path.parent
    while True:
        candidate = folder / "agents.yaml"
        if candidate.is_file():
            return _our_agents_file(candidate)
        if folder == root or folder == folder.parent or root not in folder.parents:
            return False
        folder = folder.parent


def _our_agents_file(path: Path) -> bool:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    agents = data.get("agents") if isinstance(data, dict) else None
    return isinstance(agents, dict) and any(isinstance(a, dict) and "producer" in a for a in agents.values())
