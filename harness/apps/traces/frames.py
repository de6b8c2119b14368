"""Execution traces as pandas frames: every line (:func:`traces_frame`), and one row per execution with its gates
(:func:`executions_frame`), so that a score can be computed after the fact from what the runs captured."""

from __future__ import annotations

import glob
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.apps.tracking.cli import find_work_dir
from harness.records import TraceRead, cycle_of, read_trace, traces_path

LINE_COLUMNS = ["ts", "cycle", "event", "nodeid", "phase", "attempt", "exit_code", "status", "gate", "passed", "model",
                "data"]
GATES = (0, 1, 2, 3, 4)
EXECUTION_COLUMNS = ["execution_id", "cycle", "nodeid", "phase", "skill_id", "status", "exit_code", "triage",
                     "started_at", "completed_at", "duration_ms", "attempts", "score", "confidence", "goal_statement",
                     "evidence", "human_review_requested", *(f"gate_{n}" for n in GATES), "gates", "errors",
                     "warnings", "model_calls", "input_tokens", "output_tokens", "cost_usd"]


def trace_files(paths_or_globs: str | Path | Iterable[str | Path] | None, work_dir: Path | None = None) -> list[Path]:
    """The trace files named: paths or globs (``2026-01-*.jsonl``), each relative to ``work_dir``'s ``traces/``
    when a work folder is given; else to the current folder, then to the nearest ``WORK/traces`` when nothing
    there matches. None: every trace of the work folder. Sorted, each once."""
    if paths_or_globs is None:
        paths_or_globs = ["*.jsonl"]
    elif isinstance(paths_or_globs, (str, Path)):
        paths_or_globs = [paths_or_globs]
    bases = [traces_path(work_dir)] if work_dir is not None else [Path.cwd(), traces_path(find_work_dir()[0])]
    found: set[Path] = set()
    for pattern in map(str, paths_or_globs):
        for base in bases:
            matches = [Path(p) for p in glob.glob(str(base / pattern)) if Path(p).is_file()]
            if matches:
                found.update(p.resolve() for p in matches)
                break
    return sorted(found)


def traces_frame(paths_or_globs: str | Path | Iterable[str | Path] | None = None,
                 work_dir: Path | None = None, *, report: TraceRead | None = None) -> pd.DataFrame:
    """One row per trace line of the files named (see :func:`trace_files`), in the order written, file by file.

    Columns: ``ts`` (UTC), ``cycle``, ``event``, ``nodeid``, ``phase``, ``attempt``, ``exit_code`` and ``status``
    (an ``execution_complete``), ``gate`` and ``passed`` (a ``gate_checked``'s number and verdict; a
    ``handoff_attempted``'s acceptance is its ``passed``), ``model`` (a ``model_call``) and ``data``, the line's
    whole data. A file of ``harness traces --format json`` output is read too (its lines name their cycle)."""
    rows = []
    for path in trace_files(paths_or_globs, work_dir):
        for line in read_trace(path, report):
            rows.append(_row(line, line.get("cycle") or cycle_of(path)))
    frame = pd.DataFrame.from_records(rows, columns=LINE_COLUMNS)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True, format="ISO8601")
    for column in ("attempt", "exit_code", "gate"):
        frame[column] = pd.array(frame[column].tolist(), dtype="Int64")
    frame["passed"] = pd.array(frame["passed"].tolist(), dtype="boolean")
    return frame


