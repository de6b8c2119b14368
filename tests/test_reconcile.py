"""A killed session's records are made whole by the next one: `running` rows become `interrupted`, run-log.json
agrees with the database again, and a session that is still alive (or an xdist worker of it) is left alone."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Project
from harness.base.models import RunRecord
from harness.records import RECONCILED_MARK, RECONCILIATION_FILE, AttemptDetails, RecordStore

CASES = """\
agent: writer
cases:
  - id: a-passes
    inputs: {text: "hello there"}
  - id: b-hangs
    inputs: {text: "goodbye friend"}
"""

# A reviser that signals it has started, then hangs: the session is killed while attempt 2 of b-hangs runs.
HANGING = '''\
import pathlib
import time


def revise(request):
    pathlib.Path("reviser-started").write_text(request["case"])
    time.sleep(120)
'''

# Kills its own process (SIGKILL) right after the second attempt's row is committed, before the run-log append.
KILL_BEFORE_APPEND = '''\
import os
import signal

from harness import records

_append = records.RecordStore.append_run_log
_calls = []


def _append_or_die(self, path, record):
    _calls.append(record.attempt)
    if len(_calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return _append(self, path, record)


records.RecordStore.append_run_log = _append_or_die
'''


def agree(project: Project, cycle: str) -> list[dict]:
    """The cycle's rows and its run-log.json hold the same records; returns the rows (in id order).

    The log is in the order attempts finished (concurrent cases finish out of start order), so the two are
    compared record by record, each attempt's file naming it."""
    rows = [r for r in project.runs() if r["cycle_id"] == cycle]
    log = project.run_log(cycle)
    assert len(log) == len(rows)
    by_path = {e["artifact_path"]: e for e in log}
    assert len(by_path) == len(log)
    for row in rows:
        entry = by_path[row["artifact_path"]]
        assert set(entry) == set(RunRecord.model_fields)
        for name in ("cycle_id", "agent_name", "attempt", "status", "overall_score", "artifact_path", "created_at",
                     "feedback", "duration_ms", "rubric_version"):
            assert row[name] == entry[name], (name, row, entry)
        assert json.loads(row["dimension_scores"]) == entry["dimension_scores"]
        assert json.loads(row["suggested_fixes"]) == entry["suggested_fixes"]
    return rows


def start_session(project: Project, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites/", *args],
                            cwd=project.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    wait_until(path.exists, proc, f"{path.name} never appeared", timeout)


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen, never: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the session ended first (exit status {proc.returncode})"
        assert time.monotonic() < deadline, never
        time.sleep(0.05)


def only_b_hangs_runs(project: Project) -> bool:
    """Every attempt but b-hangs's second is finished and in run-log.json: under load, xdist's other worker may
    still be writing a-passes's records when b-hangs's reviser starts."""
    try:
        rows = project.runs()
        logged = project.run_log(project.cycles()[0])
    except (sqlite3.Error, ValueError):  # caught mid-write: ask again
        return False
    running = [(r["case_id"], r["attempt"]) for r in rows if r["status"] == "running"]
    return running == [("b-hangs", 2)] and len(logged) == len(rows) - 1


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_kill_9_mid_attempt_then_the_next_session_marks_it_interrupted(project: Project, workers: list[str]) -> None:
    project.standard(CASES)
    project.write("hanging.py", HANGING)
    project.agents('agents:\n  writer:\n    rubric: quality\n    producer: {python: "agentlib:produce"}\n'
                   '    reviser: {python: "hanging:revise"}\n')
    proc = start_session(project, "--harness-concurrency", "1", *workers)
    try:
        wait_for(project.root / "reviser-started", proc)
        wait_until(lambda: only_b_hangs_runs(project), proc, "a-passes's attempt never finished")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole session: controller and xdist workers
        proc.wait(timeout=30)
    (killed,) = project.cycles()
    before = [(r["case_id"], r["attempt"], r["status"]) for r in project.runs()]
    assert ("b-hangs", 2, "running") in before
    assert len(project.run_log(killed)) == len(before) - 1

    project.agents()  # the next session, with a reviser that works
    result = project.run("suites/", *workers, subprocess=bool(workers))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        f"harness: 1 attempt of an interrupted session marked interrupted (cycle {killed})"])

    rows = agree(project, killed)
    hung = [r for r in rows if (r["case_id"], r["attempt"]) == ("b-hangs", 2)]
    assert [(r["status"], r["outcome"], r["exit_code"], r["overall_score"]) for r in hung] == [
        ("escalated", "interrupted", 3, None)]
    assert hung[0]["feedback"].startswith("interrupted: the session ended")
    assert [(r["case_id"], r["attempt"], r["status"]) for r in rows] == [
        (case, attempt, "escalated" if status == "running" else status) for case, attempt, status in before]
    assert not [r for r in project.rows() if r["status"] == "running"]
    assert (project.work / "runs" / killed / RECONCILED_MARK).is_file()
    (later,) = [c for c in project.cycles() if c != killed]
    note = json.loads((project.work / "runs" / later / RECONCILIATION_FILE).read_text())
    assert note["interrupted"] == {killed: 1} and note["restored"] == {}
    agree(project, later)

    # Reconciled once: the session after that has nothing to say about it.
    again = project.run("suites/")
    again.assert_outcomes(passed=2)
    assert "interrupted session" not in again.stdout.str()


