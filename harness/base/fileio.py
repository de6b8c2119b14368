"""Atomic writes, appends and inter-process locks: every record writer goes through here, and so through
the redaction filter (harness/base/redaction.py): nothing written here holds a secret.

The locks are the ``filelock`` library's, so they work alike on Linux, macOS and Windows: :func:`file_lock` (one
holder: ``flock`` on POSIX, ``LockFileEx`` on Windows, through ``filelock.lock_descriptor``) and
:func:`shared_lock` (readers and a writer: ``filelock.ReadWriteLock``, which is SQLite's own locking of a small
database file). Files are written in binary mode, so a record has the same bytes on every system."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock

from harness.base.redaction import redact, redacted_json

_temp_names = itertools.count()


def atomic_write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.

    The rename is atomic whatever happens to the process (crash, Ctrl-C, kill). ``durable`` also
    fsyncs the data first, which survives a power cut too but costs milliseconds per file. The file
    gets the permissions of any new file (0666 less the umask). Secrets in ``text`` are redacted.
    """
    data = redact(text).encode("utf-8")  # bytes: "\n" stays "\n" on Windows too
    fd, tmp = _create_temp(path)
    try:
        try:
            # os.write, not a file object: a text file adds four system calls (fstat, an isatty ioctl, two seeks),
            # each a moment another thread takes the GIL (benchmarks/README.md, "The harness against the bare SDK")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path``, named by process, thread and counter: unique without
    tempfile's random names, which cost more than the write itself for a small record."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        tmp = f"{path.parent}/.{path.name}.{os.getpid()}-{threading.get_ident()}-{next(_temp_names)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # left by a killed process that had the same pid
            continue
        except FileNotFoundError:  # the first file of a new folder
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(tmp, flags, 0o666), tmp


def atomic_write_json(path: Path, data: Any) -> None:
    # redacted as data first: a secret holding a quote or a backslash is escaped in the JSON text
    atomic_write_text(path, redacted_json(data, indent=2, ensure_ascii=False) + "\n")


def append_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Append ``text`` (and a newline, when it has none) to a log-like file, secrets redacted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write(redact(text if text.endswith("\n") else text + "\n"))
        if durable:
            handle.flush()
            os.fsync(handle.fileno())


@contextlib.contextmanager
def file_lock(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on ``path`` (created if missing) across processes, for the ``with`` block: one holder
    at a time (a writer of a shared file, the allocation of a cycle).

    ``wait=False`` does not wait for a holder: the block gets False at once, holding nothing, when another holds the
    lock; else True (with ``wait``, always True). The system lets the lock go when its holder dies, however it dies,
    so a killed process never leaves it taken. Locks belong to the open file, not the process: a second lock of the
    same file in the same process waits for the first like another process's would. A lock held past one block (as
    long as an object lives) is an ``ExitStack``'s ``enter_context(file_lock(...))``, let go by its ``close()``.

    The lock is ``filelock``'s native one on a descriptor of our own (``flock`` on POSIX, ``LockFileEx`` on
    Windows): about 10 microseconds, where a ``filelock.FileLock`` object costs some 300. A lock file is locked by
    this function or by :func:`shared_lock`, never both: the two kinds do not see each other.

    The threads of one process take turns on a lock of their own first, so that only one of them at a time polls
    the file's lock: 32 item threads appending to one run-log.json wait on that lock and are woken at once, where
    polling costs each of them sleeps, system calls and context switches."""
    turn = _process_turn(path)
    if not turn.acquire(blocking=wait):
        yield False
        return
    try:
        fd = _open_lock_file(path)
        try:
            if not _lock_descriptor(fd, wait):
                yield False
                return
            try:
                yield True
            finally:
                filelock.unlock_descriptor(fd)
        finally:
            os.close(fd)
    finally:
        turn.release()


def _open_lock_file(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        return os.open(path, flags, 0o666)
    except FileNotFoundError:  # its folder is made on first use only: a lock is taken for every record
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, flags, 0o666)


_turns: dict[str, threading.Lock] = {}
_turns_lock = threading.Lock()


def _process_turn(path: Path) -> threading.Lock:
    """This process's lock for the lock file ``path`` (one per file, for the life of the process: a session locks
    a handful of files)."""
    key = os.path.abspath(path)
    with _turns_lock:
        turn = _turns.get(key)
        if turn is None:
            turn = _turns[key] = threading.Lock()
        return turn


_POLL_FIRST_S, _POLL_MOST_S = 0.0005, 0.02  # a taken lock is tried again after 0.5 ms, backing off to 20 ms


def _lock_descriptor(fd: int, wait: bool) -> bool:
    """Take the lock on ``fd``; with ``wait``, poll until it is ours (filelock's portable lock has no blocking
    call on Windows), soon at first: records' locks are held for microseconds."""
    pause = _POLL_FIRST_S
    while not filelock.lock_descriptor(fd, blocking=False):
        if not wait:
            return False
        time.sleep(pause)
        pause = min(pause * 2, _POLL_MOST_S)
    return True


@contextlib.contextmanager
def shared_lock(path: Path, *, shared: bool = True, wait: bool = True) -> Iterator[bool]:
    """Hold a readers-writer lock on ``path`` across processes: any number of ``shared`` holders and no exclusive
    one, or one exclusive holder (``shared=False``) and nobody else. ``wait`` and the value the block gets are as
    :func:`file_lock`'s; so is the lifetime (the system lets go of a dead holder's lock) and an ``ExitStack`` holding
    it past one block. Each call is a holder of its own, as another process would be, whichever thread lets it go.

    What it is for: every process of a session holds its cycle's ``.alive.lock`` shared, and the next session tries
    it exclusively to learn that they are all gone (harness/records/reconcile.py). ``flock`` has shared locks,
    Windows' ``LockFileEx`` too, but ``filelock``'s portable native lock is exclusive only; its ``ReadWriteLock``
    keeps the semantics everywhere: the file is a small SQLite database, a shared holder keeps a read transaction
    open, an exclusive one an exclusive transaction, and SQLite's file locks (POSIX byte-range locks, ``LockFileEx``)
    go with the process. An ``.alive.lock`` left empty by an older version is an empty database to it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.ReadWriteLock(path, is_singleton=False)
    try:
        try:
            (lock.acquire_read if shared else lock.acquire_write)(blocking=wait)
        except filelock.Timeout:
            yield False
            return
        yield True
    finally:
        lock.close()  # lets go of the hold, from whichever thread closes it


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Hold Ctrl-C until the block ends, then raise it: a record is serialised and written whole or not at all.

    A KeyboardInterrupt raised inside a serialiser (pydantic's) would surface as some other error, and one raised
    between building a record and renaming its file would leave the state behind the work. Only the main thread
    receives signals; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: pending.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            raise KeyboardInterrupt
