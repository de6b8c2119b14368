"""Execution traces after the fact: ``harness traces`` (:mod:`harness.apps.traces.cli`) and the pandas loaders.

The north star of the assessment document, runnable::

    from harness.apps.traces import load_execution_traces, load_executions

    lines = load_execution_traces("2026-01-*.jsonl")   # one row per trace line
    for run in load_executions("2026-01-*.jsonl").itertuples():
        score = assess(selection=run.gate_0, precondition=run.gate_1, execution=run.gate_2, output=run.gate_3,
                       goal=judge(run.goal_statement, run.evidence))

pandas is imported when a loader is first called, not by the ``harness`` command.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["load_execution_traces", "load_executions"]

PathsOrGlobs = str | Path | Iterable[str | Path] | None


def load_execution_traces(paths_or_globs: PathsOrGlobs = None, work_dir: Path | str | None = None) -> pd.DataFrame:
    """Every line of the execution traces named, as a pandas DataFrame: one row per line, in the order written.

    ``paths_or_globs``: a trace file, a glob such as ``"2026-01-*.jsonl"``, or a list of them; None for every trace.
    Relative ones are looked for in ``work_dir/traces`` when ``work_dir`` is given; else in the current folder,
    then in the nearest ``WORK/traces`` (as ``harness traces`` finds it). Files written by
    ``harness traces --format json`` are read too.

    Columns: ``ts`` (UTC timestamps), ``cycle``, ``event``, ``nodeid``, ``phase``, ``attempt``, ``exit_code`` and
    ``status`` (of an ``execution_complete``), ``gate`` and ``passed`` (of a ``gate_checked``; ``passed`` is also a
    handoff's acceptance), ``model`` (of a ``model_call``) and ``data`` (the line's whole data, a dict). Lines that
    are not trace lines are skipped; a last line still being written is left out.
    """
    from harness.apps.traces.frames import traces_frame

    return traces_frame(paths_or_globs, Path(work_dir) if work_dir is not None else None)


def load_executions(paths_or_globs: PathsOrGlobs | pd.DataFrame = None,
                    work_dir: Path | str | None = None) -> pd.DataFrame:
    """One row per execution (item, or construct phase) in the traces named, with its gates: what a score computed
    after the fact needs.

    Takes what :func:`load_execution_traces` takes, or its frame. Columns: ``execution_id``, ``cycle``, ``nodeid``,
    ``phase``, ``skill_id``, ``status``, ``exit_code``, ``triage``, ``started_at``, ``completed_at``,
    ``duration_ms``, ``attempts``; the assessment hooks ``score`` (the rubric's), ``confidence``,
    ``goal_statement``, ``evidence``, ``human_review_requested``; ``gate_0`` .. ``gate_4`` (each gate's verdict, NA
    where it was not checked) and ``gates`` (number -> the gate's checks and failures); ``errors``, ``warnings``;
    ``model_calls``, ``input_tokens``, ``output_tokens`` and ``cost_usd`` (NA when a model had no price) of the
    item's model calls.
    """
    import pandas as pd

    from harness.apps.traces.frames import executions_frame, traces_frame

    frame = paths_or_globs if isinstance(paths_or_globs, pd.DataFrame) else traces_frame(
        paths_or_globs, Path(work_dir) if work_dir is not None else None)
    return executions_frame(frame)
