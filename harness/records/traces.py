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
from harness.base.jsonlines import AppendOnlyFile, encode_batch
from harness.records.layout import TRACE_SUFFIX, trace_path, traces_path

TRACE_EVENTS = ("skill_invoked", "gate_checked", "execution_progress", "execution_complete", "handoff_attempted",
                "model_call")
DAY_S = 86_400.0
FLUSH_S = 0.2  # a line is in the file at most this long after its event (else at close)
FLUSH_EVENTS = 2048  # or once this many events wait


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


# --- the sink ------------------------------------------------------------------------------------------------


class TraceSink:
    """A sink of the event stream that appends the trace lines of one cycle to ``traces/{cycle}.jsonl``.

    Quick and thread-safe: the emitting thread only keeps the event (events are frozen, and what they carry is
    never changed once emitted); the lines are built, checked for secrets and written together, in one
    ``os.write``, at most :data:`FLUSH_S` after the first event waiting (or once :data:`FLUSH_EVENTS` wait, or at
    :meth:`close`). Building a batch on one thread costs about a third of building each line on the thread that
    emitted it, with 32 cases at once (benchmarks/README.md, "Execution traces"); one write a batch, not one a
    line, spares the GIL hand-offs of a write each. A batch is whole lines, and ``O_APPEND`` makes each write land
    whole at the end of the file, so processes sharing the file never interleave within a line. Batches are
    written in the order their events came. A failed write is raised to the next emitter, so the event stream
    reports it once and drops the sink; the run goes on.
    """

    def __init__(self, work_dir: Path, cycle_id: str):
        self.path = trace_path(work_dir, cycle_id)
        self._file = AppendOnlyFile(self.path)
        self._opened = False
        self._lock = threading.Lock()  # the events waiting, the timer, a failure
        self._flushing = threading.Lock()  # one batch at a time, in order
        self._pending: list[Event | dict[str, Any] | None] = []  # events, or their lines when built at once
        self._timer: threading.Timer | None = None
        self._failed: BaseException | None = None  # a write of the flushing thread, raised to the next emitter
        atexit.register(self.close)  # a session that never closes its sink still writes its last lines

    def __call__(self, event: Event) -> None:
        if type(event) not in _LINES:
            return
        with self._lock:
            if self._failed is not None:
                failed, self._failed = self._failed, None
                raise failed
            if not self._opened:  # opened by the first emitter, so that a trace that cannot be written says so
                self._file.write(b"")
                self._opened = True
            # an artifact's event carries its whole text: its line (a size and a path) is built now, not kept
            self._pending.append(trace_line(event) if isinstance(event, ArtifactProduced) else event)
            full = len(self._pending) >= FLUSH_EVENTS
            if not full and self._timer is None:
                self._timer = threading.Timer(FLUSH_S, self._flush_later)
                self._timer.daemon = True
                self._timer.start()
        if full:
            self._flush()

    def _flush_later(self) -> None:
        with self._lock:
            self._timer = None
        try:
            self._flush()
        except Exception as exc:  # noqa: BLE001 - raised to the next emitter; a timer's traceback would reach the terminal
            with self._lock:
                self._failed = exc

    def _flush(self) -> None:
        with self._flushing:
            with self._lock:
                events, self._pending = self._pending, []
            if events:
                self._file.write(encode_batch(e if e is None or isinstance(e, dict) else trace_line(e)
                                              for e in events))

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
            self._flush()
        except Exception as exc:  # noqa: BLE001 - its last lines are lost, said below
            failed = failed or exc
        finally:
            with self._flushing:
                self._file.close()
                self._opened = False
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
