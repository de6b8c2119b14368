"""Reconciliation: the records a killed or crashed session left half done, made whole by the next session.

Every process of a session holds a shared lock on its cycle's ``.alive.lock`` while its store is open; the
kernel drops it when the process dies, however it dies. A cycle whose lock nobody holds belongs to a session
that is gone: its ``running`` rows can never finish, and its run-log.json may lack rows the database has.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.appendlog import read_entries
from harness.base.clock import utc_now
from harness.base.errors import ExitCode, HarnessConfigError
from harness.base.fileio import atomic_write_text, shared_lock
from harness.records.database import transaction
from harness.records.layout import ALIVE_LOCK, RECONCILED_MARK, RUN_LOG_NAME, safe_cycle_name
from harness.records.reader import RecordReader, select_run_records
from harness.records.runlog import locked, write_entries

INTERRUPTED_FEEDBACK = ("interrupted: the session ended (killed or crashed) before this attempt finished; "
                        "it was never scored")

_CYCLES_SQL = "SELECT cycle_id, SUM(status = 'running') FROM agent_runs GROUP BY cycle_id ORDER BY cycle_id"
_STALE_SQL = "SELECT id FROM agent_runs WHERE cycle_id = ? AND status = 'running' ORDER BY id"
_INTERRUPT_RUN_SQL = ("UPDATE agent_runs SET status = 'escalated', overall_score = NULL, feedback = ?,"
                      " dimension_scores = COALESCE(dimension_scores, '{}'),"
                      " suggested_fixes = COALESCE(suggested_fixes, '[]') WHERE id = ?")
_INTERRUPT_DETAILS_SQL = "UPDATE attempt_details SET outcome = 'interrupted', exit_code = ? WHERE run_id = ?"


@dataclass
class Reconciliation:
    """What :meth:`RecordStore.reconcile` did to the cycles of sessions that are gone."""

    interrupted: dict[str, int] = field(default_factory=dict)  # cycle: attempts marked interrupted
    restored: dict[str, int] = field(default_factory=dict)  # cycle: finished attempts run-log.json lacked
    problems: list[str] = field(default_factory=list)  # what could not be made whole, and why

    def __bool__(self) -> bool:
        return bool(self.interrupted or self.restored or self.problems)

    def summary(self) -> str:
        """One line for the terminal."""
        parts = []
        marked = sum(self.interrupted.values())
        if marked:
            parts.append(f"{marked} attempt{'s' * (marked != 1)} of an interrupted session marked interrupted "
                         f"(cycle {', '.join(sorted(self.interrupted))})")
        restored = sum(self.restored.values())
        if restored:
            parts.append(f"{restored} finished attempt{'s' * (restored != 1)} missing from run-log.json restored "
                         f"from the database (cycle {', '.join(sorted(self.restored))})")
        parts.extend(self.problems)
        return "harness: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"reconciled_at": utc_now(), "interrupted": self.interrupted, "restored": self.restored,
                "problems": self.problems, "summary": self.summary()}


def reconciliation_note(work_dir: Path, cycle_id: str) -> str | None:
    """The line saying what the session of ``cycle_id`` reconciled when it began, if it did anything."""
    return RecordReader(work_dir).reconciliation_note(cycle_id)


def reconcile(conn: sqlite3.Connection, runs_dir: Path, alive: Container[str]) -> Reconciliation:
    """Make whole the records of every cycle whose session is gone (``alive``: the cycles this process holds).

    In such a cycle a ``running`` row becomes ``escalated`` with outcome ``interrupted`` (exit code 3, score
    NULL). run-log.json is then made to agree with the database: the rows it lacks (an attempt interrupted,
    or a kill between the SQLite commit and the append) are appended in row order, in one atomic write. A
    reconciled cycle is marked ``.reconciled`` and never read again.
    """
    result = Reconciliation()
    for cycle_id, running in conn.execute(_CYCLES_SQL).fetchall():
        if cycle_id in alive or not safe_cycle_name(cycle_id):
            continue
        folder = runs_dir / cycle_id
        if not running and (folder / RECONCILED_MARK).exists():
            continue
        with _gone(folder) as gone:
            if gone:
                try:
                    _reconcile_cycle(conn, cycle_id, folder, result)
                except (ValueError, OSError) as exc:  # a damaged row or file: say so, never stop the session
                    result.problems.append(f"cycle {cycle_id} could not be reconciled ({exc})")
    return result


@contextmanager
def _gone(folder: Path) -> Iterator[bool]:
    """True (holding the lock exclusively meanwhile) when no process of the cycle's session is alive."""
    if not folder.is_dir():
        yield True  # a cycle whose folder was removed: nobody can be writing it
        return
    with shared_lock(folder / ALIVE_LOCK, shared=False, wait=False) as nobody_holds_it:
        yield nobody_holds_it


def _reconcile_cycle(conn: sqlite3.Connection, cycle_id: str, folder: Path, result: Reconciliation) -> None:
    with transaction(conn):
        stale = [row[0] for row in conn.execute(_STALE_SQL, (cycle_id,))]
        for run_id in stale:
            conn.execute(_INTERRUPT_RUN_SQL, (INTERRUPTED_FEEDBACK, run_id))
            conn.execute(_INTERRUPT_DETAILS_SQL, (int(ExitCode.INCOMPLETE), run_id))
    if stale:
        result.interrupted[cycle_id] = len(stale)
    if not folder.is_dir():
        return
    records = select_run_records(conn, cycle_id)
    path = folder / RUN_LOG_NAME
    with locked(path):
        try:
            entries = read_entries(path)
        except HarnessConfigError as exc:
            result.problems.append(f"{exc} (its cycle's records were not compared)")
            return
        logged: dict[tuple[Any, ...], int] = {}
        for entry in entries:
            if isinstance(entry, dict):
                key = (entry.get("agent_name"), entry.get("attempt"), entry.get("artifact_path"))
                logged[key] = logged.get(key, 0) + 1
        missing = []
        for run_id, record in records:
            key = (record.agent_name, record.attempt, record.artifact_path)
            if logged.get(key):
                logged[key] -= 1
            else:
                missing.append(record.model_dump(mode="json"))
                if run_id not in stale:  # an interrupted attempt was never in it; a finished one was lost
                    result.restored[cycle_id] = result.restored.get(cycle_id, 0) + 1
        if missing:
            write_entries(path, [*entries, *missing])
    atomic_write_text(folder / RECONCILED_MARK, utc_now() + "\n")
