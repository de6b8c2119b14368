"""`harness improve --iterations N` killed (SIGKILL) in iteration k and run again finishes the N asked for,
with the records an uninterrupted run of N iterations writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_tournament_runs import branches, validate_all_records, worktrees

from harness.apps.tournament.loop import INTERRUPT_ENV, ImproveInterrupted, improve
from harness.apps.tournament.testing import git, goal_repo, load, synth_goal_md, synth_records, value_idea

# One idea per iteration (one executor), each raising the value the one before it merged: three merges.
CHAIN = {
    "a_first.md": value_idea("First", "optimization", 10.0, 20.0),
    "b_second.md": value_idea("Second", "data", 20.0, 30.0),
    "c_third.md": value_idea("Third", "architecture", 30.0, 40.0),
}
GOAL_MD = synth_goal_md(executors=1)
COMMAND = [sys.executable, "-m", "harness.apps.cli", "improve", "goals/synth", "--iterations", "3", "--no-plots"]


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", INTERRUPT_ENV)}
    return {**base, **extra}


def straight_run(root: Path) -> None:
    goal_repo(root, ideas=CHAIN, goal_md=GOAL_MD)
    summary = improve(root / "goals" / "synth", 3, echo=lambda line: None, plots=False)
    assert summary.iterations == [1, 2, 3] and summary.statuses == ["merged"] * 3


def history_numbers(root: Path) -> list[int]:
    return sorted(load(p)["iteration"] for p in (root / "WORK/improve/synth/history").glob("iteration_*.json"))


def test_a_run_killed_in_iteration_2_resumes_and_stops_after_the_3_asked(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    straight_run(straight)

    root = tmp_path / "killed"
    goal_repo(root, ideas=CHAIN, goal_md=GOAL_MD)
    proc = subprocess.Popen(COMMAND, cwd=root, env=env(SYNTH_BENCH_SLEEP="0.2"), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    assert proc.stdout is not None
    seen: list[str] = []
    in_two = False
    try:
        for line in proc.stdout:
            seen.append(line)
            in_two = in_two or line.startswith("iteration 2")
            if in_two and "baseline:" in line:
                break  # iteration 2 measured its baseline and starts its executor: kill it there
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert any(s.startswith("iteration 2") for s in seen), "".join(seen)
    state = load(root / "WORK/improve/synth/state/iteration_state.json")
    assert (state["iteration"], state["status"]) == (2, "in_progress")  # killed: nobody wrote "interrupted"
    assert state["run"] == {"first_iteration": 1, "iterations": 3, "finished": False}
    assert history_numbers(root) == [1]

    done = subprocess.run(COMMAND, cwd=root, env=env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming the run that started at iteration 1: iterations 1 to 3" in done.stdout
    assert "iteration 2: resuming at" in done.stdout
    assert "done: 2 iteration(s): 2=merged, 3=merged" in done.stdout
    assert "iteration 4" not in done.stdout

    assert history_numbers(root) == history_numbers(straight) == [1, 2, 3]
    kept = ("state/iteration_state.json",)  # when each run stopped and started differs
    assert synth_records(root, leave_out=kept) == synth_records(straight, leave_out=kept)
    assert sorted(branches(root)) == sorted(branches(straight))
    assert git(root, "log", "--merges", "--format=%s").splitlines() == \
        git(straight, "log", "--merges", "--format=%s").splitlines()
    assert len(worktrees(root)) == 1 and git(root, "status", "--porcelain") == ""
    validate_all_records(root, "synth")
    state = load(root / "WORK/improve/synth/state/iteration_state.json")
    assert (state["iteration"], state["status"], state["run"]["finished"]) == (3, "completed", True)

    # The run is finished: the same command now starts a new run (here: no ideas left, so all_rejected).
    again = subprocess.run(COMMAND[:-3] + ["--iterations", "1", "--no-plots"], cwd=root, env=env(),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming the run" not in again.stdout and "done: 1 iteration(s): 4=" in again.stdout


def test_a_run_interrupted_in_iteration_2_finishes_the_n_asked(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """Ctrl-C in iteration 2 of 3, after its executor ran: the same call again runs iterations 2 and 3 only."""
    from harness.apps.tournament.loop import Tournament

    root = tmp_path / "r"
    goal = goal_repo(root, ideas=CHAIN, goal_md=GOAL_MD)
    real = Tournament._tournament

    def ctrl_c_in_iteration_2(self, n, st, plans):  # noqa: ANN001, ANN202
        if n == 2:
            raise KeyboardInterrupt
        return real(self, n, st, plans)

    monkeypatch.setattr(Tournament, "_tournament", ctrl_c_in_iteration_2)
    with pytest.raises(ImproveInterrupted, match="interrupted during iteration 2"):
        improve(goal, 3, echo=lambda line: None, plots=False)
    monkeypatch.undo()
    assert history_numbers(root) == [1]
    lines: list[str] = []
    summary = improve(goal, 3, echo=lines.append, plots=False)
    assert summary.iterations == [2, 3] and summary.statuses == ["merged", "merged"]
    assert history_numbers(root) == [1, 2, 3]
    assert "resuming the run that started at iteration 1: iterations 1 to 3" in lines
    assert json.loads((root / "WORK/improve/synth/state/iteration_state.json").read_text())["run"]["finished"] is True


def test_a_kill_between_two_iterations_still_ends_after_n(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """Iteration 1 of 3 completed, then the process died before iteration 2 began: the next call runs 2 and 3."""
    from harness.apps.tournament.loop import Tournament

    root = tmp_path / "r"
    goal = goal_repo(root, ideas=CHAIN, goal_md=GOAL_MD)
    real = Tournament._iteration

    def die_before_iteration_2(self, n, state, settings):  # noqa: ANN001, ANN202
        if n == 2:
            raise SystemExit("killed")  # nothing of iteration 2 written, as with a SIGKILL at that point
        return real(self, n, state, settings)

    monkeypatch.setattr(Tournament, "_iteration", die_before_iteration_2)
    with pytest.raises(SystemExit):
        improve(goal, 3, echo=lambda line: None, plots=False)
    monkeypatch.undo()
    state = json.loads((root / "WORK/improve/synth/state/iteration_state.json").read_text())
    assert (state["iteration"], state["status"], state["run"]["finished"]) == (1, "completed", False)
    assert improve(goal, 3, echo=lambda line: None, plots=False).iterations == [2, 3]
    assert history_numbers(root) == [1, 2, 3]
