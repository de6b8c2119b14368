"""Tournament candidates on Dask distributed workers (``harness improve --scheduler``): the same decisions as the
thread pool, one benchmark at a time per worker, the round's reference runs on one worker, the errors in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.apps.tournament.cli import scheduler_address
from harness.apps.tournament.cluster import EXTRA, QUIET_HTTP, RESOURCE, ClusterUnavailable
from harness.apps.tournament.loop import INTERRUPT_ENV, ImproveInterrupted, improve
from harness.apps.tournament.testing import (
    SYNTH_CHECK,
    change_diff,
    commit_all,
    diff_idea,
    git,
    goal_repo,
    load,
    synth_records,
    synth_goal_md,
    value_idea,
)

HAS_DASK = importlib.util.find_spec("distributed") is not None
needs_dask = pytest.mark.skipif(not HAS_DASK, reason=f"distributed is not installed ({EXTRA}, or the [test] extra)")

def spans(root: Path, n: int) -> list[dict[str, Any]]:
    path = root / "WORK" / "improve" / "synth" / "logs" / f"round_{n}" / "placement.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_one_at_a_time(found: list[dict[str, Any]], what: str) -> None:
    """No two spans of ``what`` overlap on one worker."""
    by_worker: dict[str, list[tuple[float, float, str]]] = {}
    for span in found:
        if span["what"] == what:
            by_worker.setdefault(span["worker"], []).append((span["started"], span["ended"], span["task"]))
    for worker, times in by_worker.items():
        times.sort()
        for (_, end, task), (start, _, later) in zip(times, times[1:]):
            assert end <= start, f"{worker} ran {task} and {later} at once ({what})"


def ideas(root: Path) -> dict[str, str]:
    """Iteration 1: a gain, a regression, a run that fails, a change to a sealed file; iteration 2: no change."""
    sealed = change_diff(root, {"goals/synth/check.py": SYNTH_CHECK.format(noise=0.0) + "score = 1e9\n"})
    return {
        "a_big.md": value_idea("Big", "optimization", 10.0, 20.0),
        "b_down.md": value_idea("Down", "data", 10.0, 5.0),
        "c_broken.md": value_idea("Broken", "architecture", 10.0, 0.0, body="VALUE = undefined_name"),
        "d_sealed.md": diff_idea("Sealed", "testing", "Editing the check should raise the value because it scores.",
                                 sealed),
        "e_same.md": value_idea("Same", "documentation", 20.0, 20.0, body="VALUE = 20.0  # the same",
                                hypothesis="A comment beside the value should leave the score where it is."),
    }


def tournament(root: Path, scheduler: str | None, iterations: int = 2, **synth: Any) -> tuple[list[str], float]:
    root.mkdir(parents=True)
    goal = goal_repo(root, ideas={}, goal_md=synth_goal_md(executors=4, **synth))
    for name, text in ideas(root).items():
        (goal / "ideas" / name).write_text(text)
    commit_all(root, "ideas")
    started = time.perf_counter()
    summary = improve(goal, iterations, echo=lambda line: None, plots=False, scheduler=scheduler)
    return summary.statuses, time.perf_counter() - started


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A running cluster of our own, reached by its tcp:// address: two workers of three threads each, so that the
    benchmark resource, not the thread count, is what keeps them to one candidate at a time. Its benchmarks sleep
    0.2 s, long enough for two at once on a worker to show."""
    if not HAS_DASK:
        pytest.skip(f"distributed is not installed ({EXTRA}, or the [test] extra)")
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=3, processes=True, resources={RESOURCE: 1},
                      dashboard_address=None, scheduler_kwargs=QUIET_HTTP, env={"SYNTH_BENCH_SLEEP": "0.2"}) as cluster:
        yield cluster.scheduler_address


# ---------------------------------------------------------------------------------------------- decisions


