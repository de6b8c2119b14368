"""Append-only JSON-lines files: the execution trace and the execution results, written whole line by line.

A line is compact JSON with secrets redacted (:func:`json_line`). :class:`AppendOnlyFile` keeps the file open with
``O_APPEND`` and writes each batch of whole lines in one ``write``: the kernel moves the offset and writes in one
step, so processes sharing the file (pytest-xdist workers, two sessions of one cycle) never interleave within a
line (on a local filesystem; not so on NFS). Appending to an open file costs microseconds where creating a small
file costs about half a millisecond on a busy disk, which is why a record kept per item is a line, not a file.

A reader that meets a last line without its newline is reading while it is written, and leaves it for later
(:func:`whole_lines`).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from harness.base.redaction import Redactor, redact_json


def json_line(value: Any) -> bytes:
    """One line of a JSON-lines file: compact JSON, secrets redacted, a newline at the end; NaN and infinities
    (which JSON has no word for) as null."""
    text = _dumps(value)
    if Redactor().finds(text):  # the JSON text is scanned once; only a line that may hold a secret is walked
        text = _dumps(redact_json(value))
    return (text + "\n").encode("utf-8")


def encode_batch(values: Iterable[Any | None]) -> bytes:
    """Lines of a JSON-lines file, each as :func:`json_line` makes it (None values left out), checked for secrets
    once as a whole: only a batch that may hold one is redacted line by line."""
    kept = [value for value in values if value is not None]
    text = "".join(_dumps(value) + "\n" for value in kept)
    if Redactor().finds(text):
        return b"".join(json_line(value) for value in kept)
    return text.encode("utf-8")


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), default=str)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class AppendOnlyFile:
    """One append-only file, opened on the first write (its folder made then) and kept open until :meth:`close`
    (a later write opens it again). Thread-safe; each :meth:`write` lands whole at the end of the file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                                   | getattr(os, "O_BINARY", 0), 0o666)  # O_BINARY: Windows writes "\n" as is
            written = os.write(self._fd, data)
            while written < len(data):  # a regular file writes short only when full: the rest, or the error
                written += os.write(self._fd, data[written:])

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def whole_lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` for each line of ``handle`` that ends in a newline; a last line without one (being
    written as it is read) ends the iteration."""
    for number, raw in enumerate(handle, 1):
        if not raw.endswith(b"\n"):
            return
        yield number, raw


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file, in the order written ([] when it does not exist); a line that is not a
    JSON object, or is still being written, is left out."""
    found = []
    try:
        with open(path, "rb") as handle:
            for _, raw in whole_lines(handle):
                try:
                    value = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    found.append(value)
    except FileNotFoundError:
        return []
    return found
