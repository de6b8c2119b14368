"""The batch journal: the Message Batches a run submitted and the requests each holds, in ``WORK/batches.db``.

A batch is paid for when it is submitted, and runs on the API's side for minutes or hours whatever the process
that submitted it does. So the moment the API returns a batch's id, :class:`~harness.llm.batching.Batcher` records
it here with every request it holds, each by its response cache key (:func:`harness.llm.cache.cache_key`: the
request exactly as sent, its endpoint and the caller's ``cache_extra``). A later run that makes the same request
finds it here and takes its answer from that batch instead of submitting it again: after Ctrl-C, a kill, a closed
laptop, or ``--harness-batch-submit``, which submits and ends without waiting.

Two tables (SQLite, WAL mode, shared by every thread and every pytest-xdist worker, opened on first use):

* ``batches``: the batch's id, the endpoint it went to, when, how many requests, and ``state``: ``submitted``
  until its results have been read, then ``read``;
* ``batch_requests``: (batch id, custom id) -> the request's key, and ``result``: the result's JSON when it was read
  before its request was made again (a result read while its request waits goes to it, and through the client to
  the response cache, and its row goes).

A row is removed once its answer has been handed to its request; a batch once it has no rows. Nothing here holds an
API key. Every write is one transaction, so a kill leaves each batch recorded whole or not at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.redaction import redact_json_text
from harness.records.database import LazyDatabase

__all__ = ["JOURNAL_FILE", "BatchJournal", "Recorded", "RecordedBatch"]

JOURNAL_FILE = "batches.db"
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS batches (
      id TEXT PRIMARY KEY,            -- the API's batch id
      endpoint TEXT NOT NULL,         -- the base URL it was submitted to
      submitted_at REAL NOT NULL,     -- unix time
      requests INTEGER NOT NULL,      -- how many requests it held
      state TEXT NOT NULL             -- submitted | read
    )""",
    """CREATE TABLE IF NOT EXISTS batch_requests (
      batch_id TEXT NOT NULL,
      custom_id TEXT NOT NULL,
      key TEXT NOT NULL,              -- the request's response cache key
      result TEXT,                    -- the result's JSON, read and not yet taken by its request
      PRIMARY KEY (batch_id, custom_id)
    )""",
    "CREATE INDEX IF NOT EXISTS batch_requests_key ON batch_requests (key)",
)
_CHUNK = 500  # rows per transaction when many are written at once


@dataclass(frozen=True)
class Recorded:
    """Where a request was submitted: its batch, its custom id there, and its result once read."""

    batch_id: str
    custom_id: str
    endpoint: str
    submitted_at: float
    state: str
    result: dict[str, Any] | None


@dataclass(frozen=True)
class RecordedBatch:
    """A batch the journal still holds requests of (:meth:`BatchJournal.pending`)."""

    batch_id: str
    endpoint: str
    submitted_at: float
    requests: int  # rows left: requests not yet answered in a run
    results: int  # of those, results already read from the API