def test_kill_9_between_the_commit_and_the_run_log_append_is_restored(project: Project) -> None:
    """40 rows against 39 entries: the row of the attempt being appended was committed, its entry was not."""
    project.standard(CASES)
    project.write("conftest.py", KILL_BEFORE_APPEND)
    result = project.run("suites/", "--harness-concurrency", "1", subprocess=True)
    assert result.ret == -signal.SIGKILL
    (killed,) = project.cycles()
    assert len(project.rows()) == 2 and len(project.run_log(killed)) == 1
    assert [r["status"] for r in project.rows()] == ["passed", "failed"]

    (project.root / "conftest.py").unlink()
    result = project.run("suites/", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        f"harness: 1 finished attempt missing from run-log.json restored from the database (cycle {killed})"])
    rows = agree(project, killed)
    assert [(r["case_id"], r["attempt"], r["status"]) for r in rows] == [("a-passes", 1, "passed"),
                                                                       ("b-hangs", 1, "failed")]


# ---------------------------------------------------------------------------------------------- the store


def start(store: RecordStore, cycle: str, case: str, attempt: int = 1) -> int:
    where = store.location(cycle, "writer", case)
    details = AttemptDetails(nodeid=f"suites/writer.cases.yaml::{case}", case_id=case, rubric_name="quality",
                             threshold=0.8)
    return store.start_attempt(where, attempt, "1.0.0", details)


def finish(store: RecordStore, cycle: str, case: str, run_id: int, attempt: int = 1, *, logged: bool = True) -> None:
    where = store.location(cycle, "writer", case)
    (created_at,) = store.rows("SELECT created_at FROM agent_runs WHERE id = ?", (run_id,))[0].values()
    record = RunRecord(cycle_id=cycle, agent_name="writer", attempt=attempt, status="passed", overall_score=0.9,
                       dimension_scores={"greeting": 1.0}, feedback="fine", suggested_fixes=[],
                       artifact_path=store.display_path(where.attempt_artifact(attempt)), created_at=created_at,
                       duration_ms=5, rubric_version="1.0.0")
    details = AttemptDetails(nodeid=f"suites/writer.cases.yaml::{case}", case_id=case, rubric_name="quality",
                             threshold=0.8, outcome="passed")
    if not logged:  # a kill between the commit and the append
        store.append_run_log = lambda path, record: None  # type: ignore[method-assign]
    store.finish_attempt(run_id, record, details, store.run_log_path(cycle))
    if not logged:
        del store.append_run_log


def outcomes(store: RecordStore) -> list[tuple[str, int, str, str]]:
    return [(r["case_id"], r["attempt"], r["status"], r["outcome"]) for r in store.rows(
        "SELECT r.*, d.case_id, d.outcome FROM agent_runs r JOIN attempt_details d ON d.run_id = r.id ORDER BY r.id")]


