"""The execution trace: the event stream as append-only JSON lines, one file per cycle (``traces/{cycle}.jsonl``).

Each line is ``{"ts": "2026-01-31T00:45:00.123Z", "event": "<name>", "data": {...}}``, the assessment document's
capture points: ``skill_invoked``, ``gate_checked``, ``execution_progress``, ``execution_complete``,
``handoff_attempted``, and ``model_call`` (each tied to its item by ``nodeid``). The shipped contract
``trace_line`` says which keys each event's data has.

What an event holds of inputs and outputs is decided once, by the :class:`~harness.base.capture.Capture` the
emitter used (inputs hashed by default, outputs summarised): the sink writes what the events carry and never an
artifact's text. Every line passes through the one redaction filter.

Writes are whole lines, whoever writes: the file is opened with ``O_APPEND`` and lines are written whole, a batch
of them in one ``write``, so xdist workers and two sessions sharing a cycle never interleave within a line (the
kernel moves the offset and writes in one step; tests/test_traces.py checks it with two processes; not so on NFS).
A line is in the file within :data:`FLUSH_S` of its event. A reader that meets a last line without its newline is
reading while it is written, and leaves it for later.

The same module reads them back (:func:`trace_cycles`, :func:`read_trace`, :func:`follow_trace`) for
``harness traces`` and the pandas loader, and prunes them (:func:`prune_traces`) after ``retention_days``.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.events import (
    ArtifactProduced,
    Event,
    ExecutionCompleted,
    ExecutionProgress,
    GateChecked,
    HandoffAttempted,
    ModelCalled,
    SkillInvoked,
)
from harness.base.redaction import Redactor, redact_json
from harness.records.layout import TRACE_SUFFIX, trace_path, traces_path

TRACE_EVENTS = ("skill_invoked", "gate_checked", "execution_progress", "execution_complete", "handoff_attempted",
                "model_call")
DAY_S = 86_400.0
FLUSH_S = 0.2  # a line is in the file at most this long after its event (else at close)
FLUSH_BYTES = 256 * 1024  # or once this much waits


_second: tuple[int, str] = (-1, "")  # the last second formatted: lines come many to a second


def timestamp(at: float) -> str:
    """``at`` (seconds since the epoch) as ISO 8601 in UTC with milliseconds and a Z."""
    global _second
    whole, millis = divmod(round(at * 1000), 1000)
    second, text = _second
    if second != whole:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second = (whole, text)
    return f"{text}.{millis:03d}Z"


# --- the data of each event ----------------------------------------------------------------------------------


def _skill_invoked(event: SkillInvoked) -> dict[str, Any]:
    return {"skill_id": event.skill_id, "version": event.version, "operator_type": event.operator_type,
            "input_summary": event.inputs, "context_size": event.context_size, "nodeid": event.nodeid,
            "attempt": event.attempt, "phase": event.phase}


def _gate_checked(event: GateChecked) -> dict[str, Any]:
    gate, details = event.gate, event.gate.get("details") or {}
    return {"gate_id": gate.get("gate"), "name": gate.get("name"), "passed": gate.get("passed"),
            "checked_at": gate.get("checked_at"), "checks_performed": details.get("checks_performed", []),
            "failures": details.get("failures", []), "remediation_attempted": event.remediation_attempted,
            "nodeid": event.nodeid, "attempt": event.attempt, "phase": event.phase}


def _progress(event: ExecutionProgress) -> dict[str, Any]:
    return {"phase_entered": event.phase_entered, "phase_exited": event.phase_exited,
            "artifacts_created": list(event.artifacts_created), "side_effects": list(event.side_effects),
            "nodeid": event.nodeid, "attempt": None}


def _artifact(event: ArtifactProduced) -> dict[str, Any]:
    """An attempt's artifact, as progress: the file it is kept in and its size, never its text."""
    where = [event.location.shown_artifact(event.attempt)] if event.location is not None else []
    return {"phase_entered": None, "phase_exited": None, "artifacts_created": where, "side_effects": [],
            "nodeid": event.nodeid, "attempt": event.attempt, "role": event.role, "chars": event.chars}


def _complete(event: ExecutionCompleted) -> dict[str, Any]:
    result = event.result
    outputs, diagnostics = result.get("outputs") or {}, result.get("diagnostics") or {}
    artifacts = [{key: a.get(key) for key in ("type", "path", "content_type", "size_bytes", "checksum")}
                 for a in outputs.get("artifacts", [])]
    return {"execution_id": result.get("execution_id"), "skill_id": result.get("skill_id"),
            "status": result.get("status"), "exit_code": result.get("exit_code"),
            "exit_meaning": result.get("exit_meaning"), "triage": result.get("triage"),
            "started_at": result.get("started_at"), "duration_ms": result.get("duration_ms"),
            "outputs_summary": {"primary": outputs.get("primary"), "artifacts": artifacts,
                                "side_effects": outputs.get("side_effects", [])},
            "errors": diagnostics.get("errors", []), "warnings": diagnostics.get("warnings", []),
            "retries": len(diagnostics.get("retries", [])),
            "gates": [{"gate": g.get("gate"), "name": g.get("name"), "passed": g.get("passed")}
                      for g in diagnostics.get("gates_passed", [])],
            "assessment": result.get("assessment"), "attempts": result.get("attempts"),
            "nodeid": event.nodeid, "phase": event.phase}


