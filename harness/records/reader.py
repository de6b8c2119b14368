"""The read side of the records: every SELECT the harness makes on ``harness.db``, and :class:`RecordReader`.

The ``select_*`` functions take a connection: :class:`~harness.records.store.RecordStore` runs them on its own
(read-write) connection, :class:`RecordReader` on a read-only one, so the session that writes and the commands
that read (``harness history``, ``report``, ``plot``, the compare gate) share one copy of the SQL.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from harness.base.jsonlines import read_json_lines
from harness.base.models import RunRecord
from harness.records.database import connect_read_only
from harness.records.layout import (
    RECONCILIATION_FILE,
    cycle_path,
    database_path,
    execution_results_path,
    run_log_path,
    runs_path,
)
from harness.records.runlog import read_run_log
from harness.records.schema import (
    ADDED_DETAIL_COLUMNS,
    decode_cost_known,
    decode_json,
    decode_model_usage,
    detail_columns,
    loop_columns,
)

T = TypeVar("T")

# The fields of one attempt as :func:`select_attempts` returns them (agent_runs joined with attempt_details).
ATTEMPT_FIELDS = (
    "run_id", "cycle_id", "agent_name", "attempt", "status", "overall_score", "feedback", "suggested_fixes",
    "artifact_path", "created_at", "duration_ms", "rubric_version", "nodeid", "case_id", "rubric_name", "outcome",
    "exit_code", "threshold", "model", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens",
    "cost_usd", "dimensions", "samples", "cached_answers", "verdict", "model_usage", "cost_known", "commands",
    "variant",
)

_ATTEMPTS_SQL = """
SELECT r.id AS run_id, r.cycle_id, r.agent_name, r.attempt, r.status, r.overall_score, r.feedback,
       r.suggested_fixes, r.artifact_path, r.created_at, r.duration_ms, r.rubric_version,
       d.nodeid, d.case_id, d.rubric_name, d.outcome, d.exit_code, d.threshold, d.model,
       d.input_tokens, d.output_tokens, d.cache_write_tokens, d.cache_read_tokens, d.cost_usd,
       d.dimensions, d.samples, {added}
FROM agent_runs AS r JOIN attempt_details AS d ON d.run_id = r.id
{where}
ORDER BY r.cycle_id, d.nodeid, r.attempt, r.id
"""
_CYCLES_FILTER = "WHERE r.cycle_id IN (SELECT value FROM json_each(?))"

_FINISHED_CYCLES_SQL = """
SELECT DISTINCT r.cycle_id FROM agent_runs AS r JOIN attempt_details AS d ON d.run_id = r.id
WHERE r.status != 'running' ORDER BY r.cycle_id
"""

_RUNS_OF_CYCLE_SQL = "SELECT * FROM agent_runs WHERE cycle_id = ? ORDER BY id"

_LOOP_RESULTS_SQL = "SELECT nodeid, result FROM loop_results WHERE cycle_id = ?"

_CASE_DATA_SQL = "SELECT nodeid, case_data FROM loop_results WHERE cycle_id = ? AND case_data IS NOT NULL"


def select_attempts(conn: sqlite3.Connection, cycles: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every attempt (only those of ``cycles`` when given), ordered by cycle, item, attempt; keys ATTEMPT_FIELDS.

    Decoded: ``dimensions`` a dict ``{dim: {score, weight, reason}}``, ``suggested_fixes`` a list, ``samples``
    a list of per-sample overall scores or None, ``model_usage`` a dict by model or None, ``cost_known`` a
    bool, ``commands`` a list of the attempt's command runs or None. A column an older database lacks reads as NULL (``cost_known`` as True)."""
    present = detail_columns(conn)
    added = ", ".join(f"d.{c}" if c in present else f"NULL AS {c}" for c in ADDED_DETAIL_COLUMNS)
    sql = _ATTEMPTS_SQL.format(added=added, where=_CYCLES_FILTER if cycles is not None else "")
    params = (json.dumps(list(cycles)),) if cycles is not None else ()
    cursor = conn.execute(sql, params)
    names = [column[0] for column in cursor.description]
    rows = []
    for values in cursor:
        row = dict(zip(names, values))
        row["dimensions"] = decode_json(row["dimensions"], {})
        row["suggested_fixes"] = decode_json(row["suggested_fixes"], [])
        row["samples"] = decode_json(row["samples"], None)
        row["model_usage"] = decode_model_usage(row["model_usage"])
        row["cost_known"] = decode_cost_known(row["cost_known"])
        row["commands"] = decode_json(row["commands"], None)
        rows.append(row)
    return rows


