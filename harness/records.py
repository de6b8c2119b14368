"""Records: every attempt on disk (seed 000 section 5) and in SQLite (section 1).

``RecordStore`` is the one interface the rest of the harness uses to write or read records.
Writes are atomic: files go through a temp file and a rename, rows through SQLite transactions,
so a crash or Ctrl-C leaves every earlier record whole and the database consistent. Several
processes (pytest-xdist workers) may share one store: cycle ids and run-log.json updates are
serialised by a file lock, SQLite by its own locking.

Every process of a session holds a shared lock on its cycle's ``.alive.lock`` while its store is open,
so a later session can tell a cycle whose session is gone (killed, crashed) from one still running; the
first process of a new session finishes the records a gone session left half done (``reconcile``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.appendlog import read_entries
from harness.clock import utc_now
from harness.errors import ExitCode, HarnessConfigError
from harness.fileio import atomic_write_json, atomic_write_text, file_lock
from harness.redaction import redact, redact_json
from harness.models import EvaluatorOutput, RunRecord

DATABASE_NAME = "harness.db"
RUN_LOG_TAIL = b"\n]\n"
ALIVE_LOCK = ".alive.lock"  # runs/{cycle}/: shared-locked by every process of the cycle's session
RECONCILED_MARK = ".reconciled"  # runs/{cycle}/: its session is gone and its records were made whole
RECONCILIATION_FILE = "reconciliation.json"  # runs/{cycle}/: what the session that made the cycle reconciled
INTERRUPTED_FEEDBACK = ("interrupted: the session ended (killed or crashed) before this attempt finished; "
                        "it was never scored")

# Seed 000 section 1, verbatim: the columns, CHECK and indexes are a contract.
AGENT_RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  cycle_id TEXT NOT NULL,
  agent_name TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1,
  status TEXT NOT NULL CHECK (status IN ('running', 'passed', 'failed', 'escalated')),
  overall_score REAL,
  dimension_scores TEXT,
  feedback TEXT,
  suggested_fixes TEXT,
  artifact_path TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  duration_ms INTEGER,
  rubric_version TEXT
);
CREATE INDEX IF NOT EXISTS idx_agent_runs_cycle ON agent_runs(cycle_id);
CREATE INDEX IF NOT EXISTS idx_agent_runs_agent ON agent_runs(agent_name);
CREATE INDEX IF NOT EXISTS idx_agent_runs_status ON agent_runs(status);
"""

# What the seed has no column for (docs/design.md): one row per agent_runs row.
ATTEMPT_DETAILS_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempt_details (
  run_id INTEGER PRIMARY KEY REFERENCES agent_runs(id),
  nodeid TEXT NOT NULL,
  case_id TEXT NOT NULL,
  rubric_name TEXT NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN
    ('running', 'passed', 'failed', 'escalated', 'indeterminate', 'error', 'validation_failed', 'interrupted')),
  exit_code INTEGER NOT NULL DEFAULT 0,
  threshold REAL NOT NULL,
  model TEXT,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0,
  dimensions TEXT NOT NULL DEFAULT '{}',
  samples TEXT,
  cached_answers INTEGER NOT NULL DEFAULT 0,
  verdict TEXT  -- pytest's word for the item, on its final attempt: passed|failed|skipped|xfailed|xpassed
);
CREATE INDEX IF NOT EXISTS idx_attempt_details_rubric ON attempt_details(rubric_name);
"""


# The loop result of each item (seed 000 section 6), written when its loop ends.
LOOP_RESULTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS loop_results (
  cycle_id TEXT NOT NULL,
  nodeid TEXT NOT NULL,
  agent_name TEXT NOT NULL,
  case_id TEXT NOT NULL,
  result TEXT NOT NULL,  -- JSON: success, finalAttempt, finalScore, artifactPath, allRuns, escalated, escalationReason
  PRIMARY KEY (cycle_id, nodeid)
);
"""