def _handoff(event: HandoffAttempted) -> dict[str, Any]:
    handoff = event.handoff
    artifacts = handoff.get("artifacts") or {}
    return {"from_phase": handoff.get("from_phase"), "to_phase": handoff.get("to_phase"),
            "artifacts_provided": artifacts.get("provided", []), "artifacts_missing": artifacts.get("missing", []),
            "validation_result": handoff.get("validation"), "accepted": handoff.get("accepted"),
            "rejection_reason": handoff.get("rejection_reason"), "remediation": handoff.get("remediation"),
            "nodeid": event.nodeid}


def _model_call(event: ModelCalled) -> dict[str, Any]:
    return {"model": event.model, "tokens": event.usage.as_dict(), "cost_usd": event.cost_usd,
            "cached": event.cached, "batched": event.batched, "duration_ms": round(event.duration_ms, 3),
            "nodeid": event.span}


_LINES: dict[type, tuple[str, Callable[[Any], dict[str, Any]]]] = {
    SkillInvoked: ("skill_invoked", _skill_invoked), GateChecked: ("gate_checked", _gate_checked),
    ExecutionProgress: ("execution_progress", _progress), ArtifactProduced: ("execution_progress", _artifact),
    ExecutionCompleted: ("execution_complete", _complete), HandoffAttempted: ("handoff_attempted", _handoff),
    ModelCalled: ("model_call", _model_call),
}


def trace_line(event: Event) -> dict[str, Any] | None:
    """The trace line of ``event`` (not yet redacted), or None for an event the trace does not keep."""
    found = _LINES.get(type(event))
    if found is None:
        return None
    name, data = found
    return {"ts": timestamp(event.at), "event": name, "data": data(event)}


def encode(line: dict[str, Any]) -> bytes:
    """One line of the file: compact JSON, secrets redacted, a newline at the end."""
    text = _dumps(line)
    if Redactor().finds(text):  # the JSON text is scanned once; only a line that may hold a secret is walked
        text = _dumps(redact_json(line))
    return (text + "\n").encode("utf-8")


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:  # NaN or infinity, which JSON has no word for: null
        return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), default=str)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# --- the sink ------------------------------------------------------------------------------------------------


class TraceSink:
    """A sink of the event stream that appends the trace lines of one cycle to ``traces/{cycle}.jsonl``.

    Quick and thread-safe: events of other kinds return at once; a line is built on the emitting thread and joins
    the lines waiting to be written, which go out together in one ``os.write`` at most :data:`FLUSH_S` after the
    first of them (or once :data:`FLUSH_BYTES` wait, or at :meth:`close`). One write a batch, not one a line: a
    write lets go of the GIL and wakes another thread; with 32 cases at once, a write a line cost about 0.1 ms of
    CPU a case (benchmarks/README.md, "Execution traces"), a write a batch next to nothing. A batch is whole lines, and ``O_APPEND`` makes each write land whole at the end of the file, so
    processes sharing the file never interleave within a line. A failed write is raised to the next emitter, so
    the event stream reports it once and drops the sink; the run goes on.
    """

    def __init__(self, work_dir: Path, cycle_id: str):
        self.path = trace_path(work_dir, cycle_id)
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._timer: threading.Timer | None = None
        self._failed: BaseException | None = None  # a write of the flushing thread, raised to the next emitter
        atexit.register(self.close)  # a session that never closes its sink still writes its last lines

    def __call__(self, event: Event) -> None:
        if type(event) not in _LINES:
            return
        line = trace_line(event)
        if line is None:
            return
        data = encode(line)
        with self._lock:
            if self._failed is not None:
                failed, self._failed = self._failed, None
                raise failed
            if self._fd is None:  # opened by the first emitter, so that a trace that cannot be written says so
                self._open_locked()
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes >= FLUSH_BYTES:
                self._flush_locked()
            elif self._timer is None:
                self._timer = threading.Timer(FLUSH_S, self._flush_later)
                self._timer.daemon = True
                self._timer.start()

    def _flush_later(self) -> None:
        with self._lock:
            self._timer = None
            try:
                self._flush_locked()
            except OSError as exc:  # raised to the next emitter; a timer's traceback would reach the terminal
                self._failed = exc

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending, self._pending_bytes = [], 0
        self._write_locked(data)

    def _open_locked(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        return self._fd

    def _write_locked(self, data: bytes) -> None:
        fd = self._open_locked()
        written = os.write(fd, data)
        while written < len(data):  # a regular file writes short only when full: the rest, or the error
            written += os.write(fd, data[written:])

    def close(self) -> None:
        """Write the lines waiting and close the file (a later event opens it again). Never raises: a trace that
        cannot be written is a warning, never a failed run."""
        atexit.unregister(self.close)
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            failed, self._failed = self._failed, None
            try:
                self._flush_locked()
            except OSError as exc:
                failed = failed or exc
            finally:
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
        if failed is not None:
            warnings.warn(f"harness: the execution trace {self.path} could not be written ({failed}); its last "
                          "lines are lost", stacklevel=2)


# --- reading -------------------------------------------------------------------------------------------------


@dataclass
class TraceRead:
    """What reading traces skipped: lines that are not a trace line (``path:line: problem``), and lines still
    being written when read."""

    bad: list[str] = field(default_factory=list)
    partial: int = 0


def trace_cycles(work_dir: Path) -> list[str]:
    """The cycles with a trace in ``work_dir``, oldest first."""
    folder = traces_path(work_dir)
    if not folder.is_dir():
        return []
    return sorted(cycle_of(p) for p in folder.iterdir() if p.name.endswith(TRACE_SUFFIX) and p.is_file())


def cycle_of(path: Path) -> str:
    """The cycle a trace file belongs to (its name without ``.jsonl``)."""
    return Path(path).name.removesuffix(TRACE_SUFFIX)


def parse_line(text: str) -> dict[str, Any] | str:
    """A trace line as a dict, or what is wrong with it."""
    try:
        line = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg}, column {exc.colno})"
    if not isinstance(line, dict) or not isinstance(line.get("event"), str) or not isinstance(line.get("data"), dict) \
            or not isinstance(line.get("ts"), str):
        return 'not a trace line (expected {"ts": ..., "event": ..., "data": {...}})'
    return line