def select_finished_cycles(conn: sqlite3.Connection) -> list[str]:
    """The cycles with at least one finished attempt, oldest first."""
    return [cycle for (cycle,) in conn.execute(_FINISHED_CYCLES_SQL)]


def select_loop_results(conn: sqlite3.Connection, cycle_id: str) -> dict[str, dict[str, Any]]:
    """The loop results of a cycle, by item (nodeid)."""
    return {nodeid: json.loads(text) for nodeid, text in conn.execute(_LOOP_RESULTS_SQL, (cycle_id,))}


def select_case_data(conn: sqlite3.Connection, cycle_id: str, nodeid: str | None = None) -> dict[str, dict[str, Any]]:
    """What the cycle's items were given, by item (only ``nodeid``'s when given): ``inputs``, ``expected`` (the
    reference answer), ``description`` and ``cut`` (the fields cut to the size limit, each with its whole size in
    bytes; such a field holds the start of its JSON text). An item recorded without it, or by a version before the
    column, is absent."""
    if "case_data" not in loop_columns(conn):
        return {}
    sql, params = _CASE_DATA_SQL, (cycle_id,)
    if nodeid is not None:
        sql, params = sql + " AND nodeid = ?", (cycle_id, nodeid)
    out = {}
    for node, text in conn.execute(sql, params):
        data = decode_json(text, None)
        if isinstance(data, dict):
            out[node] = {"inputs": data.get("inputs"), "expected": data.get("expected"),
                         "description": data.get("description"), "cut": data.get("cut") or {}}
    return out


_CYCLE_RUNS_SQL = "SELECT * FROM agent_runs WHERE cycle_id = ? ORDER BY id"
_CYCLE_DETAILS_SQL = ("SELECT d.* FROM attempt_details AS d JOIN agent_runs AS r ON r.id = d.run_id"
                      " WHERE r.cycle_id = ? ORDER BY d.run_id")
_CYCLE_LOOPS_SQL = "SELECT * FROM loop_results WHERE cycle_id = ? ORDER BY nodeid"
_MERGED_SHARDS_SQL = "SELECT cycle_id, fingerprint, source, shard_cycle, items FROM merged_shards ORDER BY cycle_id"


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, values)) for values in cursor]


def select_cycle_rows(conn: sqlite3.Connection, cycle_id: str) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]],
                                                                       list[dict[str, Any]]]:
    """A cycle's rows as the database holds them, every column (an older database's fewer), JSON undecoded: its
    ``agent_runs`` in row order, their ``attempt_details`` by ``run_id``, its ``loop_results`` by node id
    (``harness merge`` copies them whole)."""
    runs = _dicts(conn.execute(_CYCLE_RUNS_SQL, (cycle_id,)))
    details = {row["run_id"]: row for row in _dicts(conn.execute(_CYCLE_DETAILS_SQL, (cycle_id,)))}
    return runs, details, _dicts(conn.execute(_CYCLE_LOOPS_SQL, (cycle_id,)))


def select_merged_shards(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """What ``harness merge`` made of which shards (``merged_shards``); empty where it never ran."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'merged_shards'").fetchone():
        return []
    return _dicts(conn.execute(_MERGED_SHARDS_SQL))


def select_used_cycles(conn: sqlite3.Connection, day: str) -> list[str]:
    """The cycle ids of ``day`` (``YYYY-MM-DD``) the database has rows of, finished or not."""
    return [cycle for (cycle,) in conn.execute("SELECT DISTINCT cycle_id FROM agent_runs WHERE cycle_id LIKE ?",
                                               (f"{day}-%",))]


def select_run_records(conn: sqlite3.Connection, cycle_id: str) -> list[tuple[int, RunRecord]]:
    """The cycle's ``agent_runs`` rows as RunRecords, with their row ids, in row order."""
    cursor = conn.execute(_RUNS_OF_CYCLE_SQL, (cycle_id,))
    names = [column[0] for column in cursor.description]
    return [(row["id"], run_record(row)) for row in (dict(zip(names, values)) for values in cursor)]


def run_record(row: dict[str, Any]) -> RunRecord:
    """An ``agent_runs`` row as the RunRecord it was written from."""
    return RunRecord(
        cycle_id=row["cycle_id"], agent_name=row["agent_name"], attempt=row["attempt"], status=row["status"],
        overall_score=row["overall_score"], dimension_scores=json.loads(row["dimension_scores"] or "{}"),
        feedback=row["feedback"] or "", suggested_fixes=json.loads(row["suggested_fixes"] or "[]"),
        artifact_path=row["artifact_path"] or "", created_at=row["created_at"], duration_ms=row["duration_ms"],
        rubric_version=row["rubric_version"])


def _open_read_only(database: Path) -> sqlite3.Connection:
    """A read-only connection that leaves the work folder as it was.

    SQLite opens a database in WAL mode with a ``-wal`` and a ``-shm`` file beside it, and a read-only connection
    cannot remove them when it closes. So a database no session has open (no ``-wal`` there) is opened immutable,
    which makes neither; one a session is writing (its ``-wal`` is there) is opened read-only in WAL mode and sees
    the writer's last committed transaction. Each read opens its own connection, so a session that starts later
    is seen by the next read."""
    if Path(f"{database}-wal").exists():
        return connect_read_only(database)
    return sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro&immutable=1", uri=True,
                           isolation_level=None)


