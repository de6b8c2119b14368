"""``runs/{cycle}/run-log.json``: a JSON array of RunRecords, one per line, appended on every attempt.

Writers hold the file lock ``.run-log.lock`` beside it (several processes of a session share a cycle).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.base.appendlog import read_entries
from harness.base.fileio import atomic_write_text, file_lock
from harness.base.models import RunRecord
from harness.base.redaction import redact, redacted_json

RUN_LOG_TAIL = b"\n]\n"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the run-log's lock: one writer at a time, across processes."""
    with file_lock(path.with_name(".run-log.lock")):
        yield


def write_entries(path: Path, entries: Sequence[Any]) -> None:
    """Rewrite the whole array atomically, in the one-record-a-line layout :func:`append_run_log` extends."""
    body = ",\n".join(json.dumps(e, ensure_ascii=False) for e in entries)
    atomic_write_text(path, f"[\n{body}\n]\n")


def append_run_log(path: Path, *records: RunRecord) -> None:
    """Append RunRecords to the cycle's run-log.json, a JSON array with one record per line.

    The append is one write that replaces the closing ``]`` with the new lines and a new
    ``]``: O(1) however long the cycle, and the file is the old array or the new one whatever
    happens to the process. (Against a power cut the SQLite row is the durable copy.) A file
    that is not in this layout is read whole and rewritten atomically; a malformed one is
    reported and never overwritten.
    """
    encoded = [redact(redacted_json(record.model_dump(mode="json"), ensure_ascii=False)).encode("utf-8")
               for record in records]
    lines = b",\n".join(encoded)
    with locked(path):
        try:
            handle = open(path, "r+b", buffering=0)  # binary and unbuffered: one write, the same bytes on Windows
        except FileNotFoundError:
            atomic_write_text(path, f"[\n{lines.decode('utf-8')}\n]\n")
            return
        with handle:
            size = os.fstat(handle.fileno()).st_size
            tail = len(RUN_LOG_TAIL)
            if size > tail + 1:
                handle.seek(size - tail)
                if handle.read(tail) == RUN_LOG_TAIL:
                    handle.seek(size - tail)
                    _write_all(handle, b",\n" + lines + RUN_LOG_TAIL)
                    return
        entries = read_entries(path)  # raises, naming the file and line, when it is malformed
        entries.extend(json.loads(line) for line in encoded)
        write_entries(path, entries)


def _write_all(handle: Any, data: bytes) -> None:
    """Write all of ``data`` (an unbuffered file writes short only when the disk is full: the rest, or the error)."""
    view = memoryview(data)
    while view:
        view = view[handle.write(view):]


def read_run_log(path: Path) -> list[RunRecord]:
    """The cycle's RunRecords in the order they were appended; a missing file is an empty log."""
    return [RunRecord.model_validate(e) for e in read_entries(path)]
