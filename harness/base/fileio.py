"""Atomic writes, appends and inter-process locks: every record writer goes through here, and so through
the redaction filter (harness/base/redaction.py): nothing written here holds a secret."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.base.redaction import redact, redact_json

_temp_names = itertools.count()


def atomic_write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.

    The rename is atomic whatever happens to the process (crash, Ctrl-C, kill). ``durable`` also
    fsyncs the data first, which survives a power cut too but costs milliseconds per file. The file
    gets the permissions of any new file (0666 less the umask). Secrets in ``text`` are redacted.
    """
    text = redact(text)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path``, named by process, thread and counter: unique without
    tempfile's random names, which cost more than the write itself for a small record."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
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
    atomic_write_text(path, json.dumps(redact_json(data), indent=2, ensure_ascii=False) + "\n")


def append_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Append ``text`` (and a newline, when it has none) to a log-like file, secrets redacted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(redact(text if text.endswith("\n") else text + "\n"))
        if durable:
            handle.flush()
            os.fsync(handle.fileno())


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False, wait: bool = True) -> Iterator[bool]:
    """Hold an advisory lock on ``path`` (created if missing) across processes, for the ``with`` block.

    Exclusive by default: one holder at a time (a writer). ``shared``: any number of shared holders and no
    exclusive one (each process of a session marking it alive). ``wait=False`` does not wait for a holder: the
    block gets False at once, holding nothing, when another holds the lock; else True (with ``wait``, always
    True). The kernel lets the lock go when its holder dies, however it dies, so a killed process never leaves
    it taken. Locks belong to the open file, not the process: a second lock of the same file in the same
    process waits for the first like another process's would. A lock held past one block (as long as an
    object lives) is an ``ExitStack``'s ``enter_context(file_lock(...))``, let go by its ``close()``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
