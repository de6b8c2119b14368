"""One shard's work folder, read whole and read-only: its newest cycle's rows, files, run log, execution results and
trace, grouped by item, each item with the fingerprint of its records.

An item's fingerprint is the SHA-256 of its records with what a merge changes set aside: row ids, the cycle id and
the work folder its paths went through (every path into the cycle folder is written ``runs/{cycle}/...``). Two
copies of one shard's folder have the same fingerprints; a re-run of the shard has others (its times, at least).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.appendlog import read_entries
from harness.base.errors import ExitCode, HarnessConfigError, HarnessError
from harness.base.fileio import shared_lock
from harness.base.jsonlines import read_json_lines
from harness.records.layout import (
    ALIVE_LOCK,
    EXECUTION_RESULTS_NAME,
    MERGED_FILE,
    RECONCILED_MARK,
    RECONCILIATION_FILE,
    RUN_LOG_NAME,
    SHARD_FILE,
    cycle_path,
    safe_cycle_name,
    trace_path,
)
from harness.records.merge.relocate import Relocate
from harness.records.reader import RecordReader, run_record
from harness.records.reconcile import INTERRUPTED_FEEDBACK

# Files of a cycle folder that are the cycle's, not an item's: merged one by one, or left behind (locks, marks).
CYCLE_FILES = frozenset({RUN_LOG_NAME, EXECUTION_RESULTS_NAME, RECONCILIATION_FILE, SHARD_FILE, MERGED_FILE,
                         ALIVE_LOCK, RECONCILED_MARK, ".session", ".run-log.lock"})
_SET_ASIDE_RUN = ("id", "cycle_id")  # what a merge changes in an agent_runs row
_SET_ASIDE_DETAILS = ("run_id",)


class MergeRefused(HarnessError):
    """A merge that cannot be made as asked: one line naming the folders, what is wrong and the fix. The target
    is left as it was."""

    exit_code = ExitCode.DATA_ERROR

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


@dataclass
class Attempt:
    run: dict[str, Any]  # the agent_runs row, every column
    details: dict[str, Any]  # its attempt_details row


@dataclass
class Item:
    nodeid: str
    attempts: list[Attempt] = field(default_factory=list)
    loop: dict[str, Any] | None = None  # its loop_results row, when its loop ended
    fingerprint: str = ""


@dataclass
class ShardRecords:
    """The newest cycle of one shard's work folder."""

    source: Path  # the work folder as given
    cycle_id: str
    cycles: int  # how many cycles with records the folder holds (the newest is merged)
    shard: str | None  # I/N, from shard.json
    items: dict[str, Item]
    run_log: list[dict[str, Any]]
    executions: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    files: list[str]  # the item files of the cycle folder, relative to it, with "/" between parts
    fingerprint: str = ""
    log_index: dict[tuple[Any, ...], dict[str, Any]] | None = None

    @property
    def folder(self) -> Path:
        return cycle_path(self.source, self.cycle_id)

    @property
    def attempts(self) -> int:
        return sum(len(item.attempts) for item in self.items.values())

    def label(self) -> str:
        return f"{self.source} (cycle {self.cycle_id}" + (f", shard {self.shard})" if self.shard else ")")


def read_shard(source: Path) -> ShardRecords | None:
    """The shard's newest cycle with records; None for a folder with no records (a shard that drew no item)."""
    if not source.is_dir():
        raise MergeRefused(f"{source}: no such folder (fix: give the work folders the shard jobs wrote, e.g. the "
                           "artifacts they uploaded)", ExitCode.NO_INPUT)
    reader = RecordReader(source)
    try:
        cycles = reader.cycles()
    except sqlite3.DatabaseError as exc:  # a damaged database: one line, never a traceback
        raise MergeRefused(f"{source}: harness.db cannot be read ({exc}) (fix: give the work folder as the shard "
                           "job wrote it)") from None
    if not cycles:
        return None
    cycle_id = cycles[-1]
    if not safe_cycle_name(cycle_id):
        raise MergeRefused(f"{source}: cycle {cycle_id!r} is not a cycle id (fix: give a work folder the harness "
                           "wrote)")
    folder = cycle_path(source, cycle_id)
    _refuse_if_running(source, folder, cycle_id)
    try:
        runs, details, loops = reader.cycle_rows(cycle_id)
    except sqlite3.DatabaseError as exc:
        raise MergeRefused(f"{source}: harness.db cannot be read ({exc}) (fix: give the work folder as the shard "
                           "job wrote it)") from None
    items: dict[str, Item] = {}
    for run in runs:
        detail = details.get(run["id"])
        if detail is None:
            continue  # a row without its details cannot be placed (never written so: one transaction writes both)
        if run["status"] == "running":  # the shard's session is gone: what reconciling it would have made
            run, detail = _interrupted(run, detail)
        items.setdefault(detail["nodeid"], Item(detail["nodeid"])).attempts.append(Attempt(run, detail))
    for loop in loops:
        items.setdefault(loop["nodeid"], Item(loop["nodeid"])).loop = loop
    try:
        run_log = [e for e in read_entries(folder / RUN_LOG_NAME) if isinstance(e, dict)]
    except HarnessConfigError as exc:
        raise MergeRefused(f"{source}: {exc.message()} (fix: merge the shard once its run-log.json is whole)") from None
    shard = _shard_of(folder)
    records = ShardRecords(source, cycle_id, len(cycles), shard, items, run_log,
                           read_json_lines(folder / EXECUTION_RESULTS_NAME), read_json_lines(trace_path(source, cycle_id)),
                           _item_files(folder))
    fingerprint(records)
    return records


