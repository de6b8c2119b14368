"""pytest hooks for goals: the ``--harness-improve`` option, and goals as a kind of item. The main plugin
registers this module with ``config.pluginmanager.import_plugin("harness.apps.tournament.pytest_plugin")``;
alone, use ``-p harness.apps.tournament.pytest_plugin``. Inert unless the project opted in
(harness/face/activation.py), and in a session that collects no goal.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.base.argtypes import whole_number
from harness.face.activation import add_option, enabled, note_forgotten


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
    add_option(group, "--harness-improve", dest="harness_improve", metavar="N", type=whole_number(0), default=0,
                    help="run N self-improvement tournament iterations for every collected goals/<slug>/goal.md "
                         "(default: 0, only validate and gate on the goals)")


def pytest_harness_item_kinds(config: pytest.Config) -> list[object]:
    """Goals are a kind of item (``harness.apps.tournament.goal_items.GoalKind``)."""
    from harness.apps.tournament.goal_items import GoalKind

    return [GoalKind(improve_iterations=int(config.getoption("harness_improve", 0) or 0))]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> None:
    """A project that has goals but has not opted in gets the one-line hint."""
    if file_path.name == "goal.md" and file_path.parent.parent.name == "goals" and not enabled(parent.config):
        note_forgotten(parent.config, file_path)
