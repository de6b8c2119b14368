"""Append-only JSON array files (seed 001's raw_data.json and events.json).

Several writers may append at once (xdist workers, parallel executors): each append holds a file
lock, reads the array, checks it, and replaces the file atomically. A crash leaves the old file or
the new one, never a truncated one. A malformed file is reported with its path and line and is never
overwritten, so nothing recorded earlier is lost.

The lock is ``<name>.lock`` beside the file; readers need no lock, because a file is only ever
replaced whole (``os.replace``), never written in place.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.base.errors import HarnessConfigError
from harness.base.fileio import atomic_write_json, file_lock

_FIX = "repair or move the file; the harness will not overwrite it"


def read_entries(path: Path) -> list[Any]:
    """Return the array stored at ``path`` ([] when the file does not exist yet or is empty).

    Raises ``HarnessConfigError`` naming ``path:line`` when the file is not a JSON array.
    """
    path = Path(path)
    try:
        data_bytes = path.read_bytes()
    except FileNotFoundError:
        return []
    try:
        text = data_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data_bytes[: exc.start].count(b"\n") + 1
        raise HarnessConfigError(f"{path}:{line}", None, f"not UTF-8 text (byte {exc.start})", _FIX) from None
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessConfigError(
            f"{path}:{exc.lineno}", None, f"malformed JSON ({exc.msg}, column {exc.colno})", _FIX,
        ) from None
    if not isinstance(data, list):
        line = text[: len(text) - len(text.lstrip())].count("\n") + 1
        raise HarnessConfigError(f"{path}:{line}", None,
                                 f"expected a top-level JSON array, found {type(data).__name__}", _FIX)
    return data


def append_entries(path: Path, entries: Iterable[Any]) -> int:
    """Append ``entries`` to the array at ``path``; return the new length.

    The whole append is one locked read-check-replace: concurrent writers never lose each
    other's entries, and a reader sees the array before or after the append, never half of it.
    Entries that are not JSON-serialisable raise ``TypeError`` before anything is written.
    """
    path = Path(path)
    new = list(entries)
    json.dumps(new)  # fail before taking the lock or touching the file
    with file_lock(path.with_name(path.name + ".lock")):
        data = read_entries(path)
        data.extend(new)
        atomic_write_json(path, data)
        _sync_directory(path.parent)
        return len(data)


def append_entry(path: Path, entry: Any) -> int:
    """Append one entry; see :func:`append_entries`."""
    return append_entries(path, [entry])


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (a power cut after ``os.replace`` keeps the new file)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