def _refuse_if_running(source: Path, folder: Path, cycle_id: str) -> None:
    """A cycle a session still writes cannot be merged: its records are not whole yet."""
    if not (folder / ALIVE_LOCK).exists():
        return
    try:
        with shared_lock(folder / ALIVE_LOCK, shared=False, wait=False) as nobody_holds_it:
            alive = not nobody_holds_it
    except OSError:  # a folder we may not write to (a read-only copy): nobody runs there
        alive = False
    if alive:
        raise MergeRefused(f"{source}: cycle {cycle_id} is still being written by a running pytest session (fix: "
                           "merge once it has ended)", ExitCode.TEMP_FAIL)


def _interrupted(run: dict[str, Any], detail: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ``running`` row of a session that is gone, as reconciliation marks it (harness/records/reconcile.py)."""
    run = {**run, "status": "escalated", "overall_score": None, "feedback": INTERRUPTED_FEEDBACK,
           "dimension_scores": run.get("dimension_scores") or "{}", "suggested_fixes": run.get("suggested_fixes") or "[]"}
    return run, {**detail, "outcome": "interrupted", "exit_code": int(ExitCode.INCOMPLETE)}


def _shard_of(folder: Path) -> str | None:
    try:
        data = json.loads((folder / SHARD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    shard = data.get("shard") if isinstance(data, dict) else None
    return shard if isinstance(shard, str) else None


def _item_files(folder: Path) -> list[str]:
    """Every file of the cycle folder that belongs to an item (its artifacts, evaluations, handoffs, workspaces),
    sorted; the cycle's own files and leftover temporary files set aside."""
    found = []
    for directory, _, names in os.walk(folder):
        relative = Path(directory).relative_to(folder)
        for name in names:
            if (relative == Path(".") and name in CYCLE_FILES) or (name.startswith(".") and name.endswith(".tmp")):
                continue
            found.append((relative / name).as_posix())
    return sorted(found)


def fingerprint(records: ShardRecords) -> None:
    """Each item's fingerprint, and the shard's (over its items')."""
    neutral = Relocate(records.cycle_id, "{cycle}", "")
    for item in records.items.values():
        attempts = [[_without(a.run, _SET_ASIDE_RUN, neutral), _without(a.details, _SET_ASIDE_DETAILS, neutral)]
                    for a in sorted(item.attempts, key=lambda a: (a.run["attempt"], a.run["created_at"] or ""))]
        loop = _without(item.loop, ("cycle_id",), neutral) if item.loop is not None else None
        item.fingerprint = _digest([item.nodeid, attempts, loop])
    records.fingerprint = _digest(sorted(item.fingerprint for item in records.items.values()))


def _without(row: dict[str, Any], names: tuple[str, ...], neutral: Relocate) -> dict[str, Any]:
    kept = {}
    for name, value in sorted(row.items()):
        if name in names:
            continue
        if isinstance(value, str) and neutral.touches(value):
            try:
                value = neutral.value(json.loads(value))
            except ValueError:
                value = neutral.path_text(value)
        kept[name] = value
    return kept


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def run_log_entry(records: ShardRecords, attempt: Attempt) -> dict[str, Any]:
    """The run-log entry of an attempt: the shard's own (the same agent, attempt and file), else the one its row
    makes, as reconciliation restores a missing one (an attempt interrupted, or a kill before the append)."""
    if records.log_index is None:
        records.log_index = {(e.get("agent_name"), e.get("attempt"), e.get("artifact_path")): e
                             for e in records.run_log}
    found = records.log_index.get((attempt.run["agent_name"], attempt.run["attempt"], attempt.run["artifact_path"]))
    return found if found is not None else run_record(attempt.run).model_dump(mode="json")