class BatchJournal:
    """The journal at ``path``; thread-safe and process-safe. Opened on first write, so a run that submits no batch
    creates no file, and a lookup in a missing file finds nothing."""

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._database = LazyDatabase(self.path, _SCHEMA, what="batch journal",
                                      fix="delete the file to forget the batches it records; they are then "
                                          "submitted again", busy_timeout_s=busy_timeout_s)

    def __repr__(self) -> str:
        return f"BatchJournal({str(self.path)!r})"

    def record(self, batch_id: str, endpoint: str, entries: Iterable[tuple[str, str]]) -> None:
        """Record a batch just submitted and its requests, ``(custom_id, key)`` pairs, in one transaction."""
        rows = [(batch_id, custom_id, key) for custom_id, key in entries]
        with self._database.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR REPLACE INTO batches (id, endpoint, submitted_at, requests, state) "
                         "VALUES (?, ?, ?, ?, 'submitted')", (batch_id, endpoint, time.time(), len(rows)))
            conn.executemany("INSERT OR REPLACE INTO batch_requests (batch_id, custom_id, key) VALUES (?, ?, ?)", rows)
            conn.execute("COMMIT")

    def find(self, key: str) -> Recorded | None:
        """Where the request of ``key`` was submitted (a row with its result first, else the latest batch)."""
        return self._one("r.key = ?", (key,))

    def row(self, batch_id: str, custom_id: str) -> Recorded | None:
        return self._one("r.batch_id = ? AND r.custom_id = ?", (batch_id, custom_id))

    def _one(self, where: str, params: tuple[str, ...]) -> Recorded | None:
        with self._database.existing() as conn:
            if conn is None:
                return None
            row = conn.execute(
                "SELECT r.batch_id, r.custom_id, b.endpoint, b.submitted_at, b.state, r.result FROM batch_requests r "
                f"JOIN batches b ON b.id = r.batch_id WHERE {where} "
                "ORDER BY r.result IS NULL, b.submitted_at DESC LIMIT 1", params).fetchone()
        if row is None:
            return None
        try:
            result = json.loads(row[5]) if row[5] is not None else None
        except ValueError:
            result = None
        return Recorded(str(row[0]), str(row[1]), str(row[2]), float(row[3]), str(row[4]),
                        result if isinstance(result, dict) else None)

    def keep(self, batch_id: str, results: Iterable[tuple[str, str]]) -> None:
        """Store results read before their requests were made again: ``(custom_id, result JSON)`` pairs, secrets
        redacted (a model may repeat one it was shown) as in every record."""
        self._chunked("UPDATE batch_requests SET result = ? WHERE batch_id = ? AND custom_id = ?",
                      [(redact_json_text(text), batch_id, custom_id) for custom_id, text in results])

    def take(self, batch_id: str, custom_ids: Iterable[str]) -> None:
        """Forget requests whose answers were handed to them."""
        self._chunked("DELETE FROM batch_requests WHERE batch_id = ? AND custom_id = ?",
                      [(batch_id, custom_id) for custom_id in custom_ids])

    def _chunked(self, sql: str, rows: list[tuple[str, ...]]) -> None:
        if not rows:
            return
        with self._database.connection() as conn:
            for start in range(0, len(rows), _CHUNK):
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(sql, rows[start:start + _CHUNK])
                conn.execute("COMMIT")

    def finish(self, batch_id: str) -> int:
        """The batch's results are read whole: mark it ``read`` and drop the rows without a stored result (answered,
        or with no answer to keep); drop the batch once no row is left. Returns the rows left."""
        with self._database.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM batch_requests WHERE batch_id = ? AND result IS NULL", (batch_id,))
            left = int(conn.execute("SELECT COUNT(*) FROM batch_requests WHERE batch_id = ?",
                                    (batch_id,)).fetchone()[0])
            if left:
                conn.execute("UPDATE batches SET state = 'read' WHERE id = ?", (batch_id,))
            else:
                conn.execute("DELETE FROM batches WHERE id = ?", (batch_id,))
            conn.execute("COMMIT")
        return left

    def forget(self, batch_id: str) -> None:
        """Drop a batch and every request of it (one the API no longer knows)."""
        with self._database.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM batch_requests WHERE batch_id = ?", (batch_id,))
            conn.execute("DELETE FROM batches WHERE id = ?", (batch_id,))
            conn.execute("COMMIT")

    def pending(self) -> list[RecordedBatch]:
        """The batches that still hold requests, oldest first."""
        with self._database.existing() as conn:
            if conn is None:
                return []
            rows = conn.execute(
                "SELECT b.id, b.endpoint, b.submitted_at, COUNT(r.custom_id), COUNT(r.result) FROM batches b "
                "JOIN batch_requests r ON r.batch_id = b.id GROUP BY b.id ORDER BY b.submitted_at, b.id").fetchall()
        return [RecordedBatch(str(r[0]), str(r[1]), float(r[2]), int(r[3]), int(r[4])) for r in rows]

    def close(self) -> None:
        """Close the connection (a later use opens it again)."""
        self._database.close()
