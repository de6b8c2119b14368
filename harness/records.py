"""Records: every attempt on disk (seed 000 section 5) and in SQLite (section 1).

``RecordStore`` is the one interface the rest of the harness uses to write or read records.
Writes are atomic: files go through a temp file and a rename, rows through SQLite transactions,
so a crash or Ctrl-C leaves every earlier record whole and the database consistent. Several
processes (pytest-xdist workers) may share one store: cycle ids and run-log.json updates are
serialised by a file lock, SQLite by its own locking.
"""

from __future__ import annotations

import contextlib
import datetime as dt
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
from harness.fileio import atomic_write_json, atomic_write_text, file_lock
from harness.redaction import redact, redact_json
from harness.models import EvaluatorOutput, RunRecord

DATABASE_NAME = "harness.db"
RUN_LOG_TAIL = b"\n]\n"

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
    ('running', 'passed', 'failed', 'escalated', 'indeterminate', 'error', 'validation_failed')),
  exit_code INTEGER NOT NULL DEFAULT 0,
  threshold REAL NOT NULL,
  model TEXT,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0,
  dimensions TEXT NOT NULL DEFAULT '{}',
  samples TEXT
);
CREATE INDEX IF NOT EXISTS idx_attempt_details_rubric ON attempt_details(rubric_name);
"""


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
                    conn.executescript(f"BEGIN IMMEDIATE; {AGENT_RUNS_SCHEMA} {ATTEMPT_DETAILS_SCHEMA} COMMIT;")
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

    # --- cycles ----------------------------------------------------------------------------

    def allocate_cycle(self, today: dt.date | None = None, session_token: str | None = None) -> str:
        """Take the next free ``YYYY-MM-DD-NNN`` for today; safe across processes.

        Processes of one pytest session (xdist workers) pass the same ``session_token`` and share
        the cycle the first of them took.
        """
        day = (today or dt.datetime.now(dt.timezone.utc).date()).isoformat()
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.work_dir / ".cycle.lock"):
            existing = sorted(self.runs_dir.glob(f"{day}-[0-9][0-9][0-9]"))
            if session_token is not None:
                for folder in reversed(existing):
                    marker = folder / ".session"
                    if marker.is_file() and marker.read_text() == session_token:
                        return folder.name
            used = [int(p.name[len(day) + 1:]) for p in existing]
            conn = self._connection()
            row = conn.execute("SELECT MAX(cycle_id) FROM agent_runs WHERE cycle_id LIKE ?", (f"{day}-%",)).fetchone()
            if row and row[0]:
                used.append(int(row[0][len(day) + 1:]))
            number = max(used, default=0) + 1
            cycle_id = f"{day}-{number:03d}"
            (self.runs_dir / cycle_id).mkdir()
            if session_token is not None:
                atomic_write_text(self.runs_dir / cycle_id / ".session", session_token)
            return cycle_id

    def location(self, cycle_id: str, agent_name: str, case_id: str | None) -> RunLocation:
        directory = self.runs_dir / cycle_id / agent_name
        if case_id is not None:
            directory = directory / case_id
        return RunLocation(cycle_id=cycle_id, agent_name=agent_name, directory=directory)

    # --- attempts --------------------------------------------------------------------------

    def start_attempt(self, where: RunLocation, attempt: int, rubric_version: str | None,
                      details: AttemptDetails) -> int:
        """Insert the attempt as ``running`` before any work, so a crash leaves a trace."""
        conn = self._connection()
        with self.transaction(conn):
            cursor = conn.execute(
                "INSERT INTO agent_runs (cycle_id, agent_name, attempt, status, artifact_path, created_at,"
                " rubric_version) VALUES (?, ?, ?, 'running', ?, ?, ?)",
                (where.cycle_id, where.agent_name, attempt, self.display_path(where.attempt_artifact(attempt)), utc_now(),
                 rubric_version),
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
        """Complete the attempt's row and append its RunRecord to the cycle's run-log.json."""
        conn = self._connection()
        with self.transaction(conn):
            conn.execute(
                "UPDATE agent_runs SET status = ?, overall_score = ?, dimension_scores = ?, feedback = ?,"
                " suggested_fixes = ?, artifact_path = ?, duration_ms = ?, rubric_version = ? WHERE id = ?",
                (record.status, record.overall_score, json.dumps(record.dimension_scores),
                 None if record.feedback is None else redact(record.feedback),
                 json.dumps(redact_json(record.suggested_fixes)), record.artifact_path, record.duration_ms,
                 record.rubric_version, run_id),
            )
            self._write_details(conn, run_id, details)
        self.append_run_log(run_log, record)

    @staticmethod
    def _write_details(conn: sqlite3.Connection, run_id: int, d: AttemptDetails) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO attempt_details (run_id, nodeid, case_id, rubric_name, outcome, exit_code,"
            " threshold, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd,"
            " dimensions, samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, d.nodeid, d.case_id, d.rubric_name, d.outcome, d.exit_code, d.threshold, d.model,
             d.input_tokens, d.output_tokens, d.cache_write_tokens, d.cache_read_tokens, d.cost_usd,
             json.dumps(redact_json(d.dimensions)), json.dumps(d.samples) if d.samples is not None else None),
        )

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
