"""Records: every attempt on disk (seed 000 section 5) and in SQLite (section 1).

One interface writes and reads them. :class:`RecordStore` is the session's (it writes, and reads back what it
wrote); :class:`RecordReader` is the read-only view the tracking commands use, running the same SQL.

Modules, one job each:

- ``layout``: where things live (``harness.db``, ``runs/{cycle}/{agent}[/{case}]/...``), :class:`RunLocation`;
- ``schema``: the tables' DDL, the migrations of older work folders, the :class:`AttemptDetails` row;
- ``database``: connections (the writer's, in WAL mode; a reader's, read-only) and transactions;
- ``runlog``: ``run-log.json``, the O(1) append and the read;
- ``execution-results.jsonl`` (a cycle's execution results, a line each): appended and read by the store;
- ``store``: :class:`RecordStore`: cycles, the liveness lock, writes of rows and artifacts;
- ``writer``: :class:`RecordWriter`, the event-stream sink that records each item's attempts through the store;
- ``reconcile``: the records of a killed session made whole by the next one;
- ``reader``: every SELECT, and :class:`RecordReader`;
- ``traces``: the execution trace (``traces/{cycle}.jsonl``): :class:`TraceSink` writes it, the readers and
  :func:`prune_traces` read and prune it; ``otel`` (imported on its own, the SDK being an extra): spans.
"""

from __future__ import annotations

from harness.records.layout import (
    ALIVE_LOCK,
    DATABASE_NAME,
    EXECUTION_RESULTS_NAME,
    RECONCILED_MARK,
    RECONCILIATION_FILE,
    RUN_LOG_NAME,
    RunLocation,
    database_path,
    execution_results_path,
    run_location,
    run_log_path,
    trace_path,
    traces_path,
)
from harness.records.reader import ATTEMPT_FIELDS, RecordReader
from harness.records.reconcile import INTERRUPTED_FEEDBACK, Reconciliation, reconciliation_note
from harness.records.runlog import RUN_LOG_TAIL
from harness.records.schema import (
    ADDED_DETAIL_COLUMNS,
    AGENT_RUNS_SCHEMA,
    ATTEMPT_DETAILS_SCHEMA,
    LOOP_RESULTS_SCHEMA,
    AttemptDetails,
)
from harness.records.store import RecordStore
from harness.records.traces import (
    TRACE_EVENTS,
    TraceRead,
    TraceSink,
    cycle_of,
    follow_trace,
    prune_traces,
    read_trace,
    trace_cycles,
)
from harness.records.writer import RecordWriter

__all__ = [
    "ADDED_DETAIL_COLUMNS", "AGENT_RUNS_SCHEMA", "ALIVE_LOCK", "ATTEMPT_DETAILS_SCHEMA", "ATTEMPT_FIELDS",
    "DATABASE_NAME", "EXECUTION_RESULTS_NAME", "INTERRUPTED_FEEDBACK", "LOOP_RESULTS_SCHEMA", "RECONCILED_MARK", "RECONCILIATION_FILE",
    "RUN_LOG_NAME", "RUN_LOG_TAIL", "TRACE_EVENTS", "AttemptDetails", "Reconciliation", "RecordReader", "RecordStore",
    "RecordWriter", "RunLocation", "TraceRead", "TraceSink",
    "cycle_of", "database_path", "execution_results_path", "follow_trace", "prune_traces", "read_trace", "reconciliation_note", "run_location",
    "run_log_path", "trace_cycles", "trace_path", "traces_path",
]