def test_a_session_that_is_still_running_is_left_alone(tmp_path: Path) -> None:
    first = RecordStore(tmp_path / "WORK")
    cycle = first.allocate_cycle()
    finish(first, cycle, "done", start(first, cycle, "done"), logged=False)
    start(first, cycle, "busy")

    other = RecordStore(tmp_path / "WORK")  # another session, at the same time: it holds no lock on `cycle`
    later = other.allocate_cycle()
    assert later != cycle and not other.reconciliation
    assert outcomes(other) == [("done", 1, "passed", "passed"), ("busy", 1, "running", "running")]
    assert not (tmp_path / "WORK" / "runs" / cycle / RECONCILED_MARK).exists()

    first.close()  # the first session is gone: the next one finishes its records
    third = RecordStore(tmp_path / "WORK")
    third.allocate_cycle()
    assert third.reconciliation.interrupted == {cycle: 1} and third.reconciliation.restored == {cycle: 1}
    assert outcomes(third) == [("done", 1, "passed", "passed"), ("busy", 1, "escalated", "interrupted")]
    log = third.read_run_log(cycle)
    assert [(e.artifact_path.split("/")[-2], e.status) for e in log] == [("done", "passed"), ("busy", "escalated")]
    rows = third.rows("SELECT * FROM agent_runs WHERE cycle_id = ? ORDER BY id", (cycle,))
    assert [r["created_at"] for r in rows] == [e.created_at for e in log]
    for store in (other, third):
        store.close()


def test_an_xdist_worker_of_the_same_session_reconciles_nothing(tmp_path: Path) -> None:
    worker_1 = RecordStore(tmp_path / "WORK")
    cycle = worker_1.allocate_cycle(session_token="session-1")
    start(worker_1, cycle, "busy")

    worker_2 = RecordStore(tmp_path / "WORK")
    assert worker_2.allocate_cycle(session_token="session-1") == cycle
    assert not worker_2.reconciliation
    worker_1.close()  # one worker finished; the other still holds the cycle
    third = RecordStore(tmp_path / "WORK")
    third.allocate_cycle(session_token="session-2")
    assert not third.reconciliation and outcomes(third) == [("busy", 1, "running", "running")]
    for store in (worker_2, third):
        store.close()


def test_a_work_folder_from_before_the_interrupted_outcome_is_upgraded(tmp_path: Path) -> None:
    """attempt_details' CHECK once lacked 'interrupted': its rows are kept and the new outcome fits."""
    work = tmp_path / "WORK"
    (work / "runs" / "2026-01-30-001").mkdir(parents=True)
    conn = sqlite3.connect(work / "harness.db")
    from harness.records import AGENT_RUNS_SCHEMA, ATTEMPT_DETAILS_SCHEMA

    old = ATTEMPT_DETAILS_SCHEMA.replace(", 'interrupted'", "")
    old = old[:old.index("  cached_answers")].rstrip().rstrip(",") + "\n);\n" + old[old.index("CREATE INDEX"):]
    conn.executescript(AGENT_RUNS_SCHEMA + old)
    conn.execute("INSERT INTO agent_runs (cycle_id, agent_name, attempt, status, artifact_path, created_at)"
                 " VALUES ('2026-01-30-001', 'writer', 1, 'running', 'WORK/runs/2026-01-30-001/writer/attempt-1.md',"
                 " '2026-01-30T10:00:00Z')")
    conn.execute("INSERT INTO attempt_details (run_id, nodeid, case_id, rubric_name, outcome, threshold)"
                 " VALUES (1, 'suites/writer.cases.yaml::greet', 'greet', 'quality', 'running', 0.8)")
    conn.commit()
    conn.close()

    store = RecordStore(work)
    store.allocate_cycle()
    assert outcomes(store) == [("greet", 1, "escalated", "interrupted")]
    (sql,) = store.rows("SELECT sql FROM sqlite_master WHERE name = 'attempt_details'")[0].values()
    assert "'interrupted'" in sql
    assert [e.created_at for e in store.read_run_log("2026-01-30-001")] == ["2026-01-30T10:00:00Z"]
    store.close()


def test_a_malformed_run_log_of_a_dead_cycle_is_reported_and_never_overwritten(tmp_path: Path) -> None:
    first = RecordStore(tmp_path / "WORK")
    cycle = first.allocate_cycle()
    finish(first, cycle, "done", start(first, cycle, "done"))
    start(first, cycle, "busy")
    first.close()
    log = first.run_log_path(cycle)
    log.write_text("[\n{not json\n")

    second = RecordStore(tmp_path / "WORK")
    second.allocate_cycle()
    assert second.reconciliation.interrupted == {cycle: 1}
    assert "malformed JSON" in second.reconciliation.summary()
    assert log.read_text() == "[\n{not json\n"
    second.close()