def _row(line: dict[str, Any], cycle: str) -> dict[str, Any]:
    data, event = line["data"], line["event"]
    passed = data.get("passed") if event == "gate_checked" else data.get("accepted") if event == "handoff_attempted" \
        else None
    return {"ts": line["ts"], "cycle": cycle, "event": event, "nodeid": data.get("nodeid"), "phase": data.get("phase"),
            "attempt": _whole(data.get("attempt")),
            "exit_code": _whole(data.get("exit_code")) if event == "execution_complete" else None,
            "status": data.get("status") if event == "execution_complete" else None,
            "gate": _whole(data.get("gate_id")) if event == "gate_checked" else None,
            "passed": passed if isinstance(passed, bool) else None,
            "model": data.get("model") if event == "model_call" else None, "data": data}


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def executions_frame(traces: pd.DataFrame) -> pd.DataFrame:
    """One row per execution (each ``execution_complete``), with its gates and its model calls.

    ``gate_0`` .. ``gate_4`` are the verdicts of the gates checked (the last check of each, as the execution result
    keeps them; NA where a gate was not checked), ``gates`` the gates' whole data (number -> ``checks_performed``,
    ``failures``, ...), ``score``, ``confidence``, ``goal_statement`` and ``evidence`` the execution's assessment
    hooks; ``model_calls``, the tokens and ``cost_usd`` (NA when a model had no price) sum the model calls made
    for the item since its previous execution ended."""
    rows: list[dict[str, Any]] = []
    gates: dict[tuple[str, str, str | None], dict[int, dict[str, Any]]] = {}
    calls: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cycle, event, nodeid, ts, data in zip(traces["cycle"], traces["event"], traces["nodeid"], traces["ts"],
                                              traces["data"], strict=True):
        if event == "gate_checked":
            gates.setdefault((cycle, nodeid, data.get("phase")), {})[data.get("gate_id")] = data
        elif event == "model_call" and nodeid:
            calls.setdefault((cycle, nodeid), []).append(data)
        elif event == "execution_complete":
            checked = gates.pop((cycle, nodeid, data.get("phase")), {})
            rows.append(_execution(cycle, nodeid, ts, data, checked, calls.pop((cycle, nodeid), [])))
    frame = pd.DataFrame.from_records(rows, columns=EXECUTION_COLUMNS)
    for column in ("exit_code", "attempts", "model_calls", "input_tokens", "output_tokens"):
        frame[column] = pd.array(frame[column].tolist(), dtype="Int64")
    for column in (f"gate_{n}" for n in GATES):
        frame[column] = pd.array(frame[column].tolist(), dtype="boolean")
    for column in ("score", "confidence", "cost_usd", "duration_ms"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame


def _execution(cycle: str, nodeid: str, completed: Any, data: dict[str, Any], checked: dict[int, dict[str, Any]],
               calls: list[dict[str, Any]]) -> dict[str, Any]:
    assessment = data.get("assessment") or {}
    verdicts = {g.get("gate"): g.get("passed") for g in data.get("gates") or []}  # as the execution result keeps them
    verdicts.update({n: g.get("passed") for n, g in checked.items() if n not in verdicts})
    costs = [c.get("cost_usd") for c in calls]
    return {
        "execution_id": data.get("execution_id"), "cycle": cycle, "nodeid": nodeid, "phase": data.get("phase"),
        "skill_id": data.get("skill_id"), "status": data.get("status"), "exit_code": _whole(data.get("exit_code")),
        "triage": data.get("triage"), "started_at": pd.to_datetime(data.get("started_at"), utc=True, errors="coerce"),
        "completed_at": completed, "duration_ms": data.get("duration_ms"), "attempts": _whole(data.get("attempts")),
        "score": assessment.get("score"), "confidence": assessment.get("confidence"),
        "goal_statement": assessment.get("goal_statement"), "evidence": assessment.get("evidence") or [],
        "human_review_requested": assessment.get("human_review_requested"),
        **{f"gate_{n}": verdicts.get(n) for n in GATES},
        "gates": {n: g for n, g in sorted(checked.items(), key=lambda item: str(item[0]))},
        "errors": data.get("errors") or [], "warnings": data.get("warnings") or [],
        "model_calls": len(calls),
        "input_tokens": sum(int((c.get("tokens") or {}).get("input_tokens") or 0) for c in calls),
        "output_tokens": sum(int((c.get("tokens") or {}).get("output_tokens") or 0) for c in calls),
        "cost_usd": None if any(c is None for c in costs) else float(sum(costs)),
    }