# Columns added to attempt_details after its first release: a work folder from an older version gains them.
ADDED_DETAIL_COLUMNS = {"cached_answers": "INTEGER NOT NULL DEFAULT 0", "verdict": "TEXT"}


def _widen_outcome_check(conn: sqlite3.Connection) -> None:
    """A work folder from before outcome ``interrupted`` existed: rebuild attempt_details with today's CHECK
    (SQLite cannot alter a CHECK in place), keeping every row."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'attempt_details'"
                              ).fetchone()
        if "'interrupted'" not in sql:
            columns = ", ".join(row[1] for row in conn.execute("PRAGMA table_info(attempt_details)"))
            table, index = ATTEMPT_DETAILS_SCHEMA.split(";\n", 1)
            conn.execute(table.replace("IF NOT EXISTS attempt_details", "attempt_details_new"))
            conn.execute(f"INSERT INTO attempt_details_new ({columns}) SELECT {columns} FROM attempt_details")
            conn.execute("DROP TABLE attempt_details")
            conn.execute("ALTER TABLE attempt_details_new RENAME TO attempt_details")
            conn.execute(index)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    present = {row[1] for row in conn.execute("PRAGMA table_info(attempt_details)")}
    for name, declaration in ADDED_DETAIL_COLUMNS.items():
        if name not in present:
            try:
                conn.execute(f"ALTER TABLE attempt_details ADD COLUMN {name} {declaration}")
            except sqlite3.OperationalError as exc:  # another process of the session added it first
                if "duplicate column" not in str(exc):
                    raise


@dataclass(frozen=True)
class AttemptDetails:
    """The extension row of one attempt (``attempt_details``)."""

    nodeid: str
    case_id: str
    rubric_name: str
    threshold: float
    outcome: str = "running"
    exit_code: int = 0
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    dimensions: dict[str, Any] = field(default_factory=dict)
    samples: list[float] | None = None
    cached_answers: int = 0  # model answers replayed from the response cache (no call, no tokens, $0)


@dataclass(frozen=True)
class RunLocation:
    """Where one case's attempts live: ``runs/{cycle}/{agent}[/{case}]``."""

    cycle_id: str
    agent_name: str
    directory: Path

    def attempt_artifact(self, attempt: int) -> Path:
        return self.directory / f"attempt-{attempt}.md"

    def attempt_evaluation(self, attempt: int) -> Path:
        return self.directory / f"attempt-{attempt}.eval.json"

    @property
    def final(self) -> Path:
        return self.directory / "final.md"


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
    try:
        return str(json.loads((Path(work_dir) / "runs" / cycle_id / RECONCILIATION_FILE).read_text("utf-8"))["summary"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _safe_cycle_name(cycle_id: str) -> bool:
    return bool(cycle_id) and cycle_id not in (".", "..") and "/" not in cycle_id and "\\" not in cycle_id


class RecordStore:
    """Artifacts, run-log.json and the SQLite database under one work folder."""

    def __init__(self, work_dir: Path, root: Path | None = None):
        self.work_dir = Path(work_dir)
        self.root = Path(root) if root is not None else self.work_dir.parent
        self._root_text = str(self.root.resolve())
        self.runs_dir = self.work_dir / "runs"
        self.database = self.work_dir / DATABASE_NAME
        self._local = threading.local()
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._alive: dict[str, int] = {}  # cycle: descriptor holding the shared lock on its .alive.lock
        self.reconciliation = Reconciliation()  # what allocating this store's cycle reconciled


    # --- database --------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.database, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout = 30000")
            # WAL: readers never block the writer and commits are cheap; NORMAL keeps every
            # committed transaction across a process crash (only a power cut may lose the last ones).
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
            with self._schema_lock:
                if not self._schema_ready:
                    conn.executescript(f"BEGIN IMMEDIATE; {AGENT_RUNS_SCHEMA} {ATTEMPT_DETAILS_SCHEMA} "
                                       f"{LOOP_RESULTS_SCHEMA} COMMIT;")
                    _add_missing_columns(conn)
                    _widen_outcome_check(conn)
                    self._schema_ready = True
        return conn

    @staticmethod
    @contextmanager
    def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        for fd in self._alive.values():
            os.close(fd)  # releases the cycle's shared lock
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
            conn = self._connection()
            row = conn.execute("SELECT MAX(cycle_id) FROM agent_runs WHERE cycle_id LIKE ?", (f"{day}-%",)).fetchone()
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
        fd = os.open(self.runs_dir / cycle_id / ALIVE_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._alive[cycle_id] = fd

    # --- reconciliation ----------------------------------------------------------------------

    def reconcile(self) -> Reconciliation:
        """Make whole the records of every cycle whose session is gone.

        A session is gone when no process holds its cycle's ``.alive.lock`` (a killed process's lock goes
        with it; a running session, its xdist workers included, holds it). In such a cycle a ``running``
        row can never finish: it becomes ``escalated`` with outcome ``interrupted`` (exit code 3, score
        NULL). run-log.json is then made to agree with the database: the rows it lacks (an attempt
        interrupted, or a kill between the SQLite commit and the append) are appended in row order, in
        one atomic write. A reconciled cycle is marked ``.reconciled`` and never read again.
        """
        result = Reconciliation()
        if not self.database.exists():
            return result
        conn = self._connection()
        cycles = conn.execute("SELECT cycle_id, SUM(status = 'running') FROM agent_runs GROUP BY cycle_id"
                              " ORDER BY cycle_id").fetchall()
        for cycle_id, running in cycles:
            if cycle_id in self._alive or not _safe_cycle_name(cycle_id):
                continue
            folder = self.runs_dir / cycle_id
            if not running and (folder / RECONCILED_MARK).exists():
                continue
            with self._gone(folder) as gone:
                if gone:
                    try:
                        self._reconcile_cycle(conn, cycle_id, folder, result)
                    except (ValueError, OSError) as exc:  # a damaged row or file: say so, never stop the session
                        result.problems.append(f"cycle {cycle_id} could not be reconciled ({exc})")
        return result

    @contextmanager
    def _gone(self, folder: Path) -> Iterator[bool]:
        """True (holding the lock exclusively meanwhile) when no process of the cycle's session is alive."""
        if not folder.is_dir():
            yield True  # a cycle whose folder was removed: nobody can be writing it
            return
        fd = os.open(folder / ALIVE_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _reconcile_cycle(self, conn: sqlite3.Connection, cycle_id: str, folder: Path, result: Reconciliation) -> None:
        with self.transaction(conn):
            stale = [row[0] for row in conn.execute(
                "SELECT id FROM agent_runs WHERE cycle_id = ? AND status = 'running' ORDER BY id", (cycle_id,))]
            for run_id in stale:
                conn.execute("UPDATE agent_runs SET status = 'escalated', overall_score = NULL, feedback = ?,"
                             " dimension_scores = COALESCE(dimension_scores, '{}'),"
                             " suggested_fixes = COALESCE(suggested_fixes, '[]') WHERE id = ?",
                             (INTERRUPTED_FEEDBACK, run_id))
                conn.execute("UPDATE attempt_details SET outcome = 'interrupted', exit_code = ? WHERE run_id = ?",
                             (int(ExitCode.INCOMPLETE), run_id))
        if stale:
            result.interrupted[cycle_id] = len(stale)
        if not folder.is_dir():
            return
        records = [(row["id"], self._record_of(row)) for row in self.rows(
            "SELECT * FROM agent_runs WHERE cycle_id = ? ORDER BY id", (cycle_id,))]
        path = folder / "run-log.json"
        with file_lock(path.with_name(".run-log.lock")):
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
                body = ",\n".join(json.dumps(e, ensure_ascii=False) for e in [*entries, *missing])
                atomic_write_text(path, f"[\n{body}\n]\n")
        atomic_write_text(folder / RECONCILED_MARK, utc_now() + "\n")

    @staticmethod
    def _record_of(row: dict[str, Any]) -> RunRecord:
        return RunRecord(
            cycle_id=row["cycle_id"], agent_name=row["agent_name"], attempt=row["attempt"], status=row["status"],
            overall_score=row["overall_score"], dimension_scores=json.loads(row["dimension_scores"] or "{}"),
            feedback=row["feedback"] or "", suggested_fixes=json.loads(row["suggested_fixes"] or "[]"),
            artifact_path=row["artifact_path"] or "", created_at=row["created_at"], duration_ms=row["duration_ms"],
            rubric_version=row["rubric_version"])

    def location(self, cycle_id: str, agent_name: str, case_id: str | None) -> RunLocation:
        directory = self.runs_dir / cycle_id / agent_name
        if case_id is not None:
            directory = directory / case_id
        return RunLocation(cycle_id=cycle_id, agent_name=agent_name, directory=directory)

    # --- attempts --------------------------------------------------------------------------

    def start_attempt(self, where: RunLocation, attempt: int, rubric_version: str | None,
                      details: AttemptDetails, created_at: str | None = None) -> int:
        """Insert the attempt as ``running`` before any work, so a crash leaves a trace.

        ``created_at`` is when the attempt started (default: now); its RunRecord must carry the same value."""
        conn = self._connection()
        with self.transaction(conn):
            cursor = conn.execute(
                "INSERT INTO agent_runs (cycle_id, agent_name, attempt, status, artifact_path, created_at,"
                " rubric_version) VALUES (?, ?, ?, 'running', ?, ?, ?)",
                (where.cycle_id, where.agent_name, attempt, self.display_path(where.attempt_artifact(attempt)),
                 created_at or utc_now(), rubric_version),
            )
            run_id = cursor.lastrowid
            self._write_details(conn, run_id, details)
        return run_id

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
        path = where.attempt_artifact(attempt).with_suffix(".review.json")
        atomic_write_json(path, review)
        return path

    def write_loop_result(self, where: RunLocation, nodeid: str, case_id: str, result: dict[str, Any]) -> None:
        """The item's LoopResult (seed 000 section 6), a row of ``loop_results`` once its loop ends.

        A row, not a file per item: creating a file costs about a millisecond a case on a busy disk."""
        conn = self._connection()
        with self.transaction(conn):
            conn.execute("INSERT OR REPLACE INTO loop_results (cycle_id, nodeid, agent_name, case_id, result)"
                         " VALUES (?, ?, ?, ?, ?)", (where.cycle_id, nodeid, where.agent_name, case_id,
                                                     json.dumps(redact_json(result), ensure_ascii=False)))

    def loop_results(self, cycle_id: str) -> dict[str, dict[str, Any]]:
        """The loop results of a cycle, by item (nodeid)."""
        rows = self._connection().execute("SELECT nodeid, result FROM loop_results WHERE cycle_id = ?", (cycle_id,))
        return {nodeid: json.loads(text) for nodeid, text in rows}

    def write_final(self, where: RunLocation, attempt: int) -> Path:
        """``final.md``: the passing attempt (seed: symlink or copy). A hard link is a copy that costs
        nothing (attempt files are never rewritten) and, unlike a symlink, survives moving the folder."""
        source = where.attempt_artifact(attempt)
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
        conn = self._connection()
        with self.transaction(conn):
            conn.execute(
                "UPDATE agent_runs SET status = ?, overall_score = ?, dimension_scores = ?, feedback = ?,"
                " suggested_fixes = ?, artifact_path = ?, created_at = ?, duration_ms = ?, rubric_version = ?"
                " WHERE id = ?",
                (record.status, record.overall_score, json.dumps(record.dimension_scores),
                 None if record.feedback is None else redact(record.feedback),
                 json.dumps(redact_json(record.suggested_fixes)), record.artifact_path, record.created_at,
                 record.duration_ms, record.rubric_version, run_id),
            )
            self._write_details(conn, run_id, details)
        self.append_run_log(run_log, record)

    @staticmethod
    def _write_details(conn: sqlite3.Connection, run_id: int, d: AttemptDetails) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO attempt_details (run_id, nodeid, case_id, rubric_name, outcome, exit_code,"
            " threshold, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd,"
            " dimensions, samples, cached_answers) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, d.nodeid, d.case_id, d.rubric_name, d.outcome, d.exit_code, d.threshold, d.model,
             d.input_tokens, d.output_tokens, d.cache_write_tokens, d.cache_read_tokens, d.cost_usd,
             json.dumps(redact_json(d.dimensions)), json.dumps(d.samples) if d.samples is not None else None,
             d.cached_answers),
        )

    def record_verdict(self, cycle_id: str, nodeid: str, verdict: str) -> None:
        """pytest's verdict on an item, kept on its final attempt (what reports and history count)."""
        conn = self._connection()
        with self.transaction(conn):
            conn.execute(
                "UPDATE attempt_details SET verdict = ? WHERE run_id = (SELECT d.run_id FROM attempt_details d"
                " JOIN agent_runs r ON r.id = d.run_id WHERE r.cycle_id = ? AND d.nodeid = ?"
                " ORDER BY r.attempt DESC, r.id DESC LIMIT 1)", (verdict, cycle_id, nodeid))

    def display_path(self, path: Path) -> str:
        """How records name a file: relative to the project root, absolute when outside it."""
        relative = os.path.relpath(path, self._root_text)
        return str(path) if relative.startswith("..") else relative

    def run_log_path(self, cycle_id: str) -> Path:
        return self.runs_dir / cycle_id / "run-log.json"

    def append_run_log(self, path: Path, record: RunRecord) -> None:
        """Append one RunRecord to the cycle's run-log.json, a JSON array with one record per line.

        The append is one ``pwrite`` that replaces the closing ``]`` with the new line and a new
        ``]``: O(1) however long the cycle, and the file is the old array or the new one whatever
        happens to the process. (Against a power cut the SQLite row is the durable copy.) A file
        that is not in this layout is read whole and rewritten atomically; a malformed one is
        reported and never overwritten.
        """
        line = redact(json.dumps(redact_json(record.model_dump(mode="json")), ensure_ascii=False)).encode("utf-8")
        with file_lock(path.with_name(".run-log.lock")):
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                atomic_write_text(path, f"[\n{line.decode('utf-8')}\n]\n")
                return
            try:
                size = os.fstat(fd).st_size
                if size > len(RUN_LOG_TAIL) + 1 and os.pread(fd, len(RUN_LOG_TAIL), size - len(RUN_LOG_TAIL)) == RUN_LOG_TAIL:
                    os.pwrite(fd, b",\n" + line + RUN_LOG_TAIL, size - len(RUN_LOG_TAIL))
                    return
            finally:
                os.close(fd)
            entries = read_entries(path)  # raises, naming the file and line, when it is malformed
            entries.append(json.loads(line))
            body = ",\n".join(json.dumps(e, ensure_ascii=False) for e in entries)
            atomic_write_text(path, f"[\n{body}\n]\n")

    # --- reading ---------------------------------------------------------------------------

    def read_run_log(self, cycle_id: str) -> list[RunRecord]:
        return [RunRecord.model_validate(e) for e in read_entries(self.run_log_path(cycle_id))]

    def rows(self, sql: str = "SELECT * FROM agent_runs ORDER BY id", params: tuple = ()) -> list[dict[str, Any]]:
        if not self.database.exists():
            return []
        conn = self._connection()
        conn.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in conn.execute(sql, params)]
        finally:
            conn.row_factory = None

    def cycles(self) -> list[str]:
        return [row["cycle_id"] for row in self.rows("SELECT DISTINCT cycle_id FROM agent_runs ORDER BY cycle_id")]