@needs_dask
def test_a_local_cluster_makes_the_thread_pools_decisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pooled, pool_s = tournament(tmp_path / "pool", None)
    spread, cluster_s = tournament(tmp_path / "cluster", "local:2")
    assert pooled == spread == ["merged", "no_improvement"]
    # every record the same, down to the scores, samples and reasons (times and commit hashes aside)
    assert synth_records(tmp_path / "pool") == synth_records(tmp_path / "cluster")
    report = load(tmp_path / "cluster" / "WORK/improve/synth/merge_reports/iteration_1.json")
    assert report["winner"]["plan_id"] == "round_1_user_a_big"
    results = {p.stem: load(p) for p in (tmp_path / "cluster" / "WORK/improve/synth/results/round_1").glob("*.json")}
    assert {eid: (r["status"], (r["failure_analysis"] or {}).get("category")) for eid, r in results.items()} == {
        "executor_1": ("success", None), "executor_2": ("regression", "regression"),
        "executor_3": ("error", "logic_error"), "executor_4": ("error", "sealed_file_violation")}
    # the candidates' branches came back from the workers: the winner merged, the losers archived
    for root in (tmp_path / "pool", tmp_path / "cluster"):
        assert git(root, "branch", "--format=%(refname:short)").splitlines() == [
            "archive/round_1_executor_2", "archive/round_1_executor_3", "archive/round_1_executor_4",
            "archive/round_2_executor_1", "main"]
        assert git(root, "log", "--merges", "--format=%s").splitlines() == [
            "harness: merge experiment/round_1_executor_1 (round_1_user_a_big)"]
        assert git(root, "status", "--porcelain") == ""
    assert load(tmp_path / "cluster" / "WORK/improve/synth/baseline.json")["score"] == 20.0
    # the round's noise runs, the winner's confirmation and the runs after the merge: on one worker
    placed = spans(tmp_path / "cluster", 1)
    reference = {s["worker"] for s in placed if s["task"] in ("baseline", "confirm", "post_merge")}
    assert len(reference) == 1, placed
    assert_one_at_a_time(placed, "task")
    assert_one_at_a_time(placed, "benchmark")
    with capsys.disabled():
        print(f"\n  wall time, 2 iterations of 5 candidates: thread pool {pool_s:.1f} s, local:2 {cluster_s:.1f} s "
              "(the cluster's start included)")


# ---------------------------------------------------------------------------------------------- one at a time


@needs_dask
def test_a_worker_runs_one_benchmark_at_a_time_however_many_threads_it_has(tmp_path: Path, scheduler: str) -> None:
    statuses, _ = tournament(tmp_path / "r", scheduler, iterations=1)
    assert statuses == ["merged"]
    placed = spans(tmp_path / "r", 1)
    tasks = [s for s in placed if s["what"] == "task"]
    assert sorted(s["task"] for s in tasks) == ["baseline", "confirm", "executor_1", "executor_2", "executor_3",
                                                "executor_4", "post_merge"]
    assert len({s["worker"] for s in tasks}) == 2, tasks  # both workers took candidates
    assert_one_at_a_time(placed, "task")
    assert_one_at_a_time(placed, "benchmark")


@needs_dask
def test_a_run_stopped_on_the_cluster_resumes_with_the_records_of_the_thread_pool(
        tmp_path: Path, scheduler: str, monkeypatch: pytest.MonkeyPatch) -> None:
    straight, _ = tournament(tmp_path / "pool", None, iterations=1)
    monkeypatch.setenv(INTERRUPT_ENV, "2")  # the resume tests' kill, after executor_2's result is written
    with pytest.raises(ImproveInterrupted):
        tournament(tmp_path / "cluster", scheduler, iterations=1)
    assert git(tmp_path / "cluster", "worktree", "list").count("\n") == 0  # the checkout alone
    monkeypatch.delenv(INTERRUPT_ENV)
    lines: list[str] = []
    summary = improve(tmp_path / "cluster" / "goals" / "synth", 1, echo=lines.append, plots=False, scheduler=scheduler)
    assert summary.statuses == straight == ["merged"]
    assert any("executor_2 round_1_user_b_down: finished earlier, kept" in line for line in lines), lines
    pooled, resumed = synth_records(tmp_path / "pool"), synth_records(tmp_path / "cluster")
    for both in (pooled, resumed):
        both.pop("state/iteration_state.json")
    assert pooled == resumed


@needs_dask
def test_held_back_inputs_reach_the_winners_confirmation_on_its_worker(tmp_path: Path, scheduler: str) -> None:
    """A check that rejects values above the cap in the held-back folder: only the confirmation runs see it, on
    the worker, so the winner tuned past it is not merged (as with the thread pool)."""
    root = tmp_path / "r"
    md = synth_goal_md(executors=1).replace("- timeout: 20\n", "- timeout: 20\n- held_back: held\n")
    goal = goal_repo(root, ideas={"a.md": value_idea("Up", "optimization", 10.0, 20.0)}, goal_md=md)
    capped = SYNTH_CHECK.replace("score = float(", 'held = os.environ.get("HARNESS_HELD_BACK")\n'
                                 'if held and float(found.group(1)) > float(open(held + "/cap.txt").read()):\n'
                                 '    sys.exit("above the held-back cap")\nscore = float(')
    (goal / "check.py").write_text(capped.format(noise=0.0))
    (root / ".gitignore").write_text((root / ".gitignore").read_text() + "held/\n")
    (root / "held").mkdir()
    (root / "held" / "cap.txt").write_text("15\n")
    commit_all(root, "a cap held back")
    lines: list[str] = []
    assert improve(goal, 1, echo=lines.append, plots=False, scheduler=scheduler).statuses == ["no_improvement"], lines
    assert load(root / "WORK/improve/synth/results/round_1/executor_1.json")["status"] == "success"
    report = load(root / "WORK/improve/synth/merge_reports/iteration_1.json")
    assert "above the held-back cap" in report["reason"], report