def read_trace(path: Path, report: TraceRead | None = None) -> Iterator[dict[str, Any]]:
    """The lines of one trace file, in the order written; a line that is not a trace line is skipped and noted in
    ``report``, as is a last line still being written."""
    report = report if report is not None else TraceRead()
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.endswith(b"\n"):
                report.partial += 1
                break
            line = _kept(raw, f"{path}:{number}", report)
            if line is not None:
                yield line


def _kept(raw: bytes, where: str, report: TraceRead) -> dict[str, Any] | None:
    """A raw line as a trace line; None for a blank one, or a bad one (noted in ``report``)."""
    if not raw.strip():
        return None
    line = parse_line(raw.decode("utf-8", "replace"))
    if isinstance(line, str):
        report.bad.append(f"{where}: {line}")
        return None
    return line


def follow_trace(path: Path, *, poll_s: float = 0.2, stop: Callable[[], bool] = lambda: False,
                 report: TraceRead | None = None, from_start: bool = True) -> Iterator[dict[str, Any] | None]:
    """The lines of ``path`` as they are appended, like ``tail -f``: those there now (unless not ``from_start``),
    then each new one. Yields None after each quiet poll, so a caller can look elsewhere between lines; ends when
    ``stop()`` is true. A file not there yet is waited for."""
    report = report if report is not None else TraceRead()
    handle = None
    pending, number = b"", 0
    try:
        while not stop():
            if handle is None:
                try:
                    handle = open(path, "rb")
                except FileNotFoundError:
                    yield None
                    time.sleep(poll_s)
                    continue
                if not from_start:
                    handle.seek(0, os.SEEK_END)
            chunk = handle.read()
            if not chunk:
                yield None
                time.sleep(poll_s)
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                number += 1
                line = _kept(raw, f"{path}:{number}", report)
                if line is not None:
                    yield line
    finally:
        if handle is not None:
            handle.close()


# --- retention -----------------------------------------------------------------------------------------------


def prune_traces(work_dir: Path, retention_days: int | None, *, now: float | None = None,
                 keep: tuple[str, ...] = ()) -> list[Path]:
    """Delete the traces last written more than ``retention_days`` ago (None: keep every trace); return them.

    A trace's age is its file's modification time, which every appended line moves: the time of its newest line,
    known without reading it. A copy that lost its times looks new and is kept longer, never deleted early. The
    cycles in ``keep`` are never deleted."""
    folder = traces_path(work_dir)
    if retention_days is None or not folder.is_dir():
        return []
    cutoff = (time.time() if now is None else now) - retention_days * DAY_S
    deleted = []
    for path in sorted(folder.glob(f"*{TRACE_SUFFIX}")):
        if cycle_of(path) in keep:
            continue
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                deleted.append(path)
        except FileNotFoundError:  # another session pruned it first
            continue
    return deleted
