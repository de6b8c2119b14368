"""``RecordStore``: the session's writer of records (seed 000 sections 1 and 5), which reads back what it wrote.

Writes are atomic: files go through a temp file and a rename, rows through SQLite transactions, so a crash or
Ctrl-C leaves every earlier record whole and the database consistent. Several processes (pytest-xdist workers)
may share one store: cycle ids and run-log.json updates are serialised by a file lock, SQLite by its own
locking. Its reads run the read side's SQL (:mod:`harness.records.reader`) on its own connection.

Its SQLite connections are lent to one call at a time and kept for the next (:meth:`RecordStore._connection`), at
most :data:`MAX_CONNECTIONS` at once, not held by each thread: a connection costs about 300 KB, and a session with
``--harness-batch`` has thousands of item threads waiting on Message Batches, which all write at once when a batch
ends (2,000 threads held 600 MB in connections; SQLite lets one write at a time anyway).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness.base.clock import utc_now
from harness.base.fileio import atomic_write_json, atomic_write_text, file_lock, shared_lock
from harness.base.group_commit import GroupCommit
from harness.base.jsonlines import AppendOnlyFile, json_line, read_json_lines
from harness.base.models import EvaluatorOutput, RunRecord
from harness.base.redaction import redact, redacted_json
from harness.records import runlog
from harness.records.database import connect_writer
from harness.records.database import transaction as _transaction
from harness.records.layout import (
    ALIVE_LOCK,
    RECONCILIATION_FILE,
    RunLocation,
    database_path,
    execution_results_path,
    run_location,
    run_log_path,
    runs_path,
)
from harness.records.reader import select_loop_results
from harness.records.reconcile import Reconciliation, reconcile
from harness.records.schema import (
    DETAIL_WRITE_COLUMNS,
    AttemptDetails,
    detail_values,
    encode_case_data,
    ensure_schema,
)

MAX_CONNECTIONS = 8  # a call never borrows a second connection while it holds one: more would only wait for SQLite
_INSERT_DETAILS_SQL = (f"INSERT OR REPLACE INTO attempt_details ({', '.join(DETAIL_WRITE_COLUMNS)})"
                       f" VALUES ({', '.join('?' for _ in DETAIL_WRITE_COLUMNS)})")


T = TypeVar("T")


def _append_to_run_log(path: Path, records: Sequence[RunRecord]) -> list[None]:
    runlog.append_run_log(path, *records)
    return [None] * len(records)


class RecordStore:
    """Artifacts, run-log.json and the SQLite database under one work folder."""

    def __init__(self, work_dir: Path, root: Path | None = None):
        self.work_dir = Path(work_dir)
        self.root = Path(root) if root is not None else self.work_dir.parent
        self._root_text = str(self.root.resolve())
        self.runs_dir = runs_path(self.work_dir)
        self.database = database_path(self.work_dir)
        self._idle: list[sqlite3.Connection] = []  # connections no call is using
        self._pool_lock = threading.Lock()
        self._permits = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._transactions = GroupCommit(self._transaction_of)  # this process's writes (see _write)
        self._closed = False
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._alive: set[str] = set()  # the cycles whose .alive.lock this store holds shared
        self._held = contextlib.ExitStack()  # those locks, let go by close()
        self.reconciliation = Reconciliation()  # what allocating this store's cycle reconciled
        self._appended: dict[str, AppendOnlyFile] = {}  # each cycle's execution-results.jsonl, open while in use
        self._appended_lock = threading.Lock()
        self._run_log_appends: dict[str, GroupCommit[RunRecord, None]] = {}  # each run-log.json's appends

    # --- database --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A connection for one call: an idle one, else a new one; kept for the next call when it ends (as many
        connections as calls at once, up to :data:`MAX_CONNECTIONS`, not one per thread that ever wrote)."""
        with self._permits:
            with self._pool_lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                self.work_dir.mkdir(parents=True, exist_ok=True)
                conn = connect_writer(self.database, check_same_thread=False)
                with self._schema_lock:
                    if not self._schema_ready:
                        ensure_schema(conn)
                        self._schema_ready = True
            try:
                yield conn
            finally:
                with self._pool_lock:
                    keep = not self._closed and not conn.in_transaction
                    if keep:
                        self._idle.append(conn)
                if not keep:
                    conn.close()

    def _write(self, statements: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``statements(conn)`` in a write transaction; return what it returns once the transaction is committed.

        The writes of this process's threads go through one group commit (:mod:`harness.base.group_commit`): the
        writes queued while one transaction commits go into the next one together. So the threads take turns
        before SQLite sees them: it lets one connection write at a time, and one that finds the database taken
        retries in sleeps of 1 to 100 ms (its busy handler). Other processes of the session (xdist workers) still
        meet SQLite's own waiting. The turn is taken before the connection, so a writer never holds a connection
        that a reader waits for while it waits its turn."""
        return self._transactions(statements)

    def _transaction_of(self, group: Sequence[Callable[[sqlite3.Connection], Any]]) -> list[Any]:
        with self._connection() as conn, _transaction(conn):
            return [statements(conn) for statements in group]

    def close(self) -> None:
        with self._pool_lock:
            idle, self._idle = self._idle, []
            self._closed = True  # a connection still lent is closed when it comes back
        for conn in idle:
            conn.close()
        with self._appended_lock:
            appended, self._appended = list(self._appended.values()), {}
        for file in appended:
            file.close()
        self._held.close()  # lets the cycles' shared locks go
        self._alive.clear()

    # --- cycles ----------------------------------------------------------------------------

    def allocate_cycle(self, today: dt.date | None = None, session_token: str | None = None) -> str:
        """Take the next free ``YYYY-MM-DD-NNN`` for today; safe across processes.

        Processes of one pytest session (xdist workers) pass the same ``session_token`` and share
        the cycle the first of them took. Each holds the cycle's ``.alive.lock`` shared until it closes the
        store. The process that makes a new cycle first reconciles the cycles of sessions that are gone
        (:meth:`reconcile`) and notes what it did in the new cycle's ``reconciliation.json``.
        """
        day = (today or dt.datetime.now(dt.timezone.utc).date()).isoformat()
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.work_dir / ".cycle.lock"):
            existing = sorted(self.runs_dir.glob(f"{day}-[0-9][0-9][0-9]"))
            if session_token is not None:
                for folder in reversed(existing):
                    marker = folder / ".session"
                    if marker.is_file() and marker.read_text() == session_token:
                        self._hold(folder.name)
                        return folder.name
            used = [int(p.name[len(day) + 1:]) for p in existing]
            with self._connection() as conn:
                row = conn.execute("SELECT MAX(cycle_id) FROM agent_runs WHERE cycle_id LIKE ?",
                                   (f"{day}-%",)).fetchone()
            if row and row[0]:
                used.append(int(row[0][len(day) + 1:]))
            number = max(used, default=0) + 1
            cycle_id = f"{day}-{number:03d}"
            (self.runs_dir / cycle_id).mkdir()
            self._hold(cycle_id)
            if session_token is not None:
                atomic_write_text(self.runs_dir / cycle_id / ".session", session_token)
            self.reconciliation = self.reconcile()
            if self.reconciliation:
                atomic_write_json(self.runs_dir / cycle_id / RECONCILIATION_FILE, self.reconciliation.to_json())
            return cycle_id

    def _hold(self, cycle_id: str) -> None:
        """Take the cycle's shared liveness lock for as long as this store is open."""
        if cycle_id in self._alive:
            return
        self._held.enter_context(shared_lock(self.runs_dir / cycle_id / ALIVE_LOCK))
        self._alive.add(cycle_id)

    def reconcile(self) -> Reconciliation:
        """Make whole the records of every cycle whose session is gone (:func:`harness.records.reconcile.reconcile`).

        A session is gone when no process holds its cycle's ``.alive.lock`` (a killed process's lock goes
        with it; a running session, its xdist workers included, holds it)."""
        if not self.database.exists():
            return Reconciliation()
        with self._connection() as conn:
            return reconcile(conn, self.runs_dir, self._alive)

    def location(self, cycle_id: str, agent_name: str, case_id: str | None,
                 variant: str | None = None) -> RunLocation:
        where = run_location(self.work_dir, cycle_id, agent_name, case_id, variant)
        return dataclasses.replace(where, shown_directory=self.display_path(where.directory))

    # --- attempts --------------------------------------------------------------------------

    def start_attempt(self, where: RunLocation, attempt: int, rubric_version: str | None,
                      details: AttemptDetails, created_at: str | None = None) -> int:
        """Insert the attempt as ``running`` before any work, so a crash leaves a trace.

        ``created_at`` is when the attempt started (default: now); its RunRecord must carry the same value."""
        row = (where.cycle_id, where.agent_name, attempt, self.display_path(where.attempt_artifact(attempt)),
               created_at or utc_now(), rubric_version)
        columns = detail_values(details)  # encoded before the transaction, not while it holds the database

        def insert(conn: sqlite3.Connection) -> int:
            run_id = conn.execute("INSERT INTO agent_runs (cycle_id, agent_name, attempt, status, artifact_path,"
                                  " created_at, rubric_version) VALUES (?, ?, ?, 'running', ?, ?, ?)", row).lastrowid
            conn.execute(_INSERT_DETAILS_SQL, (run_id, *columns))
            return run_id

        return self._write(insert)

    def write_artifact(self, where: RunLocation, attempt: int, text: str) -> Path:
        path = where.attempt_artifact(attempt)
        atomic_write_text(path, text)
        return path

    def write_evaluation(self, where: RunLocation, attempt: int, evaluation: EvaluatorOutput) -> Path:
        path = where.attempt_evaluation(attempt)
        atomic_write_json(path, evaluation.model_dump(mode="json", exclude_none=False))
        return path

    def write_review(self, where: RunLocation, attempt: int, review: dict[str, Any]) -> Path:
        """``attempt-{n}.review.json``: the review contract's ReviewResult, for a review rubric."""
        path = where.attempt_review(attempt)
        atomic_write_json(path, review)
        return path

    def write_generation(self, where: RunLocation, attempt: int, result: dict[str, Any]) -> Path:
        """``attempt-{n}.generation.json``: the generation contract's GenerationResult, for a skill's structured
        generation (written atomically, through the redaction filter, as every record is)."""
        path = where.directory / f"attempt-{attempt}.generation.json"
        atomic_write_json(path, result)
        return path

    def append_execution_result(self, cycle_id: str, result: dict[str, Any]) -> None:
        """One execution result (of an item, or of a construct's phase), whatever its outcome: a line of the cycle's
        ``execution-results.jsonl``, written whole as the execution ends, through the redaction filter.

        A line, not a file per item: creating a small file costs about half a millisecond on a busy disk, an
        append to the open file microseconds (benchmarks/README.md, "The assessment layer")."""
        with self._appended_lock:
            file = self._appended.get(cycle_id)
            if file is None:
                file = self._appended[cycle_id] = AppendOnlyFile(execution_results_path(self.work_dir, cycle_id))
        file.write(json_line(result))

    def execution_results(self, cycle_id: str) -> list[dict[str, Any]]:
        """The cycle's execution results, in the order they ended."""
        return read_json_lines(execution_results_path(self.work_dir, cycle_id))

    def write_handoff(self, where: RunLocation, handoff: dict[str, Any]) -> Path:
        """``handoff-<from>-to-<to>.json``: a PhaseHandoff between two phases of a construct."""
        path = where.directory / f"handoff-{handoff['from_phase']}-to-{handoff['to_phase']}.json"
        atomic_write_json(path, handoff)
        return path

    def write_loop_result(self, where: RunLocation, nodeid: str, case_id: str, result: dict[str, Any],
                          case_data: dict[str, Any] | None = None) -> None:
        """The item's LoopResult (seed 000 section 6), a row of ``loop_results`` once its loop ends, with what the
        item was given (``case_data``: its inputs, reference answer and description; redacted, at most 64 KB).

        A row, not a file per item: creating a file costs about a millisecond a case on a busy disk."""
        row = (where.cycle_id, nodeid, where.agent_name, case_id, redacted_json(result, ensure_ascii=False),
               encode_case_data(case_data) if case_data is not None else None)
        self._write(lambda conn: conn.execute("INSERT OR REPLACE INTO loop_results (cycle_id, nodeid, agent_name,"
                                              " case_id, result, case_data) VALUES (?, ?, ?, ?, ?, ?)", row))

    def write_final(self, where: RunLocation, attempt: int) -> Path:
        """``final.md``: the passing attempt (seed: symlink or copy). A hard link is a copy that costs
        nothing (attempt files are never rewritten) and, unlike a symlink, survives moving the folder."""
        source = where.attempt_artifact(attempt)
        try:  # the item's first final.md: the link itself is atomic
            os.link(source, where.final)
            return where.final
        except OSError:  # one from an earlier run of the item in this cycle, or no hard links: a rename replaces it
            pass
        tmp = where.final.with_name(".final.md.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        try:
            os.link(source, tmp)
        except OSError:  # a filesystem without hard links
            shutil.copyfile(source, tmp)
        os.replace(tmp, where.final)
        return where.final

    def finish_attempt(self, run_id: int, record: RunRecord, details: AttemptDetails, run_log: Path) -> None:
        """Complete the attempt's row and append its RunRecord to the cycle's run-log.json.

        The row and the entry are one record: the row takes the record's ``created_at`` (the attempt's
        start, which the engine also gave :meth:`start_attempt`)."""
        row = (record.status, record.overall_score, json.dumps(record.dimension_scores),
               None if record.feedback is None else redact(record.feedback),
               redacted_json(record.suggested_fixes), record.artifact_path, record.created_at,
               record.duration_ms, record.rubric_version, run_id)
        columns = (run_id, *detail_values(details))

        def update(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE agent_runs SET status = ?, overall_score = ?, dimension_scores = ?, feedback = ?,"
                         " suggested_fixes = ?, artifact_path = ?, created_at = ?, duration_ms = ?,"
                         " rubric_version = ? WHERE id = ?", row)
            conn.execute(_INSERT_DETAILS_SQL, columns)

        self._write(update)
        self.append_run_log(run_log, record)

    def record_verdict(self, cycle_id: str, nodeid: str, verdict: str) -> None:
        """pytest's verdict on an item, kept on its final attempt (what reports and history count)."""
        self._write(lambda conn: conn.execute(
            "UPDATE attempt_details SET verdict = ? WHERE run_id = (SELECT d.run_id FROM attempt_details d"
            " JOIN agent_runs r ON r.id = d.run_id WHERE r.cycle_id = ? AND d.nodeid = ?"
            " ORDER BY r.attempt DESC, r.id DESC LIMIT 1)", (verdict, cycle_id, nodeid)))

    def display_path(self, path: Path) -> str:
        """How records name a file: relative to the project root, absolute when outside it."""
        relative = os.path.relpath(path, self._root_text)
        return str(path) if relative.startswith("..") else relative

    def run_log_path(self, cycle_id: str) -> Path:
        return run_log_path(self.work_dir, cycle_id)

    def append_run_log(self, path: Path, record: RunRecord) -> None:
        """Append one RunRecord to the cycle's run-log.json (:func:`harness.records.runlog.append_run_log`), with
        the records other threads append at the same moment: one lock and one write for them all (a group
        commit, :mod:`harness.base.group_commit`)."""
        key = str(path)
        with self._appended_lock:
            appends = self._run_log_appends.get(key)
            if appends is None:
                appends = self._run_log_appends[key] = GroupCommit(functools.partial(_append_to_run_log, path))
        appends(record)

    # --- reading back ----------------------------------------------------------------------

    def read_run_log(self, cycle_id: str) -> list[RunRecord]:
        return runlog.read_run_log(self.run_log_path(cycle_id))

    def loop_results(self, cycle_id: str) -> dict[str, dict[str, Any]]:
        """The loop results of a cycle, by item (nodeid)."""
        with self._connection() as conn:
            return select_loop_results(conn, cycle_id)

    def rows(self, sql: str = "SELECT * FROM agent_runs ORDER BY id", params: tuple = ()) -> list[dict[str, Any]]:
        """Rows of any query on this store's connection (tests and diagnostics); [] when there is no database."""
        if not self.database.exists():
            return []
        with self._connection() as conn:
            conn.row_factory = sqlite3.Row
            try:
                return [dict(row) for row in conn.execute(sql, params)]
            finally:
                conn.row_factory = None

    def cycles(self) -> list[str]:
        return [row["cycle_id"] for row in self.rows("SELECT DISTINCT cycle_id FROM agent_runs ORDER BY cycle_id")]