@needs_dask
def test_a_scheduler_whose_workers_offer_no_benchmark_resource_is_refused(tmp_path: Path) -> None:
    from distributed import LocalCluster

    goal = goal_repo(tmp_path / "r", ideas={"a.md": value_idea("Up", "optimization", 10.0, 20.0)})
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=None, scheduler_kwargs=QUIET_HTTP) as cluster:
        with pytest.raises(ClusterUnavailable) as caught:
            improve(goal, 1, echo=lambda line: None, plots=False, scheduler=cluster.scheduler_address)
    message = str(caught.value)
    assert "offers the `benchmark` resource" in message and "--resources benchmark=1" in message
    assert "\n" not in message


@needs_dask
def test_a_scheduler_that_cannot_be_reached_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.apps.tournament.cluster as cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1)
    goal = goal_repo(tmp_path / "r", ideas={"a.md": value_idea("Up", "optimization", 10.0, 20.0)})
    with pytest.raises(ClusterUnavailable) as caught:
        improve(goal, 1, echo=lambda line: None, plots=False, scheduler="tcp://127.0.0.1:9")
    assert str(caught.value).startswith("cannot reach the Dask scheduler at tcp://127.0.0.1:9: ")
    assert "(fix: start one with `dask scheduler`" in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 69
    assert git(tmp_path / "r", "status", "--porcelain") == ""


def test_a_workers_task_is_plain_data_in_and_out_and_works_in_a_clone_of_its_own(tmp_path: Path) -> None:
    """The worker's side needs no cluster: a task and its answer pickle, and it runs in a clone of the bundle."""
    import pickle

    from harness.apps.tournament.gitops import GitRepo
    from harness.apps.tournament.remote import Job, RunsTask, run_runs

    root = tmp_path / "r"
    goal = goal_repo(root, ideas={})
    repo = GitRepo(root)
    base = repo.head()
    task = RunsTask(Job("goals/synth/goal.md", (goal / "goal.md").read_bytes(), 1), base, (base,), 2, "baseline")
    assert pickle.loads(pickle.dumps(task)) == task
    done = pickle.loads(pickle.dumps(run_runs(task, repo.bundle("HEAD"))))
    assert done.samples is not None and done.samples.scores == [10.0, 10.0]
    assert done.log.count("benchmark of goals/synth") == 2
    assert [span["what"] for span in done.spans] == ["task", "benchmark"]
    assert set(done.digests) == {"goals/synth/bench.py", "goals/synth/check.py", "goals/synth/goal.md"}
    assert git(root, "worktree", "list").count("\n") == 0 and not (root / "WORK").exists()  # nothing here


# ---------------------------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("value", ["local:0", "local:two", "localhost:8786", "tcp://host", "http://host:8786",
                                   "tcp://host:99999", ""])
def test_a_bad_scheduler_value_is_a_usage_error(value: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError) as caught:
        scheduler_address(value)
    assert "(fix: give " in str(caught.value) and "\n" not in str(caught.value)


def test_good_scheduler_values() -> None:
    assert scheduler_address("local:2") == "local:2"
    assert scheduler_address("local:02") == "local:2"
    assert scheduler_address("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert scheduler_address("tls://sched.example.org:8786") == "tls://sched.example.org:8786"
    assert scheduler_address("tcp://[::1]:8786") == "tcp://[::1]:8786"


def test_the_command_says_a_bad_scheduler_in_one_usage_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.apps.cli", "improve", "goals/x", "--scheduler", "nowhere"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: harness improve ") and "--scheduler ADDRESS" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "harness improve: error: argument --scheduler: 'nowhere' is not a Dask scheduler (fix: give tcp://HOST:PORT "
        "of a running scheduler, or local:N for N worker processes on this machine)")


def test_without_distributed_scheduler_is_one_line_saying_how_to_install_it(tmp_path: Path) -> None:
    hide = ("import sys; sys.modules['distributed'] = None; from harness.apps.cli import main; "
            "sys.exit(main(['improve', 'goals/x', '--scheduler', 'local:2']))")
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run([sys.executable, "-c", hide], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 69, proc.stderr
    assert proc.stderr == ("harness: --scheduler needs Dask distributed, which is not installed (fix: pip install "
                           "'pytest-rubric[distributed]')\n")