class RecordReader:
    """The records of one work folder, read-only: what ``harness history``, ``report``, ``plot`` and the
    compare gate read.

    It never creates the database, the work folder or any file in it (a folder with no records reads as
    empty), never migrates an older database (a column it lacks reads as NULL), and reads while a session
    writes: each read sees the writer's last committed transaction and never blocks it (WAL).
    """

    def __init__(self, work_dir: Path):
        self.work_dir = Path(work_dir)
        self.database = database_path(self.work_dir)
        self.runs_dir = runs_path(self.work_dir)

    def exists(self) -> bool:
        """Whether the work folder holds a database."""
        return self.database.is_file()

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection | None]:
        """A read-only connection for the ``select_*`` functions; None when there is no database."""
        if not self.exists():
            yield None
            return
        with closing(_open_read_only(self.database)) as conn:
            yield conn

    def _read(self, select: Callable[[sqlite3.Connection], T], empty: T) -> T:
        with self.connect() as conn:
            if conn is None:
                return empty
            try:
                return select(conn)
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # a database whose first session has not made its tables yet
                    return empty
                raise

    def attempts(self, cycles: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every attempt (only those of ``cycles`` when given); see :func:`select_attempts`."""
        return self._read(lambda conn: select_attempts(conn, cycles), [])

    def cycles(self) -> list[str]:
        """The cycles with at least one finished attempt, oldest first."""
        return self._read(select_finished_cycles, [])

    def loop_results(self, cycle_id: str) -> dict[str, dict[str, Any]]:
        """The loop results of a cycle, by item (nodeid)."""
        return self._read(lambda conn: select_loop_results(conn, cycle_id), {})

    def case_data(self, cycle_id: str, nodeid: str | None = None) -> dict[str, dict[str, Any]]:
        """What the cycle's items were given (their inputs and reference answer), by item; see
        :func:`select_case_data`."""
        return self._read(lambda conn: select_case_data(conn, cycle_id, nodeid), {})

    def run_records(self, cycle_id: str) -> list[RunRecord]:
        """The cycle's RunRecords as the database holds them, in row order."""
        return [record for _, record in self._read(lambda conn: select_run_records(conn, cycle_id), [])]

    def run_log(self, cycle_id: str) -> list[RunRecord]:
        """The cycle's run-log.json; empty when it does not exist."""
        return read_run_log(run_log_path(self.work_dir, cycle_id))

    def execution_results(self, cycle_id: str) -> list[dict[str, Any]]:
        """The cycle's execution results (``execution-results.jsonl``), in the order they ended; empty when there
        are none."""
        return read_json_lines(execution_results_path(self.work_dir, cycle_id))

    def cycle_rows(self, cycle_id: str) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]],
                                               list[dict[str, Any]]]:
        """A cycle's rows, every column, JSON undecoded; see :func:`select_cycle_rows`."""
        return self._read(lambda conn: select_cycle_rows(conn, cycle_id), ([], {}, []))

    def merged_shards(self) -> list[dict[str, Any]]:
        """What ``harness merge`` made of which shards; see :func:`select_merged_shards`."""
        return self._read(select_merged_shards, [])

    def reconciliation_note(self, cycle_id: str) -> str | None:
        """The line saying what the session of ``cycle_id`` reconciled when it began, if it did anything."""
        try:
            note = json.loads((cycle_path(self.work_dir, cycle_id) / RECONCILIATION_FILE).read_text("utf-8"))
            return str(note["summary"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
