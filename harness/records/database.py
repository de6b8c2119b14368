"""Connections to ``harness.db``: the writer's (WAL, tables made ready) and a reader's (read-only).

WAL: readers never block the writer and see its last committed transaction; commits are cheap. A read-only
connection (``mode=ro``) never creates the file and never changes the schema, so reading an older work folder
leaves it as it was.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.base.errors import HarnessConfigError

BUSY_TIMEOUT_S = 30.0


def connect_writer(database: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S,
                   check_same_thread: bool = True) -> sqlite3.Connection:
    """A read-write connection in WAL mode and autocommit (transactions are explicit: :func:`transaction`).

    Shared by every process of a session: the records' database and the response cache alike."""
    conn = sqlite3.connect(database, timeout=busy_timeout_s, isolation_level=None,
                           check_same_thread=check_same_thread)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        _switch_to_wal(conn, busy_timeout_s)
        # NORMAL keeps every committed transaction across a process crash (only a power cut may lose the last).
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _switch_to_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out another process that is switching the same new file.

    SQLite answers SQLITE_BUSY at once, without its busy handler, when two connections both hold a read lock
    and want the exclusive lock the switch needs (it breaks the deadlock by failing one); two pytest-xdist
    workers opening a fresh file meet exactly that. The switch is made once per file, so waiting is rare."""
    deadline = time.monotonic() + busy_timeout_s
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if getattr(err, "sqlite_errorcode", sqlite3.SQLITE_BUSY) & 0xFF != sqlite3.SQLITE_BUSY \
                    or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


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


class LazyDatabase:
    """A SQLite file of the work folder served by one connection behind a lock (thread-safe; other processes meet
    SQLite's own locking), opened on first use: a run that never writes to it creates no file, and a lookup in a
    missing file finds nothing. The response cache and the batch journal are such files.

    A failure to open or use it is one :class:`HarnessConfigError` naming the file: "cannot open the ``what`` (the
    error)", with ``fix``."""

    def __init__(self, path: Path | str, schema: Sequence[str], *, what: str, fix: str,
                 busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._schema = tuple(schema)
        self._what, self._fix = what, fix
        self._busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one block under the lock, the file made when it is the first use. A transaction the
        block left open is rolled back when it raises."""
        with self._lock:
            yield from self._lent(self._opened())

    @contextmanager
    def existing(self) -> Iterator[sqlite3.Connection | None]:
        """As :meth:`connection`, or None when there is no file yet (a lookup creates nothing)."""
        with self._lock:
            if self._conn is None and not self.path.exists():
                yield None
                return
            yield from self._lent(self._opened())

    def _opened(self) -> sqlite3.Connection:
        """The connection, opened (and the file and tables made) on first use; called with the lock held."""
        if self._conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = connect_writer(self.path, busy_timeout_s=self._busy_timeout_s, check_same_thread=False)
                for statement in self._schema:
                    conn.execute(statement)
            except (sqlite3.Error, OSError) as err:
                raise self.failure("open", err) from None
            self._conn = conn
        return self._conn

    def _lent(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        try:
            yield conn
        except BaseException as err:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(err, sqlite3.Error):
                raise self.failure("use", err) from None
            raise

    def failure(self, verb: str, err: BaseException) -> HarnessConfigError:
        return HarnessConfigError(self.path, None, f"cannot {verb} the {self._what} ({err})", self._fix)

    def close(self) -> None:
        """Close the connection (a later use opens it again)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
