"""A goal's records in the harness's earlier layout, moved once to where seed 001 places them.

Before, the iteration state and the plan archive lay straight under the goal's folder
(``WORK/improve/<slug>/iteration_state.json`` and ``plan_archive/round_N/``); seed 001 puts them under
``state/``. :func:`migrate` runs when a run starts, holding the goal's lock: it moves the plan archive file by
file, then the state, and points the state's plans (``planning.plans.*.output_path``) at their new places.
Each move is a rename and the whole is idempotent, so a migration that was stopped halfway finishes the next
time, and a run stopped under the old layout resumes under the new one with nothing lost.

A plan reviewed before every plan carried an ``architect_review`` gets the one that says no architect reviewed
it (the earlier harness wrote one only when an architect ran); nothing else in a record changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.apps.tournament.models import no_architect_review
from harness.apps.tournament.schemas import write_record
from harness.apps.tournament.store import Layout, read_json
from harness.base.errors import HarnessConfigError
from harness.base.fileio import atomic_write_json
from harness.base.jsonschemas import contract_errors

LEGACY_STATE = "iteration_state.json"   # under the goal's folder, before state/
LEGACY_ARCHIVE = "plan_archive"
_UNRECORDED = "none was recorded (the plan was archived by an earlier harness, which wrote one only when an " \
              "architect ran)"


def migrate(layout: Layout) -> list[str]:
    """Move the goal's records of the earlier layout into ``state/``; one line for each thing done (none when
    there was nothing to move)."""
    said = []
    old_archive = layout.base / LEGACY_ARCHIVE
    moved = _move_archive(old_archive, layout.plan_archive)
    if moved:
        said.append(f"moved {moved} archived plan(s) from {layout.rel(old_archive)}/ to "
                    f"{layout.rel(layout.plan_archive)}/")
    old_state = layout.base / LEGACY_STATE
    if old_state.exists():
        if layout.state_file.exists():
            said.append(f"left {layout.rel(old_state)} as it is: {layout.rel(layout.state_file)} is the "
                        "iteration state (remove the old one)")
        else:
            layout.state_dir.mkdir(parents=True, exist_ok=True)
            os.replace(old_state, layout.state_file)
            said.append(f"moved {layout.rel(old_state)} to {layout.rel(layout.state_file)}")
    if _repoint_plans(layout):
        said.append(f"the plans in {layout.rel(layout.state_file)} now point to {layout.rel(layout.plan_archive)}/")
    return said


def _move_archive(old: Path, new: Path) -> int:
    """Every file of the old plan archive to the same place under ``new``; a file already there stays, and so
    does its old copy. Returns how many files moved."""
    if not old.is_dir():
        return 0
    moved = 0
    for source in sorted(p for p in old.rglob("*") if p.is_file()):
        target = new / source.relative_to(old)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        completed = _with_architect_review(source)
        if completed is None:
            os.replace(source, target)
        else:
            atomic_write_json(target, completed)
            source.unlink()
        moved += 1
    for folder in sorted((p for p in old.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        _remove_if_empty(folder)
    _remove_if_empty(old)
    return moved


def _with_architect_review(path: Path) -> dict[str, Any] | None:
    """The archived plan at ``path`` with the architect review it lacks, or None to move it as it is (it has one,
    was never reviewed, or is not a plan this can complete)."""
    if path.suffix != ".json":
        return None
    try:
        plan = read_json(path)
    except HarnessConfigError:  # a damaged file moves as it is; reading it later names it
        return None
    if not isinstance(plan, dict) or "critic_review" not in plan or "architect_review" in plan:
        return None
    completed = {**plan, "architect_review": no_architect_review(_UNRECORDED)}
    return completed if not contract_errors("plan_archive", completed) else None


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def _repoint_plans(layout: Layout) -> bool:
    """Point the state's plans that name the old archive (``<goal folder>/plan_archive/round_N/<plan_id>.json``)
    at the new one; True when the state changed."""
    try:
        data = read_json(layout.state_file)
    except FileNotFoundError:
        return False
    plans = ((data.get("planning") or {}).get("plans") or {}) if isinstance(data, dict) else {}
    changed = False
    for entry in plans.values():
        where = entry.get("output_path") if isinstance(entry, dict) else None
        if not where:
            continue
        path = Path(where)
        if where == layout.rel(layout.base / LEGACY_ARCHIVE / path.parent.name / path.name):
            entry["output_path"] = layout.rel(layout.plan_archive / path.parent.name / path.name)
            changed = True
    if changed:
        write_record(layout.state_file, "iteration_state", data)
    return changed
