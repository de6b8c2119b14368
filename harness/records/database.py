"""Connections to ``harness.db``: the writer's (WAL, tables made ready) and a reader's (read-only).

WAL: readers never block the writer and see its last committed transaction; commits are cheap. A read-only
connection (``mode=ro``) never creates the file and never changes the schema, so reading an older work folder
leaves it as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_S = 30.0


def connect_writer(database: Path) -> sqlite3.Connection:
    """A read-write connection in autocommit mode (transactions are explicit: :func:`transaction`)."""
    conn = sqlite3.connect(database, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    # NORMAL keeps every committed transaction across a process crash (only a power cut may lose the last ones).
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def connect_read_only(database: Path) -> sqlite3.Connection:
    """A read-only connection; raises ``sqlite3.OperationalError`` when the file does not exist."""
    conn = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                           isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``): committed whole or rolled back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
