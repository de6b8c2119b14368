"""The construct beside this file is broken on purpose: its handoff from discovery to design blocks (exit code 80).

Its item is an expected failure, strictly: `pytest constructs/` reports it XFAIL with the reason, and would fail the
run if it ever passed. `pytest constructs/broken --runxfail` shows its whole failure report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
REASON = "on purpose: discovery leaves the PRD's Requirements empty, so the handoff to design blocks (exit 80)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent == HERE:
            item.add_marker(pytest.mark.xfail(reason=REASON, strict=True))
